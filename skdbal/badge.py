"""BADGE: batches of diverse, uncertain gradient embeddings (Ash et al., ICLR 2020). Pure functions over arrays.

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

__all__ = ["badge_select", "gradient_embedding"]


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
    >>> from skdbal.badge import gradient_embedding
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
    >>> from skdbal.badge import badge_select
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
