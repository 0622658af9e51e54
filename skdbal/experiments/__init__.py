"""Research tooling: experiment grids, protocols, reports, the quickstart and the CLI.

Kept apart from the estimators: nothing in :mod:`skdbal` outside this
package imports it.

- :mod:`skdbal.experiments.runner`: resumable grids of (preset, strategy,
  seed) runs, :func:`run_grid`, with a tidy ``results.csv``;
- :mod:`skdbal.experiments.presets`: the ``gal2017`` and ``pilz2025``
  protocols, every number a field;
- :mod:`skdbal.experiments.report`: tables and figures from ``results.csv``;
- :mod:`skdbal.experiments.quickstart`: BALD against random on digits;
- :mod:`skdbal.experiments.cli`: the ``skdbal`` command.

The runner's public names are importable from here.
"""
from .presets import PRESETS, Preset, get_preset
from .runner import (COLUMNS, LAST_LAYERS, DamagedResultsError, FolderLockedError, RunSpec, assemble_results,
                     check_run_rows, even_batch_size, load_data, make_estimator, make_last_layer, read_results,
                     run_grid, run_one)

__all__ = ["RunSpec", "run_grid", "run_one", "read_results", "check_run_rows", "assemble_results",
           "DamagedResultsError", "load_data", "make_estimator",
           "make_last_layer", "even_batch_size", "FolderLockedError", "COLUMNS", "LAST_LAYERS",
           "Preset", "PRESETS", "get_preset"]
