"""TypiClust against a transcription of its authors' selection, and on point sets computed by hand.

The reference below transcribes ``select_samples`` of ``deep-al/pycls/al/typiclust.py`` (avihu111/TypiClust):
the same data frame of clusters, the same fixed visiting order, the same typicality (faiss's ``IndexFlatL2``
squared distances, replaced by a brute-force search giving the same numbers). Both are given the same k-means
labels, which the authors' code draws from scikit-learn too.
"""
import numpy as np
import pandas as pd
import pytest
from sklearn.decomposition import PCA
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline

from skdbal import ActiveLearner
from skdbal.acquisition import TypiClust, typiclust
from skdbal.acquisition.functional import typicality, typiclust_clusters, typiclust_select

MIN_CLUSTER_SIZE, MAX_NUM_CLUSTERS, K_NN = 5, 500, 20


# ------------------------------------------------------------------ the authors' algorithm, transcribed
def ref_get_nn(features, num_neighbors):
    """faiss.IndexFlatL2(d).search(features, k + 1), by brute force: squared L2, nearest first; column 0 dropped."""
    d2 = ((features[:, None, :] - features[None, :, :]) ** 2).sum(-1)
    indices = np.argsort(d2, axis=1, kind="stable")[:, :num_neighbors + 1]
    distances = np.take_along_axis(d2, indices, axis=1)
    return distances[:, 1:], indices[:, 1:]


def ref_typicality(features, num_neighbors):
    distances, _ = ref_get_nn(features, num_neighbors)
    return 1 / (distances.mean(axis=1) + 1e-5)


def ref_select(features_all, clusters_all, lSet, uSet, budgetSize):
    relevant_indices = np.concatenate([lSet, uSet]).astype(int)
    features = features_all[relevant_indices]
    labels = np.copy(clusters_all[relevant_indices])
    existing_indices = np.arange(len(lSet))
    cluster_ids, cluster_sizes = np.unique(labels, return_counts=True)
    cluster_labeled_counts = np.bincount(labels[existing_indices], minlength=len(cluster_ids))
    clusters_df = pd.DataFrame({'cluster_id': cluster_ids, 'cluster_size': cluster_sizes,
                                'existing_count': cluster_labeled_counts, 'neg_cluster_size': -1 * cluster_sizes})
    clusters_df = clusters_df[clusters_df.cluster_size > MIN_CLUSTER_SIZE]
    clusters_df = clusters_df.sort_values(['existing_count', 'neg_cluster_size'])
    labels[existing_indices] = -1
    selected = []
    for i in range(budgetSize):
        cluster = clusters_df.iloc[i % len(clusters_df)].cluster_id
        indices = (labels == cluster).nonzero()[0]
        typ = ref_typicality(features[indices], min(K_NN, len(indices) // 2))
        idx = indices[typ.argmax()]
        selected.append(idx)
        labels[idx] = -1
    selected = np.array(selected)
    assert len(np.intersect1d(selected, existing_indices)) == 0
    return relevant_indices[selected]


def unit(E):
    return E / np.linalg.norm(E, axis=1, keepdims=True)


# ------------------------------------------------------------------ equal to the authors' code
CASES = [  # (seed, n rows, dims, labelled, budget)
    (0, 150, 2, 0, 10), (1, 200, 8, 10, 10), (2, 240, 16, 30, 20), (3, 120, 4, 5, 12), (4, 300, 32, 60, 15)]


@pytest.mark.parametrize("seed, n, d, n_lab, budget", CASES)
def test_the_selection_is_the_authors(seed, n, d, n_lab, budget):
    rng = np.random.RandomState(seed)
    centres = rng.normal(0, 3, (6, d))
    E = unit(centres[rng.randint(6, size=n)] + rng.normal(0, 1, (n, d)))        # unit rows, as theirs load them
    lSet = rng.choice(n, n_lab, replace=False)
    uSet = np.setdiff1d(np.arange(n), lSet)
    relevant = np.concatenate([lSet, uSet])
    k = min(n_lab + budget, MAX_NUM_CLUSTERS)
    clusters = np.empty(n, dtype=int)
    # labels 0..K-1, each used: the authors' count of labelled rows per cluster (a bincount read by position)
    # assumes it, which MiniBatchKMeans (above 50 clusters) does not promise
    clusters[relevant] = np.unique(typiclust_clusters(E[relevant], k, random_state=seed), return_inverse=True)[1]
    expected = ref_select(E, clusters, lSet, uSet, budget)
    labelled = np.arange(n) < n_lab              # our rows in their order: labelled first
    picks, typ = typiclust_select(E[relevant], clusters[relevant], labelled, budget)
    np.testing.assert_array_equal(relevant[picks], expected)
    assert len(set(picks.tolist())) == budget and not labelled[picks].any()
    assert np.isfinite(typ).all() and (typ > 0).all()


@pytest.mark.parametrize("seed, n, d, n_lab, budget", CASES[:3])
def test_the_strategy_is_the_authors_on_the_same_embedding(seed, n, d, n_lab, budget):
    """Through the strategy: the pool and the labelled rows as the model reads them, unit rows, the clusters
    of the cluster-count rule min(labelled + budget, 500), seeded by random_state."""
    rng = np.random.RandomState(seed)
    X = rng.normal(0, 1, (n, d)) * rng.uniform(0.5, 3, d)
    X_lab, X_pool = X[:n_lab], X[n_lab:]
    acq = TypiClust().acquire(None, X_pool, budget, random_state=seed, X_labelled=X_lab if n_lab else None)
    k = min(n_lab + budget, MAX_NUM_CLUSTERS)
    assert acq.info == {"n_clusters": k}
    E = unit(X)
    clusters = typiclust_clusters(E, k, random_state=seed)
    expected = ref_select(E, clusters, np.arange(n_lab), np.arange(n_lab, n), budget) - n_lab
    np.testing.assert_array_equal(acq.indices, expected)
    again = TypiClust().acquire(None, X_pool, budget, random_state=seed, X_labelled=X_lab if n_lab else None)
    np.testing.assert_array_equal(again.indices, acq.indices)


def test_the_cluster_count_rule_and_its_cap():
    rng = np.random.RandomState(0)
    X = rng.normal(0, 1, (60, 3))
    assert typiclust.acquire(None, X, 4, random_state=0).info == {"n_clusters": 4}          # no labels: the budget
    assert typiclust.acquire(None, X[10:], 4, random_state=0, X_labelled=X[:10]).info == {"n_clusters": 14}
    assert TypiClust(max_clusters=6).acquire(None, X[10:], 4, random_state=0, X_labelled=X[:10]).info == {
        "n_clusters": 6}
    assert typiclust.acquire(None, X[:8], 3, random_state=0, X_labelled=X[8:]).info == {"n_clusters": 55}
    big = rng.normal(0, 1, (700, 2))           # 480 labelled + 30: capped at the authors' 500 (MiniBatchKMeans)
    acq = typiclust.acquire(None, big[480:], 30, random_state=0, X_labelled=big[:480])
    assert acq.info == {"n_clusters": 500} and len(set(acq.indices.tolist())) == 30


# ------------------------------------------------------------------ by hand
def test_typicality_on_a_line():
    x = np.array([0.0, 1.0, 3.0, 4.0, 5.0, 9.0])[:, None]
    # three nearest squared distances: 0 → 1, 9, 16; 1 → 1, 4, 9; 3 → 1, 4, 4; 4 → 1, 1, 9; 5 → 1, 4, 16;
    # 9 → 16, 25, 36
    means = np.array([26, 14, 9, 11, 21, 77]) / 3
    np.testing.assert_allclose(typicality(x, 3), 1 / (means + 1e-5))
    np.testing.assert_allclose(typicality(x, 3), ref_typicality(x, 3))
    np.testing.assert_array_equal(typicality(x, 0), np.zeros(6))
    with pytest.raises(ValueError, match="n_neighbors must lie in"):
        typicality(x, 6)


def test_one_cluster_of_six_points_on_a_line():
    x = np.array([0.0, 1.0, 3.0, 4.0, 5.0, 9.0])[:, None]
    one = np.zeros(6, int)
    picks, typ = typiclust_select(x, one, np.zeros(6, bool), 2)         # 6 rows > MIN_CLUSTER_SIZE
    # first: k = 6 // 2 = 3, row 2 (mean 9 / 3); then among the five left, k = 2: rows 1 and 3 (x = 1, 4)
    # both at mean (1 + 9) / 2 = 5, the first wins
    assert picks.tolist() == [2, 1]
    np.testing.assert_allclose(typ, [1 / (3 + 1e-5), 1 / (5 + 1e-5)])
    np.testing.assert_array_equal(picks, ref_select(x, one, np.array([], int), np.arange(6), 2))


def test_the_largest_cluster_without_labels_comes_first():
    x = np.concatenate([np.arange(6.0), 100 + np.arange(7.0)])[:, None]     # A: rows 0-5, B: rows 6-12
    labels = np.array([0] * 6 + [1] * 7)
    picks, typ = typiclust_select(x, labels, np.zeros(13, bool), 2)
    # B is larger: its most typical point first (k = 7 // 2 = 3: x = 101 to 105 tie at (1 + 1 + 4) / 3, the
    # first wins); then A's (k = 3: x = 1 to 4 tie at (1 + 1 + 4) / 3)
    assert picks.tolist() == [7, 1]
    np.testing.assert_allclose(typ, [1 / (2 + 1e-5)] * 2)
    labelled = np.zeros(13, bool)
    labelled[9] = True                          # x = 103 is labelled: A has no label, and comes first
    picks, typ = typiclust_select(x, labels, labelled, 2)
    # A: x = 1 (mean 2); B without 103: x = 102 (1, 4, 4) and 104 (1, 4, 4) tie at 3, x = 101 and 105 at 11 / 3
    assert picks.tolist() == [1, 8]
    np.testing.assert_allclose(typ, [1 / (2 + 1e-5), 1 / (3 + 1e-5)])
    order = np.r_[9, np.delete(np.arange(13), 9)]            # the reference takes the labelled rows first
    np.testing.assert_array_equal(ref_select(x, labels, np.array([9]), np.delete(np.arange(13), 9), 2),
                                  order[typiclust_select(x[order], labels[order], np.arange(13) == 0, 2)[0]])


def test_where_the_authors_code_fails_the_batch_is_completed():
    rng = np.random.RandomState(3)
    E = unit(rng.normal(0, 1, (120, 4)))
    clusters = np.unique(typiclust_clusters(E, 45, random_state=3), return_inverse=True)[1]
    with pytest.raises(ValueError, match="empty sequence"):       # a cluster visited again has no row left
        with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):
            ref_select(E, clusters, np.arange(5), np.arange(5, 120), 40)
    picks, typ = typiclust_select(E, clusters, np.arange(120) < 5, 40)
    assert len(set(picks.tolist())) == 40 and picks.min() >= 5 and np.isfinite(typ).all()


def test_small_clusters_wait_and_the_batch_is_always_completed():
    x = np.concatenate([np.arange(5.0), 100 + np.arange(7.0)])[:, None]     # A has 5 rows: not above 5
    labels = np.array([0] * 5 + [1] * 7)
    picks, _ = typiclust_select(x, labels, np.zeros(12, bool), 3)
    assert set(picks.tolist()) <= set(range(5, 12))              # only B, visited again and again
    # the whole pool: once B is empty the small cluster is visited, where the authors' code would fail
    picks, typ = typiclust_select(x, labels, np.zeros(12, bool), 12)
    assert sorted(picks.tolist()) == list(range(12)) and picks[:7].min() >= 5 and np.isfinite(typ).all()
    assert typ[6] == 0.0                         # B's last row: no neighbour left to be typical among


def test_never_a_labelled_row_and_bad_input():
    x = np.arange(12.0)[:, None]
    labelled = np.arange(12) % 2 == 0
    picks, _ = typiclust_select(x, np.zeros(12, int), labelled, 6)
    assert sorted(picks.tolist()) == [1, 3, 5, 7, 9, 11]
    with pytest.raises(ValueError, match=r"n_instances must lie in \[1, 6\]"):
        typiclust_select(x, np.zeros(12, int), labelled, 7)
    with pytest.raises(ValueError, match="one entry per row"):
        typiclust_select(x, np.zeros(11, int), labelled, 2)
    with pytest.raises(ValueError, match="NaN or infinite"):
        typiclust_select(np.full((3, 1), np.nan), np.zeros(3, int), np.zeros(3, bool), 1)


# ------------------------------------------------------------------ the embedding and the labelled rows it reads
def blobs():
    rng = np.random.RandomState(0)
    return np.concatenate([rng.normal(0, 1, (60, 2)), rng.normal(10, 1, (40, 2))])


def test_the_learners_labelled_rows_are_taken_into_account():
    X = blobs()
    clf = LogisticRegression().fit(X[[0, 1]], [0, 1])
    # a bare model keeps no labelled rows: one cluster, and its most typical row is in the larger blob
    idx, _ = TypiClust(normalize=False)(clf, X[2:], 1, random_state=0)
    assert idx[0] + 2 < 60
    learner = ActiveLearner(LogisticRegression(), TypiClust(normalize=False), random_state=0,
                            verbose=False).fit(X[[0, 1]], [0, 1])          # two labels in the first blob
    idx, _ = learner.query(X[2:], 1)
    assert idx[0] + 2 >= 60                      # the blob without labels
    direct, _ = TypiClust(normalize=False)(clf, X[2:], 1, random_state=0, X_labelled=X[[0, 1]])
    assert direct[0] + 2 >= 60


def test_the_embedding_is_read_through_the_predictive_interface():
    rng = np.random.RandomState(1)
    X = rng.normal(0, 1, (80, 6)) * [5, 3, 1, 1, 1, 1]
    y = (X[:, 0] > 0).astype(int)
    pipe = make_pipeline(PCA(2, random_state=0), LogisticRegression()).fit(X, y)
    E = pipe[:-1].transform(X)
    via_pipe = typiclust(pipe, X, 5, random_state=3)
    np.testing.assert_array_equal(via_pipe[0], typiclust(None, E, 5, random_state=3)[0])   # the encoder's
    np.testing.assert_array_equal(TypiClust(features=pipe[:-1].transform)(None, X, 5, random_state=3)[0],
                                  via_pipe[0])                                          # a callable
    class Net(LogisticRegression):
        def transform(self, X):
            return np.asarray(X)[:, :2] * 2.0

    net = Net().fit(X, y)
    np.testing.assert_array_equal(TypiClust(features="embedding")(net, X, 5, random_state=3)[0],
                                  typiclust(None, X[:, :2], 5, random_state=3)[0])      # unit rows: scale gone
    with pytest.raises(ValueError, match="X has 4 features, but LogisticRegression is expecting 6"):
        typiclust(LogisticRegression().fit(X, y), X[:, :4], 2)
    with pytest.raises(TypeError, match="needs a model with transform"):
        TypiClust(features="embedding")(LogisticRegression().fit(X, y), X, 2)
    with pytest.raises(ValueError, match="features must be 'input', 'embedding' or a callable"):
        TypiClust(features="pixels")(None, X, 2)
    with pytest.raises(ValueError, match="2 dimensions and the pool's 6"):
        typiclust(None, X, 2, X_labelled=X[:3, :2])
