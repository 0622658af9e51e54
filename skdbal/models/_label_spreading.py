"""A head that spreads the labels over the pool's neighbour graph: the unlabelled pool used beyond the encoder.

With two labels a class, a classifier fitted on the labelled embeddings alone
knows nothing of the thousands of unlabelled points between them. Label
spreading (Zhou et al., NIPS 2003) lets each label flow along the graph of
the pool's nearest neighbours, so that a whole cluster takes the label of
the few labelled points in it. On an encoder learnt from the pool, where the
neighbours of a point are mostly of its class, this is what turns a handful of
well-placed labels (TypiClust's) into an accurate classifier.

The head reads the spread labels as evidence, as Graph Posterior Networks do
(Stadler et al., NeurIPS 2021): each row's spread label mass is a pseudo-count
per class, scaled so that the pool holds one pseudo-count a row in all, and
the row's class probabilities have the Dirichlet posterior of those counts
under a uniform prior. A row far from every label has little mass and a flat,
uncertain posterior; a row inside a labelled cluster a sharp one. Each of the
``T`` samples is one draw of that Dirichlet per row, the rows drawn
independently: the model says nothing of how two rows' errors go together, so
its samples are not consistent, and BatchBALD and EPIG, which need them to be,
refuse it; BALD, the entropy and margin scores, TypiClust and ProbCover work.

The numeric steps are plain functions over arrays (:func:`knn_affinities`,
:func:`normalized_graph`, :func:`spread_evidence`); the neighbour graph of a
pool is built once and kept for the next fit on the same pool (a refit after
each batch then costs the spreading alone).
"""
from __future__ import annotations

import numbers
from collections import OrderedDict
from typing import Any, Dict, Optional, Tuple

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array, check_is_fitted, column_or_1d, validate_data

from .._validation import check_positive_int, is_int_seed, label_columns
from ._embedding_cache import content_sha256
from ._heads import _check_classes

__all__ = ["LabelSpreadingHead", "knn_affinities", "normalized_graph", "spread_evidence"]

#: Neighbour graphs kept for the next fit: pools (content and neighbours) at most.
_KEPT_GRAPHS = 2
_graphs: "OrderedDict[Tuple[str, int], _PoolGraph]" = OrderedDict()


def knn_affinities(embedding, n_neighbors: int = 20, *, index=None) -> Tuple[np.ndarray, np.ndarray, Any]:
    """Each row's ``n_neighbors`` nearest other rows and their affinities.

    The affinity of two rows at Euclidean distance ``d`` is
    ``max(0, 1 - d² / 2)³``: for unit-length embeddings (an encoder's,
    normalised) the cube of their cosine similarity, clipped at zero; the cube
    keeps the graph's weight on the closest neighbours.

    Parameters
    ----------
    embedding : array-like of shape (n, d)
    n_neighbors : int, default=20
        At most ``n - 1``.
    index : sklearn.neighbors.NearestNeighbors, optional
        Fitted on ``embedding`` already.

    Returns
    -------
    indices : ndarray of shape (n, n_neighbors), int
        The neighbours of each row, nearest first, the row itself left out.
    affinities : ndarray of shape (n, n_neighbors), float64
    index : sklearn.neighbors.NearestNeighbors
        Fitted on ``embedding``: to find the neighbours of other rows.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.models import knn_affinities
    >>> x = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]])
    >>> indices, affinities, _ = knn_affinities(x, 1)
    >>> indices.ravel().tolist()
    [1, 2, 1]
    >>> round(float(affinities[0, 0]), 3)          # cosine 0.6, cubed
    0.216
    """
    from sklearn.neighbors import NearestNeighbors

    E = check_array(embedding, dtype=np.float32)
    k = check_positive_int(n_neighbors, "n_neighbors")
    if k > len(E) - 1:
        raise ValueError(f"n_neighbors must be at most the rows less one ({len(E) - 1}); got {n_neighbors}")
    index = index if index is not None else NearestNeighbors(n_neighbors=k + 1).fit(E)
    distances, indices = index.kneighbors(E, n_neighbors=k + 1)
    # the row itself comes first, except among exact duplicates: drop it wherever it is, else the farthest
    own = indices == np.arange(len(E))[:, None]
    drop = np.where(own.any(axis=1), own.argmax(axis=1), k)
    keep = np.ones_like(own)
    keep[np.arange(len(E)), drop] = False
    indices = indices[keep].reshape(len(E), k)
    distances = distances[keep].reshape(len(E), k).astype(np.float64)
    return indices, _affinity(distances), index


def _affinity(distances: np.ndarray) -> np.ndarray:
    return np.maximum(1.0 - distances ** 2 / 2.0, 0.0) ** 3


def normalized_graph(indices, affinities) -> sp.csr_matrix:
    """The symmetric, normalised neighbour graph ``D^-1/2 (W + Wᵀ) D^-1/2`` (Zhou et al.'s ``S``).

    Parameters
    ----------
    indices, affinities : ndarray of shape (n, k)
        From :func:`knn_affinities`.

    Returns
    -------
    scipy.sparse.csr_matrix of shape (n, n)

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.models import normalized_graph
    >>> S = normalized_graph(np.array([[1], [0]]), np.array([[1.0], [1.0]]))
    >>> S.toarray().round(6).tolist()              # two rows, each the other's neighbour
    [[0.0, 1.0], [1.0, 0.0]]
    """
    idx = np.asarray(indices)
    w = np.asarray(affinities, dtype=np.float64)
    n, k = idx.shape
    W = sp.csr_matrix((w.ravel(), (np.repeat(np.arange(n), k), idx.ravel())), shape=(n, n))
    W = (W + W.T).tocsr()
    degree = np.asarray(W.sum(axis=1)).ravel()
    scale = sp.diags(1.0 / np.sqrt(np.where(degree > 0, degree, 1.0)))
    return (scale @ W @ scale).tocsr()


def spread_evidence(graph, rows, labels, n_classes: int, *, alpha: float = 0.99, n_iter: int = 30) -> np.ndarray:
    """Label mass spread from the labelled rows along the graph: ``Σ_{t < n_iter} (α S)^t Y``.

    ``Y`` has a 1 in row ``rows[i]``, column ``labels[i]`` for each label (a
    row labelled twice counts twice). Each iteration passes the mass one step
    further and keeps a fraction ``α`` of it; ``n_iter`` steps reach nodes
    that far from a label. Normalised by rows, this is Zhou et al.'s label
    spreading truncated after ``n_iter`` steps.

    Parameters
    ----------
    graph : sparse matrix of shape (n, n)
        :func:`normalized_graph`.
    rows : array-like of int
        The labelled rows.
    labels : array-like of int
        Their classes, in ``[0, n_classes)``.
    n_classes : int
    alpha : float, default=0.99
        In ``(0, 1)``.
    n_iter : int, default=30

    Returns
    -------
    ndarray of shape (n, n_classes), float64

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.models import normalized_graph, spread_evidence
    >>> S = normalized_graph(np.array([[1], [0], [1]]), np.ones((3, 1)))    # a path 0 - 1 - 2
    >>> # W + Wᵀ has 2 on edge 0-1 and 1 on 1-2: degrees 2, 3, 1, so S[1, 0] = 2 / √6
    >>> spread_evidence(S, [0], [1], 2, alpha=0.5, n_iter=2).round(3).tolist()     # 0.5 · 2 / √6 = 0.408
    [[0.0, 1.0], [0.0, 0.408], [0.0, 0.0]]
    """
    S = sp.csr_matrix(graph)
    rows = np.asarray(rows, dtype=np.intp).reshape(-1)
    labels = np.asarray(labels, dtype=np.intp).reshape(-1)
    if not 0.0 < float(alpha) < 1.0:
        raise ValueError(f"alpha must lie in (0, 1); got {alpha!r}")
    Y = np.zeros((S.shape[0], int(n_classes)))
    np.add.at(Y, (rows, labels), 1.0)
    F, total = Y, Y.copy()
    for _ in range(check_positive_int(n_iter, "n_iter") - 1):
        F = alpha * (S @ F)
        total += F
    return total


def _unit_rows(X: np.ndarray) -> np.ndarray:
    """``X``'s rows scaled to unit length (a zero row stays zero): the graph's geometry is the cosine's."""
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return X / np.where(norms > 0, norms, 1.0)


class _PoolGraph:
    """A pool's neighbour graph (over its rows scaled to unit length), its search index, and where each of
    its rows is (by content)."""

    def __init__(self, pool: np.ndarray, n_neighbors: int):
        self.pool = pool
        self.n_neighbors = n_neighbors
        self.indices, affinities, self.index = knn_affinities(_unit_rows(pool), n_neighbors)
        self.graph = normalized_graph(self.indices, affinities)
        self.row_of: Dict[bytes, int] = {}
        for i, row in enumerate(pool):
            self.row_of.setdefault(row.tobytes(), i)

        # the rows last asked for by neighbours() (a digest), and their answer
        self._last: Optional[Tuple[str, np.ndarray, np.ndarray]] = None

    def rows(self, X: np.ndarray) -> np.ndarray:
        """Each row's position in the pool, ``-1`` where the pool has no equal row."""
        return np.array([self.row_of.get(r.tobytes(), -1) for r in X], dtype=np.intp)

    def neighbours(self, X: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """The ``n_neighbors`` nearest pool rows of each row of ``X`` and their affinities; the answer for
        the rows last asked for is kept (a test set scored after every batch is searched once)."""
        key, last = content_sha256(X), self._last        # read once: another thread may replace it
        if last is None or last[0] != key:
            distances, near = self.index.kneighbors(_unit_rows(X), n_neighbors=min(self.n_neighbors,
                                                                                  len(self.pool)))
            last = self._last = (key, near, _affinity(distances.astype(np.float64)) + 1e-12)
        return last[1], last[2]


def _graph_of(pool: np.ndarray, n_neighbors: int) -> _PoolGraph:
    key = (content_sha256(pool), n_neighbors)
    if key in _graphs:
        _graphs.move_to_end(key)
        return _graphs[key]
    graph = _PoolGraph(pool, n_neighbors)
    _graphs[key] = graph
    while len(_graphs) > _KEPT_GRAPHS:
        _graphs.popitem(last=False)
    return graph


class LabelSpreadingHead(ClassifierMixin, BaseEstimator):
    """A Bayesian head that spreads the labels over the pool's neighbour graph (the module explains the model).

    Fitted on the labelled rows' embeddings; ``pool`` gives the embeddings of
    the whole pool (labelled rows included), whose neighbour graph the labels
    spread over. The graph's geometry is the cosine's: rows are scaled to unit
    length first, so an embedding that is not normalised (principal components,
    say) is read by its directions. A labelled row is placed at the pool row equal to it, or at
    its nearest pool row if none is equal. A row to predict that is in the
    pool reads its own spread evidence; any other row the affinity-weighted
    mean of its ``n_neighbors`` nearest pool rows'.

    Parameters
    ----------
    pool : array-like of shape (n, d), optional
        The pool's embeddings. ``None``: the rows given to :meth:`fit` are the
        whole graph (no unlabelled rows to spread over).
    n_neighbors : int, default=20
        Neighbours of each row in the graph (fewer when the graph has fewer
        rows).
    alpha : float, default=0.99
        The share of label mass passed on at each step, in ``(0, 1)``.
    n_iter : int, default=30
        Steps of spreading.
    prior : float, default=1.0
        The Dirichlet prior's total pseudo-count, spread evenly over the
        classes.
    n_samples : int, default=100
        ``T`` of :meth:`predict_proba_samples`.
    classes : array-like, optional
        Every class, in order (the labels seen so far may lack some).
    random_state : int, RandomState or None
        Seeds the Dirichlet draws; with an int, every call draws the same.

    Attributes
    ----------
    classes_ : ndarray of shape (C,)
    evidence_ : ndarray of shape (n, C), float32
        The spread pseudo-counts of each graph row (they sum to ``n``).
    n_features_in_ : int

    Examples
    --------
    Two clusters, one label each: the whole cluster takes its label.

    >>> import numpy as np
    >>> from skdbal.models import LabelSpreadingHead
    >>> rng = np.random.default_rng(0)
    >>> pool = np.vstack([rng.normal(0, 0.1, (30, 2)) + [3, 0], rng.normal(0, 0.1, (30, 2)) + [0, 3]])
    >>> pool /= np.linalg.norm(pool, axis=1, keepdims=True)
    >>> head = LabelSpreadingHead(pool, n_neighbors=5, random_state=0).fit(pool[[0, 30]], [0, 1])
    >>> head.predict(pool).tolist() == [0] * 30 + [1] * 30
    True
    >>> head.predict_proba_samples(pool[:2], n_samples=4).shape
    (4, 2, 2)
    """

    def __init__(self, pool=None, *, n_neighbors: int = 20, alpha: float = 0.99, n_iter: int = 30,
                 prior: float = 1.0, n_samples: int = 100, classes=None, random_state=None):
        self.pool = pool
        self.n_neighbors = n_neighbors
        self.alpha = alpha
        self.n_iter = n_iter
        self.prior = prior
        self.n_samples = n_samples
        self.classes = classes
        self.random_state = random_state

    def _check_params(self):
        check_positive_int(self.n_neighbors, "n_neighbors")
        check_positive_int(self.n_iter, "n_iter")
        check_positive_int(self.n_samples, "n_samples")
        for name in ("alpha", "prior"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value):
                raise ValueError(f"{name} must be a finite number; got {value!r}")
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha must lie in (0, 1); got {self.alpha!r}")
        if self.prior <= 0:
            raise ValueError(f"prior must be positive; got {self.prior!r}")

    def fit(self, X, y):
        """Spread the labels ``y`` of the rows ``X`` over the pool's graph.

        Parameters
        ----------
        X : array-like of shape (N, d)
            The labelled rows' embeddings.
        y : array-like of shape (N,)

        Returns
        -------
        self
        """
        self._check_params()
        X, y = validate_data(self, X, y, dtype=np.float32, ensure_min_samples=1)
        y = column_or_1d(y, warn=True)
        check_classification_targets(y)
        classes = _check_classes(self.classes)
        self.classes_ = np.unique(y) if classes is None else classes
        if len(self.classes_) < 2:
            raise ValueError(f"LabelSpreadingHead needs at least 2 classes; y has only one class, "
                             f"{self.classes_.tolist()}: pass classes=... with every class")
        columns = label_columns(self.classes_, y)         # raises on a label outside classes
        if self.pool is None:
            pool = X
        else:
            pool = check_array(self.pool, dtype=np.float32)
            if pool.shape[1] != X.shape[1]:
                raise ValueError(f"pool has {pool.shape[1]} features and X has {X.shape[1]}: give the "
                                 "embeddings of one encoder")
        if len(pool) < 2:
            raise ValueError("LabelSpreadingHead needs a graph of at least 2 rows; give pool=...")
        graph = _graph_of(pool, min(int(self.n_neighbors), len(pool) - 1))
        rows = graph.rows(X)
        missing = rows < 0
        if missing.any():
            rows[missing] = graph.index.kneighbors(_unit_rows(X[missing]), n_neighbors=1,
                                                   return_distance=False)[:, 0]
        evidence = spread_evidence(graph.graph, rows, columns, len(self.classes_), alpha=self.alpha,
                                   n_iter=self.n_iter)
        evidence *= len(pool) / evidence.sum()        # one pseudo-count a row, in all
        self.evidence_ = evidence.astype(np.float32)
        self.graph_ = graph
        return self

    def _concentrations(self, X) -> np.ndarray:
        """The Dirichlet parameters of each row of ``X``: ``(N, C)``."""
        check_is_fitted(self, "evidence_")
        X = validate_data(self, X, reset=False, dtype=np.float32)
        graph = self.graph_
        rows = graph.rows(X)
        evidence = np.empty((len(X), len(self.classes_)), dtype=np.float64)
        known = rows >= 0
        evidence[known] = self.evidence_[rows[known]]
        if (~known).any():
            near, weights = graph.neighbours(X[~known])
            weights = weights / weights.sum(axis=1, keepdims=True)
            evidence[~known] = np.einsum("nk,nkc->nc", weights, self.evidence_[near])
        return self.prior / len(self.classes_) + evidence

    def predict_proba(self, X) -> np.ndarray:
        """The posterior mean of each row's class probabilities.

        Parameters
        ----------
        X : array-like of shape (N, d)

        Returns
        -------
        ndarray of shape (N, C), float32
        """
        a = self._concentrations(X)
        return (a / a.sum(axis=1, keepdims=True)).astype(np.float32)

    def predict_proba_samples(self, X, n_samples: Optional[int] = None) -> np.ndarray:
        """``T`` draws of each row's class probabilities from its Dirichlet posterior, rows independent.

        Parameters
        ----------
        X : array-like of shape (N, d)
        n_samples : int, optional
            ``T``; ``n_samples`` of the constructor if not given.

        Returns
        -------
        ndarray of shape (T, N, C), float32
        """
        T = check_positive_int(self.n_samples if n_samples is None else n_samples, "n_samples")
        a = self._concentrations(X).astype(np.float32)
        rs = self.random_state
        seed = int(rs) if is_int_seed(rs) else (rs.randint(2**31 - 1) if rs is not None else None)
        draws = np.random.default_rng(seed).standard_gamma(np.broadcast_to(a, (T,) + a.shape), dtype=np.float32)
        draws /= np.maximum(draws.sum(axis=2, keepdims=True), np.finfo(np.float32).tiny)
        return draws

    def predict(self, X) -> np.ndarray:
        """The most probable class under :meth:`predict_proba`.

        Parameters
        ----------
        X : array-like of shape (N, d)

        Returns
        -------
        ndarray of shape (N,)
        """
        proba = self.predict_proba(X)  # first: NotFittedError before fit, not an AttributeError on classes_
        return self.classes_[np.argmax(proba, axis=1)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = self.random_state is None
        return tags
