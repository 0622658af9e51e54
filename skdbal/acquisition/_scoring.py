"""Scoring a pool in chunks: the bases of strategies that read predictive samples."""
from __future__ import annotations

import warnings
from typing import Callable, Dict, Optional

import numpy as np

from .._validation import check_pool, check_positive_int, take_rows
from ..predictive import Predictive, as_predictive
from ._chunks import PointwisePlan, check_row_keyed
from ._strategy import Strategy

__all__ = ["DEFAULT_CHUNK_SIZE", "DegenerateScoreWarning", "map_chunks", "score_pool", "SamplesStrategy",
           "MeasureStrategy"]

DEFAULT_CHUNK_SIZE = 2048


class DegenerateScoreWarning(UserWarning):
    """A score is constant because the estimator gives only one pass (T=1).

    Raised by :class:`SamplesStrategy` when a deterministic model (a plain
    classifier, or an MC estimator with ``mc_dropout=False``) is scored by a
    measure that needs ``T > 1`` passes, such as :class:`BALD`'s.

    Examples
    --------
    >>> import warnings
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from skdbal.acquisition import BALD
    >>> from skdbal.acquisition.base import DegenerateScoreWarning
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0]])
    >>> clf = LogisticRegression().fit(X, [0, 0, 1, 1])     # one deterministic pass
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     scores = BALD().acquisition_scores(clf, X)
    >>> scores.tolist(), [w.category is DegenerateScoreWarning for w in caught]
    ([0.0, 0.0, 0.0, 0.0], [True])
    """


def map_chunks(
    fn: Callable,
    X_pool,
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    n_jobs: Optional[int] = None,
    aligned: Optional[Dict] = None,
):
    """Apply ``fn`` to the pool ``chunk_size`` rows at a time and concatenate.

    Parameters
    ----------
    fn : callable
        ``fn(X_chunk, **aligned_chunk) -> ndarray`` of one value per row, or a
        tuple of such arrays. With ``n_jobs`` it must pickle.
    X_pool : array-like of shape (N, ...)
    chunk_size : int, default=2048
        Rows per call; bounds memory.
    n_jobs : int, optional
        Run chunks in parallel with joblib (processes by default; inside
        ``joblib.parallel_backend("dask")`` on a dask cluster). Results are
        those of a serial run.
    aligned : dict, optional
        Arrays aligned with the pool (``y_pool``), passed to ``fn`` sliced
        like ``X_pool``.

    Returns
    -------
    ndarray of shape (N,), or a tuple of them

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.acquisition.base import map_chunks
    >>> map_chunks(lambda X, y: X[:, 0] * y, np.arange(5.0)[:, None], chunk_size=2,
    ...            aligned={"y": np.arange(5)}).tolist()
    [0.0, 1.0, 4.0, 9.0, 16.0]
    """
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    aligned = {k: np.asarray(v) for k, v in (aligned or {}).items()}
    slices = [slice(s, s + chunk_size) for s in range(0, len(X_pool), chunk_size)]
    if n_jobs is None or n_jobs == 1:
        parts = [fn(take_rows(X_pool, sl), **{k: v[sl] for k, v in aligned.items()}) for sl in slices]
    else:
        from joblib import Parallel, delayed

        parts = Parallel(n_jobs=n_jobs)(
            delayed(fn)(take_rows(X_pool, sl), **{k: v[sl] for k, v in aligned.items()}) for sl in slices)
    if isinstance(parts[0], tuple):
        return tuple(np.concatenate(p) for p in zip(*parts))
    return np.concatenate(parts)


def _unbound(fn, owner):
    return fn.__func__ if getattr(fn, "__self__", None) is owner else fn


class _ChunkScorer:
    """``X_chunk -> measure(samples)``: picklable, for joblib workers."""

    def __init__(self, predictive: Predictive, measure: Callable):
        self.predictive = predictive
        self.measure = measure

    def __call__(self, X_chunk) -> np.ndarray:
        return np.asarray(self.measure(self.predictive.proba_samples(X_chunk)), dtype=np.float64)


class SamplesStrategy(Strategy):
    """Base class: score each pool point by a measure of its predictive samples.

    The pool is read in chunks of ``chunk_size`` rows, so the ``(T, N, C)``
    samples never exist for the whole pool; each chunk's samples come from
    :meth:`skdbal.predictive.Predictive.proba_samples`. Subclasses set:

    ``measure``
        ``(T, n, C) -> (n,)``, larger is more informative (a function of
        :mod:`skdbal.uncertainty`).
    ``deterministic_measure``
        Used instead for a deterministic model (one pass), or None.
    ``needs_stochastic``
        Warn with :class:`DegenerateScoreWarning` when a deterministic model
        is scored by ``measure`` (it is then constant).

    Parameters
    ----------
    chunk_size : int, default=2048
        Pool rows scored at a time; bounds memory to ``T · chunk_size · C``
        floats (per worker).
    n_jobs : int, optional
        Chunks scored in parallel with joblib. Each chunk is seeded as in a
        serial call, so the scores do not depend on ``n_jobs``.
    n_samples : int, optional
        Number of passes ``T``, overriding the model's own.

    Each of these may also be given when calling the strategy, which
    overrides the value set here.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.acquisition.base import SamplesStrategy
    >>> from skdbal.uncertainty import least_confidence
    >>> class LeastConfidence(SamplesStrategy):
    ...     measure = staticmethod(least_confidence)
    ...     needs_stochastic = False            # meaningful for one pass too
    >>> class Fixed:                            # a deterministic classifier
    ...     def predict_proba(self, X):
    ...         return np.array([[0.9, 0.1], [0.5, 0.5], [1.0, 0.0]])
    >>> LeastConfidence().acquisition_scores(Fixed(), np.zeros((3, 1))).round(4).tolist()
    [0.1, 0.5, 0.0]
    >>> LeastConfidence()(Fixed(), np.zeros((3, 1)), n_instances=1)[0].tolist()
    [1]
    """

    measure: Callable = None
    deterministic_measure: Optional[Callable] = None
    needs_stochastic: bool = True

    def __init__(self, *, chunk_size: int = DEFAULT_CHUNK_SIZE, n_jobs: Optional[int] = None,
                 n_samples: Optional[int] = None):
        self.chunk_size = chunk_size
        self.n_jobs = n_jobs
        self.n_samples = n_samples

    def measure_for(self, predictive: Predictive) -> Callable:
        """The measure that scores ``predictive``'s samples (warns if it is constant)."""
        # a function set on a subclass without staticmethod is bound to self: unbind it
        measure = _unbound(self.measure, self)
        if predictive.stochastic and predictive.n_samples == 1 and self.needs_stochastic:
            warnings.warn(
                f"n_samples=1: {predictive.name} is scored with one pass, so "
                f"{getattr(measure, '__name__', 'this score')} is the same for every point; ask for more passes",
                DegenerateScoreWarning, stacklevel=5)
        if not predictive.stochastic:
            if self.deterministic_measure is not None:
                return _unbound(self.deterministic_measure, self)
            if self.needs_stochastic:
                warnings.warn(
                    f"{predictive.name} gives one deterministic pass, so it is scored as T=1 and "
                    f"{getattr(measure, '__name__', 'this score')} is the same for every point; "
                    "use an MC estimator", DegenerateScoreWarning, stacklevel=5)
        return measure

    def acquisition_scores(self, estimator, X_pool, *, chunk_size: Optional[int] = None, n_jobs: Optional[int] = None,
              n_samples: Optional[int] = None, **kwargs) -> np.ndarray:
        """Scores of every pool row, chunk by chunk.

        Parameters
        ----------
        estimator : estimator
            A fitted model, read through :func:`~skdbal.predictive.as_predictive`.
        X_pool : array-like of shape (N, ...)
        chunk_size, n_jobs, n_samples : optional
            Override the parameters of the same names.
        **kwargs :
            Ignored.

        Returns
        -------
        scores : ndarray of shape (N,), float64
        """
        n_samples = self.n_samples if n_samples is None else n_samples
        predictive = as_predictive(estimator, n_samples=n_samples)
        scorer = _ChunkScorer(predictive, self.measure_for(predictive))
        return map_chunks(scorer, X_pool, chunk_size=self.chunk_size if chunk_size is None else chunk_size,
                          n_jobs=self.n_jobs if n_jobs is None else n_jobs)

    def plan_chunks(self, estimator, n_instances: int, pool, *, random_state=None, n_candidates=None, **options):
        """The top ``k`` of a score per row: each chunk sends its best ``k``
        (:class:`~skdbal.acquisition.base.PointwisePlan`), so a strategy of
        your own runs on a cluster as it is. Refused for a subclass that
        overrides ``select`` or ``acquire`` (its batch is not the top ``k``).

        A model whose samples of a row depend on the other rows sampled with
        it (not row-keyed, :mod:`skdbal.predictive`) gives picks that change
        with the chunking: the plan is not ``exact``, with a warning.
        """
        if type(self).select is not Strategy.select or type(self).acquire is not Strategy.acquire:
            return super().plan_chunks(estimator, n_instances, pool, **options)
        return self._samples_plan(estimator, n_instances, options)

    def _samples_plan(self, estimator, n_instances, options, *, row_keyed=True, measure=True) -> PointwisePlan:
        """The plan that scores chunks with :meth:`acquisition_scores` and ``options``; its warnings said once, here:
        a constant score (``measure``), and samples that are not row-keyed (``row_keyed``)."""
        predictive = as_predictive(estimator, n_samples=options["n_samples"] if "n_samples" in options
                                   else self.n_samples)
        if measure:
            self.measure_for(predictive)
        plan = PointwisePlan(n_instances, self, estimator, dict(options, n_jobs=None))
        if row_keyed:
            check_row_keyed(plan, predictive)
        return plan


class MeasureStrategy(SamplesStrategy):
    """A pointwise strategy from any measure of the samples: write your own.

    Parameters
    ----------
    measure : callable
        ``(T, n, C) -> (n,)``, larger is more informative.
    deterministic_measure : callable, optional
        Used instead for a deterministic model (one pass).
    needs_stochastic : bool, default=True
        Warn when a deterministic model is scored by ``measure``.
    chunk_size, n_jobs, n_samples :
        As for :class:`SamplesStrategy`.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from skdbal.acquisition.base import MeasureStrategy
    >>> from skdbal.uncertainty import predictive_entropy
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0]])
    >>> clf = LogisticRegression().fit(X, [0, 0, 1, 1])
    >>> entropy_sampling = MeasureStrategy(predictive_entropy, needs_stochastic=False)
    >>> idx, _ = entropy_sampling(clf, X, n_instances=2)
    >>> sorted(idx.tolist())                 # the two points next to the boundary
    [1, 2]
    """

    def __init__(self, measure: Callable, *, deterministic_measure: Optional[Callable] = None,
                 needs_stochastic: bool = True, chunk_size: int = DEFAULT_CHUNK_SIZE,
                 n_jobs: Optional[int] = None, n_samples: Optional[int] = None):
        super().__init__(chunk_size=chunk_size, n_jobs=n_jobs, n_samples=n_samples)
        self.measure = measure
        self.deterministic_measure = deterministic_measure
        self.needs_stochastic = needs_stochastic




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
    >>> from skdbal.acquisition.base import score_pool
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
