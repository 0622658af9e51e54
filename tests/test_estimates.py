"""skdbal.estimates against hand-computed values on tiny pools, and unbiasedness by simulation.

The running example: three items, the first wrong (losses (1, 0, 0), risk 1/3), drawn two at a time
without replacement with Plackett–Luce weights (2, 1, 1). Its six ordered draws:

=========  ======  ==========  ==========  ======  ======  =====
draws      P       q_1, q_2    v_1, v_2    LURE    PURE    naive
=========  ======  ==========  ==========  ======  ======  =====
(0,1)      1/4     1/2, 1/2    5/6, 1      5/12    1/2     1/2
(1,0)      1/6     1/4, 2/3    7/6, 3/4    3/8     1/4     1/2
(1,2)      1/12    1/4, 1/3    7/6, 3/2    0       0       0
=========  ======  ==========  ==========  ======  ======  =====

and (0,2), (2,0), (2,1) as their mirror images.
"""
import itertools
import math
from dataclasses import FrozenInstanceError
from fractions import Fraction as F

import numpy as np
import pytest

from skdbal.estimates import (
    AccuracyEstimate,
    clopper_pearson_interval,
    effective_sample_size,
    estimate_accuracy,
    lure_risk,
    lure_weights,
    plackett_luce_probabilities,
    prequential_accuracy,
    pure_risk,
    wilson_interval,
)

W = (2, 1, 1)
LOSSES = (1, 0, 0)
#: order -> (P(order), (q_1, q_2), (v_1, v_2), LURE, PURE), by hand
TABLE = {
    (0, 1): (F(1, 4), (F(1, 2), F(1, 2)), (F(5, 6), F(1)), F(5, 12), F(1, 2)),
    (0, 2): (F(1, 4), (F(1, 2), F(1, 2)), (F(5, 6), F(1)), F(5, 12), F(1, 2)),
    (1, 0): (F(1, 6), (F(1, 4), F(2, 3)), (F(7, 6), F(3, 4)), F(3, 8), F(1, 4)),
    (2, 0): (F(1, 6), (F(1, 4), F(2, 3)), (F(7, 6), F(3, 4)), F(3, 8), F(1, 4)),
    (1, 2): (F(1, 12), (F(1, 4), F(1, 3)), (F(7, 6), F(3, 2)), F(0), F(0)),
    (2, 1): (F(1, 12), (F(1, 4), F(1, 3)), (F(7, 6), F(3, 2)), F(0), F(0)),
}
Z95 = 1.959963984540054


def exact(x, denominator=1000):
    return F(float(x)).limit_denominator(denominator)


# --- the weights and the two risks --------------------------------------------------------------------------------

def test_lure_weights_of_the_note():
    assert lure_weights([1 / 4, 2 / 3], N=3) == pytest.approx([7 / 6, 3 / 4], abs=1e-12)
    for order, (_, q, v, _, _) in TABLE.items():
        assert [exact(x) for x in lure_weights([float(x) for x in q], N=3)] == list(v), order


@pytest.mark.parametrize("N,M", [(3, 2), (10, 4), (7, 7), (1, 1)])
def test_uniform_draws_and_the_whole_population_weigh_one(N, M):
    uniform = [1 / (N - m + 1) for m in range(1, M + 1)]
    assert lure_weights(uniform, N) == pytest.approx(np.ones(M), abs=1e-12)
    if M == N:  # every item drawn: v = 1 whatever the proposal
        assert lure_weights(np.full(M, 0.5 if M > 1 else 1.0), N).tolist() == [1.0] * M


def test_the_two_risks_on_every_draw_and_their_exact_expectation():
    e_lure = e_pure = e_naive = e_lure2 = F(0)
    for order, (p, q, _, lure, pure) in TABLE.items():
        L = [LOSSES[i] for i in order]
        qf = [float(x) for x in q]
        assert exact(lure_risk(L, qf, N=3)) == lure, order
        assert exact(pure_risk(L, qf, N=3)) == pure, order
        e_lure += p * lure
        e_lure2 += p * lure * lure
        e_pure += p * pure
        e_naive += p * F(sum(L), 2)
    assert sum(p for p, *_ in TABLE.values()) == 1
    assert e_lure == e_pure == F(1, 3)
    assert e_naive == F(5, 12)                                    # the plain mean is biased
    assert float(e_lure2 - e_lure ** 2) == pytest.approx(0.022569, abs=1e-6)


def test_stacked_runs_give_each_run_s_risk():
    q = [[1 / 4, 2 / 3], [1 / 2, 1 / 2], [1 / 4, 1 / 3]]
    L = [[0, 1], [1, 0], [0, 0]]
    assert lure_risk(L, q, N=3) == pytest.approx([3 / 8, 5 / 12, 0])
    assert pure_risk(L, q, N=3) == pytest.approx([1 / 4, 1 / 2, 0])
    assert lure_weights(q, N=3).shape == (3, 2)


# --- Plackett–Luce draw probabilities ------------------------------------------------------------------------------

def test_sequential_probabilities_of_every_order_by_hand():
    for order, (p, q, *_) in TABLE.items():
        got = plackett_luce_probabilities(np.log(W), list(order))
        assert [exact(x) for x in got] == list(q), order
        assert exact(np.prod(got)) == p, order
    assert plackett_luce_probabilities(np.log(W), [1, 0], log=True) == pytest.approx([-math.log(4), math.log(2 / 3)])


def test_inclusion_probabilities_by_enumeration_are_not_the_softmax():
    pi = [F(0)] * 3
    for order in itertools.permutations(range(3), 2):
        p = F(1)
        for x in plackett_luce_probabilities(np.log(W), list(order)):
            p *= exact(x)
        for i in order:
            pi[i] += p
    assert pi == [F(5, 6), F(7, 12), F(7, 12)]                   # the softmax is (1/2, 1/4, 1/4)


def test_gumbel_top_k_orders_follow_the_sequential_probabilities():
    rng = np.random.RandomState(0)
    R = 60_000
    keys = np.log(W) + rng.gumbel(size=(R, 3))
    top = np.argsort(-keys, axis=1)[:, :2]
    for order in itertools.permutations(range(3), 2):
        p = float(np.prod(plackett_luce_probabilities(np.log(W), list(order))))
        freq = np.mean((top[:, 0] == order[0]) & (top[:, 1] == order[1]))
        assert abs(freq - p) < 4 * math.sqrt(p * (1 - p) / R), order


def test_the_probabilities_are_stable_when_one_weight_holds_all_the_mass():
    logw = np.array([1000.0, 0.0, 0.0])
    assert plackett_luce_probabilities(logw, [0, 1]).tolist() == [1.0, 0.5]
    # the unlikely first pick: its probability underflows, its log does not (e^0 / (e^1000 + 2))
    assert plackett_luce_probabilities(logw, [1, 0], log=True) == pytest.approx([-1000.0, 0.0], abs=1e-12)
    assert plackett_luce_probabilities(logw - 5000, [2], log=True) == pytest.approx([-1000.0], abs=1e-12)


def test_weight_zero_picks():
    # impossible while a positive weight is left: probability 0
    assert plackett_luce_probabilities([0.0, -np.inf, 0.0], [1])[0] == 0.0
    # after the positive weights ran out the rest come in a fixed order: each pick was certain
    assert plackett_luce_probabilities([0.0, -np.inf, -np.inf], [0, 1, 2]).tolist() == [1.0, 1.0, 1.0]
    assert plackett_luce_probabilities([np.log(3), -np.inf, 0.0, -np.inf], [2, 0, 3], log=True) == \
        pytest.approx([-np.log(4), 0.0, 0.0])
    # NaN is refused as a draw probability
    with pytest.raises(ValueError, match=r"q must lie in \(0, 1\].*nan at draw 2"):
        lure_weights([0.5, np.nan], N=3)
    assert plackett_luce_probabilities(np.log(W), []).shape == (0,)


@pytest.mark.parametrize("log_weights,order,match", [
    ([0.0, np.nan], [0], "log_weights must not hold NaN"),
    ([0.0, np.inf], [0], "log_weights must not hold NaN or \\+inf"),
    ([0.0, 0.0], [0, 0], "order must not repeat"),
    ([0.0, 0.0], [2], r"order must hold positions in \[0, 2\)"),
    ([0.0, 0.0], [-1], r"order must hold positions"),
    ([0.0, 0.0], [0.5], "order must hold integer positions"),
    ([[0.0, 0.0]], [0], "log_weights must be one-dimensional"),
])
def test_bad_draws_are_refused(log_weights, order, match):
    with pytest.raises(ValueError, match=match):
        plackett_luce_probabilities(log_weights, order)


# --- unbiasedness by simulation ------------------------------------------------------------------------------------

def _adaptive_draws(rng, R, losses, base, M):
    """R runs of M draws without replacement; each next proposal leans towards the even items once an error
    was seen (a proposal that changes with the labels). Returns the losses and q's in draw order."""
    N = len(losses)
    drawn = np.zeros((R, N), dtype=bool)
    errors = np.zeros(R)
    L = np.empty((R, M))
    q = np.empty((R, M))
    even = (np.arange(N) % 2 == 0).astype(float)
    for m in range(M):
        w = base * (1 + 3 * errors[:, None] * even) * ~drawn
        cum = np.cumsum(w, axis=1)
        pick = (cum <= rng.random_sample(R)[:, None] * cum[:, -1:]).sum(axis=1)
        rows = np.arange(R)
        q[:, m] = w[rows, pick] / cum[:, -1]
        L[:, m] = losses[pick]
        drawn[rows, pick] = True
        errors += losses[pick]
    return L, q


def test_lure_and_pure_are_unbiased_and_the_naive_mean_is_not():
    losses = np.array([1.0, 1.0, 0.0, 0.0, 0.0, 0.0])           # risk 1/3
    base = np.array([4.0, 3.0, 1.0, 1.0, 1.0, 2.0])             # leans towards the errors
    R, M, truth = 20_000, 3, 1 / 3
    L, q = _adaptive_draws(np.random.RandomState(0), R, losses, base, M)
    assert not np.allclose(q, q[:1])                            # the proposal did change
    for name, est in (("lure", lure_risk(L, q, 6)), ("pure", pure_risk(L, q, 6))):
        se = est.std() / math.sqrt(R)
        assert abs(est.mean() - truth) < 4 * se, name
    naive = L.mean(axis=1)
    assert abs(naive.mean() - truth) > 4 * naive.std() / math.sqrt(R)
    assert lure_risk(L, q, 6).var() < pure_risk(L, q, 6).var()


# --- intervals -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("x,n,wilson,cp", [
    (8, 10, (0.49016, 0.94332), (0.44390, 0.97479)),
    (10, 10, (0.72247, 1.0), (0.69150, 1.0)),
    (180, 200, (0.85059, 0.93433), (0.84979, 0.93784)),
])
def test_intervals_of_the_note(x, n, wilson, cp):
    assert wilson_interval(x, n) == pytest.approx(wilson, abs=5e-6)
    assert wilson_interval(x / n, n) == pytest.approx(wilson, abs=5e-6)   # a float is a proportion
    assert clopper_pearson_interval(x, n) == pytest.approx(cp, abs=5e-6)


def test_wilson_with_no_success_keeps_a_width():
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and high == pytest.approx(Z95 ** 2 / (10 + Z95 ** 2))   # z²/(n + z²) = 0.27753
    assert clopper_pearson_interval(0, 10) == pytest.approx((0.0, 1 - 0.025 ** (1 / 10)))


def test_an_int_counts_and_a_float_is_a_proportion():
    assert wilson_interval(1, 10) != wilson_interval(1.0, 10)
    assert wilson_interval(1.0, 10)[1] == 1.0
    low, high = wilson_interval(np.array([8, 10]), 10)
    assert low == pytest.approx([0.49016, 0.72247], abs=5e-6) and high.tolist()[1] == 1.0
    lo90, hi90 = wilson_interval(8, 10, confidence=0.9)
    assert 0.49016 < lo90 and hi90 < 0.94332


def test_effective_sample_size():
    assert effective_sample_size([7 / 6, 3 / 4]) == pytest.approx(float(F(23, 12) ** 2 / (F(49, 36) + F(9, 16))))
    assert effective_sample_size([7 / 6, 3 / 4]) == pytest.approx(1.90975, abs=5e-6)
    assert effective_sample_size([2.0, 2.0, 2.0]) == 3.0
    assert effective_sample_size([1.0, 0.0]) == 1.0
    for bad in ([], [1.0, -1.0], [0.0, 0.0], [np.nan]):
        with pytest.raises(ValueError, match="weights must be finite"):
            effective_sample_size(bad)


@pytest.mark.parametrize("call,match", [
    (lambda: wilson_interval(11, 10), r"successes_or_p.*\[0, n\]"),
    (lambda: wilson_interval(1.5, 10), r"successes_or_p.*proportion.*\[0, 1\]"),
    (lambda: wilson_interval(True, 10), "successes_or_p must be a count"),
    (lambda: wilson_interval(3, 0), "n must be a number > 0"),
    (lambda: wilson_interval(3, 10, confidence=1.0), r"confidence must be a number in \(0, 1\)"),
    (lambda: wilson_interval(3, 10, confidence=0), r"confidence must be a number in \(0, 1\)"),
    (lambda: clopper_pearson_interval(11, 10), r"successes must be a count in \[0, n\]"),
    (lambda: clopper_pearson_interval(3, 10, confidence=95), "confidence"),
])
def test_bad_interval_arguments_are_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# --- the accuracy estimate ----------------------------------------------------------------------------------------

def _wilson_by_hand(p, n, z=Z95):
    d = 1 + z * z / n
    centre, half = (p + z * z / (2 * n)) / d, z / d * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def test_uniform_labels_give_the_mean_and_wilson():
    e = estimate_accuracy([1] * 8 + [0, 0])
    assert (e.accuracy, e.n_labels, e.method, e.biased, e.n_effective) == (0.8, 10, "wilson", False, 10.0)
    assert (e.low, e.high) == pytest.approx((0.49016, 0.94332), abs=5e-6)
    with pytest.raises(FrozenInstanceError):
        e.accuracy = 1.0


def test_uniform_q_gives_exactly_wilson():
    correct = [1, 1, 0, 1, 1]
    q = [1 / (10 - m) for m in range(5)]                        # uniform draws of 5 from 10
    e = estimate_accuracy(correct, q=q, N=10)
    assert e.method == "lure-kish-wilson" and e.accuracy == pytest.approx(0.8) and e.n_effective == pytest.approx(5)
    assert (e.low, e.high) == pytest.approx(wilson_interval(4, 5))


def test_weighted_draws_give_one_minus_lure_with_the_kish_wilson_interval():
    e = estimate_accuracy([True, False], q=[1 / 4, 2 / 3], N=3)  # items 1 (right) then 0 (wrong)
    assert e.accuracy == pytest.approx(5 / 8) and e.n_labels == 2 and not e.biased
    assert e.n_effective == pytest.approx(1.90975, abs=5e-6)
    assert (e.low, e.high) == pytest.approx(_wilson_by_hand(5 / 8, 1.90975), abs=1e-5)
    assert "3 items" in e.population

    p = estimate_accuracy([1, 0], q=[1 / 4, 2 / 3], N=3, method="pure")
    # PURE coefficients (1/q + M - m)/(N M) = (5/6, 1/4): risk 1/4, n_eff = (13/12)²/(25/36 + 1/16) = 169/109
    assert p.accuracy == pytest.approx(3 / 4) and p.method == "pure-kish-wilson"
    assert p.n_effective == pytest.approx(169 / 109)
    assert (p.low, p.high) == pytest.approx(_wilson_by_hand(3 / 4, 169 / 109), abs=1e-9)


def test_a_heavy_weight_on_an_error_clips_the_accuracy_at_zero():
    # one draw of 10 at q = 0.01: v = 1 + 9/9 * (1/(10 * 0.01) - 1) = 10, so the risk estimate is 10
    assert lure_risk([1], [0.01], 10) == pytest.approx(10.0)
    e = estimate_accuracy([0], q=[0.01], N=10)
    assert e.accuracy == 0.0 and e.low == 0.0 and e.high > 0


@pytest.mark.parametrize("kwargs,match", [
    (dict(correct=[1, 0], q=[0.5, 0.0], N=3), r"q must lie in \(0, 1\].*at draw 2"),
    (dict(correct=[1, 0], q=[0.5, 1.5], N=3), r"q must lie in \(0, 1\]"),
    (dict(correct=[1, 0], q=[0.5], N=3), "correct and q must have the same length"),
    (dict(correct=[1, 0, 1], q=[0.5, 0.5, 0.5], N=2), r"N must be an int >= the number of draws \(3\)"),
    (dict(correct=[1, 0], q=[0.5, 0.5]), "N, the size of the population drawn from, is needed with q"),
    (dict(correct=[1, 0], confidence=1.2), r"confidence must be a number in \(0, 1\)"),
    (dict(correct=[1, 0], method="hajek"), "method must be one of"),
    (dict(correct=[1, 2]), "correct must hold 0/1"),
    (dict(correct=[]), "correct must hold at least one label"),
])
def test_bad_estimate_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        estimate_accuracy(**kwargs)


@pytest.mark.parametrize("call,match", [
    (lambda: lure_weights([0.5, 0.5], N=1), r"N must be an int >= the number of draws \(2\)"),
    (lambda: lure_weights([0.5, 0.5], N=3.0), "N must be an int"),
    (lambda: lure_weights([], N=3), "q must hold at least one"),
    (lambda: lure_risk([1, 0, 0], [0.5, 0.5], N=3), "losses and q must have the same length"),
    (lambda: pure_risk([1, np.nan], [0.5, 0.5], N=3), "losses must be finite"),
    (lambda: pure_risk([1, 0], [-0.5, 0.5], N=3), r"q must lie in \(0, 1\]"),
])
def test_bad_risk_arguments_are_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_prequential_accuracy_pools_the_last_batches_and_says_it_is_biased():
    batches = [[0, 0, 0], [1, 1, 0], [1, 1, 1], [True, False, True]]
    e = prequential_accuracy(batches)
    assert (e.accuracy, e.n_labels, e.biased, e.method) == (pytest.approx(7 / 9), 9, True, "prequential-biased")
    assert (e.low, e.high) == pytest.approx(wilson_interval(7, 9))
    assert "asked about" in e.population
    assert prequential_accuracy(batches, window=1).accuracy == pytest.approx(2 / 3)
    assert prequential_accuracy(batches, window=10).n_labels == 12
    with pytest.raises(ValueError, match="no label in its last 1 batches"):
        prequential_accuracy([[1, 1], []], window=1)
    with pytest.raises(ValueError, match="window must be an int >= 1"):
        prequential_accuracy(batches, window=0)
    with pytest.raises(ValueError, match=r"correct_per_batch\[1\] must hold 0/1"):
        prequential_accuracy([[1], [0.5]])


def test_the_estimate_is_a_plain_record():
    e = AccuracyEstimate(0.9, 0.8, 0.95, 40, "wilson", False, "the pool")
    assert e.confidence == 0.95 and math.isnan(e.n_effective)
