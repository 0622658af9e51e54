"""The demo's learning curve: ``skdbal label --demo digits`` labelled by a truthful scripted annotator.

For each seed, a :class:`skdbal.labelling.LabellingSession` with the demo's learner and first batch
(:func:`skdbal.labelling.cli.demo_learner`, :func:`skdbal.labelling.cli.demo_initial`, seeded) is
labelled in process: the annotator takes each batch as ``next_batch`` offers it, submits the true
digit of every item, and waits for the next model and its batch (it never takes the tail). The test
accuracy of every model version on the demo's 500 test digits is read from the store. The same
learner (cloned), first batch and batch size are also run through ``ActiveLearner.simulate``; the two
must agree (``tests/labelling/test_demo_learning.py`` tests it on a small case).

    python benchmarks/bench_demo_learning.py [--seeds 0 1 2] [--labels 100] [--batch-size 10]

Writes ``docs/results/demo_learning/results.json`` (the curves, the machine, versions, the git
commit) and ``raw.txt`` (what it printed). torch on one thread, ``OMP_NUM_THREADS=1``.
"""
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import sklearn  # noqa: E402
import torch  # noqa: E402
from sklearn.base import clone  # noqa: E402

import skdbal  # noqa: E402
from skdbal.experiments.data import load_digits_images  # noqa: E402
from skdbal.labelling import LabellingSession  # noqa: E402
from skdbal.labelling.cli import DEMO_INITIAL, demo_initial, demo_learner  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "docs" / "results" / "demo_learning"


def stable_repr(learner) -> str:
    """The learner's repr without skorch's ``_params_to_validate``, a set whose order changes per process."""
    return re.sub(r"_params_to_validate=\{[^}]*\}, ", "", repr(learner))


def scripted_session(learner, X_pool, y_pool, X_test, y_test, initial, batch_size, n_versions, store):
    """Label ``n_versions`` batches truthfully, one at a time; ``[(n_labels, accuracy, items)]`` per version."""
    session = LabellingSession(learner, X_pool, classes=list(range(10)), store=store, batch_size=batch_size,
                               initial=initial, X_test=X_test, y_test=y_test)
    offered = []
    with session:
        for version in range(n_versions):
            deadline = time.time() + 600
            while sum(q["kind"] == "batch" for q in session.store.queries()) < version + 1:
                if session.error is not None or time.time() > deadline:
                    raise RuntimeError(f"no batch for version {version}") from session.error
                time.sleep(0.01)
            batch = session.next_batch("script", timeout=60)
            for item in batch:
                session.submit(item["item"], int(y_pool[item["item"]]), annotator="script")
            offered.append(sorted(b["item"] for b in batch))
            session.wait_for_version(version, timeout=600)
    return [(v["n_labels"], v["metrics"]["accuracy"], items) for v, items in zip(session.versions(), offered)]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--labels", type=int, default=100, help="labels at the last version (default 100)")
    p.add_argument("--batch-size", type=int, default=10)
    p.add_argument("--no-simulate", action="store_true", help="leave out the simulate() cross-check")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    lines = []

    def say(text):
        print(text, flush=True)
        lines.append(text)

    X_pool, X_test, y_pool, y_test = load_digits_images()
    n_queries = (args.labels - DEMO_INITIAL) // args.batch_size
    runs = []
    for seed in args.seeds:
        learner = demo_learner(seed)
        initial = demo_initial(X_pool, seed)
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            curve = scripted_session(clone(learner), X_pool, y_pool, X_test, y_test, initial, args.batch_size,
                                     n_queries + 1, os.path.join(tmp, "demo.db"))
        seconds = time.perf_counter() - t0
        run = {"seed": seed, "initial": initial.tolist(),
               "initial_classes": sorted({int(y_pool[i]) for i in initial}),
               "session": [{"n_labels": n, "accuracy": a} for n, a, _ in curve], "session_seconds": seconds}
        say(f"seed {seed}: first batch covers classes {run['initial_classes']}; session ({seconds:.0f} s): "
            + ", ".join(f"{n}: {a:.3f}" for n, a, _ in curve))
        if not args.no_simulate:
            t0 = time.perf_counter()
            history = clone(learner).simulate(X_pool, y_pool, n_queries=n_queries, n_instances=args.batch_size,
                                              initial_idx=initial, X_test=X_test, y_test=y_test)
            run["simulate"] = [{"n_labels": r["n_labels"], "accuracy": r["accuracy"]} for r in history]
            run["simulate_seconds"] = time.perf_counter() - t0
            same = [r["accuracy"] == a and sorted(r["query_indices"]) == items
                    for r, (_, a, items) in zip(history, curve)]
            run["simulate_agrees"] = all(same) and len(history) == len(curve)
            say(f"seed {seed}: simulate agrees with the session at every version: {run['simulate_agrees']}")
        runs.append(run)
    final = [r["session"][-1] for r in runs]
    median = float(np.median([f["accuracy"] for f in final]))
    say(f"median test accuracy at {final[0]['n_labels']} labels over seeds {args.seeds}: {median:.3f}")
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).parent).stdout.strip()
    except OSError:
        commit = None
    result = {"benchmark": "bench_demo_learning", "argv": sys.argv[1:], "commit": commit,
              "machine": f"{platform.platform()}, {os.cpu_count()} CPUs, torch {torch.__version__} "
                         f"({torch.get_num_threads()} thread), python {platform.python_version()}",
              "versions": {"skdbal": skdbal.__version__, "torch": torch.__version__, "numpy": np.__version__,
                           "sklearn": sklearn.__version__},
              "config": {"learner": stable_repr(demo_learner(0)), "estimator_params": {  # no memory address, no set
                  k: repr(v) for k, v in sorted(demo_learner(0).estimator.get_params(deep=False).items())
                  if " at 0x" not in repr(v) and not k.startswith("_")},
                  "initial": f"demo_initial: k-means representatives, {DEMO_INITIAL} clusters",
                  "batch_size": args.batch_size},
              "median_accuracy_at_last": median, "runs": runs}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "results.json").write_text(json.dumps(result, indent=1) + "\n")
    (OUT / "raw.txt").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
