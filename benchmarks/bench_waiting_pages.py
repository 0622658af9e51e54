"""A submit's latency while pages wait for items, and a request's while half-sent connections are open.

A real ``skdbal label`` process on 127.0.0.1 (its own server limits, torch and OpenMP on one thread:
``--torch-threads 1``, ``OMP_NUM_THREADS=1``) over a pool of random rows, classes ``0`` and ``1``.
One annotator, ``worker``, holds the whole first batch and submits labels one after another, each
on a new connection, while ``N`` other pages wait for items: long polls on ``/api/batch`` with
``wait=10``, each asked again as it ends (the page's own loop), none of which can be given an item.
Every label is ``0``, so the first batch never holds two classes and no retrain runs meanwhile.

- **waiting pages**: for each ``N`` of ``--pages`` (0, 40, 100 and 200 by default), ``--submits``
  submits (200): their median, p95, p99 and max. The page counts are interleaved in ``--rounds``
  rounds (4), each a share of the submits, so that all meet the same machine; in a round the pages
  open their long polls, the server is let go idle (every page is waiting), the submits are timed,
  then the pages stop asking and their last long polls end before the next count.
- **half-sent requests**: ``--half-open`` connections (300) that each send half a request line and
  stop; ``--requests`` submits (50) timed without them and then with them open, and when the server
  closed them (its request timeout, :data:`skdbal.labelling.serving.REQUEST_TIMEOUT`).

    python benchmarks/bench_waiting_pages.py [--pages 0 40 100 200] [--submits 200] [--rounds 4]
    python benchmarks/bench_waiting_pages.py --quick      # a check (40 submits, 0 and 200 pages)

Writes its output (``output.txt``), the figures with every latency, the machine, the versions and
the commit (``bench_waiting_pages.json``) and a ``README.md`` generated from that JSON to
``docs/results/bench_waiting_pages/`` (``$SKDBAL_BENCH_OUT`` or ``--out`` names another folder);
``--quick`` writes to a temporary folder unless ``--out`` is given, never over the committed record.
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import re
import resource
import selectors
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
NAME = Path(__file__).stem
HOST = "127.0.0.1"
#: The threads every numeric library of the server may use.
THREADS = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "torch_threads": 1}
#: A page's long poll, as the page asks (seconds).
WAIT = 10


def request(path: str, token: str, body: bytes = b"", method: str = "GET") -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: {HOST}\r\nX-Token: {token}\r\nConnection: close\r\n"
    if method == "POST":
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return (head + "\r\n").encode() + body


def submit_request(item: int, token: str) -> bytes:
    body = json.dumps({"item": item, "label": "0", "annotator": "worker", "request_id": f"r{item}"}).encode()
    return request("/api/submit", token, body, "POST")


async def timed(port: int, data: bytes, timeout: float = 30.0):
    """One request on a new connection: ``(status, seconds to the status line)``; status None: no answer."""
    start = time.perf_counter()
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        writer.write(data)
        line = await asyncio.wait_for(reader.readline(), timeout)
        return (int(line.split()[1]) if line else None), time.perf_counter() - start
    except asyncio.TimeoutError:
        return None, time.perf_counter() - start
    finally:
        writer.close()


async def answer(port: int, data: bytes, timeout: float = WAIT + 20):
    """One request on a new connection: ``(status, JSON body)`` (None, None when it failed)."""
    try:
        reader, writer = await asyncio.open_connection(HOST, port)
    except OSError:
        return None, None
    try:
        writer.write(data)
        raw = await asyncio.wait_for(reader.read(), timeout)
    except (asyncio.TimeoutError, OSError):
        return None, None
    finally:
        writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    try:
        return int(head.split()[1]), json.loads(body)
    except (IndexError, ValueError):
        return None, None


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def idle(pid: int, within: float = 6.0, share: float = 0.05) -> float:
    """Wait (up to ``within`` s) until process ``pid`` uses under ``share`` of a core over 0.2 s: the
    seconds waited."""
    start = time.monotonic()
    if not Path(f"/proc/{pid}/stat").exists():   # not Linux: the second already waited is enough
        return 0.0
    while time.monotonic() - start < within:
        before = cpu_seconds(pid)
        await asyncio.sleep(0.2)
        if cpu_seconds(pid) - before < share * 0.2:
            break
    return time.monotonic() - start


async def with_pages(port: int, token: str, pid: int, pages: int, items) -> dict:
    """``pages`` pages waiting for items while ``items`` are submitted one after another."""
    stop, tally = asyncio.Event(), {"polls": 0, "polls_failed": 0, "items_given": 0}

    async def page(k: int):
        while not stop.is_set():   # the page's loop: a long poll, asked again as it ends
            status, body = await answer(port, request(f"/api/batch?annotator=p{k}&n=5&wait={WAIT}", token))
            tally["polls"] += 1
            if status != 200:
                tally["polls_failed"] += 1
                await asyncio.sleep(0.5)
            else:
                tally["items_given"] += len(body.get("items", []))

    tasks = [asyncio.ensure_future(page(k)) for k in range(pages)]
    await asyncio.sleep(1.0 if pages else 0.0)     # every page has asked
    settled = await idle(pid)                       # each page's first look done: every page is waiting
    gc.collect()
    gc.disable()   # this process's collector would pause the measure, not the server
    try:
        results = [await timed(port, submit_request(item, token)) for item in items]
    finally:
        gc.enable()
    stop.set()
    await asyncio.gather(*tasks)                    # the last long polls end before the next count
    return {"results": results, "settled_s": settled, **tally}


def stats(seconds) -> dict:
    ms = np.asarray(seconds) * 1000
    return {"n": int(ms.size), "median_ms": round(float(np.median(ms)), 2),
            "p95_ms": round(float(np.percentile(ms, 95)), 2), "p99_ms": round(float(np.percentile(ms, 99)), 2),
            "max_ms": round(float(ms.max()), 2)}


def half_open(port: int, count: int) -> list:
    """``count`` connections that each send half a request line and stop."""
    socks = []
    for _ in range(count):
        s = socket.create_connection((HOST, port))
        s.sendall(b"GET /api/sta")
        s.setblocking(False)
        socks.append(s)
    return socks


def closing_times(socks, start: float, limit: float) -> list:
    """The seconds from ``start`` at which the server closed each of ``socks`` (None: not within ``limit``)."""
    sel = selectors.DefaultSelector()
    for k, s in enumerate(socks):
        sel.register(s, selectors.EVENT_READ, k)
    closed = [None] * len(socks)
    while any(c is None for c in closed) and time.perf_counter() - start < limit:
        for key, _ in sel.select(timeout=0.1):
            try:
                data = key.fileobj.recv(65536)
            except (ConnectionResetError, BlockingIOError) as exc:
                data = b"" if isinstance(exc, ConnectionResetError) else None
            if data == b"":
                closed[key.data] = time.perf_counter() - start
                sel.unregister(key.fileobj)
    sel.close()
    return closed


def start_server(tmp: Path, n_batch: int, log) -> tuple:
    """``skdbal label`` over ``2 * n_batch`` random rows, a first batch of ``n_batch``: (process, port, token)."""
    np.save(tmp / "rows.npy", np.random.default_rng(0).random((2 * n_batch, 8)))
    with socket.socket() as s:
        s.bind((HOST, 0))
        port = s.getsockname()[1]
    argv = [sys.executable, "-m", "skdbal", "label", "--npy", str(tmp / "rows.npy"), "--classes", "0,1",
            "--batch-size", str(n_batch), "--lease-timeout", "3600", "--store", str(tmp / "s.db"),
            "--port", str(port), "--torch-threads", str(THREADS["torch_threads"])]
    env = dict(os.environ, **{k: v for k, v in THREADS.items() if k.endswith("_THREADS")})
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    t0 = time.perf_counter()
    process = subprocess.Popen(argv, stdout=open(tmp / "server.log", "wb"), stderr=subprocess.STDOUT, env=env,
                               cwd=tmp)
    import httpx

    deadline = time.time() + 300
    while time.time() < deadline and process.poll() is None:
        try:
            page = httpx.get(f"http://{HOST}:{port}/", timeout=2.0)
            if page.status_code == 200:
                token = re.search(r'const TOKEN = "([^"]+)"', page.text).group(1)
                log(f"skdbal label: {2 * n_batch} rows, a first batch of {n_batch}, served in "
                    f"{time.perf_counter() - t0:.1f} s (pid {process.pid})")
                return process, port, token
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"skdbal label did not serve: {(tmp / 'server.log').read_text()[-2000:]}")


def table_rows(results: dict) -> list:
    """The closing table's rows (the README's too), from the JSON's ``results``."""
    def cells(r):
        return [r["n"]] + [f"{r[k]:.1f}" for k in ("median_ms", "p95_ms", "p99_ms", "max_ms")]

    rows = [[f"submit, {p} pages waiting", *cells(r)] for p, r in results["pages"].items()]
    h = results.get("half_open")
    if h:
        for name, r in (("without", h["without"]), ("with", h["with"])):
            label = f"submit, {h['connections']} half-sent connections open" if name == "with" else \
                "submit, no half-sent connection"
            rows.append([label, *cells(r)])
    return rows


HEADER = ["measure", "submits", "median ms", "p95 ms", "p99 ms", "max ms"]


def readme(record: dict) -> str:
    """The results folder's README.md, generated from the JSON ``record``."""
    from _common import markdown_table

    s, prov, h = record["settings"], record["provenance"], record["results"].get("half_open")
    command = " ".join(["python", f"benchmarks/{NAME}.py", *record["argv"]])
    text = ["# Submits with pages waiting, and half-sent requests\n",
            f"`{command}` ran a real `skdbal label` on 127.0.0.1 (torch and OpenMP on one thread) on "
            f"{prov.get('cpu_model') or 'a CPU'} ({prov.get('cpu_count')} cores), commit "
            f"`{str(prov.get('commit'))[:7]}`, started {record['started']}"
            + (" (`--quick`: a check, not a result)" if s["quick"] else "") + ".\n",
            f"One annotator submits labels one after another, each on a new connection, while other pages "
            f"wait for items (long polls with `wait={WAIT}`, asked again as they end); the page counts "
            f"{', '.join(str(p) for p in s['pages'])} were interleaved in rounds ({s['rounds']}), "
            f"{s['submits']} submits each in all.\n",
            markdown_table(HEADER, table_rows(record["results"])) + "\n"]
    if h:
        closed = [c for c in h["closed_after_s"] if c is not None]
        text.append(f"The server closed {len(closed)} of the {h['connections']} half-sent connections"
                    + (f", {min(closed):.1f} to {max(closed):.1f} s after they opened" if closed else "")
                    + f" (its request timeout: {h['request_timeout_s']:g} s).\n")
    text.append(f"What it printed (`output.txt`):\n\n```{{literalinclude}} output.txt\n:language: text\n```\n\n"
                f"`{NAME}.json` holds every latency, the settings, the machine, the versions and the commit.\n")
    return "\n".join(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, nargs="+", default=[0, 40, 100, 200], help="waiting pages to compare")
    parser.add_argument("--submits", type=int, default=200, help="submits timed per page count")
    parser.add_argument("--rounds", type=int, default=4, help="rounds the page counts are interleaved in")
    parser.add_argument("--half-open", type=int, default=300, help="half-sent connections (0: no such phase)")
    parser.add_argument("--requests", type=int, default=50, help="submits timed without and with them")
    parser.add_argument("--quick", action="store_true", help="a check: 40 submits, 0 and 200 pages, 1 round, "
                        "10 submits beside the half-sent connections; to a temporary folder unless --out")
    parser.add_argument("--out", type=Path, help=f"where to write (default docs/results/{NAME}/)")
    args = parser.parse_args()
    if args.quick:
        args.pages, args.submits, args.rounds, args.requests = [0, 200], 40, 1, 10
    if min(args.pages) < 0 or args.submits < args.rounds or args.rounds < 1 or args.half_open < 0:
        parser.error("pages must be >= 0, rounds >= 1 and submits >= rounds")
    # a warm-up, the submits, those beside the half-sent connections and one after, and one never answered:
    # the first batch is never all labelled, so the board never turns to a covering order meanwhile
    n_batch = 1 + len(args.pages) * args.submits + 2 * args.requests + 1 + 1
    if n_batch > 1000:
        parser.error(f"{n_batch} items in the first batch: at most 1000 (fewer pages, submits or requests)")
    out = args.out or (Path(tempfile.mkdtemp(prefix=f"{NAME}-quick-")) if args.quick else
                       Path(os.environ.get("SKDBAL_BENCH_OUT") or ROOT / "docs" / "results" / NAME))
    out.mkdir(parents=True, exist_ok=True)
    os.environ.update({k: v for k, v in THREADS.items() if k.endswith("_THREADS")})
    import torch

    torch.set_num_threads(THREADS["torch_threads"])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = 2 * max(args.pages + [args.half_open]) + 256
    if soft != resource.RLIM_INFINITY and soft < need:   # this process's connections, and the server's
        soft = need if hard == resource.RLIM_INFINITY else min(need, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    lines, started, t_all = [], time.strftime("%Y-%m-%dT%H:%M:%S%z"), time.perf_counter()

    def log(text=""):
        print(text, flush=True)
        lines.append(text)

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _common import machine, markdown_table, provenance

    from skdbal.labelling.serving import REQUEST_TIMEOUT

    log(machine())
    log(f"threads: OMP_NUM_THREADS=1, MKL_NUM_THREADS=1, skdbal label --torch-threads 1; open files {soft}"
        + ("  (--quick: a check, not a result)" if args.quick else ""))
    log(f"pages {args.pages}, {args.submits} submits each in {args.rounds} round(s); {args.half_open} half-sent "
        f"connections, {args.requests} submits without and with them")
    tmp = Path(tempfile.mkdtemp(prefix=f"{NAME}-"))
    process, port, token = start_server(tmp, n_batch, log)
    timings = {p: [] for p in args.pages}
    tallies = {p: {"polls": 0, "polls_failed": 0, "items_given": 0, "failed_submits": 0} for p in args.pages}
    half = None
    try:
        status, first = asyncio.run(answer(port, request("/api/batch?annotator=worker&n=1000&wait=10", token)))
        items = [b["item"] for b in first["items"]]
        assert status == 200 and len(items) == n_batch, (status, len(items))
        items = iter(items)
        asyncio.run(timed(port, submit_request(next(items), token)))       # warm up
        for r in range(args.rounds):
            order = args.pages if r % 2 == 0 else args.pages[::-1]
            for p in order:
                share = args.submits // args.rounds + (r < args.submits % args.rounds)
                got = asyncio.run(with_pages(port, token, process.pid, p, [next(items) for _ in range(share)]))
                timings[p] += [s for status, s in got["results"] if status == 200]
                t = tallies[p]
                t["failed_submits"] += sum(status != 200 for status, _ in got["results"])
                for k in ("polls", "polls_failed", "items_given"):
                    t[k] += got[k]
                ok = [s for status, s in got["results"] if status == 200]
                log(f"round {r + 1}, {p:3d} pages waiting: {len(ok)} submits, median {1000 * np.median(ok):.1f} ms, "
                    f"max {1000 * max(ok):.1f} ms (server idle after {got['settled_s']:.1f} s; {got['polls']} long "
                    f"polls, {got['items_given']} items given to pages)")
        if args.half_open:
            def submits(n):
                chosen = [next(items) for _ in range(n)]

                async def run():
                    return [await timed(port, submit_request(i, token)) for i in chosen]
                return asyncio.run(run())

            without = submits(args.requests)
            socks = half_open(port, args.half_open)
            opened = time.perf_counter()
            try:
                with_ = submits(args.requests)
                during = time.perf_counter() - opened
                closed = closing_times(socks, opened, REQUEST_TIMEOUT + 10)
            finally:
                for s in socks:
                    s.close()
            after = submits(1)
            shut = [c for c in closed if c is not None]
            half = {"connections": args.half_open, "request_timeout_s": REQUEST_TIMEOUT, "closed": len(shut),
                    "closed_first_s": round(min(shut), 2) if shut else None,
                    "closed_last_s": round(max(shut), 2) if shut else None,
                    "without": stats([s for _, s in without]), "with": stats([s for _, s in with_]),
                    "measured_within_s": round(during, 3),
                    "statuses": {"without": [st for st, _ in without], "with": [st for st, _ in with_],
                                 "after": [st for st, _ in after]},
                    "closed_after_s": [None if c is None else round(c, 3) for c in closed],
                    "latencies_ms": {"without": [round(1000 * s, 3) for _, s in without],
                                     "with": [round(1000 * s, 3) for _, s in with_]}}
            log(f"{args.half_open} half-sent connections: {args.requests} submits with them open (within "
                f"{during:.2f} s of opening them), median {half['with']['median_ms']:.1f} ms, max "
                f"{half['with']['max_ms']:.1f} ms; without them median {half['without']['median_ms']:.1f} ms; the "
                f"server closed {len(shut)} of them"
                + (f", {min(shut):.1f} to {max(shut):.1f} s after they opened" if shut else "")
                + f"; a submit after: {after[0][0]}")
    finally:
        process.terminate()
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
    results = {"pages": {str(p): {**stats(timings[p]), **tallies[p]} for p in args.pages}}
    if half:
        results["half_open"] = {k: v for k, v in half.items() if k != "latencies_ms"}
    record = {"benchmark": NAME, "argv": sys.argv[1:], "started": started,
              "seconds": round(time.perf_counter() - t_all, 1),
              "settings": {"pages": args.pages, "submits": args.submits, "rounds": args.rounds,
                           "half_open": args.half_open, "requests": args.requests, "wait_s": WAIT,
                           "quick": args.quick, "open_files": soft, "threads": THREADS},
              "provenance": provenance(), "results": results,
              "latencies_ms": {"pages": {str(p): [round(1000 * s, 3) for s in timings[p]] for p in args.pages},
                               **({"half_open": half["latencies_ms"]} if half else {})}}
    log()
    log(markdown_table(HEADER, table_rows(results)))
    log(f"\nthe whole run took {record['seconds']:.0f} s")
    (out / f"{NAME}.json").write_text(json.dumps(record, indent=1) + "\n")
    (out / "output.txt").write_text("\n".join(lines) + "\n")
    (out / "README.md").write_text(readme(record))
    print(f"wrote {out}/output.txt, {NAME}.json and README.md")


if __name__ == "__main__":
    main()
