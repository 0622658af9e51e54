"""How to spend the cores: one run with more threads, or more runs of one thread?

Times the same `gal2017` step (train 50 epochs on ``--labels`` images,
score 2,000 pool points with BALD at T=100, predict the 10,000 test images)
in fresh worker processes, side by side in one run:

- one process, 1 torch thread;
- one process, ``--cores`` torch threads;
- ``--cores`` processes at once, 1 torch thread each (what ``--n-jobs`` does).

and prints each configuration's throughput in steps per minute, relative to
the first. Run it on an otherwise idle machine (pause any grid first).

    SKDBAL_DATA=../shared/data python benchmarks/bench_parallel.py [--labels 520] [--repeats 2]
"""
import argparse
import json
import subprocess
import sys
import time

import numpy as np


def worker(threads: int, n_labels: int) -> dict:
    import torch

    torch.set_num_threads(threads)
    from skdbal.acquisition import bald
    from skdbal.datasets import load_mnist
    from skdbal.experiments import get_preset, make_estimator

    preset = get_preset("gal2017")
    X, y = load_mnist(download=False, return_X_y=True)
    X_test, _ = load_mnist(download=False, subset="test", return_X_y=True)
    perm = np.random.RandomState(0).permutation(len(X))
    labelled, pool = perm[:n_labels], perm[-preset.pool_subsample:]
    t0 = time.perf_counter()
    net = make_estimator(preset, random_state=0, n_train=n_labels).fit(X[labelled], y[labelled])
    t1 = time.perf_counter()
    bald(net, X[pool], n_instances=10)
    t2 = time.perf_counter()
    net.predict(X_test)
    t3 = time.perf_counter()
    return {"train": t1 - t0, "score": t2 - t1, "evaluate": t3 - t2, "step": t3 - t0}


def launch(n_procs: int, threads: int, n_labels: int) -> list:
    cmd = [sys.executable, __file__, "--worker", "--threads", str(threads), "--labels", str(n_labels)]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) for _ in range(n_procs)]
    outputs = [p.communicate()[0] for p in procs]
    if any(p.returncode for p in procs):
        raise RuntimeError(f"a worker failed (exit codes {[p.returncode for p in procs]}); run it alone: "
                           f"{' '.join(cmd)}")
    return [json.loads(out.strip().splitlines()[-1]) for out in outputs]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labels", type=int, default=520)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.threads, args.labels)))
        return
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from _common import machine, markdown_table

    print(f"machine: {machine()}")
    print(f"gal2017 step at {args.labels} labels: train 50 epochs, score 2,000 at T=100, predict 10,000")
    configs = [(1, 1), (1, args.cores), (args.cores, 1)]
    best = {}
    for repeat in range(args.repeats):  # interleaved, so drift hits every configuration alike
        for n_procs, threads in configs:
            results = launch(n_procs, threads, args.labels)
            rate = 60 * n_procs / max(r["step"] for r in results)
            parts = "  ".join(f"{k} {np.mean([r[k] for r in results]):5.1f} s"
                              for k in ("train", "score", "evaluate", "step"))
            print(f"  repeat {repeat + 1}: {n_procs} process(es) x {threads} thread(s): {parts}  "
                  f"-> {rate:5.2f} steps/min", flush=True)
            best[(n_procs, threads)] = max(best.get((n_procs, threads), 0.0), rate)
    base = best[configs[0]]
    print("best of the repeats, throughput relative to 1 process x 1 thread:")
    for (n_procs, threads), rate in best.items():
        print(f"  {n_procs} process(es) x {threads} thread(s): {rate:5.2f} steps/min  ({rate / base:.2f}x)")
    print()
    print(markdown_table(["configuration", "steps per min", "over 1 process x 1 thread"],
                         [[f"{n} process(es) x {t} thread(s)", f"{rate:.2f}", f"{rate / base:.2f}"]
                          for (n, t), rate in best.items()]))


if __name__ == "__main__":
    from _common import recorded  # the whole output and a JSON with the machine, versions, commit

    with recorded(__file__):
        main()
