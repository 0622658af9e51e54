"""A session's offers beyond the queried batch (issue 41): the status people read (training, what it
waits for, the strategy), a first batch of one class that never stalls, what is refused at start, and
the tail of the last query offered while the model retrains."""
import os
import threading
import time

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from skdbal import ActiveLearner
from skdbal.acquisition import max_entropy
from skdbal.labelling import LabellingSession
from skdbal.labelling._offers import TWO_CLASSES


class SlowLogistic(LogisticRegression):
    """A logistic regression whose fit waits until ``gate`` (a module-level event) opens, once a model
    exists: a retrain that lasts as long as the test wants."""

    def __init__(self, slow_after=10, max_iter=300, random_state=None):
        super().__init__(max_iter=max_iter, random_state=random_state)
        self.slow_after = slow_after

    def fit(self, X, y, sample_weight=None):
        if len(y) > self.slow_after:
            GATE.wait(30)
        return super().fit(X, y, sample_weight=sample_weight)


GATE = threading.Event()


def learner(estimator=None):
    return ActiveLearner(LogisticRegression(max_iter=300, random_state=0) if estimator is None else estimator,
                         max_entropy, random_state=0, seeding="step", verbose=False)


def entropy(X_train, y_train, X):
    P = LogisticRegression(max_iter=300, random_state=0).fit(X_train, y_train).predict_proba(X)
    return -(P * np.log(np.maximum(P, 1e-300))).sum(axis=1)


def wait_until(condition, timeout=30):
    deadline = time.time() + timeout
    while not condition():
        assert time.time() < deadline, "timed out"
        time.sleep(0.01)


# ------------------------------------------------------------------ refused at start
@pytest.mark.parametrize("classes, message", [(["cat"], r"at least two distinct classes.*\['cat'\]"),
                                              ([], r"at least two distinct classes.*\[\]"),
                                              (["a", "a"], "distinct as text")])
def test_fewer_than_two_classes_are_refused_before_the_store_is_written(classes, message, flat_digits, tmp_path):
    X, _ = flat_digits
    with pytest.raises(ValueError, match=message):
        LabellingSession(learner(), X[:60], classes=classes, store=tmp_path / "s.db", batch_size=10)
    assert not os.path.exists(tmp_path / "s.db")


@pytest.mark.parametrize("batch_size", [60, 61, 1000])
def test_a_batch_of_the_whole_pool_is_refused_before_the_store_is_written(batch_size, flat_digits, tmp_path):
    X, _ = flat_digits
    with pytest.raises(ValueError, match=f"batch_size={batch_size} is at least the pool's 60 items"):
        LabellingSession(learner(), X[:60], classes=["zero", "one"], store=tmp_path / "s.db", batch_size=batch_size)
    assert not os.path.exists(tmp_path / "s.db")
    with pytest.raises(ValueError, match="batch_size must be an int >= 1; got 0"):
        LabellingSession(learner(), X[:60], classes=["zero", "one"], store=tmp_path / "s.db", batch_size=0)


# ------------------------------------------------------------------ a first batch of one class
def farthest_first(X, chosen, k):
    """The next k rows farthest from every chosen row (lower row on ties), written out again here."""
    chosen = list(chosen)
    out = []
    for _ in range(k):
        d = np.min(((X[:, None, :] - X[None, chosen + out, :]) ** 2).sum(axis=2), axis=1)
        d[chosen + out] = -1
        out.append(int(np.argmax(d)))
    return out


def test_a_first_batch_of_one_class_offers_more_items_until_two_classes_then_trains(flat_digits, tmp_path):
    """The issue's case: 57 zeros and 3 ones, a first batch of 10 zeros, 9 labelled and one skipped.
    Before, the session stalled: model_version -1, nothing pending, and next_batch answered [] for ever."""
    X, y = flat_digits
    zeros, ones = np.flatnonzero(y == 0)[:57], np.flatnonzero(y == 1)[:3]
    X_pool = X[np.concatenate([zeros, ones])]
    y_pool = np.array(["zero"] * 57 + ["one"] * 3)
    with LabellingSession(learner(), X_pool, classes=["zero", "one"], store=tmp_path / "s.db", batch_size=10,
                          initial=np.arange(10), second_looks=None) as s:
        first = s.next_batch("ann", timeout=10)
        assert [b["item"] for b in first] == list(range(10))
        for b in first[:9]:
            s.submit(b["item"], "zero", annotator="ann")
        s.skip(first[9]["item"], annotator="ann")
        wait_until(lambda: s.status()["waiting_for"] is not None)
        status = s.status()
        assert status["waiting_for"] == TWO_CLASSES == "labels of at least two classes"
        assert status["model_version"] == -1 and status["pending"] == [] and status["training"] is False
        more = s.next_batch("ann", timeout=10)
        # the next 10 of a covering order: farthest first from the 10 offered
        assert [b["item"] for b in more] == farthest_first(X_pool, range(10), 10)
        assert all(b["tail"] and np.isnan(b["score"]) for b in more)
        assert {57, 58} <= {b["item"] for b in more}      # two of the ones, far from every zero, come first
        tail = [q for q in s.store.queries() if q["kind"] == "tail"]
        assert len(tail) == 1 and [i for i, _ in tail[0]["scores"]] == [b["item"] for b in more]
        assert tail[0]["model_version"] is None
        items = [b["item"] for b in more]
        first_one = min(items.index(57), items.index(58))
        for i in items[:first_one + 1]:      # zeros, then the first one
            s.submit(i, str(y_pool[i]), annotator="ann")
        s.wait_for_version(0, timeout=30)
        # the model trains at once, on the 9 zeros of the first batch and the tail's labels up to the one
        assert s.store.models()[0]["n_labels"] == 9 + first_one + 1
        assert sorted(s.learner.labelled_idx_.tolist()) == sorted(list(range(9)) + items[:first_one + 1])
        assert s.status()["waiting_for"] is None


def test_a_first_batch_of_one_class_with_no_second_class_anywhere_keeps_offering(flat_digits, tmp_path):
    """Each time the items offered run out with one class only, the next ones of the covering order come."""
    X, _ = flat_digits
    with LabellingSession(learner(), X[:30], classes=["a", "b"], store=tmp_path / "s.db", batch_size=5,
                          initial=np.arange(5), second_looks=None) as s:
        offered = []
        for _ in range(4):
            batch = s.next_batch("ann", timeout=10)
            assert len(batch) == 5
            offered += [b["item"] for b in batch]
            for b in batch:
                s.submit(b["item"], "a", annotator="ann")
        assert offered[:5] == list(range(5)) and offered[5:] == farthest_first(X[:30], range(5), 15)
        assert s.status()["waiting_for"] == TWO_CLASSES and s.status()["model_version"] == -1


# ------------------------------------------------------------------ status
def test_status_says_the_strategy_and_whether_the_model_trains(flat_digits, tmp_path):
    X, y = flat_digits
    GATE.clear()
    est = SlowLogistic(slow_after=10, random_state=0)
    with LabellingSession(learner(est), X[:300], classes=range(10), store=tmp_path / "s.db", batch_size=10,
                          second_looks=None) as s:
        status = s.status()
        assert status["strategy"] == "max_entropy" and status["waiting_for"] is None
        assert status["training"] is False
        for b in s.next_batch("ann", timeout=10):
            s.submit(b["item"], int(y[b["item"]]), annotator="ann")
        s.wait_for_version(0, timeout=30)
        wait_until(lambda: len(s.status()["pending"]) == 10)
        assert s.status()["training"] is False            # model 0 trained, its batch offered
        for b in s.next_batch("ann", timeout=10):
            s.submit(b["item"], int(y[b["item"]]), annotator="ann")
        wait_until(lambda: s.status()["training"])         # the retrain on 20 labels waits on the gate
        assert s.status()["model_version"] == 0
        GATE.set()
        s.wait_for_version(1, timeout=30)
        wait_until(lambda: not s.status()["training"])
        assert len(s.status()["pending"]) == 10


def test_the_strategy_is_named_as_the_page_shows_it(flat_digits, tmp_path):
    X, _ = flat_digits
    s = LabellingSession(ActiveLearner(LogisticRegression(), random_state=0, seeding="step"), X[:40],
                         classes=[0, 1], store=tmp_path / "s.db", batch_size=5)
    assert s.status()["strategy"] == "bald"          # the learner's default
    s2 = LabellingSession(ActiveLearner(LogisticRegression(), lambda model, X, n: np.arange(n), random_state=0,
                                        seeding="step"), X[:40], classes=[0, 1], store=tmp_path / "t.db",
                          batch_size=5)
    assert s2.status()["strategy"] == "<lambda>"


# ------------------------------------------------------------------ the tail
def test_a_batch_labelled_before_the_retrain_ends_is_followed_by_the_next_best_items(flat_digits, tmp_path):
    X, y = flat_digits
    X, y = X[:300], y[:300]
    GATE.clear()
    est = SlowLogistic(slow_after=10, random_state=0)
    try:
        with LabellingSession(learner(est), X, classes=range(10), store=tmp_path / "s.db", batch_size=10,
                              second_looks=None) as s:
            first = [b["item"] for b in s.next_batch("ann", timeout=10)]
            for i in first:
                s.submit(i, int(y[i]), annotator="ann")
            s.wait_for_version(0, timeout=30)
            wait_until(lambda: any(q["kind"] == "batch" and q["model_version"] == 0 for q in s.store.queries()))
            batch = s.next_batch("ann", timeout=10)
            for b in batch:
                s.submit(b["item"], int(y[b["item"]]), annotator="ann")
            t0 = time.time()
            tail = s.next_batch("ann", timeout=10)          # the retrain waits on the gate: nobody waits for it
            assert time.time() - t0 < 2 and s.status()["training"] and s.status()["model_version"] == 0
            # the second query: max entropy under model 0, ranks 11 to 20 of the unlabelled rows
            H = entropy(X[first], y[first], X)
            H[first] = -np.inf
            ranking = np.argsort(-H, kind="stable")
            assert [b["item"] for b in batch] == ranking[:10].tolist()
            assert [b["item"] for b in tail] == ranking[10:20].tolist()
            assert all(b["tail"] for b in tail) and not any(b["tail"] for b in batch)
            assert max(b["score"] for b in tail) <= min(b["score"] for b in batch)
            np.testing.assert_allclose([b["score"] for b in tail], H[ranking[10:20]], rtol=1e-6)
            queries = s.store.queries()
            assert [q["kind"] for q in queries] == ["batch", "batch", "tail"]
            assert queries[2]["model_version"] == 0
            assert [i for i, _ in queries[2]["scores"]] == ranking[10:20].tolist()
            np.testing.assert_allclose([v for _, v in queries[2]["scores"]], H[ranking[10:20]], rtol=1e-6)
            assert s.next_batch("bob", timeout=0) == []      # one tail per retrain, all of it held by ann
            for b in tail[:4]:
                s.submit(b["item"], int(y[b["item"]]), annotator="ann")
            GATE.set()
            s.wait_for_version(1, timeout=30)
            assert s.store.models()[1]["n_labels"] == 20
            # labels on the tail count as any other: the next query leaves them out (and the tail's items
            # still held), and the next model is trained on them
            wait_until(lambda: sum(q["kind"] == "batch" for q in s.store.queries()) == 3)
            third = [q for q in s.store.queries() if q["kind"] == "batch"][2]
            assert not {i for i, _ in third["scores"]} & {b["item"] for b in tail}
            assert not s.status()["training"]   # 4 labels since model 1: not yet a retrain's worth
            held = {b["item"] for b in tail}
            fresh = [b["item"] for b in s.next_batch("ann", timeout=10) if b["item"] not in held]
            for i in fresh[:6]:              # with the 4 on the tail: a retrain's worth (retrain_after=10)
                s.submit(i, int(y[i]), annotator="ann")
            s.wait_for_version(2, timeout=30)
            assert s.store.models()[2]["n_labels"] == 30
            assert {b["item"] for b in tail[:4]} <= set(s.learner.labelled_idx_.tolist())
    finally:
        GATE.set()


def test_a_store_of_schema_version_2_gains_the_kind_of_its_queries(tmp_path):
    import sqlite3

    from skdbal.labelling import LabelStore

    path = tmp_path / "v2.db"
    store = LabelStore(path)
    store.add_items(["a", "b", "c"])
    store.add_query(0, {2: 0.5, 1: 0.25})
    store.close()
    conn = sqlite3.connect(path)             # make it what schema version 2 wrote
    conn.execute("ALTER TABLE queries DROP COLUMN kind")
    conn.execute("PRAGMA user_version=2")
    conn.commit()
    conn.close()
    store = LabelStore(path)
    assert [(q["kind"], q["scores"]) for q in store.queries()] == [("batch", [(2, 0.5), (1, 0.25)])]
    store.add_query(0, {0: 0.125}, kind="tail")
    assert [q["kind"] for q in store.queries()] == ["batch", "tail"]
    with pytest.raises(ValueError, match="'batch' or 'tail'; got 'second'"):
        store.add_query(0, {0: 0.1}, kind="second")
    assert len(store.queries()) == 2
    store.close()
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 3


def test_an_annotator_waiting_in_next_batch_gets_the_tail_the_moment_the_batch_is_done(flat_digits, tmp_path):
    """The long poll answers as soon as work exists: a request already waiting when the batch's last label
    comes gets the tail at once, not after the retrain (before, it waited for the retrain and the query)."""
    X, y = flat_digits
    X, y = X[:300], y[:300]
    GATE.clear()
    try:
        with LabellingSession(learner(SlowLogistic(slow_after=10, random_state=0)), X, classes=range(10),
                              store=tmp_path / "s.db", batch_size=10, second_looks=None) as s:
            for b in s.next_batch("ann", timeout=10):
                s.submit(b["item"], int(y[b["item"]]), annotator="ann")
            s.wait_for_version(0, timeout=30)
            wait_until(lambda: any(q["kind"] == "batch" and q["model_version"] == 0 for q in s.store.queries()))
            wait_until(lambda: s.board.tail_ready is not None)      # the second query is ready
            batch = s.next_batch("ann", timeout=10)
            for b in batch[:-1]:
                s.submit(b["item"], int(y[b["item"]]), annotator="ann")
            got = {}

            def wait():
                got["items"] = s.next_batch("bob", timeout=20)
                got["at"] = time.time()

            waiter = threading.Thread(target=wait)
            waiter.start()
            time.sleep(0.3)                                    # bob waits: ann holds the last item
            assert "items" not in got
            done = time.time()
            s.submit(batch[-1]["item"], int(y[batch[-1]["item"]]), annotator="ann")
            waiter.join(25)
            assert len(got["items"]) == 10 and all(b["tail"] for b in got["items"])
            assert got["at"] - done < 0.5 and s.status()["training"] and s.status()["model_version"] == 0
            GATE.set()                                         # the retrain ends before the session stops
    finally:
        GATE.set()


def test_guesses_of_the_tail_never_wait_for_the_retrain(flat_digits, tmp_path):
    """The page asks for the model's guess of every item it shows; the tail is shown during a retrain,
    when a seeded network holds the lock on torch's generator for its whole fit. Its guesses were made
    by the loop with the second query, so they are answered at once (before, they waited for the fit)."""
    from skdbal import MCDropoutClassifier
    from skdbal.models import MLP
    from skdbal.models._mc_masks import _SHARED_STATE_LOCK

    X, y = flat_digits
    X = X[:300].astype(np.float32)
    net = MCDropoutClassifier(MLP, module__hidden_layer_sizes=(16,), classes=list(range(10)), max_epochs=2,
                              random_state=0, train_split=None, verbose=0)
    s = LabellingSession(ActiveLearner(net, max_entropy, random_state=0, seeding="step", verbose=False), X,
                         classes=range(10), store=tmp_path / "s.db", batch_size=10, second_looks=None)
    with s:
        for b in s.next_batch("ann", timeout=10):
            s.submit(b["item"], int(y[b["item"]]), annotator="ann")
        s.wait_for_version(0, timeout=60)
        wait_until(lambda: s.board.tail_ready is not None, timeout=60)
        tail = s.board.tail_ready
        expected = [str(g) for g in s.board.published[1].predict(X[tail])]
        held, release, out = threading.Event(), threading.Event(), {}

        def train():  # what a seeded fit does for its whole length
            with _SHARED_STATE_LOCK:
                held.set()
                release.wait(20)

        trainer = threading.Thread(target=train)
        trainer.start()
        try:
            assert held.wait(10)
            asker = threading.Thread(target=lambda: out.update(guesses=s.guesses(tail)))
            asker.start()
            asker.join(5)
            assert not asker.is_alive(), "the tail's guesses waited for the retrain"
            assert out["guesses"] == expected
        finally:
            release.set()
            trainer.join(10)
            asker.join(10)
    s.store.close()
