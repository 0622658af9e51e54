import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression

from skdbal import ActiveLearner
from skdbal.acquisition import bald, max_entropy, random_sampling

from conftest import small_net


def lr_learner(**kw):
    return ActiveLearner(LogisticRegression(max_iter=300), max_entropy, random_state=0, verbose=False, **kw)


@pytest.fixture(scope="module")
def flat_digits():
    X, y = load_digits(return_X_y=True)
    return X / 16.0, y


def snapshot(learner):
    return (learner.estimator_, learner.X_training_.copy(), learner.y_training_.copy(),
            learner.train_mask_.copy())


def assert_unchanged(learner, snap):
    est, X, y, m = snap
    assert learner.estimator_ is est
    np.testing.assert_array_equal(learner.X_training_, X)
    np.testing.assert_array_equal(learner.y_training_, y)
    np.testing.assert_array_equal(learner.train_mask_, m)


def test_clone_and_get_params_round_trip():
    learner = ActiveLearner(small_net(lr=0.01), bald, retrain="warm", pool_subsample=100, random_state=3)
    params = learner.get_params()
    assert params["estimator__lr"] == 0.01 and params["pool_subsample"] == 100
    cloned = clone(learner)
    assert cloned.get_params()["estimator__lr"] == 0.01
    assert cloned.query_strategy is bald and cloned.retrain == "warm"
    learner.set_params(estimator__lr=0.5, random_state=9)
    assert learner.estimator.lr == 0.5 and learner.random_state == 9


def test_query_returns_rows_of_the_pool(flat_digits):
    X, y = flat_digits
    learner = lr_learner().fit(X[:50], y[:50])
    pool = X[500:800]
    idx, Xq = learner.query(pool, n_instances=6)
    assert len(np.unique(idx)) == 6
    np.testing.assert_array_equal(Xq, pool[idx])
    idx2, _, scores = learner.query(pool, n_instances=6, return_scores=True)
    np.testing.assert_array_equal(idx, idx2)
    assert np.all(np.diff(scores) <= 0)


def test_pool_subsample_maps_back_to_pool_indices(flat_digits):
    X, y = flat_digits
    learner = lr_learner(pool_subsample=40).fit(X[:50], y[:50])
    pool = X[500:1000]
    idx, Xq = learner.query(pool, n_instances=5)
    np.testing.assert_array_equal(Xq, pool[idx])
    assert idx.max() < len(pool)
    # same seed, same subsample and answer
    again = lr_learner(pool_subsample=40).fit(X[:50], y[:50]).query(pool, n_instances=5)[0]
    np.testing.assert_array_equal(idx, again)


def test_teach_grows_the_labelled_set(flat_digits):
    X, y = flat_digits
    learner = lr_learner().fit(X[:30], y[:30])
    est0 = learner.estimator_
    learner.teach(X[30:35], y[30:35])
    assert len(learner.y_training_) == 35
    np.testing.assert_array_equal(learner.y_training_[-5:], y[30:35])
    assert learner.estimator_ is not est0  # retrained from scratch
    np.testing.assert_array_equal(learner.estimator_.coef_,
                                  LogisticRegression(max_iter=300).fit(X[:35], y[:35]).coef_)


def test_warm_retrain_continues_the_same_model(digits):
    X, y = digits
    learner = ActiveLearner(small_net(max_epochs=2), bald, retrain="warm", verbose=False).fit(X[:40], y[:40])
    est = learner.estimator_
    before = [p.detach().clone() for p in est.module_.parameters()]
    learner.teach(X[40:50], y[40:50])
    assert learner.estimator_ is est
    assert len(est.history) == 4  # 2 epochs at fit, 2 more at teach
    assert any(not torch.allclose(a, b) for a, b in zip(before, est.module_.parameters()))


def test_simulation_on_digits_never_repeats_or_loses_a_label(digits):
    X, y = digits
    pool_X, pool_y = X[:600], y[:600]
    learner = ActiveLearner(small_net(max_epochs=3), bald, random_state=0, verbose=False)
    history = learner.simulate(pool_X, pool_y, n_queries=5, n_instances=4, X_test=X[1500:], y_test=y[1500:])
    assert [r["n_labels"] for r in history] == [20, 24, 28, 32, 36, 40]
    queried = np.concatenate([r["query_indices"] for r in history])
    assert len(np.unique(queried)) == len(queried) == 40
    np.testing.assert_array_equal(learner.labelled_idx_, queried)
    np.testing.assert_array_equal(learner.y_training_, pool_y[queried])  # every label kept, in order
    np.testing.assert_array_equal(learner.X_training_, pool_X[queried])
    assert np.bincount(pool_y[history[0]["query_indices"]], minlength=10).tolist() == [2] * 10
    for r in history:
        assert 0.0 <= r["accuracy"] <= 1.0 and r["fit_time"] >= 0
    assert history[-1]["accuracy"] == pytest.approx(learner.score(X[1500:], y[1500:]))


def test_simulation_is_reproducible(flat_digits):
    X, y = flat_digits
    runs = [lr_learner(pool_subsample=200).simulate(X[:800], y[:800], n_queries=3, n_instances=5)
            for _ in range(2)]
    assert [r["query_indices"] for r in runs[0]] == [r["query_indices"] for r in runs[1]]


def test_random_strategy_with_learner(flat_digits):
    X, y = flat_digits
    learner = ActiveLearner(LogisticRegression(max_iter=300), random_sampling, random_state=1, verbose=False)
    h = learner.simulate(X[:500], y[:500], n_queries=2, n_instances=3, initial_idx=np.arange(30))
    assert [r["n_labels"] for r in h] == [30, 33, 36]


def test_delegation(fitted_net, digits):
    X, y = digits
    learner = ActiveLearner(small_net(), bald, verbose=False)
    learner.fit(X[:100], y[:100])
    P = learner.predict_proba_samples(X[:10], n_samples=4)
    assert P.shape == (4, 10, 10)
    np.testing.assert_array_equal(learner.predict(X[:10]), learner.estimator_.predict(X[:10]))
    np.testing.assert_allclose(learner.predict_proba(X[:10]), learner.estimator_.predict_proba(X[:10]))
    assert learner.score(X[:100], y[:100]) == learner.estimator_.score(X[:100], y[:100])
    np.testing.assert_array_equal(learner.classes_, np.arange(10))


def test_on_teach_hook_filters_but_keeps_labels(flat_digits):
    X, y = flat_digits

    def strategy(est, X_pool, n_instances=1, **kw):
        return max_entropy(est, X_pool, n_instances, **kw)

    strategy.on_teach = lambda learner, X_new, y_new: y_new != 0  # drop zeros from training
    learner = ActiveLearner(LogisticRegression(max_iter=300), strategy, verbose=False).fit(X[:40], y[:40])
    learner.teach(X[40:60], y[40:60])
    assert len(learner.y_training_) == 60  # nothing lost
    np.testing.assert_array_equal(learner.train_mask_[40:], y[40:60] != 0)
    ref = LogisticRegression(max_iter=300).fit(np.r_[X[:40], X[40:60][y[40:60] != 0]],
                                                np.r_[y[:40], y[40:60][y[40:60] != 0]])
    np.testing.assert_allclose(learner.estimator_.coef_, ref.coef_)


# -- bad input: a clear error and no change -----------------------------------------------

@pytest.fixture
def cnn_learner(digits):
    X, y = digits
    return ActiveLearner(small_net(max_epochs=1), bald, verbose=False).fit(X[:30], y[:30])


@pytest.mark.parametrize(
    "make, exc, match",
    [
        (lambda X, y: (np.where(np.arange(64).reshape(8, 8) == 5, np.nan, X[:4]), y[:4]), ValueError, "NaN"),
        (lambda X, y: (np.full((4, 8, 8), np.inf), y[:4]), ValueError, "infinity"),
        (lambda X, y: (X[:4].reshape(4, 64), y[:4]), ValueError, "per-sample shape"),
        (lambda X, y: (X[0, 0], y[:1]), ValueError, "2D|dimension"),
        (lambda X, y: (X[:4], np.array([1, 2, 3, 12])), ValueError, "not in the estimator's classes"),
        (lambda X, y: (X[:4], y[:3]), ValueError, "inconsistent"),
    ],
)
def test_bad_teach_changes_nothing(cnn_learner, digits, make, exc, match):
    X, y = digits
    snap = snapshot(cnn_learner)
    Xb, yb = make(X, y)
    with pytest.raises(exc, match=match):
        cnn_learner.teach(Xb, yb)
    assert_unchanged(cnn_learner, snap)


def test_bad_queries_change_nothing(cnn_learner, digits):
    X, _ = digits
    snap = snapshot(cnn_learner)
    with pytest.raises(ValueError, match="empty"):
        cnn_learner.query(X[:0])
    with pytest.raises(ValueError, match="n_instances"):
        cnn_learner.query(X[100:110], n_instances=11)
    with pytest.raises(ValueError, match="n_instances"):
        cnn_learner.query(X[100:110], n_instances=0)
    with pytest.raises(ValueError, match="NaN"):
        cnn_learner.query(np.full((3, 8, 8), np.nan, dtype=np.float32))
    with pytest.raises(ValueError, match="n_samples"):
        cnn_learner.predict_proba_samples(X[:3], n_samples=0)
    assert_unchanged(cnn_learner, snap)


def test_bad_params_are_clear(flat_digits):
    X, y = flat_digits
    with pytest.raises(ValueError, match="retrain"):
        ActiveLearner(LogisticRegression(), retrain="sometimes").fit(X[:20], y[:20])
    with pytest.raises(ValueError, match="pool_subsample"):
        ActiveLearner(LogisticRegression(), pool_subsample=0).fit(X[:20], y[:20])


def test_failed_training_changes_nothing(flat_digits):
    X, y = flat_digits
    learner = lr_learner().fit(X[:30], y[:30])
    snap = snapshot(learner)
    learner.estimator.set_params(C=-1.0)  # invalid: the refit raises
    with pytest.raises(ValueError, match="C"):
        learner.teach(X[30:35], y[30:35])
    assert_unchanged(learner, snap)


def test_unfitted_delegation_raises(digits):
    from sklearn.exceptions import NotFittedError
    with pytest.raises(NotFittedError):
        ActiveLearner(small_net()).predict(digits[0][:2])


def test_learner_around_plain_classifier_warns_for_degenerate_scores(flat_digits):
    X, y = flat_digits
    learner = ActiveLearner(LogisticRegression(max_iter=300), bald, verbose=False).fit(X[:40], y[:40])
    with pytest.warns(UserWarning, match="T=1"):
        learner.query(X[100:200], n_instances=2)
