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

A strategy class declares its own name (``name = "bald"``); :func:`register`,
called in the strategy's module, files it and returns its shared instance
(``bald = register(BALD)``), and every place that reads names
(:func:`get_strategy`, the experiment runner, the command line, the labelling
page) then knows it. This package imports each module of strategies in one
line, and exports what the registry holds.

The bases for writing your own strategy are in :mod:`skdbal.acquisition.base`,
and the strategies' numeric routines, as plain functions over arrays, in
:mod:`skdbal.acquisition.functional`.
"""
# One line per module of strategies: each module registers its classes and binds their shared instances by name
# (``bald = register(BALD)``), so the order of these lines is the order of STRATEGIES and DECORATORS (the command's
# help and the docs list them so). Adding a strategy: its module, and its line here.
# isort: off
# ruff: noqa: F401  (what these lines import is exported by __all__, which reads the registry)
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
from ._pointwise import (BALD, MaxEntropy, MeanStd, RandomSampling, VariationRatios, bald, max_entropy, mean_std,
                         random, score_pool, variation_ratios)
from ._regression import ExpectedGradientLength, PredictiveVariance, egl, predictive_variance
from ._batchbald import BatchBALD, batch_bald
from ._badge import BADGE, badge
from ._ddu import DDU, ddu
from ._epig import EPIG, epig
from ._typiclust import TypiClust, typiclust
from ._probcover import ProbCover, probcover
from ._noise_filter import NoiseFilter, noise_filter
from ._diversity import DiversityPenalty, diversity_penalty
from ._stochastic import StochasticBatch, stochastic_batch
from ._cold_start import ColdStart, cold_start
# isort: on
from ._modal import to_modal

__all__ = [
    # strategies, as instances (modAL-style callables) named as in the registry, and their classes
    *STRATEGIES, *(type(strategy).__name__ for strategy in STRATEGIES.values()),
    # decorators: their classes, and the functions that make them
    *(cls.__name__ for cls, _ in DECORATORS.values()), "noise_filter", "diversity_penalty", "stochastic_batch",
    "cold_start",
    # the registry
    "STRATEGIES", "DECORATORS", "get_strategy", "canonical_name", "parse_strategy_name", "register", "unregister",
    "display_name",
    # built on the bases: a measure's scores of a pool, a strategy for the installed modAL
    "score_pool", "to_modal",
]
