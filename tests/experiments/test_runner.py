import csv
import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from skdbal.experiments import COLUMNS, FolderLockedError, RunSpec, make_estimator, read_results, run_grid, run_one
from skdbal.experiments.curves import table_markdown
from skdbal.experiments.last_layer import last_layer_markdown
from skdbal.experiments.presets import PRESETS, get_preset
from skdbal.experiments.report import write_report

TINY = dict(dataset="digits", n_queries=3, max_epochs=3, module_params={"kernel_size": 3}, n_samples=5,
            pool_subsample=150, n_validation=50)
TINY_CLI = ["--set", "dataset='digits'", "--set", "max_epochs=25", "--set", "module_params={'kernel_size': 3}",
            "--set", "n_samples=5", "--set", "pool_subsample=150", "--set", "n_validation=50",
            "--set", "n_queries=6", "--seeds", "1", "--strategies", "bald,random", "--torch-threads", "1", "--quiet"]


def without_times(path):
    with open(path, newline="") as f:
        return [{k: v for k, v in row.items() if not k.endswith("time")} for row in csv.DictReader(f)]


def test_presets_document_the_protocols():
    gal = PRESETS["gal2017"]
    assert (gal.n_initial_per_class, gal.n_validation, gal.pool_subsample, gal.n_queries, gal.n_instances) == \
        (2, 100, 2000, 100, 10)
    assert (gal.max_epochs, gal.batch_size, gal.lr, gal.n_samples, gal.scaled_l2) == (50, 128, 1e-3, 100, 3.5)
    assert (gal.optimizer, gal.weight_decay, gal.selection, gal.eval_method, gal.pool_size, gal.n_test) == \
        ("adam", 0.0, "last", "deterministic", None, None)
    pilz = PRESETS["pilz2025"]
    assert (pilz.module, pilz.n_samples, pilz.n_validation, pilz.selection) == ("LeNet5", 64, 1000, "best_valid_loss")
    # seed 001 §3.1: AdamW (lr 1e-3, weight decay 0.01), full batch, 400 epochs, 5,000 scored per step
    assert (pilz.optimizer, pilz.lr, pilz.weight_decay, pilz.batch_size, pilz.max_epochs, pilz.pool_subsample,
            pilz.scaled_l2, pilz.n_initial_per_class, pilz.n_instances) == \
        ("adamw", 1e-3, 0.01, None, 400, 5000, None, 2, 10)
    kirsch = PRESETS["kirsch2019"]
    # Kirsch et al.'s net, batches of 64, 4096 x 6 draws a step in one epoch, no Gal l2, T = 100
    assert (kirsch.module, kirsch.batch_size, kirsch.max_epochs, kirsch.epoch_samples, kirsch.scaled_l2,
            kirsch.n_samples, kirsch.selection, kirsch.pool_subsample, kirsch.n_instances) == \
        ("KirschCNN", 64, 1, 24576, None, 100, "last", 2000, 10)
    assert gal.epoch_samples is None and pilz.epoch_samples is None
    with pytest.raises(ValueError, match=r"unknown preset field\(s\) \['n_querys'\]"):
        get_preset("gal2017", n_querys=3)
    with pytest.raises(ValueError, match="unknown preset"):
        get_preset("gal2016")


@pytest.mark.parametrize("changes, error, match", [
    ({"optimizer": "sgd"}, ValueError, r"optimizer must be one of \['adam', 'adamw'\]; got 'sgd'"),
    ({"selection": "best"}, ValueError, "selection must be one of"),
    ({"eval_method": "mean"}, ValueError, "eval_method must be one of"),
    ({"dataset": "cifar"}, ValueError, "dataset must be one of"),
    ({"n_queries": -1}, ValueError, "n_queries must be >= 0; got -1"),
    ({"n_instances": 0}, ValueError, "n_instances must be >= 1"),
    ({"n_instances": 2.5}, TypeError, "n_instances must be an int; got 2.5"),
    ({"n_samples": True}, TypeError, "n_samples must be an int"),
    ({"pool_subsample": "all"}, TypeError, "pool_subsample must be an int or None"),
    ({"lr": 0}, ValueError, "lr must be > 0"),
    ({"lr": float("nan")}, ValueError, "lr must be > 0"),
    ({"weight_decay": float("inf")}, ValueError, "weight_decay must be >= 0"),
    ({"weight_decay": -0.1}, ValueError, "weight_decay must be >= 0"),
    ({"last_layer_noise_variance": 0.0}, ValueError, "last_layer_noise_variance must be > 0"),
])
def test_invalid_preset_fields(changes, error, match):
    with pytest.raises(error, match=match):
        get_preset("gal2017", **changes)
    assert get_preset("gal2017", pool_subsample=None, batch_size=None).batch_size is None


def test_numpy_scalars_in_a_preset_are_plain_numbers():
    # json.dumps(default=str) would store np.int64(100) as "100", and the run would not resume
    p = get_preset("gal2017", pool_size=np.int64(100), lr=np.float32(0.5), scaled_l2=1)
    assert type(p.pool_size) is int and type(p.lr) is float and type(p.scaled_l2) is float
    assert RunSpec(p, "bald", 1).config() == RunSpec(get_preset("gal2017", pool_size=100, lr=0.5, scaled_l2=1.0),
                                                     "bald", 1).config()


def test_scaled_l2_sets_weight_decay_2c_over_n(digits):
    X, y = digits
    est = make_estimator(get_preset("gal2017", max_epochs=1, module_params={"kernel_size": 3}), random_state=0)
    est.fit(X[:40], y[:40])
    groups = est.optimizer_.param_groups
    scaled = [g for g in groups if g.get("skdbal_scaled_l2")]
    assert len(scaled) == 1 and scaled[0]["weight_decay"] == pytest.approx(2 * 3.5 / 40)
    assert scaled[0]["params"][0] is est.module_.head[2].weight
    assert all(est.module_.head[2].weight is not p for g in groups if g not in scaled for p in g["params"])


def test_epoch_samples_trains_on_fixed_length_epochs(digits):
    X, y = digits
    preset = get_preset("gal2017", dataset="digits", module_params={"kernel_size": 3}, max_epochs=2, batch_size=64,
                        epoch_samples=640, scaled_l2=None)
    est = make_estimator(preset, random_state=0).fit(X[:40], y[:40])
    # 640 draws of the 40 labels, 64 a batch: 10 steps an epoch instead of 1
    assert [len(h["batches"]) for h in est.history] == [10, 10]
    plain = make_estimator(preset.replace(epoch_samples=None), random_state=0).fit(X[:40], y[:40])
    assert [len(h["batches"]) for h in plain.history] == [1, 1]
    with pytest.raises(ValueError, match="epoch_samples must be >= 1"):
        preset.replace(epoch_samples=0)
    # a run stored before the field existed reads as epoch_samples=None
    from skdbal.experiments.configs import _same_config
    current = json.loads(json.dumps(RunSpec(get_preset("gal2017"), "bald", 1).config(), default=str))
    stored = {**current, "preset": {k: v for k, v in current["preset"].items() if k != "epoch_samples"}}
    assert _same_config(stored, current)
    assert not _same_config(stored, json.loads(json.dumps(
        RunSpec(get_preset("gal2017", epoch_samples=640), "bald", 1).config(), default=str)))


def test_best_valid_loss_selection(digits):
    X, y = digits
    preset = get_preset("pilz2025", dataset="digits", module="BayesianCNN", module_params={"kernel_size": 3},
                        max_epochs=8)
    est = make_estimator(preset, random_state=0, valid=(X[1000:1200], y[1000:1200])).fit(X[:60], y[:60])
    losses = est.history[:, "valid_loss"]
    assert len(losses) == 8
    # the kept weights are those of the best epoch: recompute the validation loss
    import torch
    with torch.no_grad():
        est.module_.eval()
        logits = est.module_(torch.as_tensor(X[1000:1200]))
        loss = torch.nn.functional.cross_entropy(logits, torch.as_tensor(y[1000:1200])).item()
    assert loss == pytest.approx(min(losses), rel=1e-4)


def test_tiny_grid_rows_and_rerun_identical(tmp_path):
    rows = run_grid("gal2017", ["bald", "max_entropy", "random"], [1, 2], tmp_path / "a", verbose=False,
                    deterministic_baseline=True, **TINY)
    # 3 strategies x 2 seeds + the max_entropy deterministic baseline x 2 seeds, 4 steps each
    assert len(rows) == (3 + 1) * 2 * 4
    assert list(rows[0]) == COLUMNS
    for (strategy, variant, seed) in {(r["strategy"], r["variant"], r["seed"]) for r in rows}:
        run = [r for r in rows if (r["strategy"], r["variant"], r["seed"]) == (strategy, variant, seed)]
        assert [r["n_labels"] for r in run] == [20, 30, 40, 50]
        assert [r["n_acquired"] for r in run] == [0, 10, 20, 30]
        queried = np.concatenate([np.array(r["query_indices"].split(), dtype=int) for r in run])
        assert len(np.unique(queried)) == 50  # nothing queried twice
    # every strategy starts from the same initial set for a seed
    firsts = {r["query_indices"] for r in rows if r["step"] == 0 and r["seed"] == 1}
    assert len(firsts) == 1
    # each run records its strategy object with its parameters
    config = json.loads((tmp_path / "a" / "runs" / "gal2017__random__bayesian__seed1.json").read_text())
    assert config["strategy"] == "random" and config["strategy_object"] == "RandomSampling()"
    run_grid("gal2017", ["bald", "max_entropy", "random"], [1, 2], tmp_path / "b", verbose=False,
             deterministic_baseline=True, **TINY)
    assert without_times(tmp_path / "a" / "results.csv") == without_times(tmp_path / "b" / "results.csv")
    # a finished grid is not re-run
    before = (tmp_path / "a" / "results.csv").read_bytes()
    run_grid("gal2017", ["bald", "max_entropy", "random"], [1, 2], tmp_path / "a", verbose=False,
             deterministic_baseline=True, **TINY)
    assert (tmp_path / "a" / "results.csv").read_bytes() == before
    paths = write_report(tmp_path / "a")
    assert [p.name for p in paths] == ["table.md", "learning_curves.png", "deterministic.md", "deterministic.png"]
    text = (tmp_path / "a" / "deterministic.md").read_text()
    assert "| Max Entropy | deterministic | 1, 2 |" in text and "Var Ratios" not in text


def test_resume_rebuilds_a_lost_model_cache(tmp_path):
    run_grid("gal2017", ["bald"], [3], tmp_path / "full", verbose=False, **TINY)
    run_grid("gal2017", ["bald"], [3], tmp_path / "part", verbose=False, **{**TINY, "n_queries": 3})
    csv_path = next((tmp_path / "part" / "runs").glob("*.csv"))
    lines = csv_path.read_text().splitlines(keepends=True)
    csv_path.write_text("".join(lines[:3]))  # keep steps 0 and 1
    next((tmp_path / "part" / "runs").glob("*.pt")).unlink()  # and lose the weights cache
    run_grid("gal2017", ["bald"], [3], tmp_path / "part", verbose=False, **TINY)
    assert without_times(tmp_path / "part" / "results.csv") == without_times(tmp_path / "full" / "results.csv")


@pytest.mark.parametrize("cache", ["kept", "lost"])
def test_warm_epochs_train_on_from_the_previous_step_and_resume_exactly(tmp_path, cache):
    """Each step trains from the previous step's weights; a resumed run (from the cached weights, or
    replaying the earlier steps' training when they are lost) ends with an uninterrupted run's rows."""
    import torch

    warm = {**TINY, "warm_epochs": 2, "n_queries": 4}
    run_grid("gal2017", ["bald"], [3], tmp_path / "full", verbose=False, **warm)
    run_grid("gal2017", ["bald"], [3], tmp_path / "cold", verbose=False, **{**warm, "warm_epochs": None})
    full = read_results(tmp_path / "full" / "results.csv")
    cold = read_results(tmp_path / "cold" / "results.csv")
    assert full[0]["accuracy"] == cold[0]["accuracy"]  # step 0 trains from scratch either way
    assert [r["accuracy"] for r in full[1:]] != [r["accuracy"] for r in cold[1:]]
    run_grid("gal2017", ["bald"], [3], tmp_path / "part", verbose=False, **{**warm, "n_queries": 2})
    csv_path = next((tmp_path / "part" / "runs").glob("*.csv"))
    lines = csv_path.read_text().splitlines(keepends=True)
    csv_path.write_text("".join(lines[:3]))  # steps 0 and 1 finished: resume at step 2
    weights = next((tmp_path / "part" / "runs").glob("*.pt"))
    assert torch.load(weights, weights_only=True)["step"] == 2
    if cache == "lost":
        weights.unlink()
    else:  # the cache of step 1, as a run stopped after writing step 1 leaves it
        run_grid("gal2017", ["bald"], [3], tmp_path / "one", verbose=False, **{**warm, "n_queries": 1})
        weights.write_bytes(next((tmp_path / "one" / "runs").glob("*.pt")).read_bytes())
    run_grid("gal2017", ["bald"], [3], tmp_path / "part", verbose=False, **warm)
    assert without_times(tmp_path / "part" / "results.csv") == without_times(tmp_path / "full" / "results.csv")


def test_warm_start_from_given_weights_by_hand():
    """fit_step_model(start=w) loads w into the step's network and trains on from it with a fresh
    optimizer: with lr=1e-12 (Adam moves nothing that shows) the result is w itself."""
    import torch

    from skdbal.experiments.factories import fit_step_model

    preset = get_preset("gal2017", **{**TINY, "warm_epochs": 1, "lr": 1e-12})
    X, y = load_digits_images_for_test()
    spec = RunSpec(preset, "bald", 1)
    first = fit_step_model(spec, 0, X[:40], y[:40], (X[40:60], y[40:60]))
    w = {k: v.clone() for k, v in first.module_.state_dict().items() if torch.is_tensor(v)}
    second = fit_step_model(spec, 1, X[:50], y[:50], (X[40:60], y[40:60]), start=first.module_.state_dict())
    for k, v in w.items():
        torch.testing.assert_close(second.module_.state_dict()[k], v, rtol=0, atol=1e-9)
    fresh = fit_step_model(spec, 1, X[:50], y[:50], (X[40:60], y[40:60]))
    assert not all(torch.equal(fresh.module_.state_dict()[k], v) for k, v in w.items())


def load_digits_images_for_test():
    from skdbal.experiments.data import load_digits_images

    X_pool, _, y_pool, _ = load_digits_images()
    return X_pool, y_pool


def test_a_preset_that_selects_on_the_validation_set_runs(tmp_path):
    """The learner's template model is built with the run's validation set (it once was not, and every
    selection='early_stopping' or 'best_valid_loss' run stopped before its first step)."""
    for selection in ("early_stopping", "best_valid_loss"):
        run_grid("gal2017", ["bald"], [1], tmp_path / selection, verbose=False,
                 **{**TINY, "n_queries": 1, "selection": selection,
                    "warm_epochs": 2 if selection == "early_stopping" else None})
        assert [r["step"] for r in read_results(tmp_path / selection / "results.csv")] == [0, 1]


def test_warm_start_with_an_ensemble_is_refused(tmp_path):
    with pytest.raises(ValueError, match="warm_epochs cannot be combined with ensemble"):
        run_grid("gal2017", ["bald"], [1], tmp_path, verbose=False, ensemble=2, **{**TINY, "warm_epochs": 2})
    assert not (tmp_path / "runs").exists()


def test_other_configuration_in_same_folder_is_refused(tmp_path):
    run_grid("gal2017", ["random"], [1], tmp_path, verbose=False, **TINY)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    with pytest.raises(ValueError, match="different configuration") as info:
        run_grid("gal2017", ["bald", "random"], [1], tmp_path, verbose=False, **{**TINY, "max_epochs": 4})
    # only the field that differs, with both values: not two whole configurations
    assert str(info.value).endswith("\n  preset.max_epochs: 3 in the folder, 4 asked")
    # refused before anything was written: no new run files, grid.json unchanged
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_output_files_are_ordinary_and_no_locks_are_left(tmp_path):
    import stat
    run_grid("gal2017", ["random"], [1], tmp_path, verbose=False, **{**TINY, "n_queries": 1})
    umask = os.umask(0)
    os.umask(umask)
    for path in [tmp_path / "grid.json", tmp_path / "results.csv"] + list((tmp_path / "runs").iterdir()):
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask, path.name
    assert not [p.name for p in tmp_path.rglob("*lock*")]


def test_grid_json_keeps_every_invocation(tmp_path):
    run_grid("gal2017", ["random"], [1], tmp_path, verbose=False, torch_threads=1, **TINY)
    run_grid("gal2017", ["variation_ratios"], [2], tmp_path, verbose=False, torch_threads=1,
             deterministic_baseline=True, **TINY)
    meta = json.loads((tmp_path / "grid.json").read_text())
    assert meta["preset"]["n_queries"] == TINY["n_queries"]
    assert [(i["strategies"], i["seeds"], i["deterministic_baseline"]) for i in meta["invocations"]] == \
        [(["random"], [1], False), (["variation_ratios"], [2], True)]
    assert all(i["preset"]["max_epochs"] == TINY["max_epochs"] for i in meta["invocations"])
    run_json = json.loads((tmp_path / "runs" / "gal2017__random__bayesian__seed1.json").read_text())
    assert run_json["torch_threads"] == 1


def test_grid_json_records_the_full_invocation(tmp_path):
    """Every flag of the command is in grid.json (--ensemble, --device and the --set values were not), and
    the top level names every machine that made a call, not only the latest (issue 27, item 19)."""
    from skdbal.cli import main

    out = tmp_path / "grid"
    cli = [a for a in TINY_CLI if a != "--quiet"]
    cli[cli.index("n_queries=6")] = "n_queries=1"
    assert main(["experiment", "--preset", "gal2017", "--n-jobs", "1", "--ensemble", "2", "--device", "cpu",
                 "--quiet", "--out", str(out)] + cli) == 0
    meta = json.loads((out / "grid.json").read_text())
    (call,) = meta["invocations"]
    assert (call["ensemble"], call["device"], call["strategies"], call["seeds"]) == (2, "cpu", ["bald", "random"], [1])
    assert call["overrides"] == {"dataset": "digits", "max_epochs": 25, "module_params": {"kernel_size": 3},
                                 "n_samples": 5, "pool_subsample": 150, "n_validation": 50, "n_queries": 1}
    assert meta["machines"] == [call["machine"]] and "machine" not in meta
    run_json = json.loads((out / "runs" / "gal2017__random__ensemble2__seed1.json").read_text())
    assert (run_json["ensemble"], run_json["device"]) == (2, "cpu")
    assert run_json["environment"]["commit"] == call["commit"]  # the hardware, versions and commit (issue 44)
    assert run_json["environment"]["versions"] == call["machine"]["versions"]
    # a call from another machine is added to the list, the first one kept
    here, other = call["machine"], {**call["machine"], "platform": "elsewhere"}
    meta["invocations"][0]["machine"] = other
    (out / "grid.json").write_text(json.dumps(meta))
    run_grid("gal2017", ["random"], [1], out, verbose=False, torch_threads=1, ensemble=2,
             **{**TINY, "n_queries": 1, "max_epochs": 25})
    meta = json.loads((out / "grid.json").read_text())
    assert meta["machines"] == [other, here]
    assert meta["invocations"][1]["overrides"] == {**TINY, "n_queries": 1, "max_epochs": 25}


def test_run_file_records_the_device_of_every_step(tmp_path):
    """A run resumed from a file without a device (written before devices were recorded), or on another
    device, says which steps came from which device instead of keeping silent (issue 27, item 19)."""
    runs = tmp_path / "runs"
    path = runs / "gal2017__random__bayesian__seed1.json"

    def extend(n_queries):
        run_one(RunSpec(get_preset("gal2017", **{**TINY, "n_queries": n_queries}), "random", 1), tmp_path,
                torch_threads=1)
        return json.loads(path.read_text())

    assert extend(1)["device"] == "cpu" and "device_steps" not in extend(1)
    stored = json.loads(path.read_text())
    del stored["device"]  # as the files of the runs made before the runner recorded a device
    path.write_text(json.dumps(stored, indent=1))
    record = extend(2)
    assert (record["device"], record["device_steps"]) == ("unknown (steps 0-1), cpu (steps 2-)",
                                                          [[0, "unknown"], [2, "cpu"]])
    assert extend(3)["device_steps"] == [[0, "unknown"], [2, "cpu"]]  # same device: nothing to add
    stored = json.loads(path.read_text())
    stored.pop("device_steps")
    stored["device"] = "cuda"  # started on a GPU, resumed here
    path.write_text(json.dumps(stored, indent=1))
    record = extend(4)
    assert (record["device"], record["device_steps"]) == ("cuda (steps 0-3), cpu (steps 4-)",
                                                          [[0, "cuda"], [4, "cpu"]])
    finished = path.read_text()
    extend(4)  # finished: read back, the file untouched
    assert path.read_text() == finished


def test_resume_with_other_thread_count_warns(tmp_path):
    run_grid("gal2017", ["random"], [1], tmp_path, verbose=False, torch_threads=1, **{**TINY, "n_queries": 1})
    with pytest.warns(RuntimeWarning, match="started with 1 torch thread") as record:
        run_grid("gal2017", ["random"], [1], tmp_path, verbose=False, torch_threads=2, **TINY)
    assert len(record) == 1  # from the parent, once, even with n_jobs=1
    spec = RunSpec(get_preset("gal2017", **{**TINY, "n_queries": TINY["n_queries"] + 1}), "random", 1)
    with pytest.warns(RuntimeWarning, match="started with 1 torch thread"):  # run_one alone warns too
        run_one(spec, tmp_path, torch_threads=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # finished runs recompute nothing, so another thread count is no reason to warn
        run_grid("gal2017", ["random"], [1], tmp_path, verbose=False, torch_threads=3, **TINY)
        run_grid("gal2017", ["random"], [1], tmp_path, verbose=False, torch_threads=1, **TINY)


def test_repeated_strategies_and_seeds_run_once(tmp_path):
    rows = run_grid("gal2017", ["random", "random"], [1, 1], tmp_path, verbose=False, n_jobs=2,
                    **{**TINY, "n_queries": 1})
    assert [(r["strategy"], r["seed"], r["step"]) for r in rows] == [("random", 1, 0), ("random", 1, 1)]


def test_signed_weights_get_their_own_run_files(tmp_path):
    # the minus sign used to vanish from the file name: diverse(bald,-0.1) and diverse(bald,0.1) shared files
    ids = [RunSpec(get_preset("gal2017"), s, 1).run_id for s in ("diverse(bald,-0.1)", "diverse(bald,0.1)")]
    assert ids == ["gal2017__diverse-bald-neg0.1__bayesian__seed1", "gal2017__diverse-bald-0.1__bayesian__seed1"]
    # two spellings of one strategy are one run (one canonical spelling), not two runs clashing on one file
    rows = run_grid("gal2017", ["diverse(bald,0.1)", "diverse(bald, 0.1)"], [1], tmp_path, verbose=False,
                    **{**TINY, "n_queries": 0})
    assert [r["strategy"] for r in rows] == ["diverse(bald,0.1)"]
    assert [p.name for p in (tmp_path / "runs").glob("*.csv")] == ["gal2017__diverse-bald-0.1__bayesian__seed1.csv"]


def test_a_second_writer_of_a_folder_is_refused(tmp_path):
    from skdbal.experiments.results import exclusive_lock

    run_grid("gal2017", ["random"], [1], tmp_path, verbose=False, **{**TINY, "n_queries": 1})
    with exclusive_lock(tmp_path / ".lock", "the grid"):  # as if another grid were running there
        with pytest.raises(FolderLockedError, match="another process is writing the grid in"):
            run_grid("gal2017", ["random"], [1], tmp_path, verbose=False, **TINY)
    with exclusive_lock(tmp_path / "runs" / ".gal2017__random__bayesian__seed1.lock", "run"):
        with pytest.raises(FolderLockedError, match="another process is writing run gal2017__random"):
            run_one(RunSpec(get_preset("gal2017", **TINY), "random", 1), tmp_path)
    assert len(read_results(tmp_path / "results.csv")) == 2  # untouched by the refused calls
    from skdbal.cli import main

    with exclusive_lock(tmp_path / ".lock", "the grid"):  # the CLI: a one-line error, exit status 1
        assert main(["experiment", "--strategies", "random", "--seeds", "1", "--out", str(tmp_path)]
                    + [f"--set={k}={v!r}" for k, v in TINY.items()]) == 1
    run_grid("gal2017", ["random"], [1], tmp_path, verbose=False, **TINY)  # free again
    assert len(read_results(tmp_path / "results.csv")) == TINY["n_queries"] + 1


@pytest.mark.slow  # end to end: a grid subprocess killed mid-run, then resumed
def test_sigkill_mid_grid_resumes_to_the_same_csv(tmp_path):
    cmd = [sys.executable, "-m", "skdbal", "experiment", "--preset", "gal2017", "--n-jobs", "1"] + TINY_CLI
    subprocess.run(cmd + ["--out", str(tmp_path / "clean")], check=True, timeout=300, capture_output=True)
    killed = tmp_path / "killed"
    proc = subprocess.Popen(cmd + ["--out", str(killed)], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    target = killed / "runs" / "gal2017__bald__bayesian__seed1.csv"
    deadline = time.time() + 240
    while time.time() < deadline:
        if target.exists() and len(target.read_text().splitlines()) >= 3:  # header + 2 steps
            break
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done = sum(len(read_results(p)) for p in (killed / "runs").glob("*.csv"))
    assert 2 <= done < 14, "the kill must land mid-grid"
    subprocess.run(cmd + ["--out", str(killed)], check=True, timeout=300, capture_output=True)
    assert without_times(killed / "results.csv") == without_times(tmp_path / "clean" / "results.csv")
    assert len(read_results(killed / "results.csv")) == 14
    assert not list(killed.rglob("*.tmp"))


def test_report_table_and_figures(tmp_path):
    run_grid("gal2017", ["bald", "random"], [1, 2], tmp_path, verbose=False, **TINY)
    paths = write_report(tmp_path)
    assert [p.name for p in paths] == ["table.md", "learning_curves.png"]  # no baseline: no deterministic.md
    text = (tmp_path / "table.md").read_text()
    assert "| BALD | bayesian | 2 (3, 3) |" in text
    assert "145 / 335" not in text and "385 / 940" not in text  # digits: the MNIST anchors do not apply


def test_report_says_why_a_table_has_no_accuracy_at_1000_labels(tmp_path):
    """A grid that ends before 1,000 labels by design is not "not reached yet" (issue 27, item 20)."""
    run_grid("gal2017", ["random"], [1], tmp_path, verbose=False, torch_threads=1, **TINY)  # 3 steps: 50 labels
    write_report(tmp_path)
    text = (tmp_path / "table.md").read_text()
    assert "| n/a (runs end at 50 labels) |" in text and "not reached yet" not in text
    rows = [{"preset": "p", "strategy": "bald", "variant": "bayesian", "seed": 1, "step": i, "n_labels": 20 + 10 * i,
             "accuracy": a} for i, a in enumerate([0.5, 0.7, 0.9])]
    cell = lambda **kw: table_markdown(rows, anchors=False, **kw).splitlines()[2].rsplit("|", 2)[1].strip()
    assert cell(at_labels=1000, end_labels=40) == "n/a (runs end at 40 labels)"
    assert cell(at_labels=1000, end_labels=1020) == "n/a (not reached yet)"  # a grid still running
    assert cell(at_labels=1000) == "n/a (the runs stop at 40 labels)"  # no plan known: only the fact
    assert cell(at_labels=35, end_labels=40) == "n/a (no step at 35 labels)"
    assert cell(at_labels=30, end_labels=40) == "70.00 ± 0.00%"


@pytest.mark.slow  # end to end on real MNIST with the gal2017 network
def test_mnist_smoke_real_preset(mnist_home, tmp_path, monkeypatch):
    """The real gal2017 preset on real MNIST, shrunk: 3 steps, 200 pool points, 2 epochs."""
    monkeypatch.setenv("SKDBAL_DATA", str(mnist_home))
    rows = run_grid("gal2017", ["bald", "random"], [1], tmp_path, verbose=False, n_queries=3, pool_size=200,
                    max_epochs=2)
    assert [r["n_labels"] for r in rows] == [20, 30, 40, 50] * 2
    for r in rows:  # measured on all 10,000 test images (2 epochs: near chance)
        assert 0.0 <= r["accuracy"] <= 1.0
        assert r["accuracy"] * 10000 == pytest.approx(round(r["accuracy"] * 10000), abs=1e-6)
    queried = [int(i) for r in rows if r["strategy"] == "bald" for i in r["query_indices"].split()]
    assert len(set(queried)) == 50
    assert {r["strategy"] for r in rows} == {"bald", "random"}
    write_report(tmp_path)


def test_parallel_grid_equals_serial(tmp_path):
    kw = dict(verbose=False, torch_threads=1, **{**TINY, "n_queries": 2})
    run_grid("gal2017", ["bald", "random"], [5], tmp_path / "serial", n_jobs=1, **kw)
    run_grid("gal2017", ["bald", "random"], [5], tmp_path / "parallel", n_jobs=2, **kw)
    assert without_times(tmp_path / "serial" / "results.csv") == without_times(tmp_path / "parallel" / "results.csv")


@pytest.mark.slow
def test_committed_gal2017_rows_reproduce(mnist_home, tmp_path, monkeypatch):
    """The first steps of a committed gal2017 run are reproduced by this code (torch_threads=1, as the grid;
    the grid was run with results version 2, whose masks mask_seeding="stream" draws)."""
    monkeypatch.setenv("SKDBAL_DATA", str(mnist_home))
    committed = Path(__file__).resolve().parents[2] / "docs" / "results" / "gal2017" / "runs"
    run_csv = committed / "gal2017__bald__bayesian__seed1.csv"
    assert run_csv.is_file(), f"the committed gal2017 results are missing: {run_csv}"
    expected = without_times(run_csv)[:3]
    run_grid("gal2017", ["bald"], [1], tmp_path, verbose=False, torch_threads=1, n_queries=2,
             mask_seeding="stream")
    got = without_times(tmp_path / "runs" / run_csv.name)
    assert all(r["rmse"] == r["mean_variance"] == "" for r in got)  # columns added since
    assert [{k: r[k] for k in e} for r, e in zip(got, expected)] == expected


def test_early_stopping_option(digits):
    X, y = digits
    preset = get_preset("gal2017", dataset="digits", module_params={"kernel_size": 3}, max_epochs=200,
                        selection="early_stopping", patience=3, lr=0.05)
    est = make_estimator(preset, random_state=0, valid=(X[1000:1100], y[1000:1100])).fit(X[:40], y[:40])
    losses = list(est.history[:, "valid_loss"])
    assert len(losses) < 200  # stopped early ...
    best = int(np.argmin(losses))
    assert len(losses) == best + 1 + 3  # ... 3 epochs after the best one
    with pytest.raises(ValueError, match="validation set"):
        make_estimator(preset, random_state=0, valid=None)


def test_runs_written_before_a_new_preset_field_still_resume(tmp_path):
    import json
    run_grid("gal2017", ["random"], [1], tmp_path, verbose=False, **{**TINY, "n_queries": 1})
    config_path = next((tmp_path / "runs").glob("*.json"))
    config = json.loads(config_path.read_text())
    del config["preset"]["patience"]  # as written by a version without that field
    config_path.write_text(json.dumps(config))
    rows = run_grid("gal2017", ["random"], [1], tmp_path, verbose=False, **{**TINY, "n_queries": 2})
    assert [r["step"] for r in rows] == [0, 1, 2]
    with pytest.raises(ValueError, match="different configuration"):
        run_grid("gal2017", ["random"], [1], tmp_path, verbose=False, **{**TINY, "n_queries": 2, "patience": 9})


def test_last_layer_grid(tmp_path):
    """Seed 000 Fig. 3 on the runner: both inferences share the network, so step 0
    agrees on the mean (accuracy, RMSE) and differs in the variance."""
    kw = dict(verbose=False, **{**TINY, "n_queries": 2})
    rows = run_grid("gal2017", ["predictive_variance", "random"], [1], tmp_path / "a",
                    last_layer=["analytic", "mfvi"], **kw)
    assert {r["variant"] for r in rows} == {"blr_analytic", "blr_mfvi"}
    assert len(rows) == 2 * 2 * 3
    for r in rows:
        assert 0 < r["rmse"] < 1 and r["mean_variance"] > 0.1 * 10  # includes sigma^2 tr(I) = 0.1 * 10
    first = {(r["variant"], r["strategy"]): r for r in rows if r["step"] == 0}
    a, m = first[("blr_analytic", "random")], first[("blr_mfvi", "random")]
    assert a["accuracy"] == m["accuracy"] and a["rmse"] == m["rmse"]
    assert a["mean_variance"] != m["mean_variance"]
    for variant in ("blr_analytic", "blr_mfvi"):
        queried = [int(i) for r in rows if (r["variant"], r["strategy"]) == (variant, "predictive_variance")
                   for i in r["query_indices"].split()]
        assert len(set(queried)) == len(queried) == 40
    # the report draws Fig. 3 (reproducibility: test_last_layer_resume_from_weights_cache)
    paths = write_report(tmp_path / "a")
    assert [p.name for p in paths] == ["last_layer.md", "last_layer.png"]
    text = (tmp_path / "a" / "last_layer.md").read_text()
    assert "| analytic | Predictive variance | 1 (2) | 0 |" in text and "| MFVI | Random | 1 (2) | 0 |" in text
    r20 = next(r for r in rows if (r["variant"], r["strategy"], r["n_acquired"]) == ("blr_mfvi", "random", 20))
    line = next(x for x in last_layer_markdown(rows, at_acquired=(20,)).splitlines() if "| MFVI | Random |" in x)
    assert line == (f"| MFVI | Random | 1 (2) | 20 | {r20['rmse']:.4f} ± 0.0000 | {r20['mean_variance']:.4f} ± 0.0000 "
                    f"| {100 * r20['accuracy']:.2f} ± 0.00% |")


def test_last_layer_resume_from_weights_cache(tmp_path):
    kw = dict(verbose=False, last_layer=["mfvi"], **TINY)
    run_grid("gal2017", ["predictive_variance"], [2], tmp_path / "full", **kw)
    run_grid("gal2017", ["predictive_variance"], [2], tmp_path / "part", **{**kw, "n_queries": 1})
    run_grid("gal2017", ["predictive_variance"], [2], tmp_path / "part", **kw)
    assert without_times(tmp_path / "part" / "results.csv") == without_times(tmp_path / "full" / "results.csv")


def test_predictive_variance_needs_a_last_layer(tmp_path):
    with pytest.raises(ValueError, match="last_layer"):
        run_grid("gal2017", ["predictive_variance"], [1], tmp_path, verbose=False, **TINY)
    with pytest.raises(ValueError, match="unknown last_layer"):
        run_grid("gal2017", ["random"], [1], tmp_path, verbose=False, last_layer=["laplace"], **TINY)


def test_mnist_smoke_last_layer(mnist_home, tmp_path, monkeypatch):
    """The Fig. 3 experiment on real MNIST, shrunk: 3 steps, 200 pool points, 2 epochs,
    1,000 test images."""
    monkeypatch.setenv("SKDBAL_DATA", str(mnist_home))
    rows = run_grid("gal2017", ["predictive_variance"], [1], tmp_path, verbose=False, n_queries=3,
                    pool_size=200, max_epochs=2, n_test=1000, last_layer=["analytic", "mfvi"])
    assert [r["n_acquired"] for r in rows] == [0, 10, 20, 30] * 2
    assert all(np.isfinite(r["rmse"]) and r["mean_variance"] > 0 for r in rows)
    write_report(tmp_path)
    assert (tmp_path / "last_layer.png").stat().st_size > 0


def test_even_batch_size_by_hand():
    from skdbal.experiments import even_batch_size

    # (n, batch_size) -> largest of ceil(n / batch_size) nearly equal batches
    cases = {(130, 128): 65, (120, 128): 120, (128, 128): 128, (129, 128): 65, (256, 128): 128,
             (257, 128): 86, (390, 128): 98, (1, 128): 1, (50, 16): 13}
    assert {k: even_batch_size(*k) for k in cases} == cases
    with pytest.raises(ValueError, match="must be >= 1"):
        even_batch_size(0, 128)


def test_batch_split_even_in_the_runner(tmp_path, monkeypatch):
    from skdbal.models import MCDropoutClassifier

    assert make_estimator(get_preset("gal2017"), n_train=130).batch_size == 128
    even = make_estimator(get_preset("gal2017", batch_split="even"), n_train=130)
    assert even.batch_size == 65 and even.iterator_valid__batch_size == 128  # predictions as with "fixed"
    assert make_estimator(get_preset("gal2017", batch_size=None, batch_split="even"), n_train=130).batch_size == -1
    with pytest.raises(ValueError, match="batch_split='even' needs n_train"):
        make_estimator(get_preset("gal2017", batch_split="even"))
    with pytest.raises(ValueError, match="batch_split must be one of"):
        get_preset("gal2017", batch_split="uneven")
    seen = []
    fit = MCDropoutClassifier.fit

    def recording_fit(self, X, y=None, **kw):
        seen.append((len(X), self.batch_size))
        return fit(self, X, y, **kw)

    monkeypatch.setattr(MCDropoutClassifier, "fit", recording_fit)
    run_grid("gal2017", ["random"], [1], tmp_path, verbose=False, **{**TINY, "batch_size": 16,
                                                                      "batch_split": "even"})
    # 20, 30, 40, 50 labels in batches of at most 16: 2x10, 2x15, 3x14 (14+13+13), 4x13 (13+13+12+12)
    assert seen == [(20, 10), (30, 15), (40, 14), (50, 13)]


def test_noise_grid_with_a_filtered_strategy(tmp_path):
    """Noisy annotator and filter in the runner: run ids, label bookkeeping, rejects, resume."""
    from skdbal.datasets import make_noisy_labels
    from skdbal.experiments import load_data
    from skdbal.experiments.factories import split_indices

    kw = dict(verbose=False, torch_threads=1, **TINY)
    rows = run_grid("gal2017", ["bald", "filter(bald,0.1)"], [1], tmp_path / "a", noise_rates=[0.0, 0.3], **kw)
    runs = sorted(p.name for p in (tmp_path / "a" / "runs").glob("*.csv"))
    assert runs == ["gal2017__bald__bayesian__seed1.csv", "gal2017__bald__bayesian__seed1__noise0.3.csv",
                    "gal2017__filter-bald-0.1__bayesian__seed1.csv",
                    "gal2017__filter-bald-0.1__bayesian__seed1__noise0.3.csv"]
    clean = [r for r in rows if r["strategy"] == "bald" and not r["noise_rate"]]
    assert all(r["n_rejected"] is None and r["n_flipped_acquired"] is None for r in clean)
    # the annotator, by hand: the same seeded flips, initial set clean
    X, y, _, y_test = load_data("digits")
    preset = get_preset("gal2017", **TINY)
    _, _, initial, _ = split_indices(preset, 1, y, len(y_test))
    _, flipped = make_noisy_labels(y, 0.3, classes=np.unique(y), random_state=np.random.RandomState([1, 7907]))
    flipped[initial] = False
    for strategy in ("bald", "filter(bald,0.1)"):
        run = [r for r in rows if r["strategy"] == strategy and r["noise_rate"] == 0.3]
        assert [r["step"] for r in run] == [0, 1, 2, 3]
        for r in run[1:]:
            q = np.array(r["query_indices"].split(), dtype=int)
            assert r["n_flipped_acquired"] == flipped[q].sum()
        if strategy.startswith("filter"):
            assert all(r["n_rejected"] is not None and 0 <= r["n_rejected_flipped"] <= r["n_rejected"]
                       for r in run[1:])
            assert sum(r["n_rejected"] for r in run[1:]) > 0
            assert all(r["threshold"] == 0.1 and r["noise_estimate"] is None for r in run[1:])
    filtered_clean = [r for r in rows if r["strategy"] == "filter(bald,0.1)" and not r["noise_rate"]]
    assert all(r["n_rejected"] is not None and r["n_rejected_flipped"] == 0 for r in filtered_clean[1:])
    config = json.loads((tmp_path / "a" / "runs" / "gal2017__filter-bald-0.1__bayesian__seed1__noise0.3.json")
                        .read_text())
    assert config["noise_rate"] == 0.3 and config["strategy_object"] == "NoiseFilter(strategy=BALD())"
    # a second grid gives the same rows; the finished one is not re-run
    run_grid("gal2017", ["bald", "filter(bald,0.1)"], [1], tmp_path / "b", noise_rates=[0.0, 0.3], **kw)
    assert without_times(tmp_path / "a" / "results.csv") == without_times(tmp_path / "b" / "results.csv")
    # the report: a table and a figure per noise rate, the clean runs as before
    names = sorted(p.name for p in write_report(tmp_path / "a"))
    assert names == ["learning_curves.png", "noise0.3.md", "noise0.3_curves.png", "noise_flipped.png",
                     "noise_levels.md", "noise_levels.png", "table.md"]
    noise_table = (tmp_path / "a" / "noise0.3.md").read_text()
    assert "| filter(bald,0.1) | 30% | 1 (3) |" in noise_table and "| BALD | 30% | 1 (3) | — |" in noise_table
    assert "| device |" in noise_table and noise_table.count("| cpu |") == 2  # from the run files
    levels = (tmp_path / "a" / "noise_levels.md").read_text()
    assert "| filter(bald,0.1) | 0% | 1 (3) |" in levels and "| BALD | 0% | 1 (3) |" in levels
    # the clean runs of another grid stand for 0% noise where this one has none: its 2-step filtered
    # run would, its BALD run (already clean here) and random (not run with noise) would not
    run_grid("gal2017", ["bald", "random"], [1], tmp_path / "clean", **{**kw, "n_queries": 2})
    run_grid("gal2017", ["filter(bald,0.1)"], [1], tmp_path / "c", noise_rates=[0.3], **kw)
    run_grid("gal2017", ["filter(bald,0.1)", "bald"], [1], tmp_path / "clean", **{**kw, "n_queries": 2})
    write_report(tmp_path / "c", clean_dir=tmp_path / "clean")
    levels = (tmp_path / "c" / "noise_levels.md").read_text()
    assert "| filter(bald,0.1) | 0% | 1 (2) |" in levels and "| filter(bald,0.1) | 30% | 1 (3) |" in levels
    assert "BALD |" not in levels.replace("filter(bald", "") and "Random" not in levels
    write_report(tmp_path / "a", clean_dir=tmp_path / "clean")
    assert "| BALD | 0% | 1 (3) |" in (tmp_path / "a" / "noise_levels.md").read_text()  # its own, not merged


@pytest.mark.parametrize("kwargs, match", [
    (dict(strategies=["filter(bald,2)"]), "threshold must be a float in"),
    (dict(strategies=["filter(nope)"]), "unknown strategy 'nope'"),
    (dict(noise_rates=[1.0]), r"noise_rates must lie in \[0, 1\)"),
])
def test_bad_noise_grid_arguments_write_nothing(kwargs, match, tmp_path):
    args = dict(strategies=["bald"], noise_rates=[0.0])
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        run_grid("gal2017", args["strategies"], [1], tmp_path / "g", noise_rates=args["noise_rates"],
                 verbose=False, **TINY)
    assert not (tmp_path / "g").exists()


def test_initial_sets_diversity_and_batch_bald_in_the_grid(tmp_path):
    """k-means initial sets as a grid axis, decorated and joint strategies by name."""
    from skdbal.experiments import load_data
    from skdbal.experiments.factories import split_indices
    from skdbal.initial import kmeans_representative

    kw = dict(verbose=False, torch_threads=1, **{**TINY, "n_queries": 2})
    rows = run_grid("gal2017", ["bald", "diverse(bald,0.2)", "diverse(bald,-0.2)", "batch_bald"], [1], tmp_path / "g",
                    initial_sets=["balanced_random", "kmeans_per_class"], **kw)
    runs = sorted(p.name for p in (tmp_path / "g" / "runs").glob("*.csv"))
    assert "gal2017__bald__bayesian-init-kmeans_per_class__seed1.csv" in runs
    assert "gal2017__diverse-bald-0.2__bayesian__seed1.csv" in runs and len(runs) == 8
    assert "gal2017__diverse-bald-neg0.2__bayesian__seed1.csv" in runs
    X, y, _, y_test = load_data("digits")
    preset = get_preset("gal2017", **TINY)
    val, pool, random_initial, _ = split_indices(preset, 1, y, len(y_test))
    val2, pool2, km_initial, _ = split_indices(preset, 1, y, len(y_test), X, "kmeans_per_class")
    np.testing.assert_array_equal(pool, pool2)
    # by hand: the same seeded generator, after the permutation that made the pool
    rng = np.random.RandomState(1)
    rng.permutation(len(y))
    np.testing.assert_array_equal(km_initial, pool[kmeans_representative(X[pool], y[pool], 2, random_state=rng)])
    assert not np.array_equal(np.sort(km_initial), np.sort(random_initial))
    for variant, initial in (("bayesian", random_initial), ("bayesian-init-kmeans_per_class", km_initial)):
        first = [r for r in rows if r["variant"] == variant and r["strategy"] == "bald" and r["step"] == 0][0]
        np.testing.assert_array_equal(np.array(first["query_indices"].split(), dtype=int), initial)
    config = json.loads((tmp_path / "g" / "runs" / "gal2017__bald__bayesian-init-kmeans_per_class__seed1.json")
                        .read_text())
    assert config["initial_set"] == "kmeans_per_class"
    plain = json.loads((tmp_path / "g" / "runs" / "gal2017__bald__bayesian__seed1.json").read_text())
    assert "initial_set" not in plain  # run files of the default set are as before
    write_report(tmp_path / "g")
    table = (tmp_path / "g" / "table.md").read_text()
    assert "| BALD | bayesian-init-kmeans_per_class | 1 (2) |" in table
    # Fig 7's table: each weight's accuracy minus BALD's, same seed and step, over steps 1-2
    acc = {(r["strategy"], r["step"]): r["accuracy"] for r in rows if r["variant"] == "bayesian"}
    gain = 100 * np.mean([acc["diverse(bald,-0.2)", k] - acc["bald", k] for k in (1, 2)])
    weights = (tmp_path / "g" / "diversity_weights.md").read_text()
    assert f"| -0.2 | diverse(bald,-0.2) | 1 | {gain:+.2f} ± 0.00 |" in weights
    assert "| 0 | bald | 1 | +0.00 ± 0.00 |" in weights and (tmp_path / "g" / "diversity_weights.png").exists()
    # no sweep (a single weight, or no base run): no table, no figure, no report files
    from skdbal.experiments.diversity_weights import diversity_markdown, plot_diversity_weights
    one_weight = [r for r in rows if r["strategy"] != "diverse(bald,-0.2)"]
    no_base = [r for r in rows if r["strategy"] != "bald"]
    for part in (one_weight, no_base, []):
        assert diversity_markdown(part) == "" and plot_diversity_weights(part, None) is None
    with pytest.raises(ValueError, match="unknown initial_sets"):
        run_grid("gal2017", ["bald"], [1], tmp_path / "h", initial_sets=["kmeans++"], **kw)
    assert not (tmp_path / "h").exists()


def test_repeated_mnist_dataset(mnist_home, monkeypatch):
    from skdbal.experiments import load_data

    monkeypatch.setenv("SKDBAL_DATA", str(mnist_home))
    load_data.cache_clear()
    try:
        X, y, X_test, y_test = load_data("repeated_mnist")
        X1, y1, _, _ = load_data("mnist")
    finally:
        load_data.cache_clear()
    assert X.shape == (180000, 28, 28) and X.dtype == np.float32 and len(X_test) == 10000
    np.testing.assert_array_equal(y, np.tile(y1, 3))
    noise = X[60000:60100] - X1[:100] / 255.0
    assert abs(noise.std() - 0.1 * 0.3081) < 0.002
    assert get_preset("gal2017", dataset="repeated_mnist").dataset == "repeated_mnist"


def test_rows_record_test_calibration(tmp_path):
    """ECE and NLL of the test predictions, recomputed from the run's own last model."""
    import torch
    from sklearn.metrics import log_loss

    from skdbal.experiments import load_data
    from skdbal.experiments.factories import split_indices
    from skdbal.metrics import expected_calibration_error

    preset = get_preset("gal2017", **{**TINY, "n_queries": 1})
    rows = run_one(RunSpec(preset, "bald", 1), tmp_path, torch_threads=1)
    X, y, X_test, y_test = load_data("digits")
    _, _, _, test = split_indices(preset, 1, y, len(y_test))
    state = torch.load(tmp_path / "runs" / "gal2017__bald__bayesian__seed1.pt", weights_only=True)
    net = make_estimator(preset, random_state=0)
    net.set_params(max_epochs=0, callbacks=None)
    net.fit(X[:1], y[:1])
    net.module_.load_state_dict(state["model_state"])
    proba = net.predict_proba(X_test[test])
    last = rows[-1]
    assert last["ece"] == pytest.approx(expected_calibration_error(y_test[test], proba, classes=net.classes_))
    with warnings.catch_warnings():  # float32 rows sum to 1 only to 1e-7
        warnings.simplefilter("ignore", UserWarning)
        assert last["nll"] == pytest.approx(log_loss(y_test[test], proba, labels=net.classes_), rel=1e-5)
    assert last["accuracy"] == pytest.approx(np.mean(net.classes_[proba.argmax(1)] == y_test[test]))
    assert 0 < last["ece"] < 1 and last["nll"] > 0


def test_ensemble_grid_and_resume_from_its_cache(tmp_path):
    """A 3-member ensemble replaces the MC-dropout network: its own variant, ECE/NLL
    recorded, and a run cut after step 1 resumes from the members' cached states
    to the same rows as an uncut one."""
    kw = dict(verbose=False, torch_threads=1, ensemble=3, **{**TINY, "n_queries": 2})
    rows = run_grid("gal2017", ["bald"], [1], tmp_path / "full", **kw)
    assert {r["variant"] for r in rows} == {"ensemble3"} and len(rows) == 3
    assert all(0 <= r["ece"] <= 1 and r["nll"] > 0 for r in rows)
    cfg = json.loads(next((tmp_path / "full" / "runs").glob("*.json")).read_text())
    assert cfg["ensemble"] == 3 and cfg["mc_dropout"] is True
    run_grid("gal2017", ["bald"], [1], tmp_path / "part", **{**kw, "n_queries": 1})
    run_grid("gal2017", ["bald"], [1], tmp_path / "part", **kw)
    assert without_times(tmp_path / "part" / "results.csv") == without_times(tmp_path / "full" / "results.csv")
    paths = write_report(tmp_path / "full")
    assert [p.name for p in paths] == ["table.md", "learning_curves.png", "calibration.md", "calibration.png",
                                       "ensemble.png"]
    text = (tmp_path / "full" / "calibration.md").read_text()
    for r in rows:   # three steps: every label count is one of the five spread over those reached
        line = (f"| BALD | ensemble3 | 1 (2) | {r['n_labels']} | {100 * r['accuracy']:.2f} ± 0.00% | "
                f"{r['ece']:.4f} ± 0.0000 | {r['nll']:.4f} ± 0.0000 |")
        assert line in text


def test_ensemble_bad_input(tmp_path):
    with pytest.raises(ValueError, match="ensemble must be an int >= 0"):
        run_grid("gal2017", ["bald"], [1], tmp_path, verbose=False, ensemble=-1, **TINY)
    with pytest.raises(ValueError, match="cannot be combined"):
        run_grid("gal2017", ["random"], [1], tmp_path, verbose=False, ensemble=2, last_layer=["mfvi"], **TINY)
    assert not (tmp_path / "runs").exists()
