"""Stopping rules in the loop, in simulate and in the budget: verdicts in the journal, a run that ends at a stop."""
import copy

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from skdbal import ActiveLearner
from skdbal.acquisition import max_entropy, random
from skdbal.loop import ActiveLearningLoop, MemoryJournal
from skdbal.oracles import Answer, KnownLabels, Oracle
from skdbal.stopping import (
    AnyOf,
    ClassificationChange,
    LabelBudget,
    MaxConfidence,
    StabilizingPredictions,
    cohens_kappa,
)

N = 300


def loop_of(X, y, journal=None, random_state=0, strategy=max_entropy, **kw):
    learner = ActiveLearner(LogisticRegression(max_iter=300), strategy, random_state=random_state,
                            verbose=False).set_pool(X[:N])
    kw.setdefault("n_instances", 5)
    return learner, ActiveLearningLoop(learner, KnownLabels(y[:N]), journal=journal, verbose=False, **kw)


def column(rows, key):
    return [row.get(key) for row in rows]


# ------------------------------------------------------------- run(n) is a maximum
def test_a_label_budget_stops_the_loop_exactly_at_its_label_count(flat_digits32):
    X, y = flat_digits32
    _, loop = loop_of(X, y, stopping=LabelBudget(max_labels=25))
    loop.start(np.arange(10))
    history = loop.run(10)
    assert column(history, "n_labels") == [10, 15, 20, 25]             # 10 + 3 steps of 5, not 10 steps
    assert column(history, "stop_label_budget") == [False, False, False, True]
    assert column(history, "stop_label_budget_value") == [10.0, 15.0, 20.0, 25.0]
    assert column(history, "stop_reason") == ["", "", "", "25 labels bought: the budget of 25 is spent"]
    assert loop.stopped_by_ == ["label_budget"]
    assert len(loop.run(5)) == 4                                          # a stopped run steps no further


def test_classification_change_with_threshold_one_stops_at_the_first_step_it_can(flat_digits32):
    X, y = flat_digits32
    _, loop = loop_of(X, y, stopping=ClassificationChange(threshold=1.0))
    loop.start(np.arange(10))
    history = loop.run(6)
    assert column(history, "step") == [0, 1]                              # step 0 has nothing to compare with
    assert column(history, "stop_classification_change") == [False, True]
    assert np.isnan(history[0]["stop_classification_change_value"])


def test_a_rule_that_says_stop_at_the_start_leaves_run_nothing_to_do(flat_digits32):
    X, y = flat_digits32
    _, loop = loop_of(X, y, stopping=LabelBudget(max_labels=10))
    loop.start(np.arange(10))
    assert loop.stopped_by_ == ["label_budget"] and len(loop.run(3)) == 1


def test_stop_on_record_runs_every_step_and_writes_the_verdicts(flat_digits32):
    X, y = flat_digits32
    _, loop = loop_of(X, y, stopping=LabelBudget(max_labels=20), stop_on="record")
    loop.start(np.arange(10))
    history = loop.run(4)
    assert column(history, "n_labels") == [10, 15, 20, 25, 30]
    assert column(history, "stop_label_budget") == [False, False, True, True, True]
    assert loop.stopped_by_ is None


def test_the_rules_do_not_change_the_run(flat_digits32):
    """The stop set is drawn from its own generator: the (random) picks are those of a run without rules."""
    X, y = flat_digits32
    _, plain = loop_of(X, y, strategy=random)
    _, ruled = loop_of(X, y, strategy=random, stopping=StabilizingPredictions(), stop_set_size=50,
                       stop_on="record")
    for loop in (plain, ruled):
        loop.start(np.arange(10))
        loop.run(3)
    assert column(ruled.history, "query_indices") == column(plain.history, "query_indices")
    assert not any(k.startswith("stop_") for row in plain.history for k in row)


class Late(Oracle):
    """Answers the initial set at once; then answers each request one collect late."""

    def __init__(self, y):
        self.y, self.asked, self.first = y, [], True

    def request(self, positions):
        self.asked.append([int(p) for p in positions])

    def collect(self, pending):
        due = self.asked.pop(0) if self.first or len(self.asked) > 1 else []
        self.first = False
        return [Answer(p, self.y[p], "late", 0.0) for p in due]


def test_a_step_that_trained_no_model_shows_the_rule_nothing(flat_digits32):
    """Nothing came back at step 1: the same model is no news, so ClassificationChange(1.0) waits for step 2."""
    X, y = flat_digits32
    learner = ActiveLearner(LogisticRegression(max_iter=300), max_entropy, random_state=0,
                            verbose=False).set_pool(X[:N])
    loop = ActiveLearningLoop(learner, Late(y[:N]), n_instances=5, verbose=False,
                              stopping=ClassificationChange(threshold=1.0))
    loop.start(np.arange(10))
    history = loop.run(5)
    assert column(history, "n_labels") == [10, 10, 15]
    assert not any(k.startswith("stop_") for k in history[1])
    assert column(history, "stop_classification_change") == [False, None, True]


# ------------------------------------------------------------- the stop set and the views
def test_the_stop_set_is_fixed_seeded_and_outside_the_initial_set(flat_digits32):
    X, y = flat_digits32
    sets = []
    for seed in (0, 0, 1):
        _, loop = loop_of(X, y, random_state=seed, stopping=ClassificationChange(), stop_set_size=50,
                          stop_on="record")
        loop.start(np.arange(10))
        loop.run(2)
        stop_set = loop.stop_set_
        assert len(stop_set) == 50 and len(np.unique(stop_set)) == 50 and stop_set.min() >= 10
        assert loop.history[0]["stop_set"] == stop_set.tolist()
        assert all("stop_set" not in row for row in loop.history[1:])
        sets.append(stop_set.tolist())
    assert sets[0] == sets[1] != sets[2]
    _, everything = loop_of(X, y, stopping=ClassificationChange())       # 2000 > the 290 rows left: all of them
    everything.start(np.arange(10))
    assert everything.stop_set_.tolist() == list(range(10, N))


def test_the_verdicts_are_the_rules_on_the_models_predictions_over_the_stop_set(flat_digits32):
    """Hand-checked: κ between consecutive models' predictions on the stop set, mean over a window of 2."""
    X, y = flat_digits32
    learner, loop = loop_of(X, y, stopping=StabilizingPredictions(window=2, kappa=0.95), stop_set_size=60,
                            stop_on="record")
    loop.start(np.arange(10))
    preds = [learner.predict(X[:N][loop.stop_set_])]
    for _ in range(3):
        loop.step()
        preds.append(learner.predict(X[:N][loop.stop_set_]))
    kappas = [cohens_kappa(a, b) for a, b in zip(preds, preds[1:])]
    values = column(loop.history, "stop_stabilizing_predictions_value")
    assert np.isnan(values[0])
    np.testing.assert_allclose(values[1:], [kappas[0], np.mean(kappas[:2]), np.mean(kappas[1:3])])
    expected = [False, False, np.mean(kappas[:2]) >= 0.95, np.mean(kappas[1:3]) >= 0.95]
    assert column(loop.history, "stop_stabilizing_predictions") == expected


def test_the_batch_is_judged_by_the_model_that_chose_it(flat_digits32):
    X, y = flat_digits32
    learner, loop = loop_of(X, y, stopping=AnyOf([MaxConfidence(measure="least_confidence"),
                                                  LabelBudget(max_labels=100)]), stop_on="record")
    loop.start(np.arange(10))
    for _ in range(2):
        old = copy.deepcopy(learner.estimator_)
        row = loop.step()
        picks = X[:N][row["query_indices"]]
        assert row["stop_max_confidence_value"] == pytest.approx(float(np.max(1 - old.predict_proba(picks)
                                                                             .max(axis=1))))
        new = float(np.max(1 - learner.predict_proba(picks).max(axis=1)))
        assert row["stop_max_confidence_value"] != pytest.approx(new)     # not the model trained on them
        assert row["stop_label_budget_value"] == row["n_labels"]
        assert row["stop_any_of"] is False and row["stop_any_of_value"] == 0.0 and row["stop_reason"] == ""
    assert np.isnan(loop.history[0]["stop_max_confidence_value"])        # step 0 bought no batch


# ------------------------------------------------------------- resume
def test_resume_restores_the_stop_set_and_primes_the_rules(flat_digits32):
    X, y = flat_digits32
    rule = lambda: AnyOf([ClassificationChange(), StabilizingPredictions(window=2)])
    _, full = loop_of(X, y, stopping=rule(), stop_set_size=80, stop_on="record")
    full.start(np.arange(10))
    full.run(4)
    learner, resumed = loop_of(X, y, MemoryJournal(copy.deepcopy(full.history[:3])), random_state=5,
                               stopping=rule(), stop_set_size=80, stop_on="record")
    assert resumed.resume()
    assert resumed.stop_set_.tolist() == full.history[0]["stop_set"]     # not a draw of random_state=5
    change, stable = resumed.stopping_.rules
    np.testing.assert_array_equal(change.previous_, learner.predict(X[:N][resumed.stop_set_]))
    assert stable.kappas_ == [] and len(stable.history_) == 1            # the κ window restarts here
    resumed.run(2)
    for key in ("n_labels", "stop_classification_change_value"):          # it needs one model before: the same
        assert column(resumed.history, key) == column(full.history, key)
    assert resumed.history[3]["stop_stabilizing_predictions"] is False    # one κ of the window of 2
    assert resumed.history[4]["stop_stabilizing_predictions_value"] == pytest.approx(
        full.history[4]["stop_stabilizing_predictions_value"])            # the window is full again


def test_resume_of_a_journal_without_rules_draws_a_stop_set(flat_digits32):
    X, y = flat_digits32
    _, plain = loop_of(X, y)
    plain.start(np.arange(10))
    plain.run(1)
    learner, resumed = loop_of(X, y, MemoryJournal(copy.deepcopy(plain.history)),
                               stopping=ClassificationChange(), stop_set_size=40)
    resumed.resume()
    assert len(resumed.stop_set_) == 40 and not set(resumed.stop_set_.tolist()) & set(learner.labelled_idx_)
    assert len(resumed.stopping_.previous_) == 40


# ------------------------------------------------------------- the caller's object, bad input
def test_the_users_rule_is_never_changed(flat_digits32):
    X, y = flat_digits32
    inner = ClassificationChange()
    rule = AnyOf([inner, LabelBudget(max_labels=20)])
    _, loop = loop_of(X, y, stopping=rule)
    loop.start(np.arange(10))
    loop.run(3)
    assert loop.stopping is rule and loop.stopping_ is not rule
    assert not hasattr(rule, "verdicts_") and not hasattr(inner, "previous_")
    assert hasattr(loop.stopping_, "verdicts_")


@pytest.mark.parametrize("kw, error, match", [
    ({"stopping": "kappa"}, TypeError, "stopping must be a stopping rule"),
    ({"stopping": StabilizingPredictions(window=0)}, ValueError, "window"),
    ({"stopping": LabelBudget(10), "stop_on": "all"}, ValueError, "stop_on must be"),
    ({"stopping": LabelBudget(10), "stop_set_size": 0}, ValueError, "stop_set_size"),
    ({"stopping": LabelBudget(10), "stop_seed": 1.5}, ValueError, "stop_seed"),
])
def test_bad_stopping_settings_are_refused_by_name(flat_digits32, kw, error, match):
    X, y = flat_digits32
    with pytest.raises(error, match=match):
        loop_of(X, y, **kw)


def test_strategy_info_may_not_use_the_stopping_prefix(flat_digits32):
    from skdbal.acquisition.base import Strategy

    class Liar(Strategy):
        def acquire(self, estimator, X_pool, n_instances=1, **kwargs):
            acq = random.acquire(estimator, X_pool, n_instances, **kwargs)
            acq.info = {"stop_here": 1}
            return acq

    X, y = flat_digits32
    learner = ActiveLearner(LogisticRegression(max_iter=300), Liar(), random_state=0, verbose=False)
    with pytest.raises(ValueError, match="'stop_'"):
        learner.simulate(X[:200], y[:200], n_queries=2, n_instances=3)
    assert len(learner.labelled_idx_) == 20                               # the picks were not labelled


# ------------------------------------------------------------- simulate
def test_simulate_passes_the_rule_through_and_a_warm_start_primes_it(flat_digits32):
    X, y = flat_digits32
    rule = LabelBudget(max_labels=40)
    learner = ActiveLearner(LogisticRegression(max_iter=300), max_entropy, random_state=0, verbose=False)
    history = learner.simulate(X[:N], y[:N], n_queries=10, n_instances=10, stopping=rule)
    assert column(history, "n_labels") == [20, 30, 40] and learner.stopped_by_ == ["label_budget"]
    assert not hasattr(rule, "n_below_")
    more = learner.simulate(X[:N], y[:N], n_queries=3, n_instances=10, warm_start=True,
                            stopping=ClassificationChange(threshold=1.0))
    assert column(more, "n_labels") == [20, 30, 40, 50]                   # primed: it can stop at once
    assert learner.stopped_by_ == ["classification_change"]
    recorded = learner.simulate(X[:N], y[:N], n_queries=3, n_instances=10, stopping=rule, stop_on="record")
    assert column(recorded, "stop_label_budget") == [False, False, True, True] and learner.stopped_by_ is None
    with pytest.raises(ValueError, match="stop_on must be"):
        learner.simulate(X[:N], y[:N], n_queries=3, stopping=rule, stop_on="never")
    assert len(learner.history_) == 4                                     # the refused call changed nothing
