"""What a diversity weight adds to its base strategy: Fig 7 of Anonymous (n.d.) [1]_, as a table and a figure.

References
----------
.. [1] Anonymous (candidate number 1091797), "Uncertainty in deep learning",
   anonymised report, undated. Code:
   https://www.github.com/anonymous-account-67/UncertaintyInDeepLearning.
"""
from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .plotting import legend_outside, save_figure

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

__all__ = ["diversity_markdown", "plot_diversity_weights"]


def _diverse_parts(strategy: str) -> Optional[Tuple[str, float]]:
    """``(base, weight)`` of a name ``"diverse(base,weight)"`` (default
    features), read as :func:`~skdbal.acquisition.get_strategy` reads it
    (:func:`~skdbal.acquisition.parse_strategy_name`); None for any other name."""
    from ..acquisition import parse_strategy_name

    try:
        decorator, base, params = parse_strategy_name(strategy)
    except ValueError:
        return None
    if decorator != "diverse" or len(params) != 1 or not isinstance(params[0], (int, float)):
        return None
    return base, float(params[0])


def _weight_sweep(rows: List[dict]) -> Tuple[np.ndarray, Dict[float, Tuple[str, np.ndarray]]]:
    """``(n_labels, {weight: (strategy, gains)})`` of the ``diverse(base,weight)``
    runs against their undecorated base (weight 0), seed by seed:
    ``gains[i, k]`` is the accuracy of the i-th common seed at the k-th common
    step minus the base's (weight 0: zeros), and ``n_labels[k]`` the base's
    labels there. Only the Bayesian runs of one base (the first with two
    weights) count, over the seeds and steps that every strategy of the sweep
    has; the dict is empty where the rows hold no sweep."""
    runs = defaultdict(dict)  # strategy -> seed -> {step: row}
    for r in rows:
        if r["variant"] == "bayesian":
            runs[r["strategy"]].setdefault(r["seed"], {})[r["step"]] = r
    by_base = defaultdict(dict)
    for strategy in runs:
        parts = _diverse_parts(strategy)
        if parts and parts[0] in runs:
            by_base[parts[0]][parts[1]] = strategy
    bases = [b for b in sorted(by_base) if len(by_base[b]) >= 2]
    if not bases:
        return np.empty(0), {}
    base = bases[0]
    sweep = {0.0: base, **by_base[base]}
    seeds = sorted(set.intersection(*(set(runs[s]) for s in sweep.values())))
    steps = sorted(set.intersection(*(set(runs[s][seed]) for s in sweep.values() for seed in seeds))) if seeds else []
    if not steps:
        return np.empty(0), {}

    def accuracy(strategy):
        return np.array([[runs[strategy][seed][k]["accuracy"] for k in steps] for seed in seeds])

    n_labels = np.array([runs[base][seeds[0]][k]["n_labels"] for k in steps])
    return n_labels, {w: (s, accuracy(s) - accuracy(base)) for w, s in sorted(sweep.items())}


def diversity_markdown(rows: List[dict], windows: Sequence[Tuple[int, int]] = ((1, 5), (1, 10))) -> str:
    """Fig 7 of Anonymous (n.d.) as a table: the accuracy that a diversity weight adds
    to its base strategy, paired seed by seed.

    For each ``diverse(base,weight)`` of the grid (and the base itself as
    weight 0): the mean over the steps of each window (and of the whole run)
    of accuracy minus the base's accuracy at the same seed and step, in
    percentage points, ± the population std over seeds of that per-seed mean.

    Examples
    --------
    >>> from skdbal.experiments.diversity_weights import diversity_markdown
    >>> def run(strategy, seed, accuracies):
    ...     return [dict(preset="gal2017", strategy=strategy, variant="bayesian", seed=seed, step=i,
    ...                  n_labels=20 + 10 * i, n_acquired=10 * i, accuracy=a, noise_rate=None)
    ...             for i, a in enumerate(accuracies)]
    >>> rows = (run("bald", 1, [0.5, 0.6, 0.7]) + run("bald", 2, [0.5, 0.7, 0.8])
    ...         + run("diverse(bald,0.1)", 1, [0.5, 0.62, 0.7]) + run("diverse(bald,0.1)", 2, [0.5, 0.74, 0.8])
    ...         + run("diverse(bald,-0.5)", 1, [0.5, 0.6, 0.6]) + run("diverse(bald,-0.5)", 2, [0.5, 0.7, 0.7]))
    >>> print(diversity_markdown(rows, windows=[(1, 1)]))
    | weight | strategy | seeds | steps 1–1 | whole run (steps 1–2) |
    |---|---|---|---|---|
    | -0.5 | diverse(bald,-0.5) | 2 | +0.00 ± 0.00 | -5.00 ± 0.00 |
    | 0 | bald | 2 | +0.00 ± 0.00 | +0.00 ± 0.00 |
    | 0.1 | diverse(bald,0.1) | 2 | +3.00 ± 1.00 | +1.50 ± 0.50 |
    """
    _, sweep = _weight_sweep(rows)
    if not sweep:
        return ""
    n_steps = next(iter(sweep.values()))[1].shape[1] - 1
    windows = [(a, min(b, n_steps)) for a, b in windows if a <= n_steps] + [(1, n_steps)]
    head = [f"steps {a}–{b}" for a, b in windows[:-1]] + [f"whole run (steps 1–{n_steps})"]
    lines = ["| weight | strategy | seeds | " + " | ".join(head) + " |", "|---" * (3 + len(head)) + "|"]
    for w, (strategy, gains) in sweep.items():
        cells = []
        for a, b in windows:
            per_seed = 100 * gains[:, a:b + 1].mean(axis=1)
            cells.append(f"{per_seed.mean():+.2f} ± {per_seed.std():.2f}")
        lines.append(f"| {w:g} | {strategy} | {len(gains)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_diversity_weights(rows: List[dict], path, first_steps: int = 10,
                           title: str = "") -> "Optional[Figure]":
    """Fig 7 of Anonymous (n.d.): accuracy gain of each diversity weight over its base
    strategy (mean over seeds of the seed-by-seed difference, percentage
    points) against labelled images, over the first ``first_steps`` steps
    (left) and the whole run (right). Negative weights are blue, positive
    ones red, darker as they grow; the base is the dashed black line at 0.

    Examples
    --------
    >>> from skdbal.experiments.diversity_weights import plot_diversity_weights
    >>> def run(strategy, seed, accuracies):
    ...     return [dict(preset="gal2017", strategy=strategy, variant="bayesian", seed=seed, step=i,
    ...                  n_labels=20 + 10 * i, n_acquired=10 * i, accuracy=a, noise_rate=None)
    ...             for i, a in enumerate(accuracies)]
    >>> rows = (run("bald", 1, [0.5, 0.6, 0.7]) + run("diverse(bald,0.1)", 1, [0.5, 0.62, 0.7])
    ...         + run("diverse(bald,-0.5)", 1, [0.5, 0.6, 0.6]))
    >>> fig = plot_diversity_weights(rows, None, first_steps=1)
    >>> [len(ax.get_lines()) for ax in fig.axes]
    [3, 3]
    >>> fig.axes[1].get_lines()[2].get_ydata().round(6).tolist()     # weight 0.1: +2 points at step 1
    [0.0, 2.0, 0.0]
    >>> import matplotlib.pyplot as plt
    >>> plt.close("all")
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n_labels, sweep = _weight_sweep(rows)
    if not sweep:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    cmap = plt.get_cmap("coolwarm")
    shade = {}  # by rank of |weight| on each side: light for the smallest, full for the largest
    for side in ([w for w in sweep if w > 0], sorted((w for w in sweep if w < 0), reverse=True)):
        for i, w in enumerate(sorted(side, key=abs)):
            depth = 0.45 + 0.55 * i / max(1, len(side) - 1)
            shade[w] = cmap(0.5 + 0.5 * depth * np.sign(w))
    handles = {}
    for ax, last, name in ((axes[0], first_steps, f"first {first_steps} steps"), (axes[1], None, "whole run")):
        for w, (_, gains) in sweep.items():
            k = gains.shape[1] if last is None else min(last + 1, gains.shape[1])
            color = "black" if w == 0 else shade[w]
            line, = ax.plot(n_labels[:k], 100 * gains[:, :k].mean(axis=0), "-" if w else "--", color=color,
                            marker="o" if last is not None else None, markersize=3)
            handles[f"weight {w:g}" + (" (base)" if w == 0 else "")] = line
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("labelled images")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("accuracy − base's (points, mean over seeds)")
    legend_outside(axes[1], handles=handles)
    fig.suptitle(title)
    fig.tight_layout()
    return save_figure(fig, path)

