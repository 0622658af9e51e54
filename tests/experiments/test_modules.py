"""The experiments package's modules: one home for each concept (issue 40).

The runner and the report were split along their seams; these tests keep
what that must not change: the report loads no torch, the runner and the
report offer only their own names, no module is spelt like a public name,
no module grows back into a god-module, and a grid's runs come in the order
the runner always listed them.
"""
import csv
import importlib
import json
import os
import pkgutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

import skdbal.experiments
from skdbal.experiments import COLUMNS, RunSpec, get_preset

FOLDER = Path(skdbal.experiments.__file__).resolve().parent
MODULES = sorted(m.name for m in pkgutil.iter_modules(skdbal.experiments.__path__) if m.name != "__main__")


def _run_rows(strategy: str, accuracies) -> list:
    """One run's rows as the runner writes them: 20 initial labels, then 10 a step."""
    rows, index = [], 0
    for step, accuracy in enumerate(accuracies):
        n = 20 if step == 0 else 10
        rows.append({**dict.fromkeys(COLUMNS, ""), "preset": "gal2017", "strategy": strategy, "variant": "bayesian",
                     "seed": 1, "step": step, "n_labels": index + n, "n_acquired": index + n - 20,
                     "accuracy": accuracy, "train_time": 1.0, "query_time": 0.5 * (step > 0), "eval_time": 0.1,
                     "time": 1.6, "query_indices": " ".join(str(i) for i in range(index, index + n))})
        index += n
    return rows


def _write_rows(path: Path, rows: list) -> list:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return rows


def _env() -> dict:
    """The environment of a fresh interpreter that imports this checkout's skdbal."""
    path = [str(FOLDER.parents[1])] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**os.environ, "MPLBACKEND": "Agg", "PYTHONPATH": os.pathsep.join(path)}


@pytest.fixture
def tiny_grid(tmp_path):
    """A grid folder written by hand: two runs' files, their results.csv and grid.json."""
    (tmp_path / "runs").mkdir()
    rows = []
    for strategy, accuracies in (("bald", [0.5, 0.8, 0.92]), ("random", [0.5, 0.7, 0.85])):
        rows += _write_rows(tmp_path / "runs" / f"gal2017__{strategy}__bayesian__seed1.csv",
                            _run_rows(strategy, accuracies))
    _write_rows(tmp_path / "results.csv", rows)
    preset = get_preset("gal2017", n_queries=2).as_dict()
    (tmp_path / "grid.json").write_text(json.dumps({"preset": preset}, default=str))
    return tmp_path


def test_the_report_loads_no_torch(tiny_grid):
    """Writing a markdown table from CSVs must not load torch (nor skorch): the report, and everything it
    imports, reads results through the torch-free modules. The report once imported the runner."""
    script = textwrap.dedent(f"""
        import sys
        import skdbal.experiments.report as report
        assert "torch" not in sys.modules, "importing the report loaded torch"
        from skdbal.cli import main
        assert main(["report", {str(tiny_grid)!r}, "--cost"]) == 0
        loaded = sorted(m for m in ("torch", "skorch") if m in sys.modules)
        assert not loaded, f"the report loaded {{loaded}}"
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=_env(), timeout=300)
    assert done.returncode == 0, done.stderr
    assert {p.name for p in tiny_grid.iterdir()} >= {"table.md", "learning_curves.png", "cost.md"}
    assert "| BALD | bayesian | 1 (2) | 40 (20) |" in (tiny_grid / "table.md").read_text()


@pytest.mark.parametrize("module", ["specs", "results", "configs", "grouping", "grid_reading", "curves",
                                    "diversity_weights", "last_layer", "calibration", "label_noise", "report",
                                    "presets", "plotting"])
def test_torch_free_modules(module):
    """The modules under the report, and the specs of a grid, import no torch."""
    script = f"import sys, skdbal.experiments.{module}; assert 'torch' not in sys.modules"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=_env(), timeout=300)
    assert done.returncode == 0, done.stderr


def test_the_runner_and_the_report_offer_only_their_own_names():
    """The runner and the report name what they define; the rest is imported from its home (the names
    they kept for old callers are gone)."""
    from skdbal.experiments import report, runner

    assert runner.__all__ == ["run_grid", "run_one"] and report.__all__ == ["write_cost", "write_report"]
    for gone in ("comparable_configs", "read_results", "make_estimator", "COLUMNS", "LAST_LAYERS"):
        assert not hasattr(runner, gone), gone
    for gone in ("comparable_configs", "read_results", "group_runs", "ANCHORS", "PRESETS", "legend_outside"):
        assert not hasattr(report, gone), gone


def test_the_package_names_come_from_their_homes():
    for name in skdbal.experiments.__all__:
        home = importlib.import_module(f"skdbal.experiments.{skdbal.experiments._NAMES[name]}")
        value = getattr(home, name)
        assert getattr(skdbal.experiments, name) is value
        if callable(value):  # defined there, not re-imported
            assert value.__module__ == home.__name__, name


def test_no_module_is_spelt_like_a_public_name():
    """``skdbal.experiments.<x>`` is a module or a name, never both: a name that shadows a module (or is
    shadowed by it) makes ``from skdbal.experiments import x`` depend on what was imported before."""
    clashes = []
    for module in MODULES:
        mod = importlib.import_module(f"skdbal.experiments.{module}")
        clashes += [f"{module}.{name}" for name, value in vars(mod).items()
                    if name in MODULES and not isinstance(value, type(mod))]
    clashes += [name for name in skdbal.experiments.__all__ if name in MODULES]
    assert not clashes


@pytest.mark.parametrize("path", sorted(FOLDER.glob("*.py")), ids=lambda p: p.name)
def test_no_module_is_a_god_module(path):
    """Issue 40: a concept per module; none over 800 lines (about 500 is the aim)."""
    assert len(path.read_text().splitlines()) <= 800


def _old_specs(preset, strategies, seeds, deterministic_baseline, last_layer, noise_rates, initial_sets, ensemble,
               laplace):
    """run_grid's five comprehensions before they became one (the order a grid's runs were listed in)."""
    if laplace:
        specs = [RunSpec(preset, s, int(seed), noise_rate=r, initial_set=i, laplace=True)
                 for i in initial_sets for r in noise_rates for seed in seeds for s in strategies]
    elif ensemble:
        specs = [RunSpec(preset, s, int(seed), noise_rate=r, initial_set=i, ensemble=int(ensemble))
                 for i in initial_sets for r in noise_rates for seed in seeds for s in strategies]
    elif last_layer:
        specs = [RunSpec(preset, s, int(seed), last_layer=v, noise_rate=r, initial_set=i)
                 for i in initial_sets for r in noise_rates for v in last_layer for seed in seeds for s in strategies]
    else:
        specs = [RunSpec(preset, s, int(seed), noise_rate=r, initial_set=i)
                 for i in initial_sets for r in noise_rates for seed in seeds for s in strategies]
    if deterministic_baseline:
        specs += [RunSpec(preset, s, int(seed), mc_dropout=False, noise_rate=r, initial_set=i)
                  for i in initial_sets for r in noise_rates for seed in seeds for s in strategies
                  if s in ("max_entropy", "variation_ratios")]
    return specs


@pytest.mark.parametrize("arguments", [
    dict(),
    dict(deterministic_baseline=True),
    dict(last_layer=["analytic", "mfvi"], deterministic_baseline=True,
         strategies=["max_entropy", "predictive_variance"]),
    dict(ensemble=3, noise_rates=[0.0, 0.2]),
    dict(laplace=True, initial_sets=["balanced_random", "kmeans"]),
    dict(noise_rates=[0.1, 0.3], initial_sets=["kmeans_per_class", "balanced_random"], deterministic_baseline=True),
])
def test_a_grid_lists_its_runs_in_the_old_order(arguments):
    from skdbal.experiments.specs import grid_specs

    preset = get_preset("gal2017")
    full = dict(strategies=["max_entropy", "bald", "variation_ratios"], seeds=[2, 1], deterministic_baseline=False,
                last_layer=[], noise_rates=[0.0], initial_sets=["balanced_random"], ensemble=0, laplace=False)
    full.update(arguments)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        specs, recorded = grid_specs(preset, **full)
    # the strategies without a deterministic baseline are named, as before
    assert [str(w.message) for w in caught if "get none" in str(w.message)] != [] if full["deterministic_baseline"] \
        else caught == []
    assert specs == _old_specs(preset, **full)
    assert list(recorded) == ["strategies", "seeds", "deterministic_baseline", "last_layer", "noise_rates",
                              "initial_sets", "ensemble"] + (["laplace"] if full["laplace"] else [])
