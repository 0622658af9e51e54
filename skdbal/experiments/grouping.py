"""How the report's sections group, order, name and colour runs, and say where they ran.

The rows of ``results.csv`` are grouped by (preset, strategy, variant) into
runs, one per seed (:func:`group_runs`); a section counts the runs of a
group that got furthest (:func:`longest_runs`) and names those it leaves out
(:func:`not_counted`). Strategies are ordered, labelled and coloured as in
Gal et al. (2017), and where runs of one table or figure come from more
than one device (CPU and GPU compute different numbers) the devices are
named by seed. Nothing here imports torch or matplotlib.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Dict, List, Sequence, Tuple

__all__ = ["group_runs"]

#: The strategies of Gal et al. (2017), in the order of their table: they come first, with fixed colours.
_ORDER = ["bald", "variation_ratios", "max_entropy", "mean_std", "random"]
#: How tables and legends name a strategy (any other by its name).
LABELS = {"bald": "BALD", "variation_ratios": "Var Ratios", "max_entropy": "Max Entropy",
          "mean_std": "Mean STD", "random": "Random", "predictive_variance": "Predictive variance"}


def group_runs(rows: List[dict]) -> Dict[Tuple[str, str, str], List[List[dict]]]:
    """``{(preset, strategy, variant): [rows of each seed's run, by seed]}``.

    Examples
    --------
    >>> from skdbal.experiments.grouping import group_runs
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


def longest_runs(runs):
    """The runs of a group that got furthest (the finished ones, once any has finished)."""
    longest = max(len(r) for r in runs)
    return [r for r in runs if len(r) == longest]


def not_counted(runs, counted) -> str:
    """``"not counted: seed 3 at step 1"`` for the runs of a group left out of
    ``counted`` (see :func:`longest_runs`), ``""`` when none is."""
    left = [r for r in runs if not any(r is c for c in counted)]
    return "not counted: " + ", ".join(f"seed {r[0]['seed']} at step {len(r) - 1}" for r in left) if left else ""


def _devices_of(run) -> set:
    """The devices whose steps make up ``run`` (rows carrying ``device`` and,
    for a run resumed on another device, ``devices``; see :func:`~skdbal.experiments.report.write_report`)."""
    first = run[0]
    return set(first.get("devices") or ((first["device"],) if "device" in first else ()))


def devices_mixed(runs) -> bool:
    """Whether ``runs`` come from more than one device, a run resumed on
    another device included: CPU and GPU runs of one seed give other numbers."""
    return len(set().union(*(_devices_of(run) for run in runs))) > 1 if runs else False


def _seed_list(seeds) -> str:
    seeds = sorted(seeds)
    return ("seed " if len(seeds) == 1 else "seeds ") + ", ".join(str(s) for s in seeds)


def devices_by_seed(runs) -> str:
    """The device of a group's runs: ``"cpu"``, or ``"cpu (seed 1), cuda (seeds 2, 3)"``."""
    seeds = defaultdict(set)
    for run in runs:
        seeds[run[0].get("device", "unknown")].add(run[0]["seed"])
    if len(seeds) == 1:
        return next(iter(seeds))
    return ", ".join(f"{device} ({_seed_list(s)})" for device, s in sorted(seeds.items(), key=lambda kv: min(kv[1])))


def device_note(runs_by_name: Dict[str, List[List[dict]]]) -> str:
    """Which of the runs ran on which device, for a figure that sets them side
    by side: ``""`` when they carry no device or share one, else by seed
    (``"seed 1: cpu; seeds 2, 3: cuda"``) when every seed ran on one device,
    else by name (``"BALD, Random: cpu; filter(bald,batch): cuda"``). A run
    resumed on another device counts as mixed (its device reads
    ``"cpu (steps 0-11), cuda (steps 12-)"``)."""
    device = {(name, run[0]["seed"]): run[0]["device"] for name, runs in runs_by_name.items() for run in runs
              if "device" in run[0]}
    if not devices_mixed([run for runs in runs_by_name.values() for run in runs]):
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
    return "; ".join(f"{name}: {devices_by_seed(runs)}" for name, runs in runs_by_name.items())


def sort_key(key):
    """The order of groups ``(preset, strategy, variant)`` in tables and legends: Bayesian first, then
    Gal et al.'s strategies in their order, then the others by name."""
    preset, strategy, variant = key
    return (preset, variant != "bayesian", _ORDER.index(strategy) if strategy in _ORDER else 99, strategy)


def strategy_color(strategy: str, strategies: Sequence[str]) -> str:
    """One colour per strategy: the named ones fixed, the others (decorated) after them."""
    if strategy in _ORDER:
        return f"C{_ORDER.index(strategy)}"
    others = [s for s in strategies if s not in _ORDER]
    return f"C{(len(_ORDER) + others.index(strategy)) % 10}"


def noise_rate_of(row: dict) -> float:
    """A row's noise rate; 0 for a clean run (whose ``noise_rate`` is empty)."""
    return row.get("noise_rate") or 0.0

