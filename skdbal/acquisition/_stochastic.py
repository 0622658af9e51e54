"""Stochastic batch acquisition (power, softmax, soft-rank): a strategy decorator.

Stochastic batch acquisition: sample a batch in proportion to a function of pointwise scores.

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

from ..estimates import plackett_luce_probabilities
from ._chunks import ChunkPlan, _ranked
from ._messages import chunk_refusal, strategy_names
from ._registry import register
from .base import Acquisition, SamplesStrategy, StrategyDecorator, as_strategy

__all__ = ['MODES', 'log_weights', 'sample_batch', 'StochasticBatch', 'stochastic_batch']


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
    >>> from skdbal.acquisition.functional import log_weights
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
    >>> from skdbal.acquisition.functional import sample_batch
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

def _draw_log_q(log_q, n_acquired: int) -> list:
    """``info["draw_log_q"]``: one float per acquired item, in acquisition order; the items a filter's fill
    added after the draw were certain given it (0)."""
    return [float(x) for x in log_q] + [0.0] * (n_acquired - len(log_q))


def _score_and_draw_seeds(random_state):
    """The two seeds of one stochastic query, from its ``random_state``: the scores' own randomness
    (ties, random sampling) and the draw get separate streams (a query on a cluster uses the same)."""
    rng = np.random.RandomState(random_state) if isinstance(random_state, (int, np.integer)) else \
        (random_state if isinstance(random_state, np.random.RandomState) else np.random.RandomState())
    score_seed, draw_seed = rng.randint(0, 2 ** 31 - 1, size=2)
    return int(score_seed), int(draw_seed)


class StochasticBatch(StrategyDecorator):
    """Draw the batch at random, in proportion to a function of the wrapped strategy's scores.

    Kirsch et al. (TMLR 2023): the top-k of a pointwise score takes near
    copies of the best point into one batch; drawing the batch with
    probabilities that favour high scores (without replacement) costs
    nothing beyond the scores and diversifies it. With scores ``s_i``
    and ``β ≥ 0`` (:mod:`skdbal.acquisition.functional`):

    - ``"power"``: ``p_i ∝ s_i^β`` (PowerBALD with BALD; scores ≥ 0),
    - ``"softmax"``: ``p_i ∝ exp(β s_i)``,
    - ``"softrank"``: ``p_i ∝ rank_i^(-β)``.

    The pool is scored once by the wrapped strategy (its pool scores:
    our pointwise strategies, and a noise filter around one, whose
    untrusted points are never drawn). The draw is seeded by the query's
    ``random_state`` (the learner's per-step seed), so a run is repeatable.

    Parameters
    ----------
    strategy : Strategy
        A strategy with pool scores. One that chooses its batch jointly
        (BatchBALD, a diversity penalty) or a plain callable is refused.
    mode : {"power", "softmax", "softrank"}, default="power"
    beta : float, default=1.0
        Inverse temperature; the paper's default is 1. 0 draws uniformly
        (random acquisition); as ``β`` grows the draw becomes the top-k.

    Notes
    -----
    ``scores`` of the returned acquisition are the wrapped strategy's scores
    of the picks, in the order drawn (not decreasing). ``info`` holds the
    mode, ``β`` and ``draw_log_q``: per acquired item, in the order drawn,
    the log of the probability its draw had among the candidates left
    (:func:`skdbal.estimates.plackett_luce_probabilities`), the ``q`` of
    :func:`skdbal.estimates.lure_risk` with ``N`` the number of candidates
    (the points not excluded, and under a noise filter only the trusted
    ones). A pick made once no candidate of positive weight was left, or
    added by a filter's fill, was certain: 0.

    References
    ----------
    .. [1] A. Kirsch, S. Farquhar, P. Atighehchian, A. Jesson, F.
       Branchaud-Charron and Y. Gal, "Stochastic batch acquisition: a simple
       baseline for deep active learning", TMLR 2023.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.acquisition import max_entropy, stochastic_batch
    >>> class Fixed:                                   # entropies 0.69, 0.69, 0.33, 0
    ...     def predict_proba(self, X):
    ...         return np.array([[0.5, 0.5], [0.5, 0.5], [0.9, 0.1], [1.0, 0.0]])
    >>> X = np.zeros((4, 1))
    >>> power = stochastic_batch(max_entropy, "power", beta=1)
    >>> idx, scores = power(Fixed(), X, 2, random_state=0)
    >>> sorted(idx.tolist()) in ([0, 1], [0, 2], [1, 2])     # never point 3: its entropy is 0
    True
    >>> power(Fixed(), X, 2, random_state=0)[0].tolist() == idx.tolist()     # seeded
    True
    >>> stochastic_batch(max_entropy, "softrank", beta=2)
    StochasticBatch(beta=2, mode='softrank', strategy=MaxEntropy())
    """

    name = "stochastic"
    name_params = ("mode", "beta")  # the parameters a name gives after the strategy: stochastic(bald, ...)

    def __init__(self, strategy, mode: str = "power", beta: float = 1.0):
        super().__init__(strategy)
        self.mode = mode
        self.beta = beta

    def check_params(self):
        _check(self.mode, self.beta)

    def acquire_checked(self, estimator, X_pool, n_instances: int, *, random_state=None, **kwargs) -> Acquisition:
        """A batch drawn by the wrapped strategy's pool scores (on checked input)."""
        self.check_params()
        base = as_strategy(self.strategy)
        score_seed, draw_seed = _score_and_draw_seeds(random_state)
        ps = base.pool_scores_checked(estimator, X_pool, n_instances, random_state=score_seed, **kwargs)
        if ps is None:
            raise TypeError(f"stochastic batch acquisition samples from pointwise pool scores, and "
                            f"{type(base).__name__} has none (it chooses its batch jointly, or is a plain "
                            f"callable); wrap a pointwise strategy, or a noise filter around one")
        eligible = ps.eligible
        n_draw = n_instances if eligible is None else min(n_instances, int(eligible.sum()))
        picks, _ = sample_batch(ps.scores, n_draw, self.mode, self.beta, eligible=eligible,
                                           random_state=draw_seed)
        cand = np.arange(len(ps.scores)) if eligible is None else np.flatnonzero(eligible)
        logw = log_weights(np.asarray(ps.scores, dtype=np.float64)[cand], self.mode, self.beta)
        log_q = plackett_luce_probabilities(logw, np.searchsorted(cand, picks), log=True)
        acq = ps.acquisition(picks, n_instances, type(self).__name__,
                             info={"mode": self.mode, "beta": float(self.beta)})
        acq.info["draw_log_q"] = _draw_log_q(log_q, len(acq.indices))
        return acq

    def plan_chunks(self, estimator, n_instances: int, pool, *, random_state=None, **options):
        """The local draw, exact over a pointwise plan without a filter, in modes ``"power"`` and
        ``"softmax"``: each chunk sends its top ``k`` perturbed log weights, with the local query's
        Gumbel noise drawn on the client in pool order."""
        self.check_params()
        if self.mode == "softrank":
            raise ValueError("on a pool read in chunks (a distributed pool) stochastic batches take mode 'power' "
                             "or 'softmax': 'softrank' weighs a point by its rank in the whole pool")
        score_seed, draw_seed = _score_and_draw_seeds(random_state)  # the local query's two streams
        base = as_strategy(self.strategy)
        inner = base.plan_chunks(estimator, n_instances, pool, random_state=score_seed, **options)
        if not inner.pointwise or inner.filtered:
            raise TypeError(chunk_refusal(base, (
                f"on a pool read in chunks (a distributed pool) stochastic batches sample from a pointwise "
                f"strategy's scores ({strategy_names(lambda cls: issubclass(cls, SamplesStrategy))}), not from "
                f"{type(base).__name__}: under a noise "
                f"filter the draw's noise would follow the trusted points of earlier chunks, known only after "
                f"scoring them all")))
        return _StochasticPlan(inner, self.mode, self.beta, n_instances, draw_seed)


register(StochasticBatch)


class _StochasticPlan(ChunkPlan):
    """Stochastic batches over a pool read in chunks, the local draw: the Gumbel-top-k of the pool is the
    top ``k`` of each chunk's top ``k``. The noise of the rows not excluded comes from the local query's
    stream, drawn on the client in pool order and sent with each chunk (a few chunks ahead of the
    scoring), so the client holds the noise of those chunks and ``O(k)`` candidates, never ``O(N)``."""

    def __init__(self, inner, mode, beta, n_instances, draw_seed):
        self.inner = inner
        self.mode = mode
        self.beta = float(beta)
        self.n_instances = n_instances
        self.draw_seed = draw_seed
        self.exact = inner.exact
        self.aligned_keywords = inner.aligned_keywords

    def score_chunk(self, chunk):
        return self.inner.score_chunk(chunk)

    def keep(self, chunk, scores, request):
        """The chunk's best ``k`` rows by perturbed log weight ``log w + g`` (``g``: ``chunk.extra``, the
        noise of its rows not excluded, in order), and its best ``k`` of weight 0 by score, which a draw
        reaches only when the others run out."""
        s = np.asarray(scores.scores, dtype=np.float64)[chunk.valid]
        idx = chunk.index[chunk.valid]
        logw = log_weights(s, self.mode, self.beta)
        key = logw + chunk.extra
        out = {}
        for name, sel, by in (("w", np.isfinite(key), key), ("z", ~np.isfinite(key), s)):
            i, b, sc, lw = idx[sel], by[sel], s[sel], logw[sel]
            o = _ranked(i, b)
            out[name] = (i[o[:self.n_instances]], b[o[:self.n_instances]], sc[o[:self.n_instances]])
            if name == "w":  # the log weights of the rows sent, and the log of the others' total weight
                out[name] += (lw[o[:self.n_instances]],)
                out["rest"] = float(np.logaddexp.reduce(lw[o[self.n_instances:]]))
        return out

    def merge(self, pool):
        k, rng = self.n_instances, np.random.RandomState(self.draw_seed)
        best = {"w": (np.zeros(0, np.int64), np.zeros(0), np.zeros(0), np.zeros(0)),
                "z": (np.zeros(0, np.int64), np.zeros(0), np.zeros(0))}
        rest = -np.inf  # log of the total weight of the rows of positive weight not among the best k
        received = 0
        for _, res in pool.round(None, inputs=lambda b: rng.gumbel(size=pool.n_valid_in(b))):
            received += sum(len(res[name][0]) for name in best)
            rest = np.logaddexp(rest, res["rest"])
            for name in best:
                merged = tuple(np.concatenate([a, r]) for a, r in zip(best[name], res[name]))
                o = _ranked(merged[0], merged[1])
                if name == "w":
                    rest = np.logaddexp(rest, np.logaddexp.reduce(merged[3][o[k:]]))
                best[name] = tuple(a[o[:k]] for a in merged)
        self.candidates = int(received)
        picks = np.concatenate([best["w"][0], best["z"][0]])[:k]
        scores = np.concatenate([best["w"][2], best["z"][2]])[:k]
        # the draw's q: the picks of positive weight (all of the best k) against the rest's total weight
        n_w = len(best["w"][0])
        log_q = plackett_luce_probabilities(np.append(best["w"][3], rest), np.arange(n_w), log=True)
        return Acquisition(picks.astype(np.intp), scores.astype(np.float64),
                           {"mode": self.mode, "beta": self.beta, "draw_log_q": _draw_log_q(log_q, len(picks))})


def stochastic_batch(strategy, mode: str = "power", beta: float = 1.0) -> StochasticBatch:
    """Decorate ``strategy`` with stochastic batch acquisition.

    See :class:`StochasticBatch`. By name: ``"stochastic(bald,power,1)"``.

    Parameters
    ----------
    strategy : Strategy
    mode : {"power", "softmax", "softrank"}, default="power"
    beta : float, default=1.0

    Returns
    -------
    StochasticBatch

    Examples
    --------
    >>> from skdbal.acquisition import bald, get_strategy, noise_filter, stochastic_batch
    >>> stochastic_batch(noise_filter(bald, "dynamic"), "power", 2.0)     # doctest: +NORMALIZE_WHITESPACE
    StochasticBatch(beta=2.0, strategy=NoiseFilter(strategy=BALD(), threshold='dynamic'))
    >>> get_strategy("stochastic(filter(bald,dynamic),softmax,2)")     # doctest: +NORMALIZE_WHITESPACE
    StochasticBatch(beta=2, mode='softmax', strategy=NoiseFilter(strategy=BALD(), threshold='dynamic'))
    """
    return StochasticBatch(strategy, mode, beta)
