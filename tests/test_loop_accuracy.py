"""The loop's accuracy estimate in each journal row: fed the old model's guesses, the draw's q and N."""
import copy

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression, LogisticRegression

from skdbal import ActiveLearner
from skdbal.accuracy_monitor import AccuracyMonitor
from skdbal.acquisition import max_entropy, stochastic_batch
from skdbal.estimates import clopper_pearson_interval, effective_sample_size, lure_risk, lure_weights, wilson_interval
from skdbal.loop import ActiveLearningLoop, MemoryJournal
from skdbal.oracles import Answer, KnownLabels, Oracle

N = 300
COLUMNS = ["estimate_acc", "estimate_lo", "estimate_hi", "estimate_kind", "estimate_biased", "estimate_n"]


def model():
    return LogisticRegression(max_iter=300)


def loop_of(X, y, strategy=max_entropy, journal=None, oracle=None, **kw):
    learner = ActiveLearner(model(), strategy, random_state=0, verbose=False).set_pool(X[:N])
    kw.setdefault("n_instances", 5)
    oracle = KnownLabels(y[:N]) if oracle is None else oracle
    return learner, ActiveLearningLoop(learner, oracle, journal=journal, verbose=False, **kw)


def fit(X, y, rows):
    rows = np.asarray(rows)
    return model().fit(X[rows], y[rows])


# ------------------------------------------------------------- a stochastic batch: unbiased, by hand
def test_a_stochastic_step_writes_the_lure_estimate_of_the_old_model_bridged_to_the_new(flat_digits32):
    X, y = flat_digits32
    _, loop = loop_of(X, y, stochastic_batch(max_entropy), monitor=True)
    row0 = loop.start(np.arange(10))
    assert {k: row0[k] for k in COLUMNS} == dict.fromkeys(COLUMNS)       # step 0: nothing judged yet
    row = loop.step()
    picks = np.asarray(row["query_indices"])                             # in the order drawn
    q = np.exp(row["draw_log_q"])
    old = fit(X, y, np.arange(10))                                       # the model that chose the batch
    new = fit(X, y, np.r_[np.arange(10), picks])
    losses = (old.predict(X[picks]) != y[picks]).astype(float)
    n, k = N - 10, len(picks)
    risk = lure_risk(losses, q, n)                                       # unbiased on the 290 rows of its time
    left = (n * risk - losses.sum()) / (n - k)                           # on the 285 rows left unlabelled
    acc = float(np.clip(1 - left, 0, 1))
    n_eff = effective_sample_size(lure_weights(q, n))
    low, high = wilson_interval(acc, max(1.0, n_eff), 1 - 0.05 / 2)      # Bonferroni: half for the bridge
    rest = np.setdiff1d(np.arange(10, N), picks)                         # the stop set's rows still unlabelled
    d = int(np.sum(old.predict(X[rest]) != new.predict(X[rest])))
    d_plus = clopper_pearson_interval(d, len(rest), 0.95)[1]
    assert row["estimate_acc"] == pytest.approx(acc, abs=1e-12)
    assert row["estimate_lo"] == pytest.approx(max(0.0, low - d_plus), abs=1e-12)
    assert row["estimate_hi"] == pytest.approx(min(1.0, high + d_plus), abs=1e-12)
    assert row["estimate_kind"] == "bridge-stratified-lure-kish-wilson"
    assert row["estimate_biased"] is False and row["estimate_n"] == k
    assert loop.monitor_.n_batches == 1 and loop.stop_set_.tolist() == list(range(10, N))


# ------------------------------------------------------------- top-k: the biased, windowed prequential share
def test_a_top_k_run_writes_the_windowed_prequential_accuracy_marked_biased(flat_digits32):
    X, y = flat_digits32
    _, loop = loop_of(X, y, monitor=AccuracyMonitor(window=2))
    loop.start(np.arange(10))
    history = loop.run(3)
    labelled, correct = list(range(10)), []
    for row in history[1:]:
        picks = row["query_indices"]
        correct.append(fit(X, y, labelled).predict(X[picks]) == y[picks])   # the model of its time
        labelled += picks
        expected = np.concatenate(correct[-2:]).mean()                      # the last two batches pooled
        assert row["estimate_acc"] == pytest.approx(expected, abs=1e-12)
        assert row["estimate_biased"] is True and row["estimate_kind"] == "bridge-prequential-biased"
        assert row["estimate_n"] == 5 * len(correct[-2:])
        assert row["estimate_lo"] <= row["estimate_acc"] <= row["estimate_hi"]


# ------------------------------------------------------------- the monitor changes no pick
@pytest.mark.parametrize("stochastic", [False, True])
def test_the_picks_and_metrics_are_the_same_with_and_without_the_monitor(flat_digits32, stochastic):
    X, y = flat_digits32
    strategy = stochastic_batch(max_entropy) if stochastic else max_entropy
    runs = []
    for monitor in (None, True):
        _, loop = loop_of(X, y, strategy, monitor=monitor)
        loop.start(np.arange(10))
        runs.append(loop.run(3))
    plain, watched = runs
    assert [r["query_indices"] for r in plain] == [r["query_indices"] for r in watched]
    assert not any(k in r for r in plain for k in COLUMNS + ["stop_set"])     # off: the rows are as before
    assert [r["estimate_n"] for r in watched[1:]] == ([5, 5, 5] if stochastic else [5, 10, 15])


# ------------------------------------------------------------- skipped picks end the draw's prefix
class SkipSecond(Oracle):
    """Labels everything except the second row of each request, which it skips."""

    def __init__(self, y):
        self.y, self.asked = np.asarray(y), []

    def request(self, positions):
        self.asked.append([int(p) for p in positions])

    def collect(self, positions):
        batch = self.asked.pop() if self.asked else []
        return [Answer(p, None if i == 1 and len(batch) > 1 else self.y[p], "a", 0.0) for i, p in enumerate(batch)]


def test_a_skipped_pick_ends_the_labelled_prefix_fed_with_draw_probabilities(flat_digits32):
    X, y = flat_digits32
    _, loop = loop_of(X, y, stochastic_batch(max_entropy), oracle=SkipSecond(y[:N]), monitor=True)
    loop.start(np.arange(10))
    row = loop.step()
    assert row["skipped_indices"] == row["query_indices"][1:2]
    assert row["estimate_n"] == 1 and row["estimate_biased"] is False   # only the first draw: a prefix
    _, top = loop_of(X, y, oracle=SkipSecond(y[:N]), monitor=True)
    top.start(np.arange(10))
    assert top.step()["estimate_n"] == 4                                 # top-k: every label, biased anyway


# ------------------------------------------------------------- resume: a fresh monitor
def test_a_resumed_loop_starts_a_fresh_monitor_on_the_same_stop_set(flat_digits32):
    X, y = flat_digits32
    _, loop = loop_of(X, y, stochastic_batch(max_entropy), monitor=True, stop_set_size=50)
    loop.start(np.arange(10))
    rows = loop.run(2)
    _, again = loop_of(X, y, stochastic_batch(max_entropy), journal=MemoryJournal(copy.deepcopy(rows)),
                       monitor=True, stop_set_size=50)
    assert again.resume()
    assert again.monitor_.n_batches == 0 and again.stop_set_.tolist() == rows[0]["stop_set"]
    row = again.step()
    assert row["estimate_n"] == 5 and again.monitor_.n_batches == 1     # the batches before are not refed
    assert row["estimate_kind"] == "bridge-stratified-lure-kish-wilson"


# ------------------------------------------------------------- simulate passes it through
def test_simulate_writes_the_estimate_columns(flat_digits32):
    X, y = flat_digits32
    learner = ActiveLearner(model(), stochastic_batch(max_entropy), random_state=0, verbose=False)
    history = learner.simulate(X[:N], y[:N], 2, 5, initial_idx=np.arange(10), monitor=True)
    assert history[0]["estimate_acc"] is None
    assert [r["estimate_n"] for r in history[1:]] == [5, 5]             # a new model each step: its own batch
    assert all(r["estimate_biased"] is False for r in history[1:])
    plain = ActiveLearner(model(), stochastic_batch(max_entropy), random_state=0, verbose=False)
    assert [r["query_indices"] for r in plain.simulate(X[:N], y[:N], 2, 5, initial_idx=np.arange(10))] == \
        [r["query_indices"] for r in history]


# ------------------------------------------------------------- bad parameters
@pytest.mark.parametrize("bad", ["yes", 1, AccuracyMonitor])
def test_a_bad_monitor_is_refused_naming_it(flat_digits32, bad):
    X, y = flat_digits32
    with pytest.raises(ValueError, match="monitor"):
        loop_of(X, y, monitor=bad)
    learner = ActiveLearner(model(), max_entropy, random_state=0, verbose=False)
    with pytest.raises(ValueError, match="monitor"):
        learner.simulate(X[:N], y[:N], 1, 5, initial_idx=np.arange(10), monitor=bad)
    assert not hasattr(learner, "history_")


def test_a_used_monitor_and_a_regressor_are_refused(flat_digits32):
    X, y = flat_digits32
    used = AccuracyMonitor()
    used.observe([1, 0])
    with pytest.raises(ValueError, match="fresh AccuracyMonitor"):
        loop_of(X, y, monitor=used)
    assert used.n_batches == 1
    learner = ActiveLearner(LinearRegression(), max_entropy, verbose=False).set_pool(X[:N])
    with pytest.raises(ValueError, match="monitor estimates a classifier"):
        ActiveLearningLoop(learner, KnownLabels(y[:N].astype(float)), monitor=True)


# ------------------------------------------------------------- a pool subsample: N and the rows it came from
def test_a_pool_subsample_gives_the_draw_its_n_and_the_unlabelled_rows_behind_it(flat_digits32):
    X, y = flat_digits32
    learner = ActiveLearner(model(), stochastic_batch(max_entropy), random_state=0, verbose=False,
                            pool_subsample=100).set_pool(X[:N])
    loop = ActiveLearningLoop(learner, KnownLabels(y[:N]), n_instances=5, verbose=False, monitor=True)
    loop.start(np.arange(10))
    row = loop.step()
    picks, q = np.asarray(row["query_indices"]), np.exp(row["draw_log_q"])
    losses = (fit(X, y, np.arange(10)).predict(X[picks]) != y[picks]).astype(float)
    risk = lure_risk(losses, q, 100)                 # drawn from the 100 rows of the subsample...
    left = (290 * risk - losses.sum()) / 285         # ...a uniform draw from the 290 unlabelled rows
    assert row["estimate_acc"] == pytest.approx(float(np.clip(1 - left, 0, 1)), abs=1e-12)


# ------------------------------------------------------------- with a stopping rule: one stop set, same verdicts
def test_a_monitor_beside_a_stopping_rule_shares_its_stop_set_and_changes_no_verdict(flat_digits32):
    from skdbal.stopping import StabilizingPredictions

    X, y = flat_digits32
    runs = []
    for monitor in (None, True):
        _, loop = loop_of(X, y, stochastic_batch(max_entropy), monitor=monitor, stop_set_size=100,
                          stopping=StabilizingPredictions(window=2, kappa=0.99), stop_on="record")
        loop.start(np.arange(10))
        runs.append(loop.run(3))
    plain, watched = runs
    for key in ("query_indices", "stop_set"):
        assert [r.get(key) for r in plain] == [r.get(key) for r in watched]
    value = "stop_stabilizing_predictions_value"
    np.testing.assert_array_equal([r[value] for r in plain], [r[value] for r in watched])   # nan at step 0
    assert [r["estimate_n"] for r in watched] == [None, 5, 5, 5]


def test_a_noise_filters_draw_depends_on_the_labels_so_it_is_fed_as_a_top_k_batch(flat_digits32):
    from skdbal.acquisition import noise_filter

    X, y = flat_digits32
    _, loop = loop_of(X, y, stochastic_batch(noise_filter(max_entropy)), monitor=True, pass_pool_labels=True)
    loop.start(np.arange(10))
    row = loop.step()
    assert row["n_rejected"] > 0 and len(row["draw_log_q"]) == 5         # q known, but over the trusted rows only
    assert row["estimate_biased"] is True and row["estimate_kind"] == "bridge-prequential-biased"
