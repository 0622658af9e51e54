"""Where the audit items of a session with an audit share go among the tasks Label Studio serves."""
import os
import tempfile

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from skdbal import ActiveLearner
from skdbal.labelling import LabellingSession
from skdbal.labelling.audit_share import AuditShare
from skdbal.labelstudio._audit_order import audit_order

pytest.importorskip("label_studio_sdk", reason="the labelstudio extra (label-studio-sdk) is not installed")


def test_the_audits_due_go_in_the_head_and_a_share_of_the_rest_through_the_rest():
    # a quarter audited: S / (1 - S) = 1/3 audit for each other item. Head of 4: round(4/3) = 1 due (20),
    # at place int(5/2) = 2; the rest, 8 items, gets round(8/3) = 3 (21, 22, 23) at places int(11/3 j + 11/6)
    # = 1, 5, 9. The model had ranked reservoir item 22 first: it leaves the model's order.
    audit = AuditShare(0.25, [20, 21, 22, 23, 24])
    items = [22] + list(range(12))
    scores = [1.05] + [1.0 - i / 20 for i in range(12)]
    served, given = audit_order(audit, items, scores, labels={}, skipped=(), head=4)
    assert served == [0, 1, 20, 2, 3, 4, 21, 5, 6, 7, 22, 8, 9, 10, 23, 11]
    # an item keeps its score; an audit item gets its neighbours' mean
    np.testing.assert_allclose(given, [1.0, 0.95, 0.925, 0.9, 0.85, 0.8, 0.775, 0.75, 0.7, 0.65, 0.625, 0.6,
                                       0.55, 0.5, 0.475, 0.45])


def test_audits_answered_and_skipped_are_counted_and_the_next_in_the_reservoirs_order_come():
    # six others labelled and one audit (21) labelled, one (20) skipped: with the head's 3 items, 9 others,
    # round(9/3) - 1 = 2 due: the next unanswered in order, 22 and 23, at places int(5/4) = 1 and int(15/4) = 3.
    audit = AuditShare(0.25, [20, 21, 22, 23, 24])
    labels = {i: "a" for i in (50, 51, 52, 53, 54, 55, 21)}
    served, given = audit_order(audit, [0, 1, 2], [0.0, 0.5, 1.0], labels=labels, skipped={20}, head=3)
    assert served == [0, 22, 1, 23, 2]
    np.testing.assert_allclose(given, [0.0, 0.25, 0.5, 0.75, 1.0])         # lowest best (uncertainty sampling)


def test_no_audit_share_leaves_the_order_as_it_is():
    items, scores = [3, 1, 2], [0.9, 0.5, 0.1]
    assert audit_order(None, items, scores, {}, (), head=2) == (items, scores)
    assert audit_order(AuditShare(0.0, []), items, scores, {}, (), head=2) == (items, scores)


def test_a_sessions_first_push_serves_the_reservoir_only_as_spread_audits_in_its_order():
    """``skdbal labelstudio --audit-share``: the cold-start push's order holds the reservoir's items only
    where they are spread as audits, in the reservoir's own random order, never by the covering order."""
    from test_push import Client

    from skdbal.labelstudio import LabelStudioSync

    n = 40
    X = np.random.RandomState(0).normal(size=(n, 3))
    session = LabellingSession(ActiveLearner(LogisticRegression(), random_state=0, seeding="step"), X,
                               classes=["a", "b"], store=os.path.join(tempfile.mkdtemp(), "s.db"), batch_size=4,
                               audit_share=0.2)
    order = session.audit.order
    assert len(order) == 8                                   # a fifth of the pool set aside
    sync = LabelStudioSync(session, Client(), project=1, head=100, sampling="uncertainty")
    sync._task_of = {i: 100 + i for i in range(n)}
    sent = {}
    sync._send = lambda version, name, request, **kw: sent.update(request=request) or len(request)
    first = [i for i in range(n) if i not in session.audit.reserved][:4]
    sync.push_first_batch(first)
    served = [r["task"] - 100 for r in sorted(sent["request"], key=lambda r: r["score"])]   # lowest served first
    audits = [i for i in served if i in session.audit.reserved]
    # the head's 4 items take round(4/4) = 1 audit; the other 32 - 4 = 28 take round(28/4) = 7: all eight
    assert audits == order and len(served) == n
    assert [i for i in served if i not in session.audit.reserved][:4] == first
    assert served[:5].count(order[0]) == 1


def test_a_models_push_takes_the_reservoir_out_of_the_models_order_and_spreads_the_audits_due():
    """The model ranked reservoir item 5 best: the push serves it where its audit falls instead. Head of 3
    (the batch): round(3/3) = 1 audit due, the reservoir's first, 5, at place int(4/2) = 2; the rest, two
    items, take round(2/3) = 1, item 6, at place 1 of three."""
    from types import SimpleNamespace

    from test_push import Client, sync_of

    sync = sync_of(Client(), sampling="queue")
    sync._task_of = {i: 100 + i for i in range(7)}
    got = {}
    sync._send = lambda version, name, request, **kw: got.update(request=request) or len(request)
    store = SimpleNamespace(current_labels=lambda: {}, skipped=lambda current=None: [])
    guess = SimpleNamespace(predict=lambda X: np.array(["b"] * len(X)))
    sync.session = SimpleNamespace(store=store, batch_size=3, audit=AuditShare(0.25, [5, 6]), learner=SimpleNamespace(
        step_=0, labelled_mask_=np.zeros(7, bool), pool_subsample=None, estimator_=guess, X_pool_=np.eye(7),
        query=lambda n_instances, return_scores: (np.array([5, 0, 1, 2, 3, 4, 6]), None,
                                                  np.array([0.99, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4]))))
    assert sync.push() == 7
    request = sorted(got["request"], key=lambda r: -r["score"])              # queue: the highest served first
    assert [r["task"] - 100 for r in request] == [0, 1, 5, 2, 3, 6, 4]
    score = {r["task"] - 100: r["score"] for r in request}
    assert score[5] == pytest.approx((score[1] + score[2]) / 2) and score[6] == pytest.approx((score[3] + score[4]) / 2)
    assert sorted(sync.predictions) == list(range(7))


def test_an_audit_item_the_query_did_not_score_is_guessed_and_one_with_no_task_is_passed_over():
    """The query scored a subsample without the reservoir (``pool_subsample``), and item 6 has no task
    (``--attach`` found none): audit 5, due for the head of 3, is served with the model's own guess of
    it; 6 is passed over, so the rest gets no audit."""
    from types import SimpleNamespace

    from test_push import Client, sync_of

    sync = sync_of(Client(), sampling="uncertainty")
    sync._task_of = {i: 100 + i for i in range(6)}
    got = {}
    sync._send = lambda version, name, request, **kw: got.update(request=request) or len(request)
    store = SimpleNamespace(current_labels=lambda: {}, skipped=lambda current=None: [])
    by_row = SimpleNamespace(predict=lambda X: np.array([str(int(np.argmax(r))) for r in X]))
    sync.session = SimpleNamespace(store=store, batch_size=3, audit=AuditShare(0.25, [5, 6]), learner=SimpleNamespace(
        step_=0, labelled_mask_=np.zeros(7, bool), pool_subsample=5, estimator_=by_row, X_pool_=np.eye(7),
        query=lambda n_instances, return_scores: (np.array([0, 1, 2, 3, 4]), None,
                                                  np.array([0.9, 0.8, 0.7, 0.6, 0.5]))))
    assert sync.push() == 6
    request = sorted(got["request"], key=lambda r: r["score"])            # uncertainty: the lowest first
    assert [r["task"] - 100 for r in request] == [0, 1, 5, 2, 3, 4]
    assert {r["task"] - 100: r["result"][0]["value"]["choices"] for r in request}[5] == ["5"]
