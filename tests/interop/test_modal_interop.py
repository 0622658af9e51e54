"""Interop with the installed modAL, both ways (SPEC §3)."""
from importlib.metadata import version

import numpy as np
import pytest
from modAL.models import ActiveLearner as ModalLearner
from modAL.uncertainty import classifier_entropy, classifier_uncertainty, entropy_sampling, uncertainty_sampling
from sklearn.linear_model import LogisticRegression

from skdbal import ActiveLearner
from skdbal.acquisition import bald, to_modal, variation_ratios

MODAL_VERSION = version("modAL-python")


def test_our_strategies_through_modal_query(fitted_net, digits):
    X, _ = digits
    pool = X[400:600]
    for strategy in (bald, variation_ratios):
        modal = ModalLearner(estimator=fitted_net, query_strategy=to_modal(strategy))
        idx, X_query = modal.query(pool, n_instances=5)
        expected, _ = strategy(fitted_net, pool, n_instances=5)
        np.testing.assert_array_equal(np.asarray(idx), expected)
        np.testing.assert_array_equal(X_query, pool[expected])


def test_to_modal_follows_the_version_convention(fitted_net, digits):
    pool = digits[0][400:450]
    old = to_modal(bald, "0.4.1")(fitted_net, pool, 3)
    assert isinstance(old, np.ndarray) and old.shape == (3,)
    assert to_modal(bald, "0.4.2.1") is bald
    assert MODAL_VERSION  # the installed version is what to_modal() reads by default


@pytest.mark.parametrize("strategy, measure", [(uncertainty_sampling, classifier_uncertainty),
                                               (entropy_sampling, classifier_entropy)])
def test_modal_strategies_inside_our_learner(strategy, measure, digits):
    X, y = digits
    Xf = X.reshape(len(X), -1)
    learner = ActiveLearner(LogisticRegression(max_iter=300), strategy, verbose=False).fit(Xf[:40], y[:40])
    pool = Xf[500:800]
    idx, X_query = learner.query(pool, n_instances=5)
    expected = np.argsort(-measure(learner.estimator_, pool), kind="stable")[:5]
    assert set(idx.tolist()) == set(expected.tolist())
    np.testing.assert_array_equal(X_query, pool[idx])
    learner.teach(X_query, y[500:800][idx])  # the step modAL's own teach fails on (issue #196)
    assert len(learner.y_training_) == 45


def test_modal_strategy_in_our_simulation_with_mc_net(small_net, digits):
    """Step by step, modAL's uncertainty sampling picks the unlabelled rows whose top class the held net
    is least sure of, computed here by hand (1 − max p), and the learner is taught their labels."""
    X, y = digits
    pool_X, pool_y = X[:300], y[:300]
    learner = ActiveLearner(small_net(max_epochs=2), uncertainty_sampling, random_state=0, verbose=False)
    history = learner.simulate(pool_X, pool_y, n_queries=0)
    for step in (1, 2):
        labelled = learner.labelled_idx_.copy()
        unlabelled = np.setdiff1d(np.arange(300), labelled)
        uncertainty = 1 - learner.estimator_.predict_proba(pool_X[unlabelled]).max(axis=1)
        order = np.argsort(-uncertainty, kind="stable")
        assert uncertainty[order[2]] > uncertainty[order[3]]   # no tie at the cut: the top 3 are one set
        expected = unlabelled[order[:3]]
        history = learner.simulate(pool_X, pool_y, n_queries=1, n_instances=3, warm_start=True)
        assert history[-1]["step"] == step
        # modAL's multi_argmax returns the top 3 in no particular order
        assert sorted(np.asarray(history[-1]["query_indices"]).tolist()) == sorted(expected.tolist())
        np.testing.assert_array_equal(learner.labelled_idx_[:-3], labelled)
        np.testing.assert_array_equal(learner.y_training_, pool_y[learner.labelled_idx_])
    assert [r["n_labels"] for r in history] == [20, 23, 26]


def test_noise_filter_through_modal_query_with_y_pool(fitted_net, digits):
    """modAL's learner passes query keywords on: y_pool reaches the filter."""
    from skdbal.acquisition import noise_filter

    X, y = digits
    pool, labels = X[400:600], y[400:600].copy()
    labels[::4] = (labels[::4] + 5) % 10  # a quarter of the annotator's labels are wrong
    strategy = noise_filter(bald, 0.2)
    modal = ModalLearner(estimator=fitted_net, query_strategy=to_modal(strategy))
    idx, _ = modal.query(pool, n_instances=5, y_pool=labels)
    expected = strategy.acquire(fitted_net, pool, 5, y_pool=labels).indices
    np.testing.assert_array_equal(np.asarray(idx), expected)
    p_label = fitted_net.predict_proba_samples(pool).mean(axis=0)[np.arange(200), labels]
    assert np.all(p_label[np.asarray(idx)] >= 0.2)


def test_modal_strategies_see_the_growing_labelled_set(digits):
    """modAL's strategies read learner.X_training / y_training: the labels so far, not the initial set."""
    X, y = digits
    Xf = X.reshape(len(X), -1)
    seen = []

    def spy(learner, X_pool, n_instances=1):
        seen.append((len(learner.X_training), len(learner.y_training), learner.on_transformed,
                     learner.estimator is learner._learner.estimator_))
        return np.arange(n_instances)

    learner = ActiveLearner(LogisticRegression(max_iter=300), spy, Xf[:6], y[:6], verbose=False)
    learner.query(Xf[100:200], n_instances=2)
    learner.teach(Xf[6:12], y[6:12])
    learner.query(Xf[100:200], n_instances=2)
    assert seen == [(6, 6, False, True), (12, 12, False, True)]
    assert learner.X_training.shape == (6, 64)  # the parameter itself is untouched (scikit-learn's contract)


def test_modal_batch_strategy_and_keyword_strategies(digits):
    from modAL.batch import uncertainty_batch_sampling

    X, y = digits
    Xf = X.reshape(len(X), -1) / 16.0
    learner = ActiveLearner(LogisticRegression(max_iter=300), uncertainty_batch_sampling, verbose=False)
    learner.fit(Xf[:30], y[:30])
    idx, _ = learner.query(Xf[100:160], n_instances=4)
    assert len(set(idx.tolist())) == 4
    # n_instances by keyword, as modAL's learner passes it: modAL's expected_error_reduction has
    # `loss` third (it is not called here: modAL 0.4.1 uses np.float, gone from numpy 2)
    calls = []

    def eer_like(learner, X, loss="binary", p_subsample=1.0, n_instances=1):
        calls.append((loss, n_instances))
        return np.arange(n_instances)

    ActiveLearner(LogisticRegression(max_iter=300), eer_like, verbose=False).fit(Xf[:30], y[:30]).query(
        Xf[100:112], n_instances=2)
    assert calls == [("binary", 2)]
