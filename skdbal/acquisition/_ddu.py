"""DDU's epistemic score (Mukhoti et al., CVPR 2023): the features' negative log-density."""
from __future__ import annotations

import numpy as np

from ._registry import register
from ._scoring import DEFAULT_CHUNK_SIZE, model_with
from .base import Strategy

__all__ = ["DDU", "ddu"]


class DDU(Strategy):
    """Acquire where the network's features are least dense: ``-log q(f(x))``.

    The model must have ``log_density`` (:class:`skdbal.models.DDUClassifier`,
    whose class-conditional Gaussians are fitted to the labelled points'
    features at each fit). A deterministic score from one forward pass: no
    sampling, so a tenth of BALD's cost at T = 10 or less. Being pointwise,
    it has pool scores and stacks with every decorator; its scores can be
    negative, so stochastic sampling takes ``"softmax"`` or ``"softrank"``,
    not ``"power"``.

    Parameters
    ----------
    chunk_size : int, default=DEFAULT_CHUNK_SIZE
        Rows per forward pass.

    References
    ----------
    .. [1] J. Mukhoti, A. Kirsch, J. van Amersfoort, P. H. S. Torr and Y.
       Gal, "Deep deterministic uncertainty: a new simple baseline", CVPR
       2023.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from skdbal.acquisition import ddu
    >>> from skdbal.models import DDUClassifier
    >>> class Identity(LogisticRegression):             # features: the inputs themselves
    ...     def transform(self, X):
    ...         return np.asarray(X, dtype=float)
    >>> X = np.array([[-5.0], [-4.8], [4.8], [5.0]])
    >>> model = DDUClassifier(Identity(), reg_covar=0.01).fit(X, [0, 0, 1, 1])
    >>> idx, scores = ddu(model, np.array([[-4.9], [0.0], [4.9]]), n_instances=1)
    >>> idx.tolist()                                    # the gap between the classes
    [1]
    """

    name = "ddu"
    model_kind = "density"
    display_name = "DDU"

    def __init__(self, chunk_size: int = DEFAULT_CHUNK_SIZE):
        self.chunk_size = chunk_size

    def acquisition_scores(self, estimator, X_pool, **kwargs) -> np.ndarray:
        predictive, model = model_with(estimator, "log_density")
        if not hasattr(model, "log_density"):
            raise TypeError(f"the ddu strategy reads a feature density, and {type(model).__name__} has no "
                            f"log_density: wrap the network in skdbal.models.DDUClassifier")
        out = [model.log_density(predictive.prepare(X_pool[s:s + self.chunk_size]))
               for s in range(0, len(X_pool), self.chunk_size)]
        return -np.concatenate(out)


ddu = register(DDU)
