"""Accuracy against labels: the labels-to-accuracy tables and the learning curves.

Those of Gal et al. (2017, Table 1, Figs 1-2) [1]_, beside its published
numbers and Anonymous (n.d., Table 1) [2]_'s (:data:`ANCHORS`), with the
labels-to-accuracy measures of Pilz (2025, Appendix A) [3]_; the cost of a
step; and Bayesian against deterministic scoring (Gal et al., 2017, §5.2).

References
----------
.. [1] Y. Gal, R. Islam and Z. Ghahramani, "Deep Bayesian active learning
   with image data", ICML 2017, arXiv:1703.02910.
.. [2] Anonymous (candidate number 1091797), "Uncertainty in deep learning",
   anonymised report, undated. Code:
   https://www.github.com/anonymous-account-67/UncertaintyInDeepLearning.
.. [3] P. Pilz, "Deep active learning for image data", preprint (Practical
   Work in AI, Institute for Machine Learning, Johannes Kepler University
   Linz), 2025.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional, Sequence

import numpy as np

from ..metrics import accuracy_at, curves_from_histories, labels_to_accuracy
from .grouping import (
    LABELS,
    device_note,
    devices_by_seed,
    devices_mixed,
    group_runs,
    longest_runs,
    not_counted,
    sort_key,
    strategy_color,
)
from .plotting import data_ylim, legend_outside, save_figure

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

__all__ = ["ANCHORS", "table_markdown", "cost_markdown", "deterministic_markdown", "plot_curves"]

#: Acquired images to reach 90% / 95% test accuracy, by source: Gal et al.
#: (2017, Table 1) and Anonymous (n.d., Table 1), the latter under the key
#: ``"Anonymous (n.d.)"`` (the uncertainty-in-deep-learning report whose code is
#: cited in this module's references).
ANCHORS = {
    "Gal et al. 2017": {"bald": (145, 335), "variation_ratios": (120, 295), "max_entropy": (165, 355),
                        "mean_std": (230, 695), "random": (255, 835)},
    "Anonymous (n.d.)": {"bald": (105, 260), "variation_ratios": (115, 265), "max_entropy": (125, 365),
                 "mean_std": (230, 510), "random": (385, 940)},
}


def _fmt_labels(value: float, n_initial: int, reached_max: int) -> str:
    if np.isnan(value):
        return f"> {reached_max}"
    return f"{value:.0f} ({value - n_initial:.0f})" if float(value).is_integer() else \
        f"{value:.1f} ({value - n_initial:.1f})"


def _fmt_step_average(sa: dict, n_initial: int, reached_max: int) -> str:
    """The step-average cell of :func:`~skdbal.metrics.labels_to_accuracy`'s result ``sa``: mean ± std, or how many runs
    reached the threshold where one did not."""
    if np.isnan(sa["value"]):
        reached = sum(not np.isnan(r) for r in sa["runs"])
        return f"{reached}/{len(sa['runs'])} runs reached"
    return f"{_fmt_labels(sa['value'], n_initial, reached_max)} ± {sa['std']:.1f}"


def table_markdown(rows: List[dict], n_initial: int = 20, at_labels: int = 1000, anchors: bool = True,
                   end_labels: Optional[int] = None, devices: bool = True) -> str:
    """The Table 1 equivalent: labels to 90% and 95% accuracy, both methods, and
    accuracy at ``at_labels`` labels, beside the anchors.

    Label counts include the ``n_initial`` initial points; the acquired images
    (what Gal et al. count) are in parentheses. When a group's runs have
    different lengths (a grid in progress), only the longest ones are
    counted and the others are listed as in progress, so that a run that has
    just started does not blank out the finished ones. ``anchors=False``
    leaves out the published columns (for runs under other conditions, such
    as label noise). ``end_labels``, the labels at which the grid's runs end
    (``n_initial + n_queries · n_instances``), says whether a run without
    ``at_labels`` labels is still to reach them or ends before by design;
    without it the cell gives where the runs stop. Where the rows carry the
    ``device`` of their run (:func:`~skdbal.experiments.report.write_report` adds it) and the table's
    runs come from more than one device (or a run was resumed on another
    one), a last column names each row's devices by seed (``devices=False``
    leaves it to a page that names them already).

    Examples
    --------
    >>> from skdbal.experiments.curves import table_markdown
    >>> def run(strategy, seed, accuracies, variant="bayesian"):   # one run's rows, 10 labels a step
    ...     return [dict(preset="gal2017", strategy=strategy, variant=variant, seed=seed, step=i,
    ...                  n_labels=20 + 10 * i, n_acquired=10 * i, accuracy=a, noise_rate=None)
    ...             for i, a in enumerate(accuracies)]
    >>> rows = run("bald", 1, [0.5, 0.8, 0.92]) + run("bald", 2, [0.5, 0.9, 0.96]) + run("random", 1, [0.5, 0.7, 0.85])
    >>> print(table_markdown(rows, n_initial=20, at_labels=40, anchors=False))
    | strategy | variant | runs (steps done) | 90%: average-step | 90%: step-average | 95%: average-step | 95%: step-average | accuracy at 40 labels |
    |---|---|---|---|---|---|---|---|
    | BALD | bayesian | 2 (2, 2) | 40 (20) | 35 (15) ± 5.0 | > 40 | 1/2 runs reached | 94.00 ± 2.00% |
    | Random | bayesian | 1 (2) | > 40 | 0/1 runs reached | > 40 | 0/1 runs reached | 85.00 ± 0.00% |
    >>> print(table_markdown(rows, at_labels=1000, anchors=False, end_labels=40).splitlines()[2])
    | BALD | bayesian | 2 (2, 2) | 40 (20) | 35 (15) ± 5.0 | > 40 | 1/2 runs reached | n/a (runs end at 40 labels) |
    >>> print(table_markdown(rows, at_labels=1000, anchors=False, end_labels=1020).splitlines()[2])
    | BALD | bayesian | 2 (2, 2) | 40 (20) | 35 (15) ± 5.0 | > 40 | 1/2 runs reached | n/a (not reached yet) |
    """
    groups = group_runs(rows)
    mixed = devices and devices_mixed([run for runs in groups.values() for run in longest_runs(runs)])
    lines = [
        "| strategy | variant | runs (steps done) | 90%: average-step | 90%: step-average | "
        "95%: average-step | 95%: step-average | accuracy at "
        f"{at_labels} labels |" + (" Gal et al. (2017), 90% / 95% | Anonymous (n.d.), 90% / 95% |" if anchors else ""),
        "|---|---|---|---|---|---|---|---|" + ("---|---|" if anchors else ""),
    ]
    if mixed:
        lines = [lines[0] + " device |", lines[1] + "---|"]
    for key in sorted(groups, key=sort_key):
        _, strategy, variant = key
        runs = longest_runs(groups[key])
        labels, _ = curves_from_histories(runs)
        cells = []
        for thr in (0.90, 0.95):
            avg = labels_to_accuracy(runs, thr, "average-step")["value"]
            sa = labels_to_accuracy(runs, thr, "step-average")
            cells.append(_fmt_labels(avg, n_initial, labels[-1]))
            cells.append(_fmt_step_average(sa, n_initial, labels[-1]))
        mean, std = accuracy_at(runs, at_labels)
        acc = _missing_accuracy(labels[-1], at_labels, end_labels) if np.isnan(mean) else \
            f"{100 * mean:.2f} ± {100 * std:.2f}%"
        published = [ANCHORS[src].get(strategy) if variant == "bayesian" else None for src in ANCHORS]
        anchor_cells = ["—" if a is None else f"{a[0]} / {a[1]}" for a in published]
        steps = "; ".join(filter(None, [", ".join(str(len(r) - 1) for r in runs), not_counted(groups[key], runs)]))
        lines.append(f"| {LABELS.get(strategy, strategy)} | {variant} | {len(runs)} ({steps}) | "
                     + " | ".join(cells) + f" | {acc} |" + (" " + " | ".join(anchor_cells) + " |" if anchors else "")
                     + (f" {devices_by_seed(runs)} |" if mixed else ""))
    return "\n".join(lines)


def cost_markdown(rows: List[dict], n_initial: int = 20, thresholds: Sequence[float] = (0.90, 0.95)) -> str:
    """Labels to each accuracy by three measures, beside the cost of a step.

    For each strategy and variant: the median over runs of the labels where
    each run first reaches the threshold (Kirsch et al., 2019, report
    medians; a run that never reaches it counts above every run that does),
    the step-average (their mean ± population std) and the average-step (where
    the mean curve first reaches it); see
    :func:`skdbal.metrics.labels_to_accuracy`. Labels include the
    ``n_initial`` initial points, the acquired ones in parentheses. The cost
    columns are medians over every acquisition step (step ≥ 1) of every run,
    in wall-clock seconds: scoring and picking (``query_time``), training
    (``train_time``) and the whole step (``time``: training, query and
    evaluation). Only runs of the longest length in a group are counted, as
    in :func:`table_markdown`.

    Examples
    --------
    >>> from skdbal.experiments.curves import cost_markdown
    >>> def run(strategy, seed, accuracies, query_time):   # one run's rows, 10 labels a step
    ...     return [dict(preset="p", strategy=strategy, variant="bayesian", seed=seed, step=i, n_labels=20 + 10 * i,
    ...                  accuracy=a, train_time=1.0, query_time=query_time * (i > 0), time=1.5 + query_time * (i > 0))
    ...             for i, a in enumerate(accuracies)]
    >>> rows = (run("bald", 1, [0.5, 0.91, 0.96], 0.5) + run("bald", 2, [0.5, 0.8, 0.92], 0.7)
    ...         + run("bald", 3, [0.5, 0.9, 0.95], 0.6))
    >>> print(cost_markdown(rows))
    | strategy | variant | runs | 90%: median | 90%: step-average | 90%: average-step | 95%: median | 95%: step-average | 95%: average-step | query s/step | train s/step | step s |
    |---|---|---|---|---|---|---|---|---|---|---|---|
    | BALD | bayesian | 3 | 30 (10) | 33.3 (13.3) ± 4.7 | 40 (20) | 40 (20) | 2/3 runs reached | > 40 | 0.60 | 1.00 | 2.10 |
    """
    groups = group_runs(rows)
    head = ["strategy", "variant", "runs"]
    for thr in thresholds:
        head += [f"{100 * thr:.0f}%: {m}" for m in ("median", "step-average", "average-step")]
    head += ["query s/step", "train s/step", "step s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key in sorted(groups, key=sort_key):
        _, strategy, variant = key
        runs = longest_runs(groups[key])
        labels, _ = curves_from_histories(runs)
        cells = [LABELS.get(strategy, strategy), variant, str(len(runs))]
        for thr in thresholds:
            med = labels_to_accuracy(runs, thr, "median")
            sa = labels_to_accuracy(runs, thr, "step-average")
            avg = labels_to_accuracy(runs, thr, "average-step")["value"]
            cells.append(_fmt_labels(med["value"], n_initial, labels[-1]))
            cells.append(_fmt_step_average(sa, n_initial, labels[-1]))
            cells.append(_fmt_labels(avg, n_initial, labels[-1]))
        for column in ("query_time", "train_time", "time"):
            values = [float(r[column]) for run in runs for r in run
                      if int(r["step"]) >= 1 and r.get(column) not in (None, "")]
            cells.append(f"{np.median(values):.2f}" if values else "n/a")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _missing_accuracy(last_labels: int, at_labels: int, end_labels: Optional[int]) -> str:
    """Why a table has no accuracy at ``at_labels``: the runs end before by
    design (``end_labels``), have not got there yet, or have no step there."""
    if last_labels >= at_labels:
        return f"n/a (no step at {at_labels} labels)"
    if end_labels is None:
        return f"n/a (the runs stop at {last_labels} labels)"
    return f"n/a (runs end at {end_labels} labels)" if end_labels < at_labels else "n/a (not reached yet)"


def deterministic_markdown(rows: List[dict], n_initial: int = 20,
                           at_labels: Sequence = (220, 520, 1020), end_labels: Optional[int] = None) -> str:
    """Bayesian against deterministic scoring (Gal et al., 2017, §5.2), per strategy.

    For each strategy run in both variants, over the seeds that got furthest
    in both (so that the two rows average the same seeds) and the steps
    that all of these have (so that a run in progress is not set against a
    longer one; the seeds cell then says ``(steps 0–k of n)``): acquired
    images to 90% and 95% accuracy (Average-Step), mean ± population std
    accuracy at ``at_labels``, and, on the deterministic row, the paired
    difference seed by seed (deterministic minus Bayesian acquired images
    to 90% / 95%; positive means the Bayesian run needed fewer labels).
    An accuracy not reached reads ``> k`` (k acquired at the last step
    compared), or ``never`` where the runs end at ``end_labels``, the
    labels at which the grid's runs end. Seeds left out are listed as not
    counted; where the rows carry devices that mix, a last column names
    them (see :func:`table_markdown`).

    Examples
    --------
    >>> from skdbal.experiments.curves import deterministic_markdown
    >>> def run(strategy, seed, accuracies, variant="bayesian"):   # one run's rows, 10 labels a step
    ...     return [dict(preset="gal2017", strategy=strategy, variant=variant, seed=seed, step=i,
    ...                  n_labels=20 + 10 * i, n_acquired=10 * i, accuracy=a, noise_rate=None)
    ...             for i, a in enumerate(accuracies)]
    >>> rows = (run("max_entropy", 1, [0.5, 0.91, 0.96]) + run("max_entropy", 2, [0.5, 0.8, 0.92])
    ...         + run("max_entropy", 1, [0.5, 0.7, 0.91], "deterministic")
    ...         + run("max_entropy", 2, [0.5, 0.7, 0.86], "deterministic"))
    >>> print(deterministic_markdown(rows, at_labels=(40,), end_labels=40))   # seed 1: 10 more labels to 90%
    | strategy | variant | seeds | acquired to 90% / 95% | accuracy at 40 labels | deterministic − Bayesian by seed, 90% / 95% |
    |---|---|---|---|---|---|
    | Max Entropy | bayesian | 1, 2 | 20 / never | 94.0 ± 2.0% | — |
    | Max Entropy | deterministic | 1, 2 | never / never | 88.5 ± 2.5% | seed 1: +10 / n/a, seed 2: n/a / n/a |
    """
    groups = group_runs(rows)
    header_acc = " / ".join(str(n) for n in at_labels)
    pairs = sorted({(p, s) for (p, s, v) in groups if v == "deterministic" and (p, s, "bayesian") in groups},
                   key=lambda k: sort_key((*k, "bayesian")))
    mixed = devices_mixed([run for p, s in pairs for v in ("bayesian", "deterministic")
                            for run in longest_runs(groups[(p, s, v)])])
    lines = [f"| strategy | variant | seeds | acquired to 90% / 95% | accuracy at {header_acc} labels | "
             "deterministic − Bayesian by seed, 90% / 95% |" + (" device |" if mixed else ""),
             "|---|---|---|---|---|---|" + ("---|" if mixed else "")]
    for preset, strategy in pairs:
        finished = {v: {r[0]["seed"]: r for r in longest_runs(groups[(preset, strategy, v)])}
                    for v in ("bayesian", "deterministic")}
        common = sorted(set(finished["bayesian"]) & set(finished["deterministic"]))
        name = LABELS.get(strategy, strategy)
        if not common:
            lines.append(f"| {name} | both | — | no seed finished in both variants yet | | |"
                         + (" |" if mixed else ""))
            continue
        n_steps = min(len(finished[v][seed]) for v in finished for seed in common)  # the steps both have
        longest = max(len(run) for v in finished for run in finished[v].values())
        per_run = {}  # variant -> labels at which each common seed first reaches 90%, 95%
        for variant in ("bayesian", "deterministic"):
            runs = [finished[variant][seed][:n_steps] for seed in common]
            counted = [finished[variant][seed] for seed in common]
            seeds = ", ".join(str(s) for s in common) + (
                f" (steps 0–{n_steps - 1} of {longest - 1})" if n_steps < longest else "")
            seeds = "; ".join(filter(None, [seeds, not_counted(groups[(preset, strategy, variant)], counted)]))
            last = runs[0][-1]["n_labels"]
            per_run[variant] = [labels_to_accuracy(runs, thr, "step-average")["runs"] for thr in (0.90, 0.95)]
            reach = []
            for thr in (0.90, 0.95):
                value = labels_to_accuracy(runs, thr)["value"] - n_initial
                reach.append(f"{value:.0f}" if not np.isnan(value) else
                             "never" if end_labels is not None and last >= end_labels else f"> {last - n_initial}")
            accs = []
            for n in at_labels:
                mean, std = accuracy_at(runs, n)
                accs.append("n/a" if np.isnan(mean) else f"{100 * mean:.1f} ± {100 * std:.1f}")
            diff = "—"
            if variant == "deterministic":  # labels minus labels: the same as acquired minus acquired
                gaps = np.subtract(per_run["deterministic"], per_run["bayesian"])  # (threshold, seed)
                diff = ", ".join(f"seed {seed}: " + " / ".join("n/a" if np.isnan(d) else f"{d:+.0f}" for d in col)
                                 for seed, col in zip(common, gaps.T))
            lines.append(f"| {name} | {variant} | {seeds} | {' / '.join(reach)} | {' / '.join(accs)}% | {diff} |"
                         + (f" {devices_by_seed(runs)} |" if mixed else ""))
    return "\n".join(lines)


def plot_curves(rows: List[dict], path, variants=("bayesian",), strategies=None, title: str = "",
                ylim=None, color_strategies: Optional[Sequence[str]] = None) -> "Optional[Figure]":
    """Mean ± std test accuracy against labels, one band per strategy (and
    variant), over the runs that got furthest (see :func:`table_markdown`).
    The y range fits the bands unless ``ylim`` is given; the legend sits to
    the right of the plot. Colours are assigned over ``color_strategies``
    (default: the strategies in ``rows``), so that figures of parts of a
    grid can share them. A legend entry names the seeds left out of its
    band (runs in progress); where the plotted runs come from more than one
    device, the title says which ran where
    (:func:`~skdbal.experiments.grouping.device_note`). Every ``plot_*``
    function of the report saves its figure to ``path`` and closes it, or,
    with ``path=None``, returns the open figure.

    Examples
    --------
    >>> from skdbal.experiments.curves import plot_curves
    >>> def run(strategy, seed, accuracies, variant="bayesian"):   # one run's rows, 10 labels a step
    ...     return [dict(preset="gal2017", strategy=strategy, variant=variant, seed=seed, step=i,
    ...                  n_labels=20 + 10 * i, n_acquired=10 * i, accuracy=a, noise_rate=None)
    ...             for i, a in enumerate(accuracies)]
    >>> rows = run("bald", 1, [0.5, 0.8, 0.92]) + run("bald", 2, [0.5, 0.9, 0.96]) + run("random", 1, [0.5, 0.7, 0.85])
    >>> fig = plot_curves(rows, None, title="BALD against random")
    >>> ax = fig.axes[0]
    >>> ax.get_title(), ax.get_xlabel(), len(ax.get_lines())
    ('BALD against random', 'labelled images (20 initial + acquired)', 2)
    >>> rows += run("filter(bald,0.1)", 1, [0.5, 0.8, 0.9]) + run("filter(bald,0.25)", 1, [0.5, 0.8, 0.9])
    >>> part = [r for r in rows if r["strategy"] == "filter(bald,0.25)"]    # a part of the grid
    >>> alone = plot_curves(part, None)
    >>> shared = plot_curves(part, None, color_strategies=["filter(bald,0.1)", "filter(bald,0.25)"])
    >>> alone.axes[0].get_lines()[0].get_color(), shared.axes[0].get_lines()[0].get_color()
    ('C5', 'C6')
    >>> import matplotlib.pyplot as plt
    >>> plt.close("all")
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8.5, 4.5))
    groups = group_runs(rows)
    others = sorted(set(color_strategies) if color_strategies is not None else {k[1] for k in groups})
    lows, highs, plotted = [], [], {}
    for key in sorted(groups, key=sort_key):
        _, strategy, variant = key
        if variant not in variants or (strategies is not None and strategy not in strategies):
            continue
        runs = longest_runs(groups[key])
        labels, acc = curves_from_histories(runs)
        mean, std = acc.mean(axis=0), acc.std(axis=0)
        style = ("-", "--", ":", "-.")[list(variants).index(variant) % 4]  # bayesian first: solid
        # one MC-dropout variant needs no name; another (a Laplace posterior) is always named
        alone = len(variants) == 1 and variant.startswith("bayesian")
        name = LABELS.get(strategy, strategy) + ("" if alone else f" ({variant})")
        plotted[name] = runs
        color = strategy_color(strategy, others)
        left = not_counted(groups[key], runs)
        line, = ax.plot(labels, mean, style, color=color,
                        label=f"{name}, {len(runs)} run(s)" + (f" ({left})" if left else ""))
        ax.fill_between(labels, mean - std, mean + std, alpha=0.15, color=line.get_color())
        lows.append(mean - std)
        highs.append(mean + std)
    initial = {int(r["n_labels"]) - int(r["n_acquired"]) for r in rows if r.get("n_acquired") is not None}
    ax.set_xlabel(f"labelled images ({min(initial) if initial else 20} initial + acquired)")
    ax.set_ylabel("test accuracy")
    if ylim is not None or lows:
        ax.set_ylim(*(ylim if ylim is not None else data_ylim(lows, highs)))
    ax.grid(alpha=0.3)
    legend_outside(ax)
    note = device_note(plotted)
    ax.set_title(title + (f"\n{note}" if note else ""))
    fig.tight_layout()
    return save_figure(fig, path)

