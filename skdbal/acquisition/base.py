"""The bases for writing a strategy, and the helpers strategies share.

Everything a strategy of your own needs: subclass :class:`Strategy` (a score
per pool point, or ``acquire`` for a joint batch), :class:`SamplesStrategy`
(a score from predictive samples ``(T, n, C)``, chunked for you) or
:class:`StrategyDecorator` (wraps another strategy, as the noise filter
does). :class:`Acquisition` and :class:`PoolScores` are what they return;
:func:`select_top`, :func:`map_chunks` and :func:`score_pool` are the pieces
the built-in strategies are made of. The strategies themselves are in
:mod:`skdbal.acquisition`.

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
from ._scoring import (DEFAULT_CHUNK_SIZE, DegenerateScoreWarning, MeasureStrategy, SamplesStrategy, map_chunks,
                       score_pool)
from ._strategy import (Acquisition, CallableStrategy, PoolScores, Strategy, StrategyDecorator, acquire_among,
                        as_strategy, check_options, pool_scores_of, select_top, to_modal)

__all__ = ["Strategy", "StrategyDecorator", "SamplesStrategy", "MeasureStrategy", "CallableStrategy", "Acquisition",
           "PoolScores", "as_strategy", "acquire_among", "pool_scores_of", "select_top", "score_pool", "map_chunks",
           "check_options", "to_modal", "DegenerateScoreWarning", "DEFAULT_CHUNK_SIZE"]
