"""A forecast of the learning curve from the accuracy estimates so far: a small fitted curve with a stated
uncertainty, or nothing.

The curve is a straight line in the logit of the accuracy against the log of the labels,
``logit(acc) = a + b log n``, fitted by weighted least squares to the estimates, each weighted by its
interval (the interval's width on the logit scale gives its standard error, ``width / 2z``). When the
points scatter more than their intervals say (a reduced χ² above 1), the coefficients' covariance is
widened by it. The forecast at ``n`` labels is the line there, and its interval the line's at the same
level (the uncertainty of the fitted curve, not of one more estimate). Plain functions over arrays.

Nothing is forecast (:func:`learning_forecast` gives None) with fewer than :data:`MIN_POINTS` estimates,
when their labels span less than a factor :data:`MIN_SPAN`, or when the fitted curve does not rise
(``b <= 0``): a line through noise says nothing about where the curve goes.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence, Tuple

import numpy as np
from scipy import stats

__all__ = ["MIN_POINTS", "MIN_SPAN", "fit_learning_curve", "curve_at", "forecast_labels", "learning_forecast"]

#: Estimates needed before anything is forecast.
MIN_POINTS = 4
#: The labels of the last estimate over those of the first, at least.
MIN_SPAN = 2.0
#: Accuracies and interval ends are kept in [EPS, 1 - EPS] on the logit scale.
EPS = 1e-3
#: The label counts a forecast is made at: the first at least 1.5 times the labels now.
ROUND_NUMBERS = (50, 100, 200, 300, 500, 1000, 2000, 3000, 5000, 10000, 20000, 50000, 100000)


def _logit(p) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=np.float64), EPS, 1 - EPS)
    return np.log(p / (1 - p))


def _expit(x: float) -> float:
    return float(1.0 / (1.0 + math.exp(-x)))


def fit_learning_curve(n_labels, accuracy, low, high,
                       confidence: float = 0.95) -> Tuple[np.ndarray, np.ndarray]:
    """``logit(acc) = a + b log n`` fitted by weighted least squares to estimates with intervals.

    Parameters
    ----------
    n_labels : array-like of shape (k,)
        The labels each estimate's model was trained on, ``> 0``.
    accuracy, low, high : array-like of shape (k,)
        The estimates and their intervals' ends, in ``[0, 1]``.
    confidence : float, default=0.95
        The intervals' level: the standard error of each point is its interval's width on the logit
        scale over ``2 z``.

    Returns
    -------
    coef : ndarray of shape (2,)
        ``(a, b)``.
    cov : ndarray of shape (2, 2)
        Their covariance, widened by the reduced χ² of the fit when it is above 1 (with more than two points).

    Raises
    ------
    ValueError
        For fewer than two points, lengths that differ, labels not ``> 0``, a point whose interval
        has no width, or all points at one label count.

    Examples
    --------
    Three points on the curve ``logit(acc) = log n - log 100`` (50% at 100 labels), with equal
    intervals: the fit finds it, ``a = -log 100 = -4.60517``, ``b = 1``:

    >>> import numpy as np
    >>> from skdbal.labelling.learning_forecast import fit_learning_curve
    >>> n = np.array([50, 100, 200])
    >>> acc = n / (n + 100)
    >>> coef, cov = fit_learning_curve(n, acc, acc - 0.1, acc + 0.1)
    >>> coef.round(5).tolist()
    [-4.60517, 1.0]
    """
    n = np.asarray(n_labels, dtype=np.float64)
    y, lo, hi = _logit(accuracy), _logit(low), _logit(high)
    if n.ndim != 1 or len(n) < 2 or not (n.shape == y.shape == lo.shape == hi.shape):
        raise ValueError("n_labels, accuracy, low and high must be one-dimensional, of one length, at least 2")
    if not (n > 0).all():
        raise ValueError("n_labels must be > 0")
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    se = (hi - lo) / (2 * z)
    if not (se > 0).all():
        raise ValueError("every point's interval must have a width (high > low)")
    x = np.log(n)
    if np.ptp(x) == 0:
        raise ValueError("the points must be at more than one label count")
    X = np.column_stack([np.ones_like(x), x])
    w = 1.0 / se ** 2
    cov = np.linalg.inv(X.T @ (X * w[:, None]))
    coef = cov @ (X.T @ (w * y))
    dof = len(x) - 2
    if dof > 0:
        chi2 = float(np.sum(w * (y - X @ coef) ** 2)) / dof
        cov = cov * max(1.0, chi2)
    return coef, cov


def curve_at(coef, cov, n: float, confidence: float = 0.95) -> Tuple[float, float, float]:
    """The fitted curve at ``n`` labels, and its interval: ``expit(m ± z s)``, with ``m = a + b log n`` and
    ``s² = xᵀ cov x``, ``x = (1, log n)``.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.labelling.learning_forecast import curve_at
    >>> coef, cov = np.array([-np.log(100), 1.0]), np.zeros((2, 2))
    >>> [round(v, 4) for v in curve_at(coef, cov, 300)]          # 300 / 400, no uncertainty
    [0.75, 0.75, 0.75]
    """
    x = np.array([1.0, math.log(n)])
    m = float(x @ np.asarray(coef, dtype=np.float64))
    s = math.sqrt(max(0.0, float(x @ np.asarray(cov, dtype=np.float64) @ x)))
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    return _expit(m), _expit(m - z * s), _expit(m + z * s)


def forecast_labels(n_now: int, n_pool: Optional[int] = None) -> Optional[int]:
    """The label count to forecast at: the first of :data:`ROUND_NUMBERS` at least 1.5 times ``n_now``,
    and at most ``n_pool`` (None beyond it).

    Examples
    --------
    >>> from skdbal.labelling.learning_forecast import forecast_labels
    >>> forecast_labels(60), forecast_labels(130), forecast_labels(130, n_pool=150)
    (100, 200, None)
    """
    for r in ROUND_NUMBERS:
        if r >= 1.5 * n_now:
            return r if n_pool is None or r <= n_pool else None
    return None


def learning_forecast(n_labels: Sequence[float], accuracy: Sequence[float], low: Sequence[float],
                      high: Sequence[float], n_now: int, n_pool: Optional[int] = None, *, biased: bool = False,
                      noun: str = "items", confidence: float = 0.95) -> Optional[dict]:
    """Where the learning curve is heading, from the estimates so far; None when they say too little.

    None with fewer than :data:`MIN_POINTS` points, labels spanning less than :data:`MIN_SPAN` times, a
    curve that does not rise, or no round label count left in the pool (:func:`forecast_labels`).

    Parameters
    ----------
    n_labels, accuracy, low, high : sequence of float
        The estimates, each at the labels of the model it is of; independent of one another (no label
        in two of them).
    n_now : int
        The labels given so far.
    n_pool : int, optional
        The pool's size: no forecast beyond it.
    biased : bool, default=False
        The estimates are the biased share of the items the strategy asked about: so is the forecast.
    noun : str, default="items"
    confidence : float, default=0.95

    Returns
    -------
    dict or None
        ``n_labels`` (where), ``accuracy``, ``low``, ``high``, ``n_points``, ``biased`` and ``words``.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.labelling.learning_forecast import learning_forecast
    >>> n = np.array([20, 40, 60, 80])
    >>> acc = n / (n + 20)                                        # on the curve: 100 / 120 at 100 labels
    >>> f = learning_forecast(n, acc, acc - 0.05, acc + 0.05, n_now=80)
    >>> f["n_labels"], round(f["accuracy"], 4)
    (200, 0.9091)
    >>> print(f["words"].split(" (")[0])
    About 91% at 200 labels
    >>> learning_forecast(n[:3], acc[:3], acc[:3] - 0.05, acc[:3] + 0.05, n_now=60) is None    # too few
    True
    """
    n = np.asarray(n_labels, dtype=np.float64)
    if len(n) < MIN_POINTS or n.min() <= 0 or n.max() < MIN_SPAN * n.min():
        return None
    try:
        coef, cov = fit_learning_curve(n, accuracy, low, high, confidence)
    except (ValueError, np.linalg.LinAlgError):
        return None
    target = forecast_labels(n_now, n_pool)
    if coef[1] <= 0 or target is None:
        return None
    acc, lo, hi = curve_at(coef, cov, target, confidence)
    what = (f"the share right on the {noun} it asks about" if biased else "accuracy")
    words = (f"About {100 * acc:.0f}% at {target} labels (likely {100 * lo:.0f}–{100 * hi:.0f}%): "
             f"{what}, from a curve fitted to {len(n)} estimates so far" +
             (f"; on all {noun} it is likely higher." if biased else "."))
    return {"n_labels": int(target), "accuracy": acc, "low": lo, "high": hi, "n_points": int(len(n)),
            "biased": bool(biased), "words": words}
