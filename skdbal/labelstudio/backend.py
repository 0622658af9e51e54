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
  deletion names annotation ids only, so the ids recorded are mapped to their tasks (those recorded
  before a restart through the store's events), and an id unknown there makes a pull. Label Studio
  Community without redis sends a webhook inside the annotator's request, with a 1 s time-out
  (``WEBHOOK_TIMEOUT``), so the answer is immediate and the reads are made by a thread of its own
  (:class:`WebhookWorker`). ``START_TRAINING`` and every other action are answered 200 with a note:
  skdbal retrains after each label by itself;
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

**Host names.** Without a token the backend answers only requests whose ``Host`` is one of this
machine's own names (``127.0.0.1``, ``localhost``, ``::1``:
:data:`skdbal.labelling.serving.LOOPBACK_NAMES`, which the page answers to as well), and those named
in ``hosts`` (``skdbal labelstudio --backend-allowed-hosts``, and the host of ``--backend-url``): a web
page whose name is rebound to 127.0.0.1 (DNS rebinding) is refused (403) before anything is read.
With a token, any name passes unless ``hosts`` is given (the token is the guard then, as on the
labelling page served beyond loopback); ``hosts=["*"]`` lets any name pass.

**Limits.** What one request or one sender can make the backend do is bounded:

- a body larger than ``max_body`` (:data:`MAX_BODY`, 8 MiB) is refused (413) as it streams;
- a ``/predict`` of more than ``max_tasks`` tasks (:data:`MAX_TASKS`, 5,000) is refused (413): Label
  Studio's *Retrieve Predictions* on a larger selection is asked again on fewer tasks;
- the numbers read from a body (task, annotation and project ids) must be whole numbers from 0 to
  2**63 - 1: ``Infinity``, ``NaN``, ``1.5``, ``true`` or ``1e400`` there is a 400 that names the
  field; the rest of a body (a task's data) is not read;
- a webhook names at most 1,000 annotations, made or deleted (:data:`MAX_EVENT_TASKS`, 1,000), to be
  read one by one; a larger one is answered 200 and makes a pull instead (one read of every task);
- the webhook queue holds at most 5,000 tasks waiting (:data:`MAX_QUEUE`, 5,000): a task named again while
  it waits is read once for all its events, and an event that would go past the cap is refused
  (503), and makes a pull, so that no annotation is lost;
- the tasks due are read together, up to 100 in one request (a Data Manager query of their ids; one
  task due alone is read by itself), one task of each event first, the events served longest ago
  first; a task read before Label Studio's commit is read again later (for up to ``settle``
  seconds) in a later request: a flood of forged events, each naming a task with no such
  annotation, costs a request per 100 tasks due, and delays another event by about one request
  (tens of milliseconds), not by a read of each forged task; only tasks of skdbal's
  items are read, and a task Label Studio does not have (404) is passed over.

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
import json
import logging
import re
import threading
import time
from typing import Dict, Iterable, List, Optional, Set
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ..labelling.json_body import Refused, failure_message, read_json_object
from ..labelling.serving import LOOPBACK_NAMES
from .sync import LabelStudioSync, _plain, is_transient, list_tasks

__all__ = ["MAX_BODY", "MAX_EVENT_TASKS", "MAX_QUEUE", "MAX_TASKS", "WebhookWorker",
           "backend_app"]

logger = logging.getLogger(__name__)

#: Largest request body accepted, in bytes (a /predict of many tasks carries their data).
MAX_BODY = 8 * 1024 * 1024
#: Most tasks in one ``/predict``.
MAX_TASKS = 5000
#: Most annotations (made or deleted) one webhook names to be read one by one; more make a pull.
MAX_EVENT_TASKS = 1000
#: Most tasks waiting in the webhook queue; an event that would go past it is refused (503).
MAX_QUEUE = 5000
#: The annotation events that change a task's label.
ANNOTATION_EVENTS = ("ANNOTATION_CREATED", "ANNOTATIONS_CREATED", "ANNOTATION_UPDATED", "ANNOTATIONS_DELETED")
#: The largest id taken (SQLite's and Label Studio's integers).
_LARGEST_ID = 2**63 - 1
#: Seconds a task waits before it is read again after Label Studio could not be reached.
_AWAY = 1.0


def _id_in(value, what: str) -> Optional[int]:
    """The id ``value`` (an int, a string of digits, or an object with an ``id``), None if it has none;
    :class:`Refused` (400) naming ``what`` for anything that is not a whole number from 0 to 2**63 - 1."""
    if isinstance(value, dict):
        value, what = value.get("id"), what + ".id"
    if value is None:
        return None
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 19:
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _LARGEST_ID:
        return value
    shown = json.dumps(value) if isinstance(value, (bool, int, float, str)) else type(value).__name__
    raise Refused(400, f"{what} must be a whole number from 0 to 2**63-1, not {shown[:40]}")


class _Wait:
    """A task waiting in the webhook queue: what its events said to wait for, and when to read it."""

    __slots__ = ("source", "want", "drop", "deadline", "due", "reads", "away", "changed")

    def __init__(self, source: int, now: float, settle: float):
        self.source = source
        self.want: Dict[int, str] = {}      # annotation -> the newest updated_at an event gave it
        self.drop: Set[int] = set()         # deleted annotations
        self.deadline, self.due, self.reads, self.away, self.changed = now + settle, now, 0, 0, 0


class WebhookWorker:
    """Records Label Studio's annotation events in the session's store, in a thread of its own.

    :meth:`put` returns at once (Label Studio waits for the webhook's answer inside the annotator's
    request); the thread re-reads each named task with all its annotations (``sync.client.tasks.get``
    for a task due alone; the tasks due at once, up to ``batch``, in one ``sync.client.tasks.list``
    of their ids) and records it (:meth:`LabelStudioSync.record`): what Label Studio answers, never
    the event's own content (read again, for up to ``settle`` seconds, until the event's change
    shows, so a read that comes before Label Studio's commit loses nothing). A task named again
    while it waits is read once for all its events. The events share the thread: a request takes one
    task of each event first, the events served longest ago first, and a task that waits to be read
    again does not hold up the others, so events that name many tasks (or forged ones, naming
    annotations Label Studio does not have) delay another by about one request. A failure for want
    of Label Studio is retried; the last error is in :attr:`last_error`.

    Parameters
    ----------
    sync : LabelStudioSync
        The sync whose session's store the events go to.
    retries : int, default=5
        Reads of a task while Label Studio cannot be reached, a second apart; a task still not
        recorded then sets :attr:`missed` (``skdbal labelstudio --backend`` then pulls).
    settle : float, default=3.0
        Seconds to read a task again until Label Studio shows the event's change.
    request_timeout : float, default=10.0
        Seconds a read of a task may take.
    max_queue : int, default=MAX_QUEUE
        Most tasks waiting; :meth:`put` refuses (503) an event that would go past it.
    max_event_tasks : int, default=MAX_EVENT_TASKS
        Most annotations (made or deleted) of one event read one by one; a larger event sets
        :attr:`missed` (a pull) instead.
    batch : int, default=100
        Most tasks read in one request: the tasks due at once are read together (a Data Manager
        query of their ids), so that a flood of events costs one request per ``batch`` tasks due.

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
                 request_timeout: float = 10.0, max_queue: int = MAX_QUEUE,
                 max_event_tasks: int = MAX_EVENT_TASKS, batch: int = 100):
        self.sync = sync
        self.batch = max(1, int(batch))
        self.retries = int(retries)
        self.settle = float(settle)
        self.request_timeout = float(request_timeout)
        self.max_queue, self.max_event_tasks = int(max_queue), int(max_event_tasks)
        self.last_error: Optional[BaseException] = None
        #: Set when an event could not be recorded: the command then pulls (and clears it).
        self.missed = threading.Event()
        self.recorded = 0
        self._task_of_annotation: Dict[int, int] = {}
        self._scanned = 0                           # the store's events read for annotation ids so far
        self._cv = threading.Condition()
        self._waiting: Dict[int, _Wait] = {}        # task -> what its events wait for
        self._deleted: Set[int] = set()             # deleted annotation ids to look up in the store
        self._turn: Dict[int, int] = {}             # event -> the turn it was last served at
        self._events = self._turns = 0
        self._busy = self._closing = False
        self._thread = threading.Thread(target=self._run, name="skdbal-webhooks", daemon=True)
        self._thread.start()

    def put(self, event: dict) -> str:
        """Queue an event (Label Studio's webhook body) and say what will be done with it;
        :class:`~skdbal.labelling.json_body.Refused` for an id that is not a whole number (400) or
        a queue that is full (503)."""
        action = str(event.get("action"))
        project = _id_in(event.get("project"), "project")
        if project is not None and project != self.sync.project:
            return f"project {project} is not skdbal's project {self.sync.project}: ignored"
        if action not in ANNOTATION_EVENTS:
            if action == "START_TRAINING":
                return "skdbal retrains after each label by itself: nothing to start"
            return f"{action} is not an annotation event: nothing to do"
        key = "annotations" if action == "ANNOTATIONS_DELETED" else "annotation"
        given = event.get(key)
        given = [given] if isinstance(given, dict) else _listed(given or [], key)
        if len(given) > self.max_event_tasks:        # not even looked at one by one
            self.missed.set()
            return f"{len(given)} annotations named (more than {self.max_event_tasks}): a pull will be made"
        if action == "ANNOTATIONS_DELETED":
            named: Dict[int, Dict[int, str]] = {}
            ids = (_id_in(a, f"annotations[{k}]") for k, a in enumerate(given))
            deleted = {i for i in ids if i is not None}
        else:
            named, deleted = {}, set()
            default = _id_in(event.get("task"), "task")
            for k, a in enumerate(given):
                if not isinstance(a, dict):
                    raise Refused(400, f"annotation[{k}] must be an object")
                task, annotation = _id_in(a.get("task"), f"annotation[{k}].task"), _id_in(a.get("id"),
                                                                                         f"annotation[{k}].id")
                task = default if task is None else task
                if task is not None and annotation is not None:
                    named.setdefault(task, {})[annotation] = str(a.get("updated_at") or "")[:64]
        return self._queue(named, deleted)

    def _queue(self, named: Dict[int, dict], deleted: Set[int]) -> str:
        now = time.monotonic()
        mine = {t: w for t, w in named.items() if self.sync.item_of_task(t) is not None}  # others: nothing to record
        with self._cv:
            known = {self._task_of_annotation[a] for a in deleted if a in self._task_of_annotation}
            new = (set(mine) | known) - set(self._waiting)
            if len(self._waiting) + len(new) > self.max_queue:
                self.missed.set()
                raise Refused(503, f"the webhook queue is full ({len(self._waiting)} tasks waiting, at most "
                                   f"{self.max_queue}): a pull will be made")
            self._events += 1
            for task in sorted(set(mine) | known):
                wait = self._waiting.get(task)
                if wait is None:
                    wait = self._waiting[task] = _Wait(self._events, now, self.settle)
                # the newest event naming a task takes it over: read at its turn, waited for its settle
                wait.source, wait.due, wait.changed = self._events, now, wait.changed + 1
                wait.deadline = max(wait.deadline, now + self.settle)
                for annotation, when in mine.get(task, {}).items():
                    wait.want[annotation] = max(when, wait.want.get(annotation, ""))
                wait.drop |= {a for a in deleted if self._task_of_annotation.get(a) == task}
            self._deleted |= {a for a in deleted if a not in self._task_of_annotation}
            self._cv.notify_all()
        skipped = len(named) - len(mine)
        return "queued" if not skipped else f"queued ({skipped} tasks of no skdbal item passed over)"

    def drain(self, timeout: float = 30.0) -> bool:
        """Wait until every queued event is recorded (or failed); whether it happened in ``timeout`` s."""
        with self._cv:
            return self._cv.wait_for(lambda: not (self._waiting or self._deleted or self._busy), timeout)

    def close(self, timeout: float = 30.0) -> None:
        """Record what is queued, then end the thread."""
        with self._cv:
            self._closing = True
            self._cv.notify_all()
        self._thread.join(timeout)

    def _next(self) -> List[int]:
        """The tasks to read now, at most ``batch``: of the tasks due, one of each event first, the events
        served longest ago first (the caller holds ``_cv``); none if no task is due."""
        now = time.monotonic()
        due = sorted((w.due, t) for t, w in self._waiting.items() if w.due <= now)
        if not due:
            return []
        rank: Dict[int, int] = {}
        keyed = []
        for when, t in due:
            source = self._waiting[t].source
            rank[source] = rank.get(source, -1) + 1
            keyed.append((rank[source], self._turn.get(source, -1), when, t))
        chosen = [t for *_, t in sorted(keyed)[:self.batch]]
        for t in chosen:
            self._turns += 1
            self._turn[self._waiting[t].source] = self._turns
        live = {w.source for w in self._waiting.values()}
        if len(self._turn) > 2 * len(live) + 16:                 # events with nothing left waiting
            self._turn = {e: n for e, n in self._turn.items() if e in live}
        return chosen

    def _run(self) -> None:
        while True:
            tasks: List[int] = []
            with self._cv:
                self._busy = False
                while True:
                    if self._deleted:
                        deleted, self._deleted = self._deleted, set()
                        break
                    tasks = self._next()
                    if tasks:
                        break
                    if not self._waiting:
                        self._cv.notify_all()                     # drain() waits for this
                        if self._closing:
                            return
                    soonest = min((w.due for w in self._waiting.values()), default=None)
                    self._cv.wait(None if soonest is None else max(0.0, soonest - time.monotonic()))
                self._busy = True
            try:
                if not tasks:
                    self._look_up(deleted)
                else:
                    self._work(tasks)
            except Exception as exc:  # noqa: BLE001 - the thread goes on whatever Label Studio answered
                with self._cv:
                    for task in tasks:
                        self._waiting.pop(task, None)
                self._failed(_named(tasks), exc)

    def _look_up(self, deleted: Set[int]) -> None:
        """Deleted annotations not read here: their tasks from the store's events (recorded before a
        restart, or by a pull); an id not there either makes a pull."""
        prefix = re.compile(r"labelstudio:(\d+):")
        try:
            events = self.sync.session.store.events(self._scanned)
            task_of = self.sync.task_of
        except Exception as exc:  # noqa: BLE001 - the pull will say it again, if it persists
            self._failed("ANNOTATIONS_DELETED", exc)
            return
        with self._cv:
            for e in events:
                found = prefix.match(str(e.get("request_id") or ""))
                if found and e["item"] in task_of:
                    self._task_of_annotation[int(found.group(1))] = task_of[e["item"]]
                self._scanned = max(self._scanned, e["event"])
        unknown = {a for a in deleted if a not in self._task_of_annotation}
        if unknown:
            logger.info("skdbal: deleted annotations %s were not recorded here: a pull will be made", sorted(unknown))
            self.missed.set()
        if deleted - unknown:
            try:
                self._queue({}, deleted - unknown)
            except Refused:             # the queue is full: the pull it asked for takes the deletion
                pass

    def _work(self, tasks: List[int]) -> None:
        """Read ``tasks`` (one alone, several in one request); record each whose events' change shows or
        whose wait is over, and put the others back to be read again later."""
        with self._cv:
            changed = {t: self._waiting[t].changed for t in tasks}
        options = {"timeout_in_seconds": self.request_timeout}
        try:
            if len(tasks) == 1:
                found = {tasks[0]: _plain(self.sync.client.tasks.get(id=tasks[0], request_options=options))}
            else:        # one request, whatever the number of events that named them
                query = json.dumps({"selectedItems": {"all": False, "included": sorted(tasks)}})
                found = {t["id"]: t for t in list_tasks(self.sync.client, self.sync.project, page_size=len(tasks),
                                                        fields="all", query=query, request_options=options)}
        except Exception as exc:  # noqa: BLE001 - retried, passed over, or said and left to a pull
            self._away(tasks, exc)
            return
        for task in tasks:
            if task in found:
                self._settle(task, changed[task], found[task])
            else:        # not in Label Studio (deleted): nothing to record
                with self._cv:
                    self._waiting.pop(task, None)
                logger.info("skdbal: task %s named by a webhook is not in Label Studio: passed over", task)

    def _away(self, tasks: List[int], exc: BaseException) -> None:
        """A read of ``tasks`` failed: Label Studio away is retried (``retries`` times, a second apart); a
        task it does not have (404) is passed over; any other error is said and left to a pull."""
        self.last_error = exc
        failed = []
        with self._cv:
            for task in tasks:
                wait = self._waiting[task]
                wait.away += 1
                if is_transient(exc) and wait.away < self.retries:
                    wait.due = time.monotonic() + _AWAY
                    wait.deadline = max(wait.deadline, wait.due)
                else:
                    del self._waiting[task]
                    failed.append(task)
        if not failed:
            return
        if len(tasks) == 1 and getattr(exc, "status_code", None) == 404:
            logger.info("skdbal: task %s named by a webhook is not in Label Studio: passed over", tasks[0])
        else:
            self._failed(_named(failed), exc)

    def _settle(self, task: int, changed: int, found: dict) -> None:
        """Record ``task`` as read (``found``) if its events' change shows or its wait is over, else put it
        back to be read again later."""
        annotations = {a.get("id"): a for a in map(_plain, found.get("annotations") or [])}
        now = time.monotonic()
        with self._cv:
            wait = self._waiting[task]
            wait.reads += 1
            for a in annotations:
                if isinstance(a, int):
                    self._task_of_annotation[a] = task
            # what shows is recorded now; what does not is waited for (another event may have named this
            # task with an annotation Label Studio never had: that holds up no other's record)
            shown = {i for i, when in wait.want.items()
                     if i in annotations and str(annotations[i].get("updated_at") or "") >= when}
            gone = wait.drop - set(annotations)
            for i in shown:
                del wait.want[i]
            wait.drop -= gone
            done = not (wait.want or wait.drop) or now >= wait.deadline
            if done and wait.changed == changed:
                del self._waiting[task]
            else:    # before Label Studio's commit (or named again meanwhile): read again, the others first
                wait.due = now + (0.0 if wait.changed != changed else min(0.05 * 2 ** (wait.reads - 1), 0.5))
            if not (shown or gone or done):
                return
        try:
            self.recorded += self.sync.record([{"id": task, "annotations": list(annotations.values())}])
        except Exception as exc:  # noqa: BLE001 - the thread goes on; the error is kept, said, and pulled
            self._failed(f"for task {task}", exc)

    def _failed(self, what: str, exc: BaseException) -> None:
        self.last_error = exc
        logger.error("skdbal: a webhook %swas not recorded (a pull will be made): %s", what + " " if what else "",
                     " ".join(f"{type(exc).__name__}: {exc}".split()))
        self.missed.set()


def _named(tasks: List[int]) -> str:
    """How a failure names the tasks it was reading (the tasks of a deletion's look-up: none)."""
    if not tasks:
        return ""
    return f"for task {tasks[0]}" if len(tasks) == 1 else f"for {len(tasks)} tasks ({tasks[0]}, ...)"


def _listed(value, what: str) -> list:
    if not isinstance(value, list):
        raise Refused(400, f"{what} must be a list")
    return value


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
                max_body: int = MAX_BODY, max_tasks: int = MAX_TASKS,
                hosts: Optional[Iterable[str]] = None) -> Starlette:
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
    max_body : int, default=MAX_BODY (8 MiB)
        Larger request bodies are refused (413).
    max_tasks : int, default=MAX_TASKS (5,000)
        A ``/predict`` of more tasks is refused (413).
    hosts : iterable of str, optional
        The host names (``Host`` header) answered besides this machine's own names: the name by which
        Label Studio reaches the backend (``skdbal`` in a Docker network); ``"*"`` for any. By
        default: loopback names only without a ``token``, any name with one. Another name is
        refused (403): a web page rebound to 127.0.0.1 (DNS rebinding) reaches nothing.

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

    Without a token, only this machine's names (and those in ``hosts``) are answered:

    >>> app = backend_app(LabelStudioSync(session, client, project=1), hosts=["skdbal"])
    >>> TestClient(app, base_url="http://127.0.0.1:9090").get("/health").status_code
    200
    >>> TestClient(app, base_url="http://skdbal:9090").get("/health").status_code
    200
    >>> TestClient(app, base_url="http://rebound.example.org:9090").get("/health").json()["error"]
    "this backend answers to 127.0.0.1, ::1, localhost and skdbal, not to 'rebound.example.org'"
    >>> app.state.events.close()
    >>> session.store.close()
    """
    from starlette.middleware import Middleware

    app = Starlette(routes=[Route("/", health), Route("/health", health), Route("/setup", setup, methods=["POST"]),
                            Route("/versions", versions), Route("/predict", predict, methods=["POST"]),
                            Route("/webhook", webhook, methods=["POST"]), Route("/train", train, methods=["POST"])],
                    middleware=[Middleware(_Failures), Middleware(_Hosts, names=_host_names(hosts, token)),
                                Middleware(_Auth, token=token)],
                    exception_handlers={Refused: _refused, HTTPException: _http_error})
    # what the handlers read (request.app.state)
    app.state.events = WebhookWorker(sync)
    app.state.sync = sync
    app.state.guess_timeout, app.state.max_body, app.state.max_tasks = guess_timeout, max_body, max_tasks
    return app


def _host_names(hosts: Optional[Iterable[str]], token: Optional[str]) -> Optional[frozenset]:
    """The host names answered, None for any: see :func:`backend_app`'s ``hosts``."""
    if hosts is None:
        return None if token is not None else LOOPBACK_NAMES
    names = {str(h).strip().lower().rstrip(".") for h in ([hosts] if isinstance(hosts, str) else hosts)}
    names.discard("")
    return None if "*" in names else LOOPBACK_NAMES | names


class _Hosts:
    """The middleware that refuses (403) a request whose ``Host`` is not one of ``names`` (None: all
    pass; a request without a ``Host`` header is an HTTP/1.0 client's, not a browser's, and passes)."""

    def __init__(self, app, names: Optional[frozenset] = None):
        self.app, self.names = app, names

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and self.names is not None:
            host = dict(scope.get("headers") or []).get(b"host")
            if host is not None:
                try:
                    name = urlsplit("//" + host.decode("latin-1")).hostname or ""
                except ValueError:                 # "[::1" and the like
                    name = host.decode("latin-1")
                name = name.rstrip(".")
                if name not in self.names:
                    listed = sorted(self.names)
                    said = f"{', '.join(listed[:-1])} and {listed[-1]}" if len(listed) > 1 else listed[0]
                    response = JSONResponse({"error": f"this backend answers to {said}, not to {name[:100]!r}"},
                                            status_code=403)
                    return await response(scope, receive, send)
        return await self.app(scope, receive, send)


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
    given = data.get("project")
    if not isinstance(given, str):       # Label Studio's is a string; a number must be a whole one
        given = str(_id_in(given, "project") or "")
    given = given.split(".")[0]
    if given.isascii() and given.isdigit() and int(given) != sync.project:
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
    if len(tasks) > request.app.state.max_tasks:
        raise Refused(413, f"at most {request.app.state.max_tasks} tasks per /predict; this one has {len(tasks)}: "
                           f"ask for fewer at a time")
    ids = [_id_in(t, f"tasks[{k}]") for k, t in enumerate(tasks)]
    name = _version_name(sync)
    predictions = sync.predictions        # replaced as a whole by each push: read once
    items = [None if t is None else sync.item_of_task(t) for t in ids]
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
        guess = None if item is None else guesses.get(item)
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
