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

from typing import NamedTuple, Union

import numpy as np
from sklearn.utils import check_random_state

from .estimates import plackett_luce_probabilities

__all__ = ["PROPOSALS", "AuditDraw", "audit_proposal", "draw_audit"]

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
