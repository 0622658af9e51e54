"""Whether runs share a configuration: a run's own file, the other runs of its folder, and the report's check.

Each run records the configuration it started with in ``runs/<run_id>.json``
(:meth:`~skdbal.experiments.RunSpec.config`, with a few keys kept for the
record only, such as its torch threads and device). A run is resumed only
under the configuration it started with (:func:`check_run_config`), and the
runs of a folder share one configuration but for what differs per run by
design (:func:`check_folder_config`), so that a report never averages runs
of different configurations as seeds of one. :func:`comparable_configs`
says what the comparison leaves out; the report checks the runs it sets
side by side with it. Nothing here imports torch.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from .presets import Preset, get_preset
from .results import DamagedResultsError, has_rows

if TYPE_CHECKING:  # pragma: no cover
    from .specs import RunSpec

__all__ = ["comparable_configs", "IMPLICIT_BEFORE", "stored_preset"]

#: Preset fields added since results version 2, with the value that run files
#: written before them implicitly used.
IMPLICIT_BEFORE = {"mask_seeding": "stream", "warm_epochs": None}

#: Preset fields that do not change a run's rows: a run can be extended to more queries.
_FREE_FIELDS = ("n_queries", "notes")


#: Run-file keys recorded for the record, not compared when resuming.
_RECORDED_ONLY = ("torch_threads", "strategy_object", "device", "device_steps", "environment")


def check_run_config(spec: RunSpec, runs: Path, warn: bool = False) -> dict:
    """The JSON form of ``spec``'s configuration; raise ValueError if ``runs``
    already holds this run with another configuration.

    A run CSV with rows but no JSON is refused (:class:`~skdbal.experiments.results.DamagedResultsError`):
    the configuration its rows were computed with is unknown. A JSON with no
    rows beside it (a start that failed before its first row) records
    nothing that was computed: another configuration replaces it (with a
    UserWarning if ``warn``)."""
    config = json.loads(json.dumps(spec.config(), default=str))
    config_path = runs / f"{spec.run_id}.json"
    csv_path = runs / f"{spec.run_id}.csv"
    if not config_path.exists() and has_rows(csv_path):
        raise DamagedResultsError(
            f"{csv_path} holds rows but {config_path.name} is missing, so the configuration its rows were "
            f"computed with is unknown and the run cannot be resumed under any; restore {config_path}, or delete "
            f"{runs / spec.run_id}.* to run it again from the start")
    if config_path.exists() and not has_rows(csv_path):
        try:
            stored = json.loads(config_path.read_text())
        except ValueError:
            stored = None
        if stored is None or not _same_config(stored, config):
            if warn:
                warnings.warn(f"{config_path} records a run that wrote no rows (a start that failed) with another "
                              "configuration; it is replaced by this one", UserWarning, stacklevel=3)
            return config
    if config_path.exists():
        try:
            stored = json.loads(config_path.read_text())
        except ValueError as exc:
            raise DamagedResultsError(
                f"{config_path} is damaged ({exc}). It records the configuration the run started with, so the "
                f"run cannot be resumed safely; restore the file, or delete {runs / spec.run_id}.* to run it "
                "again from the start") from None
        if not _same_config(stored, config):
            differences = "\n".join(f"  {key}: {a!r} in the folder, {b!r} asked"
                                     for key, a, b in _config_differences(stored, config))
            raise ValueError(
                f"{config_path} was written by a different configuration; use another output folder, or ask "
                f"for the same one:\n{differences}")
    return config


#: Run-file keys that differ between the runs of one grid by design; the rest
#: of a run's configuration (the preset but for ``_FREE_FIELDS``, the results
#: version) is the folder's, shared by every run in it.
_PER_RUN = ("strategy", "seed", "mc_dropout", "last_layer", "noise_rate", "initial_set", "ensemble", "laplace",
            "representation", "head", "encoder_epochs")


def folder_configs(runs: Path) -> dict:
    """``{run file: stored configuration}`` of the runs in ``runs`` that wrote rows."""
    configs = {}
    for path in sorted(runs.glob("*.json")) if runs.is_dir() else []:
        if not has_rows(path.with_suffix(".csv")):
            continue
        try:
            configs[path] = json.loads(path.read_text())
        except ValueError:
            continue  # damaged: its own run refuses it when resumed (check_run_config)
    return configs


def check_folder_config(spec: RunSpec, configs: dict) -> None:
    """Raise ValueError if ``spec`` differs from the runs already in the folder
    (``configs``, from :func:`folder_configs`) in more than what differs per
    run by design (``_PER_RUN``), so that a report never averages runs of
    different configurations as seeds of one."""
    config = json.loads(json.dumps(spec.config(), default=str))
    mine = {k: v for k, v in config.items() if k not in _PER_RUN}
    for path, stored in configs.items():
        if path.stem == spec.run_id:
            continue  # the run itself: check_run_config compares it whole
        theirs = {k: v for k, v in stored.items() if k not in _PER_RUN}
        differences = _config_differences(theirs, mine)
        if differences:
            lines = "\n".join(f"  {key}: {a!r} in the folder, {b!r} asked" for key, a, b in differences)
            raise ValueError(
                f"{path.parent.parent} holds runs of another configuration (e.g. {path.name}), and a report "
                f"would average them with {spec.run_id} as seeds of one; use another output folder, or ask for "
                f"the same configuration:\n{lines}")


def _config_differences(stored: dict, current: dict) -> list:
    """``(field, stored value, asked value)`` for each field that makes
    :func:`_same_config` false; preset fields as ``preset.<name>``."""
    a, b = comparable_configs(stored, current)
    out = []
    for key in sorted(set(a) | set(b)):
        if key == "preset":
            for name in sorted(set(a.get("preset", {})) | set(b.get("preset", {}))):
                x, y = a.get("preset", {}).get(name, "(missing)"), b.get("preset", {}).get(name, "(missing)")
                if x != y:
                    out.append((f"preset.{name}", x, y))
        elif a.get(key, "(missing)") != b.get(key, "(missing)"):
            out.append((key, a.get(key, "(missing)"), b.get(key, "(missing)")))
    return out


def _same_config(stored: dict, current: dict) -> bool:
    """Equal but for ``_FREE_FIELDS``; preset fields added since ``stored`` was
    written may hold their defaults."""
    a, b = comparable_configs(stored, current)
    return a == b


def comparable_configs(stored: dict, current: dict):
    """``stored`` and ``current`` without the fields that do not matter, and
    with the fields added since ``stored`` was written filled in.

    Left out: the keys a run file keeps for the record only (its torch
    threads, strategy object and devices) and the preset's ``n_queries``
    and ``notes``. Preset fields that ``stored`` lacks take the value that
    runs written before them implicitly used, or their default where
    ``current`` holds it.

    Parameters
    ----------
    stored : dict
        A configuration as a run file records it.
    current : dict
        A configuration to compare it with (e.g.
        :meth:`~skdbal.experiments.RunSpec.config`).

    Returns
    -------
    stored, current : dict
        Copies, equal when the two configurations compute the same rows.

    Examples
    --------
    >>> from skdbal.experiments import RunSpec, get_preset
    >>> from skdbal.experiments.configs import comparable_configs
    >>> stored = {**RunSpec(get_preset("gal2017"), "bald", 1).config(), "torch_threads": 4}
    >>> longer = RunSpec(get_preset("gal2017", n_queries=200), "bald", 1).config()
    >>> a, b = comparable_configs(stored, longer)
    >>> a == b                                    # more queries, other threads: the same rows
    True
    >>> a, b = comparable_configs(stored, RunSpec(get_preset("gal2017", lr=0.01), "bald", 1).config())
    >>> a == b, a["preset"]["lr"], b["preset"]["lr"]
    (False, 0.001, 0.01)
    """
    defaults = json.loads(json.dumps(Preset(name="").as_dict(), default=str))
    a = {**stored, "preset": dict(stored.get("preset", {}))}
    b = {**current, "preset": dict(current.get("preset", {}))}
    for key in _RECORDED_ONLY:
        a.pop(key, None)
        b.pop(key, None)
    for key in _FREE_FIELDS:
        a["preset"].pop(key, None)
        b["preset"].pop(key, None)
    for key, value in b["preset"].items():
        if key not in a["preset"] and key in IMPLICIT_BEFORE:
            a["preset"][key] = IMPLICIT_BEFORE[key]
        elif key not in a["preset"] and key in defaults and value == defaults[key]:
            a["preset"][key] = value
    return a, b


def stored_preset(config: dict) -> Preset:
    """The preset of a run's stored ``config``; fields added since it was
    written hold the values they implicitly had (``IMPLICIT_BEFORE``).

    Parameters
    ----------
    config : dict
        A run file's ``config``: its ``preset`` holds the preset's name and fields.

    Returns
    -------
    Preset

    Examples
    --------
    A run written before ``mask_seeding`` existed drew its masks by stream:

    >>> from skdbal.experiments.configs import stored_preset
    >>> preset = stored_preset({"preset": {"name": "gal2017", "n_queries": 5}})
    >>> preset.n_queries, preset.mask_seeding
    (5, 'stream')
    """
    fields = {k: v for k, v in config["preset"].items() if k not in ("name", "notes")}
    return get_preset(config["preset"]["name"], **{**IMPLICIT_BEFORE, **fields})
