"""Audits: labels bought from a reservoir of the pool only to test the model, and what they estimate.

A reservoir is a uniform share of the pool set aside at the start
(:func:`skdbal.accuracy_monitor.reservoir`): acquisition never draws from it, the model never trains
on it. Every audit draw of a run is then one sequence without replacement over one fixed population,
so the LURE weights of Farquhar, Gal and Rainforth (ICLR 2021) make the audit labels an unbiased
test of any model that did not train on them, the current one included.

- :func:`audit_proposal` and :func:`draw_audit`: which reservoir rows to label next, uniformly or by
  active testing (Kossen, Farquhar, Gal and Rainforth, ICML 2021): more often where the model is
  unsure, so that few labels give a tight estimate; each draw's probability ``q_m`` is returned, for
  :meth:`skdbal.accuracy_monitor.AccuracyMonitor.audit` and
  :func:`skdbal.estimates.estimate_accuracy`.
- :func:`estimate_calibration`: the model's expected calibration error (ECE) on the reservoir from
  the same audit labels, with a bootstrap interval: :class:`CalibrationEstimate`.

Plain functions over arrays: nothing here knows the learner or the loop.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Optional, Union

import numpy as np
from sklearn.utils import check_random_state

from .estimates import lure_weights, plackett_luce_probabilities

__all__ = ["PROPOSALS", "AuditDraw", "audit_proposal", "draw_audit", "CalibrationEstimate", "estimate_calibration"]

#: The audit proposals :func:`draw_audit` knows.
PROPOSALS = ("active", "uniform")


# ---------------------------------------------------------------------------------------------------------------
# argument checks

def _confidences(proba, name: str = "proba") -> np.ndarray:
    """The max-class probability of each row: ``proba`` of shape (N, C), or the confidences (N,) themselves."""
    p = np.asarray(proba, dtype=np.float64)
    if p.ndim not in (1, 2) or not len(p) or (p.ndim == 2 and not p.shape[1]):
        raise ValueError(f"{name} must be class probabilities of shape (N, n_classes) or confidences of shape "
                         f"(N,), N >= 1; got shape {p.shape}")
    if not (np.isfinite(p).all() and (p >= 0).all() and (p <= 1).all()):
        raise ValueError(f"{name} must hold probabilities in [0, 1]")
    return p.max(axis=1) if p.ndim == 2 else p


def _epsilon(epsilon) -> float:
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float, np.integer, np.floating)) \
            or not 0 < epsilon <= 1:
        raise ValueError(f"epsilon must be a number in (0, 1], the uniform share of the proposal that keeps every "
                         f"row's probability above 0; got {epsilon!r}")
    return float(epsilon)


# ---------------------------------------------------------------------------------------------------------------
# the draw

class AuditDraw(NamedTuple):
    """The rows an audit draws, in the order drawn, and the probability each draw had.

    Attributes
    ----------
    rows : ndarray of int, shape (n,)
        Positions in the rows the draw was made from.
    q : ndarray of float, shape (n,)
        ``q_m``, the probability the ``m``-th draw had of picking its row
        among the rows not drawn before it, in ``(0, 1]``.

    Examples
    --------
    >>> from skdbal.audit import draw_audit
    >>> rows, q = draw_audit(4, 2, proposal="uniform", random_state=0)
    >>> q.tolist()                                               # 1/4, then 1/3
    [0.25, 0.3333333333333333]
    """

    rows: np.ndarray
    q: np.ndarray


def audit_proposal(proba, epsilon: float = 0.1) -> np.ndarray:
    """Active testing's proposal: ``(1 - ε) w / Σw + ε / N`` with ``w = 1 - confidence``.

    The model is its own surrogate (Kossen et al., 2021, for accuracy):
    its expected 0/1 loss on a row is one less the probability of its
    predicted class, the least confidence. The uniform share ``ε`` keeps
    every row's probability above 0, as the unbiasedness of the estimate
    needs (a confident row can still be wrong), and bounds its weight.
    When the model is sure of every row (``Σw = 0``) the proposal is uniform.

    Parameters
    ----------
    proba : array-like of shape (N, n_classes) or (N,)
        The model's class probabilities on the rows, or its confidence
        (the max-class probability) on each.
    epsilon : float, default=0.1
        The uniform share, in ``(0, 1]``; 1 gives the uniform proposal.

    Returns
    -------
    ndarray of shape (N,)
        The proposal: positive, summing to 1.

    Raises
    ------
    ValueError
        If ``proba`` is not probabilities of a valid shape or ``epsilon`` is outside ``(0, 1]``.

    Examples
    --------
    Confidences 0.9, 0.6, 0.5 and 1.0: ``w = (0.1, 0.4, 0.5, 0)``, ``Σw = 1``.

    >>> from skdbal.audit import audit_proposal
    >>> audit_proposal([0.9, 0.6, 0.5, 1.0], epsilon=0.2).round(6).tolist()   # 0.8 w + 0.05
    [0.13, 0.37, 0.45, 0.05]
    """
    conf = _confidences(proba)
    epsilon = _epsilon(epsilon)
    w = np.clip(1.0 - conf, 0.0, 1.0)
    total = float(w.sum())
    if total <= 0:
        return np.full(len(w), 1.0 / len(w))
    return (1.0 - epsilon) * w / total + epsilon / len(w)


def draw_audit(proba: Union[int, np.ndarray], n: int, *, proposal: str = "active", epsilon: float = 0.1,
               random_state=None) -> AuditDraw:
    """Draw ``n`` audit rows without replacement, uniformly or by active testing, with each draw's probability.

    - ``proposal="uniform"``: every row left is as likely; the ``m``-th
      draw had ``q_m = 1 / (N - m + 1)``.
    - ``proposal="active"``: a Plackett–Luce draw (Gumbel-top-k) with the
      weights of :func:`audit_proposal`: each next row is picked with
      probability proportional to its weight among the rows left, so rows
      the model is unsure of come first, and
      ``q_m = w'_{i_m} / Σ_{rows left} w'``
      (:func:`~skdbal.estimates.plackett_luce_probabilities`).

    Give it the reservoir rows not audited yet. All audit draws of a run,
    call after call, then form one sequence without replacement over the
    reservoir, and ``q`` is what
    :meth:`~skdbal.accuracy_monitor.AccuracyMonitor.audit` (with
    ``n_reservoir`` the whole reservoir) and
    :func:`~skdbal.estimates.estimate_accuracy` need: the estimate is
    unbiased for the reservoir's accuracy of any model that never trains on
    the audit labels, whichever model made the proposal.

    Parameters
    ----------
    proba : array-like of shape (N, n_classes) or (N,), or int
        The current model's class probabilities on the rows (or its
        confidence on each); for ``proposal="uniform"`` the number of rows
        ``N`` is enough.
    n : int
        Rows to draw, ``1 <= n <= N``.
    proposal : {"active", "uniform"}, default="active"
    epsilon : float, default=0.1
        The active proposal's uniform share, in ``(0, 1]``.
    random_state : int, RandomState or None

    Returns
    -------
    AuditDraw
        ``(rows, q)``: positions in ``proba``, in the order drawn, and each
        draw's probability.

    Raises
    ------
    ValueError
        For an unknown ``proposal``, an int ``proba`` with ``"active"``, bad
        probabilities, ``n`` outside ``[1, N]`` or ``epsilon`` outside ``(0, 1]``.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.audit import draw_audit
    >>> from skdbal.estimates import estimate_accuracy
    >>> rng = np.random.RandomState(0)
    >>> confidence = rng.uniform(0.5, 1.0, size=200)          # the model on 200 reservoir rows
    >>> rows, q = draw_audit(confidence, 20, random_state=0)
    >>> len(rows), len(set(rows.tolist())), bool(((q > 0) & (q <= 1)).all())
    (20, 20, True)

    The unsure rows come first:

    >>> bool(confidence[rows].mean() < confidence.mean())
    True

    Whether the model guessed each audit label right gives the estimate:

    >>> correct = rng.uniform(size=200) < confidence           # as if calibrated
    >>> e = estimate_accuracy(correct[rows], q=q, N=200)
    >>> e.method, bool(e.low <= e.accuracy <= e.high)
    ('lure-kish-wilson', True)
    """
    if proposal not in PROPOSALS:
        raise ValueError(f"proposal must be one of {list(PROPOSALS)}; got {proposal!r}")
    if isinstance(proba, (int, np.integer)) and not isinstance(proba, bool):
        if proposal != "uniform":
            raise ValueError("the active proposal needs the model's probabilities (or confidences) on the rows; "
                             f"got only their number, {proba!r}")
        if proba < 1:
            raise ValueError(f"the number of rows must be >= 1; got {proba!r}")
        N, weights = int(proba), None
    else:
        conf = _confidences(proba)
        N = len(conf)
        weights = audit_proposal(conf, epsilon) if proposal == "active" else None
    if proposal == "uniform":
        _epsilon(epsilon)  # checked the same whatever the proposal
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= N:
        raise ValueError(f"n must be an int in [1, {N}] (the rows to draw, at most the rows there are); got {n!r}")
    n = int(n)
    rng = check_random_state(random_state)
    if weights is None:
        rows = rng.permutation(N)[:n]
        q = 1.0 / (N - np.arange(n, dtype=np.float64))
    else:
        log_w = np.log(weights)
        keys = log_w + rng.gumbel(size=N)
        rows = np.argsort(-keys, kind="stable")[:n]
        q = plackett_luce_probabilities(log_w, rows)
    return AuditDraw(rows.astype(np.intp), q)


# ---------------------------------------------------------------------------------------------------------------
# calibration

@dataclass(frozen=True)
class CalibrationEstimate:
    """The expected calibration error estimated from audit labels, with a bootstrap interval.

    Biased upward with few labels: every bin's accuracy is estimated with
    noise, and ``|Â_b - conf_b|`` turns noise into error, so a perfectly
    calibrated model shows an ECE above 0 until many labels are in.

    Parameters
    ----------
    ece : float
        ``Σ_b P_b |Â_b - conf_b|``, each bin's accuracy clipped to ``[0, 1]``.
    low, high : float
        The percentile bootstrap interval at ``confidence``.
    n_labels : int
        The audit labels behind it.
    bin_mass : ndarray of shape (n_bins,)
        ``P_b``, the share of the reservoir in each bin: exact.
    bin_confidence : ndarray of shape (n_bins,)
        ``conf_b``, the model's mean confidence in each bin: exact.
    bin_accuracy : ndarray of shape (n_bins,)
        ``Â_b``, each bin's LURE accuracy: unbiased, not clipped (it can
        leave ``[0, 1]`` with few labels).
    confidence : float, default=0.95
    note : str
        In words, what the number is and how far to trust it.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.audit import CalibrationEstimate
    >>> e = CalibrationEstimate(0.35, 0.1, 0.6, 2, np.array([.5, .5]), np.array([.55, .85]), np.array([0., 1.]))
    >>> e.ece, e.note.startswith("upper-biased")
    (0.35, True)
    """

    ece: float
    low: float
    high: float
    n_labels: int
    bin_mass: np.ndarray
    bin_confidence: np.ndarray
    bin_accuracy: np.ndarray
    confidence: float = 0.95
    note: str = ("upper-biased with few labels: the expected calibration error on the reservoir, from its audit "
                 "labels")


def _bins(conf: np.ndarray, n_bins: int) -> np.ndarray:
    """Each row's bin: ``n_bins`` groups of (nearly) equal size by confidence, the least confident first."""
    order = np.argsort(conf, kind="stable")
    which = np.empty(len(conf), dtype=np.intp)
    for b, rows in enumerate(np.array_split(order, n_bins)):
        which[rows] = b
    return which


def estimate_calibration(confidence, correct, rows, q=None, *, n_bins: Optional[int] = None,
                         n_boot: int = 2000, level: float = 0.95, random_state=None) -> CalibrationEstimate:
    """The model's expected calibration error (ECE) on the reservoir, from the audit labels and their draw.

    - The reservoir's rows are cut into ``n_bins`` bins of equal mass by the
      model's confidence; each bin's mass ``P_b`` and mean confidence
      ``conf_b`` are known exactly, without a label.
    - Each bin's accuracy is the LURE estimate of the mean of
      ``1{right} 1{row in bin b}`` over the reservoir, divided by ``P_b``:
      ``Â_b = (1/M) Σ_m v_m c_m 1{i_m ∈ b} / P_b``, unbiased whatever the
      proposal (Farquhar et al., 2021).
    - ``ECE = Σ_b P_b |Â_b - conf_b|`` with ``Â_b`` clipped to ``[0, 1]``,
      and a percentile bootstrap interval over the audit labels (each
      resampled with its weight and bin), widened where needed to hold the
      estimate.

    Like any plug-in ECE it is **biased upward with few labels**. Active
    testing draws crowd into the unsure bins; its uniform share still
    reaches the confident ones. Labels bought by a top-k strategy give no
    honest ECE (they are no draw), and the labels must test a model that
    never trained on them.

    Parameters
    ----------
    confidence : array-like of shape (N,)
        The model's confidence (its max-class probability) on every
        reservoir row, audited or not.
    correct : array-like of shape (M,)
        1 (True) where the model guessed the audit label right, in the order drawn.
    rows : array-like of int, shape (M,)
        The audit rows, positions in ``confidence``, in the order drawn; distinct.
    q : array-like of shape (M,), optional
        Each draw's probability among the reservoir rows not audited before
        it (:func:`draw_audit`, call after call); uniform when None.
    n_bins : int, optional
        Bins; 5 until 100 audit labels, then 10 (at most ``N``), by default.
    n_boot : int, default=2000
        Bootstrap resamples.
    level : float, default=0.95
        The interval's confidence, in ``(0, 1)``.
    random_state : int, RandomState or None
        Seeds the bootstrap.

    Returns
    -------
    CalibrationEstimate

    Raises
    ------
    ValueError
        Naming the argument at fault: lengths that differ, rows outside the
        reservoir or repeated, ``correct`` not 0/1, ``q`` outside ``(0, 1]``,
        or bad counts.

    Examples
    --------
    Four reservoir rows; two bins: the two least confident (mean 0.55) and
    the two most (mean 0.85), half the reservoir each. A uniform audit
    labels row 0 (confidence 0.9, right) and row 2 (0.6, wrong): the bins'
    accuracies are 1 and 0, so ``ECE = 0.5 |1 - 0.85| + 0.5 |0 - 0.55| = 0.35``.

    >>> from skdbal.audit import estimate_calibration
    >>> e = estimate_calibration([0.9, 0.8, 0.6, 0.5], [1, 0], [0, 2], n_bins=2, random_state=0)
    >>> round(e.ece, 6), e.bin_mass.tolist(), e.bin_confidence.round(6).tolist(), e.bin_accuracy.tolist()
    (0.35, [0.5, 0.5], [0.55, 0.85], [0.0, 1.0])
    >>> bool(e.low <= e.ece <= e.high), e.note.split(":")[0]
    (True, 'upper-biased with few labels')
    """
    conf = _confidences(confidence, "confidence")
    if np.ndim(confidence) != 1:
        raise ValueError(f"confidence must be one-dimensional (the model's confidence on each reservoir row); "
                         f"got shape {np.shape(confidence)}")
    N = len(conf)
    c = np.asarray(correct)
    if c.ndim != 1 or not len(c):
        raise ValueError(f"correct must be a non-empty one-dimensional array (one entry per audit label); "
                         f"got shape {c.shape}")
    c = c.astype(np.float64)
    if not np.isin(c, (0.0, 1.0)).all():
        raise ValueError("correct must hold 0/1 or True/False (whether each audit label was guessed right)")
    M = len(c)
    idx = np.asarray(rows)
    if idx.shape != (M,) or (M and not np.issubdtype(idx.dtype, np.integer)):
        raise ValueError(f"rows must hold one integer position per audit label ({M}); got {np.asarray(rows)!r}")
    if idx.min() < 0 or idx.max() >= N or len(np.unique(idx)) != M:
        raise ValueError(f"rows must be distinct positions in [0, {N}) of confidence (the draw is without "
                         f"replacement); got {idx.tolist()}")
    if q is None:
        v = np.ones(M)
    else:
        q = np.asarray(q, dtype=np.float64)
        if q.shape != (M,):
            raise ValueError(f"q must hold one probability per audit label ({M}); got shape {q.shape}")
        v = lure_weights(q, N)
    if n_bins is None:
        n_bins = min(N, 5 if M < 100 else 10)
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or not 1 <= n_bins <= N:
        raise ValueError(f"n_bins must be an int in [1, {N}] (at most the reservoir's rows); got {n_bins!r}")
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 1:
        raise ValueError(f"n_boot must be an int >= 1; got {n_boot!r}")
    if isinstance(level, bool) or not isinstance(level, (int, float, np.floating)) or not 0 < level < 1:
        raise ValueError(f"level must be a number in (0, 1), e.g. 0.95; got {level!r}")
    which = _bins(conf, int(n_bins))
    mass = np.bincount(which, minlength=n_bins) / N
    mean_conf = np.bincount(which, weights=conf, minlength=n_bins) / (mass * N)
    drawn_bin = which[idx]
    terms = v * c                                           # v_m c_m: the LURE terms of the labels right

    def accuracy(sample: np.ndarray) -> np.ndarray:         # sample: (..., M) positions among the labels
        sums = np.stack([np.sum(np.where(drawn_bin[sample] == b, terms[sample], 0.0), axis=-1)
                         for b in range(n_bins)], axis=-1)
        return sums / M / mass

    def ece(acc: np.ndarray) -> np.ndarray:
        return np.sum(mass * np.abs(np.clip(acc, 0.0, 1.0) - mean_conf), axis=-1)

    bin_acc = accuracy(np.arange(M))
    value = float(ece(bin_acc))
    rng = check_random_state(random_state)
    boot = ece(accuracy(rng.randint(M, size=(int(n_boot), M))))
    tail = (1.0 - float(level)) / 2
    low, high = np.quantile(boot, [tail, 1.0 - tail])
    return CalibrationEstimate(value, float(min(low, value)), float(max(high, value)), M, mass, mean_conf, bin_acc,
                               float(level))
