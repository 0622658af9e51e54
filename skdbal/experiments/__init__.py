"""Research tooling: experiment grids, protocols, reports, the quickstart and the experiment commands.

Kept apart from the estimators: the models, the strategies, the learner and
its loop never import it. Only the commands do, at the top of the layers:
:mod:`skdbal.cli` hands the experiment subcommands to
:mod:`skdbal.experiments.cli`, and :mod:`skdbal.labelling.cli` takes the
digits demo's pool and network from :mod:`~skdbal.experiments.data` and
:mod:`~skdbal.experiments.quickstart` (``skdbal label --demo digits``).

- :mod:`skdbal.experiments.runner`: resumable grids of (preset, strategy,
  seed) runs, :func:`run_grid`, with a tidy ``results.csv``; it runs them on

  - :mod:`skdbal.experiments.specs`: the runs of a grid, :class:`RunSpec`,
    and the checks made before any runs;
  - :mod:`skdbal.experiments.results`: the result files (run CSVs,
    ``results.csv``), read, checked and written, and the folder locks;
  - :mod:`skdbal.experiments.configs`: whether runs share a configuration;
  - :mod:`skdbal.experiments.factories`: the data, their split, and the
    models a run trains;
  - :mod:`skdbal.experiments.journal`: a run in progress on disk;
- :mod:`skdbal.experiments.presets`: the ``gal2017``, ``pilz2025`` and ``kirsch2019``
  protocols, every number a field;
- :mod:`skdbal.experiments.report`: tables and figures from ``results.csv``,
  one module per section (:mod:`~skdbal.experiments.curves`,
  :mod:`~skdbal.experiments.diversity_weights`,
  :mod:`~skdbal.experiments.last_layer`,
  :mod:`~skdbal.experiments.calibration`,
  :mod:`~skdbal.experiments.label_noise`) on the runs as
  :mod:`~skdbal.experiments.grid_reading` reads a grid's folder and
  :mod:`~skdbal.experiments.grouping` groups them; none of them imports
  torch;
- :mod:`skdbal.experiments.facts`: a grid's ``facts.json``, the figures its
  pages quote, and their MyST substitutions, with the noise of a median in
  :mod:`~skdbal.experiments.seed_variance`;
- :mod:`skdbal.experiments.plotting`: the figure helpers the report and the
  quickstart share;
- :mod:`skdbal.experiments.quickstart`: BALD against random on digits;
- :mod:`skdbal.experiments.data`: the bundled digits as images, read by the
  runner and the quickstart;
- :mod:`skdbal.experiments.cli`: the experiment commands of ``skdbal``
  (:mod:`skdbal.cli`).

Imports point one way, function-level ones included: cli → quickstart,
report, facts, runner; facts → grid_reading, grouping, seed_variance;
runner → journal → factories → specs → presets, data;
runner and report → configs → results; report → its sections → grouping,
plotting (``tests/test_structure.py`` checks that there is no cycle). Each
module here reaches the rest of the package through public modules and
names only, as a user would.

The runner's public names are importable from here.
"""
import importlib

#: Public names, by the module that defines them (imported on first use: the
#: command line starts without loading torch).
_NAMES = {
    "Preset": "presets", "PRESETS": "presets", "get_preset": "presets",
    "RunSpec": "specs", "LAST_LAYERS": "specs",
    **{name: "results" for name in ("COLUMNS", "DamagedResultsError", "FolderLockedError", "assemble_results",
                                    "check_run_rows", "read_results")},
    **{name: "factories" for name in ("even_batch_size", "load_data", "make_estimator", "make_last_layer")},
    "run_grid": "runner", "run_one": "runner",
}

__all__ = ["RunSpec", "run_grid", "run_one", "read_results", "check_run_rows", "assemble_results",
           "DamagedResultsError", "load_data", "make_estimator", "make_last_layer", "even_batch_size",
           "FolderLockedError", "COLUMNS", "LAST_LAYERS", "Preset", "PRESETS", "get_preset"]


def __getattr__(name):
    if name not in _NAMES:
        raise AttributeError(f"module 'skdbal.experiments' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_NAMES[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
