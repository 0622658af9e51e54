"""ProbCover (Yehuda, Dekel, Hacohen & Weinshall, NeurIPS 2022): the batch whose δ-balls cover most of the pool.

A cold-start strategy, like TypiClust (:mod:`skdbal.acquisition._typiclust`, whose embedding and labelled rows
it reads): every row is the centre of a ball of radius ``δ`` in the embedding, and the batch is chosen greedily
to cover the most rows not yet covered, the labelled rows' balls counting as covered from the start. ``δ`` is
chosen by purity: the largest radius at which at least ``α = 0.95`` of the balls hold rows of one k-means
cluster only. Pure functions over arrays, and the strategy class that calls them; written from the paper and
the authors' code (``avihu111/TypiClust``, ``deep-al/pycls/al/prob_cover.py``).
"""
from __future__ import annotations

import math
from typing import Callable, List, Optional, Tuple, Union

import numpy as np
from sklearn.utils import check_random_state

from ._registry import register
from ._typiclust import _BLOCK, _as_embedding, _check_features, _sq_distances, cold_start_rows, typiclust_clusters
from .base import Acquisition, Strategy

__all__ = ["probcover_graph", "probcover_select", "ball_purity", "probcover_delta", "ProbCover", "probcover"]

#: The purity the radius keeps, the paper's α.
ALPHA = 0.95


def _check_delta(delta) -> float:
    d = float(delta)
    if not d > 0 or math.isnan(d):
        raise ValueError(f"delta must be a radius > 0; got {delta!r}")
    return d


def probcover_graph(embedding, delta: float):
    """The δ-ball graph: an edge ``x → y`` wherever ``||x - y|| < δ`` (each row in its own ball).

    Parameters
    ----------
    embedding : array-like of shape (n, d)
    delta : float
        The radius, > 0 (``inf``: every row in every ball).

    Returns
    -------
    scipy.sparse.csr_matrix of shape (n, n), bool
        Row ``x`` holds the rows in ``x``'s ball.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.acquisition.functional import probcover_graph
    >>> x = np.array([[0.0], [1.0], [2.0], [5.0]])
    >>> probcover_graph(x, 1.5).toarray().astype(int).tolist()      # 1 < 1.5, 2 is not
    [[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 0], [0, 0, 0, 1]]
    >>> int(probcover_graph(x, 1.0).nnz)                              # strictly inside: only the centres
    4
    """
    from scipy import sparse

    E = _as_embedding(embedding)
    radius = _check_delta(delta)
    n = len(E)
    sq = np.einsum("ij,ij->i", E, E)
    rows, cols = [], []
    step = max(1, _BLOCK // max(n, 1))
    for s in range(0, n, step):
        d = _sq_distances(E[s:s + step], E, sq[s:s + step], sq)
        d[np.arange(len(d)), np.arange(s, s + len(d))] = 0.0          # a centre is in its ball, round-off aside
        x, y = np.nonzero(np.sqrt(d, out=d) < radius)     # distances as probcover_delta computes them
        rows.append(x + s)
        cols.append(y)
    x, y = np.concatenate(rows), np.concatenate(cols)
    return sparse.csr_matrix((np.ones(len(x), dtype=bool), (x, y)), shape=(n, n))


def probcover_select(graph, labelled, n_instances: int, *, random_state=None) -> Tuple[np.ndarray, np.ndarray]:
    """ProbCover's greedy max coverage on a δ-ball graph.

    The rows in a labelled row's ball are covered from the start. Each pick is the row whose ball holds the
    most rows not yet covered (the first such row on a tie, labelled rows first in the authors' order),
    which then covers them. Once no ball holds an uncovered row, the rest of the batch is drawn uniformly
    from the rows not labelled or picked, seeded by ``random_state`` (the authors' code would pick row 0
    again: a labelled row, or one it has picked).

    Parameters
    ----------
    graph : sparse matrix of shape (n, n)
        :func:`probcover_graph`'s: row ``x`` holds the rows in ``x``'s ball.
    labelled : array-like of bool, shape (n,)
        The labelled rows, never picked.
    n_instances : int
        At most the rows not labelled.
    random_state : int, RandomState instance or None
        Seeds the draw once everything is covered.

    Returns
    -------
    picks : ndarray of shape (n_instances,)
        Row positions, in the order picked.
    gains : ndarray of shape (n_instances,)
        The rows each pick newly covered (0 for a drawn one).

    Examples
    --------
    Six points on a line, δ = 1.5 (each ball holds its neighbours at distance 1):

    >>> import numpy as np
    >>> from skdbal.acquisition.functional import probcover_graph, probcover_select
    >>> x = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 10.0])[:, None]
    >>> A = probcover_graph(x, 1.5)
    >>> picks, gains = probcover_select(A, np.zeros(6, bool), 2)
    >>> picks.tolist(), gains.tolist()        # row 1 covers 0, 1, 2; then row 3 covers 3 and 4
    ([1, 3], [3.0, 2.0])
    >>> labelled = np.array([False, False, False, False, True, False])    # row 4 covers 3 and 4 already
    >>> probcover_select(A, labelled, 2)[0].tolist()
    [1, 5]
    """
    from scipy import sparse

    A = sparse.csr_matrix(graph, dtype=np.int64)
    n = A.shape[0]
    taken = np.asarray(labelled, dtype=bool).reshape(-1).copy()
    k = int(n_instances)
    if A.shape != (n, n) or len(taken) != n:
        raise ValueError(f"graph must be square and labelled have one entry per row; got {A.shape} and {len(taken)}")
    if not 1 <= k <= int((~taken).sum()):
        raise ValueError(f"n_instances must lie in [1, {int((~taken).sum())}] (the rows not labelled); got {k}")
    A_cols = A.tocsc()
    uncovered = np.ones(n, dtype=bool)
    uncovered[A[np.flatnonzero(taken)].indices] = False              # covered by the labelled rows' balls
    degree = A @ uncovered.astype(np.int64)                           # uncovered rows in each ball
    picks: List[int] = []
    gains: List[float] = []
    while len(picks) < k:
        cur = int(np.argmax(degree))
        if degree[cur] <= 0:
            break
        ball = A.indices[A.indptr[cur]:A.indptr[cur + 1]]
        new = ball[uncovered[ball]]
        uncovered[new] = False
        degree -= np.asarray(A_cols[:, new].sum(axis=1)).reshape(-1)   # those rows leave every ball's count
        picks.append(cur)
        gains.append(float(len(new)))
        taken[cur] = True
    if len(picks) < k:                                               # everything is covered: a uniform draw
        rest = np.flatnonzero(~taken)
        drawn = check_random_state(random_state).choice(rest, k - len(picks), replace=False)
        picks += [int(i) for i in drawn]
        gains += [0.0] * len(drawn)
    return np.asarray(picks, dtype=np.intp), np.asarray(gains)


def ball_purity(embedding, cluster_labels, delta: float) -> float:
    """The fraction of rows whose δ-ball (``||x - y|| < δ``) holds rows of their own cluster only.

    Parameters
    ----------
    embedding : array-like of shape (n, d)
    cluster_labels : array-like of shape (n,)
    delta : float

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.acquisition.functional import ball_purity
    >>> x = np.array([[0.0], [1.0], [2.0], [3.0]])
    >>> labels = np.array([0, 0, 1, 1])
    >>> ball_purity(x, labels, 1.0), ball_purity(x, labels, 1.5)       # rows 1 and 2 see each other at 1.5
    (1.0, 0.5)
    """
    A = probcover_graph(embedding, delta).tocoo()
    labels = np.asarray(cluster_labels).reshape(-1)
    if len(labels) != A.shape[0]:
        raise ValueError(f"cluster_labels must have one entry per row ({A.shape[0]}); got {len(labels)}")
    impure = np.zeros(A.shape[0], dtype=bool)
    impure[A.row[labels[A.row] != labels[A.col]]] = True
    return float(1.0 - impure.mean())


def probcover_delta(embedding, n_clusters: int, *, alpha: float = ALPHA, cluster_labels=None,
                    random_state=None) -> float:
    """ProbCover's radius by purity: the largest ``δ`` at which at least ``alpha`` of the balls are pure.

    The rows are cut into ``n_clusters`` k-means clusters (the number of classes, in the paper; as
    :func:`~skdbal.acquisition.functional.typiclust_clusters` clusters), and a ball is pure when every row
    in it is of its centre's cluster (:func:`ball_purity`). Row ``i``'s ball is pure exactly while ``δ``
    is at most ``dᵢ``, the distance to its nearest row of another cluster, so the purity of ``δ`` is the
    fraction of ``dᵢ ≥ δ``, and the largest ``δ`` of purity ``≥ alpha`` is the ``⌈alpha · n⌉``-th largest
    ``dᵢ``, found exactly (the paper searches a grid of step 0.05).

    Parameters
    ----------
    embedding : array-like of shape (n, d)
    n_clusters : int
        At least 2.
    alpha : float, default=0.95
        The purity kept, in (0, 1].
    cluster_labels : array-like of shape (n,), optional
        Clusters of your own instead of k-means'.
    random_state : int, RandomState instance or None
        Seeds the k-means.

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.acquisition.functional import ball_purity, probcover_delta
    >>> x = np.array([0.0, 1.0, 2.0, 10.0, 11.0, 13.0])[:, None]
    >>> labels = np.array([0, 0, 0, 1, 1, 1])         # nearest other cluster: 10, 9, 8, 8, 9, 11 away
    >>> probcover_delta(x, 2, alpha=0.5, cluster_labels=labels)     # 4 of the 6 balls pure up to 9, 2 beyond
    9.0
    >>> round(ball_purity(x, labels, 9.0), 3), round(ball_purity(x, labels, 9.001), 3)
    (0.667, 0.333)
    """
    E = _as_embedding(embedding)
    a = float(alpha)
    if not 0 < a <= 1:
        raise ValueError(f"alpha must lie in (0, 1]; got {alpha!r}")
    if cluster_labels is None:
        k = int(n_clusters)
        if not 2 <= k <= len(E):
            raise ValueError(f"n_clusters must lie in [2, {len(E)}] for {len(E)} rows; got {n_clusters!r}")
        labels = typiclust_clusters(E, k, random_state=random_state)
    else:
        labels = np.asarray(cluster_labels).reshape(-1)
        if len(labels) != len(E):
            raise ValueError(f"cluster_labels must have one entry per row ({len(E)}); got {len(labels)}")
    n = len(E)
    sq = np.einsum("ij,ij->i", E, E)
    nearest_other = np.full(n, np.inf)
    step = max(1, _BLOCK // max(n, 1))
    for s in range(0, n, step):
        d = _sq_distances(E[s:s + step], E, sq[s:s + step], sq)
        d[labels[s:s + step, None] == labels[None, :]] = np.inf
        nearest_other[s:s + step] = np.sqrt(d.min(axis=1))
    m = math.ceil(a * n - 1e-9)
    return float(np.sort(nearest_other)[::-1][m - 1])


class ProbCover(Strategy):
    """ProbCover (Yehuda, Dekel, Hacohen & Weinshall, NeurIPS 2022): cover the most of the pool with δ-balls.

    A cold-start strategy for the first labels. Around every row of the labelled and unlabelled rows'
    embedding is a ball of radius ``delta`` (:func:`~skdbal.acquisition.functional.probcover_graph`); the
    rows in the labelled rows' balls are covered, and the batch is chosen greedily, each pick the row
    whose ball covers the most rows not yet covered
    (:func:`~skdbal.acquisition.functional.probcover_select`). The radius is by default the paper's
    choice by purity (:func:`~skdbal.acquisition.functional.probcover_delta`): the largest at which
    ``alpha`` of the balls hold one k-means cluster only, with as many clusters as the model has classes.
    No prediction is read.

    The embedding and the labelled rows are read as :class:`~skdbal.acquisition.TypiClust` reads them:
    by default the rows as the model reads them (an encoder's embedding before a head; the pool's rows
    when ``estimator`` is None), and the labelled rows of the learner the strategy is called with, or the
    ``X_labelled`` keyword of a call.

    Parameters
    ----------
    features : "input", "embedding" or callable, default="input"
        The embedding, as for :class:`~skdbal.acquisition.TypiClust`.
    delta : float, optional
        The radius; by default chosen by purity at every query.
    alpha : float, default=0.95
        The purity of the radius chosen.
    n_clusters : int, optional
        Clusters of the purity's k-means; by default the number of classes the model knows (a model
        without classes, or no model, needs it given, or ``delta``).
    normalize : bool, default=True
        Scale each row of the embedding to unit length first, as the authors' features are (the radii
        the paper reports, 0.55 to 0.75, are of such rows).

    Notes
    -----
    The batch is chosen jointly: ProbCover has no pool scores, and the scores returned are the rows each
    pick newly covered. ``info`` holds the radius (``delta``) and the fraction of the rows covered after
    the batch (``coverage``). Given the same embedding and radius, the batch is the authors' code's
    wherever its graph is whole and the batch leaves rows uncovered. The differences: the graph takes
    every row (theirs leaves out the rows after the last whole block of 500); once everything is covered
    the batch is completed at random (theirs picks row 0 again); the radius is the exact one of purity
    ``alpha`` (the paper's, on a grid of step 0.05). The graph holds one entry per pair of rows
    closer than ``delta``: a radius that puts much of the pool in every ball makes it large.

    References
    ----------
    .. [1] O. Yehuda, A. Dekel, G. Hacohen and D. Weinshall, "Active learning through a covering lens",
       NeurIPS 2022, arXiv:2205.11320.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.acquisition import ProbCover
    >>> x = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 10.0])[:, None]
    >>> cover = ProbCover(delta=1.5, normalize=False)
    >>> idx, gains = cover(None, x, n_instances=2)
    >>> idx.tolist(), gains.tolist()
    ([1, 3], [3.0, 2.0])
    >>> cover(None, x, n_instances=2, X_labelled=x[[4]])[0].tolist()     # 3 and 4 are covered by the label
    [1, 5]
    """

    name = "probcover"
    display_name = "ProbCover"

    def __init__(self, features: Union[str, Callable] = "input", *, delta: Optional[float] = None,
                 alpha: float = ALPHA, n_clusters: Optional[int] = None, normalize: bool = True):
        self.features = features
        self.delta = delta
        self.alpha = alpha
        self.n_clusters = n_clusters
        self.normalize = normalize

    def _n_clusters(self, estimator, reader) -> int:
        if self.n_clusters is not None:
            from .._validation import check_positive_int

            return check_positive_int(self.n_clusters, "n_clusters")
        classes = None
        if estimator is not None:
            if reader is None:
                from ._scoring import model_with

                reader = model_with(estimator, "classes_")
            try:
                classes = reader[0].classes
            except (TypeError, AttributeError, ValueError):
                classes = None
        if classes is None:
            raise ValueError("ProbCover chooses its radius by the purity of n_clusters k-means clusters (the "
                             "number of classes): give n_clusters or delta, or a model that knows its classes")
        return len(classes)

    def acquire_checked(self, estimator, X_pool, n_instances: int, *, random_tie_break: bool = False,
                        random_state=None, X_labelled=None, **kwargs) -> Acquisition:
        """ProbCover's batch (on the input :meth:`~skdbal.acquisition.base.Strategy.acquire` checked).

        ``X_labelled`` (rows like the pool's) gives the labelled rows instead of the learner's;
        ``random_tie_break`` is not used (ties go to the first row, labelled rows first, as in the
        authors' code); ``random_state`` seeds the purity's k-means and the draw once all is covered."""
        _check_features(self.features)
        if self.delta is not None:
            _check_delta(self.delta)
        E, n_lab, reader = cold_start_rows(self.features, self.normalize, estimator, X_pool, X_labelled)
        rng = check_random_state(random_state)
        if self.delta is not None:
            delta = float(self.delta)
        else:
            k = min(self._n_clusters(estimator, reader), len(E))
            delta = probcover_delta(E, k, alpha=self.alpha, random_state=rng) if k >= 2 else np.inf
            if not delta > 0:       # a purity the pool cannot reach at any radius: balls of the centres alone
                delta = float(np.finfo(np.float64).tiny)
        labelled = np.zeros(len(E), dtype=bool)
        labelled[:n_lab] = True
        graph = probcover_graph(E, delta)
        picks, gains = probcover_select(graph, labelled, n_instances, random_state=rng)
        chosen = np.concatenate([np.flatnonzero(labelled), picks])
        coverage = float(np.unique(graph[chosen].indices).size / len(E))
        return Acquisition(picks - n_lab, gains, {"delta": float(delta), "coverage": coverage})


probcover = register(ProbCover)
