import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression

from skdbal import ActiveLearner
from skdbal.acquisition import BALD, bald, max_entropy, random


def lr_learner(**kw):
    return ActiveLearner(LogisticRegression(max_iter=300), max_entropy, random_state=0, verbose=False, **kw)


def rng_state(learner):
    """The learner's whole generator state (key array, position, Gaussian cache), comparable with ==."""
    name, keys, pos, has_gauss, gauss = learner.rng_.get_state()
    return name, tuple(keys.tolist()), pos, has_gauss, gauss


def snapshot(learner):
    return (learner.estimator_, learner.X_training_.copy(), learner.y_training_.copy())


def assert_unchanged(learner, snap):
    est, X, y = snap
    assert learner.estimator_ is est
    np.testing.assert_array_equal(learner.X_training_, X)
    np.testing.assert_array_equal(learner.y_training_, y)


def test_clone_and_get_params_round_trip(small_net):
    learner = ActiveLearner(small_net(lr=0.01), bald, retrain="warm", pool_subsample=100, random_state=3)
    params = learner.get_params()
    assert params["estimator__lr"] == 0.01 and params["pool_subsample"] == 100
    cloned = clone(learner)
    assert cloned.get_params()["estimator__lr"] == 0.01
    # a strategy is a parameter object: cloned like an estimator, with equal parameters
    assert isinstance(cloned.query_strategy, BALD) and cloned.query_strategy.get_params() == bald.get_params()
    assert cloned.retrain == "warm"
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


def test_warm_retrain_continues_the_same_model(small_net, digits):
    X, y = digits
    learner = ActiveLearner(small_net(max_epochs=2), bald, retrain="warm", verbose=False).fit(X[:40], y[:40])
    est = learner.estimator_
    before = [p.detach().clone() for p in est.module_.parameters()]
    learner.teach(X[40:50], y[40:50])
    assert learner.estimator_ is est
    assert len(est.history) == 4  # 2 epochs at fit, 2 more at teach
    assert any(not torch.allclose(a, b) for a, b in zip(before, est.module_.parameters()))


def test_simulation_on_digits_never_repeats_or_loses_a_label(small_net, digits):
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
    learner = ActiveLearner(LogisticRegression(max_iter=300), random, random_state=1, verbose=False)
    h = learner.simulate(X[:500], y[:500], n_queries=2, n_instances=3, initial_idx=np.arange(30))
    assert [r["n_labels"] for r in h] == [30, 33, 36]
    # by hand: each query draws one seed from the learner's generator (RandomState(1): the initial set is
    # given, so nothing else draws); the strategy scores the unlabelled rows, in pool order, uniformly
    # from that seed, and takes the 3 largest
    gen, labelled = np.random.RandomState(1), list(range(30))
    for r in h[1:]:
        unlabelled = np.setdiff1d(np.arange(500), labelled)
        scores = np.random.RandomState(gen.randint(2**31 - 1)).random_sample(len(unlabelled))
        expected = unlabelled[np.argsort(-scores)[:3]]
        np.testing.assert_array_equal(r["query_indices"], expected)
        labelled += expected.tolist()
    np.testing.assert_array_equal(learner.labelled_idx_, labelled)
    np.testing.assert_array_equal(learner.y_training_, y[labelled])   # the oracle's labels, in order
    np.testing.assert_array_equal(learner.X_training_, X[labelled])


def test_each_query_takes_the_strategy_s_top_scores(flat_digits):
    """Step by step, the learner queries the unlabelled rows with the largest entropy of the model it
    holds, computed here by hand, and is taught the oracle's labels for them."""
    X, y = flat_digits
    pool_X, pool_y = X[:400], y[:400]
    learner = lr_learner()
    learner.simulate(pool_X, pool_y, n_queries=0, initial_idx=np.arange(0, 400, 40))
    for step in (1, 2, 3):
        labelled = learner.labelled_idx_.copy()
        unlabelled = np.setdiff1d(np.arange(400), labelled)
        p = learner.estimator_.predict_proba(pool_X[unlabelled])
        entropy = -np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1)), 0), axis=1)
        expected = unlabelled[np.argsort(-entropy, kind="stable")[:4]]
        row = learner.simulate(pool_X, pool_y, n_queries=1, n_instances=4, warm_start=True)[-1]
        assert row["step"] == step
        np.testing.assert_array_equal(row["query_indices"], expected)
        np.testing.assert_array_equal(learner.labelled_idx_, np.r_[labelled, expected])
        np.testing.assert_array_equal(learner.y_training_, pool_y[learner.labelled_idx_])
        np.testing.assert_array_equal(learner.X_training_, pool_X[learner.labelled_idx_])


def test_delegation(small_net, fitted_net, digits):
    X, y = digits
    learner = ActiveLearner(small_net(), bald, verbose=False)
    learner.fit(X[:100], y[:100])
    P = learner.predict_proba_samples(X[:10], n_samples=4)
    assert P.shape == (4, 10, 10)
    np.testing.assert_array_equal(learner.predict(X[:10]), learner.estimator_.predict(X[:10]))
    np.testing.assert_allclose(learner.predict_proba(X[:10]), learner.estimator_.predict_proba(X[:10]))
    assert learner.score(X[:100], y[:100]) == learner.estimator_.score(X[:100], y[:100])
    np.testing.assert_array_equal(learner.classes_, np.arange(10))


# -- bad input: a clear error and no change -----------------------------------------------

@pytest.fixture
def cnn_learner(small_net, digits):
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


def test_unfitted_delegation_raises(small_net, digits):
    from sklearn.exceptions import NotFittedError
    with pytest.raises(NotFittedError):
        ActiveLearner(small_net()).predict(digits[0][:2])


def test_learner_around_plain_classifier_warns_for_degenerate_scores(flat_digits):
    X, y = flat_digits
    learner = ActiveLearner(LogisticRegression(max_iter=300), bald, verbose=False).fit(X[:40], y[:40])
    with pytest.warns(UserWarning, match="T=1"):
        learner.query(X[100:200], n_instances=2)


# -- simulation: restarts, continuation, atomic validation -------------------------------

def test_simulate_restarts_and_warm_start_continues_without_repeats(flat_digits):
    X, y = flat_digits
    learner = lr_learner()
    learner.fit(X[:40], y[:40])  # a fitted learner: simulate starts afresh, as fit does
    h1 = learner.simulate(X[:300], y[:300], n_queries=3, n_instances=5)
    again = lr_learner().simulate(X[:300], y[:300], n_queries=3, n_instances=5)
    assert [r["query_indices"] for r in h1] == [r["query_indices"] for r in again]
    assert len(learner.y_training_) == 35  # the 40 fitted earlier were forgotten
    h2 = learner.simulate(X[:300], y[:300], n_queries=4, n_instances=5, warm_start=True)
    assert [r["step"] for r in h2] == list(range(8)) and learner.history_ is h2
    labelled = learner.labelled_idx_
    assert len(labelled) == len(np.unique(labelled)) == 55
    np.testing.assert_array_equal(learner.y_training_, y[:300][labelled])
    with pytest.raises(ValueError, match="warm_start"):
        lr_learner().simulate(X[:300], y[:300], n_queries=1, warm_start=True)
    with pytest.raises(ValueError, match="warm_start"):  # another pool
        learner.simulate(X[:200], y[:200], n_queries=1, warm_start=True)


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(n_queries=60, n_instances=5), ValueError, "only 280 are left"),
        (dict(n_queries=2, n_instances=0), ValueError, "n_instances"),
        (dict(n_queries=2, initial_idx=[0, 300]), ValueError, "initial_idx must lie"),
        (dict(n_queries=2, initial_idx=[1, 1]), ValueError, "duplicates"),
        (dict(n_queries=2, initial_idx=[]), ValueError, "empty"),
        (dict(n_queries=2, initial_idx=[0.5]), TypeError, "integer"),
        (dict(n_queries=2, X_test=np.zeros((5, 64)), y_test=np.zeros(4)), ValueError, "X_test and y_test"),
        (dict(n_queries=2, X_test=np.zeros((5, 63)), y_test=np.zeros(5)), ValueError, "per-sample shape"),
        (dict(n_queries=-1), ValueError, "n_queries"),
    ],
)
def test_bad_simulation_changes_nothing(flat_digits, kwargs, exc, match):
    X, y = flat_digits
    learner = lr_learner()
    learner.simulate(X[:300], y[:300], n_queries=1, n_instances=2)
    snap, hist, idx = snapshot(learner), learner.history_, learner.labelled_idx_.copy()
    state = rng_state(learner)
    with pytest.raises(exc, match=match):
        learner.simulate(X[:300], y[:300], **kwargs)
    assert_unchanged(learner, snap)
    assert learner.history_ is hist
    np.testing.assert_array_equal(learner.labelled_idx_, idx)
    assert rng_state(learner) == state


def test_failing_step_keeps_the_completed_history(flat_digits):
    X, y = flat_digits
    calls = []

    def flaky(est, X_pool, n_instances=1, **kw):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("annotator went home")
        return max_entropy(est, X_pool, n_instances)

    learner = ActiveLearner(LogisticRegression(max_iter=300), flaky, random_state=0, verbose=False)
    with pytest.raises(RuntimeError, match="annotator"):
        learner.simulate(X[:300], y[:300], n_queries=5, n_instances=4)
    assert [r["step"] for r in learner.history_] == [0, 1, 2]
    assert len(learner.labelled_idx_) == len(learner.y_training_) == 28  # no label lost
    np.testing.assert_array_equal(learner.y_training_, y[:300][learner.labelled_idx_])


def test_simulate_fixes_classes_for_warm_retraining(small_net, digits):
    """classes=None: the oracle's classes are used, so warm retrains can take new classes."""
    X, y = digits
    order = np.argsort(y[:400], kind="stable")  # pool sorted by label: class 0 first
    learner = ActiveLearner(small_net(classes=None, max_epochs=1), max_entropy, retrain="warm",
                            random_state=0, verbose=False)
    h = learner.simulate(X[:400][order], y[:400][order], n_queries=3, n_instances=30,
                         initial_idx=np.arange(5))  # initial set: only zeros
    assert h[-1]["n_labels"] == 95
    np.testing.assert_array_equal(learner.estimator_.classes_, np.arange(10))
    assert learner.estimator.classes is None  # the template itself is untouched


# -- bad calls leave the random state alone ------------------------------------------------

def test_failed_query_does_not_advance_the_random_state(flat_digits):
    X, y = flat_digits

    def dup(est, X_pool, n_instances=1, random_state=None, **kw):
        np.random.RandomState(random_state).rand()
        return np.array([0, 0])

    learner = ActiveLearner(LogisticRegression(max_iter=300), dup, pool_subsample=50,
                            random_state=0, verbose=False).fit(X[:30], y[:30])
    state = rng_state(learner)
    with pytest.raises(ValueError, match="duplicate"):
        learner.query(X[100:400], n_instances=2)
    assert rng_state(learner) == state
    # and the next good query is the one a fresh learner makes
    learner.set_params(query_strategy=max_entropy)
    fresh = lr_learner(pool_subsample=50).fit(X[:30], y[:30])
    np.testing.assert_array_equal(learner.query(X[100:400], 3)[0], fresh.query(X[100:400], 3)[0])


def test_samples_not_summing_to_one_are_rejected_without_change(flat_digits):
    X, y = flat_digits

    class Unnormalised(LogisticRegression):
        def predict_proba_samples(self, X, n_samples=None):
            return np.stack([self.predict_proba(X) * 0.9] * 3)

    learner = ActiveLearner(Unnormalised(max_iter=300), bald, pool_subsample=50, random_state=0,
                            verbose=False).fit(X[:30], y[:30])
    snap, state = snapshot(learner), rng_state(learner)
    with pytest.raises(ValueError, match="sum to 1"):
        learner.query(X[100:400], n_instances=2)
    assert_unchanged(learner, snap)
    assert rng_state(learner) == state


def test_teach_rejects_uint8_mixed_with_floats(small_net, digits):
    X, y = digits
    learner = ActiveLearner(small_net(max_epochs=1), bald, verbose=False).fit(X[:30], y[:30])
    snap = snapshot(learner)
    with pytest.raises(TypeError, match="uint8"):
        learner.teach((X[30:35] * 255).astype(np.uint8), y[30:35])
    assert_unchanged(learner, snap)


def test_predict_proba_samples_through_a_pipeline(small_net, digits):
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer
    X, y = digits
    pipe = make_pipeline(FunctionTransformer(lambda Z: Z * 1.0), small_net(max_epochs=1))
    learner = ActiveLearner(pipe, bald, verbose=False).fit(X[:60], y[:60])
    P = learner.predict_proba_samples(X[:7], n_samples=5)
    assert P.shape == (5, 7, 10) and not np.allclose(P[0], P[1])
    np.testing.assert_allclose(P, learner.estimator_[-1].predict_proba_samples(X[:7], n_samples=5))


# -- modAL's constructor and teach options ---------------------------------------------------

def test_modal_style_constructor_and_teach_options(flat_digits):
    X, y = flat_digits
    learner = ActiveLearner(LogisticRegression(max_iter=300), max_entropy, X[:30], y[:30],
                            random_state=0, verbose=False)
    np.testing.assert_array_equal(clone(learner).X_training, X[:30])  # a parameter, stored as given
    idx, _ = learner.query(X[100:400], n_instances=3)  # fitted lazily on first use
    assert len(learner.y_training_) == 30
    ref = lr_learner().fit(X[:30], y[:30]).query(X[100:400], 3)[0]
    np.testing.assert_array_equal(idx, ref)
    learner.teach(X[100:400][idx], y[100:400][idx], bootstrap=True)
    assert len(learner.y_training_) == 33  # every label kept
    other = ActiveLearner(LogisticRegression(max_iter=300), max_entropy, X[:30], y[:30],
                          random_state=0, verbose=False)
    other.query(X[100:400], n_instances=3)
    other.teach(X[100:400][idx], y[100:400][idx], bootstrap=True)
    np.testing.assert_allclose(learner.estimator_.coef_, other.estimator_.coef_)  # seeded
    plain = lr_learner().fit(X[:30], y[:30]).teach(X[100:400][idx], y[100:400][idx])
    assert not np.allclose(learner.estimator_.coef_, plain.estimator_.coef_)  # resampled
    unfitted = ActiveLearner(LogisticRegression(max_iter=300), max_entropy, X[:30], y[:30], verbose=False)
    unfitted.teach(X[30:32], y[30:32])  # the initial set and the new labels
    assert len(unfitted.y_training_) == 32
    with pytest.raises(ValueError, match="both X_training and y_training"):
        ActiveLearner(LogisticRegression(), max_entropy, X[:30]).query(X[100:200])


# -- templates, seeds and dtypes (review of the acquisition redesign) -----------------------

def test_ensembles_with_len_work_as_templates(flat_digits):
    """A forest's __len__ fails before fit: the template must never be tested for truth."""
    from sklearn.ensemble import RandomForestClassifier

    X, y = flat_digits
    learner = ActiveLearner(RandomForestClassifier(n_estimators=5, random_state=0), max_entropy,
                            random_state=0, verbose=False)
    learner.fit(X[:40], y[:40]).teach(X[40:42], y[40:42])
    assert len(learner.y_training_) == 42
    history = learner.simulate(X[:200], y[:200], n_queries=2, n_instances=3)
    assert history[-1]["n_labels"] == 26


def test_template_follows_fit_simulate_and_set_params(small_net, digits, flat_digits):
    X, y = digits
    three = np.isin(y, [0, 1, 2])
    learner = ActiveLearner(small_net(classes=None, max_epochs=1), max_entropy, random_state=0, verbose=False)
    learner.simulate(X[three][:100], y[three][:100], n_queries=1, n_instances=2)
    np.testing.assert_array_equal(learner.template_.classes, [0, 1, 2])
    learner.fit(X[:60], y[:60])  # five... ten classes now: validated against the new template
    np.testing.assert_array_equal(learner.estimator_.classes_, np.arange(10))
    Xf, yf = flat_digits
    lr = ActiveLearner(LogisticRegression(C=1e-4, max_iter=300), max_entropy, verbose=False).fit(Xf[:40], yf[:40])
    lr.set_params(estimator=LogisticRegression(C=100.0, max_iter=300))
    lr.teach(Xf[40:45], yf[40:45])
    assert lr.estimator_.C == 100.0 and lr.template_.C == 100.0


def test_seeding_of_plain_callables_is_declared_not_inspected(flat_digits):
    from skdbal.acquisition import to_modal
    from skdbal.acquisition.base import CallableStrategy

    X, y = flat_digits

    def coin(est, X_pool, n_instances=1, random_state=None, **kw):
        return np.random.RandomState(random_state).permutation(len(X_pool))[:n_instances]

    def picks(strategy):
        learner = ActiveLearner(LogisticRegression(max_iter=300), strategy, random_state=0,
                                verbose=False).fit(X[:30], y[:30])
        return [learner.query(X[100:400], 3)[0].tolist() for _ in range(2)]

    seeded = CallableStrategy(coin, takes_random_state=True)
    assert picks(seeded) == picks(seeded)
    assert picks(to_modal(random, "0.4.1")) == picks(to_modal(random, "0.4.1"))
    # a plain callable is not given the learner's seed, and the learner draws none for it
    learner = ActiveLearner(LogisticRegression(max_iter=300), coin, random_state=0, verbose=False).fit(X[:30], y[:30])
    state = rng_state(learner)
    learner.query(X[100:400], 3)
    assert rng_state(learner) == state
    # nor does it draw when the caller passes a random_state
    learner.set_params(query_strategy=random)
    learner.query(X[100:400], 3, random_state=7)
    assert rng_state(learner) == state


def test_teach_refuses_integer_images_of_another_type(small_net, digits):
    X, y = digits
    X8 = np.round(X * 255).astype(np.uint8)
    learner = ActiveLearner(small_net(max_epochs=1), bald, verbose=False).fit(X8[:30], y[:30])
    snap = snapshot(learner)
    with pytest.raises(TypeError, match="uint16"):
        learner.teach(X8[30:35].astype(np.uint16), y[30:35])
    assert_unchanged(learner, snap)
    assert learner.X_training_.dtype == np.uint8


def test_strategy_info_may_not_overwrite_history_fields(flat_digits):
    from skdbal.acquisition.base import Strategy

    class Liar(Strategy):
        def acquire(self, estimator, X_pool, n_instances=1, **kwargs):
            acq = random.acquire(estimator, X_pool, n_instances, **kwargs)
            acq.info = {"step": 99}
            return acq

    X, y = flat_digits
    learner = ActiveLearner(LogisticRegression(max_iter=300), Liar(), random_state=0, verbose=False)
    with pytest.raises(ValueError, match=r"history's own keys \['step'\]"):
        learner.simulate(X[:200], y[:200], n_queries=2, n_instances=3)
    assert [r["step"] for r in learner.history_] == [0]
    assert len(learner.y_training_) == len(learner.labelled_idx_) == 20  # the picks were not labelled


def test_default_strategy_is_bald_and_not_a_shared_parameter():
    learner = ActiveLearner()
    assert learner.get_params()["query_strategy"] is None
    assert learner._strategy() is bald
