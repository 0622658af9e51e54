"""The labelling store: a real SQLite file, append-only, durable, ours or refused."""
import gc
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from skdbal.labelling import LabelStore, StoreError
from skdbal.labelling import store as store_module
from skdbal.labelling.store import APPLICATION_ID


@pytest.fixture
def store(tmp_path):
    s = LabelStore(tmp_path / "project.db")
    s.add_items([f"img{i}.png" for i in range(10)])
    yield s
    s.close()


def test_events_survive_a_reopen_and_the_latest_label_counts(tmp_path):
    path = tmp_path / "p.db"
    s = LabelStore(path)
    s.set_config({"classes": ["cat", "dog"], "batch_size": 4})
    s.add_items(["a", "b", "c"])
    s.add_event(0, "label", "cat", annotator="ann", time=1.0)
    s.add_event(1, "label", "dog", annotator="ann", time=2.0)
    s.add_event(0, "label", "dog", annotator="bob", time=3.0)
    s.add_event(2, "skip", annotator="ann", time=4.0)
    s.close()
    s = LabelStore(path)
    assert s.config() == {"classes": ["cat", "dog"], "batch_size": 4}
    assert {i: (r["label"], r["annotator"], r["time"]) for i, r in s.current_labels().items()} == \
        {0: ("dog", "bob", 3.0), 1: ("dog", "ann", 2.0)}
    assert s.skipped() == [2]
    assert [e["kind"] for e in s.events()] == ["label", "label", "label", "skip"]   # nothing is overwritten
    assert s.add_items(["a", "b", "c"]) == [0, 1, 2]                               # a restart: a no-op
    with pytest.raises(StoreError, match="another pool"):
        s.add_items(["a", "b", "x"])
    with pytest.raises(StoreError, match=r"another configuration \(fields \['batch_size'\]"):
        s.set_config({"classes": ["cat", "dog"], "batch_size": 8})
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    s.close()


def test_undo_walks_back_through_the_labels(store):
    store.add_event(3, "label", "cat", annotator="ann")
    store.add_event(3, "label", "dog", annotator="bob")
    store.add_event(3, "undo", annotator="bob")
    assert store.current_labels()[3]["label"] == "cat"
    store.add_event(3, "undo", annotator="ann")
    assert 3 not in store.current_labels()
    with pytest.raises(ValueError, match="item 3 has no label to undo"):
        store.add_event(3, "undo")


def test_current_labels_up_to_an_event_is_what_a_model_version_saw(store):
    e1 = store.add_event(1, "label", "cat")
    store.add_event(2, "label", "dog")
    store.add_event(1, "label", "dog")
    store.add_model(0, last_event=e1, n_labels=1, metrics={"accuracy": 0.5})
    seen = store.models()[0]
    assert {i: r["label"] for i, r in store.current_labels(upto=seen["last_event"]).items()} == {1: "cat"}
    assert seen["metrics"] == {"accuracy": 0.5} and seen["n_labels"] == 1


def test_a_replayed_submission_is_idempotent_and_a_reused_id_refused(store):
    a = store.add_event(4, "label", "cat", annotator="ann", request_id="r1")
    assert store.add_event(4, "label", "cat", annotator="ann", request_id="r1") == a
    with pytest.raises(ValueError, match="already used for another submission"):
        store.add_event(4, "label", "dog", annotator="ann", request_id="r1")
    assert len(store.events()) == 1 and store.current_labels()[4]["label"] == "cat"


@pytest.mark.parametrize("call, error, match", [
    (lambda s: s.add_event(99, "label", "cat"), KeyError, "unknown item 99"),
    (lambda s: s.add_event("../etc/passwd", "label", "cat"), TypeError, "must be an int id"),
    (lambda s: s.add_event(1, "delete"), ValueError, "kind must be"),
    (lambda s: s.add_event(1, "label"), ValueError, "needs a label"),
    (lambda s: s.add_event(1, "skip", "cat"), ValueError, "only a label event"),
])
def test_bad_events_change_nothing(store, call, error, match):
    with pytest.raises(error, match=match):
        call(store)
    assert store.events() == []


@pytest.mark.parametrize("content", [
    b"this is a text file, not a database" * 100,
    b"SQLite format 3\x00" + os.urandom(4080),          # a header, then garbage
])
def test_a_file_that_is_not_a_store_is_refused_and_left_alone(tmp_path, content):
    path = tmp_path / "notes.db"
    path.write_bytes(content)
    with pytest.raises(StoreError, match="left as it is|not a readable"):
        LabelStore(path)
    assert path.read_bytes() == content


def test_another_programs_database_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (x)")
    conn.execute("INSERT INTO t VALUES (1)")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(StoreError, match="not a skdbal labelling store"):
        LabelStore(path)
    assert path.read_bytes() == before


def test_no_item_is_held_by_two_live_leases(store):
    assert store.lease(range(10), "ann", timeout=60, limit=4) == [0, 1, 2, 3]
    assert store.lease(range(10), "bob", timeout=60, limit=4) == [4, 5, 6, 7]
    assert store.lease(range(10), "ann", timeout=60, limit=2) == [0, 1]      # ann renews her own
    assert store.lease([0, 8], "bob", timeout=60, now=time.time() + 61) == [0, 8]   # ann's expired
    store.release(8)
    assert 8 not in store.live_leases()


def test_concurrent_annotators_never_share_an_item(tmp_path):
    path = tmp_path / "c.db"
    LabelStore(path).add_items([str(i) for i in range(200)])
    stores = [LabelStore(path) for _ in range(4)]       # several connections, as several processes would
    granted, errors = {}, []

    def annotator(k):
        try:
            got = stores[k % 4].lease(range(200), f"a{k}", timeout=60, limit=8)
            granted[k] = got
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=annotator, args=(k,)) for k in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors
    items = [i for got in granted.values() for i in got]
    assert len(items) == len(set(items)) == 160


def test_writers_in_threads_share_commits_and_a_refused_write_is_theirs_alone(tmp_path, monkeypatch):
    """Group commit: 16 threads write at once; commits are fewer than writes, every writer gets its own
    event, and a refused write (nothing to undo) raises in its own thread only, committing nothing."""
    store = LabelStore(tmp_path / "g.db")
    store.add_items([str(i) for i in range(40)])
    commits, real = [], store._commit

    def counting(writes):
        commits.append(len(writes))
        time.sleep(0.01)                       # a slow disk: the others queue meanwhile
        real(writes)

    monkeypatch.setattr(store, "_commit", counting)
    results, errors, start = {}, {}, threading.Barrier(16)

    def writer(k):
        start.wait()
        try:
            if k == 7:
                results[k] = store.add_event(39, "undo", annotator="w7")            # item 39 has no label
            else:
                results[k] = store.add_event(k, "label", str(k % 3), annotator=f"w{k}", request_id=f"r{k}")
        except ValueError as exc:
            errors[k] = str(exc)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == {7: "item 39 has no label to undo by 'w7'"}
    assert sum(commits) == 16 and len(commits) < 16               # writes shared transactions
    events = {e["event"]: e for e in store.events()}
    assert len(events) == 15 and sorted(results.values()) == sorted(events)
    assert all(events[results[k]]["item"] == k and events[results[k]]["annotator"] == f"w{k}"
               for k in results)
    assert store.add_event(3, "label", "0", annotator="w3", request_id="r3") == results[3]   # a replay


def test_a_write_whose_committer_died_is_committed_by_its_own_writer(tmp_path, monkeypatch):
    """Two writers queue; the one that takes both dies before committing (its call raises). The other
    must not be acknowledged without its event: it commits its own write."""
    store = LabelStore(tmp_path / "d.db")
    store.add_items(["a", "b"])
    real, calls = store._commit, []

    def dies_once(writes):
        calls.append(len(writes))
        if len(calls) == 1:
            raise RuntimeError("the committing thread died")
        real(writes)

    monkeypatch.setattr(store, "_commit", dies_once)
    results, errors = {}, {}

    def writer(k):
        try:
            results[k] = store.add_event(k, "label", "x", annotator=f"w{k}")
        except RuntimeError as exc:
            errors[k] = exc

    store._commit_lock.acquire()                      # both queue before either commits
    threads = [threading.Thread(target=writer, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    deadline = time.time() + 10
    while len(store._queue) < 2 and time.time() < deadline:
        time.sleep(0.01)
    store._commit_lock.release()
    for t in threads:
        t.join(10)
    assert calls == [2, 1] and len(errors) == 1 and len(results) == 1
    (k, event), = results.items()
    assert [(e["event"], e["item"]) for e in store.events()] == [(event, k)]


def test_a_lease_leaves_out_items_that_changed_since_the_caller_looked(store):
    seen = store.last_event()
    assert seen == 0
    store.add_event(2, "label", "cat", annotator="ann")            # labelled while bob chose items
    assert store.lease([1, 2, 3], "bob", timeout=60, unchanged_since=seen) == [1, 3]
    assert store.last_event() == 1


WRITER = r"""
import importlib.util, os, sys, types
# the store and its lease methods (the standard library only: a fast start), as a package of their own
package = types.ModuleType("labelstore")
package.__path__ = [os.path.dirname(sys.argv[3])]
sys.modules["labelstore"] = package
spec = importlib.util.spec_from_file_location("labelstore.store", sys.argv[3])
module = importlib.util.module_from_spec(spec)
sys.modules["labelstore.store"] = module
spec.loader.exec_module(module)
assert "skdbal" not in sys.modules and "numpy" not in sys.modules
store = module.LabelStore(sys.argv[1])
store.add_items([str(i) for i in range(1000)])
start = int(sys.argv[2])
for n in range(start, start + 100000):
    store.add_event(n % 1000, "label", str(n % 7), annotator="w", request_id=f"r{n}")
    print(n, flush=True)   # acknowledged: add_event has returned
"""


def test_kill_9_loses_no_acknowledged_event(tmp_path):
    """20 trials: a writer killed with SIGKILL at a random moment; every event it acknowledged is in
    the store, exactly once, and the store reopens and takes more."""
    path = tmp_path / "k.db"
    rng = random.Random(0)
    acked, start = [], 0
    for _trial in range(20):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(start), store_module.__file__],
                                stdout=subprocess.PIPE, text=True)
        line = proc.stdout.readline()          # it is writing
        time.sleep(rng.uniform(0.0, 0.15))
        os.kill(proc.pid, signal.SIGKILL)
        out = line + proc.stdout.read()
        proc.wait(timeout=10)
        acked += [int(n) for n in out.split()]
        store = LabelStore(path)
        ids = [e["request_id"] for e in store.events()]
        store.close()
        assert len(ids) == len(set(ids))
        assert {f"r{n}" for n in acked} <= set(ids)
        # the next writer starts after everything written, acknowledged or not
        start = max(int(i[1:]) for i in ids) + 1
    assert len(acked) > 100


def test_a_damaged_store_is_refused_and_left_alone(tmp_path):
    """``PRAGMA quick_check`` must answer "ok": a store whose index page is damaged is refused before any
    write, and its bytes stay as they were (it took new labels before)."""
    path = tmp_path / "s.db"
    store = LabelStore(path)
    store.add_items([f"k{i}" for i in range(200)])
    for item in range(50):
        store.add_event(item, "label", str(item % 3), annotator="ann")
    store.close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'events_item'").fetchone()[0]
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    data = bytearray(path.read_bytes())
    start = (root - 1) * page_size
    assert data[start] in (0x02, 0x0A)               # an index b-tree page
    data[start + 8:start + 10] = (page_size - 2).to_bytes(2, "big")   # its first cell runs off the page's end
    path.write_bytes(bytes(data))
    before = path.read_bytes()
    with pytest.raises(StoreError, match="damaged"):
        LabelStore(path)
    assert path.read_bytes() == before


def test_a_damaged_store_is_refused_in_one_line_with_the_first_problem_and_how_many(tmp_path):
    """Three problems made by hand, in two pages: page 1's header counts 3 free pages (there are none), and
    the first cell of two index pages starts 2 bytes before its page's end. The refusal is one line that
    says 3 problems and the first SQLite finds (the free list, checked first), not SQLite's report."""
    path = tmp_path / "s.db"
    store = LabelStore(path)
    store.add_items([f"k{i}" for i in range(200)])
    for item in range(50):
        store.add_event(item, "label", str(item % 3), annotator="ann")
    store.close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    roots = dict(conn.execute("SELECT name, rootpage FROM sqlite_master WHERE rootpage > 0").fetchall())
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    data = bytearray(path.read_bytes())
    assert data[32:40] == bytes(8)                                    # no free page: the first trunk, the count
    data[36:40] = (3).to_bytes(4, "big")                              # the header says three
    for name in ("events_item", "sqlite_autoindex_items_1"):
        start = (roots[name] - 1) * page_size
        assert data[start] == 0x0A                                    # a leaf page of an index
        data[start + 8:start + 10] = (page_size - 2).to_bytes(2, "big")   # its first cell runs off the page
    path.write_bytes(bytes(data))
    with pytest.raises(StoreError) as refused:
        LabelStore(path)
    message = str(refused.value)
    assert "\n" not in message
    assert message == (f"{path} is damaged (SQLite's quick_check finds 3 problems, the first: Main freelist: size "
                       f"is 0 but should be 3); it was left as it is: restore a copy, or export what it holds with "
                       f"sqlite3's .recover")


# ------------------------------------------------- a refused store is left byte for byte as it was

def _sidecars(path):
    """The ``-wal`` and ``-shm`` files beside ``path`` (none, for a store closed cleanly or never opened)."""
    return sorted(p.name for p in path.parent.iterdir() if p.name in (path.name + "-wal", path.name + "-shm"))


def _session(path, classes=("cat", "dog"), keys=None):
    from sklearn.linear_model import LogisticRegression

    from skdbal import ActiveLearner
    from skdbal.acquisition import max_entropy
    from skdbal.labelling import LabellingSession

    learner = ActiveLearner(LogisticRegression(), max_entropy, random_state=0, seeding="step", verbose=False)
    X = np.arange(24, dtype=float).reshape(12, 2)
    return LabellingSession(learner, X, classes=list(classes), store=path, batch_size=3,
                            keys=keys or [f"k{i}.png" for i in range(12)])


def _closed_store(path, *, version=2):
    """A store of a session with classes cat, dog (and one label), closed and checkpointed; of schema
    ``version`` 1 (without the ``checks`` table, as skdbal wrote it before second looks) or 2 (without the
    queries' ``kind``, before the tail queries) if asked."""
    s = _session(path)
    s.store.add_event(0, "label", "cat", annotator="ann")
    s.store.close()
    conn = sqlite3.connect(path, isolation_level=None)
    if version < 3:        # as skdbal wrote it before the tail queries
        conn.execute("ALTER TABLE queries DROP COLUMN kind")
    if version == 1:
        conn.execute("DROP TABLE checks")
    conn.execute(f"PRAGMA user_version={version}")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    assert _sidecars(path) == []
    return path.read_bytes()


@pytest.mark.parametrize("version", [1, 2, 3])
def test_a_store_of_another_configuration_is_refused_before_any_write(tmp_path, version):
    """A session with other classes is refused, and the store is left byte for byte as it was, with no
    -wal or -shm beside it. Before, a v1 store was migrated (a new table, user_version 2) before the
    configuration was compared, and a v2 store had its change counter bumped (the migration's
    ``PRAGMA user_version`` write, checkpointed into the file)."""
    path = tmp_path / "s.db"
    before = _closed_store(path, version=version)
    with pytest.raises(StoreError, match=r"another configuration \(fields \['classes'\]"):
        _session(path, classes=("cat", "bird"))
    gc.collect()          # a connection the refusal left open is closed (and checkpointed) here
    assert path.read_bytes() == before
    assert _sidecars(path) == []
    with pytest.raises(StoreError, match="another pool"):          # same count, other keys
        _session(path, keys=[f"other{i}.png" for i in range(12)])
    assert path.read_bytes() == before and _sidecars(path) == []
    # the store itself refuses at open, given what to compare
    with pytest.raises(StoreError, match=r"fields \['n_items'\]"):
        LabelStore(path, config={"classes": ["cat", "dog"], "n_items": 13},
                   informative=["batch_size", "retrain_after", "learner", "second_looks", "second_look_budget"])
    assert path.read_bytes() == before and _sidecars(path) == []
    # with its own configuration it opens, is migrated if it must be, and holds its label
    s = _session(path)
    assert s.store.current_labels()[0]["label"] == "cat"
    assert s.store._read("PRAGMA user_version")[0][0] == 3
    assert s.store._read("SELECT COUNT(*) FROM sqlite_master WHERE name='checks'")[0][0] == 1
    assert [r[1] for r in s.store._read("PRAGMA table_info(queries)")][-1] == "kind"
    s.store.close()


def test_an_empty_file_is_refused_and_left_empty(tmp_path):
    """A 0-byte --store file is not a store: refused (it was taken over before), still 0 bytes."""
    path = tmp_path / "empty.db"
    path.write_bytes(b"")
    with pytest.raises(StoreError, match="empty.db is empty: not a skdbal store; remove it to start a new session"):
        LabelStore(path)
    with pytest.raises(StoreError, match="is empty"):
        _session(path)
    assert path.read_bytes() == b"" and _sidecars(path) == []


@pytest.mark.parametrize("journal", ["wal", "delete"])
def test_another_applications_database_is_refused_without_leaving_wal_or_shm(tmp_path, journal):
    """Another application's SQLite file (in WAL mode or not) is refused, its bytes kept, and no -wal or
    -shm file is left beside it (the read-only check left both before, for a file in WAL mode)."""
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA journal_mode={journal}")
    conn.execute("CREATE TABLE t (x)")
    conn.execute("INSERT INTO t VALUES (1)")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    assert _sidecars(path) == []
    with pytest.raises(StoreError, match="not a skdbal labelling store"):
        LabelStore(path)
    assert path.read_bytes() == before and _sidecars(path) == []


def test_a_store_left_by_a_kill_is_read_with_its_wal(tmp_path):
    """A store whose last writes are still in its -wal (a kill -9: no checkpoint) is checked with them:
    its application id is in the -wal only, and it opens with every label."""
    path = tmp_path / "k.db"
    code = ("import os, sys; sys.path.insert(0, sys.argv[2]); from skdbal.labelling import LabelStore; "
            "s = LabelStore(sys.argv[1]); s.add_items(['a', 'b']); s.add_event(1, 'label', 'dog'); "
            "os._exit(0)")                               # no close, no checkpoint
    root = os.path.dirname(os.path.dirname(store_module.__file__))
    subprocess.run([sys.executable, "-c", code, str(path), os.path.dirname(root)], check=True)
    assert os.path.getsize(str(path) + "-wal") > 0
    s = LabelStore(path)
    assert {i: r["label"] for i, r in s.current_labels().items()} == {1: "dog"}
    s.close()
    assert _sidecars(path) == []


# ------------------------------------------------------- a clean stop leaves everything in the .db

def test_a_stopped_session_leaves_every_label_in_the_db_alone(tmp_path):
    """After ``stop()`` (here the context manager's exit) the store is checkpointed and closed: the .db
    alone, copied elsewhere, holds every label (before, it held none: they were in the -wal)."""
    path = tmp_path / "s.db"
    with _session(path) as session:
        for item, label in [(0, "cat"), (1, "dog"), (2, "cat"), (5, "dog")]:
            session.submit(item, label, annotator="ann")
    assert _sidecars(path) == []
    copy = tmp_path / "copy" / "s.db"
    copy.parent.mkdir()
    copy.write_bytes(path.read_bytes())
    s = LabelStore(copy)
    assert {i: r["label"] for i, r in s.current_labels().items()} == {0: "cat", 1: "dog", 2: "cat", 5: "dog"}
    s.close()
    assert session.store.current_labels()[5]["label"] == "dog"    # read after the stop: opened again
    session.store.close()
    assert _sidecars(path) == []


def test_a_withdrawal_keeps_a_second_look_given_meanwhile(tmp_path):
    """A new model re-judges the pending flags and withdraws those it now agrees with; a second look
    committed while it judged is kept ("changed", bob's label), not overwritten as withdrawn (it was)."""
    s = LabelStore(tmp_path / "s.db")
    s.add_items(["a", "b"])
    first = [s.add_event(i, "label", "cat", annotator="alice") for i in (0, 1)]
    s.add_checks([{"event": e, "model_version": 0, "p_given": 0.01, "guess": "dog", "threshold": 0.1,
                   "flagged": False} for e in first])
    s.flag(first, 0.1)
    pending = [c["event"] for c in s.second_looks() if c["outcome"] == "pending"]
    s.add_event(0, "label", "dog", annotator="bob")            # lands while the model judges
    s.withdraw(pending)
    assert [(c["item"], c["outcome"], c["second_label"]) for c in s.second_looks()] == [
        (0, "changed", "dog"), (1, "withdrawn", None)]
    s.close()
