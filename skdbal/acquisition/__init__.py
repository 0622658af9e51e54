"""Query strategies.

Every strategy follows modAL's protocol::

    strategy(estimator, X_pool, n_instances=1, *, random_tie_break=False,
             random_state=None, **kwargs) -> (indices, scores)

``indices`` are unique positions into ``X_pool``, best first, and ``scores``
their acquisition values. Strategies are small objects (:class:`Strategy`)
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
"""
from ._base import (Acquisition, CallableStrategy, PoolScores, Strategy, StrategyDecorator, acquire_among,
                    as_strategy, pool_scores_of, select_top, to_modal)
from ._pointwise import (DEFAULT_CHUNK_SIZE, BALD, DegenerateScoreWarning, MaxEntropy, MeanStd,
                         MeasureStrategy, RandomSampling, SamplesStrategy, VariationRatios, map_chunks,
                         score_pool)
from ._names import DECORATORS, canonical_name, get_strategy, parse_strategy_name
from ._noise import NoiseFilter, noise_filter
from ._diversity import DiversityPenalty, diversity_penalty
from ._stochastic import StochasticBatch, stochastic_batch
from ._batchbald import BatchBALD
from ._badge import BADGE
from ._ddu import DDU
from ._epig import EPIG
from ._regression import ExpectedGradientLength, PredictiveVariance

__all__ = [
    # strategies, as instances (modAL-style callables)
    "bald",
    "max_entropy",
    "variation_ratios",
    "mean_std",
    "random_sampling",
    "predictive_variance",
    "expected_gradient_length",
    "batch_bald",
    "badge",
    "ddu",
    "epig",
    "STRATEGIES",
    "get_strategy",
    "canonical_name",
    "parse_strategy_name",
    "DECORATORS",
    # decorators
    "noise_filter",
    "NoiseFilter",
    "diversity_penalty",
    "DiversityPenalty",
    "stochastic_batch",
    "StochasticBatch",
    # their classes, and the bases to write your own
    "BALD",
    "MaxEntropy",
    "VariationRatios",
    "MeanStd",
    "RandomSampling",
    "PredictiveVariance",
    "ExpectedGradientLength",
    "BatchBALD",
    "BADGE",
    "DDU",
    "EPIG",
    "Strategy",
    "StrategyDecorator",
    "SamplesStrategy",
    "MeasureStrategy",
    "CallableStrategy",
    "Acquisition",
    "PoolScores",
    # helpers
    "as_strategy",
    "acquire_among",
    "pool_scores_of",
    "select_top",
    "score_pool",
    "map_chunks",
    "to_modal",
    "DegenerateScoreWarning",
    "DEFAULT_CHUNK_SIZE",
]


def _shared(instance, name: str):
    """``instance``, marked as the package's shared one: its set_params refuses (clone it first)."""
    instance._shared_name = name
    return instance


bald = _shared(BALD(), "bald")
max_entropy = _shared(MaxEntropy(), "max_entropy")
variation_ratios = _shared(VariationRatios(), "variation_ratios")
mean_std = _shared(MeanStd(), "mean_std")
random_sampling = _shared(RandomSampling(), "random_sampling")
predictive_variance = _shared(PredictiveVariance(), "predictive_variance")
expected_gradient_length = _shared(ExpectedGradientLength(), "expected_gradient_length")
batch_bald = _shared(BatchBALD(), "batch_bald")
badge = _shared(BADGE(), "badge")
ddu = _shared(DDU(), "ddu")
epig = _shared(EPIG(), "epig")

#: Strategies by name, as used by the command line and the experiment runner.
STRATEGIES = {
    "bald": bald,
    "max_entropy": max_entropy,
    "variation_ratios": variation_ratios,
    "mean_std": mean_std,
    "random": random_sampling,
    "predictive_variance": predictive_variance,
    "egl": expected_gradient_length,
    "batch_bald": batch_bald,
    "badge": badge,
    "ddu": ddu,
    "epig": epig,
}
