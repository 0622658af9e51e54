"""``skdbal label``, the command: one-line errors that create no store, a port checked before anything,
a help that explains itself, torch's threads, and a SIGTERM that leaves every label in the ``.db`` alone."""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from _helpers import LOOPBACK, wait_for_http

from skdbal.labelling import LabelStore
from skdbal.labelling.cli import add_parser, run

ROOT = Path(__file__).resolve().parents[2]


def skdbal_label(*args, timeout=120):
    """``python -m skdbal label ARGS`` in a subprocess, on this checkout: (exit status, stdout, stderr)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-m", "skdbal", "label", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=ROOT)
    return done.returncode, done.stdout, done.stderr


def one_line(stderr):
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


@pytest.fixture
def small_npy(tmp_path):
    path = tmp_path / "rows.npy"
    np.save(path, np.arange(40, dtype=np.float32).reshape(20, 2))
    return path


@pytest.mark.parametrize("option, target, message", [
    ("--images", "no_such_folder", "--images {}: no such folder"),
    ("--table", "no_such.csv", "--table {}: no such file"),
    ("--npy", "no_such.npy", "--npy {}: no such file"),
    ("--npy", ".", "--npy {}: not a file"),            # a folder given for a file
])
def test_a_missing_folder_or_file_is_one_line_and_no_store(tmp_path, option, target, message):
    """Before: a 19-line traceback, exit status 1."""
    target = tmp_path / target if target != "." else tmp_path
    store = tmp_path / "s.db"
    status, out, err = skdbal_label(option, target, "--classes", "a,b", "--store", store, "--port", 0)
    assert (status, out) == (2, "")
    assert one_line(err) == "skdbal label: error: " + message.format(target)
    assert not store.exists()


def test_a_busy_port_is_one_line_before_the_address_and_the_store(tmp_path):
    """Before: it printed "open http://127.0.0.1:PORT/" (someone else's server) and made the store first."""
    store = tmp_path / "s.db"
    with socket.socket() as busy:
        busy.bind((LOOPBACK, 0))
        busy.listen()
        port = busy.getsockname()[1]
        status, out, err = skdbal_label("--demo", "digits", "--store", store, "--port", port)
    assert (status, out) == (2, "")
    assert one_line(err) == (f"skdbal label: error: cannot serve on 127.0.0.1:{port} (Address already in use): "
                             "another server may be there; choose another --port")
    assert not store.exists()


@pytest.mark.parametrize("args, message", [
    pytest.param(["--classes", "cat,cat"], "--classes names cat more than once", marks=pytest.mark.slow),
    (["--classes", "cat,dog", "--second-look-budget", "2"], "argument --second-look-budget: a share lies in (0, 1]; "
     "got 2"),
    ([], "--classes is required with --images, --table and --npy"),
    (["--classes", "cat,dog", "--batch-size", "0"], "argument --batch-size: must be at least 1; got 0"),
    (["--classes", "cat,dog", "--torch-threads", "none"], "argument --torch-threads: 'none' is not a whole number"),
    (["--classes", "cat,dog", "--port", "70000"], "argument --port: a port lies in 0..65535; got 70000"),
    (["--classes", "cat,dog", "--lease-timeout", "0"], "argument --lease-timeout: a number of seconds above 0; got 0"),
    (["--classes", "cat,dog", "--lease-timeout", "nan"], "argument --lease-timeout: a number of seconds above 0; "
                                                         "got nan"),
    (["--classes", "cat,dog", "--lease-timeout", "soon"], "argument --lease-timeout: 'soon' is not a number of "
                                                          "seconds"),
    # found in review: the store (and its -wal, -shm) was made before the keys were refused
    pytest.param(["--classes", "cat,dog", "--keys", "a"], "--keys: 1 keys for 2 classes: give one key per class, "
                 "in the classes' order", marks=pytest.mark.slow),
])
def test_a_bad_setting_is_one_line_and_no_store(tmp_path, small_npy, args, message):
    """A setting the session refuses (a ValueError when it is built) is one line, and no store is made:
    before, the store was made first, and the error came with the usage (two lines and more). The two
    that load the pool (torch's import) take seconds, and are slow."""
    store = tmp_path / "s.db"
    status, out, err = skdbal_label("--npy", small_npy, "--store", store, "--port", 0, *args)
    assert (status, out) == (2, "")
    assert one_line(err) == "skdbal label: error: " + message
    assert not store.exists() and sorted(os.listdir(tmp_path)) == ["rows.npy"]


@pytest.mark.slow
def test_a_refused_store_is_one_line_and_left_as_it_was(tmp_path, small_npy):
    store = tmp_path / "s.db"
    store.write_bytes(b"")
    status, out, err = skdbal_label("--npy", small_npy, "--classes", "a,b", "--store", store, "--port", 0)
    assert (status, out) == (2, "")
    assert one_line(err) == (f"skdbal label: error: {store} is empty: not a skdbal store; remove it to start a "
                             "new session")
    assert store.read_bytes() == b"" and sorted(os.listdir(tmp_path)) == ["rows.npy", "s.db"]


def test_the_help_explains_the_command_and_shows_every_default():
    status, out, err = skdbal_label("--help")
    assert status == 0 and err == ""
    head = out[:out.index("options:")]
    assert "Serve a page on this machine where people label a pool" in head
    assert "example:\n  skdbal label --images photos/ --classes cat,dog --store pets.db" in head
    options = {}                     # each option's help text, its lines joined
    for block in re.split(r"\n  (?=-)", out[out.index("options:"):])[1:]:
        name = block.split()[0].rstrip(",")
        options[name] = " ".join(block.split())
    assert set(options) == {"-h", "--demo", "--images", "--table", "--npy", "--classes", "--id-column",
                            "--columns", "--drop-columns", "--image-size", "--mode", "--store", "--batch-size",
                            "--retrain-after",
                            "--second-looks", "--second-look-budget", "--torch-threads", "--host", "--port",
                            "--annotators", "--keys", "--lease-timeout", "--reopen-skips", "--representation",
                            "--encoder", "--encoder-size", "--encoder-channels", "--encoder-mean", "--encoder-std",
                            "--encoder-time", "--test", "--label-budget", "--audit-share"}
    # the pool's source is required (one of four), and --classes too but with --demo: no default to show;
    # --reopen-skips is a switch
    without = {"-h", "--demo", "--images", "--table", "--npy", "--classes", "--reopen-skips"}
    assert {name for name, text in options.items() if "(default: " not in text} == without
    assert "one of --demo, --images, --table and --npy is required" in options["--demo"]
    for name, default in [("--batch-size", "10"), ("--port", "8765"), ("--image-size", "28"), ("--mode", "L"),
                          ("--torch-threads", "1"), ("--host", "127.0.0.1"), ("--second-looks", "dynamic"),
                          ("--second-look-budget", "0.1"), ("--retrain-after", "the batch size"),
                          ("--lease-timeout", "300"), ("--representation", "pool"), ("--encoder", "none"),
                          ("--encoder-time", "300"), ("--audit-share", "none")]:
        assert f"(default: {default}" in options[name], options[name]


# ------------------------------------------------------------------------------------------ threads

@pytest.mark.parametrize("given, expected", [([], 1), (["--torch-threads", "3"], 3)])
def test_torch_threads_are_set_before_the_model_is_built(tmp_path, small_npy, monkeypatch, given, expected):
    """``--torch-threads`` (default 1) reaches ``torch.get_num_threads()`` before the model is built and
    the server starts (here the server returns at once)."""
    import torch
    import uvicorn

    from skdbal.labelling import cli

    seen = {}
    real_make_session = cli.make_session

    def make_session(args):
        seen["building"] = torch.get_num_threads()
        return real_make_session(args)

    def serve(server, sockets=None):
        seen["serving"] = torch.get_num_threads()
        seen["port"] = sockets[0].getsockname()

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    monkeypatch.setattr(cli, "make_session", make_session)
    monkeypatch.setattr(uvicorn.Server, "run", serve)
    try:
        parser = add_parser(argparse.ArgumentParser(prog="skdbal").add_subparsers())
        store = tmp_path / "s.db"
        args = parser.parse_args(["--npy", str(small_npy), "--classes", "a,b", "--store", str(store), "--port", "0",
                                  *given])
        assert run(args) == 0
    finally:
        torch.set_num_threads(before)
    assert seen["building"] == seen["serving"] == expected
    assert seen["port"][0] == LOOPBACK and seen["port"][1] > 0
    assert not Path(f"{store}-wal").exists()        # the session stopped: its store closed


# ------------------------------------------------------------------------------------- leases, skips

def test_reopen_skips_offers_every_skipped_item_again_and_lease_timeout_reaches_the_session(
        tmp_path, small_npy, monkeypatch, capsys):
    """A store whose items 3 and 5 were skipped: ``--reopen-skips`` says so in one line and serves them
    again (before, nothing could reopen a skip); ``--lease-timeout 90`` is the session's."""
    import uvicorn

    from skdbal.labelling import cli

    parser = add_parser(argparse.ArgumentParser(prog="skdbal").add_subparsers())
    store = tmp_path / "s.db"
    args = parser.parse_args(["--npy", str(small_npy), "--classes", "a,b", "--store", str(store), "--port", "0",
                              "--lease-timeout", "90", "--reopen-skips"])
    session, _, _ = cli.make_session(args)
    assert session.lease_timeout == 90.0
    for item in (3, 5):
        session.skip(item, annotator="ann")
    session.store.close()
    seen = {}
    real_make_session = cli.make_session

    def make_session(args):
        made = real_make_session(args)
        seen["session"] = made[0]
        return made

    def serve(server, sockets=None):
        seen["skipped while serving"] = seen["session"].store.skipped()

    monkeypatch.setattr(cli, "make_session", make_session)
    monkeypatch.setattr(uvicorn.Server, "run", serve)
    assert run(args) == 0
    assert "skdbal label: 2 skipped items reopened\n" in capsys.readouterr().out
    assert seen["skipped while serving"] == []
    reopened = LabelStore(store)
    assert reopened.skipped() == [] and [e["kind"] for e in reopened.events()] == ["skip", "skip"]
    reopened.close()


# ------------------------------------------------------------------------------------------ SIGTERM

@pytest.mark.slow
def test_sigterm_leaves_every_label_in_the_db_alone(tmp_path):
    """A real ``skdbal label`` gets labels over HTTP, then SIGTERM: it exits 0 (before, uvicorn passed the
    signal on and the process died without closing its store), and the ``.db`` copied alone holds
    every label (before, the copy was refused: even the store's application id was in its -wal)."""
    store = tmp_path / "run" / "s.db"
    store.parent.mkdir()
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, "-m", "skdbal", "label", "--npy", str(_rows(tmp_path)), "--classes",
                             "a,b", "--store", str(store), "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        line = proc.stdout.readline()
        url = re.search(r"open (http://127\.0\.0\.1:\d+/)", line).group(1)
        wait_for_http(url, process=proc)
        page = urllib.request.urlopen(url, timeout=10).read().decode()
        token = json.loads(re.search(r"const TOKEN = (\"[^\"]*\")", page).group(1))
        given = {0: "a", 3: "b", 7: "a", 12: "b"}
        for item, label in given.items():
            request = urllib.request.Request(url + "api/submit", method="POST", data=json.dumps(
                {"item": item, "label": label, "annotator": "ann"}).encode(),
                headers={"X-Token": token, "Content-Type": "application/json"})
            assert "event" in json.loads(urllib.request.urlopen(request, timeout=10).read())
        proc.send_signal(signal.SIGTERM)
        status = proc.wait(timeout=60)
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    assert status == 0, err
    assert err.strip().splitlines()[-1] == f"skdbal label: stopped; 4 labels in {store}"
    wal = Path(f"{store}-wal")
    assert not wal.exists() or wal.stat().st_size == 0
    alone = tmp_path / "copy" / "s.db"
    alone.parent.mkdir()
    shutil.copyfile(store, alone)
    copy = LabelStore(alone)
    assert {i: r["label"] for i, r in copy.current_labels().items()} == given
    copy.close()


def _rows(folder):
    path = folder / "rows.npy"
    np.save(path, np.arange(40, dtype=np.float32).reshape(20, 2))
    return path

