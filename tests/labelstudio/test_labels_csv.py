"""``skdbal labelstudio`` keeps the labels as CSV beside its store: where, and rewritten only when the store changed."""
import argparse
import threading
import time
from types import SimpleNamespace

from skdbal.labelstudio._outputs import keep_labels_csv
from skdbal.labelstudio.cli import add_parser, labels_csv_path


def test_the_option_and_its_default():
    parser = add_parser(argparse.ArgumentParser(prog="skdbal").add_subparsers())
    base = ["--demo", "digits", "--url", "http://127.0.0.1:8080", "--token-env", "T", "--project", "1"]
    assert parser.parse_args(base).labels_csv is None
    assert parser.parse_args(base + ["--labels-csv", "x/l.csv"]).labels_csv == "x/l.csv"
    assert labels_csv_path(None, "skdbal-digits.db") == "skdbal-digits-labels.csv"
    assert labels_csv_path(None, "/data/run/a.b.db") == "/data/run/a.b-labels.csv"


class FakeSession:
    def __init__(self):
        self.last, self.reads = 0, 0
        self.store = SimpleNamespace(last_event=lambda: self.last)

    def labels(self):
        self.reads += 1
        return [{"item": i, "key": str(i), "label": "cat"} for i in range(self.last)]


def wait_for(condition, timeout=10.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False


def test_the_file_is_rewritten_when_the_store_has_new_events_only(tmp_path):
    session, path, stop = FakeSession(), tmp_path / "labels.csv", threading.Event()
    writer = threading.Thread(target=keep_labels_csv, args=(session, str(path), stop, 0.02))
    writer.start()
    try:
        assert wait_for(lambda: path.exists())              # the first look writes (an empty store: a header)
        assert path.read_text().splitlines() == ["item,key,label,annotator,time,p_given,first_label,"
                                                 "first_annotator,second_look,audit"]
        time.sleep(0.2)
        assert session.reads == 1                            # nothing new: not written again
        session.last = 3
        assert wait_for(lambda: len(path.read_text().splitlines()) == 4)
    finally:
        stop.set()
        writer.join(10)
    assert not writer.is_alive()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["labels.csv"]


def test_a_failed_write_is_said_once_and_tried_again(tmp_path, capsys):
    session, stop = FakeSession(), threading.Event()
    path = tmp_path / "gone" / "labels.csv"                  # its folder does not exist (yet)
    writer = threading.Thread(target=keep_labels_csv, args=(session, str(path), stop, 0.02))
    writer.start()
    try:
        assert wait_for(lambda: session.reads >= 1)
        session.last = 1
        assert wait_for(lambda: session.reads >= 2)
        (tmp_path / "gone").mkdir()
        session.last = 2
        assert wait_for(lambda: path.exists() and len(path.read_text().splitlines()) == 3)
    finally:
        stop.set()
        writer.join(10)
    err = capsys.readouterr().err
    assert err.count("cannot write") == 1 and str(path) in err


def test_the_report_json_is_written_beside_it_at_new_events_and_at_a_new_model_version(tmp_path, monkeypatch):
    """With ``report=True`` (as the command runs it) the page's report.json is kept beside the CSV, as
    ``<csv>-report.json``: written again when a label comes and when a new model version is trained (which adds
    no event), else not."""
    import skdbal.labelling.progress_report as progress_report

    session, path, stop, written = FakeSession(), tmp_path / "labels.csv", threading.Event(), []
    models = []
    session.store.models = lambda: list(models)
    monkeypatch.setattr(progress_report, "save_progress_report",
                        lambda s, p: written.append((p, len(models), s.last)))
    writer = threading.Thread(target=keep_labels_csv, args=(session, str(path), stop, 0.02), kwargs={"report": True})
    writer.start()
    try:
        report = str(tmp_path / "labels-report.json")
        assert wait_for(lambda: written == [(report, 0, 0)])
        session.last = 3
        assert wait_for(lambda: written[-1] == (report, 0, 3))
        models.append({"version": 0})                        # a retrain: no new event
        assert wait_for(lambda: written[-1] == (report, 1, 3))
        time.sleep(0.2)
        assert len(written) == 3
    finally:
        stop.set()
        writer.join(10)
