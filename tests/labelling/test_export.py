"""The labels CSV (skdbal.labelling.export): the exact text for a small session, and the atomic file writer."""
import csv
import io
import os
import threading

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from skdbal import ActiveLearner
from skdbal.acquisition import max_entropy
from skdbal.labelling import LabellingSession
from skdbal.labelling.export import labels_csv_text, save_labels_csv


def small_session(path):
    learner = ActiveLearner(LogisticRegression(max_iter=100), max_entropy, random_state=0, seeding="step",
                            verbose=False)
    X = np.arange(12, dtype=float).reshape(6, 2)
    keys = ["a.png", '=HYPERLINK("http://x.invalid")', "c.png", "+d", "e.png", "f.png"]
    session = LabellingSession(learner, X, classes=["cat", "dog", "-bird"], store=path, keys=keys, batch_size=2,
                               initial=[0, 1])
    # events written with fixed times, so the text is known to the character
    session.store.add_event(0, "label", "cat", annotator="ann", time=1700000000.0)
    session.store.add_event(1, "label", "dog", annotator="@bob", time=1700000001.5)
    session.store.add_event(3, "label", "-bird", annotator="ann", time=1700000002.0)
    session.store.add_event(2, "skip", annotator="ann", time=1700000003.0)
    return session


EXPECTED = (
    "item,key,label,annotator,time,p_given,first_label,first_annotator,second_look,audit\r\n"
    "0,a.png,cat,ann,1700000000.0,,,,,\r\n"
    "1,\"'=HYPERLINK(\"\"http://x.invalid\"\")\",dog,'@bob,1700000001.5,,,,,\r\n"
    "3,'+d,'-bird,ann,1700000002.0,,,,,\r\n"
)


def test_the_labels_csv_of_a_small_session_is_known_to_the_character(tmp_path):
    session = small_session(tmp_path / "s.db")
    try:
        assert labels_csv_text(session) == EXPECTED
    finally:
        session.store.close()


def test_the_app_serves_the_same_text(tmp_path):
    from starlette.testclient import TestClient

    from skdbal.labelling.app import make_app

    session = small_session(tmp_path / "s.db")
    try:
        with TestClient(make_app(session, token="secret")) as client:
            r = client.get("/api/labels.csv", headers={"X-Token": "secret"})
        assert r.status_code == 200 and r.text == EXPECTED
        assert r.headers["content-type"].startswith("text/csv")
    finally:
        session.store.close()


def test_save_labels_csv_writes_the_text_and_leaves_no_temporary_file(tmp_path):
    session = small_session(tmp_path / "s.db")
    try:
        (tmp_path / "labels.csv").write_text("old\n")
        assert save_labels_csv(session, tmp_path / "labels.csv") == 3
    finally:
        session.store.close()
    assert (tmp_path / "labels.csv").read_bytes().decode() == EXPECTED
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".labels.csv")) == []


class _Rows:
    """A session of ``n`` labels; with ``fail``, its rows stop with a signal after two (a kill in mid-write)."""

    def __init__(self, n, fail=False):
        self.n, self.fail = n, fail

    def labels(self):
        for i in range(self.n):
            if self.fail and i == 2:
                raise KeyboardInterrupt
            yield {"item": i, "key": f"k{i}", "label": "cat"}


def test_a_write_stopped_half_way_leaves_the_old_file(tmp_path):
    path = tmp_path / "labels.csv"
    save_labels_csv(_Rows(3), path)
    old = path.read_text()
    with pytest.raises(KeyboardInterrupt):
        save_labels_csv(_Rows(5, fail=True), path)
    assert path.read_text() == old
    assert [p.name for p in tmp_path.iterdir()] == ["labels.csv"]    # the temporary file is gone too


def test_a_reader_sees_the_old_file_or_the_new_one_never_part(tmp_path):
    path = tmp_path / "labels.csv"
    save_labels_csv(_Rows(1), path)
    whole = {1, 2000}
    stop = threading.Event()
    seen, torn = set(), []

    def read():
        while not stop.is_set():
            rows = list(csv.DictReader(io.StringIO(path.read_text())))
            seen.add(len(rows))
            if len(rows) not in whole:
                torn.append(len(rows))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for k in range(20):
            save_labels_csv(_Rows(2000 if k % 2 == 0 else 1), path)
    finally:
        stop.set()
        reader.join()
    assert not torn and seen <= whole
    assert os.listdir(tmp_path) == ["labels.csv"]


# ------------------------------------------------------------------ what a spreadsheet would run, and only that

@pytest.mark.parametrize("text, written", [
    ("-1", "-1"),              # a plain negative number: a spreadsheet reads a number (before: '-1)
    ("-1.5", "-1.5"),
    ("-0", "-0"),
    ("=1+1", "'=1+1"),         # a formula
    ("-1+1", "'-1+1"),         # a minus, then a formula
    ("-cmd", "'-cmd"),
    ("-", "'-"),
    ("-1.", "'-1."),           # not a plain number as written: quoted, still readable
    ("-1e5", "'-1e5"),
    ("-\u0661", "'-\u0661"),   # an Arabic-Indic digit is not a plain number here
    ("@x", "'@x"),
    ("+1", "'+1"),             # a plus starts a formula, also before digits
    ("\tx", "'\tx"),
    ("\rx", "'\rx"),
    ("\0x", "'\0x"),
    ("1-1", "1-1"),            # only the first character counts
    ("cat", "cat"),
    ("", ""),
])
def test_a_text_cell_is_quoted_only_where_a_spreadsheet_would_run_it(text, written):
    from skdbal.labelling.export import spreadsheet_safe

    assert spreadsheet_safe(text) == written


def test_a_key_and_a_class_minus_one_are_exported_as_minus_one(tmp_path):
    """Before: ``'-1`` in both columns. The CSV is read back with the csv module, as a program would."""
    learner = ActiveLearner(LogisticRegression(max_iter=100), max_entropy, random_state=0, seeding="step",
                            verbose=False)
    session = LabellingSession(learner, np.arange(8, dtype=float).reshape(4, 2), classes=["-1", "1"],
                               store=tmp_path / "s.db", keys=["-1", "-2.5", "-x", "=2"], batch_size=2,
                               initial=[0, 1])
    try:
        for item, label in enumerate(["-1", "1", "-1", "1"]):
            session.store.add_event(item, "label", label, annotator="-7", time=1700000000.0 + item)
        rows = list(csv.reader(io.StringIO(labels_csv_text(session))))
    finally:
        session.store.close()
    assert [r[1:4] for r in rows[1:]] == [["-1", "-1", "-7"], ["-2.5", "1", "-7"], ["'-x", "-1", "-7"],
                                          ["'=2", "1", "-7"]]
