"""BatchBALD as a strategy: a joint selection on consistent predictive samples."""
from __future__ import annotations

import warnings
from typing import Optional

import numpy as np
from sklearn.utils import check_random_state

from .. import batchbald
from .._validation import check_n_instances, check_pool, pool_kwargs
from ..predictive import as_predictive
from ._base import Acquisition, Strategy, check_options
from ._pointwise import DegenerateScoreWarning

__all__ = ["BatchBALD"]


class BatchBALD(Strategy):
    """BatchBALD: the batch with the largest joint mutual information, built greedily.

    Where top-k BALD adds up the points' information one by one, and so
    picks near-duplicates, BatchBALD scores the information of the batch as
    a whole, ``I(y_1, ..., y_b; w)``, so a point that repeats what the batch
    already says adds little (:func:`skdbal.batchbald.batch_bald_select`).

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

    def __init__(self, *, n_joint_samples: int = 1000, n_samples: Optional[int] = None, chunk_size: int = 512):
        self.n_joint_samples = n_joint_samples
        self.n_samples = n_samples
        self.chunk_size = chunk_size

    def acquire(self, estimator, X_pool, n_instances: int = 1, *, random_tie_break: bool = False,
                random_state=None, n_joint_samples: Optional[int] = None, n_samples: Optional[int] = None,
                chunk_size: Optional[int] = None, **kwargs) -> Acquisition:
        """Choose the batch greedily.

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
        check_options(self, kwargs)
        X_pool = check_pool(X_pool)
        n_instances = check_n_instances(n_instances, len(X_pool))
        pool_kwargs(kwargs, len(X_pool))
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
            idx, gains = batchbald.batch_bald_select(P[:, perm], n_instances, n_joint_samples=M,
                                                     chunk_size=chunk_size, random_state=rng)
            idx = perm[idx].astype(np.intp)
        else:
            idx, gains = batchbald.batch_bald_select(P, n_instances, n_joint_samples=M, chunk_size=chunk_size,
                                                     random_state=random_state)
        C = P.shape[2]
        exact = int(min(n_instances, np.floor(np.log(max(M, 1)) / np.log(C) + 1e-9) + 1))
        return Acquisition(idx, gains, {"batch_mutual_information": float(gains.sum()), "n_exact_picks": exact})
