"""A grid's folder as its report reads it: the rows of its run files, their devices, and the checks.

The rows come from the run files in ``runs/`` (``results.csv`` is rebuilt
where it disagrees with them), each with the device its run recorded, cut at
the grid's latest ``n_queries``; runs set side by side must have run one
configuration (:func:`check_comparable`), and the published MNIST numbers go
beside runs that follow Gal et al.'s (2017) protocol only.
"""
from __future__ import annotations

import csv
import json
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from .configs import comparable_configs
from .grouping import noise_rate_of
from .presets import PRESETS
from .results import DamagedResultsError, assemble_results, read_results, read_run_file

__all__ = []


def _run_key(row: dict) -> tuple:
    """``(preset, strategy, variant, seed, noise rate)``: the run a row belongs to."""
    return row["preset"], row["strategy"], row["variant"], row["seed"], noise_rate_of(row)


def _run_name(key: tuple) -> str:
    preset, strategy, variant, seed, rate = key
    return f"{preset} {strategy} {variant} seed {seed}" + (f" noise {rate:g}" if rate else "")


def read_grid_rows(out_dir: Path) -> List[dict]:
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
            warnings.warn(f"{problem}; rebuilt {path} from the run files in {runs}", RuntimeWarning, stacklevel=2)
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
                  "10 per step", RuntimeWarning, stacklevel=2)
    return {"n_initial_per_class": 2, "n_instances": 10}


def grid_rows(out_dir: Path):
    """A grid's rows as its report reads them: each with its run's device, refused where runs are not
    comparable, and cut at the grid's latest ``n_queries``; with the run files, the preset, the initial
    labels and the labels at which the runs end (None where the preset does not say)."""
    files = run_files(out_dir)
    rows = with_devices(read_grid_rows(out_dir), files)
    check_comparable(rows, files)
    preset = _grid_preset(out_dir)
    n_initial, n_instances = 10 * preset["n_initial_per_class"], preset["n_instances"]
    end_labels = None
    if preset.get("n_queries") is not None:  # steps beyond the grid's latest protocol (a longer earlier run)
        rows = [r for r in rows if r["step"] <= preset["n_queries"]]
        end_labels = n_initial + preset["n_queries"] * n_instances
    return rows, files, preset, n_initial, end_labels


def anchors_apply(rows: List[dict], files: Dict[tuple, Tuple[Path, Optional[dict]]], preset: dict) -> bool:
    """Whether the published MNIST numbers go beside ``rows``: every run's
    preset (from its file; the grid's where none is recorded) follows Gal et
    al.'s (2017) protocol (:func:`_gal2017_protocol`)."""
    presets = [files[k][1].get("preset", preset) if k in files and files[k][1] is not None else preset
               for k in {_run_key(r) for r in rows}]
    return all(_gal2017_protocol(p) for p in presets)


#: How the report's titles name each data set (and each network, below).
DATASET_LABELS = {"mnist": "MNIST", "repeated_mnist": "Repeated-MNIST", "fashion_mnist": "Fashion-MNIST",
                  "digits": "digits"}
_NETWORK_LABEL = {"BayesianCNN": "Bayesian CNN", "KirschCNN": "Kirsch et al.'s CNN"}


def network_label(preset: dict) -> str:
    """The network of a grid's preset as its figures name it (the module's name where it has no label)."""
    module = preset.get("module") or "BayesianCNN"
    return _NETWORK_LABEL.get(module, module)


def run_files(out_dir: Path) -> Dict[tuple, Tuple[Path, Optional[dict]]]:
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


def with_devices(rows: List[dict], files: Dict[tuple, Tuple[Path, Optional[dict]]]) -> List[dict]:
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


def check_comparable(rows: List[dict], files: Dict[tuple, Tuple[Path, Optional[dict]]],
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
        for _, path, config in known[1:]:
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
                      RuntimeWarning, stacklevel=2)
    if problems:
        names = sorted({p.rsplit(" [", 1)[1][:-1] for p in problems})
        raise ValueError(
            "runs of different configurations cannot be averaged as seeds or set side by side ("
            + "; ".join(names) + "):\n" + "\n".join(p.rsplit(" [", 1)[0] for p in problems)
            + "\nreport them from separate folders, or run them again with one configuration")


def _differing_fields(a: dict, b: dict) -> list:
    """``(field, value in a, value in b)`` where the run configurations ``a``
    and ``b`` differ as the runner compares them (:func:`~skdbal.experiments.configs.comparable_configs`,
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

