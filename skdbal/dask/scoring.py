"""Scoring a pool where it lives: each worker reads, scores and reduces its own chunks.

:func:`query_pool` is :meth:`~skdbal.acquisition.base.Strategy.acquire` for a pool
that is a :class:`dask.array.Array` (a Zarr array on a shared disk or an
object store, :func:`~skdbal.dask.open_pool`) on a ``dask.distributed``
cluster. The client never loads the pool. It runs the strategy's
:class:`~skdbal.acquisition.base.ChunkPlan` (:meth:`Strategy.plan_chunks
<skdbal.acquisition.base.Strategy.plan_chunks>`), and knows no strategy by its
type: a strategy of your own with a plan (every
:class:`~skdbal.acquisition.base.SamplesStrategy` has one) runs here unchanged.

1. the plan (the estimator, the strategy, and what the query drew on the
   client, such as EPIG's target inputs) is pickled once; the bytes are
   scattered to every worker, and each worker unpickles them once and keeps
   the plan until the query ends;
2. one task per row chunk reads the chunk, scores it
   (:meth:`~skdbal.acquisition.base.ChunkPlan.score_chunk`) and returns only
   its candidates (:meth:`~skdbal.acquisition.base.ChunkPlan.keep`), so the
   client holds ``O(m × tasks)`` numbers, never ``O(N)``;
3. the client merges them (:meth:`~skdbal.acquisition.base.ChunkPlan.merge`);
   where the exact answer needs more of a chunk than it sent (a diversity
   penalty's candidates, a filter's rejects), only that chunk is scored
   again, and what the plan computes of given rows (a diversity penalty's
   features) is computed by the workers that hold them.

What is exact (the single-process result, index for index):

- pointwise strategies (BALD, max entropy, variation ratios, mean std, your
  :class:`~skdbal.acquisition.base.SamplesStrategy` or
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
  :func:`skdbal.acquisition.functional.candidate_bound` is gathered.

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

What is refused, by the strategy's plan and with its name: the noise
filter's pool-wide rules (``"dynamic"``, ``"quantile"``, ``"batch"``, a
callable), which read ``p̄(y | x)`` of the whole pool, stochastic batches
under ``"softrank"`` (a rank in the whole pool) or around a noise filter,
BADGE, DDU, plain callables and any strategy without a plan; and
``random_tie_break``, whose permutation of the pool is drawn on one machine.

Picks do not depend on the number of workers or on the chunking: ties go to
the lower pool index, and an MC-dropout model with an int ``random_state``
seeds each row's masks from the row itself (``mask_seeding="auto"``, the default,
``"row_pcg64"``, ``"row_philox"`` or ``"row"``).
"""
from __future__ import annotations

import contextlib
import itertools
import pickle
import threading
import time
import uuid
from collections import OrderedDict
from typing import Optional

import numpy as np

from .._validation import check_pool
from ..acquisition.base import Acquisition, ChunkedPool, ChunkPlan, PoolChunk

__all__ = ["query_pool", "acquire_among"]


#: The plans this worker process has unpickled, by query token, the most recently used last. A query
#: drops its own when it ends; a query whose client died never does, so only the latest few are kept.
_PLANS: "OrderedDict[str, ChunkPlan]" = OrderedDict()
_PLANS_LOCK = threading.Lock()
_PLANS_KEPT = 4
#: The tokens of queries that ended here (the latest 256): a task of one of them that still runs, or
#: starts after its query was cancelled, fails instead of unpickling the plan again.
_ENDED: "OrderedDict[str, None]" = OrderedDict()


def _plan_for(ref) -> ChunkPlan:
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
def _plan_on_workers(client, plan: ChunkPlan, info: dict):
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


def _chunk_task(X, offset, ref, excluded, names, aligned, extra, request):
    """One chunk scored and reduced to its candidates by the query's plan (runs on a worker)."""
    plan = _plan_for(ref)
    chunk = PoolChunk.of(X, offset, excluded, dict(zip(names, aligned)), extra)
    return plan.keep(chunk, plan.score_chunk(chunk), request)


def _rows_task(X, ref, rows, method):
    """``plan.method`` of the chunk's rows ``rows`` (runs on a worker)."""
    return getattr(_plan_for(ref), method)(np.asarray(X)[np.asarray(rows, dtype=np.intp)])


def _map_rows(client, blocks, offsets, ref, rows, method):
    """``plan.method`` of the pool rows ``rows``, computed by the workers that hold their chunks, in
    ``rows``' order."""
    import dask

    b_of = np.searchsorted(offsets, rows, side="right") - 1
    tasks, where = [], []
    for b in np.unique(b_of):
        at = np.flatnonzero(b_of == b)
        tasks.append(dask.delayed(_rows_task, pure=False)(blocks[b], ref, rows[at] - offsets[b], method))
        where.append(at)
    futures = client.compute(tasks)
    try:
        parts = client.gather(futures)
    except BaseException:
        client.cancel(futures)
        raise
    out = None
    for at, part in zip(where, parts):
        part = np.asarray(part).reshape(len(at), -1)
        if out is None:
            out = np.empty((len(rows), part.shape[1]), dtype=np.float64)
        out[at] = part
    return out


def _check_pool(X):
    import dask.array as da

    if not isinstance(X, da.Array):
        raise TypeError(f"query_pool scores a dask array (skdbal.dask.open_pool); got {type(X).__name__}: "
                        "for an array in memory use the strategy itself")
    check_pool(X, "the pool")  # known sizes, at least 2 dimensions, rows, a numeric dtype; never read whole
    if any(len(c) > 1 for c in X.chunks[1:]):
        X = X.rechunk((X.chunks[0],) + tuple(-1 for _ in X.shape[1:]))
    return X


class _DaskPool(ChunkedPool):
    """A dask array on a cluster, as a plan's merge sees it: the plan goes to the workers at its first round
    and leaves them when the query ends; the client is found when first needed (random sampling reads no
    chunk and needs none)."""

    def __init__(self, X, client, *, exclude=None, aligned=None):
        X = _check_pool(X)
        super().__init__(X.chunks[0], exclude=exclude, aligned=aligned)
        self.X = X
        self.blocks = X.to_delayed().reshape(len(X.chunks[0]), -1)[:, 0]
        self._client = client
        self._ref = None
        self._in_flight = set()

    @property
    def client(self):
        if self._client is None:
            from distributed import get_client

            self._client = get_client()
        return self._client

    @contextlib.contextmanager
    def _serving(self, plan):
        self._aligned_blocks = [self._chunked(name) for name in plan.aligned_keywords]
        with super()._serving(plan), contextlib.ExitStack() as stack:
            self._stack = stack  # _plan_on_workers enters it at the first round, and leaves it here
            try:
                yield
            finally:
                if self._in_flight:  # the merge failed between rounds: nothing is left running
                    self.client.cancel(list(self._in_flight))
                    self._in_flight.clear()
                self._ref = None

    def _chunked(self, name):
        """The pool-aligned keyword ``name``'s blocks, chunked as the pool's rows."""
        import dask.array as da

        values = self.aligned[name]
        arr = values if isinstance(values, da.Array) else da.from_array(np.asarray(values), chunks=self.X.chunks[0][0])
        if arr.ndim != 1 or arr.shape[0] != self.n_rows:
            raise ValueError(f"{name} must have shape ({self.n_rows},): one label per pool row; got {arr.shape}")
        return arr.rechunk((self.X.chunks[0],)).to_delayed().ravel()

    def _plan_ref(self):
        if self._ref is None:
            self._ref = self._stack.enter_context(_plan_on_workers(self.client, self.plan, self.report))
        return self._ref

    def round(self, request, chunks=None, inputs=None):
        import dask
        from distributed import as_completed

        client, ref, names = self.client, self._plan_ref(), tuple(self.plan.aligned_keywords)
        chunks = iter(range(self.n_chunks) if chunks is None else chunks)
        t = time.perf_counter()
        queue, chunk_of = as_completed(with_results=True), {}

        def submit(n):  # the next n chunks, in one message to the scheduler
            which = list(itertools.islice(chunks, n))
            tasks = [dask.delayed(_chunk_task, pure=False)(
                self.blocks[b], int(self.offsets[b]), ref, self.excluded_in(b), names,
                [blocks[b] for blocks in self._aligned_blocks], None if inputs is None else inputs(b), request)
                for b in which]
            for b, future in zip(which, client.compute(tasks) if tasks else []):
                chunk_of[future.key] = b
                self._in_flight.add(future)
                queue.add(future)

        # with inputs drawn on the client, a window of twice the worker threads; else every chunk at once
        submit(max(4, 2 * sum(client.nthreads().values())) if inputs is not None else self.n_chunks)
        try:
            for future, result in queue:
                self._in_flight.discard(future)
                submit(1)
                yield chunk_of[future.key], result
        except BaseException:  # one chunk failed (or the merge stopped early): the others are not left running
            client.cancel(list(queue.futures))
            raise
        self.report["rounds"] += 1
        self.report["score_s"] = self.report.get("score_s", 0.0) + time.perf_counter() - t

    def rows(self, indices):
        return self.client.compute(self.X[np.asarray(indices, dtype=np.int64)]).result()

    def map_rows(self, indices, method):
        return _map_rows(self.client, self.blocks, self.offsets, self._plan_ref(),
                         np.asarray(indices, dtype=np.int64), method)


def query_pool(strategy, estimator, X, n_instances: int = 1, *, client=None, y_pool=None, exclude=None,
               n_candidates: Optional[int] = None, random_state=None, **options) -> Acquisition:
    """Query a pool that lives on a Dask cluster; the client never loads it.

    The strategy's :class:`~skdbal.acquisition.base.ChunkPlan` is run on the
    workers; see the module docstring for what is exact and what is
    approximate.

    Parameters
    ----------
    strategy : Strategy
        A strategy with a plan (:meth:`~skdbal.acquisition.base.Strategy.plan_chunks`):
        a pointwise strategy (yours too), EPIG, random sampling or BatchBALD,
        optionally under :class:`~skdbal.acquisition.NoiseFilter` (a float
        threshold) and :class:`~skdbal.acquisition.DiversityPenalty`; or
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
        array is read chunk by chunk). Other pool-aligned keywords
        (``*_pool``) go the same way.
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
    aligned = {"y_pool": y_pool, **{key: options.pop(key) for key in [k for k in options if k.endswith("_pool")]}}
    pool = _DaskPool(X, client, exclude=exclude, aligned=aligned)
    acq = pool.acquire(strategy, estimator, n_instances, n_candidates=n_candidates, random_state=random_state,
                       **options)
    acq.info["dask"] = pool.report
    return acq


def acquire_among(strategy, estimator, X, candidates, n_instances: int = 1, **kwargs) -> Acquisition:
    """:func:`~skdbal.acquisition.base.acquire_among` over a dask array: :func:`query_pool` with the rows
    that are not candidates excluded. The driver of a dask array pool, which the learner (and the loop,
    the labelling session) find by the array's type, without ``import skdbal.dask`` first.

    Examples
    --------
    >>> import dask.array as da
    >>> import numpy as np
    >>> from skdbal.acquisition.base import pool_backend
    >>> from skdbal.dask import acquire_among
    >>> pool_backend(da.zeros((10, 2), chunks=5)) is acquire_among
    True
    """
    excluded = np.ones(X.shape[0], dtype=bool)
    excluded[np.asarray(candidates, dtype=np.intp)] = False
    return query_pool(strategy, estimator, X, n_instances, exclude=np.flatnonzero(excluded), **kwargs)
