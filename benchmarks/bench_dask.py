"""Scoring a pool where it lives: 1 worker against 2 on a LocalCluster, on the same Zarr pool on disk.

The pool (default 2,000,000 28x28 uint8 images: MNIST training images, each shifted by up to 2 pixels at
random, written once to a Zarr array in chunks of 16,384 rows) is queried with BALD at T = 20 by
:func:`skdbal.dask.query_pool` on the Gal CNN trained 5 epochs on 1,000 MNIST images. Each worker is its
own process with one thread and one torch thread. Printed side by side, in one run:

- the wall time of each query and its throughput, and the in-process rate of ``bald`` on the first rows;
- with ``--strategies bald powerbald``, PowerBALD (stochastic batches, ``"power"``, β = 1) beside BALD on
  the same cluster: its Gumbel noise is drawn on the client and sent with each chunk's task;
- the client's peak memory (VmHWM and RssAnon of this process) against the pool's size;
- where the time went, from the task stream: reading chunks, scoring them, and moving data between
  workers, against the time to send the model and to bring the candidates back.

The workers start without the nanny's default ``MALLOC_TRIM_THRESHOLD_=65536``, which halves torch's
throughput on a CPU worker (glibc then maps and unmaps every large tensor; see the scale-out guide);
``--default-malloc`` keeps it, to measure that.

    python benchmarks/bench_dask.py [--n 2000000] [--T 20] [--path /tmp/skdbal-pool.zarr] [--workers 1 2]
                                    [--strategies bald powerbald]
"""
import argparse
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")  # the worker processes inherit it

import numpy as np  # noqa: E402

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _common import Peak, machine, markdown_table, mnist_or_synthetic, status_kb, trained_net  # noqa: E402


def build_pool(path, n, chunk_rows, source, seed=0):
    import zarr

    from skdbal.dask import write_pool

    try:
        z = zarr.open_array(path, mode="r")
        if z.shape == (n, 28, 28) and z.chunks[0] == chunk_rows:
            return z, 0.0
    except (FileNotFoundError, getattr(getattr(zarr, "errors", None), "ArrayNotFoundError", OSError)):
        pass
    rng = np.random.RandomState(seed)

    def blocks():
        for start in range(0, n, chunk_rows):
            m = min(chunk_rows, n - start)
            imgs = source[rng.randint(0, len(source), m)].reshape(m, 28, 28)
            dx, dy = rng.randint(-2, 3, size=2)
            yield np.roll(np.roll(imgs, dx, axis=1), dy, axis=2).astype(np.uint8)

    t = time.perf_counter()
    z = write_pool(path, blocks(), chunk_rows=chunk_rows, overwrite=True)
    return z, time.perf_counter() - t


def du_bytes(path):
    total = 0
    for root, _, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total


def task_times(stream):
    """Seconds of each kind of work in the task stream: reading chunks, scoring, transfers."""
    out = {"read": 0.0, "score": 0.0, "transfer": 0.0, "other": 0.0}
    for t in stream:
        key = str(t["key"])
        for ss in t["startstops"]:
            d = ss["stop"] - ss["start"]
            if ss["action"] == "transfer":
                out["transfer"] += d
            elif ss["action"] == "compute":
                if "_chunk_task" in key or "_block_summary" in key or "_block_stochastic" in key:  # the plan's task
                    out["score"] += d
                elif "from-zarr" in key or "getitem" in key or "original" in key or "array" in key:
                    out["read"] += d
                else:
                    out["other"] += d
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=2_000_000)
    ap.add_argument("--T", type=int, default=20)
    ap.add_argument("--chunk-rows", type=int, default=16384)
    ap.add_argument("--path", default="/tmp/skdbal-pool.zarr")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--k", type=int, default=10, help="n_instances")
    ap.add_argument("--strategies", nargs="+", choices=("bald", "powerbald"), default=["bald"])
    ap.add_argument("--default-malloc", action="store_true",
                    help="keep the nanny's MALLOC_TRIM_THRESHOLD_=65536 in the workers")
    args = ap.parse_args()
    import dask

    if not args.default_malloc:
        dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None})

    import torch
    from distributed import Client, LocalCluster, get_task_stream

    from skdbal.acquisition import bald, stochastic_batch
    from skdbal.dask import open_pool, query_pool

    torch.set_num_threads(1)
    strategies = {"bald": bald, "powerbald": stochastic_batch(bald, "power", 1.0)}
    X_train, y_train, _, source_name = mnist_or_synthetic(1000, 0)
    net = trained_net(X_train, y_train, epochs=5, n_samples=args.T)
    src, _, _, _ = mnist_or_synthetic(60000, 0, seed=1)
    z, write_s = build_pool(args.path, args.n, args.chunk_rows, src)
    pool_bytes = int(np.prod(z.shape)) * z.dtype.itemsize
    print(machine())
    print(f"pool: {z.shape[0]:,} x 28 x 28 uint8 from {source_name}, {pool_bytes / 2**30:.2f} GiB in memory, "
          f"{du_bytes(args.path) / 2**30:.2f} GiB on disk (Zarr, chunks of {args.chunk_rows:,} rows"
          f"{f'; written in {write_s:.0f} s' if write_s else ''}); BALD at T = {args.T}, k = {args.k}; "
          f"workers' MALLOC_TRIM_THRESHOLD_: {'65536 (the default)' if args.default_malloc else 'unset'}")

    # the in-process rate on the first rows, for reference
    first = np.asarray(z[:min(32768, args.n)])
    local = {name: strategies[name].acquire(net, first, args.k, random_state=0) for name in args.strategies}
    t = time.perf_counter()
    bald.acquire(net, first, args.k)
    local_rate = len(first) / (time.perf_counter() - t)
    print(f"in process, 1 torch thread, first {len(first):,} rows: {local_rate:,.0f} img/s")

    results = {}
    for n_workers in args.workers:
        with LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                          dashboard_address=None) as cluster, Client(cluster) as client:
            client.wait_for_workers(n_workers)
            client.run(torch.set_num_threads, 1)
            X = open_pool(args.path)
            for name in args.strategies:
                base = status_kb("RssAnon")
                peak = Peak(("RssAnon",))
                peak.start()
                with get_task_stream(client) as ts:
                    t = time.perf_counter()
                    acq = query_pool(strategies[name], net, X, args.k, client=client, random_state=0)
                    wall = time.perf_counter() - t
                peak.running = False
                peak.join()
                times = task_times(ts.data)
                results[n_workers, name] = (wall, acq, times, peak.peak["RssAnon"] - base, status_kb("VmHWM"))
                # a check on a small pool that the cluster's picks are the single process's
                small = query_pool(strategies[name], net, X[:len(first)], args.k, client=client, random_state=0)
                assert small.indices.tolist() == local[name].indices.tolist(), \
                    f"{name}: picks differ from the single process"
    table = []
    for (n_workers, name), (wall, acq, times, growth_kb, hwm_kb) in results.items():
        info = acq.info["dask"]
        w1 = results[min(args.workers), name][0]
        table.append([n_workers, name, f"{wall:.1f}", f"{args.n / wall:,.0f}", f"{w1 / wall:.2f}x",
                      f"{info['scatter_s']:.2f}", f"{times['read']:.1f}", f"{times['score']:.1f}",
                      f"{times['transfer']:.2f}", f"{info['candidates']:,} of {info['tasks']} tasks",
                      f"{growth_kb / 1024:.0f} MiB", f"{hwm_kb / 1024:.0f} MiB"])
    print()
    print(markdown_table(["workers", "strategy", "wall (s)", "img/s", "speed-up", "send model (s)", "read chunks (s)",
                          "score chunks (s)", "transfers (s)", "candidates back", "client RssAnon growth",
                          "client VmHWM"], table))
    same = all(len({tuple(r[1].indices.tolist()) for (_, nm), r in results.items() if nm == name}) == 1
               for name in args.strategies)
    print(f"\nthe picks of every cluster size are the same: {same}; "
          f"pool {pool_bytes / 2**20:,.0f} MiB against the client's peak growth "
          f"{max(r[3] for r in results.values()) / 1024:.0f} MiB")


if __name__ == "__main__":
    from _common import recorded  # the whole output and a JSON with the machine, versions, commit

    with recorded(__file__):
        main()
