"""The forecast of the learning curve on the labelling page: a line in logit(accuracy) against log(labels),
weighted by the estimates' intervals, checked against values computed by hand; and nothing said when the
estimates say too little."""
import math

import numpy as np
import pytest

from skdbal.labelling.learning_forecast import curve_at, fit_learning_curve, forecast_labels, learning_forecast

Z = 1.959963984540054


def expit(x):
    return 1 / (1 + math.exp(-x))


def points(x, y, se=1.0):
    """Estimates at labels exp(x) whose logits are y, each interval ±z·se on the logit scale."""
    n = np.exp(np.asarray(x, dtype=float))
    y = np.asarray(y, dtype=float)
    return n, [expit(v) for v in y], [expit(v - Z * se) for v in y], [expit(v + Z * se) for v in y]


def test_two_points_give_the_line_through_them_and_its_covariance():
    # x = (0, 2), y = (0, 2), se 1: the line a = 0, b = 1; cov = (XᵀX)⁻¹ = [[1, -1/2], [-1/2, 1/2]]
    coef, cov = fit_learning_curve(*points([0, 2], [0, 2]))
    assert coef == pytest.approx([0, 1], abs=1e-9)
    assert cov == pytest.approx(np.array([[1, -0.5], [-0.5, 0.5]]), abs=1e-9)
    # at x = 4: m = 4, s² = 1 - 4 + 8 = 5
    acc, low, high = curve_at(coef, cov, math.exp(4))
    assert (acc, low, high) == (pytest.approx(expit(4)), pytest.approx(expit(4 - Z * math.sqrt(5))),
                                pytest.approx(expit(4 + Z * math.sqrt(5))))


def test_points_that_scatter_more_than_their_intervals_widen_the_covariance():
    # x = (0, 1, 2), y = (0, 3, 2), se 1: b = 1, a = 2/3; residuals -2/3, 4/3, -2/3: χ² = 24/9 on 1 degree of
    # freedom, so (XᵀX)⁻¹ = [[5/6, -1/2], [-1/2, 1/2]] is widened by 8/3
    coef, cov = fit_learning_curve(*points([0, 1, 2], [0, 3, 2]))
    assert coef == pytest.approx([2 / 3, 1])
    assert cov == pytest.approx(np.array([[20 / 9, -4 / 3], [-4 / 3, 4 / 3]]))
    # y = (0, 2, 2): χ² = 6/9 < 1, nothing widened
    _, cov = fit_learning_curve(*points([0, 1, 2], [0, 2, 2]))
    assert cov == pytest.approx(np.array([[5 / 6, -0.5], [-0.5, 0.5]]))


def test_a_narrower_interval_weighs_more():
    # se 1 at x = 0 and 1, se 1/2 at x = 2 (weight 4): the fit leans towards the third point
    n, acc, _, _ = points([0, 1, 2], [0, 1, 3])
    se = np.array([1, 1, 0.5])
    y = np.array([0, 1, 3.0])
    low, high = [expit(v) for v in y - Z * se], [expit(v) for v in y + Z * se]
    coef, _ = fit_learning_curve(n, acc, low, high)
    X = np.column_stack([np.ones(3), [0, 1, 2]])
    W = np.diag(1 / se ** 2)
    assert coef == pytest.approx(np.linalg.solve(X.T @ W @ X, X.T @ W @ y))


def test_the_forecast_is_made_at_a_round_number_and_only_when_the_estimates_say_enough():
    assert [forecast_labels(n) for n in (20, 34, 67, 134, 200, 700)] == [50, 100, 200, 300, 300, 2000]
    assert forecast_labels(130, n_pool=150) is None
    x = np.log([20, 30, 40, 50])
    y = x - math.log(20)                                # on the line a = -log 20, b = 1 exactly
    n, acc, low, high = points(x, y, se=0.2)
    f = learning_forecast(n, acc, low, high, n_now=50, noun="images")
    assert f["n_labels"] == 100 and f["accuracy"] == pytest.approx(100 / 120)      # logit = log(100/20)
    assert f["low"] < f["accuracy"] < f["high"] and not f["biased"]
    assert f["words"] == (f"About 83% at 100 labels (likely {100 * f['low']:.0f}–{100 * f['high']:.0f}%): accuracy, "
                          f"from a curve fitted to 4 estimates so far.")
    biased = learning_forecast(n, acc, low, high, n_now=50, noun="images", biased=True)
    assert "the share right on the images it asks about" in biased["words"] and "likely higher" in biased["words"]
    # nothing: three points; labels spanning less than twice; a curve that falls; no round number in the pool
    assert learning_forecast(n[:3], acc[:3], low[:3], high[:3], n_now=50) is None
    n_close = np.array([20, 25, 30, 35])
    assert learning_forecast(n_close, acc, low, high, n_now=35) is None
    assert learning_forecast(n, acc[::-1], low[::-1], high[::-1], n_now=50) is None
    assert learning_forecast(n, acc, low, high, n_now=50, n_pool=80) is None
