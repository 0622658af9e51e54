"""Bayesian heads over embeddings: MCDropoutHead, BayesianLastLayerHead, and the Laplace and ensemble
heads made of them."""
import os

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.pipeline import make_pipeline
from sklearn.utils.estimator_checks import parametrize_with_checks

from skdbal import ActiveLearner, BayesianLinearRegression
from skdbal.acquisition import bald, batch_bald
from skdbal.models import (
    BayesianLastLayerHead,
    DeepEnsembleClassifier,
    EncoderWithHead,
    FunctionEncoder,
    LaplaceClassifier,
    MCDropoutHead,
)
from skdbal.models._heads import _grid_objectives, _grid_variances, _linear_samples
from skdbal.models.linear_posterior import log_marginal_likelihood, mfvi_elbo
from skdbal.predictive import as_predictive
from skdbal.uncertainty import mutual_information

CLASSES = np.arange(10)


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return (X / 16).astype(np.float32), y


# ---------------------------------------------------------------- the shared sampler
def test_linear_samples_are_softmaxes_of_each_draw():
    """Two rows, two draws, by hand: softmax(scale · (x W_t + b_t))."""
    feats = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    W = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[0.0, 0.0], [0.0, -1.0]]])   # (T=2, K=2, C=2)
    b = torch.tensor([[0.0, 0.0], [1.0, 0.0]])
    P = _linear_samples(feats, W, b, scale=0.5)
    assert P.shape == (2, 2, 2) and P.dtype == np.float32

    def softmax(z):
        return np.exp(z) / np.exp(z).sum()
    np.testing.assert_allclose(P[0, 0], softmax(0.5 * np.array([1.0, 0.0])), rtol=1e-6)
    np.testing.assert_allclose(P[0, 1], softmax(0.5 * np.array([0.0, 2.0])), rtol=1e-6)
    np.testing.assert_allclose(P[1, 0], softmax(0.5 * np.array([1.0, 0.0])), rtol=1e-6)
    np.testing.assert_allclose(P[1, 1], softmax(0.5 * np.array([1.0, -2.0])), rtol=1e-6)


def test_linear_samples_chunks_do_not_change_the_result(monkeypatch):
    import skdbal.models._heads as heads

    g = torch.Generator().manual_seed(0)
    feats, W, b = torch.randn(50, 4, generator=g), torch.randn(3, 4, 5, generator=g), torch.randn(5, generator=g)
    whole = _linear_samples(feats, W, b)
    monkeypatch.setattr(heads, "_CHUNK_VALUES", 7 * 3 * 5)     # 7 rows at a time
    np.testing.assert_allclose(_linear_samples(feats, W, b), whole, rtol=0, atol=1e-7)


# ---------------------------------------------------------------- MCDropoutHead
def test_dropout_head_without_dropout_is_its_deterministic_pass(digits):
    X, y = digits
    head = MCDropoutHead(dropout=0.0, n_samples=5, n_steps=50, random_state=0).fit(X[:100], y[:100])
    P = head.predict_proba_samples(X[100:130])
    det = head.predict_proba_deterministic(X[100:130])
    with torch.no_grad():
        by_module = torch.softmax(head.module_(torch.from_numpy(X[100:130])), dim=-1).numpy()
    np.testing.assert_allclose(det, by_module, rtol=0, atol=1e-6)
    np.testing.assert_allclose(P, np.broadcast_to(det, P.shape), rtol=0, atol=1e-6)


def test_dropout_head_samples_are_the_last_layer_with_masked_inputs():
    """A linear head on one feature with p = 0.5: each sample keeps the feature (×2) or drops it, so its
    probabilities are softmax(2 w x + b) or softmax(b), and the same mask is applied to every row."""
    rng = np.random.RandomState(0)
    X = rng.normal(size=(40, 1)).astype(np.float32)
    y = (X[:, 0] > 0).astype(int)
    head = MCDropoutHead(hidden_layer_sizes=(), dropout=0.5, n_samples=64, n_steps=100, lr=0.05,
                         random_state=1).fit(X, y)
    w = head.module_.head[-1].weight.detach().numpy()[:, 0]
    b = head.module_.head[-1].bias.detach().numpy()

    def softmax(z):
        z = z - z.max(axis=-1, keepdims=True)
        return np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True)
    x = X[:5]
    kept, dropped = softmax(2 * x * w + b), softmax(np.broadcast_to(b, (5, 2)))
    P = head.predict_proba_samples(x)
    is_kept = np.array([np.allclose(p, kept, atol=1e-6) for p in P])
    is_dropped = np.array([np.allclose(p, dropped, atol=1e-6) for p in P])
    assert np.all(is_kept ^ is_dropped)                 # each sample is one mask for all five rows
    assert 16 < is_kept.sum() < 48                       # about half of the 64 masks keep the feature


def test_dropout_head_is_deterministic_under_random_state_and_row_keyed(digits):
    X, y = digits
    a = MCDropoutHead(n_steps=60, random_state=3).fit(X[:80], y[:80])
    state = torch.get_rng_state()
    b = clone(a).fit(X[:80], y[:80])
    assert torch.equal(state, torch.get_rng_state())    # torch's global generator is left as it was
    x = X[200:240]
    np.testing.assert_array_equal(a.predict_proba_samples(x), b.predict_proba_samples(x))
    P = a.predict_proba_samples(x)
    np.testing.assert_array_equal(P, a.predict_proba_samples(x))        # every call the same masks
    np.testing.assert_allclose(a.predict_proba_samples(x[::-1])[:, ::-1], P, rtol=0, atol=1e-6)
    np.testing.assert_allclose(a.predict_proba_samples(x[:7]), P[:, :7], rtol=0, atol=1e-6)
    assert not np.allclose(clone(a).set_params(random_state=4).fit(X[:80], y[:80]).predict_proba_samples(x), P)
    pred = as_predictive(a)
    assert pred.row_keyed and pred.stochastic
    assert pred.proba_samples(x, consistent=True).shape == (100, 40, 10)   # BatchBALD may ask


def test_dropout_head_keeps_every_class_it_is_given(digits):
    X, y = digits
    rows = np.flatnonzero(y < 3)[:30]
    head = MCDropoutHead(n_steps=20, n_samples=4, classes=CLASSES, random_state=0).fit(X[rows], y[rows])
    assert head.predict_proba_samples(X[:5]).shape == (4, 5, 10)
    assert set(head.predict(X[:50])) <= {0, 1, 2, *range(3, 10)}


@pytest.mark.parametrize("params, match", [
    ({"dropout": 1.0}, "dropout"), ({"hidden_layer_sizes": (0,)}, "hidden_layer_sizes"),
    ({"n_steps": 0}, "n_steps"), ({"lr": 0.0}, "lr"), ({"classes": [1]}, "classes"),
])
def test_dropout_head_refuses_bad_parameters(digits, params, match):
    X, y = digits
    with pytest.raises(ValueError, match=match):
        MCDropoutHead(**params).fit(X[:20], y[:20])


def test_one_class_is_refused_naming_it(digits):
    X, _ = digits
    with pytest.raises(ValueError, match="at least 2 classes"):
        BayesianLastLayerHead().fit(X[:5], np.zeros(5, dtype=int))


# ---------------------------------------------------------------- BayesianLastLayerHead
def _centred_toy():
    """Four centred rows, features orthogonal: Phi^T Phi = 2 I, so with σ² = s² = 1 the precision is
    A = 3 I; the one-hot labels [0, 1, 0, 1] centred give Phi^T Y = [[1, -1], [1, -1]]."""
    X = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]], dtype=np.float32)
    return X, np.array([0, 1, 0, 1])


@pytest.mark.parametrize("inference", ["analytic", "mfvi"])
def test_last_layer_posterior_is_the_closed_form(inference):
    X, y = _centred_toy()
    head = BayesianLastLayerHead(inference, fit_hyperparameters=False, noise_variance=1.0, prior_variance=1.0,
                                 logit_scale=2.0, n_samples=40000, random_state=0).fit(X, y)
    np.testing.assert_allclose(head.regressor_.coef_.T, np.array([[1, -1], [1, -1]]) / 3, atol=1e-12)
    P = head.predict_proba_samples(np.array([[0.0, 0.0], [1.0, 0.0]], dtype=np.float32))
    np.testing.assert_allclose(P[:, 0], 0.5, atol=1e-6)      # at the mean embedding: ȳ = [.5, .5], any draw
    # at [1, 0], the logit gap is 2 (W_00 - W_01): mean 2 · 2/3, variance 4 · (1/3 + 1/3)
    gap = np.log(P[:, 1, 0]) - np.log(P[:, 1, 1])
    assert abs(gap.mean() - 4 / 3) < 0.03
    assert abs(gap.var() - 8 / 3) < 0.08


def test_the_offset_at_the_labelled_mean_is_uniform_or_the_class_frequencies():
    """Three labels of class 0, one of class 1, five classes: at the labelled mean every draw's
    outputs are the offset alone. Uniform: 1/5 each, a uniform softmax. Frequencies: [3/4, 1/4, 0, 0,
    0], whose softmax at scale 4 is [e^3, e^1, 1, 1, 1] / (e^3 + e + 3)."""
    X = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]], dtype=np.float32)
    y = np.array([0, 0, 0, 1])
    mean = X.mean(axis=0, keepdims=True)
    common = dict(fit_hyperparameters=False, logit_scale=4.0, n_samples=7, classes=np.arange(5), random_state=0)
    uniform = BayesianLastLayerHead(**common).fit(X, y).predict_proba_samples(mean)
    np.testing.assert_allclose(uniform, 0.2, atol=1e-6)
    frequencies = BayesianLastLayerHead(class_prior="frequencies", **common).fit(X, y).predict_proba_samples(mean)
    expected = np.exp([3.0, 1.0, 0.0, 0.0, 0.0]) / (np.e ** 3 + np.e + 3)
    np.testing.assert_allclose(frequencies, np.broadcast_to(expected, (7, 1, 5)), atol=1e-6)


def test_an_unknown_class_prior_is_refused_naming_it():
    X, y = _centred_toy()
    head = BayesianLastLayerHead(class_prior="pool")
    with pytest.raises(ValueError, match="class_prior must be 'uniform' or 'frequencies'; got 'pool'"):
        head.fit(X, y)
    assert not hasattr(head, "regressor_")


def test_mean_field_weights_are_narrower_than_the_exact_ones_on_correlated_features():
    """Phi = [[1, 0], [1, 1]] before centring; with σ² = s² = 1 the draws of the weights have the
    exact posterior covariance A^{-1} (analytic) or the diagonal 1 / A_kk (mean field)."""
    X = np.array([[1.0, 0.0], [1.0, 1.0], [-1.0, 0.0], [-1.0, -1.0]], dtype=np.float32)
    y = np.array([0, 1, 0, 1])
    A = X.T.astype(float) @ X + np.eye(2)                         # centred already
    for inference, cov in (("analytic", np.linalg.inv(A)), ("mfvi", np.diag(1 / np.diag(A)))):
        head = BayesianLastLayerHead(inference, fit_hyperparameters=False, random_state=0).fit(X, y)
        W = head._weight_draws(40000, seed=0)[:, :, 0]            # column 0 of each draw: (T, K)
        np.testing.assert_allclose(np.cov(W.T), cov, atol=0.01)


def test_grid_objectives_are_the_evidence_and_the_elbo():
    rng = np.random.RandomState(0)
    for N, K in ((7, 4), (4, 7)):
        Phi, Y = rng.normal(size=(N, K)), rng.normal(size=(N, 3))
        noise, prior = np.array([0.5, 0.01]), np.array([2.0, 0.3])
        np.testing.assert_allclose(_grid_objectives(Phi, Y, noise, prior, "analytic"),
                                   [log_marginal_likelihood(Phi, Y, a, b) for a, b in zip(noise, prior)],
                                   rtol=1e-10)
        np.testing.assert_allclose(_grid_objectives(Phi, Y, noise, prior, "mfvi"),
                                   [mfvi_elbo(Phi, Y, a, b) for a, b in zip(noise, prior)], rtol=1e-10)


def test_grid_variances_are_the_best_pair_of_the_grid(digits):
    X, y = digits
    Phi = X[:40].astype(float) - X[:40].mean(axis=0)
    Y = np.eye(10)[y[:40]]
    Y = Y - Y.mean(axis=0)
    noise, prior = _grid_variances(Phi, Y, "analytic")
    best = log_marginal_likelihood(Phi, Y, noise, prior)
    for a in (noise / 1.4, noise, noise * 1.4):
        for b in (prior / 1.4, prior * 1.4):
            assert log_marginal_likelihood(Phi, Y, a, b) <= best + 1e-9


@pytest.mark.skipif(not os.environ.get("SKDBAL_DATA"), reason="needs MNIST (SKDBAL_DATA)")
def test_twenty_labels_do_not_collapse_the_prior_to_zero():
    """PCA-50 of MNIST, 2 labels per class: the evidence's fixed point from σ² = s² = 1 runs to s² → 0,
    where every prediction is the class frequencies (10% accuracy); the bounded grid keeps the signal."""
    from sklearn.decomposition import PCA

    from skdbal.datasets import load_mnist

    X, y = load_mnist(return_X_y=True)
    X = X[:20000].reshape(20000, -1).astype(np.float32) / 255
    y = y[:20000]
    Z = PCA(50, random_state=0).fit_transform(X).astype(np.float32)
    rng = np.random.RandomState(0)
    rows = np.concatenate([rng.choice(np.flatnonzero(y == c), 2, replace=False) for c in range(10)])
    with pytest.warns(RuntimeWarning):
        fixed_point = BayesianLinearRegression(fit_hyperparameters=True, fit_intercept=True).fit(
            Z[rows], np.eye(10)[y[rows]])
    test = np.setdiff1d(np.arange(5000), rows)
    assert fixed_point.prior_variance_ < 1e-100
    assert (fixed_point.predict(Z[test]).argmax(axis=1) == y[test]).mean() < 0.15
    head = BayesianLastLayerHead(random_state=0).fit(Z[rows], y[rows])
    assert head.score(Z[test], y[test]) > 0.35


# ---------------------------------------------------------------- the heads made of heads, end to end
def _heads():
    small = dict(n_steps=100, classes=CLASSES)
    return {
        "dropout": MCDropoutHead(n_samples=20, random_state=0, **small),
        "laplace": LaplaceClassifier(MCDropoutHead(random_state=0, **small), n_samples=20, random_state=0),
        "ensemble": DeepEnsembleClassifier(MCDropoutHead(**small), n_members=4, samples_per_member=5,
                                           random_state=0),
        "analytic": BayesianLastLayerHead(n_samples=20, classes=CLASSES, random_state=0),
        "mfvi": BayesianLastLayerHead("mfvi", n_samples=20, classes=CLASSES, random_state=0),
    }


@pytest.mark.parametrize("name", sorted(_heads()))
def test_head_after_an_encoder_in_an_active_learner_with_bald(digits, name):
    """encoder → head as a pipeline, taught and queried by the learner with BALD and BatchBALD."""
    pytest.importorskip("laplace") if name == "laplace" else None
    X, y = digits
    proj = np.random.RandomState(0).normal(size=(64, 32)).astype(np.float32) / 8
    model = make_pipeline(FunctionEncoder(np.dot, kw_args={"b": proj}), _heads()[name])
    learner = ActiveLearner(model, bald, X[:30], y[:30], verbose=False)
    pool = X[300:700]
    idx, _ = learner.query(pool, n_instances=5)
    assert len(set(idx.tolist())) == 5
    P = as_predictive(learner).proba_samples(pool)
    assert P.shape == (20, 400, 10)
    np.testing.assert_allclose(P.sum(axis=-1), 1, atol=1e-5)
    scores = mutual_information(P)
    np.testing.assert_allclose(np.sort(scores)[::-1][:5], np.sort(scores[idx])[::-1], rtol=1e-5)
    learner.teach(pool[idx], y[300:700][idx])
    assert learner.score(X[1000:1400], y[1000:1400]) > 0.4
    picks, _ = batch_bald(learner, pool[:100], n_instances=3)
    assert len(set(np.asarray(picks).tolist())) == 3


def test_heads_clone_to_unfitted_copies_with_the_same_parameters():
    for head in _heads().values():
        copy = clone(head)
        assert type(copy) is type(head) and copy.get_params(deep=False).keys() == head.get_params(deep=False).keys()
        assert repr(copy) == repr(head)
        assert not hasattr(copy, "classes_")


@parametrize_with_checks([MCDropoutHead(n_steps=20, n_samples=3, random_state=0),
                          BayesianLastLayerHead(n_samples=3, random_state=0)])
def test_sklearn_checks(estimator, check):
    check(estimator)


# ---------------------------------------------------------------- fine-tuning the encoder under the head
def _conv_encoder():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(2))


def test_fine_tuning_starts_from_the_encoders_weights_and_never_changes_them(digits):
    from skdbal import MCDropoutClassifier
    from skdbal.models import TorchEncoder, split_module

    X, y = digits
    images = X.reshape(-1, 1, 8, 8)
    encoder = TorchEncoder(_conv_encoder()).fit(images[:10])
    before = {k: v.clone() for k, v in encoder.module_.state_dict().items()}
    frozen = MCDropoutClassifier(EncoderWithHead, module__encoder=encoder, classes=CLASSES, lr=0.0, max_epochs=2,
                                 n_samples=10, random_state=0).fit(X[:100], y[:100])
    # lr = 0: the trunk is the encoder as loaded, so the embedding under the head is the encoder's, each row
    # scaled to length feature_norm = 10
    Z = encoder.transform(images[200:230])
    np.testing.assert_allclose(frozen.transform(X[200:230]), 10 * Z / np.linalg.norm(Z, axis=1, keepdims=True),
                               atol=1e-5)
    raw = MCDropoutClassifier(EncoderWithHead, module__encoder=encoder, module__feature_norm=None, classes=CLASSES,
                              lr=0.0, max_epochs=2, n_samples=10, random_state=0).fit(X[:100], y[:100])
    np.testing.assert_allclose(raw.transform(X[200:230]), Z, atol=1e-6)
    assert split_module(frozen.module_) is not None             # the trunk runs once per MC call
    tuned = MCDropoutClassifier(EncoderWithHead, module__encoder=encoder, classes=CLASSES, lr=1e-2, max_epochs=5,
                                n_samples=10, random_state=0)
    first = tuned.fit(X[:100], y[:100]).predict_proba_samples(X[200:230])
    assert not np.allclose(tuned.transform(X[200:230]), encoder.transform(images[200:230]), atol=1e-3)
    for k, v in encoder.module_.state_dict().items():            # the encoder given is never trained
        assert torch.equal(v, before[k])
    np.testing.assert_array_equal(tuned.fit(X[:100], y[:100]).predict_proba_samples(X[200:230]), first)
    assert first.shape == (10, 30, 10)
    idx, _ = bald(tuned, X[200:300], n_instances=4)
    assert len(set(idx.tolist())) == 4


def test_fine_tuning_refuses_what_it_cannot_train():
    from skdbal.models import TorchEncoder

    with pytest.raises(TypeError, match="output names a layer"):
        EncoderWithHead(TorchEncoder(_conv_encoder(), output="0"), input_shape=(1, 8, 8))
    with pytest.raises(TypeError, match="not fitted.*module__encoder=encoder.module_"):
        EncoderWithHead(TorchEncoder(_conv_encoder()), input_shape=(1, 8, 8))
    with pytest.raises(ValueError, match="input_shape or n_features"):
        EncoderWithHead(_conv_encoder())
    with pytest.raises(ValueError, match="feature_norm must be a length > 0 or None; got 0"):
        EncoderWithHead(_conv_encoder(), input_shape=(1, 8, 8), feature_norm=0)


def test_fine_tuning_in_an_active_learner_with_the_encoders_network(digits):
    """The learner clones its model, and a clone of a fitted TorchEncoder is unfitted: its network
    (module_) is what the copies keep."""
    from skdbal import MCDropoutClassifier
    from skdbal.models import TorchEncoder

    X, y = digits
    encoder = TorchEncoder(_conv_encoder()).fit(X[:10].reshape(-1, 1, 8, 8))
    net = MCDropoutClassifier(EncoderWithHead, module__encoder=encoder.module_, classes=CLASSES, max_epochs=3,
                              n_samples=8, random_state=0)
    learner = ActiveLearner(net, bald, X[:30], y[:30], verbose=False)
    idx, _ = learner.query(X[300:400], n_instances=3)
    learner.teach(X[300:400][idx], y[300:400][idx])
    assert len(set(idx.tolist())) == 3 and learner.predict_proba_samples(X[:4]).shape == (8, 4, 10)
