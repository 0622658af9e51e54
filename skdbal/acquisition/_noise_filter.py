"""The label-likelihood noise filter: a strategy decorator."""
from __future__ import annotations

import warnings
from typing import Callable, Optional, Union

import numpy as np

from .. import noisy_labels as noise
from .._validation import label_columns, take_rows
from ..predictive import as_predictive
from ._chunks import ChunkScores, PointwisePlan, check_row_keyed
from ._messages import chunk_refusal
from ._registry import register
from ._scoring import DEFAULT_CHUNK_SIZE, map_chunks
from .base import (
    Acquisition,
    PoolScores,
    SamplesStrategy,
    Strategy,
    StrategyDecorator,
    acquire_among,
    as_strategy,
)

__all__ = ["NoiseFilter", "noise_filter"]

_RULES = ("dynamic", "batch", "quantile")
#: How a filled batch's warning names the trusted points and the fill.
_FILL_WORDS = ("trusted", "untrusted points whose labels the model finds most likely")


class _FilterChunk:
    """``(X_chunk, y) -> (base scores, p̄(y | x))`` from one set of samples: picklable."""

    def __init__(self, predictive, measure: Optional[Callable]):
        self.predictive = predictive
        self.measure = measure

    def __call__(self, X_chunk, y):
        P = self.predictive.proba_samples(X_chunk)
        p_label = np.asarray(P, dtype=np.float64).mean(axis=0)[np.arange(len(y)), y]
        if self.measure is None:
            return p_label
        return np.asarray(self.measure(P), dtype=np.float64), p_label


def _plain_measure(strategy) -> bool:
    """Whether ``strategy`` scores with its measure and ranks by top-k, unchanged: then the
    filter computes that measure and ``p̄(y | x)`` from the same samples. A subclass that
    overrides ``acquisition_scores`` or ``select`` is read through its own pool scores instead."""
    cls = type(strategy)
    return (isinstance(strategy, SamplesStrategy) and cls.acquisition_scores is SamplesStrategy.acquisition_scores
            and cls.select is Strategy.select)


def _inner_n_samples(strategy) -> Optional[int]:
    """The ``n_samples`` set on ``strategy`` or, down a stack of decorators, on the first that sets one."""
    while strategy is not None:
        T = getattr(strategy, "n_samples", None)
        if T is not None:
            return T
        strategy = getattr(strategy, "strategy", None) if isinstance(strategy, StrategyDecorator) else None
    return None


class NoiseFilter(StrategyDecorator):
    """Acquire what the strategy prefers among points whose label the model trusts.

    The annotator's labels of the pool, ``y_pool``, are given with the query.
    A point is trusted when the model gives its label a probability of at
    least ``τ``: ``p̄(y = y_pool | x) ≥ τ``, with ``p̄`` the mean over the
    ``T`` predictive samples. The filter walks down the wrapped strategy's
    ranking and skips untrusted points; the points it skipped are the
    query's *rejects* (``info["rejected_indices"]``, ``info["n_rejected"]``),
    and they stay in the pool, since a later model may trust them.

    For a pointwise strategy of ours (BALD, max entropy, ...) the pool is
    scored once: the wrapped score and ``p̄(y_pool | x)`` come from the same
    samples of each chunk. A strategy with pool scores of its own (a
    subclass that overrides ``acquisition_scores`` or ``select``, another filter) is
    ranked by them, and ``p̄`` takes a pass of its own. Any other strategy
    (a modAL function, BatchBALD, a diversity penalty) chooses among the
    trusted points; its rejects are then the untrusted points among what it
    would have picked unfiltered (a second call).

    Parameters
    ----------
    strategy : Strategy or callable
        The strategy to filter.
    threshold : float in (0, 1), "dynamic", "batch", "quantile" or callable, default=0.1
        ``τ``. The three rules that adapt estimate the noise rate ``ε̂`` by EM
        from the pool's labels and the current model (:mod:`skdbal.noisy_labels`),
        so they follow the model as it improves and distrust nothing on a
        clean pool. ``"dynamic"`` is the Bayes decision for one label under
        symmetric noise, ``τ = bayes_threshold(ε̂, C)``: distrust a label
        when a flip is more likely than not. ``"batch"`` is the Bayes
        decision for the batch (``batch_threshold``): a skipped point stays
        in the pool and the next one of the ranking takes its place, so it
        chooses the ``τ`` whose batch is worth the most, a point being worth
        its score above the pool's lowest times ``1 − 2·P(flipped)``; it
        needs the wrapped strategy's pool scores, and a strategy without them
        (BatchBALD, a diversity penalty, a plain callable) is refused with a
        ``ValueError`` (put the filter inside the diversity penalty instead).
        ``"quantile"`` distrusts the
        expected number of wrong labels, the fraction ``ε̂`` of the pool
        whose labels the model finds least likely
        (``quantile_threshold``). A callable is called as
        ``threshold(p_label, n_classes)`` and returns ``τ``.
    chunk_size : int, optional
        Pool rows scored at a time; by default the wrapped strategy's
        ``chunk_size`` (2,048 if it has none). A call's ``chunk_size=``
        overrides both.
    n_samples : int, optional
        Number of predictive samples ``T``, overriding the model's. By
        default the wrapped strategy's ``n_samples`` (``BALD(n_samples=50)``
        is filtered on 50 passes), else the model's; a value set on both that
        differs is a ``ValueError``. A call's ``n_samples=`` overrides both.

    Notes
    -----
    When fewer than ``n_instances`` points are trusted, the rest of the batch
    is filled with the untrusted points whose labels the model finds most
    likely, with a ``UserWarning``; ``info["n_filled"]`` counts them. A query
    never returns fewer points than asked.

    References
    ----------
    .. [1] Anonymous (candidate number 1091797), "Uncertainty in deep
       learning", anonymised report, undated (§5.1, the trust set).

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.acquisition import bald, noise_filter
    >>> class Known:
    ...     classes_ = np.array([0, 1])
    ...     def predict_proba_samples(self, X, n_samples=None):
    ...         a = np.array([0.5, 1.0, 0.2, 0.6])      # pass 1: p(class 0)
    ...         b = np.array([0.5, 0.4, 0.8, 0.6])      # pass 2
    ...         return np.stack([np.c_[a, 1 - a], np.c_[b, 1 - b]])
    >>> X, y_pool = np.zeros((4, 1)), np.array([0, 1, 1, 0])
    >>> bald(Known(), X, 1)[0].tolist()               # BALD alone: point 1
    [1]
    >>> acq = noise_filter(bald, threshold=0.4).acquire(Known(), X, 1, y_pool=y_pool)
    >>> acq.indices.tolist(), acq.info["rejected_indices"].tolist()   # p̄(y=1 | x_1) = 0.3 < 0.4
    ([2], [1])
    """

    name = "filter"
    name_params = ("threshold",)  # the parameters a name gives after the strategy: filter(bald, ...)

    def __init__(self, strategy, threshold: Union[float, str, Callable] = 0.1, *,
                 chunk_size: Optional[int] = None, n_samples: Optional[int] = None):
        super().__init__(strategy)
        self.threshold = threshold
        self.chunk_size = chunk_size
        self.n_samples = n_samples

    def check_params(self):
        t = self.threshold
        message = "threshold must be a float in (0, 1), 'dynamic', 'batch', 'quantile' or a callable; got {!r}"
        if isinstance(t, str):
            if t not in _RULES:
                raise ValueError(message.format(t))
        elif callable(t):
            return
        elif isinstance(t, bool) or not isinstance(t, (int, float, np.integer, np.floating)) or not 0 < t < 1:
            raise ValueError(message.format(t))

    def _tau(self, p_label, n_classes: int, info: dict, scores=None, order=None, n_instances=1) -> float:
        if self.threshold == "batch":  # only reached with pool scores: refused without them
            rate = noise.estimate_noise_rate(p_label, n_classes)
            info["noise_rate"] = rate
            return noise.batch_threshold(scores, p_label, rate, n_classes, n_instances, order=order)
        tau, rate = noise.trust_threshold(p_label, n_classes, self.threshold)
        if rate is not None:
            info["noise_rate"] = rate
        return tau

    def _n_samples(self, kwargs) -> Optional[int]:
        """``T`` of this query: the call's ``n_samples``, else this filter's, else the wrapped strategy's
        (the filter and its strategy read the same samples, so the two must agree)."""
        if kwargs.get("n_samples") is not None:
            return kwargs["n_samples"]
        inner = _inner_n_samples(self.strategy)
        if self.n_samples is not None and inner is not None and inner != self.n_samples:
            raise ValueError(f"noise_filter has n_samples={self.n_samples} but the strategy it wraps has "
                             f"n_samples={inner}: they read the same samples, so set T in one place")
        return self.n_samples if self.n_samples is not None else inner

    def _setup(self, estimator, X_pool, n_instances, y_pool, kwargs):
        """What a query reads besides the wrapped strategy's scores, from checked input."""
        self.check_params()
        if y_pool is None:
            raise ValueError("noise_filter needs y_pool: the annotator's labels of X_pool, row by row")
        y_pool = np.asarray(y_pool).reshape(-1)
        predictive = as_predictive(estimator, n_samples=self._n_samples(kwargs))
        if predictive.kind != "classifier":
            raise TypeError(f"noise_filter needs a classifier's probabilities; {predictive.name} is a regressor")
        y_idx = label_columns(predictive.classes, y_pool, "y_pool", classes_name="the model's classes")
        n_classes = len(predictive.classes) if predictive.classes is not None else \
            int(predictive.proba_samples(take_rows(X_pool, slice(0, 1))).shape[-1])
        return X_pool, n_instances, y_pool, predictive, y_idx, n_classes

    def pool_scores_checked(self, estimator, X_pool, n_instances: int, *, y_pool=None,
                            random_tie_break: bool = False, random_state=None, **kwargs) -> Optional[PoolScores]:
        """The wrapped strategy's pool scores, with the untrusted points made
        ineligible; None if it has no pool scores.

        For a pointwise strategy of ours, its scores and ``p̄(y_pool | x)``
        come from the same samples (one pass over the pool); for another
        strategy with pool scores, ``p̄`` takes a pass of its own.
        ``fill_priority`` is ``p̄(y_pool | x)``.
        """
        setup = self._setup(estimator, X_pool, n_instances, y_pool, kwargs)
        return self._pool_scores(estimator, setup, random_tie_break, random_state, kwargs)

    def _pool_scores(self, estimator, setup, random_tie_break, random_state, kwargs) -> Optional[PoolScores]:
        X_pool, n_instances, y_pool, predictive, y_idx, n_classes = setup
        base = as_strategy(self.strategy)
        if _plain_measure(base):  # the base's score and p̄(y | x) from the same samples, with its options
            scorer = _FilterChunk(predictive, base.measure_for(predictive))
            chunk_size = self._chunk_size(kwargs)
            n_jobs = kwargs["n_jobs"] if kwargs.get("n_jobs") is not None else getattr(base, "n_jobs", None)
            scores, p_label = map_chunks(scorer, X_pool, chunk_size=chunk_size, n_jobs=n_jobs, aligned={"y": y_idx})
            order, _ = base.select(scores, len(scores), random_tie_break=random_tie_break, random_state=random_state)
            inner = PoolScores(scores, order)
        else:
            inner = base.pool_scores_checked(estimator, X_pool, n_instances, y_pool=y_pool,
                                             random_tie_break=random_tie_break, random_state=random_state, **kwargs)
            if inner is None:
                return None
            p_label = self._p_label(predictive, X_pool, y_idx, kwargs)
        info = dict(inner.info)
        tau = self._tau(p_label, n_classes, info, inner.scores, inner.order, n_instances)
        info["threshold"] = tau
        trusted = p_label >= tau
        eligible = trusted if inner.eligible is None else trusted & inner.eligible
        return PoolScores(inner.scores, inner.order, eligible, p_label, info)

    def _chunk_size(self, kwargs) -> int:
        """Rows scored at a time: the call's ``chunk_size``, else this filter's, else its strategy's."""
        inner = getattr(as_strategy(self.strategy), "chunk_size", None)
        for value in (kwargs.get("chunk_size"), self.chunk_size, inner):
            if value is not None:
                return value
        return DEFAULT_CHUNK_SIZE

    def _p_label(self, predictive, X_pool, y_idx, kwargs) -> np.ndarray:
        return map_chunks(_FilterChunk(predictive, None), X_pool, chunk_size=self._chunk_size(kwargs),
                          aligned={"y": y_idx})

    def acquire_checked(self, estimator, X_pool, n_instances: int, *, y_pool=None, random_tie_break: bool = False,
                        random_state=None, **kwargs) -> Acquisition:
        """The wrapped strategy's choice among the trusted points (on checked input)."""
        setup = self._setup(estimator, X_pool, n_instances, y_pool, kwargs)
        ps = self._pool_scores(estimator, setup, random_tie_break, random_state, kwargs)
        if ps is None:
            return self._acquire_among_trusted(estimator, setup, random_tie_break, random_state, kwargs)
        n_instances = setup[1]
        picks = ps.order[ps.eligible[ps.order]][:n_instances]
        return ps.acquisition(picks, n_instances, "noise_filter", *_FILL_WORDS)

    def plan_chunks(self, estimator, n_instances: int, pool, **options):
        """The wrapped strategy's plan with the untrusted rows of each chunk made ineligible; the rejects
        and fill are the local query's. Needs a float threshold (the rules read ``p̄(y | x)`` of the whole
        pool at once), ``y_pool`` among the pool's aligned keywords, and a pointwise plan inside."""
        t = self.threshold
        if isinstance(t, bool) or not isinstance(t, (int, float, np.integer, np.floating)) or not 0 < t < 1:
            raise ValueError(
                f"on a pool read in chunks (a distributed pool) the noise filter needs a float threshold in (0, 1); "
                f"got {t!r}: the rules 'dynamic', 'quantile', 'batch' and a callable read p(y | x) of the whole "
                "pool at once")
        if "y_pool" not in pool.aligned:
            raise ValueError("noise_filter needs y_pool: the annotator's labels of the pool, row by row")
        base = as_strategy(self.strategy)
        inner = base.plan_chunks(estimator, n_instances, pool, **options)
        if not inner.pointwise:
            raise TypeError(chunk_refusal(base, f"on a pool read in chunks the noise filter filters a pointwise "
                                                f"strategy's scores; {type(base).__name__} chooses its batch "
                                                f"otherwise"))
        n_samples = self._n_samples(options)
        plan = _FilterPlan(self, inner, estimator, n_instances, n_samples=n_samples,
                           chunk_size=self._chunk_size(options))
        return check_row_keyed(plan, as_predictive(estimator, n_samples=n_samples))  # p̄(y | x) is sampled too

    def _acquire_among_trusted(self, estimator, setup, random_tie_break, random_state, kwargs) -> Acquisition:
        """For a strategy without pool scores (a modAL function, a joint
        selection): it chooses among the trusted points, and the rejects are
        the untrusted points among what it would choose unfiltered."""
        X_pool, n_instances, y_pool, predictive, y_idx, n_classes = setup
        base = as_strategy(self.strategy)
        if self.threshold == "batch":
            raise ValueError(
                f"threshold='batch' chooses tau from the wrapped strategy's pool scores, and "
                f"{type(base).__name__} has none (it chooses its batch jointly, or is a plain callable); "
                "use threshold='dynamic' or 'quantile', or put the filter inside: "
                "diversity_penalty(noise_filter(bald, 'batch'), w)")
        p_label = self._p_label(predictive, X_pool, y_idx, kwargs)
        info = {}
        tau = self._tau(p_label, n_classes, info)
        trusted = p_label >= tau
        call = dict(kwargs, y_pool=y_pool, random_tie_break=random_tie_break, random_state=random_state)
        unfiltered = acquire_among(base, estimator, X_pool, np.arange(len(X_pool)), n_instances, check_input=False,
                                   **call)
        rejected = unfiltered.indices[~trusted[unfiltered.indices]]
        candidates = np.flatnonzero(trusted)
        picks, pick_scores = np.arange(0, dtype=np.intp), None
        if len(candidates):
            acq = acquire_among(base, estimator, X_pool, candidates, min(n_instances, len(candidates)),
                                check_input=False, **call)
            picks, pick_scores = acq.indices, acq.scores
        # too few trusted points: the untrusted ones whose labels the model finds most likely
        by_p_label = np.argsort(-p_label, kind="stable")
        picks, n_filled = PoolScores(p_label, by_p_label, trusted, p_label, {"threshold": tau}).fill(
            picks, n_instances, "noise_filter", *_FILL_WORDS)
        if n_filled:
            rejected = np.setdiff1d(rejected, picks[-n_filled:])
            pick_scores = None
        info.update({"threshold": tau, "n_rejected": int(len(rejected)),
                     "rejected_indices": np.asarray(rejected, dtype=np.intp), "n_filled": int(n_filled)})
        return Acquisition(np.asarray(picks, dtype=np.intp), pick_scores, info)


register(NoiseFilter)


class _FilterPlan(PointwisePlan):
    """The noise filter over a pool read in chunks: each chunk's rows scored by the wrapped plan (or, for
    a pointwise strategy of ours, with ``p̄(y | x)`` from the same samples) and made ineligible where
    ``p̄(y_pool | x) < τ``; the batch, rejects and fill are then :class:`PointwisePlan`'s."""

    filtered = True
    who = "noise_filter"
    fill_words = _FILL_WORDS
    aligned_keywords = ("y_pool",)

    def __init__(self, strategy, inner, estimator, n_instances, *, n_samples, chunk_size):
        super().__init__(n_instances, strategy, estimator)
        self.inner = inner
        self.tau = float(strategy.threshold)
        self.n_samples = n_samples
        self.chunk_size = chunk_size
        self.shared = _plain_measure(as_strategy(strategy.strategy))
        self.exact = inner.exact
        self.info = {**inner.info, "threshold": self.tau}
        self.aligned_keywords = tuple(sorted({*inner.aligned_keywords, "y_pool"}))

    def score_chunk(self, chunk):
        predictive = as_predictive(self.estimator, n_samples=self.n_samples)
        y_idx = label_columns(predictive.classes, np.asarray(chunk.aligned["y_pool"]).reshape(-1), "y_pool",
                              classes_name="the model's classes")
        inner_eligible = None
        if self.shared:  # the strategy's score and p̄(y | x) from the same samples
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # said once on the client
                scorer = _FilterChunk(predictive, as_strategy(self.strategy.strategy).measure_for(predictive))
            scores, p_label = map_chunks(scorer, chunk.X, chunk_size=self.chunk_size, aligned={"y": y_idx})
        else:
            inner = self.inner.score_chunk(chunk)
            scores, inner_eligible = inner.scores, inner.eligible
            p_label = map_chunks(_FilterChunk(predictive, None), chunk.X, chunk_size=self.chunk_size,
                                 aligned={"y": y_idx})
        trusted = p_label >= self.tau
        return ChunkScores(scores, trusted if inner_eligible is None else trusted & inner_eligible, p_label)


def noise_filter(strategy, threshold: Union[float, str, Callable] = 0.1, **kwargs) -> NoiseFilter:
    """Decorate ``strategy`` with the label-likelihood noise filter.

    See :class:`NoiseFilter` for the parameters.

    Parameters
    ----------
    strategy : Strategy or callable
        The strategy to filter.
    threshold : float in (0, 1), "dynamic", "batch", "quantile" or callable, default=0.1
        The trust threshold ``τ``.
    **kwargs :
        ``chunk_size``, ``n_samples``.

    Returns
    -------
    NoiseFilter

    Examples
    --------
    >>> from skdbal.acquisition import bald, noise_filter
    >>> noise_filter(bald, "dynamic")
    NoiseFilter(strategy=BALD(), threshold='dynamic')
    """
    return NoiseFilter(strategy, threshold, **kwargs)
