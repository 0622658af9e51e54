import numpy as np
import pytest

from skdbal.metrics import accuracy_at, curves_from_histories, labels_to_accuracy


def runs_from(accs, start=20, step=10):
    return [[{"n_labels": start + step * i, "accuracy": a} for i, a in enumerate(run)] for run in accs]


# Seed 001's Figure 4 situation: every run crosses before the average does.
RUNS = runs_from([[0.80, 0.95, 0.95, 0.96],
                  [0.80, 0.80, 0.96, 0.96],
                  [0.80, 0.80, 0.80, 0.97]])


def test_average_step_by_hand():
    # mean curve: 0.80, 0.85, 0.9033, 0.9633
    assert labels_to_accuracy(RUNS, 0.90)["value"] == 40
    assert labels_to_accuracy(RUNS, 0.95)["value"] == 50
    assert np.isnan(labels_to_accuracy(RUNS, 0.95)["std"])


def test_step_average_by_hand():
    r = labels_to_accuracy(RUNS, 0.95, method="step-average")
    assert r["runs"] == [30, 40, 50]
    assert r["value"] == pytest.approx(40.0)
    assert r["std"] == pytest.approx(np.sqrt(200 / 3))  # population std of 30, 40, 50


def test_seed001_table_2_bald_row():
    # BALD runs reach 90% at 100, 120, 140 acquired samples: 120.0 ± 16.3 in seed 001's Table 2
    # (seed 001 counts acquired samples; here the x column holds them, so no offset)
    accs = [[0.5] * 8 + [0.9] * 2 + [0.5] * 2 + [0.9], [0.5] * 10 + [0.9] * 3, [0.5] * 12 + [0.9]]
    r = labels_to_accuracy(runs_from(accs, start=20), 0.9, method="step-average")
    assert r["runs"] == [100, 120, 140]
    assert (round(r["value"], 1), round(r["std"], 1)) == (120.0, 16.3)


def test_never_reached_is_nan():
    runs = runs_from([[0.5, 0.6], [0.5, 0.95]])
    assert np.isnan(labels_to_accuracy(runs, 0.9)["value"])  # mean 0.775 at best
    r = labels_to_accuracy(runs, 0.9, method="step-average")
    assert np.isnan(r["value"]) and np.isnan(r["runs"][0]) and r["runs"][1] == 30


def test_accuracy_at():
    mean, std = accuracy_at(RUNS, 30)
    assert mean == pytest.approx((0.95 + 0.80 + 0.80) / 3)
    assert std == pytest.approx(np.std([0.95, 0.80, 0.80]))
    assert np.isnan(accuracy_at(RUNS, 1000)[0])


def test_runs_of_unequal_length_are_truncated_and_mismatches_rejected():
    labels, acc = curves_from_histories(runs_from([[0.1, 0.2, 0.3], [0.1, 0.2]]))
    assert labels.tolist() == [20, 30] and acc.shape == (2, 2)
    with pytest.raises(ValueError, match="disagree"):
        curves_from_histories([runs_from([[0.1, 0.2]])[0], runs_from([[0.1, 0.2]], start=10)[0]])


@pytest.mark.parametrize("kw, match", [({"threshold": 1.5}, "threshold"),
                                       ({"threshold": 0.9, "method": "x"}, "method")])
def test_bad_arguments(kw, match):
    with pytest.raises(ValueError, match=match):
        labels_to_accuracy(RUNS, **kw)


def test_a_mean_exactly_at_the_threshold_counts():
    # (0.8990 + 0.9004 + 0.9006) / 3 is 0.9 exactly, but 0.8999999999999999 in floating point
    runs = runs_from([[0.5, 0.8990], [0.5, 0.9004], [0.5, 0.9006]])
    assert np.mean([0.8990, 0.9004, 0.9006]) < 0.9
    assert labels_to_accuracy(runs, 0.9)["value"] == 30
    assert np.isnan(labels_to_accuracy(runs_from([[0.5, 0.8999]]), 0.9)["value"])  # 0.8999 is below


def test_step_average_uses_each_run_in_full():
    # a run still in progress: the average-step curve stops at the shorter run,
    # but each run's own crossing counts for the step-average
    runs = runs_from([[0.5, 0.6, 0.7, 0.95], [0.5, 0.92]])
    assert np.isnan(labels_to_accuracy(runs, 0.9)["value"])  # mean 0.5, 0.76 over the shared steps
    r = labels_to_accuracy(runs, 0.9, method="step-average")
    assert r["runs"] == [50, 30] and r["value"] == 40 and r["std"] == 10
    gen = (run for run in runs)  # a one-shot iterable works too
    assert labels_to_accuracy(gen, 0.9, method="step-average")["runs"] == [50, 30]


def test_median_by_hand():
    # RUNS reach 95% at 30, 40, 50 labels: the median is 40; 90% at 30, 40, 50 too
    r = labels_to_accuracy(RUNS, 0.95, method="median")
    assert r["value"] == 40 and r["runs"] == [30, 40, 50] and np.isnan(r["std"])
    # a run that never reaches counts above the rest: 30, never, 40 -> 40; at 96%, two of three never -> NaN
    runs = runs_from([[0.5, 0.95, 0.95], [0.5, 0.5, 0.5], [0.5, 0.5, 0.96]])
    assert labels_to_accuracy(runs, 0.95, method="median")["value"] == 40
    assert np.isnan(labels_to_accuracy(runs, 0.96, method="median")["value"])
    # an even count: the mean of the two middle runs (30 and 40 of 20, 30, 40, 50)
    runs = runs_from([[0.95], [0.5, 0.95], [0.5, 0.5, 0.95], [0.5, 0.5, 0.5, 0.95]])
    assert labels_to_accuracy(runs, 0.95, method="median")["value"] == 35
