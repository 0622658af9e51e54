"""Shared set-up for the benchmarks: a trained Gal CNN, an MNIST-shaped pool, and the record of a run.

Every benchmark run as a script writes its whole output and a JSON with the
machine (CPU model, cores, GPUs and driver), the package versions and the
commit (:func:`skdbal.experiments.provenance.environment`) to
``docs/results/<benchmark>/`` (or ``$SKDBAL_BENCH_OUT``): the scripts that
write their own JSON put :func:`provenance` into it, the others run
``main()`` inside :func:`recorded`.
"""
import contextlib
import io
import json
import os
import platform
import sys
import threading
import time
from pathlib import Path

import numpy as np
import torch

from skdbal import MCDropoutClassifier
from skdbal.models import BayesianCNN

ROOT = Path(__file__).resolve().parents[1]


def provenance() -> dict:
    """The machine, the package versions and the commit of this run (see the module's description)."""
    from skdbal.experiments.provenance import environment

    return environment(ROOT)


class _Tee(io.TextIOBase):
    def __init__(self, stream, copy):
        self.stream, self.copy = stream, copy

    def write(self, text):
        self.copy.write(text)
        return self.stream.write(text)

    def flush(self):
        self.stream.flush()


@contextlib.contextmanager
def recorded(script: str):
    """Run a benchmark's ``main()`` inside: what it prints goes to ``<out>/output.txt`` as well, and
    ``<out>/<name>.json`` records the arguments, the exit, the time and :func:`provenance`.

    ``<out>`` is ``$SKDBAL_BENCH_OUT`` or ``docs/results/<name>/``; processes the
    benchmark starts (which inherit ``SKDBAL_BENCH_RECORDING``) record nothing, and nor do
    ``--help`` and arguments argparse refuses, so they never overwrite a committed record.
    """
    if os.environ.get("SKDBAL_BENCH_RECORDING") or {"-h", "--help"} & set(sys.argv[1:]):
        yield   # a process the benchmark started, or a request for its usage: the committed record stays
        return
    name = Path(script).stem
    out = Path(os.environ.get("SKDBAL_BENCH_OUT") or ROOT / "docs" / "results" / name)
    os.environ["SKDBAL_BENCH_RECORDING"] = "1"
    copy, start, exit_ = io.StringIO(), time.time(), "ok"
    meta = {"benchmark": name, "argv": sys.argv[1:], "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "provenance": provenance()}
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Tee(stdout, copy), _Tee(stderr, copy)
    usage_error = False
    try:
        yield
    except BaseException as exc:
        exit_ = repr(exc)
        # argparse's refusal of the arguments (exit 2 after its usage line): nothing was measured
        usage_error = isinstance(exc, SystemExit) and exc.code == 2 and "usage:" in copy.getvalue()
        raise
    finally:
        sys.stdout, sys.stderr = stdout, stderr
        os.environ.pop("SKDBAL_BENCH_RECORDING", None)
        if not usage_error:
            out.mkdir(parents=True, exist_ok=True)
            (out / "output.txt").write_text(copy.getvalue())
            meta.update(exit=exit_, seconds=round(time.time() - start, 3), output="output.txt")
            (out / f"{name}.json").write_text(json.dumps(meta, indent=1) + "\n")


def markdown_table(header, rows) -> str:
    """A Markdown table of ``rows`` under ``header``, printed last by a benchmark: the figures the
    docs quote are read from it (``docs/_substitutions.py``, ``RAW_TABLES``).

    >>> print(markdown_table(["method", "s"], [["a", "1.00"]]))
    | method | s |
    |---|---|
    | a | 1.00 |
    """
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def machine() -> str:
    return (f"{platform.platform()}, {os.cpu_count()} CPUs, torch {torch.__version__} "
            f"({torch.get_num_threads()} threads), python {platform.python_version()}")


def status_kb(field: str) -> int:
    """A field of /proc/self/status in KiB (``RssAnon``, ``VmRSS``, ``VmHWM``), 0 if absent."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


class Peak(threading.Thread):
    """The peaks of ``fields`` of /proc/self/status (KiB), sampled every 20 ms until ``running`` is False."""

    def __init__(self, fields=("RssAnon", "VmRSS")):
        super().__init__(daemon=True)
        self.peak = {k: 0 for k in fields}
        self.running = True

    def run(self):
        while self.running:
            for k in self.peak:
                self.peak[k] = max(self.peak[k], status_kb(k))
            time.sleep(0.02)


def load_split(name: str, subset: str = "train"):
    """``(X, y)`` of ``"mnist"`` or ``"fashion_mnist"``'s ``subset`` (uint8 images, labels) from
    ``$SKDBAL_DATA``, never downloaded."""
    from skdbal.datasets import load_fashion_mnist, load_mnist

    loader = {"mnist": load_mnist, "fashion_mnist": load_fashion_mnist}[name]
    return loader(download=False, return_X_y=True, subset=subset)


def mnist_or_synthetic(n_train: int, n_pool: int, seed: int = 0):
    """Real MNIST (via SKDBAL_DATA / the cache) when present, else random 28x28 images."""
    try:
        from skdbal.datasets import load_mnist

        X, y = load_mnist(download=False, return_X_y=True)
        rng = np.random.RandomState(seed)
        idx = rng.permutation(len(X))
        return X[idx[:n_train]], y[idx[:n_train]], X[idx[n_train:n_train + n_pool]], "MNIST"
    except (FileNotFoundError, OSError):
        rng = np.random.RandomState(seed)
        X = rng.randint(0, 256, size=(n_train + n_pool, 28, 28), dtype=np.uint8)
        y = rng.randint(0, 10, n_train)
        return X[:n_train], y, X[n_train:], "synthetic"


def trained_net(X, y, epochs: int = 5, n_samples: int = 20) -> MCDropoutClassifier:
    return MCDropoutClassifier(module=BayesianCNN, classes=np.arange(10), max_epochs=epochs,
                               n_samples=n_samples, random_state=0).fit(X, y)
