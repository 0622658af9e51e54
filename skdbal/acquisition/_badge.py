"""BADGE (Ash et al., ICLR 2020): k-means++ over last-layer gradient embeddings.

BADGE: batches of diverse, uncertain gradient embeddings (Ash et al., ICLR 2020). Pure functions over arrays.

A point's *gradient embedding* is the gradient of the cross-entropy loss with
respect to the last layer's weights, taken at the label the network predicts:
for penultimate features ``h`` and probabilities ``p`` (one deterministic
pass) and the predicted class ``ŷ = argmax p``,

    g = (p - e_ŷ) ⊗ [h, 1]            (C · (d + 1) numbers; the 1 is the bias)

Its norm is large where the network is unsure (``p`` far from one-hot) and its
direction tells points apart; BADGE picks the batch by k-means++ seeding over
the embeddings, which favours both (the seeding draws each next point with
probability proportional to its squared distance from those already drawn).
"""
from __future__ import annotations

import numpy as np
from sklearn.utils import check_random_state

from ._registry import register
from ._scoring import DEFAULT_CHUNK_SIZE, model_with
from .base import Acquisition, Strategy

__all__ = ['badge_select', 'gradient_embedding', 'BADGE', 'badge']



def gradient_embedding(features, proba, *, bias: bool = True) -> np.ndarray:
    """The last layer's cross-entropy gradient at the predicted label, one row per point.

    Parameters
    ----------
    features : array-like of shape (N, d)
        Penultimate features ``h`` (the last layer's input).
    proba : array-like of shape (N, C)
        Class probabilities ``p`` of the same pass.
    bias : bool, default=True
        Include the bias's gradient (``p - e_ŷ`` itself), as a last column
        of ``h`` equal to 1.

    Returns
    -------
    ndarray of shape (N, C * (d + bias)), float32
        Row ``i`` is ``(p_i - e_ŷ_i) ⊗ [h_i, 1]``, class-major: the gradient
        with respect to ``W[c, :]`` (and ``b[c]``) for ``c = 0, 1, ...``.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.acquisition.functional import gradient_embedding
    >>> h = np.array([[2.0, -1.0]])
    >>> p = np.array([[0.75, 0.25]])                # ŷ = 0: p - e_ŷ = (-0.25, 0.25)
    >>> gradient_embedding(h, p).tolist()
    [[-0.5, 0.25, -0.25, 0.5, -0.25, 0.25]]
    >>> gradient_embedding(h, p, bias=False).tolist()
    [[-0.5, 0.25, 0.5, -0.25]]
    """
    H = np.asarray(features, dtype=np.float32)
    P = np.asarray(proba, dtype=np.float32)
    if H.ndim != 2 or P.ndim != 2 or len(H) != len(P):
        raise ValueError(f"features must be (N, d) and proba (N, C) with the same N; got {H.shape} and {P.shape}")
    if bias:
        H = np.concatenate([H, np.ones((len(H), 1), dtype=np.float32)], axis=1)
    R = P.copy()
    R[np.arange(len(P)), P.argmax(axis=1)] -= 1.0
    return (R[:, :, None] * H[:, None, :]).reshape(len(H), -1)


def badge_select(embedding, n_instances: int, *, random_state=None) -> np.ndarray:
    """``n_instances`` distinct rows of ``embedding`` by k-means++ seeding (scikit-learn's).

    :func:`sklearn.cluster.kmeans_plusplus` with one trial per center (the
    plain D² sampling of BADGE's algorithm; scikit-learn's default of
    ``2 + log k`` trials is its greedy variant). Its first center is drawn
    uniformly; BADGE's reference code takes the largest gradient norm first.
    Where the distances run out (identical embeddings), the batch is
    completed with the remaining rows of largest norm.

    Parameters
    ----------
    embedding : array-like of shape (N, D)
    n_instances : int
    random_state : int, RandomState instance or None

    Returns
    -------
    ndarray of shape (n_instances,)
        Row positions, in the order drawn.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.acquisition.functional import badge_select
    >>> G = np.array([[0.0, 0.0], [0.0, 0.01], [5.0, 0.0], [0.0, 5.0]])
    >>> picks = sorted(badge_select(G, 3, random_state=0).tolist())
    >>> picks[0] in (0, 1), picks[1:]           # one of the near pair, and the two far points
    (True, [2, 3])
    """
    from sklearn.cluster import kmeans_plusplus

    G = np.asarray(embedding, dtype=np.float64)
    k = int(n_instances)
    if G.ndim != 2 or not 1 <= k <= len(G):
        raise ValueError(f"cannot choose {k} of {len(G)} rows of an embedding of shape {G.shape}")
    rng = check_random_state(random_state)
    _, idx = kmeans_plusplus(G, n_clusters=k, random_state=rng, n_local_trials=1)
    picks = list(dict.fromkeys(int(i) for i in idx))           # distinct, in the order drawn
    if len(picks) < k:
        norms = np.linalg.norm(G, axis=1)
        rest = [int(i) for i in np.argsort(-norms, kind="stable") if int(i) not in set(picks)]
        picks += rest[:k - len(picks)]
    return np.asarray(picks, dtype=np.intp)

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
        part = predictive.prepare(X[start:start + chunk_size])
        H.append(np.asarray(model.transform(part)).reshape(len(part), -1))
        P.append(np.asarray(proba(part)))
    return np.concatenate(H), np.concatenate(P)


class BADGE(Strategy):
    """Batch Active learning by Diverse Gradient Embeddings (Ash et al., ICLR 2020).

    Each pool point is embedded as the gradient of the cross-entropy with
    respect to the last layer, at the label the network predicts
    (:func:`skdbal.acquisition.functional.gradient_embedding`: ``(p - e_ŷ) ⊗ [h, 1]`` from one
    deterministic pass, dropout off); the batch is chosen by k-means++
    seeding over the embeddings (:func:`skdbal.acquisition.functional.badge_select`, with
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

    name = "badge"
    display_name = "BADGE"

    def __init__(self, chunk_size: int = DEFAULT_CHUNK_SIZE):
        self.chunk_size = chunk_size

    def acquire_checked(self, estimator, X_pool, n_instances: int, *, random_tie_break: bool = False,
                        random_state=None, **kwargs) -> Acquisition:
        """The batch of k-means++ seeds among the gradient embeddings (on the input
        :meth:`~skdbal.acquisition.base.Strategy.acquire` checked)."""
        H, P = features_and_proba(estimator, X_pool, self.chunk_size)
        G = gradient_embedding(H, P)
        picks = badge_select(G, n_instances, random_state=random_state)
        return Acquisition(picks, np.linalg.norm(G[picks].astype(np.float64), axis=1))


badge = register(BADGE)
