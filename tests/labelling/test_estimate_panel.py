"""The labelling page's estimate panel: how good the model is, from the labels people gave, and what the
stopping rules say. It replaces the "guess accuracy" curve, which swung between 20% and 80% from one
ten-label point to the next and told the annotator nothing."""
import math

import numpy as np
import pytest
from _helpers import chromium_driver, needs_chromium, serve
from sklearn.linear_model import LogisticRegression

from skdbal import ActiveLearner
from skdbal.acquisition import max_entropy, stochastic_batch
from skdbal.labelling import LabellingSession
from skdbal.labelling.accuracy_panel import AccuracyPanel, estimate_words
from skdbal.labelling.store import LabelStore

Z = 1.959963984540054   # the normal quantile of a 95% interval


def wilson(p, n, z=Z):
    """Wilson's score interval, written out."""
    d = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / d
    half = z / d * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def judged_store(path, versions):
    """A store written by hand: per version, the labels that came while it was current (item, label given,
    its guess), then the model version that follows them, with ``metrics``."""
    store = LabelStore(path)
    store.add_items([f"k{i}" for i in range(40)])
    last = 0
    for i in range(10):     # the first batch, before any model
        last = store.add_event(i, "label", "a", annotator="ann")
    store.add_model(0, last, 10, {})
    n = 10
    for v, (labels, metrics) in enumerate(versions):
        for item, label, guess, *undo in labels:
            event = store.add_event(item, "label", label, annotator="ann")
            store.add_checks([{"event": event, "model_version": v, "p_given": 0.5, "guess": guess,
                               "threshold": 0.0, "flagged": False}])
            if undo:        # the annotator changes it before the retrain: the later label counts
                store.add_event(item, "undo", annotator="ann")
                event = store.add_event(item, "label", undo[0], annotator="ann")
            last = event
            n += 1
        store.add_model(v + 1, last, n, metrics)
    return store


# ---------------------------------------------------------------------------------------- the numbers

def test_a_top_k_estimate_is_the_share_of_the_last_three_versions_labels_guessed_right(tmp_path):
    store = judged_store(tmp_path / "s.db", [
        ([(10, "a", "a"), (11, "b", "a"), (12, "b", "a", "a")], {}),      # 2 of 3 (12 changed to a: right)
        ([(13, "a", "a"), (14, "b", "a")], {}),                             # 1 of 2
        ([(15, "a", "a"), (16, "b", "b"), (17, "b", "b")], {}),             # 3 of 3
        # 0 of 2, and 11 changed to a (a second look): 1 of 3; version 0's figure stays as it was shown
        ([(18, "a", "b"), (19, "a", "b"), (11, "a", "a")], {}),
    ])
    estimates = AccuracyPanel(store).estimates()
    # version 0: 2 of 3; version 2: the three versions 0-2, 6 of 8; version 3: versions 1-3, 5 of 8
    for v, right, n in ((0, 2, 3), (1, 3, 5), (2, 6, 8), (3, 5, 8)):
        e = estimates[v]
        low, high = wilson(right / n, n)
        assert (e["accuracy"], e["n_labels"], e["biased"], e["method"]) == (pytest.approx(right / n), n, True,
                                                                            "prequential-biased")
        assert (e["low"], e["high"]) == (pytest.approx(low), pytest.approx(high))
    assert 4 not in estimates           # the current version: its labels are fed once the next is trained
    assert estimates[3]["n_labels_model"] == 10 + 3 + 2 + 3
    store.close()


def test_a_stochastic_batch_gives_the_unbiased_estimate_of_its_labelled_start(tmp_path):
    """Version 0 drew items 20, 21, 22 with known probabilities 1/5, 1/4, 1/2 from 30 candidates; 20 was
    guessed right, 21 wrong, 22 left unlabelled (skipped): the estimate is the LURE estimate of the first
    two draws, carried onto the 28 items left, with the Kish-Wilson interval."""
    draw = {"chooser": 0, "picks": [20, 21, 22], "log_q": [math.log(1 / 5), math.log(1 / 4), math.log(1 / 2)],
            "n_candidates": 30, "n_unlabelled": 30}
    store = judged_store(tmp_path / "s.db", [([(20, "a", "a"), (21, "b", "a"), (25, "b", "a")], {"draws": [draw]})])
    e = AccuracyPanel(store).estimates()[0]
    # LURE weights v_m = 1 + (N - M)/(N - m) (1/((N - m + 1) q_m) - 1), N = 30, M = 2
    v1 = 1 + 28 / 29 * (1 / (30 * (1 / 5)) - 1)
    v2 = 1 + 28 / 28 * (1 / (29 * (1 / 4)) - 1)
    risk_30 = (0 * v1 + 1 * v2) / 2                       # on the 30 candidates
    risk = (30 * risk_30 - 1) / 28                         # less the one error now known, on the 28 left
    n_eff = (v1 + v2) ** 2 / (v1 ** 2 + v2 ** 2)           # Kish, of the weights on the losses
    low, high = wilson(1 - risk, max(1.0, n_eff))
    assert e["accuracy"] == pytest.approx(1 - risk) and e["accuracy"] == pytest.approx(0.961823, abs=1e-6)
    assert (e["low"], e["high"], e["n_effective"]) == (pytest.approx(low), pytest.approx(high), pytest.approx(n_eff))
    assert (e["n_labels"], e["biased"], e["method"]) == (2, False, "stratified-lure-kish-wilson")


def test_the_words_say_what_is_estimated_and_how_sure_it_is():
    biased = {"accuracy": 0.7133, "low": 0.53, "high": 0.85, "n_labels": 30, "biased": True, "version": 4,
              "confidence": 0.95}
    assert estimate_words(biased, "images") == ("Right on 71% of the last 30 images it asked about (its hardest "
                                                "cases, so on all images it is likely higher).")
    assert "interval" not in estimate_words(biased) and "53" not in estimate_words(biased)   # no interval of it
    unbiased = dict(biased, accuracy=0.944, low=0.886, high=0.973, n_labels=40, biased=False)
    assert estimate_words(unbiased, "images") == (
        "Estimated accuracy 94% (89–97%, 95% interval) on the images still unlabelled, from 40 labels drawn at "
        "random with known odds (model version 4).")


def session_of(X, path, strategy=max_entropy, **kwargs):
    learner = ActiveLearner(LogisticRegression(max_iter=300, random_state=0), strategy, random_state=0,
                            seeding="step", verbose=False)
    return LabellingSession(learner, X, classes=range(10), store=path, batch_size=10, **kwargs)


def label_versions(session, y, versions):
    """Answer each batch truthfully, ``versions`` times (version by version)."""
    for v in versions:
        for item in session.next_batch(annotator="ann", timeout=30):
            session.submit(item["item"], int(y[item["item"]]), annotator="ann")
        session.wait_for_version(v, timeout=60)


def test_a_restarted_session_shows_the_same_estimates(digits64, tmp_path):
    """The store is the truth: a session opened again on it (not even started) shows the estimates, the
    rules' verdicts and the forecast it showed; started, it goes on from them."""
    X, y = digits64[0][:300].reshape(300, -1), digits64[1][:300]
    strategy = stochastic_batch(max_entropy, "softmax", beta=1.0)
    with session_of(X, tmp_path / "s.db", strategy) as s:
        label_versions(s, y, range(5))
        before, versions = s.status(), s.versions()
        draws = [d for m in s.store.models() for d in m["metrics"].get("draws", [])]
    assert before["accuracy"]["method"] == "stratified-lure-kish-wilson" and before["accuracy"]["version"] == 3
    # each batch's draw is kept with the version after it: 290 candidates after the first batch, then 10 fewer
    assert [d["chooser"] for d in draws] == [0, 1, 2, 3] and [d["n_candidates"] for d in draws] == [290, 280, 270, 260]
    assert all(len(d["log_q"]) == 10 and max(d["log_q"]) <= 0 for d in draws)
    assert [v["estimate"] is not None for v in versions] == [True] * 4 + [False]
    again = session_of(X, tmp_path / "s.db", strategy)
    after = again.status()
    keys = ("accuracy", "accuracy_words", "stopping", "advice", "forecast", "forecast_words")
    assert {k: after[k] for k in keys} == {k: before[k] for k in keys}
    assert [v["estimate"] for v in again.versions()] == [v["estimate"] for v in versions]
    with again:
        label_versions(again, y, [5])
        assert [v["estimate"] for v in again.versions()][:4] == [v["estimate"] for v in versions][:4]
        assert again.status()["accuracy"]["version"] == 4


# ------------------------------------------------------------------------------------ the rules' words

def test_each_rules_verdict_in_words_on_a_hand_made_sequence():
    from skdbal.labelling._oracle import rule_verdicts
    from skdbal.labelling.stop_advice import advice_words, session_stopping, verdict_words

    rules = session_stopping(label_budget=40)
    rules.set_params(stabilizing_predictions__window=2)
    steady = [[0.9, 0.1], [0.2, 0.8], [0.3, 0.7], [0.6, 0.4]]            # entropy ~0.66 on average: unsure
    changed = [[0.9, 0.1], [0.2, 0.8], [0.3, 0.7], [0.4, 0.6]]            # one guess of four changes
    words = []
    for step, proba in enumerate([steady, changed, changed, changed]):
        rules.update({"step": step, "n_labels": 10 * (step + 1), "stop_proba": proba})
        verdicts = rule_verdicts(rules, stop_set=range(4))
        words.append([verdict_words(v, "images") for v in verdicts])
    assert words[0][0] == ("Too early to tell whether the model has stopped changing: it compares its guesses on "
                           "4 unlabelled images over 2 versions.")
    # κ between steady and changed: observed agreement 3/4, chance (2/4 * 1/4 + 2/4 * 3/4) = 1/2, κ = 1/2
    assert words[2][0] == ("The model is still changing: its guesses on 4 unlabelled images agreed κ = 0.750 on "
                           "average over the last 2 versions (it waits for 0.99).")        # mean of 0.5 and 1
    assert words[3][0] == ("The model has stopped changing: its guesses on 4 unlabelled images agreed κ = 1.000 on "
                           "average over the last 2 versions (it asks for 0.99).")
    entropy = np.mean([-(p * np.log(p) + (1 - p) * np.log(1 - p)) / np.log(2) for p in (0.9, 0.2, 0.3, 0.4)])
    assert words[3][1] == (f"The model is still unsure of its guesses: their mean normalised entropy on 4 unlabelled "
                           f"images is {entropy:.3f} (it waits for under 0.05).")
    assert words[2][2] == "30 of the budget's 40 labels given: 10 left."
    assert words[3][2] == "The label budget is spent: 40 labels given, the budget was 40."
    verdicts = rule_verdicts(rules, stop_set=range(4))
    assert advice_words(verdicts) == "2 of 3 stopping rules say you could stop now; labelling goes on until you stop."


def test_the_rules_are_configurable_and_refused_before_the_store_is_written(digits64, tmp_path):
    from skdbal.stopping import AnyOf, ClassificationChange, LabelBudget

    X = digits64[0][:60].reshape(60, -1)
    s = session_of(X, tmp_path / "a.db", stopping=ClassificationChange(), label_budget=30)
    assert sorted(s.stopping.named_rules()) == ["classification_change", "label_budget"]
    s.store.close()
    s = session_of(X, tmp_path / "b.db", stopping=AnyOf([LabelBudget(max_labels=20)]))
    assert list(s.stopping.named_rules()) == ["label_budget"]
    s.store.close()
    assert session_of(X, tmp_path / "c.db", stopping=None).stopping is None
    with pytest.raises(TypeError, match="stopping must be a stopping rule"):
        session_of(X, tmp_path / "d.db", stopping="kappa")
    with pytest.raises(ValueError, match="max_labels"):
        session_of(X, tmp_path / "e.db", label_budget=0)
    assert not (tmp_path / "d.db").exists() and not (tmp_path / "e.db").exists()


def test_the_session_runs_the_rules_each_version_and_never_stops(digits64, tmp_path):
    X, y = digits64[0][:300].reshape(300, -1), digits64[1][:300]
    with session_of(X, tmp_path / "s.db", label_budget=20, stop_set_size=50) as s:
        label_versions(s, y, range(3))
        status = s.status()
        assert [v["rule"] for v in status["stopping"]] == ["stabilizing_predictions", "overall_uncertainty",
                                                           "label_budget"]
        assert all(v["stop_set_size"] == 50 for v in status["stopping"])
        assert status["stopping"][2]["stop"] and status["stopping"][2]["words"].startswith("The label budget is spent")
        assert "you could stop now" in status["advice"]
        assert s.next_batch(annotator="ann", timeout=30)          # advice only: the next batch still comes
        stop_set = s.store.models()[0]["metrics"]["stop_set"]
    assert len(stop_set) == 50
    again = session_of(X, tmp_path / "s.db", label_budget=20, stop_set_size=50)
    assert again.journal.rows()[0]["stop_set"] == stop_set       # a resume watches the same items
    again.store.close()


# ------------------------------------------------------------------------------------------ on the page

@pytest.mark.slow
@needs_chromium
def test_the_page_shows_the_estimate_the_test_accuracy_the_forecast_and_the_rules(digits64, tmp_path):
    """In headless Chromium: the panel says what the status says, and draws each version's estimate with its
    interval beside its test accuracy. With SKDBAL_SCREENSHOTS set, the panel is shot for the guide."""
    import os

    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from skdbal.labelling.app import make_app

    X, y = digits64[0].reshape(len(digits64[0]), -1), digits64[1]
    strategy = stochastic_batch(max_entropy, "softmax", beta=1.0)
    session = session_of(X[:600], tmp_path / "s.db", strategy, X_test=X[1000:1400], y_test=y[1000:1400],
                         label_budget=200, item_noun="images").start()
    label_versions(session, y, range(7))
    status = session.status()
    base, stop = serve(make_app(session, token="secret"))
    driver = chromium_driver(tmp_path / "chrome")
    try:
        driver.set_window_size(1280, 1100)
        driver.get(f"{base}/")
        wait = WebDriverWait(driver, 20)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#curve-svg circle.estimate"))
        text = {k: driver.find_element(By.ID, k).text for k in ("estimate", "test", "forecast", "advice")}
        assert text["estimate"] == status["accuracy_words"] and "95% interval" in text["estimate"]
        assert text["test"] == status["test_words"] and "% right (model version 6)" in text["test"]
        assert text["forecast"] == "Forecast: " + status["forecast_words"]
        assert text["advice"] == status["advice"]
        rules = [li.text for li in driver.find_elements(By.CSS_SELECTOR, "#rules li")]
        assert rules == [v["line"] for v in status["stopping"]]
        # the word after the colon is lower-cased ("Keep going: The model" before)
        assert rules == [("Could stop: " if v["stop"] else "Keep going: ") + v["words"][0].lower() + v["words"][1:]
                         for v in status["stopping"]]
        assert rules[0].startswith(("Keep going: the model", "Could stop: the model", "Keep going: too early"))
        assert len(rules) == 3
        versions = session.versions()
        marks = driver.execute_script("return [document.querySelectorAll('#curve-svg circle.estimate').length, "
                                      "document.querySelectorAll('#curve-svg path.interval').length, "
                                      "document.querySelectorAll('#curve-svg rect.test').length]")
        n_estimates = sum(v["estimate"] is not None for v in versions)
        assert marks == [n_estimates, n_estimates, len(versions)] and n_estimates == 6
        shots = os.environ.get("SKDBAL_SCREENSHOTS")
        if shots:
            driver.find_element(By.ID, "panel").screenshot(os.path.join(shots, "labelling_estimate_panel.png"))
    finally:
        driver.quit()
        stop()
        session.stop()


def test_a_session_without_rules_says_none_is_set_not_that_none_has_spoken(tmp_path):
    """With ``stopping=None`` no rule will ever speak: the advice says none is set, before and after a model."""
    learner = ActiveLearner(LogisticRegression(), random_state=0, seeding="step", verbose=False)
    bare = LabellingSession(learner, np.eye(4), classes=["a", "b"], store=tmp_path / "bare.db", batch_size=2,
                            stopping=None)
    ruled = LabellingSession(ActiveLearner(LogisticRegression(), random_state=0, seeding="step", verbose=False),
                             np.eye(4), classes=["a", "b"], store=tmp_path / "ruled.db", batch_size=2)
    assert bare.status()["advice"] == "No stopping rule is set."
    assert ruled.status()["advice"] == "No stopping rule has spoken yet: they speak once a model is trained."
