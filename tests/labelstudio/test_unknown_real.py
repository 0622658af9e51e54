"""A stray label and a token not handed over, against a real Label Studio 1.23 on 127.0.0.1 (slow).

- Label Studio accepts (201) an annotation whose choice is not in the labelling config, posted through its API.
  ``skdbal labelstudio`` (client and backend modes) logs it once, keeps it aside (its report beside the
  CSV), keeps going, records a later annotation, starts again over it, and a session whose classes
  include it (the choice added to the config, as an admin would) records it at its first pull.
- ``--connect`` in a project that has other ML backends, restarted with a new backend token: Label Studio
  1.23 checks an update as a new backend (``/setup``, which needs the project), and answered 500 to the
  update without it. The token now reaches Label Studio (a webhook with it is recorded), and a backend
  Label Studio does not accept stops the command with one line.
"""
import base64
import csv
import os
import signal
import sqlite3
import subprocess
import sys
import time

import numpy as np
import pytest
from _helpers import digits_flat, free_port
from lsserver import SSRF_OFF, TOKEN, started_or_skip
from test_real_server import CONFIG, annotate, png_uri, session_of, wait_until

from skdbal.labelstudio.sync import list_tasks

pytestmark = pytest.mark.slow

CLASSES = ",".join(map(str, range(10)))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    pytest.importorskip("uvicorn")
    s = started_or_skip(tmp_path_factory.mktemp("label-studio"), env=SSRF_OFF)
    yield s
    s.stop()


class Command:
    """``skdbal labelstudio`` as a process, its output (stdout and stderr) in a file."""

    def __init__(self, tmp_path, server, store, *args, classes=CLASSES, name="run"):
        self.log = tmp_path / f"{name}.log"
        argv = [sys.executable, "-u", "-m", "skdbal", "labelstudio", "--npy", str(tmp_path / "pool.npy"),
                "--classes", classes, "--url", server.url, "--token-env", "SKDBAL_TEST_LS_TOKEN",
                "--store", str(store), "--torch-threads", "1", *map(str, args)]
        env = dict(os.environ, SKDBAL_TEST_LS_TOKEN=TOKEN, OMP_NUM_THREADS="1")
        with open(self.log, "w") as out:
            self.process = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, text=True)

    def text(self):
        return self.log.read_text()

    def wait_for(self, text, timeout=180):
        deadline = time.time() + timeout
        while text not in self.text():
            assert self.process.poll() is None, f"the command exited ({self.process.returncode}):\n{self.text()}"
            assert time.time() < deadline, f"{text!r} not printed within {timeout} s:\n{self.text()}"
            time.sleep(0.1)

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        assert self.process.wait(60) == 0, self.text()
        return self.text()

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)


def labels_in(store):
    db = sqlite3.connect(store)
    try:                  # the current label of each item: its latest label event not undone is enough here
        return {item: label for item, label in
                db.execute("SELECT item, label FROM events WHERE kind='label' ORDER BY event").fetchall()}
    finally:
        db.close()


def stray(client, task, choice="bird", from_name="label"):
    """An annotation whose choice is no class: Label Studio 1.23 takes it (201)."""
    return annotate(client, task, choice, from_name=from_name)


@pytest.mark.parametrize("mode", ["client", "backend"])
def test_a_label_outside_the_classes_is_kept_aside_and_the_command_goes_on(server, tmp_path, mode):
    from label_studio_sdk import LabelStudio

    X, y = digits_flat(60)
    np.save(tmp_path / "pool.npy", X.reshape(-1, 8, 8).astype(np.float32))
    client = LabelStudio(base_url=server.url, api_key=TOKEN)
    store = tmp_path / "stray.db"
    how = ["--interval", "0.5"] if mode == "client" else ["--interval", "3600", "--backend", "--backend-port",
                                                           free_port(), "--connect"]     # the same port after
    ready = "pulled " if mode == "client" else "connected the backend"
    run = Command(tmp_path, server, store, *how, "--new-project", f"stray {mode}", name="first")
    try:
        run.wait_for(ready)
        project = int(next(line for line in run.text().splitlines() if line.startswith("made project"))
                      .split()[2].rstrip(","))
        ids = {t["data"]["skdbal_key"]: t["id"] for t in list_tasks(client, project, fields="task_only")}
        bird = stray(client, ids["0"])                          # Label Studio takes it
        run.wait_for(f"annotation {bird.id} of task {ids['0']} (item '0') chose 'bird'", 60)
        annotate(client, ids["1"], y[1], from_name="label")     # a later annotation reaches the store
        wait_until(lambda: labels_in(store).get(1) == str(y[1]), 60, "the later annotation in the store")
        time.sleep(1.5)                                         # pulls (or nothing) meet the stray label again
        assert run.process.poll() is None
        out = run.stop()
    finally:
        run.kill()
    assert out.count(f"annotation {bird.id} of task") == 1      # logged once
    assert 0 not in labels_in(store)
    report = tmp_path / "stray-labels-unknown.csv"
    assert f"stopped; 1 labels in {store} and {tmp_path / 'stray-labels.csv'}; 1 annotations naming no single " \
           f"class of the session kept aside, in {report}" in out
    with open(report, newline="") as f:
        assert [(r["task"], r["key"], r["label"], r["annotation"]) for r in csv.DictReader(f)] == \
            [(str(ids["0"]), "0", "bird", str(bird.id))]

    # started again over it: the first pull meets it, and the command goes on
    run = Command(tmp_path, server, store, *how, "--project", project, name="second")
    try:
        run.wait_for(ready)
        run.wait_for(f"annotation {bird.id} of task {ids['0']}", 60)
        annotate(client, ids["2"], y[2], from_name="label")
        wait_until(lambda: labels_in(store).get(2) == str(y[2]), 60, "an annotation after the restart")
        out = run.stop()
    finally:
        run.kill()
    assert "stopped; 2 labels" in out and "1 annotations naming no single class of the session kept aside" in out
    if mode == "backend":
        return

    # the choice added to the project's config (an admin adds a class), and skdbal started with it among its
    # classes (a new store: a session's classes are fixed): the first pull records it
    config = client.projects.get(id=project).label_config
    client.projects.update(id=project, label_config=config.replace("</Choices>", '<Choice value="bird"/></Choices>'))
    wider = tmp_path / "wider.db"
    run = Command(tmp_path, server, wider, *how, "--project", project, classes=CLASSES + ",bird", name="third")
    try:
        run.wait_for("pulled 3 new annotation events before starting")
        out = run.stop()
    finally:
        run.kill()
    assert labels_in(wider) == {0: "bird", 1: str(y[1]), 2: str(y[2])} and "kept aside" not in out


def test_connect_hands_a_new_token_over_in_a_project_with_several_backends(server, tmp_path):
    """Two other ML backends in the project, then skdbal's, connected with a token; served again with a new
    token and connected again (the update path): Label Studio takes the update (it answered 500 without the
    project), its webhook carries the new token, and an annotation reaches the store by it."""
    from label_studio_sdk import LabelStudio
    from test_backend_real import Backend

    from skdbal.labelstudio import LabelStudioSync
    from skdbal.labelstudio.cli import connect_backend

    X, y = digits_flat(40)
    client = LabelStudio(base_url=server.url, api_key=TOKEN)
    project = client.projects.create(title="several backends", label_config=CONFIG).id
    others = [Backend(LabelStudioSync(session_of(X, tmp_path / f"other{k}.db"), client, project), free_port())
              for k in range(2)]
    session = session_of(X, tmp_path / "ours.db")
    sync = LabelStudioSync(session, client, project)
    sync.import_tasks(lambda i: {"image": png_uri(X[i])})
    port = free_port()
    backend = Backend(sync, port, token="first-token-0123456789")
    try:
        for other in others:
            assert connect_backend(client, project, other.url) is not None
        ml = connect_backend(client, project, backend.url, token="first-token-0123456789")
        assert ml is not None and len(client.ml.list(project=project)) == 3
        backend.stop()
        backend = Backend(sync, port, token="second-token-0123456789")      # a restart with a new token
        assert connect_backend(client, project, backend.url, token="second-token-0123456789") is None
        hooks = {h.url: h.headers for h in client.webhooks.list(project=project)}
        header = "Basic " + base64.b64encode(b"skdbal:second-token-0123456789").decode()
        assert hooks[backend.url + "/webhook"] == {"Authorization": header}    # readable by the project's users
        assert all(not hasattr(b, "basic_auth_pass") or b.basic_auth_pass is None
                   for b in client.ml.list(project=project))                   # the backend's settings: write-only
        state = client.ml.get(id=ml).state
        assert str(getattr(state, "value", state)) == "CO", state
        session.start()
        annotate(client, sync._task_of[3], y[3])
        wait_until(lambda: 3 in session.store.current_labels(), 15, "the annotation, by the webhook with the new token")
    finally:
        session.stop()
        backend.stop()
        for other in others:
            other.stop()


def test_a_backend_label_studio_does_not_accept_stops_the_command(server, tmp_path):
    """``--connect`` with a ``--backend-url`` that Label Studio cannot reach: Label Studio refuses the backend
    (its health check fails), and the command stops with one line saying so, rather than serve unheard."""
    X, _ = digits_flat(40)
    np.save(tmp_path / "pool.npy", X.reshape(-1, 8, 8).astype(np.float32))
    nowhere = f"http://127.0.0.1:{free_port()}"
    run = Command(tmp_path, server, tmp_path / "refused.db", "--backend", "--backend-port", free_port(), "--connect",
                  "--backend-url", nowhere, "--new-project", "refused backend", name="refused")
    try:
        code = run.process.wait(180)
    finally:
        run.kill()
    out = run.text()
    errors = [line for line in out.splitlines() if "error" in line.lower()]
    assert code == 2, out
    assert len(errors) == 1 and errors[0].startswith(
        f"skdbal labelstudio: error: Label Studio did not accept the backend at {nowhere} (--connect): "
        f"Label Studio answered 400:"), out
    assert "Traceback" not in out

