"""Scoring a pool where it lives: each worker reads, scores and reduces its own chunks.

:func:`query_pool` is :meth:`~skdbal.acquisition.base.Strategy.acquire` for a pool
that is a :class:`dask.array.Array` (a Zarr array on a shared disk or an
object store, :func:`~skdbal.dask.open_pool`) on a ``dask.distributed``
cluster. The client never loads the pool:

1. the estimator and the strategy (with EPIG's target inputs) are pickled
   once; the bytes are scattered to every worker, and each worker unpickles
   them once and keeps the plan until the query ends;
2. one task per row chunk reads the chunk, scores it and returns only its
   best candidates (with their scores, the noise filter's ``p̄(y | x)``, and
   the chunk's count, minimum and maximum), so the client holds
   ``O(m × tasks)`` numbers, never ``O(N)``;
3. the client merges them; where the exact answer needs more of a chunk than
   it sent (a diversity penalty's candidates, a filter's rejects), only
   that chunk is scored again, for what lies above a known score.

What is exact (the single-process result, index for index):

- pointwise strategies (BALD, max entropy, variation ratios, mean std, your
  :class:`~skdbal.acquisition.base.MeasureStrategy`) and EPIG, whose target
  inputs are drawn on the client exactly as a local query draws them;
- random sampling (its scores are drawn on the client, block by block, from
  the same stream);
- the noise filter with a fixed threshold ``τ``, with its rejects and fill;
- stochastic batches (``"power"``, ``"softmax"``) over a pointwise strategy
  or EPIG: the Gumbel-top-k of the pool is the top ``k`` of each chunk's top
  ``k``, and the client draws the local query's Gumbel noise in pool order,
  sending each chunk its slice with its task, a few tasks at a time;
- the diversity penalty over either of them: its scores are normalised by
  the minimum and maximum over every chunk, and every candidate above
  :func:`skdbal.acquisition.kernels.candidate_bound` is gathered.

What is approximate, and says so in ``info["dask"]["exact"]``:

- a model whose samples of a row depend on the rows sampled with it (not
  ``row_keyed`` in :mod:`skdbal.predictive`: an MC-dropout net with
  ``mask_seeding="stream"`` or without an int ``random_state``, a third-party
  sampler that does not say): each chunk draws its own samples, so the
  picks are valid but change with the chunking; it warns (BatchBALD is
  exact or not by its candidates alone);
- BatchBALD chooses among the ``n_candidates`` points of highest BALD (a
  pre-selection, as baal and batchbald_redux do), exact only when that is the
  whole pool.

What is refused: the noise filter's pool-wide rules (``"dynamic"``,
``"quantile"``, ``"batch"``, a callable), which read ``p̄(y | x)`` of the
whole pool, stochastic batches under ``"softrank"`` (a rank in the whole
pool) or around a noise filter, BADGE, DDU and plain callables; and
``random_tie_break``, whose permutation of the pool is drawn on one machine.

Picks do not depend on the number of workers or on the chunking: ties go to
the lower pool index, and an MC-dropout model with an int ``random_state``
seeds each row's masks from the row itself (``mask_seeding="row_pcg64"``, the default, or ``"row"``).
"""
from __future__ import annotations

import contextlib
import pickle
import threading
import time
import uuid
from collections import OrderedDict
import warnings
from typing import Optional

import numpy as np
from sklearn.utils import check_random_state

from ..acquisition import _diversity as _div
from ..acquisition import _stochastic
from .._validation import check_n_instances, check_positive_int, label_columns
from ..acquisition import BALD, BatchBALD, DiversityPenalty, NoiseFilter, RandomSampling, StochasticBatch
from ..acquisition.base import Acquisition, SamplesStrategy, Strategy, as_strategy, map_chunks
from ..acquisition._strategy import check_options, warn_fill
from ..acquisition._epig import EPIG
from ..acquisition._noise import _FILL_WORDS, _FilterChunk, _plain_measure
from ..acquisition._stochastic import _score_and_draw_seeds
from ..predictive import as_predictive

__all__ = ["query_pool"]

#: Rows of random scores drawn on the client at a time (random sampling).
_RANDOM_BLOCK = 1 << 20


def _ranked(idx, scores):
    """Positions that sort ``(idx, scores)`` best first: larger score, then lower index."""
    return np.lexsort((idx, -scores))


def _above(scores, idx, score, index):
    """Whether each point ranks above the point ``(score, index)``."""
    return (scores > score) | ((scores == score) & (idx < index))


class _Plan:
    """Everything a worker needs to score a chunk: sent to each worker once."""

    def __init__(self, estimator, base, *, options, noise_n_samples=None, tau=None, X_target=None, features=None):
        self.estimator = estimator
        self.base = base
        self.options = options
        self.noise_n_samples = noise_n_samples
        self.tau = tau
        self.X_target = X_target
        self.features = features  # a DiversityPenalty, whose _features_of is used

    def score(self, X, y=None):
        """``(scores, p̄(y | x) or None)`` of the rows ``X``."""
        opts = dict(self.options, n_jobs=None)
        if self.X_target is not None:
            opts["X_target"] = self.X_target
        if y is None:
            return np.asarray(self.base.score(self.estimator, X, **opts), dtype=np.float64), None
        predictive = as_predictive(self.estimator, n_samples=self.noise_n_samples)
        y_idx = label_columns(predictive.classes, np.asarray(y).reshape(-1), "y_pool",
                              classes_name="the model's classes")
        chunk_size = opts.get("chunk_size") or self.base.chunk_size
        if _plain_measure(self.base):  # the strategy's score and p̄(y | x) from the same samples
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # said once on the client
                scorer = _FilterChunk(predictive, self.base.measure_for(predictive))
            return map_chunks(scorer, X, chunk_size=chunk_size, aligned={"y": y_idx})
        scores = np.asarray(self.base.score(self.estimator, X, **opts), dtype=np.float64)
        return scores, map_chunks(_FilterChunk(predictive, None), X, chunk_size=chunk_size, aligned={"y": y_idx})

    def features_of(self, X):
        return self.features._features_of(self.estimator, X)


def _top(keep, idx, scores, m, min_score):
    """The best ``m`` of the points ``keep`` at or above ``min_score``, and whether more were left out."""
    sel = keep if min_score is None else keep & (scores >= min_score)
    i, s = idx[sel], scores[sel]
    order = _ranked(i, s)
    if m is not None and len(order) > m:
        return order[:m], True, sel
    return order, False, sel


#: The plans this worker process has unpickled, by query token, the most recently used last. A query
#: drops its own when it ends; a query whose client died never does, so only the latest few are kept.
_PLANS: "OrderedDict[str, _Plan]" = OrderedDict()
_PLANS_LOCK = threading.Lock()
_PLANS_KEPT = 4
#: The tokens of queries that ended here (the latest 256): a task of one of them that still runs, or
#: starts after its query was cancelled, fails instead of unpickling the plan again.
_ENDED: "OrderedDict[str, None]" = OrderedDict()


def _plan_for(ref) -> "_Plan":
    """The plan of ``ref = (token, its bytes)``, unpickled once per worker process and kept there.

    The bytes arrive as the task's dependency (dask moves them like any data, to workers that join
    later too); one thread unpickles them while the others of the process wait for it."""
    token, blob = ref
    with _PLANS_LOCK:
        plan = _PLANS.get(token)
        if plan is None and token in _ENDED:
            raise RuntimeError(f"the query {token} has ended: its plan was dropped")
        if plan is None:
            plan = _PLANS[token] = pickle.loads(blob)
            while len(_PLANS) > _PLANS_KEPT:
                _PLANS.popitem(last=False)
        _PLANS.move_to_end(token)
        return plan


def _drop_plan(token: str) -> None:
    with _PLANS_LOCK:
        _PLANS.pop(token, None)
        _ENDED[token] = None
        while len(_ENDED) > 256:
            _ENDED.popitem(last=False)


@contextlib.contextmanager
def _plan_on_workers(client, plan: "_Plan", info: dict):
    """Inside, ``ref``: what each task is given to find the plan (:func:`_plan_for`).

    The plan is pickled once, here (with cloudpickle, as distributed pickles, so that a model class
    defined in ``__main__`` or a notebook goes by value), and its *bytes* are scattered to every
    worker. The scheduler's active memory manager drops replicas that no task waits for (within
    seconds, between two rounds of a query); a worker that needs the plan again then fetches the
    bytes, never a live network, which a peer would have to pickle, perhaps while one of its threads
    scores with it (the row-keyed dropout hooks then failed to pickle and the query hung). Each
    worker unpickles the bytes once, whatever the number of tasks and rounds."""
    import cloudpickle

    token = f"skdbal-plan-{uuid.uuid4().hex}"
    t0 = time.perf_counter()
    blob = cloudpickle.dumps(plan, protocol=pickle.HIGHEST_PROTOCOL)
    blob_f = client.scatter(blob, broadcast=True, hash=False)
    info["scatter_s"] = time.perf_counter() - t0
    try:
        yield (token, blob_f)
    finally:
        client.cancel([blob_f])
        try:
            client.run(_drop_plan, token)
        except Exception:  # a worker that is gone holds nothing; never hide the query's own error
            pass


def _chunk_rows(X, offset, excluded):
    """A chunk as an array, its rows' pool indices, and which of them are not excluded."""
    X = np.asarray(X)
    idx = np.arange(offset, offset + len(X), dtype=np.int64)
    valid = np.ones(len(X), dtype=bool)
    valid[np.asarray(excluded, dtype=np.intp)] = False
    return X, idx, valid


def _block_summary(X, offset, ref, y, excluded, m_e, min_e, m_i, min_i, k_fill):
    """One chunk scored and reduced to its candidates (runs on a worker)."""
    plan = _plan_for(ref)
    X, idx, valid = _chunk_rows(X, offset, excluded)
    scores, p_label = plan.score(X, y)
    eligible = valid if p_label is None else valid & (p_label >= plan.tau)
    out = {"n_eligible": int(eligible.sum())}
    es = scores[eligible]
    out["lo"], out["hi"] = (float(es.min()), float(es.max())) if len(es) else (np.inf, -np.inf)
    order, out["e_more"], sel = _top(eligible, idx, scores, m_e, min_e)
    out["e_idx"], out["e_score"] = idx[sel][order], scores[sel][order]
    if p_label is not None:
        inel = valid & ~eligible
        order, out["i_more"], sel = _top(inel, idx, scores, m_i, min_i)
        out["i_idx"], out["i_score"] = idx[sel][order], scores[sel][order]
        fi, fp, fs = idx[inel], p_label[inel], scores[inel]
        order = np.lexsort((fi, -fp))[:k_fill]  # the fill: highest p̄(y | x), then lower index
        out["f_idx"], out["f_plabel"], out["f_score"] = fi[order], fp[order], fs[order]
    return out


def _block_stochastic(X, offset, ref, excluded, gumbel, mode, beta, k):
    """One chunk's best ``k`` points by perturbed log weight ``log w + g`` (``gumbel``: the noise of the
    chunk's rows not excluded, in order, from the query's stream), and its best ``k`` of weight 0 by score,
    which a draw reaches only when the others run out (runs on a worker)."""
    X, idx, valid = _chunk_rows(X, offset, excluded)
    scores = _plan_for(ref).score(X)[0][valid]
    idx = idx[valid]
    key = _stochastic.log_weights(scores, mode, beta) + gumbel
    out = {}
    for name, sel, by in (("w", np.isfinite(key), key), ("z", ~np.isfinite(key), scores)):
        i, b, sc = idx[sel], by[sel], scores[sel]
        o = _ranked(i, b)[:k]
        out[name] = (i[o], b[o], sc[o])
    return out


def _block_features(X, ref, rows):
    """The diversity features of the chunk's rows ``rows`` (runs on a worker)."""
    return _plan_for(ref).features_of(np.asarray(X)[np.asarray(rows, dtype=np.intp)])


def _check_pool(X):
    import dask.array as da

    if not isinstance(X, da.Array):
        raise TypeError(f"query_pool scores a dask array (skdbal.dask.open_pool); got {type(X).__name__}: "
                        "for an array in memory use the strategy itself")
    if X.ndim < 2 or X.shape[0] == 0 or any(np.isnan(c) for c in X.shape):
        raise ValueError(f"the pool must have shape (N, ...) with N >= 1 known rows and at least 2 dimensions; "
                         f"got {X.shape}")
    if X.dtype.kind not in "biuf":
        raise TypeError(f"the pool must be numeric; got dtype {X.dtype}")
    if any(len(c) > 1 for c in X.chunks[1:]):
        X = X.rechunk((X.chunks[0],) + tuple(-1 for _ in X.shape[1:]))
    return X


def _check_exclude(exclude, n):
    if exclude is None:
        return np.zeros(0, dtype=np.int64)
    ex = np.asarray(exclude).reshape(-1)
    if len(ex) and ex.dtype.kind not in "iu":
        raise TypeError(f"exclude must be integer pool indices; got dtype {ex.dtype}")
    ex = np.unique(ex.astype(np.int64))
    if len(ex) and (ex[0] < 0 or ex[-1] >= n):
        raise ValueError(f"exclude must lie in [0, {n}); got {ex[0] if ex[0] < 0 else ex[-1]}")
    return ex


def _kept_to_global(positions, excluded) -> np.ndarray:
    """Pool indices of the ``positions``-th points that are not ``excluded`` (both sorted)."""
    positions = np.asarray(positions, dtype=np.int64)
    g = positions.copy()
    while True:
        g_next = positions + np.searchsorted(excluded, g, side="right")
        if np.array_equal(g_next, g):
            return g
        g = g_next


def _unwrap(strategy):
    """``(diversity, noise, base, kind)`` of a supported stack; refuses the others by name."""
    s = as_strategy(strategy)
    div = noise = None
    if isinstance(s, DiversityPenalty):
        s._check_params()
        div, s = s, as_strategy(s.strategy)
    if isinstance(s, NoiseFilter):
        t = s.threshold
        if isinstance(t, bool) or not isinstance(t, (int, float, np.integer, np.floating)) or not 0 < t < 1:
            raise ValueError(
                f"on a distributed pool the noise filter needs a float threshold in (0, 1); got {t!r}: the rules "
                "'dynamic', 'quantile', 'batch' and a callable read p(y | x) of the whole pool at once")
        noise, s = s, as_strategy(s.strategy)
    if isinstance(s, SamplesStrategy) and type(s).select is Strategy.select:
        kind = "pointwise"
    elif isinstance(s, RandomSampling) and div is None and noise is None:
        kind = "random"
    elif isinstance(s, BatchBALD) and div is None and noise is None:
        kind = "batch_bald"
    else:
        inside = " inside a decorator" if (div or noise) and isinstance(s, (RandomSampling, BatchBALD)) else ""
        raise TypeError(
            f"query_pool scores pointwise strategies (BALD, max entropy, variation ratios, mean std, EPIG, "
            f"MeasureStrategy), random sampling and BatchBALD, under a noise filter and a diversity penalty, "
            f"and stochastic batches over a pointwise strategy; not {type(s).__name__}{inside}")
    return div, noise, s, kind


def _concat(parts, key, dtype=np.float64):
    arrays = [p[key] for p in parts if key in p]
    return np.concatenate(arrays) if arrays else np.zeros(0, dtype=dtype)


def query_pool(strategy, estimator, X, n_instances: int = 1, *, client=None, y_pool=None, exclude=None,
               n_candidates: Optional[int] = None, random_state=None, **options) -> Acquisition:
    """Query a pool that lives on a Dask cluster; the client never loads it.

    See the module docstring for what is exact and what is approximate.

    Parameters
    ----------
    strategy : Strategy
        A pointwise strategy, EPIG, random sampling or BatchBALD, optionally
        under :class:`~skdbal.acquisition.NoiseFilter` (a float threshold)
        and :class:`~skdbal.acquisition.DiversityPenalty`; or
        :class:`~skdbal.acquisition.StochasticBatch` (``"power"`` or
        ``"softmax"``) over a pointwise strategy or EPIG.
    estimator : estimator
        A fitted model, read through :func:`~skdbal.predictive.as_predictive`.
        It must pickle: it is sent to every worker once.
    X : dask.array.Array of shape (N, ...)
        The pool, chunked by rows: each chunk is one task.
    n_instances : int, default=1
    client : distributed.Client, optional
        By default the current client (:func:`distributed.get_client`).
    y_pool : array-like of shape (N,), optional
        The annotator's labels of the pool, for the noise filter (a dask
        array is read chunk by chunk).
    exclude : array-like of int, optional
        Pool indices that may not be picked (those already labelled).
    n_candidates : int, optional
        Candidates each chunk sends for a diversity penalty (its own
        ``n_candidates`` when it sets one, else
        ``max(10 · n_instances, 1000)``; more are fetched when the exact
        batch needs them) or BatchBALD's pre-selection (default
        ``max(100 · n_instances, 1000)``).
    random_state : int, RandomState instance or None, default=None
        As for :meth:`~skdbal.acquisition.base.Strategy.acquire`.
    **options :
        The strategy's own options (``n_samples``, ``chunk_size``, ...).

    Returns
    -------
    Acquisition
        With indices into the pool; ``info["dask"]`` says whether it is
        exact, how many tasks and rounds it took, how many candidates
        reached the client, and the seconds spent sending the model and
        scoring.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> from distributed import Client, LocalCluster
    >>> from sklearn.linear_model import LogisticRegression
    >>> from skdbal.acquisition import max_entropy
    >>> from skdbal.dask import query_pool
    >>> X = np.linspace(-3, 3, 40)[:, None]
    >>> clf = LogisticRegression().fit(X, (X[:, 0] > 0).astype(int))
    >>> with LocalCluster(n_workers=2, processes=False, dashboard_address=None) as cluster, \\
    ...         Client(cluster) as client:
    ...     acq = query_pool(max_entropy, clf, da.from_array(X, chunks=7), 2, client=client)
    >>> acq.indices.tolist() == max_entropy(clf, X, 2)[0].tolist(), acq.info["dask"]["exact"]
    (True, True)
    """
    import dask
    from distributed import as_completed, get_client

    X = _check_pool(X)
    N = int(X.shape[0])
    excluded = _check_exclude(exclude, N)
    n_valid = N - len(excluded)
    if n_valid == 0:
        raise ValueError("every pool point is excluded: nothing to query")
    k = check_n_instances(n_instances, n_valid)
    if options.pop("random_tie_break", False):
        raise ValueError("random_tie_break draws a permutation of the whole pool on one machine; on a "
                         "distributed pool ties go to the lower index")
    check_options(as_strategy(strategy), dict(options, **({"y_pool": None} if y_pool is not None else {})))
    options.pop("n_jobs", None)
    stoch = as_strategy(strategy)
    if isinstance(stoch, StochasticBatch):
        stoch._check_params()
        if stoch.mode == "softrank":
            raise ValueError("on a distributed pool stochastic batches take mode 'power' or 'softmax': "
                             "'softrank' weighs a point by its rank in the whole pool")
        strategy = stoch.strategy
    else:
        stoch = None
    div, noise, base, kind = _unwrap(strategy)
    if stoch is not None and (div is not None or noise is not None or kind != "pointwise"):
        raise TypeError(
            f"on a distributed pool stochastic batches sample from a pointwise strategy's scores (BALD, max "
            f"entropy, ..., EPIG), not from {type(as_strategy(strategy)).__name__}: under a noise filter the "
            f"draw's noise would follow the trusted points of earlier chunks, known only after scoring them all")
    if stoch is not None:  # the local query's two streams of one seed: the scores' and the draw's
        random_state, draw_seed = _score_and_draw_seeds(random_state)
    if n_candidates is not None:
        n_candidates = check_positive_int(n_candidates, "n_candidates")
    info = {"tasks": int(len(X.chunks[0])), "rounds": 0, "exact": True, "candidates": 0}

    if kind == "random":  # the local scores, drawn on the client from the same stream, block by block
        rng = check_random_state(random_state)
        best_i, best_s = np.zeros(0, np.int64), np.zeros(0)
        for start in range(0, n_valid, _RANDOM_BLOCK):
            s = rng.random_sample(min(_RANDOM_BLOCK, n_valid - start))
            i = np.concatenate([best_i, np.arange(start, start + len(s))])
            s = np.concatenate([best_s, s])
            o = _ranked(i, s)[:k]
            best_i, best_s = i[o], s[o]
        return Acquisition(_kept_to_global(best_i, excluded).astype(np.intp), best_s, {"dask": info})

    client = get_client() if client is None else client
    if noise is not None and y_pool is None:
        raise ValueError("noise_filter needs y_pool: the annotator's labels of the pool, row by row")
    score_base = base if kind == "pointwise" else BALD(n_samples=base.n_samples)
    opts = {key: v for key, v in options.items() if key in ("n_samples", "chunk_size", "n_targets", "X_target")}
    if kind == "batch_bald":
        opts = {key: v for key, v in opts.items() if key == "n_samples"}
    predictive = as_predictive(estimator, n_samples=opts.get("n_samples", getattr(score_base, "n_samples", None)))
    if isinstance(score_base, SamplesStrategy) and not isinstance(score_base, EPIG):
        score_base.measure_for(predictive)  # its warning (a constant score) once, here
    if not predictive.row_keyed and kind != "batch_bald":  # BatchBALD: exact or not by its candidates
        info["exact"] = False
        warnings.warn(
            f"{predictive.name}'s samples of a row depend on the other rows sampled with it (they are not "
            f"row-keyed: see skdbal.predictive), so each chunk draws its own: the picks are a valid query but "
            f"not the single process's, and they change with the chunking (info['dask']['exact'] is False). "
            f"For an MC-dropout model give an int random_state and mask_seeding='row_pcg64' or 'row'",
            UserWarning, stacklevel=2)
    X_target = None
    if isinstance(score_base, EPIG):  # the targets a local query would draw from the points not excluded
        X_target = opts.pop("X_target", None)
        if X_target is None and score_base.target is None:
            n_t = check_positive_int(score_base.n_targets if opts.get("n_targets") is None else opts["n_targets"],
                                     "n_targets")
            rows = np.sort(check_random_state(random_state).choice(n_valid, size=min(n_t, n_valid), replace=False))
            X_target = client.compute(X[_kept_to_global(rows, excluded)]).result()
        opts.pop("n_targets", None)
        opts["random_state"] = random_state
    noise_T = noise._n_samples(options) if noise is not None else None
    plan = _Plan(estimator, score_base, options=opts, noise_n_samples=noise_T,
                 tau=None if noise is None else float(noise.threshold), X_target=X_target, features=div)

    blocks = X.to_delayed().reshape(len(X.chunks[0]), -1)[:, 0]
    offsets = np.concatenate([[0], np.cumsum(X.chunks[0])]).astype(np.int64)
    if y_pool is not None and noise is not None:
        import dask.array as da

        y_arr = y_pool if isinstance(y_pool, da.Array) else da.from_array(np.asarray(y_pool), chunks=X.chunks[0][0])
        if y_arr.ndim != 1 or y_arr.shape[0] != N:
            raise ValueError(f"y_pool must have shape ({N},): one label per pool row; got {y_arr.shape}")
        y_blocks = y_arr.rechunk((X.chunks[0],)).to_delayed().ravel()
    else:
        y_blocks = [None] * len(blocks)
    ex_blocks = [excluded[np.searchsorted(excluded, a):np.searchsorted(excluded, b)] - a
                 for a, b in zip(offsets[:-1], offsets[1:])]

    if div is not None:
        m_e = max(div.n_candidates, k) if div.n_candidates is not None else \
            (n_candidates if n_candidates is not None else max(10 * k, 1000))
    elif kind == "batch_bald":
        m_e = n_candidates if n_candidates is not None else max(100 * k, 1000)
    else:
        m_e = k

    with _plan_on_workers(client, plan, info) as ref:
        if stoch is not None:
            return _stochastic_rest(client, ref, blocks, offsets, ex_blocks, stoch, k,
                                    np.random.RandomState(draw_seed), info)

        def run(which, m_e, min_e, m_i, min_i):
            t = time.perf_counter()
            tasks = [dask.delayed(_block_summary, pure=False)(blocks[b], int(offsets[b]), ref, y_blocks[b],
                                                               ex_blocks[b], m_e, min_e, m_i, min_i, k)
                     for b in which]
            futures = client.compute(tasks)
            pos = {f.key: b for f, b in zip(futures, which)}
            got = {}
            try:
                for fut, res in as_completed(futures, with_results=True):
                    got[pos[fut.key]] = res
            except BaseException:  # one chunk failed: the others are not left running
                client.cancel(futures)
                raise
            info["rounds"] += 1
            info["score_s"] = info.get("score_s", 0.0) + time.perf_counter() - t
            return got

        nb = len(blocks)
        parts = run(range(nb), m_e, None, k, None)

        def merged(key_idx, key_score):
            ps = [parts[b] for b in range(nb)]
            i, s = _concat(ps, key_idx, np.int64), _concat(ps, key_score)
            o = _ranked(i, s)
            return i[o], s[o]

        n_eligible = sum(p["n_eligible"] for p in parts.values())
        e_i, e_s = merged("e_idx", "e_score")

        if kind == "batch_bald":
            cand = np.sort(e_i[:m_e])  # the global top m_e by BALD, in pool order
            info["exact"] = len(cand) == n_valid  # the whole pool: the local call itself, on the client
            info["candidates"] = int(len(cand))
            acq = base.acquire(estimator, client.compute(X[cand]).result(), k, random_state=random_state,
                               **{key: v for key, v in options.items() if key != "n_candidates"})
            return Acquisition(cand[acq.indices].astype(np.intp), acq.scores,
                               {**acq.info, "n_candidates": int(len(cand)), "dask": info})

        out_info = {}
        picks_s = None
        if div is None or n_eligible < k:
            picks, picks_s = e_i[:k], e_s[:k]
        else:
            lo = min(p["lo"] for p in parts.values())
            hi = max(p["hi"] for p in parts.values())
            s_norm = _div.normalize_scores(e_s, reference=[lo, hi])
            bound = _div.candidate_bound(s_norm, k, div.weight)
            if div.n_candidates is None:
                # a chunk that sent all it was asked for may hold more candidates above the bound
                thr = lo + bound * (hi - lo) if hi > lo else -np.inf
                short = [b for b in range(nb) if parts[b]["e_more"]
                         and _div.normalize_scores(parts[b]["e_score"][-1:], reference=[lo, hi])[0] >= bound]
                if short:
                    margin = 1e-9 * max(abs(lo), abs(hi), 1.0)
                    again = run(short, None, thr - margin, k, None)
                    for b, res in again.items():
                        parts[b].update({key: res[key] for key in ("e_idx", "e_score", "e_more")})
                    e_i, e_s = merged("e_idx", "e_score")
                    s_norm = _div.normalize_scores(e_s, reference=[lo, hi])
            keep = s_norm >= bound
            if div.n_candidates is not None:
                keep &= np.arange(len(e_i)) < max(int(div.n_candidates), k)
            cand, s_c = e_i[keep], s_norm[keep]
            F = _gather_features(client, blocks, offsets, ref, cand)
            pos, _ = _div.greedy_cosine_batch(s_c, F, k, div.weight)
            picks, picks_s = cand[pos], e_s[keep][pos]
            out_info["n_candidates"] = int(len(cand))
            info["candidates"] = int(len(cand))

        if noise is not None:
            out_info = {"threshold": float(noise.threshold), **out_info}
            picks, picks_s, rej, n_filled = _noise_rest(parts, nb, run, picks, picks_s, k, n_eligible, n_valid,
                                                        noise.threshold, "DiversityPenalty" if div else "noise_filter",
                                                        div is None)
            out_info.update({"n_rejected": int(len(rej)), "rejected_indices": np.asarray(rej, dtype=np.intp), "n_filled": int(n_filled)})
        info["candidates"] = max(info["candidates"], int(len(e_i)))
        out_info["dask"] = info
        return Acquisition(np.asarray(picks, dtype=np.intp), np.asarray(picks_s, dtype=np.float64), out_info)


def _stochastic_rest(client, ref, blocks, offsets, ex_blocks, stoch, k, rng, info):
    """The draw of :class:`~skdbal.acquisition.StochasticBatch`, exact: the Gumbel-top-k of the whole pool
    is the top ``k`` of each chunk's top ``k``. The noise of the rows not excluded comes from the local
    query's stream, drawn here in pool order and sent with each chunk's task, a bounded number of tasks at
    a time, so the client holds the noise of those tasks and ``O(k)`` candidates, never ``O(N)``."""
    import dask
    from distributed import as_completed

    t = time.perf_counter()
    window = max(4, 2 * sum(client.nthreads().values()))
    best = {"w": (np.zeros(0, np.int64), np.zeros(0), np.zeros(0)),
            "z": (np.zeros(0, np.int64), np.zeros(0), np.zeros(0))}
    queue = as_completed(with_results=True)
    nb = len(blocks)
    received = 0

    def submit(b):
        g = rng.gumbel(size=int(offsets[b + 1] - offsets[b]) - len(ex_blocks[b]))
        task = dask.delayed(_block_stochastic, pure=False)(blocks[b], int(offsets[b]), ref, ex_blocks[b], g,
                                                            stoch.mode, float(stoch.beta), k)
        queue.add(client.compute(task))

    for b in range(min(window, nb)):
        submit(b)
    nxt = min(window, nb)
    try:
        for _, res in queue:
            received += sum(len(res[name][0]) for name in best)
            for name in best:
                i, b_, sc = (np.concatenate([a, r]) for a, r in zip(best[name], res[name]))
                o = _ranked(i, b_)[:k]
                best[name] = (i[o], b_[o], sc[o])
            if nxt < nb:
                submit(nxt)
                nxt += 1
    except BaseException:  # one chunk failed: the tasks in flight are not left running
        client.cancel(list(queue.futures))
        raise
    info["rounds"] += 1
    info["score_s"] = time.perf_counter() - t
    picks = np.concatenate([best["w"][0], best["z"][0]])[:k]
    scores = np.concatenate([best["w"][2], best["z"][2]])[:k]
    info["candidates"] = int(received)
    return Acquisition(picks.astype(np.intp), scores.astype(np.float64),
                       {"mode": stoch.mode, "beta": float(stoch.beta), "dask": info})


def _gather_features(client, blocks, offsets, ref, cand):
    """The features of ``cand``, read by the workers that hold their chunks, in ``cand``'s order."""
    import dask

    b_of = np.searchsorted(offsets, cand, side="right") - 1
    tasks, where = [], []
    for b in np.unique(b_of):
        rows = np.flatnonzero(b_of == b)
        tasks.append(dask.delayed(_block_features, pure=False)(blocks[b], ref, cand[rows] - offsets[b]))
        where.append(rows)
    futures = client.compute(tasks)
    try:
        parts = client.gather(futures)
    except BaseException:
        client.cancel(futures)
        raise
    F = None
    for rows, f in zip(where, parts):
        f = np.asarray(f).reshape(len(rows), -1)
        if F is None:
            F = np.empty((len(cand), f.shape[1]), dtype=np.float64)
        F[rows] = f
    return F


def _noise_rest(parts, nb, run, picks, picks_s, k, n_eligible, n_valid, tau, who, plain):
    """The filter's rejects (ineligible points ranked above the lowest-ranked pick) and fill, as locally."""
    short = len(picks) < k
    if short or not len(picks):
        low = None  # every ineligible point was passed over
    else:
        o = _ranked(np.asarray(picks), np.asarray(picks_s))[-1]
        low = (float(picks_s[o]), int(picks[o]))
    # a chunk that sent all it was asked for may hold more rejects above the lowest pick
    need = [b for b in range(nb) if parts[b]["i_more"] and (
        low is None or _above(parts[b]["i_score"][-1:], parts[b]["i_idx"][-1:], *low)[0])]
    if need:
        again = run(need, 0, None, None, None if low is None else low[0])
        for b, res in again.items():
            parts[b].update({key: res[key] for key in ("i_idx", "i_score", "i_more")})
    ps = [parts[b] for b in range(nb)]
    i_i, i_s = _concat(ps, "i_idx", np.int64), _concat(ps, "i_score")
    o = _ranked(i_i, i_s)
    i_i, i_s = i_i[o], i_s[o]
    rej = i_i if low is None else i_i[_above(i_s, i_i, *low)]
    n_filled = k - len(picks)
    if n_filled > 0:
        warn_fill(who, n_eligible, n_valid, n_filled, tau, *(_FILL_WORDS if plain else ()), stacklevel=3)
        f_i, f_p, f_s = _concat(ps, "f_idx", np.int64), _concat(ps, "f_plabel"), _concat(ps, "f_score")
        o = np.lexsort((f_i, -f_p))[:n_filled]
        picks = np.concatenate([np.asarray(picks, dtype=np.int64), f_i[o]])
        picks_s = np.concatenate([np.asarray(picks_s, dtype=np.float64), f_s[o]])
        rej = rej[~np.isin(rej, picks)]
    return picks, picks_s, rej, max(n_filled, 0)
