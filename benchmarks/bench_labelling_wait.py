"""How long a person at the labelling page waits with nothing to label.

A real ``skdbal label`` command (a subprocess, torch on one thread: ``--torch-threads 1``) and a real
headless Chromium (Debian's ``chromium`` and ``chromium-driver``, through Selenium) on 127.0.0.1. A
scripted, truthful annotator labels at a person's pace: it looks at the highlighted item for
``--think`` seconds (2 s by default), presses the item's digit key, and goes on. Before each key press
it records how long it waited for an item to label: the time from being ready (its think time over)
to the page highlighting an item that is not yet labelled. Waits are reported over ``--labels``
labels (200 by default): median, p99, max and their sum.

Three pools, each its own run:

- ``demo``: ``skdbal label --demo digits`` (scikit-learn's digits, 8x8);
- ``folder``: a folder of 2,000 28x28 PNG images, MNIST training images read with
  :func:`skdbal.datasets.load_mnist` (``$SKDBAL_DATA``), classes ``0``..``9``;
- ``fashion``: a folder of 3,000 28x28 PNG images, Fashion-MNIST training images (the raw IDX files in
  ``$SKDBAL_DATA/fashion-mnist``), classes ``0``..``9`` (T-shirt/top .. Ankle boot).

    python benchmarks/bench_labelling_wait.py [--pools demo folder] [--labels 200] [--think 2]
    python benchmarks/bench_labelling_wait.py --pools fashion --think 0.5    # a brisk annotator

Writes its whole output to ``docs/results/<name>/output.txt`` and the figures with the machine, the
versions and the commit to ``docs/results/<name>/labelling_wait.json``: ``<name>`` is
``labelling_wait`` for the default pools, labels and pace, else ``labelling_wait_<pools>_think<ms>ms``
(and ``_<labels>`` for another count), or ``$SKDBAL_BENCH_OUT`` names the folder; so a run of another
configuration never overwrites the committed record of one.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

#: The highlighted item, if it is still to label (not done, not being sent) and its image is drawn: its
#: element's id.
CURRENT = ("const c = document.querySelector('.item.current:not(.done):not(.saving)'); if(!c) return null; "
           "const i = c.querySelector('img'); return (!i || (i.complete && i.naturalWidth > 0)) ? c.id : null;")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout: float = 120.0) -> None:
    import httpx

    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{url} did not answer within {timeout} s")


def demo_labels() -> dict:
    """The demo pool's true labels, by item id (the demo's split, redone)."""
    from skdbal.experiments.data import load_digits_images

    return {i: str(int(v)) for i, v in enumerate(load_digits_images()[2])}


def folder_pool(folder: Path, n: int = 2000) -> dict:
    """``n`` MNIST training images as 28x28 PNGs in ``folder``; their true labels by item id (the
    command sorts the file names)."""
    from skdbal.datasets import load_mnist

    return write_pngs(folder, *load_mnist(subset="train", return_X_y=True), n)


def read_idx(path: Path) -> np.ndarray:
    """An unsigned-byte IDX file (gzipped) as an array."""
    import gzip

    with gzip.open(path, "rb") as f:
        content = f.read()
    ndim = content[3]
    dims = np.frombuffer(content, dtype=">u4", count=ndim, offset=4).astype(int)
    return np.frombuffer(content, dtype=np.uint8, offset=4 + 4 * ndim).reshape(tuple(dims))


def fashion_mnist(subset: str = "train"):
    """Fashion-MNIST's ``train`` or ``t10k`` images (uint8, N x 28 x 28) and labels, from the raw IDX
    files in ``$SKDBAL_DATA/fashion-mnist`` (``~/skdbal_data`` by default)."""
    folder = Path(os.environ.get("SKDBAL_DATA") or Path.home() / "skdbal_data") / "fashion-mnist"
    return (read_idx(folder / f"{subset}-images-idx3-ubyte.gz"),
            read_idx(folder / f"{subset}-labels-idx1-ubyte.gz").astype(np.int64))


def write_pngs(folder: Path, X, y, n: int) -> dict:
    """``n`` of the 28x28 images ``X`` (a seeded choice) as PNGs in ``folder``; their true labels by
    item id (the command sorts the file names)."""
    from PIL import Image

    rng = np.random.RandomState(0)
    pick = rng.choice(len(X), n, replace=False)
    names = []
    for j, i in enumerate(pick):
        name = f"img{j:05d}.png"
        Image.fromarray(np.asarray(X[i]).reshape(28, 28).astype(np.uint8)).save(folder / name)
        names.append((name, str(int(y[i]))))
    return {k: label for k, (_, label) in enumerate(sorted(names))}


def fashion_pool(folder: Path, n: int = 3000) -> dict:
    """``n`` Fashion-MNIST training images as 28x28 PNGs in ``folder``; their true labels by item id."""
    return write_pngs(folder, *fashion_mnist("train"), n)


def out_folder(pools, labels: int, think: float) -> Path:
    """Where a run's record goes (see the module's description)."""
    if os.environ.get("SKDBAL_BENCH_OUT"):
        return Path(os.environ["SKDBAL_BENCH_OUT"])
    if sorted(pools) == ["demo", "folder"] and labels == 200 and think == 2.0:   # the committed record's
        return ROOT / "docs" / "results" / "labelling_wait"
    return ROOT / "docs" / "results" / (f"labelling_wait_{'_'.join(pools)}_think{round(think * 1000)}ms" +
                                        (f"_{labels}" if labels != 200 else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pools", nargs="+", default=["demo", "folder"], choices=["demo", "folder", "fashion"])
    parser.add_argument("--labels", type=int, default=200)
    parser.add_argument("--think", type=float, default=2.0, help="seconds a label (a person's pace)")
    args = parser.parse_args()
    OUT = out_folder(args.pools, args.labels, args.think)
    OUT.mkdir(parents=True, exist_ok=True)
    lines = []

    def log(text=""):
        print(text, flush=True)
        lines.append(text)

    from _helpers import chromium_driver

    results = {}
    for kind in args.pools:
        tmp = Path(tempfile.mkdtemp())
        port = free_port()
        argv = [sys.executable, "-m", "skdbal", "label", "--port", str(port), "--store", str(tmp / "s.db"),
                "--torch-threads", "1"]
        if kind == "demo":
            truth = demo_labels()
            argv += ["--demo", "digits"]
        else:
            (tmp / "images").mkdir()
            truth = folder_pool(tmp / "images") if kind == "folder" else fashion_pool(tmp / "images")
            argv += ["--images", str(tmp / "images"), "--classes", ",".join(str(c) for c in range(10))]
        env = dict(os.environ, OMP_NUM_THREADS="1")
        server = subprocess.Popen(argv, stdout=open(tmp / "server.log", "w"), stderr=subprocess.STDOUT, env=env)
        driver = None
        try:
            url = f"http://127.0.0.1:{port}/"
            wait_http(url)
            driver = chromium_driver(tmp / "profile")
            driver.get(url + "?annotator=bench")
            from selenium.webdriver.common.action_chains import ActionChains

            waits, t_start = [], time.perf_counter()
            for k in range(args.labels):
                time.sleep(args.think)
                ready = time.perf_counter()
                while (current := driver.execute_script(CURRENT)) is None:
                    if server.poll() is not None:
                        raise RuntimeError(f"skdbal label exited: {(tmp / 'server.log').read_text()[-2000:]}")
                    if time.perf_counter() - ready > 300:
                        raise TimeoutError(f"no item to label for 300 s after {k} labels")
                    time.sleep(0.01)
                waits.append(time.perf_counter() - ready)
                item = int(current.split("-")[-1])
                ActionChains(driver).send_keys(truth[item]).perform()
            wall = time.perf_counter() - t_start
            status = driver.execute_script(
                "return fetch('/api/status', {headers: {'X-Token': TOKEN}}).then(r => r.json());")
            versions = driver.execute_script(
                "return fetch('/api/versions', {headers: {'X-Token': TOKEN}}).then(r => r.json());")
        finally:
            if driver is not None:
                driver.quit()
            server.terminate()
            server.wait(60)
        w = np.asarray(waits)
        think = args.think
        row = {"labels": len(w), "think_s": think, "wait_median_s": float(np.median(w)),
               "wait_p99_s": float(np.percentile(w, 99)), "wait_max_s": float(w.max()),
               "wait_total_s": float(w.sum()), "waits_over_0.5_s": int((w > 0.5).sum()), "wall_s": wall,
               "labelled": status.get("labelled"), "model_version": status.get("model_version")}
        long_waits = [k for k, x in enumerate(w) if x > 0.5]   # before which label (0-based)
        results[kind] = {**row, "waits_s": [round(float(x), 4) for x in w], "long_waits_at": long_waits,
                         "versions": versions}
        log(f"{kind:7s}: {len(w)} labels at {think:g} s each; waited median {row['wait_median_s']:.3f} s, "
            f"p99 {row['wait_p99_s']:.3f} s, max {row['wait_max_s']:.3f} s, in all {row['wait_total_s']:.1f} s "
            f"of {wall:.0f} s; {row['waits_over_0.5_s']} waits over 0.5 s; store: {row['labelled']} labelled, "
            f"model version {row['model_version']}" +
            (f"; the waits over 0.5 s came before labels {[k + 1 for k in long_waits]}" if long_waits else ""))
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "skdbal"], cwd=ROOT, capture_output=True,
                           text=True).stdout.strip()
    commit += "+dirty" if dirty else ""   # the package's own files changed since the commit
    import torch

    meta = {"machine": platform.node(), "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(), "python": platform.python_version(), "torch": torch.__version__,
            "torch_threads": 1, "commit": commit, "argv": sys.argv[1:]}
    (OUT / "labelling_wait.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1) + "\n")
    (OUT / "output.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
