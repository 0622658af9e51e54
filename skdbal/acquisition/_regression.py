"""Strategies for regressors: the predictive variance and expected gradient length."""
from __future__ import annotations

import warnings
from typing import Optional

import numpy as np

from .. import egl
from ..predictive import as_predictive
from ..uncertainty import decompose_gaussian
from ._base import Strategy
from ._pointwise import DEFAULT_CHUNK_SIZE, DegenerateScoreWarning, map_chunks

__all__ = ["PredictiveVariance", "ExpectedGradientLength"]


class PredictiveVariance(Strategy):
    """Regressors: pick the points with the largest total predictive variance.

    The score is the trace of the predictive covariance of ``y*`` (the
    A-optimal choice for a Bayesian linear model), read through
    :func:`skdbal.predictive.as_predictive`: ``predictive_variance(X)`` when
    the model (or the last step of a :class:`~sklearn.pipeline.Pipeline`,
    e.g. ``make_pipeline(NetFeatures(net), BayesianLinearRegression())``) has
    one, else the sum over outputs of ``predict(X, return_std=True)[1] ** 2``
    (:class:`~sklearn.linear_model.BayesianRidge`,
    :class:`~sklearn.gaussian_process.GaussianProcessRegressor`).

    With ``part="epistemic"`` (or ``"aleatoric"``) it scores one part of
    Kendall and Gal's split instead (:func:`skdbal.uncertainty.decompose_gaussian`),
    summed over outputs, for a model with ``predict_samples``
    (:class:`~skdbal.MCDropoutRegressor`). The epistemic part is the
    regression counterpart of BALD: under input-dependent noise the total
    variance keeps acquiring where the labels are noisy, and the epistemic
    part does not.

    Parameters
    ----------
    part : {"total", "epistemic", "aleatoric"}, default="total"
        Which variance to score.
    chunk_size : int, default=2048
        Pool rows scored at a time (may also be given per call).
    n_jobs : int, optional
        Chunks scored in parallel with joblib (may also be given per call);
        the scores do not depend on it.

    References
    ----------
    .. [1] D. J. C. MacKay, "Information-based objective functions for active
       data selection", Neural Computation 4(4), 1992.

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

    def __init__(self, *, part: str = "total", chunk_size: int = DEFAULT_CHUNK_SIZE, n_jobs: Optional[int] = None):
        self.part = part
        self.chunk_size = chunk_size
        self.n_jobs = n_jobs

    def score(self, estimator, X_pool, *, chunk_size: Optional[int] = None, n_jobs: Optional[int] = None,
              **kwargs) -> np.ndarray:
        """The predictive variance (``part``) of every pool row, shape ``(N,)``."""
        if self.part not in ("total", "epistemic", "aleatoric"):
            raise ValueError(f"part must be 'total', 'epistemic' or 'aleatoric'; got {self.part!r}")
        predictive = as_predictive(estimator)
        if predictive.kind != "regressor":
            raise TypeError(f"{predictive.name} is a classifier: predictive_variance needs a "
                            "probabilistic regressor such as skdbal.BayesianLinearRegression")
        if self.part != "total" and predictive.source != "regression_samples":
            raise TypeError(f"predictive_variance(part={self.part!r}) needs predict_samples, which "
                            f"{predictive.name} lacks; use a sampling regressor such as "
                            "skdbal.MCDropoutRegressor, or part='total'")
        scores = map_chunks(_VarianceChunk(predictive, self.part), X_pool,
                            chunk_size=self.chunk_size if chunk_size is None else chunk_size,
                            n_jobs=self.n_jobs if n_jobs is None else n_jobs)
        return _warn_if_constant(scores, predictive, f"the {self.part} predictive variance")


def _warn_if_constant(scores, predictive, what: str):
    """``scores``, after a :class:`DegenerateScoreWarning` if they are one value for the whole pool
    (a regressor without dropout, the aleatoric part of a homoscedastic one): the picks are then
    the first rows, not a choice."""
    scores = np.asarray(scores)
    if len(scores) > 1 and np.all(scores == scores[0]):
        warnings.warn(f"{what} of {predictive.name} is {scores[0]:.3g} for every pool point (a model without "
                      "MC dropout, or a constant noise variance), so the picks are the first rows",
                      DegenerateScoreWarning, stacklevel=4)
    return scores


class _VarianceChunk:
    """``X_chunk -> variance (part)``: picklable, for joblib workers."""

    def __init__(self, predictive, part: str):
        self.predictive = predictive
        self.part = part

    def __call__(self, X):
        if self.part == "total":
            return self.predictive.variance(X)
        d = decompose_gaussian(*self.predictive.regression_samples(X))
        return getattr(d, self.part).sum(axis=1)


class _EGLChunk:
    """``X_chunk -> expected gradient length``: picklable, for joblib workers."""

    def __init__(self, predictive):
        self.predictive = predictive

    def __call__(self, X):
        gram, reference = self.predictive.gradient_gram(X)
        means, variances = self.predictive.regression_samples(X)
        return egl.expected_gradient_length(gram, means, variances, reference=reference)


class ExpectedGradientLength(Strategy):
    """Network regressors: pick the points with the largest expected gradient length.

    EGL (Cai et al., 2013) scores a pool point by the expected squared norm
    of the gradient that its label would give the squared loss, the label
    drawn from the model's own predictive distribution. Shukla's (2022) closed
    form, :func:`skdbal.egl.expected_gradient_length`, is
    ``tr(G(x) S(x))``: ``G`` the Gram matrix of the output gradients of the
    network with dropout off, ``S`` the expected outer product of the
    residual around its output ``f(x)`` under the ``T`` sampled Gaussians
    (epistemic spread of the means plus the aleatoric variances). For one
    output it is ``‖∇_θ f(x)‖² · (σ²_alea(x) + E_t (μ_t(x) − f(x))²)``:
    predictive variance weighted by how strongly the label would move
    the weights.

    The model must have ``output_gradient_gram`` and ``predict_samples``
    (see :mod:`skdbal.predictive`), as :class:`~skdbal.MCDropoutRegressor`
    has; a pipeline ending in one or a learner around one works too.

    Parameters
    ----------
    chunk_size : int, default=2048
        Pool rows scored at a time (may also be given per call).
    n_jobs : int, optional
        Chunks scored in parallel with joblib (may also be given per call).

    References
    ----------
    .. [1] W. Cai, Y. Zhang and J. Zhou, "Maximizing expected model change
       for active learning in regression", ICDM 2013.
    .. [2] M. Shukla, "Bayesian uncertainty and expected gradient length —
       regression: two sides of the same coin?", WACV 2022, arXiv:2104.09493.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal import MCDropoutRegressor
    >>> from skdbal.acquisition import expected_gradient_length
    >>> rng = np.random.RandomState(0)
    >>> X = rng.uniform(-1, 1, size=(40, 1)).astype(np.float32)
    >>> reg = MCDropoutRegressor(max_epochs=50, random_state=0).fit(X[:10], np.sin(3 * X[:10, 0]))
    >>> idx, scores = expected_gradient_length(reg, X, n_instances=3)
    >>> idx.shape, bool(np.all(np.diff(scores) <= 0))
    ((3,), True)
    """

    def __init__(self, *, chunk_size: int = DEFAULT_CHUNK_SIZE, n_jobs: Optional[int] = None):
        self.chunk_size = chunk_size
        self.n_jobs = n_jobs

    def score(self, estimator, X_pool, *, chunk_size: Optional[int] = None, n_jobs: Optional[int] = None,
              **kwargs) -> np.ndarray:
        """Expected gradient length of every pool row, shape ``(N,)``."""
        predictive = as_predictive(estimator)
        if predictive.kind != "regressor":
            raise TypeError(f"{predictive.name} is a classifier: expected_gradient_length needs a network "
                            "regressor such as skdbal.MCDropoutRegressor")
        scores = map_chunks(_EGLChunk(predictive), X_pool,
                            chunk_size=self.chunk_size if chunk_size is None else chunk_size,
                            n_jobs=self.n_jobs if n_jobs is None else n_jobs)
        return _warn_if_constant(scores, predictive, "the expected gradient length")
