"""Stochastic batch acquisition: the sampling distribution against the formula, over many draws."""
import itertools

import numpy as np
import pytest
from _helpers import digits_flat
from sklearn.linear_model import LogisticRegression

from skdbal import ActiveLearner
from skdbal.acquisition import (
    batch_bald,
    canonical_name,
    diversity_penalty,
    get_strategy,
    max_entropy,
    noise_filter,
    stochastic_batch,
)
from skdbal.acquisition.functional import log_weights, sample_batch

SCORES = np.array([0.8, 0.4, 0.2, 0.1, 0.0])


def formula(mode, beta, scores=SCORES):
    """p_i by the paper's formulas, written out."""
    if mode == "power":
        w = scores ** beta
    elif mode == "softmax":
        w = np.exp(beta * scores)
    else:
        rank = np.argsort(np.argsort(-scores, kind="stable"), kind="stable") + 1
        w = rank.astype(float) ** -beta
    return w / w.sum()


def draws(n, k, mode, beta, scores=SCORES, seed=0, **kw):
    rng = np.random.RandomState(seed)
    return [tuple(sample_batch(scores, k, mode, beta, random_state=rng, **kw)[0]) for _ in range(n)]


@pytest.mark.parametrize("mode, beta", [("power", 1), ("power", 2), ("softmax", 1), ("softmax", 5),
                                        ("softrank", 1), ("softrank", 0.5)])
def test_the_first_pick_follows_the_formula(mode, beta):
    n = 20000
    first = np.array([d[0] for d in draws(n, 1, mode, beta)])
    freq = np.bincount(first, minlength=len(SCORES)) / n
    p = formula(mode, beta)
    sigma = np.sqrt(p * (1 - p) / n)
    assert np.all(np.abs(freq - p) <= 4.5 * sigma + 1e-12), (freq, p)
    if mode == "power":
        assert freq[-1] == 0                                       # a score of 0 is never drawn first


@pytest.mark.parametrize("mode, beta", [("power", 1), ("softmax", 3), ("softrank", 1)])
def test_a_batch_of_two_is_drawn_without_replacement_by_plackett_luce(mode, beta):
    """P(first i, then j) = p_i p_j / (1 - p_i): each next pick in proportion to the weights left."""
    n = 30000
    seen = draws(n, 2, mode, beta)
    assert all(a != b for a, b in seen)
    p = formula(mode, beta)
    for i, j in itertools.permutations(range(4), 2):
        expected = p[i] * p[j] / (1 - p[i])
        got = sum(1 for d in seen if d == (i, j)) / n
        assert abs(got - expected) <= 4.5 * np.sqrt(expected * (1 - expected) / n) + 1e-12, (i, j, got, expected)


def test_beta_zero_is_uniform_and_a_large_beta_is_the_top_k():
    n = 12000
    freq = np.bincount([d[0] for d in draws(n, 1, "softmax", 0)], minlength=5) / n
    assert np.all(np.abs(freq - 0.2) < 4.5 * np.sqrt(0.16 / n))
    for mode in ("power", "softmax", "softrank"):
        assert {d for d in draws(50, 3, mode, 1e4)} == {(0, 1, 2)}


def test_weight_zero_points_come_last_in_score_order_and_eligibility_is_kept():
    scores = np.array([0.0, 0.5, 0.0, 0.3, 0.01])
    idx, _ = sample_batch(np.where(scores < 0.02, 0.0, scores), 4, "power", 1, random_state=0)
    assert sorted(idx[:2].tolist()) == [1, 3] and sorted(idx[2:].tolist()) == [0, 2]
    eligible = np.array([True, False, True, True, True])
    for d in draws(300, 2, "softmax", 1, scores=scores, eligible=eligible):
        assert 1 not in d
    # soft-rank ranks among the eligible points: 3 is first of them, then 4, then 0 and 2 (tied)
    p = formula("softrank", 1, scores=scores[eligible])          # 0, 0, 0.3, 0.01: ranks 3, 4, 1, 2
    w = np.exp(log_weights(scores[eligible], "softrank", 1))
    np.testing.assert_allclose(w / w.sum(), p)
    np.testing.assert_allclose(p, np.array([1 / 3, 1 / 4, 1, 1 / 2]) / (25 / 12))


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="mode must be one of"):
        sample_batch(SCORES, 1, "gumbel", 1)
    with pytest.raises(ValueError, match="beta must be a finite number >= 0"):
        sample_batch(SCORES, 1, "power", -1)
    with pytest.raises(ValueError, match="power sampling needs scores >= 0"):
        sample_batch(np.array([0.5, -0.2]), 1, "power", 1)
    assert sample_batch(np.array([0.5, -1e-12]), 2, "power", 1, random_state=0)[0].tolist() == [0, 1]
    with pytest.raises(ValueError, match="finite"):
        sample_batch(np.array([0.5, np.nan]), 1, "softmax", 1)
    with pytest.raises(ValueError, match="cannot draw 3 of 2 eligible"):
        sample_batch(SCORES, 3, "softmax", 1, eligible=np.array([1, 1, 0, 0, 0], bool))


class Fixed:
    """p(y=1 | x) = x[0]: entropies from the inputs."""

    classes_ = np.array([0, 1])

    def predict_proba(self, X):
        p = np.asarray(X, dtype=float)[:, 0]
        return np.stack([1 - p, p], axis=1)


def test_the_decorator_samples_from_the_wrapped_scores_seeded():
    X = np.array([[0.5], [0.45], [0.3], [0.1], [0.0]])
    entropy = -(X[:, 0] * np.log(np.clip(X[:, 0], 1e-300, 1)) + (1 - X[:, 0]) * np.log(1 - X[:, 0]))
    power = stochastic_batch(max_entropy, "power", 1)
    idx, scores = power(Fixed(), X, 2, random_state=7)
    assert power(Fixed(), X, 2, random_state=7)[0].tolist() == idx.tolist()
    np.testing.assert_allclose(scores, entropy[idx])
    picks = [tuple(power(Fixed(), X, 1, random_state=s)[0]) for s in range(3000)]
    freq = np.bincount([p[0] for p in picks], minlength=5) / 3000
    p = entropy / entropy.sum()
    assert np.all(np.abs(freq - p) <= 4.5 * np.sqrt(p * (1 - p) / 3000) + 1e-12)
    assert freq[4] == 0


def test_inside_a_noise_filter_untrusted_points_are_never_drawn():
    X = np.array([[0.5], [0.45], [0.4], [0.35], [0.3]])
    y_pool = np.array([1, 1, 0, 0, 0])        # p(given) = 0.5, 0.45, 0.6, 0.65, 0.7: threshold 0.55
    strategy = stochastic_batch(noise_filter(max_entropy, 0.55), "softmax", 1)
    for seed in range(50):
        acq = strategy.acquire(Fixed(), X, 2, y_pool=y_pool, random_state=seed)
        assert set(acq.indices.tolist()) <= {2, 3, 4}
        assert acq.info["mode"] == "softmax" and acq.info["beta"] == 1.0


def test_joint_strategies_and_plain_callables_are_refused():
    X = np.array([[0.5], [0.4]])
    with pytest.raises(TypeError, match="has none"):
        stochastic_batch(batch_bald)(Fixed(), X, 1)
    with pytest.raises(TypeError, match="has none"):
        stochastic_batch(diversity_penalty(max_entropy, 0.1))(Fixed(), X, 1)
    with pytest.raises(TypeError, match="has none"):
        stochastic_batch(lambda est, X, n_instances=1: (np.arange(n_instances), None))(Fixed(), X, 1)


def test_names_compose_with_the_other_decorators():
    s = get_strategy("stochastic(filter(bald,dynamic),power,1)")
    assert (s.mode, s.beta, type(s.strategy).__name__) == ("power", 1, "NoiseFilter")
    d = get_strategy("diverse(stochastic(max_entropy,softrank,0.5),0.1)")
    assert type(d.strategy).__name__ == "StochasticBatch" and d.strategy.beta == 0.5
    assert get_strategy("stochastic(bald)").mode == "power"
    assert canonical_name("stochastic( bald , power , 1.0 )") == "stochastic(bald,power,1.0)"
    with pytest.raises(ValueError, match="mode must be one of"):
        get_strategy("stochastic(bald,gumbel,1)")
    with pytest.raises(ValueError, match="beta must be"):
        get_strategy("stochastic(bald,power,-2)")


def test_with_the_learner_a_run_repeats_and_never_picks_a_labelled_row():
    X, y = digits_flat(400)

    def run():
        learner = ActiveLearner(LogisticRegression(max_iter=300), stochastic_batch(max_entropy, "power", 1),
                                random_state=3, verbose=False)
        return learner, learner.simulate(X, y, n_queries=3, n_instances=10, initial_idx=np.arange(20))

    (a, ha), (_, hb) = run(), run()
    assert [list(r["query_indices"]) for r in ha] == [list(r["query_indices"]) for r in hb]
    assert len(set(a.labelled_idx_.tolist())) == 50
    top = ActiveLearner(LogisticRegression(max_iter=300), max_entropy, random_state=3, verbose=False)
    ht = top.simulate(X, y, n_queries=3, n_instances=10, initial_idx=np.arange(20))
    assert list(ha[1]["query_indices"]) != list(ht[1]["query_indices"])   # not the top-k


class FourPoints:  # entropies ln 2, ln 2, H(0.1) = 0.325083, 0
    def predict_proba(self, X):
        return np.array([[0.5, 0.5], [0.5, 0.5], [0.9, 0.1], [1.0, 0.0]])


def test_the_batch_records_each_draw_s_probability_in_draw_order():
    X = np.zeros((4, 1))
    # softrank, beta 1: weights 1, 1/2, 1/3, 1/4 (total 25/12); seed 1 draws 1, 3, 0, 2
    acq = stochastic_batch(max_entropy, "softrank", 1).acquire(FourPoints(), X, 4, random_state=1)
    assert acq.indices.tolist() == [1, 3, 0, 2]
    # (1/2)/(25/12), (1/4)/(19/12), 1/(4/3), the last one left
    np.testing.assert_allclose(np.exp(acq.info["draw_log_q"]), [6 / 25, 3 / 19, 3 / 4, 1.0], rtol=1e-12)
    assert all(type(x) is float for x in acq.info["draw_log_q"])
    # power, beta 1: weights ln 2, ln 2, h, 0; seed 1 draws 1, 2, 0, then 3 of weight 0 when nothing else is left
    acq = stochastic_batch(max_entropy, "power", 1).acquire(FourPoints(), X, 4, random_state=1)
    h = -(0.9 * np.log(0.9) + 0.1 * np.log(0.1))
    assert acq.indices.tolist() == [1, 2, 0, 3]
    np.testing.assert_allclose(acq.info["draw_log_q"], np.log([np.log(2) / (2 * np.log(2) + h), h / (np.log(2) + h),
                                                               1.0, 1.0]), rtol=1e-12, atol=1e-15)


def test_a_filter_s_fill_is_recorded_as_certain():
    X = np.array([[0.5], [0.45], [0.4], [0.35], [0.3]])
    y_pool = np.array([1, 1, 0, 0, 0])        # trusted: 2, 3, 4
    strategy = stochastic_batch(noise_filter(max_entropy, 0.55), "softrank", 1)
    with pytest.warns(UserWarning):
        acq = strategy.acquire(Fixed(), X, 4, y_pool=y_pool, random_state=0)
    assert len(acq.info["draw_log_q"]) == 4 and acq.info["draw_log_q"][3] == 0.0
    # among the three trusted points, ranked by entropy 2, 3, 4 (weights 1, 1/2, 1/3 of 11/6)
    w = {2: 1.0, 3: 1 / 2, 4: 1 / 3}
    left, expected = 11 / 6, []
    for i in acq.indices[:3].tolist():
        expected.append(w[i] / left)
        left -= w[i]
    np.testing.assert_allclose(np.exp(acq.info["draw_log_q"][:3]), expected, rtol=1e-12)


def test_the_recorded_probabilities_make_lure_unbiased_where_the_batch_mean_is_not():
    """A fixed model, wrong on 3 of 8 points and most unsure there: over many seeded batches of 3, LURE with the
    recorded q's averages the pool's error rate 3/8 within 4 standard errors; the batch's own mean does not."""
    from skdbal.estimates import lure_risk

    X = np.array([[0.5], [0.45], [0.4], [0.3], [0.2], [0.1], [0.05], [0.02]])
    wrong = np.array([1, 1, 0, 1, 0, 0, 0, 0], dtype=float)
    strategy = stochastic_batch(max_entropy, "power", 1)
    R = 2000
    acqs = [strategy.acquire(Fixed(), X, 3, random_state=seed) for seed in range(R)]
    L = np.array([wrong[a.indices] for a in acqs])
    q = np.exp([a.info["draw_log_q"] for a in acqs])
    est = lure_risk(L, q, N=8)
    assert abs(est.mean() - 3 / 8) < 4 * est.std() / np.sqrt(R)
    naive = L.mean(axis=1)
    assert naive.mean() - 3 / 8 > 4 * naive.std() / np.sqrt(R)
