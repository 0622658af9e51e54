"""A pull after the first asks only for the tasks updated since the last one (no server: an in-memory
Label Studio that keeps each task's ``updated_at`` as Label Studio 1.23 does, measured in
``test_sync_real.py``: an annotation created, updated, cancelled or deleted moves it; predictions do not)."""
import json
import os
import tempfile
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from skdbal import ActiveLearner
from skdbal.labelling import LabellingSession
from skdbal.labelstudio import LabelStudioSync

CONFIG = ('<View><Image name="i" value="$i"/><Choices name="c" toName="i">'
          '<Choice value="a"/><Choice value="b"/></Choices></View>')
POOL = 40


class MemoryLabelStudio:
    """Project 1 with POOL tasks (ids 100.., keys "0".."39"); a clock that moves a minute per change;
    ``read`` counts the tasks served to pulls, ``queries`` the kind of each list request."""

    def __init__(self):
        self.clock = datetime(2026, 1, 1, tzinfo=timezone.utc)
        self.rows = {100 + i: {"id": 100 + i, "data": {"skdbal_key": str(i)}, "annotations": [],
                                "updated_at": self.clock} for i in range(POOL)}
        self.next_id, self.read, self.queries = 1, 0, []
        self.lagging = set()       # tasks whose annotation counters Label Studio has not updated yet
        self.projects = SimpleNamespace(get=lambda id: {"label_config": CONFIG})
        self.client = SimpleNamespace(projects=self.projects, tasks=SimpleNamespace(list=self._list))

    def _tick(self, task, moves=True):
        self.clock += timedelta(minutes=1)
        if moves:
            self.rows[task]["updated_at"] = self.clock

    def annotate(self, task, label=None, cancelled=False):
        self._tick(task)
        a = {"id": self.next_id, "completed_by": 1, "was_cancelled": cancelled, "updated_at": self.clock,
             "result": [] if cancelled else [{"from_name": "c", "type": "choices", "value": {"choices": [label]}}]}
        self.next_id += 1
        self.rows[task]["annotations"].append(a)
        return a["id"]

    def update(self, task, annotation, label):
        self._tick(task)
        for a in self.rows[task]["annotations"]:
            if a["id"] == annotation:
                a.update(updated_at=self.clock, result=[{"from_name": "c", "type": "choices",
                                                         "value": {"choices": [label]}}])

    def delete(self, task, annotation, moves=True):
        """``moves=False``: as a bulk deletion that leaves the task's updated_at as it was."""
        self._tick(task, moves)
        self.rows[task]["annotations"] = [a for a in self.rows[task]["annotations"] if a["id"] != annotation]

    def _list(self, project, page, page_size, fields=None, query=None):
        asked = json.loads(query) if query else {}
        items = asked.get("filters", {}).get("items", [])
        if "selectedItems" in asked:
            kind, found = "selected", [self.rows[t] for t in asked["selectedItems"]["included"] if t in self.rows]
        elif not items:
            kind, found = "all", list(self.rows.values())
        elif items[0]["filter"] == "filter:tasks:updated_at":
            since = datetime.strptime(items[0]["value"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
            kind, found = "updated", [t for t in self.rows.values() if t["updated_at"] > since]
        else:
            kind, found = "annotated", [t for t in self.rows.values()
                                        if t["annotations"] and t["id"] not in self.lagging]
        self.queries.append(kind if page_size > 1 else "count")
        page_items = found[(page - 1) * page_size:page * page_size]
        if page_size > 1:
            self.read += len(page_items)
        return SimpleNamespace(items=[dict(t) for t in page_items], response=SimpleNamespace(total=len(found)))


def sync_of(ls):
    store = os.path.join(tempfile.mkdtemp(), "s.db")
    session = LabellingSession(ActiveLearner(LogisticRegression(), random_state=0, seeding="step"), np.eye(POOL),
                               classes=["a", "b"], store=store, batch_size=2)
    sync = LabelStudioSync(session, ls.client, project=1)
    assert sync.map_tasks() == POOL
    return sync


def labels(sync):
    return {i: r["label"] for i, r in sync.session.store.current_labels().items()}


@pytest.mark.parametrize("n_labels", [5, 30])
def test_an_idle_pull_reads_the_same_few_tasks_whatever_the_labels(n_labels):
    """The first pull reads the n labelled tasks; an idle one, within the overlap's seconds, only the last
    updated (a minute after the one before it, so the overlap takes in no other) and counts: 1 task, 2
    requests; once a pull has read with the overlap after it had passed, none: 0 tasks, 2 requests."""
    ls = MemoryLabelStudio()
    sync = sync_of(ls)
    clock = [0.0]
    sync._now = lambda: clock[0]
    for i in range(n_labels):
        ls.annotate(100 + i, "a")
    ls.read, ls.queries = 0, []
    assert sync.pull() == n_labels and ls.read == n_labels and ls.queries == ["annotated"]
    ls.read, ls.queries = 0, []
    clock[0] = 29.9                                           # within the overlap of 30 s: the last task again
    assert sync.pull() == 0 and ls.read == 1 and ls.queries == ["updated", "count"]
    clock[0] = 30.0                                           # the overlap past: read once more with it
    assert sync.pull() == 0 and ls.read == 2
    ls.read, ls.queries = 0, []
    for _ in range(3):
        assert sync.pull() == 0
    assert ls.read == 0 and ls.queries == ["updated", "count"] * 3
    assert sync.full_pulls == 1
    ls.annotate(100 + n_labels, "b")                          # a new label: read, and the overlap again
    assert sync.pull() == 1 and ls.read == 1 and sync.pull() == 0 and ls.read == 2


def test_relabel_cancel_and_delete_are_each_recorded_once_by_incremental_pulls():
    ls = MemoryLabelStudio()
    sync = sync_of(ls)
    first = ls.annotate(100, "a")
    ls.annotate(101, "a")
    assert sync.pull() == 2                                   # the full one
    ls.update(100, first, "b")                                # relabel
    ls.annotate(102, cancelled=True)                          # a skip
    third = ls.annotate(103, "b")
    assert sync.pull() == 3 and sync.pull() == 0
    ls.delete(103, third)                                     # undo
    assert sync.pull() == 1 and sync.pull() == 0
    assert labels(sync) == {0: "b", 1: "a"} and 2 in sync.session.store.skipped()
    assert sync.full_pulls == 1
    assert [e["kind"] for e in sync.session.store.events()].count("label") == 4


def test_a_deletion_that_leaves_updated_at_is_found_by_the_count_and_a_full_pull():
    ls = MemoryLabelStudio()
    sync = sync_of(ls)
    gone = ls.annotate(100, "a")
    ls.annotate(101, "b")
    assert sync.pull() == 2
    ls.delete(100, gone, moves=False)                         # as Label Studio's bulk "delete annotations"
    ls.queries = []
    assert sync.pull() == 1 and labels(sync) == {1: "b"}
    # the task the filter no longer lists is read by id before its label is taken back
    assert ls.queries == ["updated", "count", "annotated", "selected"] and sync.full_pulls == 2
    assert sync.pull() == 0 and sync.full_pulls == 2


def test_a_task_saved_just_before_the_latest_but_seen_after_is_not_missed():
    """A change stamped 2 s before the latest one the last pull saw (committed late): within the overlap."""
    ls = MemoryLabelStudio()
    sync = sync_of(ls)
    ls.annotate(100, "a")
    assert sync.pull() == 1
    late = ls.annotate(101, "b")
    ls.rows[101]["updated_at"] = ls.rows[100]["updated_at"] - timedelta(seconds=2)
    assert late and sync.pull() == 1 and labels(sync) == {0: "a", 1: "b"}


def test_deleting_a_relabelled_tasks_annotations_takes_back_every_label_in_one_pull():
    """Labelled a, relabelled b (two labels in the store, b on top), then every annotation deleted:
    one pull leaves the item unlabelled (an undo takes back only the latest; a before it is taken too)."""
    ls = MemoryLabelStudio()
    sync = sync_of(ls)
    first = ls.annotate(100, "a")
    assert sync.pull() == 1
    ls.update(100, first, "b")
    assert sync.pull() == 1 and labels(sync) == {0: "b"}
    ls.delete(100, first)
    assert sync.pull() == 2 and labels(sync) == {} and sync.pull() == 0
    assert [e["kind"] for e in sync.session.store.events()] == ["label", "label", "undo", "undo"]


def test_an_annotator_given_as_a_user_object_is_recorded_by_id():
    """A task read alone (``tasks.get``) names ``completed_by`` as the user, with the email: the store keeps
    the id, as a listed task gives it, so the same annotation is the same request either way."""
    ls = MemoryLabelStudio()
    sync = sync_of(ls)
    task = {"id": 100, "annotations": [{"id": 9, "completed_by": {"id": 4, "email": "a@example.org"},
                                         "was_cancelled": False, "updated_at": "2026-01-01T00:00:00Z",
                                         "result": [{"from_name": "c", "type": "choices",
                                                     "value": {"choices": ["a"]}}]}]}
    assert sync.record([task]) == 1
    assert sync.session.store.current_labels()[0]["annotator"] == "labelstudio:4"
    task["annotations"][0]["completed_by"] = 4
    assert sync.record([task]) == 0                               # the same request: not twice


def test_a_task_the_annotated_filter_misses_for_a_moment_keeps_its_label():
    """Label Studio updates a task's annotation counters after it saves the annotation; a full pull in
    between finds the task missing from the filter of annotated tasks. Its label stays (the task read by
    id still lists the annotation), and is taken back only once the annotation is really gone."""
    ls = MemoryLabelStudio()
    sync = sync_of(ls)
    ls.annotate(100, "a")
    late = ls.annotate(101, "b")
    assert sync.pull() == 2
    ls.lagging.add(101)                                        # the counters of task 101 not updated yet
    ls.queries = []
    assert sync._full_pull() == 0 and labels(sync) == {0: "a", 1: "b"}
    assert ls.queries == ["annotated", "selected"]
    ls.delete(101, late)                                       # now really deleted (and still not counted)
    assert sync._full_pull() == 1 and labels(sync) == {0: "a"}
    del ls.rows[100]                                           # a task deleted: its label is taken back too
    assert sync._full_pull() == 1 and labels(sync) == {}
