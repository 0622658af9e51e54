import numpy as np
import pytest

from skdbal.uncertainty import (
    check_samples,
    expected_entropy,
    mean_standard_deviation,
    mutual_information,
    predictive_entropy,
    variation_ratio,
)

LOG3 = np.log(3.0)

# Seed 003's three cases, built so that the values are known exactly.
CONFIDENT = [[1, 0, 0], [1, 0, 0], [1, 0, 0]]          # every pass sure of class 0
ALEATORIC = [[1 / 3, 1 / 3, 1 / 3]] * 3                  # passes agree on a flat distribution
EPISTEMIC = [[1, 0, 0], [0, 1, 0], [0, 0, 1]]           # passes disagree, each confident


def samples(*points):
    """Stack per-point (T, C) lists into a (T, N, C) array."""
    return np.stack([np.asarray(p, dtype=float) for p in points], axis=1)


P3 = samples(CONFIDENT, ALEATORIC, EPISTEMIC)


def test_predictive_entropy_three_cases():
    np.testing.assert_allclose(predictive_entropy(P3), [0.0, LOG3, LOG3], atol=1e-12)


def test_expected_entropy_three_cases():
    np.testing.assert_allclose(expected_entropy(P3), [0.0, LOG3, 0.0], atol=1e-12)


def test_mutual_information_three_cases():
    # total = epistemic + aleatoric; only the disagreeing point has epistemic uncertainty
    np.testing.assert_allclose(mutual_information(P3), [0.0, 0.0, LOG3], atol=1e-12)


def test_the_measures_old_names_are_gone():
    """bald and mean_std are the strategies' names (skdbal.acquisition); the measures' old aliases were
    deleted before the first release, not deprecated."""
    import skdbal.uncertainty as u
    for old in ("bald", "mean_std"):
        with pytest.raises(AttributeError):
            getattr(u, old)


def test_variation_ratio_three_cases():
    # the flat point's passes all vote class 0 (ties go to the lowest class)
    np.testing.assert_allclose(variation_ratio(P3), [0.0, 0.0, 2 / 3], atol=1e-12)


def test_mean_std_three_cases():
    # epistemic: each class takes values {1, 0, 0}: var = 1/3 - 1/9 = 2/9
    np.testing.assert_allclose(mean_standard_deviation(P3), [0.0, 0.0, np.sqrt(2) / 3], atol=1e-12)


def test_mixed_point_by_hand():
    P = samples([[0.5, 0.5], [1.0, 0.0]])
    h = -(0.75 * np.log(0.75) + 0.25 * np.log(0.25))
    assert predictive_entropy(P)[0] == pytest.approx(h)
    assert expected_entropy(P)[0] == pytest.approx(np.log(2) / 2)
    assert mutual_information(P)[0] == pytest.approx(h - np.log(2) / 2)
    assert mean_standard_deviation(P)[0] == pytest.approx(0.25)


def test_variation_ratio_from_mode_counts():
    votes = [0, 1, 1, 2, 1]  # mode is class 1, three of five passes
    P = np.eye(3)[votes][:, None, :]
    assert variation_ratio(P)[0] == pytest.approx(1 - 3 / 5)
    votes = [3, 3, 0, 0, 1, 2]  # tie at 2 of 6
    P = np.eye(4)[votes][:, None, :] * 0.7 + 0.3 / 4
    assert variation_ratio(P)[0] == pytest.approx(1 - 2 / 6)


def test_mean_std_matches_numpy_reference():
    rng = np.random.default_rng(0)
    P = rng.dirichlet(np.ones(5), size=(30, 40))
    np.testing.assert_allclose(mean_standard_deviation(P), P.std(axis=0, ddof=0).mean(axis=-1), rtol=1e-10)


def test_bald_never_negative_and_is_entropy_difference():
    rng = np.random.default_rng(1)
    P = rng.dirichlet(np.full(10, 0.3), size=(50, 200))
    P[:, :50] = P[:1, :50]  # identical passes: MI is 0 up to round-off
    mi = mutual_information(P)
    assert (mi >= 0).all()
    np.testing.assert_allclose(mi[:50], 0.0, atol=1e-12)
    np.testing.assert_allclose(mi[50:], predictive_entropy(P)[50:] - expected_entropy(P)[50:], atol=1e-12)


@pytest.mark.parametrize("fn", [predictive_entropy, expected_entropy, mutual_information,
                                variation_ratio, mean_standard_deviation])
def test_permuting_passes_changes_nothing(fn):
    rng = np.random.default_rng(2)
    P = rng.dirichlet(np.ones(4), size=(25, 30))
    np.testing.assert_allclose(fn(P[rng.permutation(25)]), fn(P), rtol=1e-12, atol=1e-15)


def test_zero_probabilities_give_no_nan():
    P = np.zeros((2, 1, 3))
    P[:, 0, 1] = 1.0
    for fn in (predictive_entropy, expected_entropy, mutual_information, mean_standard_deviation):
        assert np.isfinite(fn(P)).all()


def test_float32_input_is_computed_in_float64():
    P = P3.astype(np.float32)
    assert mutual_information(P).dtype == np.float64


@pytest.mark.parametrize(
    "P, match",
    [
        (np.ones((3, 2)) / 2, "shape \\(T, n_samples, n_classes\\)"),
        (np.ones((0, 2, 2)) / 2, "T >= 1"),
        (np.full((2, 2, 2), np.nan), "NaN"),
        (np.full((2, 2, 2), 0.6), "sum to 1"),
        (np.array([[[1.5, -0.5]]]), "\\[0, 1\\]"),
    ],
)
def test_bad_samples_raise(P, match):
    with pytest.raises(ValueError, match=match):
        check_samples(P)
    with pytest.raises(ValueError, match=match):
        mutual_information(P)


def test_decompose_reproduces_seed_003_table():
    """Seed 003's table (3 classes): confident, aleatoric and epistemic cases, to the printed precision."""
    from skdbal.uncertainty import decompose

    confident = np.array([[[1.0, 0.0, 0.0]]] * 4)
    # three passes, each near uniform: the noise is in every pass
    aleatoric = np.array([[[0.414, 0.307, 0.279]], [[0.302, 0.274, 0.424]], [[0.292, 0.415, 0.293]]])
    # 52 passes, each nearly sure (0.9982), of class 0 (17 of them), 1 (18) or 2 (17): they disagree
    q, r = 0.9982, (1 - 0.9982) / 2
    sure = {c: [r, r, r] for c in range(3)}
    for c in range(3):
        sure[c][c] = q
    epistemic = np.array([[sure[0]]] * 17 + [[sure[1]]] * 18 + [[sure[2]]] * 17)
    printed = {  # case: (predicted class, confidence, total, aleatoric, epistemic)
        "confident": (0, 1.000, 0.000, 0.000, 0.000),
        "aleatoric": (0, 0.336, 1.099, 1.083, 0.016),
        "epistemic": (1, 0.346, 1.098, 0.014, 1.084),
    }
    for name, P in (("confident", confident), ("aleatoric", aleatoric), ("epistemic", epistemic)):
        mean = P.mean(axis=0)[0]
        d = decompose(P)
        got = (int(mean.argmax()), mean.max(), d.total[0], d.aleatoric[0], d.epistemic[0])
        assert got[0] == printed[name][0], name
        np.testing.assert_allclose(got[1:], printed[name][1:], atol=5e-4, err_msg=name)
        np.testing.assert_allclose(d.total, d.aleatoric + d.epistemic)


def test_mean_std_of_identical_passes_is_exactly_zero():
    """20 identical passes have no spread: exactly 0, not the round-off of E[P²] − E[P]² (issue 27)."""
    rng = np.random.default_rng(3)
    one = rng.dirichlet(np.full(10, 0.1), size=500)          # peaked rows, many near 1
    for dtype in (np.float32, np.float64):                   # float64: the one-pass formula gave up to 4e-9
        for T in (20, 100):
            P = np.broadcast_to(one.astype(dtype), (T,) + one.shape)
            assert np.all(mean_standard_deviation(P) == 0.0), (dtype, T)


def test_mean_std_of_a_near_certain_point_by_hand():
    # passes (1 − a_t, a_t), a_t = 1e-7 · (0, 1, 2, 3): mean 1.5e-7, squared deviations
    # (2.25, 0.25, 0.25, 2.25)e-14, population variance 1.25e-14 in both classes
    a = 1e-7 * np.arange(4.0)
    P = np.stack([1 - a, a], axis=-1)[:, None, :]
    assert mean_standard_deviation(P)[0] == pytest.approx(np.sqrt(1.25e-14), rel=1e-7)  # one-pass: 1e-3 off
    # a certain point ranks below it, and by exactly 0
    P2 = np.concatenate([P, np.tile([[[1.0, 0.0]]], (4, 1, 1))], axis=1)
    np.testing.assert_array_equal(mean_standard_deviation(P2)[1:], [0.0])
