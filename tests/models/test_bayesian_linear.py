"""BayesianLinearRegression and the posterior algebra (seed 000 §4, Appendix A)."""
import warnings

import numpy as np
import pytest
from scipy.stats import multivariate_normal
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import BayesianRidge
from sklearn.utils.estimator_checks import parametrize_with_checks

from skdbal import BayesianLinearRegression
from skdbal.models import linear_posterior as posterior


def _data(n=40, k=6, d=3, seed=0):
    rng = np.random.RandomState(seed)
    Phi = rng.normal(size=(n, k))
    Y = np.eye(d)[rng.randint(0, d, n)] + 0.1 * rng.normal(size=(n, d))
    return Phi, Y


def _direct(Phi, Y, sigma2, s2):
    """The seed's formulas with explicit inverses, as a reference."""
    K = Phi.shape[1]
    Sigma_p = np.linalg.inv(Phi.T @ Phi / sigma2 + np.eye(K) / s2)
    M = Sigma_p @ Phi.T @ Y / sigma2
    return M, Sigma_p


def _orthogonal_columns(n=30, k=4, seed=1):
    rng = np.random.RandomState(seed)
    Q, _ = np.linalg.qr(rng.normal(size=(n, k)))
    return Q * np.array([3.0, 1.0, 0.5, 2.0])[:k]


# ---------------------------------------------------------------- analytic
@pytest.mark.parametrize("sigma2,s2", [(1.0, 1.0), (0.05, 10.0), (4.0, 0.1)])
def test_analytic_posterior_matches_direct_solve(sigma2, s2):
    Phi, Y = _data()
    M, Sigma_p = _direct(Phi, Y, sigma2, s2)
    blr = BayesianLinearRegression(noise_variance=sigma2, prior_variance=s2).fit(Phi, Y)
    np.testing.assert_allclose(blr.coef_, M.T, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(blr.coef_var_, np.tile(np.diag(Sigma_p), (3, 1)), rtol=1e-10)
    Xs = np.random.RandomState(5).normal(size=(7, 6))
    var_star = sigma2 + np.einsum("nk,kl,nl->n", Xs, Sigma_p, Xs)
    mean, std = blr.predict(Xs, return_std=True)
    np.testing.assert_allclose(mean, Xs @ M, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(std, np.sqrt(np.tile(var_star[:, None], (1, 3))), rtol=1e-10)
    # the seed's scalar: trace of var* x Sigma with Sigma = I
    np.testing.assert_allclose(blr.predictive_variance(Xs), 3 * var_star, rtol=1e-10)
    np.testing.assert_allclose(blr.predictive_variance(Xs, include_noise=False),
                               3 * (var_star - sigma2), rtol=1e-9)
    _, cov = blr.predict(Xs, return_cov=True)
    joint = Xs @ Sigma_p @ Xs.T + sigma2 * np.eye(7)
    assert cov.shape == (7, 7, 3)
    for d in range(3):
        np.testing.assert_allclose(cov[:, :, d], joint, rtol=1e-9, atol=1e-12)


def test_hand_computed_one_feature():
    # phi = (1, 2), y = (1, 3), sigma2 = s2 = 1: A = 1 + 4 + 1 = 6, M = (1 + 6) / 6
    blr = BayesianLinearRegression().fit([[1.0], [2.0]], [1.0, 3.0])
    assert blr.coef_.shape == (1,)
    assert blr.coef_[0] == pytest.approx(7 / 6)
    assert blr.coef_var_[0] == pytest.approx(1 / 6)
    mean, std = blr.predict([[3.0]], return_std=True)
    assert mean[0] == pytest.approx(3.5)
    assert std[0] == pytest.approx(np.sqrt(1 + 9 / 6))
    assert blr.predictive_variance([[3.0]])[0] == pytest.approx(1 + 9 / 6)


def test_single_output_agrees_with_bayesian_ridge_at_fixed_alpha_lambda():
    rng = np.random.RandomState(0)
    X = rng.normal(size=(60, 5))
    y = X @ rng.normal(size=5) + 0.3 * rng.normal(size=60) + 2.0
    br = BayesianRidge(tol=1e-10).fit(X, y)
    ours = BayesianLinearRegression(noise_variance=1 / br.alpha_, prior_variance=1 / br.lambda_,
                                    fit_intercept=True).fit(X, y)
    np.testing.assert_allclose(ours.coef_, br.coef_, rtol=1e-8)
    assert ours.intercept_ == pytest.approx(br.intercept_, rel=1e-8)
    Xs = rng.normal(size=(9, 5))
    m1, s1 = ours.predict(Xs, return_std=True)
    m2, s2 = br.predict(Xs, return_std=True)
    np.testing.assert_allclose(m1, m2, rtol=1e-8)
    np.testing.assert_allclose(s1, s2, rtol=1e-8)
    np.testing.assert_allclose(ours.coef_var_, np.diag(br.sigma_), rtol=1e-8)


def test_evidence_fit_matches_bayesian_ridge_without_hyperpriors():
    rng = np.random.RandomState(1)
    X = rng.normal(size=(80, 4))
    y = X @ np.array([1.0, -2.0, 0.0, 0.5]) + 0.5 * rng.normal(size=80)
    br = BayesianRidge(alpha_1=0, alpha_2=0, lambda_1=0, lambda_2=0, tol=1e-12, max_iter=2000,
                       fit_intercept=False).fit(X, y)
    ours = BayesianLinearRegression(fit_hyperparameters=True, tol=1e-12, max_iter=2000).fit(X, y)
    assert ours.noise_variance_ == pytest.approx(1 / br.alpha_, rel=1e-6)
    assert ours.prior_variance_ == pytest.approx(1 / br.lambda_, rel=1e-6)
    assert ours.n_iter_ >= 1
    np.testing.assert_allclose(ours.coef_, br.coef_, rtol=1e-6)


def test_log_marginal_likelihood_matches_gaussian_density_and_evidence_fit_maximises_it():
    rng = np.random.RandomState(6)
    Phi = rng.normal(size=(25, 4))
    Y = Phi @ rng.normal(size=(4, 2)) + 0.4 * rng.normal(size=(25, 2))
    sigma2, s2 = 0.3, 2.0
    ref = sum(multivariate_normal(np.zeros(25), sigma2 * np.eye(25) + s2 * Phi @ Phi.T).logpdf(Y[:, d])
              for d in range(2))
    assert posterior.log_marginal_likelihood(Phi, Y, sigma2, s2) == pytest.approx(ref, rel=1e-10)
    fitted = BayesianLinearRegression(fit_hyperparameters=True, noise_variance=sigma2,
                                      prior_variance=s2, tol=1e-12, max_iter=5000).fit(Phi, Y)
    best = fitted.log_marginal_likelihood_
    assert best > ref
    for fs, fp in [(1.1, 1.0), (0.9, 1.0), (1.0, 1.1), (1.0, 0.9)]:
        other = posterior.log_marginal_likelihood(Phi, Y, fs * fitted.noise_variance_,
                                                  fp * fitted.prior_variance_)
        assert other < best


def test_singular_gram_is_fine():
    # fewer rows than features, and a duplicated column: Phi^T Phi is singular
    rng = np.random.RandomState(2)
    Phi = rng.normal(size=(5, 8))
    Phi[:, 7] = Phi[:, 0]
    Y = rng.normal(size=(5, 2))
    assert np.linalg.matrix_rank(Phi.T @ Phi) < 8
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        blr = BayesianLinearRegression(noise_variance=0.01, prior_variance=1.0).fit(Phi, Y)
    M, Sigma_p = _direct(Phi, Y, 0.01, 1.0)
    np.testing.assert_allclose(blr.coef_, M.T, rtol=1e-8, atol=1e-10)
    assert np.all(np.isfinite(blr.predictive_variance(rng.normal(size=(3, 8)))))
    # the duplicated features share their weight equally
    np.testing.assert_allclose(blr.coef_[:, 0], blr.coef_[:, 7], rtol=1e-8)


def test_numerically_singular_precision_gets_jitter_with_a_warning():
    Phi = np.ones((4, 3))
    with pytest.warns(RuntimeWarning, match="numerically singular"):
        blr = BayesianLinearRegression(noise_variance=1e-200, prior_variance=1e200).fit(Phi, np.ones(4))
    assert np.all(np.isfinite(blr.coef_))


# ------------------------------------------------------------------ MFVI
def test_mfvi_mean_equals_analytic_and_variances_are_the_seed_formula():
    Phi, Y = _data()
    a = BayesianLinearRegression(noise_variance=0.2, prior_variance=3.0).fit(Phi, Y)
    m = BayesianLinearRegression(inference="mfvi", noise_variance=0.2, prior_variance=3.0).fit(Phi, Y)
    np.testing.assert_allclose(m.coef_, a.coef_, rtol=1e-12)
    var = 1.0 / ((Phi ** 2).sum(axis=0) / 0.2 + 1 / 3.0)
    np.testing.assert_allclose(m.coef_var_, np.tile(var, (3, 1)), rtol=1e-12)
    Xs = np.random.RandomState(3).normal(size=(5, 6))
    _, std = m.predict(Xs, return_std=True)
    np.testing.assert_allclose(std ** 2, 0.2 + (Xs ** 2 @ var)[:, None] * np.ones(3), rtol=1e-12)
    np.testing.assert_allclose(m.predictive_variance(Xs), 3 * (0.2 + Xs ** 2 @ var), rtol=1e-12)
    _, cov = m.predict(Xs, return_cov=True)
    np.testing.assert_allclose(cov[:, :, 1], Xs @ np.diag(var) @ Xs.T + 0.2 * np.eye(5), rtol=1e-10)


def test_mfvi_underestimates_marginal_variances():
    Phi, Y = _data(n=30, k=6)
    Phi[:, 1] += 0.8 * Phi[:, 0]          # correlated features
    a = BayesianLinearRegression(noise_variance=0.5).fit(Phi, Y)
    m = BayesianLinearRegression(inference="mfvi", noise_variance=0.5).fit(Phi, Y)
    assert np.all(m.coef_var_ <= a.coef_var_ * (1 + 1e-12))
    assert np.any(m.coef_var_ < a.coef_var_ * (1 - 1e-3))   # strictly, where features correlate
    # a lower bound on the evidence
    assert posterior.mfvi_elbo(Phi, Y, 0.5, 1.0) < posterior.log_marginal_likelihood(Phi, Y, 0.5, 1.0)


def test_mfvi_is_exact_for_orthogonal_columns():
    Phi = _orthogonal_columns()
    Y = np.random.RandomState(4).normal(size=(30, 2))
    a = BayesianLinearRegression(noise_variance=0.7, prior_variance=2.0).fit(Phi, Y)
    m = BayesianLinearRegression(inference="mfvi", noise_variance=0.7, prior_variance=2.0).fit(Phi, Y)
    np.testing.assert_allclose(m.coef_var_, a.coef_var_, rtol=1e-10)
    Xs = np.random.RandomState(5).normal(size=(6, 4))
    np.testing.assert_allclose(m.predictive_variance(Xs), a.predictive_variance(Xs), rtol=1e-10)
    assert posterior.mfvi_elbo(Phi, Y, 0.7, 2.0) == pytest.approx(
        posterior.log_marginal_likelihood(Phi, Y, 0.7, 2.0), rel=1e-10)


def test_mfvi_predictive_variance_is_not_pointwise_below_analytic():
    # A = [[1, .9], [.9, 1]] (sigma2 = 1, prior folded in): mean field ignores the
    # correlation, so along (1, 1) it is *more* uncertain and along (1, -1) less.
    Phi = np.array([[1.0, 1.0], [1.0, -1.0]]) * np.sqrt([[0.45], [0.05]])
    y = np.zeros(2)
    a = BayesianLinearRegression(prior_variance=1e12).fit(Phi, y)
    m = BayesianLinearRegression(inference="mfvi", prior_variance=1e12).fit(Phi, y)
    gram = Phi.T @ Phi
    np.testing.assert_allclose(gram, [[0.5, 0.4], [0.4, 0.5]], atol=1e-12)
    along = np.array([[1.0, 1.0], [1.0, -1.0]])
    va = a.predictive_variance(along, include_noise=False)
    vm = m.predictive_variance(along, include_noise=False)
    # analytic: u^T A^-1 u = 2 / 0.9 along (1, 1) and 2 / 0.1 along (1, -1); mean field: 2 / 0.5
    np.testing.assert_allclose(va, [2 / 0.9, 2 / 0.1], rtol=1e-6)
    np.testing.assert_allclose(vm, [4.0, 4.0], rtol=1e-6)


def test_elbo_fit_increases_the_elbo():
    rng = np.random.RandomState(7)
    Phi = rng.normal(size=(50, 5))
    Y = Phi @ rng.normal(size=(5, 2)) + 0.5 * rng.normal(size=(50, 2))
    start = posterior.mfvi_elbo(Phi, Y, 5.0, 0.01)
    m = BayesianLinearRegression(inference="mfvi", fit_hyperparameters=True, noise_variance=5.0,
                                 prior_variance=0.01, tol=1e-10, max_iter=5000).fit(Phi, Y)
    assert m.log_marginal_likelihood_ > start
    for fs, fp in [(1.05, 1.0), (0.95, 1.0), (1.0, 1.05), (1.0, 0.95)]:
        assert posterior.mfvi_elbo(Phi, Y, fs * m.noise_variance_, fp * m.prior_variance_) \
            < m.log_marginal_likelihood_


# ---------------------------------------------------------- output covariance
def test_output_covariance_residual_and_array():
    Phi, Y = _data()
    Y[:, 1] = Y[:, 0] + 0.05 * np.random.RandomState(0).normal(size=len(Y))   # correlated outputs
    ident = BayesianLinearRegression(noise_variance=0.3).fit(Phi, Y)
    resid = BayesianLinearRegression(noise_variance=0.3, output_covariance="residual").fit(Phi, Y)
    S = resid.output_covariance_
    np.testing.assert_allclose(np.diag(S), 1.0)
    np.testing.assert_allclose(S, S.T)
    assert S[0, 1] > 0.9
    R = Y - Phi @ resid.coef_.T
    # the zero-mean noise model: second moments of the residuals, not centred
    ref = (R[:, 0] @ R[:, 2]) / np.sqrt((R[:, 0] @ R[:, 0]) * (R[:, 2] @ R[:, 2]))
    np.testing.assert_allclose(S[0, 2], ref, rtol=1e-10)
    Xs = Phi[:4]
    # unit diagonal: marginal std and the trace do not depend on the correlations
    np.testing.assert_allclose(resid.predict(Xs, return_std=True)[1], ident.predict(Xs, return_std=True)[1])
    np.testing.assert_allclose(resid.predictive_variance(Xs), ident.predictive_variance(Xs))
    scaled = BayesianLinearRegression(noise_variance=0.3, output_covariance=np.diag([1.0, 4.0, 9.0])).fit(Phi, Y)
    np.testing.assert_allclose(scaled.predict(Xs, return_std=True)[1],
                               ident.predict(Xs, return_std=True)[1] * [1.0, 2.0, 3.0], rtol=1e-12)
    np.testing.assert_allclose(scaled.predictive_variance(Xs), ident.predictive_variance(Xs) * 14 / 3,
                               rtol=1e-12)


# -------------------------------------------------------------- bad input
@pytest.mark.parametrize("params,X,y,exc,match", [
    ({}, [[np.nan, 1.0]], [1.0], ValueError, "NaN"),
    ({}, [[np.inf, 1.0]], [1.0], ValueError, "infinity"),
    ({}, [1.0, 2.0], [1.0, 2.0], ValueError, "2D array"),
    ({}, [[1.0], [2.0]], [1.0], ValueError, "inconsistent numbers of samples"),
    ({}, [[1.0], [2.0]], [[np.nan], [1.0]], ValueError, "NaN"),
    ({"inference": "laplace"}, [[1.0]], [1.0], ValueError, "inference"),
    ({"noise_variance": -1.0}, [[1.0]], [1.0], ValueError, "noise_variance"),
    ({"prior_variance": 0.0}, [[1.0]], [1.0], ValueError, "prior_variance"),
    ({"prior_variance": np.inf}, [[1.0]], [1.0], ValueError, "prior_variance"),
    ({"noise_variance": "1"}, [[1.0]], [1.0], TypeError, "noise_variance"),
    ({"noise_variance": 1e-320}, [[1.0]], [1.0], ValueError, "noise_variance must be at least 2.23e-308"),
    ({"noise_variance": 1e-300}, [[1e200], [3e200]], [1.0, 2.0], ValueError, "posterior is not finite"),
    ({"max_iter": 0}, [[1.0]], [1.0], ValueError, "max_iter"),
    ({"output_covariance": "full"}, [[1.0]], [1.0], ValueError, "output_covariance"),
    ({"output_covariance": np.eye(3)}, [[1.0]], [[1.0, 0.0]], ValueError, r"shape \(2, 2\)"),
    ({"output_covariance": [[1.0, 2.0], [2.0, 1.0]]}, [[1.0]], [[1.0, 0.0]], ValueError, "positive definite"),
    ({"inference": "mfvi", "output_covariance": "residual"}, [[1.0]], [1.0], ValueError, "analytic"),
])
def test_bad_input_raises_and_leaves_a_fitted_model_unchanged(params, X, y, exc, match):
    Phi, Y = _data(d=2)
    blr = BayesianLinearRegression(noise_variance=0.5).fit(Phi, Y)
    before = {k: np.copy(v) if isinstance(v, np.ndarray) else v for k, v in blr.__dict__.items()}
    blr.set_params(**params)
    with pytest.raises(exc, match=match):
        blr.fit(X, y)
    blr.set_params(**{k: before[k] for k in params})
    for k, v in before.items():
        np.testing.assert_array_equal(blr.__dict__[k], v)
    assert set(blr.__dict__) == set(before)


def test_predict_errors():
    Phi, Y = _data()
    with pytest.raises(NotFittedError):
        BayesianLinearRegression().predict(Phi)
    blr = BayesianLinearRegression().fit(Phi, Y)
    with pytest.raises(ValueError, match="features"):
        blr.predict(Phi[:, :3])
    with pytest.raises(ValueError, match="at most one"):
        blr.predict(Phi, return_std=True, return_cov=True)
    with pytest.raises(ValueError, match="NaN"):
        blr.predictive_variance(np.full((1, 6), np.nan))


def test_clone_and_get_params_round_trip():
    blr = BayesianLinearRegression(inference="mfvi", noise_variance=0.2, fit_intercept=True)
    c = clone(blr)
    assert c.get_params() == blr.get_params()
    assert not hasattr(c, "coef_")


@parametrize_with_checks([
    BayesianLinearRegression(),
    BayesianLinearRegression(inference="mfvi", fit_intercept=True),
    BayesianLinearRegression(fit_hyperparameters=True, fit_intercept=True),
    BayesianLinearRegression(output_covariance="residual"),
])
def test_sklearn_estimator_checks(estimator, check):
    # we skip no check; scikit-learn itself skips its array-API check unless
    # SCIPY_ARRAY_API=1 is set (an environment switch, not a property of ours)
    check(estimator)
