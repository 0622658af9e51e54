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

A strategy class declares its own name (``name = "bald"``); :func:`register`
files it, and every place that reads names (:func:`get_strategy`, the
experiment runner, the command line, the labelling page) then knows it.

The bases for writing your own strategy are in :mod:`skdbal.acquisition.base`,
and the strategies' numeric routines, as plain functions over arrays, in
:mod:`skdbal.acquisition.functional`.
"""
from ._badge import BADGE
from ._batchbald import BatchBALD
from ._ddu import DDU
from ._diversity import DiversityPenalty, diversity_penalty
from ._epig import EPIG
from ._modal import to_modal
from ._noise_filter import NoiseFilter, noise_filter
from ._pointwise import BALD, MaxEntropy, MeanStd, RandomSampling, VariationRatios, score_pool
from ._registry import (
    DECORATORS,
    STRATEGIES,
    canonical_name,
    display_name,
    get_strategy,
    parse_strategy_name,
    register,
    unregister,
)
from ._regression import ExpectedGradientLength, PredictiveVariance
from ._stochastic import StochasticBatch, stochastic_batch

# The package's strategies and decorators, in the order the command line lists them. Adding one: its module,
# and its class here.
for _cls in (BALD, MaxEntropy, VariationRatios, MeanStd, RandomSampling, PredictiveVariance, ExpectedGradientLength,
             BatchBALD, BADGE, DDU, EPIG, NoiseFilter, DiversityPenalty, StochasticBatch):
    register(_cls)
del _cls

# The shared instances, under their registered names (STRATEGIES[name]), called like modAL's functions.
(bald, max_entropy, variation_ratios, mean_std, random, predictive_variance, egl, batch_bald, badge, ddu,
 epig) = STRATEGIES.values()

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
    "STRATEGIES", "DECORATORS", "get_strategy", "canonical_name", "parse_strategy_name", "register", "unregister",
    "display_name",
    # built on the bases: a measure's scores of a pool, a strategy for the installed modAL
    "score_pool", "to_modal",
]
