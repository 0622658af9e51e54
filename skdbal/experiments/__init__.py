"""Research tooling: experiment grids, protocols, reports, the quickstart and the CLI.

Kept apart from the estimators: nothing in :mod:`skdbal` outside this
package imports it.

- :mod:`skdbal.experiments.runner`: resumable grids of (preset, strategy,
  seed) runs, :func:`run_grid`, with a tidy ``results.csv``;
- :mod:`skdbal.experiments.presets`: the ``gal2017``, ``pilz2025`` and ``kirsch2019``
  protocols, every number a field;
- :mod:`skdbal.experiments.report`: tables and figures from ``results.csv``;
- :mod:`skdbal.experiments.plotting`: the figure helpers the report and the
  quickstart share;
- :mod:`skdbal.experiments.quickstart`: BALD against random on digits;
- :mod:`skdbal.experiments.data`: the bundled digits as images, read by the
  runner and the quickstart;
- :mod:`skdbal.experiments.cli`: the ``skdbal`` command.

Imports point one way, function-level ones included: cli → quickstart →
report → runner → presets, data, with plotting under report and quickstart
(``tests/test_structure.py`` checks it). Each module here reaches the rest of
the package through public modules and names only, as a user would.

The runner's public names are importable from here.
"""
import importlib

#: Public names, by the module that defines them (imported on first use: the
#: command line starts without loading torch).
_NAMES = {
    "Preset": "presets", "PRESETS": "presets", "get_preset": "presets",
    **{name: "runner" for name in ("COLUMNS", "LAST_LAYERS", "DamagedResultsError", "FolderLockedError", "RunSpec",
                                   "assemble_results", "check_run_rows", "even_batch_size", "load_data",
                                   "make_estimator", "make_last_layer", "read_results", "run_grid", "run_one")},
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
