"""Issue 28: a learner that owns its pool, and one loop whose oracle is a parameter."""
import copy

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from skdbal import ActiveLearner, MCDropoutClassifier
from skdbal.acquisition import STRATEGIES, get_strategy, max_entropy, random
from skdbal.loop import ActiveLearningLoop, MemoryJournal, evaluate
from skdbal.models import MLP
from skdbal.oracles import Answer, KnownLabels, NoisyAnnotator, Oracle


def logistic(**kw):
    return ActiveLearner(LogisticRegression(max_iter=300), max_entropy, random_state=0, verbose=False, **kw)


def partial(y, labelled):
    y_known = np.full(len(y), np.nan)
    y_known[labelled] = y[labelled]
    return y_known


# ------------------------------------------------------------- the convention
def test_fit_with_missing_labels_keeps_the_pool_and_trains_on_the_labelled_rows(flat_digits32):
    X, y = flat_digits32
    y_known = partial(y[:300], np.arange(0, 300, 10))   # 30 labels, rows 0, 10, 20, ...
    learner = logistic().fit(X[:300], y_known)
    np.testing.assert_array_equal(learner.labelled_idx_, np.arange(0, 300, 10))
    assert learner.y_training_.dtype.kind == "i"          # 0., 1., NaN -> the integer labels
    np.testing.assert_array_equal(learner.y_training_, y[:300:10])
    np.testing.assert_array_equal(learner.X_training_, X[:300:10])
    # the model is the one trained on the 30 labelled rows
    ref = LogisticRegression(max_iter=300).fit(X[:300:10], y[:300:10])
    np.testing.assert_allclose(learner.predict_proba(X[300:400]), ref.predict_proba(X[300:400]))
    np.testing.assert_array_equal(learner.labelled_mask_, ~np.isnan(y_known))
    y_pool = learner.y_pool_
    assert np.isnan(y_pool[1]) and y_pool[10] == y[10]


def test_query_without_a_pool_ranks_only_unlabelled_rows(flat_digits32):
    X, y = flat_digits32
    y_known = partial(y[:300], np.arange(20))
    learner = logistic().fit(X[:300], y_known)
    idx, X_query = learner.query(n_instances=5)
    assert (idx >= 20).all() and len(set(idx.tolist())) == 5
    np.testing.assert_array_equal(X_query, X[:300][idx])
    # the same pool passed in modAL's form ranks labelled rows too: the top max-entropy rows are
    # exactly the learner's picks once the labelled rows are left out
    P = learner.predict_proba(X[:300])
    H = -(P * np.log(P)).sum(axis=1)
    H[:20] = -np.inf
    np.testing.assert_array_equal(np.sort(idx), np.sort(np.argsort(-H)[:5]))


def test_label_by_position_records_annotator_and_time_and_retrains(flat_digits32):
    X, y = flat_digits32
    learner = logistic().fit(X[:300], partial(y[:300], np.arange(20)))
    before = learner.estimator_
    learner.label([40, 41], y[[40, 41]], annotator="ann", time=1700000000.0)
    assert learner.estimator_ is not before
    np.testing.assert_array_equal(learner.labelled_idx_, np.r_[np.arange(20), 40, 41])
    assert learner.label_log_ == [
        {"position": 40, "id": 40, "label": int(y[40]), "annotator": "ann", "time": 1700000000.0, "previous": None},
        {"position": 41, "id": 41, "label": int(y[41]), "annotator": "ann", "time": 1700000000.0, "previous": None}]
    # a changed label: the row keeps its place, its label changes, the old one is logged
    new = (y[40] + 1) % 10
    learner.label([40], [new], annotator="bob")
    assert len(learner.y_training_) == 22 and learner.y_training_[20] == new
    assert learner.label_log_[-1]["previous"] == int(y[40]) and learner.label_log_[-1]["annotator"] == "bob"
    ref = LogisticRegression(max_iter=300).fit(learner.X_training_, learner.y_training_)
    np.testing.assert_allclose(learner.predict_proba(X[300:350]), ref.predict_proba(X[300:350]))


@pytest.mark.parametrize("positions, labels, error, match", [
    ([300], [1], ValueError, r"candidates must lie in \[0, 300\)"),
    ([30, 30], [1, 1], ValueError, "duplicates"),
    ([30], [np.nan], ValueError, "missing label"),
    ([30, 31], [1], ValueError, "inconsistent lengths"),
    ([30.0], [1], TypeError, "integer positions"),
])
def test_bad_labels_change_nothing(flat_digits32, positions, labels, error, match):
    X, y = flat_digits32
    learner = logistic().fit(X[:300], partial(y[:300], np.arange(20)))
    state = (learner.estimator_, learner.labelled_idx_.copy(), learner.y_training_.copy(), list(learner.label_log_))
    with pytest.raises(error, match=match):
        learner.label(positions, labels)
    assert learner.estimator_ is state[0]
    np.testing.assert_array_equal(learner.labelled_idx_, state[1])
    np.testing.assert_array_equal(learner.y_training_, state[2])
    assert learner.label_log_ == state[3]


def test_a_label_outside_the_classes_changes_nothing(flat_digits32):
    X, y = flat_digits32
    net = MCDropoutClassifier(module=MLP, classes=np.arange(10), max_epochs=2, random_state=0)
    learner = ActiveLearner(net, random_state=0, verbose=False).fit(X[:100], partial(y[:100], np.arange(20)))
    n = len(learner.y_training_)
    with pytest.raises(ValueError, match="not in the estimator's classes"):
        learner.label([50], [11])
    assert len(learner.y_training_) == n and len(learner.label_log_) == 0


def test_a_failed_retrain_keeps_the_labels_unrecorded(flat_digits32):
    X, y = flat_digits32
    learner = logistic().fit(X[:300], partial(y[:300], np.arange(20)))
    learner.set_params(estimator=LogisticRegression(max_iter=-1))  # fit raises
    with pytest.raises(ValueError):
        learner.label([50], [y[50]])
    assert 50 not in learner.labelled_idx_ and len(learner.y_training_) == 20 and not learner.label_log_


def test_query_mistakes_are_named(flat_digits32):
    X, y = flat_digits32
    learner = logistic().fit(X[:300], partial(y[:300], np.arange(20)))
    with pytest.raises(TypeError, match="n_instances=5 by keyword"):
        learner.query(5)
    with pytest.raises(ValueError, match=r"candidates hold labelled pool rows \[3\]"):
        learner.query(n_instances=1, candidates=[3, 50])
    with pytest.raises(ValueError, match="needs the learner's pool"):
        logistic().fit(X[:20], y[:20]).query(n_instances=1)


@pytest.mark.parametrize("missing, y_pool", [
    (-1, np.r_[[0, 1] * 10, [-1] * 80]),                                   # scikit-learn's semi-supervised -1
    (None, np.array(["cat", "dog"] * 10 + [None] * 80, dtype=object)),    # strings, None unlabelled
])
def test_missing_label_is_configurable(flat_digits32, missing, y_pool):
    X, _ = flat_digits32
    learner = logistic(missing_label=missing).fit(X[:100], y_pool)
    assert len(learner.labelled_idx_) == 20
    idx, _ = learner.query(n_instances=3)
    assert (idx >= 20).all()
    assert set(learner.classes_.tolist()) == set(y_pool[:2].tolist())


def test_binary_minus_one_labels_are_labels_under_the_default(flat_digits32):
    """-1 is a class of {-1, 1} labels, not a missing one, unless missing_label=-1 says so."""
    X, _ = flat_digits32
    y = np.array([-1, 1] * 50)
    learner = logistic().fit(X[:100], y)       # every label given: no pool
    assert not hasattr(learner, "X_pool_") and len(learner.y_training_) == 100


def test_pool_ids_are_logged_and_order_the_subsample(flat_digits32):
    X, y = flat_digits32
    ids = np.arange(1000, 1300)[::-1].copy()   # descending: the subsample is scored in id order
    learner = logistic(pool_subsample=30).set_pool(X[:300], partial(y[:300], np.arange(20)), ids=ids)
    learner.refit()
    idx, _ = learner.query(n_instances=2)
    learner.label(idx, y[idx])
    assert [e["id"] for e in learner.label_log_] == ids[idx].tolist()


# ------------------------------------------- after simulate, never a labelled row
# by the model each reads (model_kind); a DDUClassifier's density: tests/models/test_ddu.py runs ddu with the learner
REGRESSION = sorted(name for name, s in STRATEGIES.items() if s.model_kind in ("regressor", "network_regressor"))
CLASSIFIER_STRATEGIES = sorted(name for name, s in STRATEGIES.items() if s.model_kind == "classifier") + [
    "filter(bald,0.1)", "filter(bald,dynamic)", "filter(bald,batch)", "diverse(bald,0.1)",
    "diverse(filter(bald,0.1),0.1)", "filter(diverse(max_entropy,0.1),0.1)"]


@pytest.fixture(scope="module")
def simulated(flat_digits32):
    X, y = flat_digits32
    learners = {}
    for subsample in (None, 60):
        net = MCDropoutClassifier(module=MLP, classes=np.arange(10), max_epochs=3, n_samples=5, random_state=0)
        learner = ActiveLearner(net, random, pool_subsample=subsample, random_state=0, verbose=False)
        learner.simulate(X[:200], y[:200], n_queries=3, n_instances=5)
        learners[subsample] = learner
    return learners


@pytest.mark.parametrize("name", CLASSIFIER_STRATEGIES)
@pytest.mark.parametrize("subsample", [None, 60])
def test_after_simulate_query_never_returns_a_labelled_row(flat_digits32, simulated, name, subsample):
    X, y = flat_digits32
    learner = simulated[subsample]
    learner.set_params(query_strategy=get_strategy(name))
    labelled = set(learner.labelled_idx_.tolist())
    assert len(labelled) == 35
    for _ in range(2):
        idx, X_query = learner.query(n_instances=5, y_pool=y[:200])
        assert len(idx) == 5 and not set(idx.tolist()) & labelled, (name, idx, sorted(labelled))
        np.testing.assert_array_equal(X_query, X[:200][idx])
        info = learner.last_acquisition_.info
        if "rejected_indices" in info:   # what a decorator reports is in the pool's positions, unlabelled too
            assert not set(np.asarray(info["rejected_indices"]).tolist()) & labelled


@pytest.mark.parametrize("name", REGRESSION + ["diverse(predictive_variance,0.1)"])
def test_after_simulate_a_regressor_never_queries_a_labelled_row(flat_digits32, name):
    from skdbal import MCDropoutRegressor

    X, y = flat_digits32
    target = X[:200, :32].sum(axis=1)                   # a continuous target
    net = MCDropoutRegressor(module=MLP, max_epochs=3, n_samples=5, random_state=0)
    learner = ActiveLearner(net, get_strategy(name), pool_subsample=50, random_state=0, verbose=False)
    learner.simulate(X[:200], target, n_queries=2, n_instances=5, initial_idx=np.arange(10))
    for _ in range(2):
        idx, _ = learner.query(n_instances=5)
        assert not set(idx.tolist()) & set(learner.labelled_idx_.tolist())


def test_after_simulate_a_modal_strategy_never_returns_a_labelled_row(flat_digits32, simulated):
    modal = pytest.importorskip("modAL.uncertainty")
    learner = simulated[None]
    learner.set_params(query_strategy=modal.uncertainty_sampling)
    idx, _ = learner.query(n_instances=5)
    assert not set(idx.tolist()) & set(learner.labelled_idx_.tolist())


# ---------------------------------------------------------------- the oracles
def test_simulate_with_a_noisy_annotator(flat_digits32):
    X, y = flat_digits32
    initial = np.arange(20)
    noisy = NoisyAnnotator.flip(y[:300], 0.4, random_state=0, clean=initial)
    assert noisy.flipped.sum() > 50 and not noisy.flipped[initial].any()
    learner = logistic()
    learner.simulate(X[:300], None, n_queries=4, n_instances=10, oracle=noisy, initial_idx=initial)
    np.testing.assert_array_equal(learner.y_training_, noisy.y[learner.labelled_idx_])
    np.testing.assert_array_equal(learner.y_training_[:20], y[:20])     # the initial set is clean
    n_wrong = (learner.y_training_ != y[:300][learner.labelled_idx_]).sum()
    assert n_wrong == noisy.flipped[learner.labelled_idx_].sum() > 0
    with pytest.raises(ValueError, match="y_pool or an oracle, not both"):
        logistic().simulate(X[:300], y[:300], 1, oracle=noisy)


class Person(Oracle):
    """Answers the initial set at once, then one request per collect, late; skips positions divisible
    by 7; once changes a label."""

    annotator = "person"

    def __init__(self, y):
        self.y, self.queue, self.changed, self.first = y, [], None, True

    def request(self, positions):
        self.queue.extend(int(p) for p in positions)

    def collect(self, pending):
        answers = []
        for _ in range(len(self.queue) if self.first else min(1, len(self.queue))):
            p = self.queue.pop(0)
            answers.append(Answer(p, None if p % 7 == 0 else self.y[p], self.annotator, 1.0 * p))
        self.first = False
        if self.changed is None and len(self.queue) > 3:   # a reviewer changes a label, and labels a skipped row
            self.changed = 2
            answers += [Answer(2, (self.y[2] + 1) % 10, "reviewer", 2.0), Answer(14, self.y[14], "reviewer", 3.0)]
        return answers


def test_a_person_who_answers_late_skips_and_changes(flat_digits32):
    X, y = flat_digits32
    learner = logistic().set_pool(X[:300])
    person = Person(y[:300])
    loop = ActiveLearningLoop(learner, person, n_instances=4, verbose=False)
    loop.start(np.arange(0, 40, 2))           # then only one answer comes back at once
    loop.run(6)
    asked = [p for row in loop.history for p in row["query_indices"]]
    assert len(asked) == len(set(asked)) == 20 + 6 * 4  # nobody is asked twice about a row
    labelled = learner.labelled_idx_.tolist()
    assert len(labelled) == len(set(labelled))
    assert not set(labelled) & set(loop.skipped.tolist()) and not set(labelled) & set(loop.pending.tolist())
    assert set(loop.skipped.tolist()) <= {p for p in asked if p % 7 == 0} and 0 in loop.skipped
    assert 14 in labelled and 14 not in loop.skipped    # skipped by one, labelled by another
    assert len(labelled) + len(loop.skipped) + len(loop.pending) == len(asked)
    # the changed label is the model's label, and the log keeps both
    assert learner.y_training_[labelled.index(2)] == (y[2] + 1) % 10
    change = [e for e in learner.label_log_ if e["annotator"] == "reviewer"][0]
    assert change["position"] == 2 and change["previous"] == y[2] and change["label"] == (y[2] + 1) % 10
    # rows say what came back when it differs from the picks
    assert any("labelled_indices" in r for r in loop.history) and any("n_pending" in r for r in loop.history)
    np.testing.assert_array_equal(learner.y_training_, learner.y_pool_[learner.labelled_idx_].astype(int))


# -------------------------------------------------------- journal and resume
def test_a_journal_resumes_to_the_uninterrupted_run(flat_digits32):
    """seeding="step": each step's randomness is a function of (random_state, step), so a new learner and
    loop given the journal's first rows continue exactly as the uninterrupted run."""
    X, y = flat_digits32

    def loop_of(journal):
        net = MCDropoutClassifier(module=MLP, classes=np.arange(10), max_epochs=3, n_samples=5)
        learner = ActiveLearner(net, get_strategy("bald"), pool_subsample=80, random_state=3, seeding="step",
                                verbose=False).set_pool(X[:300])
        return learner, ActiveLearningLoop(learner, KnownLabels(y[:300]), n_instances=5, journal=journal,
                                           evaluate=lambda m: evaluate(m, X[300:500], y[300:500]), verbose=False)

    learner, full = loop_of(MemoryJournal())
    full.start(np.arange(20))
    full.run(4)
    cut = copy.deepcopy(full.history[:3])                 # steps 0-2 were written, then the process died
    learner2, resumed = loop_of(MemoryJournal(cut))
    assert resumed.resume()
    resumed.run(2)
    drop = ("query_time", "fit_time")
    strip = lambda rows: [{k: v for k, v in r.items() if k not in drop} for r in rows]
    assert strip(resumed.history) == strip(full.history)
    np.testing.assert_array_equal(learner2.labelled_idx_, learner.labelled_idx_)
    np.testing.assert_allclose(learner2.predict_proba(X[300:]), learner.predict_proba(X[300:]))


def test_seeding_step_needs_an_int_seed_and_a_seedable_model(flat_digits32):
    X, y = flat_digits32
    with pytest.raises(ValueError, match="random_state must be an int"):
        ActiveLearner(LogisticRegression(), seeding="step").fit(X[:20], y[:20])
    from sklearn.neighbors import KNeighborsClassifier
    with pytest.raises(ValueError, match="has no random_state parameter"):
        ActiveLearner(KNeighborsClassifier(1), seeding="step", random_state=0).fit(X[:20], y[:20])
    with pytest.raises(ValueError, match="seeding must be"):
        ActiveLearner(LogisticRegression(), seeding="epoch").fit(X[:20], y[:20])


def test_the_loop_needs_a_learner_with_a_pool(flat_digits32):
    X, y = flat_digits32
    with pytest.raises(ValueError, match="set_pool"):
        ActiveLearningLoop(logistic().fit(X[:20], y[:20]), KnownLabels(y[:20]))


@pytest.mark.parametrize("own", ["candidates", "n_instances", "X_pool"])
def test_the_loop_refuses_query_kwargs_it_sets_itself(flat_digits32, own):
    X, y = flat_digits32
    learner = logistic().set_pool(X[:50])
    with pytest.raises(ValueError, match=f"may not set '{own}'.*pool_subsample"):
        ActiveLearningLoop(learner, KnownLabels(y[:50]), query_kwargs={own: 20})


class Flaky(Oracle):
    """Answers everything at once; row 50's answer is first 3, then 4 in the same batch; row 60's is 99."""

    annotator = "flaky"

    def __init__(self, y, bad=False):
        self.y, self.queue, self.bad = y, [], bad

    def request(self, positions):
        self.queue.extend(int(p) for p in positions)

    def collect(self, pending):
        answers = [Answer(p, self.y[p], self.annotator) for p in self.queue]
        if 50 in self.queue:
            answers += [Answer(50, 3, "a"), Answer(50, 4, "b")]
        if self.bad and 60 in self.queue:
            answers.append(Answer(60, 99, "c"))
        self.queue = []
        return answers


def test_two_answers_in_one_batch_the_later_counts(flat_digits32):
    X, y = flat_digits32
    net = MCDropoutClassifier(module=MLP, classes=np.arange(10), max_epochs=1, random_state=0)
    learner = ActiveLearner(net, random_state=0, verbose=False).set_pool(X[:100])
    loop = ActiveLearningLoop(learner, Flaky(y[:100]), verbose=False)
    loop.start(np.r_[np.arange(20), 50])
    assert learner.labelled_idx_.tolist() == list(range(20)) + [50] and learner.y_training_[20] == 4
    assert [e["annotator"] for e in learner.label_log_][-1] == "b"


def test_a_label_outside_the_classes_from_an_oracle_raises_and_records_nothing(flat_digits32):
    X, y = flat_digits32
    net = MCDropoutClassifier(module=MLP, classes=np.arange(10), max_epochs=1, random_state=0)
    learner = ActiveLearner(net, random_state=0, verbose=False).set_pool(X[:100])
    loop = ActiveLearningLoop(learner, Flaky(y[:100], bad=True), verbose=False)
    with pytest.raises(ValueError, match=r"not in the estimator's classes: \[99\]"):
        loop.start(np.r_[np.arange(20), 60])
    assert len(learner.labelled_idx_) == 0 and not learner.label_log_
    assert sorted(loop.pending.tolist()) == list(range(20)) + [60]   # still asked, nothing lost to the loop


def test_a_failed_fit_with_missing_labels_changes_nothing(flat_digits32):
    X, y = flat_digits32
    learner = logistic().fit(X[:300], partial(y[:300], np.arange(20)))
    before = (learner.estimator_, learner.labelled_idx_.copy())
    learner.set_params(estimator=LogisticRegression(max_iter=-1))
    with pytest.raises(ValueError):
        learner.fit(X[:200], partial(y[:200], np.arange(30)))
    assert learner.estimator_ is before[0] and learner.labelled_idx_.tolist() == before[1].tolist()
    assert len(learner.X_pool_) == 300
