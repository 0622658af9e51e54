"""Stopping rules: each verdict on hand-made prediction sequences, with the values worked out by hand."""
import dataclasses
import math
from fractions import Fraction

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.model_selection import GridSearchCV

from skdbal.stopping import (
    AnyOf,
    ClassificationChange,
    CostRule,
    ExpectedGain,
    LabelBudget,
    MaxConfidence,
    OverallUncertainty,
    StabilizingPredictions,
    StepView,
    StoppingRule,
    Verdict,
    cohens_kappa,
    expected_accuracy_gain,
)

# The note's sequence: P0 = A, then P1..P4 = B, which differs from A in its last entry.
A = [0, 0, 1, 1, 2, 2, 0, 1, 2, 0]
B = [0, 0, 1, 1, 2, 2, 0, 1, 2, 1]
# κ(A, B): p_o = 9/10; marginals (4, 3, 3) and (3, 4, 3), so p_e = (12 + 12 + 9)/100 = 33/100
KAPPA_AB = (Fraction(9, 10) - Fraction(33, 100)) / (1 - Fraction(33, 100))   # = 57/67


def onehot(labels, n_classes=3):
    """Class probabilities whose argmax is ``labels`` (0.8 on the class, the rest shared)."""
    proba = np.full((len(labels), n_classes), 0.2 / (n_classes - 1))
    proba[np.arange(len(labels)), labels] = 0.8
    return proba


def view(step, proba=None, **extra):
    return {"step": step, "n_labels": 10 + 10 * step, "stop_proba": proba, **extra}


def run(rule, sequence):
    return [rule.update(view(s, onehot(p))) for s, p in enumerate(sequence)]


# ---------------------------------------------------------------- Cohen's κ
def test_kappa_as_fractions():
    assert KAPPA_AB == Fraction(57, 67)
    assert cohens_kappa(A, B) == pytest.approx(float(KAPPA_AB), abs=1e-15)
    assert cohens_kappa(B, A) == pytest.approx(float(KAPPA_AB), abs=1e-15)
    # p_o = 3/4; marginals (1, 3) and (2, 2): p_e = (2 + 6)/16 = 1/2; κ = (3/4 - 1/2)/(1/2) = 1/2
    assert cohens_kappa([0, 1, 1, 1], [0, 1, 0, 1]) == pytest.approx(0.5, abs=1e-15)
    # p_o = 3/4 = p_e: agreement no better than chance
    assert cohens_kappa([0, 0, 0, 1], [0, 0, 0, 0]) == pytest.approx(0.0, abs=1e-15)
    assert cohens_kappa([0, 1], [1, 0]) == -1.0                      # p_o = 0, p_e = 1/2
    assert cohens_kappa(["cat", "cat"], ["cat", "cat"]) == 1.0       # 0/0 in the formula: equal arrays agree
    assert cohens_kappa(["cat", "dog", "dog"], ["cat", "dog", "dog"]) == 1.0


def test_kappa_refuses_arrays_of_two_lengths():
    with pytest.raises(ValueError, match="one length; got 3 and 2"):
        cohens_kappa([0, 1, 1], [0, 1])
    with pytest.raises(ValueError, match="non-empty"):
        cohens_kappa([], [])


# ---------------------------------------------------------------- stabilizing predictions
def test_stabilizing_predictions_stops_once_the_window_of_kappas_reaches_the_threshold():
    verdicts = run(StabilizingPredictions(window=3, kappa=0.99), [A, B, B, B, B])
    assert [v.stop for v in verdicts] == [False, False, False, False, True]
    k = float(KAPPA_AB)
    assert math.isnan(verdicts[0].value)
    assert verdicts[1].value == pytest.approx(k)
    assert verdicts[2].value == pytest.approx((k + 1) / 2)
    assert verdicts[3].value == pytest.approx((k + 2) / 3)             # 0.9502: the window is full, still < 0.99
    assert verdicts[4].value == 1.0
    assert "too early" in verdicts[2].reason and "2 of the 3 comparisons" in verdicts[2].reason
    assert verdicts[3].reason == ("the model's predictions on the stop set are still changing "
                                  "(mean κ 0.950 over the last 3 steps < 0.99)")
    assert verdicts[4].reason == ("the model's predictions on the stop set have stopped changing "
                                  "(mean κ 1.000 over the last 3 steps ≥ 0.99)")


def test_stabilizing_predictions_stops_at_the_threshold_itself_and_not_before_the_window_fills():
    verdicts = run(StabilizingPredictions(window=3, kappa=1.0), [B, B, B, B])
    assert [v.stop for v in verdicts] == [False, False, False, True]   # κ = 1 = kappa: ≥, at step 3, not 2
    assert [v.stop for v in run(StabilizingPredictions(window=1, kappa=1.0), [A, B, B])] == [False, False, True]


def test_stabilizing_predictions_over_all_pairs():
    verdicts = run(StabilizingPredictions(window=3, kappa=0.99, pairs="all"), [A, B, B, B])
    assert [v.stop for v in verdicts] == [False, False, False, True]
    k = float(KAPPA_AB)
    assert verdicts[1].value == pytest.approx(k)                        # one pair of two models: not full
    assert verdicts[2].value == pytest.approx((2 * k + 1) / 3)         # (P0,P1), (P0,P2), (P1,P2)
    assert verdicts[3].value == 1.0                                    # P1 = P2 = P3
    assert "over all pairs of the last 3 models" in verdicts[3].reason


def test_reset_clears_the_window():
    rule = StabilizingPredictions(window=1, kappa=1.0)
    run(rule, [B, B])
    assert rule.kappas_ == [1.0]
    rule.reset()
    assert not hasattr(rule, "kappas_") and not hasattr(rule, "history_")
    first = rule.update(view(0, onehot(B)))
    assert not first.stop and math.isnan(first.value)


def test_a_stop_set_that_changes_size_is_refused_and_changes_nothing():
    rule = StabilizingPredictions(window=3)
    run(rule, [A, B])
    before = (list(rule.kappas_), rule.history_[0].copy())
    with pytest.raises(ValueError, match="stop set changed size: 10 rows before, 9 now"):
        rule.update(view(2, onehot(B[:9])))
    assert rule.kappas_ == before[0] and np.array_equal(rule.history_[0], before[1])


# ---------------------------------------------------------------- classification change
def test_classification_change():
    verdicts = run(ClassificationChange(), [A, B, B])
    assert [v.stop for v in verdicts] == [False, False, True]
    assert verdicts[1].value == 0.1 and verdicts[2].value == 0.0      # 1 of 10 changed, then none
    assert verdicts[2].reason == "no prediction on the stop set changed since the last step (share changed 0 ≤ 0)"
    # at the threshold itself: 1 of 10 changed, threshold 0.1, share ≤ threshold stops
    assert [v.stop for v in run(ClassificationChange(threshold=0.1), [A, B])] == [False, True]
    assert [v.stop for v in run(ClassificationChange(threshold=0.09), [A, B])] == [False, False]


# ---------------------------------------------------------------- overall uncertainty
def test_overall_uncertainty_is_the_mean_normalised_entropy():
    h = -(0.99 * math.log(0.99) + 0.01 * math.log(0.01)) / math.log(2)
    first = OverallUncertainty(threshold=0.05).update(view(0, [[0.99, 0.01], [0.01, 0.99]]))
    assert first.value == pytest.approx(h, abs=1e-12) and round(h, 6) == 0.080793 and not first.stop
    second = OverallUncertainty(threshold=0.05).update(view(1, [[0.999, 0.001]]))
    assert second.value == pytest.approx(0.011408, abs=1e-6) and second.stop
    assert "mean normalised entropy 0.01141 < 0.05" in second.reason
    # three classes: a uniform row has entropy log 3, normalised 1; a sure row 0: the mean is 1/2
    assert OverallUncertainty().update(view(0, [[1 / 3] * 3, [1.0, 0.0, 0.0]])).value == pytest.approx(0.5)


def test_overall_uncertainty_least_confidence_is_strict_at_the_threshold():
    rows = [[0.75, 0.25], [0.5, 0.5]]                                  # 1 - max: 0.25 and 0.5, mean 0.375
    at = OverallUncertainty(threshold=0.375, measure="least_confidence").update(view(0, rows))
    assert at.value == 0.375 and not at.stop
    assert OverallUncertainty(threshold=0.376, measure="least_confidence").update(view(0, rows)).stop


# ---------------------------------------------------------------- max confidence
def test_max_confidence_reads_the_most_uncertain_pick_of_the_batch():
    rule = MaxConfidence(threshold=0.3, measure="least_confidence")
    start = rule.update(view(0))
    assert not start.stop and math.isnan(start.value) and start.reason == "no batch was bought at this step"
    v = rule.update(view(1, batch_proba=[[0.75, 0.25], [0.9, 0.1]]))
    assert v.value == 0.25 and v.stop                                   # max(0.25, 0.1) < 0.3
    v = MaxConfidence(threshold=0.5).update(view(1, batch_proba=[[1.0, 0.0], [0.5, 0.5]]))
    assert v.value == pytest.approx(1.0) and not v.stop                 # a coin: normalised entropy 1
    v = MaxConfidence(threshold=0.5, measure="score").update(view(1, batch_scores=[0.3, 0.01]))
    assert v.value == 0.3 and v.stop
    with pytest.raises(ValueError, match="MaxConfidence needs the view's batch_proba"):
        MaxConfidence().update(view(1))


# ---------------------------------------------------------------- expected accuracy gain
def test_expected_accuracy_gain_by_hand():
    yes, no = [1.0, 0.0], [0.0, 1.0]
    pool = np.array([[yes, yes], [no, yes]])            # (T=2, N=2, C=2): point 1 never changes
    target = np.array([[yes], [no]])                    # (T=2, M=1, C=2): the passes disagree
    # point 0: joint diag(1/2, 1/2) gives 1 after the label, max(1/2, 1/2) before: 1/2; point 1 tells nothing
    assert expected_accuracy_gain(pool, target).tolist() == [0.5, 0.0]
    P = np.array([[[0.9, 0.1]], [[0.2, 0.8]]])
    Q = np.array([[[0.8, 0.2]], [[0.3, 0.7]]])
    # joint = ([[.72, .18], [.08, .02]] + [[.06, .14], [.24, .56]]) / 2 = [[.39, .16], [.16, .29]]; q = (.55, .45)
    assert expected_accuracy_gain(P, Q)[0] == pytest.approx(0.39 + 0.29 - 0.55, abs=1e-12)
    # three passes, each sure of another class: the label names the pass, so the target's guess goes 1/3 -> 1
    E = np.eye(3)[:, None, :]
    assert expected_accuracy_gain(E, E)[0] == pytest.approx(2 / 3, abs=1e-12)
    # one pass (a deterministic model): the label tells nothing about the target
    assert expected_accuracy_gain(P[:1], Q[:1]).tolist() == [0.0]


def test_expected_accuracy_gain_chunks_agree_and_shapes_are_checked():
    rng = np.random.RandomState(0)
    P = rng.dirichlet(np.ones(4), size=(5, 23))
    Q = rng.dirichlet(np.ones(4), size=(5, 7))
    whole = expected_accuracy_gain(P, Q)
    assert np.allclose(expected_accuracy_gain(P, Q, chunk_size=4), whole, atol=1e-14) and (whole >= 0).all()
    with pytest.raises(ValueError, match="same passes and classes"):
        expected_accuracy_gain(P, Q[:4])
    with pytest.raises(ValueError, match="chunk_size"):
        expected_accuracy_gain(P, Q, chunk_size=0)


# the stop set's samples: row 0 is a coin over the passes, row 1 is sure; EAG = [1/4, 0] against both rows
STOP_SAMPLES = [[[1.0, 0.0], [1.0, 0.0]], [[0.0, 1.0], [1.0, 0.0]]]


def test_expected_gain_from_the_stop_sets_samples():
    # row 0 against target row 0: 1/2 (as above); against the sure row 1: 0; mean 1/4. Row 1 tells nothing.
    v = ExpectedGain(min_gain=0.3, patience=1).update(view(0, stop_samples=STOP_SAMPLES))
    assert v.value == pytest.approx(0.25) and v.stop
    v = ExpectedGain(min_gain=0.25, patience=1).update(view(0, stop_samples=STOP_SAMPLES, batch_size=2))
    assert v.value == pytest.approx(0.25) and not v.stop                # 1/4 + 0; strict: not below 0.25
    v = ExpectedGain(n_candidates=1, n_targets=1).update(view(0, stop_samples=STOP_SAMPLES))
    assert v.value == pytest.approx(0.5)                                # row 0 against itself only


def test_the_batch_gain_is_the_sum_of_its_largest_pointwise_gains():
    # rows 0 and 1 are the same coin over the passes, row 2 is sure: against the three rows as targets,
    # EAG = [(1/2 + 1/2 + 0)/3, (1/2 + 1/2 + 0)/3, 0]; the batch's sum counts the redundant pair twice
    yes, no = [1.0, 0.0], [0.0, 1.0]
    samples = [[yes, yes, yes], [no, no, yes]]
    gains = [ExpectedGain().update(view(0, stop_samples=samples, batch_size=k)).value for k in (1, 2, 5)]
    assert gains == pytest.approx([1 / 3, 2 / 3, 2 / 3])


def test_expected_gain_needs_patience_steps_in_a_row():
    rule = ExpectedGain(min_gain=0.002, patience=2)
    gains = [0.05, 0.001, 0.003, 0.001, 0.001]
    verdicts = [rule.update(view(s, expected_gain=g, batch_size=10)) for s, g in enumerate(gains)]
    assert [v.stop for v in verdicts] == [False, False, False, False, True]
    assert [v.value for v in verdicts] == gains
    assert verdicts[4].reason == ("the next batch of 10 labels is expected to raise the accuracy by only 0.001 "
                                  "(< 0.002 for 2 steps in a row)")
    assert not ExpectedGain(min_gain=0.002, patience=1).update(view(0, expected_gain=0.002)).stop  # strict
    with pytest.raises(ValueError, match="needs the view's stop_samples or expected_gain"):
        ExpectedGain().update(view(0))


# ---------------------------------------------------------------- budget and cost
def test_label_budget_stops_at_the_budget_itself():
    rule = LabelBudget(max_labels=100)
    assert [rule.update({"step": s, "n_labels": n}).stop for s, n in enumerate([90, 99, 100, 110])] == \
        [False, False, True, True]
    assert rule.update({"step": 9, "n_labels": 100}).value == 100.0


def test_cost_rule_weighs_the_labels_against_the_errors_they_save():
    rule = CostRule(label_cost=1.0, error_cost=1.0, n_predictions=10_000)
    # a batch of 10 labels costs 10; 0.0008 × 10 000 predictions saves 8 errors: stop
    v = rule.update(view(5, batch_size=10, expected_gain=0.0008))
    assert v.stop and v.value == pytest.approx(-2.0)
    v = rule.update(view(6, batch_size=10, expected_gain=0.0012))
    assert not v.stop and v.value == pytest.approx(2.0)
    assert not rule.update(view(7, batch_size=10, expected_gain=0.001)).stop   # saves exactly what it costs
    # the predictions to come default to the unlabelled pool rows; the gain from the stop set's samples (1/4)
    v = CostRule(label_cost=13.0).update(view(0, stop_samples=STOP_SAMPLES, batch_size=2, n_unlabelled=100))
    assert v.stop and v.value == pytest.approx(0.25 * 100 - 2 * 13.0)
    with pytest.raises(ValueError, match="CostRule needs n_predictions"):
        CostRule().update(view(0, expected_gain=0.1))


# ---------------------------------------------------------------- combining and the estimator protocol
def test_any_of_updates_every_rule_and_stops_on_the_first():
    rule = AnyOf([StabilizingPredictions(window=1, kappa=1.0), LabelBudget(max_labels=20)])
    v0 = rule.update(view(0, onehot(A)))                                 # 10 labels
    assert not v0.stop and v0.value == 0.0
    v1 = rule.update(view(1, onehot(A)))                                 # 20 labels, κ = 1: both say stop
    assert v1.stop and v1.value == 2.0 and set(rule.verdicts_) == {"stabilizing_predictions", "label_budget"}
    assert rule.rules[0].kappas_ == [1.0]
    rule.reset()
    assert not hasattr(rule, "verdicts_") and not hasattr(rule.rules[0], "kappas_")


def test_each_rule_names_the_view_fields_it_reads():
    assert StabilizingPredictions().needs() == {"stop_proba"} == OverallUncertainty().needs()
    assert MaxConfidence().needs() == {"batch_proba"} and MaxConfidence(measure="score").needs() == {"batch_scores"}
    assert CostRule().needs() == {"stop_samples", "n_unlabelled"} and CostRule(n_predictions=5).needs() == \
        {"stop_samples"}
    assert LabelBudget(5).needs() == set()
    assert AnyOf([ClassificationChange(), ExpectedGain(), LabelBudget(5)]).needs() == {"stop_proba", "stop_samples"}


def test_a_view_one_rule_cannot_read_leaves_every_rule_as_it_was():
    rule = AnyOf([ClassificationChange(), MaxConfidence()])
    rule.update(view(0, onehot(A)))
    with pytest.raises(ValueError, match="batch_proba"):
        rule.update(view(1, onehot(B)))                                 # MaxConfidence needs the batch
    assert rule.rules[0].previous_.tolist() == A                       # not B: the half-made update is undone
    assert rule.update(view(1, onehot(B), batch_proba=[[0.5, 0.5]])).value == 0.0


def test_clone_gives_an_unfitted_copy_with_the_same_parameters():
    rule = StabilizingPredictions(window=2, kappa=0.9, pairs="all")
    run(rule, [A, B])
    copy = clone(rule)
    assert copy.get_params() == {"window": 2, "kappa": 0.9, "pairs": "all"}
    assert not hasattr(copy, "history_") and hasattr(rule, "history_")
    both = AnyOf([LabelBudget(10), LabelBudget(20)])
    assert list(both.named_rules()) == ["label_budget", "label_budget_2"]
    both.set_params(label_budget_2__max_labels=30)
    assert both.get_params()["label_budget_2__max_labels"] == 30 and both.rules[1].max_labels == 30
    assert clone(both).get_params()["label_budget_2__max_labels"] == 30
    with pytest.raises(ValueError, match="invalid parameter 'nothing__x'"):
        both.set_params(nothing__x=1)


class _StopsOnACurve(ClassifierMixin, BaseEstimator):
    """A stand-in for ActiveLearningBudget: fit runs the rule over a fixed prediction sequence; the score is
    higher the later it stops."""

    def __init__(self, stopping=None):
        self.stopping = stopping

    def fit(self, X, y):
        rule = clone(self.stopping)
        self.stopped_at_ = next(s for s, p in enumerate([A, B, B, B, B, B]) if rule.update(view(s, onehot(p))).stop)
        self.classes_ = np.unique(y)
        return self

    def score(self, X, y):
        return float(self.stopped_at_)


def test_grid_search_tunes_a_rule_inside_an_estimator():
    X, y = np.zeros((6, 1)), np.array([0, 1] * 3)
    search = GridSearchCV(_StopsOnACurve(AnyOf([StabilizingPredictions(kappa=0.99)])),
                          {"stopping__stabilizing_predictions__window": [1, 2, 4]}, cv=2).fit(X, y)
    assert search.best_params_ == {"stopping__stabilizing_predictions__window": 4}
    assert search.cv_results_["mean_test_score"].tolist() == [2.0, 3.0, 5.0]  # window w stops at step w + 1


@pytest.mark.parametrize("rule, name", [
    (StabilizingPredictions(window=0), "window"), (StabilizingPredictions(kappa=1.5), "kappa"),
    (StabilizingPredictions(pairs="some"), "pairs"), (StabilizingPredictions(window=1, pairs="all"), "window"),
    (ClassificationChange(threshold=2), "threshold"), (OverallUncertainty(threshold=-0.1), "threshold"),
    (OverallUncertainty(measure="margin"), "measure"), (MaxConfidence(measure="margin"), "measure"),
    (MaxConfidence(threshold=float("nan")), "threshold"), (ExpectedGain(min_gain=-1), "min_gain"),
    (ExpectedGain(patience=0), "patience"), (ExpectedGain(n_candidates=1.5), "n_candidates"),
    (LabelBudget(0), "max_labels"), (LabelBudget(True), "max_labels"), (CostRule(label_cost=0), "label_cost"),
    (CostRule(error_cost=-1), "error_cost"), (CostRule(n_predictions=0), "n_predictions"),
    (AnyOf([]), "rules"), (AnyOf([object()]), "rules"), (AnyOf([LabelBudget(0)]), "max_labels"),
])
def test_bad_parameters_are_refused_at_validate_and_update_naming_them(rule, name):
    with pytest.raises(ValueError, match=f"^{name} must"):
        rule.validate()
    with pytest.raises(ValueError, match=f"^{name} must"):
        rule.update(view(0, onehot(A), expected_gain=0.1, n_unlabelled=10))


@pytest.mark.parametrize("bad, match", [
    ({"stop_proba": [0.5, 0.5]}, "stop_proba must have shape"),
    ({"stop_proba": [[0.5, 0.6]]}, "stop_proba rows must sum to 1"),
    ({"stop_samples": [[[1.0, 0.0]]], "stop_proba": [[1.0, 0.0], [0.0, 1.0]]}, "cover the same rows"),
    ({"batch_size": 0}, "batch_size must be an int >= 1"),
    ({"expected_gain": float("inf")}, "expected_gain must be"),
    ({"n_label": 3}, r"unknown view keys \['n_label'\]"),
])
def test_a_bad_view_is_refused_naming_the_field(bad, match):
    with pytest.raises(ValueError, match=match):
        OverallUncertainty().update({"step": 0, "n_labels": 10, **bad})


def test_a_verdict_is_frozen_and_a_view_derives_its_predictions():
    v = Verdict(stop=False, value=0.5, reason="r")
    with pytest.raises(dataclasses.FrozenInstanceError):
        v.stop = True
    sv = StepView(step=0, n_labels=3, stop_samples=STOP_SAMPLES)
    assert sv.stop_proba.tolist() == [[0.5, 0.5], [1.0, 0.0]] and sv.stop_pred.tolist() == [0, 0]
    assert StepView.coerce(sv) is sv
    assert isinstance(StabilizingPredictions(), (StoppingRule, BaseEstimator))
