"""Initial labelled sets: random per class, and representative by k-means."""
import numpy as np
import pytest

from skdbal import ActiveLearner
from skdbal.initial import balanced_random, kmeans_representative


def blobs():
    # three tight blobs per class, of 30, 20 and 10 points, around known centres
    rng = np.random.RandomState(0)
    centres = np.array([[0, 0], [10, 0], [0, 10], [50, 50], [60, 50], [50, 60]], dtype=float)
    sizes = [30, 20, 10, 30, 20, 10]
    X = np.concatenate([c + rng.normal(0, 0.5, (n, 2)) for c, n in zip(centres, sizes)])
    y = np.repeat([0, 0, 0, 1, 1, 1], sizes)
    return X, y, centres, sizes


def test_label_free_version_takes_the_point_nearest_each_centroid():
    X, y, centres, sizes = blobs()
    idx = kmeans_representative(X, n_clusters=6, random_state=0)
    assert len(idx) == 6 and np.all(np.diff(idx) > 0)
    # one point per blob, the one nearest the blob's mean
    starts = np.r_[0, np.cumsum(sizes)]
    for b in range(6):
        members = np.arange(starts[b], starts[b + 1])
        inside = idx[(idx >= starts[b]) & (idx < starts[b + 1])]
        assert len(inside) == 1
        nearest = members[np.argmin(((X[members] - X[members].mean(0)) ** 2).sum(1))]
        assert inside[0] == nearest


def test_per_class_version_and_the_learner():
    X, y, _, _ = blobs()
    idx = kmeans_representative(X, y, n_per_class=3, random_state=0)
    np.testing.assert_array_equal(np.bincount(y[idx]), [3, 3])
    # every blob of each class is represented
    assert len({tuple(np.round(X[i] / 10)) for i in idx}) == 6
    # the same call, same picks; usable as a simulation's initial set
    np.testing.assert_array_equal(idx, kmeans_representative(X, y, n_per_class=3, random_state=0))
    from sklearn.linear_model import LogisticRegression

    from skdbal.acquisition import max_entropy
    learner = ActiveLearner(LogisticRegression(), max_entropy, random_state=0, verbose=False)
    learner.simulate(X, y, n_queries=1, n_instances=2, initial_idx=idx)
    assert set(idx) <= set(learner.labelled_idx_) and len(learner.labelled_idx_) == 8


def test_features_images_and_duplicates():
    X, y, _, _ = blobs()
    images = np.repeat(X[:, None, :, None], 3, axis=3)  # (N, 1, 2, 3): flattened by "input"
    np.testing.assert_array_equal(kmeans_representative(images, n_clusters=6, random_state=0),
                                  kmeans_representative(np.repeat(X, 3, axis=1), n_clusters=6, random_state=0))
    # a callable maps to the space k-means runs in: here only the first coordinate
    idx = kmeans_representative(X, n_clusters=2, features=lambda Z: Z[:, :1], random_state=0)
    assert sorted(np.round(X[idx, 0] / 50).tolist()) == [0.0, 1.0]
    # identical points: still distinct picks (k-means warns that it found one cluster)
    same = np.zeros((5, 2))
    with pytest.warns(Warning, match="distinct clusters"):
        picks = kmeans_representative(same, n_clusters=3, random_state=0)
    assert len(set(picks.tolist())) == 3


@pytest.mark.parametrize("kwargs, match", [
    (dict(n_clusters=0), "n_clusters must be an int >= 1"),
    (dict(n_clusters=200), "n_clusters=200 is more than the 120 points"),
    (dict(features="pixels"), "features must be 'input' or a callable"),
    (dict(y=np.zeros(3)), "X and y differ in length"),
    (dict(y=np.r_[np.zeros(119, int), 1], n_per_class=2), "class 1 has 1 member"),
    (dict(y=np.zeros(120), n_per_class=1.5), "n_per_class must be an int >= 1"),
    (dict(features=lambda Z: Z[:5]), "the features have 5 rows for 120 inputs"),
])
def test_bad_input(kwargs, match):
    X, _, _, _ = blobs()
    with pytest.raises(ValueError, match=match):
        kmeans_representative(X, **kwargs)


def test_balanced_random_still_balanced():
    idx = balanced_random(np.repeat([0, 1, 2], 5), n_per_class=2, random_state=0)
    np.testing.assert_array_equal(np.bincount(np.repeat([0, 1, 2], 5)[idx]), [2, 2, 2])
