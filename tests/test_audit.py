"""The audit draw (uniform and active testing) and the calibration estimate from audit labels."""
from fractions import Fraction
from itertools import permutations

import numpy as np
import pytest

from skdbal.accuracy_monitor import AccuracyMonitor
from skdbal.audit import audit_proposal, draw_audit, estimate_calibration
from skdbal.estimates import estimate_accuracy, lure_risk

# ---------------------------------------------------------------------------------------------------------------
# the proposal and each draw's probability, by enumeration

def test_the_active_proposal_by_hand():
    # class probabilities of four rows: confidences 1/2, 3/4, 1 and 3/4; w = 1/2, 1/4, 0, 1/4 (sum 1)
    proba = [[0.5, 0.5], [0.25, 0.75], [1.0, 0.0], [0.75, 0.25]]
    w = audit_proposal(proba, epsilon=0.2)          # 0.8 w + 0.05
    np.testing.assert_allclose(w, [0.45, 0.25, 0.05, 0.25], rtol=0, atol=1e-15)
    assert audit_proposal([1.0, 1.0, 1.0]).tolist() == [1 / 3] * 3     # sure of every row: uniform


def _exact_orders(weights, n):
    """Every ordered draw of n rows without replacement and its probability, and each draw's q, as fractions."""
    out = {}
    for order in permutations(range(len(weights)), n):
        left, q = sum(weights), []
        for i in order:
            q.append(weights[i] / left)
            left -= weights[i]
        out[order] = q
    return out


def test_active_q_is_each_draws_sequential_probability_by_enumeration():
    # confidences 1/2, 3/4, 1: w = 1/2, 1/4, 0, so w/Σw = 2/3, 1/3, 0; with ε = 1/4: 7/12, 4/12, 1/12
    confidence = [0.5, 0.75, 1.0]
    exact_w = [Fraction(7, 12), Fraction(4, 12), Fraction(1, 12)]
    np.testing.assert_allclose(audit_proposal(confidence, epsilon=0.25), [float(x) for x in exact_w], atol=1e-15)
    exact = _exact_orders(exact_w, 2)
    # the order (1, 0): 4/12, then 7/12 of the 8/12 left, 7/8
    assert exact[(1, 0)] == [Fraction(1, 3), Fraction(7, 8)]
    rng = np.random.RandomState(0)
    counts = dict.fromkeys(exact, 0)
    R = 6000
    for _ in range(R):
        rows, q = draw_audit(confidence, 2, epsilon=0.25, random_state=rng)
        order = tuple(rows.tolist())
        np.testing.assert_allclose(q, [float(x) for x in exact[order]], rtol=1e-12)
        counts[order] += 1
    for order, q in exact.items():   # each order drawn as often as its probability q_1 q_2 says
        p = float(q[0] * q[1])
        assert abs(counts[order] / R - p) <= 4 * np.sqrt(p * (1 - p) / R), (order, counts[order] / R, p)


def test_uniform_q_is_one_over_the_rows_left_and_orders_are_uniform():
    rows, q = draw_audit(4, 3, proposal="uniform", random_state=1)
    assert q.tolist() == [1 / 4, 1 / 3, 1 / 2]
    assert sorted(set(rows.tolist())) == sorted(rows.tolist()) and rows.max() < 4
    # given probabilities, the uniform proposal ignores them and draws the same rows from the same seed
    same = draw_audit(np.full((4, 2), 0.5), 3, proposal="uniform", random_state=1)
    assert same.rows.tolist() == rows.tolist() and same.q.tolist() == q.tolist()
    rng = np.random.RandomState(2)
    R = 2400
    counts = {}
    for _ in range(R):
        order = tuple(draw_audit(3, 2, proposal="uniform", random_state=rng).rows.tolist())
        counts[order] = counts.get(order, 0) + 1
    assert set(counts) == set(permutations(range(3), 2))
    for c in counts.values():   # 1/6 each
        assert abs(c / R - 1 / 6) <= 4 * np.sqrt(1 / 6 * 5 / 6 / R)


def test_a_draw_of_every_row_takes_each_once():
    rows, q = draw_audit([0.9, 0.8, 0.7, 0.6, 0.5], 5, random_state=3)
    assert sorted(rows.tolist()) == [0, 1, 2, 3, 4]
    assert q[-1] == pytest.approx(1.0)


# ---------------------------------------------------------------------------------------------------------------
# unbiasedness by simulation

def _population(N=50, seed=0):
    """A fixed model on N rows: confidence, and whether it is right, the unsure rows wrong more often."""
    rng = np.random.RandomState(seed)
    confidence = rng.uniform(0.4, 1.0, size=N)
    correct = (rng.uniform(size=N) < confidence).astype(float)
    return confidence, correct


def test_lure_on_active_audits_is_unbiased_and_the_plain_mean_is_not():
    confidence, correct = _population()
    N, M, R = len(confidence), 10, 8000
    truth = correct.mean()
    rng = np.random.RandomState(4)
    losses, qs = np.empty((R, M)), np.empty((R, M))
    for r in range(R):
        rows, q = draw_audit(confidence, M, random_state=rng)
        losses[r], qs[r] = 1.0 - correct[rows], q
    estimates = 1.0 - lure_risk(losses, qs, N)          # one LURE estimate per run, vectorised
    se = estimates.std() / np.sqrt(R)
    assert abs(estimates.mean() - truth) <= 4 * se, (estimates.mean(), truth, se)
    plain = 1.0 - losses.mean(axis=1)                   # the unweighted share right: errors drawn too often
    plain_se = plain.std() / np.sqrt(R)
    assert truth - plain.mean() > 10 * plain_se


def test_one_sequence_of_uniform_then_active_draws_is_unbiased():
    # the first audit is uniform (no model yet), the next active over the rows left: one LURE over both
    confidence, correct = _population(seed=5)
    N, R = len(confidence), 8000
    truth = correct.mean()
    rng = np.random.RandomState(6)
    estimates = np.empty(R)
    for r in range(R):
        first, q1 = draw_audit(N, 4, proposal="uniform", random_state=rng)
        left = np.setdiff1d(np.arange(N), first)
        local, q2 = draw_audit(confidence[left], 6, random_state=rng)
        rows = np.concatenate([first, left[local]])
        estimates[r] = 1.0 - lure_risk(1.0 - correct[rows], np.concatenate([q1, q2]), N)
    assert abs(estimates.mean() - truth) <= 4 * estimates.std() / np.sqrt(R)


def test_the_monitor_takes_the_draw_as_it_comes():
    confidence, correct = _population(seed=7)
    rows, q = draw_audit(confidence, 12, random_state=8)
    monitor = AccuracyMonitor()
    monitor.audit(correct[rows[:5]], q=q[:5], n_reservoir=50)
    monitor.audit(correct[rows[5:]], q=q[5:], n_reservoir=50)
    expected = estimate_accuracy(correct[rows], q=q, N=50)
    got = monitor.audit_estimate()
    assert (got.accuracy, got.low, got.high) == (expected.accuracy, expected.low, expected.high)


# ---------------------------------------------------------------------------------------------------------------
# refusals

@pytest.mark.parametrize("args, kwargs, match", [
    (([0.5, 0.6], 1), {"proposal": "top"}, "proposal must be one of"),
    ((5, 2), {}, "the active proposal needs"),
    ((0, 1), {"proposal": "uniform"}, "number of rows must be >= 1"),
    (([0.5, 0.6], 3), {}, r"n must be an int in \[1, 2\]"),
    (([0.5, 0.6], 0), {}, r"n must be an int in \[1, 2\]"),
    (([0.5, 0.6], True), {}, "n must be an int"),
    (([0.5, 0.6], 1), {"epsilon": 0.0}, r"epsilon must be a number in \(0, 1\]"),
    (([0.5, 0.6], 1), {"epsilon": 1.5, "proposal": "uniform"}, "epsilon"),
    (([0.5, 1.6], 1), {}, r"probabilities in \[0, 1\]"),
    (([0.5, np.nan], 1), {}, r"probabilities in \[0, 1\]"),
    (([], 1), {}, "N >= 1"),
    ((np.zeros((2, 2, 2)), 1), {}, "shape"),
])
def test_bad_input_is_refused_by_name(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        draw_audit(*args, **kwargs)


# ---------------------------------------------------------------------------------------------------------------
# calibration

def test_calibration_by_hand_with_weighted_draws():
    # four rows, two bins: rows 2, 3 (confidence 0.6, 0.5: mean 0.55) and rows 0, 1 (0.9, 0.8: mean 0.85).
    # Draws: row 2 with q = 1/2, then row 0 with q = 1/3 of the three left. LURE weights (N = 4, M = 2):
    # v_1 = 1 + 2/3 (1/(4 * 1/2) - 1) = 2/3, v_2 = 1 + 2/2 (1/(3 * 1/3) - 1) = 1. Both right:
    # low bin (1/2)(2/3)/(1/2) = 2/3, high bin (1/2)(1)/(1/2) = 1;
    # ECE = 1/2 |2/3 - 0.55| + 1/2 |1 - 0.85| = 7/120 + 9/120 = 2/15.
    e = estimate_calibration([0.9, 0.8, 0.6, 0.5], [1, 1], [2, 0], q=[1 / 2, 1 / 3], n_bins=2, random_state=0)
    np.testing.assert_allclose(e.bin_accuracy, [2 / 3, 1.0], rtol=1e-12)
    assert e.ece == pytest.approx(2 / 15, rel=1e-12)
    assert e.bin_mass.tolist() == [0.5, 0.5] and e.n_labels == 2
    np.testing.assert_allclose(e.bin_confidence, [0.55, 0.85], rtol=1e-12)
    assert e.low <= e.ece <= e.high and e.note.startswith("upper-biased with few labels")


def test_equal_mass_bins_and_the_default_count():
    conf = np.linspace(0.1, 1.0, 10)[::-1]            # 1.0, 0.9, ..., 0.1
    e = estimate_calibration(conf, [1], [0], n_bins=3, n_boot=10, random_state=0)
    assert e.bin_mass.tolist() == [0.4, 0.3, 0.3]     # 10 rows in 4 + 3 + 3, least confident first
    np.testing.assert_allclose(e.bin_confidence, [0.25, 0.6, 0.9], rtol=1e-12)
    np.testing.assert_allclose(e.bin_accuracy, [0, 0, 1 / 0.3], rtol=1e-12)    # unbiased, not clipped
    assert e.ece == pytest.approx(0.4 * 0.25 + 0.3 * 0.6 + 0.3 * 0.1)          # clipped to 1 in the ECE
    assert len(estimate_calibration(np.full(200, 0.5), np.ones(99), np.arange(99), n_boot=5).bin_mass) == 5
    assert len(estimate_calibration(np.full(200, 0.5), np.ones(100), np.arange(100), n_boot=5).bin_mass) == 10


def test_each_bins_accuracy_is_unbiased_under_active_audits():
    confidence, correct = _population(N=40, seed=9)
    N, M, R, K = len(confidence), 12, 4000, 4
    bins = np.empty(N, dtype=int)
    for b, part in enumerate(np.array_split(np.argsort(confidence, kind="stable"), K)):
        bins[part] = b
    truth = np.array([correct[bins == b].mean() for b in range(K)])
    rng = np.random.RandomState(10)
    got = np.empty((R, K))
    for r in range(R):
        rows, q = draw_audit(confidence, M, random_state=rng)
        got[r] = estimate_calibration(confidence, correct[rows], rows, q, n_bins=K, n_boot=1).bin_accuracy
    se = got.std(axis=0) / np.sqrt(R)
    assert (np.abs(got.mean(axis=0) - truth) <= 4 * se).all(), (got.mean(axis=0), truth, se)


def test_ece_is_upper_biased_with_few_labels():
    # a calibrated model: right with probability its confidence. The true ECE on the reservoir is small;
    # with five labels the estimate is larger on average, as the note says.
    rng = np.random.RandomState(11)
    confidence = rng.uniform(0.5, 1.0, size=400)
    correct = (rng.uniform(size=400) < confidence).astype(float)
    truth = estimate_calibration(confidence, correct, np.arange(400), n_bins=5, n_boot=1).ece   # every row
    few = [estimate_calibration(confidence, correct[rows], rows, q, n_bins=5, n_boot=1).ece
           for rows, q in (draw_audit(400, 5, proposal="uniform", random_state=rng) for _ in range(300))]
    assert np.mean(few) > truth + 0.1


@pytest.mark.parametrize("args, kwargs, match", [
    (([0.9, 0.8], [1, 0], [0]), {}, "rows must hold one integer position per audit label"),
    (([0.9, 0.8], [1, 0], [0, 0]), {}, "rows must be distinct positions"),
    (([0.9, 0.8], [1], [2]), {}, r"rows must be distinct positions in \[0, 2\)"),
    (([0.9, 0.8], [2], [0]), {}, "correct must hold 0/1"),
    (([0.9, 0.8], [], []), {}, "correct must be a non-empty"),
    (([0.9, 0.8], [1], [0]), {"q": [1.5]}, r"q must lie in \(0, 1\]"),
    (([0.9, 0.8], [1], [0]), {"q": [0.5, 0.5]}, "q must hold one probability per audit label"),
    (([0.9, 0.8], [1], [0]), {"n_bins": 3}, r"n_bins must be an int in \[1, 2\]"),
    (([0.9, 0.8], [1], [0]), {"n_boot": 0}, "n_boot must be an int >= 1"),
    (([0.9, 0.8], [1], [0]), {"level": 1.0}, r"level must be a number in \(0, 1\)"),
    (([[0.9, 0.1]], [1], [0]), {}, "confidence must be one-dimensional"),
    (([1.2, 0.8], [1], [0]), {}, r"probabilities in \[0, 1\]"),
])
def test_bad_calibration_input_is_refused_by_name(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        estimate_calibration(*args, **kwargs)
