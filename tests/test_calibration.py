"""Calibration: top-label ECE by hand, its bad input, and scikit-learn's calibrators around our net."""
import numpy as np
import pytest

from skdbal.metrics import expected_calibration_error, reliability_curve


def test_ece_by_hand():
    proba = np.array([[0.95, 0.05, 0.0], [0.7, 0.2, 0.1], [0.2, 0.75, 0.05], [0.3, 0.3, 0.4], [0.34, 0.33, 0.33]])
    y = np.array([0, 1, 1, 2, 0])
    # 5 bins: (0.2, 0.4] holds 0.4 (right) and 0.34 (right): conf 0.37, acc 1 -> |0.63|·2
    # (0.6, 0.8] holds 0.7 (wrong) and 0.75 (right): conf 0.725, acc 0.5 -> 0.225·2
    # (0.8, 1] holds 0.95 (right): 0.05·1
    expected = (2 * 0.63 + 2 * 0.225 + 1 * 0.05) / 5
    assert expected_calibration_error(y, proba, n_bins=5) == pytest.approx(expected)
    # labels through classes: the same
    names = np.array(["a", "b", "c"])
    assert expected_calibration_error(names[y], proba, n_bins=5, classes=names) == pytest.approx(expected)
    # one bin: |mean confidence − accuracy|
    assert expected_calibration_error(y, proba, n_bins=1) == pytest.approx(abs(proba.max(1).mean() - 4 / 5))
    _, _, counts, edges = reliability_curve(y, proba, n_bins=5)
    assert counts.tolist() == [0, 2, 0, 2, 1] and edges[1] == pytest.approx(0.2)


def test_ece_of_a_calibrated_predictor_is_small():
    rng = np.random.RandomState(0)
    p = rng.uniform(0.5, 1.0, 20000)
    y = (rng.rand(20000) > p).astype(int)      # class 0 with probability p: calibrated
    proba = np.c_[p, 1 - p]
    assert expected_calibration_error(y, proba) < 0.01
    overconfident = np.c_[np.minimum(p + 0.2, 1.0), 1 - np.minimum(p + 0.2, 1.0)]
    assert expected_calibration_error(y, overconfident) > 0.15


def _bin_of_each(proba, n_bins):
    """The bin of each row's top-label confidence, read from reliability_curve one row at a time."""
    return [int(np.argmax(reliability_curve([0], p[None], n_bins)[2])) for p in np.asarray(proba)]


def test_ece_bins_are_right_closed_at_the_edges():
    """Bins ((m−1)/M, m/M]: a confidence on an edge goes to the bin below it, 1.0 to the last bin."""
    def row(c, C=10):                    # top-label confidence c in column 0
        return [c] + [(1 - c) / (C - 1)] * (C - 1)

    # float64 edges: 0.1, 0.5, 0.6 and 1.0 go to the bins they close
    proba = np.array([row(0.1), row(0.5), row(0.6), row(1.0), row(0.95), row(0.3), row(0.7)])
    assert _bin_of_each(proba, 10) == [0, 4, 5, 9, 9, 2, 6]
    y = [0, 1, 0, 1, 0, 0, 1]            # right, wrong, right, wrong, right, right, wrong
    # bins: 0 {0.1 right}: 0.9; 4 {0.5 wrong}: 0.5; 5 {0.6 right}: 0.4; 9 {1.0 wrong, 0.95 right}:
    # 2 · |0.5 − 0.975| = 0.95; 2 {0.3 right}: 0.7; 6 {0.7 wrong}: 0.7
    assert expected_calibration_error(y, proba, n_bins=10) == pytest.approx((0.9 + 0.5 + 0.4 + 0.95 + 0.7 + 0.7) / 7)
    # (torchmetrics' left-closed bins, with 1.0 in a bin of its own, give (0.9 + 0.5 + 0.4 + 1 + 0.05 + 0.7
    # + 0.7) / 7 here: the two conventions differ exactly at the edges)

    # float32 confidences are compared at their exact values: float32(0.6) = 0.60000002 is above 0.6,
    # float32(0.1) = 0.100000001 above 0.1, float32(0.7) = 0.69999999 below 0.7, float32(0.5) is 0.5
    f32 = np.array([row(0.6), row(0.1), row(0.7), row(0.5)], dtype=np.float32)
    assert [float(np.float32(c)) > c for c in (0.6, 0.1)] == [True, True] and float(np.float32(0.7)) < 0.7
    assert _bin_of_each(f32, 10) == [6, 1, 6, 4]
    # 6 {0.60000002 right, 0.69999999 wrong}: 2 · |0.5 − 0.65|; 1 {0.1 right}: 0.9; 4 {0.5 right}: 0.5
    assert expected_calibration_error([0, 0, 1, 0], f32, n_bins=10) == pytest.approx((0.3 + 0.9 + 0.5) / 4)

    # a saturated float32 softmax gives exactly 1.0: the last bin, (0.9, 1]
    logits = np.array([[30.0, 0.0, -5.0], [2.0, 0.0, 0.0]], dtype=np.float32)
    sat = np.exp(logits - logits.max(1, keepdims=True))
    sat /= sat.sum(1, keepdims=True)
    assert sat.dtype == np.float32 and sat[0].max() == 1.0
    assert _bin_of_each(sat, 10) == [9, 7]        # 1.0 and e²/(e² + 2) = 0.787
    # 9 {1.0 wrong}: 1; 7 {0.787 right}: 1 − 0.787
    conf1 = np.exp(2.0) / (np.exp(2.0) + 2)
    assert expected_calibration_error([1, 0], sat, n_bins=10) == pytest.approx((1.0 + (1 - conf1)) / 2)


@pytest.mark.parametrize("n_bins", range(1, 31))
def test_an_edge_m_over_M_closes_bin_m(n_bins):
    """The float64 value of m/M is in bin m − 1 for every M, as ``((m−1)/M, m/M]`` says."""
    C = n_bins + 1                       # the other columns stay below m/M, so it is the top label
    proba = np.array([[m / n_bins] + [(1 - m / n_bins) / (C - 1)] * (C - 1) for m in range(1, n_bins + 1)])
    assert _bin_of_each(proba, n_bins) == list(range(n_bins))


def test_ece_example_of_the_docstring_against_left_closed_bins():
    """Issue 27's example: 0.1667 with right-closed bins (ours); torchmetrics' left-closed bins give 0.4333."""
    proba = np.array([[0.6, 0.4], [0.55, 0.45], [0.65, 0.35]])
    # (0.5, 0.6] holds 0.6 (right) and 0.55 (wrong): 2 · |0.5 − 0.575|; (0.6, 0.7] holds 0.65 (right): 0.35
    assert expected_calibration_error([0, 1, 0], proba, n_bins=10) == pytest.approx((0.15 + 0.35) / 3)
    # torchmetrics' binning, in float32 as it runs (bucketize(conf, linspace(0, 1, M + 1), right=True) − 1:
    # [b_m, b_m+1), 1.0 alone in an (M+1)-th bin): 0.6 joins 0.65, so 2 · |1 − 0.625| + |0 − 0.55|
    import torch
    conf, right = proba.max(1), proba.argmax(1) == [0, 1, 0]
    which = (torch.bucketize(torch.tensor(conf, dtype=torch.float32), torch.linspace(0, 1, 11), right=True)
             - 1).numpy()
    assert which.tolist() == [6, 5, 6]
    left_closed = sum(abs(right[which == b].mean() - conf[which == b].mean()) * (which == b).sum()
                      for b in np.unique(which)) / 3
    assert left_closed == pytest.approx((0.75 + 0.55) / 3) == pytest.approx(0.4333, abs=1e-4)


@pytest.mark.parametrize("y, proba, kwargs, match", [
    ([0, 1], [[0.7, 0.2], [0.5, 0.5]], {}, "rows of proba must sum to 1; row 0 sums to 0.9"),
    ([0, 1], [[0.5, 0.5], [0.5, 0.5]], dict(n_bins=0), "n_bins must be an int >= 1"),
    ([0, 1, 1], [[0.5, 0.5], [0.5, 0.5]], {}, "differ in length"),
    ([0, 2], [[0.5, 0.5], [0.5, 0.5]], {}, r"class indices in \[0, 2\)"),
    (["a", "z"], [[0.5, 0.5], [0.5, 0.5]], dict(classes=["a", "b"]), r"labels not in classes: \['z'\]"),
    ([0, 1], [[1.5, -0.5], [0.5, 0.5]], {}, r"probabilities in \[0, 1\]"),
    ([0, 1], [0.5, 0.5], {}, "shape"),
])
def test_ece_bad_input(y, proba, kwargs, match):
    with pytest.raises(ValueError, match=match):
        expected_calibration_error(y, proba, **kwargs)


def _ece_by_definition(y, proba, n_bins):
    """Top-label ECE written out bin by bin from Guo et al.'s definition: bins ((m−1)/M, m/M]."""
    conf, right = proba.max(axis=1).astype(float), proba.argmax(axis=1) == y
    total = 0.0
    for m in range(1, n_bins + 1):
        inside = (conf <= m / n_bins) & ((conf > (m - 1) / n_bins) if m > 1 else True)
        if inside.any():
            total += inside.sum() * abs(right[inside].mean() - conf[inside].mean())
    return total / len(y)


def _platt(f, positive):
    """Platt (1999) scaling fitted from scratch: p = 1 / (1 + exp(a·f + b)), cross-entropy against his
    prior-corrected targets (N₊ + 1) / (N₊ + 2) and 1 / (N₋ + 2), minimised by BFGS from a = 0."""
    from scipy.optimize import minimize
    from scipy.special import expit

    f = f.astype(float)
    n_pos, n_neg = positive.sum(), (~positive).sum()
    t = np.where(positive, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))

    def loss_grad(ab):
        z = -(ab[0] * f + ab[1])                    # p = expit(z)
        loss = np.sum(np.logaddexp(0, z) - t * z)   # −t log p − (1 − t) log(1 − p)
        dz = expit(z) - t
        return loss, np.array([-np.sum(dz * f), -np.sum(dz)])

    a, b = minimize(loss_grad, [0.0, np.log((n_neg + 1) / (n_pos + 1))], jac=True, method="BFGS",
                    options={"gtol": 1e-10}).x
    return lambda g: expit(-(a * g.astype(float) + b))


def _temperature(p_cal, y_cal, eps=1e-12):
    """Temperature scaling (Guo et al., 2017) fitted from scratch: softmax(β · log p), β minimising the
    calibration set's mean negative log-likelihood."""
    from scipy.optimize import minimize_scalar
    from scipy.special import log_softmax

    logp = np.log(p_cal.astype(float) + eps)

    def nll(log_beta):
        return -log_softmax(np.exp(log_beta) * logp, axis=1)[np.arange(len(y_cal)), y_cal].mean()

    beta = np.exp(minimize_scalar(nll, bounds=(-10, 10), method="bounded", options={"xatol": 1e-12}).x)
    return lambda p: np.exp(log_softmax(beta * np.log(p.astype(float) + eps), axis=1))


@pytest.mark.parametrize("method", ["temperature", "sigmoid"])
def test_calibrated_classifier_cv_around_the_mc_net(digits, small_net, method):
    """scikit-learn's calibrators read our net as any classifier: its calibrated probabilities equal the
    calibration method refitted here on the net's own predict_proba, and the ECE is the definition's."""
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.frozen import FrozenEstimator
    from sklearn.model_selection import train_test_split

    X, y = digits
    X_train, X_cal, y_train, y_cal = train_test_split(X[:600], y[:600], test_size=0.5, random_state=0,
                                                      stratify=y[:600])
    X_test, y_test = X[600:900], y[600:900]
    net = small_net(max_epochs=8).fit(X_train, y_train)
    calibrated = CalibratedClassifierCV(FrozenEstimator(net), method=method).fit(X_cal, y_cal)
    proba = calibrated.predict_proba(X_test)

    p_cal, p_test = net.predict_proba(X_cal), net.predict_proba(X_test)
    if method == "sigmoid":   # one-vs-rest Platt scaling of each column, then rows renormalised
        expected = np.column_stack([_platt(p_cal[:, k], y_cal == c)(p_test[:, k])
                                    for k, c in enumerate(net.classes_)])
        expected /= expected.sum(axis=1, keepdims=True)
        np.testing.assert_allclose(proba, expected, atol=2e-4)
    else:                      # one inverse temperature for all classes: the ranking is unchanged
        expected = _temperature(p_cal, y_cal)(p_test)
        np.testing.assert_allclose(proba, expected, atol=1e-4)   # theirs runs in float32: 2e-5 apart
        np.testing.assert_array_equal(proba.argmax(1), p_test.argmax(1))
        # β = 1 is a candidate, so the fitted one cannot raise the calibration set's NLL
        nll = lambda p: -np.log(p[np.arange(len(y_cal)), y_cal]).mean()   # noqa: E731
        assert nll(calibrated.predict_proba(X_cal)) <= nll(p_cal.astype(float)) + 1e-9
    assert np.abs(proba - p_test).max() > 0.01   # calibration changed something
    assert calibrated.score(X_test, y_test) > 0.6  # columns and labels line up (the net alone: 0.76; chance 0.1)

    before = expected_calibration_error(y_test, p_test, classes=net.classes_)
    after = expected_calibration_error(y_test, proba, classes=calibrated.classes_)
    assert before == pytest.approx(_ece_by_definition(y_test, p_test, 15), abs=1e-12)
    assert after == pytest.approx(_ece_by_definition(y_test, proba, 15), abs=1e-12)


def test_reliability_diagram_points_and_one_diagonal_per_axes():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from skdbal.metrics import plot_reliability_diagram

    proba = np.array([[0.9, 0.1], [0.9, 0.1], [0.6, 0.4], [0.4, 0.6]])
    ax = plot_reliability_diagram([0, 1, 0, 1], proba, n_bins=10, label="a")
    plot_reliability_diagram([0, 0, 0, 1], proba, n_bins=10, label="b", ax=ax)
    labels = [line.get_label() for line in ax.get_lines()]
    # top labels 0, 0, 0, 1 at confidences 0.9, 0.9, 0.6, 0.6. "a": the 0.6 bin is right twice, the 0.9
    # bin once in two: ECE = 0.5 * |1 - 0.6| + 0.5 * |0.5 - 0.9| = 0.4. "b": all four right:
    # ECE = 0.5 * 0.4 + 0.5 * 0.1 = 0.25
    assert labels == ["perfectly calibrated", "a (ECE 0.400)", "b (ECE 0.250)"]
    np.testing.assert_allclose(ax.get_lines()[1].get_xdata(), [0.6, 0.9])
    np.testing.assert_allclose(ax.get_lines()[1].get_ydata(), [1.0, 0.5])
    np.testing.assert_allclose(ax.get_lines()[2].get_ydata(), [1.0, 1.0])
    plt.close(ax.figure)
