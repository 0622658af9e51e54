"""LabelSpreadingHead and its numeric steps: values computed by hand on small graphs."""
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.utils.estimator_checks import parametrize_with_checks

from skdbal.models import LabelSpreadingHead, _label_spreading, knn_affinities, normalized_graph, spread_evidence


def two_clusters(n=20, seed=0):
    rng = np.random.default_rng(seed)
    pool = np.vstack([rng.normal(0, 0.05, (n, 2)) + [1, 0], rng.normal(0, 0.05, (n, 2)) + [0, 1]])
    return (pool / np.linalg.norm(pool, axis=1, keepdims=True)).astype(np.float32)


def test_affinities_are_clipped_cubed_cosines_and_leave_the_row_out_among_duplicates():
    x = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])     # rows 0 and 1 equal
    indices, affinities, _ = knn_affinities(x, 2)
    assert indices[0].tolist() == [1, 2] and indices[1].tolist() == [0, 2]   # never itself
    # cosines 1 and 0 for rows 0, 1; row 3's nearest: row 2 (cosine 0), then row 0 or 1 (cosine -1 -> 0)
    np.testing.assert_allclose(affinities[0], [1.0, 0.0], atol=1e-6)
    np.testing.assert_allclose(affinities[3], [0.0, 0.0], atol=1e-6)
    with pytest.raises(ValueError, match="n_neighbors must be at most the rows less one"):
        knn_affinities(x, 4)


def test_the_graph_is_symmetric_and_normalised_by_degree():
    # a star: rows 1, 2, 3 each name row 0 (weight 1, 2, 3); row 0 names row 1 (weight 1)
    S = normalized_graph(np.array([[1], [0], [0], [0]]), np.array([[1.0], [1.0], [2.0], [3.0]]))
    # W + Wᵀ: (0,1) = 2, (0,2) = 2, (0,3) = 3; degrees 7, 2, 2, 3
    expected = np.zeros((4, 4))
    for j, w in ((1, 2.0), (2, 2.0), (3, 3.0)):
        expected[0, j] = expected[j, 0] = w / np.sqrt(7 * [0, 2, 2, 3][j])
    np.testing.assert_allclose(S.toarray(), expected)


def test_spreading_sums_the_powers_of_alpha_s():
    S = sp.csr_matrix(np.array([[0.0, 0.5], [0.5, 0.0]]))
    # Y = e0 in class 1; three steps: Y + αSY + (αS)²Y with α = 0.8: row 0 gets 1 + 0.16, row 1 gets 0.4
    E = spread_evidence(S, [0, 0], [1, 1], 2, alpha=0.8, n_iter=3)       # row 0 labelled twice: counts twice
    np.testing.assert_allclose(E, [[0.0, 2 * 1.16], [0.0, 2 * 0.4]])
    with pytest.raises(ValueError, match="alpha must lie in"):
        spread_evidence(S, [0], [0], 2, alpha=1.0)


def test_one_label_a_cluster_labels_the_whole_cluster_and_the_posterior_is_the_dirichlet_of_the_evidence():
    pool = two_clusters()
    head = LabelSpreadingHead(pool, n_neighbors=5, prior=2.0, random_state=0).fit(pool[[0, 20]], ["a", "b"])
    assert head.predict(pool).tolist() == ["a"] * 20 + ["b"] * 20
    assert head.evidence_.shape == (40, 2) and head.evidence_.sum() == pytest.approx(40, rel=1e-5)
    a = 2.0 / 2 + head.evidence_.astype(np.float64)                         # uniform prior: 1 a class
    np.testing.assert_allclose(head.predict_proba(pool), a / a.sum(1, keepdims=True), rtol=1e-5)
    samples = head.predict_proba_samples(pool[:3], n_samples=4000)
    assert samples.shape == (4000, 3, 2) and samples.dtype == np.float32
    np.testing.assert_allclose(samples.mean(0), head.predict_proba(pool[:3]), atol=0.02)
    np.testing.assert_allclose(samples.sum(2), 1.0, atol=1e-5)
    # the Dirichlet's variance of p_a: a_a a_b / (a0² (a0 + 1))
    a0 = a[:3].sum(1)
    np.testing.assert_allclose(samples[..., 0].var(0), a[:3, 0] * a[:3, 1] / (a0 ** 2 * (a0 + 1)), rtol=0.1)
    assert np.array_equal(head.predict_proba_samples(pool[:3], n_samples=5),
                          head.predict_proba_samples(pool[:3], n_samples=5))     # an int seed: the same draws


def test_a_row_outside_the_pool_reads_its_neighbours_and_a_far_row_is_unsure():
    pool = two_clusters()
    head = LabelSpreadingHead(pool, n_neighbors=3).fit(pool[[0, 20]], [0, 1])
    outside = np.array([[0.999, 0.045]], np.float32)
    _, near = head.graph_.index.kneighbors(outside, n_neighbors=3)
    distances = np.linalg.norm(pool[near[0]] - outside, axis=1)
    w = np.maximum(1 - distances ** 2 / 2, 0) ** 3
    expected = 0.5 + (w[:, None] * head.evidence_[near[0]]).sum(0) / w.sum()
    np.testing.assert_allclose(head.predict_proba(outside)[0], expected / expected.sum(), rtol=1e-4)
    # the labelled row is surer than a row of its cluster far along the graph
    assert head.predict_proba(pool[[0]]).max() > head.predict_proba(pool[[19]]).max()


def test_a_label_not_in_the_pool_is_placed_at_its_nearest_pool_row():
    pool = two_clusters()
    near_0 = pool[0] + np.float32(1e-3)
    one = LabelSpreadingHead(pool, n_neighbors=5).fit(np.vstack([near_0, pool[20]]), [0, 1])
    other = LabelSpreadingHead(pool, n_neighbors=5).fit(pool[[0, 20]], [0, 1])
    np.testing.assert_array_equal(one.evidence_, other.evidence_)


def test_the_pool_graph_is_built_once_for_refits_on_the_same_pool(monkeypatch):
    pool = two_clusters(seed=3)
    built = []
    real = _label_spreading._PoolGraph
    monkeypatch.setattr(_label_spreading, "_PoolGraph", lambda *a: built.append(1) or real(*a))
    for n in (2, 4, 6):
        LabelSpreadingHead(pool, n_neighbors=4).fit(pool[[0, 20, 1, 21, 2, 22][:n]], [0, 1, 0, 1, 0, 1][:n])
    assert built == [1]
    LabelSpreadingHead(pool, n_neighbors=5).fit(pool[[0, 20]], [0, 1])       # another graph of the pool
    assert built == [1, 1]


@pytest.mark.parametrize("params, message", [
    ({"alpha": 1.0}, "alpha must lie in"), ({"alpha": float("nan")}, "alpha must be a finite number"),
    ({"prior": 0.0}, "prior must be positive"), ({"n_neighbors": 0}, "n_neighbors"),
])
def test_bad_parameters_are_refused_at_fit(params, message):
    pool = two_clusters()
    with pytest.raises(ValueError, match=message):
        LabelSpreadingHead(pool, **params).fit(pool[[0, 20]], [0, 1])


def test_a_pool_of_another_width_and_a_label_outside_the_classes_are_refused():
    pool = two_clusters()
    with pytest.raises(ValueError, match="pool has 2 features and X has 3"):
        LabelSpreadingHead(pool).fit(np.ones((2, 3)), [0, 1])
    with pytest.raises(ValueError):
        LabelSpreadingHead(pool, classes=[0, 1]).fit(pool[[0, 20]], [0, 2])


@parametrize_with_checks([LabelSpreadingHead(n_neighbors=3, n_samples=3, random_state=0)])
def test_sklearn_contract(estimator, check):
    check(estimator)


def test_rows_outside_the_pool_are_searched_once_for_repeated_calls(monkeypatch):
    pool = two_clusters()
    head = LabelSpreadingHead(pool, n_neighbors=3).fit(pool[[0, 20]], [0, 1])
    searches = []
    real = head.graph_.index.kneighbors
    monkeypatch.setattr(head.graph_.index, "kneighbors", lambda *a, **k: searches.append(1) or real(*a, **k))
    outside = pool[:5] + np.float32(1e-3)
    first = head.predict_proba(outside)
    np.testing.assert_array_equal(head.predict_proba(outside), first)
    assert searches == [1]
    head.predict_proba(outside[:4])                          # other rows: searched
    assert searches == [1, 1]


def test_the_graph_reads_directions_so_an_unnormalised_embedding_spreads_the_same():
    """Principal components are not of unit length: far apart rows would have no affinity at all and no
    label would spread. The head scales rows to unit length: the pool times 100 gives the same evidence."""
    pool = two_clusters()
    unit = LabelSpreadingHead(pool, n_neighbors=5).fit(pool[[0, 20]], [0, 1])
    scaled = LabelSpreadingHead(pool * 100, n_neighbors=5).fit(pool[[0, 20]] * 100, [0, 1])
    np.testing.assert_allclose(scaled.evidence_, unit.evidence_, rtol=1e-4)
    assert scaled.predict(pool * 100).tolist() == [0] * 20 + [1] * 20
    np.testing.assert_allclose(scaled.predict_proba(pool[:3] * 100 + 1), unit.predict_proba((pool[:3] * 100 + 1) / 100),
                               rtol=1e-3)
