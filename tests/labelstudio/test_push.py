"""How a push goes to Label Studio (no server: a client that records its calls and can fail)."""
import json
import os
import tempfile
from types import SimpleNamespace

import httpx
import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from skdbal import ActiveLearner
from skdbal.labelling import LabellingSession
from skdbal.labelstudio import LabelStudioSync

CONFIG = ('<View><Image name="i" value="$i"/><Choices name="c" toName="i">'
          '<Choice value="a"/><Choice value="b"/></Choices></View>')


class Client:
    """Records import_predictions and projects.update, and keeps the predictions it was given (as Label
    Studio does, across a client's restarts); fails the calls numbered in ``fail_at`` (before carrying
    them out) or in ``lost_at`` (after: the answer is lost). ``tasks.list`` answers the Data Manager's
    filter of the tasks with a prediction whose model version contains a name, as Label Studio does."""

    def __init__(self, fail_at=(), lost_at=()):
        self.calls, self.fail_at, self.lost_at, self.n = [], set(fail_at), set(lost_at), 0
        self.held = []                                   # (task, model_version) of every prediction imported
        self.projects = SimpleNamespace(get=lambda id: {"label_config": CONFIG},
                                        import_predictions=self._import, update=self._update)
        self.tasks = SimpleNamespace(list=self._list)

    def _count(self):
        self.n += 1
        if self.n in self.fail_at:
            raise httpx.ConnectError("Label Studio is restarting")

    def _lost(self):
        if self.n in self.lost_at:
            raise httpx.ReadTimeout("the answer did not come")

    def _import(self, id, request):
        self._count()
        self.calls.append(("import", [r["task"] for r in request]))
        self.held += [(r["task"], r["model_version"]) for r in request]
        self._lost()

    def _update(self, id, model_version):
        self._count()
        self.calls.append(("version", model_version))
        self._lost()

    def _list(self, project, page, page_size, fields=None, query=None):
        (name,) = json.loads(query)["filters"]["items"][0]["value"]
        versions = {}
        for task, version in self.held:
            versions.setdefault(task, []).append(version)
        found = [{"id": t, "predictions_model_versions": ",".join(v)} for t, v in sorted(versions.items())
                 if any(name in x for x in v)]                            # a substring, as Label Studio matches
        self.calls.append(("list", name))
        items = found[(page - 1) * page_size:page * page_size]
        return SimpleNamespace(items=items, response=SimpleNamespace(total=len(found)))


def sync_of(client, head=3, sampling="queue", store=None):
    store = store or os.path.join(tempfile.mkdtemp(), "s.db")
    session = LabellingSession(ActiveLearner(LogisticRegression(), random_state=0, seeding="step"), np.eye(4),
                               classes=["a", "b"], store=store, batch_size=2)
    return LabelStudioSync(session, client, project=1, head=head, sampling=sampling)


def request(n):
    return [{"task": t, "score": s, "model_version": "skdbal-v0", "result": []}
            for t, s in zip(range(100, 100 + n), np.linspace(0, 1, n))]     # worst first


def test_the_best_are_imported_first_then_the_version_switches_then_the_rest():
    client = Client()
    sync = sync_of(client)
    assert sync._send(0, "skdbal-v0", request(5)) == 5
    assert client.calls == [("list", "skdbal-v0"), ("import", [104, 103, 102]), ("version", "skdbal-v0"),
                            ("import", [101, 100])]
    assert sync.pushed_version == 0 and sync._pending is None


@pytest.mark.parametrize("fail_at, first_return", [(1, 0), (2, 3), (3, 3)])
def test_a_push_cut_by_an_outage_resumes_where_it_stopped_with_nothing_twice(fail_at, first_return):
    client = Client(fail_at={fail_at})
    sync = sync_of(client)
    assert sync._send(0, "skdbal-v0", request(5)) == first_return
    # the version is the project's once switched (call 3 is the import after the switch)
    assert sync.pushed_version == (None if fail_at < 3 else 0) and isinstance(sync.last_error, httpx.ConnectError)
    assert sync.resume_push() == 5 - first_return
    imported = [t for kind, tasks in client.calls if kind == "import" for t in tasks]
    assert [c for c in client.calls if c[0] == "list"] == [("list", "skdbal-v0")] * 2   # asked again on resuming
    assert sorted(imported) == list(range(100, 105)) and len(imported) == 5
    assert [c for c in client.calls if c[0] == "version"] == [("version", "skdbal-v0")]
    assert sync.pushed_version == 0 and sync.resume_push() == 0


def test_a_models_push_returns_once_the_head_is_in_and_a_newer_push_ends_the_older_tail(monkeypatch):
    """From the session's loop (background=True) the call returns after the head and the switch; a
    thread imports the rest a head at a time; a newer push replaces what is left of the older one."""
    import time

    monkeypatch.setattr("skdbal.labelstudio.sync._BETWEEN_IMPORTS_S", 0.2)
    client = Client()
    sync = sync_of(client)
    sync.head = 2
    assert sync._send(0, "skdbal-v0", request(7), background=True) == 2
    assert client.calls == [("list", "skdbal-v0"), ("import", [106, 105]), ("version", "skdbal-v0")]
    assert sync.pushed_version == 0
    assert sync.resume_push() == 0                     # the pulls' resume leaves the rest to its thread
    assert len(client.calls) == 3
    deadline = time.time() + 5
    while sync._pending is not None and time.time() < deadline:
        time.sleep(0.01)
    assert client.calls[3:] == [("import", [104, 103]), ("import", [102, 101]), ("import", [100])]
    client.calls.clear()
    v1 = [{**r, "model_version": "skdbal-v1"} for r in request(7)]
    assert sync._send(1, "skdbal-v1", v1, background=True) == 2           # its tail starts after 0.2 s
    v2 = [{**r, "model_version": "skdbal-v2"} for r in request(7)]
    assert sync._send(2, "skdbal-v2", v2) == 7                              # all of it, now: v1's tail ends
    time.sleep(0.5)
    assert ("version", "skdbal-v2") in client.calls and sync._pending is None
    assert [t for k, ts in client.calls if k == "import" for t in ts].count(104) == 1   # v2's only: v1's tail gone
    assert client.calls.count(("import", [106, 105])) == 2                  # each version's head


def test_a_refusal_is_not_kept_for_later():
    class Refusing(Client):
        def _import(self, id, request):
            raise type("ApiError", (Exception,), {"status_code": 400})()

    sync = sync_of(Refusing())
    with pytest.raises(Exception) as e:
        sync._send(0, "skdbal-v0", request(2))
    assert e.value.status_code == 400


def counts(client):
    found = {}
    for pair in client.held:
        found[pair] = found.get(pair, 0) + 1
    return found


@pytest.mark.parametrize("crash_at", [1, 2, 3])
def test_a_push_resumed_by_a_new_process_after_a_crash_sends_each_prediction_once(crash_at):
    """A crash mid-push (the process gone: its pending push with it), then a restart that pushes the same
    version again: only the tasks that hold no prediction of it get one; the version is set."""
    client = Client(fail_at={crash_at})
    first = sync_of(client)
    first._send(0, "skdbal-v0", request(5))               # cut at call 1 (nothing), 2 (head in) or 3 (head, version)
    held_before = len(client.held)
    assert held_before == (0 if crash_at == 1 else 3)
    again = sync_of(client)                              # a new process: nothing pending, nothing known
    assert again._send(0, "skdbal-v0", request(5)) == 5 - held_before
    assert counts(client) == {(t, "skdbal-v0"): 1 for t in range(100, 105)}
    assert client.calls[-1] == ("version", "skdbal-v0") or ("version", "skdbal-v0") in client.calls
    assert again.pushed_version == 0


def test_a_restart_after_a_whole_push_sends_nothing_but_sets_the_version_again():
    client = Client()
    sync_of(client)._send(0, "skdbal-v0", request(5))
    client.calls.clear()
    assert sync_of(client)._send(0, "skdbal-v0", request(5)) == 0
    assert client.calls == [("list", "skdbal-v0"), ("version", "skdbal-v0")]
    assert len(client.held) == 5


def test_an_import_carried_out_whose_answer_was_lost_is_not_sent_again():
    """Call 2 (the head, tasks 104..102) reaches Label Studio but its answer is lost: the resumed push asks
    which tasks hold the version, and sends the two others only."""
    client = Client(lost_at={1})
    sync = sync_of(client)
    assert sync._send(0, "skdbal-v0", request(5)) == 0
    assert sync.resume_push() == 2
    assert counts(client) == {(t, "skdbal-v0"): 1 for t in range(100, 105)}


def test_another_version_whose_name_contains_this_one_does_not_count():
    """Label Studio's filter matches a substring: skdbal-v10 is found for skdbal-v1; the exact check
    passes it over, and every task gets its skdbal-v1."""
    client = Client()
    client.held = [(100, "skdbal-v10"), (101, "skdbal-v1")]
    sync = sync_of(client)
    req = [{**r, "model_version": "skdbal-v1"} for r in request(3)]
    assert sync._send(1, "skdbal-v1", req) == 2
    assert counts(client) == {(100, "skdbal-v10"): 1, (100, "skdbal-v1"): 1, (101, "skdbal-v1"): 1,
                              (102, "skdbal-v1"): 1}


def test_uncertainty_sampling_sends_the_lowest_score_first():
    client = Client()
    sync = sync_of(client, sampling="uncertainty")
    assert sync._send(0, "skdbal-v0", request(5)) == 5
    assert client.calls[1:] == [("import", [100, 101, 102]), ("version", "skdbal-v0"), ("import", [103, 104])]


def test_uncertainty_sampling_scores_the_cold_start_order_lowest_first_and_the_best_item_lowest():
    client = Client()
    sync = sync_of(client, sampling="uncertainty", head=10)
    sync._task_of = {i: 100 + i for i in range(4)}
    sent = []
    client.projects.import_predictions = lambda id, request: sent.extend(request)
    sync.push_first_batch([2, 0])
    # every task: the first batch as given, then the covering order (rows 1 and 3 are as far from 2 and 0:
    # the lower first); ranks 0..3 of 4 scored 1 - (1 - rank / 3), the best lowest
    assert [(r["task"], r["model_version"], r["result"]) for r in sent] == [
        (102, "skdbal-first", []), (100, "skdbal-first", []), (101, "skdbal-first", []), (103, "skdbal-first", [])]
    np.testing.assert_allclose([r["score"] for r in sent], [0.0, 1 / 3, 2 / 3, 1.0])
    assert client.calls[-1] == ("version", "skdbal-first")
    got = {}
    sync._send = lambda version, name, req, **kw: got.update(version=version, req=req) or len(req)
    guess = SimpleNamespace(predict=lambda X: np.array(["a"] * len(X)))
    sync.session = SimpleNamespace(store=sync.session.store, learner=SimpleNamespace(  # model 0: items 3, 2
        step_=0, labelled_mask_=np.array([True, True, False, False]), pool_subsample=None, estimator_=guess,
        X_pool_=np.eye(4), query=lambda n_instances, return_scores: (np.array([3, 2]), None, np.array([0.9, 0.3]))))
    assert sync.push() == 2
    assert [(r["task"], r["score"]) for r in got["req"]] == [(103, 0.0), (102, 1.0)]   # 1 - unit score


def test_a_push_never_scores_an_item_the_store_has_answered():
    """A resumed model was trained on the labels up to its own events; items labelled or skipped since
    (in Label Studio while skdbal was down, pulled before the start) are in the store, not in the
    learner's mask: the push leaves them out, so they are never at the head, nor served by /predict."""
    client = Client()
    sync = sync_of(client)
    sync._task_of = {i: 100 + i for i in range(5)}
    got = {}
    sync._send = lambda version, name, req, **kw: got.update(req=req) or len(req)
    answered = SimpleNamespace(current_labels=lambda: {3: {"label": "a"}}, skipped=lambda current=None: [1])
    guess = SimpleNamespace(predict=lambda X: np.array(["b"] * len(X)))
    sync.session = SimpleNamespace(store=answered, learner=SimpleNamespace(
        step_=0, labelled_mask_=np.array([True, False, False, False, False]), pool_subsample=None,
        estimator_=guess, X_pool_=np.eye(5),
        query=lambda n_instances, return_scores: (np.array([3, 1, 4, 2]), None, np.array([0.9, 0.7, 0.5, 0.1]))))
    assert sync.push() == 2
    assert [(r["task"], r["score"]) for r in got["req"]] == [(104, 0.5), (102, 0.0)]   # unit over all four
    assert sorted(sync.predictions) == [2, 4]


def test_an_unknown_sampling_is_refused():
    with pytest.raises(ValueError, match="sampling must be one of"):
        sync_of(Client(), sampling="lowest")


def test_before_the_first_model_every_task_is_scored_by_the_cold_start_order_and_none_answered():
    """The first push scores every task Label Studio can serve, the first batch best, then the covering
    order the session continues with, so that none is served unscored (nor by its id) after the first
    batch; a task answered already (labelled, or skipped) gets none."""
    client = Client()
    sync = sync_of(client, head=10)
    sync._task_of = {i: 100 + i for i in range(4)}
    sent = []
    client.projects.import_predictions = lambda id, request: sent.extend(request)
    sync._answered = lambda: {1}
    assert sync.push_first_batch([3]) == 3
    # from row 3 of the identity, rows 0, 1, 2 are as far: the lower first; row 1 is answered
    assert [(r["task"], r["score"]) for r in sent] == [(103, 1.0), (100, 0.5), (102, 0.0)]


def test_the_cold_start_order_is_the_covering_order_greedy_then_by_distance(monkeypatch):
    from skdbal.labelstudio import _cold_start

    X = np.array([[0.0, 0.0], [1.0, 0.0], [5.0, 0.0], [0.0, 4.0], [6.0, 0.0]])
    # greedy from row 0: row 4 (36 away), then row 3 (16 from row 0, 52 from row 4), then rows 1 and 2 (1 from
    # the nearest chosen each: the lower first)
    assert _cold_start.cold_start_order(X, [0], batch_size=1, seed=0) == [0, 4, 3, 1, 2]
    monkeypatch.setattr(_cold_start, "GREEDY_BATCHES", 1)       # one greedy pick, then by distance, farthest first
    assert _cold_start.cold_start_order(X, [0], batch_size=1, seed=0) == [0, 4, 3, 1, 2]
    # from rows 2 and 1: row 3 (17 from row 1); then rows 0 and 4 are 1 from the nearest chosen: the lower first
    assert _cold_start.cold_start_order(X, [2, 1], batch_size=1, seed=0) == [2, 1, 3, 0, 4]


def test_the_queue_tab_holds_the_unlabelled_tasks_only():
    """The tab is filtered to tasks with no annotation, done or skipped (a task labelled after a push
    left its head), sorted by the sampling's direction; a tab found without the filter gets it."""
    made, updated = [], []
    views = [{"id": 7, "data": {"title": "skdbal queue", "ordering": ["-tasks:predictions_score"]}}]
    client = Client()
    client.views = SimpleNamespace(list=lambda project: views, update=lambda id, project, data: updated.append(data),
                                   create=lambda project, data: made.append(data) or {"id": 8})
    client.projects.get = lambda id: {"label_config": CONFIG, "sampling": "Sequential sampling"}
    client.projects.update = lambda id, **kw: None
    sync = sync_of(client, sampling="uncertainty")
    unlabelled = {"conjunction": "and", "items": [      # no annotation by anyone, cancelled or not, and none counted
        {"filter": "filter:tasks:annotators", "operator": "empty", "type": "List", "value": True},
        {"filter": "filter:tasks:total_annotations", "operator": "equal", "type": "Number", "value": 0},
        {"filter": "filter:tasks:cancelled_annotations", "operator": "equal", "type": "Number", "value": 0}]}
    assert sync.queue_view() == 7
    assert updated == [{"title": "skdbal queue", "ordering": ["tasks:predictions_score"], "filters": unlabelled}]
    views.clear()
    assert sync.queue_view() == 8
    assert made[0]["filters"] == unlabelled and made[0]["ordering"] == ["tasks:predictions_score"]
