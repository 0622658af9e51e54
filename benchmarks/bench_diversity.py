"""The diversity penalty's cost next to scoring: one acquisition step on an MNIST pool.

The Gal CNN (trained on a few hundred MNIST images), a pool of ``--pool``
images (2,000 as in the gal2017 protocol), T MC passes: the time of a BALD
query, and of the same query through ``diversity_penalty`` with input and
embedding features, measured side by side (best of ``--repeat``). Threads:
1 torch thread.

    SKDBAL_DATA=../shared/data python benchmarks/bench_diversity.py [--pool 2000] [--T 100] [--b 10]
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import machine, markdown_table, mnist_or_synthetic, trained_net  # noqa: E402

from skdbal.acquisition import bald, diversity_penalty  # noqa: E402


def best_of(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool", type=int, default=2000)
    parser.add_argument("--T", type=int, default=100)
    parser.add_argument("--b", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    X, y, X_pool, source = mnist_or_synthetic(300, args.pool)
    net = trained_net(X, y, epochs=20, n_samples=args.T)
    print(f"machine: {machine()}")
    print(f"{source} pool of {args.pool}, T={args.T}, batch of {args.b}; best of {args.repeat}")
    base_t, base = best_of(lambda: bald.acquire(net, X_pool, args.b, random_state=0), args.repeat)
    print(f"{'query':50s} {'seconds':>8s} {'extra':>8s} {'candidates':>10s}")
    print(f"{'BALD (top-k)':50s} {base_t:8.3f} {'':>8s} {'':>10s}")
    table = [["BALD (top-k)", f"{base_t:.3f}", "", "", ""]]
    for weight in (0.1, 1.0):
        for features in ("input", "embedding"):
            strategy = diversity_penalty(bald, weight, features=features)
            t, acq = best_of(lambda strategy=strategy:
                    strategy.acquire(net, X_pool, args.b, random_state=0), args.repeat)
            name = f"diversity_penalty(bald, {weight}, features={features!r})"
            shared = len(set(acq.indices.tolist()) & set(base.indices.tolist()))
            print(f"{name:50s} {t:8.3f} {100 * (t / base_t - 1):+7.1f}% {acq.info['n_candidates']:10d}"
                  f"   shares {shared}/{args.b} with BALD")
            table.append([f"diversity_penalty(bald, w={weight}, features={features})", f"{t:.3f}",
                          f"{100 * (t / base_t - 1):+.1f}%", acq.info["n_candidates"], f"{shared}/{args.b}"])
    print()
    print(markdown_table(["query", "seconds", "extra", "candidates", "shared with BALD"], table))


if __name__ == "__main__":
    from _common import recorded  # the whole output and a JSON with the machine, versions, commit

    with recorded(__file__):
        main()
