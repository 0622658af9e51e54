"""The retrain of the model ``skdbal label`` builds is bounded (issue 52): a fixed number of draws, the same
gradient steps whatever the labelled set's size, seeded."""
import argparse

import numpy as np
import pytest
from sklearn.base import clone

from skdbal.labelling.cli import POOL_SUBSAMPLE, RETRAIN_DRAWS, add_parser, make_session, pool_learner


def steps(net) -> int:
    """Gradient steps of the net's last fit: its batches, over all its epochs."""
    return sum(len(epoch["batches"]) for epoch in net.history)


def fitted(net, n, seed=0, shape=(8, 8)):
    rng = np.random.RandomState(seed)
    X = rng.rand(n, *shape).astype(np.float32)
    y = np.asarray(["a", "b"])[np.arange(n) % 2]
    return clone(net).fit(X, y), X


def test_the_retrain_draws_a_fixed_number_of_items():
    net = pool_learner(["a", "b"], np.zeros((3, 8, 8), np.float32), images=True).estimator
    assert RETRAIN_DRAWS == 3200
    params = net.get_params()
    assert (params["max_epochs"], params["batch_size"], params["iterator_train__n_samples"]) == (1, 32, 3200)
    assert params["module__kernel_size"] == 3   # images below 16 pixels a side


@pytest.mark.parametrize("n", [10, 37, 200])
def test_the_same_gradient_steps_whatever_the_labels(n):
    """3,200 draws in batches of 32: 100 steps, at 10 labels as at 200 (50 epochs over the labels took
    50 × ceil(n / 32): 50, 100 and 350 steps)."""
    net = pool_learner(["a", "b"], np.zeros((3, 8, 8), np.float32), images=True).estimator
    model, _ = fitted(net, n)
    assert steps(model) == 100
    assert len(model.history) == 1


def test_beyond_the_draws_one_epoch_over_the_labels():
    """More labels than draws: one epoch over them (FixedLengthLoader's rule), ceil(n / 32) steps."""
    net = pool_learner(["a", "b"], np.zeros((3, 5), np.float32), images=False).estimator
    net.set_params(iterator_train__n_samples=64)
    assert steps(fitted(net, 10, shape=(5,))[0]) == 2      # 64 draws of 10 items: 2 batches of 32
    assert steps(fitted(net, 100, shape=(5,))[0]) == 4     # 100 items > 64 draws: ceil(100 / 32)


def test_a_seeded_retrain_is_the_same_retrain():
    net = pool_learner(["a", "b"], np.zeros((3, 5), np.float32), images=False).estimator
    one, X = fitted(net.set_params(random_state=7), 40, shape=(5,))
    two, _ = fitted(net.set_params(random_state=7), 40, shape=(5,))
    other, _ = fitted(net.set_params(random_state=8), 40, shape=(5,))
    w = [p.detach().numpy() for p in one.module_.parameters()]
    assert all(np.array_equal(a, p.detach().numpy()) for a, p in zip(w, two.module_.parameters()))
    assert not all(np.array_equal(a, p.detach().numpy()) for a, p in zip(w, other.module_.parameters()))


def test_skdbal_label_builds_it(tmp_path):
    np.save(tmp_path / "images.npy", np.random.RandomState(0).rand(30, 28, 28).astype(np.float32))
    sub = argparse.ArgumentParser(prog="skdbal").add_subparsers()
    args = add_parser(sub).parse_args(["--npy", str(tmp_path / "images.npy"), "--classes", "a,b",
                                       "--store", str(tmp_path / "s.db")])
    session, _, _ = make_session(args)
    try:
        params = session.learner.estimator.get_params()
        assert (params["max_epochs"], params["iterator_train__n_samples"]) == (1, RETRAIN_DRAWS)
        assert "module__kernel_size" not in params or params["module__kernel_size"] == 4   # 28 pixels: the default
        assert session.learner.seeding == "step"
    finally:
        session.store.close()


def test_a_query_scores_a_bounded_subset_of_the_pool():
    """A query scores at most POOL_SUBSAMPLE = 1,000 unlabelled items (a seeded random subset), so that its
    time does not grow with the pool: 1,000 of a 1,204-item pool with 4 labels; all 46 of a 50-item pool."""
    assert POOL_SUBSAMPLE == 1000
    for n, scored in ((1204, 1000), (50, 46)):
        X = np.random.RandomState(0).rand(n, 8, 8).astype(np.float32)
        y = np.array([None] * n, dtype=object)
        y[:4] = ["a", "b", "a", "b"]
        learner = pool_learner(["a", "b"], X, images=True)
        learner.fit(X, y)
        model = learner.estimator_
        seen = []
        samples = model.predict_proba_samples

        def counting(X_rows, *args, seen=seen, samples=samples, **kwargs):
            seen.append(len(X_rows))
            return samples(X_rows, *args, **kwargs)

        model.predict_proba_samples = counting
        idx, _ = learner.query(n_instances=5)
        assert sum(seen) == scored and len(set(idx.tolist())) == 5
        assert not set(idx.tolist()) & {0, 1, 2, 3}
