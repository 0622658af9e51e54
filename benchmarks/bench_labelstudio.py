"""The round trip through a real Label Studio, per batch: what it costs from an annotator's last
annotation of a batch to the next model's scores ordering the Data Manager.

Label Studio 1.23 (SQLite) is started on 127.0.0.1 from its own virtual environment
(``$SKDBAL_LABEL_STUDIO`` or ``.venv-ls/bin/label-studio``; see ``tests/labelstudio/lsserver.py``),
or an existing one is used with ``--url`` and ``--token-env``. skdbal runs as ``skdbal labelstudio``
does: a :class:`~skdbal.labelling.LabellingSession` with the command's default model (an MC-dropout
CNN, BALD at T=20) over scikit-learn's digits, and :class:`~skdbal.labelstudio.LabelStudioSync`
pulling every ``--interval`` seconds in its own thread. A simulated annotator labels, through Label
Studio's API, the 10 tasks on top of the queue sorted by prediction score, then waits for the next
model version's predictions. torch is pinned to one thread (``torch.set_num_threads(1)``).

    python benchmarks/bench_labelstudio.py [--pool 1797] [--batches 6] [--interval 2]

Printed per batch: the pull that records the batch, the model (retrain and the next batch's query,
in the session's loop), the push (scoring every unlabelled task, then Label Studio deleting the old
predictions and importing the new ones), and the end-to-end time the annotator waits.
"""
import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_digits

from skdbal import ActiveLearner, MCDropoutClassifier
from skdbal.acquisition import bald
from skdbal.labelling import LabellingSession
from skdbal.labelling.pools import Pool
from skdbal.labelstudio import LabelStudioSync
from skdbal.labelstudio.cli import connect, label_config, task_data

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "labelstudio"))
from lsserver import TOKEN, Server, label_studio_executable  # noqa: E402


def timed(obj, name, log):
    method = getattr(obj, name)

    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        out = method(*args, **kwargs)
        log.append((name, t0, time.perf_counter(), out))
        return out

    setattr(obj, name, wrapper)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool", type=int, default=1797, help="tasks (digits images; at most 1797)")
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between pulls")
    parser.add_argument("--url", help="an existing Label Studio (else one is started)")
    parser.add_argument("--token-env", help="with --url: the variable holding its token")
    args = parser.parse_args()
    torch.set_num_threads(1)

    server = None
    if args.url:
        url, token = args.url, os.environ[args.token_env]
    else:
        executable = label_studio_executable()
        if executable is None:
            sys.exit("no label-studio: set SKDBAL_LABEL_STUDIO, or make .venv-ls (see tests/labelstudio/lsserver.py)")
        t0 = time.perf_counter()
        server = Server(executable, tempfile.mkdtemp(prefix="bench-ls-")).start()
        print(f"Label Studio started in {time.perf_counter() - t0:.1f} s at {server.url}")
        url, token = server.url, TOKEN
    try:
        run(args, connect(url, token))
    finally:
        if server is not None:
            server.stop()


def run(args, client):
    X, y = load_digits(return_X_y=True)
    X, y = (X[:args.pool] / 16.0).astype(np.float32).reshape(-1, 8, 8), y[:args.pool]
    pool = Pool(X)
    classes = list(range(10))
    project = client.projects.create(title=f"bench {time.time():.0f}", label_config=label_config("images", classes)).id
    net = MCDropoutClassifier(classes=np.arange(10), module__kernel_size=3, max_epochs=50, batch_size=32,
                              n_samples=20, random_state=0)
    learner = ActiveLearner(net, bald, random_state=0, seeding="step", verbose=False)
    session = LabellingSession(learner, X, classes, str(Path(tempfile.mkdtemp()) / "bench.db"), keys=pool.keys,
                               batch_size=10)
    sync = LabelStudioSync(session, client, project)
    t0 = time.perf_counter()
    made = sync.import_tasks(task_data(pool, "image"))
    print(f"imported {made} tasks in {time.perf_counter() - t0:.1f} s")
    log = []
    for name in ("pull", "push", "_send"):
        timed(sync, name, log)
    stop = threading.Event()

    def version():
        return client.projects.get(id=project).model_version

    def wait_for(expected, timeout=300):
        deadline = time.time() + timeout
        while version() != expected:
            if session.error is not None:
                raise RuntimeError("the session failed") from session.error
            if time.time() > deadline:
                raise TimeoutError(expected)
            time.sleep(0.05)
        return time.perf_counter()

    rows = []
    with session:
        runner = threading.Thread(target=sync.run, args=(stop, args.interval), daemon=True)
        runner.start()
        wait_for("skdbal-first")
        for b in range(args.batches):
            from test_real_server import queue

            top, ids = queue(client, project)
            annotated_at = None
            for key, _ in top:
                client.annotations.create(id=ids[key], result=[{"from_name": "label", "to_name": "image",
                                                                 "type": "choices",
                                                                 "value": {"choices": [str(y[int(key)])]}}])
                annotated_at = time.perf_counter()
            done = wait_for(f"skdbal-v{b}")
            while not any(e[0] == "push" and e[1] > annotated_at for e in log):   # its last call has returned
                time.sleep(0.01)
            pulls = [e for e in log if e[0] == "pull" and e[2] > annotated_at and e[3]]
            pull = pulls[0] if pulls else None
            push = [e for e in log if e[0] == "push" and e[1] > annotated_at][0]
            send = [e for e in log if e[0] == "_send" and e[1] >= push[1]][0]
            rows.append({"batch": b, "labels": 10 * (b + 1), "pull": pull[2] - pull[1],
                         "wait for pull": pull[1] - annotated_at,
                         "model": push[1] - pull[2], "score pool": send[1] - push[1], "send": send[2] - send[1],
                         "predictions": send[3], "end to end": done - annotated_at})
            r = rows[-1]
            print(f"batch {b}: {r['labels']} labels | wait for pull {r['wait for pull']:.2f} s, pull "
                  f"{r['pull']:.2f} s | model (retrain + query) {r['model']:.2f} s | push: score "
                  f"{r['predictions']} tasks {r['score pool']:.2f} s, send {r['send']:.2f} s | end to end "
                  f"{r['end to end']:.2f} s", flush=True)
        idle = [e[2] - e[1] for e in log if e[0] == "pull" and e[3] == 0]
        stop.set()
        runner.join(30)
    print(f"\nmedians over {len(rows)} batches of 10, {len(pool)} tasks, pulls every {args.interval} s:")
    for key in ("wait for pull", "pull", "model", "score pool", "send", "end to end"):
        print(f"  {key:14s} {statistics.median(r[key] for r in rows):6.2f} s")
    print(f"  a pull that finds nothing new: median {statistics.median(idle):.3f} s over {len(idle)}")


if __name__ == "__main__":
    main()
