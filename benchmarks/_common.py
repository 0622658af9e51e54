"""Shared set-up for the benchmarks: a trained Gal CNN and an MNIST-shaped pool."""
import os
import platform

import numpy as np
import torch

from skdbal import MCDropoutClassifier
from skdbal.nets import BayesianCNN


def machine() -> str:
    return (f"{platform.platform()}, {os.cpu_count()} CPUs, torch {torch.__version__} "
            f"({torch.get_num_threads()} threads), python {platform.python_version()}")


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
