"""NetFeatures, the predictive_variance strategy and a regression loop (seed 000 §4)."""
import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.linear_model import BayesianRidge, LinearRegression, LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline

from skdbal import ActiveLearner, BayesianLinearRegression, NetFeatures
from skdbal.acquisition import predictive_variance, to_modal


def one_hot(y):
    return np.eye(10)[y]


# ---------------------------------------------------------------- NetFeatures
def test_frozen_features_are_the_nets_penultimate_layer(digits, fitted_net):
    X, _ = digits
    nf = NetFeatures(fitted_net).fit(X[:5])
    assert nf.net_ is fitted_net
    F = nf.transform(X[:20])
    assert F.dtype == np.float64 and F.shape == (20, 128) and nf.n_features_out_ == 128
    np.testing.assert_array_equal(F, fitted_net.transform(X[:20]).astype(np.float64))
    assert np.all(F >= 0)  # after the ReLU
    assert len(nf.get_feature_names_out()) == 128


def test_clone_keeps_a_frozen_fitted_net(fitted_net):
    nf = NetFeatures(fitted_net)
    c = clone(nf)
    assert c.net is fitted_net and not hasattr(c, "net_")
    assert c.get_params()["refit"] == "auto"
    # refit=True clones as scikit-learn does: an untrained copy
    fresh = clone(NetFeatures(fitted_net, refit=True)).net
    assert fresh is not fitted_net and not hasattr(fresh, "module_")


def test_refit_trains_a_clone_on_argmax_of_one_hot_targets(small_net, digits, fitted_net):
    X, y = digits
    before = {k: v.clone() for k, v in fitted_net.module_.state_dict().items() if torch.is_tensor(v)}
    nf = NetFeatures(small_net(max_epochs=2), refit=True).fit(X[:100], one_hot(y[:100]))
    direct = small_net(max_epochs=2).fit(X[:100], y[:100])
    np.testing.assert_allclose(nf.transform(X[200:210]), direct.transform(X[200:210]), rtol=1e-6, atol=1e-6)
    nf2 = NetFeatures(fitted_net, refit=True).fit(X[:50], y[:50])
    assert nf2.net_ is not fitted_net
    after = fitted_net.module_.state_dict()
    for k, v in before.items():  # the given net is untouched
        assert np.array_equal(after[k].numpy(), v.numpy())


def test_netfeatures_errors(small_net, digits):
    X, y = digits
    with pytest.raises(ValueError, match="refit=False needs a fitted net"):
        NetFeatures(small_net(), refit=False).fit(X[:10])
    with pytest.raises(ValueError, match="needs y"):
        NetFeatures(small_net()).fit(X[:10])
    with pytest.raises(ValueError, match="refit must be"):
        NetFeatures(small_net(), refit="yes").fit(X[:10], y[:10])
    with pytest.raises(TypeError, match="transform"):
        NetFeatures(LogisticRegression(), refit=True).fit(X[:40].reshape(40, -1), y[:40])


def test_pipeline_in_grid_search_over_the_last_layer(digits, fitted_net):
    X, y = digits
    pipe = make_pipeline(NetFeatures(fitted_net), BayesianLinearRegression())
    grid = {"bayesianlinearregression__noise_variance": [0.01, 0.1, 1.0],
            "bayesianlinearregression__inference": ["analytic", "mfvi"]}
    gs = GridSearchCV(pipe, grid, cv=3).fit(X[300:600], one_hot(y[300:600]))
    assert gs.best_estimator_[0].net_ is fitted_net          # the features stayed frozen
    F = fitted_net.transform(X[300:600]).astype(np.float64)
    direct = BayesianLinearRegression(**{k.split("__")[1]: v for k, v in gs.best_params_.items()})
    direct.fit(F, one_hot(y[300:600]))
    np.testing.assert_allclose(gs.predict(X[600:610]), direct.predict(fitted_net.transform(X[600:610])),
                               rtol=1e-10)


# ------------------------------------------------------- predictive_variance
def test_predictive_variance_ranks_by_the_trace():
    rng = np.random.RandomState(0)
    F = rng.normal(size=(30, 4))
    blr = BayesianLinearRegression(noise_variance=0.5).fit(F[:10], rng.normal(size=(10, 3)))
    idx, scores = predictive_variance(blr, F, n_instances=5)
    expected = blr.predictive_variance(F)
    np.testing.assert_array_equal(idx, np.argsort(-expected, kind="stable")[:5])
    np.testing.assert_allclose(scores, expected[idx])
    # chunking does not change anything
    idx2, _ = predictive_variance(blr, F, n_instances=5, chunk_size=7)
    np.testing.assert_array_equal(idx, idx2)


def test_predictive_variance_from_return_std_regressors():
    rng = np.random.RandomState(1)
    X = rng.normal(size=(40, 3))
    br = BayesianRidge().fit(X[:15], X[:15] @ [1.0, 2.0, 0.0])
    idx, scores = predictive_variance(br, X, n_instances=3)
    _, std = br.predict(X, return_std=True)
    np.testing.assert_array_equal(idx, np.argsort(-std ** 2, kind="stable")[:3])
    np.testing.assert_allclose(scores, std[idx] ** 2)
    with pytest.raises(TypeError, match="LogisticRegression is a classifier"):
        predictive_variance(LogisticRegression().fit(X[:15], X[:15, 0] > 0), X)
    with pytest.raises(TypeError, match="LinearRegression.predict does not take return_std"):
        predictive_variance(LinearRegression().fit(X[:15], X[:15, 0]), X)


def test_predictive_variance_protocol_errors():
    blr = BayesianLinearRegression().fit(np.eye(3), np.eye(3))
    with pytest.raises(ValueError, match="larger than the pool"):
        predictive_variance(blr, np.eye(3), n_instances=4)
    with pytest.raises(ValueError, match="empty"):
        predictive_variance(blr, np.empty((0, 3)))
    with pytest.raises(ValueError, match="chunk_size"):
        predictive_variance(blr, np.eye(3), chunk_size=0)


def test_modal_learner_with_a_bayesian_last_layer():
    from modAL.models import ActiveLearner as ModalLearner

    rng = np.random.RandomState(2)
    X = rng.normal(size=(50, 4))
    Y = X @ rng.normal(size=(4, 2))
    learner = ModalLearner(estimator=BayesianLinearRegression(), query_strategy=to_modal(predictive_variance),
                           X_training=X[:5], y_training=Y[:5])
    idx, _ = learner.query(X, n_instances=2)
    expected, _ = predictive_variance(learner.estimator, X, n_instances=2)
    np.testing.assert_array_equal(idx, expected)


# ------------------------------------------------------------ the learner
def test_active_learner_regression_loop_records_rmse(digits, fitted_net):
    X, y = digits
    pipe = make_pipeline(NetFeatures(fitted_net), BayesianLinearRegression(noise_variance=0.1))
    learner = ActiveLearner(pipe, query_strategy=predictive_variance, random_state=0)
    Y_pool = one_hot(y[300:1300])
    history = learner.simulate(X[300:1300], Y_pool, n_queries=3, n_instances=10,
                               X_test=X[1300:], y_test=one_hot(y[1300:]))
    assert [h["n_labels"] for h in history] == [20, 30, 40, 50]
    # the initial set is class-balanced by the argmax of the one-hot targets
    assert np.bincount(y[300:1300][history[0]["query_indices"]], minlength=10).tolist() == [2] * 10
    queried = np.concatenate([h["query_indices"] for h in history])
    assert len(np.unique(queried)) == 50
    np.testing.assert_array_equal(learner.y_training_, Y_pool[queried])
    # the last row by hand: RMSE over rows and outputs, argmax accuracy
    F = fitted_net.transform(X[300:1300][queried]).astype(np.float64)
    blr = BayesianLinearRegression(noise_variance=0.1).fit(F, Y_pool[queried])
    pred = blr.predict(fitted_net.transform(X[1300:]))
    assert history[-1]["rmse"] == pytest.approx(np.sqrt(np.mean((pred - one_hot(y[1300:])) ** 2)), rel=1e-10)
    assert history[-1]["accuracy"] == pytest.approx(np.mean(pred.argmax(1) == y[1300:]))
    # each query took the largest predictive variances among the unlabelled points
    assert learner.estimator_[0].net_ is fitted_net


def test_regression_learner_bad_targets_leave_it_unchanged(digits, fitted_net):
    X, y = digits
    pipe = make_pipeline(NetFeatures(fitted_net), BayesianLinearRegression())
    learner = ActiveLearner(pipe, query_strategy=predictive_variance, random_state=0)
    learner.fit(X[:20], one_hot(y[:20]))
    before = learner.y_training_.copy()
    bad = one_hot(y[20:25]).astype(float)
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        learner.teach(X[20:25], bad)
    with pytest.raises(ValueError, match="initial_idx"):
        ActiveLearner(pipe, query_strategy=predictive_variance).simulate(X[:100], y[:100].astype(float), 1, 1)
    np.testing.assert_array_equal(learner.y_training_, before)
    assert len(learner.X_training_) == 20
