"""The per-seed curves of a results folder's facts, and the figures a page derives from them.

:func:`seed_curves` adds to a group's facts each seed's test accuracy by
step (``seed_accuracy``), the other measured columns of its rows where any
run has them (``seed_columns``: RMSE, mean variance, ECE, NLL, the noise
filter's rejects and threshold, ...) and each seed's device. The page
figures that quote a point of a curve, a window of steps or a difference
between two groups, seed by seed, are derived from these by
:func:`curve_substitutions`, for the points, windows and pairs a page
declares (``docs/_substitutions.py``): nothing is typed by hand.

Keys (MyST's must be identifiers; ``<g>`` is a group key of
:mod:`~skdbal.experiments.facts`):

- ``<folder>__<g>__at<L>``: mean ± population std over seeds of the test
  accuracy at ``L`` labels in all (``96.17 ± 0.48%``), ``…__at<L>_mean``
  (``96.2%``), ``…__at<L>_seed<s>`` (``96.4%``), ``…__at<L>_range``
  (``95.7–96.6%``), and for each other column ``…__at<L>__<column>`` (mean);
- ``<folder>__<g>__mean__<column>``: a column's mean over the acquisition
  steps and the seeds (``10.33``), with ``…_max`` its largest value in a step;
- for a pair ``A - B`` (``<fa>__<ga>__minus__<fb>__<gb>``), seed by seed on
  the seeds both have: ``…__at<L>`` (mean difference in points, signed),
  ``…__at<L>_seed<s>``, ``…__at<L>_seeds`` ("+2.9, −0.3 and +14.1"),
  ``…__steps<a>_<b>`` (mean ± std over seeds of each seed's mean difference
  over steps a to b), ``…__steps<a>_<b>_seed<s>``, ``…__steps<a>_<b>_mean``,
  ``…__acc90_seeds`` (labels to 90%, signed, per seed) and
  ``…__at<L>_above`` ("all 3 seeds", "2 of 3 seeds", "no seed"): on how many
  seeds A is above B; ``…__below_steps`` ("2 and 4–15"): the acquisition
  steps at which A's mean curve is below B's, ``…__below_at`` the same as a phrase ("at steps 7 and
  11", "at step 3", "at no step"); ``…__at<L>_seeds2`` the per-seed differences to two decimals and
  ``…__at<L>_verdict`` the sign they share ("higher on all 3 seeds (+0.12 to +0.55 points)", "higher
  on 2 of 3 seeds and lower on 1 (−0.04 to +0.55 points)");
- ``<folder>__step0_spread_max``: how far apart, in points, the step-0
  accuracies of one seed's runs are in the folder (runs of one seed start
  from one labelled set; the largest over seeds).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import numpy as np

__all__ = ["seed_curves", "curve_substitutions", "range_text", "two_figures", "EXTRA_COLUMNS"]

#: The measured columns of a run's rows, besides accuracy, that the facts keep where a run has them.
EXTRA_COLUMNS = ("rmse", "mean_variance", "ece", "nll", "n_rejected", "n_rejected_flipped",
                 "n_flipped_acquired", "threshold", "noise_estimate")


def _num(value) -> Optional[float]:
    if value in (None, ""):
        return None
    value = float(value)
    return None if not np.isfinite(value) else round(value, 6)


def seed_curves(runs: List[List[dict]], n_steps: int) -> dict:
    """Each seed's accuracy by step, its other measured columns and its device (facts fields).

    Parameters
    ----------
    runs : list of lists of dict
        One strategy's runs, each a list of result rows by step.
    n_steps : int
        The steps all of them have (the curves are cut there).

    Returns
    -------
    fields : dict
        ``seed_accuracy`` (one list per run), ``seed_columns`` (column ->
        one list per run, ``None`` where a row has no value; only the
        columns some run has) and ``seed_devices``.

    Examples
    --------
    >>> from skdbal.experiments.curve_facts import seed_curves
    >>> runs = [[{"accuracy": "0.5", "ece": "0.1"}, {"accuracy": "0.7", "ece": ""}],
    ...         [{"accuracy": "0.6", "ece": "0.2"}, {"accuracy": "0.8", "ece": "0.3"}]]
    >>> f = seed_curves(runs, 2)
    >>> f["seed_accuracy"], f["seed_columns"]
    ([[0.5, 0.7], [0.6, 0.8]], {'ece': [[0.1, None], [0.2, 0.3]]})
    """
    out = {"seed_accuracy": [[_num(r["accuracy"]) for r in run[:n_steps]] for run in runs],
           "seed_columns": {}, "seed_devices": [str(run[0].get("device", "unknown")) for run in runs]}
    for column in EXTRA_COLUMNS:
        values = [[_num(r.get(column)) for r in run[:n_steps]] for run in runs]
        if any(v is not None for run in values for v in run):
            out["seed_columns"][column] = values
    if all(d == "unknown" for d in out["seed_devices"]):
        del out["seed_devices"]
    return out


def two_figures(value: float) -> str:
    """``value`` to two significant figures, keeping a final zero below ten: ``"4.0"``, not ``"4"``.

    Parameters
    ----------
    value : float

    Returns
    -------
    str

    Examples
    --------
    >>> from skdbal.experiments.curve_facts import two_figures
    >>> two_figures(3.997), two_figures(0.6364), two_figures(12.3), two_figures(5.44)
    ('4.0', '0.64', '12', '5.4')
    """
    text = f"{value:.2g}"
    return f"{value:.1f}" if "e" not in text and "." not in text and abs(value) < 10 else text


def range_text(low: str, high: str) -> str:
    """Two formatted ends as a range, ``"0.57–1.7"``; one value where the ends are equal (``"0.82"``).

    Examples
    --------
    >>> from skdbal.experiments.curve_facts import range_text
    >>> range_text("0.57", "1.7"), range_text("0.82", "0.82")
    ('0.57–1.7', '0.82')
    """
    return low if low == high else f"{low}–{high}"


def _pct(value: float, places: int = 1) -> str:
    return f"{100 * value:.{places}f}%"


def _signed(value: float, places: int = 1) -> str:
    text = f"{value:+.{places}f}"
    return "+0" + text[2:] if text.startswith("-0") and float(text) == 0 else text.replace("-", "−")


def _listing(parts: List[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _step_of(group: dict, labels: float) -> int:
    try:
        return group["labels"].index(float(labels))
    except ValueError:
        raise KeyError(f"no step at {labels} labels in {group['strategy']}") from None


def _at_substitutions(key: str, group: dict, labels: int) -> Dict[str, str]:
    i = _step_of(group, labels)
    acc = np.array([run[i] for run in group["seed_accuracy"]], dtype=float)
    subs = {f"{key}__at{labels}": f"{100 * acc.mean():.2f} ± {100 * acc.std():.2f}%",
            f"{key}__at{labels}_mean": _pct(acc.mean()),
            f"{key}__at{labels}_range": range_text(f"{100 * acc.min():.1f}", f"{100 * acc.max():.1f}") + "%"}
    for seed, a in zip(group["seeds"], acc):
        subs[f"{key}__at{labels}_seed{seed}"] = _pct(a)
    for column, runs in group.get("seed_columns", {}).items():
        values = [run[i] for run in runs if run[i] is not None]
        if values:
            subs[f"{key}__at{labels}__{column}"] = f"{np.mean(values):.3f}"
    return subs


def _filter_substitutions(key: str, group: dict) -> Dict[str, str]:
    """A noise filter's rejects a step, precision, recall and share of flipped labels, as its report counts them."""
    cols = group.get("seed_columns", {})

    def total(column):
        values = [v for run in cols.get(column, []) for v in run[1:] if v is not None]
        return float(np.sum(values)) if values else None

    subs = {}
    rejected, rejected_flipped, acquired = total("n_rejected"), total("n_rejected_flipped"), \
        total("n_flipped_acquired")
    n_steps = sum(len(run) - 1 for run in group["seed_accuracy"])
    if rejected is not None and n_steps:
        subs[f"{key}__rejects_per_step"] = f"{rejected / n_steps:.2f}"
        if rejected:
            subs[f"{key}__precision"] = f"{rejected_flipped / rejected:.2f}"
        if rejected_flipped + (acquired or 0.0):
            subs[f"{key}__recall"] = f"{rejected_flipped / (rejected_flipped + (acquired or 0.0)):.2f}"
    if acquired is not None and n_steps:
        subs[f"{key}__flipped_per_step"] = f"{acquired / n_steps:.2f}"
        shares = [sum(v or 0 for v in run) / group["labels"][len(run) - 1]
                  for run in cols["n_flipped_acquired"]]
        subs[f"{key}__flipped_share"] = _pct(float(np.mean(shares)))
    return subs


def _column_substitutions(key: str, group: dict) -> Dict[str, str]:
    subs = _filter_substitutions(key, group)
    for column, runs in group.get("seed_columns", {}).items():
        values = [v for run in runs for v in run[1:] if v is not None]
        if values:
            subs[f"{key}__mean__{column}"] = f"{np.mean(values):.3g}" if column.startswith("n_") \
                else f"{np.mean(values):.3f}"
            subs[f"{key}__mean__{column}_max"] = f"{np.max(values):.3g}"
    return subs


def _ranges(steps: List[int]) -> str:
    """``[2, 4, 5, 6]`` as ``"2 and 4–6"``."""
    parts, start = [], None
    for i, step in enumerate(steps):
        if start is None:
            start = step
        if i + 1 == len(steps) or steps[i + 1] != step + 1:
            parts.append(str(start) if start == step else f"{start}–{step}")
            start = None
    return _listing(parts) if parts else ""


def _sign_verdict(diff) -> str:
    """On how many seeds a paired difference (A minus B, points) is positive and negative, with its range:
    ``"higher on all 3 seeds (+0.12 to +0.55 points)"``, ``"higher on 2 of 3 seeds and lower on 1 (−0.04 to
    +0.55 points)"``. Only a sign shared by every seed reads "on all"."""
    n, up, down = len(diff), int((diff > 0).sum()), int((diff < 0).sum())
    if up == n or down == n:
        text = f"{'higher' if up == n else 'lower'} on all {n} seeds"
    else:
        parts = [f"higher on {up} of {n} seeds" if up else "", f"lower on {down}" if down else "",
                 f"level on {n - up - down}" if n - up - down else ""]
        text = _listing([p for p in parts if p])
    low, high = _signed(float(np.min(diff)), 2), _signed(float(np.max(diff)), 2)
    return f"{text} ({low if low == high else f'{low} to {high}'} points)"


def _step0_spread(folder: str, facts: dict) -> Dict[str, str]:
    """How far apart, in points, the step-0 accuracies of one seed's runs in a folder are (the largest over seeds)."""
    by_seed: Dict[int, List[float]] = {}
    for group in facts["groups"].values():
        if group.get("noise_rate"):
            continue
        for seed, run in zip(group["seeds"], group.get("seed_accuracy", [])):
            by_seed.setdefault(seed, []).append(run[0])
    spreads = [max(v) - min(v) for v in by_seed.values() if len(v) > 1]
    return {f"{folder}__step0_spread_max": f"{100 * max(spreads):.1f}"} if spreads else {}


def _pair_substitutions(key: str, a: dict, b: dict, labels: Sequence[int], windows: Sequence[tuple]) -> Dict[str, str]:
    seeds = [s for s in a["seeds"] if s in b["seeds"]]
    ia, ib = [a["seeds"].index(s) for s in seeds], [b["seeds"].index(s) for s in seeds]
    subs = {}
    for L in labels:
        i, j = _step_of(a, L), _step_of(b, L)
        diff = np.array([a["seed_accuracy"][p][i] - b["seed_accuracy"][q][j] for p, q in zip(ia, ib)]) * 100
        subs[f"{key}__at{L}"] = _signed(diff.mean())
        parts = [_signed(d) for d in diff]
        subs[f"{key}__at{L}_seeds"] = _listing(parts)
        for seed, d in zip(seeds, parts):
            subs[f"{key}__at{L}_seed{seed}"] = d
        above = int((diff > 0).sum())
        subs[f"{key}__at{L}_above"] = (f"all {len(diff)} seeds" if above == len(diff) else
                                       "no seed" if above == 0 else f"{above} of {len(diff)} seeds")
        subs[f"{key}__at{L}_seeds2"] = _listing([_signed(d, 2) for d in diff])
        subs[f"{key}__at{L}_verdict"] = _sign_verdict(diff)
    n = min(len(a["labels"]), len(b["labels"]))
    below = [i for i in range(1, n) if a["mean_accuracy"][i] < b["mean_accuracy"][i]]
    subs[f"{key}__below_steps"] = _ranges(below) or "no step"
    subs[f"{key}__below_at"] = ("at no step" if not below else
                                f"at step{'s' if len(below) > 1 else ''} {_ranges(below)}")
    for first, last in windows:
        last = min(last, n - 1)
        per_seed = np.array([np.mean(np.array(a["seed_accuracy"][p][first:last + 1], dtype=float)
                                     - np.array(b["seed_accuracy"][q][first:last + 1], dtype=float))
                             for p, q in zip(ia, ib)]) * 100
        w = f"{key}__steps{first}_{last}"
        subs[w] = f"{_signed(per_seed.mean(), 2)} ± {per_seed.std():.2f}"
        subs[f"{w}_mean"] = _signed(per_seed.mean())
        subs[f"{w}_seeds"] = _listing([_signed(d) for d in per_seed])
        for seed, d in zip(seeds, per_seed):
            subs[f"{w}_seed{seed}"] = _signed(d)
    for name in ("acc90", "acc95"):
        va, vb = [a[name]["per_seed"][p] for p in ia], [b[name]["per_seed"][q] for q in ib]
        parts = ["not reached" if x is None or y is None else _signed(x - y, 0) for x, y in zip(va, vb)]
        subs[f"{key}__{name}_seeds"] = _listing(parts)
        for seed, d in zip(seeds, parts):
            subs[f"{key}__{name}_seed{seed}"] = d
    return subs


def _drop_substitutions(folder: str, facts: dict, labels: int) -> Dict[str, str]:
    """How many runs, and mean curves, are lower at ``labels`` than at the step before."""
    runs = curves = n_runs = n_curves = 0
    for group in facts["groups"].values():
        if float(labels) not in group["labels"]:
            continue
        i = group["labels"].index(float(labels))
        for run in group["seed_accuracy"]:
            n_runs += 1
            runs += run[i] < run[i - 1]
        n_curves += 1
        curves += group["mean_accuracy"][i] < group["mean_accuracy"][i - 1]

    def share(k, n):
        return f"all {n}" if k == n else f"{k} of {n}"
    return {f"{folder}__drop_at{labels}_runs": share(runs, n_runs),
            f"{folder}__drop_at{labels}_curves": share(curves, n_curves)}


def _spread_substitutions(folder: str, facts: dict, groups: Sequence[str], labels: int) -> Dict[str, str]:
    """The spread (max minus min, in points) of the mean curves of ``groups`` at each step from ``labels`` on."""
    curves = [facts["groups"][g] for g in groups]
    n = min(len(g["labels"]) for g in curves)
    first = curves[0]["labels"].index(float(labels))
    spread = [100 * (max(g["mean_accuracy"][i] for g in curves) - min(g["mean_accuracy"][i] for g in curves))
              for i in range(first, n)]
    key = f"{folder}__spread_from{labels}"
    return {f"{key}_median": f"{np.median(spread):.1f}", f"{key}_max": f"{np.max(spread):.1f}"}


def _column_pair_substitutions(key: str, a: dict, b: dict, n_initial: int) -> Dict[str, str]:
    """Per column both have: at how many acquisition steps A's seed-mean is above B's, and where below."""
    subs = {}
    n = min(len(a["labels"]), len(b["labels"]))
    for column in set(a.get("seed_columns", {})) & set(b.get("seed_columns", {})):
        def mean(g, column=column):
            values = [[run[i] for run in g["seed_columns"][column] if run[i] is not None] for i in range(1, n)]
            return np.array([np.mean(v) if v else np.nan for v in values])
        diff = mean(a) - mean(b)
        if np.isnan(diff).any():
            continue
        higher = int((diff > 0).sum())
        subs[f"{key}__{column}_higher_steps"] = (f"all {len(diff)}" if higher == len(diff)
                                                 else f"{higher} of the {len(diff)}")
        lower = np.flatnonzero(diff < 0)
        if lower.size:
            acquired = [a["labels"][1 + i] - n_initial for i in lower]
            subs[f"{key}__{column}_lower_acquired"] = range_text(f"{min(acquired):.0f}", f"{max(acquired):.0f}")
            subs[f"{key}__{column}_lower_by_max"] = f"{-diff[lower].min():.3f}"
        va, vb = ([run[0] for run in g["seed_columns"][column] if run[0] is not None] for g in (a, b))
        if va and vb and np.mean(vb):
            subs[f"{key}__{column}_ratio_step0"] = f"{np.mean(va) / np.mean(vb):.0f}"
    return subs


def curve_substitutions(facts: Dict[str, dict], at: Optional[Dict[str, Sequence[int]]] = None,
                        pairs: Sequence[tuple] = (), drops: Optional[Dict[str, Sequence[int]]] = None,
                        spreads: Sequence[tuple] = ()) -> Dict[str, str]:
    """The substitutions of the curves' points, columns and pairs a page declares (see the module's keys).

    Parameters
    ----------
    facts : dict
        ``{folder: facts}``, as read from each ``facts.json``.
    at : dict, optional
        ``{folder: [labels, ...]}``: the label counts (all labels) whose
        accuracy every group of the folder is quoted at.
    pairs : sequence of tuples
        ``(folder_a, group_a, folder_b, group_b, labels, windows)``: A minus
        B seed by seed at each of ``labels`` and averaged over each
        ``(first_step, last_step)`` of ``windows``, and their labels to 90%
        and 95%, and per measured column both have, at how many acquisition
        steps A's is above B's.
    drops : dict, optional
        ``{folder: [labels, ...]}``: ``<folder>__drop_at<L>_runs`` and
        ``…_curves``, how many runs and mean curves are lower there than a
        step before ("all 21", "5 of 7").
    spreads : sequence of tuples
        ``(folder, [group, ...], labels)``: ``<folder>__spread_from<L>_median``
        and ``…_max``, the spread of those mean curves over the steps from
        ``labels`` on, in points.

    Returns
    -------
    subs : dict
        ``{key: text}``, with the column means of every group.

    Examples
    --------
    >>> from skdbal.experiments.curve_facts import curve_substitutions
    >>> acc = {"per_seed": [30.0, 40.0], "median": 35.0}
    >>> g = {"strategy": "bald", "seeds": [1, 2], "labels": [20.0, 30.0, 40.0], "acc90": acc, "acc95": acc,
    ...      "seed_accuracy": [[0.5, 0.91, 0.95], [0.6, 0.8, 0.92]], "seed_columns": {},
    ...      "mean_accuracy": [0.55, 0.855, 0.935]}
    >>> r = {**g, "strategy": "random", "seed_accuracy": [[0.5, 0.7, 0.8], [0.6, 0.7, 0.85]],
    ...      "mean_accuracy": [0.55, 0.7, 0.825]}
    >>> facts = {"f": {"n_initial": 20, "groups": {"bald": g, "random": r}}}
    >>> subs = curve_substitutions(facts, at={"f": [30]}, pairs=[("f", "bald", "f", "random", [30], [(1, 2)]),
    ...                                                              ("f", "random", "f", "bald", [], [])])
    >>> subs["f__bald__at30"], subs["f__bald__at30_seed1"]
    ('85.50 ± 5.50%', '91.0%')
    >>> subs["f__bald__minus__f__random__at30_seeds"], subs["f__bald__minus__f__random__steps1_2"]
    ('+21.0 and +10.0', '+13.25 ± 4.75')
    >>> subs["f__bald__minus__f__random__below_steps"], subs["f__random__minus__f__bald__below_steps"]
    ('no step', '1–2')
    >>> subs["f__random__minus__f__bald__below_at"], subs["f__bald__minus__f__random__at30_verdict"]
    ('at steps 1–2', 'higher on all 2 seeds (+10.00 to +21.00 points)')
    """
    subs: Dict[str, str] = {}
    for folder, labels in (at or {}).items():
        for key, group in facts[folder]["groups"].items():
            if "seed_accuracy" not in group:
                continue
            for L in labels:
                if float(L) in group["labels"]:
                    subs.update(_at_substitutions(f"{folder}__{key}", group, L))
    for folder, f in facts.items():
        subs.update(_step0_spread(folder, f))
        for key, group in f["groups"].items():
            subs.update(_column_substitutions(f"{folder}__{key}", group))
    for fa, ga, fb, gb, labels, windows in pairs:
        subs.update(_pair_substitutions(f"{fa}__{ga}__minus__{fb}__{gb}", facts[fa]["groups"][ga],
                                        facts[fb]["groups"][gb], labels, windows))
        subs.update(_column_pair_substitutions(f"{fa}__{ga}__minus__{fb}__{gb}", facts[fa]["groups"][ga],
                                               facts[fb]["groups"][gb], facts[fa]["n_initial"]))
    for folder, labels in (drops or {}).items():
        for L in labels:
            subs.update(_drop_substitutions(folder, facts[folder], L))
    for folder, groups, L in spreads:
        subs.update(_spread_substitutions(folder, facts[folder], groups, L))
    return subs
