"""A labelling session kept in step with a Label Studio project, through ``label-studio-sdk``.

skdbal is a client of Label Studio (not an ML backend that Label Studio
calls): it imports the pool as tasks (or finds them by a key in their
data), pulls the annotations into the session's store, and pushes, after
each query, a prediction per unlabelled task with the model's label and the
acquisition score as ``score``, so that annotators sort the Data Manager by
it. Label Studio need not reach skdbal over the network, and either side can
restart: annotations are pulled again, and each is recorded once (its id
and update time are the store's request id).
"""
from __future__ import annotations

import threading
from typing import Callable, Dict, List, Optional
from xml.etree import ElementTree

import numpy as np

__all__ = ["LabelStudioSync", "choices_of", "unit_scores"]


def _plain(obj) -> dict:
    """An SDK object (a pydantic model) or a dict, as a dict."""
    if isinstance(obj, dict):
        return obj
    for method in ("model_dump", "dict"):
        if hasattr(obj, method):
            return getattr(obj, method)()
    return dict(vars(obj))


def choices_of(label_config: str) -> Dict[str, object]:
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
        whose values are the session's classes.
    key_field : str, default="skdbal_key"
        The task data field that holds a pool item's key: how tasks and
        items find each other, across restarts.
    model_version_prefix : str, default="skdbal"
        Predictions are pushed under ``f"{prefix}-v{version}"``.

    Examples
    --------
    Against a running Label Studio (see the guide, "With Label Studio")::

        from label_studio_sdk import LabelStudio
        sync = LabelStudioSync(session, LabelStudio(base_url=url, api_key=token), project=1)
        sync.import_tasks(lambda i: {"image": data_uri(i)})
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
    ...                            classes=["cat", "dog"], store=os.path.join(tempfile.mkdtemp(), "s.db"))
    >>> LabelStudioSync(session, client, project=1)
    Traceback (most recent call last):
        ...
    ValueError: project 1's choices ['cat'] are not the session's classes ['cat', 'dog']
    """

    def __init__(self, session, client, project: int, *, key_field: str = "skdbal_key",
                 model_version_prefix: str = "skdbal"):
        self.session = session
        self.client = client
        self.project = int(project)
        self.key_field = key_field
        self.model_version_prefix = model_version_prefix
        config = choices_of(_plain(client.projects.get(id=self.project))["label_config"])
        classes = [str(c) for c in session.classes]
        if sorted(config["choices"]) != sorted(classes):
            raise ValueError(f"project {self.project}'s choices {config['choices']} are not the session's classes "
                             f"{classes}")
        self.from_name, self.to_name = config["from_name"], config["to_name"]
        self._by_key = {k: i for i, k in enumerate(session.keys)}
        self._task_of: Dict[int, int] = {}       # pool item -> task id
        self._lock = threading.Lock()
        self.pushed_version: Optional[int] = None
        session.on_query.append(self._after_query)

    # ------------------------------------------------------------ tasks
    def _tasks(self, fields: str = "task_only") -> List[dict]:
        return [_plain(t) for t in self.client.tasks.list(project=self.project, fields=fields)]

    def import_tasks(self, data: Callable[[int], dict], *, chunk: int = 500) -> int:
        """Create a task for each pool item that has none (found by ``key_field``); how many were made.

        ``data(i)`` gives item ``i``'s task data (its image as a URL or a
        data URI, its fields...); the key is added to it.
        """
        self._map_tasks()
        missing = [i for i in range(len(self.session.keys)) if i not in self._task_of]
        for start in range(0, len(missing), chunk):
            part = missing[start:start + chunk]
            self.client.projects.import_tasks(
                id=self.project, request=[{"data": {**data(i), self.key_field: self.session.keys[i]}} for i in part])
        self._map_tasks()
        return len(missing)

    def _map_tasks(self) -> None:
        found = {}
        for t in self._tasks():
            key = (t.get("data") or {}).get(self.key_field)
            if key is not None and str(key) in self._by_key:
                found[self._by_key[str(key)]] = t["id"]
        with self._lock:
            self._task_of = found

    def queue_view(self, title: str = "skdbal queue") -> int:
        """A Data Manager tab of the project sorted by prediction score, best first (made once; found by
        its title after); its id. Annotators open it, or sort any tab by *Prediction score*."""
        for view in self.client.views.list(project=self.project):
            view = _plain(view)
            if (view.get("data") or {}).get("title") == title:
                return view["id"]
        view = self.client.views.create(project=self.project, data={
            "title": title, "ordering": ["-tasks:predictions_score"],
            "hiddenColumns": {"explore": ["tasks:inner_id", "tasks:annotations_results", "tasks:predictions_results",
                                          "tasks:file_upload", "tasks:storage_filename", "tasks:created_at",
                                          "tasks:updated_at", "tasks:updated_by", "tasks:avg_lead_time",
                                          "tasks:draft_exists"], "labeling": []}})
        return _plain(view)["id"]

    # ------------------------------------------------------------- pull
    def pull(self) -> int:
        """Record the project's annotations in the session's store; the number of new events.

        The latest annotation of a task that is not cancelled is its label
        (a relabel is a newer annotation, or an update of one); a task whose
        annotations are all cancelled is skipped; a label that came from
        Label Studio and whose annotations were all deleted there is undone.
        Each annotation is recorded once: its id and update time are the
        request id, so a pull after a restart of either side adds nothing twice.
        """
        session, store = self.session, self.session.store
        by_task = {t: i for i, t in self._task_of.items()}
        current = store.current_labels()
        skipped = set(store.skipped(current))
        n, last = 0, store.last_event()
        for task in self._tasks(fields="all"):
            item = by_task.get(task["id"])
            if item is None:
                continue
            annotations = sorted((_plain(a) for a in (task.get("annotations") or [])),
                                 key=lambda a: (str(a.get("updated_at")), a["id"]))
            done = [a for a in annotations if not a.get("was_cancelled")]
            if done:
                a = done[-1]
                label = self._label_of(a)
                if label is None:
                    continue
                annotator = f"labelstudio:{a.get('completed_by')}"
                request_id = f"labelstudio:{a['id']}:{a.get('updated_at')}"
                event = session.submit(item, label, annotator=annotator, request_id=request_id)
                n += event > last                   # a replayed annotation returns its old event
                last = max(last, event)
            elif annotations and item not in current and item not in skipped:
                session.skip(item, annotator=f"labelstudio:{annotations[-1].get('completed_by')}")
                n += 1
            elif not annotations and item in current and str(current[item]["annotator"]).startswith("labelstudio:"):
                session.undo(item, annotator=current[item]["annotator"])   # deleted in Label Studio
                n += 1
        return n

    def _label_of(self, annotation: dict) -> Optional[str]:
        for r in annotation.get("result") or []:
            if r.get("from_name") == self.from_name and r.get("type") == "choices":
                chosen = (r.get("value") or {}).get("choices") or []
                if len(chosen) == 1:
                    return str(chosen[0])
        return None

    # ------------------------------------------------------------- push
    def _after_query(self, positions, scores) -> None:
        """In the session's loop thread, after each query: the first batch, or the new model's predictions."""
        if getattr(self.session.learner, "step_", -1) < 0:
            self.push_first_batch(positions)
        else:
            self.push()

    def push_first_batch(self, positions) -> int:
        """Before any model: the first batch's tasks get a prediction with no label and score 1, the
        others none, so that sorting by score puts the first batch on top."""
        request = [{"task": self._task_of[int(i)], "model_version": f"{self.model_version_prefix}-first",
                    "score": 1.0, "result": []} for i in positions if int(i) in self._task_of]
        self._replace_predictions(request)
        if request:  # Label Studio scores the tasks by the predictions of the project's model version
            self.client.projects.update(id=self.project, model_version=f"{self.model_version_prefix}-first")
        return len(request)

    def _replace_predictions(self, request: List[dict]) -> None:
        """The project's predictions become ``request``'s: Label Studio's "prediction score" of a task is
        the mean over its predictions, so older versions' are deleted first (one Data Manager action)."""
        self.client.actions.create(id="delete_tasks_predictions", project=self.project,
                                   selected_items={"all": True, "excluded": []})
        for start in range(0, len(request), 1000):
            self.client.projects.import_predictions(id=self.project, request=request[start:start + 1000])

    def push(self) -> int:
        """Give every unlabelled task a prediction of the current model version: its guess, and the
        acquisition score, mapped onto [0, 1] in the same order (:func:`unit_scores`), as ``score``;
        set it as the project's model version. How many were pushed.

        Called from the session's loop thread after each query (it uses the learner)."""
        learner = self.session.learner
        version = getattr(learner, "step_", -1)
        if version < 0 or version == self.pushed_version:
            return 0
        mask = ~learner.labelled_mask_
        unlabelled = np.flatnonzero(mask)
        if not len(unlabelled):
            return 0
        idx, _, scores = learner.query(n_instances=len(unlabelled) if learner.pool_subsample is None else
                                       min(learner.pool_subsample, len(unlabelled)), return_scores=True)
        guesses = learner.estimator_.predict(learner.X_pool_[idx])
        name = f"{self.model_version_prefix}-v{version}"
        request = [{"task": self._task_of[int(i)], "model_version": name, "score": float(s),
                    "result": [{"from_name": self.from_name, "to_name": self.to_name, "type": "choices",
                                "value": {"choices": [str(g)]}}]}
                   for i, s, g in zip(idx, unit_scores(scores), guesses) if int(i) in self._task_of]
        self._replace_predictions(request)
        self.client.projects.update(id=self.project, model_version=name)   # its scores, and guesses shown
        self.pushed_version = version
        return len(request)

    # -------------------------------------------------------------- run
    def run(self, stop: threading.Event, interval: float = 2.0) -> None:
        """Pull every ``interval`` seconds until ``stop`` is set (the pushes follow the session's queries)."""
        while not stop.is_set():
            self.pull()
            stop.wait(interval)
