"""``skdbal labelstudio`` pulls once before its session starts (no server: stand-ins for the client, the
session and the sync, which record the order of what is done)."""
import argparse
from types import SimpleNamespace

import httpx
import pytest

from skdbal.labelstudio import cli


def run_with(monkeypatch, pull, sampling=None, run=lambda: None):
    import tempfile

    done = []

    class Session:
        keys, classes = ["0", "1"], ["a", "b"]
        on_query = []          # the model's progress is said from there (skdbal.labelstudio.progress)
        store = SimpleNamespace(current_labels=lambda: {}, last_event=lambda: 0, models=lambda: [],
                                close=lambda: done.append("close"))

        def labels(self):
            return []

        def __enter__(self):
            done.append("session starts")
            return self

        def __exit__(self, *exc):
            done.append("session stops")

    class Sync:
        label_config = '<View><Text name="item" value="$item"/><Choices name="c" toName="item"/></View>'

        def __init__(self, session, client, project, **kw):
            self.sampling = kw.get("sampling")
            done.append(("sync", self.sampling))

        def import_tasks(self, data):
            done.append("import")
            return 0

        def queue_view(self):
            done.append("view")
            return 7

        def pull(self):
            done.append("pull")
            return pull()

        def run(self, stop, interval):
            done.append("run")
            run()

        kept_aside = SimpleNamespace(changes=0)         # no annotation outside the classes

        def unknown_labels(self):
            return []

    import skdbal.labelling.cli as labelling_cli
    import skdbal.labelling.progress_report as progress_report
    import skdbal.labelstudio.sync as sync_module

    monkeypatch.setattr(cli, "connect", lambda *a, **k: SimpleNamespace(
        projects=SimpleNamespace(list=lambda page_size: [])))
    monkeypatch.setattr(labelling_cli, "make_session", lambda args: (Session(), SimpleNamespace(kind="table"), "s.db"))
    monkeypatch.setattr(labelling_cli, "set_torch_threads", lambda n: 1)
    monkeypatch.setattr(sync_module, "LabelStudioSync", Sync)
    # the labels CSV's companion, report.json, beside it (as the page serves it)
    monkeypatch.setattr(progress_report, "save_progress_report", lambda session, path: done.append(("report", path)))
    monkeypatch.setenv("SKDBAL_TEST_TOKEN", "t")
    parser = cli.add_parser(argparse.ArgumentParser(prog="skdbal").add_subparsers())
    args = parser.parse_args(["--demo", "digits", "--url", "http://127.0.0.1:9", "--project", "1",
                              "--token-env", "SKDBAL_TEST_TOKEN",
                              "--labels-csv", f"{tempfile.mkdtemp()}/labels.csv",
                              "--store", f"{tempfile.mkdtemp()}/s.db",
                              *(["--sampling", sampling] if sampling else [])])
    assert cli.run(args) == 0
    return done


def test_the_command_pulls_before_the_session_starts(monkeypatch, capsys):
    done = run_with(monkeypatch, lambda: 3)
    # and once more when stopped, before the session stops: what was annotated up to the stop is in the CSV
    assert done[:8] == [("sync", "uncertainty"), "import", "view", "pull", "session starts", "run", "pull",
                        "session stops"]
    assert done[-1] == "close" and done[8][0] == "report" and done[8][1].endswith("/labels-report.json")
    out = capsys.readouterr().out
    assert "pulled 3 new annotation events before starting" in out
    # by default Label All Tasks serves the model's order, and the command says so in one line
    assert [line for line in out.splitlines() if "Label All Tasks" in line] == [
        "annotators: press Label All Tasks: the project is in Uncertainty sampling, which serves each annotator "
        "the model's best task left (scored lowest), one at a time"]


def test_in_queue_mode_the_command_names_the_tabs_button(monkeypatch, capsys):
    done = run_with(monkeypatch, lambda: 0, sampling="queue")
    assert done[0] == ("sync", "queue")
    lines = [line for line in capsys.readouterr().out.splitlines() if "Label Tasks As Displayed" in line]
    assert len(lines) == 1 and "skdbal queue" in lines[0] and "goes by task id" in lines[0]


def test_label_studio_away_at_the_first_pull_leaves_it_to_the_loop(monkeypatch, capsys):
    def away():
        raise httpx.ConnectError("refused")

    done = run_with(monkeypatch, away, sampling="uncertainty")
    assert done[0] == ("sync", "uncertainty") and done[3:5] == ["pull", "session starts"]
    assert "did not answer the first pull" in capsys.readouterr().err
    assert done[5:8] == ["run", "pull", "session stops"]     # away at the last pull too: the command stops as asked


def test_a_refusal_at_the_first_pull_is_raised(monkeypatch):
    def refused():
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        run_with(monkeypatch, refused)


def test_a_store_that_another_server_holds_is_refused_in_one_line_before_it_is_read(monkeypatch, tmp_path, capsys):
    """Before: nothing locked the store, and a second server ran a second loop on it. Now the command is
    refused after its checks of Label Studio and before the session is made: nothing read or written in the
    store, nothing sent to the project."""
    import os

    import skdbal.labelling.cli as labelling_cli
    from skdbal.cli import main
    from skdbal.labelling import LabelStore
    from skdbal.labelling.lock import StoreLock

    made = []
    monkeypatch.setattr(cli, "connect", lambda *a, **k: SimpleNamespace(
        projects=SimpleNamespace(list=lambda page_size: [], create=lambda **kw: made.append("project"))))
    monkeypatch.setattr(labelling_cli, "make_session", lambda args: made.append("session"))
    monkeypatch.setenv("SKDBAL_TEST_TOKEN", "t")
    store = tmp_path / "s.db"
    LabelStore(store).close()
    before = (store.read_bytes(), store.stat().st_mtime_ns)
    argv = ["labelstudio", "--demo", "digits", "--url", "http://127.0.0.1:9", "--new-project", "p",
            "--token-env", "SKDBAL_TEST_TOKEN", "--store", str(store)]
    with StoreLock(store):       # what a running skdbal label or skdbal labelstudio holds
        with pytest.raises(SystemExit) as refused:
            main(argv)
    assert refused.value.code == 2
    out, err = capsys.readouterr()
    assert err.splitlines() == [
        f"skdbal labelstudio: error: the store {store} is in use by another skdbal server (process "
        f"{os.getpid()}): one server runs on a store at a time; stop that one, or give another store"]
    assert made == [] and (store.read_bytes(), store.stat().st_mtime_ns) == before
    assert sorted(os.listdir(tmp_path)) == ["s.db"]


def test_ctrl_c_while_running_still_pulls_once_more_and_writes_the_csv(monkeypatch):
    def interrupted():
        raise KeyboardInterrupt

    done = run_with(monkeypatch, lambda: 0, run=interrupted)
    assert done[5:8] == ["run", "pull", "session stops"] and done[8][0] == "report"
