"""Audits in the loop: a reservoir acquisition never draws from, audit labels bought through the oracle,
never trained on, and the current model's accuracy estimated from them."""
import copy

import numpy as np
import pytest
from test_loop_accuracy import N, fit, loop_of, model  # the same pool, learner and loop

from skdbal import ActiveLearner
from skdbal.accuracy_monitor import AccuracyMonitor
from skdbal.acquisition import max_entropy, stochastic_batch
from skdbal.audit import audit_proposal
from skdbal.estimates import estimate_accuracy, plackett_luce_probabilities
from skdbal.loop import MemoryJournal, check_monitor
from skdbal.oracles import Answer, KnownLabels


def audited(share=0.2, proposal="uniform", **kw):
    return AccuracyMonitor(audit_share=share, audit_proposal=proposal, **kw)


@pytest.mark.parametrize("proposal", ["uniform", "active"])
def test_the_reservoir_is_never_acquired_and_its_labels_never_trained_on(flat_digits32, proposal):
    X, y = flat_digits32
    learner, loop = loop_of(X, y, monitor=audited(0.5, proposal))
    row0 = loop.start(np.arange(10))
    reservoir = np.asarray(row0["reservoir"])
    assert len(reservoir) == round(0.2 * (N - 10)) and not set(reservoir) & set(range(10))
    assert row0["n_audit"] == 0 and loop.reservoir_.tolist() == reservoir.tolist()
    history = loop.run(4)
    picks = [p for r in history[1:] for p in r["query_indices"]]
    audits = [p for r in history[1:] for p in r["audit_indices"]]
    assert not set(picks) & set(reservoir)                       # acquisition never drew from it
    assert set(audits) <= set(reservoir) and len(set(audits)) == len(audits) == 20
    assert not set(learner.labelled_idx_) & set(reservoir)       # never labelled in the learner
    assert len(learner.y_training_) == history[-1]["n_labels"] == 30
    np.testing.assert_array_equal(learner.X_training_, X[np.r_[np.arange(10), picks]])
    # audit_share 0.5: as many audit labels as training labels bought after the initial set
    assert [r["n_audit"] for r in history] == [0, 5, 10, 15, 20]
    assert [r["n_labels"] + r["n_audit"] for r in history] == [10, 20, 30, 40, 50]   # labels paid


def test_the_audit_share_is_a_share_of_the_labels_paid_rounded_over_the_run(flat_digits32):
    X, y = flat_digits32
    _, loop = loop_of(X, y, monitor=audited(0.2), n_instances=2)
    loop.start(np.arange(10))
    history = loop.run(5)
    # a quarter of the training picks: round(0.25 * 2s) after step s = 1, 1, 2, 2, 3 (0.5 rounds up)
    assert [r["n_audit"] for r in history[1:]] == [1, 1, 2, 2, 3]
    assert [len(r["audit_indices"]) for r in history[1:]] == [1, 0, 1, 0, 1]


@pytest.mark.parametrize("proposal", ["uniform", "active"])
def test_the_estimate_is_the_current_models_lure_accuracy_on_every_audit_label(flat_digits32, proposal):
    X, y = flat_digits32
    _, loop = loop_of(X, y, monitor=audited(0.5, proposal))
    reservoir = np.asarray(loop.start(np.arange(10))["reservoir"])
    labelled, audit_rows, audit_q = list(range(10)), [], []
    for row in loop.run(3)[1:]:
        drawn, q = row["audit_indices"], row["audit_q"]
        left = np.setdiff1d(reservoir, audit_rows)                # the reservoir rows not audited before
        if proposal == "uniform":
            expected_q = 1.0 / (len(left) - np.arange(len(drawn)))
        else:                                                     # the model that chose the batch proposes
            w = audit_proposal(fit(X, y, labelled).predict_proba(X[left]), 0.1)
            expected_q = plackett_luce_probabilities(np.log(w), np.searchsorted(left, drawn))
        np.testing.assert_allclose(q, expected_q, rtol=1e-10)
        labelled += row["query_indices"]
        audit_rows += drawn
        audit_q += q
        current = fit(X, y, labelled)                             # trained on the picks only
        correct = current.predict(X[audit_rows]) == y[audit_rows]
        e = estimate_accuracy(correct, q=audit_q, N=len(reservoir))
        assert row["estimate_acc"] == pytest.approx(e.accuracy, abs=1e-12)
        assert row["estimate_lo"] == pytest.approx(e.low, abs=1e-12)
        assert row["estimate_hi"] == pytest.approx(e.high, abs=1e-12)
        assert row["estimate_kind"] == "audit-lure-kish-wilson" and row["estimate_biased"] is False
        assert row["estimate_n"] == len(audit_rows)


class HoldsReservoir(KnownLabels):
    """Known labels, with the given rows held by someone else (``taken``): a loop never queries them."""

    def __init__(self, y, held):
        super().__init__(y)
        self.held = np.asarray(held)

    def taken(self):
        return self.held


@pytest.mark.parametrize("stochastic", [False, True])
def test_the_picks_are_those_of_a_loop_without_the_reservoir_rows(flat_digits32, stochastic):
    X, y = flat_digits32
    strategy = stochastic_batch(max_entropy) if stochastic else max_entropy
    _, loop = loop_of(X, y, strategy, monitor=audited(0.5, "active"))
    reservoir = loop.start(np.arange(10))["reservoir"]
    with_audits = loop.run(3)
    _, plain = loop_of(X, y, strategy, oracle=HoldsReservoir(y[:N], reservoir))
    plain.start(np.arange(10))
    without = plain.run(3)
    assert [r["query_indices"] for r in with_audits] == [r["query_indices"] for r in without]
    if stochastic:
        assert [r["draw_log_q"] for r in with_audits[1:]] == [r["draw_log_q"] for r in without[1:]]


@pytest.mark.parametrize("proposal", ["uniform", "active"])
def test_a_resumed_loop_reproduces_the_same_audit(flat_digits32, proposal):
    X, y = flat_digits32
    keys = ["query_indices", "audit_indices", "audit_q", "n_audit", "n_labels", "estimate_acc", "estimate_lo",
            "estimate_hi", "estimate_n", "estimate_kind"]
    _, loop = loop_of(X, y, monitor=audited(0.4, proposal))
    loop.start(np.arange(10))
    rows = loop.run(4)
    learner, again = loop_of(X, y, journal=MemoryJournal(copy.deepcopy(rows[:3])),
                             monitor=audited(0.4, proposal))
    assert again.resume()
    assert again.reservoir_.tolist() == rows[0]["reservoir"] and again.n_audit == rows[2]["n_audit"]
    assert again.monitor_.n_audit == rows[2]["n_audit"]          # the audit labels are fed again
    e = again.monitor_.audit_estimate()
    assert (e.accuracy, e.low, e.high) == (rows[2]["estimate_acc"], rows[2]["estimate_lo"], rows[2]["estimate_hi"])
    assert not set(learner.labelled_idx_) & set(again.reservoir_)
    row = again.step()
    assert {k: row[k] for k in keys} == {k: rows[3][k] for k in keys}


class LateAudits(KnownLabels):
    """Answers the training picks at once, and each audit row one call late; skips one row."""

    def __init__(self, y, skip):
        super().__init__(y)
        self.skip, self.late = skip, []

    def collect(self, pending=None):
        answers = super().collect(pending)
        now = [a for a in answers if a.position not in self.audit]
        later, self.late = self.late, [a for a in answers if a.position in self.audit]
        return now + [Answer(a.position, None if a.position == self.skip else a.label, "a", 0.0) for a in later]


def test_late_and_skipped_audit_labels_feed_only_the_answered_prefix(flat_digits32):
    X, y = flat_digits32
    _, probe = loop_of(X, y, monitor=audited(0.5))
    probe.start(np.arange(10))
    first = probe.run(2)[1:]
    audit = [p for r in first for p in r["audit_indices"]]
    oracle = LateAudits(y[:N], skip=audit[6])                     # the second step's second audit row
    oracle.audit = set(probe.reservoir_.tolist())
    _, loop = loop_of(X, y, oracle=oracle, monitor=audited(0.5))
    loop.start(np.arange(10))
    one, two, three = loop.run(3)[1:]
    assert one["audit_indices"] == audit[:5] and two["audit_indices"] == audit[5:]
    assert one["n_audit"] == 0 and one["estimate_n"] == 5 and one["estimate_kind"].startswith("bridge")
    assert two["n_audit"] == 5 and two["estimate_n"] == 5 and two["estimate_kind"] == "audit-lure-kish-wilson"
    assert three["n_audit"] == 9                                  # one of the ten skipped
    assert three["estimate_n"] == 6                               # the prefix ends at the skipped draw
    assert loop.monitor_.n_audit == 6


def test_the_audit_settings_are_checked_and_copied():
    own = check_monitor(AccuracyMonitor(window=2, audit_share=0.3, audit_proposal="active", reservoir_share=0.4,
                                        audit_epsilon=0.5))
    assert (own.window, own.audit_share, own.audit_proposal, own.reservoir_share, own.audit_epsilon) == \
        (2, 0.3, "active", 0.4, 0.5)
    for kw, match in [({"audit_share": 1.0}, r"audit_share must be a number in \[0, 1\)"),
                      ({"audit_share": True}, "audit_share"),
                      ({"audit_proposal": "top"}, "audit_proposal must be one of"),
                      ({"reservoir_share": 0}, r"reservoir_share must be a number in \(0, 1\)"),
                      ({"audit_epsilon": 0.0}, r"audit_epsilon must be a number in \(0, 1\]")]:
        with pytest.raises(ValueError, match=match):
            AccuracyMonitor(**kw)


def test_no_audit_columns_without_an_audit_share(flat_digits32):
    X, y = flat_digits32
    _, loop = loop_of(X, y, monitor=True)
    rows = [loop.start(np.arange(10))] + [loop.step()]
    assert loop.reservoir_ is None
    assert not any(k in r for r in rows for k in ("reservoir", "n_audit", "audit_indices", "audit_q"))


def test_a_strategy_info_that_uses_an_audit_column_is_refused(flat_digits32):
    from skdbal.acquisition import random
    from skdbal.acquisition.base import Strategy

    class Clash(Strategy):
        def acquire(self, estimator, X_pool, n_instances=1, **kwargs):
            acq = random.acquire(estimator, X_pool, n_instances, **kwargs)
            acq.info = {"n_audit": 1}
            return acq

    X, y = flat_digits32
    learner, loop = loop_of(X, y, Clash(), monitor=audited())
    loop.start(np.arange(10))
    with pytest.raises(ValueError, match=r"\['n_audit'\]"):
        loop.step()
    assert len(learner.y_training_) == 10 and loop.n_audit == 0 and len(loop.history) == 1
    _, plain = loop_of(X, y, Clash(), monitor=True)               # no audit: the name is the strategy's
    plain.start(np.arange(10))
    assert plain.step()["n_audit"] == 1


def test_simulate_buys_audits_through_its_monitor(flat_digits32):
    X, y = flat_digits32
    learner = ActiveLearner(model(), max_entropy, random_state=0, verbose=False)
    history = learner.simulate(X[:N], y[:N], n_queries=2, n_instances=4, initial_idx=np.arange(10),
                               monitor=audited(0.5))
    assert [r["n_audit"] for r in history] == [0, 4, 8]
    assert not set(learner.labelled_idx_) & set(history[0]["reservoir"])


def test_simulate_refuses_up_front_more_queries_than_the_rows_outside_the_reservoir(flat_digits32):
    X, y = flat_digits32
    learner = ActiveLearner(model(), max_entropy, random_state=0, verbose=False)
    # 100 rows, 10 initial: a reservoir of round(0.2 * 90) = 18 leaves 72 to acquire
    with pytest.raises(ValueError, match="need 75 unlabelled pool points; only 72 are left outside the audit "
                                         "reservoir of 18"):
        learner.simulate(X[:100], y[:100], n_queries=25, n_instances=3, initial_idx=np.arange(10),
                         monitor=audited(0.2))
    assert not getattr(learner, "history_", [])
    history = learner.simulate(X[:100], y[:100], n_queries=24, n_instances=3, initial_idx=np.arange(10),
                               monitor=audited(0.2))
    assert len(history) == 25 and history[-1]["n_audit"] == 18     # every reservoir row audited
