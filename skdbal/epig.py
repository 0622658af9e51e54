"""EPIG (Bickford Smith et al., 2023): the expected predictive information gain.

Plain NumPy over predictive samples drawn with *consistent* posterior
samples: pass ``t`` is one fixed function of the input (one set of dropout
masks, one ensemble member) for the pool points and the target inputs
alike. For a pool point ``x`` and a target input ``x*``, the passes define
the joint predictive distribution of the two labels,

``p(y, y*) = (1/T) Σ_t p(y | x, θ_t) p(y* | x*, θ_t)``,

whose marginals are the averaged predictions ``p(y) = (1/T) Σ_t p(y | x, θ_t)``
and ``p(y*)``. EPIG scores ``x`` by the mutual information between its label
and the target's, averaged over ``M`` target inputs ``x*_m ~ p_*(x*)``:

``EPIG(x) = (1/M) Σ_m Σ_{y, y*} p(y, y*) log[p(y, y*) / (p(y) p(y*))]``.

This is the estimator of Bickford Smith et al. (2023) [1]_ for classification
with a sampled posterior. Where BALD, ``I(y; θ)``, counts information about
the parameters, EPIG counts only the information that bears on predictions
at the target inputs, so it passes over points that are uncertain but
irrelevant to the target distribution (outliers, regions the targets never
visit). The data-processing inequality gives ``EPIG(x) ≤ BALD(x)``.

Computation is in float64 with ``0 · log 0 = 0``; the pool is scored
``chunk_size`` points at a time, so memory holds ``(chunk_size, M, C, C)``
at most, never ``(N, M, C, C)``.

References
----------
.. [1] F. Bickford Smith, A. Kirsch, S. Farquhar, Y. Gal, A. Foster and
   T. Rainforth, "Prediction-oriented Bayesian active learning",
   AISTATS 2023, arXiv:2304.08151.

Examples
--------
>>> import numpy as np
>>> from skdbal.epig import epig_from_probs
>>> yes, no = [1.0, 0.0], [0.0, 1.0]
>>> pool = np.array([[[*yes], [*yes]], [[*no], [*yes]]])   # (T=2, N=2, C=2): point 1 never changes
>>> target = np.array([[yes], [no]])                      # (T=2, M=1, C=2): the passes disagree
>>> epig_from_probs(pool, target).round(4).tolist()       # point 0 tells the target's label: log 2
[0.6931, 0.0]
"""
from __future__ import annotations

from typing import Optional

import numpy as np
from scipy.special import xlogy

from ._validation import check_positive_int
from .uncertainty import check_samples

__all__ = ["epig_from_probs"]

#: Elements of the ``(n, M, C, C)`` joint held at once when ``chunk_size`` is None (about 32 MB each in float64).
_JOINT_BUDGET = 2 ** 22


def _epig_chunk(P: np.ndarray, Q: np.ndarray, q_mean: np.ndarray) -> np.ndarray:
    """EPIG of the pool chunk ``P`` (T, n, C) against the targets ``Q`` (T, M, C), ``q_mean = Q.mean(0)``."""
    T, n, C = P.shape
    M = Q.shape[1]
    # p(y, y*) for every (pool point, target): one matrix product over the passes, (n·C, T) @ (T, M·C)
    joint = (P.transpose(1, 2, 0).reshape(n * C, T) @ Q.reshape(T, M * C)) / T
    joint = joint.reshape(n, C, M, C).transpose(0, 2, 1, 3)  # (n, M, C, C): [point, target, y, y*]
    indep = P.mean(axis=0)[:, None, :, None] * q_mean[None, :, None, :]  # p(y) p(y*)
    positive = (joint > 0) & (indep > 0)  # joint > 0 implies both marginals > 0; indep guards underflow
    ratio = np.divide(joint, indep, out=np.ones_like(joint), where=positive)
    mi = xlogy(np.where(positive, joint, 0.0), ratio).sum(axis=(2, 3))  # (n, M); 0 · log 0 = 0
    return np.maximum(mi, 0.0).mean(axis=1)  # rounding may leave -1e-17 where the information is 0


def epig_from_probs(probs_pool, probs_target, *, chunk_size: Optional[int] = None) -> np.ndarray:
    """EPIG of every pool point from consistent predictive samples.

    ``EPIG(x_n) = (1/M) Σ_m I(y_n; y*_m)``, the mutual information between
    the label of pool point ``n`` and that of target input ``m`` under the
    mixture of the ``T`` passes (see the module docstring), averaged over
    the targets.

    Parameters
    ----------
    probs_pool : array-like of shape (T, N, C)
        Class probabilities of the pool points under ``T`` posterior samples.
    probs_target : array-like of shape (T, M, C)
        Class probabilities of the ``M`` target inputs under the *same* ``T``
        posterior samples: ``probs_pool[t]`` and ``probs_target[t]`` come
        from one network (one set of dropout masks, one ensemble member).
        Samples drawn independently for the two give a wrong score.
    chunk_size : int, optional
        Pool points scored at a time: memory holds a few
        ``(chunk_size, M, C, C)`` float64 arrays. By default as many as keep
        one such array near 2**22 elements (32 MB).

    Returns
    -------
    scores : ndarray of shape (N,), float64
        Non-negative, in nats; at most each point's BALD score.

    Raises
    ------
    ValueError
        If either array is not a valid ``(T, n, C)`` samples array
        (:func:`skdbal.uncertainty.check_samples`), if they differ in the
        number of samples ``T`` or of classes ``C``, or if ``chunk_size`` is
        not an int >= 1.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.epig import epig_from_probs
    >>> from skdbal.uncertainty import mutual_information
    >>> P = np.array([[[0.9, 0.1], [0.6, 0.4]],
    ...               [[0.2, 0.8], [0.5, 0.5]]])               # (T=2, N=2, C=2)
    >>> scores = epig_from_probs(P, P)                         # the pool as its own targets
    >>> scores.round(4).tolist()
    [0.065, 0.0013]
    >>> bool(np.all(scores <= mutual_information(P)))          # never more than BALD
    True
    >>> epig_from_probs(P, np.full((2, 3, 4), 0.25))
    Traceback (most recent call last):
        ...
    ValueError: probs_pool and probs_target must have the same number of classes C; got 2 and 4
    """
    P = check_samples(probs_pool, name="probs_pool")
    Q = check_samples(probs_target, name="probs_target")
    if P.shape[0] != Q.shape[0]:
        raise ValueError(f"probs_pool and probs_target must hold the same posterior samples T (the first axis); "
                         f"got {P.shape[0]} and {Q.shape[0]}")
    if P.shape[2] != Q.shape[2]:
        raise ValueError(f"probs_pool and probs_target must have the same number of classes C; "
                         f"got {P.shape[2]} and {Q.shape[2]}")
    T, N, C = P.shape
    M = Q.shape[1]
    if chunk_size is None:
        chunk_size = max(1, _JOINT_BUDGET // (M * C * C))
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    q_mean = Q.mean(axis=0)
    return np.concatenate([_epig_chunk(P[:, s:s + chunk_size], Q, q_mean) for s in range(0, N, chunk_size)])
