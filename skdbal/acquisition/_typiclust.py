"""TypiClust (Hacohen, Dekel & Weinshall, ICML 2022): the most typical point of each of the largest uncovered clusters.

A cold-start strategy: it reads no prediction, only an embedding of the labelled and the unlabelled rows, and
suits the first labels, when a model has too few to be trusted (the paper's "low budget"). Pure functions over
arrays, and the strategy class that calls them; written from the paper and the authors' code
(``avihu111/TypiClust``, ``deep-al/pycls/al/typiclust.py``), with scikit-learn's k-means and exact
neighbours in NumPy where that code uses faiss.

The embedding a cold-start strategy reads (:func:`embedding_of`) and the labelled rows it takes into account
(:func:`labelled_rows_of`) are shared with ProbCover (:mod:`skdbal.acquisition._probcover`).
"""
from __future__ import annotations

from typing import Callable, List, Optional, Tuple, Union

import numpy as np
from sklearn.utils import check_random_state

from ._registry import register
from ._scoring import model_with
from .base import Acquisition, Strategy

__all__ = ["typicality", "typiclust_clusters", "typiclust_select", "TypiClust", "typiclust"]

#: The authors' constants: clusters of at most this many rows are left out, ...
MIN_CLUSTER_SIZE = 5
#: ... at most this many clusters, ...
MAX_NUM_CLUSTERS = 500
#: ... and typicality over this many nearest neighbours.
K_NN = 20
#: Above this many clusters the authors' code runs MiniBatchKMeans (batch_size 5000) instead of KMeans.
_FULL_KMEANS_UP_TO = 50
#: Squared-distance entries held at once when looking for neighbours (bounds memory to 32 MB).
_BLOCK = 4_000_000


def _sq_distances(A: np.ndarray, B: np.ndarray, sq_A: np.ndarray, sq_B: np.ndarray) -> np.ndarray:
    """Squared Euclidean distances between the rows of ``A`` and ``B`` (never negative)."""
    d = sq_A[:, None] + sq_B[None, :] - 2.0 * (A @ B.T)
    return np.maximum(d, 0.0, out=d)


def _as_embedding(embedding, name: str = "embedding") -> np.ndarray:
    E = np.asarray(embedding, dtype=np.float64)
    if E.ndim != 2:
        raise ValueError(f"{name} must be a 2-d array (n_rows, n_dims); got shape {E.shape}")
    if not np.isfinite(E).all():
        raise ValueError(f"{name} holds NaN or infinite values")
    return E


def typicality(embedding, n_neighbors: int = K_NN) -> np.ndarray:
    """Each row's typicality: the inverse of its mean squared distance to its ``n_neighbors`` nearest other rows.

    ``1 / (mean_{j in kNN(i)} ||x_i - x_j||² + 1e-5)``, as the authors' code computes it (faiss's
    ``IndexFlatL2`` gives squared distances; the paper writes the plain distance). Dense regions are typical.

    Parameters
    ----------
    embedding : array-like of shape (n, d)
    n_neighbors : int, default=20
        Neighbours averaged over, at most ``n - 1``; 0 gives every row the typicality 0 (no neighbour to
        be typical among: the authors' code gives NaN).

    Returns
    -------
    ndarray of shape (n,)

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.acquisition.functional import typicality
    >>> x = np.array([[0.0], [1.0], [2.0], [10.0]])
    >>> typicality(x, n_neighbors=1).round(3).tolist()          # 1/1, 1/1, 1/1, 1/64 (+ 1e-5)
    [1.0, 1.0, 1.0, 0.016]
    >>> typicality(x, n_neighbors=2).round(4).tolist()          # 1/2.5, 1/1, 1/2.5, 1/72.5
    [0.4, 1.0, 0.4, 0.0138]
    """
    E = _as_embedding(embedding)
    n, k = len(E), int(n_neighbors)
    if not 0 <= k < max(n, 1):
        raise ValueError(f"n_neighbors must lie in [0, {n - 1}] for {n} rows; got {n_neighbors!r}")
    if k == 0:
        return np.zeros(n)
    sq = np.einsum("ij,ij->i", E, E)
    mean = np.empty(n)
    step = max(1, _BLOCK // max(n, 1))
    for s in range(0, n, step):
        d = _sq_distances(E[s:s + step], E, sq[s:s + step], sq)
        d[np.arange(len(d)), np.arange(s, s + len(d))] = np.inf        # not its own neighbour
        mean[s:s + step] = np.partition(d, k - 1, axis=1)[:, :k].mean(axis=1)
    return 1.0 / (mean + 1e-5)


def typiclust_clusters(embedding, n_clusters: int, *, random_state=None) -> np.ndarray:
    """The k-means cluster of each row, as the authors' code clusters: KMeans up to 50 clusters, MiniBatchKMeans
    (batch size 5000) above, both scikit-learn's with the ``n_init`` of the versions that code was written for
    (10 and 3).

    Parameters
    ----------
    embedding : array-like of shape (n, d)
    n_clusters : int
        At most ``n``.
    random_state : int, RandomState instance or None

    Returns
    -------
    ndarray of shape (n,), int

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.acquisition.functional import typiclust_clusters
    >>> x = np.array([[0.0], [0.1], [5.0], [5.1], [5.2]])
    >>> labels = typiclust_clusters(x, 2, random_state=0)
    >>> bool(labels[0] == labels[1] != labels[2] == labels[3] == labels[4])
    True
    """
    from sklearn.cluster import KMeans, MiniBatchKMeans

    E = _as_embedding(embedding)
    k = int(n_clusters)
    if not 1 <= k <= len(E):
        raise ValueError(f"n_clusters must lie in [1, {len(E)}] for {len(E)} rows; got {n_clusters!r}")
    seed = check_random_state(random_state).randint(2**31 - 1)
    if k <= _FULL_KMEANS_UP_TO:
        km = KMeans(n_clusters=k, n_init=10, random_state=seed)
    else:
        km = MiniBatchKMeans(n_clusters=k, batch_size=5000, n_init=3, random_state=seed)
    return km.fit(E).labels_.astype(np.intp)


def typiclust_select(embedding, cluster_labels, labelled, n_instances: int, *,
                     min_cluster_size: int = MIN_CLUSTER_SIZE,
                     n_neighbors: int = K_NN) -> Tuple[np.ndarray, np.ndarray]:
    """TypiClust's batch: the most typical unlabelled row of each of the largest clusters without labels.

    The clusters with more than ``min_cluster_size`` rows (labelled ones counted) are visited in a fixed
    order, fewest labelled rows first and, among equals, largest first (then by label); each visit picks
    the most typical of the cluster's rows not yet labelled or picked (:func:`typicality` among those
    rows, over ``min(n_neighbors, m // 2)`` neighbours for ``m`` of them), and the order starts again
    when the batch is larger than the clusters, as in the authors' code. Where that code would fail,
    this goes on: a cluster with no row left is passed over, and when no cluster large enough has one,
    the small clusters are visited too, in the same order.

    Parameters
    ----------
    embedding : array-like of shape (n, d)
        Every row: the labelled ones and the candidates.
    cluster_labels : array-like of int, shape (n,)
        Each row's cluster (:func:`typiclust_clusters`).
    labelled : array-like of bool, shape (n,)
        The labelled rows, never picked.
    n_instances : int
        At most the rows not labelled.
    min_cluster_size : int, default=5
    n_neighbors : int, default=20

    Returns
    -------
    picks : ndarray of shape (n_instances,)
        Row positions, in the order picked.
    typicality : ndarray of shape (n_instances,)
        Each pick's typicality within what was left of its cluster when it was picked.

    Examples
    --------
    Six points on a line in one cluster: the most typical is the one nearest its neighbours.

    >>> import numpy as np
    >>> from skdbal.acquisition.functional import typiclust_select
    >>> x = np.array([0.0, 1.0, 3.0, 4.0, 5.0, 9.0])[:, None]
    >>> picks, typ = typiclust_select(x, np.zeros(6, int), np.zeros(6, bool), 1, min_cluster_size=0)
    >>> picks.tolist(), typ.round(3).tolist()       # k = 3: row 2's mean squared distance (1 + 4 + 4) / 3
    ([2], [0.333])
    """
    E = _as_embedding(embedding)
    labels = np.asarray(cluster_labels).astype(np.intp, copy=False).reshape(-1)
    taken = np.asarray(labelled, dtype=bool).reshape(-1).copy()
    k = int(n_instances)
    if len(labels) != len(E) or len(taken) != len(E):
        raise ValueError(f"cluster_labels and labelled must have one entry per row of the embedding ({len(E)}); "
                         f"got {len(labels)} and {len(taken)}")
    if not 1 <= k <= int((~taken).sum()):
        raise ValueError(f"n_instances must lie in [1, {int((~taken).sum())}] (the rows not labelled); got {k}")
    ids, inverse, sizes = np.unique(labels, return_inverse=True, return_counts=True)
    labelled_counts = np.bincount(inverse[taken], minlength=len(ids))
    order = np.lexsort((ids, -sizes, labelled_counts))      # fewest labelled, then largest, then by label
    visits = order[sizes[order] > int(min_cluster_size)]
    picks: List[int] = []
    scores: List[float] = []
    pos = 0
    while len(picks) < k:
        left = np.bincount(inverse[~taken], minlength=len(ids))
        if not (left[visits] > 0).any():                      # no large cluster has a row left: the small ones too
            visits, pos = order, 0
        while left[visits[pos % len(visits)]] == 0:           # passed over: no row left
            pos += 1
        cluster = visits[pos % len(visits)]
        pos += 1
        rows = np.flatnonzero((inverse == cluster) & ~taken)
        typ = typicality(E[rows], min(int(n_neighbors), len(rows) // 2))
        best = int(np.argmax(typ))
        picks.append(int(rows[best]))
        scores.append(float(typ[best]))
        taken[rows[best]] = True
    return np.asarray(picks, dtype=np.intp), np.asarray(scores)


# ------------------------------------------------------------------ what a cold-start strategy reads
_FEATURES = ("input", "embedding")


def _model_reader(features, estimator):
    """``(predictive, model)``, read once per query (:func:`~skdbal.acquisition.base.model_with`), for the
    embeddings ``features`` names; None where no model is read (a callable, or no model)."""
    if callable(features) or estimator is None:
        return None
    return model_with(estimator, "transform" if features == "embedding" else "n_features_in_")


def embedding_of(features: Union[str, Callable], reader, X) -> np.ndarray:
    """The embedding a cold-start strategy reads of the rows ``X``, float64 ``(n, d)``.

    ``"input"``: the rows as the model reads them (after a pipeline's earlier steps, such as an encoder
    before a head), or ``X`` itself when there is no model (``reader`` None); a model that says how many
    features it reads (``n_features_in_``) refuses rows of another width. ``"embedding"``: the model's
    ``transform`` (a network's penultimate features, as BADGE reads them). A callable: ``features(X)``.
    ``reader`` is :func:`_model_reader`'s.
    """
    if callable(features):
        E = np.asarray(features(X))
    elif features not in _FEATURES:
        raise ValueError(f"features must be 'input', 'embedding' or a callable; got {features!r}")
    elif reader is None:
        if features == "embedding":
            raise TypeError("features='embedding' needs a model with transform (the network's features); "
                            "there is none: use features='input' or a callable")
        E = np.asarray(X)
    else:
        predictive, model = reader
        if features == "embedding":
            if not hasattr(model, "transform"):
                raise TypeError(f"features='embedding' needs a model with transform (the network's features); "
                                f"{type(model).__name__} has none: use features='input' or a callable")
            E = np.asarray(model.transform(predictive.prepare(X)))
        else:
            E = np.asarray(predictive.prepare(X))
            expected = getattr(model, "n_features_in_", None) if not predictive.transforms else None
            if expected is not None and E.ndim == 2 and E.shape[1] != expected:
                raise ValueError(f"X has {E.shape[1]} features, but {type(model).__name__} is expecting "
                                 f"{expected} features as input")
    E = E.reshape(len(E), -1)
    if len(E) != len(X):
        raise ValueError(f"the embedding has {len(E)} rows for {len(X)} rows of the pool")
    if not np.issubdtype(E.dtype, np.number):
        raise TypeError(f"the embedding must be numeric; got dtype {E.dtype}")
    return E.astype(np.float64, copy=False)


def labelled_rows_of(estimator, X_labelled=None):
    """The labelled rows a cold-start strategy takes into account: ``X_labelled`` when given, else the
    labelled set of a learner (:class:`~skdbal.ActiveLearner`'s ``X_training_``, a modAL learner's
    ``X_training``), else none (None)."""
    if X_labelled is not None:
        return X_labelled
    for name in ("X_training_", "X_training"):
        rows = getattr(estimator, name, None)
        if rows is not None and len(rows):
            return rows
    return None


def cold_start_rows(features, normalize: bool, estimator, X_pool, X_labelled):
    """``(E, n_labelled, reader)``: the embedding of the labelled rows, then of the pool's, one array (the
    authors' order: labelled first), rows scaled to unit length with ``normalize``, as the authors' features
    are; and :func:`_model_reader`'s ``(predictive, model)`` (None without one), the model read once."""
    reader = _model_reader(features, estimator)
    E_pool = embedding_of(features, reader, X_pool)
    rows = labelled_rows_of(estimator, X_labelled)
    if rows is None or len(rows) == 0:
        E = E_pool
        n_labelled = 0
    else:
        E_lab = embedding_of(features, reader, rows)
        if E_lab.shape[1:] != E_pool.shape[1:]:
            raise ValueError(f"the labelled rows' embedding has {E_lab.shape[1]} dimensions and the pool's "
                             f"{E_pool.shape[1]}")
        E, n_labelled = np.concatenate([E_lab, E_pool]), len(E_lab)
    if not np.isfinite(E).all():
        raise ValueError("the embedding holds NaN or infinite values")
    if normalize:
        norms = np.linalg.norm(E, axis=1, keepdims=True)
        E = E / np.where(norms > 0, norms, 1.0)
    return E, n_labelled, reader


def _check_features(features) -> None:
    if not callable(features) and features not in _FEATURES:
        raise ValueError(f"features must be 'input', 'embedding' or a callable; got {features!r}")


class TypiClust(Strategy):
    """TypiClust (Hacohen, Dekel & Weinshall, ICML 2022): typical points of the largest uncovered clusters.

    A cold-start strategy for the first labels. The labelled and unlabelled rows' embedding is cut into
    ``min(n_labelled + n_instances, max_clusters)`` k-means clusters
    (:func:`~skdbal.acquisition.functional.typiclust_clusters`); the batch takes, from each of the clusters
    with fewest labelled rows and, among those, the largest, its most typical unlabelled row
    (:func:`~skdbal.acquisition.functional.typiclust_select`): the one of smallest mean squared distance to
    its 20 nearest neighbours in the cluster (:func:`~skdbal.acquisition.functional.typicality`). No
    prediction is read, so the batch is the same whatever the model has learnt.

    **The embedding** is read through the predictive interface, as BADGE reads its gradient embedding:
    by default (``features="input"``) the rows as the model reads them, so that for a pipeline of an
    encoder and a head it is the encoder's embedding, and for a model on precomputed embeddings the
    embeddings themselves; ``estimator`` may be None, the pool's rows then being the embedding.
    ``"embedding"`` reads the model's own ``transform`` (a network's penultimate features), and a callable
    ``features(X) -> (n, d)`` any encoder of your own.

    **The labelled rows** are those of the learner the strategy is called with
    (:class:`~skdbal.ActiveLearner`'s ``X_training_``, a modAL learner's ``X_training``), or the
    ``X_labelled`` keyword of a call; a bare model keeps no labelled rows, and the pool is then clustered
    alone, as for the very first batch.

    Parameters
    ----------
    features : "input", "embedding" or callable, default="input"
        The embedding, as above.
    normalize : bool, default=True
        Scale each row of the embedding to unit length first, as the authors' features are.
    n_neighbors : int, default=20
        Neighbours of the typicality (the authors' ``K_NN``).
    min_cluster_size : int, default=5
        Clusters of at most this many rows are passed over while larger ones have rows left (the
        authors' ``MIN_CLUSTER_SIZE``).
    max_clusters : int, default=500
        The most clusters (the authors' ``MAX_NUM_CLUSTERS``).

    Notes
    -----
    The batch is chosen jointly: TypiClust has no pool scores, and the scores returned are the picks'
    typicalities. Given the same clusters, the batch is the authors' code's wherever that code completes
    it. The differences: the k-means runs on the labelled rows and the pool given (theirs on the whole
    training set; scikit-learn's k-means both, with the same switch to MiniBatchKMeans above 50
    clusters, seeded here by ``random_state``); the neighbours are exact, computed in NumPy, where theirs
    are faiss's on a GPU; labelled rows are counted per cluster label (theirs assume every label
    occurs); and a batch their code could not complete (a cluster with no row left, or no cluster above
    ``min_cluster_size``) is completed as :func:`~skdbal.acquisition.functional.typiclust_select` says.
    The k-means holds the whole embedding in memory; ``pool_subsample`` bounds it.

    References
    ----------
    .. [1] G. Hacohen, A. Dekel and D. Weinshall, "Active learning on a budget: opposite strategies suit
       high and low budgets", ICML 2022, arXiv:2202.02794.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.acquisition import typiclust
    >>> rng = np.random.RandomState(0)
    >>> X = np.concatenate([rng.normal(0, 1, (60, 2)), rng.normal(8, 1, (30, 2))])   # two blobs
    >>> idx, typ = typiclust(None, X, n_instances=2, random_state=0, normalize=False)
    >>> sorted(bool(i < 60) for i in idx)                # one typical point of each blob
    [False, True]
    >>> idx3, _ = typiclust(None, X, n_instances=1, random_state=0, normalize=False,
    ...                     X_labelled=X[:1])           # the first blob has a label: the second's turn
    >>> bool(idx3[0] >= 60)
    True
    """

    name = "typiclust"
    display_name = "TypiClust"

    def __init__(self, features: Union[str, Callable] = "input", *, normalize: bool = True,
                 n_neighbors: int = K_NN, min_cluster_size: int = MIN_CLUSTER_SIZE,
                 max_clusters: int = MAX_NUM_CLUSTERS):
        self.features = features
        self.normalize = normalize
        self.n_neighbors = n_neighbors
        self.min_cluster_size = min_cluster_size
        self.max_clusters = max_clusters

    def _check_params(self) -> None:
        from .._validation import check_positive_int

        _check_features(self.features)
        check_positive_int(self.n_neighbors, "n_neighbors")
        check_positive_int(self.max_clusters, "max_clusters")
        if not isinstance(self.min_cluster_size, (int, np.integer)) or self.min_cluster_size < 0:
            raise ValueError(f"min_cluster_size must be an int >= 0; got {self.min_cluster_size!r}")

    def acquire_checked(self, estimator, X_pool, n_instances: int, *, random_tie_break: bool = False,
                        random_state=None, X_labelled=None, normalize: Optional[bool] = None,
                        **kwargs) -> Acquisition:
        """TypiClust's batch (on the input :meth:`~skdbal.acquisition.base.Strategy.acquire` checked).

        ``X_labelled`` (rows like the pool's) gives the labelled rows instead of the learner's;
        ``normalize`` overrides the parameter of that name; ``random_tie_break`` is not used (ties go to
        the first row, labelled rows first, as in the authors' code)."""
        self._check_params()
        normalize = self.normalize if normalize is None else normalize
        E, n_lab, _ = cold_start_rows(self.features, normalize, estimator, X_pool, X_labelled)
        n_clusters = min(n_lab + int(n_instances), int(self.max_clusters), len(E))
        labels = typiclust_clusters(E, n_clusters, random_state=random_state)
        labelled = np.zeros(len(E), dtype=bool)
        labelled[:n_lab] = True
        picks, typ = typiclust_select(E, labels, labelled, n_instances, min_cluster_size=self.min_cluster_size,
                                      n_neighbors=self.n_neighbors)
        return Acquisition(picks - n_lab, typ, {"n_clusters": int(n_clusters)})


typiclust = register(TypiClust)
