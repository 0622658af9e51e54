"""A session labelled by a truthful scripted annotator learns as ``ActiveLearner.simulate`` does with the
same learner, first batch and batch size (issue 41), and the demo runs the configuration measured in
``docs/results/demo_learning``."""
import time

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression

from skdbal import ActiveLearner
from skdbal.acquisition import max_entropy
from skdbal.experiments.data import load_digits_images
from skdbal.labelling import LabellingSession
from skdbal.labelling.cli import demo_initial, demo_learner


def scripted(learner, X, y, X_test, y_test, initial, batch_size, n_versions, store, **kw):
    """Label each batch truthfully as next_batch offers it, then wait for its model and the next batch."""
    session = LabellingSession(learner, X, classes=sorted(set(np.asarray(y).tolist())), store=store,
                               batch_size=batch_size, initial=initial, X_test=X_test, y_test=y_test, **kw)
    offered = []
    with session:
        for version in range(n_versions):
            deadline = time.time() + 120
            while sum(q["kind"] == "batch" for q in session.store.queries()) < version + 1:
                assert session.error is None and time.time() < deadline
                time.sleep(0.005)
            batch = session.next_batch("script", timeout=30)
            for b in batch:
                session.submit(b["item"], int(y[b["item"]]), annotator="script")
            offered.append([b["item"] for b in batch])
            session.wait_for_version(version, timeout=120)
    versions = session.versions()
    return offered, [v["n_labels"] for v in versions], [v["metrics"]["accuracy"] for v in versions], session


def check_same(learner, X, y, X_test, y_test, initial, batch_size, n_versions, store, **kw):
    history = clone(learner).simulate(X, y, n_queries=n_versions - 1, n_instances=batch_size, initial_idx=initial,
                                      X_test=X_test, y_test=y_test)
    offered, n_labels, accuracy, session = scripted(clone(learner), X, y, X_test, y_test, initial, batch_size,
                                                    n_versions, store, **kw)
    # the same labelled sets, in the same order, and the same test accuracy at every version
    assert [sorted(r["query_indices"]) for r in history] == [sorted(o) for o in offered]
    assert [r["n_labels"] for r in history] == n_labels == [len(initial) + batch_size * v for v in range(n_versions)]
    assert [r["accuracy"] for r in history] == accuracy
    assert session.learner.labelled_idx_.tolist() == learner_of(history, initial)
    return history


def learner_of(history, initial):
    return [int(i) for r in history for i in r["query_indices"]]


def test_a_truthful_session_learns_as_simulate_does(flat_digits, tmp_path):
    """A first batch larger than ``retrain_after`` (20 and 10, as the demo's): before, the first model
    was trained on whichever of its labels the loop had read when 10 had come (10 of the 20 here), so
    the session and simulate parted from the first version on."""
    X, y = flat_digits
    learner = ActiveLearner(LogisticRegression(max_iter=300, random_state=0), max_entropy, random_state=0,
                            seeding="step", verbose=False)
    initial = np.arange(20)
    check_same(learner, X[:400], y[:400], X[1000:1300], y[1000:1300], initial, 10, 5, tmp_path / "s.db")


@pytest.mark.slow
def test_a_truthful_session_of_the_demo_network_learns_as_simulate_does(tmp_path):
    """The demo's network and strategy (BALD over MC dropout), fewer epochs to be quick; second looks
    on (their judgements predict with the model between fits, and must change nothing)."""
    import torch

    torch.set_num_threads(1)
    X_pool, X_test, y_pool, y_test = load_digits_images()
    learner = demo_learner(0).set_params(estimator__max_epochs=30)
    check_same(learner, X_pool[:500], y_pool[:500], X_test, y_test, demo_initial(X_pool[:500], 0), 10, 5,
               tmp_path / "s.db")

