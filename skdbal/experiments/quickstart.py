"""The quickstart: BALD against random on scikit-learn's bundled digits.

No download; about a minute on two CPU cores. Run it with ``skdbal
quickstart`` or ``python -m skdbal``.
"""
from __future__ import annotations

import time
from typing import Dict, List, Optional, Sequence

import numpy as np
from sklearn.base import clone

from ..acquisition import STRATEGIES
from ..learner import ActiveLearner
from ..models import MCDropoutClassifier
from .data import load_digits_images  # defined there, below the runner; importable from here too

__all__ = ["digits_classifier", "load_digits_images", "run_quickstart", "format_table", "plot_learning_curves"]


def digits_classifier(random_state: Optional[int] = None, **params) -> MCDropoutClassifier:
    """The Bayesian CNN configured for 8×8 digits and tiny labelled sets.

    3×3 kernels keep a 2×2 map before pooling (4×4 kernels leave 1×1), and
    batches of 32 give enough optimiser steps on 20 labels. ``params``
    override the defaults (``device``, ``max_epochs``...).

    Examples
    --------
    >>> from skdbal.experiments.quickstart import digits_classifier
    >>> clf = digits_classifier(random_state=0, max_epochs=5)
    >>> params = clf.get_params()
    >>> params["max_epochs"], params["batch_size"], params["module__kernel_size"], params["predict_method"]
    (5, 32, 3, 'deterministic')
    """
    defaults = dict(
        classes=np.arange(10),
        max_epochs=100,
        batch_size=32,
        lr=1e-3,
        module__kernel_size=3,
        n_samples=20,
        predict_method="deterministic",  # Gal et al. evaluate weight-scaled
        random_state=random_state,
    )
    defaults.update(params)
    return MCDropoutClassifier(**defaults)


def _one_run(name: str, seed: int, n_queries: int, n_instances: int, torch_threads: int, device: str = "cpu"):
    """One (strategy, seed) simulation, with torch on ``torch_threads`` threads."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(torch_threads)
    try:
        X_pool, X_test, y_pool, y_test = load_digits_images()
        t0 = time.perf_counter()
        learner = ActiveLearner(digits_classifier(random_state=seed, device=device), clone(STRATEGIES[name]),
                                random_state=seed, verbose=False)
        history = learner.simulate(X_pool, y_pool, n_queries=n_queries, n_instances=n_instances,
                                   X_test=X_test, y_test=y_test)
        return name, seed, history, time.perf_counter() - t0
    finally:
        torch.set_num_threads(threads)


def run_quickstart(
    strategies: Sequence[str] = ("bald", "random"),
    seeds: Sequence[int] = (0, 1, 2),
    n_queries: int = 12,
    n_instances: int = 10,
    verbose: bool = True,
    n_jobs: Optional[int] = None,
    torch_threads: int = 1,
    device: str = "cpu",
) -> Dict[str, List[List[dict]]]:
    """Run each strategy for each seed on digits.

    The runs are independent and seeded, so they run in parallel processes
    (``n_jobs``, default: one per CPU core, at most one per run), each with
    ``torch_threads`` torch threads. One thread suits this small net: with
    two, OpenMP's threads spin-wait on operations too small to split, which
    made it about 3× slower on a quiet 2-core machine and far slower beside
    another busy process. The results do not depend on ``n_jobs``.
    ``device`` is the networks' torch device (``"auto"``: CUDA when torch
    sees a GPU); on a GPU the runs go one at a time.

    Returns
    -------
    results : dict
        ``{strategy: [history for each seed]}``, histories as returned by
        :meth:`skdbal.ActiveLearner.simulate`, seeds in the order given.

    Examples
    --------
    >>> from skdbal.experiments.quickstart import run_quickstart
    >>> results = run_quickstart(("random",), seeds=(0,), n_queries=1, n_instances=5, verbose=False, n_jobs=1)
    >>> [(row["n_labels"], row["accuracy"] > 0.3) for row in results["random"][0]]
    [(20, True), (25, True)]
    """
    import os

    from joblib import Parallel, delayed
    from tqdm.auto import tqdm

    unknown = [s for s in strategies if s not in STRATEGIES]
    if unknown:
        raise ValueError(f"unknown strategies {unknown}; choose from {sorted(STRATEGIES)}")
    for what, values in (("seeds", list(seeds)), ("strategies", list(strategies))):
        if not values:
            raise ValueError(f"give at least one of {what}")
        repeated = sorted({v for v in values if values.count(v) > 1}, key=str)
        if repeated:  # one run counted twice would shrink the spread and inflate the count of seeds
            raise ValueError(f"{what} repeat {repeated}: each run would be counted more than once")
    runs = [(name, seed) for seed in seeds for name in strategies]
    from .factories import resolve_device

    device = resolve_device(device)
    if n_jobs is None:
        n_jobs = 1 if device != "cpu" else max(1, min(len(runs), os.cpu_count() or 1))
    jobs = (delayed(_one_run)(name, seed, n_queries, n_instances, torch_threads, device) for name, seed in runs)
    done = {}
    with tqdm(total=len(runs), unit="run", disable=not verbose, desc="quickstart") as bar:
        for name, seed, history, seconds in Parallel(n_jobs=n_jobs, return_as="generator_unordered")(jobs):
            done[(name, seed)] = history
            bar.set_postfix_str(f"{name} seed {seed}: accuracy {history[-1]['accuracy']:.3f} ({seconds:.0f} s)")
            bar.update()
    return {name: [done[(name, seed)] for seed in seeds] for name in strategies}


def _curves(histories: List[List[dict]]):
    labels = np.array([row["n_labels"] for row in histories[0]])
    acc = np.array([[row["accuracy"] for row in h] for h in histories])
    return labels, acc


def format_table(results: Dict[str, List[List[dict]]]) -> str:
    """Markdown table: labels against mean ± std test accuracy per strategy.

    Examples
    --------
    >>> from skdbal.experiments.quickstart import format_table
    >>> def history(accuracies):                 # a run's history, as ActiveLearner.simulate returns it
    ...     return [{"n_labels": 20 + 10 * i, "accuracy": a} for i, a in enumerate(accuracies)]
    >>> results = {"bald": [history([0.6, 0.8]), history([0.6, 0.9])], "random": [history([0.6, 0.7])] * 2}
    >>> print(format_table(results))
    | labels | bald | random |
    |---:|---:|---:|
    | 20 | 0.600 ± 0.000 | 0.600 ± 0.000 |
    | 30 | 0.850 ± 0.050 | 0.700 ± 0.000 |
    """
    names = list(results)
    labels, _ = _curves(results[names[0]])
    lines = ["| labels | " + " | ".join(names) + " |", "|---:|" + "---:|" * len(names)]
    curves = {n: _curves(results[n])[1] for n in names}
    for i, n_labels in enumerate(labels):
        cells = [f"{curves[n][:, i].mean():.3f} ± {curves[n][:, i].std():.3f}" for n in names]
        lines.append(f"| {n_labels} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_learning_curves(results: Dict[str, List[List[dict]]], path, title: str = "") -> None:
    """Write a learning-curve PNG: mean ± std test accuracy per strategy.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from skdbal.experiments.quickstart import plot_learning_curves
    >>> def history(accuracies):                 # a run's history, as ActiveLearner.simulate returns it
    ...     return [{"n_labels": 20 + 10 * i, "accuracy": a} for i, a in enumerate(accuracies)]
    >>> results = {"bald": [history([0.6, 0.8]), history([0.6, 0.9])], "random": [history([0.6, 0.7])] * 2}
    >>> path = Path(tempfile.mkdtemp()) / "curves.png"
    >>> plot_learning_curves(results, path, title="BALD against random")
    >>> path.stat().st_size > 10_000
    True
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .plotting import data_ylim, legend_outside

    fig, ax = plt.subplots(figsize=(7.5, 4))
    lows, highs = [], []
    for name, histories in results.items():
        labels, acc = _curves(histories)
        mean, std = acc.mean(axis=0), acc.std(axis=0)
        ax.plot(labels, mean, marker="o", ms=3, label=f"{name} ({len(histories)} seeds)")
        ax.fill_between(labels, mean - std, mean + std, alpha=0.2)
        lows.append(mean - std)
        highs.append(mean + std)
    ax.set_xlabel("labelled images")
    ax.set_ylabel("test accuracy (mean ± std over seeds)")
    ax.set_ylim(*data_ylim(lows, highs))
    ax.set_title(title)
    ax.grid(alpha=0.3)
    legend_outside(ax)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
