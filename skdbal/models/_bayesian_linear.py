"""Bayesian linear regression with analytic or mean-field VI inference (Anonymous, n.d., §4)."""
from __future__ import annotations

import numbers
from typing import Optional, Union

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from .._validation import check_positive_int
from . import linear_posterior as posterior

__all__ = ["BayesianLinearRegression"]


class BayesianLinearRegression(RegressorMixin, BaseEstimator):
    """Bayesian linear regression on fixed features, with multi-output targets.

    The "Bayesian last layer" of Anonymous (n.d., §4 and Appendix A): with
    features ``Phi`` (for example the frozen penultimate layer of a network,
    see :class:`skdbal.NetFeatures`) and targets ``Y`` (for example one-hot
    labels),

    .. math::

        Y \\mid W \\sim \\mathcal{MN}(\\Phi W, \\sigma^2 I_N, \\Sigma), \\qquad
        W \\sim \\mathcal{MN}(0, s^2 I_K, \\Sigma).

    ``inference="analytic"`` keeps the exact matrix-normal posterior
    ``MN(M, Sigma', Sigma)`` with
    ``Sigma' = (Phi^T Phi / sigma^2 + I / s^2)^{-1}`` and
    ``M = Sigma' Phi^T Y / sigma^2``; the predictive covariance of a new
    ``y*`` is ``var* Sigma`` with ``var* = sigma^2 + phi^T Sigma' phi``.

    ``inference="mfvi"`` keeps the optimal fully factorised Gaussian ``q(W)``
    (which ignores ``Sigma``): the same mean ``M`` and weight variances
    ``var_kd = (sum_n phi_nk^2 / sigma^2 + 1 / s^2)^{-1}``, so that
    ``Var(y*_d) = sigma^2 + sum_k phi_k^2 var_kd``. Mean field underestimates
    the weights' marginal variances (``var_kd <= Sigma'_kk``, equal when the
    columns of ``Phi`` are orthogonal).

    All solves use a Cholesky factor of the posterior precision; it is
    positive definite for any finite ``prior_variance``, so a singular
    ``Phi^T Phi`` (fewer labels than features, duplicated features) is fine.

    Parameters
    ----------
    inference : {"analytic", "mfvi"}, default="analytic"
        Exact matrix-normal posterior, or mean-field variational inference.
    noise_variance : float, default=1.0
        ``sigma^2``, the observation noise variance of each output. The
        starting value when ``fit_hyperparameters=True``.
    prior_variance : float, default=1.0
        ``s^2``, the prior variance of each weight. The starting value when
        ``fit_hyperparameters=True``.
    fit_hyperparameters : bool, default=False
        Fit ``sigma^2`` and ``s^2`` to the data, shared by all outputs: by
        maximising the marginal likelihood (evidence, MacKay's fixed point as
        in :class:`sklearn.linear_model.BayesianRidge`) for ``"analytic"``,
        and by maximising the ELBO for ``"mfvi"``. The fitted values are
        ``noise_variance_`` and ``prior_variance_``.
    output_covariance : {"identity", "residual"} or array-like of shape (D, D), default="identity"
        ``Sigma``, the correlation of the outputs in the matrix-normal model
        (``"analytic"`` only). ``"identity"``: independent outputs.
        ``"residual"``: the correlation matrix of the training residuals
        ``Y - Phi M`` (the mean does not depend on ``Sigma``). An array is used
        as given. A correlation matrix (unit diagonal) keeps ``sigma^2`` the
        variance of each output, and the trace of the predictive covariance
        then equals ``D var*`` whatever the correlations, so acquisition by
        :meth:`predictive_variance` does not depend on this choice.
    fit_intercept : bool, default=False
        Fit an unregularised intercept by centring ``Phi`` and ``Y`` first,
        as scikit-learn's linear models do. Its uncertainty is not part of
        the predictive variance (as in ``BayesianRidge``).
    max_iter : int, default=300
        Iterations of the hyperparameter fit.
    tol : float, default=1e-6
        Relative change of both variances at which that fit stops.

    Attributes
    ----------
    coef_ : ndarray of shape (n_outputs, n_features) or (n_features,)
        Posterior mean ``M^T`` (1-d for a 1-d ``y``).
    intercept_ : ndarray of shape (n_outputs,) or float
        Zero when ``fit_intercept=False``.
    coef_var_ : ndarray of shape (n_outputs, n_features) or (n_features,)
        Marginal posterior variance of each weight: ``Sigma'_kk Sigma_dd``
        (analytic) or ``var_kd`` (mfvi).
    precision_cholesky_ : ndarray of shape (n_features, n_features)
        Lower Cholesky factor of ``Phi^T Phi / sigma^2 + I / s^2`` (analytic).
    output_covariance_ : ndarray of shape (n_outputs, n_outputs)
        ``Sigma`` as used.
    noise_variance_, prior_variance_ : float
        The variances used (fitted when ``fit_hyperparameters=True``).
    n_iter_ : int
        Iterations of the hyperparameter fit; 1 (the closed-form solve) when
        the variances are fixed.
    log_marginal_likelihood_ : float
        ``log p(Y)`` (analytic, with independent outputs) or the ELBO (mfvi)
        at the variances used.
    n_features_in_ : int

    See Also
    --------
    sklearn.linear_model.BayesianRidge : the single-output analytic model with
        Gamma hyperpriors.
    skdbal.NetFeatures : frozen network features to put under this layer.
    skdbal.acquisition.predictive_variance : the acquisition that uses
        :meth:`predictive_variance`.

    References
    ----------
    .. [1] Anonymous (candidate number 1091797), "Uncertainty in deep
       learning", anonymised report, undated. Code:
       https://www.github.com/anonymous-account-67/UncertaintyInDeepLearning.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal import BayesianLinearRegression
    >>> rng = np.random.RandomState(0)
    >>> Phi = rng.normal(size=(50, 3))
    >>> Y = np.eye(2)[rng.randint(0, 2, 50)]          # one-hot targets
    >>> blr = BayesianLinearRegression(noise_variance=0.1, prior_variance=1.0).fit(Phi, Y)
    >>> mean, std = blr.predict(Phi[:4], return_std=True)
    >>> mean.shape, std.shape
    ((4, 2), (4, 2))
    >>> blr.predictive_variance(Phi[:4]).shape    # trace: one score per row
    (4,)
    >>> mf = BayesianLinearRegression(inference="mfvi", noise_variance=0.1).fit(Phi, Y)
    >>> bool(np.allclose(mf.coef_, blr.coef_)), bool(np.all(mf.coef_var_ <= blr.coef_var_ + 1e-12))
    (True, True)
    """

    def __init__(
        self,
        inference: str = "analytic",
        noise_variance: float = 1.0,
        prior_variance: float = 1.0,
        fit_hyperparameters: bool = False,
        output_covariance: Union[str, np.ndarray] = "identity",
        fit_intercept: bool = False,
        max_iter: int = 300,
        tol: float = 1e-6,
    ):
        self.inference = inference
        self.noise_variance = noise_variance
        self.prior_variance = prior_variance
        self.fit_hyperparameters = fit_hyperparameters
        self.output_covariance = output_covariance
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.tol = tol

    # ------------------------------------------------------------------ checks
    def _check_params(self, n_outputs: int) -> Optional[np.ndarray]:
        if self.inference not in ("analytic", "mfvi"):
            raise ValueError(f"inference must be 'analytic' or 'mfvi', got {self.inference!r}")
        for name in ("noise_variance", "prior_variance", "tol"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise TypeError(f"{name} must be a positive float, got {type(value).__name__}")
            if not (np.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive finite float, got {value!r}")
            if value < np.finfo(float).tiny:  # subnormal: its reciprocal overflows
                raise ValueError(f"{name} must be at least {np.finfo(float).tiny:.3g} (the smallest normal "
                                 f"float), got {value!r}")
        check_positive_int(self.max_iter, "max_iter")
        cov = self.output_covariance
        if isinstance(cov, str):
            if cov not in ("identity", "residual"):
                raise ValueError(f"output_covariance must be 'identity', 'residual' or a (D, D) array, got {cov!r}")
            if cov == "residual" and self.inference == "mfvi":
                raise ValueError("output_covariance='residual' needs inference='analytic'; "
                                 "mean-field inference assumes independent outputs")
            return None
        cov = np.asarray(cov, dtype=float)
        if self.inference == "mfvi":
            raise ValueError("an output_covariance array needs inference='analytic'; "
                             "mean-field inference assumes independent outputs")
        if cov.shape != (n_outputs, n_outputs):
            raise ValueError(f"output_covariance must have shape ({n_outputs}, {n_outputs}) "
                             f"for {n_outputs} outputs, got {cov.shape}")
        if not np.all(np.isfinite(cov)) or not np.allclose(cov, cov.T):
            raise ValueError("output_covariance must be a finite symmetric matrix")
        if np.linalg.eigvalsh(cov).min() <= 0:
            raise ValueError("output_covariance must be positive definite")
        return cov

    # --------------------------------------------------------------------- fit
    def fit(self, X, y):
        """Fit the posterior over the weights.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features ``Phi``.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Targets (one-hot labels when a classifier is fitted as a
            regressor, as in Anonymous, n.d., §4).

        Returns
        -------
        self : BayesianLinearRegression
        """
        state = dict(self.__dict__)
        try:
            return self._fit(X, y)
        except BaseException:  # a failed fit leaves a fitted model as it was
            self.__dict__.clear()
            self.__dict__.update(state)
            raise

    def _fit(self, X, y):
        X, y = validate_data(self, X, y, multi_output=True, y_numeric=True, dtype=np.float64)
        Y = y.reshape(-1, 1) if y.ndim == 1 else y
        cov = self._check_params(Y.shape[1])
        if self.fit_intercept:
            x_mean, y_mean = X.mean(axis=0), Y.mean(axis=0)
            Phi, Yc = X - x_mean, Y - y_mean
        else:
            x_mean, y_mean = np.zeros(X.shape[1]), np.zeros(Y.shape[1])
            Phi, Yc = X, Y
        sigma2, s2, n_iter = float(self.noise_variance), float(self.prior_variance), 1
        if self.fit_hyperparameters:
            fitter = posterior.fit_evidence if self.inference == "analytic" else posterior.fit_elbo
            sigma2, s2, n_iter = fitter(Phi, Yc, sigma2, s2, max_iter=self.max_iter, tol=self.tol)
        D = Y.shape[1]
        if self.inference == "analytic":
            M, L = posterior.analytic_posterior(Phi, Yc, sigma2, s2)
            if cov is None and self.output_covariance == "residual":
                R = Yc - Phi @ M
                c = R.T @ R
                d = np.sqrt(np.clip(np.diag(c), np.finfo(float).tiny, None))
                cov = c / np.outer(d, d)
                cov[np.diag_indices(D)] = 1.0
            if cov is None:
                cov = np.eye(D)
            row_var = np.diag(posterior.posterior_covariance(L))
            coef_var = np.outer(np.diag(cov), row_var)        # (D, K)
            fitted = {"precision_cholesky_": L,
                      "log_marginal_likelihood_": posterior.log_marginal_likelihood(Phi, Yc, sigma2, s2)}
        else:
            M, var = posterior.mfvi_posterior(Phi, Yc, sigma2, s2)
            cov = np.eye(D)
            coef_var = var.T
            fitted = {"_mfvi_var": var, "log_marginal_likelihood_": posterior.mfvi_elbo(Phi, Yc, sigma2, s2)}
        if not (np.isfinite(M).all() and np.isfinite(coef_var).all()):
            raise ValueError(f"the posterior is not finite with noise_variance={sigma2!r} and prior_variance="
                             f"{s2!r}: their ratio is beyond float64's range for these features; rescale the "
                             "features or the hyperparameters")
        for name, value in fitted.items():
            setattr(self, name, value)
        self._y_1d = y.ndim == 1
        self.coef_ = M.T[0] if self._y_1d else M.T
        self.coef_var_ = coef_var[0] if self._y_1d else coef_var
        intercept = y_mean - x_mean @ M
        self.intercept_ = float(intercept[0]) if self._y_1d else intercept
        self._M, self._x_mean = M, x_mean
        self.output_covariance_ = cov
        self.noise_variance_, self.prior_variance_, self.n_iter_ = sigma2, s2, n_iter
        return self

    # ----------------------------------------------------------------- predict
    def _features(self, X) -> np.ndarray:
        check_is_fitted(self, "coef_")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return X

    def _epistemic(self, Phi_c: np.ndarray) -> np.ndarray:
        """``phi^T Sigma' phi`` per output (analytic) or ``sum_k phi_k^2 var_kd``: (N*, D)."""
        D = self._M.shape[1]
        if self.inference == "analytic":
            v = posterior.analytic_feature_variance(self.precision_cholesky_, Phi_c)
            return v[:, None] * np.diag(self.output_covariance_)[None, :]
        return posterior.mfvi_feature_variance(self._mfvi_var, Phi_c).reshape(-1, D)

    def predict(self, X, return_std: bool = False, return_cov: bool = False):
        """Predictive mean, and optionally its standard deviation or covariance.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features ``Phi`` of the rows to predict.
        return_std : bool, default=False
            Also return the predictive standard deviation of each output,
            noise included.
        return_cov : bool, default=False
            Also return the joint predictive covariance of the rows, per
            output, as :class:`sklearn.gaussian_process.GaussianProcessRegressor`
            does: ``Cov(y_i, y_j) = (sigma^2 [i = j] + phi_i^T Sigma' phi_j) Sigma_dd``
            (analytic) or ``sigma^2 [i = j] + sum_k phi_ik phi_jk var_kd`` (mfvi).
            The covariance between outputs ``d, e`` of one row is
            ``var* Sigma_de`` (analytic; see ``output_covariance_``).

        Returns
        -------
        y_mean : ndarray of shape (n_samples,) or (n_samples, n_outputs)
            Predictive mean, 1-d when the model was fitted on a 1-d ``y``.
        y_std : ndarray of the same shape, when ``return_std``
        y_cov : ndarray of shape (n_samples, n_samples) or (n_samples, n_samples, n_outputs),
            when ``return_cov``

        Raises
        ------
        ValueError
            If both ``return_std`` and ``return_cov`` are True.
        """
        if return_std and return_cov:
            raise ValueError("at most one of return_std and return_cov can be requested")
        X = self._features(X)
        mean = X @ self._M + np.atleast_1d(self.intercept_)[None, :]
        Phi_c = X - self._x_mean
        out_mean = mean[:, 0] if self._y_1d else mean
        if return_std:
            var = self.noise_variance_ * np.diag(self.output_covariance_)[None, :] + self._epistemic(Phi_c)
            std = np.sqrt(var)
            return out_mean, (std[:, 0] if self._y_1d else std)
        if return_cov:
            n = Phi_c.shape[0]
            if self.inference == "analytic":
                Z = posterior.whiten(self.precision_cholesky_, Phi_c)
                shared = Z.T @ Z + self.noise_variance_ * np.eye(n)
                cov = shared[:, :, None] * np.diag(self.output_covariance_)[None, None, :]
            else:
                cov = np.einsum("ik,jk,kd->ijd", Phi_c, Phi_c, self._mfvi_var)
                cov += self.noise_variance_ * np.eye(n)[:, :, None]
            return out_mean, (cov[:, :, 0] if self._y_1d else cov)
        return out_mean

    def predictive_variance(self, X, include_noise: bool = True) -> np.ndarray:
        """Trace of the predictive covariance of ``y*``: one uncertainty per row.

        The scalar used for acquisition by Anonymous (n.d., §4):
        ``var* tr(Sigma)`` (analytic) or ``sum_d Var(y*_d)`` (mfvi).
        ``include_noise=False`` drops the constant ``sigma^2 tr(Sigma)``,
        leaving the epistemic part; rankings are the same.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features ``Phi`` of the rows to score.
        include_noise : bool, default=True
            Add the observation noise ``sigma^2 tr(Sigma)``.

        Returns
        -------
        variance : ndarray of shape (n_samples,), dtype float64
            The trace for each row, whether ``y`` was 1-d or 2-d.
        """
        X = self._features(X)
        total = self._epistemic(X - self._x_mean).sum(axis=1)
        if include_noise:
            total = total + self.noise_variance_ * float(np.trace(self.output_covariance_))
        return total

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags
