"""Strategies for regressors: the predictive variance and expected gradient length.

Expected gradient length for regression, in closed form (Shukla, 2022).

For a regression network ``f_z`` trained with the squared loss
``l = ½‖y − f_z(x)‖²``, the gradient at a new label is
``∇_θ l = Σ_d (f_z,d(x) − y_d) ∇_θ f_z,d(x)``. Expected gradient length
(EGL) scores a pool point by the expected squared norm of that gradient
under the model's own predictive distribution, a mixture of ``K``
Gaussians ``N(μ_k(x), diag σ_k²(x))`` (MC-dropout passes or ensemble
members). In closed form:

``EGL(x) = tr(G(x) S(x))``, with ``G_{dd'} = ⟨∇_θ f_z,d, ∇_θ f_z,d'⟩`` the
Gram matrix of the output gradients and
``S = (1/K) Σ_k [diag σ_k² + (μ_k − f_z)(μ_k − f_z)ᵀ]`` the expected outer
product of the residual. For one output it is Shukla's (2022)
``‖∇_θ f_z(x)‖² · (1/K) Σ_k [σ_k²(x) + (μ_k(x) − f_z(x))²]``: the gradient's
length times the predictive variance around ``f_z`` (aleatoric plus
epistemic), which is why EGL and Bayesian uncertainty are "two sides of the
same coin" [1]_.

Plain NumPy over arrays; the gradients come from the network.

References
----------
.. [1] M. Shukla, "Bayesian uncertainty and expected gradient length —
   regression: two sides of the same coin?", WACV 2022, arXiv:2104.09493.

Examples
--------
>>> import numpy as np
>>> from skdbal.acquisition.functional import egl_scores
>>> # one point, two passes with means 1 and 3, variance 0.5 each, reference 2, ‖∇f‖² = 4
>>> egl_scores(np.array([4.0]), np.array([[1.0], [3.0]]), np.array([[0.5], [0.5]]),
...                          reference=np.array([2.0])).tolist()          # 4 · (0.5 + 1)
[6.0]
"""
from __future__ import annotations

import warnings
from typing import Optional

import numpy as np

from ..predictive import as_predictive
from ..uncertainty import decompose_gaussian
from ._registry import register
from ._scoring import DEFAULT_CHUNK_SIZE, DegenerateScoreWarning, map_chunks
from .base import Strategy

__all__ = ['egl_scores', 'PredictiveVariance', 'ExpectedGradientLength', 'predictive_variance', 'egl']



def egl_scores(gram, means, variances=None, *, reference=None) -> np.ndarray:
    """Closed-form expected gradient length of each pool point.

    Parameters
    ----------
    gram : array-like of shape (N,) or (N, D, D)
        ``‖∇_θ f_z(x)‖²`` for one output, or the Gram matrix
        ``⟨∇_θ f_z,d(x), ∇_θ f_z,d'(x)⟩`` for ``D`` outputs.
    means : array-like of shape (K, N) or (K, N, D)
        The ``K`` predictive means ``μ_k(x)``.
    variances : array-like of the shape of ``means``, or a float, optional
        The predicted variances ``σ_k²(x)`` (a heteroscedastic head), or
        one noise variance for all; 0 by default.
    reference : array-like of shape (N,) or (N, D), optional
        ``f_z(x)``, the prediction whose gradient is taken; by default the
        mean of ``means`` (then the second term is the epistemic variance).

    Returns
    -------
    ndarray of shape (N,)

    Raises
    ------
    ValueError
        For shapes that do not fit, negative variances or a ``gram`` that
        is not symmetric positive semi-definite on its diagonal.

    References
    ----------
    .. [1] W. Cai, Y. Zhang and J. Zhou, "Maximizing expected model change
       for active learning in regression", ICDM 2013.
    .. [2] M. Shukla, "Bayesian uncertainty and expected gradient length —
       regression: two sides of the same coin?", WACV 2022, arXiv:2104.09493.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.acquisition.functional import egl_scores
    >>> G = np.array([[[2.0, 1.0], [1.0, 3.0]]])                    # one point, two outputs
    >>> mu = np.array([[[1.0, 0.0]], [[-1.0, 0.0]]])               # two passes
    >>> egl_scores(G, mu).tolist()                   # S = [[1, 0], [0, 0]]: tr(GS) = 2
    [2.0]
    """
    M = np.asarray(means, dtype=np.float64)
    if M.ndim == 2:
        M = M[:, :, None]
    if M.ndim != 3:
        raise ValueError(f"means must have shape (K, N) or (K, N, D); got {np.shape(means)}")
    K, N, D = M.shape
    G = np.asarray(gram, dtype=np.float64)
    if G.ndim == 1:
        G = G[:, None, None]
    if G.shape != (N, D, D):
        raise ValueError(f"gram must have shape ({N},) or ({N}, {D}, {D}) for these means; got {np.shape(gram)}")
    if not np.allclose(G, np.swapaxes(G, 1, 2)) or (np.diagonal(G, axis1=1, axis2=2) < 0).any():
        raise ValueError("gram must hold symmetric Gram matrices with non-negative diagonals")
    if variances is None:
        V = np.zeros_like(M)
    else:
        V = np.broadcast_to(np.asarray(variances, dtype=np.float64).reshape(
            np.shape(variances) + ((1,) if np.ndim(variances) == 2 else ())), M.shape)
        if (V < 0).any():
            raise ValueError("variances must be >= 0")
    if reference is None:
        f = M.mean(axis=0)
    else:
        f = np.asarray(reference, dtype=np.float64)
        f = f.reshape(N, -1) if f.size == N * D else f
        if f.shape != (N, D):
            raise ValueError(f"reference must have shape ({N},) or ({N}, {D}); got {np.shape(reference)}")
    R = M - f[None]                                              # (K, N, D) residuals of the means
    S = np.einsum("knd,kne->nde", R, R) / K                      # epistemic outer products
    S[:, np.arange(D), np.arange(D)] += V.mean(axis=0)           # aleatoric, diagonal
    return np.einsum("nde,ned->n", G, S)

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

    name = "predictive_variance"
    model_kind = "regressor"
    display_name = "predictive variance"

    def __init__(self, *, part: str = "total", chunk_size: int = DEFAULT_CHUNK_SIZE, n_jobs: Optional[int] = None):
        self.part = part
        self.chunk_size = chunk_size
        self.n_jobs = n_jobs

    def acquisition_scores(self, estimator, X_pool, *, chunk_size: Optional[int] = None, n_jobs: Optional[int] = None,
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


predictive_variance = register(PredictiveVariance)


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
        return egl_scores(gram, means, variances, reference=reference)


class ExpectedGradientLength(Strategy):
    """Network regressors: pick the points with the largest expected gradient length.

    EGL (Cai et al., 2013) scores a pool point by the expected squared norm
    of the gradient that its label would give the squared loss, the label
    drawn from the model's own predictive distribution. Shukla's (2022) closed
    form, :func:`skdbal.acquisition.functional.egl_scores`, is
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
    >>> from skdbal.acquisition import egl
    >>> rng = np.random.RandomState(0)
    >>> X = rng.uniform(-1, 1, size=(40, 1)).astype(np.float32)
    >>> reg = MCDropoutRegressor(max_epochs=50, random_state=0).fit(X[:10], np.sin(3 * X[:10, 0]))
    >>> idx, scores = egl(reg, X, n_instances=3)
    >>> idx.shape, bool(np.all(np.diff(scores) <= 0))
    ((3,), True)
    """

    name = "egl"
    model_kind = "network_regressor"
    display_name = "EGL"

    def __init__(self, *, chunk_size: int = DEFAULT_CHUNK_SIZE, n_jobs: Optional[int] = None):
        self.chunk_size = chunk_size
        self.n_jobs = n_jobs

    def acquisition_scores(self, estimator, X_pool, *, chunk_size: Optional[int] = None, n_jobs: Optional[int] = None,
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


egl = register(ExpectedGradientLength)

