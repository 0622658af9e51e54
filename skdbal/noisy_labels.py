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

The per-label decision weighs a wrong label against losing the point, but a
skipped point is not lost: it stays in the pool, and the batch takes the next
point of the ranking instead. ``batch_threshold`` makes the Bayes decision
for the batch: it counts a label's worth as the strategy's score above the
pool's lowest, ``s − min s``, gained when the label is right and lost when it
is wrong, so a point is worth ``(s − min s)·(1 − 2r)`` in expectation, and it
chooses the ``τ`` whose batch (the best ``n`` trusted points of the ranking)
is worth the most. With no noise (``r = 0``) it is ``τ = 0``; with one point
to choose and no alternative it is the per-label decision.

Examples
--------
>>> from skdbal.noisy_labels import bayes_threshold
>>> round(bayes_threshold(0.2, n_classes=10), 4)   # 20% symmetric noise, 10 classes
0.027
>>> bayes_threshold(0.0, n_classes=10)             # a clean annotator is always trusted
0.0
"""
from __future__ import annotations

import numpy as np

__all__ = ["flip_posterior", "estimate_noise_rate", "bayes_threshold", "quantile_threshold", "batch_threshold",
           "trust_threshold", "calibration_ratio"]


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
    >>> from skdbal.noisy_labels import flip_posterior
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
    >>> from skdbal.noisy_labels import estimate_noise_rate
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
    >>> from skdbal.noisy_labels import bayes_threshold, flip_posterior
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
    >>> from skdbal.noisy_labels import quantile_threshold
    >>> quantile_threshold([0.9, 0.05, 0.8, 0.3, 0.7], 0.2)   # one label in five distrusted
    0.3
    """
    p = np.asarray(p_label, dtype=np.float64).reshape(-1)
    rate = _check_rate(noise_rate)
    k = int(np.floor(rate * len(p)))
    if k == 0:
        return float(p.min())
    return float(np.sort(p)[k])


def calibration_ratio(agree, confidence, noise_rate: float, n_classes: int) -> float:
    """How many times more often the model's guesses disagreed with the labels than its probabilities said.

    A model whose guess ``ŷ`` has probability ``c = p̄(y = ŷ | x)``, if it is
    calibrated, guesses the true label with probability ``c``; an annotator
    of symmetric noise rate ``ε`` then gives its guess with probability
    ``ĝ = (1 − ε)·c + ε·(1 − c)/(C − 1)``. Over labels the model had not seen,
    the ratio of the disagreements observed to those expected,
    ``κ = (1 − mean(agree)) / (1 − mean(ĝ))``, is at least 1 for a model that
    errs more often than it says (overconfident), and is returned as 1 for a
    model that errs as often or less (calibrated or underconfident).

    Parameters
    ----------
    agree : array-like of bool, shape (n,)
        Whether the model's guess was the label given.
    confidence : array-like of shape (n,)
        The model's probability of its guess, ``p̄(y = ŷ | x)``.
    noise_rate : float in [0, 1)
        The annotators' noise rate ``ε``.
    n_classes : int
        Number of classes ``C``.

    Returns
    -------
    kappa : float >= 1
        ``inf`` when the model was sure of every guess (``c = 1``) and one
        disagreed.

    Examples
    --------
    >>> from skdbal.noisy_labels import calibration_ratio
    >>> # 10 guesses at confidence 0.95, half of them confirmed, no noise: (1 - 0.5) / (1 - 0.95)
    >>> round(calibration_ratio([True] * 5 + [False] * 5, [0.95] * 10, 0.0, 10), 6)
    10.0
    >>> calibration_ratio([True] * 5 + [False] * 5, [0.5] * 10, 0.0, 10)   # as often as it said
    1.0
    """
    a = np.asarray(agree, dtype=bool).reshape(-1)
    c = _check(confidence, n_classes)
    if len(a) != len(c):
        raise ValueError(f"agree and confidence differ in length: {len(a)} and {len(c)}")
    rate = _check_rate(noise_rate)
    expected = (1.0 - rate) * c + rate * (1.0 - c) / (n_classes - 1)
    missed, allowed = 1.0 - a.mean(), 1.0 - expected.mean()
    if missed <= allowed:
        return 1.0
    return float(missed / allowed) if allowed > 0 else float("inf")


def trust_threshold(p_label, n_classes: int, rule="dynamic"):
    """The trust threshold ``τ`` of one rule, and the noise rate it estimated.

    The rules of the noise filter that need only the model's probability
    of each label given (not the strategy's scores, as ``"batch"`` does):

    - a float in (0, 1): ``τ`` itself;
    - ``"dynamic"``: ``bayes_threshold(ε̂, C)``, with ``ε̂`` estimated by EM
      (:func:`estimate_noise_rate`);
    - ``"quantile"``: ``quantile_threshold(p_label, ε̂)``;
    - a callable: ``rule(p_label, n_classes)``, which must return a value
      in [0, 1].

    A label is distrusted when ``p_label < τ``.

    Parameters
    ----------
    p_label : array-like of shape (n,)
        The model's probability of each label given, ``p̄(y = ỹ | x)``.
    n_classes : int
        Number of classes ``C``.
    rule : float, "dynamic", "quantile" or callable, default="dynamic"

    Returns
    -------
    threshold : float
    noise_rate : float or None
        ``ε̂`` for the two rules that estimate it, else None.

    Examples
    --------
    >>> from skdbal.noisy_labels import trust_threshold
    >>> p = [0.9, 0.95, 0.85, 0.9, 0.001]         # one label the model finds very unlikely
    >>> tau, rate = trust_threshold(p, 10, "dynamic")
    >>> round(rate, 3), round(tau, 4), [x < tau for x in p]
    (0.195, 0.0263, [False, False, False, False, True])
    >>> trust_threshold(p, 10, 0.5)
    (0.5, None)
    """
    if isinstance(rule, str):
        if rule not in ("dynamic", "quantile"):
            raise ValueError(f"rule must be a float in (0, 1), 'dynamic', 'quantile' or a callable; got {rule!r}")
        p = _check(p_label, n_classes)
        rate = estimate_noise_rate(p, n_classes)
        tau = bayes_threshold(rate, n_classes) if rule == "dynamic" else quantile_threshold(p, rate)
        return float(tau), float(rate)
    if callable(rule):
        tau = float(rule(p_label, n_classes))
        if not 0 <= tau <= 1:
            raise ValueError(f"the threshold callable returned {tau}; it must lie in [0, 1]")
        return tau, None
    if isinstance(rule, bool) or not isinstance(rule, (int, float, np.integer, np.floating)) or not 0 < rule < 1:
        raise ValueError(f"rule must be a float in (0, 1), 'dynamic', 'quantile' or a callable; got {rule!r}")
    return float(rule), None


def batch_threshold(scores, p_label, noise_rate: float, n_classes: int, n_instances: int, *,
                    order=None) -> float:
    """The trust threshold whose batch is worth the most in expectation.

    A filtered batch is the first ``n_instances`` points of the strategy's
    ranking whose label probability is at least ``τ``. Each point is worth
    ``v = (s − min s)·(1 − 2r)``: its score above the pool's lowest, gained
    when its label is right and lost when it is wrong (``r`` is
    :func:`flip_posterior`). Raising ``τ`` swaps suspect points for the next
    ones of the ranking; ``batch_threshold`` returns the ``τ`` of the batch
    with the largest ``Σ v``, the smallest such ``τ`` on ties.

    Parameters
    ----------
    scores : array-like of shape (n,)
        The strategy's scores of the pool, higher is better.
    p_label : array-like of shape (n,)
        The model's probability of each label given, ``p̄(y = ỹ | x)``.
    noise_rate : float in [0, 1)
        The (estimated) noise rate ``ε``.
    n_classes : int
        Number of classes ``C``.
    n_instances : int
        Batch size ``n``.
    order : array-like of int, optional
        The ranking, best first (ties already broken); ``argsort(-scores)``
        (stable) by default.

    Returns
    -------
    threshold : float
        ``0.0`` when no point is worth skipping; otherwise just above the
        label probability of the last point skipped, so that
        ``p_label >= threshold`` is the trusted set.

    Notes
    -----
    The sweep raises ``τ`` past the least likely label of the current batch
    until fewer than ``n`` points are trusted, and stops early once the best
    batch left, counted without noise, cannot beat the best found: at most
    ``n − 1`` + (points skipped) steps of ``O(n_pool)``.

    Examples
    --------
    >>> from skdbal.noisy_labels import batch_threshold
    >>> s = [1.0, 0.9, 0.5, 0.0]        # the strategy's scores
    >>> p = [0.05, 0.9, 0.9, 0.9]       # the best point's label looks wrong
    >>> # 20% noise, 10 classes: r = 0.345 for the first point, so it is worth
    >>> # 1.0·(1 − 0.69) = 0.31, less than the 0.5 of the point that replaces it
    >>> tau = batch_threshold(s, p, 0.2, n_classes=10, n_instances=2)
    >>> round(tau, 4), [pi >= tau for pi in p]
    (0.05, [False, True, True, True])
    >>> batch_threshold(s, p, 0.0, n_classes=10, n_instances=2)   # clean labels: trust all
    0.0
    """
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    p = _check(p_label, n_classes)
    if len(s) != len(p):
        raise ValueError(f"scores and p_label differ in length: {len(s)} and {len(p)}")
    if not np.isfinite(s).all():
        raise ValueError("scores must be finite")
    n = int(n_instances)
    if n < 1 or n > len(p):
        raise ValueError(f"n_instances must lie in [1, {len(p)}]; got {n_instances!r}")
    order = np.argsort(-s, kind="stable") if order is None else np.asarray(order, dtype=np.intp).reshape(-1)
    if len(order) != len(s) or not np.array_equal(np.sort(order), np.arange(len(s))):
        raise ValueError("order must be a permutation of the pool's indices")
    gain = s[order] - s.min()
    r = flip_posterior(p[order], noise_rate, n_classes)
    value = gain * (1.0 - 2.0 * r)
    p_ord = p[order]
    tau, best_tau, best = 0.0, 0.0, -np.inf
    while True:
        picks = np.flatnonzero(p_ord >= tau)[:n]
        if len(picks) < n:
            break
        worth = value[picks].sum()
        if worth > best:
            best, best_tau = worth, tau
        if gain[picks].sum() <= best:  # no later batch can be worth more
            break
        tau = float(np.nextafter(p_ord[picks].min(), np.inf))
    return float(best_tau)
