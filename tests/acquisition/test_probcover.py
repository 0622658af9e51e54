"""ProbCover against a transcription of its authors' graph and greedy selection, its radius by purity against a
search over radii, and both on point sets computed by hand.

The reference transcribes ``construct_graph`` and ``select_samples`` of ``deep-al/pycls/al/prob_cover.py``
(avihu111/TypiClust), with NumPy for the distances where that code uses torch on a GPU. Its graph leaves out
the rows after the last whole block of ``batch_size`` (``range(len // batch_size)``): the comparisons take a
block size that divides the rows, where the two graphs are the same.
"""
import math

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression

from skdbal import ActiveLearner
from skdbal.acquisition import ProbCover, probcover
from skdbal.acquisition.functional import (
    ball_purity,
    probcover_delta,
    probcover_graph,
    probcover_select,
    typiclust_clusters,
)


# ------------------------------------------------------------------ the authors' algorithm, transcribed
def ref_graph(rel_features, delta, batch_size=500):
    xs, ys, ds = [], [], []
    for i in range(len(rel_features) // batch_size):
        cur = rel_features[i * batch_size: (i + 1) * batch_size]
        dist = np.sqrt(((cur[:, None, :] - rel_features[None, :, :]) ** 2).sum(-1))
        mask = dist < delta
        x, y = mask.nonzero()
        xs.append(x + batch_size * i)
        ys.append(y)
        ds.append(dist[mask])
    return pd.DataFrame({'x': np.concatenate(xs), 'y': np.concatenate(ys), 'd': np.concatenate(ds)})


def ref_select(graph_df, n_lSet, n_relevant, budgetSize):
    selected = []
    edge_from_seen = np.isin(graph_df.x, np.arange(n_lSet))
    covered_samples = graph_df.y[edge_from_seen].unique()
    cur_df = graph_df[(~np.isin(graph_df.y, covered_samples))]
    for _ in range(budgetSize):
        degrees = np.bincount(cur_df.x, minlength=n_relevant)
        assert degrees.max() > 0, "everything is covered: the authors' code would pick row 0 again"
        cur = degrees.argmax()
        new_covered_samples = cur_df.y[(cur_df.x == cur)].values
        assert len(np.intersect1d(covered_samples, new_covered_samples)) == 0
        cur_df = cur_df[(~np.isin(cur_df.y, new_covered_samples))]
        covered_samples = np.concatenate([covered_samples, new_covered_samples])
        selected.append(cur)
    return np.array(selected)


def unit(E):
    return E / np.linalg.norm(E, axis=1, keepdims=True)


def embedding(seed, n, d):
    rng = np.random.RandomState(seed)
    centres = rng.normal(0, 2, (5, d))
    return unit(centres[rng.randint(5, size=n)] + rng.normal(0, 1, (n, d)))


# ------------------------------------------------------------------ equal to the authors' code
CASES = [  # (seed, n rows, dims, labelled, budget, delta)
    (0, 200, 2, 0, 10, 0.3), (1, 200, 8, 10, 10, 0.6), (2, 300, 16, 30, 15, 0.5), (3, 240, 4, 0, 20, 0.4)]


@pytest.mark.parametrize("seed, n, d, n_lab, budget, delta", CASES)
def test_the_graph_and_the_selection_are_the_authors(seed, n, d, n_lab, budget, delta):
    E = embedding(seed, n, d)
    ref = ref_graph(E, delta, batch_size=n // 4)
    A = probcover_graph(E, delta).tocoo()
    assert sorted(zip(A.row.tolist(), A.col.tolist())) == sorted(zip(ref.x.tolist(), ref.y.tolist()))
    labelled = np.arange(n) < n_lab                     # the labelled rows first, as theirs
    picks, gains = probcover_select(A, labelled, budget)
    np.testing.assert_array_equal(picks, ref_select(ref, n_lab, n, budget))
    assert not labelled[picks].any() and (gains >= 1).all() and np.all(np.diff(gains) <= 0)   # greedy: never more


@pytest.mark.parametrize("seed, n, d, n_lab, budget, delta", CASES[1:3])
def test_the_strategy_is_the_authors_on_the_same_embedding(seed, n, d, n_lab, budget, delta):
    rng = np.random.RandomState(seed)
    X = embedding(seed, n, d) * rng.uniform(1, 4, (n, 1))       # unit rows again once normalised
    acq = ProbCover(delta=delta).acquire(None, X[n_lab:], budget, X_labelled=X[:n_lab], random_state=0)
    ref = ref_graph(unit(X), delta, batch_size=n // 4)
    np.testing.assert_array_equal(acq.indices, ref_select(ref, n_lab, n, budget) - n_lab)
    assert acq.info["delta"] == delta and 0 < acq.info["coverage"] <= 1


def test_the_purity_radius_is_the_largest_of_purity_alpha():
    E = embedding(5, 150, 3)
    labels = typiclust_clusters(E, 5, random_state=0)
    for alpha in (0.95, 0.8, 0.5):
        delta = probcover_delta(E, 5, alpha=alpha, cluster_labels=labels)
        assert ball_purity(E, labels, delta) >= alpha
        assert ball_purity(E, labels, np.nextafter(delta, np.inf) * (1 + 1e-9)) < alpha
        # the paper's search over a grid of step 0.05 finds the grid's last radius below it
        grid = np.arange(0.05, 2.05, 0.05)
        on_grid = max(g for g in grid if ball_purity(E, labels, g) >= alpha)
        assert delta - 0.05 < on_grid <= delta
    # without labels of its own it clusters the rows by k-means, seeded
    assert probcover_delta(E, 5, random_state=0) == probcover_delta(E, 5, cluster_labels=labels)


def test_ball_purity_by_its_definition():
    rng = np.random.RandomState(0)
    E = rng.normal(0, 1, (40, 2))
    labels = (E[:, 0] > 0).astype(int)
    D = np.sqrt(((E[:, None] - E[None]) ** 2).sum(-1))
    for delta in (0.1, 0.3, 1.0, 3.0):
        pure = [np.all(labels[D[i] < delta] == labels[i]) for i in range(len(E))]
        assert math.isclose(ball_purity(E, labels, delta), np.mean(pure))


# ------------------------------------------------------------------ by hand
def test_six_points_on_a_line():
    x = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 10.0])[:, None]
    A = probcover_graph(x, 1.5)
    assert A.toarray().astype(int).tolist() == [
        [1, 1, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0], [0, 1, 1, 1, 0, 0], [0, 0, 1, 1, 1, 0], [0, 0, 0, 1, 1, 0],
        [0, 0, 0, 0, 0, 1]]
    picks, gains = probcover_select(A, np.zeros(6, bool), 3)
    # ball sizes 2, 3, 3, 3, 2, 1: row 1 (the first of three) covers 0, 1, 2; then row 3 covers 3, 4
    # (row 2 and row 4 would cover 1 and 2); then row 5 covers itself
    assert picks.tolist() == [1, 3, 5] and gains.tolist() == [3.0, 2.0, 1.0]
    labelled = np.zeros(6, bool)
    labelled[2] = True                          # covers 1, 2, 3: row 4's ball has 4 left (and 3 covered)...
    picks, gains = probcover_select(A, labelled, 3)
    # uncovered 0, 4, 5: rows 0 and 1 cover 0, rows 3 and 4 cover 4, row 5 covers 5; first of the ties
    assert picks.tolist() == [0, 3, 5] and gains.tolist() == [1.0, 1.0, 1.0]
    # everything covered: the rest of the batch is a seeded draw among the rows left
    picks, gains = probcover_select(A, labelled, 5, random_state=0)
    assert picks[:3].tolist() == [0, 3, 5] and sorted(picks[3:].tolist()) == [1, 4] and gains[3:].tolist() == [0, 0]


def test_the_radius_by_purity_by_hand():
    x = np.array([0.0, 1.0, 2.0, 10.0, 11.0, 13.0])[:, None]
    labels = np.array([0, 0, 0, 1, 1, 1])
    # nearest row of the other cluster: 10, 9, 8, 8, 9, 11; sorted down 11, 10, 9, 9, 8, 8
    assert probcover_delta(x, 2, alpha=0.5, cluster_labels=labels) == 9.0       # ceil(3): the third largest
    assert probcover_delta(x, 2, alpha=0.95, cluster_labels=labels) == 8.0      # ceil(5.7) = 6: the sixth
    assert probcover_delta(x, 2, alpha=1 / 6, cluster_labels=labels) == 11.0
    assert ball_purity(x, labels, 8.0) == 1.0 and math.isclose(ball_purity(x, labels, 8.5), 4 / 6)
    with pytest.raises(ValueError, match="alpha must lie in"):
        probcover_delta(x, 2, alpha=0)
    with pytest.raises(ValueError, match="n_clusters must lie in"):
        probcover_delta(x, 1)


def test_the_strategy_reads_the_learners_labels_and_the_models_classes():
    rng = np.random.RandomState(0)
    X = np.concatenate([rng.normal(0, 0.3, (30, 2)), rng.normal(5, 0.3, (30, 2))])
    # a bare model: the densest ball is either blob's; the learner with both labels in the first blob
    # covers it, and its first pick is in the second
    learner = ActiveLearner(LogisticRegression(), ProbCover(delta=1.0, normalize=False), random_state=0,
                            verbose=False).fit(X[[0, 1]], [0, 1])
    idx, _ = learner.query(X[2:], 1)
    assert idx[0] + 2 >= 30
    acq = ProbCover(normalize=False).acquire(LogisticRegression().fit(X, X[:, 0] > 2.5), X, 2, random_state=0)
    assert acq.info["delta"] > 0 and sorted(i >= 30 for i in acq.indices) == [False, True]
    with pytest.raises(ValueError, match="give n_clusters or delta"):
        probcover(None, X, 2)
    assert len(ProbCover(n_clusters=2)(None, X, 2, random_state=0)[0]) == 2
    with pytest.raises(ValueError, match="delta must be a radius > 0"):
        ProbCover(delta=0.0)(None, X, 2)
