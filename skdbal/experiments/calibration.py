"""Calibration during active learning: test accuracy, ECE and NLL against labels, by strategy and variant."""
from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple

import numpy as np

from ..metrics import curves_from_histories
from .grouping import (
    LABELS,
    device_note,
    devices_by_seed,
    devices_mixed,
    group_runs,
    longest_runs,
    not_counted,
    sort_key,
)
from .plotting import save_figure

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

__all__ = ["calibration_markdown", "plot_calibration"]


def _calibration_rows(rows: List[dict]) -> List[dict]:
    """The rows that carry ECE and NLL (runs written before the runner
    recorded them have none)."""
    return [r for r in rows if r.get("ece") is not None and r.get("nll") is not None]


def _spread_labels(rows: List[dict], n: int = 5) -> Tuple[int, ...]:
    """``n`` label counts spread evenly over those that every run reached."""
    runs = [run for group in group_runs(rows).values() for run in group]
    if not runs:
        return ()
    common = sorted(set.intersection(*({r["n_labels"] for r in run} for run in runs)))
    if not common:
        return ()
    picks = np.unique(np.round(np.linspace(0, len(common) - 1, min(n, len(common)))).astype(int))
    return tuple(int(common[i]) for i in picks)


def calibration_markdown(rows: List[dict], at_labels: Optional[Sequence] = None) -> str:
    """Test accuracy, ECE and NLL at a few label counts, by strategy and variant.

    Rows without ECE (runs written before the runner recorded it) are left
    out. Means ± population std over the seeds that reached the count.
    ``at_labels=None`` takes five counts spread evenly over those that every
    run reached, first and last included. Where the rows carry devices that
    mix, a last column names them (see :func:`~skdbal.experiments.curves.table_markdown`).

    Examples
    --------
    >>> from skdbal.experiments.calibration import calibration_markdown
    >>> rows = [dict(preset="gal2017", strategy="bald", variant=v, seed=s, step=i, n_labels=20 + 100 * i,
    ...              n_acquired=100 * i, accuracy=0.8 + 0.1 * i, ece=e / (1 + i), nll=0.5 / (1 + i) + 0.01 * s,
    ...              noise_rate=None)
    ...         for v, e in (("bayesian", 0.1), ("ensemble5", 0.05)) for s in (1, 2) for i in range(2)]
    >>> print(calibration_markdown(rows, at_labels=(120,)))
    | strategy | variant | runs (steps done) | labels | accuracy | ECE | NLL (nats) |
    |---|---|---|---|---|---|---|
    | BALD | bayesian | 2 (1, 1) | 120 | 90.00 ± 0.00% | 0.0500 ± 0.0000 | 0.2650 ± 0.0050 |
    | BALD | ensemble5 | 2 (1, 1) | 120 | 90.00 ± 0.00% | 0.0250 ± 0.0000 | 0.2650 ± 0.0050 |
    """
    rows = _calibration_rows(rows)
    groups = group_runs(rows)
    mixed = devices_mixed([run for runs in groups.values() for run in runs])
    lines = ["| strategy | variant | runs (steps done) | labels | accuracy | ECE | NLL (nats) |"
             + (" device |" if mixed else ""), "|---|---|---|---|---|---|---|" + ("---|" if mixed else "")]
    if at_labels is None:
        at_labels = _spread_labels(rows)
    for (_, strategy, variant), runs in sorted(groups.items(), key=lambda kv: sort_key(kv[0])):
        steps = ", ".join(str(len(r) - 1) for r in runs)
        for n in at_labels:
            at = [next(r for r in run if r["n_labels"] == n) for run in runs if any(r["n_labels"] == n for r in run)]
            if not at:
                continue
            acc, ece, nll = (np.array([r[k] for r in at], dtype=float) for k in ("accuracy", "ece", "nll"))
            lines.append(f"| {LABELS.get(strategy, strategy)} | {variant} | {len(runs)} ({steps}) | {n} | "
                         f"{100 * acc.mean():.2f} ± {100 * acc.std():.2f}% | {ece.mean():.4f} ± {ece.std():.4f} | "
                         f"{nll.mean():.4f} ± {nll.std():.4f} |" + (f" {devices_by_seed(runs)} |" if mixed else ""))
    return "\n".join(lines)


def plot_calibration(rows: List[dict], path, title: str = "") -> "Optional[Figure]":
    """Test accuracy, ECE and NLL against labels (mean ± std over seeds), one
    line per strategy and variant, for the runs that recorded ECE and NLL,
    over the runs that got furthest (a legend entry names the seeds left
    out); where the runs come from more than one device, the title says
    which ran where.

    Examples
    --------
    >>> from skdbal.experiments.calibration import plot_calibration
    >>> rows = [dict(preset="gal2017", strategy="bald", variant=v, seed=s, step=i, n_labels=20 + 10 * i,
    ...              n_acquired=10 * i, accuracy=0.6 + 0.1 * i, ece=e / (1 + i), nll=1.0 / (1 + i),
    ...              noise_rate=None)
    ...         for v, e in (("bayesian", 0.2), ("ensemble5", 0.1)) for s in (1, 2) for i in range(3)]
    >>> fig = plot_calibration(rows, None, title="calibration")
    >>> [ax.get_ylabel() for ax in fig.axes]
    ['test accuracy', 'ECE (top label, 15 bins)', 'NLL (nats)']
    >>> ece_lines = fig.axes[1].get_lines()
    >>> [line.get_label() for line in ece_lines]
    ['BALD (bayesian), 2 run(s)', 'BALD (ensemble5), 2 run(s)']
    >>> [round(float(v), 4) for v in ece_lines[1].get_ydata()]
    [0.1, 0.05, 0.0333]
    >>> import matplotlib.pyplot as plt
    >>> plt.close(fig)
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = _calibration_rows(rows)
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2), sharex=True)
    groups = sorted(group_runs(rows).items(), key=lambda kv: sort_key(kv[0]))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    plotted = {}
    for k, ((_, strategy, variant), every) in enumerate(groups):
        runs = longest_runs(every)
        plotted[f"{LABELS.get(strategy, strategy)} ({variant})"] = runs
        left = not_counted(every, runs)
        name = f"{LABELS.get(strategy, strategy)} ({variant}), {len(runs)} run(s)" + (f" ({left})" if left else "")
        for ax, key in zip(axes, ("accuracy", "ece", "nll")):
            labels, values = curves_from_histories(runs, y=key)
            mean, std = values.mean(axis=0), values.std(axis=0)
            ax.plot(labels, mean, "-" if variant == "bayesian" else "--", color=colors[k % len(colors)],
                    label=name)
            ax.fill_between(labels, mean - std, mean + std, alpha=0.15, color=colors[k % len(colors)])
    for ax, ylabel in zip(axes, ("test accuracy", "ECE (top label, 15 bins)", "NLL (nats)")):
        ax.set_ylabel(ylabel)
        ax.set_xlabel("labelled images")
        ax.grid(alpha=0.3)
    if groups:
        axes[0].legend(loc="lower right", fontsize=8)
    note = device_note(plotted)
    fig.suptitle(title + (f"\n{note}" if note else ""))
    fig.tight_layout()
    return save_figure(fig, path)

