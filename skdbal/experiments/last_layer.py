"""The Bayesian last layer's report: RMSE and predictive variance, Fig. 3 of Anonymous (n.d.) [1]_.

References
----------
.. [1] Anonymous (candidate number 1091797), "Uncertainty in deep learning",
   anonymised report, undated. Code:
   https://www.github.com/anonymous-account-67/UncertaintyInDeepLearning.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional, Sequence

import numpy as np

from ..metrics import curves_from_histories
from .grouping import LABELS, group_runs, sort_key
from .plotting import save_figure

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

__all__ = ["plot_last_layer", "last_layer_markdown"]

#: How the report names each last-layer inference (variant ``blr_<inference>``).
_VARIANT = {"blr_analytic": "analytic", "blr_mfvi": "MFVI"}


def _last_layer_groups(rows):
    return {k: v for k, v in sorted(group_runs(rows).items(), key=lambda kv: sort_key(kv[0]))
            if k[2].startswith("blr_")}


def plot_last_layer(rows: List[dict], path, title: str = "") -> "Optional[Figure]":
    """Test RMSE and mean predictive variance against acquired images, as in
    Fig. 3 of Anonymous (n.d.), per last-layer inference (and strategy),
    mean ± std over seeds.

    Parameters
    ----------
    rows : list of dict
        Rows of ``results.csv`` (:func:`skdbal.experiments.read_results`);
        only the Bayesian-last-layer runs (variants ``blr_*``) are plotted.
    path : str, path-like or None
        Where to save the figure (any format matplotlib writes); None
        returns the open figure instead.
    title : str, default=""
        Figure title.

    References
    ----------
    .. [1] Anonymous (candidate number 1091797), "Uncertainty in deep
       learning", anonymised report, undated. Code:
       https://www.github.com/anonymous-account-67/UncertaintyInDeepLearning.

    Examples
    --------
    >>> from skdbal.experiments.last_layer import plot_last_layer
    >>> rows = [dict(preset="gal2017", strategy="predictive_variance", variant=f"blr_{inference}", seed=1, step=i,
    ...              n_labels=20 + 10 * i, n_acquired=10 * i, accuracy=0.5 + 0.1 * i, rmse=0.3 - drop * i,
    ...              mean_variance=0.2 / (1 + i), noise_rate=None)
    ...         for inference, drop in (("analytic", 0.05), ("mfvi", 0.03)) for i in range(3)]
    >>> fig = plot_last_layer(rows, None, title="last layer")
    >>> [(ax.get_ylabel(), len(ax.get_lines())) for ax in fig.axes]      # a curve per inference in each panel
    [('test RMSE (one-hot targets)', 2), ('mean predictive variance (trace)', 2)]
    >>> import matplotlib.pyplot as plt
    >>> plt.close(fig)
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for (_, strategy, variant), runs in _last_layer_groups(rows).items():
        name = f"{_VARIANT.get(variant, variant)}, {LABELS.get(strategy, strategy)}, {len(runs)} run(s)"
        for ax, column in zip(axes, ("rmse", "mean_variance")):
            acquired, values = curves_from_histories(runs, x="n_acquired", y=column)
            mean, std = values.mean(axis=0), values.std(axis=0)
            line, = ax.plot(acquired, mean, label=name)
            ax.fill_between(acquired, mean - std, mean + std, alpha=0.15, color=line.get_color())
    for ax, label in zip(axes, ("test RMSE (one-hot targets)", "mean predictive variance (trace)")):
        ax.set_xlabel("acquired images")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[1].set_yscale("log")  # it falls by orders of magnitude over the first labels
    axes[0].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    return save_figure(fig, path)


def last_layer_markdown(rows: List[dict], at_acquired: Sequence = (0, 100, 250, 500, 1000)) -> str:
    """RMSE, mean predictive variance and accuracy at a few acquisition counts.

    Examples
    --------
    >>> from skdbal.experiments.last_layer import last_layer_markdown
    >>> rows = [dict(preset="gal2017", strategy="predictive_variance", variant=f"blr_{inference}", seed=1, step=i,
    ...              n_labels=20 + 10 * i, n_acquired=10 * i, accuracy=0.5 + 0.1 * i, rmse=0.3 - drop * i,
    ...              mean_variance=0.2 / (1 + i), noise_rate=None)
    ...         for inference, drop in (("analytic", 0.05), ("mfvi", 0.03)) for i in range(3)]
    >>> print(last_layer_markdown(rows, at_acquired=(0, 20)))
    | inference | strategy | runs (steps done) | acquired | RMSE | mean predictive variance | accuracy |
    |---|---|---|---|---|---|---|
    | analytic | Predictive variance | 1 (2) | 0 | 0.3000 ± 0.0000 | 0.2000 ± 0.0000 | 50.00 ± 0.00% |
    | analytic | Predictive variance | 1 (2) | 20 | 0.2000 ± 0.0000 | 0.0667 ± 0.0000 | 70.00 ± 0.00% |
    | MFVI | Predictive variance | 1 (2) | 0 | 0.3000 ± 0.0000 | 0.2000 ± 0.0000 | 50.00 ± 0.00% |
    | MFVI | Predictive variance | 1 (2) | 20 | 0.2400 ± 0.0000 | 0.0667 ± 0.0000 | 70.00 ± 0.00% |
    """
    lines = ["| inference | strategy | runs (steps done) | acquired | RMSE | mean predictive variance | accuracy |",
             "|---|---|---|---|---|---|---|"]
    for (_, strategy, variant), runs in _last_layer_groups(rows).items():
        acquired, rmse = curves_from_histories(runs, x="n_acquired", y="rmse")
        steps = ", ".join(str(len(r) - 1) for r in runs)
        if len({len(r) for r in runs}) > 1:  # a run still in progress
            steps += f"; means over steps 0–{len(acquired) - 1}"
        _, var = curves_from_histories(runs, x="n_acquired", y="mean_variance")
        _, acc = curves_from_histories(runs, x="n_acquired", y="accuracy")
        for a in at_acquired:
            hit = np.flatnonzero(acquired == a)
            if not len(hit):
                continue
            i = hit[0]
            lines.append(f"| {_VARIANT.get(variant, variant)} | {LABELS.get(strategy, strategy)} | {len(runs)} "
                         f"({steps}) | {a} | {rmse[:, i].mean():.4f} ± {rmse[:, i].std():.4f} | "
                         f"{var[:, i].mean():.4f} ± {var[:, i].std():.4f} | "
                         f"{100 * acc[:, i].mean():.2f} ± {100 * acc[:, i].std():.2f}% |")
    return "\n".join(lines)

