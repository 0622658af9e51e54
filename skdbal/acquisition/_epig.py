"""EPIG as a strategy: the information a pool point's label gives about the labels of target inputs.

EPIG (Bickford Smith et al., 2023): the expected predictive information gain.

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
>>> from skdbal.acquisition.functional import epig_from_probs
>>> yes, no = [1.0, 0.0], [0.0, 1.0]
>>> pool = np.array([[[*yes], [*yes]], [[*no], [*yes]]])   # (T=2, N=2, C=2): point 1 never changes
>>> target = np.array([[yes], [no]])                      # (T=2, M=1, C=2): the passes disagree
>>> epig_from_probs(pool, target).round(4).tolist()       # point 0 tells the target's label: log 2
[0.6931, 0.0]
"""
from __future__ import annotations

import warnings
from typing import Optional

import numpy as np
from scipy.special import xlogy
from sklearn.utils import check_random_state

from .._validation import check_pool, check_positive_int, concat_rows, is_frame, take_rows
from ..predictive import Predictive, as_predictive
from ..uncertainty import check_samples
from ._registry import register
from ._scoring import DEFAULT_CHUNK_SIZE, DegenerateScoreWarning, map_chunks
from .base import SamplesStrategy

__all__ = ['epig_from_probs', 'EPIG', 'epig']


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
    >>> from skdbal.acquisition.functional import epig_from_probs
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

class _EPIGChunkScorer:
    """``X_chunk -> EPIG`` against fixed targets: picklable, for joblib workers.

    One call of the model per chunk, on the chunk's rows followed by the
    target rows, asked for consistent samples: pass ``t`` of the pool rows and
    pass ``t`` of the targets are then one function, whether or not the model
    draws the same passes from one call to the next."""

    def __init__(self, predictive: Predictive, targets):
        self.predictive = predictive
        self.targets = targets

    def __call__(self, X_chunk) -> np.ndarray:
        n = len(X_chunk)
        P = self.predictive.proba_samples(concat_rows(X_chunk, self.targets), consistent=True)
        return epig_from_probs(P[:, :n], P[:, n:])


def _check_target(X_target, X_pool):
    """``X_target`` as rows like ``X_pool``'s, else a ValueError naming the difference."""
    if X_target is not None and hasattr(X_target, "__len__") and len(X_target) == 0:
        raise ValueError("X_target is empty: EPIG needs at least one target input")
    X_target = check_pool(X_target, name="X_target")
    if is_frame(X_pool) or is_frame(X_target):
        if not (is_frame(X_pool) and is_frame(X_target)):
            raise ValueError("X_target must be a table like X_pool (a DataFrame), or an array when X_pool is one; "
                             f"got {type(X_target).__name__} for X_pool of type {type(X_pool).__name__}")
        if list(X_target.columns) != list(X_pool.columns):
            raise ValueError(f"X_target's columns {list(X_target.columns)} differ from X_pool's "
                             f"{list(X_pool.columns)}")
        return X_target
    target_shape, pool_shape = tuple(np.shape(X_target)[1:]), tuple(np.shape(X_pool)[1:])
    if target_shape != pool_shape:
        raise ValueError(f"X_target's rows have shape {target_shape} but X_pool's have shape {pool_shape}: "
                         "target inputs must have the pool's features")
    return X_target


class EPIG(SamplesStrategy):
    """EPIG: the largest expected predictive information gain about target inputs.

    A pool point ``x`` is scored by how much its label ``y`` tells about the
    label ``y*`` of a target input ``x*``, averaged over ``M`` target inputs:
    ``EPIG(x) = E_{x*} I(y; y* | x, x*)``, estimated from ``T`` posterior
    samples (:func:`skdbal.acquisition.functional.epig_from_probs`). Where BALD counts any
    information about the weights, EPIG counts only what bears on the
    predictions at the targets, so it passes over uncertain points that do
    not matter for them (outliers, parts of the pool the targets never visit).

    **Target inputs.** ``X_target`` given with the query, else the parameter
    ``target``, else ``n_targets`` rows of the pool drawn uniformly without
    replacement (all of them for a smaller pool), seeded by the query's
    ``random_state``: the pool as a sample of the input distribution of
    interest, as in Bickford Smith et al.'s pool-based experiments. Inside
    :class:`~skdbal.ActiveLearner` the pool is the rows the strategy may
    choose from (the unlabelled ones, or the ``pool_subsample``).

    **Consistent samples.** The estimate needs pass ``t`` to be one function
    for the pool points and the targets (one set of dropout masks, one
    ensemble member). Each chunk of the pool is therefore sampled in one
    call together with the target rows, asking for consistent samples
    (``consistent=True``, see :mod:`skdbal.predictive`): an
    :class:`~skdbal.MCDropoutClassifier` then draws one set of masks for the
    call, whatever its ``random_state``; an ensemble's sample ``t`` is member
    ``t``. A model that cannot honour the request raises a ``TypeError``
    rather than give per-row samples. The targets are passed through the
    model once per chunk (``M`` extra rows per ``chunk_size``).

    Parameters
    ----------
    target : array-like of shape (M, ...), optional
        Target inputs, with the pool's features. None: sampled from the pool.
    n_targets : int, default=100
        How many target inputs to sample from the pool when none are given.
    chunk_size : int, default=2048
        Pool rows sampled per call of the model (with the targets appended).
    n_jobs : int, optional
        Chunks scored in parallel (joblib).
    n_samples : int, optional
        Number of posterior samples ``T``, overriding the model's.

    Each of these may also be given when calling the strategy (the targets
    as ``X_target=``), which overrides the value set here.

    Notes
    -----
    A batch is the top ``n_instances`` pointwise scores. The joint batch
    version (JEPIG, the information of the batch's labels together about
    the targets, as BatchBALD is to BALD) is not implemented: it needs the
    joint predictive of the batch's labels, whose configurations grow as
    ``C^b`` and would need BatchBALD's sampled joint entropies paired with
    the targets. Top-k can therefore pick redundant points: two near-copies
    score the same, and the second adds almost nothing once the first is
    labelled. A diversity penalty (:func:`diversity_penalty`) around EPIG
    counters that. A deterministic model (``T = 1``) scores 0 everywhere,
    with a :class:`DegenerateScoreWarning`.

    References
    ----------
    .. [1] F. Bickford Smith, A. Kirsch, S. Farquhar, Y. Gal, A. Foster and
       T. Rainforth, "Prediction-oriented Bayesian active learning",
       AISTATS 2023, arXiv:2304.08151.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.acquisition import EPIG, bald, epig
    >>> class ThreeMembers:                    # an ensemble: sample t is member t for every input
    ...     consistent_samples = True
    ...     def predict_proba_samples(self, X, n_samples=None):
    ...         x = np.asarray(X, dtype=float)[:, 0]
    ...         says_one = np.stack([x > 0, x > 1, (x > 0) | (x < -3)])    # (T=3, n)
    ...         return np.stack([~says_one, says_one], axis=-1).astype(float)
    >>> X_pool = np.array([[-5.0], [0.5], [2.0]])    # an outlier, a point near the targets, a sure one
    >>> X_target = np.array([[0.3], [0.7]])
    >>> bald.acquisition_scores(ThreeMembers(), X_pool).round(4).tolist()              # the members disagree twice
    [0.6365, 0.6365, 0.0]
    >>> epig.acquisition_scores(ThreeMembers(), X_pool, X_target=X_target).round(4).tolist()   # one matters
    [0.1744, 0.6365, 0.0]
    >>> idx, scores = EPIG(target=X_target)(ThreeMembers(), X_pool, n_instances=1)
    >>> idx.tolist()
    [1]
    """

    name = "epig"
    display_name = "EPIG"

    needs_stochastic = True

    def __init__(self, *, target=None, n_targets: int = 100, chunk_size: int = DEFAULT_CHUNK_SIZE,
                 n_jobs: Optional[int] = None, n_samples: Optional[int] = None):
        super().__init__(chunk_size=chunk_size, n_jobs=n_jobs, n_samples=n_samples)
        self.target = target
        self.n_targets = n_targets

    def target_inputs(self, X_pool, *, X_target=None, n_targets: Optional[int] = None, random_state=None):
        """The target inputs a query with these arguments scores against.

        Parameters
        ----------
        X_pool : array-like of shape (N, ...)
        X_target : array-like of shape (M, ...), optional
            Given targets; overrides the parameter ``target``.
        n_targets : int, optional
            Overrides the parameter ``n_targets`` when sampling from the pool.
        random_state : int, RandomState instance or None, default=None
            Seeds the draw from the pool.

        Returns
        -------
        X_target : array-like of shape (M, ...)
            The given targets, or ``min(n_targets, N)`` distinct rows of
            ``X_pool`` in pool order.

        Raises
        ------
        ValueError
            If the targets are empty or their rows do not have the pool's
            shape (or columns), or ``n_targets`` is not an int >= 1.
        """
        return self._targets(check_pool(X_pool), X_target, n_targets, random_state)

    def _targets(self, X_pool, X_target, n_targets, random_state):
        """:meth:`target_inputs` of a checked pool."""
        X_target = self.target if X_target is None else X_target
        if X_target is not None:
            return _check_target(X_target, X_pool)
        n_targets = check_positive_int(self.n_targets if n_targets is None else n_targets, "n_targets")
        rows = check_random_state(random_state).choice(len(X_pool), size=min(n_targets, len(X_pool)), replace=False)
        return take_rows(X_pool, np.sort(rows))

    def plan_chunks(self, estimator, n_instances: int, pool, *, random_state=None, n_candidates=None, **options):
        """Each chunk's best ``k`` against target inputs drawn on the client as a local query draws them
        (``n_targets`` of the rows not excluded, with ``random_state``) and sent with the model."""
        if (type(self).select is not SamplesStrategy.select or type(self).acquire is not SamplesStrategy.acquire
                or type(self).acquire_checked is not SamplesStrategy.acquire_checked):
            return super().plan_chunks(estimator, n_instances, pool, **options)
        options = dict(options)
        X_target, n_targets = options.pop("X_target", None), options.pop("n_targets", None)
        if X_target is None and self.target is None:
            n_t = check_positive_int(self.n_targets if n_targets is None else n_targets, "n_targets")
            rows = check_random_state(random_state).choice(pool.n_valid, size=min(n_t, pool.n_valid), replace=False)
            X_target = pool.rows(pool.positions_to_indices(np.sort(rows)))
        if X_target is not None:
            options["X_target"] = X_target
        return self.samples_plan(estimator, n_instances, options, measure=False)

    def acquisition_scores(self, estimator, X_pool, *, X_target=None, n_targets: Optional[int] = None,
              chunk_size: Optional[int] = None, n_jobs: Optional[int] = None, n_samples: Optional[int] = None,
              random_state=None, **kwargs) -> np.ndarray:
        """EPIG of every pool row, chunk by chunk.

        Parameters
        ----------
        estimator : estimator
            A fitted classifier whose samples can be asked to be consistent,
            read through :func:`~skdbal.predictive.as_predictive`.
        X_pool : array-like of shape (N, ...)
        X_target : array-like of shape (M, ...), optional
            Target inputs; see :meth:`target_inputs`.
        n_targets, chunk_size, n_jobs, n_samples : optional
            Override the parameters of the same names.
        random_state : int, RandomState instance or None, default=None
            Seeds the targets drawn from the pool.
        **kwargs :
            Ignored.

        Returns
        -------
        scores : ndarray of shape (N,), float64
        """
        targets = self._targets(X_pool, X_target, n_targets, random_state)  # the pool is checked
        n_samples = self.n_samples if n_samples is None else n_samples
        predictive = as_predictive(estimator, n_samples=n_samples)
        if predictive.kind != "classifier":
            raise TypeError(f"EPIG needs a classifier's probability samples; {predictive.name} is a regressor")
        if not predictive.stochastic or predictive.n_samples == 1:
            warnings.warn(f"{predictive.name} is scored with one pass, so EPIG is 0 for every point; "
                          "use an MC estimator with more than one pass", DegenerateScoreWarning, stacklevel=4)
        return map_chunks(_EPIGChunkScorer(predictive, targets), X_pool,
                          chunk_size=self.chunk_size if chunk_size is None else chunk_size,
                          n_jobs=self.n_jobs if n_jobs is None else n_jobs)


epig = register(EPIG)
