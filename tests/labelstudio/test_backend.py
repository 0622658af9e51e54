"""skdbal as a Label Studio ML backend, without a server: Starlette's TestClient against a real session
on digits, and a stand-in for the Label Studio client that holds the tasks and their annotations."""
import copy
import json
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("starlette")
from _helpers import digits_flat  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

from skdbal import ActiveLearner  # noqa: E402
from skdbal.acquisition import max_entropy  # noqa: E402
from skdbal.labelling import LabellingSession  # noqa: E402
from skdbal.labelstudio import LabelStudioSync  # noqa: E402
from skdbal.labelstudio.backend import backend_app  # noqa: E402

CONFIG = ('<View><Image name="image" value="$image"/><Choices name="digit" toName="image" choice="single">'
          + "".join(f'<Choice value="{c}"/>' for c in range(10)) + "</Choices></View>")
N = 60
#: Label Studio on this machine calls the backend by this address (a loopback name: the Host passes).
LOCAL = "http://127.0.0.1:9090"


class FakeLabelStudio:
    """Tasks 1000 + i (item i's key in ``skdbal_key``) with their annotations; records the pushes."""

    def __init__(self, keys):
        self.tasks = {1000 + i: {"id": 1000 + i, "data": {"skdbal_key": k}, "annotations": []}
                      for i, k in enumerate(keys)}
        self.pushed, self.versions, self.reads = [], [], []
        self.listed = []     # the ids of each list of tasks by id (the webhooks' reads of several at once)
        self.lag = set()     # tasks whose reads do not show their newest annotation yet (a commit to come)
        self.projects = SimpleNamespace(get=lambda id: {"label_config": CONFIG}, import_predictions=self._import,
                                        update=lambda id, model_version: self.versions.append(model_version))
        self.tasks_api = SimpleNamespace(get=self._get, list=self._list)

    def _import(self, id, request):
        self.pushed.extend(request)

    def _get(self, id, request_options=None):
        self.reads.append(id)
        task = copy.deepcopy(self.tasks[id])
        for a in task["annotations"]:       # a task read alone names the annotator in full, as Label Studio's
            a["completed_by"] = {"id": a["completed_by"], "email": "annotator@example.org"}
        if id in self.lag:                  # this read comes before the commit; the next one after it
            self.lag.discard(id)
            task["annotations"] = task["annotations"][:-1]
        return task

    def _list(self, project, page, page_size, **params):
        tasks = list(self.tasks.values())
        selected = json.loads(params.get("query") or "{}").get("selectedItems") or {"all": True}
        if not selected["all"]:             # the Data Manager's query of some tasks by id, as Label Studio's
            self.listed.append(sorted(selected["included"]))
            tasks = [t for t in tasks if t["id"] in selected["included"]]
        part = copy.deepcopy(tasks[(page - 1) * page_size:page * page_size])
        return SimpleNamespace(items=part, response=SimpleNamespace(total=len(tasks)))

    def annotate(self, task, label, annotation, updated_at="2026-01-01T00:00:00Z"):
        a = {"id": annotation, "task": task, "completed_by": 1, "was_cancelled": False, "updated_at": updated_at,
             "result": [{"from_name": "digit", "to_name": "image", "type": "choices",
                         "value": {"choices": [str(label)]}}]}
        self.tasks[task]["annotations"] = [b for b in self.tasks[task]["annotations"] if b["id"] != annotation]
        self.tasks[task]["annotations"].append(a)
        return a


def _client(fake):
    # the SDK's client has .tasks and .projects; the stand-in keeps its task store as .tasks
    return SimpleNamespace(projects=fake.projects, tasks=fake.tasks_api)


@pytest.fixture
def setup(tmp_path):
    X, y = digits_flat(N)
    learner = ActiveLearner(LogisticRegression(max_iter=200), max_entropy, random_state=0, seeding="step",
                            verbose=False)
    session = LabellingSession(learner, X, classes=range(10), store=str(tmp_path / "s.db"), batch_size=5,
                               initial=np.arange(10))
    fake = FakeLabelStudio(session.keys)
    sync = LabelStudioSync(session, _client(fake), project=1)
    assert sync.map_tasks() == N
    app = backend_app(sync, guess_timeout=0.3)
    yield SimpleNamespace(session=session, fake=fake, sync=sync, app=app, http=TestClient(app, base_url=LOCAL), y=y)
    app.state.events.close()
    session.stop()
    session.store.close()


def created(a, action="ANNOTATION_CREATED", project=1):
    return {"action": action, "annotation": a, "task": {"id": a["task"]}, "project": {"id": project}}


def label_events(session, item):
    return [e for e in session.store.events() if e["item"] == item and e["kind"] == "label"]


def test_health_setup_and_versions_before_any_model(setup):
    assert setup.http.get("/health").json() == {"status": "UP", "model_class": "skdbal",
                                                "model_version": "skdbal-first"}
    assert setup.http.get("/").status_code == 200
    assert setup.http.post("/setup", json={"project": "1.1700000000", "schema": CONFIG}).json() == \
        {"model_version": "skdbal-first"}
    assert setup.http.get("/versions").json() == {"versions": ["skdbal-first"]}
    r = setup.http.post("/setup", json={"project": "7.1700000000"})     # another project's connection test
    assert r.status_code == 400 and "project 1, not project 7" in r.json()["error"]


def test_predict_before_the_first_model_is_empty_and_unknown_tasks_too(setup):
    r = setup.http.post("/predict", json={"tasks": [{"id": 1003}, {"id": 99}], "project": "1.1"})
    assert r.status_code == 200
    assert r.json() == {"model_version": "skdbal-first", "results": [
        {"model_version": "skdbal-first", "score": 0.0, "result": []},
        {"model_version": "skdbal-first", "score": 0.0, "result": []}]}
    setup.sync.sampling = "uncertainty"       # the lowest score is served first: a task not scored by skdbal, last
    r = setup.http.post("/predict", json={"tasks": [{"id": 1003}], "project": "1.1"})
    assert r.json()["results"] == [{"model_version": "skdbal-first", "score": 1.0, "result": []}]


def test_webhooks_label_relabel_and_undo_each_once(setup):
    s, fake, http, events = setup.session, setup.fake, setup.http, setup.app.state.events
    a = fake.annotate(1000, 7, annotation=501)
    for _ in range(2):                                        # Label Studio delivers it twice
        r = http.post("/webhook", json=created(a))
        assert r.status_code == 200 and r.json() == {"status": "ok", "note": "queued"}
    assert events.drain()
    assert s.store.current_labels()[0]["label"] == "7" and len(label_events(s, 0)) == 1
    assert s.store.current_labels()[0]["annotator"] == "labelstudio:1"

    a = fake.annotate(1000, 3, annotation=501, updated_at="2026-01-01T00:01:00Z")   # the same annotation, edited
    http.post("/webhook", json=created(a, "ANNOTATION_UPDATED"))
    assert events.drain()
    assert s.store.current_labels()[0]["label"] == "3" and len(label_events(s, 0)) == 2

    fake.tasks[1000]["annotations"] = []                      # deleted in Label Studio: the payload has ids only
    http.post("/webhook", json={"action": "ANNOTATIONS_DELETED", "annotations": [{"id": 501}],
                                "project": {"id": 1}})
    assert events.drain()
    assert 0 not in s.store.current_labels() and events.last_error is None


def test_a_read_before_label_studio_commits_reads_again_until_the_annotation_shows(setup):
    s, fake = setup.session, setup.fake
    a = fake.annotate(1004, 2, annotation=777)
    fake.lag.add(1004)                    # the first read has no annotation yet
    setup.http.post("/webhook", json=created(a))
    assert setup.app.state.events.drain()
    assert fake.reads == [1004, 1004] and s.store.current_labels()[4]["label"] == "2"


def test_a_forged_webhook_records_nothing_label_studio_does_not_hold(setup):
    """The event only says which task to read: an annotation Label Studio does not hold, or a label
    other than Label Studio's, is never recorded; and a web page's simple POST (not JSON) is refused."""
    s, fake = setup.session, setup.fake
    setup.app.state.events.settle = 0.2
    real = fake.annotate(1003, 7, annotation=5)
    setup.http.post("/webhook", json=created(real))
    assert setup.app.state.events.drain() and s.store.current_labels()[3]["label"] == "7"
    forged = {**real, "updated_at": "9999-01-01T00:00:00Z",
              "result": [{"from_name": "digit", "to_name": "image", "type": "choices", "value": {"choices": ["1"]}}]}
    setup.http.post("/webhook", json=created(forged))
    invented = {**forged, "id": 999, "task": 1006}
    setup.http.post("/webhook", json=created(invented))
    assert setup.app.state.events.drain()
    assert {i: r["label"] for i, r in s.store.current_labels().items()} == {3: "7"}
    r = setup.http.post("/webhook", content=json.dumps(created(invented)), headers={"content-type": "text/plain"})
    assert r.status_code == 415 and "application/json" in r.json()["error"]


def test_a_deletion_of_an_annotation_recorded_before_a_restart_is_found_by_the_stores_events(setup):
    """The worker has not read the annotation (a pull recorded it, before a restart): the store's event
    of it names its item, so its task is read again, without a pull."""
    s, fake, sync = setup.session, setup.fake, setup.sync
    fake.annotate(1002, 5, annotation=42)
    assert sync.pull() == 1 and s.store.current_labels()[2]["label"] == "5"    # recorded by the pull at start
    fake.tasks[1002]["annotations"] = []
    setup.http.post("/webhook", json={"action": "ANNOTATIONS_DELETED", "annotations": [{"id": 42}],
                                      "project": {"id": 1}})
    assert setup.app.state.events.drain()
    assert 2 not in s.store.current_labels() and fake.reads == [1002]
    assert not setup.app.state.events.missed.is_set()


def test_other_actions_other_projects_and_training_are_answered_with_a_note(setup):
    http, s = setup.http, setup.session
    for action, note in [("START_TRAINING", "nothing to start"), ("TASKS_CREATED", "not an annotation event")]:
        r = http.post("/webhook", json={"action": action, "project": {"id": 1}})
        assert r.status_code == 200 and note in r.json()["note"]
    a = setup.fake.annotate(1001, 1, annotation=9)
    r = http.post("/webhook", json=created(a, project=2))
    assert r.status_code == 200 and "ignored" in r.json()["note"]
    assert http.post("/train", json={"annotations": [], "project": "1.1"}).status_code == 200
    assert setup.app.state.events.drain() and s.store.events() == []


@pytest.mark.parametrize("raw, message", [(b"{not json", "the body must be JSON"),
                                          (b"[1, 2]", "the body must be a JSON object")])
def test_bad_json_is_a_400_in_json(setup, raw, message):
    for path in ("/webhook", "/predict", "/setup", "/train"):
        r = setup.http.post(path, content=raw, headers={"content-type": "application/json"})
        assert r.status_code == 400 and r.json() == {"error": message}
    r = setup.http.post("/predict", json={"tasks": "no"})
    assert r.status_code == 400 and r.json() == {"error": "the body needs a list of tasks"}
    r = setup.http.get("/nowhere")
    assert r.status_code == 404 and r.json() == {"error": "Not Found"}


def test_a_token_is_required_as_basic_auth_or_bearer(setup):
    app = backend_app(setup.sync, token="tok-123")
    http = TestClient(app)
    try:
        assert http.get("/health").status_code == 401
        assert http.get("/health").headers["www-authenticate"] == 'Basic realm="skdbal"'
        assert http.get("/health", auth=("skdbal", "wrong")).status_code == 401
        assert http.get("/health", headers={"Authorization": "Basic !!!"}).status_code == 401
        a = setup.fake.annotate(1001, 1, annotation=9)
        assert http.post("/webhook", json=created(a)).status_code == 401
        assert http.get("/health", auth=("anyone", "tok-123")).status_code == 200
        assert http.get("/health", headers={"Authorization": "Bearer tok-123"}).status_code == 200
        assert app.state.events.drain() and setup.session.store.events() == []    # the refused one did nothing
    finally:
        app.state.events.close()


def test_predict_serves_the_pushed_prediction_then_the_models_guess(setup):
    s, fake, sync, http, y = setup.session, setup.fake, setup.sync, setup.http, setup.y
    s.start()
    for i in range(10):                                   # the initial batch, labelled in Label Studio
        http.post("/webhook", json=created(fake.annotate(1000 + i, y[i], annotation=100 + i)))
    s.wait_for_version(0, timeout=60)
    deadline = time.time() + 30
    while sync.pushed_version != 0 and time.time() < deadline:
        time.sleep(0.02)
    assert sync.pushed_version == 0 and fake.versions[-1] == "skdbal-v0"
    assert http.post("/setup", json={}).json() == {"model_version": "skdbal-v0"}
    unlabelled = sorted(sync.predictions)[:2]
    assert unlabelled and all(i >= 10 for i in unlabelled)
    r = http.post("/predict", json={"tasks": [{"id": 1000 + unlabelled[0]}, {"id": 1000 + unlabelled[1]},
                                              {"id": 1003}]}).json()
    for got, i in zip(r["results"], unlabelled):
        pushed = sync.predictions[i]
        assert got == {"model_version": "skdbal-v0", "score": pushed["score"], "result": pushed["result"]}
        assert [p for p in fake.pushed if p["task"] == 1000 + i and p["model_version"] == "skdbal-v0"][0] == pushed
    guess = str(s.learner.estimator_.predict(s.X[[3]])[0])      # item 3 is labelled: no push, the model's guess
    assert r["results"][2] == {"model_version": "skdbal-v0", "score": 0.0, "result": [
        {"from_name": "digit", "to_name": "image", "type": "choices", "value": {"choices": [guess]}}]}


def test_predict_does_not_wait_for_a_model_that_is_busy(setup, monkeypatch):
    release = threading.Event()

    def held(items):                        # the model held by a retrain
        release.wait(5)
        return ["1"] * len(items)

    monkeypatch.setattr(setup.session, "guesses", held)
    t0 = time.perf_counter()
    r = setup.http.post("/predict", json={"tasks": [{"id": 1005}]})
    took = time.perf_counter() - t0
    release.set()
    assert r.status_code == 200 and r.json()["results"][0]["result"] == [] and took < 1.5


def test_an_event_label_studio_cannot_serve_sets_missed_for_a_pull(setup):
    """Label Studio away for every try of an event: the worker says so in ``missed`` (the command then
    pulls); nothing is recorded meanwhile, and nothing is invented from the event."""
    import httpx

    worker = setup.app.state.events
    worker.retries = 1

    def away(id, request_options=None):
        raise httpx.ConnectError("refused")

    setup.sync.client.tasks.get = away
    a = setup.fake.annotate(1002, 3, annotation=11)
    assert not worker.missed.is_set()
    setup.http.post("/webhook", json=created(a))
    assert worker.drain() and worker.missed.is_set() and setup.session.store.events() == []
    assert setup.sync.pull() == 1 and setup.session.store.current_labels()[2]["label"] == "3"


def test_an_unexpected_error_is_a_json_500_and_one_log_line(setup, monkeypatch, caplog):
    """A route that fails (here the model's guesses that /predict asks for) answers a 500 whose JSON names
    the failure, and logs one line with no traceback. Starlette's own handler of a 500 raises the error
    again after answering, and uvicorn then logged its traceback: through TestClient (which raises what
    the application raises) and a real uvicorn (as the command serves it, its error log watched)."""
    import logging

    import httpx
    from _helpers import serve

    def broken(items):
        raise RuntimeError("the model\nis gone")

    monkeypatch.setattr(setup.session, "guesses", broken)
    said = "the server failed: RuntimeError: the model is gone"
    caplog.set_level(logging.INFO)
    app = backend_app(setup.sync, guess_timeout=10)   # a busy machine's slow thread start is no empty 200
    r = TestClient(app, base_url=LOCAL).post("/predict", json={"tasks": [{"id": 1020}]})
    assert r.status_code == 500 and r.json() == {"error": said}

    url, stop = serve(app)
    uvicorn_said = []
    watch = logging.Handler()
    watch.emit = uvicorn_said.append
    logging.getLogger("uvicorn.error").addHandler(watch)       # after uvicorn has set its logging up
    try:
        r = httpx.post(url + "/predict", json={"tasks": [{"id": 1020}]}, timeout=10)
        assert r.status_code == 500 and r.json() == {"error": said}
        assert httpx.get(url + "/health", timeout=10).status_code == 200      # still serving
    finally:
        stop()
        logging.getLogger("uvicorn.error").removeHandler(watch)
        app.state.events.close()
    ours = [(rec.name, rec.levelname, rec.getMessage(), rec.exc_info) for rec in caplog.records
            if rec.name.startswith("skdbal")]
    assert ours == [("skdbal.labelstudio.backend", "ERROR", f"skdbal backend: POST /predict failed: {said}", None)] * 2
    assert [rec.getMessage() for rec in uvicorn_said if rec.levelno >= logging.WARNING] == []


def test_a_client_gone_mid_body_is_one_info_line_and_no_answer(caplog):
    """Label Studio dropping a webhook's connection mid-body is not a failure of ours: nothing is sent
    (nobody is there), and the log says it at INFO, not as a 500 at ERROR."""
    import asyncio
    import logging

    from starlette.requests import ClientDisconnect

    from skdbal.labelstudio.backend import _Failures

    async def gone(scope, receive, send):
        raise ClientDisconnect()

    sent = []

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "http.disconnect"}

    caplog.set_level(logging.INFO)
    asyncio.run(_Failures(gone)({"type": "http", "method": "POST", "path": "/webhook"}, receive, send))
    assert sent == []
    assert [(r.levelname, r.getMessage()) for r in caplog.records if r.name.startswith("skdbal")] == [
        ("INFO", "skdbal backend: POST /webhook: the client went away")]


def test_a_webhook_of_an_annotation_edited_to_two_choices_takes_back_its_label(setup):
    """'3' recorded, then the annotation PATCHed to choices ['8', '9']: the item's label is undone and the
    annotation kept aside as naming no single class (it used to stay '3', silently)."""
    s, fake, http, events = setup.session, setup.fake, setup.http, setup.app.state.events
    a = fake.annotate(1000, 3, annotation=501)
    http.post("/webhook", json=created(a))
    assert events.drain() and s.store.current_labels()[0]["label"] == "3"
    a = fake.annotate(1000, 8, annotation=501, updated_at="2026-01-01T00:01:00Z")
    a["result"][0]["value"]["choices"] = ["8", "9"]
    http.post("/webhook", json=created(a, "ANNOTATION_UPDATED"))
    assert events.drain() and 0 not in s.store.current_labels() and not events.missed.is_set()
    assert [(r["task"], r["label"], r["reason"]) for r in setup.sync.unknown_labels()] == \
        [(1000, '["8", "9"]', "several choices")]
    assert setup.sync.status()["not_one_class"] == 1
