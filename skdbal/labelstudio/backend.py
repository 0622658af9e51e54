"""skdbal as a Label Studio ML backend: a Starlette application that Label Studio calls.

Label Studio 1.23 calls an ML backend (Settings -> Model -> Connect Model, or ``POST /api/ml``) at:

- ``GET /health``: whether it is up (Label Studio's connection test, and before every ``/predict``);
- ``POST /setup``: answered with ``model_version``, the name of the version skdbal pushed last
  (``skdbal-v3``); Label Studio then asks ``/predict`` only for tasks with no prediction of it;
- ``POST /predict`` ``{"tasks": [...]}``: a prediction per task, in order: the one skdbal pushed
  for its item (:attr:`LabelStudioSync.predictions`), else the published model's guess
  (:meth:`LabellingSession.guesses`, which never waits on a retrain for long: after
  ``guess_timeout`` seconds the answer has an empty result), else an empty result;
- ``POST /webhook``: the webhook Label Studio makes for the backend itself (every action, with
  its payload). ``ANNOTATION_CREATED``, ``ANNOTATIONS_CREATED``, ``ANNOTATION_UPDATED`` and
  ``ANNOTATIONS_DELETED`` re-read the tasks they name with all their annotations and record them
  (:meth:`LabelStudioSync.record`; each annotation once, however often it is delivered); a
  deletion names annotation ids only, so the ids recorded are mapped to their tasks, and an id
  unknown here (recorded before a restart) makes a pull. Label Studio Community without redis
  sends a webhook inside the annotator's request, with a 1 s time-out (``WEBHOOK_TIMEOUT``), so
  the answer is immediate and the work is done in a thread of its own, in order.
  ``START_TRAINING`` and every other action are answered 200 with a note: skdbal retrains after
  each label by itself;
- ``POST /train``: the same (older Label Studio, or its "Start Training" without the flag that
  makes it a webhook);
- ``GET /versions``: the pushed version.

A body that is not a JSON object is a 400 whose JSON ``error`` says so; an unknown route a 404 in JSON;
any other failure a 500 whose JSON ``error`` names it (:func:`~skdbal.labelling.json_body.failure_message`,
as the labelling page's), with one line in the log (``skdbal.labelstudio.backend``, at ERROR): no
traceback reaches uvicorn's log. Each route is a module-level function (``predict``, ...) that
reads the sync and the settings from ``request.app.state`` (set by :func:`backend_app`).

**Authentication.** With a ``token``, every request must carry it, as Label Studio sends it:
HTTP Basic authentication (the backend's *Authentication method: Basic Auth* in Label Studio,
``auth_method="BASIC_AUTH"``, any user name, the token as ``basic_auth_pass``), or an
``Authorization: Bearer <token>`` header. Label Studio sends Basic Auth on ``/health``, ``/setup``,
``/predict`` and ``/train``, but not on the webhook it makes: that one's headers (the webhook's
*Headers* in Settings -> Webhooks, ``headers`` of ``PATCH /api/webhooks/{id}``) must be given
``{"Authorization": "Basic <base64 of user:token>"}``; ``skdbal labelstudio --backend --connect``
does both. Without a token the backend is for this machine's Label Studio only: serve it on
127.0.0.1.

**Label Studio's SSRF guard.** Label Studio 1.23 refuses an ML backend on a local or private
address (``ML_BLOCK_LOCAL_IP``, on by default: the URL is refused when the backend is added, and
every connection to it is checked) and does not send webhooks there (``SSRF_PROTECTION_ENABLED``,
on by default: the backend's webhook is then silently not made, and a webhook made otherwise is
not sent). A Label Studio on the same machine as skdbal therefore needs both set to ``false`` in
its environment; one elsewhere reaches skdbal at a public address, with a token.
"""
from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import logging
import queue
import threading
import time
from typing import Dict, List, Optional

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ..labelling.json_body import Refused, failure_message, read_json_object
from .sync import LabelStudioSync, _plain, is_transient

__all__ = ["WebhookWorker", "backend_app"]

logger = logging.getLogger(__name__)

#: Largest request body accepted, in bytes (a /predict of many tasks carries their data).
MAX_BODY = 64 * 1024 * 1024
#: The annotation events that change a task's label.
ANNOTATION_EVENTS = ("ANNOTATION_CREATED", "ANNOTATIONS_CREATED", "ANNOTATION_UPDATED", "ANNOTATIONS_DELETED")


def _id_of(value) -> Optional[int]:
    """An id given as an int, or as a dict (or object) with an ``id``."""
    if isinstance(value, dict):
        value = value.get("id")
    try:
        return int(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None


class WebhookWorker:
    """Records Label Studio's annotation events in the session's store, in a thread of its own, in order.

    :meth:`put` returns at once (Label Studio waits for the webhook's answer inside the annotator's
    request); the thread re-reads each named task with all its annotations
    (``sync.client.tasks.get``) and records it (:meth:`LabelStudioSync.record`): what Label Studio
    answers, never the event's own content (read again until the event's change shows, so a read
    that comes before Label Studio's commit loses nothing). A failure for want of Label Studio is
    retried; the last error is in :attr:`last_error`.

    Parameters
    ----------
    sync : LabelStudioSync
        The sync whose session's store the events go to.
    retries : int, default=5
        Tries of an event while Label Studio cannot be reached, a second apart; an event still not
        recorded then sets :attr:`missed` (``skdbal labelstudio --backend`` then pulls).
    settle : float, default=3.0
        Seconds to read a task again until Label Studio shows the event's change (see :meth:`_read`).
    request_timeout : float, default=10.0
        Seconds a read of a task may take.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> from skdbal.labelstudio.backend import WebhookWorker
    >>> sync = SimpleNamespace(project=1)
    >>> worker = WebhookWorker(sync)
    >>> worker.put({"action": "PROJECT_UPDATED", "project": {"id": 1}})
    'PROJECT_UPDATED is not an annotation event: nothing to do'
    >>> worker.close()
    """

    def __init__(self, sync: LabelStudioSync, *, retries: int = 5, settle: float = 3.0,
                 request_timeout: float = 10.0):
        self.sync = sync
        self.retries = int(retries)
        self.settle = float(settle)
        self.request_timeout = float(request_timeout)
        self.last_error: Optional[BaseException] = None
        #: Set when an event could not be recorded: the command then pulls (and clears it).
        self.missed = threading.Event()
        self.recorded = 0
        self._task_of_annotation: Dict[int, int] = {}
        self._queue: "queue.Queue" = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="skdbal-webhooks", daemon=True)
        self._thread.start()

    def put(self, event: dict) -> str:
        """Queue an event (Label Studio's webhook body) and say what will be done with it."""
        action = str(event.get("action"))
        project = _id_of(event.get("project"))
        if project is not None and project != self.sync.project:
            return f"project {project} is not skdbal's project {self.sync.project}: ignored"
        if action not in ANNOTATION_EVENTS:
            if action == "START_TRAINING":
                return "skdbal retrains after each label by itself: nothing to start"
            return f"{action} is not an annotation event: nothing to do"
        self._queue.put(event)
        return "queued"

    def drain(self, timeout: float = 30.0) -> bool:
        """Wait until every queued event is recorded (or failed); whether it happened in ``timeout`` s."""
        done = threading.Event()
        self._queue.put(done)
        return done.wait(timeout)

    def close(self, timeout: float = 30.0) -> None:
        """Record what is queued, then end the thread."""
        self._queue.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            event = self._queue.get()
            if event is None:
                return
            if isinstance(event, threading.Event):
                event.set()
                continue
            for attempt in range(self.retries):
                try:
                    self.recorded += self.handle(event)
                    break
                except Exception as exc:  # noqa: BLE001 - the thread goes on; the error is kept and logged
                    self.last_error = exc
                    if not is_transient(exc) or attempt == self.retries - 1:
                        logger.error("skdbal: the webhook %s was not recorded (a pull will be made): %s",
                                     event.get("action"), " ".join(f"{type(exc).__name__}: {exc}".split()))
                        self.missed.set()
                        break
                    threading.Event().wait(1.0)

    def handle(self, event: dict) -> int:
        """Record one event now (in the calling thread); the number of new events in the store."""
        action = event.get("action")
        if action == "ANNOTATIONS_DELETED":
            deleted = {i for i in (_id_of(a) for a in (event.get("annotations") or [])) if i is not None}
            tasks = {self._task_of_annotation[a] for a in deleted if a in self._task_of_annotation}
            if deleted - set(self._task_of_annotation):    # recorded before a restart: read them all
                return self.sync.pull()
            return self.sync.record([self._read(t, drop=deleted) for t in sorted(tasks)])
        annotations = event.get("annotation")
        annotations = [annotations] if isinstance(annotations, dict) else list(annotations or [])
        given: Dict[int, List[dict]] = {}
        for a in annotations:
            task = _id_of(a.get("task")) or _id_of(event.get("task"))
            if task is not None and _id_of(a) is not None:
                given.setdefault(task, []).append(a)
        return self.sync.record([self._read(t, add=given[t]) for t in sorted(given)])

    def _read(self, task: int, add=(), drop=()) -> dict:
        """Task ``task`` with all its annotations, as Label Studio has them. The event's annotations
        (``add``) and deleted ids (``drop``) only say what to wait for: the task is read again (for up
        to :attr:`settle` seconds) until Label Studio shows each of ``add`` at least as new as the
        event's, and none of ``drop`` (Label Studio sends a webhook inside the request that makes the
        change, so a read may come before its commit). What is recorded is what Label Studio answers,
        never the event's content: a forged event changes nothing."""
        want = {_id_of(a): str(a.get("updated_at") or "") for a in add if _id_of(a) is not None}
        drop = set(drop)
        deadline, wait = time.monotonic() + self.settle, 0.05
        while True:
            found = _plain(self.sync.client.tasks.get(id=task, request_options={"timeout_in_seconds":
                                                                                 self.request_timeout}))
            annotations = {_id_of(a): _plain(a) for a in (found.get("annotations") or [])}
            shown = all(i in annotations and str(annotations[i].get("updated_at") or "") >= when
                        for i, when in want.items()) and not drop & set(annotations)
            if shown or time.monotonic() + wait > deadline:
                break
            time.sleep(wait)
            wait = min(2 * wait, 0.5)
        for a in annotations:
            self._task_of_annotation[a] = task
        return {"id": task, "annotations": list(annotations.values())}


def _authorized(request: Request, token: str) -> bool:
    """Whether the request carries ``token``: as Basic Auth's password (any user), or as a Bearer token."""
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    given = ""
    if scheme.lower() == "basic":
        try:
            given = base64.b64decode(value.strip(), validate=True).decode("utf-8").partition(":")[2]
        except (binascii.Error, UnicodeDecodeError):
            return False
    elif scheme.lower() in ("bearer", "token"):
        given = value.strip()
    return bool(given) and hmac.compare_digest(given.encode(), token.encode())


class _Failures:
    """The backend's outermost middleware: an unexpected error is a 500 whose JSON ``error`` names it,
    and one line in the log. Starlette's own handler of a 500 raises the error again after answering
    (for the server to log it), and uvicorn then logs its traceback; here it is not raised again."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = False

        async def sending(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except ClientDisconnect:     # the client went away mid-body: nobody to answer, nothing failed here
            logger.info("skdbal backend: %s %s: the client went away", scope.get("method", ""), scope.get("path"))
        except Exception as exc:  # noqa: BLE001 - answered, and said in one line
            method = scope.get("method", "")
            # one line; no route writes the store (the webhooks' worker does, in its thread): a read failed
            said = failure_message(exc)
            logger.error("skdbal backend: %s %s failed: %s", method, scope.get("path"), said)
            if not started:          # else the answer was on its way (the client went away): nothing to add
                await JSONResponse({"error": said}, status_code=500)(scope, receive, send)


def backend_app(sync: LabelStudioSync, *, token: Optional[str] = None, guess_timeout: float = 0.3,
                max_body: int = MAX_BODY) -> Starlette:
    """A Starlette application that serves ``sync``'s session to Label Studio as an ML backend.

    Serve it with uvicorn while the session runs (``skdbal labelstudio --backend`` does); its
    routes and what Label Studio needs set are in this module's description.

    Parameters
    ----------
    sync : LabelStudioSync
        The sync of the session and the project: its pushed predictions are what ``/predict``
        answers, and its :meth:`~LabelStudioSync.record` takes the webhooks' annotations.
    token : str, optional
        When given, every request must carry it (Basic Auth's password, or ``Authorization:
        Bearer``); else 401.
    guess_timeout : float, default=0.3
        Seconds ``/predict`` waits for the model's guesses of items that have no pushed
        prediction (a retrain may hold the model); then those get an empty result.
    max_body : int, default=64 MiB
        Larger request bodies are refused (413).

    Returns
    -------
    starlette.applications.Starlette
        Its ``state.events`` is the :class:`WebhookWorker` (close it after serving).

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from types import SimpleNamespace
    >>> from sklearn.linear_model import LogisticRegression
    >>> from starlette.testclient import TestClient
    >>> from skdbal import ActiveLearner
    >>> from skdbal.labelling import LabellingSession
    >>> from skdbal.labelstudio import LabelStudioSync
    >>> from skdbal.labelstudio.backend import backend_app
    >>> config = ('<View><Image name="i" value="$i"/><Choices name="c" toName="i"><Choice value="a"/>'
    ...           '<Choice value="b"/></Choices></View>')
    >>> client = SimpleNamespace(projects=SimpleNamespace(get=lambda id: {"label_config": config}))
    >>> session = LabellingSession(ActiveLearner(LogisticRegression(), random_state=0, seeding="step"), np.eye(4),
    ...                            classes=["a", "b"], store=os.path.join(tempfile.mkdtemp(), "s.db"), batch_size=2)
    >>> app = backend_app(LabelStudioSync(session, client, project=1), token="s3cret")
    >>> http = TestClient(app)
    >>> http.get("/health").status_code                       # no token
    401
    >>> http.get("/health", auth=("skdbal", "s3cret")).json()  # Label Studio's Basic Auth
    {'status': 'UP', 'model_class': 'skdbal', 'model_version': 'skdbal-first'}
    >>> http.post("/setup", json={"project": "1.1700000000"}, auth=("skdbal", "s3cret")).json()
    {'model_version': 'skdbal-first'}
    >>> app.state.events.close()
    >>> session.store.close()
    """
    from starlette.middleware import Middleware

    app = Starlette(routes=[Route("/", health), Route("/health", health), Route("/setup", setup, methods=["POST"]),
                            Route("/versions", versions), Route("/predict", predict, methods=["POST"]),
                            Route("/webhook", webhook, methods=["POST"]), Route("/train", train, methods=["POST"])],
                    middleware=[Middleware(_Failures), Middleware(_Auth, token=token)],
                    exception_handlers={Refused: _refused, HTTPException: _http_error})
    # what the handlers read (request.app.state)
    app.state.events = WebhookWorker(sync)
    app.state.sync = sync
    app.state.guess_timeout, app.state.max_body = guess_timeout, max_body
    return app


class _Auth:
    """The middleware that refuses (401) a request without the backend's ``token`` (none: all pass)."""

    def __init__(self, app, token: Optional[str] = None):
        self.app, self.token = app, token

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and self.token is not None and not _authorized(Request(scope), self.token):
            response = JSONResponse({"error": "missing or wrong credentials: Label Studio's Basic Auth "
                                     "password (or a Bearer token) must be skdbal's backend token"},
                                    status_code=401, headers={"WWW-Authenticate": 'Basic realm="skdbal"'})
            return await response(scope, receive, send)
        return await self.app(scope, receive, send)


async def _refused(request: Request, exc: Refused):
    return JSONResponse({"error": exc.message}, status_code=exc.status)


async def _http_error(request: Request, exc: HTTPException):
    return JSONResponse({"error": exc.detail}, status_code=exc.status_code)


def _version_name(sync: LabelStudioSync) -> str:
    version = sync.pushed_version
    return f"{sync.model_version_prefix}-" + ("first" if version is None else f"v{version}")


async def _body(request: Request) -> dict:
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":     # a web page's simple POST (text/plain, a form) cannot be JSON
        raise Refused(415, "the body must be sent as application/json")     # without a CORS preflight
    return await read_json_object(request, request.app.state.max_body)


def _check_project(sync: LabelStudioSync, data: dict) -> None:
    """Label Studio names the project as ``"{id}.{created}"``: another project's is refused."""
    given = str(data.get("project") or "").split(".")[0]
    if given.isdigit() and int(given) != sync.project:
        raise Refused(400, f"this backend serves project {sync.project}, not project {given}")


async def health(request: Request):
    """``GET /health`` (and ``/``): up, with the pushed version."""
    return JSONResponse({"status": "UP", "model_class": "skdbal",
                         "model_version": _version_name(request.app.state.sync)})


async def setup(request: Request):
    """``POST /setup``: the pushed version."""
    sync = request.app.state.sync
    _check_project(sync, await _body(request))
    return JSONResponse({"model_version": _version_name(sync)})


async def versions(request: Request):
    """``GET /versions``: the pushed version."""
    return JSONResponse({"versions": [_version_name(request.app.state.sync)]})


async def predict(request: Request):
    """``POST /predict``: a prediction per task: the pushed one, else the model's guess, else empty (these two
    scored as the worst task, for the sync's sampling)."""
    sync = request.app.state.sync
    data = await _body(request)
    _check_project(sync, data)
    tasks = data.get("tasks")
    if not isinstance(tasks, list):
        raise Refused(400, "the body needs a list of tasks")
    name = _version_name(sync)
    predictions = sync.predictions        # replaced as a whole by each push: read once
    items = [sync.item_of_task(_id_of(t)) for t in tasks]
    to_guess = [i for i in items if i is not None and i not in predictions]
    guesses: Dict[int, Optional[str]] = {}
    if to_guess:
        try:
            found = await asyncio.wait_for(run_in_threadpool(sync.session.guesses, to_guess),
                                           request.app.state.guess_timeout)
            guesses = dict(zip(to_guess, found))
        except asyncio.TimeoutError:    # the model is held by a retrain: no guess this time
            pass
    # a task skdbal did not score, should Label Studio keep this answer as its prediction, is served last
    worst = 1.0 if sync.sampling == "uncertainty" else 0.0
    results = []
    for item in items:
        if item in predictions:
            p = predictions[item]
            results.append({"model_version": p["model_version"], "score": p["score"], "result": p["result"]})
            continue
        guess = guesses.get(item)
        result = [] if guess is None else [{"from_name": sync.from_name, "to_name": sync.to_name,
                                            "type": "choices", "value": {"choices": [str(guess)]}}]
        results.append({"model_version": name, "score": worst, "result": result})
    return JSONResponse({"results": results, "model_version": name})


async def webhook(request: Request):
    """``POST /webhook``: answered at once; the worker records the annotations in its thread."""
    data = await _body(request)
    return JSONResponse({"status": "ok", "note": request.app.state.events.put(data)})


async def train(request: Request):
    """``POST /train``: nothing to start."""
    await _body(request)
    return JSONResponse({"status": "ok", "note": "skdbal retrains after each label by itself: nothing to "
                         "start"})
