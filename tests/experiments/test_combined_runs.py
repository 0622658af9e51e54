"""Runs combined in one folder, and the checks made before a grid starts (issue 27, second review)."""
import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

from skdbal.acquisition import canonical_name
from skdbal.cli import main
from skdbal.experiments import DamagedResultsError, RunSpec, configs, get_preset, run_grid, run_one, runner, specs
from skdbal.experiments.cli import _parse_overrides

TINY = dict(dataset="digits", n_queries=1, max_epochs=2, n_samples=4, pool_subsample=100, n_validation=50,
            module_params={"kernel_size": 3})
RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"


def grid(out, strategies=("random",), seeds=(1,), **changes):
    return run_grid("gal2017", list(strategies), list(seeds), out, torch_threads=1, verbose=False,
                    **{**TINY, **changes})


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    out = tmp_path_factory.mktemp("finished")
    grid(out)
    return out


@pytest.fixture
def folder(finished, tmp_path):
    out = tmp_path / "grid"
    shutil.copytree(finished, out)
    return out


def snapshot(out):
    return {p.relative_to(out): p.read_bytes() for p in sorted(Path(out).rglob("*")) if p.is_file()}


# ------------------------------------------------------------------- A: one configuration per folder
@pytest.mark.parametrize("changes, field", [
    ({"max_epochs": 8}, "preset.max_epochs"),
    ({"mask_seeding": "stream"}, "results_version"),
    ({"mask_seeding": "row_philox"}, "results_version"),  # version 5: Philox on the device (issue 43)
    ({"n_initial_per_class": 3}, "preset.n_initial_per_class"),
])
def test_a_run_of_another_configuration_is_refused_before_anything_is_written(folder, changes, field):
    before = snapshot(folder)
    with pytest.raises(ValueError, match=rf"(?s)another configuration.*another output folder.*{field}"):
        grid(folder, seeds=(2,), **changes)
    with pytest.raises(ValueError, match=rf"(?s)another configuration.*{field}"):
        run_one(RunSpec(get_preset("gal2017", **{**TINY, **changes}), "random", 2), folder)
    assert snapshot(folder) == before  # no run file, and grid.json untouched


def test_a_run_of_another_preset_is_refused(folder):
    mine = get_preset("gal2017", **TINY).replace(name="mine")
    before = snapshot(folder)
    with pytest.raises(ValueError, match=r"(?s)another configuration.*preset.name: 'gal2017' in the folder, 'mine'"):
        run_grid(mine, ["random"], [1], folder, torch_threads=1, verbose=False)
    assert snapshot(folder) == before


def test_per_run_differences_are_accepted(folder):
    rows = grid(folder, strategies=("max_entropy",), seeds=(2,), noise_rates=[0.2])
    assert {(r["strategy"], r["seed"], r["noise_rate"] or 0.0) for r in rows} == {("random", 1, 0.0),
                                                                                 ("max_entropy", 2, 0.2)}


def test_an_invocation_that_runs_nothing_is_refused(folder):
    before = snapshot(folder)
    with pytest.raises(ValueError, match="at least one strategy"):
        grid(folder, strategies=())
    assert snapshot(folder) == before


def test_fewer_queries_than_the_folder_records_warn_that_the_report_is_cut(folder):
    with pytest.warns(UserWarning, match=r"n_queries=0 is below the 1 .* cut every run there at step 0"):
        grid(folder, n_queries=0)


def test_every_committed_run_passes_the_folder_check():
    checked = 0
    for runs in sorted(RESULTS.glob("*/runs")):
        stored = configs.folder_configs(runs)
        for path, c in stored.items():
            spec = RunSpec(configs.stored_preset(c), c["strategy"], c["seed"], mc_dropout=c["mc_dropout"],
                           last_layer=c.get("last_layer"), noise_rate=c.get("noise_rate", 0.0),
                           initial_set=c.get("initial_set", "balanced_random"), ensemble=c.get("ensemble", 0),
                           laplace=c.get("laplace", False))
            assert spec.run_id == path.stem
            configs.check_folder_config(spec, stored)
            configs.check_run_config(spec, runs)
            checked += 1
    assert checked > 100


# ------------------------------------------------------------------- B: another device
def test_resuming_on_another_device_warns_naming_both(folder):
    path = folder / "runs" / "gal2017__random__bayesian__seed1.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "device": "cuda"}))  # as if started on a GPU
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        grid(folder, n_queries=2)
    messages = [str(w.message) for w in caught if w.category is UserWarning]
    assert any("on cuda and resumes on cpu" in m for m in messages), messages
    assert json.loads(path.read_text())["device_steps"] == [[0, "cuda"], [2, "cpu"]]


# ------------------------------------------------------------------- C: sizes checked up front
@pytest.mark.parametrize("changes, match", [
    ({"pool_size": 45, "n_queries": 5}, r"need 70 labels .* n_queries=5 x n_instances=10\), but the pool holds 45"),
    ({"n_validation": 1200, "n_queries": 8}, r"need 100 labels .* but the pool holds 97"),
    ({"n_test": 100000}, r"n_test=100000 exceeds the 500 test points of digits"),
    ({"pool_size": 100000}, r"pool_size=100000 exceeds the 1247 points"),
])
def test_a_run_that_the_data_cannot_hold_is_refused_up_front(tmp_path, changes, match):
    with pytest.raises(ValueError, match=match):
        grid(tmp_path / "out", **changes)
    with pytest.raises(ValueError, match=match):
        run_one(RunSpec(get_preset("gal2017", **{**TINY, **changes}), "random", 1), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_the_data_sizes_are_those_of_the_data():
    X_train, _, X_test, _ = runner.load_data("digits")
    assert specs._DATA_SIZES["digits"] == (len(X_train), len(X_test))


# ------------------------------------------------------------------- D: preset types
@pytest.mark.parametrize("changes, match", [
    ({"last_layer_fit_hyperparameters": "false"}, "last_layer_fit_hyperparameters must be True or False; got 'false'"),
    ({"last_layer_fit_hyperparameters": 1}, "must be True or False; got 1"),
    ({"module_params": [1, 2]}, "module_params must be a dict"),
    ({"module_params": "kernel_size=3"}, "module_params must be a dict"),
    ({"notes": 3}, "notes must be a str"),
    ({"warm_epochs": 2.5}, "warm_epochs must be"),
])
def test_preset_fields_of_the_wrong_type_are_refused(changes, match):
    with pytest.raises(TypeError, match=match):
        get_preset("gal2017", **changes)


@pytest.mark.parametrize("changes, match", [
    ({"warm_epochs": 0}, "warm_epochs must be >= 1; got 0"),
    ({"mask_seeding": "cell"},
     r"mask_seeding must be one of \['row_pcg64', 'row', 'stream', 'row_philox'\]; got 'cell'"),
])
def test_preset_fields_out_of_range_are_refused(changes, match):
    with pytest.raises(ValueError, match=match):
        get_preset("gal2017", **changes)


def test_preset_name_must_be_a_str_and_numpy_bools_are_plain():
    with pytest.raises(TypeError, match="name must be a str; got 3"):
        get_preset("gal2017").replace(name=3)
    value = get_preset("gal2017", last_layer_fit_hyperparameters=np.True_).last_layer_fit_hyperparameters
    assert value is True


def test_set_converts_true_and_false_for_bool_fields_only():
    assert _parse_overrides(["last_layer_fit_hyperparameters=false"]) == {"last_layer_fit_hyperparameters": False}
    assert _parse_overrides(["last_layer_fit_hyperparameters=True"]) == {"last_layer_fit_hyperparameters": True}
    assert _parse_overrides(["module=false"]) == {"module": "false"}


def test_set_a_bool_field_to_another_word_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["experiment", "--out", str(tmp_path), "--set", "last_layer_fit_hyperparameters=no"])
    assert exc.value.code == 2 and "must be True or False; got 'no'" in capsys.readouterr().err


# ------------------------------------------------------------------- E: run files without their pair
def test_rows_without_their_configuration_are_refused(folder):
    (folder / "runs" / "gal2017__random__bayesian__seed1.json").unlink()
    before = snapshot(folder)
    with pytest.raises(DamagedResultsError, match=r"gal2017__random__bayesian__seed1.csv holds rows but .* unknown"):
        grid(folder, n_queries=2, max_epochs=9)
    assert snapshot(folder) == before


def test_a_configuration_without_rows_is_replaced_with_a_warning(tmp_path):
    with pytest.raises(AttributeError, match="Nope"):
        grid(tmp_path, module="Nope")  # a failed start leaves a JSON and no rows
    assert [p.name for p in (tmp_path / "runs").iterdir()] == ["gal2017__random__bayesian__seed1.json"]
    with pytest.warns(UserWarning, match="wrote no rows .* replaced"):
        rows = grid(tmp_path)
    assert len(rows) == 2
    assert json.loads((tmp_path / "runs" / "gal2017__random__bayesian__seed1.json").read_text())["preset"]["module"] \
        == "BayesianCNN"


# ------------------------------------------------------------------- F: one spelling per strategy
def test_strategy_spellings_are_normalised_and_deduplicated(tmp_path):
    rows = grid(tmp_path, strategies=("diverse(bald,0.10)", "diverse( bald , 1e-1 )", "filter(bald, dynamic)"),
                n_queries=0)
    assert sorted({r["strategy"] for r in rows}) == ["diverse(bald,0.1)", "filter(bald,dynamic)"]
    assert sorted(p.name for p in (tmp_path / "runs").glob("*.csv")) == [
        "gal2017__diverse-bald-0.1__bayesian__seed1.csv", "gal2017__filter-bald-dynamic__bayesian__seed1.csv"]


def test_committed_strategy_names_are_canonical():
    names = set()
    for path in RESULTS.glob("*/grid.json"):
        meta = json.loads(path.read_text())
        names.update(s for entry in meta.get("invocations", []) + [meta] for s in entry.get("strategies", []))
    for path in RESULTS.glob("*/runs/*.json"):
        names.add(json.loads(path.read_text())["strategy"])
    assert len(names) >= 10
    assert {name: canonical_name(name) for name in names} == {name: name for name in names}


# ------------------------------------------------------------------- G: command-line conflicts
@pytest.mark.parametrize("args, message", [
    (["--dataset", "digits", "--set", "dataset='mnist'"], "--dataset digits and --set dataset='mnist' disagree"),
    (["--set", "n_queries=1", "--set", "n_queries=2"], "--set n_queries is given twice with different values"),
    (["--strategies", ","], "--strategies names no strategy"),
    (["--set", "name=x"], "--set name=... is not accepted"),
])
def test_conflicting_command_lines_are_usage_errors(tmp_path, capsys, args, message):
    with pytest.raises(SystemExit) as exc:
        main(["experiment", "--out", str(tmp_path / "out")] + args)
    assert exc.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------- H: a one-member ensemble
@pytest.mark.parametrize("strategy", ["bald", "mean_std", "variation_ratios", "batch_bald", "filter(bald,0.1)"])
def test_a_one_member_ensemble_with_a_sampling_strategy_is_refused(tmp_path, strategy):
    with pytest.raises(ValueError, match=r"ensemble=1 gives one sample per point.*ties"):
        grid(tmp_path / "out", strategies=(strategy, "max_entropy"), ensemble=1)
    assert not (tmp_path / "out").exists()
    assert not specs._needs_samples("max_entropy") and not specs._needs_samples("random")


# ------------------------------------------------------------------- I: report --clean
def test_report_clean_without_noisy_runs_or_a_grid_is_a_usage_error(finished, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["report", str(finished), "--clean", str(tmp_path / "nowhere")])
    assert exc.value.code == 2 and "no grid there" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["report", str(finished), "--clean", str(finished)])
    assert exc.value.code == 2 and "has no noisy runs" in capsys.readouterr().err


def test_the_presets_know_the_samplers_mask_seedings():
    """presets.py imports neither torch nor numpy, so it keeps its own copy of the seedings."""
    from skdbal.experiments.presets import _MASK_SEEDINGS
    from skdbal.models._mc_masks import MASK_SEEDINGS

    assert _MASK_SEEDINGS == MASK_SEEDINGS
