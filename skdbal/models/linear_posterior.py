"""Posterior algebra of Bayesian linear regression on fixed features.

Plain NumPy/SciPy functions over arrays (no torch, no I/O), used by
:class:`skdbal.BayesianLinearRegression`. The model is that of Anonymous
(n.d., §4 and Appendix A) [1]_: features ``Phi`` (N, K), targets ``Y`` (N, D),

    Y | W ~ MN(Phi W, sigma2 I_N, Sigma),     W ~ MN(0, s2 I_K, Sigma),

so that the posterior is ``MN(M, Sigma', Sigma)`` with precision
``A = Phi^T Phi / sigma2 + I / s2``, ``Sigma' = A^{-1}`` and
``M = Sigma' Phi^T Y / sigma2``; the mean-field posterior has the same mean
and independent weight variances ``1 / A_kk``.

Everything goes through a Cholesky factor of ``A``: nothing here forms an
explicit inverse except :func:`posterior_covariance`, which a user asks for.
``A`` is positive definite whenever ``s2`` is finite, however singular
``Phi^T Phi`` is; when round-off defeats that (huge ``s2``, tiny
``sigma2``), :func:`precision_cholesky` adds the smallest diagonal jitter that
works and says so.

References
----------
.. [1] Anonymous (candidate number 1091797), "Uncertainty in deep learning",
   anonymised report, undated. Code:
   https://www.github.com/anonymous-account-67/UncertaintyInDeepLearning.
"""
from __future__ import annotations

import warnings
from typing import Tuple

import numpy as np
from scipy import linalg

__all__ = [
    "precision_cholesky",
    "analytic_posterior",
    "mfvi_posterior",
    "posterior_covariance",
    "whiten",
    "analytic_feature_variance",
    "mfvi_feature_variance",
    "log_marginal_likelihood",
    "fit_evidence",
    "fit_elbo",
    "mfvi_elbo",
]


def precision_cholesky(gram: np.ndarray, noise_variance: float, prior_variance: float) -> np.ndarray:
    """Lower Cholesky factor ``L`` of ``A = gram / noise_variance + I / prior_variance``.

    Parameters
    ----------
    gram : ndarray of shape (K, K)
        ``Phi^T Phi``.
    noise_variance, prior_variance : float
        ``sigma^2`` and ``s^2``, both positive.

    Returns
    -------
    L : ndarray of shape (K, K), lower triangular, with ``L @ L.T == A``.

    Raises
    ------
    numpy.linalg.LinAlgError
        If ``A`` is not positive definite even with the largest jitter tried.

    Warns
    -----
    RuntimeWarning
        When ``A`` is numerically singular and a diagonal jitter was added.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.models.linear_posterior import precision_cholesky
    >>> Phi = np.array([[1.0, 0.0], [1.0, 1.0]])         # gram = [[2, 1], [1, 1]]
    >>> L = precision_cholesky(Phi.T @ Phi, noise_variance=1.0, prior_variance=1.0)
    >>> np.round(L @ L.T, 10).tolist()                   # A = gram / 1 + I / 1
    [[3.0, 1.0], [1.0, 2.0]]
    >>> np.round(L, 4).tolist()                          # sqrt(3), 1 / sqrt(3), sqrt(5 / 3)
    [[1.7321, 0.0], [0.5774, 1.291]]
    """
    K = gram.shape[0]
    A = gram / noise_variance
    A[np.diag_indices(K)] += 1.0 / prior_variance
    try:
        return linalg.cholesky(A, lower=True, check_finite=False)
    except linalg.LinAlgError:
        pass
    scale = max(float(np.trace(A)) / max(K, 1), np.finfo(float).tiny)
    for exponent in range(-12, -3):
        jitter = scale * 10.0 ** exponent
        try:
            L = linalg.cholesky(A + jitter * np.eye(K), lower=True, check_finite=False)
        except linalg.LinAlgError:
            continue
        warnings.warn(
            f"the posterior precision is numerically singular (prior_variance={prior_variance:g}, "
            f"noise_variance={noise_variance:g}); added {jitter:.3g} to its diagonal",
            RuntimeWarning,
            stacklevel=3,
        )
        return L
    raise np.linalg.LinAlgError(
        "the posterior precision is not positive definite even with jitter; "
        "use a smaller prior_variance or a larger noise_variance"
    )


def analytic_posterior(
    Phi: np.ndarray, Y: np.ndarray, noise_variance: float, prior_variance: float
) -> Tuple[np.ndarray, np.ndarray]:
    """Posterior mean ``M`` (K, D) and Cholesky factor ``L`` of the precision.

    ``M = (Phi^T Phi / sigma2 + I / s2)^{-1} Phi^T Y / sigma2``, by two
    triangular solves.

    Parameters
    ----------
    Phi : ndarray of shape (N, K)
        Features, one row per training point.
    Y : ndarray of shape (N, D)
        Targets, one column per output.
    noise_variance, prior_variance : float
        ``sigma2`` and ``s2``, both positive.

    Returns
    -------
    M : ndarray of shape (K, D)
        Posterior mean of the weights.
    L : ndarray of shape (K, K)
        Lower Cholesky factor of the precision ``A``
        (see :func:`precision_cholesky`).

    Examples
    --------
    With one feature equal to 1 at two points, ``A = 2 / 1 + 1 / 1 = 3`` and
    ``M = (1 + 3) / 3``:

    >>> import numpy as np
    >>> from skdbal.models.linear_posterior import analytic_posterior
    >>> Phi, Y = np.array([[1.0], [1.0]]), np.array([[1.0], [3.0]])
    >>> M, L = analytic_posterior(Phi, Y, noise_variance=1.0, prior_variance=1.0)
    >>> np.round(M, 4).tolist(), np.round(L, 4).tolist()   # 4 / 3 and sqrt(3)
    ([[1.3333]], [[1.7321]])
    """
    L = precision_cholesky(Phi.T @ Phi, noise_variance, prior_variance)
    M = linalg.cho_solve((L, True), Phi.T @ Y / noise_variance, check_finite=False)
    return M, L


def mfvi_posterior(
    Phi: np.ndarray, Y: np.ndarray, noise_variance: float, prior_variance: float
) -> Tuple[np.ndarray, np.ndarray]:
    """Optimal mean-field Gaussian ``q(W)``: mean ``M`` (K, D) and variances (K, D).

    The mean is the analytic one (the ELBO's gradient in ``M`` does not
    involve the variances); ``var_kd = (sum_n phi_nk^2 / sigma2 + 1 / s2)^{-1}``,
    the same for every output ``d`` (Anonymous, n.d., Appendix A.2.3).

    Parameters
    ----------
    Phi : ndarray of shape (N, K)
        Features, one row per training point.
    Y : ndarray of shape (N, D)
        Targets, one column per output.
    noise_variance, prior_variance : float
        ``sigma2`` and ``s2``, both positive.

    Returns
    -------
    M : ndarray of shape (K, D)
        Mean of ``q(W)``, equal to the analytic posterior mean.
    var : ndarray of shape (K, D)
        Variance of each weight under ``q``; all columns are equal.

    References
    ----------
    .. [1] Anonymous (candidate number 1091797), "Uncertainty in deep
       learning", anonymised report, undated. Code:
       https://www.github.com/anonymous-account-67/UncertaintyInDeepLearning.

    Examples
    --------
    Here ``A = [[3, 1], [1, 3]]`` and ``Phi^T Y = [4, 5]``, so
    ``M = A^{-1} [4, 5] = [7, 11] / 8``; each weight's variance is ``1 / A_kk``,
    below the exact marginal ``(A^{-1})_kk = 3 / 8``:

    >>> import numpy as np
    >>> from skdbal.models.linear_posterior import mfvi_posterior
    >>> Phi = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> Y = np.array([[1.0], [2.0], [3.0]])
    >>> M, var = mfvi_posterior(Phi, Y, noise_variance=1.0, prior_variance=1.0)
    >>> np.round(M, 4).tolist(), np.round(var, 4).tolist()
    ([[0.875], [1.375]], [[0.3333], [0.3333]])
    """
    M, _ = analytic_posterior(Phi, Y, noise_variance, prior_variance)
    var = 1.0 / (np.einsum("nk,nk->k", Phi, Phi) / noise_variance + 1.0 / prior_variance)
    return M, np.repeat(var[:, None], Y.shape[1], axis=1)


def posterior_covariance(L: np.ndarray) -> np.ndarray:
    """``Sigma' = A^{-1}`` from the Cholesky factor of ``A`` (an explicit inverse: ask only when needed).

    Parameters
    ----------
    L : ndarray of shape (K, K)
        Lower Cholesky factor of the precision ``A``, as returned by
        :func:`precision_cholesky`.

    Returns
    -------
    Sigma : ndarray of shape (K, K)
        The posterior (row) covariance ``A^{-1}``.

    Examples
    --------
    The inverse of ``A = [[3, 1], [1, 3]]`` is ``[[3, -1], [-1, 3]] / 8``:

    >>> import numpy as np
    >>> from skdbal.models.linear_posterior import posterior_covariance, precision_cholesky
    >>> L = precision_cholesky(np.array([[2.0, 1.0], [1.0, 2.0]]), 1.0, 1.0)
    >>> np.round(posterior_covariance(L), 4).tolist()
    [[0.375, -0.125], [-0.125, 0.375]]
    """
    K = L.shape[0]
    return linalg.cho_solve((L, True), np.eye(K), check_finite=False)


def whiten(L: np.ndarray, Phi_star: np.ndarray) -> np.ndarray:
    """``Z = L^{-1} Phi_star^T`` (K, N*), so that ``Phi_star Sigma' Phi_star^T = Z^T Z``.

    Parameters
    ----------
    L : ndarray of shape (K, K)
        Lower Cholesky factor of the precision ``A``.
    Phi_star : ndarray of shape (N*, K)
        Features of the points to predict.

    Returns
    -------
    Z : ndarray of shape (K, N*)

    Examples
    --------
    With ``A = [[3]]`` (``L = sqrt(3)``), ``Z = [1, 2] / sqrt(3)`` and
    ``Z^T Z = Phi_star Phi_star^T / 3``:

    >>> import numpy as np
    >>> from skdbal.models.linear_posterior import whiten
    >>> Z = whiten(np.array([[np.sqrt(3.0)]]), np.array([[1.0], [2.0]]))
    >>> np.round(Z, 4).tolist()
    [[0.5774, 1.1547]]
    >>> np.round(Z.T @ Z, 4).tolist()
    [[0.3333, 0.6667], [0.6667, 1.3333]]
    """
    return linalg.solve_triangular(L, Phi_star.T, lower=True, check_finite=False)


def analytic_feature_variance(L: np.ndarray, Phi_star: np.ndarray) -> np.ndarray:
    """``phi^T Sigma' phi`` for each row of ``Phi_star``: ``||L^{-1} phi||^2``.

    Parameters
    ----------
    L : ndarray of shape (K, K)
        Lower Cholesky factor of the precision ``A``.
    Phi_star : ndarray of shape (N*, K)
        Features of the points to predict.

    Returns
    -------
    v : ndarray of shape (N*,)
        The epistemic part of the predictive variance ``var*`` (without the
        noise ``sigma2``), before scaling by ``Sigma``.

    Examples
    --------
    With ``A = [[3]]``, ``phi^T A^{-1} phi = phi^2 / 3``:

    >>> import numpy as np
    >>> from skdbal.models.linear_posterior import analytic_feature_variance
    >>> L = np.array([[np.sqrt(3.0)]])
    >>> np.round(analytic_feature_variance(L, np.array([[1.0], [2.0]])), 4).tolist()
    [0.3333, 1.3333]
    """
    Z = whiten(L, Phi_star)
    return np.einsum("kn,kn->n", Z, Z)


def mfvi_feature_variance(var: np.ndarray, Phi_star: np.ndarray) -> np.ndarray:
    """``sum_k phi_k^2 var_kd`` for each row and output: shape (N*, D).

    Parameters
    ----------
    var : ndarray of shape (K, D)
        Weight variances of the mean-field ``q``, from :func:`mfvi_posterior`.
    Phi_star : ndarray of shape (N*, K)
        Features of the points to predict.

    Returns
    -------
    v : ndarray of shape (N*, D)
        The epistemic part of ``Var(y*_d)`` (without the noise ``sigma2``).

    Examples
    --------
    Both weights have variance ``1 / 3`` (see :func:`mfvi_posterior`), so
    ``[1, 1]`` gets ``1 / 3 + 1 / 3`` and ``[2, 0]`` gets ``4 / 3``:

    >>> import numpy as np
    >>> from skdbal.models.linear_posterior import mfvi_feature_variance
    >>> var = np.array([[1 / 3], [1 / 3]])
    >>> np.round(mfvi_feature_variance(var, np.array([[1.0, 1.0], [2.0, 0.0]])), 4).tolist()
    [[0.6667], [1.3333]]
    """
    return (Phi_star ** 2) @ var


def log_marginal_likelihood(
    Phi: np.ndarray, Y: np.ndarray, noise_variance: float, prior_variance: float
) -> float:
    """``log p(Y | Phi, sigma2, s2)`` with independent outputs (``Sigma = I``).

    Each column of ``Y`` is ``N(0, sigma2 I + s2 Phi Phi^T)``; computed in the
    K-dimensional weight space through the Cholesky factor of ``A``.

    Parameters
    ----------
    Phi : ndarray of shape (N, K)
        Features, one row per training point.
    Y : ndarray of shape (N, D)
        Targets, one column per output.
    noise_variance, prior_variance : float
        ``sigma2`` and ``s2``, both positive.

    Returns
    -------
    log_evidence : float
        The log marginal likelihood, summed over the ``D`` outputs.

    Examples
    --------
    Here ``Y ~ N(0, C)`` with ``C = I + Phi Phi^T = [[2, 1], [1, 2]]``, so
    ``log p = -(14 / 3) / 2 - log(3) / 2 - log(2 pi)``:

    >>> import numpy as np
    >>> from scipy.stats import multivariate_normal
    >>> from skdbal.models.linear_posterior import log_marginal_likelihood
    >>> Phi, Y = np.array([[1.0], [1.0]]), np.array([[1.0], [3.0]])
    >>> round(float(log_marginal_likelihood(Phi, Y, noise_variance=1.0, prior_variance=1.0)), 4)
    -4.7205
    >>> round(float(multivariate_normal([0, 0], [[2, 1], [1, 2]]).logpdf([1, 3])), 4)
    -4.7205
    """
    N, K = Phi.shape
    D = Y.shape[1]
    M, L = analytic_posterior(Phi, Y, noise_variance, prior_variance)
    resid = float(np.sum((Y - Phi @ M) ** 2))
    logdet_A = 2.0 * float(np.sum(np.log(np.diag(L))))
    per_output = (-K * np.log(prior_variance) - N * np.log(noise_variance) - logdet_A
                  - N * np.log(2 * np.pi))
    return 0.5 * D * per_output - 0.5 * (resid / noise_variance + float(np.sum(M ** 2)) / prior_variance)


def fit_evidence(
    Phi: np.ndarray, Y: np.ndarray, noise_variance: float, prior_variance: float,
    max_iter: int = 300, tol: float = 1e-6,
) -> Tuple[float, float, int]:
    """Type-II maximum likelihood of ``sigma2`` and ``s2`` (MacKay's fixed point).

    The updates of :class:`sklearn.linear_model.BayesianRidge` (without its
    Gamma hyperpriors), with the ``D`` outputs sharing both variances:
    ``gamma = sum_i e_i / (e_i + sigma2 / s2)`` over the eigenvalues ``e_i`` of
    ``Phi^T Phi``, ``s2 = ||M||^2 / (D gamma)``,
    ``sigma2 = ||Y - Phi M||^2 / (D (N - gamma))``.

    Stops when both variances change by less than ``tol`` (relative) or the
    log evidence by less than ``tol * max(1, |log evidence|)``.

    Parameters
    ----------
    Phi : ndarray of shape (N, K)
        Features, one row per training point.
    Y : ndarray of shape (N, D)
        Targets, one column per output.
    noise_variance, prior_variance : float
        Starting values of ``sigma2`` and ``s2``, both positive.
    max_iter : int, default=300
        Maximum number of fixed-point iterations.
    tol : float, default=1e-6
        Relative tolerance of the stopping rule above.

    Returns
    -------
    noise_variance, prior_variance : float
        The fitted ``sigma2`` and ``s2``.
    n_iter : int
        Iterations run.

    Warns
    -----
    RuntimeWarning
        If the iteration did not converge in ``max_iter`` iterations (the
        last iterate is returned).

    Examples
    --------
    With a constant feature, ``Y = [1, 2, 3, 4]`` has variance
    ``sigma2 + 4 s2`` along ``[1, 1, 1, 1] / 2`` (where its squared
    projection is ``5^2``) and ``sigma2`` in the 3 other directions (squared
    norm ``30 - 25 = 5``); the evidence is maximal at ``sigma2 = 5 / 3`` and
    ``s2 = (25 - 5 / 3) / 4 = 35 / 6``:

    >>> import numpy as np
    >>> from skdbal.models.linear_posterior import fit_evidence
    >>> Phi, Y = np.ones((4, 1)), np.array([[1.0], [2.0], [3.0], [4.0]])
    >>> sigma2, s2, n_iter = fit_evidence(Phi, Y, 1.0, 1.0, tol=1e-10)
    >>> round(sigma2, 4), round(s2, 4)
    (1.6667, 5.8333)
    """
    N, K = Phi.shape
    D = Y.shape[1]
    # eigen-decomposition once: every iterate is then O(K D)
    eig, V = linalg.eigh(Phi.T @ Phi, check_finite=False)
    eig = np.clip(eig, 0.0, None)
    proj = V.T @ (Phi.T @ Y)                                 # (K, D)
    tiny = np.finfo(float).tiny

    def update(sigma2, s2):
        denom = eig + sigma2 / s2                            # eigenvalues of sigma2 * A
        coef_rot = proj / denom[:, None]                      # V^T M
        resid = float(np.sum((Y - Phi @ (V @ coef_rot)) ** 2))
        gamma = float(np.sum(eig / denom))
        return (max(resid / max(D * (N - gamma), tiny), tiny),
                max(float(np.sum(coef_rot ** 2)) / max(D * gamma, tiny), tiny))

    return _fixed_point(update, lambda a, b: log_marginal_likelihood(Phi, Y, a, b),
                        noise_variance, prior_variance, max_iter, tol, "evidence")


def _fixed_point(update, objective, sigma2, s2, max_iter, tol, what):
    """Iterate ``(sigma2, s2) <- update(sigma2, s2)`` until both change by less
    than ``tol`` (relative) or ``objective`` by less than ``tol * max(1, |objective|)``
    (needed when s2 decays towards 0 because Y has no signal)."""
    sigma2, s2 = float(sigma2), float(s2)
    obj = objective(sigma2, s2)
    for it in range(1, max_iter + 1):
        new_sigma2, new_s2 = update(sigma2, s2)
        done = abs(new_s2 - s2) <= tol * s2 and abs(new_sigma2 - sigma2) <= tol * sigma2
        sigma2, s2 = new_sigma2, new_s2
        new_obj = objective(sigma2, s2)
        done = done or abs(new_obj - obj) <= tol * max(1.0, abs(new_obj))
        obj = new_obj
        if done:
            return sigma2, s2, it
    warnings.warn(f"{what} maximisation did not converge in {max_iter} iterations",
                  RuntimeWarning, stacklevel=3)
    return sigma2, s2, max_iter


def fit_elbo(
    Phi: np.ndarray, Y: np.ndarray, noise_variance: float, prior_variance: float,
    max_iter: int = 300, tol: float = 1e-6,
) -> Tuple[float, float, int]:
    """``sigma2`` and ``s2`` maximising the mean-field ELBO (coordinate ascent).

    With ``q`` at its optimum for the current variances, the ELBO's stationary
    points in the variances are
    ``s2 = (||M||^2 + sum var) / (K D)`` and
    ``sigma2 = (||Y - Phi M||^2 + sum_n sum_kd phi_nk^2 var_kd) / (N D)``;
    each round of (q, variances) updates cannot decrease the ELBO.

    The stopping rule is that of :func:`fit_evidence`, with the ELBO
    (:func:`mfvi_elbo`) in place of the log evidence.

    Parameters
    ----------
    Phi : ndarray of shape (N, K)
        Features, one row per training point.
    Y : ndarray of shape (N, D)
        Targets, one column per output.
    noise_variance, prior_variance : float
        Starting values of ``sigma2`` and ``s2``, both positive.
    max_iter : int, default=300
        Maximum number of rounds.
    tol : float, default=1e-6
        Relative tolerance of the stopping rule.

    Returns
    -------
    noise_variance, prior_variance : float
        The fitted ``sigma2`` and ``s2``.
    n_iter : int
        Rounds run.

    Warns
    -----
    RuntimeWarning
        If the iteration did not converge in ``max_iter`` rounds (the last
        iterate is returned).

    Examples
    --------
    With a single feature the ELBO equals the log evidence, so both have the
    maximiser ``sigma2 = 5 / 3``, ``s2 = 35 / 6`` found in
    :func:`fit_evidence`:

    >>> import numpy as np
    >>> from skdbal.models.linear_posterior import fit_elbo
    >>> Phi, Y = np.ones((4, 1)), np.array([[1.0], [2.0], [3.0], [4.0]])
    >>> sigma2, s2, n_iter = fit_elbo(Phi, Y, 1.0, 1.0, tol=1e-10)
    >>> round(sigma2, 4), round(s2, 4)
    (1.6667, 5.8333)
    """
    N, K = Phi.shape
    D = Y.shape[1]
    gram = Phi.T @ Phi
    diag = np.diag(gram).copy()
    PtY = Phi.T @ Y
    tiny = np.finfo(float).tiny

    def update(sigma2, s2):
        L = precision_cholesky(gram, sigma2, s2)
        M = linalg.cho_solve((L, True), PtY / sigma2, check_finite=False)
        var = 1.0 / (diag / sigma2 + 1.0 / s2)               # (K,), shared by outputs
        resid = float(np.sum((Y - Phi @ M) ** 2))
        return (max((resid + D * float(diag @ var)) / (N * D), tiny),
                max((float(np.sum(M ** 2)) + D * float(np.sum(var))) / (K * D), tiny))

    return _fixed_point(update, lambda a, b: mfvi_elbo(Phi, Y, a, b),
                        noise_variance, prior_variance, max_iter, tol, "ELBO")


def mfvi_elbo(
    Phi: np.ndarray, Y: np.ndarray, noise_variance: float, prior_variance: float
) -> float:
    """The ELBO of the optimal mean-field ``q`` (Anonymous, n.d., Appendix A.2).

    A lower bound on :func:`log_marginal_likelihood`, tight when ``Phi`` has
    orthogonal columns.

    Parameters
    ----------
    Phi : ndarray of shape (N, K)
        Features, one row per training point.
    Y : ndarray of shape (N, D)
        Targets, one column per output.
    noise_variance, prior_variance : float
        ``sigma2`` and ``s2``, both positive.

    Returns
    -------
    elbo : float
        ``E_q[log p(Y | W)] - KL(q || p)``, summed over the ``D`` outputs.

    References
    ----------
    .. [1] Anonymous (candidate number 1091797), "Uncertainty in deep
       learning", anonymised report, undated. Code:
       https://www.github.com/anonymous-account-67/UncertaintyInDeepLearning.

    Examples
    --------
    Tight for a single feature (see :func:`log_marginal_likelihood`), strictly
    below the evidence for the correlated features of :func:`mfvi_posterior`:

    >>> import numpy as np
    >>> from skdbal.models.linear_posterior import log_marginal_likelihood, mfvi_elbo
    >>> round(float(mfvi_elbo(np.array([[1.0], [1.0]]), np.array([[1.0], [3.0]]), 1.0, 1.0)), 4)
    -4.7205
    >>> Phi = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> Y = np.array([[1.0], [2.0], [3.0]])
    >>> round(float(mfvi_elbo(Phi, Y, 1.0, 1.0)), 4), round(float(log_marginal_likelihood(Phi, Y, 1.0, 1.0)), 4)
    (-5.6679, -5.609)
    """
    N, K = Phi.shape
    D = Y.shape[1]
    M, var = mfvi_posterior(Phi, Y, noise_variance, prior_variance)
    resid = float(np.sum((Y - Phi @ M) ** 2)) + float(np.sum((Phi ** 2) @ var))
    expected_loglik = -0.5 * resid / noise_variance - 0.5 * N * D * np.log(2 * np.pi * noise_variance)
    kl = 0.5 * float(np.sum(var / prior_variance + M ** 2 / prior_variance - 1.0
                             + np.log(prior_variance) - np.log(var)))
    return expected_loglik - kl
