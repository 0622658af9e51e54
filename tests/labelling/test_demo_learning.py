"""A session labelled by a truthful scripted annotator learns as ``ActiveLearner.simulate`` does with the
same learner, first batch and batch size (issue 41), and the demo runs the configuration measured in
``docs/results/demo_learning``."""
import argparse
import json
import re
import time
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression

from skdbal import ActiveLearner
from skdbal.acquisition import max_entropy
from skdbal.experiments.data import load_digits_images
from skdbal.labelling import LabellingSession
from skdbal.labelling.cli import DEMO_INITIAL, add_parser, demo_initial, demo_learner, make_session

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results" / "demo_learning" / "results.json"


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


def test_the_demo_runs_the_configuration_measured(tmp_path):
    sub = argparse.ArgumentParser(prog="skdbal").add_subparsers()
    args = add_parser(sub).parse_args(["--demo", "digits", "--store", str(tmp_path / "d.db")])
    session, pool, _ = make_session(args)
    X_pool = load_digits_images()[0]
    # the quickstart's network for digits (100 epochs, weight-scaled predictions), BALD, seeded by step
    assert repr(session.learner) == repr(demo_learner(0))
    params = session.learner.estimator.get_params()
    assert (params["max_epochs"], params["predict_method"], params["module__kernel_size"], params["lr"]) == \
        (100, "deterministic", 3, 1e-3)
    assert type(session.learner.query_strategy).__name__ == "BALD" and session.learner.seeding == "step"
    # the first batch: 20 k-means representatives of the pool, as measured
    assert DEMO_INITIAL == 20 and np.array_equal(session.initial, demo_initial(X_pool, 0))
    assert session.batch_size == 10 and session.retrain_after == 10
    measured = json.loads(RESULTS.read_text())
    # without skorch's _params_to_validate, a set whose order changes per process
    assert measured["config"]["learner"] == re.sub(r"_params_to_validate=\{[^}]*\}, ", "", repr(session.learner))
    assert "max_epochs=100" in measured["config"]["learner"]
    stable = {k: repr(v) for k, v in sorted(session.learner.estimator.get_params(deep=False).items())
              if " at 0x" not in repr(v) and not k.startswith("_")}   # no address, no set
    assert measured["config"]["estimator_params"] == stable
    assert measured["config"]["estimator_params"]["max_epochs"] == "100"
    assert measured["config"]["batch_size"] == 10
    assert measured["runs"][0]["initial"] == demo_initial(X_pool, 0).tolist()
    final = [r["session"][-1] for r in measured["runs"]]
    assert [f["n_labels"] for f in final] == [100, 100, 100] and [r["seed"] for r in measured["runs"]] == [0, 1, 2]
    assert np.median([f["accuracy"] for f in final]) >= 0.90
    assert all(r["simulate_agrees"] for r in measured["runs"])
