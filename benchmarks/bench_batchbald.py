"""BatchBALD: skdbal against baal's ``BatchBALD`` heuristic on the same samples.

Draws ``T`` consistent MC-dropout samples of an MNIST pool once (the Gal CNN
trained on a few hundred labels), saves them, then runs each method in a
fresh process on those samples and prints its time, peak RSS and picks:

- ``skdbal``: :func:`skdbal.acquisition.functional.batch_bald_select` with ``M`` joint
  samples (exact for the first picks), lazy greedy (the default) and with
  every candidate evaluated at every step (``lazy=False``);
- ``baal``: ``baal.active.heuristics.BatchBALD(num_samples=b - 1, num_draw=D)``
  (it picks BALD's best, then ``num_samples`` more),
  whose joint entropies use ``M = T · D`` sampled configurations and hold
  the whole ``(N, M, C)`` array in memory.

Picks are compared where skdbal's are exact (the first ``⌊log_C M⌋ + 1``:
4 for ``M = 1000`` and 10 classes); baal's joint entropies are sampled
throughout and it keeps no pick order, so its picks are compared as a set. Threads: 1 (torch,
OpenMP and BLAS, in every process). Peak RSS is the worker's whole
process: the samples and the imports (the "loaded" column, measured before
the method runs) included.

    SKDBAL_DATA=../shared/data python benchmarks/bench_batchbald.py \\
        [--pool 10000] [--T 100] [--b 10] [--M 1000] [--draws 10]

baal is used when importable (``pip install --no-deps baal structlog
torchmetrics lightning-utilities``).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _peak_rss_mb() -> float:
    """This process's peak resident memory (VmHWM: unlike ru_maxrss, it does
    not carry the parent's peak across fork and exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _worker(args):
    import numpy as np

    P = np.load(args.samples, mmap_mode=None)  # (T, N, C), float32
    if args.worker.startswith("skdbal"):
        from skdbal.acquisition.functional import batch_bald_select
    else:
        from baal.active.heuristics import BatchBALD
    loaded_mb = _peak_rss_mb()
    t0 = time.perf_counter()
    if args.worker.startswith("skdbal"):
        idx, _ = batch_bald_select(P, args.b, n_joint_samples=args.M, random_state=0,
                                   lazy=args.worker == "skdbal")
        picks = idx.tolist()
    else:
        import torch

        torch.manual_seed(0)
        # baal picks BALD's best, then num_samples more: num_samples = b - 1 gives a batch of b
        h = BatchBALD(num_samples=args.b - 1, num_draw=args.draws)
        scores = h.compute_score(np.ascontiguousarray(np.transpose(P, (1, 2, 0)), dtype=np.float64))
        chosen = np.flatnonzero(scores != 0)
        picks = chosen[np.argsort(-scores[chosen], kind="stable")].tolist()  # baal keeps no order
    seconds = time.perf_counter() - t0
    rss_mb = _peak_rss_mb()
    print(json.dumps({"seconds": seconds, "peak_rss_mb": rss_mb, "loaded_rss_mb": loaded_mb, "picks": picks}))


def _run(worker, samples, args, extra=()):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", worker, "--samples", samples,
           "--b", str(args.b), "--M", str(args.M), "--draws", str(args.draws), *extra]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool", type=int, default=10000)
    parser.add_argument("--T", type=int, default=100)
    parser.add_argument("--b", type=int, default=10, help="batch size")
    parser.add_argument("--M", type=int, default=1000, help="skdbal's joint samples")
    parser.add_argument("--draws", type=int, default=10, help="baal's num_draw (its M is T x draws)")
    parser.add_argument("--worker", choices=["skdbal", "skdbal-full", "baal"])
    parser.add_argument("--samples")
    args = parser.parse_args()
    if args.worker:
        return _worker(args)

    import numpy as np
    import torch

    torch.set_num_threads(1)
    sys.path.insert(0, HERE)
    from _common import machine, markdown_table, mnist_or_synthetic, trained_net

    X, y, X_pool, source = mnist_or_synthetic(300, args.pool)
    net = trained_net(X, y, epochs=20, n_samples=args.T)
    net.set_params(consistent_masks=True)
    t0 = time.perf_counter()
    P = net.predict_proba_samples(X_pool)
    print(f"machine: {machine()}")
    print(f"{source} pool of {args.pool}, T={args.T}, C=10: consistent samples in {time.perf_counter() - t0:.1f} s; "
          f"batch of {args.b}; 1 thread per process")
    with tempfile.TemporaryDirectory() as tmp:
        samples = os.path.join(tmp, "P.npy")
        np.save(samples, P)
        ours = _run("skdbal", samples, args)
        full = _run("skdbal-full", samples, args)
        import importlib.util

        if importlib.util.find_spec("baal") is None:
            theirs = {"error": "baal not importable"}
        else:
            theirs = _run("baal", samples, args)
    n_exact = min(args.b, int(np.floor(np.log(args.M) / np.log(10) + 1e-9)) + 1)
    print(f"{'method':40s} {'seconds':>8s} {'peak RSS':>9s} {'(loaded)':>9s}  picks")
    rows = [(f"skdbal batch_bald_select, M={args.M}", ours),
            ("  the same, lazy=False", full),
            (f"baal BatchBALD, num_draw={args.draws} (M={args.T * args.draws})", theirs)]
    table = []
    for name, r in rows:
        if "error" in r:
            print(f"{name:40s} failed: {r['error']}")
            continue
        print(f"{name:40s} {r['seconds']:8.2f} {r['peak_rss_mb']:6.0f} MB {r['loaded_rss_mb']:6.0f} MB  {r['picks']}")
        table.append([name.strip(), f"{r['seconds']:.2f}", f"{r['peak_rss_mb']:.0f}", f"{r['loaded_rss_mb']:.0f}",
                      f"{r['seconds'] / ours['seconds']:.1f}" if "error" not in ours else ""])
    if "error" not in ours and "error" not in theirs:
        print(f"speed-up (baal / skdbal): {theirs['seconds'] / ours['seconds']:.1f}x; "
              f"peak RSS ratio: {theirs['peak_rss_mb'] / ours['peak_rss_mb']:.1f}x")
        exact = ours["picks"][:n_exact]
        print(f"skdbal's exact picks (the first {n_exact}): {exact}; in baal's batch: "
              f"{len(set(exact) & set(theirs['picks']))}/{n_exact}; whole batches share "
              f"{len(set(ours['picks']) & set(theirs['picks']))}/{args.b}")
    print()
    print(markdown_table(["method", "seconds", "peak RSS MB", "loaded RSS MB", "time over skdbal"], table))
    if "error" not in ours and "error" not in theirs:
        print()
        print(markdown_table(["picks compared", "shared"],
                             [[f"skdbal's exact picks (the first {n_exact}) in baal's batch",
                               f"{len(set(exact) & set(theirs['picks']))}/{n_exact}"],
                              ["whole batches", f"{len(set(ours['picks']) & set(theirs['picks']))}/{args.b}"]]))


if __name__ == "__main__":
    from _common import recorded  # the whole output and a JSON with the machine, versions, commit

    with recorded(__file__):
        main()
