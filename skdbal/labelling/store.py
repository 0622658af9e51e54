"""An append-only store of label events in SQLite (WAL mode).

Tables:

- ``meta``: the configuration of the session (JSON), written once;
- ``items``: the pool's items, an integer id (the position in the pool) and
  a unique key (a file name, a row id);
- ``events``: append-only; ``kind`` is ``"label"``, ``"skip"`` or
  ``"undo"`` (which names the event it undoes); ``request_id`` makes a
  replayed submission idempotent;
- ``leases``: which annotator holds which item, until when;
- ``queries``: each queried batch, with the model version and the scores;
- ``models``: each model version, with the last event it saw and its metrics;
- ``checks``: each label judged by the model of its time (one that had not
  seen it): the model's probability of the label given, its own guess, the
  trust threshold then, and whether the label was flagged for a second look
  (``flagged`` 1), or flagged and then withdrawn by a later model that agreed with it (2).

The file is marked as ours (SQLite's ``application_id``) and versioned
(``user_version``): a file that is not ours, or is corrupt, is refused with
a :class:`StoreError` at open, never overwritten. Every write is one
transaction, committed (``synchronous=FULL``) before the call returns, so a
``kill -9`` at any moment loses nothing that was acknowledged.
"""
from __future__ import annotations

import json
import os
import sqlite3
import threading
import time as _time
from contextlib import contextmanager
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Union

from ._leases import Leases

__all__ = ["LabelStore", "StoreError", "NotYours", "LeaseHeld", "SkipLimit", "APPLICATION_ID", "SCHEMA_VERSION"]

#: SQLite ``application_id`` of a skdbal store ("SKDB").
APPLICATION_ID = 0x534B4442
#: Version of the schema below (``user_version``).
SCHEMA_VERSION = 3

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE items (item INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE);
CREATE TABLE events (
    event INTEGER PRIMARY KEY AUTOINCREMENT,
    item INTEGER NOT NULL REFERENCES items(item),
    kind TEXT NOT NULL CHECK (kind IN ('label', 'skip', 'undo')),
    label TEXT,
    undoes INTEGER REFERENCES events(event),
    annotator TEXT,
    time REAL NOT NULL,
    request_id TEXT UNIQUE
);
CREATE INDEX events_item ON events(item, event);
CREATE TABLE leases (item INTEGER PRIMARY KEY REFERENCES items(item), annotator TEXT, expires REAL NOT NULL);
CREATE TABLE queries (
    query INTEGER PRIMARY KEY AUTOINCREMENT, model_version INTEGER, time REAL NOT NULL, scores TEXT NOT NULL,
    kind TEXT NOT NULL DEFAULT 'batch' CHECK (kind IN ('batch', 'tail'))
);
CREATE TABLE models (
    version INTEGER PRIMARY KEY, time REAL NOT NULL, last_event INTEGER NOT NULL, n_labels INTEGER NOT NULL,
    metrics TEXT NOT NULL
);
CREATE TABLE checks (
    event INTEGER PRIMARY KEY REFERENCES events(event), model_version INTEGER NOT NULL, p_given REAL NOT NULL,
    guess TEXT, threshold REAL NOT NULL, flagged INTEGER NOT NULL
);
"""
#: What a store of an older schema version gains when it is opened: {version: statements}.
_MIGRATIONS = {1: [_SCHEMA[_SCHEMA.index("CREATE TABLE checks"):].strip().rstrip(";")],
               # the tail offered while the model retrains is a query of its own kind
               2: ["ALTER TABLE queries ADD COLUMN kind TEXT NOT NULL DEFAULT 'batch' "
                   "CHECK (kind IN ('batch', 'tail'))"]}


class StoreError(ValueError):
    """A store file that cannot be used: not ours, corrupt, or of another schema version.

    Examples
    --------
    >>> import os, tempfile
    >>> from skdbal.labelling import LabelStore, StoreError
    >>> path = os.path.join(tempfile.mkdtemp(), "notes.db")
    >>> with open(path, "w") as f:
    ...     _ = f.write("my notes, not a database" * 100)
    >>> try:
    ...     LabelStore(path)
    ... except StoreError as exc:
    ...     print("refused")
    refused
    """


class NotYours(ValueError):
    """An undo of an item whose latest label is another annotator's (``add_event(..., exclusive=True)``).

    Examples
    --------
    >>> import os, tempfile
    >>> from skdbal.labelling.store import LabelStore, NotYours
    >>> store = LabelStore(os.path.join(tempfile.mkdtemp(), "s.db"))
    >>> _ = store.add_items(["a"]), store.add_event(0, "label", "cat", annotator="bob")
    >>> try:
    ...     store.add_event(0, "undo", annotator="alice", exclusive=True)
    ... except NotYours as exc:
    ...     print(exc)
    item 0's latest label is bob's: only bob can undo it
    """


class LeaseHeld(ValueError):
    """A label or skip of an item not leased to the annotator: another holds it, or nobody does
    (``add_event(..., exclusive=True)``).

    Examples
    --------
    >>> import os, tempfile
    >>> from skdbal.labelling.store import LabelStore, LeaseHeld
    >>> store = LabelStore(os.path.join(tempfile.mkdtemp(), "s.db"))
    >>> _ = store.add_items(["a"]), store.lease([0], "bob", 600)
    >>> try:
    ...     store.add_event(0, "label", "cat", annotator="alice", exclusive=True)
    ... except LeaseHeld as exc:
    ...     print(exc)
    item 0 is leased to bob: ask for your own items
    """


class SkipLimit(ValueError):
    """A skip past the annotator's share: ``skip_limit`` skips in a row without a label standing between them
    (``add_event(..., exclusive=True, skip_limit=...)``), so that one annotator cannot skip the pool away
    from the others. Only the label of an item the annotator had not labelled before starts a new run: an
    undone label relabelled does not.

    Examples
    --------
    >>> import os, tempfile
    >>> from skdbal.labelling.store import LabelStore, SkipLimit
    >>> store = LabelStore(os.path.join(tempfile.mkdtemp(), "s.db"))
    >>> _ = store.add_items(["a", "b"]), store.lease([0, 1], "bob", 600)
    >>> _ = store.add_event(0, "skip", annotator="bob", exclusive=True, skip_limit=1)
    >>> try:
    ...     store.add_event(1, "skip", annotator="bob", exclusive=True, skip_limit=1)
    ... except SkipLimit as exc:
    ...     print(exc)
    bob skipped 1 item in a row: label one before skipping more
    """


class LabelStore(Leases):
    """A durable, append-only store of label events.

    Parameters
    ----------
    path : str or path-like
        The SQLite file; created (with its schema) if it does not exist.
    config : dict, optional
        The session's configuration, to compare with the one the store
        holds, if any, before anything is written (see :meth:`set_config`).
    informative : iterable of str, default=()
        The fields of ``config`` recorded but not compared.
    keys : iterable of str, optional
        The pool's keys, to compare with those the store holds, if any,
        before anything is written (see :meth:`add_items`).

    Raises
    ------
    StoreError
        If the file exists and is empty, is not a skdbal store, is damaged
        (SQLite's ``quick_check``), has another schema version, or holds
        another ``config`` or other ``keys``. Everything is checked before
        anything is written: the file is left byte for byte as it was, and
        no ``-wal`` or ``-shm`` file is left beside it. A store of an older
        schema version is brought to this one only once it is accepted.

    Examples
    --------
    >>> import tempfile, os
    >>> from skdbal.labelling import LabelStore
    >>> store = LabelStore(os.path.join(tempfile.mkdtemp(), "project.db"))
    >>> store.add_items(["a.png", "b.png", "c.png"])
    [0, 1, 2]
    >>> e = store.add_event(0, "label", "cat", annotator="ann")
    >>> _ = store.add_event(0, "label", "dog", annotator="bob")      # a relabel: the latest counts
    >>> _ = store.add_event(1, "skip", annotator="ann")
    >>> {item: row["label"] for item, row in store.current_labels().items()}
    {0: 'dog'}
    >>> _ = store.add_event(0, "undo", annotator="bob")              # undoes bob's label
    >>> store.current_labels()[0]["label"]
    'cat'
    >>> store.close()
    """

    def __init__(self, path: Union[str, os.PathLike], *, config: Optional[dict] = None,
                 informative: Iterable[str] = (), keys: Optional[Iterable[str]] = None):
        self.path = Path(path)
        self._lock = threading.RLock()
        self._queue: List[_Write] = []          # events waiting for the next group commit
        self._queue_lock = threading.Lock()
        self._commit_lock = threading.Lock()
        self._conn: Optional[sqlite3.Connection] = None
        keys = None if keys is None else [str(k) for k in keys]
        # everything is checked, read-only, before anything is written: a refused file keeps its bytes
        version = _check_ours(self.path, config, set(informative), keys) if self.path.exists() else None
        if version is None:
            _create(self.path)
        conn = self._connection()
        if version is not None and version < SCHEMA_VERSION:
            self._migrate(conn, version)

    def _connection(self) -> sqlite3.Connection:
        """The store's connection, opened (again, after :meth:`close`) if it is not open."""
        with self._lock:
            if self._conn is None:
                self._conn = _connect(self.path)
            return self._conn

    def _migrate(self, conn: sqlite3.Connection, version: int) -> None:
        """Bring a store of an older schema ``version`` to this one, in one transaction."""
        with self._transaction():
            while version < SCHEMA_VERSION:
                for statement in _MIGRATIONS[version]:
                    conn.execute(statement)
                version += 1
            conn.execute(f"PRAGMA user_version={version}")

    # ------------------------------------------------------------ plumbing
    @contextmanager
    def _transaction(self):
        """One write transaction (``BEGIN IMMEDIATE``), committed on success, rolled back on error."""
        with self._lock:
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:  # also when COMMIT itself failed (a full disk)
                    conn.execute("ROLLBACK")
                raise

    def _read(self, sql: str, args: Sequence = ()) -> list:
        with self._lock:
            return self._connection().execute(sql, args).fetchall()

    def close(self) -> None:
        """Checkpoint the write-ahead log into the file and close the connection.

        Everything is committed already; after it, the ``.db`` file alone
        holds the whole store (no ``-wal`` file is left beside it), so that
        it can be copied or backed up on its own. A later call on the store
        opens it again.
        """
        with self._lock:
            if self._conn is None:
                return
            try:
                self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error:  # another connection reads: the last one to close checkpoints
                pass
            finally:
                self._conn.close()
                self._conn = None

    # --------------------------------------------------------------- meta
    def set_config(self, config: dict, *, informative: Iterable[str] = ()) -> None:
        """Record the session's configuration; a store keeps its first one.

        The fields named in ``informative`` (a learner's repr, which holds
        memory addresses; settings that may change between runs) are
        recorded but not compared.

        Raises
        ------
        StoreError
            If the store holds another configuration (a session of another
            project): the fields that differ are named, and nothing is changed.
        """
        text = json.dumps(config, sort_keys=True)
        with self._transaction() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key='config'").fetchone()
            if row is None:
                conn.execute("INSERT INTO meta VALUES ('config', ?)", (text,))
                return
            _compare_config(self.path, json.loads(row[0]), config, set(informative))

    def config(self) -> Optional[dict]:
        """The recorded configuration, or None."""
        rows = self._read("SELECT value FROM meta WHERE key='config'")
        return json.loads(rows[0][0]) if rows else None

    # --------------------------------------------------------------- items
    def add_items(self, keys: Iterable[str]) -> List[int]:
        """Register the pool's items (in order); their ids are their positions.

        Registering the same keys again (a restart) is a no-op; other keys
        than the stored ones are refused with a :class:`StoreError`.
        """
        keys = [str(k) for k in keys]
        with self._transaction() as conn:
            stored = [k for (k,) in conn.execute("SELECT key FROM items ORDER BY item")]
            if stored:
                _compare_keys(self.path, stored, keys)
            else:
                conn.executemany("INSERT INTO items VALUES (?, ?)", enumerate(keys))
        return list(range(len(keys)))

    def n_items(self) -> int:
        return self._read("SELECT COUNT(*) FROM items")[0][0]

    def _check_item(self, conn, item) -> int:
        if isinstance(item, bool) or not isinstance(item, int):
            raise TypeError(f"item must be an int id; got {item!r}")
        if conn.execute("SELECT 1 FROM items WHERE item=?", (item,)).fetchone() is None:
            raise KeyError(f"unknown item {item}")
        return item

    # -------------------------------------------------------------- events
    def add_event(self, item: int, kind: str, label: Optional[str] = None, *, annotator: Optional[str] = None,
                  request_id: Optional[str] = None, time: Optional[float] = None, release: bool = False,
                  exclusive: bool = False, lease_for: Optional[float] = None, renew_for: Optional[float] = None,
                  skip_limit: Optional[int] = None) -> int:
        """Append one event, committed before returning; its id.

        ``kind="label"`` needs a ``label``; ``"skip"`` takes none; ``"undo"``
        undoes ``annotator``'s latest label of the item that is not undone
        (any annotator's if ``annotator`` is None; an error if there is
        none): a person's undo never takes back someone else's label. A
        ``request_id`` seen before returns the earlier event's id
        if the request is the same (a replay), and raises ``ValueError`` if
        it differs. ``release=True`` ends the item's lease in the same
        transaction (one commit, one fsync).

        ``exclusive=True`` (several annotators, each known by a token) also
        refuses, in the same transaction, an undo of an item whose latest
        label is another annotator's (:class:`NotYours`), and a label or skip
        of an item whose last lease is not the annotator's (:class:`LeaseHeld`:
        another holds it or was handed it after them, or nobody was, so that no
        one takes or skips items past their cap); nothing is written then. A
        lease that ran out is still its holder's to answer until someone else
        is handed the item: a label that comes late is kept, never lost. With
        ``skip_limit``, a skip after that many skips in a row by the annotator
        (no label of theirs that stands since, of an item they had not
        labelled before: undoing and relabelling one item starts no new run) is refused too
        (:class:`SkipLimit`). With ``lease_for`` (seconds), an undo leases the
        item back to its annotator in the same transaction, to label again: it
        is theirs, not the next asker's. With ``renew_for`` (seconds), the
        event renews the annotator's leases for that long, in the same
        transaction, those that ran out too while nobody else was handed
        their items: labelling activity keeps one's items (a page idle with
        lapsed items is live again), asking for items does not (:meth:`lease`).

        Writers in several threads share commits: while one transaction is
        being committed, the events that arrive queue, and the next
        transaction commits them all (group commit). Each call still returns
        only once its own event is committed.
        """
        if kind not in ("label", "skip", "undo"):
            raise ValueError(f"kind must be 'label', 'skip' or 'undo'; got {kind!r}")
        if (kind == "label") != (label is not None):
            raise ValueError("a label event needs a label, and only a label event has one")
        write = _Write((item, kind, label, annotator, request_id, _time.time() if time is None else float(time),
                        release, exclusive, lease_for, renew_for, skip_limit))
        with self._queue_lock:
            self._queue.append(write)
        while not write.done:  # group commit: the first writer in commits every write queued so far
            with self._commit_lock:
                if not write.done:
                    with self._queue_lock:
                        writes, self._queue = self._queue, []
                    if writes:
                        self._commit(writes)
                    elif not write.done:  # taken by a writer that died before committing it: ours again
                        with self._queue_lock:
                            self._queue.append(write)
        if write.error is not None:
            raise write.error
        return write.result

    def _commit(self, writes: List["_Write"]) -> None:
        """Append ``writes`` in one transaction (one fsync); a write that is refused (an unknown item,
        nothing to undo, a reused request id) is rolled back alone, and raises in its own caller."""
        outcomes = []
        try:
            with self._transaction() as conn:
                for write in writes:
                    conn.execute("SAVEPOINT one")
                    try:
                        outcomes.append((self._append(conn, *write.args), None))
                    except (ValueError, KeyError, TypeError) as exc:
                        conn.execute("ROLLBACK TO one")
                        outcomes.append((None, exc))
                    conn.execute("RELEASE one")
        except BaseException as exc:  # nothing was committed: every writer hears it
            outcomes = [(None, exc)] * len(writes)
        for write, (result, error) in zip(writes, outcomes):
            write.result, write.error, write.done = result, error, True

    def _append(self, conn, item, kind, label, annotator, request_id, when, release, exclusive, lease_for,
                renew_for, skip_limit) -> int:
        item = self._check_item(conn, item)
        if request_id is not None:
            old = conn.execute("SELECT event, item, kind, label, annotator FROM events WHERE request_id=?",
                               (request_id,)).fetchone()
            if old is not None:
                if tuple(old[1:]) != (item, kind, label, annotator):
                    raise ValueError(f"request {request_id!r} was already used for another submission")
                return old[0]
        if exclusive:
            self._check_exclusive(conn, item, kind, annotator, when, skip_limit)
        undoes = None
        if kind == "undo":
            undoes = self._latest_label_event(conn, item, annotator)
            if undoes is None:
                raise ValueError(f"item {item} has no label to undo" +
                                 ("" if annotator is None else f" by {annotator!r}"))
        cur = conn.execute("INSERT INTO events (item, kind, label, undoes, annotator, time, request_id) "
                           "VALUES (?, ?, ?, ?, ?, ?, ?)", (item, kind, label, undoes, annotator, when, request_id))
        if release:
            conn.execute("DELETE FROM leases WHERE item=?", (item,))
        if kind == "undo" and lease_for is not None:
            conn.execute("INSERT OR REPLACE INTO leases (item, annotator, expires) VALUES (?, ?, ?)",
                         (item, annotator, when + float(lease_for)))
        if renew_for is not None and annotator is not None:   # activity keeps one's leases, lapsed ones too
            conn.execute("UPDATE leases SET expires=MAX(expires, ?) WHERE annotator=?",   # (if nobody else's)
                         (when + float(renew_for), annotator))
        return cur.lastrowid

    def _check_exclusive(self, conn, item, kind, annotator, when, skip_limit=None) -> None:
        """Raise :class:`NotYours`, :class:`LeaseHeld` or :class:`SkipLimit` where ``annotator`` may not write
        this event. The item's lease row names its last holder: a row that ran out stays until the item is
        answered or handed to someone else, so that its holder's late label is kept."""
        if kind == "undo":
            latest = self._latest_label_event(conn, item)
            if latest is not None:
                (author,) = conn.execute("SELECT annotator FROM events WHERE event=?", (latest,)).fetchone()
                if author != annotator:
                    raise NotYours(f"item {item}'s latest label is {author}'s: only {author} can undo it")
            return
        held = conn.execute("SELECT annotator, expires FROM leases WHERE item=?", (item,)).fetchone()
        if held is not None and held[0] != annotator and held[1] > when:
            raise LeaseHeld(f"item {item} is leased to {held[0]}: ask for your own items")
        if held is None or held[0] != annotator:
            raise LeaseHeld(f"item {item} is not leased to {annotator}: ask for items (/api/batch) before "
                            "labelling or skipping them")
        if kind == "skip" and skip_limit is not None:
            # the run starts after the annotator's latest standing label of an item they had not labelled
            # before: undoing and relabelling one item starts no new run
            (run,) = conn.execute(
                "SELECT COUNT(*) FROM events WHERE annotator=? AND kind='skip' AND event > COALESCE((SELECT "
                "MAX(e.event) FROM events e WHERE e.annotator=? AND e.kind='label' AND e.event NOT IN (SELECT "
                "undoes FROM events WHERE undoes IS NOT NULL) AND NOT EXISTS (SELECT 1 FROM events f WHERE "
                "f.item=e.item AND f.annotator=e.annotator AND f.kind='label' AND f.event < e.event)), 0)",
                (annotator, annotator)).fetchone()
            if run >= skip_limit:
                raise SkipLimit(f"{annotator} skipped {run} item{'s' if run != 1 else ''} in a row: label one "
                                "before skipping more")

    @staticmethod
    def _latest_label_event(conn, item, annotator: Optional[str] = None) -> Optional[int]:
        """The item's latest label event that no undo names (``annotator``'s own, if given)."""
        mine = "" if annotator is None else " AND annotator=?"
        row = conn.execute("SELECT event FROM events WHERE item=? AND kind='label'" + mine + " AND event NOT IN "
                           "(SELECT undoes FROM events WHERE undoes IS NOT NULL) ORDER BY event DESC LIMIT 1",
                           (item,) if annotator is None else (item, annotator)).fetchone()
        return None if row is None else row[0]

    def last_event(self) -> int:
        """The id of the latest event (0 if none)."""
        return self._read("SELECT COALESCE(MAX(event), 0) FROM events")[0][0]

    def events(self, after: int = 0) -> List[dict]:
        """Every event after event id ``after``, in order."""
        rows = self._read("SELECT event, item, kind, label, undoes, annotator, time, request_id FROM events "
                          "WHERE event > ? ORDER BY event", (after,))
        keys = ("event", "item", "kind", "label", "undoes", "annotator", "time", "request_id")
        return [dict(zip(keys, r)) for r in rows]

    def current_labels(self, upto: Optional[int] = None) -> Dict[int, dict]:
        """The current label of every labelled item (its latest label event
        that is not undone), as ``{item: {"label", "annotator", "time", "event"}}``,
        considering the events up to id ``upto`` (all by default)."""
        upto = 2**62 if upto is None else int(upto)
        rows = self._read(
            "SELECT e.item, e.label, e.annotator, e.time, e.event FROM events e "
            "WHERE e.kind='label' AND e.event <= ? AND e.event NOT IN "
            "(SELECT undoes FROM events WHERE undoes IS NOT NULL AND event <= ?) "
            "AND e.event = (SELECT MAX(f.event) FROM events f WHERE f.item=e.item AND f.kind='label' "
            "AND f.event <= ? AND f.event NOT IN (SELECT undoes FROM events WHERE undoes IS NOT NULL "
            "AND event <= ?)) ORDER BY e.event", (upto, upto, upto, upto))
        return {item: {"label": label, "annotator": ann, "time": t, "event": ev}
                for item, label, ann, t, ev in rows}

    def skipped(self, labelled: Optional[Iterable[int]] = None) -> List[int]:
        """Items skipped and not labelled since, nor reopened (:meth:`reopen_skips`); ``labelled``, the
        items of :meth:`current_labels` when the caller has them already."""
        labelled = set(self.current_labels() if labelled is None else labelled)
        rows = self._read("SELECT DISTINCT item FROM events WHERE kind='skip' AND event > COALESCE((SELECT "
                          "CAST(value AS INTEGER) FROM meta WHERE key='skips_reopened'), 0) ORDER BY item")
        return [item for (item,) in rows if item not in labelled]

    def reopen_skips(self) -> List[int]:
        """Reopen every skipped item: it is offered again as if never skipped (the skip events stay, for
        the record and the second looks' ``declined_by``). The items reopened.

        Examples
        --------
        >>> import os, tempfile
        >>> from skdbal.labelling import LabelStore
        >>> store = LabelStore(os.path.join(tempfile.mkdtemp(), "s.db"))
        >>> _ = store.add_items(["a", "b", "c"])
        >>> _ = store.add_event(0, "skip"), store.add_event(2, "skip")
        >>> store.skipped(), store.reopen_skips(), store.skipped()
        ([0, 2], [0, 2], [])
        >>> _ = store.add_event(2, "skip")       # skipped again later: skipped again
        >>> store.skipped()
        [2]
        """
        with self._transaction() as conn:
            reopened = self.skipped()
            last = conn.execute("SELECT COALESCE(MAX(event), 0) FROM events").fetchone()[0]
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('skips_reopened', ?)", (str(int(last)),))
        return reopened

    # ------------------------------------------------------ queries, models
    def add_query(self, model_version: Optional[int], scores: Dict[int, float], kind: str = "batch") -> int:
        """Record a queried batch: its items with their scores, best first. ``kind`` is ``"batch"``, or
        ``"tail"`` for the next best items offered while the model retrains (or, before the first model,
        more items of a covering order)."""
        if kind not in ("batch", "tail"):
            raise ValueError(f"a query's kind is 'batch' or 'tail'; got {kind!r}")
        with self._transaction() as conn:
            cur = conn.execute("INSERT INTO queries (model_version, time, scores, kind) VALUES (?, ?, ?, ?)",
                               (model_version, _time.time(), json.dumps([[int(i), float(s)] for i, s in
                                                                         scores.items()]), kind))
            return cur.lastrowid

    def queries(self) -> List[dict]:
        """Every query recorded: ``query``, ``model_version``, ``time``, ``scores`` (``(item, score)``,
        best first) and ``kind`` (``"batch"`` or ``"tail"``)."""
        rows = self._read("SELECT query, model_version, time, scores, kind FROM queries ORDER BY query")
        return [{"query": q, "model_version": v, "time": t, "scores": [tuple(p) for p in json.loads(s)],
                 "kind": k} for q, v, t, s, k in rows]

    def add_model(self, version: int, last_event: int, n_labels: int, metrics: Optional[dict] = None) -> None:
        """Record model ``version``, trained on the labels of the events up to ``last_event``."""
        with self._transaction() as conn:
            conn.execute("INSERT INTO models VALUES (?, ?, ?, ?, ?)",
                         (int(version), _time.time(), int(last_event), int(n_labels), json.dumps(metrics or {})))

    def models(self) -> List[dict]:
        rows = self._read("SELECT version, time, last_event, n_labels, metrics FROM models ORDER BY version")
        return [{"version": v, "time": t, "last_event": e, "n_labels": n, "metrics": json.loads(m)}
                for v, t, e, n, m in rows]


    # -------------------------------------------------------------- checks
    def add_checks(self, checks: Sequence[dict]) -> None:
        """Record the model's judgement of label events (in one transaction);
        an event judged already keeps its first judgement.

        Each check is ``{"event", "model_version", "p_given", "guess",
        "threshold", "flagged"}``.
        """
        with self._transaction() as conn:
            conn.executemany("INSERT OR IGNORE INTO checks VALUES (?, ?, ?, ?, ?, ?)",
                             [(int(c["event"]), int(c["model_version"]), float(c["p_given"]),
                               None if c.get("guess") is None else str(c["guess"]), float(c["threshold"]),
                               int(bool(c["flagged"]))) for c in checks])

    def flag(self, events: Sequence[int], threshold: float) -> None:
        """Flag judged label ``events`` for a second look, under ``threshold``."""
        with self._transaction() as conn:
            conn.executemany("UPDATE checks SET flagged=1, threshold=? WHERE event=?",
                             [(float(threshold), int(e)) for e in events])

    def withdraw(self, events: Sequence[int]) -> None:
        """Withdraw the flags of ``events``: a later model agrees with their labels (``flagged`` is 2). A flag
        whose second look was given meanwhile (a later label of the item by another annotator, committed
        while the model judged) keeps it: checked in the same transaction."""
        with self._transaction() as conn:
            conn.executemany("UPDATE checks SET flagged=2 WHERE event=? AND flagged=1 AND NOT EXISTS "
                             "(SELECT 1 FROM events AS first JOIN events AS later ON later.item=first.item "
                             "WHERE first.event=checks.event AND later.event > first.event AND later.kind='label' "
                             "AND later.annotator IS NOT first.annotator)", [(int(e),) for e in events])

    def checks(self) -> List[dict]:
        """Every judged label event, in event order, with its item, label and annotator; ``withdrawn``
        for a flag that a later model withdrew."""
        rows = self._read("SELECT c.event, e.item, e.label, e.annotator, c.model_version, c.p_given, c.guess, "
                          "c.threshold, c.flagged FROM checks c JOIN events e ON e.event = c.event ORDER BY c.event")
        keys = ("event", "item", "label", "annotator", "model_version", "p_given", "guess", "threshold", "flagged")
        return [dict(zip(keys, r), flagged=bool(r[-1]), withdrawn=r[-1] == 2) for r in rows]

    def second_looks(self) -> List[dict]:
        """What became of each flagged label, in event order.

        A flagged label by annotator A gets its second look from the first
        label of the item by another annotator after it: ``"confirmed"`` if
        it is the same label, ``"changed"`` if not (the later label is then
        the item's label; an undo of that second label reopens the look).
        Until then it is ``"pending"``, unless A undid or relabelled it, or
        a later model agreed with it (``"withdrawn"``). ``declined_by`` lists the
        annotators who skipped it since the flag.
        """
        flagged = [c for c in self.checks() if c["flagged"]]
        if not flagged:
            return []
        items = sorted({c["item"] for c in flagged})
        marks = ",".join("?" * len(items))
        later: Dict[int, list] = {}
        for event, item, kind, label, undoes, annotator in self._read(
                f"SELECT event, item, kind, label, undoes, annotator FROM events WHERE item IN ({marks}) "
                "ORDER BY event", items):
            later.setdefault(item, []).append((event, kind, label, undoes, annotator))
        out = []
        for c in flagged:
            look = dict(c, outcome="pending", second_label=None, second_annotator=None, second_event=None,
                        declined_by=[])
            if c["withdrawn"]:
                out.append(dict(look, outcome="withdrawn"))
                continue
            for event, kind, label, undoes, annotator in later[c["item"]]:
                if event <= c["event"]:
                    continue
                if kind == "skip":
                    if annotator != c["annotator"]:
                        look["declined_by"].append(annotator)
                    continue
                if look["outcome"] != "pending":   # a second look given: only its undo reopens it
                    if kind == "undo" and undoes == look["second_event"]:
                        look.update(outcome="pending", second_label=None, second_annotator=None, second_event=None)
                    continue
                if (kind == "undo" and undoes == c["event"]) or (kind == "label" and annotator == c["annotator"]):
                    look["outcome"] = "withdrawn"
                    break
                if kind == "label":
                    look.update(outcome="confirmed" if label == c["label"] else "changed", second_label=label,
                                second_annotator=annotator, second_event=event)
            out.append(look)
        return out


class _Write:
    """One event waiting in the group commit's queue, and its outcome."""

    __slots__ = ("args", "done", "result", "error")

    def __init__(self, args: tuple):
        self.args, self.done, self.result, self.error = args, False, None, None


def _connect(path: Path) -> sqlite3.Connection:
    """A read-write connection to the store at ``path`` (WAL, ``synchronous=FULL``, foreign keys)."""
    conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=30.0)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA foreign_keys=ON")
    except BaseException:
        conn.close()
        raise
    return conn


def _create(path: Path) -> None:
    """Make a new store at ``path``, whole or not at all: its schema is written in a file beside it,
    closed (checkpointed), and then linked to ``path``, which a store made meanwhile by another
    process keeps (it is then opened, as any existing store). It is readable by its owner only (mode
    600); a store made before keeps its mode."""
    if not path.parent.is_dir():
        raise StoreError(f"cannot make the store {path}: no folder {str(path.parent)!r}")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.new")
    for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
        leftover.unlink(missing_ok=True)
    try:
        try:   # readable by its owner only, as the labels CSV: SQLite gives its -wal and -shm the same mode
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            os.chmod(tmp, 0o600)
            conn = _connect(tmp)
        except (sqlite3.Error, OSError) as exc:    # a folder we may not write in
            raise StoreError(f"cannot make the store {path}: {getattr(exc, 'strerror', None) or exc}") from None
        try:
            conn.execute("BEGIN IMMEDIATE")
            for statement in _SCHEMA.strip().split(";\n"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            conn.execute("COMMIT")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
        try:
            os.link(tmp, path)
        except FileExistsError:
            _check_ours(path)           # made meanwhile: checked as any existing store
        except OSError:                 # a file system without hard links
            if path.exists():
                _check_ours(path)
            else:
                os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _compare_config(path: Path, stored: dict, config: dict, informative: set) -> None:
    """Raise StoreError naming the fields (but the ``informative`` ones) where ``config`` differs from
    the ``stored`` one (compared as JSON, as stored)."""
    given = json.loads(json.dumps(config, sort_keys=True))
    diff = sorted(k for k in set(stored) | set(given) if k not in informative and stored.get(k) != given.get(k))
    if diff:
        raise StoreError(f"{path} holds a session with another configuration (fields {diff} "
                         "differ); open it with its own configuration, or use another store")


def _compare_keys(path: Path, stored: List[str], keys: List[str]) -> None:
    if stored != keys:
        raise StoreError(f"{path} holds another pool ({len(stored)} items, first "
                         f"{stored[:3]}) than the one given ({len(keys)} items, first {keys[:3]})")


def _damage(report: List[str]) -> str:
    r"""SQLite's ``quick_check`` report (its rows, each of one or more lines) in one line: how many
    problems it finds and the first (SQLite stops at 100).

    Examples
    --------
    >>> from skdbal.labelling.store import _damage
    >>> _damage(["*** in database main ***\nMain freelist: size is 0 but should be 3\n"
    ...          "On tree page 9 cell 0: Offset 4094 out of range 3700..4092"])
    "SQLite's quick_check finds 2 problems, the first: Main freelist: size is 0 but should be 3"
    >>> _damage(["*** in database main ***", "Page 5 is never used"])
    "SQLite's quick_check finds 1 problem: Page 5 is never used"
    """
    problems = [line.strip() for row in report for line in str(row).splitlines()
                if line.strip() and not line.startswith("*** in database")]
    if not problems:
        return "SQLite's quick_check does not answer ok"
    if len(problems) == 1:
        return f"SQLite's quick_check finds 1 problem: {problems[0]}"
    many = f"{len(problems)} or more" if len(problems) >= 100 else str(len(problems))
    return f"SQLite's quick_check finds {many} problems, the first: {problems[0]}"


def _check_ours(path: Path, config: Optional[dict] = None, informative: frozenset = frozenset(),
                keys: Optional[List[str]] = None) -> int:
    """The schema version of the skdbal store at ``path``, checked without writing anything: readable,
    ours, of a version we read, whole (``quick_check``), and holding ``config`` (but its
    ``informative`` fields) and the pool ``keys``, if given and recorded. Raise StoreError otherwise.

    Nothing is written and nothing is left beside the file: without a ``-wal`` file, the file is read
    as immutable (SQLite then opens no ``-wal`` or ``-shm``); with one (a store not closed: its last
    writes may be there only; or a session runs on it), read-only, and a ``-shm`` this makes is
    removed after."""
    if path.stat().st_size == 0:
        raise StoreError(f"{path} is empty: not a skdbal store; remove it to start a new session")
    wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
    in_wal = wal.exists()       # also when empty: a connection may be open (no -wal: none is)
    had_shm = shm.exists()
    uri = f"{path.resolve().as_uri()}?{'mode=ro' if in_wal else 'immutable=1'}"
    stored_config = stored_keys = None
    try:
        conn = sqlite3.connect(uri, uri=True)
        try:
            app = conn.execute("PRAGMA application_id").fetchone()[0]
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            checked = [str(r[0]) for r in conn.execute("PRAGMA quick_check").fetchall()]
            if checked == ["ok"] and app == APPLICATION_ID:
                if config is not None:
                    row = conn.execute("SELECT value FROM meta WHERE key='config'").fetchone()
                    stored_config = None if row is None else json.loads(row[0])
                if keys is not None:
                    stored_keys = [k for (k,) in conn.execute("SELECT key FROM items ORDER BY item")]
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path} is not a readable SQLite database ({exc}); it was left as it is") from None
    finally:
        if in_wal and not had_shm:
            shm.unlink(missing_ok=True)
    if checked != ["ok"]:
        raise StoreError(f"{path} is damaged ({_damage(checked)}); it was left as it is: restore a "
                         "copy, or export what it holds with sqlite3's .recover")
    if app != APPLICATION_ID:
        raise StoreError(f"{path} is not a skdbal labelling store (SQLite application_id {app:#x}); "
                         "it was left as it is")
    if not (version == SCHEMA_VERSION or version in _MIGRATIONS):
        raise StoreError(f"{path} is a skdbal store of schema version {version}; this skdbal reads "
                         f"versions {sorted(_MIGRATIONS)} and {SCHEMA_VERSION}")
    if stored_config is not None:
        _compare_config(path, stored_config, config, informative)
    if stored_keys:
        _compare_keys(path, stored_keys, keys)
    return version
