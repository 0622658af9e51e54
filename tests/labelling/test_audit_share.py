"""The labelling session's audit share: a reservoir of the pool set aside in the store, served at random in the
batches people see, never queried, never trained on, and judged by each new model; the page then shows the
share of those labels it guessed right, with Wilson's interval, in place of the biased share of the items
the strategy asked about."""
import math
import os
import time

import numpy as np
import pytest
from _helpers import chromium_driver, needs_chromium, serve
from sklearn.linear_model import LogisticRegression
from test_label_command import one_line, skdbal_label

from skdbal import ActiveLearner
from skdbal.acquisition import max_entropy
from skdbal.labelling import LabellingSession
from skdbal.labelling._offers import covering_first_batch

Z = 1.959963984540054   # the normal quantile of a 95% interval


def wilson(right, n, z=Z):
    """Wilson's score interval, written out."""
    p = right / n
    d = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / d
    half = z / d * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def session_of(X, path, random_state=0, **kwargs):
    learner = ActiveLearner(LogisticRegression(max_iter=300, random_state=0), max_entropy,
                            random_state=random_state, seeding="step", verbose=False)
    return LabellingSession(learner, X, classes=range(10), store=path, batch_size=10, second_looks=None,
                            stopping=None, **kwargs)


def wait_offered(session, timeout=30):
    """Until the loop has offered its next batch (it is not fitting or querying)."""
    deadline = time.time() + timeout
    while session.status()["training"]:
        assert time.time() < deadline, "no batch was offered"
        time.sleep(0.02)


def label_rounds(session, y, versions, offered):
    """Answer every item offered, truthfully, version by version; ``offered`` collects what was offered."""
    for v in versions:
        for item in session.next_batch(annotator="ann", n=100, timeout=30):
            offered.append(item["item"])
            session.submit(item["item"], int(y[item["item"]]), annotator="ann")
        session.wait_for_version(v, timeout=60)
        wait_offered(session)


@pytest.fixture(scope="module")
def digits300(digits64):
    return digits64[0][:300].reshape(300, -1), digits64[1][:300]


@pytest.fixture(scope="module")
def audited_run(digits300, tmp_path_factory):
    """A run of six versions with an audit share of a fifth; what it offered and showed, then the store closed."""
    X, y = digits300
    path = tmp_path_factory.mktemp("audit") / "s.db"
    offered = []
    with session_of(X, path, audit_share=0.2) as s:
        label_rounds(s, y, range(6), offered)
        run = {"path": path, "offered": offered, "status": s.status(), "labels": s.labels(),
               "versions": s.versions(), "models": s.store.models(), "queries": s.store.queries(),
               "reservoir": s.store.config()["audit_reservoir"],
               "training": np.flatnonzero(s.learner.labelled_mask_).tolist(),
               "pending": s.board.pending()}
    return run


def test_the_reservoir_is_a_fifth_of_the_pool_never_queried_never_trained_on(audited_run):
    reservoir = set(audited_run["reservoir"])
    assert len(reservoir) == 60 == len(audited_run["reservoir"])          # a fifth of the 300 items
    queried = {item for q in audited_run["queries"] for item, _ in q["scores"]}
    assert queried and not queried & reservoir                          # acquisition (batches, tails) never
    training = set(audited_run["training"])                             # the learner's training set
    assert len(training) == audited_run["models"][-1]["n_labels"] and not training & reservoir
    audit = {r["item"] for r in audited_run["labels"] if r["audit"]}
    assert audit and audit <= reservoir                                  # yet people labelled some of them
    assert audit == set(audited_run["offered"]) & reservoir
    # every label outside the reservoir was trained on: none is lost
    assert {r["item"] for r in audited_run["labels"] if not r["audit"]} == training


def test_audit_labels_are_the_share_asked_of_the_labels_given(audited_run, digits300):
    """Counted by hand: after each batch is offered, the audit items labelled and offered are a fifth of all,
    one for every four others (rounded); so once everything offered is answered, a fifth of the labels."""
    labels = audited_run["labels"]
    reservoir = set(audited_run["reservoir"])
    pending = audited_run["pending"]
    n_audit = sum(r["audit"] for r in labels) + sum(i in reservoir for i in pending)
    n_other = sum(not r["audit"] for r in labels) + sum(i not in reservoir for i in pending)
    # the first batch covers the pool (k-means), less its items that fell in the reservoir; then 6 batches of 10
    first = [i for i in covering_first_batch(digits300[0], 10, 0) if i not in reservoir]
    assert len(first) == 8 and n_other == 8 + 60
    assert n_audit == 17                                   # 68 / 4 = 17: 17 of 85 labels, a fifth
    assert n_audit / (n_audit + n_other) == 0.2
    # served in the fixed random order of the reservoir, the first ones first
    served = [i for i in audited_run["reservoir"] if i in {r["item"] for r in labels} | set(pending)]
    assert served == audited_run["reservoir"][:17]


def test_the_panel_estimate_is_wilson_on_the_audit_labels_of_a_model_fitted_here(audited_run, digits300):
    X, y = digits300
    status = audited_run["status"]
    labels = audited_run["labels"]
    train = sorted(r["item"] for r in labels if not r["audit"])
    audit = sorted(r["item"] for r in labels if r["audit"])
    model = LogisticRegression(max_iter=300, random_state=0).fit(X[train], y[train])
    right = int((model.predict(X[audit]) == y[audit]).sum())
    low, high = wilson(right, len(audit))
    e = status["accuracy"]
    assert (e["n_labels"], e["biased"], e["version"]) == (len(audit), False, 5)
    assert (e["accuracy"], e["low"], e["high"]) == (pytest.approx(right / len(audit)), pytest.approx(low),
                                                    pytest.approx(high))
    assert status["accuracy_words"] == (
        f"Estimated accuracy {100 * right / len(audit):.0f}% ({100 * low:.0f}–{100 * high:.0f}%, 95% interval) "
        f"on the items set aside for checking, from {len(audit)} of them labelled (not used for training), "
        f"model version 5.")
    # each version's estimate is its own judgement of the audit labels given before it was trained
    assert all(v["estimate"]["method"] == "audit-uniform-wilson" for v in audited_run["versions"])


def test_a_restart_keeps_the_reservoir_and_the_estimate(audited_run, digits300):
    X, y = digits300
    # another learner seed: the reservoir is the store's, never drawn again
    again = session_of(X, audited_run["path"], random_state=7, audit_share=0.2)
    assert again.store.config()["audit_reservoir"] == audited_run["reservoir"]
    assert again.status()["accuracy"] == audited_run["status"]["accuracy"]
    with again:
        again.wait_for_version(5, timeout=60)
        wait_offered(again)
        mask = again.learner.labelled_mask_
        assert not mask[audited_run["reservoir"]].any()        # the resumed model is not trained on them
        assert np.flatnonzero(mask).tolist() == audited_run["training"]
        assert again.status()["accuracy"] == audited_run["status"]["accuracy"]
        assert set(again.board.pending()) == set(audited_run["pending"])   # the same batch, audits included


def test_a_bad_share_or_a_store_without_a_reservoir_is_refused_before_anything_is_written(digits300, tmp_path):
    X, _ = digits300
    for share in (1.5, 1, -0.1, True, "0.2"):
        with pytest.raises(ValueError, match="audit_share must be 0 .no audit. or a share in .0, 1."):
            session_of(X, tmp_path / "a.db", audit_share=share)
    assert not (tmp_path / "a.db").exists()
    session_of(X, tmp_path / "b.db").store.close()                   # made without an audit share
    with pytest.raises(ValueError, match="was started without an audit share"):
        session_of(X, tmp_path / "b.db", audit_share=0.2)
    s = session_of(X, tmp_path / "b.db")
    assert s.audit.reserved == frozenset() and s.labels() == []
    s.store.close()


def test_the_command_refuses_a_share_of_one_and_a_half_in_one_line(tmp_path):
    path = tmp_path / "rows.npy"
    np.save(path, np.arange(40, dtype=np.float32).reshape(20, 2))
    store = tmp_path / "s.db"
    status, out, err = skdbal_label("--npy", path, "--classes", "a,b", "--store", store, "--port", 0,
                                    "--audit-share", "1.5")
    assert (status, out) == (2, "")
    assert one_line(err) == "skdbal label: error: argument --audit-share: an audit share lies in (0, 1); got 1.5"
    assert sorted(os.listdir(tmp_path)) == ["rows.npy"]


def test_no_item_served_shows_a_score_so_that_nothing_tells_an_audit_item_apart(digits300, tmp_path):
    """An audit item has no acquisition score (the reservoir is never queried): with an audit share, the
    batch served to the page gives no item a score, though the model's items have one."""
    from starlette.testclient import TestClient

    from skdbal.labelling.app import make_app

    X, y = digits300
    session = session_of(X, tmp_path / "s.db", audit_share=0.2).start()
    try:
        label_rounds(session, y, range(1), [])
        with TestClient(make_app(session, token="secret")) as c:
            items = c.get("/api/batch?annotator=ann&wait=5", headers={"X-Token": "secret"}).json()["items"]
        reserved = set(session.store.config()["audit_reservoir"])
        assert any(b["item"] in reserved for b in items) and any(b["item"] not in reserved for b in items)
        assert [b["score"] for b in items] == [None] * len(items)
        assert all(session.board.scores.get(b["item"]) is not None for b in items if b["item"] not in reserved)
    finally:
        session.stop()


@pytest.mark.slow
@needs_chromium
def test_the_page_shows_the_audit_estimate(digits300, tmp_path):
    """In headless Chromium: the panel says the audit's words."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from skdbal.labelling.app import make_app

    X, y = digits300
    session = session_of(X, tmp_path / "s.db", audit_share=0.2, item_noun="images").start()
    label_rounds(session, y, range(2), [])
    words = session.status()["accuracy_words"]
    base, stop = serve(make_app(session, token="secret"))
    driver = chromium_driver(tmp_path / "chrome")
    try:
        driver.get(f"{base}/")
        WebDriverWait(driver, 10).until(lambda d: "set aside" in d.find_element(By.ID, "estimate").text)
        text = driver.find_element(By.ID, "estimate").text
        assert text == words and text.startswith("Estimated accuracy ")
        assert "on the images set aside for checking, from " in text and "model version 1." in text
    finally:
        driver.quit()
        stop()
        session.stop()
