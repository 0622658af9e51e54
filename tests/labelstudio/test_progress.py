"""The line ``skdbal labelstudio`` says after each retrain: the session's own accuracy estimate, test accuracy,
forecast and stopping advice (skdbal.labelling.progress_report), nothing computed twice; checked against
hand-computed cases; and where it goes (the project's description, the report beside the labels CSV)."""
import csv
import io
import time
from types import SimpleNamespace

import numpy as np
import pytest
from _helpers import digits_flat
from sklearn.linear_model import LogisticRegression

from skdbal import ActiveLearner
from skdbal.acquisition import max_entropy, stochastic_batch
from skdbal.labelling import LabellingSession
from skdbal.labelstudio.progress import (
    PROGRESS_MARK,
    ModelProgress,
    progress_csv_path,
    progress_fields,
    progress_line,
    report_json_path,
    with_progress,
)


# ------------------------------------------------------------------ the words, from a status
def test_the_line_is_the_sessions_words_in_order():
    status = {"accuracy_words": "Right on 75% of the last 8 rows it asked about.", "test_words": "On the test set "
              "given (4 rows): 50.0% right (model version 2).", "forecast": {"n_labels": 50},
              "forecast_words": "About 90% at 50 labels.", "advice": "1 of 2 stopping rules says you could stop now.",
              "stopping": [{"stop": False, "words": "The model is still changing."},
                           {"stop": True, "words": "The model is sure of its guesses."}]}
    assert progress_line(2, 30, status) == (
        "model v2 (30 labels): Right on 75% of the last 8 rows it asked about. On the test set given (4 rows): "
        "50.0% right (model version 2). About 90% at 50 labels. 1 of 2 stopping rules says you could stop now. "
        "The model is sure of its guesses.")
    # no test set, no forecast yet (its 'not yet' words are the page's, not the line's), no rule saying stop
    quiet = dict(status, test_words=None, forecast=None, forecast_words="No forecast yet.",
                 stopping=[{"stop": False, "words": "The model is still changing."}], advice="No stopping rule "
                 "says stop yet.")
    assert progress_line(3, 40, quiet) == ("model v3 (40 labels): Right on 75% of the last 8 rows it asked about. "
                                           "No stopping rule says stop yet.")


def test_the_rows_columns_are_the_sessions_figures():
    status = {"accuracy": {"version": 1, "accuracy": 0.75, "low": 0.4, "high": 0.93, "method": "prequential-biased",
                           "biased": True, "n_labels": 8}, "test_accuracy": 0.5,
              "forecast": {"n_labels": 50, "accuracy": 0.9, "low": 0.8, "high": 0.95},
              "stopping": [{"rule": "stabilizing_predictions", "stop": False, "value": None, "reason": "too early"},
                           {"rule": "label_budget", "stop": True, "value": 30.0, "reason": "30 labels bought"}],
              "advice": "1 of 2"}
    assert progress_fields(status) == {
        "estimate_version": 1, "estimate_acc": 0.75, "estimate_lo": 0.4, "estimate_hi": 0.93,
        "estimate_kind": "prequential-biased", "estimate_biased": True, "estimate_n": 8, "test_accuracy": 0.5,
        "forecast_n_labels": 50, "forecast_acc": 0.9, "forecast_lo": 0.8, "forecast_hi": 0.95,
        "stop_stabilizing_predictions": False, "stop_stabilizing_predictions_value": None,
        "stop_label_budget": True, "stop_label_budget_value": 30.0, "stop_reason": "30 labels bought",
        "advice": "1 of 2"}
    empty = progress_fields({"accuracy": None, "forecast": None, "stopping": [], "advice": "none"})
    assert empty["estimate_acc"] is None and empty["forecast_acc"] is None and empty["stop_reason"] is None


def test_the_description_keeps_the_projects_own_text():
    assert with_progress("", "model v0: x") == PROGRESS_MARK + "model v0: x"
    once = with_progress("Sort the digits.\n\nThanks!", "model v1:  a\nb")     # one line, spaces folded
    assert once == "skdbal: model v1: a b\n\nSort the digits.\n\nThanks!"
    assert with_progress(once, "model v2: c") == "skdbal: model v2: c\n\nSort the digits.\n\nThanks!"
    edited = "skdbal: model v1: a b\r\n\r\nSort the digits.\r\n\r\nThanks!"     # saved again from a browser
    assert with_progress(edited, "model v2: c") == "skdbal: model v2: c\n\nSort the digits.\r\n\r\nThanks!"
    assert progress_csv_path("a/s-labels.csv") == "a/s-labels-model.csv"
    assert report_json_path("a/s-labels.csv") == "a/s-labels-report.json"


def test_the_description_is_written_and_a_failure_is_retried_after_the_next_retrain():
    calls = []

    class Projects:
        def __init__(self):
            self.description, self.fail = "Our digits.", True

        def get(self, id):
            return {"description": self.description}

        def update(self, id, description):
            calls.append(id)
            if self.fail:
                raise OSError("Label Studio is away")
            self.description = description

    models = []
    status = {"accuracy_words": "No estimate yet.", "test_words": None, "forecast": None, "stopping": [],
              "advice": "No stopping rule says stop yet.", "accuracy": None}
    session = SimpleNamespace(store=SimpleNamespace(models=lambda: list(models)), status=lambda: status)
    client = SimpleNamespace(projects=Projects())
    progress = ModelProgress(session, client=client, project=7, out=io.StringIO())
    progress.after_query([4, 5])                     # no model yet: nothing said, nothing sent
    assert calls == [] and progress.rows == []
    models.append({"version": 0, "n_labels": 10})
    progress.after_query([4, 5])
    assert client.projects.description == "Our digits." and calls == [7]
    client.projects.fail = False
    progress.after_query([4, 5])                     # the same version: nothing new said
    assert calls == [7]
    models.append({"version": 1, "n_labels": 12})
    status = dict(status, accuracy_words="Right on 100% of the last 2 rows it asked about.")
    progress.after_query([6])
    assert client.projects.description == ("skdbal: model v1 (12 labels): Right on 100% of the last 2 rows it "
                                            "asked about. No stopping rule says stop yet.\n\nOur digits.")


# ------------------------------------------------------------------ a real session
def run_session(tmp_path, strategy, versions, *, callbacks=lambda learner: [], **kwargs):
    """A LabellingSession on 200 digits (a logistic regression), a truthful annotator, until model
    ``versions - 1``; ModelProgress after ``callbacks(learner)`` among its on_query. The session, its status at
    the last version, the progress and what it printed."""
    X, y = digits_flat(200)
    learner = ActiveLearner(LogisticRegression(max_iter=300, random_state=0), strategy, random_state=0,
                            seeding="step", verbose=False)
    session = LabellingSession(learner, X, classes=range(10), store=str(tmp_path / "s.db"), batch_size=10, **kwargs)
    out = io.StringIO()
    progress = ModelProgress(session, out=out, report_path=str(tmp_path / "m.csv"))
    session.on_query[:] = [*callbacks(learner), progress.after_query]
    with session:
        for version in range(versions):
            for item in session.next_batch(annotator="a", timeout=10):
                session.submit(item["item"], int(y[item["item"]]), annotator="a")
            session.wait_for_version(version, timeout=60)
        deadline = time.time() + 30
        while len(progress.rows) < versions and time.time() < deadline:
            time.sleep(0.05)
        status, checks = session.status(), session.store.checks()
        model = session.learner.estimator_
    return SimpleNamespace(session=session, status=status, checks=checks, progress=progress, out=out, y=y,
                           model=model)


def test_a_top_k_sessions_line_is_its_status_with_the_share_counted_by_hand(tmp_path):
    """Top-k max entropy: the estimate after model v2 is the share of the labels versions 0 and 1 judged that they
    guessed right, counted here from the store's judgements; the line and the row say the session's status."""
    r = run_session(tmp_path, max_entropy, 3)
    right = {v: [str(c["guess"]) == str(r.y[c["item"]]) for c in r.checks if c["model_version"] == v] for v in (0, 1)}
    assert len(right[0]) == len(right[1]) == 10
    share = (sum(right[0]) + sum(right[1])) / 20
    e = r.status["accuracy"]
    assert (e["version"], e["accuracy"], e["n_labels"], e["biased"]) == (1, pytest.approx(share), 20, True)
    lines = r.out.getvalue().splitlines()
    assert [line.split(" (")[0] for line in lines] == ["model v0", "model v1", "model v2"]
    assert lines[-1].startswith(f"model v2 (30 labels): Right on {100 * share:.0f}% of the last 20 items it asked "
                                "about (its hardest cases, so on all items it is likely higher). ")
    assert lines[-1] == progress_line(2, 30, r.status)
    assert lines[0].startswith("model v0 (10 labels): No estimate yet")
    row = r.progress.rows[-1]
    assert (row["estimate_acc"], row["estimate_n"], row["estimate_kind"]) == (pytest.approx(share), 20,
                                                                              "prequential-biased")
    assert [row[f"stop_{v['rule']}"] for v in r.status["stopping"]] == [v["stop"] for v in r.status["stopping"]]
    assert {v["rule"] for v in r.status["stopping"]} == {"stabilizing_predictions", "overall_uncertainty"}
    with open(tmp_path / "m.csv", newline="") as f:
        saved = list(csv.DictReader(f))
    assert [s["line"] for s in saved] == lines and saved[-1]["estimate_n"] == "20"


def test_the_test_set_and_the_budget_are_in_the_line(tmp_path):
    """With a test set (``--test``) and a label budget (``--label-budget``), as make_session gives them: the test
    accuracy of the model now, computed here with its own predictions, and the budget's verdict."""
    X, y = digits_flat(400)
    r = run_session(tmp_path, max_entropy, 2, X_test=X[200:], y_test=y[200:], label_budget=15)
    accuracy = float(np.mean(r.model.predict(X[200:]) == y[200:]))
    assert r.status["test_accuracy"] == pytest.approx(accuracy)
    line = r.out.getvalue().splitlines()[-1]
    assert f"On the test set given (200 items): {100 * accuracy:.1f}% right (model version 1)." in line
    assert "The label budget is spent: 20 labels given, the budget was 15." in line
    assert r.progress.rows[-1]["test_accuracy"] == pytest.approx(accuracy)
    assert r.progress.rows[-1]["stop_label_budget"] is True


def test_a_stochastic_batchs_draw_is_kept_though_the_push_queries_again_before_the_report(tmp_path):
    """As ``skdbal labelstudio`` orders the callbacks: the push (a query of its own, more than the batch) before
    the report. The session recorded the batch's draw before any callback ran: the store keeps the odds of the
    batch's own draw (noted here by a callback put first), and the estimate is the unbiased one, of 10 labels."""
    strategy = stochastic_batch(max_entropy, "softmax", beta=1.0)
    seen, pushed = [], []

    def callbacks(learner):
        def note(positions, scores):
            acq = getattr(learner, "last_acquisition_", None)
            if acq is not None and learner.step_ >= 0:
                seen.append((list(map(int, acq.indices)), [float(v) for v in acq.info["draw_log_q"]]))

        def push(positions, scores):       # what LabelStudioSync.push does: a query of its own
            if learner.step_ >= 0:
                pushed.append(learner.query(n_instances=20)[0].tolist())

        return [note, push]

    r = run_session(tmp_path, strategy, 2, callbacks=callbacks)
    assert pushed and seen
    draws = [d for m in r.session.store.models() for d in m["metrics"].get("draws", ())]
    assert [(d["picks"], d["log_q"]) for d in draws if d["chooser"] == 0] == [seen[0]]
    e = r.status["accuracy"]
    assert (e["version"], e["biased"], e["n_labels"], e["method"]) == (0, False, 10, "stratified-lure-kish-wilson")
    assert "from 10 labels drawn at random with known odds (model version 0)." in r.out.getvalue().splitlines()[-1]


def test_the_command_takes_test_and_label_budget_into_its_session_and_refuses_a_bad_test_in_one_line(
        tmp_path, monkeypatch, capsys):
    """``--test`` and ``--label-budget`` (the pool options shared with ``skdbal label``) reach the session that
    ``skdbal labelstudio`` runs, whose status the line says; a bad ``--test`` is one line, before any store."""
    import skdbal.labelling.cli as labelling_cli
    from skdbal.cli import main
    from skdbal.labelstudio import cli

    rng = np.random.RandomState(0)
    np.save(tmp_path / "pool.npy", rng.rand(50, 4).astype(np.float32))
    np.savez(tmp_path / "test.npz", X=rng.rand(6, 4).astype(np.float32), y=np.array(["a", "b"] * 3))
    monkeypatch.setattr(cli, "connect", lambda *a, **k: SimpleNamespace(
        projects=SimpleNamespace(list=lambda page_size: [])))
    monkeypatch.setenv("SKDBAL_TEST_TOKEN", "t")
    made = []
    real = labelling_cli.make_session

    def make_session(args):
        made.append(real(args))
        made[-1][0].store.close()
        raise ValueError("stopped here by the test")

    monkeypatch.setattr(labelling_cli, "make_session", make_session)
    base = ["labelstudio", "--npy", str(tmp_path / "pool.npy"), "--classes", "a,b", "--url", "http://127.0.0.1:9",
            "--project", "1", "--token-env", "SKDBAL_TEST_TOKEN"]
    with pytest.raises(SystemExit):
        main(base + ["--store", str(tmp_path / "s.db"), "--test", str(tmp_path / "test.npz"), "--label-budget", "15"])
    session = made[0][0]
    assert session.y_test.tolist() == ["a", "b"] * 3 and len(session.X_test) == 6
    assert sorted(session.stopping.named_rules()) == ["label_budget", "overall_uncertainty",
                                                      "stabilizing_predictions"]
    assert session.stopping.named_rules()["label_budget"].max_labels == 15
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(base + ["--store", str(tmp_path / "t.db"), "--test", str(tmp_path / "pool.npy")])
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"skdbal labelstudio: error: --test {tmp_path / 'pool.npy'}: a test set of an array is a .npz "
                   "with arrays X and y"]
    assert len(made) == 1 and not (tmp_path / "t.db").exists()
