"""The numeric kernels of :mod:`skdbal.stopping`: Cohen's κ, the expected accuracy gain, parameter checks.

Public through :mod:`skdbal.stopping` (:func:`~skdbal.stopping.cohens_kappa`,
:func:`~skdbal.stopping.expected_accuracy_gain`); kept apart so that the
rules' module stays readable.
"""
from __future__ import annotations

from numbers import Integral, Real
from typing import Optional, Sequence

import numpy as np

from ._validation import check_positive_int
from .uncertainty import check_samples, entropy

__all__ = ["cohens_kappa", "expected_accuracy_gain"]

#: Elements of the ``(n, M, C, C)`` joint held at once by :func:`expected_accuracy_gain` (32 MB in float64).
_JOINT_BUDGET = 2 ** 22

def cohens_kappa(a, b) -> float:
    """Cohen's κ between two label arrays: their agreement beyond chance.

    ``κ = (p_o − p_e) / (1 − p_e)``, where ``p_o`` is the share of positions
    where ``a`` and ``b`` agree and ``p_e = Σ_c p_a(c) p_b(c)`` the agreement
    expected from their label frequencies alone. Two equal arrays give 1.0,
    also when both hold one class only (where the formula is 0/0), as
    small-text's ``KappaAverage`` does.

    Parameters
    ----------
    a, b : array-like of shape (n,)
        Labels of any kind (ints, strings), position by position.

    Returns
    -------
    kappa : float
        In [−1, 1].

    Examples
    --------
    >>> from skdbal.stopping import cohens_kappa
    >>> a = [0, 0, 1, 1, 2, 2, 0, 1, 2, 0]
    >>> b = [0, 0, 1, 1, 2, 2, 0, 1, 2, 1]                  # the last one changed
    >>> round(cohens_kappa(a, b), 6)                        # (0.9 - 0.33) / (1 - 0.33) = 57/67
    0.850746
    >>> cohens_kappa([0, 1], [1, 0]), cohens_kappa([2, 2], [2, 2])
    (-1.0, 1.0)
    """
    a, b = np.asarray(a).reshape(-1), np.asarray(b).reshape(-1)
    if len(a) != len(b) or not len(a):
        raise ValueError(f"a and b must be non-empty and of one length; got {len(a)} and {len(b)}")
    if np.array_equal(a, b):
        return 1.0
    _, codes = np.unique(np.concatenate([a, b]), return_inverse=True)
    codes = codes.reshape(-1)
    n, k = len(a), int(codes.max()) + 1
    p_o = float(np.mean(codes[:n] == codes[n:]))
    p_e = float(np.dot(np.bincount(codes[:n], minlength=k), np.bincount(codes[n:], minlength=k))) / n ** 2
    return (p_o - p_e) / (1.0 - p_e)  # p_e < 1 here: p_e = 1 needs both arrays to be one same class


def expected_accuracy_gain(probs_pool, probs_target, *, chunk_size: Optional[int] = None) -> np.ndarray:
    """The expected accuracy gain (EAG) on the targets from labelling each pool point.

    EPIG's joint predictive with ``max`` in place of ``log``: with passes
    ``θ_t`` drawn consistently for the pool and the targets,
    ``p(y, y*) = (1/T) Σ_t p(y | x, θ_t) p(y* | x*, θ_t)``. After seeing the
    label ``y`` of ``x``, the best guess at ``x*`` is right with probability
    ``max_c p(y* = c | y)``; averaged over ``y ~ p(y)`` that is
    ``Σ_y max_c p(y, y* = c)``. Hence

    ``EAG(x) = (1/M) Σ_m [Σ_y max_c p(y, y*_m = c) − max_c p(y*_m = c)] ≥ 0``,

    the rise in expected accuracy over the targets, in accuracy units, as
    the model's own posterior sees it (no retraining is simulated).

    Parameters
    ----------
    probs_pool : array-like of shape (T, N, C)
        Predictive samples on the pool points.
    probs_target : array-like of shape (T, M, C)
        Predictive samples on the target inputs, from the same ``T`` passes.
    chunk_size : int, optional
        Pool points per chunk; by default as many as keep the ``(n, M, C, C)``
        joint within 2**22 elements.

    Returns
    -------
    gain : ndarray of shape (N,)

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.stopping import expected_accuracy_gain
    >>> P = np.array([[[0.9, 0.1]], [[0.2, 0.8]]])          # (T=2, N=1, C=2)
    >>> Q = np.array([[[0.8, 0.2]], [[0.3, 0.7]]])          # (T=2, M=1, C=2)
    >>> expected_accuracy_gain(P, Q).round(6).tolist()      # joint [[.39, .16], [.16, .29]]: .39 + .29 - .55
    [0.13]
    """
    P = check_samples(probs_pool, name="probs_pool")
    Q = check_samples(probs_target, name="probs_target")
    if P.shape[0] != Q.shape[0] or P.shape[2] != Q.shape[2]:
        raise ValueError(f"probs_pool and probs_target must come from the same passes and classes (T, ., C); "
                         f"got shapes {P.shape} and {Q.shape}")
    T, N, C = P.shape
    M = Q.shape[1]
    if chunk_size is None:
        chunk_size = max(1, _JOINT_BUDGET // (M * C * C))
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    base = Q.mean(axis=0).max(axis=-1)                     # (M,): the best guess's accuracy before the label
    Q2 = Q.reshape(T, M * C)
    gain = np.empty(N)
    for start in range(0, N, chunk_size):
        Pc = P[:, start:start + chunk_size]
        n = Pc.shape[1]
        joint = (Pc.transpose(1, 2, 0).reshape(n * C, T) @ Q2).reshape(n, C, M, C) / T  # [point, y, target, y*]
        after = joint.max(axis=3).sum(axis=1)              # (n, M): Σ_y max_c p(y, y* = c)
        gain[start:start + n] = np.maximum(after - base, 0.0).mean(axis=1)  # rounding may leave -1e-17
    return gain


def _uncertainty(proba: np.ndarray, measure: str) -> np.ndarray:
    """Per-row uncertainty of class probabilities (N, C): entropy / log C, or 1 − max p."""
    if measure == "least_confidence":
        return 1.0 - proba.max(axis=1)
    C = proba.shape[1]
    return entropy(proba, axis=1) / np.log(C) if C > 1 else np.zeros(len(proba))


def _probabilities(value, name: str) -> Optional[np.ndarray]:
    if value is None:
        return None
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"{name} must have shape (n_rows, n_classes); got shape {arr.shape}")
    return check_samples(arr[None], name=name)[0]


def _count(value, name: str, *, low: int, allow_none: bool = False) -> Optional[int]:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, Integral) or value < low:
        raise ValueError(f"{name} must be {'None or ' if allow_none else ''}an int >= {low}; got {value!r}")
    return int(value)


def _check_number(value, name: str, *, low: float = -np.inf, high: float = np.inf, low_open: bool = False) -> float:
    x = float(value) if isinstance(value, Real) and not isinstance(value, bool) else float("nan")
    if not (np.isfinite(x) and x <= high and (x > low if low_open else x >= low)):
        bounds = f"{'>' if low_open else '>='} {low:g}" + (f" and <= {high:g}" if np.isfinite(high) else "")
        raise ValueError(f"{name} must be a finite number {bounds}; got {value!r}")
    return x


def _check_choice(value, name: str, choices: Sequence[str]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}; got {value!r}")
    return value


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def _next_batch_gain(view, rule: str, n_candidates: int, n_targets: int) -> float:
    """The next batch's expected accuracy gain: the view's own, or the top-k sum of EAG on the stop set."""
    if view.expected_gain is not None:
        return view.expected_gain
    if view.stop_samples is None:
        raise ValueError(f"{rule} needs the view's stop_samples or expected_gain; the step gave neither")
    S = view.stop_samples
    gain = expected_accuracy_gain(S[:, :n_candidates], S[:, :n_targets])
    k = min(view.batch_size, len(gain))
    return float(np.sort(gain)[::-1][:k].sum())
