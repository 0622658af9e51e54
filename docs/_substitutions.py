"""The MyST substitutions of the docs: figures read from the files under ``docs/results/``.

``docs/conf.py`` sets ``myst_substitutions = substitutions(...)``; a page
writes ``{{ key }}``. The keys:

- ``<folder>__…`` from each ``docs/results/<folder>/facts.json`` (written
  by ``skdbal report``; :func:`skdbal.experiments.facts.facts_substitutions`
  documents the fields), with ``<folder>__order_acc90`` and the
  comparisons across folders declared in :data:`SAME_ORDER` and :data:`ABOVE`;
- ``<bench>__…`` from each benchmark JSON under ``docs/results/*/``
  (:func:`benchmark_jsons` names the prefixes), its keys slugged and joined by ``__``
  (:func:`skdbal.experiments.facts.json_substitutions`);
- ``results__copied__…`` and ``results__step_s__…`` from :data:`COPIED` and :data:`STEP_RANGES`;
- ``demo_learning__at<n>__…``, the labelling demo's curve (:func:`demo_learning_substitutions`).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from skdbal.experiments.facts import json_substitutions, range_text, results_substitutions, two_figures

#: Pairs of folders whose strategies' order by median a page compares.
SAME_ORDER = [("post2019", "post2019_cuda")]
#: (folder, group, folder, group): from which labels A's mean curve stays above B's.
ABOVE = [("post2019_cuda_laplace", "bald__laplace", "post2019_cuda", "random")]
#: folder -> the label counts (all labels) at which the results page quotes every group's accuracy.
AT = {"gal2017": [100, 120, 130, 140, 220, 260, 390, 500, 520, 1020], "gal2017_selection": [130, 260, 390],
      "gal2017_batch_split": [130, 260, 390], "gal2017_warm": [1020], "gal2017_last_layer": [20, 1020],
      "noise": [100, 500], "bald_cuda": [20, 500], "batchbald": [100], "repeated": [220],
      "initial_set": [20, 520], "kirsch2019": [70, 90, 120, 140], "ensemble": [20, 70, 130, 220]}
_GAL = [
    ("gal2017", "variation_ratios__deterministic", "gal2017", "variation_ratios", [220, 1020], []),
    ("gal2017", "max_entropy__deterministic", "gal2017", "max_entropy", [220, 1020], []),
    ("gal2017_selection", "bald", "gal2017", "bald", [130, 260, 390], []),
    ("gal2017_batch_split", "bald", "gal2017", "bald", [130, 260, 390], []),
    ("gal2017_warm", "bald", "gal2017", "bald", [1020], [(91, 100)]),
    ("gal2017_warm_timed", "bald", "gal2017", "bald", [1020], [(91, 100)]),
    ("gal2017_last_layer", "predictive_variance__blr_mfvi", "gal2017_last_layer",
     "predictive_variance__blr_analytic", [], []),
    ("gal2017_last_layer", "predictive_variance__blr_analytic", "gal2017_last_layer",
     "predictive_variance__blr_mfvi", [], []),
    ("gal2017_last_layer", "predictive_variance__blr_analytic", "gal2017", "bald", [1020], []),
]
_NOISE = [("noise", f"{g}__noise0_{r}", "noise", f"bald__noise0_{r}", [500], [])
          for r in (1, 2, 3) for g in ("filter_bald_batch", "filter_bald_dynamic")]
_NOISE += [("noise", f"{g}__noise0_2", "noise", "bald__noise0_2", [500], [])
           for g in ("filter_bald_0_1", "filter_bald_0_25")]
_NOISE += [("noise", f"bald__noise0_{r}", "noise", f"random__noise0_{r}", [100, 500], [(1, 5)]) for r in (1, 2, 3)]
_NOISE += [("noise", "filter_bald_dynamic__noise0_2", "noise", "filter_bald_batch__noise0_2", [500], [])]
_NOISE += [
    ("gal2017", "bald", "gal2017", "random", [100, 500], [(1, 5)]),
    ("noise", "bald__noise0_1", "gal2017", "bald", [500], []),
    ("noise", "bald__noise0_3", "gal2017", "bald", [500], []),
    ("noise", "bald__noise0_3", "bald_cuda", "bald", [500], []),
    ("noise", "filter_bald_batch", "bald_cuda", "bald", [500], []),
    ("noise", "filter_bald_dynamic", "bald_cuda", "bald", [500], []),
    ("noise", "filter_bald_batch__noise0_2", "noise", "filter_bald_dynamic__noise0_2", [500], []),
    ("noise", "filter_bald_batch__noise0_2", "noise", "filter_bald_0_25__noise0_2", [500], []),
    ("noise", "filter_bald_dynamic__noise0_1", "noise", "filter_bald_batch__noise0_1", [500], []),
    ("noise", "filter_bald_dynamic__noise0_3", "noise", "filter_bald_batch__noise0_3", [500], []),
]
#: The GPU against the CPU: BALD's seeds rerun on the H100 (``bald_cuda/``) minus the CPU grid's.
_DEVICE = [("bald_cuda", "bald", "gal2017", "bald", [20, 500], [(1, 50), (1, 10)])]
_WEIGHTS = ("diverse_bald_m0_1", "diverse_bald_0_05", "diverse_bald_0_1", "diverse_bald_0_5")
_DIVERSE = [("diversity", w, "diversity", "bald", [50, 60, 70, 130], [(1, 5), (1, 10), (1, 20)]) for w in _WEIGHTS]
_DIVERSE += [("diversity", w, "gal2017", "bald", [], [(1, 10)]) for w in _WEIGHTS]
_DIVERSE += [("batchbald", "batch_bald", "batchbald", "bald", [100], []),
             ("repeated", "batch_bald", "repeated", "bald", [], [(5, 10)]),
             ("repeated", "bald", "repeated", "random", [], [(5, 10)]),
             ("repeated", "batch_bald", "repeated", "random", [], [(5, 10)]),
             ("repeated", "diverse_bald_0_1", "repeated", "bald", [], [(5, 10)]),
             ("kirsch2019", "batch_bald", "kirsch2019", "bald", [70, 120], []),
             ("ensemble", "bald__ensemble5", "ensemble", "bald", [20, 70, 220], [])]
_DIVERSE += [("initial_set", g, "initial_set", "bald", [20], [])
             for g in ("bald__bayesian_init_kmeans_per_class", "bald__bayesian_init_kmeans")]
_DIVERSE += [("ensemble", g, "ensemble", "bald__ensemble5", [], [])
             for g in ("bald", "max_entropy", "max_entropy__deterministic")]
#: The training of Kirsch et al. against Gal's, both with random acquisition
#: (the user guide's "Training with few labels").
_TRAINING = [("kirsch2019", "random", "gal2017", "random", [20, 100], [])]
#: (folder, group, folder, group, labels, step windows): A minus B seed by seed on the seeds both have.
PAIRS = _GAL + _NOISE + _DEVICE + _DIVERSE + _TRAINING
#: folder -> label counts: how many runs and mean curves dip there (lower than a step before).
DROPS = {"gal2017": [130, 260]}
#: (folder, groups, labels): the spread of those mean curves from ``labels`` on.
SPREADS = [("gal2017", ["variation_ratios", "variation_ratios__deterministic", "max_entropy",
                        "max_entropy__deterministic"], 620)]


#: (source folder, group, folders): the group's run files copied byte for byte from the source into the folders
#: (``tests/test_docs_numbers.py`` checks it). A copied group ran with the source's invocation, so its step
#: times are left out of the folders' ranges in :data:`STEP_RANGES`.
COPIED = [("bald_cuda", "bald", ["batchbald", "diversity", "initial_set"])]
#: name -> folders: ``results__step_s__<name>``, the range of the median step times of the folders' groups
#: (copied ones left out), and ``results__step_s__<name>__parallelism``, how many runs at a time ran them.
STEP_RANGES = {"gal2017_gpu": ["batchbald", "diversity", "initial_set", "repeated"]}


def _copied_and_ranges(results_dir: Path, subs: dict) -> dict:
    out = {}
    copied = {(folder, group) for _, group, folders in COPIED for folder in folders}
    for source, group, folders in COPIED:
        name = subs.get(f"{source}__{group}__name", group)
        listed = [f"`{f}/`" for f in folders]
        out[f"results__copied__{source}__{group}"] = (
            f"The {name} runs in {', '.join(listed[:-1]) + ' and ' + listed[-1] if len(listed) > 1 else listed[0]} "
            f"are byte-for-byte copies of `{source}/`'s")
    for name, folders in STEP_RANGES.items():
        steps = []
        for folder in folders:
            facts = json.loads((results_dir / folder / "facts.json").read_text())
            steps += [g["cost"]["step_s"] for key, g in facts["groups"].items()
                      if (folder, key) not in copied and g["cost"].get("step_s") is not None]
        out[f"results__step_s__{name}"] = range_text(two_figures(min(steps)), two_figures(max(steps)))
        texts = []
        for folder in folders:
            if subs[f"{folder}__parallelism"] not in texts:
                texts.append(subs[f"{folder}__parallelism"])
        out[f"results__step_s__{name}__parallelism"] = "; ".join(texts)
    return out


def demo_learning_substitutions(results_dir: Path) -> dict:
    """The labelling demo's curve (``demo_learning/results.json``, written by ``benchmarks/bench_demo_learning.py``).

    ``demo_learning__at<n>__median`` (the median over seeds of the test accuracy at ``n`` labels, three
    decimals as the script prints it), ``demo_learning__at<n>__median_pct`` (a percentage),
    ``demo_learning__at<n>__seed<s>_pct``, and ``demo_learning__seeds`` ("0, 1 and 2").
    """
    import statistics

    path = Path(results_dir) / "demo_learning" / "results.json"
    if not path.exists():
        return {}
    runs = json.loads(path.read_text())["runs"]
    out = {"demo_learning__seeds": ", ".join(str(r["seed"]) for r in runs[:-1]) + f" and {runs[-1]['seed']}"}
    for n in sorted({v["n_labels"] for r in runs for v in r["session"]}):
        accs = {r["seed"]: v["accuracy"] for r in runs for v in r["session"] if v["n_labels"] == n}
        median = statistics.median(accs.values())
        out[f"demo_learning__at{n}__median"] = f"{median:.3f}"
        out[f"demo_learning__at{n}__median_pct"] = f"{100 * median:.1f}%"
        for seed, acc in accs.items():
            out[f"demo_learning__at{n}__seed{seed}_pct"] = f"{100 * acc:.1f}%"
    return out


#: The page counts and figures of ``benchmarks/bench_waiting_pages.py`` that the performance page quotes.
WAITING_PAGES = (0, 40, 100, 200)
_LATENCY_FIGURES = ("median_ms", "p95_ms", "p99_ms", "max_ms")
#: What each figure reads before the benchmark's first committed run (the docs still build).
NOT_MEASURED = "—"


def waiting_pages_substitutions(results_dir) -> dict:
    """A submit's latency with pages waiting, and with half-sent connections open
    (``bench_waiting_pages/bench_waiting_pages.json``, written by ``benchmarks/bench_waiting_pages.py``).

    ``waiting_pages__pages<n>__<figure>`` for each ``n`` of :data:`WAITING_PAGES` and each of ``median_ms``,
    ``p95_ms``, ``p99_ms`` and ``max_ms`` (one decimal); ``waiting_pages__half_open__with__<figure>`` and
    ``…__without__<figure>``, ``…__half_open__connections``, ``…__closed`` (how many the server closed)
    and ``…__closed_last_s``; ``waiting_pages__submits`` and ``waiting_pages__rounds`` (the run's
    settings); ``waiting_pages__table``, the figures as a Markdown table. The same keys whether the
    JSON is there or not: before its first committed run each reads :data:`NOT_MEASURED`, the table a
    line that says so.

    Examples
    --------
    >>> subs = waiting_pages_substitutions("/nonexistent")
    >>> subs["waiting_pages__pages200__p99_ms"], subs["waiting_pages__half_open__closed"]
    ('—', '—')
    """
    path = Path(results_dir) / "bench_waiting_pages" / "bench_waiting_pages.json"
    record = json.loads(path.read_text()) if path.exists() else {}
    results, settings = record.get("results", {}), record.get("settings", {})
    half = results.get("half_open") or {}

    def figure(value, fmt="{:.1f}"):
        return NOT_MEASURED if value is None else fmt.format(value)

    out = {"waiting_pages__submits": figure(settings.get("submits"), "{}"),
           "waiting_pages__rounds": figure(settings.get("rounds"), "{}"),
           "waiting_pages__half_open__connections": figure(half.get("connections"), "{}"),
           "waiting_pages__half_open__closed": figure(half.get("closed"), "{}"),
           "waiting_pages__half_open__closed_last_s": figure(half.get("closed_last_s"))}
    rows = []
    for n in WAITING_PAGES:
        got = results.get("pages", {}).get(str(n), {})
        for name in _LATENCY_FIGURES:
            out[f"waiting_pages__pages{n}__{name}"] = figure(got.get(name))
        if got:
            rows.append([f"{n} pages waiting", got["n"],
                         *(out[f"waiting_pages__pages{n}__{k}"] for k in _LATENCY_FIGURES)])
    for case in ("without", "with"):
        got = half.get(case, {})
        for name in _LATENCY_FIGURES:
            out[f"waiting_pages__half_open__{case}__{name}"] = figure(got.get(name))
        if got:
            what = f"{half['connections']} half-sent connections open" if case == "with" else "no half-sent connection"
            rows.append([what, got["n"], *(out[f"waiting_pages__half_open__{case}__{k}"] for k in _LATENCY_FIGURES)])
    out["waiting_pages__table"] = _table(["a submit, with", "submits", "median, ms", "p95, ms", "p99, ms", "max, ms"],
                                         rows) if rows else "*Not measured yet: the command below writes the results.*"
    return out


def benchmark_jsons(results_dir) -> dict:
    """Every benchmark JSON under ``results_dir/*/`` (not ``facts.json`` or ``grid.json``): prefix -> path.

    The prefix is the folder's name, followed by ``__<file stem>`` when the
    stem is not the folder's name: ``bench_gpu/bench_gpu.json`` is
    ``bench_gpu``, ``second_looks/results_demo.json`` is
    ``second_looks__results_demo``.
    """
    out = {}
    for path in sorted(Path(results_dir).glob("*/*.json")):
        if path.name in ("facts.json", "grid.json"):
            continue
        folder = path.parent.name
        out[folder if path.stem == folder else f"{folder}__{path.stem}"] = path.relative_to(results_dir)
    return out


#: Raw text outputs whose Markdown tables a page quotes: prefix -> path under docs/results.
RAW_TABLES = {"bench_dask__powerbald_300k": "bench_dask/powerbald_300k.txt",
              # issue 43: the mask seedings side by side on the CPU (bench_scoring.py, SKDBAL_BENCH_OUT)
              "bench_scoring_seedings": "bench_scoring_seedings/output.txt",
              # the benchmarks' closing Markdown tables (benchmarks/_common.py, markdown_table)
              **{name: f"{name}/output.txt" for name in (
                  "bench_scoring", "bench_training", "bench_factored", "bench_batchbald", "bench_diversity",
                  "bench_step", "bench_parallel", "bench_labelling", "bench_labelling_think", "bench_memory",
                  "bench_label_representation")},
              "bench_dask": "bench_dask/output.txt"}


def raw_table_substitutions(text: str, prefix: str) -> dict:
    r"""The figures of a raw output's Markdown tables and first line.

    A row's cells are keyed by the row's label (its non-empty cells that do not
    start with a digit or a sign and a digit, slugged and joined by ``__``; where two rows of a table
    would share a label, each is prefixed with its first cell) and the column's header, slugged:
    ``<prefix>__<row>__<column>``; ``<prefix>__machine`` is the output's first line.

    Examples
    --------
    >>> raw = "host X, 2 CPUs\n| workers | strategy | wall (s) |\n|---|---|---|\n| 2 | bald | 143.0 |\n"
    >>> subs = raw_table_substitutions(raw, "b")
    >>> subs["b__machine"], subs["b__bald__wall_s"], subs["b__bald__workers"]
    ('host X, 2 CPUs', '143.0', '2')
    >>> raw_table_substitutions("x\n| query | extra | note |\n|---|---|---|\n| a | -7.8% |  |\n", "b")["b__a__extra"]
    '-7.8%'
    >>> two = "x\n| a | s |\n|---|---|\n| q | 1 |\n| b | n |\n|---|---|\n| r | 2 |\n"   # no blank line between
    >>> raw_table_substitutions(two, "t")["t__r__n"]
    '2'
    >>> same = "x\n| workers | strategy | s |\n|---|---|---|\n| 1 | bald | 9.0 |\n| 2 | bald | 5.0 |\n"
    >>> raw_table_substitutions(same, "d")["d__2__bald__s"]   # a label twice: the first cell tells them apart
    '5.0'
    """
    from skdbal.experiments.facts import _slug

    lines = text.splitlines()
    subs = {f"{prefix}__machine": lines[0].strip()} if lines else {}

    def cells_of(line):
        return [c.strip() for c in line.strip().strip("|").split("|")]

    def separator(line):
        return line.startswith("|") and set("".join(cells_of(line))) <= set("-: ")

    def label_of(cells):
        return "__".join(_slug(c) for c in cells if c and not c.lstrip("+-−")[:1].isdigit()) or _slug(cells[0])

    tables, header = [], None   # (header, rows) of each table
    for i, line in enumerate(lines):
        if not line.startswith("|"):
            header = None
            continue
        cells = cells_of(line)
        if i + 1 < len(lines) and separator(lines[i + 1]):   # a header, also right after another table
            header = [_slug(c) for c in cells]
            tables.append((header, []))
        elif header is not None and not separator(line):
            tables[-1][1].append(cells)
    for header, rows in tables:
        labels = [label_of(cells) for cells in rows]
        if len(set(labels)) < len(labels):   # rows told apart by their first cell (workers 1 and 2, say)
            labels = [f"{_slug(cells[0])}__{label}" for cells, label in zip(rows, labels)]
        for label, cells in zip(labels, rows):
            for column, cell in zip(header, cells):
                subs[f"{prefix}__{label}__{column}"] = cell
    return subs


def derived_substitutions(subs: dict) -> dict:
    """Figures computed from others, where a page needs another unit or a difference.

    - ``<key>_pct`` for each second-looks flag rate (a fraction): ``"0.0064"`` is ``"0.64%"``;
    - ``bench_memory__peak_VmRSS_GB`` (decimal GB, the target's unit) and
      ``bench_memory__RssAnon_added_GiB`` (the peak ``RssAnon`` less the one before scoring).

    Examples
    --------
    >>> derived_substitutions({"second_looks__x__flag_rate_labels_max": "0.0200"})
    {'second_looks__x__flag_rate_labels_max_pct': '2.0%'}
    """
    out = {}
    for key, value in subs.items():
        if key.startswith("second_looks__") and "__flag_rate_" in key:
            out[f"{key}_pct"] = f"{two_figures(100 * float(value))}%"
    if "bench_memory__peak_VmRSS__GiB" in subs:
        out["bench_memory__peak_VmRSS_GB"] = f"{float(subs['bench_memory__peak_VmRSS__GiB']) * 2**30 / 1e9:.2f}"
        added = (float(subs["bench_memory__peak_RssAnon__GiB"])
                 - float(subs["bench_memory__RssAnon_before_scoring__GiB"]))
        out["bench_memory__RssAnon_added_GiB"] = f"{added:.2f}"
    return out


def _table(header, rows) -> str:
    """A Markdown table: ``header`` and ``rows`` are lists of cells."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])


def _day(started) -> str:
    """The day of a start time, its hyphens non-breaking (U+2011) so that a narrow table column keeps it on one line."""
    return str(started)[:10].replace("-", "\u2011") if started else "not recorded"


def _commit(commit) -> str:
    return f"`{commit[:7]}`" if commit and commit != "not recorded" else "not recorded"


def grid_provenance_tables(results_dir) -> dict:
    """The results page's provenance: ``results__hosts_table`` and ``results__grids_table``, from every
    ``facts.json`` (its ``provenance``, as ``skdbal report`` writes it from ``grid.json``).

    A host is a distinct platform string with its cores; the grids' table names each folder's hosts, the
    runs at a time, its results version and mask seeding, its commits and the days it ran ("—" where no
    record says).
    """
    facts = {p.parent.name: json.loads(p.read_text()) for p in sorted(Path(results_dir).glob("*/facts.json"))}
    if not facts:
        return {}
    hosts = {}
    for f in facts.values():
        for m in f["provenance"]["machines"]:
            hosts.setdefault(m["platform"], m)
    gpu = [h for h, m in hosts.items() if not str(m.get("torch", "")).endswith("+cpu")]
    cpu = sorted(h for h in hosts if h not in gpu)
    # short names, their spaces non-breaking (U+00A0), so that a narrow column keeps each on one line
    names = {h: "GPU" + (f"\u00a0{i}" if len(gpu) > 1 else "") for i, h in enumerate(gpu, 1)}
    names.update({h: f"CPU\u00a0{chr(ord('A') + i)}" for i, h in enumerate(cpu)})

    def recorded(value):
        return value if value not in (None, "", "not recorded") else "not recorded"

    host_rows = [[names[h], m.get("cpu_count"), recorded(m.get("cpu_model")), m.get("python"), m.get("torch"), f"`{h}`"]
                 for h, m in sorted(hosts.items(), key=lambda kv: names[kv[0]])]
    grid_rows = []
    for folder, f in facts.items():
        prov = f["provenance"]
        runs_at_a_time = sorted({(p["n_jobs"], p["torch_threads"]) for p in prov["parallelism"]})
        invocations = prov["invocations"]
        commits = sorted({_commit(i.get("commit")).replace("not recorded", "—") for i in invocations}) or ["—"]
        days = sorted({_day(i.get("started")) for i in invocations if i.get("started")})
        grid_rows.append([
            f"{folder}/", ", ".join(names[m["platform"]] for m in prov["machines"]),
            ", ".join(f"{j}\u00a0×\u00a0{t}" for j, t in runs_at_a_time),
            ", ".join(str(v) for v in prov.get("results_versions") or [])
            + f" (`{f['preset'].get('mask_seeding') or 'stream'}`)", ", ".join(commits),
            (days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}") if days else "—"])
    return {"results__hosts_table": _table(["host", "cores", "CPU model", "Python", "torch", "platform"], host_rows),
            "results__grids_table": _table(["folder", "host", "runs × torch threads", "results version (masks)",
                                            "commit", "ran"], grid_rows)}


#: The performance page's benchmarks, in its order: (prefix of the substitutions, what the benchmark measures).
PERFORMANCE_BENCHMARKS = [
    ("bench_scoring", "scoring on a CPU"), ("bench_scoring_seedings", "the mask seedings on a CPU"),
    ("bench_factored", "Kirsch et al.'s CNN"), ("bench_memory", "memory"), ("bench_training", "training"),
    ("bench_step", "one acquisition step"), ("gal2017_warm_timed", "a full `gal2017` run"),
    ("bench_gpu", "on a GPU"), ("bench_batchbald", "BatchBALD"), ("bench_diversity", "the diversity penalty"),
    ("bench_parallel", "scaling out"), ("bench_dask", "a Dask cluster"),
    ("bench_dask__powerbald_300k", "PowerBALD on the cluster"), ("bench_labelling", "the labelling server"),
    ("bench_labelling_think", "the labelling server, with a think time"),
    ("bench_waiting_pages", "waiting pages and half-sent requests"), ("bench_labelstudio", "Label Studio"),
]
#: Commits that the person who ran a benchmark reported where its output records none.
REPORTED_COMMITS = {"bench_gpu": "70850c8", "bench_dask__powerbald_300k": "5ace33f"}
#: The packages a row of the table names besides Python and torch (and Dask's, for the cluster's benchmarks).
_VERSIONS = ("numpy", "skorch", "baal", "label_studio")


def benchmark_provenance_table(results_dir) -> dict:
    """``performance__provenance_table``: each benchmark of the performance page with its machine, versions,
    commit and start, read from its JSON (``provenance``, or ``meta`` where the script predates it), the
    raw output's first line where only that records the machine, or the run's ``grid.json`` facts."""
    results_dir = Path(results_dir)
    jsons = benchmark_jsons(results_dir)
    rows = []
    for prefix, what in PERFORMANCE_BENCHMARKS:
        # the folder's JSON: `bench_x/bench_x.json`, or one other name (`bench_labelling_think/bench_labelling.json`)
        named = [k for k in jsons if k == prefix or (k.startswith(prefix + "__") and "__" not in k[len(prefix) + 2:])]
        data = json.loads((results_dir / jsons[named[0]]).read_text()) if len(named) == 1 else {}
        prov, meta = data.get("provenance"), data.get("meta") or {}
        versions = {}
        if prov:
            machine = f"{prov.get('cpu_model') or 'CPU not recorded'}, {prov.get('cpu_count')} cores"
            machine += "".join(f", {g.get('name')}" for g in prov.get("gpus") or [])
            python, torch, commit, started = prov.get("python"), prov.get("torch"), prov.get("commit"), data["started"]
            versions = prov.get("versions") or {}
        elif "device_name" in meta:   # bench_gpu.py's meta
            cores = re.search(r"(\d+) CPUs", meta["machine"])
            machine = f"{meta['device_name']}, {cores.group(1) if cores else '?'} CPU cores"
            python = re.search(r"python ([\d.]+)", meta["machine"]).group(1)
            torch, commit, started = f"{meta['torch']} (CUDA {meta['cuda']})", None, meta["started"]
            versions = meta.get("versions") or {}
        elif "cpu" in meta:           # bench_labelstudio.py's meta
            machine, python, torch = f"{meta['cpu']}, {meta['cores']} cores", meta["python"], meta["torch"]
            commit, started, versions = meta.get("commit"), None, {**meta, "label_studio": meta.get("label_studio")}
        elif (results_dir / prefix / "facts.json").exists():   # a grid: its invocation
            inv = json.loads((results_dir / prefix / "facts.json").read_text())["provenance"]["invocations"][0]
            m = inv["machine"]
            machine, python, torch = f"{m.get('cpu_model')}, {m['cpu_count']} cores", m["python"], m["torch"]
            commit, started, versions = inv.get("commit"), inv.get("started"), m.get("versions") or {}
        elif prefix in RAW_TABLES and (results_dir / RAW_TABLES[prefix]).exists():   # its first line names the machine
            raw = (results_dir / RAW_TABLES[prefix]).read_text().splitlines()[0]
            cores = re.search(r"(\d+) CPUs", raw)
            machine = f"CPU not recorded, {cores.group(1)} cores" if cores else raw
            python = (re.search(r"python ([\d.]+)", raw) or [None, "not recorded"])[1]
            torch = (re.search(r"torch (\S+)", raw) or [None, "not recorded"])[1]
            commit, started = None, None
        else:                         # not measured in this folder
            continue
        commit_text = _commit(commit)
        if commit_text == "not recorded" and prefix in REPORTED_COMMITS:
            commit_text = f"not recorded (reported: `{REPORTED_COMMITS[prefix]}`)"
        names = _VERSIONS + (("dask", "distributed") if prefix.startswith(("bench_dask", "bench_parallel")) else ())
        others = ", ".join(f"{k.replace('_', '-')} {versions[k]}" for k in names if versions.get(k))
        rows.append([what, machine, python, torch, others or "not recorded", commit_text,
                     _day(started) if started else "not recorded"])
    return {"performance__provenance_table": _table(
        ["benchmark", "machine", "Python", "torch", "other packages", "commit", "run"], rows)}


def substitutions(results_dir) -> dict:
    """Every substitution of the docs, read from ``results_dir`` (``docs/results``)."""
    results_dir = Path(results_dir)
    subs = results_substitutions(results_dir, same_order=SAME_ORDER, above=ABOVE, at=AT, pairs=PAIRS,
                                 drops=DROPS, spreads=SPREADS)
    subs.update(_copied_and_ranges(results_dir, subs))
    for prefix, name in benchmark_jsons(results_dir).items():
        subs.update(json_substitutions(json.loads((results_dir / name).read_text()), prefix))
    for prefix, name in RAW_TABLES.items():
        subs.update(raw_table_substitutions((results_dir / name).read_text(), prefix))
    subs.update(demo_learning_substitutions(results_dir))
    subs.update(waiting_pages_substitutions(results_dir))
    pool = re.search(r"pool: ([\d,]+) x .*?, ([\d.]+) GiB in memory, ([\d.]+) GiB on disk",
                     (results_dir / "bench_dask" / "output.txt").read_text())
    subs.update(zip(("bench_dask__pool_images", "bench_dask__pool_GiB_memory", "bench_dask__pool_GiB_disk"),
                    pool.groups()))
    subs.update(derived_substitutions(subs))
    subs.update(grid_provenance_tables(results_dir))
    subs.update(benchmark_provenance_table(results_dir))
    return subs
