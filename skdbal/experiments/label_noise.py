"""Label noise: what the filters reject, and accuracy across noise rates (Anonymous, n.d., Tables 2-3, Figs 4-6) [1]_.

References
----------
.. [1] Anonymous (candidate number 1091797), "Uncertainty in deep learning",
   anonymised report, undated. Code:
   https://www.github.com/anonymous-account-67/UncertaintyInDeepLearning.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional, Sequence

import numpy as np

from ..metrics import accuracy_at, curves_from_histories
from .grouping import (
    LABELS,
    device_note,
    devices_by_seed,
    devices_mixed,
    group_runs,
    longest_runs,
    noise_rate_of,
    not_counted,
    sort_key,
    strategy_color,
)
from .plotting import data_ylim, legend_outside, save_figure

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

__all__ = ["SEED000_REJECTS", "noise_markdown", "plot_noise_levels", "plot_flipped"]

#: The rejects per acquisition step of Anonymous (n.d., Tables 2 and 3, its
#: own thresholds), by (strategy, noise rate), beside ours in :func:`noise_markdown`.
SEED000_REJECTS = {("filter(bald,dynamic)", 0.0): 0.39, ("filter(bald,dynamic)", 0.1): 1.47,
                   ("filter(bald,dynamic)", 0.2): 2.98, ("filter(bald,dynamic)", 0.3): 4.96,
                   ("filter(bald,0.1)", 0.2): 3.18, ("filter(bald,0.25)", 0.2): 5.10}


def _excess(per_step: float, optimal: float) -> str:
    """Rejects per step over the optimal ``noise_rate × n_instances``: a
    percentage, or absolute on a clean pool (where the optimal is 0)."""
    return f"{100 * (per_step / optimal - 1):+.0f}%" if optimal else f"+{per_step:.2f}"


def _noise_panels(rates: Sequence[float], legend_width: float):
    """A figure with one titled, gridded panel per noise rate, sharing the y
    axis, and ``legend_width`` inches to the right for the legend; returns
    the figure and its row of axes."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, max(1, len(rates)), figsize=(3.6 * max(1, len(rates)) + legend_width, 4),
                             sharey=True, squeeze=False)
    for ax, rate in zip(axes[0], rates):
        ax.set_title(f"{100 * rate:g}% label noise", fontsize=10)
        ax.set_xlabel("labelled images")
        ax.grid(alpha=0.3)
    return fig, axes[0]


def noise_markdown(rows: List[dict], n_instances: int = 10, at_labels: Sequence = (500, 1000)) -> str:
    """Label-noise table: what the filters reject, per strategy and noise rate
    (Anonymous, n.d., Tables 2 and 3).

    Per (strategy, noise rate), over the runs that got furthest and their
    acquisition steps: rejects per step, the excess over the optimal
    ``noise_rate × n_instances`` rejects (absolute on a clean pool), the
    precision (truly flipped among the rejects) and recall (rejected among
    the flipped labels the filter met: rejected or acquired) of rejection,
    flipped labels acquired per step, the share of flipped labels in the
    final training set, the mean threshold and noise estimate of the
    dynamic rule, Anonymous (n.d.)'s rejects per step where it reports them
    (:data:`SEED000_REJECTS`), and test accuracy at ``at_labels``. Rows
    without a noise rate count as clean (0%). Where the rows carry the
    ``device`` of their run (:func:`~skdbal.experiments.report.write_report` adds it from the run
    files), a last column says which seeds ran on which device, since runs
    of one seed on a CPU and on a GPU give different numbers.

    Examples
    --------
    >>> from skdbal.experiments.label_noise import noise_markdown
    >>> def run(strategy, seed, flips, rejects=None):   # a 20%-noise run: flipped labels acquired per step
    ...     return [dict(preset="gal2017", strategy=strategy, variant="bayesian", seed=seed, step=i,
    ...                  n_labels=20 + 10 * i, n_acquired=10 * i, accuracy=0.6 + 0.1 * i, noise_rate=0.2,
    ...                  n_flipped_acquired=f if i else 0, n_rejected=None if rejects is None else rejects[i],
    ...                  n_rejected_flipped=None if rejects is None else rejects[i] // 2,
    ...                  threshold=None if rejects is None else 0.1, noise_estimate=None)
    ...             for i, f in enumerate(flips)]
    >>> rows = run("bald", 1, [0, 3, 2]) + run("filter(bald,0.1)", 1, [0, 1, 0], rejects=[0, 4, 2])
    >>> # 3 rejects a step against the optimal 0.2 · 10 = 2; 3 of 6 rejects flipped (precision), 3 of the
    >>> # 4 flipped labels met rejected (recall); 1 flipped label of 40 in the training set
    >>> print(noise_markdown(rows, at_labels=(40,)).splitlines()[3])
    | filter(bald,0.1) | 20% | 1 (2) | 3.00 | +50% | 0.50 | 0.75 | 0.50 | 2.5% | 0.100 | — | 3.18 (+59%) | 80.00 ± 0.00% |
    """
    lines = ["| strategy | noise | runs (steps) | rejects / step | excess over optimal | precision | recall | "
             "flipped acquired / step | flipped in training set | mean τ | mean ε̂ | "
             "Anonymous (n.d.): rejects / step | " + " | ".join(f"accuracy at {n}" for n in at_labels) + " |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|" + "---|" * len(at_labels)]
    with_devices = any("device" in r for r in rows)
    if with_devices:
        lines = [lines[0] + " device |", lines[1] + "---|"]
    for rate in sorted({noise_rate_of(r) for r in rows}):
        groups = group_runs([r for r in rows if noise_rate_of(r) == rate])
        for key in sorted(groups, key=sort_key):
            _, strategy, _variant = key
            runs = longest_runs(groups[key])
            steps = [r for run in runs for r in run if r["step"] > 0]

            def total(column, steps=steps):
                values = [r.get(column) for r in steps if r.get(column) is not None]
                return float(np.sum(values)) if values else None

            rejected, rejected_flipped, acquired = total("n_rejected"), total("n_rejected_flipped"), \
                total("n_flipped_acquired")
            if acquired is None and not rate:
                acquired = 0.0  # a clean run: nothing was flipped
            n_steps = len(steps)
            cells = []
            if rejected is None or not n_steps:
                cells += ["—"] * 4
            else:
                per_step = rejected / n_steps
                cells.append(f"{per_step:.2f}")
                cells.append(_excess(per_step, rate * n_instances))
                cells.append(f"{rejected_flipped / rejected:.2f}" if rejected else "—")
                met = rejected_flipped + (acquired or 0.0)
                cells.append(f"{rejected_flipped / met:.2f}" if met else "—")
            cells.append("—" if acquired is None or not n_steps else f"{acquired / n_steps:.2f}")
            shares = [sum(r.get("n_flipped_acquired") or 0 for r in run) / run[-1]["n_labels"] for run in runs]
            cells.append(f"{100 * np.mean(shares):.1f}%" if acquired is not None else "—")
            for column in ("threshold", "noise_estimate"):
                values = [r[column] for r in steps if r.get(column) is not None]
                cells.append(f"{np.mean(values):.3f}" if values else "—")
            theirs = SEED000_REJECTS.get((strategy, rate))
            cells.append("—" if theirs is None else f"{theirs:.2f} ({_excess(theirs, rate * n_instances)})")
            for n in at_labels:
                mean, std = accuracy_at(runs, n)
                cells.append("n/a" if np.isnan(mean) else f"{100 * mean:.2f} ± {100 * std:.2f}%")
            if with_devices:
                cells.append(devices_by_seed(runs))
            done = "; ".join(filter(None, [", ".join(str(len(r) - 1) for r in runs),
                                           not_counted(groups[key], runs)]))
            lines.append(f"| {LABELS.get(strategy, strategy)} | {100 * rate:g}% | {len(runs)} ({done}) | "
                         + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_noise_levels(rows: List[dict], path, strategies: Sequence[str] = ("bald", "filter(bald,dynamic)", "random"),
                      title: str = "", color_strategies: Optional[Sequence[str]] = None) -> "Optional[Figure]":
    """Figs 4 and 5 of Anonymous (n.d.): test accuracy (mean ± std over seeds) of
    ``strategies``, one panel per noise rate (rows without one count as
    clean). Colours are assigned over ``color_strategies`` (default:
    ``strategies``), as in :func:`~skdbal.experiments.curves.plot_curves`. Where the rows carry the
    ``device`` of their run and the curves come from more than one device,
    each panel's title says which runs ran where.

    Examples
    --------
    >>> from skdbal.experiments.label_noise import plot_noise_levels
    >>> rows = [dict(preset="gal2017", strategy=name, variant="bayesian", seed=1, step=i, n_labels=20 + 10 * i,
    ...              n_acquired=10 * i, accuracy=start + 0.1 * i - rate, noise_rate=rate)
    ...         for name, start in (("bald", 0.6), ("random", 0.5)) for rate in (0.1, 0.3) for i in range(3)]
    >>> fig = plot_noise_levels(rows, None, strategies=("bald", "random"), title="noise")
    >>> [(ax.get_title(), len(ax.get_lines())) for ax in fig.axes]   # a panel per noise rate, a curve per strategy
    [('10% label noise', 2), ('30% label noise', 2)]
    >>> import matplotlib.pyplot as plt
    >>> plt.close(fig)
    """
    import matplotlib

    matplotlib.use("Agg")
    rates = sorted({noise_rate_of(r) for r in rows})
    fig, axes = _noise_panels(rates, legend_width=2.2)
    lows, highs, handles, panels = [], [], {}, []
    for ax, rate in zip(axes, rates):
        groups = group_runs([r for r in rows if noise_rate_of(r) == rate])
        plotted = {}
        panels.append(plotted)
        for key in sorted(groups, key=sort_key):
            strategy, variant = key[1], key[2]
            if variant != "bayesian" or strategy not in strategies:
                continue
            runs = longest_runs(groups[key])
            plotted[LABELS.get(strategy, strategy)] = runs
            left = not_counted(groups[key], runs)
            if left:
                ax.set_title(ax.get_title() + f"\n{LABELS.get(strategy, strategy)} {left}", fontsize=8)
            labels, acc = curves_from_histories(runs)
            mean, std = acc.mean(axis=0), acc.std(axis=0)
            color = strategy_color(strategy, sorted(color_strategies if color_strategies is not None else strategies))
            line, = ax.plot(labels, mean, color=color)
            handles.setdefault(LABELS.get(strategy, strategy), line)
            ax.fill_between(labels, mean - std, mean + std, alpha=0.15, color=color)
            lows.append(mean - std)
            highs.append(mean + std)
    mixed = devices_mixed([run for plotted in panels for runs in plotted.values() for run in runs])
    for ax, plotted in zip(axes, panels):
        if mixed:  # runs of one seed differ between a CPU and a GPU: say which ran where
            note = device_note(plotted) or "all on " + ", ".join(
                {run[0]["device"] for runs in plotted.values() for run in runs})
            ax.set_title(ax.get_title() + "\n" + note.replace("; ", "\n"), fontsize=8)
    axes[0].set_ylabel("test accuracy (mean ± std over seeds)")
    if lows:
        axes[0].set_ylim(*data_ylim(lows, highs))
    legend_outside(axes[-1], handles=handles)
    fig.suptitle(title)
    fig.tight_layout()
    return save_figure(fig, path)


def plot_flipped(rows: List[dict], path, title: str = "") -> "Optional[Figure]":
    """Share of flipped labels in the training set against labels: one panel
    per noise rate, one line per strategy (one colour per strategy across
    panels), mean over the runs that got furthest.

    Examples
    --------
    >>> from skdbal.experiments.label_noise import plot_flipped
    >>> flips = {"bald": [0, 3, 2], "filter(bald,0.1)": [0, 1, 0]}   # flipped labels acquired per step
    >>> rows = [dict(preset="gal2017", strategy=name, variant="bayesian", seed=1, step=i, n_labels=20 + 10 * i,
    ...              n_acquired=10 * i, accuracy=0.7, noise_rate=rate, n_flipped_acquired=f)
    ...         for rate in (0.1, 0.2) for name, per_step in flips.items() for i, f in enumerate(per_step)]
    >>> fig = plot_flipped(rows, None, title="flipped labels")
    >>> [ax.get_title() for ax in fig.axes], fig.axes[0].get_ylabel()
    (['10% label noise', '20% label noise'], 'flipped labels in the training set (%)')
    >>> ax = fig.axes[1]
    >>> [(t.get_text(), float(line.get_ydata()[-1])) for t, line in zip(ax.get_legend().get_texts(), ax.get_lines())]
    [('BALD', 12.5), ('filter(bald,0.1)', 2.5)]
    >>> fig.axes[0].get_lines()[1].get_color() == ax.get_lines()[1].get_color()   # a strategy keeps its colour
    True
    >>> import matplotlib.pyplot as plt
    >>> plt.close(fig)
    """
    import matplotlib

    matplotlib.use("Agg")
    rates = sorted({r["noise_rate"] for r in rows if r["noise_rate"]})
    strategies = sorted({r["strategy"] for r in rows if r["noise_rate"]})
    fig, axes = _noise_panels(rates, legend_width=2.6)
    handles = {}
    for ax, rate in zip(axes, rates):
        groups = group_runs([r for r in rows if r["noise_rate"] == rate])
        for key in sorted(groups, key=sort_key):
            strategy = key[1]
            runs = longest_runs(groups[key])
            left = not_counted(groups[key], runs)
            if left:
                ax.set_title(ax.get_title() + f"\n{LABELS.get(strategy, strategy)} {left}", fontsize=8)
            n = min(len(run) for run in runs)
            share = np.mean([np.cumsum([r["n_flipped_acquired"] or 0 for r in run[:n]])
                             / np.array([r["n_labels"] for r in run[:n]]) for run in runs], axis=0)
            labels = [r["n_labels"] for r in runs[0][:n]]
            line, = ax.plot(labels, 100 * share, color=strategy_color(strategy, strategies))
            handles.setdefault(LABELS.get(strategy, strategy), line)
    axes[0].set_ylabel("flipped labels in the training set (%)")
    legend_outside(axes[-1], handles=handles)
    fig.suptitle(title)
    fig.tight_layout()
    return save_figure(fig, path)
