"""MCDropoutRegressor, the heteroscedastic loss, the Gaussian split and EGL."""
import pickle

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from torch import nn

from skdbal import ActiveLearner, MCDropoutClassifier, MCDropoutRegressor
from skdbal.acquisition import egl, predictive_variance
from skdbal.models import GaussianNLLLoss
from skdbal.uncertainty import decompose_gaussian

#: the heteroscedastic column's log variance, log 4
LOG_4 = float(np.log(4.0))


class Fixed(nn.Module):
    """A linear map with set weights, an optional dropout on its input, and a
    heteroscedastic column ``log σ² = log 4`` when ``n_classes`` is twice the
    number of weight rows."""

    def __init__(self, n_features=2, n_classes=1, weight=(2.0, -1.0), p=0.0, log_var=LOG_4):
        super().__init__()
        self.drop = nn.Dropout(p) if p else nn.Identity()
        self.lin = nn.Linear(n_features, n_classes)
        with torch.no_grad():
            self.lin.weight.zero_()
            self.lin.bias.zero_()
            self.lin.weight[0, :len(weight)] = torch.tensor(weight[:n_features])
            if n_classes == 2:  # [μ, log σ²]
                self.lin.bias[1] = float(log_var)

    def forward(self, x):
        return self.lin(self.drop(x))


X2 = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 3.0]], dtype=np.float32)
Y2 = np.array([2.0, -1.0, 2.0, 0.0], dtype=np.float32)  # f = 2x₁ − x₂ gives 2, −1, 1, 1


def fixed(**kw):
    params = dict(module=Fixed, max_epochs=0, mc_dropout=False, random_state=0)
    params.update(kw)
    return MCDropoutRegressor(**params)


def test_gaussian_nll_by_hand():
    out = torch.tensor([[1.0, 0.0], [0.0, float(np.log(4.0))]])   # (μ=1, σ²=1), (μ=0, σ²=4)
    y = torch.tensor([[3.0], [2.0]])
    # ½(1·4 + 0) = 2 and ½(4/4 + log 4) = 0.5 + 0.6931; mean 1.3466
    assert float(GaussianNLLLoss()(out, y)) == pytest.approx((2.0 + 0.5 + 0.5 * np.log(4.0)) / 2, rel=1e-6)
    # clamped log variance: log σ² = 50 counts as 10
    big = torch.tensor([[0.0, 50.0]])
    assert float(GaussianNLLLoss()(big, torch.tensor([[0.0]]))) == pytest.approx(5.0)


def test_fixed_network_predictions_and_noise_variance():
    reg = fixed().fit(X2, Y2)
    np.testing.assert_allclose(reg.predict(X2), [2.0, -1.0, 1.0, 1.0], atol=1e-6)
    # residuals 0, 0, −1, 1: mean square 0.5
    assert reg.noise_variance_ == pytest.approx(0.5)
    means, var = reg.predict_samples(X2, n_samples=3, return_var=True)
    assert means.shape == var.shape == (3, 4)
    np.testing.assert_allclose(var, 0.5)
    np.testing.assert_allclose(reg.predictive_variance(X2), 0.5)    # no epistemic part without dropout
    _, std = reg.predict(X2, return_std=True)
    np.testing.assert_allclose(std, np.sqrt(0.5), rtol=1e-6)


def test_heteroscedastic_head_gives_its_variance():
    reg = fixed(heteroscedastic=True).fit(X2, Y2)
    assert reg.module_.lin.out_features == 2                      # μ and log σ²
    assert isinstance(reg.criterion_, GaussianNLLLoss)
    means, var = reg.predict_samples(X2, return_var=True)
    np.testing.assert_allclose(means[0], [2.0, -1.0, 1.0, 1.0], atol=1e-6)
    np.testing.assert_allclose(var, 4.0, rtol=1e-5)
    d = reg.decompose(X2)
    np.testing.assert_allclose(d.aleatoric, 4.0, rtol=1e-5)
    np.testing.assert_allclose(d.epistemic, 0.0, atol=1e-10)
    assert reg.noise_variance_ is None


def test_mc_passes_have_the_dropout_variance():
    # f = 2·x₁·m/(1 − p) with m ~ Bernoulli(1/2): the passes are 0 or 4 at x₁ = 1, mean 2, variance 4
    reg = fixed(module__p=0.5, mc_dropout=True, n_samples=4000).fit(X2, Y2)
    means = reg.predict_samples(X2[:1])
    assert set(np.unique(means).round(5)) <= {0.0, 4.0}
    assert means.mean() == pytest.approx(2.0, abs=0.15)
    d = reg.decompose(X2[:1])
    assert d.epistemic[0] == pytest.approx(4.0, rel=0.05)
    # the deterministic pass scales the weights: exactly 2
    assert fixed(module__p=0.5, predict_method="deterministic").fit(X2, Y2).predict(X2[:1])[0] == pytest.approx(2.0)


def test_row_seeded_passes_do_not_depend_on_the_batch():
    rng = np.random.RandomState(0)
    X = rng.normal(size=(30, 3)).astype(np.float32)
    reg = MCDropoutRegressor(max_epochs=3, n_samples=7, random_state=1).fit(X, X[:, 0])
    whole = reg.predict_samples(X)
    # the same masks per row; matrix products may round a last bit differently by batch shape
    np.testing.assert_allclose(whole[:, 5:9], reg.predict_samples(X[5:9]), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(whole[:, ::-1], reg.predict_samples(X[::-1]), rtol=1e-5, atol=1e-6)


def test_multi_output_shapes_and_decomposition():
    rng = np.random.RandomState(0)
    X = rng.normal(size=(50, 3)).astype(np.float32)
    Y = np.c_[X[:, 0], -X[:, 1]]
    reg = MCDropoutRegressor(max_epochs=5, n_samples=6, heteroscedastic=True, random_state=0).fit(X, Y)
    assert reg.n_outputs_ == 2 and reg.module_.head[-1].out_features == 4
    means, var = reg.predict_samples(X[:7], return_var=True)
    assert means.shape == var.shape == (6, 7, 2)
    assert reg.predict(X[:7]).shape == (7, 2)
    d = reg.decompose(X[:7])
    np.testing.assert_allclose(d.epistemic, means.astype(np.float64).var(axis=0), rtol=1e-6)
    np.testing.assert_allclose(d.aleatoric, var.astype(np.float64).mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(reg.predictive_variance(X[:7]), d.total.sum(axis=1), rtol=1e-6)


def test_decompose_gaussian_by_hand():
    d = decompose_gaussian([[0.0, 1.0], [2.0, 1.0], [4.0, 1.0]], 2.0)
    np.testing.assert_allclose(d.epistemic, [8 / 3, 0.0])
    np.testing.assert_allclose(d.aleatoric, [2.0, 2.0])
    np.testing.assert_allclose(d.total, [2 + 8 / 3, 2.0])
    with pytest.raises(ValueError, match="variances must be"):
        decompose_gaussian([[0.0], [1.0]], -1.0)
    with pytest.raises(ValueError, match="means must have shape"):
        decompose_gaussian([1.0, 2.0])


def test_output_gradient_gram_of_a_linear_map():
    # f_d = w_d·x + b_d: ∇ f_d is x in row d of W, and 1 at b_d, so G = (‖x‖² + 1)·I
    X = np.array([[1.0, 2.0], [0.0, 0.0], [3.0, -1.0]], dtype=np.float32)
    reg = fixed(module__log_var=0.0).fit(X, np.c_[X[:, 0], X[:, 1]])    # second output: 0
    gram, out = reg.output_gradient_gram(X, return_output=True)
    expected = (np.sum(X.astype(np.float64) ** 2, axis=1) + 1)[:, None, None] * np.eye(2)
    np.testing.assert_allclose(gram, expected, rtol=1e-6)
    np.testing.assert_allclose(out, np.c_[2 * X[:, 0] - X[:, 1], np.zeros(3)], atol=1e-6)


def test_output_gradient_gram_of_a_two_layer_net():
    # f = v·relu(W x): ∇_v f = relu(Wx), ∇_W f = (v ⊙ 1[Wx > 0]) xᵀ; no biases
    class Two(nn.Module):
        def __init__(self, n_features=2, n_classes=1):
            super().__init__()
            self.a = nn.Linear(2, 2, bias=False)
            self.b = nn.Linear(2, 1, bias=False)
            with torch.no_grad():
                self.a.weight.copy_(torch.tensor([[1.0, 0.0], [1.0, -1.0]]))
                self.b.weight.copy_(torch.tensor([[2.0, 3.0]]))

        def forward(self, x):
            return self.b(torch.relu(self.a(x)))

    x = np.array([[1.0, 2.0]], dtype=np.float32)   # Wx = (1, −1): only unit 0 active
    reg = fixed(module=Two).fit(x, [1.0])
    # ∇_v = (1, 0); ∇_W = [[2·1, 2·2], [0, 0]]: ‖·‖² = 1 + 4 + 16 = 21
    assert reg.output_gradient_gram(x)[0, 0, 0] == pytest.approx(21.0)


def test_egl_strategy_matches_the_closed_form():
    rng = np.random.RandomState(0)
    X = rng.uniform(-1, 1, size=(25, 2)).astype(np.float32)
    reg = MCDropoutRegressor(max_epochs=20, n_samples=8, random_state=0).fit(X[:10], X[:10, 0] ** 2)
    scores = egl.acquisition_scores(reg, X)
    gram, ref = reg.output_gradient_gram(X, return_output=True)
    means = reg.predict_samples(X).astype(np.float64)
    ref = ref[:, 0]
    # one output: ‖∇f‖² · (σ² + mean_t (μ_t − f)²)
    by_hand = gram[:, 0, 0] * (reg.noise_variance_ + ((means - ref) ** 2).mean(axis=0))
    np.testing.assert_allclose(scores, by_hand, rtol=1e-5)
    idx, top = egl(reg, X, n_instances=4)
    np.testing.assert_array_equal(idx, np.argsort(-by_hand, kind="stable")[:4])


def test_strategies_through_a_learner_and_a_pipeline():
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, size=(60, 1)).astype(np.float32)
    y = np.sin(2 * X[:, 0])
    pipe = make_pipeline(StandardScaler(), MCDropoutRegressor(max_epochs=20, n_samples=5, random_state=0))
    learner = ActiveLearner(pipe, query_strategy=egl, X_training=X[:8], y_training=y[:8])
    idx, _ = learner.query(X[8:], n_instances=3)
    assert len(set(idx.tolist())) == 3
    direct = egl.acquisition_scores(learner.estimator_, X[8:])
    np.testing.assert_array_equal(idx, np.argsort(-direct, kind="stable")[:3])
    learner.teach(X[8:][idx], y[8:][idx])
    assert len(learner.y_training_) == 11
    learner.query_strategy = predictive_variance
    idx, _ = learner.query(X[8:], n_instances=2)
    variance = learner.predictive_variance(X[8:])
    np.testing.assert_array_equal(idx, np.argsort(-variance, kind="stable")[:2])


def test_clone_pickle_and_params():
    reg = MCDropoutRegressor(heteroscedastic=True, n_samples=5, max_epochs=2, random_state=0)
    assert clone(reg).get_params()["heteroscedastic"] is True
    X = np.random.RandomState(0).normal(size=(20, 3)).astype(np.float32)
    reg.fit(X, X[:, 0])
    again = pickle.loads(pickle.dumps(reg))
    np.testing.assert_array_equal(again.predict_samples(X), reg.predict_samples(X))


@pytest.mark.parametrize("y, match", [
    (np.array(["a", "b", "a", "b"]), "continuous targets"),
    (np.array([1.0, np.nan, 0.0, 1.0]), "NaN"),
    (np.array([1.0, 2.0, 3.0]), "inconsistent lengths"),
    (None, "requires y"),
])
def test_regressor_bad_targets(y, match):
    with pytest.raises(ValueError, match=match):
        fixed().fit(X2, y)


def test_bad_parameters_and_changed_outputs():
    with pytest.raises(TypeError, match="heteroscedastic must be a bool"):
        fixed(heteroscedastic="yes").fit(X2, Y2)
    with pytest.raises(ValueError, match="n_samples"):
        fixed().fit(X2, Y2).predict_samples(X2, n_samples=0)
    reg = fixed().fit(X2, Y2)
    with pytest.raises(ValueError, match="fitted on 1 output"):
        reg.partial_fit(X2, np.c_[Y2, Y2])


def test_classifier_rejects_continuous_targets():
    with pytest.raises(ValueError, match="continuous"):
        MCDropoutClassifier(max_epochs=1).fit(X2, np.array([0.1, 0.7, 0.2, 0.5]))


def test_egl_needs_gradients():
    from sklearn.linear_model import BayesianRidge

    br = BayesianRidge().fit(X2, Y2)
    with pytest.raises(TypeError, match="no output_gradient_gram"):
        egl(br, X2)


def test_predictive_variance_parts():
    from skdbal.acquisition import PredictiveVariance

    reg = fixed(module__p=0.5, mc_dropout=True, n_samples=50, heteroscedastic=True).fit(X2, Y2)
    means, var = reg.predict_samples(X2, return_var=True)   # the same passes: row-seeded, fixed random_state
    means, var = means.astype(np.float64), var.astype(np.float64)
    def scores(**params):
        return PredictiveVariance(**params).acquisition_scores(reg, X2)

    np.testing.assert_allclose(scores(part="epistemic"), means.var(axis=0), rtol=1e-5)
    np.testing.assert_allclose(scores(part="aleatoric"), var.mean(axis=0), rtol=1e-5)
    np.testing.assert_allclose(scores(), means.var(axis=0) + var.mean(axis=0), rtol=1e-5)
    with pytest.raises(ValueError, match="part must be"):
        PredictiveVariance(part="both").acquisition_scores(reg, X2)
    from skdbal import BayesianLinearRegression

    blr = BayesianLinearRegression().fit(X2, Y2)
    with pytest.raises(TypeError, match="needs predict_samples"):
        PredictiveVariance(part="epistemic").acquisition_scores(blr, X2)
