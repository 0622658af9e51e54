"""Query strategies.

Every strategy follows modAL's protocol::

    strategy(estimator, X_pool, n_instances=1, *, random_tie_break=False,
             random_state=None, **kwargs) -> (indices, scores)

``indices`` are unique positions into ``X_pool``, best first, and ``scores``
their acquisition values. Strategies are small objects (:class:`~skdbal.acquisition.base.Strategy`)
with parameters, a ``repr`` and ``get_params``; the ones below are instances,
called like functions. ``estimator`` is read through the predictive
interface (:mod:`skdbal.predictive`): a fitted skdbal estimator, any model
implementing that interface, any scikit-learn classifier (treated as
``T = 1``), a pipeline, a :class:`skdbal.ActiveLearner` or a modAL learner.
The pool is scored in chunks of ``chunk_size`` rows, so the ``(T, N, C)``
samples array never exists for the whole pool.

Examples
--------
>>> import numpy as np
>>> from sklearn.datasets import load_iris
>>> from sklearn.linear_model import LogisticRegression
>>> from skdbal.acquisition import max_entropy
>>> X, y = load_iris(return_X_y=True)
>>> clf = LogisticRegression(max_iter=500).fit(X[::10], y[::10])
>>> idx, scores = max_entropy(clf, X, n_instances=3)
>>> idx.shape, bool(np.all(np.diff(scores) <= 0))
((3,), True)
>>> max_entropy
MaxEntropy()

The bases for writing your own strategy are in :mod:`skdbal.acquisition.base`,
and the strategies' numeric kernels, as plain functions over arrays, in
:mod:`skdbal.acquisition.kernels`.
"""
import importlib
import warnings

from ._badge import BADGE
from ._batchbald import BatchBALD
from ._ddu import DDU
from ._diversity import DiversityPenalty, diversity_penalty
from ._epig import EPIG
from ._noise import NoiseFilter, noise_filter
from ._pointwise import BALD, MaxEntropy, MeanStd, RandomSampling, VariationRatios
from ._registry import (
    DECORATORS,
    STRATEGIES,
    badge,
    bald,
    batch_bald,
    canonical_name,
    ddu,
    egl,
    epig,
    get_strategy,
    max_entropy,
    mean_std,
    parse_strategy_name,
    predictive_variance,
    random,
    variation_ratios,
)
from ._regression import ExpectedGradientLength, PredictiveVariance
from ._stochastic import StochasticBatch, stochastic_batch

__all__ = [
    # strategies, as instances (modAL-style callables), named as in the registry
    "bald", "max_entropy", "variation_ratios", "mean_std", "random", "predictive_variance", "egl", "batch_bald",
    "badge", "ddu", "epig",
    # their classes
    "BALD", "MaxEntropy", "VariationRatios", "MeanStd", "RandomSampling", "PredictiveVariance",
    "ExpectedGradientLength", "BatchBALD", "BADGE", "DDU", "EPIG",
    # decorators
    "noise_filter", "NoiseFilter", "diversity_penalty", "DiversityPenalty", "stochastic_batch", "StochasticBatch",
    # the registry
    "STRATEGIES", "DECORATORS", "get_strategy", "canonical_name", "parse_strategy_name",
]


#: Names that moved: old name -> (module, new name). Kept working with a DeprecationWarning.
_MOVED_NAMES = {
    "random_sampling": ("skdbal.acquisition", "random"),
    "expected_gradient_length": ("skdbal.acquisition", "egl"),
    **{name: ("skdbal.acquisition.base", name)
       for name in ("Strategy", "StrategyDecorator", "SamplesStrategy", "MeasureStrategy", "CallableStrategy",
                    "Acquisition", "PoolScores", "as_strategy", "acquire_among", "pool_scores_of", "select_top",
                    "score_pool", "map_chunks", "to_modal", "DegenerateScoreWarning", "DEFAULT_CHUNK_SIZE")},
}


def __getattr__(name):
    if name not in _MOVED_NAMES:
        raise AttributeError(f"module 'skdbal.acquisition' has no attribute {name!r}")
    module, new = _MOVED_NAMES[name]
    warnings.warn(f"skdbal.acquisition.{name} has moved to {module}.{new}; the old name will be removed",
                  DeprecationWarning, stacklevel=2)
    return getattr(importlib.import_module(module), new)
