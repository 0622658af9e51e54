"""Tables and figures from a grid's ``results.csv``.

Those of Gal et al. (2017, Table 1, Figs 1-2) [1]_ and Anonymous (n.d.,
Fig. 3, Tables 2-3, Figs 4-6) [2]_, with the labels-to-accuracy measures of
Pilz (2025, Appendix A) [3]_.

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

import csv
import json
import os
import warnings
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from .plotting import data_ylim, legend_outside
from .presets import PRESETS
from .runner import DamagedResultsError, comparable_configs, read_run_file, assemble_results, read_results

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure
from ..metrics import accuracy_at, curves_from_histories, labels_to_accuracy

__all__ = ["ANCHORS", "group_runs", "table_markdown", "cost_markdown", "write_cost", "plot_curves", "plot_last_layer", "last_layer_markdown",
           "deterministic_markdown", "noise_markdown", "plot_noise_levels", "plot_flipped", "SEED000_REJECTS",
           "write_report"]

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

_ORDER = ["bald", "variation_ratios", "max_entropy", "mean_std", "random"]
_LABEL = {"bald": "BALD", "variation_ratios": "Var Ratios", "max_entropy": "Max Entropy",
          "mean_std": "Mean STD", "random": "Random", "predictive_variance": "Predictive variance"}
_VARIANT = {"blr_analytic": "analytic", "blr_mfvi": "MFVI"}
#: The noise filter of BALD with a threshold that adapts (see skdbal.acquisition.NoiseFilter).
_ADAPTIVE_FILTERS = ("filter(bald,dynamic)", "filter(bald,batch)", "filter(bald,quantile)")


def group_runs(rows: List[dict]) -> Dict[Tuple[str, str, str], List[List[dict]]]:
    """``{(preset, strategy, variant): [rows of each seed's run, by seed]}``.

    Examples
    --------
    >>> from skdbal.experiments.report import group_runs
    >>> def run(strategy, seed, accuracies, variant="bayesian"):   # one run's rows, 10 labels a step
    ...     return [dict(preset="gal2017", strategy=strategy, variant=variant, seed=seed, step=i,
    ...                  n_labels=20 + 10 * i, n_acquired=10 * i, accuracy=a, noise_rate=None)
    ...             for i, a in enumerate(accuracies)]
    >>> rows = run("bald", 1, [0.5, 0.8, 0.92]) + run("bald", 2, [0.5, 0.9, 0.96]) + run("random", 1, [0.5, 0.7, 0.85])
    >>> {key: [len(r) for r in runs] for key, runs in group_runs(rows).items()}
    {('gal2017', 'bald', 'bayesian'): [3, 3], ('gal2017', 'random', 'bayesian'): [3]}
    """
    by_run = defaultdict(list)
    for row in rows:
        by_run[(row["preset"], row["strategy"], row["variant"], row["seed"])].append(row)
    groups = defaultdict(list)
    for (preset, strategy, variant, seed) in sorted(by_run):
        run = sorted(by_run[(preset, strategy, variant, seed)], key=lambda r: r["step"])
        groups[(preset, strategy, variant)].append(run)
    return dict(groups)


def _longest(runs):
    """The runs of a group that got furthest (the finished ones, once any has finished)."""
    longest = max(len(r) for r in runs)
    return [r for r in runs if len(r) == longest]


def _not_counted(runs, counted) -> str:
    """``"not counted: seed 3 at step 1"`` for the runs of a group left out of
    ``counted`` (see :func:`_longest`), ``""`` when none is."""
    left = [r for r in runs if not any(r is c for c in counted)]
    return "not counted: " + ", ".join(f"seed {r[0]['seed']} at step {len(r) - 1}" for r in left) if left else ""


def _devices_of(run) -> set:
    """The devices whose steps make up ``run`` (rows carrying ``device`` and,
    for a run resumed on another device, ``devices``; see :func:`write_report`)."""
    first = run[0]
    return set(first.get("devices") or ((first["device"],) if "device" in first else ()))


def _devices_mixed(runs) -> bool:
    """Whether ``runs`` come from more than one device, a run resumed on
    another device included: CPU and GPU runs of one seed give other numbers."""
    return len(set().union(*(_devices_of(run) for run in runs))) > 1 if runs else False


def _seed_list(seeds) -> str:
    seeds = sorted(seeds)
    return ("seed " if len(seeds) == 1 else "seeds ") + ", ".join(str(s) for s in seeds)


def _devices_by_seed(runs) -> str:
    """The device of a group's runs: ``"cpu"``, or ``"cpu (seed 1), cuda (seeds 2, 3)"``."""
    seeds = defaultdict(set)
    for run in runs:
        seeds[run[0].get("device", "unknown")].add(run[0]["seed"])
    if len(seeds) == 1:
        return next(iter(seeds))
    return ", ".join(f"{device} ({_seed_list(s)})" for device, s in sorted(seeds.items(), key=lambda kv: min(kv[1])))


def _device_note(runs_by_name: Dict[str, List[List[dict]]]) -> str:
    """Which of the runs ran on which device, for a figure that sets them side
    by side: ``""`` when they carry no device or share one, else by seed
    (``"seed 1: cpu; seeds 2, 3: cuda"``) when every seed ran on one device,
    else by name (``"BALD, Random: cpu; filter(bald,batch): cuda"``). A run
    resumed on another device counts as mixed (its device reads
    ``"cpu (steps 0-11), cuda (steps 12-)"``)."""
    device = {(name, run[0]["seed"]): run[0]["device"] for name, runs in runs_by_name.items() for run in runs
              if "device" in run[0]}
    if not _devices_mixed([run for runs in runs_by_name.values() for run in runs]):
        return ""
    by_seed, by_name = defaultdict(set), defaultdict(set)
    for (name, seed), d in device.items():
        by_seed[seed].add(d)
        by_name[name].add(d)
    if all(len(d) == 1 for d in by_seed.values()):
        groups = defaultdict(set)
        for seed, (d,) in by_seed.items():
            groups[d].add(seed)
        return "; ".join(f"{_seed_list(s)}: {d}" for d, s in sorted(groups.items(), key=lambda kv: min(kv[1])))
    if all(len(d) == 1 for d in by_name.values()):
        groups = defaultdict(list)
        for name, (d,) in by_name.items():
            groups[d].append(name)
        return "; ".join(f"{', '.join(names)}: {d}" for d, names in groups.items())
    return "; ".join(f"{name}: {_devices_by_seed(runs)}" for name, runs in runs_by_name.items())


def _sort_key(key):
    preset, strategy, variant = key
    return (preset, variant != "bayesian", _ORDER.index(strategy) if strategy in _ORDER else 99, strategy)


def _color(strategy: str, strategies: Sequence[str]) -> str:
    """One colour per strategy: the named ones fixed, the others (decorated) after them."""
    if strategy in _ORDER:
        return f"C{_ORDER.index(strategy)}"
    others = [s for s in strategies if s not in _ORDER]
    return f"C{(len(_ORDER) + others.index(strategy)) % 10}"


def _fmt_labels(value: float, n_initial: int, reached_max: int) -> str:
    if np.isnan(value):
        return f"> {reached_max}"
    return f"{value:.0f} ({value - n_initial:.0f})" if float(value).is_integer() else \
        f"{value:.1f} ({value - n_initial:.1f})"


def _fmt_step_average(sa: dict, n_initial: int, reached_max: int) -> str:
    """The step-average cell of :func:`labels_to_accuracy`'s result ``sa``: mean ± std, or how many runs
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
    ``device`` of their run (:func:`write_report` adds it) and the table's
    runs come from more than one device (or a run was resumed on another
    one), a last column names each row's devices by seed (``devices=False``
    leaves it to a page that names them already).

    Examples
    --------
    >>> from skdbal.experiments.report import table_markdown
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
    mixed = devices and _devices_mixed([run for runs in groups.values() for run in _longest(runs)])
    lines = [
        "| strategy | variant | runs (steps done) | 90%: average-step | 90%: step-average | "
        "95%: average-step | 95%: step-average | accuracy at "
        f"{at_labels} labels |" + (" Gal et al. (2017), 90% / 95% | Anonymous (n.d.), 90% / 95% |" if anchors else ""),
        "|---|---|---|---|---|---|---|---|" + ("---|---|" if anchors else ""),
    ]
    if mixed:
        lines = [lines[0] + " device |", lines[1] + "---|"]
    for key in sorted(groups, key=_sort_key):
        _, strategy, variant = key
        runs = _longest(groups[key])
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
        steps = "; ".join(filter(None, [", ".join(str(len(r) - 1) for r in runs), _not_counted(groups[key], runs)]))
        lines.append(f"| {_LABEL.get(strategy, strategy)} | {variant} | {len(runs)} ({steps}) | "
                     + " | ".join(cells) + f" | {acc} |" + (" " + " | ".join(anchor_cells) + " |" if anchors else "")
                     + (f" {_devices_by_seed(runs)} |" if mixed else ""))
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
    >>> from skdbal.experiments.report import cost_markdown
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
    for key in sorted(groups, key=_sort_key):
        _, strategy, variant = key
        runs = _longest(groups[key])
        labels, _ = curves_from_histories(runs)
        cells = [_LABEL.get(strategy, strategy), variant, str(len(runs))]
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


def write_cost(out_dir: Union[str, os.PathLike]) -> Path:
    """Write ``cost.md`` in a grid's folder: :func:`cost_markdown` of its runs.

    Parameters
    ----------
    out_dir : path
        A folder written by :func:`skdbal.experiments.run_grid`.

    Returns
    -------
    path : Path
        The file written.

    Examples
    --------
    >>> import tempfile
    >>> from skdbal.experiments import get_preset, run_grid
    >>> from skdbal.experiments.report import write_cost
    >>> tiny = get_preset("gal2017", dataset="digits", n_queries=1, max_epochs=2, n_samples=4,
    ...                   pool_subsample=100, n_validation=50, module_params={"kernel_size": 3})
    >>> out = tempfile.mkdtemp()
    >>> _ = run_grid(tiny, ["random"], seeds=[1, 2], out_dir=out, torch_threads=1, verbose=False)
    >>> lines = write_cost(out).read_text().splitlines()
    >>> lines[4].split(" | ")[:4]
    ['| strategy', 'variant', 'runs', '90%: median']
    >>> lines[6].split(" | ")[:3]
    ['| Random', 'bayesian', '2']
    """
    out_dir = Path(out_dir)
    rows, _, _, n_initial, _ = _grid_rows(out_dir)  # as write_report reads them: the same runs and steps
    devices = sorted({str(r.get("device") or "unrecorded") for r in rows})
    path = out_dir / "cost.md"
    path.write_text(
        f"# {out_dir.name}: labels to accuracy and the cost of a step\n\n"
        "Labels to 90% and 95% test accuracy (the initial points included, the acquired ones in parentheses) by "
        "the median over seeds, the step-average (± population std) and the average-step; then the median over "
        "the acquisition steps of every run of the seconds spent scoring and picking, training, and on the "
        f"whole step (device: {', '.join(devices) or 'unrecorded'}; runs side by side share the machine, so "
        "compare costs within one grid).\n\n"
        + cost_markdown(rows, n_initial) + "\n")
    return path


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
    >>> from skdbal.experiments.report import deterministic_markdown
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
                   key=lambda k: _sort_key((*k, "bayesian")))
    mixed = _devices_mixed([run for p, s in pairs for v in ("bayesian", "deterministic")
                            for run in _longest(groups[(p, s, v)])])
    lines = [f"| strategy | variant | seeds | acquired to 90% / 95% | accuracy at {header_acc} labels | "
             "deterministic − Bayesian by seed, 90% / 95% |" + (" device |" if mixed else ""),
             "|---|---|---|---|---|---|" + ("---|" if mixed else "")]
    for preset, strategy in pairs:
        finished = {v: {r[0]["seed"]: r for r in _longest(groups[(preset, strategy, v)])}
                    for v in ("bayesian", "deterministic")}
        common = sorted(set(finished["bayesian"]) & set(finished["deterministic"]))
        name = _LABEL.get(strategy, strategy)
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
            seeds = "; ".join(filter(None, [seeds, _not_counted(groups[(preset, strategy, variant)], counted)]))
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
                         + (f" {_devices_by_seed(runs)} |" if mixed else ""))
    return "\n".join(lines)


def _save(fig, path):
    """Save ``fig`` to ``path`` and close it; with ``path=None`` keep it open
    and return it (for notebooks and the example gallery)."""
    if path is None:
        return fig
    fig.savefig(path, dpi=120)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return None


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


def plot_curves(rows: List[dict], path, variants=("bayesian",), strategies=None, title: str = "",
                ylim=None, color_strategies: Optional[Sequence[str]] = None) -> "Optional[Figure]":
    """Mean ± std test accuracy against labels, one band per strategy (and
    variant), over the runs that got furthest (see :func:`table_markdown`).
    The y range fits the bands unless ``ylim`` is given; the legend sits to
    the right of the plot. Colours are assigned over ``color_strategies``
    (default: the strategies in ``rows``), so that figures of parts of a
    grid can share them. A legend entry names the seeds left out of its
    band (runs in progress); where the plotted runs come from more than one
    device, the title says which ran where (:func:`_device_note`). Every
    ``plot_*`` function of this module saves its figure to ``path`` and
    closes it, or, with ``path=None``, returns the open figure.

    Examples
    --------
    >>> from skdbal.experiments.report import plot_curves
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
    for key in sorted(groups, key=_sort_key):
        _, strategy, variant = key
        if variant not in variants or (strategies is not None and strategy not in strategies):
            continue
        runs = _longest(groups[key])
        labels, acc = curves_from_histories(runs)
        mean, std = acc.mean(axis=0), acc.std(axis=0)
        style = ("-", "--", ":", "-.")[list(variants).index(variant) % 4]  # bayesian first: solid
        # one MC-dropout variant needs no name; another (a Laplace posterior) is always named
        alone = len(variants) == 1 and variant.startswith("bayesian")
        name = _LABEL.get(strategy, strategy) + ("" if alone else f" ({variant})")
        plotted[name] = runs
        color = _color(strategy, others)
        left = _not_counted(groups[key], runs)
        line, = ax.plot(labels, mean, style, color=color,
                        label=f"{name}, {len(runs)} run(s)" + (f" ({left})" if left else ""))
        ax.fill_between(labels, mean - std, mean + std, alpha=0.15, color=line.get_color())
        lows.append(mean - std)
        highs.append(mean + std)
    ax.set_xlabel("labelled images (20 initial + acquired)")
    ax.set_ylabel("test accuracy")
    if ylim is not None or lows:
        ax.set_ylim(*(ylim if ylim is not None else data_ylim(lows, highs)))
    ax.grid(alpha=0.3)
    legend_outside(ax)
    note = _device_note(plotted)
    ax.set_title(title + (f"\n{note}" if note else ""))
    fig.tight_layout()
    return _save(fig, path)


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
    >>> from skdbal.experiments.report import diversity_markdown
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
    >>> from skdbal.experiments.report import plot_diversity_weights
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
    return _save(fig, path)


def _last_layer_groups(rows):
    return {k: v for k, v in sorted(group_runs(rows).items(), key=lambda kv: _sort_key(kv[0]))
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
    >>> from skdbal.experiments.report import plot_last_layer
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
        name = f"{_VARIANT.get(variant, variant)}, {_LABEL.get(strategy, strategy)}, {len(runs)} run(s)"
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
    return _save(fig, path)


def last_layer_markdown(rows: List[dict], at_acquired: Sequence = (0, 100, 250, 500, 1000)) -> str:
    """RMSE, mean predictive variance and accuracy at a few acquisition counts.

    Examples
    --------
    >>> from skdbal.experiments.report import last_layer_markdown
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
            lines.append(f"| {_VARIANT.get(variant, variant)} | {_LABEL.get(strategy, strategy)} | {len(runs)} "
                         f"({steps}) | {a} | {rmse[:, i].mean():.4f} ± {rmse[:, i].std():.4f} | "
                         f"{var[:, i].mean():.4f} ± {var[:, i].std():.4f} | "
                         f"{100 * acc[:, i].mean():.2f} ± {100 * acc[:, i].std():.2f}% |")
    return "\n".join(lines)


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
    mix, a last column names them (see :func:`table_markdown`).

    Examples
    --------
    >>> from skdbal.experiments.report import calibration_markdown
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
    mixed = _devices_mixed([run for runs in groups.values() for run in runs])
    lines = ["| strategy | variant | runs (steps done) | labels | accuracy | ECE | NLL (nats) |"
             + (" device |" if mixed else ""), "|---|---|---|---|---|---|---|" + ("---|" if mixed else "")]
    if at_labels is None:
        at_labels = _spread_labels(rows)
    for (_, strategy, variant), runs in sorted(groups.items(), key=lambda kv: _sort_key(kv[0])):
        steps = ", ".join(str(len(r) - 1) for r in runs)
        for n in at_labels:
            at = [next(r for r in run if r["n_labels"] == n) for run in runs if any(r["n_labels"] == n for r in run)]
            if not at:
                continue
            acc, ece, nll = (np.array([r[k] for r in at], dtype=float) for k in ("accuracy", "ece", "nll"))
            lines.append(f"| {_LABEL.get(strategy, strategy)} | {variant} | {len(runs)} ({steps}) | {n} | "
                         f"{100 * acc.mean():.2f} ± {100 * acc.std():.2f}% | {ece.mean():.4f} ± {ece.std():.4f} | "
                         f"{nll.mean():.4f} ± {nll.std():.4f} |" + (f" {_devices_by_seed(runs)} |" if mixed else ""))
    return "\n".join(lines)


def plot_calibration(rows: List[dict], path, title: str = "") -> "Optional[Figure]":
    """Test accuracy, ECE and NLL against labels (mean ± std over seeds), one
    line per strategy and variant, for the runs that recorded ECE and NLL,
    over the runs that got furthest (a legend entry names the seeds left
    out); where the runs come from more than one device, the title says
    which ran where.

    Examples
    --------
    >>> from skdbal.experiments.report import plot_calibration
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
    groups = sorted(group_runs(rows).items(), key=lambda kv: _sort_key(kv[0]))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    plotted = {}
    for k, ((_, strategy, variant), every) in enumerate(groups):
        runs = _longest(every)
        plotted[f"{_LABEL.get(strategy, strategy)} ({variant})"] = runs
        left = _not_counted(every, runs)
        name = f"{_LABEL.get(strategy, strategy)} ({variant}), {len(runs)} run(s)" + (f" ({left})" if left else "")
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
    note = _device_note(plotted)
    fig.suptitle(title + (f"\n{note}" if note else ""))
    fig.tight_layout()
    return _save(fig, path)


#: The rejects per acquisition step of Anonymous (n.d., Tables 2 and 3, its
#: own thresholds), by (strategy, noise rate), beside ours in :func:`noise_markdown`.
SEED000_REJECTS = {("filter(bald,dynamic)", 0.0): 0.39, ("filter(bald,dynamic)", 0.1): 1.47,
                   ("filter(bald,dynamic)", 0.2): 2.98, ("filter(bald,dynamic)", 0.3): 4.96,
                   ("filter(bald,0.1)", 0.2): 3.18, ("filter(bald,0.25)", 0.2): 5.10}


def _rate(row: dict) -> float:
    return row.get("noise_rate") or 0.0


def _excess(per_step: float, optimal: float) -> str:
    """Rejects per step over the optimal ``noise_rate × n_instances``: a
    percentage, or absolute on a clean pool (where the optimal is 0)."""
    return f"{100 * (per_step / optimal - 1):+.0f}%" if optimal else f"+{per_step:.2f}"


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
    ``device`` of their run (:func:`write_report` adds it from the run
    files), a last column says which seeds ran on which device, since runs
    of one seed on a CPU and on a GPU give different numbers.

    Examples
    --------
    >>> from skdbal.experiments.report import noise_markdown
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
    for rate in sorted({_rate(r) for r in rows}):
        groups = group_runs([r for r in rows if _rate(r) == rate])
        for key in sorted(groups, key=_sort_key):
            _, strategy, _variant = key
            runs = _longest(groups[key])
            steps = [r for run in runs for r in run if r["step"] > 0]

            def total(column):
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
                cells.append(_devices_by_seed(runs))
            done = "; ".join(filter(None, [", ".join(str(len(r) - 1) for r in runs),
                                           _not_counted(groups[key], runs)]))
            lines.append(f"| {_LABEL.get(strategy, strategy)} | {100 * rate:g}% | {len(runs)} ({done}) | "
                         + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_noise_levels(rows: List[dict], path, strategies: Sequence[str] = ("bald", "filter(bald,dynamic)", "random"),
                      title: str = "", color_strategies: Optional[Sequence[str]] = None) -> "Optional[Figure]":
    """Figs 4 and 5 of Anonymous (n.d.): test accuracy (mean ± std over seeds) of
    ``strategies``, one panel per noise rate (rows without one count as
    clean). Colours are assigned over ``color_strategies`` (default:
    ``strategies``), as in :func:`plot_curves`. Where the rows carry the
    ``device`` of their run and the curves come from more than one device,
    each panel's title says which runs ran where.

    Examples
    --------
    >>> from skdbal.experiments.report import plot_noise_levels
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
    rates = sorted({_rate(r) for r in rows})
    fig, axes = _noise_panels(rates, legend_width=2.2)
    lows, highs, handles, panels = [], [], {}, []
    for ax, rate in zip(axes, rates):
        groups = group_runs([r for r in rows if _rate(r) == rate])
        plotted = {}
        panels.append(plotted)
        for key in sorted(groups, key=_sort_key):
            strategy, variant = key[1], key[2]
            if variant != "bayesian" or strategy not in strategies:
                continue
            runs = _longest(groups[key])
            plotted[_LABEL.get(strategy, strategy)] = runs
            left = _not_counted(groups[key], runs)
            if left:
                ax.set_title(ax.get_title() + f"\n{_LABEL.get(strategy, strategy)} {left}", fontsize=8)
            labels, acc = curves_from_histories(runs)
            mean, std = acc.mean(axis=0), acc.std(axis=0)
            color = _color(strategy, sorted(color_strategies if color_strategies is not None else strategies))
            line, = ax.plot(labels, mean, color=color)
            handles.setdefault(_LABEL.get(strategy, strategy), line)
            ax.fill_between(labels, mean - std, mean + std, alpha=0.15, color=color)
            lows.append(mean - std)
            highs.append(mean + std)
    mixed = _devices_mixed([run for plotted in panels for runs in plotted.values() for run in runs])
    for ax, plotted in zip(axes, panels):
        if mixed:  # runs of one seed differ between a CPU and a GPU: say which ran where
            note = _device_note(plotted) or "all on " + ", ".join(
                {run[0]["device"] for runs in plotted.values() for run in runs})
            ax.set_title(ax.get_title() + "\n" + note.replace("; ", "\n"), fontsize=8)
    axes[0].set_ylabel("test accuracy (mean ± std over seeds)")
    if lows:
        axes[0].set_ylim(*data_ylim(lows, highs))
    legend_outside(axes[-1], handles=handles)
    fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, path)


def plot_flipped(rows: List[dict], path, title: str = "") -> "Optional[Figure]":
    """Share of flipped labels in the training set against labels: one panel
    per noise rate, one line per strategy (one colour per strategy across
    panels), mean over the runs that got furthest.

    Examples
    --------
    >>> from skdbal.experiments.report import plot_flipped
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
        for key in sorted(groups, key=_sort_key):
            strategy = key[1]
            runs = _longest(groups[key])
            left = _not_counted(groups[key], runs)
            if left:
                ax.set_title(ax.get_title() + f"\n{_LABEL.get(strategy, strategy)} {left}", fontsize=8)
            n = min(len(run) for run in runs)
            share = np.mean([np.cumsum([r["n_flipped_acquired"] or 0 for r in run[:n]])
                             / np.array([r["n_labels"] for r in run[:n]]) for run in runs], axis=0)
            labels = [r["n_labels"] for r in runs[0][:n]]
            line, = ax.plot(labels, 100 * share, color=_color(strategy, strategies))
            handles.setdefault(_LABEL.get(strategy, strategy), line)
    axes[0].set_ylabel("flipped labels in the training set (%)")
    legend_outside(axes[-1], handles=handles)
    fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, path)


def _run_key(row: dict) -> tuple:
    """``(preset, strategy, variant, seed, noise rate)``: the run a row belongs to."""
    return row["preset"], row["strategy"], row["variant"], row["seed"], _rate(row)


def _run_name(key: tuple) -> str:
    preset, strategy, variant, seed, rate = key
    return f"{preset} {strategy} {variant} seed {seed}" + (f" noise {rate:g}" if rate else "")


def _read_grid_rows(out_dir: Path) -> List[dict]:
    """The rows of the run files in ``out_dir/runs``, which ``results.csv``
    only concatenates: a run deleted from ``runs/`` or copied in is reported
    as the folder holds it. Where ``results.csv`` disagrees with the run
    files (or is damaged or missing) it is rebuilt with a warning that says
    how; a folder without ``runs/`` is read from its ``results.csv``."""
    path, runs = out_dir / "results.csv", out_dir / "runs"
    if not runs.is_dir():
        rows = read_results(path)
    else:
        rows = [row for run_csv in sorted(runs.glob("*.csv")) for row in read_run_file(run_csv, warn=True)]
        try:
            problem = _disagreement(read_results(path), rows)
        except (DamagedResultsError, FileNotFoundError) as exc:
            problem = str(exc)
        if problem:
            warnings.warn(f"{problem}; rebuilt {path} from the run files in {runs}", RuntimeWarning)
            rows = assemble_results(out_dir)
    if not rows:
        raise ValueError(f"{path} has no rows yet")
    return rows


def _disagreement(stored: List[dict], rows: List[dict]) -> str:
    """How the rows of results.csv (``stored``) differ from those of the run
    files (``rows``), run by run; ``""`` where they agree."""
    def by_run(rs):
        out = defaultdict(list)
        for r in rs:
            out[_run_key(r)].append(r)
        return {k: sorted(v, key=lambda r: r["step"]) for k, v in out.items()}

    a, b = by_run(stored), by_run(rows)
    parts = []
    for what, keys in (("counts runs no longer in runs/", sorted(set(a) - set(b))),
                       ("lacks runs in runs/", sorted(set(b) - set(a))),
                       ("has other rows than the run files of", sorted(k for k in set(a) & set(b) if a[k] != b[k]))):
        if keys:
            parts.append(f"{what}: " + ", ".join(_run_name(k) for k in keys))
    return "results.csv " + "; ".join(parts) if parts else ""


def _grid_preset(out_dir: Path) -> dict:
    """The preset of a grid: from ``grid.json``, or, when that log is missing
    or damaged, from a run's configuration file."""
    for path in [out_dir / "grid.json"] + sorted((out_dir / "runs").glob("*.json")):
        try:
            return json.loads(path.read_text())["preset"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
    warnings.warn(f"no readable grid.json or run configuration in {out_dir}; assuming 20 initial labels and "
                  "10 per step", RuntimeWarning)
    return {"n_initial_per_class": 2, "n_instances": 10}


def write_report(out_dir: Union[str, os.PathLike], clean_dir: Union[str, os.PathLike, None] = None) -> List[Path]:
    """Write the tables and figures of a grid's ``results.csv``.

    Steps beyond the latest ``n_queries`` of the grid (``grid.json``) are
    left out, so that runs of one protocol are compared at the same length.

    Into ``out_dir``: ``table.md``, ``learning_curves.png`` and, when the
    deterministic baseline ran, ``deterministic.png``. For label-noise runs,
    also ``noise<rate>.md`` (:func:`noise_markdown` and the labels-to-accuracy
    table) and ``noise<rate>_curves.png`` for each noise rate,
    ``noise_flipped.png`` (:func:`plot_flipped`) and, across the noise rates
    (clean included), ``noise_levels.md`` and ``noise_levels.png``
    (:func:`plot_noise_levels`).

    Parameters
    ----------
    out_dir : path
        A folder written by :func:`~skdbal.experiments.run_grid`.
    clean_dir : path, optional
        A grid without label noise (such as the ``gal2017`` grid) whose runs of
        the strategies in ``out_dir`` stand for 0% noise in the cross-rate
        table and figure, cut at the labels the noisy runs reached, where
        ``out_dir`` has no clean runs of its own of them. Its own report is
        left alone.

    Returns
    -------
    paths : list of Path

    Examples
    --------
    >>> import tempfile
    >>> from skdbal.experiments import get_preset, run_grid
    >>> from skdbal.experiments.report import write_report
    >>> tiny = get_preset("gal2017", dataset="digits", n_queries=1, max_epochs=2, n_samples=4,
    ...                   pool_subsample=100, n_validation=50, module_params={"kernel_size": 3})
    >>> out = tempfile.mkdtemp()
    >>> _ = run_grid(tiny, ["bald", "random"], seeds=[1], out_dir=out, torch_threads=1, verbose=False)
    >>> sorted(path.name for path in write_report(out))
    ['learning_curves.png', 'table.md']
    """
    out_dir = Path(out_dir)
    rows, files, preset, n_initial, end_labels = _grid_rows(out_dir)
    n_instances = preset["n_instances"]
    noisy = sorted({r["noise_rate"] for r in rows if r["noise_rate"]})
    if not noisy:
        return _write_report_rows(out_dir, rows, n_initial, _DATASET_LABEL.get(preset.get("dataset"), "MNIST"),
                                  end_labels, _anchors(rows, files, preset), _network(preset))
    paths = []
    for rate in noisy:  # one table and figure per noise rate; the clean rows go on as usual
        part = [r for r in rows if r["noise_rate"] == rate]
        name = f"noise{rate:g}"
        table = out_dir / f"{name}.md"
        table.write_text(
            f"# {out_dir.name}: label noise {100 * rate:g}%\n\n"
            f"Label noise {100 * rate:g}% (symmetric, the pool's labels flipped once; initial, validation "
            "and test sets clean).\n\nWhat the filters reject (mean over the acquisition steps of the runs "
            "that got furthest):\n\n" + noise_markdown(part, n_instances) + "\n\nLabels to 90% / 95% "
            "test accuracy:\n\n" + table_markdown(part, n_initial, anchors=False, end_labels=end_labels,
                                                   devices=False) + "\n")  # the table above names them
        figure = out_dir / f"{name}_curves.png"
        plot_curves(part, figure, title=f"MNIST, {100 * rate:g}% label noise: test accuracy "
                                        "(mean ± std over seeds)",
                    color_strategies={r["strategy"] for r in rows if r["noise_rate"]})
        paths += [table, figure]
    flipped = out_dir / "noise_flipped.png"
    plot_flipped(rows, flipped, title="MNIST: flipped labels in the training set")
    paths.append(flipped)
    levels = list(rows)
    level_files = dict(files)
    if clean_dir is not None:
        noisy_rows = [r for r in rows if r["noise_rate"]]
        reached = max(r["n_labels"] for r in noisy_rows)
        wanted = {(r["preset"], r["strategy"], r["variant"]) for r in noisy_rows} \
            - {(r["preset"], r["strategy"], r["variant"]) for r in rows if not r["noise_rate"]}
        clean_files = _run_files(Path(clean_dir))
        levels += [r for r in _with_devices(_read_grid_rows(Path(clean_dir)), clean_files)
                   if not r.get("noise_rate") and (r["preset"], r["strategy"], r["variant"]) in wanted
                   and r["n_labels"] <= reached]
        level_files.update({k: v for k, v in clean_files.items() if not k[4]})
    # the runs of a strategy side by side across noise rates (those of clean_dir included) ran one configuration
    _check_comparable(levels, level_files, ignore=("seed", "noise_rate"), across_rates=True)
    if len({_rate(r) for r in levels}) > 1:
        table = out_dir / "noise_levels.md"
        source = f" (clean runs of the strategies also from {Path(clean_dir).name}/)" if clean_dir else ""
        table.write_text(
            f"# {out_dir.name}: across noise rates\n\n"
            f"Across noise rates{source}: what the filters reject and test accuracy (mean ± population std "
            "over the runs that got furthest).\n\n" + noise_markdown(levels, n_instances,
                                                                     at_labels=(100, 250, 500, 1000)) + "\n")
        figure = out_dir / "noise_levels.png"
        # BALD, random and the adaptive filters of BALD that the grid ran (the fixed ones are in Fig 6)
        adaptive = sorted({r["strategy"] for r in levels if r["strategy"] in _ADAPTIVE_FILTERS})
        plot_noise_levels(levels, figure, strategies=("bald", *adaptive, "random"),
                          title="MNIST: BALD, filtered BALD and random under label noise",
                          color_strategies={r["strategy"] for r in rows if r["noise_rate"]})
        paths += [table, figure]
    rows = [r for r in rows if not r["noise_rate"]]
    if not rows:
        return paths
    return paths + _write_report_rows(out_dir, rows, n_initial, _DATASET_LABEL.get(preset.get("dataset"), "MNIST"),
                                      end_labels, _anchors(rows, files, preset), _network(preset))


def _grid_rows(out_dir: Path):
    """A grid's rows as its report reads them: each with its run's device, refused where runs are not
    comparable, and cut at the grid's latest ``n_queries``; with the run files, the preset, the initial
    labels and the labels at which the runs end (None where the preset does not say)."""
    files = _run_files(out_dir)
    rows = _with_devices(_read_grid_rows(out_dir), files)
    _check_comparable(rows, files)
    preset = _grid_preset(out_dir)
    n_initial, n_instances = 10 * preset["n_initial_per_class"], preset["n_instances"]
    end_labels = None
    if preset.get("n_queries") is not None:  # steps beyond the grid's latest protocol (a longer earlier run)
        rows = [r for r in rows if r["step"] <= preset["n_queries"]]
        end_labels = n_initial + preset["n_queries"] * n_instances
    return rows, files, preset, n_initial, end_labels


def _anchors(rows: List[dict], files: Dict[tuple, Tuple[Path, Optional[dict]]], preset: dict) -> bool:
    """Whether the published MNIST numbers go beside ``rows``: every run's
    preset (from its file; the grid's where none is recorded) follows Gal et
    al.'s (2017) protocol (:func:`_gal2017_protocol`)."""
    presets = [files[k][1].get("preset", preset) if k in files and files[k][1] is not None else preset
               for k in {_run_key(r) for r in rows}]
    return all(_gal2017_protocol(p) for p in presets)


_DATASET_LABEL = {"mnist": "MNIST", "repeated_mnist": "Repeated-MNIST", "digits": "digits"}
_NETWORK_LABEL = {"BayesianCNN": "Bayesian CNN", "KirschCNN": "Kirsch et al.'s CNN"}


def _network(preset: dict) -> str:
    """The network of a grid's preset as its figures name it (the module's name where it has no label)."""
    module = preset.get("module") or "BayesianCNN"
    return _NETWORK_LABEL.get(module, module)


def _run_files(out_dir: Path) -> Dict[tuple, Tuple[Path, Optional[dict]]]:
    """``{run key: (path of the run's files without suffix, its configuration
    or None)}`` for the runs in ``out_dir/runs`` (see :func:`_run_key`); the
    key is read from the first row of the run's CSV."""
    files = {}
    for run_csv in sorted((out_dir / "runs").glob("*.csv")):
        try:
            with open(run_csv, newline="") as f:
                first = next(csv.DictReader(f))
            key = (first["preset"], first["strategy"], first["variant"], int(first["seed"]),
                   float(first.get("noise_rate") or 0.0))
        except (OSError, ValueError, KeyError, StopIteration):
            continue  # a run without rows, or damaged: nothing of it is reported
        try:
            config = json.loads(run_csv.with_suffix(".json").read_text())
        except (OSError, ValueError):
            config = None
        files[key] = (run_csv.with_suffix(""), config)
    return files


def _with_devices(rows: List[dict], files: Dict[tuple, Tuple[Path, Optional[dict]]]) -> List[dict]:
    """``rows``, each with the ``device`` of its run where the run files
    record one (``"unknown"`` where a run's does not), and, for a run resumed
    on another device, ``devices``: those of its steps."""
    devices = {}
    for key, (_, config) in files.items():
        if config is not None:
            steps = tuple(dict.fromkeys(d for _, d in config.get("device_steps") or ()))
            devices[key] = (config.get("device", "unknown"), steps)
    if not devices:
        return rows
    out = []
    for r in rows:
        device, steps = devices.get(_run_key(r), ("unknown", ()))
        out.append({**r, "device": device, **({"devices": steps} if len(steps) > 1 else {})})
    return out


def _check_comparable(rows: List[dict], files: Dict[tuple, Tuple[Path, Optional[dict]]],
                      ignore: Sequence[str] = ("seed",), across_rates: bool = False) -> None:
    """Refuse to set side by side, as runs of one configuration, runs whose
    files record different ones.

    The runs of ``rows`` are grouped by preset, strategy, variant and (unless
    ``across_rates``) noise rate, as the tables and figures group them; the
    configuration of each (its run file, as the runner compares it when it
    resumes: without the fields recorded only, ``n_queries`` and ``notes``,
    and without ``ignore``) must equal that of the group's first run.

    Raises
    ------
    ValueError
        Naming each group, the runs that differ and the fields, with both values.
    """
    groups = defaultdict(list)
    for key in sorted({_run_key(r) for r in rows}, key=lambda k: (k[:3], k[4], k[3])):
        groups[key[:3] if across_rates else key[:3] + key[4:]].append(key)
    problems, unchecked = [], []
    for group, keys in groups.items():
        known = [(k, *files[k]) for k in keys if k in files and files[k][1] is not None]
        unchecked += [_run_name(k) for k in keys if len(keys) > 1 and (k not in files or files[k][1] is None)]
        if len(known) < 2:
            continue
        _, first_path, first = known[0]
        for key, path, config in known[1:]:
            fields = _differing_fields({k: v for k, v in config.items() if k not in ignore},
                                       {k: v for k, v in first.items() if k not in ignore})
            if fields:
                problems.append(f"  {path.parent.parent.name}/runs/{path.name} differs from "
                                f"{first_path.parent.parent.name}/runs/{first_path.name} in "
                                + ", ".join(f"{f} ({a!r} against {b!r})" for f, a, b in fields)
                                + f" [{' '.join(map(str, group[:3]))}"
                                + (f", noise {100 * group[3]:g}%]" if len(group) > 3 and group[3] else "]"))
    if unchecked:
        warnings.warn("no configuration file for " + ", ".join(unchecked) + "; they are reported beside the "
                      "other runs of their group without a check that they ran the same configuration",
                      RuntimeWarning)
    if problems:
        names = sorted({p.rsplit(" [", 1)[1][:-1] for p in problems})
        raise ValueError(
            "runs of different configurations cannot be averaged as seeds or set side by side ("
            + "; ".join(names) + "):\n" + "\n".join(p.rsplit(" [", 1)[0] for p in problems)
            + "\nreport them from separate folders, or run them again with one configuration")


def _differing_fields(a: dict, b: dict) -> list:
    """``(field, value in a, value in b)`` where the run configurations ``a``
    and ``b`` differ as the runner compares them (:func:`~skdbal.experiments.runner.comparable_configs`,
    applied both ways, so that a field missing in the older file counts as its
    implicit value); preset fields as ``preset.<name>``."""
    def flat(config):
        out = {k: v for k, v in config.items() if k != "preset"}
        out.update({f"preset.{k}": v for k, v in config.get("preset", {}).items()})
        return out

    x1, y1 = map(flat, comparable_configs(a, b))
    y2, x2 = map(flat, comparable_configs(b, a))
    out = []
    for field in sorted(set(x1) | set(y1)):
        if x1.get(field, "(missing)") != y1.get(field, "(missing)") and \
                x2.get(field, "(missing)") != y2.get(field, "(missing)"):
            out.append((field, x1.get(field, "(missing)"), y2.get(field, "(missing)")))
    return out


#: The fields of Gal et al.'s (2017) MNIST protocol that their Table 1 (and
#: Anonymous, n.d., Table 1, on the same protocol) depend on; a preset that
#: keeps them is reported beside those numbers. Implementation choices that
#: do not change the protocol (selection, eval_method, batch_split,
#: mask_seeding, n_queries) may differ.
_GAL2017_PROTOCOL = ("dataset", "module", "module_params", "n_initial_per_class", "n_validation", "pool_size",
                     "pool_subsample", "n_instances", "max_epochs", "batch_size", "epoch_samples", "optimizer", "lr",
                     "weight_decay", "scaled_l2", "n_samples", "n_test")


def _gal2017_protocol(preset: dict) -> bool:
    """Whether the preset (as a run file records it) follows Gal et al.'s
    (2017) MNIST protocol, so that the published anchors apply."""
    gal = json.loads(json.dumps(PRESETS["gal2017"].as_dict(), default=str))
    return all(preset.get(field, gal[field]) == gal[field] for field in _GAL2017_PROTOCOL)


def _write_report_rows(out_dir: Path, rows: List[dict], n_initial: int, dataset: str = "MNIST",
                       end_labels: Optional[int] = None, anchors: bool = True,
                       network: str = "Bayesian CNN") -> List[Path]:
    """The report of rows without label noise (see :func:`write_report`)."""
    if any(r["variant"].startswith("blr_") for r in rows):
        table = out_dir / "last_layer.md"
        table.write_text(
            f"# {out_dir.name}: Bayesian last layer\n\n"
            "Bayesian last layer on the CNN's penultimate features (Anonymous, n.d., §4): test RMSE against one-hot "
            "targets, mean predictive variance (trace of the predictive covariance) and argmax accuracy, "
            "mean ± population std over seeds.\n\n" + last_layer_markdown(rows) + "\n")
        figure = out_dir / "last_layer.png"
        plot_last_layer(rows, figure, title="MNIST, Bayesian last layer: analytic vs mean-field VI")
        paths = [table, figure]
        rows = [r for r in rows if not r["variant"].startswith("blr_")]
        if not rows:
            return paths
    else:
        paths = []
    table = out_dir / "table.md"
    table.write_text(
        f"# {out_dir.name}: labels to 90% and 95% test accuracy\n\n"
        "Labels needed to reach 90% and 95% test accuracy. A cell such as `270 (250)` reads: 270 labelled "
        "images, of which 250 were acquired (the 20 initial ones are not counted in the papers). "
        "*Average-step* is where the learning curve averaged over seeds first reaches the accuracy; "
        "*step-average* is the mean over seeds of where each seed's curve first reaches it, ± the population "
        "standard deviation (Pilz, 2025, Appendix A, defines both). The column *accuracy at 1000 labels* is test "
        "accuracy there" + ("; the published columns give acquired images, as the papers report them" if anchors else
                    " (the published numbers of Gal et al., 2017, and Anonymous, n.d., are left out: these runs do "
                    "not follow their MNIST protocol)") + ".\n\n"
        + table_markdown(rows, n_initial, anchors=anchors, end_labels=end_labels) + "\n"
    )
    paths.append(table)
    curves = out_dir / "learning_curves.png"
    # the MC-dropout network's runs, from every initial set in the folder ("bayesian-init-kmeans_per_class"), and
    # those scored with a Laplace posterior; a grid of neither plots what it has (never an empty figure)
    present = {r["variant"] for r in rows}
    variants = tuple(sorted(v for v in present if v.startswith("bayesian"))) + (("laplace",) if "laplace" in present
                                                                                else ())
    variants = variants or tuple(sorted(present))
    plot_curves(rows, curves, variants=variants,
                title=f"{dataset}, {network}: test accuracy (mean ± std over seeds)")
    paths.append(curves)
    sweep = diversity_markdown(rows)
    if sweep:
        div_table = out_dir / "diversity_weights.md"
        div_table.write_text(
            f"# {out_dir.name}: diversity weights\n\n"
            "What a diversity weight adds to its base strategy (Anonymous, n.d., Fig 7): test accuracy minus the "
            "base's at the same seed and step, in percentage points, averaged over the steps of each window, "
            "mean ± population std over seeds.\n\n" + sweep + "\n")
        div_figure = out_dir / "diversity_weights.png"
        plot_diversity_weights(rows, div_figure, title=f"{dataset}: accuracy gain of the diversity penalty "
                                                       "over its base strategy")
        paths += [div_table, div_figure]
    if any(r["variant"] == "deterministic" for r in rows):
        det_table = out_dir / "deterministic.md"
        det_table.write_text(
            f"# {out_dir.name}: Bayesian against deterministic scoring\n\n"
            "Bayesian (MC dropout) against deterministic scoring (Gal et al. 2017, §5.2): acquired images to 90% / "
            "95% test accuracy (Average-Step over the finished runs), test accuracy (mean ± population std "
            "over seeds, %) and the paired difference seed by seed.\n\n"
            + deterministic_markdown(rows, n_initial, end_labels=end_labels) + "\n")
        paths.append(det_table)
        det = out_dir / "deterministic.png"
        plot_curves(rows, det, variants=("bayesian", "deterministic"),
                    strategies=("max_entropy", "variation_ratios"),
                    title="Bayesian (solid) vs deterministic (dashed) CNN")
        paths.append(det)
    if any(r["variant"].startswith("ensemble") for r in rows):
        cal = out_dir / "calibration.md"
        cal.write_text(
            f"# {out_dir.name}: calibration during active learning\n\n"
            "Test accuracy, top-label expected calibration error (15 equal-width bins) and negative log "
            "likelihood of the test predictions at a few label counts, mean ± population std over seeds. "
            "The MC-dropout network (`bayesian`) predicts as the preset's eval_method says (`mc`: the mean "
            "of its T passes; `deterministic`: dropout off), the deterministic baseline with dropout off, "
            "and a deep ensemble (`ensembleM`) with the mean of its members.\n\n"
            + calibration_markdown(rows) + "\n")
        cal_figure = out_dir / "calibration.png"
        plot_calibration(rows, cal_figure, title=f"{dataset}: accuracy and calibration during active learning "
                                                 "(mean ± std over seeds)")
        paths += [cal, cal_figure]
        ens = out_dir / "ensemble.png"
        variants = tuple(sorted({r["variant"] for r in rows if r["variant"].startswith(("bayesian", "ensemble"))}))
        plot_curves(rows, ens, variants=variants, title=f"{dataset}: MC dropout against a deep ensemble")
        paths.append(ens)
    return paths
