"""skdbal.accuracy_monitor against hand-computed values on tiny pools, and unbiasedness by simulation.

The running example (the design's worked one): four items, the first wrong, L = (1, 0, 0, 0). One fixed
model judges two batches of one draw each: the first from all four with Plackett–Luce weights
(3, 1, 1, 1), the second from the three left with weights (1, 2, 1, 4). Mapped to the two items left
after both, the first batch's estimate is (4 L_a / (4 q_1) - L_a - L_b) / 2 and the second's
(L_b / q_2 - L_b) / 2; their mean minus the (random) risk of the two items left has expectation 0.
"""
import itertools
from fractions import Fraction as F

import numpy as np
import pytest
from scipy import stats

from skdbal.accuracy_monitor import AccuracyMonitor, journal_fields, reservoir, stratified_lure_risk

L = (1, 0, 0, 0)
W1 = (3, 1, 1, 1)
W2 = (1, 2, 1, 4)


def paths():
    """Every (a, b) of the running example with P(a, b), q_1, q_2, as fractions."""
    for a, b in itertools.permutations(range(4), 2):
        q1 = F(W1[a], sum(W1))
        q2 = F(W2[b], sum(W2[j] for j in range(4) if j != a))
        yield a, b, q1 * q2, q1, q2


def by_hand(a, b, q1, q2):
    """The design's two mapped estimates, averaged (k_1 = k_2 = 1)."""
    r1 = (4 * L[a] / (4 * q1) - L[a] - L[b]) / 2
    r2 = (L[b] / q2 - L[b]) / 2
    return (r1 + r2) / 2


def wilson(p, n, confidence=0.95):
    z = stats.norm.ppf(0.5 + confidence / 2)
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def uniform_q(N, k, done=0):
    return [1 / (N - done - m) for m in range(k)]


# --- the stratified estimator -----------------------------------------------------------------------------------

def test_the_worked_example_path_by_path_and_in_expectation():
    expectation, naive = F(0), F(0)
    for a, b, p, q1, q2 in paths():
        truth = F(sum(L) - L[a] - L[b], 2)
        got = stratified_lure_risk([[L[a]], [L[b]]], [[float(q1)], [float(q2)]], [4, 3])
        assert got == pytest.approx(float(by_hand(a, b, q1, q2)), abs=1e-12), (a, b)
        expectation += p * (F(got).limit_denominator(10 ** 6) - truth)
        naive += p * (F(L[a] + L[b], 2) - truth)
    assert sum(p for *_, p, _, _ in paths()) == 1
    assert expectation == 0                         # unbiased for the risk on the items left, exactly
    assert naive > F(1, 20)                         # the mean of the labels is not


def test_the_monitor_gives_the_worked_example_with_its_kish_wilson_interval():
    # a = 0 (wrong, q_1 = 1/2), b = 1 (right, q_2 = 2/7): mapped estimates 1/2 and 0, risk 1/4
    monitor = AccuracyMonitor()
    monitor.observe([0], q=[1 / 2], n_candidates=4, model="f")
    monitor.observe([1], q=[2 / 7], n_candidates=3, model="f")
    e = monitor.previous_model()
    assert e.accuracy == pytest.approx(3 / 4, abs=1e-12)
    # coefficients n_b v_b / (K n_t): 4 * (1/(4 q_1)) / 4 = 1/2 and 3 * (1/(3 q_2)) / 4 = 7/8
    n_eff = (1 / 2 + 7 / 8) ** 2 / ((1 / 2) ** 2 + (7 / 8) ** 2)
    assert e.n_effective == pytest.approx(n_eff, abs=1e-12)
    assert (e.low, e.high) == pytest.approx(wilson(3 / 4, n_eff), abs=1e-12)
    assert (e.method, e.biased, e.n_labels) == ("stratified-lure-kish-wilson", False, 2)
    assert "2 rows still unlabelled" in e.population


def test_each_step_has_its_own_model_by_default_so_only_the_last_batch_counts():
    monitor = AccuracyMonitor()
    monitor.observe([0], q=[1 / 2], n_candidates=4)
    monitor.observe([1], q=[2 / 7], n_candidates=3)
    # the second model judged only its own batch: (3 * 0 - 0) / 2 = 0
    assert monitor.previous_model().accuracy == 1.0
    assert monitor.previous_model().n_labels == 1


def test_uniform_draws_give_the_plain_mean_with_wilson():
    monitor = AccuracyMonitor()
    monitor.observe([1] * 8 + [0] * 2, q=uniform_q(100, 10), n_candidates=100)
    e = monitor.previous_model()
    assert e.accuracy == pytest.approx(0.8, abs=1e-12)
    assert e.n_effective == pytest.approx(10, abs=1e-9)
    assert (e.low, e.high) == pytest.approx(wilson(0.8, 10), abs=1e-9)


def test_candidates_subsampled_from_the_pool_scale_to_the_pool():
    # 5 candidates, a uniform subsample of 20 unlabelled rows; draws q = (1/4, 1/2), losses (0, 1):
    # v_2 = 1 + (1/(4 * 1/2) - 1) = 1/2, LURE 1/4 on the candidates, so on the pool; (20/4 - 1) / 18 = 2/9 left
    monitor = AccuracyMonitor()
    monitor.observe([1, 0], q=[1 / 4, 1 / 2], n_candidates=5, n_unlabelled=20)
    assert monitor.previous_model().accuracy == pytest.approx(7 / 9, abs=1e-12)
    assert stratified_lure_risk([[0, 1]], [[1 / 4, 1 / 2]], [5], [20]) == pytest.approx(2 / 9, abs=1e-12)


def test_a_top_k_batch_in_a_models_record_passes_its_known_losses_on():
    # batch 1 uniform from 10: losses (0, 1); batch 2, top-k, same model: losses (1, 1); 6 rows left
    # (10 * 1/2 - (1 + 2)) / 6 = 1/3
    monitor = AccuracyMonitor()
    monitor.observe([1, 0], q=uniform_q(10, 2), n_candidates=10, model="f")
    monitor.observe([0, 0], n_unlabelled=8, model="f")
    e = monitor.previous_model()
    assert e.accuracy == pytest.approx(2 / 3, abs=1e-12)
    assert (e.n_labels, e.n_effective, e.biased) == (2, pytest.approx(2.0), False)


def test_an_older_model_gathers_later_batches_and_a_broken_chain_restarts():
    monitor = AccuracyMonitor()
    monitor.observe([0], q=[1 / 2], n_candidates=4, model="A")
    monitor.observe([1], q=[2 / 7], n_candidates=3, model="B", older={"A": [1]})
    assert monitor.previous_model("A").accuracy == pytest.approx(3 / 4, abs=1e-12)   # the worked example
    assert monitor.previous_model().accuracy == 1.0                                   # B: its own batch only
    monitor.observe([1], q=[1 / 2], n_candidates=2, model="C")                       # A is no longer judged
    with pytest.raises(ValueError, match="not followed"):
        monitor.previous_model("A")
    # same model, but the population is not the last one less its batch (2 - 1 != 5): a fresh record
    monitor.observe([0], q=[1 / 5], n_candidates=5, model="C")
    assert monitor.previous_model().n_labels == 1


def test_stratified_lure_risk_refuses_a_broken_chain_and_an_empty_rest():
    with pytest.raises(ValueError, match="n_unlabelled must be 3"):
        stratified_lure_risk([[0], [1]], [[0.5], [0.5]], [4, 2])
    with pytest.raises(ValueError, match="no unlabelled item is left"):
        stratified_lure_risk([[0, 1]], [[0.5, 1.0]], [2])
    with pytest.raises(ValueError, match="at least one batch"):
        stratified_lure_risk([[0]], [None], [None], [4])


def _draw(rng, w, taken, k):
    """Vectorised Plackett–Luce draws of k without replacement: picks (R, k) and their sequential q."""
    logw = np.where(taken, -np.inf, np.log(w))
    keys = logw + rng.gumbel(size=logw.shape)
    picks = np.argsort(-keys, axis=1)[:, :k]
    pw = np.take_along_axis(w, picks, axis=1)
    left = np.where(taken, 0.0, w).sum(axis=1, keepdims=True)
    q = pw / (left - np.cumsum(pw, axis=1) + pw)
    return picks, q


def test_the_stratified_estimate_is_unbiased_by_simulation_with_proposals_that_change():
    R = 40_000
    rng = np.random.RandomState(0)
    losses = np.array([1, 1, 0, 0, 0, 1, 0, 0], dtype=float)
    N = len(losses)
    rows = np.arange(R)[:, None]
    w1 = np.tile([4.0, 1, 2, 1, 1, 5, 1, 2], (R, 1))                # errors favoured
    taken = np.zeros((R, N), dtype=bool)
    p1, q1 = _draw(rng, w1, taken, 2)
    taken[rows, p1] = True
    seen = losses[p1].sum(axis=1, keepdims=True)                     # the second proposal depends on the first labels
    w2 = np.array([1.0, 3, 1, 2, 1, 6, 1, 1]) ** (1 + seen) + 0.1
    p2, q2 = _draw(rng, w2, taken, 2)
    taken[rows, p2] = True
    truth = (losses * ~taken).sum(axis=1) / (~taken).sum(axis=1)
    est = stratified_lure_risk([losses[p1], losses[p2]], [q1, q2], [8, 6])
    err = est - truth
    assert abs(err.mean()) <= 4 * err.std() / np.sqrt(R)
    naive = np.concatenate([losses[p1], losses[p2]], axis=1).mean(axis=1) - truth
    assert abs(naive.mean()) > 10 * naive.std() / np.sqrt(R)         # the check has power
    # the monitor gives the same estimate, clipped to an accuracy
    for r in range(3):
        monitor = AccuracyMonitor()
        monitor.observe(1 - losses[p1[r]], log_q=np.log(q1[r]), n_candidates=8, model="f")
        monitor.observe(1 - losses[p2[r]], q=q2[r], n_candidates=6, model="f")
        assert monitor.previous_model().accuracy == pytest.approx(float(np.clip(1 - est[r], 0, 1)), abs=1e-12)


# --- the bridge to the current model ----------------------------------------------------------------------------

def test_the_bridge_widens_by_the_clopper_pearson_bound_at_bonferroni_levels():
    monitor = AccuracyMonitor()
    monitor.observe([1] * 8 + [0] * 2, q=uniform_q(100, 10), n_candidates=100)
    lo, hi = wilson(0.8, 10, confidence=0.975)                      # the previous interval at 1 - α/2
    d_plus = 1 - 0.025 ** (1 / 20)                                  # 0 of 20 disagree: one-sided 97.5% bound
    b = monitor.current_model([3] * 20, [3] * 20)
    assert (b.low, b.high) == pytest.approx((lo - d_plus, min(1.0, hi + d_plus)), abs=1e-9)
    assert b.accuracy == pytest.approx(0.8)
    assert (b.method, b.biased) == ("bridge-stratified-lure-kish-wilson", False)
    assert "conservative" in b.population
    exact = monitor.current_model([0] * 40, [0] * 38 + [1, 2], whole_pool=True)   # D = 2/40, known
    assert (exact.low, exact.high) == pytest.approx((lo - 0.05, min(1.0, hi + 0.05)), abs=1e-9)


def test_the_bridge_of_a_biased_estimate_stays_biased():
    monitor = AccuracyMonitor()
    monitor.observe([1, 0])
    b = monitor.current_model([0, 1], [0, 0], whole_pool=True)
    assert b.biased and b.method == "bridge-prequential-biased"
    lo, hi = wilson(0.5, 2, confidence=0.975)
    assert (b.low, b.high) == pytest.approx((max(0.0, lo - 0.5), min(1.0, hi + 0.5)), abs=1e-9)


# --- top-k ------------------------------------------------------------------------------------------------------

def test_top_k_batches_give_the_windowed_prequential_share_marked_biased():
    monitor = AccuracyMonitor(window=2)
    monitor.observe([0, 0, 0], n_candidates=50)
    monitor.observe([1, 1, 0], n_candidates=47)
    monitor.observe([1, 0, 1, 1], n_candidates=44)
    e = monitor.previous_model()
    assert (e.accuracy, e.n_labels) == (pytest.approx(5 / 7), 7)    # the last two batches: 5 of 7
    assert e.biased and e.method == "prequential-biased"
    assert (e.low, e.high) == pytest.approx(wilson(5 / 7, 7), abs=1e-9)
    with pytest.raises(ValueError, match="biased prequential"):
        monitor.previous_model(monitor._batches[-1].chooser)


# --- the audit --------------------------------------------------------------------------------------------------

def test_an_audit_of_mixed_uniform_draws_is_the_plain_mean_with_wilson():
    monitor = AccuracyMonitor()
    monitor.audit([1, 1, 0], q=uniform_q(20, 3), n_reservoir=20)             # 1/20, 1/19, 1/18
    monitor.audit([1, 0, 1, 1], n_reservoir=20)                              # uniform by default: 1/17 .. 1/14
    e = monitor.audit_estimate()
    assert e.accuracy == pytest.approx(5 / 7, abs=1e-12)
    assert (e.low, e.high) == pytest.approx(wilson(5 / 7, 7), abs=1e-9)
    assert (e.method, e.biased, e.n_labels, monitor.n_audit) == ("audit-lure-kish-wilson", False, 7, 7)
    assert "20 rows" in e.population
    monitor.rejudge_audit([1] * 7)                                            # the model retrained
    assert monitor.audit_estimate().accuracy == 1.0


def test_an_active_audit_is_weighted_by_lure():
    # three reservoir rows; drawn with weights (2, 1, 1): row 1 right (q = 1/4), row 0 wrong (q = 2/3):
    # weights 7/6 and 3/4, risk 3/8
    monitor = AccuracyMonitor()
    monitor.audit([1, 0], q=[1 / 4, 2 / 3], n_reservoir=3)
    assert monitor.audit_estimate().accuracy == pytest.approx(5 / 8, abs=1e-12)


def test_the_reservoir_is_a_seeded_sorted_share_of_the_pool():
    a = reservoir(100, 0.2, random_state=3)
    assert len(a) == 20 and len(set(a.tolist())) == 20 and a.min() >= 0 and a.max() < 100
    assert (np.diff(a) > 0).all()
    assert a.tolist() == reservoir(100, 0.2, random_state=3).tolist()
    assert len(reservoir(3, 0.01)) == 1 and len(reservoir(3, 0.99)) == 2
    for bad, name in (((1, 0.2), "pool_size"), ((10, 0.0), "share"), ((10, 1.0), "share"), ((10, True), "share")):
        with pytest.raises(ValueError, match=name):
            reservoir(*bad)


# --- bad input --------------------------------------------------------------------------------------------------

def _state(monitor):
    return (monitor.n_batches, monitor.n_audit, dict(monitor._records), monitor.previous_model(),
            monitor.audit_estimate())


@pytest.mark.parametrize("kwargs, name", [
    (dict(correct=[1, 2]), "correct"),
    (dict(correct=[]), "correct"),
    (dict(correct=[[1, 0]]), "correct"),
    (dict(correct=[1, 0], q=[0.5]), "q"),
    (dict(correct=[1, 0], q=[0.5, 1.5], n_candidates=5), "q"),
    (dict(correct=[1, 0], q=[0.5, 0.5]), "n_candidates"),
    (dict(correct=[1, 0], q=[0.5, 0.5], log_q=[-1, -1], n_candidates=5), "q or log_q"),
    (dict(correct=[1, 0], log_q=[0.1, -1], n_candidates=5), "log_q"),
    (dict(correct=[1, 0], q=[0.5, 0.5], n_candidates=1), "n_candidates"),
    (dict(correct=[1, 0], q=[0.5, 0.5], n_candidates=5, n_unlabelled=4), "n_unlabelled"),
    (dict(correct=[1, 0], older={"nobody": [1, 0]}), "older"),
    (dict(correct=[1, 0], model="A", older={"A": [1]}), "older"),
    (dict(correct=[1, 0], model=["unhashable"]), "model"),
])
def test_bad_batches_are_refused_by_name_and_change_nothing(kwargs, name):
    monitor = AccuracyMonitor()
    monitor.observe([1, 0, 1], q=uniform_q(10, 3), n_candidates=10, model="A")
    monitor.audit([1, 0], n_reservoir=5)
    before = _state(monitor)
    with pytest.raises(ValueError, match=name):
        monitor.observe(**kwargs)
    assert _state(monitor) == before


@pytest.mark.parametrize("call, name", [
    (lambda m: m.audit([1, 0], n_reservoir=6), "n_reservoir"),
    (lambda m: m.audit([1, 0]), "n_reservoir"),
    (lambda m: m.audit([1, 1, 1, 1], n_reservoir=5), "n_reservoir"),
    (lambda m: m.audit([1, 0], q=[0.0, 0.5], n_reservoir=5), "q"),
    (lambda m: m.audit(["x"], n_reservoir=5), "correct"),
    (lambda m: m.rejudge_audit([1, 1, 1]), "correct"),
    (lambda m: m.current_model([0, 1], [0]), "pred_previous"),
    (lambda m: m.current_model([], []), "pred_previous"),
    (lambda m: m.previous_model("B"), "not followed"),
    (lambda m: m.estimate([0, 1], None), "together"),
])
def test_bad_audits_and_questions_are_refused_by_name_and_change_nothing(call, name):
    monitor = AccuracyMonitor()
    monitor.observe([1, 0, 1], q=uniform_q(10, 3), n_candidates=10, model="A")
    monitor.audit([1, 0], n_reservoir=5)
    before = _state(monitor)
    with pytest.raises(ValueError, match=name):
        call(monitor)
    assert _state(monitor) == before


def test_bad_settings_and_early_questions_are_refused():
    for kwargs, name in ((dict(window=0), "window"), (dict(confidence=1.0), "confidence")):
        with pytest.raises(ValueError, match=name):
            AccuracyMonitor(**kwargs)
    monitor = AccuracyMonitor()
    with pytest.raises(ValueError, match="no batch"):
        monitor.previous_model()
    with pytest.raises(ValueError, match="no audit"):
        monitor.audit_estimate()


def test_default_keys_are_followed_and_can_judge_later_batches():
    monitor = AccuracyMonitor()
    monitor.observe([0], q=[1 / 2], n_candidates=4)
    (first,) = monitor.followed
    monitor.observe([1], q=[2 / 7], n_candidates=3, older={first: [1]})
    assert monitor.followed[0] == first and len(monitor.followed) == 2
    assert monitor.previous_model(first).accuracy == pytest.approx(3 / 4, abs=1e-12)   # the worked example


def test_estimate_prefers_the_audit_then_the_bridge_then_the_previous_model():
    monitor = AccuracyMonitor()
    monitor.observe([1] * 8 + [0] * 2, q=uniform_q(100, 10), n_candidates=100)
    assert monitor.estimate() == monitor.previous_model()
    assert monitor.estimate([0, 1], [1, 1]) == monitor.current_model([0, 1], [1, 1])
    monitor.audit([1, 0, 1], n_reservoir=30)
    assert monitor.estimate([0, 1], [1, 1]) == monitor.audit_estimate()
    assert monitor.audit_estimate().accuracy == pytest.approx(2 / 3)


def test_journal_fields_carry_the_estimate():
    monitor = AccuracyMonitor()
    monitor.observe([1] * 8 + [0] * 2, q=uniform_q(100, 10), n_candidates=100)
    e = monitor.previous_model()
    assert journal_fields(e) == {"estimate_acc": e.accuracy, "estimate_lo": e.low, "estimate_hi": e.high,
                                 "estimate_kind": "stratified-lure-kish-wilson", "estimate_biased": False,
                                 "estimate_n": 10}
    assert set(journal_fields(None).values()) == {None}
    with pytest.raises(TypeError, match="estimate"):
        journal_fields(0.8)


def test_whole_pool_must_be_a_bool():
    monitor = AccuracyMonitor()
    monitor.observe([1, 0])
    with pytest.raises(TypeError, match="whole_pool"):
        monitor.current_model([0], [0], whole_pool="yes")


class _Fixed:
    """A model that never retrains: p(y=1 | x) = x[0]."""

    classes_ = np.array([0, 1])

    def predict_proba(self, X):
        p = np.asarray(X, dtype=float)[:, 0]
        return np.stack([1 - p, p], axis=1)


def test_a_stochastic_batchs_recorded_draw_feeds_the_monitor_over_two_steps():
    """The wiring a loop does: one fixed model, two PowerBALD-like batches from what is left, each fed with its
    ``info["draw_log_q"]`` and its candidate count; the stratified estimate of the risk on the rows left is
    unbiased over seeded runs, and the monitor gives the same number."""
    from skdbal.acquisition import max_entropy, stochastic_batch

    X = np.array([[0.5], [0.45], [0.4], [0.3], [0.2], [0.1], [0.05], [0.02]])
    wrong = np.array([1, 1, 0, 1, 0, 0, 0, 0], dtype=float)
    strategy = stochastic_batch(max_entropy, "power", 1)
    errors, naive, checked = [], [], 0
    for seed in range(1500):
        first = strategy.acquire(_Fixed(), X, 3, random_state=seed)
        rest = np.setdiff1d(np.arange(8), first.indices)
        second = strategy.acquire(_Fixed(), X[rest], 2, random_state=10_000 + seed)
        picks2 = rest[second.indices]
        left = np.setdiff1d(rest, picks2)
        losses = [wrong[first.indices], wrong[picks2]]
        q = [np.exp(first.info["draw_log_q"]), np.exp(second.info["draw_log_q"])]
        est = stratified_lure_risk(losses, q, [8, 5])
        errors.append(est - wrong[left].mean())
        naive.append(np.concatenate(losses).mean() - wrong[left].mean())
        if 0 <= est <= 1 and checked < 3:
            monitor = AccuracyMonitor()
            monitor.observe(1 - losses[0], log_q=first.info["draw_log_q"], n_candidates=8, model="f")
            monitor.observe(1 - losses[1], log_q=second.info["draw_log_q"], n_candidates=5, model="f")
            assert monitor.previous_model().accuracy == pytest.approx(1 - est, abs=1e-12)
            checked += 1
    errors = np.array(errors)
    assert checked == 3
    assert abs(errors.mean()) <= 4 * errors.std() / np.sqrt(len(errors))
    naive = np.array(naive)
    assert naive.mean() > 10 * naive.std() / np.sqrt(len(naive))      # the labels' own mean is far off
