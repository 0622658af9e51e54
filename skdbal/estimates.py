"""Accuracy estimates from the labels bought: importance weights, draw probabilities and intervals.

The labels an active learner buys are not a uniform sample of the pool, so their plain mean is a biased
estimate of the model's accuracy. When each label was drawn at random with a known probability (a
stochastic batch, an audit), the estimators of Farquhar, Gal and Rainforth (ICLR 2021) weigh each
loss back to an unbiased estimate of the risk on the population drawn from:

- :func:`lure_weights`, :func:`lure_risk`: the "levelled unbiased risk estimator", R_LURE;
- :func:`pure_risk`: the "plain unbiased risk estimator", R_PURE;
- :func:`plackett_luce_probabilities`: the sequential probability each pick of a Gumbel-top-k draw
  (a Plackett–Luce draw without replacement) had, which is what both estimators need;
- :func:`wilson_interval`, :func:`clopper_pearson_interval`, :func:`effective_sample_size`: binomial
  intervals, the weighted ones through Kish's effective sample size;
- :func:`estimate_accuracy` and :func:`prequential_accuracy`, which return an :class:`AccuracyEstimate`.

Every function here assumes the losses are those of a model that never trained on the labels: a label
is an honest test only of models fitted before it arrived. Plain functions over arrays; nothing here
knows the learner or the strategies.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple, Union

import numpy as np
from scipy import stats

from ._validation import check_positive_int

__all__ = ["lure_weights", "lure_risk", "pure_risk", "plackett_luce_probabilities", "wilson_interval",
           "clopper_pearson_interval", "effective_sample_size", "AccuracyEstimate", "estimate_accuracy",
           "prequential_accuracy"]

#: The estimators :func:`estimate_accuracy` knows, by name.
METHODS = ("lure", "pure")


# ---------------------------------------------------------------------------------------------------------------
# argument checks

def _vector(values, name: str) -> np.ndarray:
    a = np.asarray(values, dtype=np.float64)
    if a.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional; got shape {a.shape}")
    return a


def _check_q(q, *, stacked: bool = False) -> np.ndarray:
    q = np.asarray(q, dtype=np.float64)
    if q.ndim != 1 and not (stacked and q.ndim > 1):
        raise ValueError(f"q must be one-dimensional{' (or stacked runs, draws last)' if stacked else ''}; "
                         f"got shape {q.shape}")
    if not q.shape[-1]:
        raise ValueError("q must hold at least one draw probability")
    bad = ~((q > 0) & (q <= 1))  # NaN fails both
    if bad.any():
        at = np.argwhere(bad)[0]
        raise ValueError(f"q must lie in (0, 1] (the probability each draw had); got {float(q[tuple(at)])!r} at draw "
                         f"{int(at[-1]) + 1}")
    return q


def _check_n(N, n_draws: int) -> int:
    if isinstance(N, bool) or not isinstance(N, (int, np.integer)) or N < n_draws:
        raise ValueError(f"N must be an int >= the number of draws ({n_draws}), the size of the population "
                         f"drawn from; got {N!r}")
    return int(N)


def _check_losses(losses, q: np.ndarray) -> np.ndarray:
    L = np.asarray(losses, dtype=np.float64)
    if L.shape != q.shape:
        raise ValueError(f"losses and q must have the same length (one loss per draw); got shapes {L.shape} "
                         f"and {q.shape}")
    if not np.isfinite(L).all():
        raise ValueError("losses must be finite")
    return L


def _z(confidence) -> float:
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float, np.integer, np.floating)) \
            or not 0 < confidence < 1:
        raise ValueError(f"confidence must be a number in (0, 1), e.g. 0.95; got {confidence!r}")
    return float(stats.norm.ppf(0.5 + confidence / 2))


# ---------------------------------------------------------------------------------------------------------------
# unbiased risk estimators

def _scalar(a: np.ndarray):
    return float(a) if np.ndim(a) == 0 else a


def lure_weights(q, N: int) -> np.ndarray:
    """The LURE weight ``v_m`` of each of ``M`` sequential draws without replacement from ``N`` items.

    ``v_m = 1 + (N - M) / (N - m) * (1 / ((N - m + 1) q_m) - 1)`` for ``m = 1..M``
    (Farquhar, Gal and Rainforth, 2021), and 1 for every draw when ``M = N``.
    A uniform draw, ``q_m = 1 / (N - m + 1)``, has weight exactly 1, so uniform
    and weighted draws mix in one sequence.

    Parameters
    ----------
    q : array-like of shape (M,) or (..., M)
        ``q_m``, the probability the ``m``-th draw had of picking the item it
        picked, among the ``N - m + 1`` items left; in ``(0, 1]``. It may depend
        on everything seen before the draw. Leading axes stack independent runs
        of ``M`` draws each.
    N : int
        The size of the population drawn from, ``>= M``.

    Returns
    -------
    ndarray of the shape of ``q``
        The weights, all positive.

    Raises
    ------
    ValueError
        If ``q`` is empty, not one-dimensional or outside ``(0, 1]``, or ``N < M``.

    Examples
    --------
    Three items, two draws: the first had probability 1/4, the second 2/3 of the two left.

    >>> from skdbal.estimates import lure_weights
    >>> lure_weights([1/4, 2/3], N=3).round(6).tolist()          # 7/6, 3/4
    [1.166667, 0.75]
    >>> lure_weights([1/3, 1/2], N=3).tolist()                   # uniform draws
    [1.0, 1.0]
    """
    q = _check_q(q, stacked=True)
    M = q.shape[-1]
    N = _check_n(N, M)
    if M == N:
        return np.ones(q.shape)
    m = np.arange(1, M + 1, dtype=np.float64)
    return 1.0 + (N - M) / (N - m) * (1.0 / ((N - m + 1) * q) - 1.0)


def lure_risk(losses, q, N: int) -> float:
    """R_LURE, the levelled unbiased estimate of the mean loss over the ``N`` items drawn from.

    ``R_LURE = (1/M) sum_m v_m L_m`` with the weights of :func:`lure_weights`.
    It is unbiased for the mean loss of a *fixed* model over the population,
    whatever the proposal (provided every item that can have a loss kept a
    positive probability), and has a lower variance than :func:`pure_risk`.

    Parameters
    ----------
    losses : array-like of shape (M,) or (..., M)
        The loss of each drawn item, in the order drawn (``1 - correct`` for the
        error rate).
    q : array-like of the shape of ``losses``
        The probability each draw had (see :func:`lure_weights`).
    N : int
        The size of the population drawn from.

    Returns
    -------
    float, or ndarray of shape (...) for stacked runs

    Raises
    ------
    ValueError
        If the lengths differ, a loss is not finite, or ``q`` or ``N`` is bad.

    Examples
    --------
    Of three items, the first is wrong (risk 1/3). Drawn with weights (2, 1, 1),
    items 1 then 0 (q = 1/4, 2/3):

    >>> from skdbal.estimates import lure_risk
    >>> lure_risk([0, 1], [1/4, 2/3], N=3)                       # (0 * 7/6 + 1 * 3/4) / 2
    0.375
    >>> lure_risk([[0, 1], [1, 0]], [[1/4, 2/3], [1/2, 1/2]], N=3).round(6).tolist()   # two runs: 3/8, 5/12
    [0.375, 0.416667]
    """
    q = _check_q(q, stacked=True)
    L = _check_losses(losses, q)
    return _scalar(np.mean(lure_weights(q, N) * L, axis=-1))


def pure_risk(losses, q, N: int) -> float:
    """R_PURE, the plain unbiased estimate of the mean loss over the ``N`` items drawn from.

    ``R_PURE = 1/(N M) sum_m (1/q_m + M - m) L_m``: the mean of the martingale
    terms ``L_m / (N q_m) + (1/N) sum_{t<m} L_t``, each unbiased given the past.

    Parameters
    ----------
    losses : array-like of shape (M,) or (..., M)
        The loss of each drawn item, in the order drawn.
    q : array-like of the shape of ``losses``
        The probability each draw had.
    N : int
        The size of the population drawn from.

    Returns
    -------
    float, or ndarray of shape (...) for stacked runs

    Raises
    ------
    ValueError
        If the lengths differ, a loss is not finite, or ``q`` or ``N`` is bad.

    Examples
    --------
    >>> from skdbal.estimates import pure_risk
    >>> pure_risk([0, 1], [1/4, 2/3], N=3)                       # (5 * 0 + 3/2 * 1) / 6
    0.25
    >>> pure_risk([1, 0], [1/2, 1/2], N=3)                       # (3 * 1 + 2 * 0) / 6
    0.5
    """
    q = _check_q(q, stacked=True)
    L = _check_losses(losses, q)
    M = q.shape[-1]
    N = _check_n(N, M)
    m = np.arange(1, M + 1, dtype=np.float64)
    return _scalar(np.sum((1.0 / q + M - m) * L, axis=-1) / (N * M))


# ---------------------------------------------------------------------------------------------------------------
# draw probabilities

def _logsumexp(a: np.ndarray) -> float:
    if not len(a):
        return -np.inf
    top = float(np.max(a))
    if not np.isfinite(top):
        return top
    return top + float(np.log(np.sum(np.exp(a - top))))


def plackett_luce_probabilities(log_weights, order, *, log: bool = False) -> np.ndarray:
    """The sequential probability ``q_m`` of each pick of a Plackett–Luce draw without replacement.

    A Gumbel-top-k draw (the ``k`` largest of ``log w_i + g_i``, in decreasing
    order) picks each next item with probability proportional to its weight
    among the items not yet picked (Kool, van Hoof and Welling, 2019), so the
    ``m``-th pick ``i_m`` had ``q_m = w_{i_m} / (sum_j w_j - sum_{l<m} w_{i_l})``.
    It is computed stably as ``log q_m = log w_{i_m} - logaddexp(r, t_m)``, with
    ``r`` the log-sum-exp of the items never picked and ``t_m`` that of the picks
    ``i_m..i_k``, never by subtraction (a large inverse temperature puts
    nearly all the mass on the first picks).

    These are the ``q`` of :func:`lure_weights`: the probabilities of the
    draws in their order, not the softmax ``w_i / sum w`` and not the
    probability that an item is in the batch at all.

    Parameters
    ----------
    log_weights : array-like of shape (N,)
        ``log w`` of every candidate the draw could pick (up to a common
        constant); ``-inf`` for a weight of 0. NaN and ``+inf`` are refused.
    order : array-like of int, shape (k,)
        The positions in ``log_weights`` of the picks, in the order drawn;
        distinct.
    log : bool, default=False
        Return ``log q`` instead of ``q``.

    Returns
    -------
    ndarray of shape (k,)
        ``q_m`` (or ``log q_m``). A pick of weight 0 while an item of positive
        weight was left gets 0 (``-inf``): the order is impossible. A pick made
        when every item left had weight 0 gets 1 (``log q = 0``): the draw then
        takes the rest in a fixed order (as
        :func:`skdbal.acquisition.functional.sample_batch` does, by score), so it
        was certain. An item of weight 0 that can be wrong, drawn or not, breaks
        the unbiasedness of :func:`lure_risk` (it had no chance to be drawn):
        look for ``-inf`` in ``log_weights`` before trusting an estimate.

    Raises
    ------
    ValueError
        If ``log_weights`` holds NaN or ``+inf``, or ``order`` repeats a position or
        falls outside ``log_weights``.

    Examples
    --------
    Weights (2, 1, 1), items 1 then 0 picked: 1 of 4, then 2 of the 3 left.

    >>> import numpy as np
    >>> from skdbal.estimates import plackett_luce_probabilities
    >>> plackett_luce_probabilities(np.log([2, 1, 1]), [1, 0]).round(6).tolist()
    [0.25, 0.666667]
    >>> plackett_luce_probabilities(np.log([2, 1, 1]), [1, 0], log=True).round(6).tolist()   # -log 4, log 2/3
    [-1.386294, -0.405465]
    """
    logw = _vector(log_weights, "log_weights")
    if np.isnan(logw).any() or np.isposinf(logw).any():
        raise ValueError("log_weights must not hold NaN or +inf (a weight of 0 is -inf)")
    idx = np.asarray(order)
    if idx.ndim != 1:
        raise ValueError(f"order must be one-dimensional; got shape {idx.shape}")
    if len(idx) and (not np.issubdtype(idx.dtype, np.integer)):
        raise ValueError(f"order must hold integer positions; got dtype {idx.dtype}")
    idx = idx.astype(np.intp)
    if len(idx) and (idx.min() < 0 or idx.max() >= len(logw)):
        raise ValueError(f"order must hold positions in [0, {len(logw)}) of log_weights; got {idx.tolist()}")
    if len(np.unique(idx)) != len(idx):
        raise ValueError(f"order must not repeat a position (the draw is without replacement); got {idx.tolist()}")
    rest = np.ones(len(logw), dtype=bool)
    rest[idx] = False
    r = _logsumexp(logw[rest])
    picked = logw[idx]
    tail = np.logaddexp.accumulate(picked[::-1])[::-1] if len(idx) else picked
    denominator = np.logaddexp(r, tail)
    with np.errstate(invalid="ignore"):
        logq = np.where(np.isneginf(denominator), 0.0, picked - denominator)  # every item left had weight 0
    return logq if log else np.exp(logq)


# ---------------------------------------------------------------------------------------------------------------
# binomial intervals

Number = Union[float, np.ndarray]


def _shown(value) -> str:
    a = np.asarray(value)
    return repr(a.item()) if a.ndim == 0 else repr(a.tolist())


def _proportion(successes_or_p, trials) -> Tuple[np.ndarray, np.ndarray]:
    x = np.asarray(successes_or_p)
    n = np.asarray(trials, dtype=np.float64)
    if np.issubdtype(x.dtype, np.bool_) or not np.issubdtype(x.dtype, np.number):
        raise ValueError(f"successes_or_p must be a count (int) or a proportion (float); got {successes_or_p!r}")
    if not (np.isfinite(n).all() and (n > 0).all()):
        raise ValueError(f"n must be a number > 0 (a count of labels, or an effective one); got {_shown(trials)}")
    if np.issubdtype(x.dtype, np.integer):
        if (x < 0).any() or (x > n).any():
            raise ValueError(f"successes_or_p, an int, counts successes, so it must lie in [0, n]; "
                             f"got {_shown(x)} of n={_shown(trials)}")
        return x / n, n
    p = x.astype(np.float64)
    if not (np.isfinite(p).all() and (p >= 0).all() and (p <= 1).all()):
        raise ValueError(f"successes_or_p, a float, is a proportion, so it must lie in [0, 1] (pass an int for "
                         f"a count); got {_shown(x)}")
    return p, n


def _out(low: np.ndarray, high: np.ndarray) -> Tuple[Number, Number]:
    if np.ndim(low) == 0:
        return float(low), float(high)
    return low, high


def wilson_interval(successes_or_p, n, confidence: float = 0.95) -> Tuple[Number, Number]:
    """Wilson's score interval for a binomial proportion.

    With ``p`` the observed proportion and ``z`` the normal quantile:
    centre ``(p + z²/2n) / (1 + z²/n)``, half-width
    ``z / (1 + z²/n) * sqrt(p(1-p)/n + z²/4n²)``. It keeps a width when no
    failure (or no success) was seen, where the normal approximation has none.

    Parameters
    ----------
    successes_or_p : int, float or array-like
        A count of successes (an int, in ``[0, n]``), or a proportion (a
        float, in ``[0, 1]``): the type decides, so ``1`` is one success and
        ``1.0`` is a proportion of 1.
    n : float or array-like
        The number of trials, ``> 0``; an effective sample size need not be a
        whole number (:func:`effective_sample_size`).
    confidence : float, default=0.95
        In ``(0, 1)``.

    Returns
    -------
    low, high : float or ndarray
        Within ``[0, 1]``; arrays when an argument is one.

    Raises
    ------
    ValueError
        If a count is outside ``[0, n]``, a proportion outside ``[0, 1]``, ``n <= 0``,
        or ``confidence`` outside ``(0, 1)``.

    Examples
    --------
    >>> from skdbal.estimates import wilson_interval
    >>> [round(b, 5) for b in wilson_interval(8, 10)]
    [0.49016, 0.94332]
    >>> [round(b, 5) for b in wilson_interval(10, 10)]            # all right: still a width
    [0.72247, 1.0]
    >>> [round(b, 5) for b in wilson_interval(0.9, 200)]
    [0.85059, 0.93433]
    """
    z = _z(confidence)
    p, n = _proportion(successes_or_p, n)
    d = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / d
    half = z / d * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    low = np.where(p == 0, 0.0, np.clip(centre - half, 0.0, 1.0))   # exact ends where round-off would miss them
    high = np.where(p == 1, 1.0, np.clip(centre + half, 0.0, 1.0))
    return _out(low, high)


def clopper_pearson_interval(successes, n, confidence: float = 0.95) -> Tuple[Number, Number]:
    """The Clopper–Pearson ("exact") interval for a binomial proportion: the conservative reference.

    ``[B⁻¹(α/2; x, n-x+1), B⁻¹(1-α/2; x+1, n-x)]`` with ``B⁻¹`` the beta
    quantile and ``α = 1 - confidence``; 0 when ``x = 0``, 1 when ``x = n``.

    Parameters
    ----------
    successes : float or array-like
        The count ``x``, in ``[0, n]``. A non-whole count with an effective
        ``n`` (``x = p * n_eff``) gives the effective-n variant.
    n : float or array-like
        The number of trials, ``> 0``.
    confidence : float, default=0.95
        In ``(0, 1)``.

    Returns
    -------
    low, high : float or ndarray

    Raises
    ------
    ValueError
        If ``successes`` is outside ``[0, n]``, ``n <= 0``, or ``confidence`` outside ``(0, 1)``.

    Examples
    --------
    >>> from skdbal.estimates import clopper_pearson_interval
    >>> [round(b, 5) for b in clopper_pearson_interval(8, 10)]
    [0.4439, 0.97479]
    >>> [round(b, 5) for b in clopper_pearson_interval(10, 10)]
    [0.6915, 1.0]
    """
    _z(confidence)  # checks it
    alpha = 1.0 - float(confidence)
    x = np.asarray(successes, dtype=np.float64)
    trials = n
    n = np.asarray(trials, dtype=np.float64)
    if not (np.isfinite(n).all() and (n > 0).all()):
        raise ValueError(f"n must be a number > 0; got {_shown(trials)}")
    if not (np.isfinite(x).all() and (x >= 0).all() and (x <= n).all()):
        raise ValueError(f"successes must be a count in [0, n]; got {_shown(successes)} of n={_shown(trials)}")
    with np.errstate(invalid="ignore", divide="ignore"):
        low = np.where(x == 0, 0.0, stats.beta.ppf(alpha / 2, np.maximum(x, 1e-300), n - x + 1))
        high = np.where(x == n, 1.0, stats.beta.ppf(1 - alpha / 2, x + 1, np.maximum(n - x, 1e-300)))
    return _out(low, high)


def effective_sample_size(weights) -> float:
    """Kish's effective sample size of a weighted mean, ``(sum w)² / sum w²``.

    Equal weights give the number of weights; unequal ones fewer.

    Parameters
    ----------
    weights : array-like of shape (M,)
        Finite, ``>= 0``, not all 0.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If a weight is negative or not finite, or all are 0.

    Examples
    --------
    >>> from skdbal.estimates import effective_sample_size
    >>> effective_sample_size([1, 1, 1, 1])
    4.0
    >>> round(effective_sample_size([7/6, 3/4]), 5)               # (23/12)² / (49/36 + 9/16)
    1.90975
    """
    w = _vector(weights, "weights")
    if not len(w) or not np.isfinite(w).all() or (w < 0).any() or not (w > 0).any():
        raise ValueError("weights must be finite, >= 0 and not all 0")
    return float(np.sum(w) ** 2 / np.sum(w * w))


# ---------------------------------------------------------------------------------------------------------------
# accuracy estimates

@dataclass(frozen=True)
class AccuracyEstimate:
    """An accuracy estimate with its interval, and what it is an estimate of.

    Parameters
    ----------
    accuracy : float
        The point estimate, in ``[0, 1]``.
    low, high : float
        The interval's ends at ``confidence``. For a ``biased`` estimate it is
        an interval on the items asked about only, not on the population.
    n_labels : int
        The labels it was computed from.
    method : str
        How: ``"wilson"`` (uniform draws), ``"lure-kish-wilson"`` or
        ``"pure-kish-wilson"`` (weighted draws), ``"prequential-biased"``
        (top-k acquisition, no unbiased estimate exists).
    biased : bool
        True when nothing makes the estimate unbiased for ``population``.
    population : str
        In words, the items whose accuracy it estimates.
    confidence : float, default=0.95
    n_effective : float, default=nan
        Kish's effective number of labels behind the interval (``n_labels``
        for uniform draws).

    Examples
    --------
    >>> from skdbal.estimates import AccuracyEstimate
    >>> e = AccuracyEstimate(0.8, 0.49016, 0.94332, 10, "wilson", False, "the pool")
    >>> e.high - e.low > 0.4
    True
    """

    accuracy: float
    low: float
    high: float
    n_labels: int
    method: str
    biased: bool
    population: str
    confidence: float = 0.95
    n_effective: float = float("nan")


def _correct(values, name: str) -> np.ndarray:
    c = np.asarray(values)
    if c.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional; got shape {c.shape}")
    c = c.astype(np.float64)
    if not np.isin(c, (0.0, 1.0)).all():
        raise ValueError(f"{name} must hold 0/1 or True/False (whether each label was guessed right)")
    return c


def estimate_accuracy(correct, q=None, N: Optional[int] = None, confidence: float = 0.95, method: str = "lure", *,
                      population: Optional[str] = None) -> AccuracyEstimate:
    """Accuracy from held-out labels drawn uniformly or with known probabilities, with an interval.

    - ``q`` None: the labels are a uniform draw; the estimate is their mean
      with Wilson's interval (``method`` plays no part).
    - ``q`` given: ``1 - R`` with ``R`` the LURE (or PURE) risk over the ``N``
      items drawn from, and the Kish–Wilson interval: Wilson's interval at the
      estimate, clipped to ``[0, 1]``, with ``n`` the Kish effective size of the
      estimator's coefficients on the losses (``v_m / M`` for LURE), at least 1.
      Uniform ``q`` gives exactly the mean and Wilson's interval.

    The labels must test a model that never trained on them (one fitted
    before they arrived); the model's accuracy on its own training labels is
    no estimate.

    Parameters
    ----------
    correct : array-like of shape (M,)
        1 (True) where the model guessed the label right, in the order drawn.
    q : array-like of shape (M,), optional
        The probability each draw had (:func:`plackett_luce_probabilities`).
    N : int, optional
        The size of the population drawn from; needed with ``q``.
    confidence : float, default=0.95
    method : {"lure", "pure"}, default="lure"
    population : str, optional
        The population in words, for the result; a default says what it is.

    Returns
    -------
    AccuracyEstimate

    Raises
    ------
    ValueError
        For an empty or non-0/1 ``correct``, ``q`` without ``N``, lengths that
        differ, ``q`` outside ``(0, 1]``, ``N`` under the number of labels, a
        ``confidence`` outside ``(0, 1)``, or an unknown ``method``.

    Examples
    --------
    Eight of ten uniform labels right:

    >>> from skdbal.estimates import estimate_accuracy
    >>> e = estimate_accuracy([1, 1, 1, 1, 1, 1, 1, 1, 0, 0])
    >>> e.accuracy, round(e.low, 5), round(e.high, 5), e.method, e.biased
    (0.8, 0.49016, 0.94332, 'wilson', False)

    Two draws from three items with weights (2, 1, 1): item 1 (right, q = 1/4),
    then item 0 (wrong, q = 2/3). LURE risk 3/8, so accuracy 5/8, with an effective
    1.91 labels behind the interval:

    >>> e = estimate_accuracy([1, 0], q=[1/4, 2/3], N=3)
    >>> e.accuracy, round(e.n_effective, 5), e.method
    (0.625, 1.90975, 'lure-kish-wilson')
    """
    c = _correct(correct, "correct")
    if not len(c):
        raise ValueError("correct must hold at least one label")
    _z(confidence)  # checks it before any work
    if method not in METHODS:
        raise ValueError(f"method must be one of {list(METHODS)}; got {method!r}")
    M = len(c)
    if q is None:
        if N is not None:
            _check_n(N, M)
        acc = float(c.mean())
        low, high = wilson_interval(acc, float(M), confidence)
        where = population or (f"the {N} items the labels were drawn from uniformly" if N is not None
                               else "the items the labels were drawn from uniformly")
        return AccuracyEstimate(acc, float(low), float(high), M, "wilson", False, where, float(confidence),
                                float(M))
    if N is None:
        raise ValueError("N, the size of the population drawn from, is needed with q")
    q = _check_q(q)
    if len(q) != M:
        raise ValueError(f"correct and q must have the same length (one per label); got {M} and {len(q)}")
    N = _check_n(N, M)
    losses = 1.0 - c
    if method == "lure":
        coef = lure_weights(q, N) / M
    else:
        m = np.arange(1, M + 1, dtype=np.float64)
        coef = (1.0 / q + M - m) / (N * M)
    risk = float(np.sum(coef * losses))
    acc = float(np.clip(1.0 - risk, 0.0, 1.0))
    n_eff = max(1.0, effective_sample_size(coef))
    low, high = wilson_interval(acc, n_eff, confidence)
    where = population or f"the {N} items the labels were drawn from"
    return AccuracyEstimate(acc, float(low), float(high), M, f"{method}-kish-wilson", False, where,
                            float(confidence), n_eff)


def prequential_accuracy(correct_per_batch: Sequence, window: int = 3, confidence: float = 0.95) -> AccuracyEstimate:
    """The share of the last ``window`` batches that the model of their time guessed right: biased.

    For top-k acquisition no unbiased estimate exists (items outside the top
    k had no chance of being drawn). Each batch is judged by the model before
    it retrained on that batch, and the last ``window`` batches are pooled,
    since one batch of ten swings widely. The items a strategy asks about are
    its hardest, so the estimate is usually low for the pool; its interval is
    one on those items only, and the result says ``biased=True``.

    Parameters
    ----------
    correct_per_batch : sequence of array-like
        Per batch, oldest first, 1 (True) where the model of its time guessed
        the label right.
    window : int, default=3
        How many of the last batches to pool, ``>= 1``.
    confidence : float, default=0.95

    Returns
    -------
    AccuracyEstimate
        With ``method="prequential-biased"`` and ``biased=True``.

    Raises
    ------
    ValueError
        If the window's batches hold no label, a batch is not 0/1, ``window`` is
        not an int ``>= 1``, or ``confidence`` is outside ``(0, 1)``.

    Examples
    --------
    >>> from skdbal.estimates import prequential_accuracy
    >>> batches = [[0, 0, 0], [1, 1, 0], [1, 1, 1], [1, 0, 1]]
    >>> e = prequential_accuracy(batches, window=3)            # the last three: 7 of 9
    >>> round(e.accuracy, 4), e.n_labels, e.biased, e.method
    (0.7778, 9, True, 'prequential-biased')
    """
    window = check_positive_int(window, "window")
    _z(confidence)
    batches = list(correct_per_batch)
    pooled = [_correct(b, f"correct_per_batch[{i}]") for i, b in enumerate(batches)][-window:]
    c = np.concatenate(pooled) if pooled else np.zeros(0)
    if not len(c):
        raise ValueError(f"correct_per_batch holds no label in its last {window} batches")
    acc = float(c.mean())
    low, high = wilson_interval(acc, float(len(c)), confidence)
    return AccuracyEstimate(acc, float(low), float(high), len(c), "prequential-biased", True,
                            f"the {len(c)} items the strategy asked about in its last {len(pooled)} batches "
                            f"(its hardest cases; on the whole pool the accuracy is likely higher)",
                            float(confidence), float(len(c)))
