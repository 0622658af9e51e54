"""Where a result was computed: the machine, the package versions and the commit (issue 44, item 4).

The experiment runner writes :func:`environment` into every invocation of a
grid's ``grid.json`` (``invocations[].machine``) and into every run file it
starts (``runs/<id>.json``, key ``environment``); the benchmarks write it
into their JSON. A field that cannot be read is recorded as ``None``, never
guessed; :data:`NOT_RECORDED` is what the facts say for a record written
before these fields existed.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Dict, List, Optional, Sequence

__all__ = ["MACHINE_FIELDS", "NOT_RECORDED", "PACKAGES", "cpu_model", "environment", "git_commit", "gpus",
           "left_out_runs", "machine_record", "machines_of", "package_versions", "parallelism_of",
           "provenance_substitutions"]

#: What the facts write for a field that a record predates.
NOT_RECORDED = "not recorded"

#: The distributions whose versions a record carries (absent ones are left out).
PACKAGES = ("skdbal", "torch", "numpy", "scipy", "scikit-learn", "skorch", "laplace-torch", "baal", "dask",
            "distributed")


def cpu_model() -> Optional[str]:
    """The CPU's model name, from ``/proc/cpuinfo`` (``None`` where there is none).

    Examples
    --------
    >>> from skdbal.experiments.provenance import cpu_model
    >>> model = cpu_model()
    >>> model is None or isinstance(model, str)
    True
    """
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def gpus() -> List[Dict[str, Optional[str]]]:
    """The GPUs torch sees: ``[{"name", "driver"}]`` (driver from ``nvidia-smi``, ``None`` if unknown).

    Examples
    --------
    >>> from skdbal.experiments.provenance import gpus
    >>> all(set(g) == {"name", "driver"} for g in gpus())
    True
    """
    try:
        import torch

        if not torch.cuda.is_available():
            return []
        names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except Exception:  # noqa: BLE001 - a record, not a check
        return []
    driver = None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        driver = out.stdout.strip().splitlines()[0].strip() if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        pass
    return [{"name": name, "driver": driver} for name in names]


def package_versions(names: Sequence[str] = PACKAGES) -> Dict[str, str]:
    """The installed versions of ``names``, leaving out those not installed.

    Examples
    --------
    >>> from skdbal.experiments.provenance import package_versions
    >>> sorted(package_versions(["numpy", "no-such-distribution"]))
    ['numpy']
    """
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in names:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            continue
    return out


def git_commit(path=None) -> Optional[str]:
    """The commit of the checkout holding ``path`` (default: this package), with ``+dirty`` when its
    tracked files under ``skdbal/`` differ from it; outside a git checkout, ``$SKDBAL_COMMIT`` if set
    (a copy of a checkout without its ``.git``, such as the tree ``benchmarks/device_kit.sh`` sends to
    a GPU machine, says there which commit it is), else ``None``.

    Examples
    --------
    >>> from skdbal.experiments.provenance import git_commit
    >>> commit = git_commit()
    >>> commit is None or len(commit.split("+")[0]) == 40
    True
    """
    where = Path(path) if path is not None else Path(__file__).resolve().parents[2]
    given = os.environ.get("SKDBAL_COMMIT") or None
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=20)
        if head.returncode != 0:
            return given
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "skdbal"], cwd=where,
                               capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return given
    return head.stdout.strip() + ("+dirty" if dirty else "")


def environment(path=None) -> dict:
    """The record of this machine and checkout: platform, CPU model and count, GPUs, versions, commit.

    Parameters
    ----------
    path : path, optional
        A path inside the checkout whose commit is recorded (default: the
        one this package is imported from).

    Returns
    -------
    record : dict
        ``platform``, ``processor``, ``cpu_model``, ``cpu_count``,
        ``python``, ``torch``, ``gpus`` (see :func:`gpus`), ``versions``
        (see :func:`package_versions`) and ``commit`` (see
        :func:`git_commit`).

    Examples
    --------
    >>> from skdbal.experiments.provenance import environment
    >>> record = environment()
    >>> sorted(record)  # doctest: +NORMALIZE_WHITESPACE
    ['commit', 'cpu_count', 'cpu_model', 'gpus', 'platform', 'processor', 'python', 'torch', 'versions']
    >>> record["cpu_count"] == __import__("os").cpu_count()
    True
    """
    import torch

    return {"platform": platform.platform(), "processor": platform.processor(), "cpu_model": cpu_model(),
            "cpu_count": os.cpu_count(), "python": platform.python_version(), "torch": torch.__version__,
            "gpus": gpus(), "versions": package_versions(), "commit": git_commit(path)}


#: The fields of a machine record that say which hardware and software ran a grid.
MACHINE_FIELDS = ("platform", "cpu_count", "cpu_model", "gpus", "python", "torch", "versions")


def machine_record(machine: dict) -> dict:
    """A ``grid.json`` machine as the facts state it: its :data:`MACHINE_FIELDS`, and
    :data:`NOT_RECORDED` for those it predates (``gpus`` is ``[]`` where the
    record names a CPU build of torch and no GPU, since such a torch cannot use one).

    Examples
    --------
    >>> from skdbal.experiments.provenance import machine_record
    >>> rec = machine_record({"platform": "Linux-6.18-x86_64", "cpu_count": 2, "python": "3.11.7",
    ...                       "torch": "2.13.0+cpu"})
    >>> rec["cpu_model"], rec["gpus"], rec["versions"]
    ('not recorded', [], 'not recorded')
    """
    out = {k: machine.get(k, NOT_RECORDED) for k in MACHINE_FIELDS}
    if out["cpu_model"] in (None, ""):
        out["cpu_model"] = NOT_RECORDED
    if "gpus" not in machine and str(machine.get("torch", "")).endswith("+cpu"):
        out["gpus"] = []
    return out


def machines_of(grid: dict) -> List[dict]:
    """Every distinct machine a ``grid.json`` names (top-level ``machine``/``machines`` and each
    invocation's), as :func:`machine_record` states it, in the order first named.

    Examples
    --------
    >>> from skdbal.experiments.provenance import machines_of
    >>> grid = {"machine": {"platform": "A", "cpu_count": 2},
    ...         "invocations": [{"machine": {"platform": "A", "cpu_count": 2}}, {"machine": {"platform": "B"}}]}
    >>> [m["platform"] for m in machines_of(grid)]
    ['A', 'B']
    """
    found = []
    named = ([grid["machine"]] if isinstance(grid.get("machine"), dict) else []) + list(grid.get("machines") or [])
    named += [inv["machine"] for inv in grid.get("invocations") or [] if isinstance(inv.get("machine"), dict)]
    for machine in named:
        record = machine_record(machine)
        if record not in found:
            found.append(record)
    return found


def parallelism_of(grid: dict) -> List[dict]:
    """How many runs a ``grid.json``'s invocations ran at a time, with how many torch threads each, per machine:
    the distinct ``{"cpu_count", "platform", "torch", "n_jobs", "torch_threads"}`` in the order first named (a
    ``grid.json`` without ``invocations`` records them at its top level).

    Examples
    --------
    >>> from skdbal.experiments.provenance import parallelism_of
    >>> m = {"platform": "A", "cpu_count": 2, "torch": "2.13.0+cpu"}
    >>> grid = {"machine": m, "invocations": [{"n_jobs": 2, "torch_threads": 1}, {"n_jobs": 1, "torch_threads": 2},
    ...                                       {"n_jobs": 2, "torch_threads": 1, "machine": m}]}
    >>> [(p["n_jobs"], p["torch_threads"]) for p in parallelism_of(grid)]
    [(2, 1), (1, 2)]
    """
    found = []
    for inv in grid.get("invocations") or [grid]:
        machine = inv.get("machine") if isinstance(inv.get("machine"), dict) else grid.get("machine") or \
            (grid.get("machines") or [{}])[0]
        if inv.get("n_jobs") is None and inv.get("torch_threads") is None:
            continue
        entry = {"cpu_count": machine.get("cpu_count"), "platform": machine.get("platform"),
                 "torch": machine.get("torch"), "n_jobs": inv.get("n_jobs"), "torch_threads": inv.get("torch_threads")}
        if entry not in found:
            found.append(entry)
    return found


def _jobs_text(entry: dict) -> str:
    """``2 runs at a time, 1 torch thread each``, as a ``parallelism_of`` entry records it."""
    jobs, threads = entry.get("n_jobs"), entry.get("torch_threads")
    text = NOT_RECORDED + " runs at a time" if jobs is None else f"{jobs} run{'' if jobs == 1 else 's'} at a time"
    if threads is not None:
        text += f", {threads} torch thread{'' if threads == 1 else 's'}" + (" each" if jobs != 1 else "")
    return text


def left_out_runs(out_dir) -> List[dict]:
    """The invocations in ``out_dir/grid.json`` that name runs with no run file in ``out_dir/runs``.

    Each invocation is expanded into its runs as
    :func:`~skdbal.experiments.run_grid` expands it (with the preset it
    recorded); a run whose ``runs/<id>.csv`` is absent is left out of the
    folder, and so of its tables and facts.

    Returns
    -------
    left_out : list of dict
        Per such invocation: ``invocation`` (its 1-based number in
        ``grid.json``), ``started`` (or :data:`NOT_RECORDED`) and ``runs``
        (the missing run ids).

    Examples
    --------
    >>> import json, tempfile
    >>> from pathlib import Path
    >>> from skdbal.experiments.provenance import left_out_runs
    >>> out = Path(tempfile.mkdtemp()); (out / "runs").mkdir()
    >>> (out / "runs" / "gal2017__bald__bayesian__seed1.csv").write_text("")
    0
    >>> inv = {"preset": {"name": "gal2017"}, "strategies": ["bald"], "seeds": [1, 2], "started": "t"}
    >>> _ = (out / "grid.json").write_text(json.dumps({"invocations": [inv]}))
    >>> left_out_runs(out)
    [{'invocation': 1, 'runs': ['gal2017__bald__bayesian__seed2'], 'started': 't'}]
    """
    import dataclasses
    import warnings

    from .presets import Preset
    from .specs import grid_specs

    out_dir = Path(out_dir)
    try:
        grid = json.loads((out_dir / "grid.json").read_text())
    except (OSError, ValueError):
        return []
    have = {p.stem for p in (out_dir / "runs").glob("*.csv")}
    fields = {f.name for f in dataclasses.fields(Preset)}
    invocations = grid.get("invocations") or ([grid] if "strategies" in grid else [])
    left = []
    for number, inv in enumerate(invocations, 1):
        preset = {k: v for k, v in (inv.get("preset") or grid.get("preset") or {}).items() if k in fields}
        params = preset.get("module_params")
        if isinstance(params, dict):
            preset["module_params"] = tuple(sorted(params.items()))
        elif isinstance(params, list):
            preset["module_params"] = tuple(tuple(p) for p in params)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            specs, _ = grid_specs(Preset(**preset), inv["strategies"], inv["seeds"],
                                  **{k: inv[k] for k in ("deterministic_baseline", "last_layer", "noise_rates",
                                                         "initial_sets", "ensemble", "laplace") if k in inv})
        missing = [s.run_id for s in specs if s.run_id not in have]
        if missing:
            left.append({"invocation": number, "runs": missing, "started": inv.get("started", NOT_RECORDED)})
    return left


def _host(machine: dict) -> str:
    """A machine named by what its record holds: its cores, its torch build and its platform string."""
    cores = machine.get("cpu_count")
    gpu = "GPU" if not str(machine.get("torch", "")).endswith("+cpu") else "CPU-only"
    return f"{cores}-core {gpu} host `{machine.get('platform')}`"


def _missing(machines: List[dict], commits: List[str]) -> List[str]:
    """What the records of a folder do not say, in words."""
    missing = []
    if any(m["cpu_model"] == NOT_RECORDED for m in machines):
        missing.append("the CPU model")
    if any(m["gpus"] == NOT_RECORDED for m in machines):
        missing.append("the GPU model and driver")
    if any(m["versions"] == NOT_RECORDED for m in machines):
        missing.append("the package versions (beyond Python and torch)")
    if not commits or any(c == NOT_RECORDED for c in commits):
        missing.append("the commit")
    return missing


def _and(words: Sequence[str]) -> str:
    words = list(words)
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1] if words else "nothing"


def provenance_substitutions(facts_by_folder: Dict[str, dict]) -> Dict[str, str]:
    """The provenance that the results pages quote, from each folder's ``facts.json``.

    Per folder ``<folder>__hosts`` (the machines its ``grid.json`` names),
    ``<folder>__not_recorded`` (what those records lack) and
    ``<folder>__left_out`` (the runs an invocation named that have no run
    file, or "none"); across folders ``results__hosts`` (each distinct
    machine with the folders it ran), ``results__left_out`` (the folders' left-out runs),
    ``results__without_device_model``,
    ``results__without_versions`` and ``results__without_commit`` (folders).

    Examples
    --------
    >>> from skdbal.experiments.provenance import provenance_substitutions
    >>> m = {"platform": "Linux-a", "cpu_count": 2, "cpu_model": "not recorded", "gpus": [], "python": "3.11",
    ...      "torch": "2.13.0+cpu", "versions": "not recorded"}
    >>> facts = {"g": {"provenance": {"machines": [m], "invocations": [{"commit": "not recorded"}],
    ...                               "left_out_invocations": [{"invocation": 2, "runs": ["r"], "started": "t"}]}}}
    >>> subs = provenance_substitutions(facts)
    >>> subs["g__hosts"], subs["g__left_out"]
    ('2-core CPU-only host `Linux-a`', 'invocation 2 (started t): `r`')
    >>> subs["results__without_versions"]
    '`g/`'
    """
    subs: Dict[str, str] = {}
    if not facts_by_folder:
        return subs
    subs.update(_version_substitutions(facts_by_folder))
    subs.update(_parallelism_substitutions(facts_by_folder))
    widened = [f"`{folder}/` (" + (f"from `{f['reruns']['floor_from']}/`" if f["reruns"].get("floor_from") else
                                   "measured against " + _and(f"`{m}/`" for m in f["reruns"]["measured_in"])) + ")"
               for folder, f in sorted(facts_by_folder.items())
               if (f.get("reruns") or {}).get("spread_max") is not None]
    subs["results__rerun_widened"] = _and(widened) if widened else "none"
    hosts: Dict[str, List[str]] = {}
    lacking: Dict[str, List[str]] = {"model": [], "versions": [], "commit": []}
    for folder, facts in sorted(facts_by_folder.items()):
        prov = facts.get("provenance", {})
        machines = prov.get("machines", [])
        names = []
        for m in machines:
            name = _host(m)
            names.append(name)
            hosts.setdefault(name, []).append(folder)
        subs[f"{folder}__hosts"] = _and(names) if names else NOT_RECORDED
        commits = [inv.get("commit", NOT_RECORDED) for inv in prov.get("invocations", [])]
        missing = _missing(machines, commits)
        subs[f"{folder}__not_recorded"] = _and(missing) if missing else "nothing"
        if any(m["cpu_model"] == NOT_RECORDED or m["gpus"] == NOT_RECORDED for m in machines) or not machines:
            lacking["model"].append(folder)
        if any(m["versions"] == NOT_RECORDED for m in machines) or not machines:
            lacking["versions"].append(folder)
        if "the commit" in missing:
            lacking["commit"].append(folder)
        left = prov.get("left_out_invocations", [])
        subs[f"{folder}__left_out"] = "; ".join(
            f"invocation {e['invocation']} (started {e['started']}): " + ", ".join(f"`{r}`" for r in e["runs"])
            for e in left) or "none"
    subs["results__left_out"] = "; ".join(f"`{folder}/`: {subs[f'{folder}__left_out']}"
                                          for folder in sorted(facts_by_folder)
                                          if subs[f"{folder}__left_out"] != "none") or "none"
    subs["results__hosts"] = "; ".join(f"{name} ({', '.join(f'`{f}/`' for f in folders)})"
                                       for name, folders in sorted(hosts.items()))
    for key, folders in lacking.items():
        name = {"model": "device_model", "versions": "versions", "commit": "commit"}[key]
        subs[f"results__without_{name}"] = ", ".join(f"`{f}/`" for f in folders) or "none"
    return subs


def _version_substitutions(facts_by_folder: Dict[str, dict]) -> Dict[str, str]:
    """Which results version and mask seeding each folder's run files record, and per version what reproduces it.

    ``<folder>__results_version`` (``2``, or ``2 and 3`` for a mixed folder), ``<folder>__mask_seeding``
    (its preset's; a preset written before the field existed reads as ``"stream"``, as the runner reads it),
    ``results__version<v>_folders`` and ``results__versions``: per version, its seeding, the ``--set`` that
    reproduces it (none for the default) and its folders.
    """
    from dataclasses import fields

    from .configs import IMPLICIT_BEFORE
    from .presets import Preset

    default = next(f.default for f in fields(Preset) if f.name == "mask_seeding")
    subs: Dict[str, str] = {}
    by_version: Dict[int, List[str]] = {}
    seeding: Dict[int, set] = {}
    for folder, facts in sorted(facts_by_folder.items()):
        versions = (facts.get("provenance") or {}).get("results_versions") or []
        mask = (facts.get("preset") or {}).get("mask_seeding") or IMPLICIT_BEFORE["mask_seeding"]
        subs[f"{folder}__results_version"] = _and(str(v) for v in versions) if versions else NOT_RECORDED
        subs[f"{folder}__mask_seeding"] = mask
        for v in versions:
            by_version.setdefault(v, []).append(folder)
            seeding.setdefault(v, set()).add(mask)
    parts = []
    for v, folders in sorted(by_version.items()):
        listed = _and(f"`{f}/`" for f in folders)
        subs[f"results__version{v}_folders"] = listed
        how = []
        for mask in sorted(seeding[v]):
            how.append(f'`mask_seeding="{mask}"`, the default now: the commands need no `--set`' if mask == default
                       else f'`mask_seeding="{mask}"`: add `--set mask_seeding="\'{mask}\'"` to the commands below '
                            "where it is missing")
        parts.append(f"**version {v}** ({'; '.join(how)}): {listed}")
    subs["results__versions"] = "; ".join(parts) or "none"
    return subs


def _parallelism_substitutions(facts_by_folder: Dict[str, dict]) -> Dict[str, str]:
    """``<folder>__parallelism`` (how many runs at a time, with how many torch threads, on which host where a
    folder names several) and ``results__parallelism`` (per host, each setting with its folders)."""
    subs: Dict[str, str] = {}
    by_host: Dict[str, Dict[str, List[str]]] = {}
    for folder, facts in sorted(facts_by_folder.items()):
        entries = (facts.get("provenance") or {}).get("parallelism") or []
        hosts = {_host(e) for e in entries}
        texts = []
        for e in entries:
            text = _jobs_text(e)
            by_host.setdefault(_host(e), {}).setdefault(text, [])
            if folder not in by_host[_host(e)][text]:
                by_host[_host(e)][text].append(folder)
            text += f" on the {_host(e)}" if len(hosts) > 1 else ""
            if text not in texts:
                texts.append(text)
        subs[f"{folder}__parallelism"] = "; ".join(texts) if texts else NOT_RECORDED
    subs["results__parallelism"] = "; ".join(
        f"the {host} ran " + _and(f"{text} ({', '.join(f'`{f}/`' for f in folders)})"
                                  for text, folders in settings.items())
        for host, settings in sorted(by_host.items())) or NOT_RECORDED
    return subs
