"""Label noise algebra: the noise rate of an annotator, and when to distrust a label.

Plain NumPy functions over the model's probability of the label the
annotator gave, ``p = p̄(y = ỹ | x)``, under symmetric noise: the annotator
gives the true label with probability ``1 − ε`` and each of the ``C − 1``
others with probability ``ε / (C − 1)``. Then

- the posterior probability that a label was flipped is
  ``r = (1 − p)·ε/(C−1) / ((1 − p)·ε/(C−1) + p·(1 − ε))``;
- the Bayes decision distrusts a label when ``r > 1/2``, that is when
  ``p < τ(ε) = (ε/(C−1)) / ((1 − ε) + ε/(C−1))``;
- ``ε`` itself is estimated from the pool's labels by expectation
  maximisation: ``ε ← mean(r)`` until it settles (the maximum-likelihood
  noise rate given the model's probabilities).

These make the noise filter's ``threshold="dynamic"``
(:func:`skdbal.acquisition.noise_filter`): it uses only what a user has,
the model and the annotator's labels, and follows the model as it improves.

Examples
--------
>>> from skdbal.noise import bayes_threshold
>>> round(bayes_threshold(0.2, n_classes=10), 4)   # 20% symmetric noise, 10 classes
0.027
>>> bayes_threshold(0.0, n_classes=10)             # a clean annotator is always trusted
0.0
"""
from __future__ import annotations

import numpy as np

__all__ = ["flip_posterior", "estimate_noise_rate", "bayes_threshold", "quantile_threshold"]


def _check(p_label, n_classes: int) -> np.ndarray:
    p = np.asarray(p_label, dtype=np.float64).reshape(-1)
    if isinstance(n_classes, bool) or not isinstance(n_classes, (int, np.integer)) or n_classes < 2:
        raise ValueError(f"n_classes must be an int >= 2; got {n_classes!r}")
    if len(p) == 0:
        raise ValueError("p_label is empty")
    if not np.isfinite(p).all() or p.min() < 0 or p.max() > 1 + 1e-6:
        raise ValueError("p_label must hold probabilities in [0, 1]")
    return np.clip(p, 0.0, 1.0)


def _check_rate(noise_rate) -> float:
    rate = float(noise_rate)
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"noise_rate must lie in [0, 1); got {noise_rate!r}")
    return rate


def flip_posterior(p_label, noise_rate: float, n_classes: int) -> np.ndarray:
    """Posterior probability that each label was flipped by the annotator.

    Parameters
    ----------
    p_label : array-like of shape (n,)
        The model's probability of the label given, ``p̄(y = ỹ | x)``.
    noise_rate : float in [0, 1)
        The annotator's symmetric noise rate ``ε``.
    n_classes : int
        Number of classes ``C``.

    Returns
    -------
    r : ndarray of shape (n,)

    Examples
    --------
    >>> from skdbal.noise import flip_posterior
    >>> flip_posterior([0.9, 0.0], 0.2, 2).round(4).tolist()   # (0.1·0.2)/(0.1·0.2 + 0.9·0.8)
    [0.027, 1.0]
    """
    p = _check(p_label, n_classes)
    rate = _check_rate(noise_rate)
    wrong = (1.0 - p) * rate / (n_classes - 1)
    right = p * (1.0 - rate)
    total = wrong + right
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, wrong / np.where(total > 0, total, 1.0), 0.0)


def estimate_noise_rate(p_label, n_classes: int, *, init: float = 0.1, tol: float = 1e-6,
                        max_iter: int = 200) -> float:
    """Maximum-likelihood symmetric noise rate of the labels, by EM.

    Parameters
    ----------
    p_label : array-like of shape (n,)
        The model's probability of each label given, ``p̄(y = ỹ | x)``.
    n_classes : int
        Number of classes ``C``.
    init : float, default=0.1
        Starting rate, in (0, 1).
    tol : float, default=1e-6
        Stop when the rate changes by less.
    max_iter : int, default=200
        At most this many EM steps.

    Returns
    -------
    noise_rate : float in [0, (C-1)/C]
        At most ``(C − 1)/C``, where the labels carry no information.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.noise import estimate_noise_rate
    >>> p = np.r_[np.full(80, 1.0), np.full(20, 0.0)]   # a perfect model, 20 wrong labels
    >>> round(estimate_noise_rate(p, n_classes=10), 6)
    0.2
    """
    p = _check(p_label, n_classes)
    rate = _check_rate(init)
    # beyond (C-1)/C the labels would say less than a random guess: symmetric noise
    # cannot tell that apart from a wrong model, so the estimate stops there
    cap = (n_classes - 1) / n_classes
    for _ in range(int(max_iter)):
        new = min(float(np.mean(flip_posterior(p, rate, n_classes))), cap)
        if abs(new - rate) < tol:
            return new
        rate = new
    return rate


def bayes_threshold(noise_rate: float, n_classes: int) -> float:
    """The trust threshold ``τ(ε)`` of the Bayes decision under symmetric noise.

    A label is more likely flipped than right exactly when the model gives it
    a probability below ``τ(ε) = (ε/(C−1)) / ((1 − ε) + ε/(C−1))``.

    Parameters
    ----------
    noise_rate : float in [0, 1)
        The annotator's noise rate ``ε``.
    n_classes : int
        Number of classes ``C``.

    Returns
    -------
    threshold : float in [0, 1)

    Examples
    --------
    >>> from skdbal.noise import bayes_threshold, flip_posterior
    >>> round(bayes_threshold(0.2, n_classes=2), 4)      # 0.2 / (0.8 + 0.2)
    0.2
    >>> tau = bayes_threshold(0.2, n_classes=10)         # (0.2/9) / (0.8 + 0.2/9)
    >>> round(tau, 4)
    0.027
    >>> flip_posterior([tau], 0.2, 10).round(4).tolist()   # at τ a flip is as likely as not
    [0.5]
    """
    rate = _check_rate(noise_rate)
    _check([0.5], n_classes)
    other = rate / (n_classes - 1)
    return float(other / ((1.0 - rate) + other))


def quantile_threshold(p_label, noise_rate: float) -> float:
    """The threshold that distrusts the expected number of wrong labels.

    The fraction ``noise_rate`` of the pool whose labels the model finds least
    likely falls below it: ``τ`` is the ``noise_rate`` quantile of
    ``p_label`` (the smallest value when the rate is 0, so nothing is
    distrusted on a clean pool).

    Parameters
    ----------
    p_label : array-like of shape (n,)
        The model's probability of each label given.
    noise_rate : float in [0, 1)
        The (estimated) noise rate.

    Returns
    -------
    threshold : float

    Examples
    --------
    >>> from skdbal.noise import quantile_threshold
    >>> quantile_threshold([0.9, 0.05, 0.8, 0.3, 0.7], 0.2)   # one label in five distrusted
    0.3
    """
    p = np.asarray(p_label, dtype=np.float64).reshape(-1)
    rate = _check_rate(noise_rate)
    k = int(np.floor(rate * len(p)))
    if k == 0:
        return float(p.min())
    return float(np.sort(p)[k])
