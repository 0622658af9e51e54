"""Second looks: a label the model of its time finds unlikely is flagged and offered to another annotator.

The model that judges a label has not seen it (it is the current model when
the label arrives); the threshold follows the noise filter's rules
(:func:`skdbal.noisy_labels.trust_threshold`). Every expected value here is
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
from skdbal.labelling._second_looks import choose_flags, flag_threshold
from skdbal.noisy_labels import calibration_ratio

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


def label_with_two_mistakes(session, y, P0):
    """Once model 0 is trained: label the batch offered to "ann", its first two items with the class model
    0 finds least likely (two mistakes), the others right; the batch's items and the mistakes {item: label}."""
    session.wait_for_version(0, timeout=30)
    items = [b["item"] for b in session.next_batch(annotator="ann", timeout=10)]
    wrong = {i: int(np.argmin(P0[i])) for i in items[:2]}
    for i in items:
        session.submit(i, wrong.get(i, int(y[i])), annotator="ann")
    return items, wrong


def test_unlikely_labels_are_flagged_and_offered_to_another_annotator(flat_digits300, tmp_path, rule=0.05):
    X, y = flat_digits300
    P0 = model0(X, y).predict_proba(X)
    with make_session(X, tmp_path / "s.db", rule) as s:
        first = label_batch(s, y, "ann")
        assert sorted(b["item"] for b in first) == INITIAL.tolist()
        items, wrong = label_with_two_mistakes(s, y, P0)
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


def test_the_dynamic_rule_flags_nothing_before_40_labels_are_judged(flat_digits300, tmp_path):
    """Two gross mistakes among the first 20 judged labels: the models that judged them (on 30 and 40
    labels) are not trusted yet, so nothing is flagged (the rule flagged them at 20 judged labels
    before, as it flagged 8 right labels on the demo)."""
    X, y = flat_digits300
    P0 = model0(X, y).predict_proba(X)
    with make_session(X, tmp_path / "s.db", "dynamic") as s:
        label_batch(s, y, "ann")
        items, wrong = label_with_two_mistakes(s, y, P0)
        assert all(P0[i, wrong[i]] < 0.015 for i in wrong)          # labels model 0 finds all but impossible
        s.wait_for_version(1, timeout=30)
        third = [b["item"] for b in s.next_batch(annotator="ann", timeout=10)]
        for i in third:
            s.submit(i, int(y[i]), annotator="ann")
        s.wait_for_version(2, timeout=30)
        checks = s.store.checks()
        assert [c["item"] for c in checks] == items + third             # 20 judged, 20 < MIN_TRUSTED = 40
        assert not any(c["flagged"] for c in checks) and all(c["threshold"] == 0 for c in checks)
        assert s.status()["second_looks"]["flagged"] == 0


def test_a_model_sure_of_guesses_of_which_half_were_right_flags_nothing():
    """Guess accuracy 0.5 at confidence 0.95: the model errs (1 - 0.5) / (1 - 0.95) = 10 times as often
    as it says, so its p is read as 10 p: the 20 agreements (p 0.95) as 1, the 20 disagreements
    (p 0.01) as 0.1. At p' = 0.1 the flip posterior is exactly ε (0.9ε/9 against 0.1(1 - ε)), at 1 it is
    0, so EM's step is ε <- ε/2: the noise rate goes to 0 and nothing is flagged, not even p 0.001."""
    p = [0.95] * 20 + [0.01] * 20
    t = flag_threshold(p, [True] * 20 + [False] * 20, [0.95] * 40, 10, "dynamic")
    assert t["kappa"] == pytest.approx(10.0)
    assert t["noise_rate"] < 1e-5 and t["threshold"] < 1e-6
    assert not 0.001 < t["threshold"]


def test_a_model_as_right_as_it_is_sure_flags_a_label_it_finds_unlikely():
    """Guess accuracy 0.85 at confidence 0.85 (calibrated: kappa 1), six labels it finds unlikely. The
    noise rate is the fixed point of ε = mean flip posterior, solved here by bisection (brentq), and
    τ = (ε/9) / ((1 - ε) + ε/9); a label of p 0.01 is below it."""
    from scipy.optimize import brentq

    unlikely = [0.01, 0.005, 0.002, 0.001, 0.003, 0.004]
    p = np.r_[[0.85] * 34, unlikely]

    def mean_posterior(eps):
        wrong = (1 - p) * eps / 9
        return np.mean(wrong / (wrong + p * (1 - eps)))

    eps = brentq(lambda e: mean_posterior(e) - e, 1e-3, 0.8)
    tau = (eps / 9) / ((1 - eps) + eps / 9)
    t = flag_threshold(p, [True] * 34 + [False] * 6, [0.85] * 40, 10, "dynamic")
    assert t["kappa"] == 1.0
    assert t["noise_rate"] == pytest.approx(eps, abs=1e-5) and eps == pytest.approx(0.12284, abs=1e-4)
    assert t["threshold"] == pytest.approx(tau, rel=1e-4) and tau == pytest.approx(0.015322, rel=1e-3)
    assert 0.01 < t["threshold"]                                     # flagged
    # one more disagreement at the same confidence: 7/40 = 0.175 missed against 0.15 promised, kappa 7/6,
    # and the rule runs on the corrected probabilities min(7/6 p, 1), then flags below τ/kappa
    p7 = np.r_[[0.85] * 33, unlikely + [0.006]]
    t7 = flag_threshold(p7, [True] * 33 + [False] * 7, [0.85] * 40, 10, "dynamic")
    assert t7["kappa"] == pytest.approx(7 / 6)
    q = np.minimum(7 / 6 * p7, 1.0)

    def mean_posterior7(eps):
        wrong = (1 - q) * eps / 9
        return np.mean(wrong / (wrong + q * (1 - eps)))

    eps7 = brentq(lambda e: mean_posterior7(e) - e, 1e-3, 0.8)
    assert t7["noise_rate"] == pytest.approx(eps7, abs=1e-5)
    assert t7["threshold"] == pytest.approx((eps7 / 9) / ((1 - eps7) + eps7 / 9) / (7 / 6), rel=1e-4)


def test_the_rule_needs_40_labels_of_known_confidence_and_a_plausible_noise_rate():
    p = [0.85] * 34 + [0.01, 0.005, 0.002, 0.001, 0.003, 0.004]
    agree = [True] * 34 + [False] * 6
    conf = [0.85] * 39 + [np.nan]                                     # judged before a restart: unknown
    assert flag_threshold(p, agree, conf, 10, "dynamic")["threshold"] == 0.0      # 39 < 40
    assert flag_threshold(p + [0.9], agree + [True], conf + [0.9], 10, "dynamic")["threshold"] > 0.01
    # 12 of 40 labels all but impossible under a calibrated model: EM blames the annotators for about
    # 30% of the labels, more than MAX_NOISE (0.15): the model's blind spots, not slips; nothing flagged
    p12 = [0.7] * 28 + [0.001] * 12
    t = flag_threshold(p12, [True] * 28 + [False] * 12, [0.7] * 40, 10, "dynamic")
    assert t["kappa"] == 1.0 and t["noise_rate"] > 0.15 and t["threshold"] == 0.0
    # a number is the threshold itself, as the user asked, from the first judged label
    assert flag_threshold([0.01], [False], [0.99], 10, 0.05)["threshold"] == 0.05


def test_a_model_that_doubts_two_labels_of_one_class_flags_neither():
    """Model 5 finds two 3s, a 5 and (model 4 before it) an 8 below the threshold 0.01: wrong labels
    spread over the classes, so two doubted 3s say the model is blind to 3s, and only the 5 is flagged;
    the 8 was judged by a model not trusted then. A budget of 0.2 of 6 judged labels allows one flag
    (a withdrawn flag cost nothing)."""
    def check(event, label, p, version, flagged=False, withdrawn=False):
        return {"event": event, "label": label, "p_given": p, "model_version": version, "flagged": flagged,
                "withdrawn": withdrawn}

    checks = [check(1, "8", 0.0005, 4), check(2, "1", 0.002, 4, flagged=True, withdrawn=True),
              check(3, "3", 0.001, 5), check(4, "3", 0.002, 5), check(5, "5", 0.004, 5), check(6, "7", 0.5, 5)]
    current = {1, 2, 3, 4, 5, 6}
    assert choose_flags(checks, checks, 0.01, 5, current, set(), None) == [5]
    assert choose_flags(checks, checks, 0.01, 5, current, set(), 0.2) == [5]            # floor(1.2) - 0
    assert choose_flags(checks, checks, 0.01, 5, current - {5}, set(), None) == []      # relabelled since
    assert choose_flags(checks, checks, 0.01, 5, current, {5}, None) == []              # a second look
    # a fixed threshold flags what it is asked to, least likely first, within the budget
    assert choose_flags(checks, checks, 0.01, 5, current, set(), None, adaptive=False) == [1, 3, 4, 5]
    assert choose_flags(checks, checks, 0.01, 5, current, set(), 0.34, adaptive=False) == [1, 3]   # floor(2.04)


def test_the_calibration_ratio_by_hand():
    # 5 of 10 guesses confirmed at confidence 0.95 under noise 0.1 over 10 classes: the labels should
    # have agreed with probability 0.9 * 0.95 + 0.1 * 0.05 / 9 = 0.8555556; kappa = 0.5 / 0.1444444
    assert calibration_ratio([True] * 5 + [False] * 5, [0.95] * 10, 0.1, 10) == pytest.approx(0.5 / (1 - 0.8555556))
    assert calibration_ratio([True] * 9 + [False], [0.5] * 10, 0.0, 10) == 1.0     # underconfident: 1
    assert calibration_ratio([False], [1.0], 0.0, 10) == float("inf")
    with pytest.raises(ValueError, match="differ in length"):
        calibration_ratio([True, False], [0.5], 0.0, 10)


def test_a_flag_the_next_model_guesses_confidently_is_withdrawn_not_offered(flat_digits300, tmp_path):
    """Rule 0.3: model 0 flags two wrong labels (the classes it finds least likely) and five right ones.
    Model 1, trained on all of them (refitted here), guesses four of the right ones with at least 0.8:
    those flags are withdrawn when it is published (recorded as "withdrawn" in the store); the two
    wrong labels, which it fits with less, and one right label are still offered as second looks."""
    X, y = flat_digits300
    P0 = model0(X, y).predict_proba(X)
    with make_session(X, tmp_path / "s.db", 0.3) as s:
        label_batch(s, y, "ann")
        items, wrong = label_with_two_mistakes(s, y, P0)
        given = {i: wrong.get(i, int(y[i])) for i in items}
        flagged = [i for i in items if P0[i, given[i]] < 0.3]
        s.wait_for_version(1, timeout=30)
        seen = np.r_[INITIAL, items]
        P1 = LogisticRegression(C=10, max_iter=300, random_state=0).fit(
            X[seen], np.r_[y[INITIAL], [given[i] for i in items]]).predict_proba(X)
        agreed = [i for i in flagged if P1[i].argmax() == given[i] and P1[i, given[i]] >= 0.8]
        assert len(flagged) == 7 and len(agreed) == 4 and not set(wrong) & set(agreed)   # what the test is about
        looks = {c["item"]: c for c in s.store.second_looks()}
        assert sorted(looks) == sorted(flagged)
        assert sorted(i for i in looks if looks[i]["outcome"] == "withdrawn") == sorted(agreed)
        rest = [i for i in flagged if i not in agreed]
        assert all(looks[i]["outcome"] == "pending" for i in rest) and set(wrong) <= set(rest)
        assert s.status()["second_looks"] == {"flagged": 7, "pending": 3, "confirmed": 0, "changed": 0,
                                              "withdrawn": 4}
        offered = s.next_batch(annotator="bob", timeout=10)
        assert [b["item"] for b in offered if b["second_look"]] == rest
        labels = {r["item"]: r for r in s.labels()}
        assert all(labels[i]["second_look"] == "withdrawn" and labels[i]["label"] == y[i] for i in agreed)


def test_the_store_records_a_withdrawal(tmp_path):
    store = LabelStore(tmp_path / "s.db")
    store.add_items(["a", "b"])
    first = store.add_event(0, "label", "cat", annotator="ann")
    other = store.add_event(1, "label", "dog", annotator="ann")
    store.add_checks([{"event": first, "model_version": 0, "p_given": 0.01, "guess": "dog", "threshold": 0.1,
                       "flagged": True},
                      {"event": other, "model_version": 0, "p_given": 0.9, "guess": "dog", "threshold": 0.1,
                       "flagged": False}])
    store.withdraw([first, other])                  # an unflagged label has no flag to withdraw
    checks = store.checks()
    assert [(c["flagged"], c["withdrawn"]) for c in checks] == [(True, True), (False, False)]
    assert [(c["item"], c["outcome"]) for c in store.second_looks()] == [(0, "withdrawn")]
    store.add_event(0, "label", "dog", annotator="bob")      # a label given anyway is not a second look
    assert store.second_looks()[0]["outcome"] == "withdrawn"
    store.close()


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
        items, wrong = label_with_two_mistakes(s, y, P0)
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
