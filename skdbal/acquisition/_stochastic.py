"""Stochastic batch acquisition (power, softmax, soft-rank): a strategy decorator."""
from __future__ import annotations

import numpy as np

from .. import stochastic
from .._validation import check_n_instances, check_pool
from ._base import Acquisition, StrategyDecorator, as_strategy, pool_scores_of

__all__ = ["StochasticBatch", "stochastic_batch"]


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
    and ``β ≥ 0`` (:mod:`skdbal.stochastic`):

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
    mode and ``β``.

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

    def __init__(self, strategy, mode: str = "power", beta: float = 1.0):
        super().__init__(strategy)
        self.mode = mode
        self.beta = beta

    def _check_params(self):
        stochastic._check(self.mode, self.beta)

    def acquire(self, estimator, X_pool, n_instances: int = 1, *, random_state=None, **kwargs) -> Acquisition:
        self._check_params()
        X_pool = check_pool(X_pool)
        n_instances = check_n_instances(n_instances, len(X_pool))
        base = as_strategy(self.strategy)
        score_seed, draw_seed = _score_and_draw_seeds(random_state)
        ps = pool_scores_of(base, estimator, X_pool, n_instances, random_state=score_seed, **kwargs)
        if ps is None:
            raise TypeError(f"stochastic batch acquisition samples from pointwise pool scores, and "
                            f"{type(base).__name__} has none (it chooses its batch jointly, or is a plain "
                            f"callable); wrap a pointwise strategy, or a noise filter around one")
        eligible = ps.eligible
        n_draw = n_instances if eligible is None else min(n_instances, int(eligible.sum()))
        picks, _ = stochastic.sample_batch(ps.scores, n_draw, self.mode, self.beta, eligible=eligible,
                                           random_state=draw_seed)
        return ps.acquisition(picks, n_instances, type(self).__name__,
                              info={"mode": self.mode, "beta": float(self.beta)})


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
