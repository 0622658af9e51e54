"""Scoring a pool in chunks: :func:`map_chunks`, the chunk size and the warning of scores that say nothing; and
:func:`model_with`, the model behind an estimator that has the method a strategy reads.

Private: public from :mod:`skdbal.acquisition.base`."""
from __future__ import annotations

from typing import Callable, Dict, Optional

import numpy as np

from .._validation import check_positive_int, take_rows
from ..predictive import Predictive, as_predictive

__all__ = ["DEFAULT_CHUNK_SIZE", "DegenerateScoreWarning", "map_chunks"]

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


def model_with(estimator, method: str):
    """``(predictive, model)``: the predictive view of ``estimator`` and the model behind it that has
    ``method`` (a learner's fitted ``estimator_`` when the learner itself has none); ``model`` lacks
    ``method`` if neither has it, for the caller to say why it needs it."""
    predictive = as_predictive(estimator)
    model = predictive.model
    if not hasattr(model, method) and hasattr(getattr(model, "estimator_", None), method):
        model = model.estimator_  # a learner: its fitted model
    return predictive, model
