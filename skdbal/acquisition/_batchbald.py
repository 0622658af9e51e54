"""BatchBALD as a strategy: a joint selection on consistent predictive samples.

BatchBALD (Kirsch et al., 2019): the joint mutual information of a batch, greedily.

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

Both are computed as ``H(y_S) + Σ_k v_k H(y_n | y_S = k)``, with the
conditionals ``p(y_n | y_S = k) = Σ_t p(w_t | k) P[t, n]`` (well scaled, so
float32 is safe) and the configurations' probabilities in log space. A
candidate's gain, ``I(y_S, y_n; w) − I(y_S; w) = H(y_n | y_S) − E_t H(P[t, n])``,
needs only the second term: the estimate of ``H(y_S)`` cancels, so the gains
compared within and across steps carry no noise from it.

The candidates are scored in chunks of ``chunk_size`` points, so memory
holds ``(chunk_size, M, C)`` at most, never ``(N, M, C)``.

Examples
--------
>>> import numpy as np
>>> from skdbal.acquisition.functional import batch_bald_select
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

import warnings
from typing import Optional, Tuple

import numpy as np
from scipy.special import xlogy
from sklearn.utils import check_random_state

from .._validation import check_positive_int
from ..predictive import as_predictive
from ._chunks import ChunkPlan, _merged
from ._pointwise import BALD
from ._registry import register
from ._scoring import DegenerateScoreWarning
from .base import Acquisition, Strategy

__all__ = ['batch_bald_select', 'joint_entropy_exact', 'conditional_entropy', 'BatchBALD', 'batch_bald']


_TINY = np.finfo(np.float64).tiny


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
    >>> from skdbal.acquisition.functional import conditional_entropy
    >>> P = np.array([[[0.5, 0.5]], [[1.0, 0.0]]])    # log 2 in one pass, 0 in the other
    >>> conditional_entropy(P).round(4).tolist()
    [0.3466]
    """
    P = np.asarray(P)
    out = np.empty(P.shape[1])
    for start in range(0, P.shape[1], 4096):  # in blocks: no float64 copy of the whole pool
        block = np.asarray(P[:, start:start + 4096], dtype=np.float64)
        out[start:start + block.shape[1]] = -xlogy(block, block).sum(axis=2).mean(axis=0)
    return out


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
    >>> from skdbal.acquisition.functional import joint_entropy_exact
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
    check_positive_int(n_joint_samples, "n_joint_samples")
    check_positive_int(chunk_size, "chunk_size")
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
    lazy: bool = True,
    random_state=None,
) -> Tuple[np.ndarray, np.ndarray]:
    """Greedy BatchBALD over consistent samples.

    Parameters
    ----------
    P : array-like of shape (T, N, C)
        Class probabilities of ``T`` consistent passes over the ``N`` pool
        points. The joint entropies are computed in its precision: float32
        samples (as the networks give) in float32, float64 in float64.
    n_instances : int
        Batch size.
    n_joint_samples : int, default=1000
        ``M``: the joint entropy is exact while the batch so far has at most
        ``M`` label configurations, and estimated from ``M`` sampled
        configurations beyond.
    chunk_size : int, default=512
        Candidates scored at a time: memory ``chunk_size · M · C`` floats.
    lazy : bool, default=True
        Lazy greedy evaluation: a point's gain can only shrink as the batch
        grows (the mutual information is submodular), so after the first
        pick the candidates are evaluated in order of their last gain, and a
        step stops once no candidate left could beat the best gain found.
        The picks are those of a full evaluation wherever the joint
        entropies are exact; with sampled entropies the bounds hold only up
        to the sampling error. ``False`` evaluates every candidate at every
        step.
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
    >>> from skdbal.acquisition.functional import batch_bald_select
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
    free = np.ones(N, dtype=bool)
    bound = np.full(N, np.inf)  # the last gain computed for each point: an upper bound on its next
    for _ in range(int(n_instances)):
        configs = _configurations(P, picked, M, M, rng)

        def gains_of(cand, configs=configs):
            # I(y_S, y_n; w) − I(y_S; w) = H(y_n | y_S) − E_t H(P[t, n]): the estimate of H(y_S)
            # cancels, so sampled steps add no noise of their own to the gains they compare
            return _entropies(P, configs, cand, chunk_size, conditional=True) - cond[cand]

        if not lazy or not picked:
            cand = np.flatnonzero(free)
            g = gains_of(cand)
            bound[cand] = g
            best = int(cand[np.argmax(g)])
        else:
            # lazy greedy: gains only shrink as the batch grows (the mutual information is
            # submodular), so candidates are evaluated best bound first, until no bound left
            # can beat the best fresh gain
            order = np.flatnonzero(free)
            order = order[np.argsort(-bound[order], kind="stable")]
            best, best_gain, done = -1, -np.inf, 0
            block = max(16, min(chunk_size, 128))
            while done < len(order):
                cand = order[done:done + block]
                g = gains_of(cand)
                bound[cand] = g
                done += len(cand)
                # the lowest index among equal gains, as a full evaluation would pick
                for c, value in zip(cand, g):
                    if value > best_gain or (value == best_gain and c < best):
                        best, best_gain = int(c), float(value)
                if done < len(order) and best_gain > bound[order[done]] + 1e-12:
                    break
        gains.append(float(bound[best]))
        picked.append(best)
        free[best] = False
    return np.asarray(picked, dtype=np.intp), np.asarray(gains)


def _configurations(P, picked, n_samples: int, exact_limit: int, rng):
    """The batch so far as label configurations ``k`` of ``picked``, for
    ``H(y_S, y_n) = H(y_S) + Σ_k v_k H(y_n | y_S = k)``.

    Returns ``(R, v, H_S)``: ``R[t, k] = p(w_t | y_S = k)``, the passes'
    posterior given configuration ``k`` (columns sum to 1); the weights
    ``v_k``; and ``H(y_S)``. All ``C^|S|`` configurations while there are at
    most ``exact_limit`` (``v_k = p(k)``), else ``n_samples`` configurations
    drawn from ``p(y_S)`` (``v_k = 1/M``, and the estimates of Kirsch et al.).
    Computed in log space, so long batches do not underflow."""
    T, _, C = P.shape
    logP = lambda i: np.log(np.maximum(np.asarray(P[:, i, :], dtype=np.float64), _TINY))  # noqa: E731
    if C ** len(picked) <= exact_limit:
        logQ = np.zeros((T, 1))
        for i in picked:
            logQ = (logQ[:, :, None] + logP(i)[:, None, :]).reshape(T, -1)
        exact = True
    else:  # ŷ_m ~ p(y_S): a pass t uniformly, then each label from that pass
        M = n_samples
        t = rng.randint(T, size=M)
        logQ = np.zeros((T, M))
        for i in picked:
            Pi = np.asarray(P[:, i, :], dtype=np.float64)
            cdf = np.cumsum(Pi[t], axis=1)
            y = np.minimum((rng.random_sample(M)[:, None] * cdf[:, -1:] > cdf).sum(axis=1), C - 1)
            logQ += np.log(np.maximum(Pi, _TINY))[:, y]
        exact = False
    top = logQ.max(axis=0)
    Q = np.exp(logQ - top)
    total = Q.sum(axis=0)
    log_w = np.log(total) + top - np.log(T)  # log p(configuration)
    R = Q / total
    if exact:
        w = np.exp(log_w)
        return R, w, float(-(w * log_w).sum())
    return R, np.full(len(log_w), 1.0 / len(log_w)), float(-log_w.mean())


def _entropies(P, configs, candidates, chunk_size: int, conditional: bool = False) -> np.ndarray:
    """``H(y_S, y_n)`` for each candidate ``n`` (``H(y_n | y_S)`` with
    ``conditional=True``), ``chunk_size`` candidates at a time, in the
    precision of ``P`` (float32 samples: float32 products)."""
    R, v, H_S = configs
    T, _, C = P.shape
    dtype = np.float32 if P.dtype == np.float32 else np.float64
    RT = np.ascontiguousarray(R.T, dtype=dtype)  # (K, T)
    ones = np.ones(C, dtype=dtype)
    H = np.empty(len(candidates))
    for start in range(0, len(candidates), chunk_size):
        idx = candidates[start:start + chunk_size]
        Pc = np.asarray(P[:, idx, :], dtype=dtype).reshape(T, -1)  # (T, B·C)
        B = len(idx)
        cond = RT @ Pc  # p(y_n = c | y_S = k), (K, B·C)
        logs = np.maximum(cond, np.finfo(dtype).tiny)
        np.log(logs, out=logs)
        logs *= cond
        ent = -(logs.reshape(-1, C) @ ones).reshape(-1, B)  # H(y_n | y_S = k), (K, B)
        H[start:start + B] = v @ ent
    return H if conditional else H + H_S


def _joint_entropies(P, picked, n_samples: int, exact_limit: int, rng, chunk_size: int) -> np.ndarray:
    """``H(y_S, y_n)`` for every point ``n``, with ``S = picked`` (for tests)."""
    return _entropies(P, _configurations(P, picked, n_samples, exact_limit, rng), np.arange(P.shape[1]),
                      chunk_size)

class BatchBALD(Strategy):
    """BatchBALD: the batch with the largest joint mutual information, built greedily.

    Where top-k BALD adds up the points' information one by one, and so
    picks near-duplicates, BatchBALD scores the information of the batch as
    a whole, ``I(y_1, ..., y_b; w)``, so a point that repeats what the batch
    already says adds little (:func:`skdbal.acquisition.functional.batch_bald_select`).

    It needs *consistent* samples: pass ``t`` must be one function for every
    pool point. It asks the model for them through the predictive interface
    (``consistent=True``, see :mod:`skdbal.predictive`), and every wrapper
    passes the request on: an :class:`~skdbal.MCDropoutClassifier` then
    draws one set of masks for the pool, whether it is read directly, as
    the last step of a pipeline, inside a learner, a modAL learner or a
    :class:`~skdbal.DeepEnsembleClassifier`. A model that cannot honour
    the request raises a ``TypeError`` instead of giving per-row samples.
    The whole pool is sampled in one call. Its ``(T, N, C)`` samples are
    held in memory (float32), the joint entropies are computed
    ``chunk_size`` points at a time.

    Parameters
    ----------
    n_joint_samples : int, default=1000
        ``M``: exact joint entropies while the batch so far has at most ``M``
        label configurations (the first 4 picks for 10 classes and M = 1000), sampled
        from ``M`` configurations beyond.
    n_samples : int, optional
        Number of passes ``T``, overriding the model's.
    chunk_size : int, default=512
        Candidates scored at a time: peak memory ``chunk_size · M · C``
        doubles beyond the samples.

    Notes
    -----
    The scores returned are each pick's gain: what it added to the batch's
    mutual information (the first is its BALD score), in the order picked.
    ``info["batch_mutual_information"]`` is their sum. BatchBALD has no
    pool scores (:meth:`Strategy.pool_scores` is None): a noise filter or a
    diversity penalty around it lets it choose among their candidates.

    References
    ----------
    .. [1] A. Kirsch, J. van Amersfoort and Y. Gal, "BatchBALD: Efficient and
       diverse batch acquisition for deep Bayesian active learning",
       NeurIPS 2019, arXiv:1906.08158.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.acquisition import bald, batch_bald
    >>> class Passes:                          # four consistent passes; point 1 copies point 0
    ...     classes_ = np.array([0, 1])
    ...     consistent_samples = True            # always one function per pass
    ...     def predict_proba_samples(self, X, n_samples=None):
    ...         yes, no = [1.0, 0.0], [0.0, 1.0]
    ...         return np.array([[yes, yes, yes], [yes, yes, no], [no, no, yes], [no, no, no]])
    >>> X = np.zeros((3, 1))
    >>> bald(Passes(), X, 2)[0].tolist()       # BALD: three ties, the first two
    [0, 1]
    >>> idx, gains = batch_bald(Passes(), X, 2)
    >>> idx.tolist(), gains.round(4).tolist()
    ([0, 2], [0.6931, 0.6931])
    """

    name = "batch_bald"
    display_name = "BatchBALD"

    def __init__(self, *, n_joint_samples: int = 1000, n_samples: Optional[int] = None, chunk_size: int = 512):
        self.n_joint_samples = n_joint_samples
        self.n_samples = n_samples
        self.chunk_size = chunk_size

    def acquire_checked(self, estimator, X_pool, n_instances: int, *, random_tie_break: bool = False,
                        random_state=None, n_joint_samples: Optional[int] = None, n_samples: Optional[int] = None,
                        chunk_size: Optional[int] = None, **kwargs) -> Acquisition:
        """Choose the batch greedily (on the input :meth:`~skdbal.acquisition.base.Strategy.acquire` checked).

        Parameters
        ----------
        estimator : estimator
            A fitted model whose samples can be asked to be consistent.
        X_pool : array-like of shape (N, ...)
        n_instances : int, default=1
        random_tie_break : bool, default=False
            Break ties between equal gains at random (a seeded permutation
            of the pool) instead of by the lower index.
        random_state : int, RandomState instance or None, default=None
            Seeds the tie break and the sampled label configurations.
        n_joint_samples, n_samples, chunk_size : int, optional
            Override the parameters of the same names for this call.
        **kwargs :
            Pool-aligned keywords (``*_pool``), unused.

        Returns
        -------
        Acquisition
        """
        predictive = as_predictive(estimator, n_samples=self.n_samples if n_samples is None else n_samples)
        if predictive.kind != "classifier":
            raise TypeError(f"batch_bald needs a classifier's probability samples; {predictive.name} is a regressor")
        if not predictive.stochastic:
            warnings.warn(f"{predictive.name} gives one deterministic pass, so BatchBALD's mutual information "
                          "is 0 everywhere; use an MC estimator", DegenerateScoreWarning, stacklevel=3)
        P = predictive.proba_samples(X_pool, consistent=True)
        M = self.n_joint_samples if n_joint_samples is None else n_joint_samples
        chunk_size = self.chunk_size if chunk_size is None else chunk_size
        if random_tie_break:  # the greedy step keeps the lowest index among equal gains: permute the pool
            rng = check_random_state(random_state)
            perm = rng.permutation(P.shape[1])
            idx, gains = batch_bald_select(P[:, perm], n_instances, n_joint_samples=M,
                                                     chunk_size=chunk_size, random_state=rng)
            idx = perm[idx].astype(np.intp)
        else:
            idx, gains = batch_bald_select(P, n_instances, n_joint_samples=M, chunk_size=chunk_size,
                                                     random_state=random_state)
        C = P.shape[2]
        exact = int(min(n_instances, np.floor(np.log(max(M, 1)) / np.log(C) + 1e-9) + 1))
        return Acquisition(idx, gains, {"batch_mutual_information": float(gains.sum()), "n_exact_picks": exact})

    def plan_chunks(self, estimator, n_instances: int, pool, *, random_state=None, n_candidates=None, **options):
        """A pre-selection, as baal and batchbald_redux do: each chunk sends its ``n_candidates`` points of
        highest BALD (default ``max(100 k, 1000)``), and the client chooses the batch among the best
        ``n_candidates`` of them with this strategy. Exact only when they are the whole pool, whatever the
        model's samples (BatchBALD itself samples the candidates in one call)."""
        if type(self).acquire is not Strategy.acquire or type(self).acquire_checked is not BatchBALD.acquire_checked:
            return super().plan_chunks(estimator, n_instances, pool, **options)
        bald = BALD(n_samples=self.n_samples)
        scores = bald.samples_plan(estimator, n_instances, {k: v for k, v in options.items() if k == "n_samples"},
                                    row_keyed=False)
        m = n_candidates if n_candidates is not None else max(100 * n_instances, 1000)
        return _PreselectedPlan(self, scores, estimator, n_instances, m, random_state, options)


batch_bald = register(BatchBALD)


class _PreselectedPlan(ChunkPlan):
    """BatchBALD among the best ``m`` points of a pointwise plan: the chunks send their top ``m``, the client
    reads those rows and runs the strategy on them."""

    def __init__(self, strategy, scores, estimator, n_instances, m, random_state, options):
        self.strategy = strategy
        self.scores = scores
        self.estimator = estimator
        self.n_instances = n_instances
        self.m = m
        self.random_state = random_state
        self.options = options

    def score_chunk(self, chunk):
        return self.scores.score_chunk(chunk)

    def keep(self, chunk, scores, request):
        return self.scores.keep(chunk, scores, request)

    def merge(self, pool):
        k = self.n_instances
        parts = dict(pool.round(self.scores.request(self.m, None, k, None, k)))
        cand = np.sort(_merged(parts)[0][:self.m])  # the pool's top m, in pool order
        self.exact = len(cand) == pool.n_valid  # the whole pool: the local call itself, on the client
        self.candidates = int(len(cand))
        acq = self.strategy.acquire(self.estimator, pool.rows(cand), k, random_state=self.random_state,
                                    **self.options)
        return Acquisition(cand[acq.indices].astype(np.intp), acq.scores,
                           {**acq.info, "n_candidates": int(len(cand))})
