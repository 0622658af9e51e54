"""Diverse batches: normalised scores and the greedy cosine-penalised selection.

Plain NumPy functions over arrays, used by
:func:`skdbal.acquisition.diversity_penalty`. A batch is built greedily: the
first pick has the best score, and each next pick maximises

``value(i) = s(i) − w · max_{j picked} cos(x_i, x_j)``

with ``s`` the strategy's scores normalised to [0, 1] over the pool
(:func:`normalize_scores`), so that the weight ``w`` means the same for
BALD, entropy or variance scores: ``w = 0.1`` trades a tenth of the range
between the pool's least and most informative points for a cosine
similarity of 1 with a point already in the batch. A negative ``w`` prefers
points similar to those picked (uniform batches).

Examples
--------
>>> import numpy as np
>>> from skdbal.diversity import greedy_cosine_batch
>>> scores = np.array([1.0, 0.95, 0.5])
>>> X = np.array([[1.0, 0.0], [1.0, 0.01], [0.0, 1.0]])   # point 1 is a copy of point 0
>>> greedy_cosine_batch(scores, X, 2, weight=0.0)[0].tolist()   # top-k
[0, 1]
>>> greedy_cosine_batch(scores, X, 2, weight=0.6)[0].tolist()   # 0.95 - 0.6·1.0 < 0.5 - 0.6·0.0
[0, 2]
"""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

__all__ = ["normalize_scores", "unit_rows", "greedy_cosine_batch", "candidate_bound"]


def normalize_scores(scores, reference=None) -> np.ndarray:
    """Scores mapped to [0, 1] by the range of ``reference`` (``scores`` by default).

    ``(s − min) / (max − min)``; all zeros when the range is empty.

    Parameters
    ----------
    scores : array-like of shape (n,)
    reference : array-like, optional
        The scores whose minimum and maximum set the scale (the whole pool).

    Returns
    -------
    ndarray of shape (n,)

    Examples
    --------
    >>> from skdbal.diversity import normalize_scores
    >>> normalize_scores([0.0, 2.0, 1.0]).tolist()
    [0.0, 1.0, 0.5]
    >>> normalize_scores([3.0, 3.0]).tolist()
    [0.0, 0.0]
    """
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    ref = s if reference is None else np.asarray(reference, dtype=np.float64).reshape(-1)
    if not (np.isfinite(s).all() and np.isfinite(ref).all()):
        raise ValueError("scores must be finite")
    if len(ref) == 0:
        return np.zeros_like(s)
    lo, hi = ref.min(), ref.max()
    if hi <= lo:
        return np.zeros_like(s)
    return (s - lo) / (hi - lo)


def unit_rows(features) -> np.ndarray:
    """Rows scaled to unit Euclidean norm (zero rows stay zero: cosine 0 with all).

    Examples
    --------
    >>> from skdbal.diversity import unit_rows
    >>> unit_rows([[3.0, 4.0], [0.0, 0.0]]).tolist()
    [[0.6, 0.8], [0.0, 0.0]]
    """
    F = np.asarray(features, dtype=np.float64)
    F = F.reshape(len(F), -1)
    norms = np.linalg.norm(F, axis=1, keepdims=True)
    return np.divide(F, norms, out=np.zeros_like(F), where=norms > 0)


def candidate_bound(normalized, n_instances: int, weight: float) -> float:
    """The lowest normalised score that can still enter a batch of ``n_instances``.

    Every greedy step can reach at least ``s₍ₙ₎ − |w|`` (one of the ``n``
    best points is still free, and a cosine is at most 1), and a point is
    worth at most ``s + |w|``: points below ``s₍ₙ₎ − 2|w|`` can never be
    picked. Pruning them leaves the batch exactly as it would be.

    Examples
    --------
    >>> from skdbal.diversity import candidate_bound
    >>> round(candidate_bound([1.0, 0.9, 0.8, 0.1], 2, 0.05), 6)    # 0.9 - 2·0.05
    0.8
    """
    s = np.sort(np.asarray(normalized, dtype=np.float64))[::-1]
    return float(s[min(int(n_instances), len(s)) - 1] - 2 * abs(float(weight)))


def greedy_cosine_batch(scores, features, n_instances: int, weight: float = 0.1, *,
                        unit: bool = False) -> Tuple[np.ndarray, np.ndarray]:
    """Greedy batch with a cosine-similarity penalty.

    Parameters
    ----------
    scores : array-like of shape (K,)
        Normalised scores of the candidates (see :func:`normalize_scores`).
        Ties go to the earlier candidate, so pass them best first.
    features : array-like of shape (K, ...)
        The candidates' features (flattened).
    n_instances : int
        Batch size, at most ``K``.
    weight : float, default=0.1
        ``w``; 0 gives top-k, negative values prefer similar points.
    unit : bool, default=False
        ``features`` already have unit rows.

    Returns
    -------
    picks : ndarray of shape (n_instances,), int
        Positions among the candidates, in the order picked.
    values : ndarray of shape (n_instances,)
        Each pick's penalised value when it was picked.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.diversity import greedy_cosine_batch
    >>> X = np.array([[1.0, 0.0], [1.0, 0.01], [0.0, 1.0]])
    >>> picks, values = greedy_cosine_batch([1.0, 0.95, 0.5], X, 2, weight=-0.5)   # prefers the copy
    >>> picks.tolist(), values.round(3).tolist()
    ([0, 1], [1.0, 1.45])
    """
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    F = np.asarray(features, dtype=np.float64)
    F = F.reshape(len(F), -1)
    if len(F) != len(s):
        raise ValueError(f"{len(s)} scores for {len(F)} feature rows")
    n = int(n_instances)
    if not 1 <= n <= len(s):
        raise ValueError(f"n_instances must lie in [1, {len(s)}]; got {n_instances!r}")
    w = float(weight)
    if not np.isfinite(w):
        raise ValueError(f"weight must be finite; got {weight!r}")
    U = F if unit else unit_rows(F)
    free = np.ones(len(s), dtype=bool)
    nearest: Optional[np.ndarray] = None  # the largest cosine to a pick, per candidate
    picks, values = [], []
    for _ in range(n):
        value = s if nearest is None else s - w * nearest
        value = np.where(free, value, -np.inf)
        i = int(np.argmax(value))
        picks.append(i)
        values.append(float(value[i]))
        free[i] = False
        cos = U @ U[i]
        nearest = cos if nearest is None else np.maximum(nearest, cos)
    return np.asarray(picks, dtype=np.intp), np.asarray(values)
