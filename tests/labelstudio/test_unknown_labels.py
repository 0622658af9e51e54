"""An annotation whose choice is not one of the session's classes is kept aside, never fatal (no server: the
in-memory Label Studio of ``test_pull_changes.py``). Label Studio accepts such a choice (posted through its
API, or after a choice is added to the labelling config): it is logged once, reported, not trained on, and
recorded by a session that has the class."""
import csv
import logging
import os
import tempfile
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from test_pull_changes import MemoryLabelStudio, labels, sync_of

from skdbal import ActiveLearner
from skdbal.labelling import LabellingSession
from skdbal.labelstudio import LabelStudioSync
from skdbal.labelstudio._outputs import keep_labels_csv
from skdbal.labelstudio._unknown import unknown_csv_path

WARNED = "skdbal labelstudio: annotation"


def warnings_of(caplog):
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith(WARNED)]


def test_a_label_outside_the_classes_is_kept_aside_and_logged_once(caplog):
    caplog.set_level(logging.WARNING, logger="skdbal.labelstudio")
    ls = MemoryLabelStudio()
    sync = sync_of(ls)
    ls.annotate(100, "a")
    x = ls.annotate(101, "x")                                # not a class: Label Studio took it all the same
    ls.annotate(102, "b")
    assert sync.pull() == 2                                  # the two others are recorded; no error
    assert labels(sync) == {0: "a", 2: "b"}
    assert sync.unknown_labels() == [{"task": 101, "item": 1, "key": "1", "label": "x", "annotator": "labelstudio:1",
                                      "annotation": x, "updated_at": str(ls.rows[101]["annotations"][0]["updated_at"]),
                                      "reason": "not a class"}]
    assert sync.status()["unknown_labels"] == 1 and sync.status()["labelled"] == 2
    said = warnings_of(caplog)
    assert len(said) == 1 and "\n" not in said[0]
    assert f"annotation {x} of task 101 (item '1') chose 'x'" in said[0] and "['a', 'b']" in said[0]
    for _ in range(3):                                       # read again (a restart's full pull does too): once
        sync._since = None
        assert sync.pull() == 0
    assert len(warnings_of(caplog)) == 1 and len(sync.unknown_labels()) == 1
    assert 1 in sync._answered()                             # no prediction is pushed for it


def test_a_relabel_with_a_class_or_a_deletion_ends_it():
    ls = MemoryLabelStudio()
    sync = sync_of(ls)
    x = ls.annotate(100, "x")
    y = ls.annotate(101, "y")
    assert sync.pull() == 0 and [r["task"] for r in sync.unknown_labels()] == [100, 101]
    ls.update(100, x, "b")                                   # relabelled with a class: recorded
    ls.delete(101, y)                                        # deleted: nothing kept
    assert sync.pull() == 1
    assert labels(sync) == {0: "b"} and sync.unknown_labels() == []


def test_a_bulk_deletion_that_leaves_updated_at_ends_it_at_the_full_pull():
    """Deleted without moving the task's updated_at: the count of annotated tasks calls for a full pull,
    which no longer sees the task; what was kept aside for it goes."""
    ls = MemoryLabelStudio()
    sync = sync_of(ls)
    x = ls.annotate(100, "x")
    ls.annotate(101, "a")
    assert sync.pull() == 1 and len(sync.unknown_labels()) == 1
    ls.delete(100, x, moves=False)
    sync.pull()
    assert sync.full_pulls == 2 and sync.unknown_labels() == [] and labels(sync) == {1: "a"}


def test_a_relabel_outside_the_classes_takes_back_the_label_it_replaces():
    """The task's label in Label Studio is no class now: skdbal trains on neither it nor the label before."""
    ls = MemoryLabelStudio()
    sync = sync_of(ls)
    a = ls.annotate(100, "a")
    assert sync.pull() == 1 and labels(sync) == {0: "a"}
    ls.update(100, a, "z")
    assert sync.pull() == 1                                  # one event: the undo
    assert labels(sync) == {} and [r["label"] for r in sync.unknown_labels()] == ["z"]
    ls.update(100, a, "a")                                   # and back to a class
    assert sync.pull() == 1 and labels(sync) == {0: "a"} and sync.unknown_labels() == []


def test_a_cancelled_annotation_after_it_skips_the_item():
    ls = MemoryLabelStudio()
    sync = sync_of(ls)
    x = ls.annotate(100, "x")
    assert sync.pull() == 0 and len(sync.unknown_labels()) == 1
    ls.delete(100, x)
    ls.annotate(100, cancelled=True)
    assert sync.pull() == 1 and sync.unknown_labels() == []
    assert sync.session.status()["skipped"] == 1


def test_a_webhook_record_of_it_is_no_error():
    """What the backend's webhook worker calls: record() of the task as Label Studio answers it."""
    ls = MemoryLabelStudio()
    sync = sync_of(ls)
    ls.annotate(100, "x")
    assert sync.record([dict(ls.rows[100])]) == 0 and len(sync.unknown_labels()) == 1


def session_with(classes, store):
    return LabellingSession(ActiveLearner(LogisticRegression(), random_state=0, seeding="step"), np.eye(40),
                            classes=classes, store=store, batch_size=2)


def test_a_session_with_the_class_records_it_at_its_first_pull(caplog):
    """The class added to skdbal's classes (a new store, as a session's classes are fixed; the project's
    config offers it, as an admin added it): the annotation kept aside is a label now."""
    caplog.set_level(logging.WARNING, logger="skdbal.labelstudio")
    ls = MemoryLabelStudio()
    sync = sync_of(ls)
    ls.annotate(100, "a")
    ls.annotate(101, "x")
    assert sync.pull() == 1 and len(sync.unknown_labels()) == 1
    config = ('<View><Image name="i" value="$i"/><Choices name="c" toName="i">'
              '<Choice value="a"/><Choice value="b"/><Choice value="x"/></Choices></View>')
    ls.projects.get = lambda id: {"label_config": config}
    old = LabelStudioSync(session_with(["a", "b"], os.path.join(tempfile.mkdtemp(), "old.db")), ls.client, 1)
    assert any("also offers ['x'], which are not classes" in m for m in (r.getMessage() for r in caplog.records))
    old.map_tasks()
    assert old.pull() == 1 and len(old.unknown_labels()) == 1  # the old classes still start, x kept aside
    new = LabelStudioSync(session_with(["a", "b", "x"], os.path.join(tempfile.mkdtemp(), "new.db")), ls.client, 1)
    new.map_tasks()
    assert new.pull() == 2 and labels(new) == {0: "a", 1: "x"} and new.unknown_labels() == []


def test_a_project_that_lacks_a_class_is_still_refused():
    ls = MemoryLabelStudio()
    with pytest.raises(ValueError, match=r"lack the session's classes \['c'\]: add them to its labelling config"):
        LabelStudioSync(session_with(["a", "b", "c"], os.path.join(tempfile.mkdtemp(), "s.db")), ls.client, 1)


def wait_for(condition, timeout=10.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False


def test_the_csvs_companion_report_lists_them(tmp_path):
    """Beside labels.csv, labels-unknown.csv: made with the first annotation kept aside, emptied (header)
    when none is left; rewritten when they change, as the CSV is when the store does."""
    ls = MemoryLabelStudio()
    sync = sync_of(ls)
    path, stop = tmp_path / "labels.csv", threading.Event()
    report = tmp_path / "labels-unknown.csv"
    assert unknown_csv_path(str(path)) == str(report)
    writer = threading.Thread(target=keep_labels_csv, args=(sync.session, str(path), stop, 0.02),
                              kwargs={"sync": sync})
    writer.start()
    try:
        assert wait_for(path.exists)
        time.sleep(0.1)
        assert not report.exists()                            # nothing kept aside: no report
        x = ls.annotate(100, "=x")
        sync.pull()
        assert wait_for(lambda: report.exists() and len(report.read_text().splitlines()) == 2)
        with open(report, newline="") as f:
            rows = list(csv.DictReader(f))
        assert [(r["task"], r["item"], r["key"], r["label"], r["annotation"]) for r in rows] == \
            [("100", "0", "0", "'=x", str(x))]               # spreadsheet-safe, as labels.csv
        assert os.stat(report).st_mode & 0o777 == 0o600
        ls.update(100, x, "a")
        sync.pull()
        assert wait_for(lambda: len(report.read_text().splitlines()) == 1)
        assert wait_for(lambda: len(path.read_text().splitlines()) == 2)
    finally:
        stop.set()
        writer.join(10)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["labels-unknown.csv", "labels.csv"]


def test_the_stop_line_says_how_many_are_kept_aside(tmp_path, capsys):
    from skdbal.labelstudio._outputs import say_stopped

    ls = MemoryLabelStudio()
    sync = sync_of(ls)
    ls.annotate(100, "x")
    ls.annotate(101, "a")
    sync.pull()
    csv_path = str(tmp_path / "l.csv")
    say_stopped(sync.session, "s.db", csv_path, sync=sync)
    err = capsys.readouterr().err
    assert f"stopped; 1 labels in s.db and {csv_path}; 1 annotations naming no single class of the session " \
           f"kept aside, in {tmp_path / 'l-unknown.csv'}" in err
    assert (tmp_path / "l-unknown.csv").exists()


def test_the_keeper_ignores_a_session_with_no_sync(tmp_path):
    """keep_labels_csv without a sync (its other callers) writes the CSV only."""
    session = SimpleNamespace(store=SimpleNamespace(last_event=lambda: 0), labels=lambda: [])
    stop = threading.Event()
    writer = threading.Thread(target=keep_labels_csv, args=(session, str(tmp_path / "l.csv"), stop, 0.02))
    writer.start()
    assert wait_for((tmp_path / "l.csv").exists)
    stop.set()
    writer.join(10)
    assert [p.name for p in tmp_path.iterdir()] == ["l.csv"]


def set_result(ls, task, annotation, result):
    """The annotation edited (a PATCH in Label Studio) to ``result``: its update time and the task's move."""
    ls._tick(task)
    for a in ls.rows[task]["annotations"]:
        if a["id"] == annotation:
            a.update(updated_at=ls.clock, result=result)


def choices(*chosen, from_name="c"):
    return [{"from_name": from_name, "type": "choices", "value": {"choices": list(chosen)}}]


NOT_ONE_CLASS = [(choices("a", "b"), '["a", "b"]', "several choices"),
                 ([], "", "no choice"),
                 (choices(), "", "no choice"),
                 (choices("a", from_name="other"), "", "another control"),
                 ([{"from_name": "note", "type": "textarea", "value": {"text": ["a"]}}], "", "another control")]


@pytest.mark.parametrize("result, label, reason", NOT_ONE_CLASS)
def test_an_annotation_changed_to_no_single_class_takes_back_its_label(caplog, result, label, reason):
    """Labelled 'a', then edited to several choices, none, or another control's only: the task has no label
    from it now (undone in the store), and it is kept aside with its reason, logged once; a relabel with
    a class ends it."""
    caplog.set_level(logging.WARNING, logger="skdbal.labelstudio")
    ls = MemoryLabelStudio()
    sync = sync_of(ls)
    x = ls.annotate(100, "a")
    assert sync.pull() == 1 and labels(sync) == {0: "a"}
    set_result(ls, 100, x, result)
    assert sync.pull() == 1 and labels(sync) == {}            # the undo of 'a'
    assert [(r["task"], r["label"], r["reason"]) for r in sync.unknown_labels()] == [(100, label, reason)]
    assert sync.status()["unknown_labels"] == 1 and sync.status()["not_one_class"] == 1
    for _ in range(2):                                        # read again (a restart's full pull too): once
        sync._since = None
        assert sync.pull() == 0
    said = warnings_of(caplog)
    assert said == [f"skdbal labelstudio: annotation {x} of task 100 (item '0') names no single class ({reason}"
                    + (f" {label!r}" if label else "") + "): kept aside, the item has no label from it"]
    assert 0 in sync._answered()                              # no prediction is pushed for it
    ls.update(100, x, "b")
    assert sync.pull() == 1 and labels(sync) == {0: "b"} and sync.unknown_labels() == []
    assert sync.status()["not_one_class"] == 0


@pytest.mark.parametrize("result, label, reason", NOT_ONE_CLASS)
def test_a_new_annotation_of_no_single_class_is_kept_aside_not_dropped(result, label, reason):
    ls = MemoryLabelStudio()
    sync = sync_of(ls)
    x = ls.annotate(101, "a")
    set_result(ls, 101, x, result)
    ls.annotate(102, "b")
    assert sync.pull() == 1 and labels(sync) == {2: "b"}
    assert [(r["task"], r["annotation"], r["label"], r["reason"]) for r in sync.unknown_labels()] == \
        [(101, x, label, reason)]
    assert sync.status()["unknown_labels"] == 1 and sync.status()["not_one_class"] == 1


def test_the_report_writes_control_characters_as_escapes_and_cuts_a_long_label(tmp_path):
    """ESC, a line break and a right-to-left override in a label (and a key) are written as their escapes,
    so that the report shown in a terminal plays nothing; a label of 200,000 characters is kept (and
    written) cut to its first 1,000, with its length."""
    from skdbal.labelstudio._unknown import save_unknown_csv

    ls = MemoryLabelStudio()
    sync = sync_of(ls)
    ls.annotate(100, "\x1b[2J\x1b[31mred\nline\u202etwo")
    ls.annotate(101, "y" * 200_000)
    sync.pull()
    rows = sync.unknown_labels()
    assert rows[1]["label"] == "y" * 1000 + "... (200,000 characters)"
    path = tmp_path / "labels-unknown.csv"
    rows[0]["key"] = "k\x07ey"
    assert save_unknown_csv(rows, str(path)) == 2
    raw = path.read_bytes()
    assert not any(b < 0x20 for b in raw.replace(b"\r\n", b"")) and "\u202e".encode() not in raw
    with open(path, newline="") as f:
        read = list(csv.DictReader(f))
    assert [(r["key"], r["label"]) for r in read] == [
        ("k\\x07ey", "\\x1b[2J\\x1b[31mred\\nline\\u202etwo"), ("1", "y" * 1000 + "... (200,000 characters)")]
    assert len(raw) < 1400                                    # a header and two rows of ~200 and ~1,100
