"""The labelling session: the one loop with people (here, code acting as people) as the oracle."""
import time

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from skdbal import ActiveLearner
from skdbal.acquisition import max_entropy
from skdbal.labelling import LabellingSession, LabelStore


def learner():
    return ActiveLearner(LogisticRegression(max_iter=300, random_state=0), max_entropy, random_state=0,
                         seeding="step", verbose=False)


def session_of(X, y, path, **kw):
    return LabellingSession(learner(), X[:300], classes=range(10), store=path, batch_size=10,
                            X_test=X[1000:1200], y_test=y[1000:1200], **kw)


def label_all(session, y, annotator="ann", timeout=10):
    batch = session.next_batch(annotator=annotator, timeout=timeout)
    for item in batch:
        session.submit(item["item"], int(y[item["item"]]), annotator=annotator)
    return batch


def test_people_label_batches_and_the_model_follows(flat_digits, tmp_path):
    X, y = flat_digits
    with session_of(X, y, tmp_path / "s.db") as s:
        first = label_all(s, y)
        assert len(first) == 10 and all(np.isnan(b["score"]) for b in first)   # no model yet: no scores
        s.wait_for_version(0, timeout=30)
        second = label_all(s, y)
        assert len(second) == 10 and not {b["item"] for b in first} & {b["item"] for b in second}
        # the second batch is the max-entropy top 10 of the unlabelled rows under model 0, with its scores
        P = LogisticRegression(max_iter=300, random_state=0).fit(X[:300][[b["item"] for b in first]],
                                                                 y[[b["item"] for b in first]]).predict_proba(X[:300])
        H = -(P * np.log(np.maximum(P, 1e-300))).sum(axis=1)
        H[[b["item"] for b in first]] = -np.inf
        assert sorted(b["item"] for b in second) == sorted(np.argsort(-H)[:10].tolist())
        np.testing.assert_allclose(sorted(b["score"] for b in second), sorted(H[np.argsort(-H)[:10]]), rtol=1e-6)
        s.wait_for_version(1, timeout=30)
        deadline = time.time() + 30                 # the next batch is queried just after the retrain
        while not s.status()["pending"] and time.time() < deadline:
            time.sleep(0.02)
        status = s.status()
        assert status["labelled"] == 20 and status["model_version"] == 1 and len(status["pending"]) == 10
        assert {r["item"]: r["label"] for r in s.labels()} == {i: int(y[i]) for i in
                                                               [b["item"] for b in first + second]}
        models = s.store.models()
        assert [m["n_labels"] for m in models] == [10, 20] and 0 < models[1]["metrics"]["accuracy"] <= 1
        assert len(s.learner.y_training_) == 20


def test_skip_undo_and_bad_input(flat_digits, tmp_path):
    X, y = flat_digits
    with session_of(X, y, tmp_path / "s.db") as s:
        batch = s.next_batch(annotator="ann", timeout=10)
        items = [b["item"] for b in batch]
        s.skip(items[0], annotator="ann")
        s.submit(items[1], (int(y[items[1]]) + 1) % 10, annotator="ann")   # a mistake ...
        s.undo(items[1], annotator="ann")                                  # ... undone
        n_events = len(s.store.events())
        with pytest.raises(ValueError, match="unknown class 'cat'"):
            s.submit(items[2], "cat")
        with pytest.raises(ValueError, match=r"unknown item 300"):
            s.submit(300, 1)
        with pytest.raises(ValueError, match="unknown item"):
            s.skip("../../etc/passwd")
        assert len(s.store.events()) == n_events          # nothing recorded
        assert items[0] not in [b["item"] for b in s.next_batch(annotator="bob")]  # skipped: not offered again
        for i in items[1:]:
            s.submit(i, int(y[i]), annotator="ann")
        s.wait_for_version(0, timeout=30)
        assert {r["item"]: r["label"] for r in s.labels()} == {i: int(y[i]) for i in items[1:]}
        # model 0 saw the labels that had come (at least retrain_after=10 events), never the undone mistake
        mask = s.learner.labelled_mask_
        assert not mask[items[0]] and mask[items[1:]].sum() >= 8
        np.testing.assert_array_equal(s.learner.y_training_, y[s.learner.labelled_idx_])


def test_a_restart_resumes_with_the_same_labels_model_and_pending_batch(flat_digits, tmp_path):
    X, y = flat_digits
    path = tmp_path / "s.db"
    s = session_of(X, y, path).start()
    label_all(s, y)
    s.wait_for_version(0, timeout=30)
    second = s.next_batch(annotator="ann", timeout=10)
    for b in second[:4]:                               # four labels of the batch, then the process stops
        s.submit(b["item"], int(y[b["item"]]), annotator="ann")
    proba = s.learner.predict_proba(X[1000:1010])
    s.stop()
    s.store.close()

    r = session_of(X, y, path).start()
    try:
        r.wait_for_version(0, timeout=30)
        np.testing.assert_allclose(r.learner.predict_proba(X[1000:1010]), proba)   # the same model 0
        again = r.next_batch(annotator="ann", timeout=10)                # the same pending batch, less the 4
        assert [b["item"] for b in again] == [b["item"] for b in second[4:]]
        for b in again:
            r.submit(b["item"], int(y[b["item"]]), annotator="ann")
        r.wait_for_version(1, timeout=30)
        assert r.status()["labelled"] == 20 and len(r.learner.y_training_) == 20
    finally:
        r.stop()


def test_a_session_refuses_a_store_of_another_project(flat_digits, tmp_path):
    X, y = flat_digits
    path = tmp_path / "s.db"
    session_of(X, y, path).store.close()
    with pytest.raises(ValueError, match="another configuration"):
        LabellingSession(learner(), X[:300], classes=["cat", "dog"], store=path)
    assert LabelStore(path).config()["classes"] == [str(c) for c in range(10)]


def test_items_a_batch_left_unanswered_are_offered_with_the_next(flat_digits, tmp_path):
    """A retrain after 3 of 6 labels: the next batch is the new picks, then the 3 left unanswered
    (the loop keeps them out of its queries, so they must stay on offer)."""
    X, y = flat_digits
    s = LabellingSession(learner(), X[:200], classes=range(10), store=tmp_path / "s.db", batch_size=6,
                         retrain_after=3, initial=[0, 1, 2, 3, 4, 5]).start()
    try:
        for i in (0, 1, 2):
            s.submit(i, int(y[i]), annotator="a")
        s.wait_for_version(0, timeout=30)
        deadline = time.time() + 30
        while len(s.store.queries()) < 2 and time.time() < deadline:
            time.sleep(0.02)
        new = [i for i, _ in s.store.queries()[-1]["scores"]]
        assert len(new) == 6 and not {0, 1, 2, 3, 4, 5} & set(new)
        assert [b["item"] for b in s.next_batch(annotator="b", n=100)] == new + [3, 4, 5]
        assert s.status()["pending"] == new + [3, 4, 5]
    finally:
        s.stop()


def test_an_undo_takes_back_the_annotators_own_label_only(flat_digits, tmp_path):
    X, y = flat_digits
    store = LabellingSession(learner(), X[:50], classes=range(10), store=tmp_path / "s.db").store
    store.add_event(0, "label", "3", annotator="ann")
    store.add_event(0, "label", "5", annotator="bob")
    store.add_event(0, "undo", annotator="ann")                      # ann's 3, not bob's 5
    assert store.current_labels()[0]["label"] == "5"
    with pytest.raises(ValueError, match="item 0 has no label to undo by 'ann'"):
        store.add_event(0, "undo", annotator="ann")
    store.add_event(0, "undo", annotator="bob")
    assert 0 not in store.current_labels()


def test_a_restart_with_another_learner_repr_or_batch_size_resumes(flat_digits, tmp_path):
    """What the labels mean (classes, items) must match; how the session runs (a learner whose repr
    holds a function's address, the batch size, second looks) may change between runs."""
    X, y = flat_digits
    path = tmp_path / "s.db"
    LabellingSession(learner(), X[:300], classes=range(10), store=path, batch_size=10).store.close()
    other = ActiveLearner(LogisticRegression(max_iter=300, random_state=0), lambda *a, **k: None, random_state=0,
                          seeding="step")
    s = LabellingSession(other, X[:300], classes=range(10), store=path, batch_size=20, second_looks=None)
    assert s.store.config()["batch_size"] == 10                      # the first configuration is kept
    with pytest.raises(ValueError, match=r"fields \['classes'\] differ"):
        LabellingSession(learner(), X[:300], classes=range(9), store=path)


def test_people_read_the_published_model_and_its_version_as_one_pair(flat_digits, tmp_path):
    """Guesses and downloads read the (version, model) pair the loop published after training, never the
    learner that the loop changes meanwhile: here the learner is caught between setting its new model and
    its version, and people still get model 0 with version 0. A model retrained in place is published
    as a copy, which the next training does not touch; a restart publishes the model it resumes."""
    import io

    from sklearn.base import clone

    from skdbal import MCDropoutClassifier
    from skdbal.models import MLP

    X, y = flat_digits
    net = MCDropoutClassifier(MLP, module__hidden_layer_sizes=(16,), classes=list(range(10)), max_epochs=2,
                              random_state=0, train_split=None, verbose=0)
    for retrain in ("scratch", "warm"):
        lrn = ActiveLearner(clone(net).set_params(warm_start=retrain == "warm"), max_entropy, random_state=0,
                            seeding="step", retrain=retrain, verbose=False)
        path = tmp_path / f"{retrain}.db"
        s = LabellingSession(lrn, X[:300].astype(np.float32), classes=range(10), store=path, batch_size=10)
        with s:
            label_all(s, y)
            s.wait_for_version(0, timeout=60)
            version, model = s.board.published
            assert version == 0 and (model is s.learner.estimator_) == (retrain == "scratch")
            items = list(range(20))
            before = s.guesses(items)
            other = MCDropoutClassifier(MLP, module__hidden_layer_sizes=(16,), classes=list(range(10)), max_epochs=1,
                                        random_state=5, train_split=None, verbose=0)
            other.fit(X[300:400].astype(np.float32), y[300:400])
            real, s.learner.estimator_ = s.learner.estimator_, other   # the learner mid-commit: model 1, version 0
            try:
                assert s.guesses(items) == before
                buf = io.BytesIO()
                assert s.save_model(buf) == 0
                saved = {k: v.clone() for k, v in model.module_.state_dict().items() if hasattr(v, "clone")}
                buf.seek(0)
                loaded = MCDropoutClassifier(MLP, module__hidden_layer_sizes=(16,),
                                             classes=list(range(10))).initialize()
                loaded.load_params(f_params=buf)
                assert all(np.array_equal(loaded.module_.state_dict()[k].numpy(), v.numpy()) for k, v in saved.items())
            finally:
                s.learner.estimator_ = real
            if retrain == "warm":  # the next training changes the learner's model in place, not the published copy
                label_all(s, y)
                s.wait_for_version(1, timeout=60)
                assert s.board.published[0] == 1 and s.board.published[1] is not s.learner.estimator_
                assert all(np.array_equal(model.module_.state_dict()[k].numpy(), v.numpy())
                           for k, v in saved.items())
        s.store.close()
    r = LabellingSession(ActiveLearner(net, max_entropy, random_state=0, seeding="step", verbose=False),
                         X[:300].astype(np.float32), classes=range(10), store=tmp_path / "scratch.db", batch_size=10)
    with r:
        r.wait_for_version(0, timeout=60)
        assert r.board.published[0] == 0 and r.guesses([0, 1]) == [str(p) for p in r.learner.predict(X[:2])]
    r.store.close()


def test_guesses_of_what_people_are_offered_never_wait_for_a_retrain(flat_digits, tmp_path):
    """A seeded fit holds the lock on torch's generator and its network's own lock for its whole length; the
    guesses of the batch were made by the loop when it queried it, so a request for them during a retrain
    (here the locks held by another thread, as a training holds them) is answered at once, with the same
    guesses. Since issue 43 a guess made on demand (an item nobody is offered) does not wait either: the
    published network has its own lock, and its row-keyed sampler does not use torch's generator."""
    import threading

    from skdbal import MCDropoutClassifier
    from skdbal.models import MLP
    from skdbal.models._mc_masks import _SHARED_STATE_LOCK, module_lock

    X, y = flat_digits
    net = MCDropoutClassifier(MLP, module__hidden_layer_sizes=(16,), classes=list(range(10)), max_epochs=2,
                              random_state=0, train_split=None, verbose=0)
    s = LabellingSession(ActiveLearner(net, max_entropy, random_state=0, seeding="step", verbose=False),
                         X[:300].astype(np.float32), classes=range(10), store=tmp_path / "s.db", batch_size=10)
    with s:
        label_all(s, y)
        s.wait_for_version(0, timeout=60)
        batch = [b["item"] for b in s.next_batch(annotator="ann", timeout=10)]
        expected = [str(g) for g in s.board.published[1].predict(X[batch].astype(np.float32))]
        held, release, out = threading.Event(), threading.Event(), {}

        training = MLP(n_features=64, n_classes=10)  # a retrain from scratch fits a clone: a module of its own

        def train():  # what a seeded fit holds for its whole length
            with _SHARED_STATE_LOCK, module_lock(training):
                held.set()
                release.wait(20)

        trainer = threading.Thread(target=train)
        trainer.start()
        try:
            assert held.wait(10)
            asker = threading.Thread(target=lambda: out.update(guesses=s.guesses(batch)))
            asker.start()
            asker.join(5)
            assert not asker.is_alive(), "the guesses waited for the retrain"
            assert out["guesses"] == expected
            other = next(i for i in range(300) if i not in batch and i not in s.learner.labelled_idx_)
            late = threading.Thread(target=lambda: out.update(other=s.guesses([other])))
            late.start()
            late.join(5)
            assert not late.is_alive(), "a guess made on demand waited for the retrain"
        finally:
            release.set()
            trainer.join(10)
        late.join(10)
        assert out["other"] == [str(s.board.published[1].predict(X[[other]].astype(np.float32))[0])]
    s.store.close()


def test_an_undo_then_a_new_label_of_the_same_item_counts_once_towards_the_retrain(flat_digits, tmp_path):
    # batch_size=10, retrain_after=10 (a batch): model 0 after the first 10 labels; then 9 of the second
    # batch labelled, the 9th undone and labelled again: 11 label and undo events, 9 new labels, so no
    # retrain (the tenth item is still waiting); the tenth label makes 10, and model 1 trains on 20 labels.
    X, y = flat_digits
    with session_of(X, y, tmp_path / "s.db", second_looks=None) as s:
        assert (s.batch_size, s.retrain_after) == (10, 10)
        label_all(s, y)
        s.wait_for_version(0, timeout=30)
        second = [b["item"] for b in s.next_batch(annotator="ann", timeout=10)]
        assert len(second) == 10
        for i in second[:9]:
            s.submit(i, int(y[i]), annotator="ann")
        s.undo(second[8], annotator="ann")
        s.submit(second[8], int(y[second[8]]), annotator="ann")
        time.sleep(1.5)              # model 0 fits in milliseconds: a retrain counted 11 would have started
        assert not s.status()["training"] and s.status()["model_version"] == 0
        assert [m["n_labels"] for m in s.store.models()] == [10]
        s.submit(second[9], int(y[second[9]]), annotator="ann")
        s.wait_for_version(1, timeout=30)
        assert [m["n_labels"] for m in s.store.models()] == [10, 20]


def test_a_label_taken_back_leaves_its_item_waiting(flat_digits, tmp_path):
    # the second batch's first label undone, then the other 9 labelled: 9 labels, one item waiting, no retrain
    X, y = flat_digits
    with session_of(X, y, tmp_path / "s.db", second_looks=None) as s:
        label_all(s, y)
        s.wait_for_version(0, timeout=30)
        second = [b["item"] for b in s.next_batch(annotator="ann", timeout=10)]
        s.submit(second[0], int(y[second[0]]), annotator="ann")
        s.undo(second[0], annotator="ann")
        for i in second[1:]:
            s.submit(i, int(y[i]), annotator="ann")
        time.sleep(1.5)
        assert s.status()["model_version"] == 0 and s.status()["pending"] == [second[0]]
        s.submit(second[0], int(y[second[0]]), annotator="ann")
        s.wait_for_version(1, timeout=30)
        assert [m["n_labels"] for m in s.store.models()] == [10, 20]
