"""BatchBALD (Kirsch et al., 2019): the joint mutual information of a batch, greedily.

Plain NumPy over predictive samples ``P`` of shape ``(T, N, C)`` drawn with
*consistent* masks: pass ``t`` is one fixed function of the input (one
dropout mask for the whole pool, or one member of an ensemble), so the
passes define a mixture ``p(y_1, ..., y_b) = (1/T) Σ_t Π_i P[t, i, y_i]``.

BatchBALD scores a batch ``S`` by ``I(y_S; w) = H(y_S) − Σ_{i∈S} E_t H(P[t, i])``
and builds it greedily: the next point is the one that adds the most. The
joint entropy ``H(y_S, y_n)`` is computed

- exactly, over all ``C^|S|`` configurations of the batch so far, while
  ``C^|S| ≤ M`` (``n_joint_samples``);
- beyond that, by importance sampling as in Kirsch et al.: ``M``
  configurations ``ŷ_m ~ p(y_S)`` and
  ``H ≈ −(1/M) Σ_m Σ_c [p(ŷ_m, c)/p(ŷ_m)] log p(ŷ_m, c)``.

The candidates are scored in chunks of ``chunk_size`` points, so memory
holds ``(chunk_size, M, C)`` at most, never ``(N, M, C)``.

Examples
--------
>>> import numpy as np
>>> from skdbal.batchbald import batch_bald_select
>>> yes, no = [1.0, 0.0], [0.0, 1.0]
>>> P = np.array([[yes, yes, yes], [yes, yes, no],        # (T=4, N=3, C=2): four passes,
...               [no, no, yes], [no, no, no]])           # point 1 a copy of point 0
>>> idx, gains = batch_bald_select(P, 2)
>>> idx.tolist()                      # BALD ties at log 2; the copy would add nothing
[0, 2]
>>> gains.round(4).tolist()
[0.6931, 0.6931]
"""
from __future__ import annotations

from typing import Tuple

import numpy as np
from scipy.special import xlogy
from sklearn.utils import check_random_state

__all__ = ["batch_bald_select", "joint_entropy_exact", "conditional_entropy"]


def conditional_entropy(P) -> np.ndarray:
    """``E_t H(P[t, n])`` for every point: the expected entropy given the weights.

    Parameters
    ----------
    P : array-like of shape (T, N, C)

    Returns
    -------
    ndarray of shape (N,)

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.batchbald import conditional_entropy
    >>> P = np.array([[[0.5, 0.5]], [[1.0, 0.0]]])    # log 2 in one pass, 0 in the other
    >>> conditional_entropy(P).round(4).tolist()
    [0.3466]
    """
    P = np.asarray(P, dtype=np.float64)
    return -xlogy(P, P).sum(axis=2).mean(axis=0)


def joint_entropy_exact(P, indices) -> float:
    """The joint entropy of the labels of ``indices``, by enumerating every configuration.

    For tests and small batches: ``C^len(indices)`` configurations.

    Parameters
    ----------
    P : array-like of shape (T, N, C)
        Samples with consistent masks.
    indices : sequence of int

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.batchbald import joint_entropy_exact
    >>> P = np.array([[[1.0, 0.0], [1.0, 0.0]], [[0.0, 1.0], [0.0, 1.0]]])
    >>> round(joint_entropy_exact(P, [0, 1]), 4)    # the two labels are equal: one coin, log 2
    0.6931
    """
    P = np.asarray(P, dtype=np.float64)
    T = P.shape[0]
    joint = np.ones((T, 1))
    for i in indices:
        joint = (joint[:, :, None] * P[:, i, None, :]).reshape(T, -1)
    p = joint.mean(axis=0)
    return float(-xlogy(p, p).sum())


def _check(P, n_instances, n_joint_samples, chunk_size):
    P = np.asarray(P)
    if P.ndim != 3:
        raise ValueError(f"P must have shape (T, N, C); got {P.shape}")
    T, N, C = P.shape
    if T < 1 or N < 1 or C < 2:
        raise ValueError(f"P must hold T >= 1 samples of N >= 1 points and C >= 2 classes; got {P.shape}")
    n = n_instances
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= N:
        raise ValueError(f"n_instances must be an int in [1, {N}]; got {n_instances!r}")
    for name, value in (("n_joint_samples", n_joint_samples), ("chunk_size", chunk_size)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be an int >= 1; got {value!r}")
    if not np.isfinite(P).all() or P.min() < 0:
        raise ValueError("P must hold probabilities (finite, >= 0)")
    if not np.allclose(P.sum(axis=2), 1.0, atol=1e-3):
        raise ValueError("the probabilities of P must sum to 1 over the classes")
    return P


def batch_bald_select(
    P,
    n_instances: int,
    *,
    n_joint_samples: int = 1000,
    chunk_size: int = 512,
    random_state=None,
) -> Tuple[np.ndarray, np.ndarray]:
    """Greedy BatchBALD over consistent samples.

    Parameters
    ----------
    P : array-like of shape (T, N, C)
        Class probabilities of ``T`` consistent passes over the ``N`` pool
        points. float32 is kept as is; products are taken in float64.
    n_instances : int
        Batch size.
    n_joint_samples : int, default=1000
        ``M``: the joint entropy is exact while the batch so far has at most
        ``M`` label configurations, and estimated from ``M`` sampled
        configurations beyond.
    chunk_size : int, default=512
        Candidates scored at a time: memory ``chunk_size · M · C`` floats.
    random_state : int, RandomState instance or None, default=None
        Seeds the sampled configurations.

    Returns
    -------
    indices : ndarray of shape (n_instances,), int
        In the order picked.
    gains : ndarray of shape (n_instances,)
        What each pick added to the batch's mutual information (the first
        is its BALD score); their running sum is BatchBALD's value of the
        batch so far.

    References
    ----------
    .. [1] A. Kirsch, J. van Amersfoort and Y. Gal, "BatchBALD: Efficient and
       diverse batch acquisition for deep Bayesian active learning",
       NeurIPS 2019, arXiv:1906.08158.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.batchbald import batch_bald_select
    >>> from skdbal.uncertainty import mutual_information
    >>> rng = np.random.RandomState(0)
    >>> P = rng.dirichlet(np.ones(3), size=(8, 20))           # (T=8, N=20, C=3)
    >>> idx, gains = batch_bald_select(P, 1)                  # one pick: BALD
    >>> int(idx[0]) == int(np.argmax(mutual_information(P))), bool(np.isclose(gains[0], mutual_information(P).max()))
    (True, True)
    """
    P = _check(P, n_instances, n_joint_samples, chunk_size)
    N = P.shape[1]
    M = int(n_joint_samples)
    rng = check_random_state(random_state)
    cond = conditional_entropy(P)
    picked, gains = [], []
    batch_mi = 0.0
    free = np.ones(N, dtype=bool)
    for _ in range(int(n_instances)):
        H = _joint_entropies(P, picked, M, M, rng, chunk_size)
        # I(y_S, y_n; w) = H(y_S, y_n) − Σ_{i ∈ S} E H_i − E H_n
        mi = H - cond - (cond[picked].sum() if picked else 0.0)
        mi[~free] = -np.inf
        best = int(np.argmax(mi))
        gains.append(float(mi[best] - batch_mi))
        batch_mi = float(mi[best])
        picked.append(best)
        free[best] = False
    return np.asarray(picked, dtype=np.intp), np.asarray(gains)


def _joint_entropies(P, picked, n_samples: int, exact_limit: int, rng, chunk_size: int) -> np.ndarray:
    """``H(y_S, y_n)`` for every point ``n``, with ``S = picked``: exact over
    the ``C^|S|`` configurations while they are at most ``exact_limit``,
    else from ``n_samples`` sampled configurations."""
    T, N, C = P.shape
    if C ** len(picked) <= exact_limit:
        Q = np.ones((T, 1))  # Q[t, k]: probability of configuration k of the batch under pass t
        for i in picked:
            Q = (Q[:, :, None] * np.asarray(P[:, i, None, :], dtype=np.float64)).reshape(T, -1)
        weight = None
    else:
        # configurations ŷ_m ~ p(y_S): a pass t uniformly, then each label from that pass
        M = n_samples
        t = rng.randint(T, size=M)
        Q = np.ones((T, M))
        for i in picked:
            Pi = np.asarray(P[:, i, :], dtype=np.float64)
            cdf = np.cumsum(Pi[t], axis=1)
            y = np.minimum((rng.random_sample(M)[:, None] * cdf[:, -1:] > cdf).sum(axis=1), C - 1)
            Q *= Pi[:, y]
        weight = Q.mean(axis=0)  # p(ŷ_m)
    H = np.empty(N)
    QT = Q.T / T  # (K, T)
    for start in range(0, N, chunk_size):
        Pc = np.asarray(P[:, start:start + chunk_size, :], dtype=np.float64)  # (T, B, C)
        B = Pc.shape[1]
        joint = (QT @ Pc.reshape(T, B * C)).reshape(-1, B, C)  # p(configuration, y_n = c)
        if weight is None:
            H[start:start + B] = -xlogy(joint, joint).sum(axis=(0, 2))
        else:
            H[start:start + B] = -(xlogy(joint, joint) / weight[:, None, None]).sum(axis=(0, 2)) / len(weight)
    return H
