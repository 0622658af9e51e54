"""Label noise: the noisy annotator and the noise algebra, against hand-computed cases."""
import numpy as np
import pytest

from skdbal.datasets import make_noisy_labels
from skdbal.noisy_labels import (
    bayes_threshold,
    estimate_noise_rate,
    flip_posterior,
    quantile_threshold,
    trust_threshold,
)


def test_symmetric_flips_rate_and_uniform_targets():
    y = np.repeat(np.arange(10), 5000)
    y_noisy, flipped = make_noisy_labels(y, 0.3, random_state=0)
    assert flipped.mean() == pytest.approx(0.3, abs=0.01)
    np.testing.assert_array_equal(flipped, y_noisy != y)
    # a flipped label goes to each of the 9 other classes with probability 1/9
    for c in (0, 7):
        targets = y_noisy[(y == c) & flipped]
        assert c not in targets
        np.testing.assert_allclose(np.bincount(targets, minlength=10)[np.arange(10) != c] / len(targets),
                                   1 / 9, atol=0.025)
    # a fixed annotator: same seed, same answers; labels keep their type
    again, _ = make_noisy_labels(y, 0.3, random_state=0)
    np.testing.assert_array_equal(again, y_noisy)
    names = np.array(["cat", "dog"])[np.arange(1000) % 2]
    noisy_names, f = make_noisy_labels(names, 0.5, random_state=1)
    assert noisy_names.dtype == names.dtype and set(noisy_names) == {"cat", "dog"}
    assert f.mean() == pytest.approx(0.5, abs=0.05)
    assert not make_noisy_labels(y, 0.0, random_state=0)[1].any()


def test_transition_matrix_class_dependent():
    T = np.array([[1.0, 0.0, 0.0], [0.0, 0.6, 0.4], [0.0, 0.0, 1.0]])  # only class 1 is confused, with 2
    y = np.repeat([0, 1, 2], 4000)
    y_noisy, flipped = make_noisy_labels(y, 0.0, transition_matrix=T, random_state=0)
    assert not flipped[y != 1].any()
    assert set(y_noisy[flipped]) == {2}
    assert flipped[y == 1].mean() == pytest.approx(0.4, abs=0.02)


@pytest.mark.parametrize("kwargs, match", [
    (dict(noise_rate=1.0), r"noise_rate must lie in \[0, 1\)"),
    (dict(noise_rate=-0.1), r"noise_rate must lie in \[0, 1\)"),
    (dict(noise_rate=0.1, transition_matrix=[[0.5, 0.4], [0.0, 1.0]]), "rows must sum to 1"),
    (dict(noise_rate=0.1, transition_matrix=np.eye(3)), r"shape \(2, 2\)"),
    (dict(noise_rate=0.1, classes=[0, 2]), r"labels not in classes: \[1\]"),
])
def test_bad_noise_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_noisy_labels(np.array([0, 1, 0, 1]), **kwargs)


def test_flip_posterior_and_threshold_by_hand():
    # C=2, eps=0.2: r = 0.1*0.2 / (0.1*0.2 + 0.9*0.8) = 0.02 / 0.74
    np.testing.assert_allclose(flip_posterior([0.9], 0.2, 2), [0.02 / 0.74])
    # tau(eps) is where r = 1/2: for C=10, eps=0.2: (0.2/9) / (0.8 + 0.2/9) = 1/37
    tau = bayes_threshold(0.2, 10)
    assert tau == pytest.approx(1 / 37)
    assert flip_posterior([tau], 0.2, 10)[0] == pytest.approx(0.5)
    assert bayes_threshold(0.0, 10) == 0.0
    assert bayes_threshold(0.5, 2) == pytest.approx(0.5)


def test_em_recovers_the_noise_rate_of_simulated_labels():
    rng = np.random.RandomState(0)
    C, n = 10, 20000
    probs = rng.dirichlet(np.full(C, 0.3), size=n)             # a calibrated model's posteriors
    y_true = np.array([rng.choice(C, p=p) for p in probs])       # labels drawn from them
    y_noisy, flipped = make_noisy_labels(y_true, 0.2, classes=np.arange(C), random_state=1)
    p_label = probs[np.arange(n), y_noisy]
    assert estimate_noise_rate(p_label, C) == pytest.approx(0.2, abs=0.015)
    clean = probs[np.arange(n), y_true]
    assert estimate_noise_rate(clean, C) < 0.01


def test_noise_algebra_refuses_bad_input():
    with pytest.raises(ValueError, match="probabilities"):
        estimate_noise_rate([1.5], 10)
    with pytest.raises(ValueError, match="n_classes"):
        bayes_threshold(0.1, 1)
    with pytest.raises(ValueError, match="noise_rate"):
        flip_posterior([0.5], 1.0, 3)


def test_em_estimate_is_capped_where_labels_carry_no_information():
    assert estimate_noise_rate(np.zeros(50), 2) == pytest.approx(0.5)
    assert estimate_noise_rate(np.zeros(50), 10) == pytest.approx(0.9)


def test_quantile_threshold_by_hand():
    p = np.array([0.9, 0.05, 0.8, 0.3, 0.7, 0.6, 0.2, 0.95, 0.4, 0.1])
    assert quantile_threshold(p, 0.3) == 0.3           # 3 of 10 below: 0.05, 0.1, 0.2
    assert (p < quantile_threshold(p, 0.3)).sum() == 3
    assert quantile_threshold(p, 0.0) == 0.05          # nothing below the smallest
    assert (p < quantile_threshold(p, 0.05)).sum() == 0


def _brute_batch_threshold(s, p, rate, C, n):
    """Every τ that changes the trusted set, scored by the batch's worth; smallest on ties."""
    order = np.argsort(-s, kind="stable")
    r = flip_posterior(p, rate, C)
    value = (s - s.min()) * (1 - 2 * r)
    best, best_tau = -np.inf, None
    for tau in [0.0] + sorted(np.nextafter(np.unique(p), 1)):
        picks = [i for i in order if p[i] >= tau][:n]
        if len(picks) < n:
            continue
        if value[picks].sum() > best + 1e-12:
            best, best_tau = value[picks].sum(), tau
    return best_tau


def test_batch_threshold_by_hand():
    from skdbal.noisy_labels import batch_threshold

    s, p = np.array([1.0, 0.9, 0.5, 0.0]), np.array([0.05, 0.9, 0.9, 0.9])
    r = flip_posterior(p, 0.2, 10)
    assert r[0] == pytest.approx(0.95 * 0.2 / 9 / (0.95 * 0.2 / 9 + 0.05 * 0.8))   # 0.3455
    # keep point 0: 1.0·(1 − 2·0.3455) + 0.9·(1 − 2r₁) = 1.2036; skip it: 0.9·(…) + 0.5·(…) = 1.3914
    tau = batch_threshold(s, p, 0.2, 10, 2)
    assert tau > 0.05 and tau == pytest.approx(0.05)
    # with a poor replacement (score 0.1) keeping the suspect label is worth more
    assert batch_threshold([1.0, 0.9, 0.1, 0.0], p, 0.2, 10, 2) == 0.0
    # no noise, or a sure label: nothing is skipped
    assert batch_threshold(s, p, 0.0, 10, 2) == 0.0
    assert batch_threshold(s, [0.99, 0.9, 0.9, 0.9], 0.2, 10, 2) == 0.0
    # a batch of the whole pool has no replacement to take
    assert batch_threshold(s, p, 0.2, 10, 4) == 0.0


def test_batch_threshold_matches_brute_force():
    from skdbal.noisy_labels import batch_threshold

    rng = np.random.RandomState(0)
    for trial in range(200):
        N = rng.randint(3, 30)
        s = rng.rand(N) ** 2
        p = np.where(rng.rand(N) < 0.3, rng.rand(N) * 0.2, rng.rand(N))
        n, rate = rng.randint(1, N), rng.choice([0.05, 0.2, 0.4])
        tau = batch_threshold(s, p, rate, 10, n)
        expected = _brute_batch_threshold(s, p, rate, 10, n)
        assert tau == pytest.approx(expected), trial


def test_batch_threshold_bad_input():
    from skdbal.noisy_labels import batch_threshold

    with pytest.raises(ValueError, match="differ in length"):
        batch_threshold([1.0, 0.5], [0.5], 0.2, 10, 1)
    with pytest.raises(ValueError, match=r"n_instances must lie in \[1, 2\]"):
        batch_threshold([1.0, 0.5], [0.5, 0.5], 0.2, 10, 3)
    with pytest.raises(ValueError, match="permutation"):
        batch_threshold([1.0, 0.5], [0.5, 0.5], 0.2, 10, 1, order=[0, 0])
    with pytest.raises(ValueError, match="finite"):
        batch_threshold([np.nan, 0.5], [0.5, 0.5], 0.2, 10, 1)



def test_trust_threshold_is_the_noise_filters_rules():
    p = np.array([0.9, 0.95, 0.85, 0.9, 0.8, 0.001, 0.002])
    tau, rate = trust_threshold(p, 10, "dynamic")
    assert rate == estimate_noise_rate(p, 10) and tau == bayes_threshold(rate, 10)
    assert (p < tau).tolist() == [False] * 5 + [True, True]
    tau, rate = trust_threshold(p, 10, "quantile")      # floor(0.28 * 7) = 1 label distrusted: 0.001
    assert tau == 0.002 and (p < tau).sum() == 1
    assert trust_threshold(p, 10, 0.85) == (0.85, None)
    assert trust_threshold(p, 10, lambda p, c: 1.0 / c) == (0.1, None)
    for bad in ("batch", 0.0, 1.0, True, "0.5"):
        with pytest.raises(ValueError, match="rule must be"):
            trust_threshold(p, 10, bad)
    with pytest.raises(ValueError, match="returned 2.0"):
        trust_threshold(p, 10, lambda p, c: 2.0)
