"""skdbal against baal on one device (a GPU by default), side by side, in one unattended run.

Part A, pool scoring throughput at T = 100 and T = 20: the methods of ``bench_scoring.py`` (skdbal's
``predict_proba_samples`` with its default ``mask_seeding="auto"`` and each other ``mask_seeding``
(``row_philox`` is the default on CUDA, ``row_pcg64`` on the CPU), a naive T-loop, a raw-torch trunk-once loop,
baal's ``ModelWrapper`` with replicate on/off, with and without ``MCCachingModule``) on a Gal CNN
trained 5 epochs on 1,000 MNIST images and a pool of ``--n`` MNIST images, all on ``--device``. Each
method is warmed up once on a slice of the pool (CUDA's lazy initialisation), then timed best of
``--repeats`` interleaved runs (``torch.cuda.synchronize()`` around each). Printed: images/s, time
relative to skdbal, and each method's mean BALD over the pool and its correlation with skdbal's
(independent MC estimates, so agreement is a correlation below 1, and equal means within MC error).
skdbal and baal get the pool on the host, as their users pass it, and move each batch to the device
themselves; the two raw-torch loops get it on the device. Every method's output ends on the host.

Part B, a whole ``gal2017`` active-learning run with BALD (``--steps`` acquisitions, default 100):

- skdbal: exactly what a user runs, ``skdbal.experiments.run_grid("gal2017", ["bald"], [1], out,
  device=..., n_jobs=1, torch_threads=1)``, with ``mask_seeding`` what ``"auto"`` is on the device
  (``"row_philox"`` on CUDA; ``--mask-seeding`` to choose), in a child process (so that ``--skdbal-time-limit`` can
  stop it; the runner keeps every finished step) with a fresh output folder. Timed from the call to
  its return, after imports, a warm-up step of the CNN (CUDA's initialisation, torch's lazy imports)
  and MNIST's decoding, which are left out of both runs. The phase sums and the final accuracy come
  from the run's CSV.
- baal: the same protocol written with baal's API, in this process: ``ActiveLearningDataset`` over
  the same pool (the training set less the same 100 validation images), the same 20 initial labels,
  ``ActiveLearningLoop`` with ``heuristics.BALD()``, ``max_sample`` = 2,000 random pool points scored
  per step, 10 labelled per step, ``ModelWrapper.predict_on_dataset`` with T = 100 (baal's default
  ``replicate_in_memory=True``), the same ``skdbal.models.BayesianCNN`` wrapped in
  ``MCDropoutModule``, weights reset to their initial state and a fresh Adam (lr 1e-3) before each
  step's 50 epochs in batches of 128, Gal's l2(3.5/N) on the dense layer, and the deterministic
  accuracy on the 10,000 test images after every step. Stopped after the step that passes
  ``--baal-time-limit`` (partial, labelled so).

Both runs use one torch CPU thread. The last lines are a Markdown table: both runs' wall time, phase
sums, seconds per step, final accuracy and ratios, and, when a run stopped early, the first steps
both completed side by side. Every result is printed as soon as it is known and written to
``--json`` (the whole file rewritten after each measurement); a failing section prints its
traceback and the script goes on.

Time: the script keeps to ``--budget`` seconds (default 390) from its start. Part A stops repeating
after ``--part-a-limit`` (75 s); skdbal's run is stopped at ``--skdbal-time-limit`` (210 s) or when
only ``--baal-reserve`` (100 s) of the budget would be left; baal's run stops after the step that
passes ``--baal-time-limit`` (240 s) or the budget. A stopped run is reported as PARTIAL with the
steps it finished; nothing is extrapolated.

On a GPU machine, from the repository root (skorch, baal and structlog importable; without
torchmetrics, baal gets a stand-in, see ``import_baal``), about 7 minutes in all:

    SKDBAL_DATA=/path/to/data python benchmarks/bench_gpu.py --json bench_gpu.json

Tiny settings for a CPU test (a couple of minutes):

    SKDBAL_DATA=.data OMP_NUM_THREADS=1 python benchmarks/bench_gpu.py --device cpu --n 500 --T 20 \\
        --repeats 1 --steps 2 --epochs 2 --run-T 10 --pool-subsample 200 --json /tmp/bench.json
"""
import argparse
import copy
import csv
import glob
import json
import os
import platform
import queue
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from contextlib import contextmanager
from pathlib import Path

T_START = time.perf_counter()

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
try:
    import skdbal  # noqa: F401
except ImportError:  # not installed: the checkout this script sits in
    sys.path.insert(1, str(HERE.parent))
from _common import machine, mnist_or_synthetic, provenance  # noqa: E402
from bench_scoring import naive_loop, trunk_once_loop  # noqa: E402  (the same loops, on the pool's device)

import skdbal  # noqa: E402
from skdbal import MCDropoutClassifier  # noqa: E402
from skdbal.models import BayesianCNN  # noqa: E402
from skdbal.models._mc_masks import MASK_SEEDINGS, resolve_mask_seeding  # noqa: E402
from skdbal.uncertainty import mutual_information  # noqa: E402

SKDBAL = "skdbal predict_proba_samples (default, mask_seeding='auto')"
SEED = 1  # the gal2017 run's seed: its split, initial set and pool subsets


# ------------------------------------------------------------------------------- bookkeeping
class Results:
    """Everything measured, rewritten whole to ``path`` (atomically) after each measurement."""

    def __init__(self, path):
        self.path = path
        self.data = {"meta": {}, "part_a": {}, "skdbal_run": {}, "baal_run": {}, "summary": {}, "errors": []}

    def failed(self, name):
        """Print and record the traceback of the exception being handled, as ``name``'s failure."""
        tb = traceback.format_exc()
        log(f"!!! {name} failed:\n{tb}")
        self.data["errors"].append({"section": name, "traceback": tb})
        self.save()

    def save(self):
        if not self.path:
            return
        try:
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
            tmp = f"{self.path}.tmp"
            with open(tmp, "w") as f:
                json.dump(self.data, f, indent=1, default=_plain)
            os.replace(tmp, self.path)
        except (OSError, TypeError, ValueError) as exc:  # the printed results still stand
            log(f"!!! could not write {self.path}: {exc!r}")


def _plain(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return str(obj)


def elapsed() -> float:
    return time.perf_counter() - T_START


def log(*parts):
    print(*parts, flush=True)


@contextmanager
def section(name, results):
    """Run a section; on failure print its traceback, record it and carry on."""
    log(f"\n=== {name} (at {elapsed():.0f} s) ===")
    t0 = time.perf_counter()
    try:
        yield
    except Exception:  # noqa: BLE001 - one failing section must not stop the others
        results.failed(name)
    log(f"=== {name}: {time.perf_counter() - t0:.1f} s ===")


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device, *args):
    sync(device)
    t0 = time.perf_counter()
    out = fn(*args)
    sync(device)
    return time.perf_counter() - t0, out


def warm_up(device):
    """One forward, backward and Adam step of the CNN: torch's lazy imports (the first optimizer
    imports torch._dynamo, over a second), CUDA's context, cuDNN and cuBLAS handles and kernels.
    Done before both gal2017 runs, in and out of their process, and left out of their timings."""
    net = BayesianCNN().to(device)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    net(torch.zeros(4, 1, 28, 28, device=device)).sum().backward()
    opt.step()
    sync(device)


def import_baal():
    """Import baal and keep its structlog info lines (several per call) and a warning of its
    loss metric (a tensor that requires grad made a scalar, once per process) off the output.

    baal 2.1.0 imports torchmetrics only for the name ``torchmetrics.Metric`` (type hints of its
    metric mixin; baal's own metrics are used): without torchmetrics, a stand-in class of that
    name lets baal import, with a note. No measured code path touches it."""
    import logging
    import types
    import warnings

    warnings.filterwarnings("ignore", message="Converting a tensor with requires_grad=True to a scalar")
    try:
        import torchmetrics  # noqa: F401
    except ImportError as exc:
        log(f"NOTE: torchmetrics is not importable ({exc}); baal gets a stand-in torchmetrics.Metric")
        sys.modules["torchmetrics"] = types.ModuleType("torchmetrics")
        sys.modules["torchmetrics"].Metric = type("Metric", (), {})
    import baal  # noqa: F401  (configures structlog on import)
    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def versions_of(names=("skdbal", "skorch", "baal", "structlog", "torchmetrics", "scikit-learn", "numpy", "scipy")):
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in names:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
        except Exception as exc:  # noqa: BLE001
            out[name] = repr(exc)
    return out


def fmt(x, spec=".1f"):
    return "n/a" if x is None else format(x, spec)


def ratio(a, b):
    return a / b if a is not None and b else None


# ------------------------------------------------------------------- part A: pool scoring
def baal_scorer(net, replicate, caching, bs, device, X_host):
    """bench_scoring's baal runner on ``device``: baal's ModelWrapper moves each batch of a host
    dataset to the GPU itself (``use_cuda``), as a baal user's data loader feeds it."""
    from baal.bayesian.caching_utils import MCCachingModule
    from baal.bayesian.dropout import MCDropoutModule
    from baal.modelwrapper import ModelWrapper, TrainingArgs

    model = MCDropoutModule(copy.deepcopy(net))
    if caching:
        model = MCCachingModule(model)
    model.to(device).eval()
    wrapper = ModelWrapper(model, TrainingArgs(batch_size=bs, use_cuda=device.type == "cuda", workers=0,
                                               replicate_in_memory=replicate, criterion=nn.CrossEntropyLoss()))

    def run(rows, T):
        X = X_host[rows]
        ds = torch.utils.data.TensorDataset(X, torch.zeros(len(X), dtype=torch.long))
        logits = wrapper.predict_on_dataset(ds, iterations=T, verbose=False)  # (N, C, T), numpy
        return torch.softmax(torch.as_tensor(logits), 1).permute(2, 0, 1).numpy()

    return run


def part_a(args, device, results):
    t_a = time.perf_counter()
    limit = min(args.part_a_limit, args.budget - elapsed() - 60)
    X_train, y_train, X_pool, source = mnist_or_synthetic(1000, args.n)
    # _common.trained_net's classifier, on the device
    clf = MCDropoutClassifier(module=BayesianCNN, classes=np.arange(10), max_epochs=5, n_samples=20,
                              random_state=0, device=str(device))
    t_fit, _ = timed(clf.fit, device, X_train, y_train)
    net = clf.module_
    bs = args.batch_size
    X_np = X_pool.astype(np.float32) / 255.0
    X_host = torch.as_tensor(X_np)
    X_dev = X_host.to(device)
    log(f"pool: {args.n} {source} images, Gal CNN trained 5 epochs on 1,000 images in {t_fit:.1f} s, batch {bs}, "
        f"best of {args.repeats}, Part A limit {limit:.0f} s")
    results.data["part_a"]["setup"] = {"n": args.n, "source": source, "batch_size": bs, "fit_s": t_fit}

    def skdbal_with(seeding):
        # the closures read clf, net and X_dev, deleted at the end of Part A to free the GPU, after their last use
        return lambda rows, T: clf.set_params(batch_size=bs, mask_seeding=seeding).predict_proba_samples(  # noqa: F821
            X_np[rows], n_samples=T)

    # the default ("auto": row_philox on CUDA, row_pcg64 on the CPU), then every other seeding by name
    default = resolve_mask_seeding("auto", device)
    log(f"mask_seeding='auto' is {default!r} on {device}")
    results.data["part_a"]["setup"]["auto_mask_seeding"] = default
    methods = {SKDBAL: skdbal_with("auto")}
    labels = {"row_pcg64": "numpy's PCG64 per row, on the host", "row_philox": "Philox-4x32-10, on the device",
              "row": "torch generators", "stream": "one stream per call"}
    methods.update({f"skdbal mask_seeding='{s}' ({labels.get(s, s)})": skdbal_with(s)
                    for s in MASK_SEEDINGS if s != default})
    methods.update({
        "trunk-once loop (raw torch)": lambda rows, T: trunk_once_loop(net, X_dev[rows], T, bs),  # noqa: F821
        "naive T-loop (full passes)": lambda rows, T: naive_loop(net, X_dev[rows], T, bs),  # noqa: F821
    })
    try:
        import_baal()
        for replicate in (True, False):
            for caching in (False, True):
                name = f"baal ModelWrapper replicate={replicate} caching={caching}"
                methods[name] = baal_scorer(net, replicate, caching, bs, device, X_host)
    except ImportError as exc:
        log(f"baal not importable ({exc}): its methods are skipped")

    failed = set()
    warm = slice(0, min(args.warmup_rows, args.n))
    for T in args.T:
        key = f"T={T}"
        table = results.data["part_a"][key] = {}
        best = {}
        for name, fn in methods.items():  # warm-up: CUDA's lazy init, cuDNN's choices, baal's imports
            try:
                dt, _ = timed(fn, device, warm, T)
                log(f"  T={T} warm-up {name}: {dt:.2f} s ({warm.stop} images)")
            except Exception:  # noqa: BLE001
                failed.add(name)
                results.failed(f"part A {name}")
        for rep in range(args.repeats):
            for name, fn in methods.items():
                if name in failed or (rep and time.perf_counter() - t_a > limit):
                    continue  # past the limit, every method keeps the runs it has (at least one)
                try:
                    dt, out = timed(fn, device, slice(None), T)
                except Exception:  # noqa: BLE001
                    failed.add(name)
                    results.failed(f"part A {name}")
                    continue
                scores = mutual_information(out)
                if name not in best or dt < best[name][0]:
                    best[name] = (dt, scores)
                log(f"  T={T} run {rep + 1}/{args.repeats} {name}: {dt:.3f} s, {args.n / dt:.0f} img/s, "
                    f"mean BALD {scores.mean():.4f}")
                ref = best.get(SKDBAL)
                table[name] = {"seconds": best[name][0], "img_per_s": args.n / best[name][0],
                               "runs": rep + 1, "mean_bald": float(best[name][1].mean()),
                               "time_over_skdbal": ratio(best[name][0], ref and ref[0]),
                               "corr_bald_with_skdbal": None if ref is None else
                               float(np.corrcoef(ref[1], best[name][1])[0, 1])}
                results.save()
        if time.perf_counter() - t_a > limit and args.repeats > 1:
            log(f"  Part A limit ({limit:.0f} s) reached: some methods have fewer than {args.repeats} runs "
                "('runs' in the JSON)")
        ref = best.get(SKDBAL)
        for name, row in table.items():  # ratios against skdbal's final best
            row["time_over_skdbal"] = ratio(row["seconds"], ref and ref[0])
            row["corr_bald_with_skdbal"] = None if ref is None else float(np.corrcoef(ref[1], best[name][1])[0, 1])
        results.save()
        log(f"\nT = {T}, {args.n} images on {device}")
        log(f"{'method':<52}{'img/s':>9}{'time/skdbal':>13}{'corr(BALD)':>12}{'mean BALD':>11}")
        for name, row in table.items():
            log(f"{name:<52}{row['img_per_s']:>9.0f}{fmt(row['time_over_skdbal'], '.2f'):>13}"
                f"{fmt(row['corr_bald_with_skdbal'], '.3f'):>12}{row['mean_bald']:>11.4f}")
        baal_means = {n: r["mean_bald"] for n, r in table.items() if n.startswith("baal")}
        if ref is not None and baal_means:
            log(f"mean BALD: skdbal {ref[1].mean():.4f}, baal " +
                ", ".join(f"{v:.4f}" for v in baal_means.values()) + " (independent MC estimates)")
        if time.perf_counter() - t_a > limit:
            log(f"Part A limit ({limit:.0f} s) reached: the remaining T values are skipped")
            break
    del clf, net, X_dev, methods
    if device.type == "cuda":
        torch.cuda.empty_cache()


# ----------------------------------------------------------------- part B: skdbal's gal2017 run
_CHILD = r"""
import json, sys, time
import torch
from skdbal.experiments import run_grid
from skdbal.experiments.factories import load_data
from skdbal.models import BayesianCNN

out, device, overrides = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
torch.set_num_threads(1)
# bench_gpu.warm_up, left out of the timing as for baal's run: torch's lazy imports, CUDA's set-up
net = BayesianCNN().to(device)
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
net(torch.zeros(4, 1, 28, 28, device=device)).sum().backward()
opt.step()
if device.startswith("cuda"):
    torch.cuda.synchronize()
load_data("mnist")  # MNIST decoded (and cached) before the timing, as for baal's run
print("BENCH_RUN_START", flush=True)
t0 = time.perf_counter()
run_grid("gal2017", ["bald"], [1], out, device=device, n_jobs=1, torch_threads=1, verbose=True, **overrides)
print("BENCH_RUN_DONE " + json.dumps({"wall_s": time.perf_counter() - t0}), flush=True)
"""


def read_run_csv(out_dir):
    paths = sorted(glob.glob(os.path.join(out_dir, "runs", "*.csv")))
    if not paths:
        return []
    with open(paths[0], newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for k in ("step", "n_labels"):
            r[k] = int(r[k])
        for k in ("accuracy", "train_time", "query_time", "eval_time", "time"):
            r[k] = float(r[k])
    return rows


def phase_sums(rows, k=None):
    """Sums of the per-step phase times over steps 0..k (all rows if k is None)."""
    rows = [r for r in rows if k is None or r["step"] <= k]
    return {p: float(sum(r[p] for r in rows)) for p in ("train_time", "query_time", "eval_time", "time")}


def overrides_of(args):
    """Preset fields that shorten the run (the same ones shorten baal's), and skdbal's mask seeding:
    ``--mask-seeding``, by default what ``"auto"`` is on the device (``row_philox`` on CUDA; a grid
    names its seeding, ``row_pcg64`` unless told)."""
    changes = {"n_queries": args.steps}
    seeding = args.mask_seeding or resolve_mask_seeding("auto", args.device)
    if seeding != "row_pcg64":
        changes["mask_seeding"] = seeding
    for field, value, default in (("max_epochs", args.epochs, 50), ("n_samples", args.run_T, 100),
                                  ("pool_subsample", args.pool_subsample, 2000)):
        if value != default:
            changes[field] = value
    return changes


def skdbal_run(args, device, results):
    room = args.budget - elapsed() - args.baal_reserve
    if room < 10:
        log(f"skipped: {room:.0f} s left for it (--budget {args.budget}, --baal-reserve {args.baal_reserve})")
        results.data["skdbal_run"]["skipped"] = True
        results.save()
        return
    limit = min(args.skdbal_time_limit, room)
    out_dir = tempfile.mkdtemp(prefix="bench_gpu_skdbal_")
    overrides = overrides_of(args)
    env = dict(os.environ)
    root = str(Path(skdbal.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in [env.get("PYTHONPATH")] if p])
    dev = str(device)
    cmd = [sys.executable, "-u", "-c", _CHILD, out_dir, dev, json.dumps(overrides)]
    info = results.data["skdbal_run"]
    info.update(out_dir=out_dir, overrides=overrides, time_limit_s=limit,
                call=f"run_grid('gal2017', ['bald'], [1], out, device={dev!r}, n_jobs=1, torch_threads=1, "
                     + ", ".join(f"{k}={v!r}" for k, v in overrides.items()) + ")")
    results.save()
    log(f"{info['call']}\nin a child process, output folder {out_dir}, time limit {limit:.0f} s")

    def record(wall, stopped):
        """The run's finished steps, from its CSV, into the JSON (after each step, and at the end)."""
        rows = read_run_csv(out_dir)
        done = max((r["step"] for r in rows), default=None)
        info.update(wall_s=wall, steps_done=done, steps_asked=args.steps, partial=done is None or done < args.steps,
                    stopped_at_limit=stopped, phases=phase_sums(rows) if rows else None,
                    final_accuracy=rows[-1]["accuracy"] if rows else None,
                    final_n_labels=rows[-1]["n_labels"] if rows else None,
                    per_step=[{k: r[k] for k in ("step", "n_labels", "accuracy", "train_time", "query_time",
                                                 "eval_time", "time")} for r in rows],
                    initial_indices=[int(i) for i in rows[0]["query_indices"].split()] if rows else None)
        results.save()
        return rows

    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1, env=env)
    lines = queue.Queue()
    threading.Thread(target=lambda: ([lines.put(line) for line in proc.stdout], lines.put(None)),
                     daemon=True).start()
    started = wall = None
    stopped = False
    killer = threading.Timer(10, proc.kill)
    t_spawn = time.perf_counter()
    try:
        while True:
            try:
                line = lines.get(timeout=0.5)
            except queue.Empty:
                line = ""
            if line is None:
                break
            now = time.perf_counter()
            if line.startswith("BENCH_RUN_START"):
                started = now
                log(f"[skdbal] started ({started - t_spawn:.1f} s of imports, warm-up and MNIST set-up, not timed)")
            elif line.startswith("BENCH_RUN_DONE"):
                wall = json.loads(line.split(" ", 1)[1])["wall_s"]
            elif line:
                log("[skdbal] " + line.rstrip())
                if started is not None and " step " in line:
                    try:
                        record(now - started, False)  # partial until the run returns
                    except Exception:  # noqa: BLE001 - read again at the end
                        log(f"!!! reading the run's CSV: {traceback.format_exc()}")
            # the limit counts from the run's start; its set-up gets 60 s
            if not stopped and (now - started > limit if started else now - t_spawn > 60):
                stopped = True
                log("[skdbal] time limit reached: stopping the run (its finished steps are kept)")
                proc.terminate()
                killer.start()
                wall = now - started if started else None
    except BaseException:  # this process failed or was interrupted: leave no run behind
        proc.kill()
        raise
    rc = proc.wait()
    killer.cancel()
    info["returncode"] = rc
    rows = record(wall, stopped)
    done, partial = info["steps_done"], info["partial"]
    if rc != 0 and not stopped:
        log(f"[skdbal] the child process exited with {rc}")
    if rows:
        p = info["phases"]
        log(f"skdbal run{' (PARTIAL)' if partial else ''}: {done}/{args.steps} steps, wall {fmt(wall)} s; "
            f"train {p['train_time']:.1f} s, query {p['query_time']:.1f} s, eval {p['eval_time']:.1f} s "
            f"(sum of steps {p['time']:.1f} s); final accuracy {rows[-1]['accuracy']:.4f} "
            f"at {rows[-1]['n_labels']} labels")


# ------------------------------------------------------------------- part B: baal's gal2017 run
# gal2017's l2(3.5/N) on the dense layer, as skdbal's ScaledL2 applies it: torch's weight_decay
# λ adds λ·w to the gradient, the gradient of (λ/2)·Σw², so Keras's l2(c/N) is weight_decay = 2c/N
# in an Adam parameter group of its own, set for each step's N.
SCALED_L2 = 3.5


def baal_run(args, device, results):
    import_baal()
    from baal.active import ActiveLearningDataset, ActiveLearningLoop
    from baal.active.heuristics import BALD
    from baal.bayesian.dropout import MCDropoutModule, unpatch_module
    from baal.modelwrapper import ModelWrapper, TrainingArgs

    from skdbal.experiments import get_preset
    from skdbal.experiments.factories import load_data, split_indices

    info = results.data["baal_run"]
    room = args.budget - elapsed() - 10
    if room < 10:
        log(f"skipped: {room:.0f} s left for it (--budget {args.budget})")
        info["skipped"] = True
        results.save()
        return
    limit = min(args.baal_time_limit, room)
    info.update(time_limit_s=limit, steps_asked=args.steps)
    log(f"time limit {limit:.0f} s")
    preset = get_preset("gal2017", **overrides_of(args))
    X_train, y_train, X_test, y_test = load_data("mnist")
    # the run's split (seeded by the seed alone): pool = training set less the 100 validation
    # images, and its 20 balanced initial labels: those of the skdbal run's step 0 when it ran
    _, pool, initial, _ = split_indices(preset, SEED, y_train, len(y_test))
    theirs = results.data["skdbal_run"].get("initial_indices")
    same = None if theirs is None else sorted(theirs) == sorted(initial.tolist())
    log(f"pool {len(pool)} images, initial labels {len(initial)}: " +
        ("those of the skdbal run's step 0" if same else
         "the seed's split (the skdbal run has no step 0)" if same is None else
         "those of the skdbal run's step 0, which DIFFER from the seed's split"))
    if same is False:
        initial = np.asarray(theirs)
    info["initial_same_as_skdbal"] = same
    is_cuda = device.type == "cuda"
    if is_cuda and device.index is not None:
        torch.cuda.set_device(device)  # baal's use_cuda moves batches with .cuda(): the current device
    warm_up(device)

    pool_ds = torch.utils.data.TensorDataset(torch.as_tensor(X_train[pool].astype(np.float32) / 255.0),
                                             torch.as_tensor(y_train[pool], dtype=torch.long))
    test_ds = torch.utils.data.TensorDataset(torch.as_tensor(X_test.astype(np.float32) / 255.0),
                                             torch.as_tensor(y_test, dtype=torch.long))
    position = {int(i): p for p, i in enumerate(pool)}
    np.random.seed(SEED)  # baal draws its max_sample subsets from numpy's global generator
    torch.manual_seed(SEED)

    sync(device)
    t_run = time.perf_counter()
    labelled = np.zeros(len(pool), dtype=bool)
    labelled[[position[int(i)] for i in initial]] = True
    al_dataset = ActiveLearningDataset(pool_ds, labelled=labelled)  # labels: the known training labels
    model = MCDropoutModule(BayesianCNN()).to(device)
    dense = model.parent_module.head[2].weight
    others = [p for p in model.parameters() if p is not dense]
    init_weights = copy.deepcopy(model.state_dict())
    targs = dict(batch_size=preset.batch_size, use_cuda=is_cuda, workers=0, criterion=nn.CrossEntropyLoss())
    wrapper = ModelWrapper(model, TrainingArgs(epoch=preset.max_epochs, **targs))  # replicate_in_memory=True
    loop = ActiveLearningLoop(al_dataset, wrapper.predict_on_dataset, heuristic=BALD(),
                              query_size=preset.n_instances, max_sample=preset.pool_subsample,
                              iterations=preset.n_samples, verbose=False)

    def train():
        model.load_state_dict(init_weights)
        decay = 2.0 * SCALED_L2 / len(al_dataset)
        wrapper.args.optimizer = torch.optim.Adam(
            [{"params": others}, {"params": [dense], "weight_decay": decay}], lr=preset.lr)
        wrapper.train_on_dataset(al_dataset)

    def evaluate():
        # deterministic: a copy with torch's Dropout, which eval mode turns off (baal's is always on)
        det = unpatch_module(model, inplace=False)
        logits = ModelWrapper(det, TrainingArgs(**targs)).predict_on_dataset(test_ds, iterations=1, verbose=False)
        return float(np.mean(logits[:, :, 0].argmax(1) == y_test))

    steps, totals = [], {"train_time": 0.0, "query_time": 0.0, "eval_time": 0.0}
    info.update(per_step=steps, phases=totals)
    for step in range(args.steps + 1):
        t_query = 0.0
        if step:
            t_query, went_on = timed(loop.step, device)
            if not went_on:
                log("[baal] the pool is exhausted")
                break
        t_train, _ = timed(train, device)
        t_eval, acc = timed(evaluate, device)
        wall = time.perf_counter() - t_run
        row = {"step": step, "n_labels": int(len(al_dataset)), "accuracy": acc, "train_time": t_train,
               "query_time": t_query, "eval_time": t_eval, "time": t_train + t_query + t_eval}
        steps.append(row)
        for k in ("train_time", "query_time", "eval_time"):
            totals[k] += row[k]
        totals["time"] = sum(totals[k] for k in ("train_time", "query_time", "eval_time"))
        partial = step < args.steps
        info.update(wall_s=wall, steps_done=step, partial=partial, final_accuracy=acc, final_n_labels=row["n_labels"])
        results.save()
        log(f"[baal] step {step}: {row['n_labels']} labels, accuracy {acc:.4f} "
            f"(train {t_train:.2f} s, query {t_query:.2f} s, eval {t_eval:.2f} s; {wall:.0f} s so far)")
        if partial and wall > limit:
            info["stopped_at_limit"] = True
            results.save()
            log(f"[baal] time limit {limit:.0f} s passed: PARTIAL run, stopped after step {step} of {args.steps}")
            break
    p = info["phases"]
    log(f"baal run{' (PARTIAL)' if info['partial'] else ''}: {info['steps_done']}/{args.steps} steps, wall "
        f"{info['wall_s']:.1f} s; train {p['train_time']:.1f} s, query {p['query_time']:.1f} s, eval "
        f"{p['eval_time']:.1f} s; final accuracy {info['final_accuracy']:.4f} at {info['final_n_labels']} labels")


# --------------------------------------------------------------------------------- summary
def summary(args, device, results):
    d = results.data
    s, b = d["skdbal_run"], d["baal_run"]
    name = d["meta"].get("device_name") if device.type == "cuda" else platform.processor() or "CPU"
    log(f"\n## skdbal vs baal on {name} (torch {torch.__version__}, device {device})\n")
    scored = [T for T in args.T if d["part_a"].get(f"T={T}")]
    if scored:
        log(f"Part A, pool scoring of {args.n} images (best of up to {args.repeats}; 'time / skdbal' is the "
            "method's time over skdbal's default):\n")
        log("| method | " + " | ".join(f"T={T} img/s | time / skdbal | corr(BALD) | mean BALD" for T in scored) + " |")
        log("|---|" + "---|---|---|---|" * len(scored))
        methods = list(dict.fromkeys(n for T in scored for n in d["part_a"][f"T={T}"]))
        for n in methods:
            cells = []
            for T in scored:
                r = d["part_a"][f"T={T}"].get(n)
                cells += ([f"{r['img_per_s']:.0f}", fmt(r["time_over_skdbal"], ".2f"),
                           fmt(r["corr_bald_with_skdbal"], ".3f"), f"{r['mean_bald']:.4f}"] if r else ["n/a"] * 4)
            log(f"| {n} | " + " | ".join(cells) + " |")
        log("")

    def phase(run, key):
        return (run.get("phases") or {}).get(key)

    def steps_done(run):
        return run.get("steps_done")

    def per_step(run):
        n = steps_done(run)
        return ratio(run.get("wall_s"), n) if n else None

    def label(run):
        if not run or run.get("steps_done") is None:
            return "not run"
        return f"{run['steps_done']}/{args.steps}" + (" PARTIAL" if run.get("partial") else "")

    log("Part B, the gal2017 run with BALD:\n")
    rows = [("device", name, name, None), ("torch", torch.__version__, torch.__version__, None),
            ("acquisition steps done", label(s), label(b), None),
            ("wall time, s", s.get("wall_s"), b.get("wall_s"), None),
            ("train, s (sum)", phase(s, "train_time"), phase(b, "train_time"), None),
            ("query, s (sum)", phase(s, "query_time"), phase(b, "query_time"), None),
            ("eval, s (sum)", phase(s, "eval_time"), phase(b, "eval_time"), None),
            ("s per step (wall / steps)", per_step(s), per_step(b), None),
            ("final accuracy", s.get("final_accuracy"), b.get("final_accuracy"), ".4f"),
            ("labels at the end", s.get("final_n_labels"), b.get("final_n_labels"), "d")]
    log("| | skdbal | baal | baal / skdbal |")
    log("|---|---|---|---|")
    table = {}
    same_steps = steps_done(s) is not None and steps_done(s) == steps_done(b)
    for what, x, y, spec in rows:
        # totals over different numbers of steps do not compare: no ratio (see the rows 'steps 0-k only')
        r = None if isinstance(x, str) or what.startswith(("final", "labels")) or not same_steps else ratio(y, x)
        cell = (lambda v, spec=spec: v if isinstance(v, str) else fmt(v, spec or ".1f"))
        log(f"| {what} | {cell(x)} | {cell(y)} | {fmt(r, '.2f') if r is not None else ''} |")
        table[what] = {"skdbal": x, "baal": y, "baal_over_skdbal": r}
    # the first k steps of both, when one stopped early: step times grow with the labelled set,
    # so only the same steps compare
    k = min(steps_done(s) if steps_done(s) is not None else -1, steps_done(b) if steps_done(b) is not None else -1)
    if k >= 0 and (s.get("partial") or b.get("partial")):
        ms, mb = phase_sums(s["per_step"], k), phase_sums(b["per_step"], k)
        for p in ("train_time", "query_time", "eval_time", "time"):
            what = f"steps 0-{k} only: {p.replace('_time', '') if p != 'time' else 'all phases'}, s"
            r = ratio(mb[p], ms[p])
            log(f"| {what} | {ms[p]:.1f} | {mb[p]:.1f} | {fmt(r, '.2f')} |")
            table[what] = {"skdbal": ms[p], "baal": mb[p], "baal_over_skdbal": r}
    d["summary"] = {"device_name": name, "torch": torch.__version__, "table": table}
    results.save()
    notes = [f"\nBoth runs: {args.steps} acquisitions of 10 labels from 20, T = {args.run_T}, "
             f"{args.pool_subsample} pool points scored per step, {args.epochs} epochs from scratch per step, "
             "1 torch CPU thread, deterministic accuracy on the 10,000 test images after every step. Wall "
             "times leave out imports, a warm-up step (CUDA's initialisation, torch's lazy imports) and "
             "MNIST's decoding; skdbal's includes its run files, written after every step."]
    if s.get("partial") or b.get("partial"):
        notes.append("PARTIAL: a run stopped at its time limit; its wall time and phase sums cover only the "
                     "steps done, which are the cheapest (training grows with the labelled set); compare the "
                     "'steps 0-k only' rows, not the totals. Nothing above is extrapolated.")
    for n in notes:
        log(n)


# ------------------------------------------------------------------------------------ main
def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--json", default=None, metavar="PATH", help="write every result here as it comes")
    parser.add_argument("--n", type=int, default=None, help="Part A pool size (default 10000 on a GPU, 2000 on a CPU)")
    parser.add_argument("--T", type=int, nargs="+", default=[100, 20], help="Part A's T values (default 100 20)")
    parser.add_argument("--repeats", type=int, default=3, help="Part A: best of this many interleaved runs")
    parser.add_argument("--batch-size", type=int, default=128, help="Part A batch size")
    parser.add_argument("--warmup-rows", type=int, default=512, help="Part A: pool rows of each warm-up call")
    parser.add_argument("--steps", type=int, default=100, help="acquisition steps of both runs (gal2017: 100)")
    parser.add_argument("--epochs", type=int, default=50, help="epochs per step of both runs (gal2017: 50)")
    parser.add_argument("--run-T", type=int, default=100, help="MC samples per query in both runs (gal2017: 100)")
    parser.add_argument("--pool-subsample", type=int, default=2000, help="pool points scored per step (gal2017: 2000)")
    parser.add_argument("--mask-seeding", default=None, choices=MASK_SEEDINGS,
                        help="the gal2017 run's mask_seeding (default: what 'auto' is on --device)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads in this process (default 1)")
    parser.add_argument("--budget", type=float, default=390,
                        help="seconds for the whole script; the time limits below shrink to fit it")
    parser.add_argument("--part-a-limit", type=float, default=75, help="seconds for Part A (no more repeats after)")
    parser.add_argument("--skdbal-time-limit", type=float, default=210,
                        help="seconds for skdbal's run; it is stopped at the limit (partial)")
    parser.add_argument("--baal-reserve", type=float, default=100,
                        help="seconds of the budget kept for baal's run when skdbal's starts")
    parser.add_argument("--baal-time-limit", type=float, default=240,
                        help="seconds for baal's run; it stops after the step that passes it (partial)")
    parser.add_argument("--skip", nargs="+", default=[], choices=["scoring", "skdbal", "baal"])
    args = parser.parse_args()
    device = torch.device(args.device)
    if args.n is None:
        args.n = 10000 if device.type == "cuda" else 2000
    torch.set_num_threads(args.threads)
    results = Results(args.json)
    meta = results.data["meta"]
    meta.update(args=vars(args), machine=machine(), torch=torch.__version__, versions=versions_of(),
                device=str(device), started=time.strftime("%Y-%m-%d %H:%M:%S"), cuda=torch.version.cuda,
                cudnn_tf32=torch.backends.cudnn.allow_tf32, matmul_tf32=torch.backends.cuda.matmul.allow_tf32,
                cudnn_benchmark=torch.backends.cudnn.benchmark, provenance=provenance())
    try:
        meta["device_name"] = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    except Exception as exc:  # noqa: BLE001 - every section will say more
        meta["device_name"] = f"unknown ({exc!r})"
    results.save()
    log(f"machine: {meta['machine']}\ndevice: {device} ({meta['device_name']}), CUDA {meta['cuda']}, "
        f"versions {meta['versions']}")
    with section("warm-up", results):
        warm_up(device)
    if "scoring" not in args.skip:
        with section("Part A: pool scoring", results):
            part_a(args, device, results)
    if "skdbal" not in args.skip:
        with section("Part B: skdbal's gal2017 run (run_grid)", results):
            skdbal_run(args, device, results)
    if "baal" not in args.skip:
        with section("Part B: baal's gal2017 run", results):
            baal_run(args, device, results)
    with section("Summary", results):
        summary(args, device, results)
    log(f"\ndone in {elapsed():.0f} s" + (f"; results in {args.json}" if args.json else ""))


if __name__ == "__main__":
    main()
