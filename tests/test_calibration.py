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


@pytest.mark.parametrize("method", ["temperature", "sigmoid"])
def test_calibrated_classifier_cv_around_the_mc_net(digits, small_net, method):
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.model_selection import train_test_split

    X, y = digits
    X_train, X_cal, y_train, y_cal = train_test_split(X[:600], y[:600], test_size=0.5, random_state=0,
                                                      stratify=y[:600])
    net = small_net(max_epochs=8).fit(X_train, y_train)
    from sklearn.frozen import FrozenEstimator

    calibrated = CalibratedClassifierCV(FrozenEstimator(net), method=method).fit(X_cal, y_cal)
    proba = calibrated.predict_proba(X[600:900])
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-6)
    before = expected_calibration_error(y[600:900], net.predict_proba(X[600:900]), classes=net.classes_)
    after = expected_calibration_error(y[600:900], proba, classes=calibrated.classes_)
    assert 0 <= after <= 1 and 0 <= before <= 1
    if method == "temperature":  # one parameter: the ranking, hence the accuracy, is unchanged
        np.testing.assert_array_equal(proba.argmax(1), net.predict_proba(X[600:900]).argmax(1))


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
