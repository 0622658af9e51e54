"""A labelling session kept in step with a Label Studio project, through ``label-studio-sdk``.

:class:`LabelStudioSync` imports the pool as tasks (or finds them by a key in
their data), records the annotations in the session's store (pulled, or
brought by the webhooks of :mod:`skdbal.labelstudio.backend`), and pushes,
after each query, a prediction per unlabelled task with the model's label and
the acquisition score as ``score``, so that annotators sort the Data Manager
by it. Either side can restart: annotations are read again, and each is
recorded once (its id and update time are the store's request id); a
version's prediction goes to a task once.
"""
from __future__ import annotations

import json
import logging
import threading
import time
from datetime import timedelta
from typing import Any, Callable, Dict, List, Optional, Set
from xml.etree import ElementTree

import numpy as np

from ._audit_order import session_audit_order
from ._files import file_key
from ._queries import ANNOTATED, DATETIME, UNLABELLED, updated_filter, utc_time, version_filter
from ._unknown import KeptAside, chosen_label

__all__ = ["SAMPLINGS", "LabelStudioSync", "choices_of", "file_key", "is_transient", "list_tasks", "unit_scores"]


logger = logging.getLogger("skdbal.labelstudio")


def _plain(obj) -> dict:
    """An SDK object (a pydantic model) or a dict, as a dict."""
    if isinstance(obj, dict):
        return obj
    for method in ("model_dump", "dict"):
        if hasattr(obj, method):
            return getattr(obj, method)()
    return dict(vars(obj))


def _user_id(user):
    """An annotation's ``completed_by`` as the user's id: a task listed gives the id, a task read alone
    the user as an object (with the email, which is not the store's to keep)."""
    if isinstance(user, dict):
        return user.get("id")
    return getattr(user, "id", user)


def choices_of(label_config: str) -> Dict[str, Any]:
    """The single-choice classification of a labelling config: ``from_name``, ``to_name`` and the ``choices``.

    Raises
    ------
    ValueError
        If the config has no ``<Choices>`` tag, or more than one.

    Examples
    --------
    >>> from skdbal.labelstudio import choices_of
    >>> config = '''<View><Image name="image" value="$image"/>
    ...   <Choices name="label" toName="image" choice="single"><Choice value="cat"/><Choice value="dog"/></Choices>
    ... </View>'''
    >>> choices_of(config)
    {'from_name': 'label', 'to_name': 'image', 'choices': ['cat', 'dog'], 'data': 'image'}
    """
    root = ElementTree.fromstring(label_config)
    tags = [t for t in root.iter() if t.tag == "Choices"]
    if len(tags) != 1:
        raise ValueError(f"the labelling config needs exactly one <Choices> tag (a classification); it has {len(tags)}")
    tag = tags[0]
    to_name = tag.get("toName")
    source = next((t for t in root.iter() if t.get("name") == to_name), None)
    value = source.get("value", "") if source is not None else ""
    return {"from_name": tag.get("name"), "to_name": to_name,
            "choices": [c.get("value") for c in tag.iter("Choice")], "data": value.lstrip("$") or None}


def unit_scores(scores) -> np.ndarray:
    """Acquisition scores mapped onto [0, 1] in the same order, as Label Studio takes a prediction's
    ``score`` (it drops predictions scored outside it): min-max within the batch, 1 where all are
    equal, 0 for a score that is not finite.

    Examples
    --------
    >>> from skdbal.labelstudio.sync import unit_scores
    >>> unit_scores([2.5, 0.5, 1.5]).tolist()
    [1.0, 0.0, 0.5]
    >>> unit_scores([0.7, 0.7]).tolist()
    [1.0, 1.0]
    """
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    finite = np.isfinite(s)
    out = np.zeros_like(s)
    if finite.any():
        lo, hi = s[finite].min(), s[finite].max()
        out[finite] = (s[finite] - lo) / (hi - lo) if hi > lo else 1.0
    return out


def list_tasks(client, project: int, *, page_size: int = 100, **params) -> List[dict]:
    """All of a project's tasks (``params`` go to ``client.tasks.list``: ``fields``, ``query``...),
    page by page, with no request past the last page.

    ``label-studio-sdk``'s own iteration asks for the page after every page
    that had tasks, and ends at the 404 that Label Studio answers for it (and
    logs as an error, ``Invalid page.``, with a traceback). Here each page's
    ``total`` (the number of tasks the query matches) says when the last one
    has come, and an empty page ends the list; a page of fewer tasks than
    ``page_size`` ends it only where no total is given (a server that caps
    its pages below ``page_size`` serves short pages that are not the last).
    A 404 after the first page (tasks deleted between two pages) ends it too;
    one on the first page is raised.

    Parameters
    ----------
    client : label_studio_sdk.LabelStudio
        A connected client.
    project : int
        The project's id.
    page_size : int, default=100
        Tasks asked for per request (Label Studio's default page size).
    **params
        Further arguments of ``client.tasks.list``.

    Returns
    -------
    list of dict
        The tasks, in the server's order.

    Examples
    --------
    Five tasks, two a page (a stand-in for the client that records the pages asked for):

    >>> from types import SimpleNamespace
    >>> from skdbal.labelstudio import list_tasks
    >>> asked = []
    >>> def tasks_list(project, page, page_size, **params):
    ...     asked.append(page)
    ...     ids = range((page - 1) * page_size, min(5, page * page_size))
    ...     return SimpleNamespace(items=[{"id": i} for i in ids], response=SimpleNamespace(total=5))
    >>> client = SimpleNamespace(tasks=SimpleNamespace(list=tasks_list))
    >>> [t["id"] for t in list_tasks(client, 1, page_size=2)], asked
    ([0, 1, 2, 3, 4], [1, 2, 3])
    """
    tasks: List[dict] = []
    page = 1
    while True:
        try:
            pager = client.tasks.list(project=project, page=page, page_size=page_size, **params)
        except Exception as exc:  # noqa: BLE001 - a 404 past the first page: the list shrank meanwhile
            if page > 1 and getattr(exc, "status_code", None) == 404:
                return tasks
            raise
        items = [_plain(t) for t in (pager.items or [])]
        tasks.extend(items)
        total = getattr(getattr(pager, "response", None), "total", None)
        if not items or (len(tasks) >= total if isinstance(total, int) else len(items) < page_size):
            return tasks
        page += 1


#: An incremental pull asks for the tasks updated since this many seconds before the latest update it saw:
#: a task saved just before another but committed after the pull read would otherwise be missed.
_OVERLAP_S = 30.0
#: Seconds between two imports of a push's predictions after its head: an import holds SQLite's write
#: lock, and Label Studio answered "database is locked" (a 500) to Label All Tasks during 1,000-task ones.
_BETWEEN_IMPORTS_S = 0.05
#: The values of :class:`LabelStudioSync`'s ``sampling``: the direction of the pushed scores.
SAMPLINGS = ("queue", "uncertainty")


def _versions_of(task: dict) -> set:
    """The model versions of a task's predictions, from the Data Manager's ``predictions_model_versions``
    (a string of them joined by commas, or a list), or from its ``predictions``."""
    found = task.get("predictions_model_versions")
    names: Set[str] = set()
    if isinstance(found, str):
        names.update(v.strip() for v in found.split(","))
    elif isinstance(found, (list, tuple)):
        names.update(str(v).strip() for v in found)
    for p in task.get("predictions") or []:
        names.add(str(_plain(p).get("model_version")))
    return {n for n in names if n}


class LabelStudioSync:
    """Keep a :class:`~skdbal.labelling.LabellingSession` and a Label Studio project in step.

    Parameters
    ----------
    session : LabellingSession
        The session (its store is where the annotations go).
    client : label_studio_sdk.LabelStudio
        A connected client.
    project : int
        The project's id. Its labelling config must have one ``<Choices>``
        that offers every one of the session's classes; an annotation that
        chose another value is kept aside (:meth:`unknown_labels`).
    key_field : str, default="skdbal_key"
        The task data field that holds a pool item's key: how tasks and
        items find each other, across restarts.
    key_of : callable, optional
        ``key_of(data)``, a task's pool key from its data (or None): how
        tasks made outside skdbal are attached, e.g. by their file name
        (:func:`file_key`). By default ``data[key_field]``.
    model_version_prefix : str, default="skdbal"
        Predictions are pushed under ``f"{prefix}-v{version}"``.
    head : int, default=100
        A push imports this many predictions, the best scored, then makes
        their version the project's, then imports the rest, as many a
        request, with a short pause between (an import holds SQLite's write
        lock): the queue's head is the new model's after one small request.
    page_size : int, default=100
        Tasks read per request by a pull and by :meth:`map_tasks`; the
        last page is known from the total Label Studio gives, so no request
        goes past it (:func:`list_tasks`).
    sampling : {"queue", "uncertainty"}, default="queue"
        Which way the pushed ``score`` points, for the way annotators are
        served. ``"queue"``: the best item scores highest, and the queue's
        Data Manager tab (:meth:`queue_view`) sorts by score, highest first;
        annotators open the tab and label its tasks as displayed. Label
        Studio serves that tab's head to every annotator who asks at once (its
        Data Manager queue ignores task locks), so it suits one annotator.
        ``"uncertainty"``: for Label Studio's own *Uncertainty sampling*,
        which serves the lowest score first and locks each served task to its
        annotator: the score pushed is ``1 - unit score`` (:func:`unit_scores`;
        before the first model, the cold-start order's best scores 0),
        :meth:`queue_view` sets the project's sampling to ``"Uncertainty
        sampling"`` and sorts the tab lowest first; annotators use *Label All
        Tasks* (Label Studio serves only tasks with a prediction of the
        project's version, the lowest score first, each to one annotator at
        a time), and two of them are served different tasks, each the best
        one left: ``skdbal labelstudio``'s default. In ``"queue"`` mode a project left in
        Uncertainty sampling (which would serve the worst first) is set back
        to ``"Sequential sampling"``.

    Examples
    --------
    Against a running Label Studio (see the guide, "With Label Studio")::

        from label_studio_sdk import LabelStudio
        sync = LabelStudioSync(session, LabelStudio(base_url=url, api_key=token), project=1)
        sync.import_tasks(lambda i: {"image": data_uri(i)})
        sync.queue_view()           # the tab, and the project's sampling for ``sampling``
        sync.pull()                 # what was labelled meanwhile, before the first query
        with session:
            sync.run(stop=threading.Event())

    A project whose choices are not the session's classes is refused at
    once (here a stand-in for the client, which answers ``projects.get``):

    >>> import os, tempfile
    >>> import numpy as np
    >>> from types import SimpleNamespace
    >>> from sklearn.linear_model import LogisticRegression
    >>> from skdbal import ActiveLearner
    >>> from skdbal.labelling import LabellingSession
    >>> from skdbal.labelstudio import LabelStudioSync
    >>> config = '<View><Image name="i" value="$i"/><Choices name="c" toName="i"><Choice value="cat"/></Choices></View>'
    >>> client = SimpleNamespace(projects=SimpleNamespace(get=lambda id: {"label_config": config}))
    >>> session = LabellingSession(ActiveLearner(LogisticRegression(), random_state=0, seeding="step"), np.eye(4),
    ...                            classes=["cat", "dog"], store=os.path.join(tempfile.mkdtemp(), "s.db"),
    ...                            batch_size=2)
    >>> LabelStudioSync(session, client, project=1)
    Traceback (most recent call last):
        ...
    ValueError: project 1's choices ['cat'] lack the session's classes ['dog']: add them to its labelling config
    """

    def __init__(self, session, client, project: int, *, key_field: str = "skdbal_key",
                 key_of: Optional[Callable[[dict], Optional[str]]] = None, model_version_prefix: str = "skdbal",
                 head: int = 100, page_size: int = 100, sampling: str = "queue"):
        if sampling not in SAMPLINGS:
            raise ValueError(f"sampling must be one of {SAMPLINGS}; got {sampling!r}")
        self.sampling = sampling
        self.session = session
        self.client = client
        self.project = int(project)
        self.key_field = key_field
        self.key_of = key_of
        self.model_version_prefix = model_version_prefix
        self.label_config = _plain(client.projects.get(id=self.project))["label_config"]
        config = choices_of(self.label_config)
        classes = [str(c) for c in session.classes]
        missing = [c for c in classes if c not in config["choices"]]
        if missing:
            raise ValueError(f"project {self.project}'s choices {config['choices']} lack the session's classes "
                             f"{missing}: add them to its labelling config")
        #: The tasks whose latest annotation chose a label outside the classes (:meth:`unknown_labels`).
        self.kept_aside = KeptAside(classes)
        extra = [c for c in config["choices"] if c not in classes]
        if extra:
            logger.warning("skdbal labelstudio: project %s also offers %s, which are not classes: their annotations "
                           "are kept aside, not trained on", self.project, extra)
        self.from_name, self.to_name = config["from_name"], config["to_name"]
        self._by_key = {k: i for i, k in enumerate(session.keys)}
        self._task_of: Dict[int, int] = {}       # pool item -> task id
        self._item_of: Dict[int, int] = {}       # task id -> pool item (the inverse, made with it)
        self._lock = threading.Lock()
        self.pushed_version: Optional[int] = None
        self.head = int(head)
        self.page_size = int(page_size)
        self.last_error: Optional[BaseException] = None
        self._pending: Optional[Dict[str, Any]] = None
        self._send_lock = threading.Lock()
        #: The latest pushed prediction of each unlabelled item (pool position -> Label Studio's prediction).
        self.predictions: Dict[int, dict] = {}
        self._since = None           # the latest task update time a pull has seen (None: the next pull is full)
        self._since_seen = 0.0       # when (time.monotonic here) a pull first saw it
        self._settled = False        # whether a pull has read with the overlap after the overlap has passed
        self._now = time.monotonic
        self._annotated: set = set()  # the tasks with annotations in Label Studio, as the pulls have seen them
        #: How many pulls read every annotated task (the first, and those a count check called for).
        self.full_pulls = 0
        session.on_query.append(self._after_query)

    # ------------------------------------------------------------ tasks
    def _tasks(self, fields: str = "task_only", query: Optional[str] = None) -> List[dict]:
        return list_tasks(self.client, self.project, page_size=self.page_size, fields=fields,
                          **({"query": query} if query else {}))

    def import_tasks(self, data: Callable[[int], dict], *, chunk: int = 500) -> int:
        """Create a task for each pool item that has none (found by its key); how many were made.

        ``data(i)`` gives item ``i``'s task data (its image as a URL or a
        data URI, its fields...); the key is added to it.
        """
        self.map_tasks()
        missing = [i for i in range(len(self.session.keys)) if i not in self._task_of]
        for start in range(0, len(missing), chunk):
            part = missing[start:start + chunk]
            self.client.projects.import_tasks(
                id=self.project, request=[{"data": {**data(i), self.key_field: self.session.keys[i]}} for i in part])
        self.map_tasks()
        return len(missing)

    @property
    def task_of(self) -> Dict[int, int]:
        """Pool item -> Label Studio task id, as :meth:`map_tasks` last found them (a copy)."""
        return dict(self._task_of)

    def item_of_task(self, task) -> Optional[int]:
        """The pool item of Label Studio task ``task``, as :meth:`map_tasks` last found it, or None."""
        return self._item_of.get(task)

    def map_tasks(self) -> int:
        """Find the project's tasks of pool items (by ``key_of``, else ``key_field``); how many there are."""
        found = {}
        for t in self._tasks():
            data = t.get("data") or {}
            key = self.key_of(data) if self.key_of is not None else data.get(self.key_field)
            if key is not None and str(key) in self._by_key:
                found[self._by_key[str(key)]] = t["id"]
        inverse = {t: i for i, t in found.items()}
        with self._lock:
            self._task_of, self._item_of = found, inverse
        return len(found)

    def queue_view(self, title: str = "skdbal queue") -> int:
        """A Data Manager tab of the project's unlabelled tasks (no annotation, none skipped) sorted by
        prediction score, best first (made once; found by its title after, its filter and ordering set
        to the ``sampling``'s direction); its id. Annotators open it, or sort any tab by *Prediction
        score*. It also sets the project's sampling for ``sampling`` (see the class's parameters)."""
        wanted = {"ordering": ["-tasks:predictions_score" if self.sampling == "queue" else "tasks:predictions_score"],
                  "filters": UNLABELLED}
        self._set_sampling()
        for view in self.client.views.list(project=self.project):
            view = _plain(view)
            data = view.get("data") or {}
            if data.get("title") == title:
                if any(data.get(k) != v for k, v in wanted.items()):
                    self.client.views.update(id=view["id"], project=self.project, data={**data, **wanted})
                return view["id"]
        view = self.client.views.create(project=self.project, data={
            "title": title, **wanted,
            "hiddenColumns": {"explore": ["tasks:inner_id", "tasks:annotations_results", "tasks:predictions_results",
                                          "tasks:file_upload", "tasks:storage_filename", "tasks:created_at",
                                          "tasks:updated_at", "tasks:updated_by", "tasks:avg_lead_time",
                                          "tasks:draft_exists"], "labeling": []}})
        return _plain(view)["id"]

    def _set_sampling(self) -> None:
        """The project's sampling for ``sampling``: Uncertainty sampling (lowest score first) for
        ``"uncertainty"``; for ``"queue"``, Sequential sampling if it was Uncertainty sampling."""
        current = _plain(self.client.projects.get(id=self.project)).get("sampling")
        if self.sampling == "uncertainty" and current != "Uncertainty sampling":
            self.client.projects.update(id=self.project, sampling="Uncertainty sampling")
        elif self.sampling == "queue" and current == "Uncertainty sampling":
            self.client.projects.update(id=self.project, sampling="Sequential sampling")

    # ------------------------------------------------------------- pull
    def pull(self) -> int:
        """Record the project's annotations in the session's store; the number of new events.

        The latest annotation of a task that is not cancelled is its label
        (a relabel is a newer annotation, or an update of one); a task whose
        annotations are all cancelled is skipped; a label that came from
        Label Studio and whose annotations were all deleted there is undone.
        Each annotation is recorded once: its id and update time are the
        request id, so a pull after a restart of either side adds nothing twice.

        The first pull (after a start) reads every task that has annotations
        (a Data Manager filter); after it, a pull reads only the tasks updated
        since the latest update it saw, as Label Studio 1.23 moves a task's
        ``updated_at`` when one of its annotations is created, updated,
        cancelled (a skip) or deleted, and not when predictions are imported.
        Until a pull has read, ``_OVERLAP_S`` (30 s) after that latest update
        was first seen, the tasks updated since 30 s before it, it reads those
        too: a task stamped before the read but saved after it is not missed,
        and an idle pull then reads no task. A second request counts the tasks
        with annotations; where the count is not what the pulls have seen
        (tasks deleted leave no task to stamp), the pull reads them all again,
        and a label whose task that read misses is taken back only once the
        task read by id lists no annotation. A change committed more than 30 s
        after its stamp that leaves the count as it was is missed until skdbal
        restarts. ``page_size`` tasks a request (:func:`list_tasks`).
        """
        if self._since is None:
            return self._full_pull()
        started, latest = self._now(), self._since
        since = latest if self._settled else latest - timedelta(seconds=_OVERLAP_S)
        tasks = self._tasks(fields="all", query=updated_filter(since.strftime(DATETIME)))
        n = self.record(tasks)
        self._saw(tasks)
        if self._since == latest and started - self._since_seen >= _OVERLAP_S:
            self._settled = True     # read with the overlap once it had passed: a late commit is in by now
        if self._count_annotated() != len(self._annotated):      # a change that left updated_at as it was
            return n + self._full_pull()
        return n

    def _full_pull(self) -> int:
        """Read every task with annotations, and undo the labels of those that have none left."""
        self.full_pulls += 1
        current = self.session.store.current_labels()
        tasks = self._tasks(fields="all", query=ANNOTATED)           # only those with annotations: O(labelled)
        by_task = self._item_of     # replaced as a whole by map_tasks, never changed
        seen = {by_task.get(t["id"]) for t in tasks}
        missing = {self._task_of[i] for i, r in current.items()
                   if i not in seen and i in self._task_of and str(r["annotator"]).startswith("labelstudio:")}
        read = {t["id"] for t in tasks}         # and a task kept aside whose annotations are all gone
        missing |= {r["task"] for r in self.kept_aside.rows() if r["task"] not in read}
        n = self.record(tasks + self._confirm_gone(missing))
        self._annotated = set()
        self._saw(tasks)
        return n

    def _confirm_gone(self, tasks: Set[int]) -> List[dict]:
        """``tasks`` read by id (one request), with all their annotations; one gone is given with none.
        A task just annotated may be missing from the annotated filter's read for a moment, and its label
        must not be taken back for that."""
        if not tasks:
            return []
        query = json.dumps({"selectedItems": {"all": False, "included": sorted(tasks)}})
        found = {t["id"]: t for t in list_tasks(self.client, self.project, page_size=self.page_size,
                                                 fields="all", query=query)}
        return [found.get(t, {"id": t, "annotations": []}) for t in sorted(tasks)]

    def _saw(self, tasks: List[dict]) -> None:
        """Note the tasks read: which have annotations, and the latest update time."""
        for t in tasks:
            (self._annotated.add if t.get("annotations") else self._annotated.discard)(t["id"])
            updated = utc_time(t.get("updated_at"))
            if updated is not None and (self._since is None or updated > self._since):
                self._since, self._since_seen, self._settled = updated, self._now(), False

    def _count_annotated(self) -> Optional[int]:
        """How many tasks have annotations in Label Studio: the total of a page of one."""
        pager = self.client.tasks.list(project=self.project, page=1, page_size=1, fields="task_only",
                                       query=ANNOTATED)
        total = getattr(getattr(pager, "response", None), "total", None)
        return total if isinstance(total, int) else None

    def record(self, tasks: List[dict]) -> int:
        """Record these tasks' annotations in the session's store, each task as a whole (its ``id`` and
        its ``annotations``, all of them: a task given with none has had its annotations deleted); the
        number of new events. What :meth:`pull` does with the tasks it read, and what a webhook's
        event does with the task it names. A task of no pool item is passed over."""
        session, store = self.session, self.session.store
        by_task = self._item_of     # replaced as a whole by map_tasks, never changed
        current = store.current_labels()
        skipped = set(store.skipped(current))
        n, last = 0, store.last_event()
        for task in tasks:
            item = by_task.get(task["id"])
            if item is None:
                continue
            annotations = sorted((_plain(a) for a in (task.get("annotations") or [])),
                                 key=lambda a: (str(a.get("updated_at")), a["id"]))
            done = [a for a in annotations if not a.get("was_cancelled")]
            if done:
                a = done[-1]
                label, reason = chosen_label(a, self.from_name)
                annotator = f"labelstudio:{_user_id(a.get('completed_by'))}"
                if reason or label not in self.kept_aside.classes:  # kept aside; the item's labels from LS taken back
                    self.kept_aside.keep({"task": task["id"], "item": item, "key": session.keys[item], "label": label,
                                          "annotator": annotator, "annotation": a["id"],
                                          "updated_at": str(a.get("updated_at")), "reason": reason})
                    n += self._take_back(item, current.get(item))
                    continue
            self.kept_aside.drop(task["id"])
            if done:
                request_id = f"labelstudio:{a['id']}:{a.get('updated_at')}"
                event = session.submit(item, label, annotator=annotator, request_id=request_id)
                n += event > last                   # a replayed annotation returns its old event
                last = max(last, event)
            elif annotations and item not in current and item not in skipped:
                session.skip(item, annotator=f"labelstudio:{_user_id(annotations[-1].get('completed_by'))}")
                n += 1
            elif not annotations:     # deleted in Label Studio: every label it gave the item is taken back
                n += self._take_back(item, current.get(item))
        return n

    def _take_back(self, item: int, label: Optional[dict]) -> int:
        """Undo the item's labels that came from Label Studio, from ``label`` (its current one) down (an
        undo takes back the latest; a relabel left the earlier below); how many."""
        n = 0
        while label is not None and str(label["annotator"]).startswith("labelstudio:"):
            self.session.undo(item, annotator=label["annotator"])
            n += 1
            label = self.session.store.current_labels().get(item)
        return n

    def unknown_labels(self) -> List[dict]:
        """The annotations kept aside: each task whose latest annotation (not cancelled) chose a label that
        is not one of the session's classes, or named no single class (several choices, no choice, only
        another control's result), as ``task``, ``item``, ``key``, ``label`` (cut to 1,000 characters;
        several choices as a JSON list), ``annotator``, ``annotation`` (its id), ``updated_at`` and
        ``reason`` (``"not a class"``, ``"several choices"``, ``"no choice"`` or ``"another control"``),
        by task id. Such an annotation is logged once (``skdbal.labelstudio``, WARNING), is not recorded
        in the store (a label Label Studio had given the item before is taken back), and its item gets
        no prediction; a relabel with a class, or its deletion, ends it, and a session whose classes
        include the label records it at its first pull (a new store: a session's classes are fixed)."""
        return self.kept_aside.rows()

    def status(self) -> dict:
        """The session's :meth:`~skdbal.labelling.LabellingSession.status`, with ``unknown_labels``: how
        many annotations are kept aside (:meth:`unknown_labels`), and ``not_one_class``: how many of
        them name no single class."""
        return {**self.session.status(), "unknown_labels": len(self.kept_aside),
                "not_one_class": self.kept_aside.not_one_class()}

    # ------------------------------------------------------------- push
    def _after_query(self, positions, scores) -> None:
        """In the session's loop thread, after each query: the first batch, or the new model's predictions.
        A push that fails for want of Label Studio (unreachable, or a 5xx) is kept and sent again by
        :meth:`run`; the session's loop goes on."""
        if getattr(self.session.learner, "step_", -1) < 0:
            self.push_first_batch(positions)
        else:
            self.push()

    def push_first_batch(self, positions) -> int:
        """Before any model: every task gets a prediction of ``skdbal-first`` with no label, scored by the
        order the session offers the pool in before its first model (:func:`cold_start_order
        <skdbal.labelstudio._cold_start.cold_start_order>`: the first batch, ``positions``, then a covering
        order), best first, so that Label Studio serves no task unscored, nor by its id, after the first
        batch. Sent once per task, across restarts (see :meth:`push`); the head first, then the rest in a
        thread of its own, as a model's push."""
        from ._cold_start import cold_start_order, rank_scores

        session = self.session
        name = f"{self.model_version_prefix}-first"
        answered = self._answered()
        order = [i for i in cold_start_order(session.X, positions, session.batch_size, session.board.seed())
                 if i in self._task_of and i not in answered]
        servable = set(self._task_of) - answered       # an audit item also needs a task, and no answer
        order = session_audit_order(session, order, [0.0] * len(order), servable)[0]     # the audits spread in
        unit = rank_scores(len(order)) if order else np.zeros(0)
        unit = unit if self.sampling == "queue" else 1.0 - unit
        request = [{"task": self._task_of[i], "model_version": name, "score": float(u), "result": []}
                   for i, u in zip(order, unit)]
        return self._send(-1, name, request, background=True)

    def push(self) -> int:
        """Give every unlabelled task a prediction of the current model version: its guess, and the
        acquisition score, mapped onto [0, 1] in the same order (:func:`unit_scores`), as ``score``;
        set it as the project's model version. How many were pushed. In ``"uncertainty"`` sampling
        the score is ``1 - unit score``, so that the lowest is the best. Items set aside for audits get one
        where their audits fall only (:func:`~skdbal.labelstudio._audit_order.audit_order`).

        A version's prediction goes to a task at most once, across kills and restarts: before
        sending, the push asks Label Studio which tasks already hold a prediction of this model
        version (a Data Manager filter on ``predictions_model_versions``, checked exactly), and
        sends the others only; it asks again after a failed request (one that Label Studio may have
        carried out before the connection broke).

        Called from the session's loop thread after each query (it uses the learner)."""
        learner = self.session.learner
        version = getattr(learner, "step_", -1)
        if version < 0 or version == self.pushed_version:
            return 0
        unlabelled = np.flatnonzero(~learner.labelled_mask_)
        if not len(unlabelled):
            return 0
        idx, _, scores = learner.query(n_instances=len(unlabelled) if learner.pool_subsample is None else
                                       min(learner.pool_subsample, len(unlabelled)), return_scores=True)
        guesses = learner.estimator_.predict(learner.X_pool_[idx])
        name = f"{self.model_version_prefix}-v{version}"
        unit = unit_scores(scores) if self.sampling == "queue" else 1.0 - unit_scores(scores)
        # the learner's mask holds the labels its model was trained on; the store may hold more (labelled in
        # Label Studio while skdbal was down, pulled before a resumed model): those are never scored
        answered = self._answered()
        keep = [k for k, i in enumerate(idx) if int(i) in self._task_of and int(i) not in answered]
        keep = sorted(keep, key=lambda k: -unit[k] if self.sampling == "queue" else unit[k])     # best first
        guess_of = {int(idx[k]): guesses[k] for k in keep}
        items, scored = session_audit_order(self.session, [int(idx[k]) for k in keep], [unit[k] for k in keep],
                                            set(self._task_of) - answered)
        unguessed = [i for i in items if i not in guess_of]        # audit items the query did not score
        if unguessed:
            guess_of.update(zip(unguessed, learner.estimator_.predict(learner.X_pool_[np.asarray(unguessed)])))
        request = [{"task": self._task_of[i], "model_version": name, "score": float(u),
                    "result": [{"from_name": self.from_name, "to_name": self.to_name, "type": "choices",
                                "value": {"choices": [str(guess_of[i])]}}]} for i, u in zip(items, scored)]
        # each task's prediction of the latest version, by pool item: what an ML backend's /predict serves
        self.predictions = dict(zip(items, request))
        return self._send(version, name, request, background=True)

    def _answered(self) -> set:
        """The pool items labelled or skipped in the store now, and those kept aside."""
        store = self.session.store
        current = store.current_labels()
        return set(current) | set(store.skipped(current)) | self.kept_aside.items()

    def resume_push(self) -> int:
        """Send what is left of a push that Label Studio's absence cut short; how many predictions were
        sent now (0: nothing was left, Label Studio is still away, or the push's tail is being imported
        by its own thread, which resumes it). :meth:`run` calls it after each pull, as does the backend's
        keeper (``skdbal labelstudio --backend``)."""
        return self._send(None)

    def _send(self, version: Optional[int], name: Optional[str] = None, request: Optional[List[dict]] = None,
              *, background: bool = False) -> int:
        """Send a push (or, with no arguments, what is left of one after a failure): import ``request``'s
        predictions, best first, and make ``name`` the project's model version as soon as the first
        ``head`` are in, so that the queue's head is the new model's while the rest are imported (a
        task with no prediction of the project's version sorts last). How many were sent in this
        call; 0 while Label Studio cannot be reached (what is left is kept, and sent by :meth:`run`).

        The Data Manager's "prediction score" of a task is that of the project's model version (Label
        Studio 1.23's default), so older versions' predictions are kept, as Label Studio keeps an ML
        backend's: deleting them would cost Label Studio about 16 ms each, in one transaction that
        holds SQLite's write lock (annotators' submissions would wait).

        With ``background=True`` (a model's push, from the session's loop) the call returns once the
        head is in and the version switched: the rest is imported by a thread of its own, so the loop
        can take the next labels and retrain meanwhile; a newer push ends it (the older version's
        other predictions would sort last anyway)."""
        with self._send_lock:
            if request is not None:
                order = sorted(request, key=lambda r: -r["score"] if self.sampling == "queue" else r["score"])
                self._pending = {"version": version, "name": name, "request": order, "sent": 0,
                                 "switched": not order, "checked": False}      # no predictions: no new version
            pending = self._pending
            if pending is None or (request is None and pending.get("tail")):
                return 0             # nothing left, or the rest is being imported by its own thread
            sent_before = pending["sent"]
            try:
                if not pending["checked"]:          # what Label Studio already holds of this version: not again
                    there = self._holding(pending["name"])
                    pending["request"] = [r for r in pending["request"][pending["sent"]:] if r["task"] not in there]
                    pending["sent"] = sent_before = 0
                    pending["checked"] = True
                request = pending["request"]
                while pending["sent"] < len(request) or not pending["switched"]:
                    if background and pending["switched"]:    # the head is in: the rest in a thread
                        self._tail_of(pending)
                        return pending["sent"] - sent_before
                    if pending["switched"] or pending["sent"] < min(self.head, len(request)):
                        end = pending["sent"] + self.head
                        if request:
                            if pending["switched"]:    # after the head: a pause between imports, so that
                                time.sleep(_BETWEEN_IMPORTS_S)    # annotators' writes get SQLite's lock
                            self.client.projects.import_predictions(id=self.project,
                                                                    request=request[pending["sent"]:end])
                        pending["sent"] = min(end, len(request))
                    else:     # Label Studio scores tasks by the predictions of the project's model version
                        self.client.projects.update(id=self.project, model_version=pending["name"])
                        pending["switched"] = True
                        if pending["version"] is not None and pending["version"] >= 0:
                            self.pushed_version = pending["version"]   # the queue's head is this version's
            except Exception as exc:  # noqa: BLE001 - only Label Studio being away is kept for later
                if not is_transient(exc):
                    raise
                self.last_error = exc
                pending["checked"] = False      # the failed request may have been carried out: ask again
                return pending["sent"] - sent_before
            self._pending = None
            if pending["version"] is not None and pending["version"] >= 0:
                self.pushed_version = pending["version"]
            return len(request) - sent_before

    def _tail_of(self, pending: dict) -> None:
        """Import what is left of ``pending`` after its head, in a thread, a request at a time, until it is
        sent, a newer push replaces it, or Label Studio cannot be reached (then :meth:`run`, or the
        backend's keeper, sends it with :meth:`resume_push`)."""
        def send_rest():
            try:
                send()
            finally:
                pending["tail"] = False              # what is left (after a failure) is resume_push's again

        def send():
            while True:
                time.sleep(_BETWEEN_IMPORTS_S)        # annotators' writes get SQLite's lock between imports
                with self._send_lock:
                    if self._pending is not pending:  # a newer push, or all sent by resume_push
                        return
                    request = pending["request"]
                    end = pending["sent"] + self.head
                    try:
                        self.client.projects.import_predictions(id=self.project,
                                                                request=request[pending["sent"]:end])
                    except Exception as exc:  # noqa: BLE001 - kept for resume_push; any other error is
                        self.last_error = exc  # said there too, as the same request fails again
                        pending["checked"] = False
                        return
                    pending["sent"] = min(end, len(request))
                    if pending["sent"] >= len(request):
                        self._pending = None
                        return

        pending["tail"] = True
        threading.Thread(target=send_rest, name="skdbal-push-rest", daemon=True).start()

    def _holding(self, name: str) -> set:
        """The tasks that hold a prediction of model version ``name`` in Label Studio (a Data Manager
        filter, then an exact check of each task's versions)."""
        tasks = self._tasks(fields="task_only", query=version_filter(name))
        return {t["id"] for t in tasks if name in _versions_of(t)}

    # -------------------------------------------------------------- run
    def run(self, stop: threading.Event, interval: float = 2.0) -> None:
        """Pull every ``interval`` seconds until ``stop`` is set (the pushes follow the session's
        queries), sending again a push that failed. While Label Studio cannot be reached the pulls
        and pushes wait and retry (the error is in ``last_error``); any other error, or the
        session's loop failing, ends the run with it."""
        while not stop.is_set():
            if self.session.error is not None:
                raise RuntimeError("the session's loop failed") from self.session.error
            try:
                self.pull()
                self.resume_push()
            except Exception as exc:  # noqa: BLE001
                if not is_transient(exc):
                    raise
                self.last_error = exc
            stop.wait(interval)


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` is Label Studio being away (no connection, a time-out, a 5xx answer, a 429), to
    retry, rather than a request it refused.

    Examples
    --------
    >>> import httpx
    >>> from skdbal.labelstudio.sync import is_transient
    >>> is_transient(httpx.ConnectError("refused")), is_transient(ValueError("bad"))
    (True, False)
    """
    import httpx

    if isinstance(exc, httpx.TransportError):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and (status >= 500 or status == 429)
