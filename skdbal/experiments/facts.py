"""A results folder's facts: the figures its pages quote, computed once from its runs.

:func:`grid_facts` reads a grid's folder as its report does
(:func:`~skdbal.experiments.grid_reading.grid_rows`) and gathers, per
strategy, variant and noise rate: each seed's labels to 90% and 95% test
accuracy, their median, step-average and average-step, the median's noise
band (:mod:`~skdbal.experiments.seed_variance`), the mean curve, the cost of a
step, and the grid's provenance; :func:`write_facts` writes them as
``facts.json``. :func:`facts_substitutions` flattens them into the MyST
substitutions that ``docs/conf.py`` hands the pages, with the words of a
comparison ("ahead", "behind", "within noise") generated from the bands.

A run that never reaches a threshold counts as more labels than any run
that does (``null`` in ``per_seed``): the median is then a count while
more than half of the seeds reach it, and ``null`` (rendered "—") otherwise
(:data:`MEDIAN_RULE`; two seeds of which one reaches give ``null``); the
step-average and average-step are ``null`` when a seed, or the mean curve,
does not reach it.

Substitution keys (MyST's must be identifiers) are
``<folder>__<group>__<field>``: ``<folder>`` the results folder's name,
``<group>`` the strategy (``stochastic(bald,power,1)`` as
``stochastic_bald_power_1``, ``diverse(bald,-0.1)`` as ``diverse_bald_m0_1``),
followed by ``__<variant>`` unless the variant is ``bayesian`` and by
``__noise<rate>`` for a noisy run; ``<field>`` such as
``acc90_median`` (acquired labels, the initial ones not counted),
``acc90_median_labels`` (all labels), ``acc90_band``, ``acc90_seeds``,
``query_s``. A comparison is ``<folder>__<a>__vs__<b>__acc90_verdict``.
"""
from __future__ import annotations

import json
import os
import re
from itertools import permutations
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Union

import numpy as np

from ..acquisition import STRATEGIES, display_name
from .curve_facts import curve_substitutions, range_text, seed_curves, two_figures
from .grid_reading import grid_rows
from .grouping import LABELS, noise_rate_of
from .provenance import NOT_RECORDED, left_out_runs, machines_of, parallelism_of, provenance_substitutions
from .seed_variance import (
    BAND_LEVEL,
    BOOTSTRAP_SEED,
    N_RESAMPLES,
    above_from,
    bootstrap_band,
    first_reach,
    median_labels,
    median_rule,
    rerun_spread,
    verdict,
)

__all__ = ["grid_facts", "write_facts", "facts_substitutions", "results_substitutions", "json_substitutions",
           "range_text", "two_figures", "count_text", "MEDIAN_RULE", "VERDICT_RULE"]

#: How a median treats a run that never reaches the threshold (written into every facts file).
MEDIAN_RULE = (median_rule()[0].upper() + median_rule()[1:]
               + "; the step-average is not reached when any seed is not.")
#: How the comparison words are decided (written into every facts file).
VERDICT_RULE = ("A is ahead of B (fewer labels) when A's bootstrap band of the median, widened on each side by the "
                "folder's rerun spread, lies wholly below B's, widened alike; behind when wholly above; otherwise "
                "within noise.")
_THRESHOLDS = (0.90, 0.95)
_COST = {"query_s": "query_time", "train_s": "train_time", "eval_s": "eval_time", "step_s": "time"}
#: A strategy's name on a page: its display name (the registry's: "BatchBALD", "EPIG"), the paper label where the
#: tables and figures have one (grouping.LABELS), and the one decorated name a paper named.
_NAMES = {**{name: display_name(s) for name, s in STRATEGIES.items()}, **LABELS,
          "stochastic(bald,power,1)": "power-BALD"}


def _slug(text: str) -> str:
    return re.sub(r"[^0-9a-zA-Z]+", "_", str(text)).strip("_")


def _group_key(strategy: str, variant: str, rate: float) -> str:
    """``diverse(bald,-0.1)`` -> ``diverse_bald_m0_1``: a minus sign is kept (as ``m``), so that it does not
    merge with ``diverse(bald,0.1)``."""
    return _slug(re.sub(r"-(?=\d)", "m", strategy)) + ("" if variant == "bayesian" else "__" + _slug(variant)) + \
        (f"__noise{_slug(f'{rate:g}')}" if rate else "")


def _num(value: float) -> Optional[float]:
    """A JSON number: ``None`` for not reached (inf or NaN), rounded so that the file is stable."""
    value = float(value)
    return None if not np.isfinite(value) else round(value, 6)


def _inf(value: Optional[float]) -> float:
    return float("inf") if value is None else float(value)


def _group_facts(runs: List[List[dict]], n_initial: int) -> dict:
    """The facts of one strategy's runs (each a list of rows by step), cut at the steps all of them have."""
    n_steps = min(len(run) for run in runs)
    labels = [float(r["n_labels"]) for r in runs[0][:n_steps]]
    acc = np.array([[float(r["accuracy"]) for r in run[:n_steps]] for run in runs])
    mean = acc.mean(axis=0)
    out = {"strategy": runs[0][0]["strategy"], "variant": runs[0][0]["variant"],
           "noise_rate": noise_rate_of(runs[0][0]), "seeds": [int(run[0]["seed"]) for run in runs],
           "steps_done": [len(run) - 1 for run in runs], "labels": labels,
           "mean_accuracy": [_num(a) for a in mean]}
    for thr in _THRESHOLDS:
        per_seed = [first_reach([r["n_labels"] for r in run], [r["accuracy"] for r in run], thr) for run in runs]
        finite = [v for v in per_seed if np.isfinite(v)]
        band = bootstrap_band(per_seed)
        out[f"acc{100 * thr:.0f}"] = {
            "threshold": thr, "per_seed": [_num(v) for v in per_seed], "reached": len(finite),
            "median": _num(median_labels(per_seed)), "band": [_num(band[0]), _num(band[1])],
            "step_average": _num(np.mean(per_seed)) if len(finite) == len(per_seed) else None,
            "step_average_std": _num(np.std(per_seed)) if len(finite) == len(per_seed) else None,
            "average_step": _num(first_reach(labels, mean, thr)),
        }
    cost = {}
    for name, column in _COST.items():
        values = [float(r[column]) for run in runs for r in run
                  if int(r["step"]) >= 1 and r.get(column) not in (None, "")]
        cost[name] = _num(np.median(values)) if values else None
    totals = [sum(float(r["time"]) for r in run if r.get("time") not in (None, "")) for run in runs]
    cost["run_total_s"] = [_num(t) for t in totals]
    slow = max(((float(r["time"]), int(r["step"])) for run in runs for r in run
                if r.get("time") not in (None, "")), default=None)
    cost["slowest_step"] = None if slow is None else {"step": slow[1], "s": _num(slow[0])}
    out["step0_accuracy"] = [_num(run[0]["accuracy"]) for run in runs]
    out.update(seed_curves(runs, n_steps))
    out["cost"] = cost
    return out


def grid_facts(out_dir: Union[str, os.PathLike], reruns: Sequence[Union[str, os.PathLike]] = (),
               rerun_floor: Optional[Union[str, os.PathLike]] = None) -> dict:
    """The facts of a grid's folder (see the module's description for the rules).

    Parameters
    ----------
    out_dir : path
        A folder written by :func:`~skdbal.experiments.run_grid`.
    reruns : sequence of paths, default=()
        Folders whose runs repeat some of ``out_dir``'s (same run name and
        the same preset in the run files): each such strategy's medians there
        and their spread are recorded, and the largest spread is the
        folder's rerun spread.
    rerun_floor : path, optional
        A folder whose ``facts.json`` measured the rerun spread on the same
        preset, taken as this folder's where ``reruns`` measure none.

    Returns
    -------
    facts : dict
        ``groups`` (per strategy: ``acc90`` and ``acc95`` with ``per_seed``,
        ``median``, ``band``, ``step_average``, ``average_step``, all in
        labels with the initial ones counted; ``mean_accuracy``, ``cost``),
        ``comparisons`` (per ordered pair of groups of one noise rate, the
        verdict per threshold and where A's mean curve stays above B's),
        ``noise``, ``reruns``, ``provenance``, ``preset``, ``median_rule``.

    Examples
    --------
    >>> import tempfile
    >>> from skdbal.experiments import get_preset, run_grid
    >>> from skdbal.experiments.facts import grid_facts
    >>> tiny = get_preset("gal2017", dataset="digits", n_queries=2, max_epochs=2, n_samples=4,
    ...                   pool_subsample=100, n_validation=50, module_params={"kernel_size": 3})
    >>> out = tempfile.mkdtemp()
    >>> _ = run_grid(tiny, ["bald", "random"], seeds=[1, 2], out_dir=out, torch_threads=1, verbose=False)
    >>> facts = grid_facts(out)
    >>> sorted(facts["groups"]), facts["groups"]["bald"]["seeds"], facts["noise"]["n_resamples"]
    (['bald', 'random'], [1, 2], 10000)
    >>> sorted(facts["comparisons"]["bald__vs__random"])
    ['above_from', 'acc90', 'acc95']
    """
    out_dir = Path(out_dir)
    rows, files, preset, n_initial, end_labels = grid_rows(out_dir)
    by_run: Dict[tuple, List[dict]] = {}
    for r in rows:
        by_run.setdefault((r["strategy"], r["variant"], noise_rate_of(r), int(r["seed"])), []).append(r)
    grouped: Dict[str, List[List[dict]]] = {}
    for (strategy, variant, rate, seed) in sorted(by_run, key=lambda k: (k[0], k[1], k[2], k[3])):
        run = sorted(by_run[(strategy, variant, rate, seed)], key=lambda r: int(r["step"]))
        grouped.setdefault(_group_key(strategy, variant, rate), []).append(run)
    groups = {}
    for key, runs in grouped.items():
        longest = max(len(run) for run in runs)  # the runs that got furthest, as the tables count them
        groups[key] = _group_facts([run for run in runs if len(run) == longest], n_initial)
    spreads = _rerun_facts(out_dir, groups, reruns)
    floor = max((s for g in spreads.values() for s in g["spread"].values() if s is not None), default=None)
    floor_source = [Path(p).name for p in reruns] if floor is not None else None
    if floor is None and rerun_floor is not None:
        other = json.loads((Path(rerun_floor) / "facts.json").read_text())
        floor, floor_source = other["reruns"]["spread_max"], other["reruns"]["measured_in"]
    comparisons = {}
    for a, b in permutations(sorted(groups), 2):
        ga, gb = groups[a], groups[b]
        if ga["noise_rate"] != gb["noise_rate"]:
            continue
        pair = {f"acc{100 * t:.0f}": verdict(tuple(map(_inf, ga[f"acc{100 * t:.0f}"]["band"])),
                                             tuple(map(_inf, gb[f"acc{100 * t:.0f}"]["band"])), floor or 0.0)
                for t in _THRESHOLDS}
        n = min(len(ga["labels"]), len(gb["labels"]))
        pair["above_from"] = _num(above_from(ga["labels"][:n], ga["mean_accuracy"][:n], gb["mean_accuracy"][:n]))
        comparisons[f"{a}__vs__{b}"] = pair
    grid = json.loads((out_dir / "grid.json").read_text()) if (out_dir / "grid.json").is_file() else {}
    run_meta = [meta for _, meta in files.values() if meta]
    return {
        "schema": 1, "folder": out_dir.name, "n_initial": n_initial, "end_labels": end_labels,
        "thresholds": list(_THRESHOLDS), "median_rule": MEDIAN_RULE,
        "noise": {"method": "percentile bootstrap over seeds of the median", "n_resamples": N_RESAMPLES,
                  "level": BAND_LEVEL, "generator_seed": BOOTSTRAP_SEED, "verdict_rule": VERDICT_RULE},
        "reruns": {"folders": [Path(p).name for p in reruns], "per_group": spreads, "spread_max": floor,
                   "measured_in": floor_source,
                   "floor_from": Path(rerun_floor).name if rerun_floor is not None and not spreads else None},
        "preset": {k: v for k, v in (grid.get("preset") or preset).items() if not isinstance(v, (dict, list))},
        "provenance": {
            "machines": machines_of(grid),
            "invocations": [{**{k: inv.get(k) for k in ("started", "device", "n_jobs", "torch_threads", "machine")
                                if k in inv}, "commit": inv.get("commit") or NOT_RECORDED}
                            for inv in grid.get("invocations", [])],
            "parallelism": parallelism_of(grid),
            "left_out_invocations": left_out_runs(out_dir),
            "runs_without_environment": sum(1 for m in run_meta if "environment" not in m),
            "devices": sorted({str(m.get("device") or "unrecorded") for m in run_meta}),
            "results_versions": sorted({m.get("results_version") for m in run_meta if m.get("results_version")}),
            "runs": sum(len(g["seeds"]) for g in groups.values()),
        },
        "groups": groups, "comparisons": comparisons,
    }


def _rerun_facts(out_dir: Path, groups: dict, reruns: Sequence) -> dict:
    """Per group with a rerun: the medians in each folder and their spread, per threshold."""
    out = {}
    for other in reruns:
        other = Path(other)
        theirs = grid_facts(other)["groups"]
        for key, mine in groups.items():
            if key not in theirs or theirs[key]["seeds"] != mine["seeds"] \
                    or not _same_preset(out_dir, other, mine["strategy"]):
                continue
            entry = out.setdefault(key, {"medians": {}, "spread": {}})
            for t in _THRESHOLDS:
                name = f"acc{100 * t:.0f}"
                entry["medians"].setdefault(name, {out_dir.name: mine[name]["median"]})[other.name] = \
                    theirs[key][name]["median"]
                entry["spread"][name] = _num(rerun_spread([_inf(v) for v in entry["medians"][name].values()]))
    return out


def _same_preset(a: Path, b: Path, strategy: str) -> bool:
    """Whether the two folders' run files of ``strategy`` record one preset (a field a file predates, as None)."""
    def presets(folder):
        configs = [json.loads(p.read_text()) for p in sorted((folder / "runs").glob("*.json"))]
        return [{k: v for k, v in (c.get("preset") or {}).items() if v is not None}
                for c in configs if c.get("strategy") == strategy]
    pa, pb = presets(a), presets(b)
    return bool(pa) and bool(pb) and all(p == pa[0] for p in pa + pb)


def write_facts(out_dir: Union[str, os.PathLike], reruns: Sequence[Union[str, os.PathLike]] = (),
                rerun_floor: Optional[Union[str, os.PathLike]] = None) -> Path:
    """Write :func:`grid_facts` as ``facts.json`` in ``out_dir`` (sorted keys, so reruns write the same bytes).

    Examples
    --------
    >>> import json, tempfile
    >>> from skdbal.experiments import get_preset, run_grid
    >>> from skdbal.experiments.facts import write_facts
    >>> tiny = get_preset("gal2017", dataset="digits", n_queries=1, max_epochs=2, n_samples=4,
    ...                   pool_subsample=100, n_validation=50, module_params={"kernel_size": 3})
    >>> out = tempfile.mkdtemp()
    >>> _ = run_grid(tiny, ["random"], seeds=[1], out_dir=out, torch_threads=1, verbose=False)
    >>> path = write_facts(out)
    >>> path.name, path.read_bytes() == write_facts(out).read_bytes()
    ('facts.json', True)
    """
    path = Path(out_dir) / "facts.json"
    path.write_text(json.dumps(grid_facts(out_dir, reruns, rerun_floor), indent=1, sort_keys=True) + "\n")
    return path


def _fmt(value, places: int = 1) -> str:
    """A count as an integer where it is one, else to ``places`` decimals; "—" for not reached."""
    if value is None:
        return "—"
    value = float(value)
    return f"{value:.0f}" if value.is_integer() else f"{value:.{places}f}"


def count_text(n: int, noun: str) -> str:
    """``n`` and ``noun``, the noun in the plural unless ``n`` is 1: ``"1 run"``, ``"3 runs"``.

    Examples
    --------
    >>> from skdbal.experiments.facts import count_text
    >>> count_text(1, "run"), count_text(3, "run")
    ('1 run', '3 runs')
    """
    return f"{n} {noun}" + ("" if n == 1 else "s")


def facts_substitutions(facts: dict, prefix: Optional[str] = None) -> Dict[str, str]:
    """The MyST substitutions of one facts file: ``{key: text}`` (see the module's description for the keys).

    Label counts are acquired labels (the initial ones not counted) unless
    the field ends in ``_labels``.

    Examples
    --------
    >>> from skdbal.experiments.facts import facts_substitutions
    >>> acc = {"per_seed": [100.0, 110.0, None], "median": 110.0, "band": [100.0, None], "reached": 2,
    ...        "step_average": None, "step_average_std": None, "average_step": 110.0}
    >>> facts = {"folder": "g", "n_initial": 20, "groups": {"bald": {"strategy": "bald", "seeds": [1, 2, 3],
    ...          "acc90": acc, "acc95": acc, "mean_accuracy": [0.662], "cost": {"query_s": 0.421}}},
    ...          "comparisons": {}, "noise": {"n_resamples": 10000, "level": 0.9}, "reruns": {}, "preset": {},
    ...          "provenance": {"runs": 3}}
    >>> subs = facts_substitutions(facts)
    >>> subs["g__bald__acc90_median"], subs["g__bald__acc90_seeds"], subs["g__bald__acc90_band"]
    ('90', '80, 90, not reached', '80 to not reached')
    >>> subs["g__bald__query_s"], subs["g__bald__step0_accuracy"]
    ('0.42', '66.2%')
    """
    p = prefix or facts["folder"]
    n0 = facts["n_initial"]

    def acquired(v):
        return None if v is None else float(v) - n0

    subs = {f"{p}__runs": str(facts["provenance"]["runs"]),
            f"{p}__runs_text": count_text(facts["provenance"]["runs"], "run"),
            f"{p}__n_resamples": f"{facts['noise']['n_resamples']:,}",
            f"{p}__band_level": f"{100 * facts['noise']['level']:.0f}%",
            f"{p}__n_initial": str(n0), f"{p}__end_labels": _fmt(facts.get("end_labels"))}
    if facts["reruns"].get("spread_max") is not None:
        subs[f"{p}__rerun_spread_max"] = _fmt(facts["reruns"]["spread_max"])
    subs.update({f"{p}__preset__{k}": (f"{v:,}" if isinstance(v, int) and abs(v) >= 1000 else str(v))
                 for k, v in facts["preset"].items()})
    longest = [t for g in facts["groups"].values() for t in g["cost"].get("run_total_s", []) if t is not None]
    if longest:
        subs[f"{p}__longest_run_s"] = f"{max(longest):.0f}"
        subs[f"{p}__longest_run_min"] = f"{max(longest) / 60:.0f}"
        q1, q2, q3 = np.percentile(longest, [25, 50, 75]) / 60
        subs[f"{p}__run_min_median"], subs[f"{p}__run_min_iqr"] = f"{q2:.0f}", range_text(f"{q1:.0f}", f"{q3:.0f}")
        subs[f"{p}__job_hours"] = f"{sum(longest) / 3600:.1f}"
    steps = [g["cost"]["step_s"] for g in facts["groups"].values() if g["cost"].get("step_s") is not None]
    if steps:
        subs[f"{p}__step_s_min"], subs[f"{p}__step_s_max"] = two_figures(min(steps)), two_figures(max(steps))
        subs[f"{p}__step_s_range"] = range_text(subs[f"{p}__step_s_min"], subs[f"{p}__step_s_max"])
    for key, g in facts["groups"].items():
        k = f"{p}__{key}"
        subs[f"{k}__name"] = _NAMES.get(g["strategy"], g["strategy"])
        subs[f"{k}__runs"] = str(len(g["seeds"]))
        subs[f"{k}__step0_accuracy"] = f"{100 * g['mean_accuracy'][0]:.1f}%"
        for seed, acc in zip(g["seeds"], g.get("step0_accuracy", [])):
            subs[f"{k}__step0_accuracy_seed{seed}"] = f"{100 * acc:.2f}%"
        slow = g["cost"].get("slowest_step")
        if slow:
            subs[f"{k}__slowest_step"], subs[f"{k}__slowest_step_min"] = str(slow["step"]), f"{slow['s'] / 60:.0f}"
        for name in ("acc90", "acc95"):
            a = g[name]
            subs[f"{k}__{name}_median"] = _fmt(acquired(a["median"]))
            subs[f"{k}__{name}_median_labels"] = _fmt(a["median"])
            subs[f"{k}__{name}_step_average"] = _fmt(acquired(a["step_average"]))
            subs[f"{k}__{name}_average_step"] = _fmt(acquired(a["average_step"]))
            subs[f"{k}__{name}_reached"] = f"{a['reached']}/{len(a['per_seed'])}"
            seeds = [_fmt(acquired(v)) if v is not None else "not reached" for v in a["per_seed"]]
            subs[f"{k}__{name}_seeds"] = ", ".join(seeds)
            for seed, text in zip(g["seeds"], seeds):
                subs[f"{k}__{name}_seed{seed}"] = text
            band = [_fmt(acquired(v)) if v is not None else "not reached" for v in a["band"]]
            subs[f"{k}__{name}_band"] = band[0] if band[0] == band[1] else f"{band[0]} to {band[1]}"
        for name, value in g["cost"].items():
            if name not in ("run_total_s", "slowest_step"):
                subs[f"{k}__{name}"] = "n/a" if value is None else f"{value:.2f}"
    for pair, c in facts["comparisons"].items():
        for name in ("acc90", "acc95"):
            subs[f"{p}__{pair}__{name}_verdict"] = _PHRASE[c[name]]
        subs[f"{p}__{pair}__above_from"] = _fmt(acquired(c["above_from"]))
        for name in ("acc90", "acc95"):  # A's average-step as a share of B's (acquired labels)
            va, vb = (acquired(facts["groups"][x][name]["average_step"]) for x in pair.split("__vs__"))
            if va is not None and vb:
                subs[f"{p}__{pair}__{name}_average_step_share"] = f"{100 * va / vb:.0f}%"
        a, b = (facts["groups"][x]["cost"].get("query_s") for x in pair.split("__vs__"))
        if a is not None and b:
            subs[f"{p}__{pair}__query_ratio"] = f"{a / b:.2f}"
    return subs


#: A verdict as a page writes it before the other strategy's name: "EPIG is {{ …_verdict }} BALD".
_PHRASE = {"ahead": "ahead of", "behind": "behind", "within noise": "within noise of"}


def _order(facts: dict, name: str) -> List[tuple]:
    """``[(median, strategy label)]`` of the MC-dropout groups, fewest labels first."""
    return sorted(((_inf(g[name]["median"]) - facts["n_initial"], _NAMES.get(g["strategy"], g["strategy"]))
                   for g in facts["groups"].values() if g["variant"] == "bayesian" and not g["noise_rate"]))


def _order_text(order: List[tuple]) -> str:
    parts = []
    for i, (value, label) in enumerate(order):
        sep = "" if i == 0 else (" = " if value == order[i - 1][0] else " < ")
        parts.append(f"{sep}{label} ({_fmt(value) if np.isfinite(value) else 'not reached'})")
    return "".join(parts)


def results_substitutions(results_dir: Union[str, os.PathLike], same_order: Sequence[tuple] = (),
                          above: Sequence[tuple] = (), at: Optional[Dict[str, Sequence[int]]] = None,
                          pairs: Sequence[tuple] = (), drops: Optional[Dict[str, Sequence[int]]] = None,
                          spreads: Sequence[tuple] = ()) -> Dict[str, str]:
    """The substitutions of every ``facts.json`` under ``results_dir``, and of some comparisons across folders.

    Each folder's :func:`facts_substitutions`, plus ``<folder>__order_acc90``
    (the strategies by median, e.g. ``BADGE (75) < BALD (80)``); for each
    ``(folder_a, folder_b)`` in ``same_order``,
    ``<folder_a>__vs__<folder_b>__order_acc90_same`` ("the same" or "not
    the same"); for each ``(folder_a, group_a, folder_b, group_b)`` in
    ``above``, ``<folder_a>__<group_a>__vs__<folder_b>__<group_b>__above_from``:
    the acquired labels from which A's mean curve stays above B's; and the
    points of the curves and the pairs declared in ``at``, ``pairs``, ``drops`` and ``spreads``
    (:func:`~skdbal.experiments.curve_facts.curve_substitutions`).

    Examples
    --------
    >>> import tempfile
    >>> from skdbal.experiments.facts import results_substitutions
    >>> results_substitutions(tempfile.mkdtemp())
    {}
    """
    results_dir = Path(results_dir)
    facts = {path.parent.name: json.loads(path.read_text()) for path in sorted(results_dir.glob("*/facts.json"))}
    subs: Dict[str, str] = {}
    for folder, f in facts.items():
        subs.update(facts_substitutions(f))
        for name in ("acc90", "acc95"):
            subs[f"{folder}__order_{name}"] = _order_text(_order(f, name))
    if facts:
        subs["results__median_rule"] = median_rule('"—"')
    subs.update(provenance_substitutions(facts))
    for a, b in same_order:
        for name in ("acc90", "acc95"):
            same = [s for _, s in _order(facts[a], name)] == [s for _, s in _order(facts[b], name)]
            subs[f"{a}__vs__{b}__order_{name}_same"] = "the same" if same else "not the same"
    for fa, ga, fb, gb in above:
        A, B = facts[fa]["groups"][ga], facts[fb]["groups"][gb]
        n = min(len(A["labels"]), len(B["labels"]))
        value = above_from(A["labels"][:n], [_inf(v) for v in A["mean_accuracy"][:n]],
                           [_inf(v) for v in B["mean_accuracy"][:n]])
        subs[f"{fa}__{ga}__vs__{fb}__{gb}__above_from"] = _fmt(None if not np.isfinite(value)
                                                               else value - facts[fa]["n_initial"])
    subs.update(curve_substitutions(facts, at=at, pairs=pairs, drops=drops, spreads=spreads))
    return subs


def _fmt_measure(value) -> str:
    """A benchmark's number: integers as they are, 1,000 and above with separators, else 3 significant digits."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    if abs(value) >= 1000:
        return f"{round(value):,}"
    return f"{value:#.3g}".rstrip(".") if value else "0"


def json_substitutions(obj, prefix: str) -> Dict[str, str]:
    """A benchmark JSON's scalars as substitutions: ``<prefix>__<key>__<key>…`` (keys slugged).

    A list of a run's steps (mappings with ``step``) gives ``…__step<n>__<key>``;
    other lists are left out. An ``accuracy`` also gives ``…accuracy_pct``
    (``97.59%``).
    A mapping whose values all carry ``runs`` also gets ``<prefix>__runs_summary``:
    how many runs each of its entries had, e.g. ``3 for A; 2 for the other 8``,
    and ``<prefix>__min_<field>`` / ``<prefix>__max_<field>`` over the entries.

    Examples
    --------
    >>> from skdbal.experiments.facts import json_substitutions
    >>> bench = {"part": {"A": {"img_per_s": 2655.2, "runs": 3}, "B": {"img_per_s": 10921.1, "runs": 2},
    ...                   "C": {"img_per_s": 0.2431, "runs": 2}}}
    >>> subs = json_substitutions(bench, "bench")
    >>> subs["bench__part__A__img_per_s"], subs["bench__part__C__img_per_s"], subs["bench__part__runs_summary"]
    ('2,655', '0.243', '3 for A; 2 for the other 2')
    """
    subs: Dict[str, str] = {}
    if isinstance(obj, dict):
        if obj and all(isinstance(v, dict) and "runs" in v for v in obj.values()):
            counts: Dict[int, List[str]] = {}
            for name, v in obj.items():
                counts.setdefault(v["runs"], []).append(name)
            most = max(counts, key=lambda c: len(counts[c]))
            parts = [f"{c} for {', '.join(names)}" for c, names in sorted(counts.items(), reverse=True) if c != most]
            parts.append(f"{most} for " + ("the other " if parts else "all ") + str(len(counts[most])))
            subs[f"{prefix}__runs_summary"] = "; ".join(parts)
            fields = set.intersection(*(set(k for k, x in v.items() if isinstance(x, (int, float))
                                            and not isinstance(x, bool)) for v in obj.values()))
            for field in sorted(fields):
                values = [v[field] for v in obj.values()]
                subs[f"{prefix}__min_{_slug(field)}"] = _fmt_measure(min(values))
                subs[f"{prefix}__max_{_slug(field)}"] = _fmt_measure(max(values))
        for k, v in obj.items():
            subs.update(json_substitutions(v, f"{prefix}__{_slug(k)}"))
    elif isinstance(obj, list):  # a run's steps: by step number
        if obj and all(isinstance(v, dict) and "step" in v for v in obj):
            for v in obj:
                subs.update(json_substitutions({k: x for k, x in v.items() if k != "step"},
                                               f"{prefix}__step{v['step']}"))
    elif obj is not None:
        subs[prefix] = _fmt_measure(obj)
        if prefix.endswith("accuracy") and isinstance(obj, float):
            subs[prefix + "_pct"] = f"{100 * obj:.2f}%"
    return subs
