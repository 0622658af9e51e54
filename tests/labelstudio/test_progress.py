"""The line ``skdbal labelstudio`` says after each retrain: the accuracy estimate and the stopping advice, checked
against hand-computed cases; and where it goes (the project's description, the report beside the labels CSV)."""
import csv
import io
import math
from types import SimpleNamespace

import numpy as np
import pytest

from skdbal.estimates import AccuracyEstimate
from skdbal.labelstudio.progress import (
    PROGRESS_MARK,
    ModelProgress,
    accuracy_words,
    advice_words,
    progress_csv_path,
    progress_line,
    with_progress,
)
from skdbal.stopping import LabelBudget, StabilizingPredictions, Verdict

Z = 1.959963984540054      # the normal quantile of a 95% interval


def wilson(p, n, z=Z):
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


# ------------------------------------------------------------------ the words
def test_a_biased_estimate_is_worded_as_the_share_of_the_hardest_tasks():
    e = AccuracyEstimate(0.7142857, 0.5, 0.85, 28, "prequential-biased", True, "the asked")
    assert accuracy_words(4, e) == ("model v4: the models before it were right on 71% of the last 28 tasks they "
                                    "asked about (their hardest; biased low)")


def test_an_unbiased_estimate_gives_its_interval_and_the_labels_behind_it():
    lo, hi = wilson(0.8, 10)                                  # 0.4902, 0.9433
    e = AccuracyEstimate(0.8, lo, hi, 10, "stratified-lure-kish-wilson", False, "the rows")
    assert accuracy_words(4, e, judged_by=3) == ("model v3 (before v4): estimated accuracy 80% (49–94%, 95% "
                                                 "interval) from 10 labels drawn with known odds")
    bridged = AccuracyEstimate(0.8, 0.3, 1.0, 10, "bridge-stratified-lure-kish-wilson", False, "the rows")
    assert accuracy_words(4, bridged, judged_by=3) == (
        "model v4: estimated accuracy 80% (30–100%, 95% interval) from 10 labels drawn with known odds, model v3's, "
        "widened by how often the two models disagree")


def test_the_advice_never_stops_anyone():
    assert advice_words(None) == "stopping advice: none yet"
    assert advice_words(Verdict(True, 0.995, "stable")) == \
        "stopping advice: you could stop: stable (labelling goes on until you do)"
    line = progress_line(2, None, Verdict(False, float("nan"), "too early"))
    assert line == ("model v2: no accuracy estimate yet (no label has come in since the first model); "
                    "stopping advice: keep labelling: too early")


def test_the_description_keeps_the_projects_own_text():
    assert with_progress("", "model v0: x") == PROGRESS_MARK + "model v0: x"
    once = with_progress("Sort the digits.\n\nThanks!", "model v1:  a\nb")     # one line, spaces folded
    assert once == "skdbal: model v1: a b\n\nSort the digits.\n\nThanks!"
    assert with_progress(once, "model v2: c") == "skdbal: model v2: c\n\nSort the digits.\n\nThanks!"
    edited = "skdbal: model v1: a b\r\n\r\nSort the digits.\r\n\r\nThanks!"     # saved again from a browser
    assert with_progress(edited, "model v2: c") == "skdbal: model v2: c\n\nSort the digits.\r\n\r\nThanks!"
    assert progress_csv_path("a/s-labels.csv") == "a/s-labels-model.csv"


# ------------------------------------------------------------------ a session's versions, by hand
class FakeLearner:
    """What ModelProgress reads of an ActiveLearner: 20 pool rows, two classes; guesses set by hand."""

    def __init__(self):
        self.X_pool_ = np.arange(20, dtype=float).reshape(-1, 1)
        self.labelled_mask_ = np.zeros(20, dtype=bool)
        self.classes_ = np.array(["a", "b"])
        self.step_ = -1
        self.pool_subsample = None
        self.last_acquisition_ = None
        self.proba = np.tile([0.9, 0.1], (20, 1))

    @property
    def y_training_(self):
        return np.zeros(int(self.labelled_mask_.sum()))

    def predict_proba(self, X):
        return self.proba[np.asarray(X, dtype=int).ravel()]


class FakeStore:
    def __init__(self):
        self.rows = []

    def checks(self):
        return list(self.rows)


def session_of():
    return SimpleNamespace(learner=FakeLearner(), store=FakeStore(), batch_size=4, loop=None)


def query(session, version, positions, log_q=None):
    learner = session.learner
    learner.step_ = version
    learner.last_acquisition_ = SimpleNamespace(info={} if log_q is None else {"draw_log_q": log_q})


def judge(session, version, items, right):
    for item, ok in zip(items, right):
        session.store.rows.append({"item": item, "model_version": version, "guess": "a", "label": "a" if ok else "b"})
    session.learner.labelled_mask_[items] = True


def test_top_k_batches_give_the_biased_share_of_the_last_three_versions(tmp_path):
    session, out = session_of(), io.StringIO()
    progress = ModelProgress(session, out=out, stop_set_size=5, report_path=str(tmp_path / "m.csv"))
    session.learner.labelled_mask_[:4] = True                # the first batch, before any model
    for version, (items, right) in enumerate([([4, 5, 6, 7], [0, 0, 0, 1]), ([8, 9, 10, 11], [1, 1, 0, 1]),
                                              ([12, 13, 14, 15], [1, 1, 1, 0]), ([16, 17], [1, 1])]):
        query(session, version, items)
        progress.after_query(items)
        judge(session, version, items, right)
    query(session, 4, [18, 19])
    progress.after_query([18, 19])
    # versions 1, 2 and 3: 3 + 3 + 2 right of 4 + 4 + 2
    assert out.getvalue().splitlines()[-1].startswith(
        "model v4: the models before it were right on 80% of the last 10 tasks they asked about (their hardest; "
        "biased low); stopping advice: ")
    row = progress.rows[-1]
    assert (row["estimate_acc"], row["estimate_n"], row["estimate_biased"]) == (0.8, 10, True)
    assert (row["estimate_lo"], row["estimate_hi"]) == pytest.approx(wilson(0.8, 10))
    assert out.getvalue().splitlines()[0].startswith("model v0: no accuracy estimate yet")
    # the same predictions at every version: κ = 1 from the second on, a window of 3 full at version 3
    assert [r["stop_stabilizing_predictions"] for r in progress.rows] == [False, False, False, True, True]
    with open(tmp_path / "m.csv", newline="") as f:
        saved = list(csv.DictReader(f))
    assert [r["version"] for r in saved] == ["0", "1", "2", "3", "4"]
    assert saved[-1]["estimate_kind"] == "prequential-biased" and saved[-1]["stop_reason"].startswith("the model's")


def test_a_uniform_draw_gives_the_unbiased_estimate_bridged_to_the_new_model():
    session, out = session_of(), io.StringIO()
    progress = ModelProgress(session, out=out, stop_set_size=20)
    session.learner.labelled_mask_[:4] = True
    # version 0 draws 4 of the 16 rows left, uniformly: q = 1/16, 1/15, 1/14, 1/13
    items = [4, 5, 6, 7]
    query(session, 0, items, log_q=[-math.log(16 - m) for m in range(4)])
    progress.after_query(items)
    assert progress.draws[0]["n_candidates"] == 16 and progress.draws[0]["n_unlabelled"] == 16
    judge(session, 0, [5, 4, 6], [1, 0, 1])       # the first three of the draw, in another order: a prefix
    query(session, 1, [8, 9])
    progress.after_query([8, 9])
    # LURE weights are 1 for uniform draws: risk 1/3 on the 16 rows, less the known error, on the 13 left:
    # (16/3 - 1) / 13 = 1/3, so 2/3 right, with 3 effective labels; the same guesses on the 13 unlabelled
    # stop-set rows bridge it by the Clopper-Pearson bound of 0 disagreements in 13, 1 - 0.025^(1/13)
    lo, hi = wilson(2 / 3, 3, z=2.241402727604947)      # at 97.5% (Bonferroni)
    d = 1 - 0.025 ** (1 / 13)
    row = progress.rows[-1]
    assert row["estimate_kind"] == "bridge-stratified-lure-kish-wilson" and row["estimate_biased"] is False
    assert row["estimate_acc"] == pytest.approx(2 / 3)
    assert (row["estimate_lo"], row["estimate_hi"]) == pytest.approx((max(0, lo - d), min(1, hi + d)))
    assert out.getvalue().splitlines()[-1].startswith(
        f"model v1: estimated accuracy 67% ({100 * max(0, lo - d):.0f}–{100 * min(1, hi + d):.0f}%, 95% interval) "
        "from 3 labels drawn with known odds, model v0's, widened by how often the two models disagree; ")


def test_labels_that_are_not_the_first_of_the_draw_are_not_weighted():
    session = session_of()
    progress = ModelProgress(session, out=io.StringIO(), stop_set_size=20)
    session.learner.labelled_mask_[:4] = True
    query(session, 0, [4, 5, 6, 7], log_q=[-math.log(16 - m) for m in range(4)])
    progress.after_query([4, 5, 6, 7])
    judge(session, 0, [4, 6], [1, 1])               # the second drawn was skipped: no prefix of the draw
    query(session, 1, [8])
    progress.after_query([8])
    assert progress.rows[-1]["estimate_kind"] == "prequential-biased"


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

    client = SimpleNamespace(projects=Projects())
    session = session_of()
    progress = ModelProgress(session, client=client, project=7, out=io.StringIO(), rule=LabelBudget(max_labels=8))
    session.learner.labelled_mask_[:4] = True
    query(session, 0, [4, 5])
    progress.after_query([4, 5])
    assert client.projects.description == "Our digits." and calls == [7]
    client.projects.fail = False
    progress.after_query([4, 5])                     # the same version: nothing new said
    assert calls == [7]
    judge(session, 0, [4, 5], [1, 1])
    query(session, 1, [6])
    progress.after_query([6])
    assert client.projects.description == (
        "skdbal: model v1: the models before it were right on 100% of the last 2 tasks they asked about (their "
        "hardest; biased low); stopping advice: keep labelling: 6 labels bought, 2 left in the budget of 8"
        "\n\nOur digits.")


def test_a_rule_that_needs_the_models_samples_is_refused():
    from skdbal.stopping import ExpectedGain

    with pytest.raises(ValueError, match="class probabilities only"):
        ModelProgress(session_of(), rule=ExpectedGain())
    assert isinstance(ModelProgress(session_of()).rule, StabilizingPredictions)


def test_a_real_sessions_versions_are_said_with_their_guess_accuracy(tmp_path):
    """With a LabellingSession (a logistic regression, top-k max entropy): one line per version, each the share of
    the labels the versions before it guessed right, as the session's own ``guess_accuracy`` counts them."""
    import time

    from _helpers import digits_flat
    from sklearn.linear_model import LogisticRegression

    from skdbal import ActiveLearner
    from skdbal.acquisition import max_entropy
    from skdbal.labelling import LabellingSession

    X, y = digits_flat(200)
    learner = ActiveLearner(LogisticRegression(max_iter=300, random_state=0), max_entropy, random_state=0,
                            seeding="step", verbose=False)
    session = LabellingSession(learner, X, classes=range(10), store=str(tmp_path / "s.db"), batch_size=10)
    out = io.StringIO()
    progress = ModelProgress(session, out=out, report_path=str(tmp_path / "m.csv"))
    session.on_query.append(progress.after_query)
    with session:
        for version in range(3):
            for item in session.next_batch(annotator="a", timeout=10):
                session.submit(item["item"], int(y[item["item"]]), annotator="a")
            session.wait_for_version(version, timeout=60)
        deadline = time.time() + 30
        while len(progress.rows) < 3 and time.time() < deadline:
            time.sleep(0.05)
        versions = session.versions()
    lines = out.getvalue().splitlines()
    assert [line.split(":")[0] for line in lines] == ["model v0", "model v1", "model v2"]
    share = [v["guess_accuracy"] for v in versions]
    assert [r["estimate_acc"] for r in progress.rows] == [None, pytest.approx(share[0]),
                                                          pytest.approx((share[0] + share[1]) / 2)]
    assert f"right on {100 * share[0]:.0f}% of the last 10 tasks" in lines[1]
    assert [r["n_labels"] for r in progress.rows] == [10, 20, 30]
    with open(tmp_path / "m.csv", newline="") as f:
        assert [r["line"] for r in csv.DictReader(f)] == lines


def test_a_stochastic_batch_is_weighted_though_the_push_queries_again_after_it(tmp_path):
    """As ``skdbal labelstudio`` orders the callbacks: the batch's draw noted first, then a push that queries the
    learner again (its last acquisition is then the push's), then the report. The batch's labels, all given, are
    its whole draw: the estimate is the unbiased one, carried over to the new model."""
    import time

    from _helpers import digits_flat
    from sklearn.linear_model import LogisticRegression

    from skdbal import ActiveLearner
    from skdbal.acquisition import get_strategy
    from skdbal.labelling import LabellingSession

    X, y = digits_flat(200)
    learner = ActiveLearner(LogisticRegression(max_iter=300, random_state=0), get_strategy("stochastic(max_entropy)"),
                            random_state=0, seeding="step", verbose=False)
    session = LabellingSession(learner, X, classes=range(10), store=str(tmp_path / "s.db"), batch_size=10)
    progress = ModelProgress(session, out=io.StringIO())
    pushed = []

    def push(positions, scores):       # what LabelStudioSync.push does: a query of its own
        if learner.step_ >= 0:
            pushed.append(learner.query(n_instances=20)[0].tolist())     # more than the batch, as a push

    session.on_query[:] = [progress.note_batch, push, progress.after_query]
    with session:
        for version in range(2):
            for item in session.next_batch(annotator="a", timeout=10):
                session.submit(item["item"], int(y[item["item"]]), annotator="a")
            session.wait_for_version(version, timeout=60)
        deadline = time.time() + 30
        while len(progress.rows) < 2 and time.time() < deadline:
            time.sleep(0.05)
    assert pushed and progress.draws[0]["log_q"] is not None and len(progress.draws[0]["log_q"]) == 10
    row = progress.rows[1]
    assert (row["estimate_kind"], row["estimate_biased"], row["estimate_n"]) == \
        ("bridge-stratified-lure-kish-wilson", False, 10)
    assert "labels drawn with known odds, model v0's" in row["line"]


def test_a_draw_of_other_picks_is_not_taken_for_the_batchs():
    session = session_of()
    progress = ModelProgress(session, out=io.StringIO())
    query(session, 0, [4, 5], log_q=[-1.0, -1.0])
    session.learner.last_acquisition_.indices = [6, 7]       # the learner's last query chose other rows
    progress.note_batch([4, 5])
    assert progress.draws[0]["log_q"] is None
    query(session, 1, [4, 5], log_q=[-1.0, -1.0])
    session.learner.last_acquisition_.indices = [4, 5]
    progress.note_batch([4, 5])
    assert progress.draws[1]["log_q"] == [-1.0, -1.0]
