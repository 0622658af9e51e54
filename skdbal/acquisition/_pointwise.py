"""Pointwise strategies: a score per pool point from predictive samples, then top-k; and
:func:`score_pool`, a measure's scores of a pool."""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np
from sklearn.utils import check_random_state

from .. import uncertainty
from .._validation import check_pool
from ._chunks import ChunkPlan, _ranked
from ._registry import register
from ._scoring import DEFAULT_CHUNK_SIZE
from .base import Acquisition, MeasureStrategy, SamplesStrategy, Strategy

__all__ = ["BALD", "MaxEntropy", "VariationRatios", "MeanStd", "RandomSampling", "bald", "max_entropy",
           "variation_ratios", "mean_std", "random", "score_pool"]


class BALD(SamplesStrategy):
    """BALD: the largest mutual information between label and weights.

    The score is ``H[p̄] − E_t H[P[t]]``
    (:func:`skdbal.uncertainty.mutual_information`), the epistemic part of
    the predictive entropy. A deterministic model (``T = 1``) scores 0
    everywhere, with a :class:`DegenerateScoreWarning`.

    Parameters
    ----------
    chunk_size : int, default=2048
        Pool rows scored at a time; bounds memory.
    n_jobs : int, optional
        Chunks scored in parallel (joblib).
    n_samples : int, optional
        Number of MC passes ``T``, overriding the estimator's.

    See Also
    --------
    SamplesStrategy : how the pool is scored, and the call protocol.

    References
    ----------
    .. [1] N. Houlsby, F. Huszár, Z. Ghahramani and M. Lengyel, "Bayesian
       active learning for classification and preference learning",
       arXiv:1112.5745, 2011.
    .. [2] Y. Gal, R. Islam and Z. Ghahramani, "Deep Bayesian active learning
       with image data", ICML 2017, arXiv:1703.02910.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.acquisition import bald
    >>> class TwoPasses:
    ...     def predict_proba_samples(self, X, n_samples=None):
    ...         agree = np.array([[0.9, 0.1], [0.9, 0.1]])
    ...         disagree = np.array([[0.9, 0.1], [0.1, 0.9]])
    ...         return np.stack([agree, disagree], axis=1)   # (T=2, N=2, C=2)
    >>> idx, scores = bald(TwoPasses(), np.zeros((2, 3)), n_instances=1)
    >>> int(idx[0])                       # the point on which the passes disagree
    1
    """

    name = "bald"
    display_name = "BALD"

    measure = staticmethod(uncertainty.mutual_information)


bald = register(BALD)


class MaxEntropy(SamplesStrategy):
    """Max entropy: the largest entropy ``H[p̄]`` of the averaged prediction.

    Meaningful for ``T = 1`` too, where it is ordinary entropy sampling.

    Parameters
    ----------
    chunk_size, n_jobs, n_samples :
        As for :class:`BALD`.

    References
    ----------
    .. [1] C. E. Shannon, "A mathematical theory of communication", Bell
       System Technical Journal, 1948.
    .. [2] Y. Gal, R. Islam and Z. Ghahramani, "Deep Bayesian active learning
       with image data", ICML 2017, arXiv:1703.02910.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.acquisition import MaxEntropy
    >>> class Fixed:                            # a deterministic classifier (T = 1)
    ...     def predict_proba(self, X):
    ...         return np.array([[0.9, 0.1], [0.5, 0.5], [1.0, 0.0]])
    >>> MaxEntropy().acquisition_scores(Fixed(), np.zeros((3, 1))).round(4).tolist()   # -Σ p log p; log 2: [.5, .5]
    [0.3251, 0.6931, 0.0]
    >>> idx, scores = MaxEntropy()(Fixed(), np.zeros((3, 1)), n_instances=2)
    >>> idx.tolist(), scores.round(4).tolist()
    ([1, 0], [0.6931, 0.3251])
    """

    name = "max_entropy"
    display_name = "max entropy"

    measure = staticmethod(uncertainty.predictive_entropy)
    needs_stochastic = False


max_entropy = register(MaxEntropy)


class VariationRatios(SamplesStrategy):
    """Variation ratios: ``1 − f_mode / T`` over the passes' predicted classes.

    For a single deterministic pass (a plain classifier, or an MC estimator
    with ``mc_dropout=False``: Gal et al.'s deterministic baseline), where
    the mode count is always 0, it scores ``1 − max_c p_c`` instead
    (:func:`skdbal.uncertainty.least_confidence`): the form in which Gal et
    al. write the variation ratio, applied to the one distribution available.

    Parameters
    ----------
    chunk_size, n_jobs, n_samples :
        As for :class:`BALD`.

    References
    ----------
    .. [1] L. C. Freeman, "Elementary Applied Statistics", Wiley, 1965.
    .. [2] Y. Gal, R. Islam and Z. Ghahramani, "Deep Bayesian active learning
       with image data", ICML 2017, arXiv:1703.02910.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.acquisition import VariationRatios
    >>> class FourPasses:
    ...     def predict_proba_samples(self, X, n_samples=None):
    ...         a, b = [0.8, 0.2], [0.3, 0.7]           # votes for class 0, class 1
    ...         return np.array([[a, a], [a, a], [a, a], [a, b]])   # (T=4, N=2, C=2)
    >>> VariationRatios().acquisition_scores(FourPasses(), np.zeros((2, 1))).tolist()   # 1 - 4/4, 1 - 3/4
    [0.0, 0.25]
    >>> class Fixed:                                    # one deterministic pass
    ...     def predict_proba(self, X):
    ...         return np.array([[0.8, 0.2], [0.3, 0.7]])
    >>> VariationRatios().acquisition_scores(Fixed(), np.zeros((2, 1))).round(4).tolist()   # 1 - max p
    [0.2, 0.3]
    """

    name = "variation_ratios"
    display_name = "variation ratio"

    measure = staticmethod(uncertainty.variation_ratio)
    deterministic_measure = staticmethod(uncertainty.least_confidence)


variation_ratios = register(VariationRatios)


class MeanStd(SamplesStrategy):
    """Mean standard deviation of the class probabilities over the passes.

    ``(1/C) Σ_c sqrt(E_t[(P − E_t[P])²])``, the variance computed in two
    passes, so identical passes score exactly 0
    (:func:`skdbal.uncertainty.mean_standard_deviation`).

    Parameters
    ----------
    chunk_size, n_jobs, n_samples :
        As for :class:`BALD`.

    References
    ----------
    .. [1] A. Kendall, V. Badrinarayanan and R. Cipolla, "Bayesian SegNet:
       model uncertainty in deep convolutional encoder-decoder architectures
       for scene understanding", arXiv:1511.02680, 2015.
    .. [2] Y. Gal, R. Islam and Z. Ghahramani, "Deep Bayesian active learning
       with image data", ICML 2017, arXiv:1703.02910.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.acquisition import MeanStd
    >>> class TwoPasses:
    ...     def predict_proba_samples(self, X, n_samples=None):
    ...         agree = np.array([[0.9, 0.1], [0.9, 0.1]])
    ...         disagree = np.array([[0.9, 0.1], [0.1, 0.9]])   # std 0.4 in each class
    ...         return np.stack([agree, disagree], axis=1)     # (T=2, N=2, C=2)
    >>> MeanStd().acquisition_scores(TwoPasses(), np.zeros((2, 3))).round(4).tolist()
    [0.0, 0.4]
    """

    name = "mean_std"
    display_name = "mean std"

    measure = staticmethod(uncertainty.mean_standard_deviation)


mean_std = register(MeanStd)


class RandomSampling(Strategy):
    """Uniform random acquisition, the baseline.

    Each pool point gets a uniform score from a generator seeded by
    ``random_state``; the ``n_instances`` largest are returned (ties, which
    have probability zero, are not broken at random). The estimator is not
    called (it may be ``None``).

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.acquisition import random
    >>> a, _ = random(None, np.zeros((10, 2)), n_instances=3, random_state=0)
    >>> b, _ = random(None, np.zeros((10, 2)), n_instances=3, random_state=0)
    >>> a.tolist() == b.tolist() and len(set(a.tolist())) == 3
    True
    """

    name = "random"
    display_name = "random"

    def acquisition_scores(self, estimator, X_pool, *, random_state=None, **kwargs) -> np.ndarray:
        return check_random_state(random_state).random_sample(len(X_pool))

    def select(self, scores, n_instances, *, random_tie_break=False, random_state=None):
        return super().select(scores, n_instances)

    def plan_chunks(self, estimator, n_instances: int, pool, *, random_state=None, n_candidates=None, **options):
        """The local query's scores, drawn on the client from the same stream, a block at a time, keeping
        the top ``k``: no chunk is read."""
        cls = type(self)
        own = cls.acquisition_scores is RandomSampling.acquisition_scores and cls.select is RandomSampling.select
        if not own or type(self).acquire is not Strategy.acquire or \
                type(self).acquire_checked is not Strategy.acquire_checked:
            return super().plan_chunks(estimator, n_instances, pool, **options)
        return _RandomPlan(n_instances, random_state)


random = register(RandomSampling)


class _RandomPlan(ChunkPlan):
    """Random sampling over a pool read in chunks: the client draws the scores and reads no chunk."""

    #: Rows of random scores drawn at a time.
    block_rows = 1 << 20

    def __init__(self, n_instances, random_state):
        self.n_instances = n_instances
        self.random_state = random_state

    def merge(self, pool):
        rng = check_random_state(self.random_state)
        best_i, best_s = np.zeros(0, np.int64), np.zeros(0)
        for start in range(0, pool.n_valid, self.block_rows):
            s = rng.random_sample(min(self.block_rows, pool.n_valid - start))
            i = np.concatenate([best_i, np.arange(start, start + len(s))])
            s = np.concatenate([best_s, s])
            o = _ranked(i, s)[:self.n_instances]
            best_i, best_s = i[o], s[o]
        return Acquisition(pool.positions_to_indices(best_i).astype(np.intp), best_s, {})


def score_pool(
    estimator,
    X_pool,
    score_fn: Callable[[np.ndarray], np.ndarray],
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    needs_mc: bool = True,
    deterministic_fn: Optional[Callable[[np.ndarray], np.ndarray]] = None,
    n_jobs: Optional[int] = None,
    n_samples: Optional[int] = None,
) -> np.ndarray:
    """Score every row of ``X_pool`` with ``score_fn`` over predictive samples.

    The functional form of :class:`MeasureStrategy` ``.acquisition_scores``.

    Parameters
    ----------
    estimator : estimator
        A fitted model, read through :func:`skdbal.predictive.as_predictive`.
    X_pool : array-like of shape (N, ...)
    score_fn : callable
        Maps samples ``(T, n, C)`` to scores ``(n,)``, e.g.
        :func:`skdbal.uncertainty.mutual_information`.
    chunk_size : int, default=2048
        Rows scored at a time; bounds memory to ``T · chunk_size · C`` floats.
    needs_mc : bool, default=True
        Warn with :class:`DegenerateScoreWarning` when the estimator gives a
        single deterministic pass, for which the score is constant.
    deterministic_fn : callable, optional
        Score used instead of ``score_fn`` for a single deterministic pass
        (a plain classifier, or ``mc_dropout=False``); no warning then.
    n_jobs : int, optional
        Score chunks in parallel with joblib; see :func:`map_chunks`.
    n_samples : int, optional
        Number of passes ``T``, overriding the estimator's ``n_samples``.

    Returns
    -------
    scores : ndarray of shape (N,), float64

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from skdbal.acquisition import score_pool
    >>> from skdbal.uncertainty import predictive_entropy
    >>> X = np.array([[0.0], [1.5], [3.0]])
    >>> clf = LogisticRegression().fit(X, [0, 1, 1])
    >>> score_pool(clf, X, predictive_entropy, needs_mc=False).shape
    (3,)
    """
    X_pool = check_pool(X_pool)
    strategy = MeasureStrategy(score_fn, deterministic_measure=deterministic_fn, needs_stochastic=needs_mc,
                               chunk_size=chunk_size, n_jobs=n_jobs, n_samples=n_samples)
    return strategy.acquisition_scores(estimator, X_pool)
