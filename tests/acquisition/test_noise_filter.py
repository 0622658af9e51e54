"""The label-likelihood noise filter, on hand-built models with known probabilities."""
import warnings

import numpy as np
import pytest
from _helpers import BinaryTwoPasses
from modAL.uncertainty import uncertainty_sampling
from sklearn.linear_model import LogisticRegression

from skdbal import ActiveLearner, uncertainty
from skdbal.acquisition import bald, max_entropy, noise_filter

# p(class 0) in the two passes; p̄(class 0) = (a + b) / 2
A = np.array([0.5, 1.0, 0.2, 0.6, 0.9, 1.0, 0.7, 0.3])
B = np.array([0.5, 0.4, 0.8, 0.6, 0.1, 0.8, 0.7, 0.9])
Y = np.array([0, 1, 1, 0, 1, 0, 0, 1])   # the annotator's labels
X = np.arange(8)[:, None]


def by_hand(threshold):
    pbar0 = (A + B) / 2
    p_label = np.where(Y == 0, pbar0, 1 - pbar0)
    P = np.stack([np.c_[A, 1 - A], np.c_[B, 1 - B]])
    scores = uncertainty.mutual_information(P)
    return p_label, scores, np.argsort(-scores, kind="stable"), p_label >= threshold


def test_trusted_set_ranking_walk_and_rejects():
    p_label, scores, order, trusted = by_hand(0.35)
    # p̄(y_pool|x) = [.5, .3, .5, .6, .5, .9, .7, .4]: only point 1 falls below 0.35
    np.testing.assert_allclose(p_label, [0.5, 0.3, 0.5, 0.6, 0.5, 0.9, 0.7, 0.4])
    est = BinaryTwoPasses(A, B)
    acq = noise_filter(bald, 0.35).acquire(est, X, 3, y_pool=Y)
    expected = order[trusted[order]][:3]
    assert expected.tolist() == [4, 7, 2] and order[:4].tolist() == [4, 1, 7, 2]
    np.testing.assert_array_equal(acq.indices, expected)
    np.testing.assert_allclose(acq.scores, scores[expected])
    # the walk skipped exactly the untrusted points ranked above its last pick
    last = np.flatnonzero(order == expected[-1])[0]
    skipped = [i for i in order[:last] if not trusted[i]]
    assert acq.info["rejected_indices"].tolist() == skipped == [1]
    assert acq.info["n_rejected"] == 1 and acq.info["threshold"] == 0.35 and acq.info["n_filled"] == 0
    assert est.calls == 1  # one pass over the pool: scores and p̄ from the same samples
    # a higher threshold rejects more: 0.55 distrusts 0, 1, 2, 4, 7
    acq = noise_filter(bald, 0.55).acquire(BinaryTwoPasses(A, B), X, 2, y_pool=Y)
    assert set(acq.indices) <= {3, 5, 6}
    assert set(acq.info["rejected_indices"]) <= {0, 1, 2, 4, 7} and acq.info["n_rejected"] >= 1


def test_composes_with_itself_and_with_a_modal_function():
    twice = noise_filter(noise_filter(bald, 0.35), 0.55)
    acq = twice.acquire(BinaryTwoPasses(A, B), X, 2, y_pool=Y)
    assert set(acq.indices) <= {3, 5, 6}
    assert twice.get_params()["strategy__threshold"] == 0.35
    # a plain modAL function is filtered too (it never sees y_pool)
    rng = np.random.RandomState(0)
    Z = rng.normal(size=(200, 4))
    y = (Z[:, 0] > 0).astype(int)
    clf = LogisticRegression().fit(Z[:40], y[:40])
    y_ann = y.copy()
    y_ann[:100] = 1 - y_ann[:100]  # half the annotator's labels are wrong
    p_label = clf.predict_proba(Z)[np.arange(200), y_ann]
    acq = noise_filter(uncertainty_sampling, 0.3).acquire(clf, Z, 5, y_pool=y_ann)
    assert np.all(p_label[acq.indices] >= 0.3)
    assert np.all(p_label[acq.info["rejected_indices"]] < 0.3)


def test_fewer_trusted_points_than_asked_are_filled_and_said():
    est = BinaryTwoPasses(A, B)
    with pytest.warns(UserWarning, match="only 1 of the 8 pool points are trusted"):
        acq = noise_filter(max_entropy, 0.85).acquire(est, X, 3, y_pool=Y)
    assert acq.indices[0] == 5 and len(set(acq.indices)) == 3 and acq.info["n_filled"] == 2
    # filled with the most likely of the untrusted labels: point 6 (0.7), then 3 (0.6)
    assert acq.indices[1:].tolist() == [6, 3]
    assert not np.isin(acq.indices, acq.info["rejected_indices"]).any()


def test_dynamic_threshold_follows_the_estimated_noise_rate():
    est = BinaryTwoPasses(A, B)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # this small, unsure model may trust too few points
        acq = noise_filter(bald, "dynamic").acquire(est, X, 2, y_pool=Y)
    from skdbal.noisy_labels import bayes_threshold, estimate_noise_rate
    p_label = by_hand(0)[0]
    rate = estimate_noise_rate(p_label, 2)
    assert acq.info["noise_rate"] == pytest.approx(rate)
    assert acq.info["threshold"] == pytest.approx(bayes_threshold(rate, 2))
    # a confident model that agrees with every label: no noise, nothing rejected
    sure = BinaryTwoPasses(np.where(Y == 0, 1.0, 0.0), np.where(Y == 0, 0.9, 0.1))
    acq = noise_filter(bald, "dynamic").acquire(sure, X, 3, y_pool=Y)
    assert acq.info["noise_rate"] < 1e-3 and acq.info["n_rejected"] == 0
    # a callable threshold
    acq = noise_filter(bald, lambda p, C: 0.45).acquire(BinaryTwoPasses(A, B), X, 1, y_pool=Y)
    assert acq.info["threshold"] == 0.45


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(), ValueError, "needs y_pool"),
    (dict(y_pool=Y[:7]), ValueError, "y_pool must be aligned with the pool: 8 entries; got 7"),
    (dict(y_pool=np.r_[Y[:7], 5]), ValueError, r"labels not in the model's classes: \[5\]"),
])
def test_bad_calls(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        noise_filter(bald, 0.4).acquire(BinaryTwoPasses(A, B), X, 2, **kwargs)


@pytest.mark.parametrize("threshold", [0.0, 1.0, 1.5, -0.2, "auto", True])
def test_bad_thresholds(threshold):
    with pytest.raises(ValueError, match="threshold must be a float in"):
        noise_filter(bald, threshold)(BinaryTwoPasses(A, B), X, 1, y_pool=Y)


def test_in_the_learner_y_pool_follows_the_subsample_and_nothing_changes_on_error(digits):
    Xd, y = digits
    flat = Xd.reshape(len(Xd), -1)
    y_ann = y.copy()
    y_ann[500:600] = (y_ann[500:600] + 1) % 10  # 100 wrong labels in the pool
    learner = ActiveLearner(LogisticRegression(max_iter=500), noise_filter(max_entropy, 0.2), pool_subsample=300,
                            random_state=0, verbose=False).fit(flat[:100], y[:100])
    pool, labels = flat[100:1100], y_ann[100:1100]
    state = learner.rng_.get_state()
    with pytest.raises(ValueError, match="y_pool must be aligned"):
        learner.query(pool, 10, y_pool=labels[:-1])
    after = learner.rng_.get_state()
    assert after[2] == state[2] and np.array_equal(after[1], state[1])
    idx, _ = learner.query(pool, 10, y_pool=labels)
    proba = learner.predict_proba(pool)
    p_label = proba[np.arange(len(pool)), labels]
    assert np.all(p_label[idx] >= 0.2)
    rejected = learner.last_acquisition_.info["rejected_indices"]
    assert len(rejected) == learner.last_acquisition_.info["n_rejected"]
    assert np.all(p_label[rejected] < 0.2)  # indices into the whole pool, labels aligned


def test_simulation_records_rejects(digits):
    Xd, y = digits
    flat = Xd.reshape(len(Xd), -1)
    y_ann = y[:600].copy()
    wrong = np.arange(0, 600, 5)
    y_ann[wrong] = (y_ann[wrong] + 3) % 10  # 20% wrong labels
    learner = ActiveLearner(LogisticRegression(max_iter=500), noise_filter(max_entropy, 0.1), random_state=0,
                            verbose=False)
    history = learner.simulate(flat[:600], y_ann, n_queries=3, n_instances=10, query_kwargs={"y_pool": y_ann})
    for row in history[1:]:
        assert row["n_rejected"] == len(row["rejected_indices"])
        assert not set(row["rejected_indices"]) & set(learner.labelled_idx_[:len(learner.labelled_idx_)])
    with pytest.raises(ValueError, match="y_pool must be aligned"):
        learner.simulate(flat[:600], y_ann, n_queries=1, query_kwargs={"y_pool": y_ann[:10]})
    assert len(learner.history_) == 4  # unchanged by the refused call


def test_strategies_by_name_with_decorators():
    from skdbal.acquisition import NoiseFilter, get_strategy

    s = get_strategy("filter(filter(max_entropy,0.25),dynamic)")
    assert isinstance(s, NoiseFilter) and s.threshold == "dynamic"
    assert s.strategy.threshold == 0.25 and repr(s.strategy.strategy) == "MaxEntropy()"
    assert get_strategy("bald") is not bald and repr(get_strategy("bald")) == "BALD()"
    for bad, match in [("nope", "unknown strategy 'nope'"), ("filter(bald,0.1", "missing"),
                       ("filt(bald)", "unknown decorator 'filt'"), ("filter(bald,0.1,3)", "at most 1"),
                       ("filter(bald,1.5)", "threshold must be"), ("bald)", "unexpected")]:
        with pytest.raises(ValueError, match=match):
            get_strategy(bad)


def test_quantile_threshold_distrusts_the_expected_number_of_wrong_labels():
    from skdbal.noisy_labels import estimate_noise_rate, quantile_threshold

    p_label = by_hand(0)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        acq = noise_filter(bald, "quantile").acquire(BinaryTwoPasses(A, B), X, 2, y_pool=Y)
    rate = estimate_noise_rate(p_label, 2)
    assert acq.info["noise_rate"] == pytest.approx(rate)
    assert acq.info["threshold"] == pytest.approx(quantile_threshold(p_label, rate))
    assert np.all(p_label[acq.info["rejected_indices"]] < acq.info["threshold"])
    # on a clean pool (labels the model agrees with) nothing is distrusted
    sure = BinaryTwoPasses(np.where(Y == 0, 1.0, 0.0), np.where(Y == 0, 0.9, 0.1))
    acq = noise_filter(bald, "quantile").acquire(sure, X, 3, y_pool=Y)
    assert acq.info["n_rejected"] == 0


def test_batch_rule_chooses_the_batch_worth_most():
    from skdbal.noisy_labels import batch_threshold, estimate_noise_rate

    p_label, scores, order, _ = by_hand(0)
    acq = noise_filter(bald, "batch").acquire(BinaryTwoPasses(A, B), X, 2, y_pool=Y)
    rate = estimate_noise_rate(p_label, 2)
    tau = batch_threshold(scores, p_label, rate, 2, 2)
    assert acq.info["noise_rate"] == pytest.approx(rate)
    assert acq.info["threshold"] == pytest.approx(tau)
    trusted = p_label >= tau
    np.testing.assert_array_equal(acq.indices, order[trusted[order]][:2])
    assert acq.info["n_rejected"] == len(acq.info["rejected_indices"])
    # a strategy without pool scores (a modAL function) is refused, not given the per-label rule
    with pytest.raises(ValueError, match="threshold='batch'.*CallableStrategy has none"):
        noise_filter(uncertainty_sampling, "batch").acquire(LogisticRegression().fit(X, Y), X, 2, y_pool=Y)


def test_batch_rule_skips_suspect_labels_that_the_per_label_rule_keeps():
    # eight sure points (one sure label wrong, so ε̂ ≈ 0.17) and five uncertain ones
    a = np.array([0.95, 0.95, 0.95, 0.95, 0.95, 0.02, 0.6, 0.3, 0.35, 0.9, 0.95, 0.95])
    b = np.array([0.95, 0.95, 0.95, 0.95, 0.95, 0.4, 0.9, 0.7, 0.75, 0.5, 0.95, 0.95])
    y = np.array([0, 0, 0, 0, 1, 0, 0, 1, 1, 1, 0, 0])
    x = np.arange(12)[:, None]
    # BALD ranks 5, 9, 8, 7, 6 with p̄(label) 0.21, 0.3, 0.45, 0.5, 0.75: each skipped point's
    # score times 1 − 2·P(flipped) is below that of the point that replaces it
    dyn = noise_filter(bald, "dynamic").acquire(BinaryTwoPasses(a, b), x, 2, y_pool=y)
    assert dyn.indices.tolist() == [5, 9] and dyn.info["n_rejected"] == 0   # τ = ε̂ ≈ 0.17 for two classes
    acq = noise_filter(bald, "batch").acquire(BinaryTwoPasses(a, b), x, 2, y_pool=y)
    assert acq.info["noise_rate"] == pytest.approx(dyn.info["noise_rate"])
    assert acq.indices.tolist() == [7, 6] and acq.info["rejected_indices"].tolist() == [5, 9, 8]
    assert acq.info["threshold"] == pytest.approx(0.45) and acq.info["threshold"] > 0.45
