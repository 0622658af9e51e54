"""skdbal behind a real Label Studio server on 127.0.0.1 (slow).

The test starts ``label-studio`` from its own virtual environment (so that its dependencies never
touch ours): ``$SKDBAL_LABEL_STUDIO`` names the executable, else ``.venv-ls/bin/label-studio`` in
the checkout (``.ci/run`` makes it: ``python -m venv .venv-ls && .venv-ls/bin/pip install
label-studio``). The server gets a fresh data folder with SQLite, a preset user and a preset API
token. A simulated annotator then labels through Label Studio's API, in the order of the Data
Manager sorted by our scores, and the session must follow: every annotation recorded once, skips,
relabels and deletions handled, the order changed after a retrain, nothing lost or doubled when
skdbal restarts, and none when Label Studio restarts.
"""
import base64
import json
import os
import time

import numpy as np
import pytest
from _helpers import digits_flat
from lsserver import LOOPBACK_IPS, TOKEN
from sklearn.linear_model import LogisticRegression

from skdbal import ActiveLearner
from skdbal.acquisition import max_entropy
from skdbal.labelstudio.sync import list_tasks

pytestmark = pytest.mark.slow

CONFIG = ('<View><Image name="image" value="$image"/><Choices name="digit" toName="image" choice="single">'
          + "".join(f'<Choice value="{c}"/>' for c in range(10)) + "</Choices></View>")
INITIAL = np.arange(10)


def png_uri(row):
    from skdbal.labelling.app import png_bytes

    return "data:image/png;base64," + base64.b64encode(png_bytes(np.asarray(row).reshape(8, 8))).decode()


def session_of(X, store):
    from skdbal.labelling import LabellingSession

    learner = ActiveLearner(LogisticRegression(max_iter=300, random_state=0), max_entropy, random_state=0,
                            seeding="step", verbose=False)
    return LabellingSession(learner, X, classes=range(10), store=store, batch_size=10, initial=INITIAL)


def queue(client, project, n=10, sampling="queue"):
    """The Data Manager's order by prediction score, best first (the highest in ``"queue"`` sampling, the
    lowest in ``"uncertainty"``, the command's default): (key, score) of the unlabelled tasks."""
    query = json.dumps({"ordering": ["-tasks:predictions_score" if sampling == "queue" else "tasks:predictions_score"]})
    tasks = [t for t in list_tasks(client, project, query=query, fields="all")   # none past the last page
             if not t["total_annotations"]]
    return ([(t["data"]["skdbal_key"], t["predictions_score"]) for t in tasks[:n]],
            {t["data"]["skdbal_key"]: t["id"] for t in tasks})


def no_invalid_page(server):
    """Label Studio logged no request past a list's last page (``Invalid page.``, each with a traceback)."""
    lines = [line for line in server.log().splitlines() if "Invalid page" in line]
    assert lines == [], "\n".join(lines[:5])


def _view_ordering(client, project, view):
    found = [v for v in client.views.list(project=project) if v.id == view]
    data = found[0].data if found else {}
    return (data if isinstance(data, dict) else dict(data)).get("ordering")


def annotate(client, task, label, from_name="digit"):
    return client.annotations.create(id=task, result=[{"from_name": from_name, "to_name": "image", "type": "choices",
                                                       "value": {"choices": [str(label)]}}])


def lines_until(process, text, timeout=120):
    """The lines a command printed (its stdout, read line by line) until one holds ``text``."""
    deadline, seen = time.time() + timeout, []
    while time.time() < deadline:
        line = process.stdout.readline()
        if not line and process.poll() is not None:
            break
        seen.append(line)
        if text in line:
            return seen
    raise AssertionError(f"{text!r} not printed: {''.join(seen)}")


def wait_until(condition, timeout=60, what="the condition"):
    deadline = time.time() + timeout
    while not condition():
        if time.time() > deadline:
            raise TimeoutError(f"{what} did not happen within {timeout} s")
        time.sleep(0.05)


def test_label_studio_listens_on_loopback_only(server):
    """Every socket that Label Studio's processes listen on is on 127.0.0.1 or ::1 (its default
    ``--internal-host`` is 0.0.0.0: every interface, with the preset token)."""
    pytest.importorskip("psutil")
    found = server.listening()        # read from the processes' sockets: no traffic to other addresses
    assert ("127.0.0.1", server.port) in found
    assert [(ip, port) for ip, port in found if ip not in LOOPBACK_IPS] == []


def test_label_studio_orders_the_queue_by_our_scores_and_loses_nothing(server, tmp_path):
    from label_studio_sdk import LabelStudio

    from skdbal.labelstudio import LabelStudioSync

    X, y = digits_flat(200)
    client = LabelStudio(base_url=server.url, api_key=TOKEN)
    project = client.projects.create(title="skdbal digits", label_config=CONFIG).id
    store = tmp_path / "project.db"
    session = session_of(X, store)
    sync = LabelStudioSync(session, client, project)
    assert sync.import_tasks(lambda i: {"image": png_uri(X[i])}) == 200
    assert sync.import_tasks(lambda i: {"image": png_uri(X[i])}) == 0          # found by key: none twice
    view = sync.queue_view()
    assert sync.queue_view() == view                                            # made once
    assert _view_ordering(client, project, view) == ["-tasks:predictions_score"]
    session.start()
    try:
        # before any model, every task is scored by the cold-start order: the first batch on top, scored
        # 1 - rank / 199 (ranks 0..9 of 200), then the covering order
        wait_until(lambda: all(s is not None for _, s in queue(client, project, 200)[0]), 60,
                   "every task scored by the cold start")
        top, ids = queue(client, project)
        assert sorted(int(k) for k, _ in top) == INITIAL.tolist()
        np.testing.assert_allclose([s for _, s in top], [1 - r / 199 for r in range(10)], atol=1e-6)
        for key, _ in top:
            annotate(client, ids[key], y[int(key)])
        assert sync.pull() == 10 and sync.pull() == 0                             # each annotation once
        labels = session.store.current_labels()
        assert {i: r["label"] for i, r in labels.items()} == {i: str(y[i]) for i in INITIAL}
        assert {r["annotator"] for r in labels.values()} == {"labelstudio:1"}

        # model 0: every unlabelled task carries its guess and score; the queue is the session's batch
        session.wait_for_version(0, timeout=60)
        wait_until(lambda: sync.pushed_version == 0 or session.error, what="model 0's predictions")
        assert session.error is None, json.dumps(getattr(session.error, "body", None))
        top, ids = queue(client, project)
        batch = session.board.batch
        assert [int(k) for k, _ in top] == batch                                   # max entropy, best first
        raw = [session.board.scores[i] for i in batch]          # max entropy in nats; Label Studio takes [0, 1]
        assert top[0][1] == 1.0 and [s for _, s in top] == sorted((s for _, s in top), reverse=True)
        assert all(np.diff(raw) <= 0)
        assert client.projects.get(id=project).model_version == "skdbal-v0"
        first_order = [k for k, _ in top]

        # a skip (a cancelled annotation), a relabel, a deletion; the rest labelled right
        a, b, c = (ids[k] for k in first_order[:3])
        client.annotations.create(id=a, result=[], was_cancelled=True)
        wrong = annotate(client, b, (y[int(first_order[1])] + 1) % 10)
        gone = annotate(client, c, y[int(first_order[2])])
        assert sync.pull() == 3
        client.annotations.update(id=wrong.id, result=[{"from_name": "digit", "to_name": "image",
                                                         "type": "choices",
                                                         "value": {"choices": [str(y[int(first_order[1])])]}}])
        client.annotations.delete(id=gone.id)
        assert sync.pull() == 2
        current = session.store.current_labels()
        assert int(first_order[0]) in session.store.skipped()
        assert current[int(first_order[1])]["label"] == str(y[int(first_order[1])])
        assert int(first_order[2]) not in current
        for key in first_order[3:]:
            annotate(client, ids[key], y[int(key)])
        # the deleted label left its item waiting (an undo is not an answer), so the batch is not answered yet:
        # it is labelled again, and the model retrains on the whole batch
        annotate(client, c, y[int(first_order[2])])
        assert sync.pull() == 8
        session.wait_for_version(1, timeout=60)
        wait_until(lambda: sync.pushed_version == 1 or session.error, what="model 1's predictions")
        assert session.error is None, json.dumps(getattr(session.error, "body", None))
        top, _ = queue(client, project)
        assert [k for k, _ in top] != first_order and [int(k) for k, _ in top][:5] == session.board.batch[:5]
        n_events, n_labels = len(session.store.events()), len(session.store.current_labels())
    finally:
        session.stop()
        session.store.close()

    # skdbal restarts: the annotations pulled again add nothing, the session resumes at model 1
    session = session_of(X, store)
    sync = LabelStudioSync(session, client, project)
    assert sync.import_tasks(lambda i: {"image": png_uri(X[i])}) == 0
    session.start()
    try:
        assert sync.pull() == 0 and len(session.store.events()) == n_events
        session.wait_for_version(1, timeout=60)
        assert len(session.store.current_labels()) == n_labels
    finally:
        session.stop()

    # Label Studio restarts: its annotations are all still there, and pulled again add nothing
    server.stop()
    server.start()
    client = LabelStudio(base_url=server.url, api_key=TOKEN)
    session = session_of(X, store)
    sync = LabelStudioSync(session, client, project)
    sync.import_tasks(lambda i: {"image": png_uri(X[i])})
    assert sync.pull() == 0 and len(session.store.events()) == n_events
    no_invalid_page(server)


def test_the_command_orders_the_queue_and_resumes_after_a_restart(server, tmp_path):
    """``skdbal labelstudio`` as a user runs it (a process; the token in a variable; the default MC-dropout
    net and BALD), stopped by SIGTERM after two models and started again: nothing lost or doubled."""
    import signal
    import sqlite3
    import subprocess
    import sys

    from label_studio_sdk import LabelStudio

    X, y = digits_flat(200)
    np.save(tmp_path / "pool.npy", X.reshape(-1, 8, 8).astype(np.float32))
    store = tmp_path / "cli.db"
    client = LabelStudio(base_url=server.url, api_key=TOKEN)

    def command(*project):
        env = dict(os.environ, SKDBAL_TEST_LS_TOKEN=TOKEN, OMP_NUM_THREADS="1")
        return subprocess.Popen([sys.executable, "-u", "-m", "skdbal", "labelstudio",
                                 "--npy", str(tmp_path / "pool.npy"),
                                 "--classes", ",".join(map(str, range(10))), "--url", server.url, "--token-env",
                                 "SKDBAL_TEST_LS_TOKEN", "--store", str(store), "--interval", "0.5", *project],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def version():
        return client.projects.get(id=project).model_version

    process = command("--new-project", "cli digits")
    try:
        out = lines_until(process, "the queue:")
        project = int(next(line for line in out if line.startswith("made project")).split()[2].rstrip(","))
        assert any("imported 200 tasks (0 were there)" in line for line in out)
        assert f"/projects/{project}/data?tab=" in out[-1]
        for expected in ("skdbal-first", "skdbal-v0", "skdbal-v1"):
            wait_until(lambda expected=expected: version() == expected, timeout=120, what=expected)
            top, ids = queue(client, project)
            assert len({s for _, s in top}) > 1 or expected == "skdbal-first"   # scores, not all equal
            if expected == "skdbal-v0":
                order_v0 = [k for k, _ in top]
            if expected == "skdbal-v1":
                assert [k for k, _ in top] != order_v0
                break
            for key, _ in top:
                annotate(client, ids[key], y[int(key)], from_name="label")    # the config skdbal made
        labels_csv = store.with_name(store.stem + "-labels.csv")    # --labels-csv's default, beside the store
        wait_until(lambda: labels_csv.exists() and len(labels_csv.read_text().splitlines()) == 21, timeout=60,
                   what="the 20 labels in labels.csv while the command runs")
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
        assert "stopped; 20 labels" in process.stdout.read()
    finally:
        if process.poll() is None:
            process.kill()

    # started again on the same project: no task imported twice, no annotation recorded twice
    process = command("--project", str(project))
    try:
        out = lines_until(process, "the queue:")
        assert any("imported 0 tasks (200 were there)" in line for line in out)
        top, ids = queue(client, project)
        for key, _ in top[:3]:
            annotate(client, ids[key], y[int(key)], from_name="label")
        wait_until(lambda: sqlite3.connect(store).execute("SELECT COUNT(*) FROM events").fetchone()[0] >= 23,
                   timeout=60, what="the three new annotations in the store")
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
    finally:
        if process.poll() is None:
            process.kill()
    db = sqlite3.connect(store)
    kinds = db.execute("SELECT kind, COUNT(*), COUNT(DISTINCT item) FROM events GROUP BY kind").fetchall()
    assert kinds == [("label", 23, 23)]
    assert len(labels_csv.read_text().splitlines()) == 24     # written again on stop
    assert len(list_tasks(client, project, fields="task_only")) == 200
    no_invalid_page(server)
