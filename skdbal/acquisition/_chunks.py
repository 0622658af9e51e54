"""A query reduced over a pool read in chunks: the protocol a strategy follows to run on a cluster.

:meth:`Strategy.plan_chunks <skdbal.acquisition.base.Strategy.plan_chunks>` opens one query as a
:class:`ChunkPlan`, with three steps:

1. :meth:`ChunkPlan.score_chunk`: where a chunk lives (a worker), score its rows;
2. :meth:`ChunkPlan.keep`: on the same worker, reduce those scores to a bounded summary, the chunk's
   candidates (its best ``k`` rows; a filter's best untrusted rows; a stochastic batch's best
   perturbed log weights);
3. :meth:`ChunkPlan.merge`: on the client, merge the chunks' candidates into the query's
   :class:`~skdbal.acquisition.base.Acquisition`, asking the pool (a :class:`ChunkedPool`) for more
   rounds where the exact answer needs more of some chunks than they sent.

A decorator's plan wraps the plan of the strategy it decorates (its chunk steps call the inner
plan's). A driver subclasses :class:`ChunkedPool`: :func:`acquire_in_chunks` runs a plan in this
process, :func:`skdbal.dask.query_pool` on a ``dask.distributed`` cluster, and neither knows any
strategy by its type.
"""
from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, Iterator, Optional, Sequence, Tuple

import numpy as np

from .._validation import check_n_instances, check_pool, check_positive_int, is_frame, pool_kwargs, take_rows
from ._messages import chunk_refusal, warn_fill
from ._selection import Acquisition, check_options

__all__ = ["PoolChunk", "ChunkScores", "ChunkPlan", "PointwisePlan", "ChunkedPool", "acquire_in_chunks"]


def _ranked(idx, scores):
    """Positions that sort ``(idx, scores)`` best first: larger score, then lower index."""
    return np.lexsort((idx, -scores))


def _above(scores, idx, score, index):
    """Whether each point ranks above the point ``(score, index)``."""
    return (scores > score) | ((scores == score) & (idx < index))


def _top(keep, idx, scores, m, min_score):
    """The best ``m`` of the points ``keep`` at or above ``min_score``, and whether more were left out."""
    sel = keep if min_score is None else keep & (scores >= min_score)
    order = _ranked(idx[sel], scores[sel])
    if m is not None and len(order) > m:
        return order[:m], True, sel
    return order, False, sel


def _concat(parts, key, dtype=np.float64):
    arrays = [p[key] for p in parts if key in p]
    return np.concatenate(arrays) if arrays else np.zeros(0, dtype=dtype)


def _merged(parts: dict, which: str = "e"):
    """The chunks' ``which`` candidates (``"e"`` eligible, ``"i"`` ineligible), best first."""
    ps = list(parts.values())
    i, s = _concat(ps, f"{which}_idx", np.int64), _concat(ps, f"{which}_score")
    o = _ranked(i, s)
    return i[o], s[o]


@dataclass
class PoolChunk:
    """The rows of one chunk, as a plan's chunk steps see them (on a worker).

    Parameters
    ----------
    X : array-like of shape (n, ...)
        The chunk's rows, the excluded ones included (a model's samples of
        a row may depend on the rows sampled with it, so the chunk is
        sampled as it is stored).
    index : ndarray of shape (n,), int64
        Each row's index in the pool.
    valid : ndarray of shape (n,), bool
        The rows that may be picked (not excluded).
    aligned : dict, optional
        The chunk's slice of each pool-aligned keyword the plan reads
        (:attr:`ChunkPlan.aligned_keywords`, such as ``y_pool``).
    extra : object, optional
        What the round drew for this chunk on the client
        (:meth:`ChunkedPool.round`'s ``inputs``).

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.acquisition.base import PoolChunk
    >>> chunk = PoolChunk.of(np.zeros((3, 2)), offset=10, excluded=[1])
    >>> chunk.index.tolist(), chunk.valid.tolist()
    ([10, 11, 12], [True, False, True])
    """

    X: Any
    index: np.ndarray
    valid: np.ndarray
    aligned: Dict[str, Any] = field(default_factory=dict)
    extra: Any = None

    @classmethod
    def of(cls, X, offset: int, excluded=(), aligned: Optional[dict] = None, extra=None) -> "PoolChunk":
        """The chunk of rows ``X`` that starts at pool index ``offset``; ``excluded``: positions in the chunk."""
        X = X if is_frame(X) else np.asarray(X)
        index = np.arange(offset, offset + len(X), dtype=np.int64)
        valid = np.ones(len(X), dtype=bool)
        valid[np.asarray(excluded, dtype=np.intp)] = False
        return cls(X, index, valid, dict(aligned or {}), extra)


@dataclass
class ChunkScores:
    """What :meth:`ChunkPlan.score_chunk` gives: a score per row of the chunk, and which may be picked.

    The chunk's part of :class:`~skdbal.acquisition.base.PoolScores`: a
    filter's plan narrows ``eligible`` and sets ``fill_priority`` as the
    filter does for the whole pool.

    Parameters
    ----------
    scores : ndarray of shape (n,)
        Every row of the chunk (excluded ones too), larger is better.
    eligible : ndarray of shape (n,), bool, optional
        Rows that may be picked; None: all of them.
    fill_priority : ndarray of shape (n,), optional
        When fewer rows of the pool are eligible than asked, the batch is
        filled with the ineligible rows of highest priority (by score when
        None).

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.acquisition.base import ChunkScores
    >>> ChunkScores(np.array([0.3, 0.9]), eligible=np.array([True, False])).eligible.tolist()
    [True, False]
    """

    scores: np.ndarray
    eligible: Optional[np.ndarray] = None
    fill_priority: Optional[np.ndarray] = None


class ChunkPlan:
    """One query of a strategy, reduced over a pool read in chunks.

    Made on the client by :meth:`Strategy.plan_chunks
    <skdbal.acquisition.base.Strategy.plan_chunks>` (with the fitted model,
    the query's options and what it draws on the client, such as EPIG's
    target inputs), pickled once and sent to every worker, where its chunk
    steps run; :meth:`merge` runs on the client. A subclass implements:

    :meth:`score_chunk`
        A chunk's rows to a :class:`ChunkScores` (runs where the chunk is).
    :meth:`keep`
        Those scores to the chunk's candidates: a bounded summary, never a
        score per row (runs there too).
    :meth:`merge`
        The chunks' candidates to the :class:`~skdbal.acquisition.base.Acquisition`
        (runs on the client), asking the pool for rounds (:meth:`ChunkedPool.round`),
        rows (:meth:`ChunkedPool.rows`) and what the workers compute of given rows
        (:meth:`ChunkedPool.map_rows`).

    Attributes
    ----------
    pointwise : bool
        Whether :meth:`score_chunk` gives each row a score of its own and
        the batch is their top ``k``: the decorators that filter or
        re-select (noise filter, diversity penalty, stochastic batches)
        need it of the plan they wrap.
    filtered : bool
        Whether some rows may be ineligible (a noise filter inside).
    exact : bool
        Whether the result is the single process's; False for a model whose
        samples are not row-keyed (:mod:`skdbal.predictive`), or for a
        pre-selection smaller than the pool.
    candidates : int
        How many candidates reached the client (set by :meth:`merge`).
    aligned_keywords : tuple of str
        The pool-aligned keywords (``y_pool``) whose chunks
        :meth:`score_chunk` reads in :attr:`PoolChunk.aligned`.

    Examples
    --------
    A strategy that picks the first rows in pool order reduces each chunk to
    its first ``k`` rows that may be picked:

    >>> import numpy as np
    >>> from skdbal.acquisition.base import (Acquisition, ChunkPlan, ChunkScores, Strategy,
    ...                                      acquire_in_chunks)
    >>> class FirstRowsPlan(ChunkPlan):
    ...     def __init__(self, n):
    ...         self.n = n
    ...     def score_chunk(self, chunk):
    ...         return ChunkScores(np.zeros(len(chunk.index)))
    ...     def keep(self, chunk, scores, request):
    ...         return chunk.index[chunk.valid][:self.n]
    ...     def merge(self, pool):
    ...         kept = np.sort(np.concatenate([rows for _, rows in pool.round(None)]))[:self.n]
    ...         return Acquisition(kept, np.zeros(len(kept)))
    >>> class FirstRows(Strategy):
    ...     def acquisition_scores(self, estimator, X_pool, **kwargs):
    ...         return -np.arange(len(X_pool), dtype=float)
    ...     def plan_chunks(self, estimator, n_instances, pool, **options):
    ...         return FirstRowsPlan(n_instances)
    >>> acquire_in_chunks(FirstRows(), None, np.zeros((10, 1)), 3, chunk_rows=4, exclude=[1]).indices.tolist()
    [0, 2, 3]
    """

    pointwise = False
    filtered = False
    exact = True
    candidates = 0
    aligned_keywords: Tuple[str, ...] = ()

    def score_chunk(self, chunk: PoolChunk) -> ChunkScores:
        """Score the rows of ``chunk`` (on a worker)."""
        raise NotImplementedError(f"{type(self).__name__} scores no chunk")

    def keep(self, chunk: PoolChunk, scores: ChunkScores, request) -> Any:
        """The chunk's candidates from its ``scores``, as ``request`` asks (on a worker)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no candidates")

    def merge(self, pool: "ChunkedPool") -> Acquisition:
        """The query's result from the chunks' candidates (on the client)."""
        raise NotImplementedError(f"{type(self).__name__} must implement merge()")


class PointwisePlan(ChunkPlan):
    """A query whose batch is the top ``k`` of a score per row: each chunk sends its best ``k``.

    The plan of every strategy that scores rows one by one
    (:class:`~skdbal.acquisition.base.SamplesStrategy`: BALD, max entropy,
    ..., EPIG, a strategy of your own) and of a noise filter around one.
    :meth:`score_chunk` calls ``strategy.acquisition_scores(estimator, chunk.X,
    **options)``, valid for a score in which each row's value depends on
    that row alone; a subclass overrides it. Ties go to the lower pool
    index. Rows made ineligible by :meth:`score_chunk` (a filter) are
    reported as the local query reports them: the rejects (ineligible rows
    ranked above the lowest pick) and the fill (:meth:`complete`).

    Parameters
    ----------
    n_instances : int
        The batch size ``k``.
    strategy : Strategy, optional
        Whose ``acquisition_scores`` the default :meth:`score_chunk` calls.
    estimator : estimator, optional
        The fitted model, sent to every worker with the plan.
    options : dict, optional
        Keywords of ``strategy.acquisition_scores``.

    Attributes
    ----------
    info : dict
        What the scorer adds to the result's ``info`` (a filter's threshold).
    who, fill_words :
        How the warning of a filled batch names the strategy, its eligible
        rows and the fill (:meth:`complete`).

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.acquisition.base import PointwisePlan, Strategy, acquire_in_chunks
    >>> class FirstFeature(Strategy):
    ...     def acquisition_scores(self, estimator, X_pool, **kwargs):
    ...         return np.asarray(X_pool)[:, 0]
    ...     def plan_chunks(self, estimator, n_instances, pool, **options):
    ...         return PointwisePlan(n_instances, self, estimator)
    >>> X = np.array([[0.2], [0.9], [0.5], [0.7]])
    >>> acquire_in_chunks(FirstFeature(), None, X, 2, chunk_rows=3).indices.tolist()
    [1, 3]
    >>> FirstFeature()(None, X, 2)[0].tolist()
    [1, 3]
    """

    pointwise = True
    who = "the strategy"
    fill_words: Tuple[str, ...] = ()

    def __init__(self, n_instances: int, strategy=None, estimator=None, options: Optional[dict] = None):
        self.n_instances = int(n_instances)
        self.strategy = strategy
        self.estimator = estimator
        self.options = dict(options or {})
        self.info: dict = {}

    def score_chunk(self, chunk: PoolChunk) -> ChunkScores:
        scores = self.strategy.acquisition_scores(self.estimator, chunk.X, **self.options)
        return ChunkScores(np.asarray(scores, dtype=np.float64).reshape(-1))

    def request(self, n, above=None, n_ineligible=None, above_ineligible=None, n_fill=0) -> dict:
        """What :meth:`keep` is asked for each chunk.

        Parameters
        ----------
        n : int or None
            The chunk's best ``n`` eligible rows (None: all).
        above : float, optional
            Only those scoring at least this.
        n_ineligible : int or None
            Its best ineligible rows by score (None: all), for the rejects.
        above_ineligible : float, optional
            Only those scoring at least this.
        n_fill : int, default=0
            Its ineligible rows of highest fill priority, for the fill.

        Returns
        -------
        dict
        """
        return {"n": n, "above": above, "n_ineligible": n_ineligible, "above_ineligible": above_ineligible,
                "n_fill": n_fill}

    def keep(self, chunk: PoolChunk, scores: ChunkScores, request: dict) -> dict:
        """The chunk's candidates: its eligible rows' count, minimum and maximum score (``n_eligible``,
        ``lo``, ``hi``), its best eligible rows (``e_idx``, ``e_score``, and ``e_more``: whether some
        were left out), and when some rows are ineligible its best ineligible rows by score (``i_*``)
        and by fill priority (``f_idx``, ``f_priority``, ``f_score``)."""
        s = np.asarray(scores.scores, dtype=np.float64).reshape(-1)
        idx, valid = chunk.index, chunk.valid
        eligible = valid if scores.eligible is None else valid & np.asarray(scores.eligible, dtype=bool)
        out = {"n_eligible": int(eligible.sum())}
        es = s[eligible]
        out["lo"], out["hi"] = (float(es.min()), float(es.max())) if len(es) else (np.inf, -np.inf)
        order, out["e_more"], sel = _top(eligible, idx, s, request["n"], request["above"])
        out["e_idx"], out["e_score"] = idx[sel][order], s[sel][order]
        if scores.eligible is not None:
            inel = valid & ~eligible
            order, out["i_more"], sel = _top(inel, idx, s, request["n_ineligible"], request["above_ineligible"])
            out["i_idx"], out["i_score"] = idx[sel][order], s[sel][order]
            fi, fs = idx[inel], s[inel]
            fp = fs if scores.fill_priority is None else np.asarray(scores.fill_priority, dtype=np.float64)[inel]
            order = _ranked(fi, fp)[:request["n_fill"]]  # the fill: highest priority, then lower index
            out["f_idx"], out["f_priority"], out["f_score"] = fi[order], fp[order], fs[order]
        return out

    def merge(self, pool: "ChunkedPool") -> Acquisition:
        k = self.n_instances
        parts = dict(pool.round(self.request(k, None, k, None, k)))
        e_i, e_s = _merged(parts)
        self.candidates = int(len(e_i))
        return self.complete(pool, parts, e_i[:k], e_s[:k])

    def complete(self, pool: "ChunkedPool", parts: dict, picks, pick_scores, *, info: Optional[dict] = None,
                 who: Optional[str] = None, fill_words: Optional[Sequence[str]] = None) -> Acquisition:
        """The result of a selection ``picks`` among the eligible rows, as
        :meth:`PoolScores.acquisition <skdbal.acquisition.base.PoolScores.acquisition>`
        makes it: when rows may be ineligible, the rejects (read again from
        the chunks that may hold more of them above the lowest pick) and the
        fill to ``n_instances``, with its warning. ``parts`` holds each
        chunk's candidates by chunk; ``info`` follows :attr:`info`."""
        out = {**self.info, **(info or {})}
        picks = np.asarray(picks, dtype=np.int64)
        pick_scores = np.asarray(pick_scores, dtype=np.float64)
        if self.filtered:
            picks, pick_scores, rejected, n_filled = self._rejects_and_fill(
                pool, parts, picks, pick_scores, who or self.who, self.fill_words if fill_words is None else fill_words)
            out.update({"n_rejected": int(len(rejected)), "rejected_indices": np.asarray(rejected, dtype=np.intp),
                        "n_filled": int(n_filled)})
        return Acquisition(picks.astype(np.intp), pick_scores.astype(np.float64), out)

    def _rejects_and_fill(self, pool, parts, picks, pick_scores, who, fill_words):
        k = self.n_instances
        if len(picks) < k or not len(picks):
            low = None  # every ineligible point was passed over
        else:
            o = _ranked(picks, pick_scores)[-1]
            low = (float(pick_scores[o]), int(picks[o]))
        # a chunk that sent all it was asked for may hold more rejects above the lowest pick
        need = [b for b, p in parts.items() if p["i_more"] and (
            low is None or _above(p["i_score"][-1:], p["i_idx"][-1:], *low)[0])]
        if need:
            for b, res in pool.round(self.request(0, None, None, None if low is None else low[0], k), chunks=need):
                parts[b].update({key: res[key] for key in ("i_idx", "i_score", "i_more")})
        i_i, i_s = _merged(parts, "i")
        rejected = i_i if low is None else i_i[_above(i_s, i_i, *low)]
        n_filled = k - len(picks)
        if n_filled > 0:
            n_eligible = sum(p["n_eligible"] for p in parts.values())
            warn_fill(who, n_eligible, pool.n_valid, n_filled, self.info.get("threshold"), *fill_words, stacklevel=4)
            ps = list(parts.values())
            f_i, f_p, f_s = _concat(ps, "f_idx", np.int64), _concat(ps, "f_priority"), _concat(ps, "f_score")
            o = _ranked(f_i, f_p)[:n_filled]
            picks = np.concatenate([picks, f_i[o]])
            pick_scores = np.concatenate([pick_scores, f_s[o]])
            rejected = rejected[~np.isin(rejected, picks)]
        return picks, pick_scores, rejected, max(n_filled, 0)


def check_row_keyed(plan: ChunkPlan, predictive) -> ChunkPlan:
    """``plan``, made not :attr:`~ChunkPlan.exact` with a warning when ``predictive``'s samples of a row
    depend on the rows sampled with it (each chunk then draws its own); said once per query."""
    if not predictive.row_keyed and plan.exact:
        plan.exact = False
        warnings.warn(
            f"{predictive.name}'s samples of a row depend on the other rows sampled with it (they are not "
            f"row-keyed: see skdbal.predictive), so each chunk draws its own: the picks are a valid query but "
            f"not the single process's, and they change with the chunking (info['dask']['exact'] is False). "
            f"For an MC-dropout model give an int random_state and a row-keyed mask_seeding "
            f"('auto', 'row_pcg64', 'row_philox' or 'row')",
            UserWarning, stacklevel=6)
    return plan


def _check_exclude(exclude, n: int) -> np.ndarray:
    if exclude is None:
        return np.zeros(0, dtype=np.int64)
    ex = np.asarray(exclude).reshape(-1)
    if len(ex) and ex.dtype.kind not in "iu":
        raise TypeError(f"exclude must be integer pool indices; got dtype {ex.dtype}")
    ex = np.unique(ex.astype(np.int64))
    if len(ex) and (ex[0] < 0 or ex[-1] >= n):
        raise ValueError(f"exclude must lie in [0, {n}); got {ex[0] if ex[0] < 0 else ex[-1]}")
    return ex


class ChunkedPool:
    """A pool read chunk by chunk, as a :class:`ChunkPlan`'s :meth:`~ChunkPlan.merge` sees it.

    A driver subclasses it and implements :meth:`round`, :meth:`rows` and
    :meth:`map_rows`: :func:`acquire_in_chunks` in this process,
    :func:`skdbal.dask.query_pool` on a cluster. This base keeps the
    bookkeeping every driver shares (chunks, excluded rows, pool-aligned
    keywords) and runs a query (:meth:`acquire`).

    Parameters
    ----------
    chunk_rows : sequence of int
        The rows of each chunk, in pool order.
    exclude : array-like of int, optional
        Pool indices that may not be picked (those already labelled).
    aligned : dict, optional
        Pool-aligned keywords (``y_pool``), one entry per pool row, that the
        driver sends chunk by chunk to the plans that read them.

    Attributes
    ----------
    n_rows, n_valid, n_chunks : int
        Rows of the pool, rows that may be picked, chunks.
    offsets : ndarray of shape (n_chunks + 1,)
        The pool index at which each chunk starts, and ``n_rows``.
    excluded : ndarray
        The excluded pool indices, sorted and unique.
    report : dict
        After :meth:`acquire`: the chunks (``tasks``), the ``rounds`` of
        scoring, whether the result is ``exact`` and how many
        ``candidates`` reached the client, and what the driver adds.

    Examples
    --------
    >>> from skdbal.acquisition.base import ChunkedPool
    >>> pool = ChunkedPool([4, 4, 2], exclude=[0, 5])
    >>> pool.n_rows, pool.n_valid, pool.n_chunks
    (10, 8, 3)
    >>> pool.positions_to_indices([0, 1, 4]).tolist()      # the 1st, 2nd and 5th rows not excluded
    [1, 2, 6]
    >>> pool.excluded_in(1).tolist()                       # pool index 5: the second row of chunk 1
    [1]
    """

    def __init__(self, chunk_rows: Sequence[int], *, exclude=None, aligned: Optional[dict] = None):
        self.offsets = np.concatenate([[0], np.cumsum(np.asarray(chunk_rows, dtype=np.int64))]).astype(np.int64)
        self.n_rows = int(self.offsets[-1])
        self.n_chunks = len(self.offsets) - 1
        self.excluded = _check_exclude(exclude, self.n_rows)
        self.n_valid = self.n_rows - len(self.excluded)
        if self.n_valid == 0:
            raise ValueError("every pool point is excluded: nothing to query")
        self.aligned = {k: v for k, v in (aligned or {}).items() if v is not None}
        self.report: dict = {}
        self.plan: Optional[ChunkPlan] = None

    def excluded_in(self, b: int) -> np.ndarray:
        """The excluded rows of chunk ``b``, as positions in the chunk."""
        a, z = self.offsets[b], self.offsets[b + 1]
        return self.excluded[np.searchsorted(self.excluded, a):np.searchsorted(self.excluded, z)] - a

    def n_valid_in(self, b: int) -> int:
        """How many rows of chunk ``b`` may be picked."""
        return int(self.offsets[b + 1] - self.offsets[b]) - len(self.excluded_in(b))

    def positions_to_indices(self, positions) -> np.ndarray:
        """Pool indices of the ``positions``-th rows that are not excluded (0-based, element by element)."""
        positions = np.asarray(positions, dtype=np.int64)
        g = positions.copy()
        while True:
            g_next = positions + np.searchsorted(self.excluded, g, side="right")
            if np.array_equal(g_next, g):
                return g
            g = g_next

    def acquire(self, strategy, estimator, n_instances: int = 1, *, n_candidates: Optional[int] = None,
                random_state=None, **options) -> Acquisition:
        """Query this pool with ``strategy``: its plan (:meth:`Strategy.plan_chunks
        <skdbal.acquisition.base.Strategy.plan_chunks>`), merged (:meth:`ChunkPlan.merge`).

        Parameters
        ----------
        strategy : Strategy or callable
        estimator : estimator
            A fitted model.
        n_instances : int, default=1
            At most the rows not excluded.
        n_candidates : int, optional
            Candidates each chunk sends where a strategy chooses among more
            than its batch (a diversity penalty, BatchBALD's pre-selection).
        random_state : int, RandomState instance or None, default=None
        **options :
            The strategy's options. ``random_tie_break`` is refused: its
            permutation of the pool is drawn on one machine.

        Returns
        -------
        Acquisition
            With pool indices; :attr:`report` says how it was reached.
        """
        k = check_n_instances(n_instances, self.n_valid)
        if options.pop("random_tie_break", False):
            raise ValueError("random_tie_break draws a permutation of the whole pool on one machine; on a pool "
                             "read in chunks (a distributed pool) ties go to the lower index")
        if not hasattr(strategy, "plan_chunks"):   # a plain callable (a CallableStrategy's) says nothing of chunks
            raise TypeError(chunk_refusal(strategy))
        check_options(strategy, dict(options, **{name: None for name in self.aligned}))
        options.pop("n_jobs", None)
        if n_candidates is not None:
            n_candidates = check_positive_int(n_candidates, "n_candidates")
        self.report = {"tasks": self.n_chunks, "rounds": 0, "exact": True, "candidates": 0}
        plan = strategy.plan_chunks(estimator, k, self, random_state=random_state, n_candidates=n_candidates,
                                    **options)
        missing = [name for name in plan.aligned_keywords if name not in self.aligned]
        if missing:
            raise ValueError(f"{type(strategy).__name__} reads {', '.join(missing)}, which the query was not given")
        with self._serving(plan):
            acq = plan.merge(self)
        self.report.update(exact=bool(plan.exact), candidates=int(plan.candidates))
        return acq

    @contextlib.contextmanager
    def _serving(self, plan: ChunkPlan):
        """Inside, :meth:`round` and :meth:`map_rows` run ``plan``'s steps; a driver that sends the plan
        to workers sends it here (or at its first round) and drops it from them on the way out."""
        self.plan = plan
        try:
            yield
        finally:
            self.plan = None

    # what a driver implements
    def round(self, request, chunks: Optional[Iterable[int]] = None,
              inputs: Optional[Callable[[int], Any]] = None) -> Iterator[Tuple[int, Any]]:
        """Score the ``chunks`` (all by default) and keep their candidates as ``request`` asks.

        Parameters
        ----------
        request : object
            Passed to :meth:`ChunkPlan.keep` for every chunk.
        chunks : iterable of int, optional
            Which chunks, by position; all of them by default.
        inputs : callable, optional
            ``inputs(b)``, called on the client for each chunk ``b`` in
            increasing order before it is scored; what it returns is the
            chunk's :attr:`PoolChunk.extra` (the local query's random stream,
            cut along the chunks). A driver draws them a few chunks ahead of
            the scoring, never the whole pool's at once.

        Yields
        ------
        (int, object)
            Each chunk's position and candidates, as they are ready (in any order).
        """
        raise NotImplementedError

    def rows(self, indices) -> Any:
        """The pool's rows at ``indices``, on the client."""
        raise NotImplementedError

    def map_rows(self, indices, method: str) -> np.ndarray:
        """``plan.method(rows)`` of the rows at ``indices``, computed where they live, in ``indices``' order
        (a diversity penalty's features of its candidates)."""
        raise NotImplementedError


class _ArrayChunks(ChunkedPool):
    """A pool in memory, read chunk by chunk in this process: the reference driver."""

    def __init__(self, X_pool, chunk_rows: int, *, exclude=None, aligned: Optional[dict] = None):
        self.X = check_pool(X_pool)
        n, size = len(self.X), check_positive_int(chunk_rows, "chunk_rows")
        pool_kwargs(dict(aligned or {}), n)
        super().__init__([min(size, n - s) for s in range(0, n, size)], exclude=exclude, aligned=aligned)

    def round(self, request, chunks=None, inputs=None):
        self.report["rounds"] += 1
        for b in range(self.n_chunks) if chunks is None else sorted(chunks):
            sl = slice(int(self.offsets[b]), int(self.offsets[b + 1]))
            aligned = {name: np.asarray(self.aligned[name])[sl] for name in self.plan.aligned_keywords}
            chunk = PoolChunk.of(take_rows(self.X, sl), sl.start, self.excluded_in(b), aligned,
                                 None if inputs is None else inputs(b))
            yield b, self.plan.keep(chunk, self.plan.score_chunk(chunk), request)

    def rows(self, indices):
        return take_rows(self.X, np.asarray(indices, dtype=np.intp))

    def map_rows(self, indices, method):
        return getattr(self.plan, method)(self.rows(indices))


def acquire_in_chunks(strategy, estimator, X_pool, n_instances: int = 1, *, chunk_rows: int = 2048, exclude=None,
                      n_candidates: Optional[int] = None, random_state=None, **kwargs) -> Acquisition:
    """Query ``X_pool`` as a cluster would, chunk by chunk, in this process.

    The strategy's :class:`ChunkPlan` scores and reduces each chunk of
    ``chunk_rows`` rows, then merges their candidates, exactly as
    :func:`skdbal.dask.query_pool` does on workers; the result is that of
    :meth:`Strategy.acquire <skdbal.acquisition.base.Strategy.acquire>` on the
    rows not excluded, with pool indices, wherever the cluster's is exact. Use
    it to try a strategy of your own before a cluster runs it.

    Parameters
    ----------
    strategy : Strategy or callable
        A strategy whose :meth:`~skdbal.acquisition.base.Strategy.plan_chunks`
        gives a plan; the others are refused with a ``TypeError`` naming them.
    estimator : estimator
        A fitted model.
    X_pool : array-like of shape (N, ...)
    n_instances : int, default=1
    chunk_rows : int, default=2048
        Rows per chunk.
    exclude : array-like of int, optional
        Pool indices that may not be picked.
    n_candidates : int, optional
        As for :func:`skdbal.dask.query_pool`.
    random_state : int, RandomState instance or None, default=None
    **kwargs :
        The strategy's options and pool-aligned keywords (``y_pool``).

    Returns
    -------
    Acquisition

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.acquisition import bald
    >>> from skdbal.acquisition.base import acquire_among, acquire_in_chunks
    >>> class Passes:                                  # two passes that disagree on odd rows
    ...     def predict_proba_samples(self, X, n_samples=None):
    ...         x = np.asarray(X, dtype=float)[:, 0]
    ...         p = np.stack([0.5 + 0.4 * np.sin(x), 0.5 - 0.4 * np.sin(x) * (x % 2)])
    ...         return np.stack([p, 1 - p], axis=-1)
    ...     row_keyed_samples = True
    >>> X = np.arange(20.0)[:, None]
    >>> acq = acquire_in_chunks(bald, Passes(), X, 3, chunk_rows=6, exclude=[1, 3])
    >>> rest = np.setdiff1d(np.arange(20), [1, 3])
    >>> acq.indices.tolist() == acquire_among(bald, Passes(), X, rest, 3).indices.tolist()
    True
    """
    aligned = {k: kwargs.pop(k) for k in [k for k in kwargs if k.endswith("_pool")]}
    pool = _ArrayChunks(X_pool, chunk_rows, exclude=exclude, aligned=aligned)
    return pool.acquire(strategy, estimator, n_instances, n_candidates=n_candidates, random_state=random_state,
                        **kwargs)

