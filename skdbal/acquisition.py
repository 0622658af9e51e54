"""Query strategies (SPEC §3).

Every strategy follows modAL's protocol::

    strategy(estimator, X_pool, n_instances=1, *, random_tie_break=False,
             random_state=None, **kwargs) -> (indices, scores)

``indices`` are unique positions into ``X_pool``, best first, and ``scores``
their acquisition values. ``estimator`` may be a fitted skdbal estimator, any
scikit-learn classifier (treated as ``T = 1``), a :class:`skdbal.ActiveLearner`
or a modAL learner. The pool is scored in chunks of ``chunk_size`` rows, so
the ``(T, N, C)`` samples array never exists for the whole pool.

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
"""
from __future__ import annotations

import functools
import warnings
from typing import Callable, Optional, Tuple

import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_array

from . import uncertainty

__all__ = [
    "bald",
    "max_entropy",
    "variation_ratios",
    "mean_std",
    "random_sampling",
    "predictive_variance",
    "score_pool",
    "select_top",
    "make_strategy",
    "to_modal",
    "DegenerateScoreWarning",
    "STRATEGIES",
]

DEFAULT_CHUNK_SIZE = 2048


class DegenerateScoreWarning(UserWarning):
    """A score is constant because the estimator gives only one pass (T=1)."""


def _sampler(estimator, n_samples: Optional[int] = None) -> Tuple[Callable, bool]:
    """Return ``(fn, is_mc)``: ``fn(X) -> (T, n, C)`` samples for a chunk.

    ``n_samples`` overrides the estimator's ``T`` where it has one.
    """
    from .learner import ActiveLearner  # local: learner imports this module

    if isinstance(estimator, ActiveLearner):  # score with what it wraps
        return _sampler(estimator._fitted(), n_samples)
    # our estimators, and any estimator that samples
    if hasattr(estimator, "predict_proba_samples"):
        if getattr(estimator, "mc_dropout", True) is False:  # deterministic baseline
            T = 1 if n_samples is None else n_samples
            return (lambda X: estimator.predict_proba_samples(X, n_samples=T)), False
        if n_samples is None:  # third-party samplers may not take n_samples
            return estimator.predict_proba_samples, True
        return (lambda X: estimator.predict_proba_samples(X, n_samples=n_samples)), True
    # a modAL learner, or anything else wrapping an estimator
    inner = getattr(estimator, "estimator", None)
    if inner is not None and hasattr(inner, "predict_proba_samples"):
        return _sampler(inner, n_samples)
    # a Pipeline ending in one of our estimators
    steps = getattr(estimator, "steps", None)
    if steps and hasattr(steps[-1][1], "predict_proba_samples"):
        head = estimator[:-1]
        fn, is_mc = _sampler(steps[-1][1], n_samples)
        return (lambda X: fn(head.transform(X))), is_mc
    if hasattr(estimator, "predict_proba"):
        return (lambda X: np.asarray(estimator.predict_proba(X))[np.newaxis]), False
    raise TypeError(
        f"estimator must provide predict_proba_samples or predict_proba; "
        f"got {type(estimator).__name__}"
    )


def _check_pool(X_pool):
    if X_pool is None:
        raise ValueError("X_pool is None; pass the unlabelled pool")
    if not hasattr(X_pool, "__len__") or len(X_pool) == 0:
        raise ValueError("X_pool is empty: there is nothing left to query")
    if isinstance(X_pool, np.ndarray) and X_pool.dtype.kind in "fiub":
        if X_pool.ndim < 2:
            raise ValueError(f"X_pool must have at least 2 dimensions; got shape {X_pool.shape}")
        if X_pool.dtype.kind == "f" and not np.isfinite(X_pool).all():
            raise ValueError("X_pool contains NaN or infinity")
        return X_pool
    return check_array(X_pool, allow_nd=True, dtype=None, input_name="X_pool")


def _check_n_instances(n_instances, n_pool: int) -> int:
    if isinstance(n_instances, bool) or not isinstance(n_instances, (int, np.integer)):
        raise TypeError(f"n_instances must be an int; got {type(n_instances).__name__}")
    if n_instances < 1:
        raise ValueError(f"n_instances must be >= 1; got {n_instances}")
    if n_instances > n_pool:
        raise ValueError(f"n_instances={n_instances} is larger than the pool ({n_pool} items)")
    return int(n_instances)


def _check_chunk_size(chunk_size) -> None:
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1:
        raise ValueError(f"chunk_size must be an int >= 1; got {chunk_size!r}")


def score_pool(
    estimator,
    X_pool,
    score_fn: Callable[[np.ndarray], np.ndarray],
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    needs_mc: bool = True,
    deterministic_fn: Optional[Callable[[np.ndarray], np.ndarray]] = None,
    n_jobs: Optional[int] = None,
    n_samples: Optional[int] = None,
) -> np.ndarray:
    """Score every row of ``X_pool`` with ``score_fn`` over MC samples.

    Parameters
    ----------
    estimator : estimator
        See the module docstring for what is accepted.
    X_pool : array-like of shape (N, ...)
    score_fn : callable
        Maps samples ``(T, n, C)`` to scores ``(n,)``, e.g.
        :func:`skdbal.uncertainty.mutual_information`.
    chunk_size : int, default=2048
        Rows scored at a time; bounds memory to ``T · chunk_size · C`` floats.
    needs_mc : bool, default=True
        Warn with :class:`DegenerateScoreWarning` when the estimator gives a
        single deterministic pass, for which the score is constant.
    deterministic_fn : callable, optional
        Score used instead of ``score_fn`` for a single deterministic pass
        (a plain classifier, or ``mc_dropout=False``); no warning then.
    n_jobs : int, optional
        Score chunks in parallel with joblib (processes by default; inside
        ``joblib.parallel_backend("dask")`` on a dask cluster). Each chunk is
        seeded as in a serial call, so the scores do not depend on ``n_jobs``.
        Only the current chunks live in memory, at most ``T·chunk_size·C``
        floats per worker.
    n_samples : int, optional
        Number of MC passes ``T``, overriding the estimator's ``n_samples``.

    Returns
    -------
    scores : ndarray of shape (N,), float64
    """
    X_pool = _check_pool(X_pool)
    _check_chunk_size(chunk_size)
    sample, is_mc = _sampler(estimator, n_samples)
    if not is_mc and deterministic_fn is not None:
        score_fn, needs_mc = deterministic_fn, False
    if needs_mc and not is_mc:
        warnings.warn(
            f"{type(estimator).__name__} has no predict_proba_samples, so it is "
            f"scored as T=1 and {getattr(score_fn, '__name__', 'this score')} "
            "is the same for every point; use an MC estimator",
            DegenerateScoreWarning,
            stacklevel=3,
        )
    n = len(X_pool)
    starts = range(0, n, int(chunk_size))
    if n_jobs is None or n_jobs == 1:
        parts = [score_fn(sample(X_pool[s:s + chunk_size])) for s in starts]
    else:
        from joblib import Parallel, delayed

        parts = Parallel(n_jobs=n_jobs)(
            delayed(_score_chunk)(estimator, X_pool[s:s + chunk_size], score_fn, n_samples)
            for s in starts)
    return np.concatenate(parts).astype(np.float64, copy=False)


def _score_chunk(estimator, X_chunk, score_fn, n_samples=None) -> np.ndarray:
    """One chunk's scores, in a joblib worker."""
    sample, _ = _sampler(estimator, n_samples)
    return score_fn(sample(X_chunk))


def select_top(
    scores, n_instances: int = 1, *, random_tie_break: bool = False, random_state=None
) -> Tuple[np.ndarray, np.ndarray]:
    """Indices of the ``n_instances`` largest scores, best first.

    Ties go to the lower index, or to a seeded random order with
    ``random_tie_break=True``.

    Returns
    -------
    indices : ndarray of shape (n_instances,), int
    scores : ndarray of shape (n_instances,)
    """
    scores = np.asarray(scores, dtype=np.float64)
    n_instances = _check_n_instances(n_instances, len(scores))
    if np.isnan(scores).any():
        raise ValueError("scores contain NaN")
    if random_tie_break:
        order = check_random_state(random_state).permutation(len(scores))
    else:
        order = np.arange(len(scores))
    ranked = order[np.argsort(-scores[order], kind="stable")][:n_instances]
    return ranked.astype(np.intp), scores[ranked]


def make_strategy(
    score_fn: Callable[[np.ndarray], np.ndarray],
    *,
    needs_mc: bool = True,
    deterministic_fn: Optional[Callable[[np.ndarray], np.ndarray]] = None,
    name: Optional[str] = None,
) -> Callable:
    """Build a modAL-protocol strategy from a score over MC samples.

    Parameters
    ----------
    score_fn : callable
        ``(T, n, C) -> (n,)``, larger is more informative.
    needs_mc : bool, default=True
        Whether the score is degenerate for a single pass.
    deterministic_fn : callable, optional
        The score to use for a single deterministic pass instead.
    name : str, optional
        ``__name__`` of the strategy.

    Returns
    -------
    strategy : callable
    """

    def strategy(
        estimator,
        X_pool,
        n_instances: int = 1,
        *,
        random_tie_break: bool = False,
        random_state=None,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        n_jobs: Optional[int] = None,
        n_samples: Optional[int] = None,
        **kwargs,
    ) -> Tuple[np.ndarray, np.ndarray]:
        # **kwargs: the SPEC §3 protocol; decorators and modAL pass options through
        X_pool = _check_pool(X_pool)
        _check_n_instances(n_instances, len(X_pool))
        scores = score_pool(estimator, X_pool, score_fn, chunk_size=chunk_size, needs_mc=needs_mc,
                            deterministic_fn=deterministic_fn, n_jobs=n_jobs, n_samples=n_samples)
        return select_top(scores, n_instances, random_tie_break=random_tie_break,
                          random_state=random_state)

    strategy.__name__ = name or getattr(score_fn, "__name__", "strategy")
    strategy.__qualname__ = strategy.__name__
    strategy.score_fn = score_fn
    return strategy


bald = make_strategy(uncertainty.mutual_information, name="bald")
bald.__doc__ = """BALD: pick the points with the largest mutual information
between label and weights, ``H[p̄] − E_t H[P[t]]`` (Houlsby et al. 2011).

Parameters
----------
estimator : estimator
    A fitted MC estimator (``predict_proba_samples``), an
    :class:`~skdbal.ActiveLearner`, a modAL learner or any classifier
    (``T = 1``: BALD is then 0 everywhere and a warning is issued).
X_pool : array-like of shape (N, ...)
n_instances : int, default=1
random_tie_break : bool, default=False
random_state : int, RandomState or None
    Seeds the tie break.
chunk_size : int, default=2048
    Pool rows scored at a time; bounds memory.
n_jobs : int, optional
    Chunks scored in parallel (joblib); see :func:`score_pool`.
n_samples : int, optional
    Number of MC passes ``T``, overriding the estimator's.
**kwargs :
    Accepted, as the modAL protocol requires, and ignored: strategy
    decorators pass their own options through.

Returns
-------
indices : ndarray of shape (n_instances,)
    Positions in ``X_pool``, best first.
scores : ndarray of shape (n_instances,)
"""

max_entropy = make_strategy(uncertainty.predictive_entropy, needs_mc=False, name="max_entropy")
max_entropy.__doc__ = """Max entropy: the largest entropy of the MC-averaged prediction
``H[p̄]``. Meaningful for ``T = 1`` too (plain entropy sampling).

Same parameters and returns as :func:`bald`.
"""

variation_ratios = make_strategy(uncertainty.variation_ratio, deterministic_fn=uncertainty.least_confidence,
                                 name="variation_ratios")
variation_ratios.__doc__ = """Variation ratios: ``1 − f_mode / T`` over the
passes' predicted classes (seed 001, eq. 3).

For a single deterministic pass (a plain classifier, or an MC estimator with
``mc_dropout=False``: Gal et al.'s §5.2 baseline), where the mode count is
always 0, it scores ``1 − max_c p_c`` instead
(:func:`skdbal.uncertainty.least_confidence`): the form in which Gal et al.
write the variation ratio, applied to the one distribution available.

Same parameters and returns as :func:`bald`.
"""

mean_std = make_strategy(uncertainty.mean_std, name="mean_std")
mean_std.__doc__ = """Mean standard deviation of the class probabilities over
passes (seed 001, eq. 4).

Same parameters and returns as :func:`bald`.
"""


def random_sampling(
    estimator,
    X_pool,
    n_instances: int = 1,
    *,
    random_tie_break: bool = False,
    random_state=None,
    **kwargs,
) -> Tuple[np.ndarray, np.ndarray]:
    """Uniform random acquisition, the baseline.

    Each pool point gets a uniform score from a generator seeded by
    ``random_state``; the ``n_instances`` largest are returned. The estimator
    is not called (it may be ``None``).

    Returns
    -------
    indices : ndarray of shape (n_instances,)
    scores : ndarray of shape (n_instances,)
    """
    X_pool = _check_pool(X_pool)
    _check_n_instances(n_instances, len(X_pool))
    scores = check_random_state(random_state).random_sample(len(X_pool))
    return select_top(scores, n_instances)


def _variance_fn(estimator) -> Callable:
    """``fn(X) -> (n,)``: the trace of the predictive covariance of a regressor."""
    from .learner import ActiveLearner  # local: learner imports this module

    if isinstance(estimator, ActiveLearner):
        return _variance_fn(estimator._fitted())
    if hasattr(estimator, "predictive_variance"):
        return estimator.predictive_variance
    inner = getattr(estimator, "estimator", None)  # a modAL learner
    if inner is not None and not hasattr(estimator, "steps") and (
            hasattr(inner, "predictive_variance") or hasattr(inner, "steps")):
        return _variance_fn(inner)
    steps = getattr(estimator, "steps", None)
    if steps and hasattr(steps[-1][1], "predictive_variance"):
        head, last = estimator[:-1], steps[-1][1]
        return lambda X: last.predictive_variance(head.transform(X))
    if hasattr(estimator, "predict"):  # BayesianRidge, GaussianProcessRegressor, ...
        def from_std(X):
            try:
                _, std = estimator.predict(X, return_std=True)
            except TypeError:
                raise TypeError(
                    f"{type(estimator).__name__}.predict does not take return_std; "
                    "predictive_variance needs a probabilistic regressor such as "
                    "skdbal.BayesianLinearRegression") from None
            std = np.asarray(std, dtype=np.float64)
            return (std ** 2).reshape(len(std), -1).sum(axis=1)
        return from_std
    raise TypeError(f"estimator must provide predictive_variance or predict(return_std=True); "
                    f"got {type(estimator).__name__}")


def predictive_variance(
    estimator,
    X_pool,
    n_instances: int = 1,
    *,
    random_tie_break: bool = False,
    random_state=None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    **kwargs,
) -> Tuple[np.ndarray, np.ndarray]:
    """Regressors: pick the points with the largest total predictive variance.

    The score is the trace of the predictive covariance of ``y*`` (seed 000
    §4), from ``predictive_variance(X)`` when the estimator (or the last step
    of a :class:`~sklearn.pipeline.Pipeline`, e.g.
    ``make_pipeline(NetFeatures(net), BayesianLinearRegression())``) has one,
    else the sum over outputs of ``predict(X, return_std=True)[1] ** 2``
    (:class:`~sklearn.linear_model.BayesianRidge`,
    :class:`~sklearn.gaussian_process.GaussianProcessRegressor`).

    Parameters
    ----------
    estimator : estimator
        A fitted probabilistic regressor, a pipeline ending in one, an
        :class:`~skdbal.ActiveLearner` or a modAL learner wrapping one.
    X_pool : array-like of shape (N, ...)
    n_instances : int, default=1
    random_tie_break : bool, default=False
    random_state : int, RandomState or None
        Seeds the tie break.
    chunk_size : int, default=2048
        Pool rows scored at a time.
    **kwargs :
        Accepted and ignored (the modAL protocol; ``n_samples`` and
        ``n_jobs`` have no meaning here).

    Returns
    -------
    indices : ndarray of shape (n_instances,)
        Positions in ``X_pool``, best first.
    scores : ndarray of shape (n_instances,)

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal import BayesianLinearRegression
    >>> from skdbal.acquisition import predictive_variance
    >>> X = np.array([[0.0, 1.0], [1.0, 0.0], [10.0, 10.0]])
    >>> blr = BayesianLinearRegression().fit(X[:2], np.eye(2))
    >>> idx, scores = predictive_variance(blr, X, n_instances=1)
    >>> int(idx[0])                       # far from the training features
    2
    """
    X_pool = _check_pool(X_pool)
    _check_n_instances(n_instances, len(X_pool))
    _check_chunk_size(chunk_size)
    fn = _variance_fn(estimator)
    scores = np.concatenate([np.asarray(fn(X_pool[s:s + chunk_size]), dtype=np.float64).reshape(-1)
                             for s in range(0, len(X_pool), int(chunk_size))])
    if len(scores) != len(X_pool):
        raise ValueError(f"the estimator gave {len(scores)} variances for {len(X_pool)} pool rows")
    return select_top(scores, n_instances, random_tie_break=random_tie_break, random_state=random_state)


def to_modal(strategy: Callable, modal_version: Optional[str] = None) -> Callable:
    """Adapt a strategy to the installed modAL's return convention.

    modAL 0.4.2.x expects ``(indices, scores)``, which our strategies return
    already; modAL ≤ 0.4.1 expects bare indices (it returns a tuple result
    unchanged). This wrapper returns what the installed version expects.

    Parameters
    ----------
    strategy : callable
        A strategy following our protocol.
    modal_version : str, optional
        Defaults to the installed ``modAL-python`` version.

    Returns
    -------
    callable
    """
    if modal_version is None:
        from importlib.metadata import version

        modal_version = version("modAL-python")
    parts = tuple(int(p) for p in modal_version.split(".")[:3] if p.isdigit())
    if parts >= (0, 4, 2):
        return strategy

    @functools.wraps(strategy)
    def bare(*args, **kwargs):
        return strategy(*args, **kwargs)[0]

    return bare


#: Strategies by name, as used by the command line and the experiment runner.
STRATEGIES = {
    "bald": bald,
    "max_entropy": max_entropy,
    "variation_ratios": variation_ratios,
    "mean_std": mean_std,
    "random": random_sampling,
    "predictive_variance": predictive_variance,
}
