"""Shared set-up for the benchmarks: a trained Gal CNN and an MNIST-shaped pool."""
import os
import platform
import threading
import time

import numpy as np
import torch

from skdbal import MCDropoutClassifier
from skdbal.models import BayesianCNN


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
