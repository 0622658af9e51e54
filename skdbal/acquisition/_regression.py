"""Strategies for regressors: scores from the predictive variance."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..predictive import as_predictive
from ._base import Strategy
from ._pointwise import DEFAULT_CHUNK_SIZE, map_chunks

__all__ = ["PredictiveVariance"]


class PredictiveVariance(Strategy):
    """Regressors: pick the points with the largest total predictive variance.

    The score is the trace of the predictive covariance of ``y*`` (the
    A-optimal choice for a Bayesian linear model), read through
    :func:`skdbal.predictive.as_predictive`: ``predictive_variance(X)`` when
    the model (or the last step of a :class:`~sklearn.pipeline.Pipeline`,
    e.g. ``make_pipeline(NetFeatures(net), BayesianLinearRegression())``) has
    one, else the sum over outputs of ``predict(X, return_std=True)[1] ** 2``
    (:class:`~sklearn.linear_model.BayesianRidge`,
    :class:`~sklearn.gaussian_process.GaussianProcessRegressor`).

    Parameters
    ----------
    chunk_size : int, default=2048
        Pool rows scored at a time (may also be given per call).

    References
    ----------
    .. [1] D. J. C. MacKay, "Information-based objective functions for active
       data selection", Neural Computation 4(4), 1992.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal import BayesianLinearRegression
    >>> from skdbal.acquisition import predictive_variance
    >>> X = np.array([[0.0, 1.0], [1.0, 0.0], [10.0, 10.0]])
    >>> blr = BayesianLinearRegression().fit(X[:2], np.eye(2))
    >>> idx, scores = predictive_variance(blr, X, n_instances=1)
    >>> int(idx[0])                       # far from the training features
    2
    """

    def __init__(self, *, chunk_size: int = DEFAULT_CHUNK_SIZE):
        self.chunk_size = chunk_size

    def score(self, estimator, X_pool, *, chunk_size: Optional[int] = None, **kwargs) -> np.ndarray:
        """Total predictive variance of every pool row, shape ``(N,)``."""
        predictive = as_predictive(estimator)
        if predictive.kind != "regressor":
            raise TypeError(f"{predictive.name} is a classifier: predictive_variance needs a "
                            "probabilistic regressor such as skdbal.BayesianLinearRegression")
        return map_chunks(predictive.variance, X_pool,
                          chunk_size=self.chunk_size if chunk_size is None else chunk_size)
