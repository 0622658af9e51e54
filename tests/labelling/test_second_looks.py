"""Second looks: a label the model of its time finds unlikely is flagged and offered to another annotator.

The model that judges a label has not seen it (it is the current model when
the label arrives); the threshold follows the noise filter's rules
(:func:`skdbal.noise.trust_threshold`). Every expected value here is
computed independently, from a LogisticRegression fitted in the test.
"""
import sqlite3
import time

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from skdbal import ActiveLearner
from skdbal.acquisition import max_entropy
from skdbal.labelling import LabellingSession, LabelStore, StoreError
from skdbal.noise import trust_threshold

INITIAL = np.arange(30)       # labelled before any model (all ten digits)


def make_session(X, path, rule, budget=None):
    learner = ActiveLearner(LogisticRegression(C=10, max_iter=300, random_state=0), max_entropy, random_state=0,
                            seeding="step", verbose=False)
    return LabellingSession(learner, X, classes=range(10), store=path, batch_size=10, initial=INITIAL, retrain_after=30,
                            second_looks=rule, second_look_budget=budget)


def model0(X, y):
    return LogisticRegression(C=10, max_iter=300, random_state=0).fit(X[INITIAL], y[INITIAL])


def label_batch(session, y, annotator, wrong=None):
    """Label the batch offered to ``annotator``: the true labels, except ``wrong`` {item: label}."""
    batch = session.next_batch(annotator=annotator, timeout=10)
    for b in batch:
        i = b["item"]
        session.submit(i, (wrong or {}).get(i, int(y[i])), annotator=annotator)
    return batch


def test_unlikely_labels_are_flagged_and_offered_to_another_annotator(flat_digits300, tmp_path, rule=0.05):
    X, y = flat_digits300
    P0 = model0(X, y).predict_proba(X)
    with make_session(X, tmp_path / "s.db", rule) as s:
        first = label_batch(s, y, "ann")
        assert sorted(b["item"] for b in first) == INITIAL.tolist()
        s.wait_for_version(0, timeout=30)
        second = s.next_batch(annotator="ann", timeout=10)
        items = [b["item"] for b in second]
        # two mistakes: the class model 0 finds least likely for the two first items
        wrong = {i: int(np.argmin(P0[i])) for i in items[:2]}
        for i in items:
            s.submit(i, wrong.get(i, int(y[i])), annotator="ann")
        s.wait_for_version(1, timeout=30)

        given = np.array([wrong.get(i, y[i]) for i in items])
        p_given = P0[items, given]
        tau = rule
        checks = s.store.checks()
        assert [c["item"] for c in checks] == items                      # the first batch is not judged
        assert {c["model_version"] for c in checks} == {0}
        np.testing.assert_allclose([c["p_given"] for c in checks], p_given, rtol=1e-6)
        assert [c["guess"] for c in checks] == [str(g) for g in P0[items].argmax(axis=1)]
        np.testing.assert_allclose([c["threshold"] for c in checks], tau, rtol=1e-6)
        flagged = [i for i, p in zip(items, p_given) if p < tau]
        assert [c["item"] for c in checks if c["flagged"]] == flagged
        assert set(wrong) <= set(flagged)                                # both mistakes caught

        # the annotator of a flagged label is not offered it again; another is, first
        mine = s.next_batch(annotator="ann", timeout=10)
        assert not {b["item"] for b in mine} & set(flagged) and not any(b["second_look"] for b in mine)
        theirs = s.next_batch(annotator="bob", timeout=10)
        assert [b["item"] for b in theirs[:len(flagged)]] == flagged
        assert [b["second_look"] for b in theirs] == [True] * len(flagged) + [False] * (len(theirs) - len(flagged))
        assert s.status()["second_looks"] == {"flagged": len(flagged), "pending": len(flagged), "confirmed": 0,
                                              "changed": 0, "withdrawn": 0}

        a, b = items[:2]
        s.submit(a, int(y[a]), annotator="bob")          # bob corrects the first mistake ...
        s.submit(b, wrong[b], annotator="bob")           # ... and gives the second one's label too
        for i in flagged[2:]:                             # the rest: a correct label confirmed
            s.submit(i, int(y[i]), annotator="bob")
        looks = {c["item"]: c for c in s.store.second_looks()}
        assert looks[a]["outcome"] == "changed" and looks[a]["second_label"] == str(y[a])
        assert looks[b]["outcome"] == "confirmed" and looks[b]["second_annotator"] == "bob"
        counts = s.status()["second_looks"]
        assert counts == {"flagged": len(flagged), "pending": 0, "confirmed": len(flagged) - 1, "changed": 1,
                          "withdrawn": 0}
        labels = {r["item"]: r for r in s.labels()}
        assert labels[a]["label"] == y[a] and labels[a]["annotator"] == "bob"
        assert (labels[a]["first_label"], labels[a]["first_annotator"]) == (wrong[a], "ann")
        np.testing.assert_allclose(labels[a]["p_given"], P0[a, wrong[a]], rtol=1e-6)
        assert labels[b]["label"] == wrong[b] and labels[b]["second_look"] == "confirmed"
        unflagged = [i for i in items if i not in flagged]
        assert all(labels[i]["second_look"] is None and labels[i]["p_given"] is None for i in unflagged)
        # bob's second looks are not judged again; the model learns the corrected label
        assert len(theirs) == len(flagged) and len(mine) == 10      # ann holds the third batch
        for i in mine:
            s.submit(i["item"], int(y[i["item"]]), annotator="ann")
        s.wait_for_version(2, timeout=30)   # bob's labels count towards a retrain: some of ann's may come after it
        deadline = time.time() + 30
        while len(s.store.checks()) < 10 + len(mine) and time.time() < deadline:
            time.sleep(0.05)
        checks = s.store.checks()
        assert len(checks) == 10 + len(mine) and "bob" not in {c["annotator"] for c in checks}
        assert s.learner.y_pool_[a] == y[a]
        # model 0's guesses, against the labels that came while it was current
        v = s.versions()
        assert v[0]["n_judged"] == 10 and v[0]["guess_accuracy"] == pytest.approx(
            np.mean(P0[items].argmax(axis=1) == given))


def test_the_dynamic_rule_waits_for_20_judged_labels_then_flags_earlier_ones_too(flat_digits300, tmp_path):
    X, y = flat_digits300
    P0 = model0(X, y).predict_proba(X)
    with make_session(X, tmp_path / "s.db", "dynamic") as s:
        label_batch(s, y, "ann")
        s.wait_for_version(0, timeout=30)
        items = [b["item"] for b in s.next_batch(annotator="ann", timeout=10)]
        wrong = {i: int(np.argmin(P0[i])) for i in items[:2]}
        for i in items:
            s.submit(i, wrong.get(i, int(y[i])), annotator="ann")
        s.wait_for_version(1, timeout=30)
        assert len(s.store.checks()) == 10 and not any(c["flagged"] for c in s.store.checks())  # 10 < 20
        assert s.status()["second_looks"]["flagged"] == 0
        # model 1, refitted here on the labels it saw
        seen = np.r_[INITIAL, items]
        given = np.array([wrong.get(i, y[i]) for i in seen])
        P1 = LogisticRegression(C=10, max_iter=300, random_state=0).fit(X[seen], given).predict_proba(X)
        third = [b["item"] for b in s.next_batch(annotator="ann", timeout=10)]
        for i in third:
            s.submit(i, int(y[i]), annotator="ann")
        s.wait_for_version(2, timeout=30)
        checks = s.store.checks()
        assert [c["item"] for c in checks] == items + third
        p_given = np.r_[P0[items, given[len(INITIAL):]], P1[third, y[third]]]
        np.testing.assert_allclose([c["p_given"] for c in checks], p_given, rtol=1e-4)
        tau = trust_threshold(p_given, 10, "dynamic")[0]
        flagged = [i for i, p in zip(items + third, p_given) if p < tau]
        assert set(wrong) & set(flagged)                  # a mistake of the batch before, flagged only now
        assert [c["item"] for c in checks if c["flagged"]] == flagged
        assert all(c["threshold"] == pytest.approx(tau, rel=1e-4) for c in checks if c["flagged"])
        assert s.status()["second_looks"]["pending"] == len(flagged)


def test_the_budget_flags_the_least_likely_labels_first(flat_digits300, tmp_path):
    """With a budget of 10%, of the labels below the threshold only the least likely are flagged: one
    in ten judged labels at most, and more as more are judged."""
    X, y = flat_digits300
    P0 = model0(X, y).predict_proba(X)
    with make_session(X, tmp_path / "s.db", 0.3, budget=0.1) as s:
        label_batch(s, y, "ann")
        s.wait_for_version(0, timeout=30)
        items = [b["item"] for b in s.next_batch(annotator="ann", timeout=10)]
        for i in items:
            s.submit(i, int(y[i]), annotator="ann")
        s.wait_for_version(1, timeout=30)
        p_given = P0[items, y[items]]
        assert (p_given < 0.3).sum() >= 2                      # more below the threshold than the budget allows
        checks = s.store.checks()
        assert [c["item"] for c in checks if c["flagged"]] == [items[int(np.argmin(p_given))]]   # floor(0.1 * 10)
        assert all(c["threshold"] == 0.3 for c in checks)
    with pytest.raises(ValueError, match="second_look_budget must be"):
        make_session(X, tmp_path / "b.db", 0.3, budget=0)


def test_a_skip_declines_a_second_look_and_undo_withdraws_it(flat_digits300, tmp_path):
    X, y = flat_digits300
    P0 = model0(X, y).predict_proba(X)
    with make_session(X, tmp_path / "s.db", 0.05) as s:
        label_batch(s, y, "ann")
        s.wait_for_version(0, timeout=30)
        items = [b["item"] for b in s.next_batch(annotator="ann", timeout=10)]
        wrong = {i: int(np.argmin(P0[i])) for i in items[:2]}
        for i in items:
            s.submit(i, wrong.get(i, int(y[i])), annotator="ann")
        s.wait_for_version(1, timeout=30)
        a, b = items[:2]
        s.skip(a, annotator="bob")                                     # bob declines a ...
        assert a not in [x["item"] for x in s.next_batch(annotator="bob")]
        assert a in [x["item"] for x in s.next_batch(annotator="eve")]  # ... eve is offered it
        s.undo(b, annotator="ann")                                       # ann takes her label of b back
        looks = {c["item"]: c for c in s.store.second_looks()}
        assert looks[a]["declined_by"] == ["bob"] and looks[a]["outcome"] == "pending"
        assert looks[b]["outcome"] == "withdrawn"
        assert b not in [x["item"] for x in s.next_batch(annotator="carl")]


def test_no_second_looks_flags_nothing_and_a_bad_rule_is_refused(flat_digits300, tmp_path):
    X, y = flat_digits300
    with make_session(X, tmp_path / "s.db", None) as s:
        label_batch(s, y, "ann")
        s.wait_for_version(0, timeout=30)
        label_batch(s, y, "ann", wrong={})
        s.wait_for_version(1, timeout=30)
        checks = s.store.checks()             # judged, for the model's guess accuracy, but never flagged
        assert len(checks) == 10 and not any(c["flagged"] for c in checks)
        assert s.status()["second_looks"]["flagged"] == 0 and s.versions()[0]["n_judged"] == 10
    for bad in ("batch", 1.5):
        with pytest.raises(ValueError, match="rule must be"):
            make_session(X, tmp_path / f"bad{bad}.db", bad)
    learner = ActiveLearner(LogisticRegression(), random_state=0, seeding="step")
    with pytest.raises(ValueError, match="may not set 'candidates'.*pool_subsample"):
        LabellingSession(learner, X, classes=range(10), store=tmp_path / "q.db", query_kwargs={"candidates": 20})
    assert not (tmp_path / "q.db").exists() or LabelStore(tmp_path / "q.db").config() is None


def test_a_store_of_schema_version_1_gains_the_checks_table(tmp_path):
    path = tmp_path / "old.db"
    store = LabelStore(path)
    store.add_items(["a", "b"])
    store.add_event(0, "label", "cat", annotator="ann")
    store.close()
    conn = sqlite3.connect(path)             # make it what schema version 1 wrote
    conn.execute("DROP TABLE checks")
    conn.execute("ALTER TABLE queries DROP COLUMN kind")
    conn.execute("PRAGMA user_version=1")
    conn.commit()
    conn.close()
    store = LabelStore(path)
    assert store.current_labels()[0]["label"] == "cat" and store.checks() == []
    store.add_checks([{"event": 1, "model_version": 0, "p_given": 0.2, "guess": "dog", "threshold": 0.1,
                       "flagged": False}])
    assert store.checks()[0]["p_given"] == 0.2
    store.close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 3
    conn.execute("PRAGMA user_version=4")    # a newer skdbal's store: refused, left alone
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(StoreError, match="schema version 4"):
        LabelStore(path)
    assert path.read_bytes() == before


def test_the_page_exports_second_looks_versions_and_the_model(flat_digits300, tmp_path):
    """Over HTTP: the labels CSV records both labels of a second look; /api/versions the learning
    curve; /api/model.pt a skorch net's parameters (save_params) that load into a fresh net."""
    import csv
    import io

    from starlette.testclient import TestClient

    from skdbal.labelling.app import make_app
    from skdbal.models import MLP, MCDropoutClassifier

    X, y = flat_digits300
    P0 = model0(X, y).predict_proba(X)
    s = make_session(X, tmp_path / "s.db", 0.05)
    with TestClient(make_app(s, token="t", images=False), headers={"X-Token": "t"}) as client, s:
        assert client.get("/api/model.pt").status_code == 404            # no model yet
        label_batch(s, y, "ann")
        s.wait_for_version(0, timeout=30)
        items = [b["item"] for b in s.next_batch(annotator="ann", timeout=10)]
        a = items[0]
        for i in items:
            s.submit(i, int(np.argmin(P0[a])) if i == a else int(y[i]), annotator="ann")
        s.wait_for_version(1, timeout=30)
        assert s.store.second_looks()[0]["item"] == a
        s.submit(a, int(y[a]), annotator="bob")
        rows = {int(r["item"]): r for r in csv.DictReader(io.StringIO(client.get("/api/labels.csv").text))}
        assert len(rows) == 40 and rows[a]["label"] == str(y[a]) and rows[a]["annotator"] == "bob"
        assert (rows[a]["first_label"], rows[a]["first_annotator"], rows[a]["second_look"]) == \
            (str(np.argmin(P0[a])), "ann", "changed")
        assert float(rows[a]["p_given"]) == pytest.approx(P0[a, np.argmin(P0[a])], rel=1e-6)
        assert rows[items[-1]]["second_look"] == ""
        versions = client.get("/api/versions").json()["versions"]
        assert [v["version"] for v in versions] == [0, 1] and [v["n_labels"] for v in versions] == [30, 40]
        assert versions[0]["n_judged"] == 10 and versions[0]["guess_accuracy"] == pytest.approx(
            np.mean(P0[items].argmax(axis=1) == [np.argmin(P0[a])] + list(y[items[1:]])))
        r = client.get("/api/model.pt")                 # a scikit-learn model: not a skorch net
        assert r.status_code == 404 and "not a skorch net" in r.json()["error"]

    # a skorch net: its parameters, as save_params writes them
    net = MCDropoutClassifier(module=MLP, classes=np.arange(10), max_epochs=3, random_state=0)
    learner = ActiveLearner(net, max_entropy, random_state=0, seeding="step", verbose=False)
    s = LabellingSession(learner, X.astype(np.float32), classes=range(10), store=tmp_path / "n.db", batch_size=10,
                         initial=INITIAL, retrain_after=30)
    with TestClient(make_app(s, token="t", images=False), headers={"X-Token": "t"}) as client, s:
        label_batch(s, y, "ann")
        s.wait_for_version(0, timeout=60)
        r = client.get("/api/model.pt")
        assert r.status_code == 200 and r.headers["content-disposition"].endswith('model-v0.pt"')
        fresh = MCDropoutClassifier(module=MLP, classes=np.arange(10), max_epochs=3, random_state=0).initialize()
        fresh.load_params(f_params=io.BytesIO(r.content))
        mine, theirs = fresh.module_.state_dict(), s.learner.estimator_.module_.state_dict()
        assert list(mine) == list(theirs) and mine["_extra_state"] == theirs["_extra_state"]
        assert all(np.array_equal(mine[k].numpy(), theirs[k].numpy()) for k in mine if k != "_extra_state")


def test_an_undo_of_the_second_look_reopens_it(tmp_path):
    store = LabelStore(tmp_path / "s.db")
    store.add_items(["a", "b"])
    first = store.add_event(0, "label", "cat", annotator="ann")
    store.add_checks([{"event": first, "model_version": 0, "p_given": 0.01, "guess": "dog", "threshold": 0.1,
                       "flagged": True}])
    store.add_event(0, "label", "dog", annotator="bob")
    assert store.second_looks()[0]["outcome"] == "changed"
    store.add_event(0, "undo", annotator="ann")                     # ann's own, flagged label: the look stands
    assert store.second_looks()[0]["outcome"] == "changed"
    store.add_event(0, "undo", annotator="bob")                     # bob takes his second look back
    look = store.second_looks()[0]
    assert look["outcome"] == "pending" and look["second_label"] is None
    store.add_event(0, "label", "cat", annotator="eve")
    assert store.second_looks()[0]["outcome"] == "confirmed"
