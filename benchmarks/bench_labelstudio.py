"""The round trip through a real Label Studio: from an annotator's last annotation of a batch to the
next model's scores ordering the project's queue, on a quiet machine and beside a busy process.

Label Studio 1.23 (SQLite) is started on 127.0.0.1 from its own virtual environment
(``$SKDBAL_LABEL_STUDIO`` or ``.venv-ls/bin/label-studio``; see ``tests/labelstudio/lsserver.py``),
or an existing one is used with ``--url`` and ``--token-env``. skdbal runs as a user runs it: the
``skdbal labelstudio`` command in its own process (``--mode client``: it pulls the annotations every
``--interval`` seconds and pushes every model's scores as predictions), with ``OMP_NUM_THREADS=1``
and ``--torch-threads 1``, over scikit-learn's digits (8x8, classes 0-9, as a ``--npy`` pool: the
command's default model, an MC-dropout CNN with BALD at T=20, retrained after each batch of 10).

Each phase makes a fresh project and store and starts the command; a simulated annotator then,
``--rounds`` times, labels (truthfully, through Label Studio's API) the 10 unlabelled tasks on top
of the queue sorted by prediction score, and waits until the project's model version is the next
one (``skdbal-v<b>``; the command sets it once the best 100 tasks carry the new model's scores):
that wait is one round trip. The phases do the same work, label for label:

- ``quiet``: nothing else is run by the benchmark;
- ``busy``: a second process spins one core (pure-Python arithmetic) for the whole phase.

    python benchmarks/bench_labelstudio.py [--rounds 8] [--pool 1797] [--interval 2] [--quick]

It prints, per phase, each round, then the median, the interquartile range and the min-max of the
round trips side by side, and writes its whole output to ``docs/results/bench_labelstudio/output.txt``
and the figures, with the machine (CPU model, cores), the versions (skdbal, torch, numpy,
label-studio, label-studio-sdk), the commit and the thread settings, to
``docs/results/bench_labelstudio/bench_labelstudio.json``. ``--quick`` (2 rounds, 300 tasks) checks
that it works and writes under ``--out`` only (a temporary folder if not given), never over the
committed results.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results" / "bench_labelstudio"
sys.path.insert(0, str(ROOT / "tests" / "labelstudio"))
from lsserver import TOKEN, Server, label_studio_executable  # noqa: E402

#: The thread settings of the command (and of the benchmark itself): said in the output and the JSON.
THREADS = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "torch_threads": 1}
TOKEN_VAR = "SKDBAL_BENCH_LS_TOKEN"
BUSY = "x = 0\nwhile True:\n    x = (x * 1103515245 + 12345) % 2147483648\n"


def command_argv(mode: str, npy: Path, store: Path, url: str, interval: float) -> list:
    """The command that keeps a new project in step with the session, in ``mode``."""
    base = [sys.executable, "-u", "-m", "skdbal", "labelstudio", "--npy", str(npy),
            "--classes", ",".join(str(c) for c in range(10)), "--url", url, "--token-env", TOKEN_VAR,
            "--store", str(store), "--interval", str(interval), "--torch-threads", str(THREADS["torch_threads"]),
            "--new-project", f"bench {store.parent.name}"]
    if mode == "client":
        return base
    # TODO(issue 42, backend mode): ``--mode backend`` runs ``skdbal labelstudio --backend ...`` (the ML
    # backend that Label Studio calls); add its argv here, and in ``round_trip`` what marks the new model's
    # queue head if it is not the project's model version. The phases, statistics and files stay as they are.
    raise NotImplementedError(f"--mode {mode}")


def busy_process() -> subprocess.Popen:
    """A process spinning one core until killed."""
    return subprocess.Popen([sys.executable, "-c", BUSY], start_new_session=True)


def queue_head(client, project: int, n: int = 10):
    """The ``n`` unlabelled tasks on top of the queue sorted by prediction score: (key, task id)."""
    from skdbal.labelstudio.sync import list_tasks

    query = json.dumps({"ordering": ["-tasks:predictions_score"]})
    tasks = [t for t in list_tasks(client, project, query=query, fields="all") if not t["total_annotations"]]
    return [(t["data"]["skdbal_key"], t["id"]) for t in tasks[:n]]


def read_until(process, text: str, lines: list, timeout: float = 300.0) -> str:
    """The command's output up to the line with ``text`` (kept in ``lines``)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        line = process.stdout.readline()
        if not line and process.poll() is not None:
            break
        lines.append(line.rstrip("\n"))
        if text in line:
            return line
    raise RuntimeError(f"{text!r} not printed by the command: " + "\n".join(lines[-20:]))


def phase(name: str, args, url: str, client, y: np.ndarray, npy: Path, log) -> dict:
    """One phase: a fresh project and store, the command, ``args.rounds`` round trips."""
    work = Path(tempfile.mkdtemp(prefix=f"bench-ls-{name}-"))
    env = dict(os.environ, **{k: v for k, v in THREADS.items() if k.endswith("_THREADS")},
               **{TOKEN_VAR: os.environ.get(TOKEN_VAR, TOKEN)})
    process = subprocess.Popen(command_argv(args.mode, npy, work / "bench.db", url, args.interval), env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    busy, out = None, []
    try:
        made = read_until(process, "made project", out)
        project = int(made.split()[2].rstrip(","))
        read_until(process, "the queue:", out)

        def version():
            return client.projects.get(id=project).model_version

        def wait_for(expected, timeout=600.0):
            deadline = time.time() + timeout
            while version() != expected:
                if process.poll() is not None:
                    raise RuntimeError(f"the command exited: {process.stdout.read()[-2000:]}")
                if time.time() > deadline:
                    raise TimeoutError(f"{expected} not reached within {timeout} s")
                time.sleep(0.05)
            return time.perf_counter()

        wait_for("skdbal-first")
        if name == "busy":
            busy, busy_from = busy_process(), time.perf_counter()
        trips = []
        for b in range(args.rounds):
            last = None
            for key, task in queue_head(client, project):
                client.annotations.create(id=task, result=[{"from_name": "label", "to_name": "image",
                                                             "type": "choices",
                                                             "value": {"choices": [str(y[int(key)])]}}])
                last = time.perf_counter()
            trips.append(wait_for(f"skdbal-v{b}") - last)
            log(f"{name:5s} round {b + 1}: {10 * (b + 1):3d} labels, round trip {trips[-1]:6.2f} s")
    finally:
        busy_cpu = None
        if busy is not None:
            busy.kill()
            _, _, usage = os.wait4(busy.pid, 0)
            busy.returncode = -9
            busy_cpu = (usage.ru_utime + usage.ru_stime, time.perf_counter() - busy_from)
            log(f"busy  the spinning process had {busy_cpu[0]:.1f} s of CPU over the phase's {busy_cpu[1]:.1f} s")
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(120)
            except subprocess.TimeoutExpired:
                process.kill()
    t = np.asarray(trips)
    return {"rounds": len(t), "median_s": float(np.median(t)), "q1_s": float(np.percentile(t, 25)),
            "q3_s": float(np.percentile(t, 75)), "min_s": float(t.min()), "max_s": float(t.max()),
            "round_trips_s": [round(float(x), 3) for x in t], "project": project,
            "busy": None if busy_cpu is None else {"what": "one process spinning one core (pure Python)",
                                                   "cpu_s": busy_cpu[0], "wall_s": busy_cpu[1]}}


def machine() -> dict:
    """The machine, the versions, the commit and the thread settings."""
    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass

    def version(package, python):
        code = f"from importlib.metadata import version; print(version({package!r}))"
        try:
            run = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60)
            return run.stdout.strip() or None
        except (OSError, subprocess.TimeoutExpired):
            return None

    ls = label_studio_executable()
    ls_python = str(Path(ls).parent / "python") if ls else None
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "skdbal"], cwd=ROOT, capture_output=True,
                           text=True).stdout.strip()
    return {"cpu": cpu, "cores": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "skdbal": _skdbal_version(),
            "torch": metadata.version("torch"), "numpy": np.__version__,
            "label_studio_sdk": metadata.version("label-studio-sdk"),
            "label_studio": version("label-studio", ls_python) if ls_python and Path(ls_python).exists() else None,
            "commit": commit + ("+dirty" if dirty else ""), "threads": THREADS}


def _skdbal_version():
    import skdbal

    return getattr(skdbal, "__version__", None)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["client"], default="client",
                        help="how skdbal meets Label Studio: client (skdbal labelstudio pulls and pushes); "
                        "backend to come (TODO, issue 42)")
    parser.add_argument("--phases", default="quiet,busy", help="comma-separated: quiet, busy (default both)")
    parser.add_argument("--rounds", type=int, default=8, help="round trips per phase (batches of 10)")
    parser.add_argument("--pool", type=int, default=1797, help="tasks (digits images; at most 1797)")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between the command's pulls")
    parser.add_argument("--quick", action="store_true", help="2 rounds over 300 tasks, to check that it works; "
                        "writes under --out only")
    parser.add_argument("--out", type=Path, help=f"where to write (default {OUT.relative_to(ROOT)}; with --quick "
                        "a temporary folder)")
    parser.add_argument("--url", help="an existing Label Studio (else one is started)")
    parser.add_argument("--token-env", help="with --url: the variable holding its token")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.pool = 2, min(args.pool, 300)
    out_dir = args.out or (Path(tempfile.mkdtemp(prefix="bench-ls-quick-")) if args.quick else OUT)
    out_dir.mkdir(parents=True, exist_ok=True)
    os.environ.update({k: v for k, v in THREADS.items() if k.endswith("_THREADS")})
    import torch

    torch.set_num_threads(THREADS["torch_threads"])
    lines = []

    def log(text=""):
        print(text, flush=True)
        lines.append(text)

    meta = machine()
    log(f"machine: {meta['cpu']}, {meta['cores']} cores, {meta['platform']}")
    log(f"versions: python {meta['python']}, torch {meta['torch']}, numpy {meta['numpy']}, label-studio "
        f"{meta['label_studio']}, label-studio-sdk {meta['label_studio_sdk']}; commit {meta['commit']}")
    log(f"threads: OMP_NUM_THREADS={THREADS['OMP_NUM_THREADS']}, MKL_NUM_THREADS={THREADS['MKL_NUM_THREADS']}, "
        f"skdbal labelstudio --torch-threads {THREADS['torch_threads']}")
    log(f"mode {args.mode}; {args.pool} tasks, {args.rounds} rounds of 10 labels per phase, pulls every "
        f"{args.interval:g} s{' (--quick: a check, not a result)' if args.quick else ''}")

    server = None
    if args.url:
        url = args.url
        os.environ[TOKEN_VAR] = os.environ[args.token_env]
    else:
        executable = label_studio_executable()
        if executable is None:
            sys.exit("no label-studio: set SKDBAL_LABEL_STUDIO, or make .venv-ls (see tests/labelstudio/lsserver.py)")
        t0 = time.perf_counter()
        server = Server(executable, tempfile.mkdtemp(prefix="bench-ls-")).start()
        log(f"Label Studio started in {time.perf_counter() - t0:.1f} s at {server.url}")
        url = server.url
    from sklearn.datasets import load_digits

    from skdbal.labelstudio.cli import connect

    X, y = load_digits(return_X_y=True)
    X, y = (X[:args.pool] / 16.0).astype(np.float32).reshape(-1, 8, 8), y[:args.pool]
    npy = Path(tempfile.mkdtemp(prefix="bench-ls-pool-")) / "digits.npy"
    np.save(npy, X)
    results = {}
    try:
        client = connect(url, os.environ.get(TOKEN_VAR, TOKEN))
        for name in [p.strip() for p in args.phases.split(",") if p.strip()]:
            if name not in ("quiet", "busy"):
                sys.exit(f"--phases: unknown phase {name!r}")
            results[name] = phase(name, args, url, client, y, npy, log)
    finally:
        if server is not None:
            server.stop()
    log()
    log(f"round trip, last annotation of a batch -> the new model's queue head ({args.mode} mode):")
    log(f"(each includes the wait for the command's next pull, 0 to {args.interval:g} s)")
    log(f"  {'phase':6s} {'rounds':>6s} {'median':>9s} {'IQR':>17s} {'min-max':>17s}")
    for name, r in results.items():
        iqr, span = f"{r['q1_s']:.2f}-{r['q3_s']:.2f} s", f"{r['min_s']:.2f}-{r['max_s']:.2f} s"
        log(f"  {name:6s} {r['rounds']:6d} {r['median_s']:7.2f} s {iqr:>17s} {span:>17s}")
    meta["argv"] = sys.argv[1:]
    (out_dir / "bench_labelstudio.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1) + "\n")
    (out_dir / "output.txt").write_text("\n".join(lines) + "\n")
    print(f"wrote {out_dir}/output.txt and bench_labelstudio.json")


if __name__ == "__main__":
    main()
