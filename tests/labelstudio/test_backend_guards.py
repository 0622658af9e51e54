"""The ML backend guarded like the labelling page: a Host check (DNS rebinding), whole finite ids only,
caps on the body and on the tasks of a /predict, and a webhook queue that a forged event cannot clog.
The stand-in Label Studio and the session are test_backend.py's."""
import json
import threading
import time
from types import SimpleNamespace

import httpx
import pytest

pytest.importorskip("starlette")
import test_backend  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402
from test_backend import LOCAL, created, label_events  # noqa: E402

from skdbal.labelstudio.backend import backend_app  # noqa: E402

#: test_backend's fixture: a session on digits, the stand-in Label Studio, the backend and its TestClient.
setup = test_backend.setup


class NotFound(Exception):
    """What Label Studio's client raises for a task it does not have."""
    status_code = 404


def slow_reads(fake, seconds):
    """Each read of a task takes ``seconds`` (as a real Label Studio's does), and one of a task it does
    not have is a 404."""
    read = fake.tasks_api.get

    def get(id, request_options=None):
        time.sleep(seconds)
        if id not in fake.tasks:
            fake.reads.append(id)
            raise NotFound(f"task {id} not found")
        return read(id, request_options=request_options)

    fake.tasks_api.get = get


def held_reads(fake):
    """Reads wait until ``release`` is set (the worker busy meanwhile); ``entered`` is set once one waits."""
    release, entered, read = threading.Event(), threading.Event(), fake.tasks_api.get

    def get(id, request_options=None):
        entered.set()
        assert release.wait(10)
        return read(id, request_options=request_options)

    fake.tasks_api.get = get
    return release, entered


def wait_for(condition, timeout):
    deadline = time.perf_counter() + timeout
    while not condition() and time.perf_counter() < deadline:
        time.sleep(0.005)
    return condition()


# ------------------------------------------------------------------ host names
@pytest.mark.parametrize("path, body", [("/health", None), ("/predict", {"tasks": [{"id": 1003}]}),
                                        ("/webhook", "event")])
def test_a_rebound_host_name_is_refused_and_this_machines_names_are_answered(setup, path, body):
    """A web page at a name rebound to 127.0.0.1 sends its own name as Host: refused before anything
    is read or queued; 127.0.0.1, localhost and [::1] are Label Studio on this machine."""
    a = setup.fake.annotate(1001, 4, annotation=31)
    body = created(a) if body == "event" else body

    def call(base):
        http = TestClient(setup.app, base_url=base)
        return http.get(path) if body is None else http.post(path, json=body)

    for base in ("http://rebound.example.org:9090", "http://attacker.test", "http://127.0.0.1.nip.io:9090"):
        r = call(base)
        assert r.status_code == 403 and r.json()["error"] == (
            f"this backend answers to 127.0.0.1, ::1 and localhost, not to '{base.split('//')[1].split(':')[0]}'")
    assert setup.app.state.events.drain() and setup.fake.reads == [] and setup.session.store.events() == []
    for base in ("http://127.0.0.1:9090", "http://localhost:9090", "http://LOCALHOST", "http://[::1]:9090"):
        assert call(base).status_code == 200
    assert setup.app.state.events.drain()
    assert [e["label"] for e in setup.session.store.events()] == (["4"] if path == "/webhook" else [])


def test_a_rebound_host_is_refused_by_a_real_server(setup):
    """Through uvicorn, as Chromium on a rebound name sends it: the Host header is the page's name."""
    from _helpers import serve

    url, stop = serve(setup.app)
    try:
        port = url.rsplit(":", 1)[1]
        for path in ("/health", "/webhook"):
            r = httpx.request("GET" if path == "/health" else "POST", url + path, timeout=10,
                              headers={"Host": f"rebound.example.org:{port}"},
                              json=None if path == "/health" else {"action": "ANNOTATION_CREATED"})
            assert r.status_code == 403 and "not to 'rebound.example.org'" in r.json()["error"]
        assert httpx.get(url + "/health", timeout=10).status_code == 200
        assert httpx.get(url + "/health", headers={"Host": f"localhost:{port}"}, timeout=10).status_code == 200
    finally:
        stop()


def test_named_hosts_are_answered_too_and_a_token_answers_any_unless_hosts_are_named(setup):
    app = backend_app(setup.sync, hosts=["LS-Backend.", "skdbal"])   # the names of a Docker network
    try:
        for base, status in [("http://ls-backend:9090", 200), ("http://skdbal", 200), ("http://127.0.0.1", 200),
                             ("http://other:9090", 403)]:
            assert TestClient(app, base_url=base).get("/health").status_code == status
        r = TestClient(app, base_url="http://other").get("/health")
        assert r.json()["error"] == "this backend answers to 127.0.0.1, ::1, localhost, ls-backend and skdbal, " \
                                    "not to 'other'"
    finally:
        app.state.events.close()
    with_token = backend_app(setup.sync, token="tok-123")                       # the token is the guard
    named = backend_app(setup.sync, token="tok-123", hosts=["skdbal"])
    anyone = backend_app(setup.sync, hosts="*")
    try:
        assert TestClient(with_token, base_url="http://other").get("/health", auth=("u", "tok-123")).status_code \
            == 200
        assert TestClient(named, base_url="http://other").get("/health", auth=("u", "tok-123")).status_code == 403
        assert TestClient(named, base_url="http://skdbal").get("/health", auth=("u", "tok-123")).status_code == 200
        assert TestClient(anyone, base_url="http://other").get("/health").status_code == 200
    finally:
        for app in (with_token, named, anyone):
            app.state.events.close()


def test_the_command_answers_the_backend_urls_host_and_the_named_ones(monkeypatch):
    """``--backend-allowed-hosts`` names more hosts; the host of ``--backend-url`` is answered too."""
    pytest.importorskip("label_studio_sdk", reason="the labelstudio extra (label-studio-sdk) is not installed")
    import argparse

    from skdbal.labelstudio.cli import _backend_settings, add_parser

    parser = add_parser(argparse.ArgumentParser().add_subparsers())
    base = ["--demo", "digits", "--url", "http://127.0.0.1:9", "--project", "1", "--token-env", "T", "--backend",
            "--backend-port", "0"]
    for extra, hosts in [([], None), (["--backend-url", "http://skdbal:9090"], ["skdbal"]),
                         (["--backend-allowed-hosts", "a.example, b", "--backend-url", "http://127.0.0.1:9"],
                          ["a.example", "b"])]:
        settings = _backend_settings(parser.parse_args(base + extra))
        settings["socket"].close()
        assert settings["hosts"] == hosts


# ------------------------------------------------------------------ numbers
BAD_IDS = [("Infinity", "Infinity"), ("-Infinity", "-Infinity"), ("NaN", "NaN"), ("1e400", "Infinity"),
           ("1.5", "1.5"), ("3.0", "3.0"), ("true", "true"), ("-1", "-1"), (str(2**63), str(2**63)),
           ('"12x"', '"12x"'), ("[1]", "list")]


@pytest.mark.parametrize("raw, shown", BAD_IDS)
def test_an_id_that_is_not_a_whole_finite_number_is_a_400_naming_it(setup, raw, shown):
    """Python's JSON reads Infinity, NaN and 1e400 (a float infinity); ids must be whole numbers that
    SQLite and Label Studio hold. Nothing is read, queued or recorded."""
    said = f"must be a whole number from 0 to 2**63-1, not {shown}"
    a = setup.fake.annotate(1002, 6, annotation=40)
    calls = [("/predict", '{"tasks": [{"id": 1003}, {"id": %s}]}' % raw, "tasks[1].id"),
             ("/predict", '{"tasks": [%s]}' % raw, "tasks[0]"),
             ("/setup", '{"project": %s}' % raw, "project"),
             ("/webhook", json.dumps(created(a)).replace('"id": 40', '"id": %s' % raw), "annotation[0].id"),
             ("/webhook", json.dumps(created(a)).replace('"task": 1002', '"task": %s' % raw), "annotation[0].task"),
             ("/webhook", '{"action": "ANNOTATION_CREATED", "project": %s}' % raw, "project"),
             ("/webhook", '{"action": "ANNOTATIONS_DELETED", "annotations": [{"id": %s}]}' % raw,
              "annotations[0].id")]
    for path, body, field in calls:
        if path == "/setup" and raw.startswith('"'):   # Label Studio's project is a string: "1.1700000000"
            continue
        r = setup.http.post(path, content=body, headers={"content-type": "application/json"})
        assert r.status_code == 400 and r.json() == {"error": f"{field} {said}"}, (path, body, r.text)
    assert setup.app.state.events.drain()
    assert setup.fake.reads == [] and setup.session.store.events() == [] and not setup.app.state.events.missed.is_set()


def test_whole_ids_as_label_studio_sends_them_still_pass(setup):
    r = setup.http.post("/predict", json={"tasks": [{"id": 1003}, {"id": "1004"}, 1005, {"data": {}}],
                                          "project": "1.1700000000"})
    assert r.status_code == 200 and len(r.json()["results"]) == 4
    assert setup.http.post("/setup", json={"project": 1}).status_code == 200


# ------------------------------------------------------------------ body and tasks caps
def test_a_predict_of_too_many_tasks_or_too_large_a_body_is_a_413_naming_the_cap(setup):
    from skdbal.labelstudio import backend

    many = {"tasks": [{"id": 1000 + i % 60} for i in range(backend.MAX_TASKS + 1)]}
    r = setup.http.post("/predict", json=many)
    assert r.status_code == 413 and r.json() == {"error": f"at most {backend.MAX_TASKS} tasks per /predict; this "
                                                           f"one has {backend.MAX_TASKS + 1}: ask for fewer at a time"}
    ok = setup.http.post("/predict", json={"tasks": many["tasks"][:backend.MAX_TASKS]})
    assert ok.status_code == 200 and len(ok.json()["results"]) == backend.MAX_TASKS
    # the 59 MB /predict of 4.5 million tasks took 17 s and 2.9 GB: now refused by its length, unread
    padding = b'{"tasks": [' + b'{"id": 1},' * ((backend.MAX_BODY - 20) // 10) + b'{"id": 1}]}'
    assert backend.MAX_BODY - 20 < len(padding) <= backend.MAX_BODY
    assert setup.http.post("/predict", content=padding, headers={"content-type": "application/json"}).status_code \
        == 413       # under the cap: read, then refused for its tasks
    over = padding[:-2] + b', {"id": 2}]}'
    r = setup.http.post("/predict", content=over, headers={"content-type": "application/json"})
    assert len(over) > backend.MAX_BODY
    assert r.status_code == 413 and r.json() == {"error": f"request body larger than {backend.MAX_BODY} bytes"}
    small = backend_app(setup.sync, max_tasks=2)
    try:
        r = TestClient(small, base_url=LOCAL).post("/predict", json={"tasks": [{"id": 1000}] * 3})
        assert r.status_code == 413 and "at most 2 tasks" in r.json()["error"]
    finally:
        small.state.events.close()


def test_the_caps_are_what_the_module_documents():
    from skdbal.labelstudio import backend

    said = " ".join(backend.__doc__.split())
    assert backend.MAX_BODY == 8 * 2**20 and "(:data:`MAX_BODY`, 8 MiB)" in said
    assert f"(:data:`MAX_TASKS`, {backend.MAX_TASKS:,})" in said
    assert f"(:data:`MAX_EVENT_TASKS`, {backend.MAX_EVENT_TASKS:,})" in said
    assert f"(:data:`MAX_QUEUE`, {backend.MAX_QUEUE:,})" in said


# ------------------------------------------------------------------ the webhook queue
def test_a_forged_event_naming_many_tasks_delays_a_real_annotation_by_under_a_second(setup):
    """A forged 2 KB-ish event names 60 of skdbal's tasks with annotations Label Studio does not have
    (each would be read again for ``settle`` = 3 s) and 60 tasks it does not have at all; a real
    annotation's event right after it is recorded within a second. Reads take 20 ms, as a real Label
    Studio's do: 120 first reads in a queue would alone take 2.4 s."""
    s, fake, worker = setup.session, setup.fake, setup.app.state.events
    assert worker.settle == 3.0
    slow_reads(fake, 0.02)
    forged = [{"id": 90000 + t, "task": t, "updated_at": "2026-01-01T00:00:00Z"}
              for t in [*range(1000, 1060), *range(5000, 5060)]]
    r = setup.http.post("/webhook", json={"action": "ANNOTATIONS_CREATED", "annotation": forged,
                                          "project": {"id": 1}})
    assert r.status_code == 200
    time.sleep(0.1)                                      # the worker is well into the forged event
    real = fake.annotate(1033, 7, annotation=501)
    t0 = time.perf_counter()
    assert setup.http.post("/webhook", json=created(real)).status_code == 200
    assert wait_for(lambda: 33 in s.store.current_labels(), 1.0), \
        f"the real annotation was not recorded within 1 s (took {time.perf_counter() - t0:.2f} s so far)"
    assert s.store.current_labels()[33]["label"] == "7"
    assert worker.drain(10)                              # the forged tasks' waits run out: nothing recorded
    assert [e["item"] for e in s.store.events()] == [33] and not worker.missed.is_set()
    assert not set(fake.reads) & set(range(5000, 5060))  # tasks of no skdbal item: never read
    assert r.json()["note"] == "queued (60 tasks of no skdbal item passed over)"


def test_repeated_task_ids_are_read_once(setup):
    """One task named by many queued events (and many times in one) is read once for all of them."""
    s, fake, worker = setup.session, setup.fake, setup.app.state.events
    release, entered = held_reads(fake)
    blocker = fake.annotate(1001, 1, annotation=7)
    setup.http.post("/webhook", json=created(blocker))    # the worker waits inside this read
    assert entered.wait(5)
    a = fake.annotate(1004, 2, annotation=8)
    for _ in range(20):
        assert setup.http.post("/webhook", json=created(a)).json()["note"] == "queued"
    setup.http.post("/webhook", json={"action": "ANNOTATIONS_CREATED", "annotation": [a] * 50, "project": {"id": 1}})
    release.set()
    assert worker.drain(10)
    assert fake.reads.count(1004) == 1 and len(label_events(s, 4)) == 1 and len(label_events(s, 1)) == 1


def test_a_full_queue_is_a_503_and_asks_for_a_pull(setup):
    s, fake, worker = setup.session, setup.fake, setup.app.state.events
    worker.max_queue = 3
    release, entered = held_reads(fake)
    tasks = [fake.annotate(1000 + i, i, annotation=600 + i) for i in range(5)]
    assert setup.http.post("/webhook", json=created(tasks[0])).status_code == 200
    assert entered.wait(5)
    r = setup.http.post("/webhook", json={"action": "ANNOTATIONS_CREATED", "annotation": tasks[1:],
                                          "project": {"id": 1}})
    assert r.status_code == 503 and r.json() == {"error": "the webhook queue is full (1 tasks waiting, at most 3): "
                                                          "a pull will be made"}
    assert worker.missed.is_set()
    release.set()
    assert worker.drain(10) and [e["item"] for e in s.store.events()] == [0]   # the refused event queued nothing
    assert setup.sync.pull() == 4 and sorted(s.store.current_labels()) == [0, 1, 2, 3, 4]   # what the pull brings


def test_an_event_naming_more_tasks_than_the_cap_asks_for_a_pull_and_reads_nothing(setup):
    worker = setup.app.state.events
    worker.max_event_tasks = 2
    tasks = [setup.fake.annotate(1000 + i, i, annotation=700 + i) for i in range(3)]
    r = setup.http.post("/webhook", json={"action": "ANNOTATIONS_CREATED", "annotation": tasks, "project": {"id": 1}})
    assert r.status_code == 200
    assert r.json()["note"] == "3 annotations named (more than 2): a pull will be made"
    assert worker.drain() and worker.missed.is_set() and setup.fake.reads == []


def test_a_deletion_of_annotations_never_recorded_asks_the_command_for_a_pull(setup, monkeypatch):
    """An id that neither the worker nor the store's events know: the worker does not pull itself (a pull
    reads every task, and held up every later event); it sets ``missed``, which the command's keeper pulls
    on, once however many such events come."""
    pulls = []
    monkeypatch.setattr(setup.sync, "pull", lambda: pulls.append(1) or 0)
    for k in range(5):
        r = setup.http.post("/webhook", json={"action": "ANNOTATIONS_DELETED", "annotations": [{"id": 123456 + k}],
                                              "project": {"id": 1}})
        assert r.status_code == 200
    assert setup.app.state.events.drain() and pulls == [] and setup.app.state.events.missed.is_set()
    assert setup.fake.reads == []


def slow_requests(fake, seconds):
    """Each request for tasks takes ``seconds`` (as a real Label Studio's read of a task does, ~67 ms with
    its settle re-reads): a read of one task, and a list of several by id alike."""
    slow_reads(fake, seconds)
    listed = fake.tasks_api.list

    def list_(*args, **params):
        time.sleep(seconds)
        return listed(*args, **params)

    fake.tasks_api.list = list_


@pytest.fixture
def large(tmp_path):
    """test_backend's setup on 900 digits: 800 unlabelled tasks to forge events for."""
    import numpy as np
    from _helpers import digits_flat
    from sklearn.linear_model import LogisticRegression

    from skdbal import ActiveLearner
    from skdbal.acquisition import max_entropy
    from skdbal.labelling import LabellingSession
    from skdbal.labelstudio import LabelStudioSync

    X, _ = digits_flat(900)
    learner = ActiveLearner(LogisticRegression(max_iter=200), max_entropy, random_state=0, seeding="step",
                            verbose=False)
    session = LabellingSession(learner, X, classes=range(10), store=str(tmp_path / "s.db"), batch_size=5,
                               initial=np.arange(10))
    fake = test_backend.FakeLabelStudio(session.keys)
    sync = LabelStudioSync(session, test_backend._client(fake), project=1)
    assert sync.map_tasks() == 900
    app = backend_app(sync, guess_timeout=0.3)
    yield SimpleNamespace(session=session, fake=fake, app=app, http=TestClient(app, base_url=LOCAL))
    app.state.events.close()
    session.stop()
    session.store.close()


def test_many_forged_single_task_events_delay_a_real_annotation_by_under_a_second(large):
    """800 forged events, each naming one unlabelled task with an annotation Label Studio does not have
    (each task would be read again for ``settle`` = 3 s), then a real annotation: recorded within 1 s.
    A request for tasks takes 67 ms: 800 reads of a task one by one would take 54 s. The tasks due at
    once are read in one request (100 at most), so the 800 cost 8 requests a round."""
    s, fake, worker = large.session, large.fake, large.app.state.events
    slow_requests(fake, 0.067)
    for t in range(1100, 1900):
        r = large.http.post("/webhook", json={"action": "ANNOTATION_CREATED", "task": {"id": t},
                                              "annotation": {"id": 900000 + t}})
        assert r.status_code == 200
    real = fake.annotate(1050, 7, annotation=501)
    t0 = time.perf_counter()
    assert large.http.post("/webhook", json=created(real)).status_code == 200
    assert wait_for(lambda: 50 in s.store.current_labels(), 1.0), \
        f"the real annotation was not recorded within 1 s (took {time.perf_counter() - t0:.2f} s so far)"
    assert s.store.current_labels()[50]["label"] == "7"
    assert worker.drain(30)                              # the forged tasks' waits run out: nothing recorded
    assert [e["item"] for e in s.store.events()] == [50] and not worker.missed.is_set()
    assert max(map(len, fake.listed)) <= 100 and set().union(*fake.listed) >= set(range(1100, 1900))


def test_tasks_read_together_record_each_and_pass_over_one_label_studio_lacks(setup):
    """Several tasks due at once are one request of their ids: each is recorded, one that Label Studio
    does not have (deleted meanwhile) is passed over, and nothing asks for a pull."""
    s, fake, worker = setup.session, setup.fake, setup.app.state.events
    release, entered = held_reads(fake)
    blocker = fake.annotate(1001, 1, annotation=7)
    setup.http.post("/webhook", json=created(blocker))    # the worker waits inside this read
    assert entered.wait(5)
    a, b = fake.annotate(1002, 2, annotation=8), fake.annotate(1003, 3, annotation=9)
    gone = fake.annotate(1004, 4, annotation=10)
    for x in (a, b, gone):
        setup.http.post("/webhook", json=created(x))
    del fake.tasks[1004]
    release.set()
    assert worker.drain(10)
    assert fake.listed == [[1002, 1003, 1004]] and not worker.missed.is_set()
    assert {i: r["label"] for i, r in s.store.current_labels().items()} == {1: "1", 2: "2", 3: "3"}
