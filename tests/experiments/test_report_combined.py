"""The report combines run files only where they are comparable, and says what it leaves out (issue 27)."""
import json
import shutil
import warnings

import matplotlib.pyplot as plt
import pytest

from skdbal.cli import main
from skdbal.experiments import read_results, run_grid
from skdbal.experiments.calibration import calibration_markdown, plot_calibration
from skdbal.experiments.curves import deterministic_markdown, plot_curves, table_markdown
from skdbal.experiments.label_noise import noise_markdown
from skdbal.experiments.presets import get_preset
from skdbal.experiments.report import write_report

TINY = dict(dataset="digits", n_queries=1, max_epochs=2, n_samples=4, pool_subsample=100, n_validation=50,
            module_params={"kernel_size": 3})
SEED2 = "gal2017__random__bayesian__seed2"


@pytest.fixture(scope="module")
def two_seeds(tmp_path_factory):
    out = tmp_path_factory.mktemp("grid")
    run_grid("gal2017", ["random"], [1, 2], out, verbose=False, torch_threads=1, **TINY)
    return out


@pytest.fixture
def grid(two_seeds, tmp_path):
    shutil.copytree(two_seeds, tmp_path / "g")
    return tmp_path / "g"


def table_line(out):
    return [line for line in (out / "table.md").read_text().splitlines() if line.startswith("| Random")][0]


def run_keys(out):
    return sorted({(r["strategy"], r["seed"]) for r in read_results(out / "results.csv")})


# ----------------------------------------------------------------------------- item 1: stale results.csv
def test_the_report_rebuilds_its_rows_from_the_run_files(grid, tmp_path):
    saved = tmp_path / "saved"
    saved.mkdir()
    for path in (grid / "runs").glob(f"{SEED2}.*"):  # deleted, as the runner's messages suggest
        shutil.move(str(path), saved / path.name)
    with pytest.warns(RuntimeWarning, match=r"results.csv .*no longer in runs/: gal2017 random bayesian seed 2.*"
                                            r"rebuilt .*results.csv from the run files"):
        write_report(grid)
    assert "| Random | bayesian | 1 (1) |" in table_line(grid)
    assert run_keys(grid) == [("random", 1)]  # rewritten to match
    for path in saved.iterdir():  # copied in again
        shutil.copy(path, grid / "runs" / path.name)
    with pytest.warns(RuntimeWarning, match=r"lacks runs in runs/: gal2017 random bayesian seed 2"):
        write_report(grid)
    assert "| Random | bayesian | 2 (1, 1) |" in table_line(grid)
    assert run_keys(grid) == [("random", 1), ("random", 2)]
    before = (grid / "results.csv").read_bytes()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # in agreement: nothing to say, nothing rewritten
        write_report(grid)
    assert (grid / "results.csv").read_bytes() == before


# ----------------------------------------------------------------------------- item 2: configurations
def edit(path, **changes):
    config = json.loads(path.read_text())
    for key, value in changes.items():
        if key.startswith("preset_"):
            config["preset"][key[len("preset_"):]] = value
        else:
            config[key] = value
    path.write_text(json.dumps(config))


def test_the_report_refuses_to_average_runs_of_different_configurations(grid):
    edit(grid / "runs" / f"{SEED2}.json", preset_max_epochs=8, results_version=2)
    with pytest.raises(ValueError, match=r"(?s)cannot be averaged as seeds.*\(gal2017 random bayesian\):.*"
                                         rf"g/runs/{SEED2} differs from g/runs/gal2017__random__bayesian__seed1 in "
                                         r"preset.max_epochs \(8 against 2\), results_version \(2 against 4\)"):
        write_report(grid)
    with pytest.raises(SystemExit) as exc:  # the command line: a usage error with the message
        main(["report", str(grid)])
    assert exc.value.code == 2


def test_runs_that_differ_only_in_free_or_recorded_fields_are_averaged(grid):
    edit(grid / "runs" / f"{SEED2}.json", preset_n_queries=7, preset_notes="longer", torch_threads=4)
    write_report(grid)
    assert "| Random | bayesian | 2 (1, 1) |" in table_line(grid)


# ----------------------------------------------------------------------------- item 3: devices
def run(strategy, seed, accuracies, variant="bayesian", device=None, **extra):
    rows = [dict(preset="gal2017", strategy=strategy, variant=variant, seed=seed, step=i, n_labels=20 + 10 * i,
                 n_acquired=10 * i, accuracy=a, noise_rate=None, ece=0.1, nll=0.5, **extra)
            for i, a in enumerate(accuracies)]
    if device is not None:
        for r in rows:
            r["device"] = device
    return rows


def test_tables_and_figures_name_the_devices_where_runs_mix_them():
    rows = (run("bald", 1, [0.5, 0.9], device="cpu") + run("bald", 2, [0.5, 0.8], device="cuda")
            + run("random", 1, [0.5, 0.7], device="cpu"))
    lines = table_markdown(rows, at_labels=30, anchors=False).splitlines()
    assert lines[0].endswith("| device |")
    assert lines[2].endswith("| cpu (seed 1), cuda (seed 2) |") and lines[3].endswith("| cpu |")
    same = [dict(r, device="cpu") for r in rows]
    assert "device" not in table_markdown(same, at_labels=30, anchors=False)  # one device: as before
    assert "device" not in table_markdown([{k: v for k, v in r.items() if k != "device"} for r in rows])
    ens = [dict(r, variant="ensemble5") for r in rows if r["strategy"] == "bald"]
    cal = calibration_markdown(rows + ens, at_labels=(30,)).splitlines()
    assert cal[0].endswith("| device |") and cal[2].endswith("| cpu (seed 1), cuda (seed 2) |")
    det = deterministic_markdown(rows + [dict(r, variant="deterministic") for r in rows if r["strategy"] == "bald"],
                                 at_labels=(30,)).splitlines()
    assert det[0].endswith("| device |") and det[2].endswith("| cpu (seed 1), cuda (seed 2) |")
    fig = plot_curves(rows, None, title="curves")
    assert fig.axes[0].get_title() == "curves\nseed 1: cpu; seed 2: cuda"
    fig2 = plot_calibration(rows, None, title="calibration")
    assert fig2._suptitle.get_text() == "calibration\nseed 1: cpu; seed 2: cuda"
    assert plot_curves(same, None, title="curves").axes[0].get_title() == "curves"
    plt.close("all")


def test_a_run_resumed_on_another_device_counts_as_mixed():
    steps = "cpu (steps 0-0), cuda (steps 1-)"
    rows = (run("bald", 1, [0.5, 0.9], device=steps, devices=("cpu", "cuda"))
            + run("random", 1, [0.5, 0.7], device=steps, devices=("cpu", "cuda")))
    lines = table_markdown(rows, at_labels=30, anchors=False).splitlines()
    assert lines[2].endswith(f"| {steps} |")
    fig = plot_curves(rows, None, title="t")
    assert fig.axes[0].get_title() == f"t\nseed 1: {steps}"
    plt.close("all")


def test_write_report_marks_a_grid_of_two_devices(grid):
    edit(grid / "runs" / f"{SEED2}.json", device="cuda")
    write_report(grid)
    assert table_line(grid).endswith("| cpu (seed 1), cuda (seed 2) |")


# ----------------------------------------------------------------------------- item 4: shorter seeds
def test_the_noise_tables_say_which_seeds_are_not_counted():
    rows = [dict(r, noise_rate=0.2, n_flipped_acquired=1 if r["step"] else 0)
            for r in run("bald", 1, [0.5, 0.6, 0.7]) + run("bald", 2, [0.5, 0.6])]
    table = noise_markdown(rows, at_labels=(40,))
    assert "| BALD | 20% | 1 (2; not counted: seed 2 at step 1) |" in table


def test_the_deterministic_table_compares_over_common_steps():
    bayes = run("max_entropy", 1, [0.5, 0.8, 0.85, 0.91]) + run("max_entropy", 2, [0.5, 0.8, 0.86, 0.93])
    det = (run("max_entropy", 1, [0.5, 0.8], "deterministic") + run("max_entropy", 2, [0.5, 0.82], "deterministic")
           + run("max_entropy", 3, [0.5], "deterministic"))
    lines = deterministic_markdown(bayes + det, n_initial=20, at_labels=(30, 50)).splitlines()
    # both variants over steps 0-1 (the deterministic runs' length): neither reached 90% within 10 acquired
    assert lines[2] == ("| Max Entropy | bayesian | 1, 2 (steps 0–1 of 3) | > 10 / > 10 | 80.0 ± 0.0 / n/a% | — |")
    assert lines[3] == ("| Max Entropy | deterministic | 1, 2 (steps 0–1 of 3); not counted: seed 3 at step 0 | "
                        "> 10 / > 10 | 81.0 ± 1.0 / n/a% | seed 1: n/a / n/a, seed 2: n/a / n/a |")
    # runs that end where the grid ends and never get there say so
    done = run("max_entropy", 1, [0.5, 0.8]) + run("max_entropy", 1, [0.5, 0.7], "deterministic")
    assert "| never / never |" in deterministic_markdown(done, n_initial=20, at_labels=(30,), end_labels=30)


# ----------------------------------------------------------------------------- item 5: anchors
def test_published_anchors_only_beside_gal2017_on_mnist(grid):
    write_report(grid)  # digits: not the papers' dataset
    text = (grid / "table.md").read_text()
    assert "Gal et al. (2017), 90% / 95%" not in text and "255 / 835" not in text
    from skdbal.experiments.grid_reading import _gal2017_protocol

    as_json = lambda p: json.loads(json.dumps(p.as_dict(), default=str))
    assert _gal2017_protocol(as_json(get_preset("gal2017")))
    assert _gal2017_protocol(as_json(get_preset("gal2017", selection="best_valid_loss", n_queries=45)))
    assert not _gal2017_protocol(as_json(get_preset("kirsch2019")))
    assert not _gal2017_protocol(as_json(get_preset("gal2017", dataset="repeated_mnist")))
    assert not _gal2017_protocol(as_json(get_preset("gal2017", dataset="digits")))


# ----------------------------------------------------------------------------- item 6: --clean
def test_clean_runs_of_another_configuration_are_refused(tmp_path):
    kw = dict(verbose=False, torch_threads=1, strategies=["random"], seeds=[1])
    run_grid("gal2017", out_dir=tmp_path / "noisy", noise_rates=[0.2], **kw, **TINY)
    run_grid("gal2017", out_dir=tmp_path / "clean", **kw, **{**TINY, "max_epochs": 3})
    with pytest.raises(ValueError, match=r"(?s)\(gal2017 random bayesian\):.*noisy/runs/gal2017__random__bayesian__"
                                         r"seed1__noise0.2 differs from clean/runs/gal2017__random__bayesian__seed1 "
                                         r"in preset.max_epochs \(2 against 3\)"):
        write_report(tmp_path / "noisy", clean_dir=tmp_path / "clean")
    run_grid("gal2017", out_dir=tmp_path / "clean2", **kw, **{**TINY, "n_queries": 2})  # only longer: fine
    write_report(tmp_path / "noisy", clean_dir=tmp_path / "clean2")
    assert "| Random | 0% | 1 (1) |" in (tmp_path / "noisy" / "noise_levels.md").read_text()


def test_report_cost_writes_the_median_and_the_step_costs_of_the_runs(grid, capsys):
    """``skdbal report DIR --cost`` writes cost.md: labels by median, step-average and average-step, and the
    median seconds of the acquisition steps, read back here from the runs' own rows (issue 31)."""
    import numpy as np

    from skdbal.metrics import labels_to_accuracy

    assert main(["report", str(grid), "--cost"]) == 0
    assert "cost.md" in capsys.readouterr().out
    text = (grid / "cost.md").read_text()
    assert "device: cpu" in text
    line = [ln for ln in text.splitlines() if ln.startswith("| Random")][0]
    cells = [c.strip() for c in line.strip("|").split("|")]
    rows = read_results(grid / "results.csv")
    runs = [[r for r in rows if r["seed"] == s] for s in (1, 2)]
    assert cells[:3] == ["Random", "bayesian", "2"]
    for column, name in zip(cells[-3:], ("query_time", "train_time", "time")):
        assert float(column) == pytest.approx(np.median([r[name] for run in runs for r in run if r["step"] >= 1]),
                                              abs=0.006)
    med = labels_to_accuracy(runs, 0.90, "median")["value"]
    assert cells[3] == (f"{med:.0f} ({med - 10 * 2:.0f})" if not np.isnan(med) else "> 30")


@pytest.mark.parametrize("extra", [[], ["--cost"]])
def test_report_of_a_folder_without_a_grid_is_a_usage_error(tmp_path, capsys, extra):
    with pytest.raises(SystemExit) as exc:
        main(["report", str(tmp_path)] + extra)
    assert exc.value.code == 2
    assert "holds no grid" in capsys.readouterr().err and not (tmp_path / "cost.md").exists()
