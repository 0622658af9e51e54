"""What a labelling session offers besides the queried batch: a first batch that covers the pool, the
items that follow it while no model can be trained yet, and the strategy's name for the page.

Private to :mod:`skdbal.labelling`: :class:`~skdbal.labelling.LabellingSession` uses it.
"""
from __future__ import annotations

from typing import List, Optional, Sequence

import numpy as np

from .._validation import read_rows

#: What the session waits for while its first batch holds labels of one class only.
TWO_CLASSES = "labels of at least two classes"

#: Rows of the pool a covering order measures distances over (a seeded sample of a larger pool).
_COVER_ROWS = 10_000


def strategy_name(learner) -> Optional[str]:
    """The learner's query strategy as a name people read beside the score: the key it has in
    :data:`skdbal.acquisition.STRATEGIES` (``"bald"``), else its function's or class's name."""
    from ..acquisition import STRATEGIES

    strategy = getattr(learner, "query_strategy", None)
    if strategy is None:
        return "bald"   # the learner's default
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


class Offers:
    """The part of :class:`~skdbal.labelling.LabellingSession` that offers more than the batch: the tail
    while the model retrains (or while the first model waits for a second class). A mixin: it reads the
    session's ``learner``, ``store``, ``oracle``, ``batch_size``, ``query_kwargs`` and ``_changed``, and
    calls its ``_guess_ahead``."""

    def _seed(self) -> int:
        rs = getattr(self.learner, "random_state", None)
        return int(rs) if isinstance(rs, (int, np.integer)) and not isinstance(rs, bool) else 0

    def _new_batch(self) -> None:
        """A new batch is offered (called under ``_changed``): the retrain is over, the tail is dropped.
        Its items that someone holds may still be labelled; the label counts as any other."""
        self.training = False
        self._tail, self._tail_scores, self._tail_next = [], {}, None

    def _prepare_tail(self, batch: Sequence[int]) -> None:
        """In the loop's thread, after a batch is offered: a second query, for the ``batch_size`` best
        items under the same model outside the batch and what people hold or answered. Kept until the
        batch runs out during a retrain (:meth:`_offer_more`); recorded in the store when offered."""
        learner = self.learner
        version = getattr(learner, "step_", -1)
        if version < 0 or not hasattr(learner, "labelled_mask_"):
            return
        free = ~learner.labelled_mask_
        free[np.asarray(list(batch) + self.oracle.taken(), dtype=np.intp)] = False
        loop = getattr(self, "loop", None)
        if loop is not None and len(loop.skipped):
            free[loop.skipped] = False
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
        self._guess_ahead(list(batch) + [int(i) for i in indices])
        with self._changed:
            if getattr(learner, "step_", -1) == version and not self._tail:
                self._tail_next = (version, [int(i) for i in indices], scores)
                self._changed.notify_all()

    def _offer_more(self, unavailable) -> List[int]:
        """The tail's items free now, made and recorded on first need (a ``"tail"`` query in the store):
        during a retrain, the second query's items; while the first model waits for a second class (or
        is trained), the next ``batch_size`` items of a covering order, again each time they run out.
        ``unavailable``: the items labelled or skipped. Called under ``_changed``."""
        if not (self.training or self.waiting_for):
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
                self._cover = CoveringOrder(self.X, self.oracle.batch, self._seed())
            items = self._cover.next(self.batch_size, exclude=set(unavailable) | set(self.oracle.batch))
            scores = [np.nan] * len(items)
        if not items:
            return []
        self.store.add_query(version if version >= 0 else None, dict(zip(items, scores)), kind="tail")
        self._tail = self._tail + items
        self._tail_ever.update(items)
        self._tail_scores.update(zip(items, scores))
        return [i for i in items if i not in unavailable]
