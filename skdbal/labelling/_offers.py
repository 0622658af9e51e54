"""The offer board of a labelling session: what people are offered, leased and shown.

:class:`OfferBoard` holds the queried batch with its scores, the tail (the next best items while the model
retrains, or the items of a covering order while the first model waits for a second class), the leases it
hands out through the store, and the published model's guesses of what it offers. The session owns one;
the store's oracle (:mod:`skdbal.labelling._oracle`) offers each batch on it, people's requests read it.

Private to :mod:`skdbal.labelling`: :class:`~skdbal.labelling.LabellingSession` uses it.
"""
from __future__ import annotations

import threading
import time as _time
from typing import Callable, Dict, List, Optional, Sequence, Union

import numpy as np

from .._validation import read_rows

#: What the session waits for while its first batch holds labels of one class only.
TWO_CLASSES = "labels of at least two classes"

#: Rows of the pool a covering order measures distances over (a seeded sample of a larger pool).
_COVER_ROWS = 10_000


def strategy_name(learner) -> Optional[str]:
    """The learner's query strategy as a name people read beside the score: the key it has in
    :data:`skdbal.acquisition.STRATEGIES` (``"bald"``), else its function's or class's name. A strategy
    that hands off from one strategy to another (:class:`~skdbal.acquisition.ColdStart`) is named by the
    side that picked the last batch (its acquisition's ``info["picked_by"]``): ``"typiclust"`` before the
    hand-off, ``"bald"`` after, whose scores the page shows; ``"cold_start"`` before its first query."""
    from ..acquisition import STRATEGIES, display_name

    strategy = getattr(learner, "query_strategy", None)
    if strategy is None:
        return "bald"   # the learner's default
    last = getattr(learner, "last_acquisition_", None)
    picked_by = (getattr(last, "info", None) or {}).get("picked_by")
    if isinstance(picked_by, str):
        return next((name for name, known in STRATEGIES.items() if display_name(known) == picked_by), picked_by)
    if getattr(strategy, "name", None) == "cold_start":
        return "cold_start"
    for name, known in STRATEGIES.items():
        if strategy is known or type(strategy) is type(known):
            return name
    return getattr(strategy, "__name__", None) or type(strategy).__name__


def _flat(X) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    return X.reshape(len(X), -1)


def _cover_rows(n: int, random_state: int, keep=()) -> np.ndarray:
    """The rows a covering choice measures: all of a pool up to 10,000 rows, else a seeded sample (and
    ``keep``), so that a pool on a cluster is never read whole and gives what the same rows in memory do."""
    if n <= _COVER_ROWS:
        return np.arange(n)
    rng = np.random.RandomState([int(random_state), 41])
    return np.union1d(rng.choice(n, _COVER_ROWS, replace=False), np.asarray(list(keep), dtype=np.intp))


def covering_first_batch(X, n: int, random_state: int) -> np.ndarray:
    """``n`` rows that cover the pool, sorted: the points nearest the centroids of k-means with ``n``
    clusters (:func:`skdbal.initial.kmeans_representative`, seeded), over the whole pool up to 10,000
    rows, else over a seeded sample of 10,000 (a pool on a cluster, a dask array, is never read whole:
    only those rows are, once)."""
    from ..initial import kmeans_representative

    rows = _cover_rows(len(X), random_state)
    chosen = kmeans_representative(_flat(read_rows(X, rows)), n_clusters=n, random_state=random_state)
    return np.sort(rows[chosen])


class CoveringOrder:
    """The pool's rows, farthest first from those already chosen (a greedy k-centre order), continued
    on demand: what a session offers after its first batch while it cannot train a model yet.

    Each next row is the one farthest (in Euclidean distance over the flattened rows) from every row
    chosen so far, so that a class not met yet, unlike what was labelled, comes soon. A pool on a
    over 10,000 rows (in memory or on a cluster) is measured over a seeded sample of 10,000 rows.

    Examples
    --------
    Five points on a line, the first chosen: the farthest from it (11), then the farthest from both
    (2), then, of two at distance 1 from a chosen point, the lower row (1); then the one left.

    >>> import numpy as np
    >>> from skdbal.labelling import CoveringOrder
    >>> order = CoveringOrder(np.array([[0.0], [1.0], [2.0], [10.0], [11.0]]), [0], random_state=0)
    >>> order.next(3), order.next(5)
    ([4, 2, 1], [3])
    """

    def __init__(self, X, chosen: Sequence[int], random_state: int):
        rows = _cover_rows(len(X), random_state, keep=chosen)
        self.rows = rows
        self.F = _flat(read_rows(X, rows))
        self.dist = np.full(len(rows), np.inf)
        self.taken = np.zeros(len(rows), dtype=bool)
        where = {int(r): j for j, r in enumerate(rows)}
        for item in chosen:
            self._take(where[int(item)])

    def _take(self, j: int) -> None:
        self.taken[j] = True
        d = ((self.F - self.F[j]) ** 2).sum(axis=1)
        np.minimum(self.dist, d, out=self.dist)

    def next(self, k: int, exclude=()) -> List[int]:
        """The next ``k`` rows (fewer when the pool runs out), none of ``exclude``; they count as chosen."""
        exclude = {int(e) for e in exclude}
        out: List[int] = []
        while len(out) < k:
            free = ~self.taken
            if exclude:
                free &= ~np.isin(self.rows, list(exclude))
            if not free.any():
                break
            candidates = np.flatnonzero(free)
            j = int(candidates[np.argmax(self.dist[candidates])])   # the first of ties: the lower row
            self._take(j)
            out.append(int(self.rows[j]))
        return out


class OfferBoard:
    """What a labelling session offers people: the batch, the tail, the leases and the guesses.

    Its :attr:`changed` condition is notified on every event, batch and tail, and guards what the
    loop's thread and people's threads share (``batch``, ``training``, ``waiting_for``, the tail). The
    loop changes ``training`` and ``waiting_for`` through :meth:`start_training`, :meth:`offer`,
    :meth:`finish_training` and :meth:`wait_for`; people's side only reads them.

    Parameters
    ----------
    store : LabelStore
    X : array-like
        The pool (only the rows guessed or covered are read).
    keys : list of str
        A name per pool row.
    learner : ActiveLearner
        Queried for the tail, read for its version and labelled rows.
    batch_size : int
        Items per batch and per tail; an annotator's cap of leases is a share of it (:meth:`share`).
    lease_timeout : float
        Seconds an item handed out stays its annotator's without labelling activity from them (a label,
        skip or undo renews their leases; asking for items does not).
    query_kwargs : dict
        Passed to the tail's query.
    second_looks : bool
        Whether flagged labels are offered for a second look.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from skdbal import ActiveLearner
    >>> from skdbal.labelling import LabellingSession
    >>> learner = ActiveLearner(LogisticRegression(), random_state=0, seeding="step")
    >>> session = LabellingSession(learner, np.eye(4), classes=["a", "b"],
    ...                            store=os.path.join(tempfile.mkdtemp(), "s.db"), batch_size=2)
    >>> board = session.board
    >>> board.offer_first([0, 3])
    >>> [b["item"] for b in board.next_batch("ann")], board.published is None, board.guesses([0])
    ([0, 3], True, [None])
    """

    def __init__(self, store, X, keys: Sequence[str], learner, *, batch_size: int, lease_timeout: float,
                 query_kwargs: dict, second_looks: bool = True):
        self.store, self.X, self.keys, self.learner = store, X, keys, learner
        self.batch_size, self.lease_timeout, self.query_kwargs = batch_size, lease_timeout, query_kwargs
        self.second_looks = second_looks
        #: Notified on every event, batch and tail; guards the state below.
        self.changed = threading.Condition()
        #: The items offered now, best first, and their acquisition scores.
        self.batch: List[int] = []
        self.scores: Dict[int, float] = {}
        self._training = False
        self._waiting_for: Optional[str] = None
        #: The tail: the next best items under the last model (a second query excluding the batch), or
        #: while no model exists the next items of a covering order; offered once the batch runs out.
        self._tail: List[int] = []
        self._tail_scores: Dict[int, float] = {}
        self._tail_next: Optional[tuple] = None     # (model version, items, scores), not offered yet
        self._cover: Optional[CoveringOrder] = None   # the covering order, made on first need
        self._tail_ever: set = set()   # every item offered on a tail, in this process
        #: ``(version, model)`` that people's requests read (guesses, downloads); see :meth:`publish`.
        self._published: Optional[tuple] = None
        #: ``(version, {item: guess})``: the guesses of what people are offered, made in the loop's thread.
        self._guessed: tuple = (-1, {})
        #: When each annotator known by a token last asked for items (``time.time()``), for :meth:`share`.
        self._asked: Dict[str, float] = {}
        #: The audit reservoir (:mod:`skdbal.labelling.audit_share`): never offered by acquisition or the tail.
        self.reserved: frozenset = frozenset()
        #: Called as ``audits(batch)`` when a batch is offered: the batch with the audit items due interleaved.
        self.audits: Optional[Callable[[List[int]], List[int]]] = None

    @property
    def training(self) -> bool:
        """Whether the loop is fitting or querying now (from the first batch's last label needed to the
        next batch offered): :meth:`start_training` to :meth:`offer` (or :meth:`finish_training`)."""
        return self._training

    @property
    def tail(self) -> List[int]:
        """The tail's items offered so far (since the last batch), answered or not."""
        return list(self._tail)

    @property
    def waiting_for(self) -> Optional[str]:
        """What the session waits for from people (None, or a sentence): :meth:`wait_for` sets it."""
        return self._waiting_for

    # ------------------------------------------------------------ the loop's side
    def notify(self) -> None:
        """Wake whoever waits on :attr:`changed` (a new event, a stop)."""
        with self.changed:
            self.changed.notify_all()

    def start_training(self) -> None:
        """The loop starts fitting (or refitting, on a resume) and querying: it waits for nothing more, and
        people who finish the batch are offered the tail at once (they are woken)."""
        with self.changed:
            self._training, self._waiting_for = True, None
            self.changed.notify_all()

    def finish_training(self) -> None:
        """The loop stopped fitting without offering a batch (it failed): nothing is being trained."""
        with self.changed:
            self._training = False
            self.changed.notify_all()

    def wait_for(self, what: Optional[str]) -> None:
        """Say what the session waits for from people before it can train (e.g. :data:`TWO_CLASSES`), or
        None: nothing; while it waits, :meth:`offer_more` offers a covering order's items."""
        with self.changed:
            if what != self._waiting_for:   # the covering order's items are offered now: wake who waits
                self.changed.notify_all()
            self._waiting_for = what

    def reopen_skips(self) -> List[int]:
        """Reopen every skipped item (:meth:`LabelStore.reopen_skips`) and offer it at once, after the
        batch: the loop may query it again too, but at the end of the pool it may have nothing to query
        with. The items reopened."""
        reopened = self.store.reopen_skips()
        with self.changed:
            self.batch = self.batch + [i for i in reopened if i not in self.batch]
            self.changed.notify_all()
        return reopened

    def offer_first(self, items: Sequence[int]) -> None:
        """Offer the first batch: people may label it from now on."""
        self.batch = self._with_audits([int(i) for i in items])
        self.notify()

    def _with_audits(self, batch: List[int]) -> List[int]:
        return batch if self.audits is None else self.audits(batch)

    def offer(self, picks: Sequence[int], left: Sequence[int], scores: Dict[int, float],
              version: Optional[int]) -> None:
        """Offer a new batch: the new ``picks`` (recorded in the store as the query of model ``version``,
        with their ``scores``), then what earlier batches ``left`` unanswered. The retrain is over, the
        tail is dropped; items of the old tail that someone holds may still be labelled, and the label
        counts as any other."""
        with self.changed:
            self.scores.update(scores)
            self.batch = self._with_audits([int(i) for i in picks] + [int(i) for i in left])
            self.store.add_query(version, {int(p): scores.get(int(p), np.nan) for p in picks})
            self._training = False
            self._tail, self._tail_scores, self._tail_next = [], {}, None
            self.changed.notify_all()

    def taken(self) -> List[int]:
        """Items the next query must leave out although the learner has no label of them yet: those
        skipped and not reopened (also those skipped before a restart, which the loop's own list forgets),
        those labelled in the store since the last collect (on the tail, during a retrain), and the tail's
        items someone holds now, and the audit reservoir's."""
        store = self.store
        current = store.current_labels()
        out = set(store.skipped(current)) | self.reserved
        ever = self._tail_ever
        if ever:   # a tail was offered (a restart queries the same batch again)
            labelled = self.learner.labelled_mask_
            leased = store.live_leases()
            out |= {i for i in current if not labelled[i] and i in ever} | {i for i in self._tail if i in leased}
        return sorted(out)

    def seed(self) -> int:
        """The learner's ``random_state`` as an int (0 when it is not one): the covering order's seed."""
        rs = getattr(self.learner, "random_state", None)
        return int(rs) if isinstance(rs, (int, np.integer)) and not isinstance(rs, bool) else 0

    def prepare_tail(self, batch: Sequence[int], skipped: Union[Sequence[int], np.ndarray] = ()) -> None:
        """In the loop's thread, after a batch is offered: a second query, for the ``batch_size`` best
        items under the same model outside the batch, the ``skipped`` items and what people hold or
        answered. Kept until the batch runs out during a retrain (:meth:`offer_more`); recorded in the
        store when offered."""
        learner = self.learner
        version = getattr(learner, "step_", -1)
        if version < 0 or not hasattr(learner, "labelled_mask_"):
            return
        free = ~learner.labelled_mask_
        free[np.asarray(list(batch) + self.taken(), dtype=np.intp)] = False
        if len(skipped):
            free[np.asarray(skipped, dtype=np.intp)] = False
        candidates = np.flatnonzero(free)
        if not len(candidates):
            return
        last = getattr(learner, "last_acquisition_", None)
        try:
            indices, _, scores = learner.query(n_instances=min(self.batch_size, len(candidates)),
                                               candidates=candidates, return_scores=True, **self.query_kwargs)
        finally:
            learner.last_acquisition_ = last   # the batch's acquisition stays the learner's last
        scores = [np.nan] * len(indices) if scores is None else [float(x) for x in scores]
        # guessed now, in the loop's thread: a request for them during the retrain would wait for it
        self.guess_ahead(list(batch) + [int(i) for i in indices])
        with self.changed:
            if getattr(learner, "step_", -1) == version and not self._tail:
                self._tail_next = (version, [int(i) for i in indices], scores)
                self.changed.notify_all()

    @property
    def tail_ready(self) -> Optional[List[int]]:
        """The items of the second query prepared for the tail and not offered yet, or None."""
        tail_next = self._tail_next
        return None if tail_next is None else list(tail_next[1])

    # ------------------------------------------------------------ people's side
    def offer_more(self, unavailable) -> List[int]:
        """The tail's items free now, made and recorded on first need (a ``"tail"`` query in the store):
        during a retrain, the second query's items; while the first model waits for a second class (or
        is trained), the next ``batch_size`` items of a covering order, again each time they run out.
        ``unavailable``: the items labelled or skipped. Called under :attr:`changed`."""
        if not (self._training or self._waiting_for):
            return []
        free = [i for i in self._tail if i not in unavailable]
        if free:
            return free
        version = getattr(self.learner, "step_", -1)
        if version >= 0:
            if self._tail_next is None or self._tail_next[0] != version:
                return []
            _, items, scores = self._tail_next
            self._tail_next = None
        else:
            if self._cover is None:
                self._cover = CoveringOrder(self.X, self.batch, self.seed())
            items = self._cover.next(self.batch_size, exclude=set(unavailable) | set(self.batch) | self.reserved)
            scores = [np.nan] * len(items)
        if not items:
            return []
        self.store.add_query(version if version >= 0 else None, dict(zip(items, scores)), kind="tail")
        self._tail = self._tail + items
        self._tail_ever.update(items)
        self._tail_scores.update(zip(items, scores))
        return [i for i in items if i not in unavailable]

    def pending_looks(self) -> List[int]:
        """Items whose flagged label awaits a second look."""
        return [c["item"] for c in self.store.second_looks() if c["outcome"] == "pending"]

    def second_looks_for(self, annotator: str) -> List[int]:
        """Flagged items awaiting a second look that ``annotator`` may give (not their own, not declined)."""
        return [c["item"] for c in self.store.second_looks() if c["outcome"] == "pending"
                and c["annotator"] != annotator and annotator not in c["declined_by"]]

    def pending(self, labelled=None, skipped=None) -> List[int]:
        """Items of the current batch still to label: not labelled, not skipped."""
        labelled = self.store.current_labels() if labelled is None else labelled
        skipped = set(self.store.skipped(labelled)) if skipped is None else skipped
        return [i for i in self.batch if i not in labelled and i not in skipped]

    def active(self, annotator: Optional[str], now: Optional[float] = None) -> set:
        """The annotators active now: holding items, or having asked for some within ``lease_timeout``;
        ``annotator`` among them (None: only the others)."""
        now = _time.time() if now is None else now
        return set(self.store.live_leases(now=now).values()) | ({annotator} if annotator is not None else set()) | \
            {a for a, t in list(self._asked.items()) if now - t < self.lease_timeout}

    def share(self, annotator: str, now: Optional[float] = None) -> int:
        """The most items ``annotator`` may hold at once when annotators are known by their tokens:
        ``ceil(batch_size / k)``, ``k`` the annotators :meth:`active` now and at least 2, so that no one
        takes a whole batch while others come (a batch of 10: 5 each for one or two annotators, 4 for
        three, 1 for ten or more)."""
        return self._share_among(len(self.active(annotator, now)))

    def share_among(self, k: int) -> int:
        """:meth:`share` with ``k`` annotators active."""
        return self._share_among(k)

    def _share_among(self, k: int) -> int:
        return max(1, -(-self.batch_size // max(2, k)))

    def _offerable(self, annotator: str, items: List[int], holding: set, others: bool, now: float) -> List[int]:
        """``items`` but those the caller holds and, when ``others`` are active, those whose lease ran out
        in ``annotator``'s hands."""
        back = set(self.store.lapsed(annotator, items, now=now)) if others else set()
        return [i for i in items if i not in holding and i not in back]

    def next_batch(self, annotator: str, n: Optional[int] = None, timeout: float = 0.0, *,
                   capped: bool = False, holding: Sequence[int] = ()) -> List[dict]:
        """The items for ``annotator`` to label now, leased to them, best first: the second looks they
        may give, the batch's free items, else the tail (:meth:`offer_more`); waits up to ``timeout``
        seconds for one. ``holding``: the items the caller holds already (a page's ``have``), left out;
        if the annotator's lease on one of them ran out (nothing labelled, skipped or undone for
        ``lease_timeout``), the caller is idle and is handed nothing more until they act. An item whose
        lease ran out in the annotator's hands is not handed back to them while another annotator is
        :meth:`active`. Skipped items are reopened once fewer than two batches of other unlabelled items are left.
        :meth:`LabellingSession.next_batch` says the rest."""
        deadline = _time.time() + timeout
        have = {int(i) for i in holding}
        while True:
            now = _time.time()
            self._asked[annotator] = now
            if len(self._asked) > 1000:   # names typed in pages (no tokens): forget those gone quiet
                self._asked = {a: t for a, t in self._asked.items() if now - t < self.lease_timeout}
            seen = self.store.last_event()   # an item labelled while we choose is not leased
            labelled = self.store.current_labels()
            skipped = set(self.store.skipped(labelled))
            if skipped and len(labelled) + len(skipped) >= len(self.keys) and getattr(self.learner, "step_", -1) < 0:
                self.reopen_skips()   # nothing else is left before the first model (after it: the oracle)
                skipped = set()
            idle = bool(have) and bool(self.store.lapsed(annotator, have, now=now))
            looks = self.second_looks_for(annotator) if self.second_looks else []
            active = self.active(annotator, now)
            cap = self._share_among(len(active)) if capped else None
            others = len(active) > 1   # what ran out in the annotator's hands goes to them first
            free = self._offerable(annotator, looks + self.pending(labelled, skipped), have, others, now)
            leased = [] if idle else self.store.lease(free, annotator, self.lease_timeout, limit=n,
                                                      unchanged_since=seen, cap=cap, now=now)
            if not leased and not idle:  # the batch ran out: the tail, while the model retrains or waits
                with self.changed:
                    more = self._offerable(annotator, self.offer_more(set(labelled) | skipped), have,
                                           others, now)
                if more:
                    leased = self.store.lease(more, annotator, self.lease_timeout, limit=n, unchanged_since=seen,
                                              cap=cap, now=now)
            if leased or _time.time() >= deadline:
                break
            with self.changed:
                self.changed.wait(timeout=min(0.2, max(0.0, deadline - _time.time())))
        second, batch = set(looks), set(self.batch)
        return [{"item": i, "key": self.keys[i],
                 "score": self.scores.get(i, self._tail_scores.get(i, float("nan"))),
                 "second_look": i in second, "tail": i not in batch and i not in second} for i in leased]

    # ------------------------------------------------------------ guesses
    @property
    def published(self) -> Optional[tuple]:
        """``(version, model)`` that people's requests read, or None before the first model."""
        return self._published

    def publish(self, version: int, model) -> None:
        """Publish ``model`` as ``version`` (from the loop's thread), and guess what people are offered."""
        self._published = (int(version), model)
        self.guess_ahead(self.batch + self.pending_looks())

    def guess_ahead(self, items) -> None:
        """Guess ``items`` with the published model, in the loop's thread, for :meth:`guesses` to serve.

        A request that computed them itself waited for the loop before issue 43: a network's training
        held the lock on torch's global generator and mode flags for the whole fit (seeded training), so
        a guess asked for during a retrain took as long as the rest of the retrain (8.3 s of a 9 s one).
        Each module has its own lock now and the row-keyed samplers do not use torch's generator, so a
        guess on demand no longer waits; guessing ahead still saves the request its computation."""
        published = self._published
        items = [int(i) for i in dict.fromkeys(items)]
        if published is None or not items:
            return
        self._guessed = (published[0], self._with_guesses(published, items))

    def guesses(self, items: Sequence[int]) -> list:
        """The published model's label for each item (as text), or None before the first model."""
        published = self._published
        if published is None or not len(items):
            return [None] * len(items)
        items = [int(i) for i in items]
        guessed = self._with_guesses(published, list(dict.fromkeys(items)))
        return [guessed[i] for i in items]

    def _with_guesses(self, published: tuple, items: List[int]) -> Dict[int, str]:
        """The guesses made for ``published``'s version so far, and those of ``items`` not among them."""
        version, model = published
        done = self._guessed[1] if self._guessed[0] == version else {}
        todo = [i for i in items if i not in done]
        if not todo:
            return done
        guesses = model.predict(read_rows(self.X, np.asarray(todo, dtype=np.intp)))  # only these rows are read
        return {**done, **{i: str(g) for i, g in zip(todo, guesses)}}
