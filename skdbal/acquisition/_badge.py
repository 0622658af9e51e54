"""BADGE (Ash et al., ICLR 2020): k-means++ over last-layer gradient embeddings."""
from __future__ import annotations

import numpy as np

from .. import badge
from .._validation import check_n_instances, check_pool, pool_kwargs
from ._base import Acquisition, Strategy, check_options
from ._diversity import model_with
from ._pointwise import DEFAULT_CHUNK_SIZE

__all__ = ["BADGE"]


def features_and_proba(estimator, X, chunk_size: int = DEFAULT_CHUNK_SIZE):
    """The deterministic network's penultimate features and class probabilities of ``X``:
    ``model.transform`` and ``model.predict_proba_deterministic`` (else ``predict_proba``),
    in chunks of ``chunk_size`` rows.

    Raises
    ------
    TypeError
        If the model has no ``transform`` (a network's features).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.decomposition import PCA
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.pipeline import make_pipeline
    >>> from skdbal.acquisition._badge import features_and_proba
    >>> class Net(LogisticRegression):          # a model with features: here its inputs
    ...     def transform(self, X):
    ...         return np.asarray(X)
    >>> X = np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 2.0]])
    >>> H, P = features_and_proba(Net().fit(X, [0, 1, 1]), X)
    >>> H.shape, P.shape
    ((3, 2), (3, 2))
    """
    predictive, model = model_with(estimator, "transform")
    if not hasattr(model, "transform"):
        raise TypeError(f"{type(model).__name__} has no transform (a network's penultimate features), which "
                        f"BADGE and DDU read: use one of skdbal's networks (MCDropoutClassifier)")
    proba = getattr(model, "predict_proba_deterministic", None) or model.predict_proba
    H, P = [], []
    for start in range(0, len(X), chunk_size):
        part = predictive._prepare(X[start:start + chunk_size])
        H.append(np.asarray(model.transform(part)).reshape(len(part), -1))
        P.append(np.asarray(proba(part)))
    return np.concatenate(H), np.concatenate(P)


class BADGE(Strategy):
    """Batch Active learning by Diverse Gradient Embeddings (Ash et al., ICLR 2020).

    Each pool point is embedded as the gradient of the cross-entropy with
    respect to the last layer, at the label the network predicts
    (:func:`skdbal.badge.gradient_embedding`: ``(p - e_ŷ) ⊗ [h, 1]`` from one
    deterministic pass, dropout off); the batch is chosen by k-means++
    seeding over the embeddings (:func:`skdbal.badge.badge_select`, with
    scikit-learn's :func:`~sklearn.cluster.kmeans_plusplus`). Large
    gradients are uncertain points, far-apart ones are diverse: both are
    favoured, in one forward pass and no sampling.

    Parameters
    ----------
    chunk_size : int, default=DEFAULT_CHUNK_SIZE
        Rows per forward pass.

    Notes
    -----
    The batch is chosen jointly, so BADGE has no pool scores: the noise
    filter wraps it by choosing among the trusted points; the diversity
    penalty and stochastic sampling do not apply. The scores returned are
    the picks' gradient norms. The embeddings of the whole pool are held
    in memory (``N · C · (d + 1)`` float32: 80 MB for 15,000 points of a
    10-class net with 128 features); ``pool_subsample`` bounds them.

    References
    ----------
    .. [1] J. T. Ash, C. Zhang, A. Krishnamurthy, J. Langford and A. Agarwal,
       "Deep batch active learning by diverse, uncertain gradient lower
       bounds", ICLR 2020.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import load_digits
    >>> from skdbal import MCDropoutClassifier
    >>> from skdbal.acquisition import badge
    >>> X, y = load_digits(return_X_y=True)
    >>> X = (X / 16).reshape(-1, 8, 8).astype("float32")
    >>> net = MCDropoutClassifier(classes=np.arange(10), module__kernel_size=3, max_epochs=3,
    ...                           random_state=0).fit(X[:100], y[:100])
    >>> idx, norms = badge(net, X[100:400], n_instances=5, random_state=0)
    >>> len(set(idx.tolist())), bool(np.all(norms >= 0))
    (5, True)
    >>> np.array_equal(idx, badge(net, X[100:400], n_instances=5, random_state=0)[0])     # seeded
    True
    """

    def __init__(self, chunk_size: int = DEFAULT_CHUNK_SIZE):
        self.chunk_size = chunk_size

    def acquire(self, estimator, X_pool, n_instances: int = 1, *, random_tie_break: bool = False,
                random_state=None, **kwargs) -> Acquisition:
        check_options(self, kwargs)
        X_pool = check_pool(X_pool)
        n_instances = check_n_instances(n_instances, len(X_pool))
        pool_kwargs(kwargs, len(X_pool))
        H, P = features_and_proba(estimator, X_pool, self.chunk_size)
        G = badge.gradient_embedding(H, P)
        picks = badge.badge_select(G, n_instances, random_state=random_state)
        return Acquisition(picks, np.linalg.norm(G[picks].astype(np.float64), axis=1))
