"""The labelling server on 127.0.0.1: durable submissions per second, submit latency with 20
annotators, and the time from a batch's last label to the next batch.

A real uvicorn server (``skdbal.labelling.app``) over a real SQLite store (WAL,
``synchronous=FULL``); clients are httpx in threads of this process. torch is pinned to one
thread (``torch.set_num_threads(1)``), as everywhere on 2 cores.

    python benchmarks/bench_labelling.py [--annotators 20] [--per-annotator 25] [--think-ms 0]
    python benchmarks/bench_labelling.py --mnist-only      # the MNIST next-batch time alone

The MNIST part (the gal2017 network, T=100, BALD on a 2,000-image random subsample of the
60,000-image pool per batch) reads MNIST with ``skdbal.datasets.load_mnist`` (``$SKDBAL_DATA``);
``--no-mnist`` leaves it out.
"""
import argparse
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import torch
import uvicorn
from sklearn.datasets import load_digits

from skdbal import ActiveLearner, MCDropoutClassifier
from skdbal.acquisition import bald
from skdbal.labelling import LabellingSession
from skdbal.labelling.app import make_app

H = {"X-Token": "bench"}


def serve(app):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    return f"http://127.0.0.1:{port}", lambda: (setattr(server, "should_exit", True), thread.join(10))


def session_of(X, path, batch_size, retrain_after):
    net = MCDropoutClassifier(classes=np.arange(10), module__kernel_size=3, max_epochs=50, batch_size=32,
                              n_samples=20, random_state=0)
    learner = ActiveLearner(net, bald, random_state=0, seeding="step", verbose=False)
    return LabellingSession(learner, X, classes=range(10), store=path, batch_size=batch_size,
                            retrain_after=retrain_after)

#: The closing table's rows (measure, median or rate, p99 or max, unit), appended as each is measured.
ROWS = []


def print_table():
    from _common import markdown_table  # the script's folder is on the path when it runs as a program

    print()
    print(markdown_table(["measure", "value", "p99 or max", "unit"], ROWS))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--annotators", type=int, default=20)
    parser.add_argument("--per-annotator", type=int, default=25)
    parser.add_argument("--think-ms", type=float, default=0.0,
                        help="pause of each annotator between submissions (0: back to back, a saturation test)")
    parser.add_argument("--no-mnist", action="store_true", help="leave out the MNIST next-batch time")
    parser.add_argument("--mnist-only", action="store_true", help="only the MNIST next-batch time")
    parser.add_argument("--batches", type=int, default=4, help="batches timed for the next-batch times")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.mnist_only:
        mnist_next_batch(args.batches)
        return print_table()
    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32).reshape(-1, 8, 8)
    tmp = Path(tempfile.mkdtemp())

    # 1-2: submissions, one client then 20 at once; one big batch, no retrain meanwhile
    n_total = args.annotators * args.per_annotator
    session = session_of(X, tmp / "a.db", batch_size=1297, retrain_after=10**9).start()
    base, stop = serve(make_app(session, token="bench"))
    with httpx.Client(base_url=base, timeout=30, headers=H) as c:
        items = c.get("/api/batch?annotator=one&n=200&wait=5").json()["items"]
        t0 = time.perf_counter()
        for it in items:
            c.post("/api/submit", headers=H, json={"item": it["item"], "label": str(y[it["item"]]),
                                                   "annotator": "one"}).raise_for_status()
        serial = len(items) / (time.perf_counter() - t0)
    latencies, lock = [], threading.Lock()

    def annotator(k):
        with httpx.Client(base_url=base, timeout=30, headers=H) as c:
            got = c.get(f"/api/batch?annotator=a{k}&n={args.per_annotator}&wait=5").json()["items"]
            for it in got:
                time.sleep(args.think_ms / 1000 * np.random.uniform(0.5, 1.5))
                t = time.perf_counter()
                c.post("/api/submit", headers=H, json={"item": it["item"], "label": str(y[it["item"]]),
                                                       "annotator": f"a{k}"}).raise_for_status()
                with lock:
                    latencies.append(time.perf_counter() - t)

    threads = [threading.Thread(target=annotator, args=(k,)) for k in range(args.annotators)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    stop()
    session.stop()
    lat = np.array(latencies) * 1000
    print(f"durable submissions, one client:       {serial:8.1f} /s")
    ROWS.append(["durable submissions, one client", f"{serial:.1f}", "", "per s"])
    ROWS.append([f"submissions of {args.annotators} annotators at once", f"{len(lat) / wall:.1f}", "", "per s"])
    ROWS.append([f"submission latency, {args.annotators} annotators, think time {args.think_ms:g} ms",
                 f"{np.percentile(lat, 50):.1f}", f"{np.percentile(lat, 99):.1f}", "ms (median, p99)"])
    print(f"{args.annotators} annotators, {len(lat)} submissions:   {len(lat) / wall:8.1f} /s, "
          f"p50 {np.percentile(lat, 50):.1f} ms, p99 {np.percentile(lat, 99):.1f} ms (asked {n_total}, "
          f"think time {args.think_ms:g} ms)")

    # 3: from a batch's last label to the next batch, on digits (BALD, T=20, the demo's CNN)
    session = session_of(X, tmp / "b.db", batch_size=10, retrain_after=10).start()
    gaps = []
    gaps = next_batch_gaps(session, y, args.batches)
    print(f"last label -> next batch, digits:      median {statistics.median(gaps):.2f} s, "
          f"max {max(gaps):.2f} s over {len(gaps)} batches (retrain 50 epochs + BALD on the pool; "
          f"each: {', '.join(f'{g:.2f}' for g in gaps)} s)")
    ROWS.append(["last label to next batch, digits", f"{statistics.median(gaps):.2f}", f"{max(gaps):.2f}",
                 "s (median, max)"])
    if not args.no_mnist:
        mnist_next_batch(args.batches)
    print_table()


def next_batch_gaps(session, y, n_batches):
    """Label ``n_batches`` batches with the true labels; the seconds from each batch's last label
    to the next batch being offered (the retrain and the query in between)."""
    gaps = []
    for round_ in range(n_batches):
        batch = session.next_batch(annotator="ann", timeout=600)
        for it in batch:
            session.submit(it["item"], int(y[it["item"]]), annotator="ann")
        t0 = time.perf_counter()
        session.wait_for_version(round_, timeout=600)
        while not set(session.board.batch).isdisjoint({b["item"] for b in batch}):
            if session.error is not None:
                raise RuntimeError("the session's loop failed") from session.error
            time.sleep(0.005)
        gaps.append(time.perf_counter() - t0)
    session.stop()
    return gaps


def mnist_next_batch(n_batches):
    """The gal2017 network on MNIST: 20 balanced initial labels, batches of 10, BALD with T=100 on a
    2,000-image random subsample of the pool (the preset's protocol)."""
    from skdbal.datasets import load_mnist
    from skdbal.experiments import get_preset, make_estimator

    X, y = load_mnist(subset="train", return_X_y=True)
    X = X.reshape(-1, 1, 28, 28).astype(np.float32)
    initial = np.concatenate([np.flatnonzero(y == c)[:2] for c in range(10)])
    learner = ActiveLearner(make_estimator(get_preset("gal2017"), random_state=0), bald, random_state=0,
                            seeding="step", pool_subsample=2000, verbose=False)
    session = LabellingSession(learner, X, classes=range(10), store=Path(tempfile.mkdtemp()) / "m.db",
                               batch_size=10, retrain_after=20, initial=initial).start()
    gaps = next_batch_gaps(session, y, n_batches)
    print(f"last label -> next batch, MNIST:       median {statistics.median(gaps):.2f} s, "
          f"max {max(gaps):.2f} s over {len(gaps)} batches (gal2017 net, 50 epochs, BALD T=100 on 2,000 "
          f"of 60,000; each: {', '.join(f'{g:.1f}' for g in gaps)} s)")
    ROWS.append(["last label to next batch, MNIST", f"{statistics.median(gaps):.2f}", f"{max(gaps):.2f}",
                 "s (median, max)"])


if __name__ == "__main__":
    from _common import recorded  # the whole output and a JSON with the machine, versions, commit

    with recorded(__file__):
        main()
