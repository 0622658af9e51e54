"""Stochastic batch acquisition: sample a batch in proportion to a function of pointwise scores.

Kirsch, Farquhar, Atighehchian, Jesson, Branchaud-Charron and Gal, "Stochastic
batch acquisition: a simple baseline for deep active learning" (TMLR 2023).
Instead of the top-k of a pointwise score (which fills a batch with near copies),
a batch of k is drawn without replacement with probabilities

- ``"softmax"``:   p_i ∝ exp(β s_i)
- ``"power"``:     p_i ∝ s_i^β            (scores ≥ 0)
- ``"softrank"``:  p_i ∝ r_i^(-β)         (r_i: the rank of s_i, 1 for the best)

through the Gumbel-top-k trick: the k largest of ``log w_i + g_i`` with
independent standard Gumbel ``g_i`` (equivalently ``β``-scaled scores and
Gumbel noise of scale ``1/β``) are a draw of k without replacement, each next
one with probability proportional to ``w`` among those left (Kool, van Hoof
and Welling, 2019). Pure functions over arrays.
"""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np
from sklearn.utils import check_random_state

__all__ = ["MODES", "log_weights", "sample_batch"]

#: The sampling rules, by name.
MODES = ("power", "softmax", "softrank")


def _check(mode: str, beta: float) -> None:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {list(MODES)}; got {mode!r}")
    if isinstance(beta, bool) or not isinstance(beta, (int, float, np.integer, np.floating)) \
            or not np.isfinite(beta) or beta < 0:
        raise ValueError(f"beta must be a finite number >= 0; got {beta!r}")


def log_weights(scores, mode: str = "power", beta: float = 1.0) -> np.ndarray:
    """``log w_i`` of each point's sampling weight (up to a constant).

    Parameters
    ----------
    scores : array-like of shape (N,)
        Pointwise acquisition scores, larger is better; finite.
    mode : {"power", "softmax", "softrank"}, default="power"
    beta : float, default=1.0
        Inverse temperature, ``>= 0``: 0 samples uniformly, and the larger
        it is the closer the draw to the top-k.

    Returns
    -------
    ndarray of shape (N,)
        ``-inf`` for a point that can never be drawn while another can (a
        score of 0 under ``"power"``).

    Raises
    ------
    ValueError
        For an unknown mode, a bad ``beta``, non-finite scores, or negative
        scores under ``"power"`` (beyond round-off of 1e-10, which is
        clipped to 0: BALD's estimator can dip below 0 by that much).

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.stochastic import log_weights
    >>> s = np.array([0.5, 0.25, 0.0])
    >>> np.exp(log_weights(s, "power", 2)).tolist()              # s^2
    [0.25, 0.0625, 0.0]
    >>> log_weights(s, "softmax", 4).tolist()                   # 4 s
    [2.0, 1.0, 0.0]
    >>> np.exp(log_weights(s, "softrank", 1)).round(4).tolist()   # 1/rank
    [1.0, 0.5, 0.3333]
    """
    _check(mode, beta)
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    if not np.isfinite(s).all():
        raise ValueError("the scores must be finite to sample a batch from them")
    if mode == "softmax":
        return beta * s
    if mode == "power":
        if (s < -1e-10).any():
            raise ValueError(f"power sampling needs scores >= 0; the least is {s.min():.3g} (use 'softmax' or "
                             f"'softrank' for a score that can be negative)")
        with np.errstate(divide="ignore"):
            logs = np.log(np.clip(s, 0.0, None))
        return np.where(np.isneginf(logs), -np.inf, beta * logs) if beta else np.zeros_like(s)
    order = np.argsort(-s, kind="stable")
    rank = np.empty(len(s), dtype=np.float64)
    rank[order] = np.arange(1, len(s) + 1)
    return -beta * np.log(rank)


def sample_batch(scores, n_instances: int, mode: str = "power", beta: float = 1.0, *,
                 eligible: Optional[np.ndarray] = None, random_state=None) -> Tuple[np.ndarray, np.ndarray]:
    """Draw ``n_instances`` distinct points, each next one with probability ∝ its weight among those left.

    Parameters
    ----------
    scores : array-like of shape (N,)
    n_instances : int
        At most the number of eligible points.
    mode : {"power", "softmax", "softrank"}, default="power"
    beta : float, default=1.0
    eligible : ndarray of bool, shape (N,), optional
        Only these may be drawn (a noise filter's trusted points); None: all.
        Under ``"softrank"`` the ranks are among the eligible points.
    random_state : int, RandomState instance or None
        Seeds the Gumbel noise.

    Returns
    -------
    indices : ndarray of shape (n_instances,)
        In the order drawn.
    perturbed : ndarray of shape (n_instances,)
        Their perturbed log weights, decreasing. Points of weight 0 come
        last, in the order of their scores, when the others run out.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.stochastic import sample_batch
    >>> s = np.array([0.9, 0.05, 0.05])
    >>> idx, _ = sample_batch(s, 2, "power", beta=1, random_state=0)
    >>> sorted(idx.tolist()) in ([0, 1], [0, 2], [1, 2])
    True
    >>> # over many draws, the first pick follows p_i = s_i / sum(s) = 0.9, 0.05, 0.05
    >>> rng = np.random.RandomState(0)
    >>> first = [sample_batch(s, 1, "power", 1, random_state=rng)[0][0] for _ in range(4000)]
    >>> np.bincount(first, minlength=3) / 4000
    array([0.902 , 0.0485, 0.0495])
    >>> sample_batch(s, 2, "power", beta=1e6, random_state=0)[0].tolist()[0]     # large beta: the top first
    0
    """
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    keep = np.ones(len(s), dtype=bool) if eligible is None else np.asarray(eligible, dtype=bool).reshape(-1)
    if len(keep) != len(s):
        raise ValueError(f"eligible has {len(keep)} entries for {len(s)} scores")
    cand = np.flatnonzero(keep)
    n = int(n_instances)
    if not 0 <= n <= len(cand):
        raise ValueError(f"cannot draw {n} of {len(cand)} eligible points")
    logw = log_weights(s[cand], mode, beta)
    rng = check_random_state(random_state)
    key = logw + rng.gumbel(size=len(cand))
    # points of weight 0 (log -inf) stay behind every other, in the order of their scores
    finite = np.flatnonzero(np.isfinite(key))
    finite = finite[np.argsort(-key[finite], kind="stable")]
    zero = np.flatnonzero(~np.isfinite(key))
    zero = zero[np.argsort(-s[cand][zero], kind="stable")]
    order = np.concatenate([finite, zero]).astype(np.intp)
    top = order[:n]
    return cand[top].astype(np.intp), key[top]
