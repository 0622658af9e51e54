"""Peak memory while scoring a large synthetic pool with BALD at T=100.

The pool is a uint8 ``np.memmap`` on disk (as a user would hold a large
pool), scored by :func:`skdbal.acquisition.bald` in chunks. A thread samples
``/proc/self/status`` every 20 ms: ``RssAnon`` is the memory the process
allocated (what the chunking bounds), ``VmRSS`` adds the file pages of the
memmapped pool that the kernel happens to keep mapped.

    python benchmarks/bench_memory.py [--n 1000000] [--T 100] [--chunk-size 2048]
"""
import argparse
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _common import Peak, machine, markdown_table, status_kb, trained_net  # noqa: E402

from skdbal.acquisition import bald  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--T", type=int, default=100)
    parser.add_argument("--chunk-size", type=int, default=2048)
    args = parser.parse_args()
    rng = np.random.RandomState(0)
    X_train = rng.randint(0, 256, size=(200, 28, 28), dtype=np.uint8)
    clf = trained_net(X_train, rng.randint(0, 10, 200), epochs=1, n_samples=args.T)
    with tempfile.TemporaryDirectory() as tmp:
        pool = np.lib.format.open_memmap(os.path.join(tmp, "pool.npy"), mode="w+", dtype=np.uint8,
                                         shape=(args.n, 28, 28))
        for s in range(0, args.n, 50_000):
            e = min(args.n, s + 50_000)
            pool[s:e] = np.random.RandomState(s).randint(0, 256, size=(e - s, 28, 28), dtype=np.uint8)
        pool.flush()
        del pool
        pool = np.load(os.path.join(tmp, "pool.npy"), mmap_mode="r")
        base = {k: status_kb(k) for k in ("RssAnon", "VmRSS")}
        monitor = Peak()
        monitor.start()
        t0 = time.perf_counter()
        idx, scores = bald(clf, pool, n_instances=10, chunk_size=args.chunk_size)
        dt = time.perf_counter() - t0
        monitor.running = False
        monitor.join()
    print(f"machine: {machine()}")
    print(f"pool: {args.n} synthetic 28x28 uint8 images (memmap, {pool.nbytes / 2**20:.0f} MiB), T={args.T}, "
          f"chunk {args.chunk_size}; scored in {dt:.0f} s ({args.n / dt:.0f} img/s)")
    full = args.T * args.n * 10 * 4 / 2**30
    print(f"a full (T, N, C) float32 array would take {full:.2f} GiB")
    for k in ("RssAnon", "VmRSS"):
        print(f"peak {k}: {monitor.peak[k] / 2**20:.2f} GiB (before scoring: {base[k] / 2**20:.2f} GiB)")
    print()
    print(markdown_table(["measure", "GiB"], [["full (T, N, C) float32 array", f"{full:.2f}"]]
                         + [[f"peak {k}", f"{monitor.peak[k] / 2**20:.2f}"] for k in ("RssAnon", "VmRSS")]
                         + [[f"{k} before scoring", f"{base[k] / 2**20:.2f}"] for k in ("RssAnon", "VmRSS")]))
    print()
    print(markdown_table(["pool images", "seconds", "img/s"], [[args.n, f"{dt:.0f}", f"{args.n / dt:.0f}"]]))


if __name__ == "__main__":
    from _common import recorded  # the whole output and a JSON with the machine, versions, commit

    with recorded(__file__):
        main()
