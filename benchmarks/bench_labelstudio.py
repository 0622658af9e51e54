"""The round trip through a real Label Studio: from an annotator's last annotation of a batch to the
next model's scores ordering the project's queue, with skdbal as a polling client and as Label
Studio's ML backend, on a quiet machine and beside a busy process.

Label Studio 1.23 (SQLite) is started on 127.0.0.1 from its own virtual environment
(``$SKDBAL_LABEL_STUDIO`` or ``.venv-ls/bin/label-studio``; see ``tests/labelstudio/lsserver.py``) with
``ML_BLOCK_LOCAL_IP=false SSRF_PROTECTION_ENABLED=false`` (so that it reaches, and sends webhooks to, a
backend on 127.0.0.1), or an existing one is used with ``--url`` and ``--token-env`` (it needs the same
two settings for the backend mode). skdbal runs as a user runs it: the ``skdbal labelstudio`` command in
its own process, with ``OMP_NUM_THREADS=1`` and ``--torch-threads 1``, over scikit-learn's digits (8x8,
classes 0-9, as a ``--npy`` pool: the command's default model, an MC-dropout CNN with BALD at T=20,
retrained after each batch of 10), in each of the ``--mode`` given:

- ``client``: the command pulls the annotations every ``--interval`` seconds and pushes every model's
  scores as predictions;
- ``backend``: ``--backend --connect --backend-port <free port>``: the command serves itself as the
  project's ML backend (Settings -> Model), Label Studio's webhooks bring each annotation (no pulls),
  and the pushes go on as in client mode.

Each mode x phase makes a fresh project and store and starts the command; a simulated annotator then,
``--rounds`` times, labels (truthfully, through Label Studio's API) the 10 unlabelled tasks on top of
the queue sorted by prediction score, and waits until the project's model version is the next one
(``skdbal-v<b>``; the command sets it once the best 100 tasks carry the new model's scores; polled by
``projects.get`` every 50 ms): that wait, from the return of the last annotation's API call, is one
round trip. Then the queue's head is read (one task a request) and opened as the labelling view opens
it (``GET /api/tasks/{id}``: it must carry the new version's prediction, with a guess and a score), and
Label Studio's next task is asked for (``GET /api/projects/{id}/next``, *Label All Tasks*, which locks
the task it serves: a write, which on SQLite can meet the push's lock); both timed, their statuses kept.
In backend mode also:

- annotation -> store: after each annotation's API call returns, the store (SQLite, opened read-only)
  is polled every 5 ms until it holds the label (the webhook's path: Label Studio -> ``/webhook`` ->
  a re-read of the task -> the store); the next annotation waits for it;
- ``/predict``: from the last annotation of a batch to the new model version (the retrain, the query
  and the first push), a thread calls the backend's ``/predict`` for one unlabelled task every
  ``--predict-interval`` s with the body Label Studio sends (``{"tasks": [task],
  "project": "<id>.<created>", "label_config", "params": {"login", "password", "context"}}``; with the
  Basic Auth of ``--backend-token``, if given); each answer must hold one prediction.

Label Studio's log is kept per mode x phase (``labelstudio-<mode>-<phase>.log.gz``) and its ERROR and
``Invalid page`` lines counted. The idle cost, CPU seconds per second of Label Studio's process tree
(psutil) and of the command over ``--idle`` seconds with nobody labelling, is measured twice in each
mode x phase: after the first batch's push (0 labels) and after the last round (``10 x rounds``
labels; the push finished, the busy process stopped). The phases do the same work, label for label:

- ``quiet``: nothing else is run by the benchmark;
- ``busy``: a second process spins one core (pure-Python arithmetic) through the rounds.

    python benchmarks/bench_labelstudio.py [--mode client,backend] [--phases quiet,busy] [--rounds 8]
        [--pool 1797] [--interval 2] [--idle 20] [--quick]

It prints each round, then a table per mode x phase: the median, interquartile range and min-max of
the round trips, the annotation -> store median and the ``/predict`` p95 (backend), the open-task
times, the log's error lines and the idle costs, and the goals (backend: median round trip <= 2 s,
``/predict`` p95 <= 0.5 s; 0 error lines; an idle cost that does not grow with labels). It writes its
whole output to ``docs/results/bench_labelstudio/output.txt``, the figures with the machine (CPU
model, cores), the versions (skdbal, torch, numpy, label-studio, label-studio-sdk), the commit and the
thread settings to ``bench_labelstudio.json``, and Label Studio's logs beside them. ``--quick`` (2
rounds, 300 tasks, 5 s idle) checks that it works and writes under ``--out`` only (a temporary folder
if not given), never over the committed results.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from importlib import metadata
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results" / "bench_labelstudio"
sys.path[:0] = [str(ROOT / "tests" / "labelstudio"), str(ROOT / "tests")]
from _helpers import free_port  # noqa: E402
from lsserver import SSRF_OFF, TOKEN, Server, label_studio_executable, tree_cpu_seconds  # noqa: E402

#: The thread settings of the command (and of the benchmark itself): said in the output and the JSON.
THREADS = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "torch_threads": 1}
TOKEN_VAR = "SKDBAL_BENCH_LS_TOKEN"
BACKEND_TOKEN_VAR = "SKDBAL_BENCH_BACKEND_TOKEN"
#: What Label Studio on this machine needs to reach a backend on 127.0.0.1 and send it webhooks.
MODES = ("client", "backend")
BUSY = "x = 0\nwhile True:\n    x = (x * 1103515245 + 12345) % 2147483648\n"
#: The goals of issue 42 (backend mode, digits, 2 cores).
GOAL_ROUND_TRIP_S, GOAL_PREDICT_P95_S = 2.0, 0.5


def command_argv(mode: str, npy: Path, store: Path, url: str, interval: float, port: int = 0,
                 backend_token: bool = False) -> list:
    """The command that keeps a new project in step with the session, in ``mode``."""
    base = [sys.executable, "-u", "-m", "skdbal", "labelstudio", "--npy", str(npy),
            "--classes", ",".join(str(c) for c in range(10)), "--url", url, "--token-env", TOKEN_VAR,
            "--store", str(store), "--interval", str(interval), "--torch-threads", str(THREADS["torch_threads"]),
            "--new-project", f"bench {store.parent.name}",
            # the queue sorted highest score first, as this benchmark reads it (the command's default is now
            # Label Studio's Uncertainty sampling, which wants the scores the other way round)
            "--sampling", "queue"]
    if mode == "client":
        return base
    if mode == "backend":
        return base + ["--backend", "--connect", "--backend-port", str(port)] + \
            (["--backend-token-env", BACKEND_TOKEN_VAR] if backend_token else [])
    raise ValueError(f"--mode {mode}")


def busy_process() -> subprocess.Popen:
    """A process spinning one core until killed."""
    return subprocess.Popen([sys.executable, "-c", BUSY], start_new_session=True)


def queue_tasks(client, project: int) -> list:
    """The unlabelled tasks in the order of the queue sorted by prediction score, best first."""
    from skdbal.labelstudio.sync import list_tasks

    query = json.dumps({"ordering": ["-tasks:predictions_score"]})
    return [t for t in list_tasks(client, project, query=query, fields="all") if not t["total_annotations"]]


def head_task(client, project: int):
    """The first task of the queue sorted by prediction score, read alone (cheap)."""
    page = client.tasks.list(project=project, page=1, page_size=1, fields="task_only",
                             query=json.dumps({"ordering": ["-tasks:predictions_score"]}))
    return page.items[0] if page.items else None


class Output(threading.Thread):
    """The command's output, read as it comes (so that its pipe never fills), kept in ``lines``."""

    def __init__(self, process):
        super().__init__(daemon=True)
        self.process, self.lines, self.changed = process, [], threading.Condition()
        self.start()

    def run(self):
        for line in self.process.stdout:
            with self.changed:
                self.lines.append(line.rstrip("\n"))
                self.changed.notify_all()
        with self.changed:
            self.changed.notify_all()

    def wait_for(self, text: str, timeout: float = 300.0) -> str:
        """The first line of the output with ``text``."""
        deadline = time.time() + timeout
        with self.changed:
            while True:
                found = [line for line in self.lines if text in line]
                if found:
                    return found[0]
                if time.time() > deadline or (self.process.poll() is not None and not self.is_alive()):
                    raise RuntimeError(f"{text!r} not printed by the command: " + "\n".join(self.lines[-20:]))
                self.changed.wait(0.5)


def idle_cost(ls_pid, command_pid, seconds: float) -> dict:
    """CPU-s per s of Label Studio (None if not started here) and of the command, over ``seconds``."""
    ls0, cmd0, t0 = tree_cpu_seconds(ls_pid) if ls_pid else None, tree_cpu_seconds(command_pid), time.perf_counter()
    time.sleep(seconds)
    wall = time.perf_counter() - t0
    return {"seconds": round(wall, 2),
            "labelstudio_cpu_per_s": None if ls0 is None else round((tree_cpu_seconds(ls_pid) - ls0) / wall, 4),
            "skdbal_cpu_per_s": round((tree_cpu_seconds(command_pid) - cmd0) / wall, 4)}


class PredictProbe(threading.Thread):
    """Calls the backend's ``/predict`` as Label Studio does, one task a call, while :attr:`active` is set;
    the times of the calls made while it was set are in :attr:`times`, wrong answers in :attr:`wrong`."""

    def __init__(self, url: str, body: dict, auth=None, interval: float = 0.1):
        super().__init__(daemon=True)
        self.url, self.body, self.auth, self.interval = url, body, auth, interval
        self.tasks, self.times, self.wrong = [], [], []
        self.active, self.done = threading.Event(), threading.Event()
        self.start()

    def run(self):
        import httpx

        k = 0
        with httpx.Client(base_url=self.url, timeout=30, auth=self.auth) as http:
            while not self.done.is_set():
                if not self.active.wait(0.05) or not self.tasks:
                    continue
                task = self.tasks[k % len(self.tasks)]
                k += 1
                t0 = time.perf_counter()
                try:
                    r = http.post("/predict", json={**self.body, "tasks": [task]})
                    ok = r.status_code == 200 and len(r.json().get("results", [])) == 1
                except Exception as exc:  # noqa: BLE001 - counted as a wrong answer
                    r, ok = exc, False
                took = time.perf_counter() - t0
                if not ok:
                    self.wrong.append(str(getattr(r, "text", r))[:200])
                elif self.active.is_set():
                    self.times.append(took)
                time.sleep(self.interval)

    def stop(self):
        self.done.set()
        self.join(30)


def as_task(t: dict, project: int) -> dict:
    """A task as Label Studio sends it to ``/predict``: its fields, without the Data Manager's extras."""
    keep = ("id", "data", "meta", "created_at", "updated_at", "is_labeled", "overlap", "inner_id",
            "total_annotations", "cancelled_annotations", "total_predictions", "file_upload")
    task = {**{k: t[k] for k in keep if k in t}, "project": project, "annotations": [], "predictions": []}
    return json.loads(json.dumps(task, default=str))        # the SDK's datetimes as Label Studio's text


def store_count(store: Path) -> int:
    """The label events in the store, read through a read-only connection (the command writes it)."""
    con = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=5)
    try:
        return con.execute("SELECT COUNT(*) FROM events WHERE kind = 'label'").fetchone()[0]
    except sqlite3.OperationalError:       # not made yet
        return 0
    finally:
        con.close()


def wait(condition, timeout: float, what: str, step: float = 0.05):
    deadline = time.time() + timeout
    while not condition():
        if time.time() > deadline:
            raise TimeoutError(f"{what} did not happen within {timeout:g} s")
        time.sleep(step)
    return time.perf_counter()


def stats(values) -> dict:
    v = np.asarray(values, float)
    if not len(v):
        return {"n": 0}
    return {"n": len(v), "median_s": float(np.median(v)), "q1_s": float(np.percentile(v, 25)),
            "q3_s": float(np.percentile(v, 75)), "p95_s": float(np.percentile(v, 95)), "min_s": float(v.min()),
            "max_s": float(v.max())}


def phase(mode: str, name: str, args, ctx: dict, log) -> dict:
    """One mode x phase: a fresh project and store, the command, ``args.rounds`` round trips, the idle costs."""
    import httpx

    client, url, y, server = ctx["client"], ctx["url"], ctx["y"], ctx["server"]
    work = Path(tempfile.mkdtemp(prefix=f"bench-ls-{mode}-{name}-"))
    store = work / "bench.db"
    log_from = server.log_path.stat().st_size if server is not None and server.log_path.exists() else 0
    port = free_port() if mode == "backend" else 0
    env = dict(os.environ, **{k: v for k, v in THREADS.items() if k.endswith("_THREADS")},
               **{TOKEN_VAR: os.environ.get(TOKEN_VAR, TOKEN)})
    if args.backend_token:
        env[BACKEND_TOKEN_VAR] = args.backend_token
    process = subprocess.Popen(command_argv(mode, ctx["npy"], store, url, args.interval, port,
                                            bool(args.backend_token)), env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    output = Output(process)
    ls_http = httpx.Client(base_url=url, headers={"Authorization": f"Token {os.environ.get(TOKEN_VAR, TOKEN)}"},
                           timeout=60)
    busy, busy_cpu, probe = None, None, None
    trips, store_lag, annotate_s, opened, nexts, head_ok = [], [], [], [], [], 0
    idle, refused = {}, {"open": 0, "next": 0}

    def stop_busy():
        nonlocal busy, busy_cpu
        if busy is not None:
            busy.kill()
            _, _, usage = os.wait4(busy.pid, 0)
            busy.returncode = -9
            busy_cpu = (usage.ru_utime + usage.ru_stime, time.perf_counter() - busy_from)
            log(f"{mode:7s} {name:5s} the spinning process had {busy_cpu[0]:.1f} s of CPU over "
                f"{busy_cpu[1]:.1f} s")
            busy = None

    def version():
        return client.projects.get(id=project).model_version

    def wait_for(expected, timeout=600.0):
        deadline = time.time() + timeout
        while version() != expected:
            if process.poll() is not None:
                raise RuntimeError("the command exited: " + "\n".join(output.lines[-30:]))
            if time.time() > deadline:
                raise TimeoutError(f"{expected} not reached within {timeout} s")
            time.sleep(0.05)
        return time.perf_counter()

    def pushed(name_, expected, timeout=300.0):
        """Until ``expected`` tasks hold version ``name_`` (the push is over), or the count stays for 15 s (a
        pool subsample); how many hold it."""
        last, since, deadline = None, time.time(), time.time() + timeout
        while time.time() < deadline:
            count = ls_http.get(f"/api/projects/{project}/model-versions/").json().get(name_, 0)
            if count >= expected:
                return count
            if count != last:
                last, since = count, time.time()
            elif time.time() - since > 15:
                return count
            time.sleep(0.5)
        return last

    try:
        made = output.wait_for("made project")
        project = int(made.split()[2].rstrip(","))
        output.wait_for("the queue:")
        if mode == "backend":
            output.wait_for("connected the backend", timeout=120)
            info = client.projects.get(id=project)
            created = info.created_at
            body = {"project": f"{project}.{int(created.timestamp())}",
                    "label_config": info.label_config,
                    "params": {"login": None, "password": None, "context": None}}
            probe = PredictProbe(f"http://127.0.0.1:{port}", body, interval=args.predict_interval,
                                 auth=("skdbal", args.backend_token) if args.backend_token else None)
        wait_for("skdbal-first")
        pushed("skdbal-first", 10)
        idle["0"] = idle_cost(server.process.pid if server else None, process.pid, args.idle)
        log(f"{mode:7s} {name:5s} idle at 0 labels: Label Studio {idle['0']['labelstudio_cpu_per_s']} CPU-s/s, "
            f"skdbal {idle['0']['skdbal_cpu_per_s']} CPU-s/s")
        if name == "busy":
            busy, busy_from = busy_process(), time.perf_counter()
        labels = 0
        for b in range(args.rounds):
            tasks = queue_tasks(client, project)
            if probe is not None:
                probe.tasks = [as_task(t, project) for t in tasks[10:40]] or [as_task(tasks[0], project)]
            last = None
            for t in tasks[:10]:
                key = t["data"]["skdbal_key"]
                t0 = time.perf_counter()
                client.annotations.create(id=t["id"], result=[{"from_name": "label", "to_name": "image",
                                                               "type": "choices",
                                                               "value": {"choices": [str(y[int(key)])]}}])
                last = time.perf_counter()
                annotate_s.append(last - t0)
                labels += 1
                if probe is not None and labels % 10 == 0:
                    probe.active.set()             # the retrain starts with the batch's last label
                if mode == "backend":
                    n = labels
                    store_lag.append(wait(lambda n=n: store_count(store) >= n, 30, f"label {n} in the store",
                                          step=0.005) - last)
            trips.append(wait_for(f"skdbal-v{b}") - last)
            if probe is not None:
                probe.active.clear()
            head = head_task(client, project)
            t0 = time.perf_counter()
            answer = ls_http.get(f"/api/tasks/{head.id}")
            opened.append(time.perf_counter() - t0)
            task = answer.json() if answer.status_code == 200 else {}
            refused["open"] += answer.status_code != 200
            current = [p for p in task.get("predictions") or [] if p.get("model_version") == f"skdbal-v{b}"]
            head_ok += bool(current and current[0].get("result") and current[0].get("score") is not None
                            and not task.get("total_annotations"))
            t0 = time.perf_counter()
            answer = ls_http.get(f"/api/projects/{project}/next")     # Label All Tasks (locks the task served)
            nexts.append(time.perf_counter() - t0)
            if answer.status_code != 200:
                refused["next"] += 1
                log(f"{mode:7s} {name:5s} round {b + 1}: Label Studio answered the next task {answer.status_code}: "
                    f"{answer.text[:120]}")
            extra = "" if mode != "backend" else (f", store lag median {np.median(store_lag[-10:]):.3f} s, /predict "
                                                  f"{len(probe.times)} calls so far ({len(probe.wrong)} wrong)")
            log(f"{mode:7s} {name:5s} round {b + 1}: {labels:3d} labels, round trip {trips[-1]:6.2f} s, open the "
                f"head {opened[-1]:.3f} s{extra}")
        stop_busy()
        held = pushed(f"skdbal-v{args.rounds - 1}", ctx["pool"] - labels)
        idle["end"] = idle_cost(server.process.pid if server else None, process.pid, args.idle)
        idle["end"].update(labels=labels, pushed=held, unlabelled=ctx["pool"] - labels)
        log(f"{mode:7s} {name:5s} idle at {labels} labels (the last push: {held} of {ctx['pool'] - labels} tasks): "
            f"Label Studio {idle['end']['labelstudio_cpu_per_s']} CPU-s/s, skdbal {idle['end']['skdbal_cpu_per_s']} "
            "CPU-s/s")
    finally:
        stop_busy()
        if probe is not None:
            probe.stop()
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(120)
            except subprocess.TimeoutExpired:
                process.kill()
        ls_http.close()
    text = ""
    if server is not None:
        with open(server.log_path, "rb") as f:
            f.seek(log_from)
            text = f.read().decode("utf-8", errors="replace")
        with gzip.open(ctx["out"] / f"labelstudio-{mode}-{name}.log.gz", "wt") as f:
            f.write(text)
    lines = text.splitlines()
    errors = [line for line in lines if "[ERROR]" in line or "ERROR:" in line]
    invalid = [line for line in lines if "Invalid page" in line]
    records, by_next = [], 0        # a record: a log line with the traceback lines that follow it
    for line in lines:
        if line.startswith("[") or not records:
            records.append([line])
        else:
            records[-1].append(line)
    for record in records:
        if ("[ERROR]" in record[0] or "ERROR:" in record[0]) and any("next_task" in x or "/next" in x for x in record):
            by_next += 1
    t = stats(trips)
    return {**{k: v for k, v in t.items() if k != "n"}, "rounds": len(trips),
            "round_trips_s": [round(float(x), 3) for x in trips], "project": project,
            "annotate_call_s": stats(annotate_s), "store_lag_s": stats(store_lag) if mode == "backend" else None,
            "predict_s": None if probe is None else {**stats(probe.times), "wrong": len(probe.wrong),
                                                     "wrong_examples": probe.wrong[:3]},
            "open_task_s": stats(opened), "next_task_s": stats(nexts), "head_with_current_prediction": head_ok,
            "not_200": refused,
            "labelstudio_log": {"lines": len(lines), "error_lines": len(errors), "invalid_page_lines": len(invalid),
                                "error_lines_of_next_task": by_next,
                                "errors": errors[:5]},
            "idle": idle, "command_output_tail": output.lines[-5:],
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


def _s(r: dict, key: str = "median_s", fmt: str = "{:.3f} s") -> str:
    return "-" if not r or not r.get("n") else fmt.format(r[key])


def report(results: dict, args, log) -> dict:
    """The tables and the goals; the goals' verdicts (for the JSON)."""
    log()
    log("round trip, last annotation of a batch -> the new model's queue head (the project's model version):")
    log(f"(client mode: each includes the wait for the command's next pull, 0 to {args.interval:g} s; backend "
        "mode: a webhook brings each annotation)")
    log(f"  {'mode':8s}{'phase':6s}{'rounds':>6s}{'median':>10s}{'IQR':>16s}{'min-max':>16s}{'ann->store':>12s}"
        f"{'/predict p95':>14s}{'calls':>7s}{'wrong':>7s}")
    for (mode, name), r in results.items():
        iqr, span = f"{r['q1_s']:.2f}-{r['q3_s']:.2f} s", f"{r['min_s']:.2f}-{r['max_s']:.2f} s"
        p = r["predict_s"] or {}
        log(f"  {mode:8s}{name:6s}{r['rounds']:6d}{r['median_s']:8.2f} s{iqr:>16s}{span:>16s}"
            f"{_s(r['store_lag_s']):>12s}{_s(p, 'p95_s'):>14s}{str(p.get('n', '-')):>7s}{str(p.get('wrong', '-')):>7s}")
    log()
    log("opening a task, Label Studio's log and its idle cost (CPU-s per s over --idle s with nobody labelling):")
    log(f"  {'mode':8s}{'phase':6s}{'open head':>11s}{'next task':>11s}{'head ok':>9s}{'ERROR':>7s}"
        f"{'Inv.page':>9s}{'not 200':>8s}{'LS idle@0':>11s}{'LS idle@N':>11s}{'skdbal@N':>10s}{'N':>5s}")
    for (mode, name), r in results.items():
        i0, i1, lg = r["idle"].get("0", {}), r["idle"].get("end", {}), r["labelstudio_log"]
        log(f"  {mode:8s}{name:6s}{_s(r['open_task_s']):>11s}{_s(r['next_task_s']):>11s}"
            f"{r['head_with_current_prediction']:>5d}/{r['rounds']:<3d}{lg['error_lines']:>7d}"
            f"{lg['invalid_page_lines']:>9d}{sum(r['not_200'].values()):>8d}{str(i0.get('labelstudio_cpu_per_s')):>11s}"
            f"{str(i1.get('labelstudio_cpu_per_s')):>11s}{str(i1.get('skdbal_cpu_per_s')):>10s}"
            f"{str(i1.get('labels', '-')):>5s}")
    goals = {}
    log()
    log("goals (issue 42):")
    for (mode, name), r in results.items():
        if mode == "backend":
            p95 = (r["predict_s"] or {}).get("p95_s")
            goals[f"{mode}/{name}"] = {"round_trip_median_le_2s": r["median_s"] <= GOAL_ROUND_TRIP_S,
                                       "predict_p95_le_0.5s": p95 is not None and p95 <= GOAL_PREDICT_P95_S}
            log(f"  backend {name}: median round trip {r['median_s']:.2f} s (goal <= {GOAL_ROUND_TRIP_S:g} s: "
                f"{'met' if r['median_s'] <= GOAL_ROUND_TRIP_S else 'NOT met'}); /predict p95 "
                + ("-" if p95 is None else f"{p95:.3f} s") + f" (goal <= {GOAL_PREDICT_P95_S:g} s: "
                + ("met" if goals[f'{mode}/{name}']['predict_p95_le_0.5s'] else "NOT met") + ")")
        lg, idle = r["labelstudio_log"], r["idle"]
        a, b = idle.get("0", {}).get("labelstudio_cpu_per_s"), idle.get("end", {}).get("labelstudio_cpu_per_s")
        goals.setdefault(f"{mode}/{name}", {}).update({"no_error_lines": lg["error_lines"] + lg["invalid_page_lines"]
                                                       == 0})
        log(f"  {mode} {name}: {lg['error_lines']} ERROR and {lg['invalid_page_lines']} 'Invalid page' lines in "
            f"Label Studio's log (goal 0; {lg['error_lines_of_next_task']} of them in the next-task API, which "
            f"locks the task it serves; the benchmark's open / next-task requests answered other than 200: "
            f"{r['not_200']['open']} / {r['not_200']['next']}); its idle cost {a} CPU-s/s at 0 labels, {b} at "
            f"{idle.get('end', {}).get('labels', '?')}")
    return goals


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", default="client,backend", help="comma-separated: client (skdbal labelstudio "
                        "pulls and pushes), backend (skdbal labelstudio --backend --connect: Label Studio's ML "
                        "backend, annotations by webhooks); default both")
    parser.add_argument("--phases", default="quiet,busy", help="comma-separated: quiet, busy (default both)")
    parser.add_argument("--rounds", type=int, default=8, help="round trips per phase (batches of 10)")
    parser.add_argument("--pool", type=int, default=1797, help="tasks (digits images; at most 1797)")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between the command's pulls "
                        "(client mode)")
    parser.add_argument("--idle", type=float, default=20.0, help="seconds over which the idle cost is measured")
    parser.add_argument("--predict-interval", type=float, default=0.05, help="seconds between /predict calls "
                        "during a retrain (backend mode)")
    parser.add_argument("--backend-token", help="serve the backend with this token (Basic Auth's password)")
    parser.add_argument("--quick", action="store_true", help="2 rounds over 300 tasks, 5 s idle, to check that "
                        "it works; writes under --out only")
    parser.add_argument("--out", type=Path, help=f"where to write (default {OUT.relative_to(ROOT)}; with --quick "
                        "a temporary folder)")
    parser.add_argument("--url", help="an existing Label Studio (else one is started; for --mode backend it needs "
                        + " ".join(f"{k}={v}" for k, v in SSRF_OFF.items()) + ")")
    parser.add_argument("--token-env", help="with --url: the variable holding its token")
    args = parser.parse_args()
    modes = [m.strip() for m in args.mode.split(",") if m.strip()]
    phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    for m in modes:
        if m not in MODES:
            sys.exit(f"--mode: unknown mode {m!r}")
    for p in phases:
        if p not in ("quiet", "busy"):
            sys.exit(f"--phases: unknown phase {p!r}")
    if args.quick:
        args.rounds, args.pool, args.idle = 2, min(args.pool, 300), min(args.idle, 5.0)
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
    log(f"modes {', '.join(modes)}; phases {', '.join(phases)}; {args.pool} tasks, {args.rounds} rounds of 10 labels "
        f"per mode x phase, client pulls every {args.interval:g} s, /predict every {args.predict_interval:g} s "
        f"during retrains, idle measured over {args.idle:g} s"
        f"{' (--quick: a check, not a result)' if args.quick else ''}")

    server = None
    if args.url:
        url = args.url
        os.environ[TOKEN_VAR] = os.environ[args.token_env]
    else:
        executable = label_studio_executable()
        if executable is None:
            sys.exit("no label-studio: set SKDBAL_LABEL_STUDIO, or make .venv-ls (see tests/labelstudio/lsserver.py)")
        t0 = time.perf_counter()
        server = Server(executable, tempfile.mkdtemp(prefix="bench-ls-"), env=SSRF_OFF).start()
        log(f"Label Studio started in {time.perf_counter() - t0:.1f} s at {server.url} (with "
            + " ".join(f"{k}={v}" for k, v in SSRF_OFF.items()) + ")")
        url = server.url
    from sklearn.datasets import load_digits

    from skdbal.labelstudio.cli import connect

    X, y = load_digits(return_X_y=True)
    X, y = (X[:args.pool] / 16.0).astype(np.float32).reshape(-1, 8, 8), y[:args.pool]
    npy = Path(tempfile.mkdtemp(prefix="bench-ls-pool-")) / "digits.npy"
    np.save(npy, X)
    results = {}
    t_all = time.perf_counter()
    try:
        client = connect(url, os.environ.get(TOKEN_VAR, TOKEN))
        ctx = {"client": client, "url": url, "y": y, "npy": npy, "pool": len(y), "server": server, "out": out_dir}
        for name in phases:                  # a phase's modes side by side, so that both meet the same machine
            for mode in modes:
                t0 = time.perf_counter()
                results[mode, name] = phase(mode, name, args, ctx, log)
                log(f"{mode:7s} {name:5s} done in {time.perf_counter() - t0:.0f} s")
    finally:
        if server is not None:
            server.stop()
    goals = report(results, args, log)
    log(f"\nthe whole run took {time.perf_counter() - t_all:.0f} s")
    meta["argv"] = sys.argv[1:]
    figures = {mode: {name: r for (m, name), r in results.items() if m == mode} for mode in modes}
    (out_dir / "bench_labelstudio.json").write_text(json.dumps({"meta": meta, "results": figures, "goals": goals},
                                                               indent=1, default=str) + "\n")
    (out_dir / "output.txt").write_text("\n".join(lines) + "\n")
    print(f"wrote {out_dir}/output.txt, bench_labelstudio.json and Label Studio's logs")


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))     # a kill stops Label Studio and the command too
    main()
