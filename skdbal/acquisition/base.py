"""The bases for writing a strategy, and the helpers strategies share.

Everything a strategy of your own needs: subclass :class:`Strategy` (a score
per pool point, or ``acquire`` for a joint batch), :class:`SamplesStrategy`
(a score from predictive samples ``(T, n, C)``, chunked for you) or
:class:`StrategyDecorator` (wraps another strategy, as the noise filter
does). :class:`Acquisition` and :class:`PoolScores` are what they return;
:func:`select_top`, :func:`map_chunks` and :func:`score_pool` are the pieces
the built-in strategies are made of. The strategies themselves are in
:mod:`skdbal.acquisition`.

A strategy says how its query reduces over a pool read in chunks (a pool on
a cluster, :func:`skdbal.dask.query_pool`) through
:meth:`Strategy.plan_chunks`: a :class:`ChunkPlan` scores a chunk where it
lives (:meth:`~ChunkPlan.score_chunk`), keeps the chunk's candidates
(:meth:`~ChunkPlan.keep`) and merges theirs on the client
(:meth:`~ChunkPlan.merge`), asking the :class:`ChunkedPool` for more where
the exact answer needs it. Every :class:`SamplesStrategy` has one (the top
``k`` of each chunk, :class:`PointwisePlan`), so a strategy of your own runs
on a cluster unchanged; :func:`acquire_in_chunks` runs a plan in this process.

Examples
--------
>>> import numpy as np
>>> from sklearn.linear_model import LogisticRegression
>>> from skdbal.acquisition.base import SamplesStrategy
>>> def margin(samples):
...     '''One minus the gap between the two likeliest classes of the mean prediction.'''
...     top2 = np.sort(samples.mean(axis=0), axis=1)[:, -2:]
...     return 1.0 - (top2[:, 1] - top2[:, 0])
>>> class Margin(SamplesStrategy):
...     measure = staticmethod(margin)
...     needs_stochastic = False            # meaningful for one pass too
>>> X = np.array([[0.0], [1.0], [2.0], [3.0]])
>>> clf = LogisticRegression().fit(X, [0, 0, 1, 1])
>>> idx, scores = Margin()(clf, X, n_instances=2)
>>> sorted(idx.tolist())
[1, 2]
"""
from ._chunks import (
                      ChunkedPool,
                      ChunkPlan,
                      ChunkScores,
                      PointwisePlan,
                      PoolChunk,
                      acquire_in_chunks,
)
from ._modal import to_modal
from ._scoring import (
                       DEFAULT_CHUNK_SIZE,
                       DegenerateScoreWarning,
                       MeasureStrategy,
                       SamplesStrategy,
                       map_chunks,
                       score_pool,
)
from ._strategy import (
                       Acquisition,
                       CallableStrategy,
                       PoolScores,
                       Strategy,
                       StrategyDecorator,
                       acquire_among,
                       as_strategy,
                       check_options,
                       pool_backend,
                       pool_scores_of,
                       select_top,
)

__all__ = ["Strategy", "StrategyDecorator", "SamplesStrategy", "MeasureStrategy", "CallableStrategy", "Acquisition",
           "PoolScores", "as_strategy", "acquire_among", "pool_scores_of", "select_top", "score_pool", "map_chunks",
           "check_options", "to_modal", "DegenerateScoreWarning", "DEFAULT_CHUNK_SIZE",
           # a query reduced over a pool read in chunks (a cluster's): the protocol and a driver in one process
           "ChunkPlan", "PointwisePlan", "PoolChunk", "ChunkScores", "ChunkedPool", "acquire_in_chunks",
           # pools that live elsewhere (a cluster's), queried by their driver through acquire_among
           "pool_backend"]
