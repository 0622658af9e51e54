"""Choice of the initial labelled set: random per class, or representative by k-means."""
from __future__ import annotations

from typing import Callable, Optional, Union

import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_array, column_or_1d

from ._validation import check_positive_int

__all__ = ["balanced_random", "kmeans_representative"]


def _plain(label):
    """A numpy scalar as the Python value it holds, for messages."""
    return label.item() if isinstance(label, np.generic) else label


def balanced_random(y, n_per_class: int = 2, random_state=None) -> np.ndarray:
    """Pick ``n_per_class`` random indices of every class in ``y``.

    This is the initial set of Gal et al. (2017): 2 labelled points per class.

    Parameters
    ----------
    y : array-like of shape (N,)
        Labels of the pool (known in simulation).
    n_per_class : int, default=2
        Points drawn from each class (without replacement); an int >= 1.
    random_state : int, RandomState instance or None, default=None
        Seeds the draw (:func:`sklearn.utils.check_random_state`).

    Returns
    -------
    indices : ndarray of shape (n_classes * n_per_class,)
        Sorted positions into ``y``.

    Raises
    ------
    ValueError
        If a class has fewer than ``n_per_class`` members, ``n_per_class``
        is not an int >= 1, or ``y`` is empty.

    References
    ----------
    .. [1] Y. Gal, R. Islam and Z. Ghahramani, "Deep Bayesian active learning
       with image data", ICML 2017, arXiv:1703.02910.

    Examples
    --------
    >>> from skdbal.initial import balanced_random
    >>> idx = balanced_random([0, 0, 1, 1, 1, 2, 2], n_per_class=2, random_state=0)
    >>> len(idx)
    6
    """
    y = column_or_1d(y)
    check_positive_int(n_per_class, "n_per_class")
    if len(y) == 0:
        raise ValueError("y is empty")
    rng = check_random_state(random_state)
    chosen = []
    for c in np.unique(y):
        members = np.flatnonzero(y == c)
        if len(members) < n_per_class:
            raise ValueError(
                f"class {_plain(c)!r} has {len(members)} member(s), fewer than n_per_class={n_per_class}"
            )
        chosen.append(rng.choice(members, n_per_class, replace=False))
    return np.sort(np.concatenate(chosen))


#: Above this many points, k-means runs as MiniBatchKMeans.
_MINIBATCH_ABOVE = 20_000


def _features(X, features) -> np.ndarray:
    if callable(features):
        F = features(X)
    elif features == "input":
        F = np.asarray(X)
        F = F.reshape(len(F), -1)
    else:
        raise ValueError(f"features must be 'input' or a callable; got {features!r}")
    F = check_array(F, dtype=[np.float64, np.float32], input_name="features")
    if len(F) != len(X):
        raise ValueError(f"the features have {len(F)} rows for {len(X)} inputs")
    return F


def _representatives(F, k: int, rng) -> np.ndarray:
    """The point nearest each of the ``k`` k-means centroids of ``F``, all distinct."""
    from sklearn.cluster import KMeans, MiniBatchKMeans

    seed = rng.randint(np.iinfo(np.int32).max)
    if len(F) > _MINIBATCH_ABOVE:
        km = MiniBatchKMeans(n_clusters=k, n_init=3, batch_size=4096, random_state=seed)
    else:
        km = KMeans(n_clusters=k, n_init=3, random_state=seed)
    km.fit(F)
    # squared distances of every point to every centroid, in blocks of rows
    taken = np.zeros(len(F), dtype=bool)
    chosen = []
    d = np.empty((len(F), k))
    c2 = (km.cluster_centers_ ** 2).sum(axis=1)
    for start in range(0, len(F), 8192):
        block = F[start:start + 8192]
        d[start:start + len(block)] = (block ** 2).sum(axis=1)[:, None] - 2 * block @ km.cluster_centers_.T + c2
    for j in np.argsort(np.bincount(km.labels_, minlength=k))[::-1]:  # largest clusters choose first
        order = np.argsort(d[:, j], kind="stable")
        pick = order[~taken[order]][0]
        taken[pick] = True
        chosen.append(pick)
    return np.asarray(chosen, dtype=np.intp)


def kmeans_representative(
    X,
    y=None,
    n_per_class: int = 2,
    *,
    n_clusters: Optional[int] = None,
    features: Union[str, Callable] = "input",
    random_state=None,
) -> np.ndarray:
    """Pick representative points: those nearest the k-means centroids.

    With ``y``, the initial set of Anonymous (n.d., §5.2): k-means with
    ``n_per_class`` clusters within each class, taking the point nearest
    each centroid, "the most representative samples within each class".
    That needs the labels of the whole pool, which a real user does not
    have before labelling: it is a simulation device. Without ``y``, the
    label-free version a user can run: k-means over the whole pool with
    ``n_clusters`` clusters, taking the point nearest each centroid (the
    chosen points then need labels, and may miss classes).

    Parameters
    ----------
    X : array-like of shape (N, ...)
        The pool (images or tabular rows).
    y : array-like of shape (N,), optional
        The pool's labels, for the per-class version.
    n_per_class : int, default=2
        Points per class (with ``y``).
    n_clusters : int, optional
        Points in all (without ``y``); 20 by default, the size of Gal et
        al.'s initial set. Not used with ``y``.
    features : "input" or callable, default="input"
        The space k-means runs in: the flattened inputs (as the seed), or
        ``features(X) -> (N, d)`` (for example a network's ``transform``).
    random_state : int, RandomState instance or None, default=None
        Seeds k-means.

    Returns
    -------
    indices : ndarray of int
        Sorted, distinct positions in ``X``: ``n_per_class`` per class with
        ``y``, ``n_clusters`` without.

    Raises
    ------
    ValueError
        If a class has fewer than ``n_per_class`` members, the pool has
        fewer than ``n_clusters`` points, a count is not an int >= 1,
        ``features`` is unknown, or ``X`` and ``y`` differ in length.

    Notes
    -----
    k-means is scikit-learn's :class:`~sklearn.cluster.KMeans` (``n_init=3``),
    or :class:`~sklearn.cluster.MiniBatchKMeans` above 20,000 points. When two
    centroids share their nearest point, the smaller cluster takes its next
    nearest, so the points are distinct.

    References
    ----------
    .. [1] Anonymous (candidate number 1091797), "Uncertainty in deep
       learning", anonymised report, undated (§5.2, §6.3).

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.initial import kmeans_representative
    >>> X = np.array([[0.0], [0.1], [0.2], [5.0], [5.1], [9.0], [9.2], [9.4]])
    >>> kmeans_representative(X, n_clusters=3, random_state=0).tolist()   # each cluster's middle
    [1, 3, 6]
    >>> y = np.array([0, 0, 0, 1, 1, 1, 1, 1])
    >>> kmeans_representative(X, y, n_per_class=1, random_state=0).tolist()   # class 1's mean 7.54: 9.0
    [1, 5]
    """
    X_arr = np.asarray(X) if not hasattr(X, "iloc") else X
    F = _features(X_arr, features)
    rng = check_random_state(random_state)

    if y is None:
        k = check_positive_int(20 if n_clusters is None else n_clusters, "n_clusters")
        if k > len(F):
            raise ValueError(f"n_clusters={k} is more than the {len(F)} points of the pool")
        return np.sort(_representatives(F, k, rng))
    y = column_or_1d(y)
    if len(y) != len(F):
        raise ValueError(f"X and y differ in length: {len(F)} and {len(y)}")
    k = check_positive_int(n_per_class, "n_per_class")
    chosen = []
    for c in np.unique(y):
        members = np.flatnonzero(y == c)
        if len(members) < k:
            raise ValueError(f"class {_plain(c)!r} has {len(members)} member(s), fewer than n_per_class={k}")
        chosen.append(members[_representatives(F[members], k, rng)])
    return np.sort(np.concatenate(chosen))
