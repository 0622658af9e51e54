"""The report's tables and figures, computed by hand from rows written out in each test."""
import numpy as np

from skdbal.experiments.curves import deterministic_markdown, table_markdown
from skdbal.experiments.last_layer import last_layer_markdown


def test_report_values_by_hand():
    def rows(strategy, accs_by_seed):
        return [{"preset": "p", "strategy": strategy, "variant": "bayesian", "seed": s, "step": i,
                 "n_labels": 20 + 10 * i, "accuracy": a} for s, accs in accs_by_seed.items()
                for i, a in enumerate(accs)]
    table = table_markdown(rows("bald", {1: [0.8, 0.91, 0.96], 2: [0.8, 0.85, 0.95]}), at_labels=30)
    # average-step: mean 0.80, 0.88, 0.955 -> 90% and 95% at 40 labels (20 acquired)
    # step-average 90%: runs 30, 40 -> 35 ± 5; 95%: 40, 40 -> 40 ± 0
    assert "| 40 (20) | 35 (15) ± 5.0 | 40 (20) | 40 (20) ± 0.0 | 88.00 ± 3.00% |" in table
    # seed 3 still running: the finished seeds 1-2 give the same numbers as above, seed 3 is listed
    table = table_markdown(rows("bald", {1: [0.8, 0.91, 0.96], 2: [0.8, 0.85, 0.95], 3: [0.5, 0.5]}),
                           at_labels=30)
    assert ("| BALD | bayesian | 2 (2, 2; not counted: seed 3 at step 1) | 40 (20) | 35 (15) ± 5.0 | 40 (20) | "
            "40 (20) ± 0.0 | 88.00 ± 3.00% |") in table
    # without the published anchors every row has as many cells as the header
    lines = table_markdown(rows("bald", {1: [0.8, 0.91, 0.96]}), at_labels=30, anchors=False).splitlines()
    assert "145 / 335" not in "\n".join(lines)
    assert {line.count("|") for line in lines} == {9}

def test_noise_reports_mark_the_device_where_runs_mix_devices():
    """Rows of a CPU run and a GPU run are not compared silently: the noise table names each group's devices
    and the cross-rate figure says, panel by panel, which runs ran where (issue 27, item 17)."""
    import matplotlib.pyplot as plt

    from skdbal.experiments.label_noise import noise_markdown, plot_noise_levels

    def run(strategy, seed, rate, device, accs=(0.5, 0.6, 0.7)):
        return [dict(preset="gal2017", strategy=strategy, variant="bayesian", seed=seed, step=i, n_labels=20 + 10 * i,
                     n_acquired=10 * i, accuracy=a, noise_rate=rate, n_flipped_acquired=0, device=device)
                for i, a in enumerate(accs)]

    rows = (run("bald", 1, 0.0, "cpu") + run("random", 1, 0.0, "cpu") + run("filter(bald,dynamic)", 1, 0.0, "cuda")
            + run("bald", 1, 0.1, "cpu") + run("random", 1, 0.1, "cpu") + run("bald", 1, 0.3, "cpu")
            + run("bald", 2, 0.3, "cuda") + run("bald", 3, 0.3, "cuda")
            + run("random", 1, 0.3, "cpu") + run("random", 2, 0.3, "cuda") + run("random", 3, 0.3, "cuda"))
    lines = noise_markdown(rows, at_labels=(40,)).splitlines()
    assert lines[0].endswith("| accuracy at 40 | device |")
    assert lines[2].startswith("| BALD | 0% |") and lines[2].endswith("| 70.00 ± 0.00% | cpu |")
    assert [line for line in lines if line.startswith("| BALD | 30% |")][0].endswith(
        "| cpu (seed 1), cuda (seeds 2, 3) |")
    assert "device" not in noise_markdown([{k: v for k, v in r.items() if k != "device"} for r in rows])
    fig = plot_noise_levels(rows, None, strategies=("bald", "filter(bald,dynamic)", "random"))
    assert [ax.get_title() for ax in fig.axes] == [
        "0% label noise\nBALD, Random: cpu\nfilter(bald,dynamic): cuda", "10% label noise\nall on cpu",
        "30% label noise\nseed 1: cpu\nseeds 2, 3: cuda"]
    plt.close(fig)
    same = [r for r in rows if r["device"] == "cpu"]
    fig = plot_noise_levels(same, None, strategies=("bald", "random"))
    assert [ax.get_title() for ax in fig.axes] == ["0% label noise", "10% label noise", "30% label noise"]
    plt.close(fig)

def test_deterministic_table_by_hand():
    def rows(variant, accs_by_seed):
        return [{"preset": "p", "strategy": "variation_ratios", "variant": variant, "seed": s, "step": i,
                 "n_labels": 20 + 10 * i, "accuracy": a} for s, accs in accs_by_seed.items()
                for i, a in enumerate(accs)]
    bayes = rows("bayesian", {1: [0.8, 0.91, 0.96], 2: [0.8, 0.90, 0.94], 3: [0.8, 0.90, 0.95]})
    det = rows("deterministic", {1: [0.8, 0.85, 0.95], 2: [0.8, 0.92, 0.96], 3: [0.5]})  # seed 3 running
    table = deterministic_markdown(bayes + det, n_initial=20, at_labels=(30, 40))
    # seeds 1-2 only (seed 3 unfinished in the baseline). Bayesian mean curve 0.80, 0.905, 0.95:
    # 90% at 10 acquired, 95% at 20; accuracy at 30 labels 90.5 ± 0.5, at 40 labels 95.0 ± 1.0.
    # seed 3's Bayesian run is finished but left out with its baseline, and both say so
    assert ("| Var Ratios | bayesian | 1, 2; not counted: seed 3 at step 2 | 10 / 20 | 90.5 ± 0.5 / 95.0 ± 1.0% "
            "| — |") in table
    # deterministic mean curve 0.80, 0.885, 0.955: 90% at 20, 95% at 20. Seed 1: 90% at 20 vs 10 (+10),
    # 95% at 20 vs 20 (+0); seed 2: 90% at 10 vs 10 (+0), 95% at 20 vs never (n/a).
    assert ("| Var Ratios | deterministic | 1, 2; not counted: seed 3 at step 0 | 20 / 20 | 88.5 ± 3.5 / "
            "95.5 ± 0.5% | seed 1: +10 / +0, seed 2: +0 / n/a |") in table
    assert "Max Entropy" not in table  # no baseline for it
    only = deterministic_markdown(bayes + rows("deterministic", {4: [0.8, 0.9, 0.9]}))
    assert "no seed finished in both variants yet" in only

def test_last_layer_markdown_with_a_run_in_progress():
    def row(seed, step, rmse):
        return {"preset": "p", "strategy": "random", "variant": "blr_analytic", "seed": seed, "step": step,
                "n_labels": 20 + 10 * step, "n_acquired": 10 * step, "accuracy": 0.5, "rmse": rmse,
                "mean_variance": 1.0}
    rows = [row(1, 0, 0.3), row(1, 1, 0.2), row(1, 2, 0.1), row(2, 0, 0.5), row(2, 1, 0.4)]
    lines = last_layer_markdown(rows, at_acquired=(0, 10, 20)).splitlines()
    # seed 2 is one step behind: means over the shared steps 0-1, and no row at 20 acquired
    assert lines[2:] == [
        "| analytic | Random | 2 (2, 1; means over steps 0–1) | 0 | 0.4000 ± 0.1000 | 1.0000 ± 0.0000 "
        "| 50.00 ± 0.00% |",
        "| analytic | Random | 2 (2, 1; means over steps 0–1) | 10 | 0.3000 ± 0.1000 | 1.0000 ± 0.0000 "
        "| 50.00 ± 0.00% |",
    ]

def test_noise_table_by_hand(tmp_path):
    from skdbal.experiments.label_noise import noise_markdown

    def run(seed, rejected, rejected_flipped, flipped_acquired, accs):
        rows = [dict(preset="gal2017", strategy="filter(bald,0.1)", variant="bayesian", seed=seed, step=0,
                     n_labels=20, accuracy=accs[0], noise_rate=0.2, n_rejected=None, n_rejected_flipped=None,
                     n_flipped_acquired=0, threshold=None, noise_estimate=None)]
        for step, (a, b, c) in enumerate(zip(rejected, rejected_flipped, flipped_acquired), start=1):
            rows.append(dict(rows[0], step=step, n_labels=20 + 10 * step, accuracy=accs[step], n_rejected=a,
                             n_rejected_flipped=b, n_flipped_acquired=c, threshold=0.1))
        return rows

    rows = run(1, [4, 2], [2, 1], [1, 1], [0.5, 0.6, 0.7]) + run(2, [3, 3], [3, 0], [0, 2], [0.5, 0.7, 0.8])
    table = noise_markdown(rows, n_instances=10, at_labels=(40,))
    # 12 rejects over 4 steps: 3 / step, optimal 0.2 x 10 = 2 -> +50%; precision 6/12; recall 6/(6+4)
    # flipped in the final training set: seed 1 2/40, seed 2 2/40 -> 5.0%; accuracy at 40: 75 ± 5%
    # Anonymous (n.d.) rejected 3.18 per step with tau = 0.1 at 20% noise: +59% over the optimal 2
    assert ("| filter(bald,0.1) | 20% | 2 (2, 2) | 3.00 | +50% | 0.50 | 0.60 | 1.00 | 5.0% | 0.100 | — | "
            "3.18 (+59%) | 75.00 ± 5.00% |") in table
    # across rates: a clean filtered run's excess is absolute (the optimal is 0), and a clean
    # unfiltered run without noise columns has no flipped labels
    clean = [dict(r, noise_rate=0.0, n_rejected_flipped=0, n_flipped_acquired=0)
             for r in run(3, [1, 0], [0, 0], [0, 0], [0.5, 0.6, 0.9])]
    bald = [dict(preset="gal2017", strategy="bald", variant="bayesian", seed=1, step=i, n_labels=20 + 10 * i,
                 accuracy=a) for i, a in enumerate([0.5, 0.6, 0.8])]
    table = noise_markdown(rows + clean + bald, n_instances=10, at_labels=(40,))
    assert "| BALD | 0% | 1 (2) | — | — | — | — | 0.00 | 0.0% | — | — | — | 80.00 ± 0.00% |" in table
    assert "| filter(bald,0.1) | 0% | 1 (2) | 0.50 | +0.50 | 0.00 | — | 0.00 | 0.0% | 0.100 | — | — | " \
           "90.00 ± 0.00% |" in table
    assert table.index("| 0% |") < table.index("| 20% |")

def test_calibration_table_spreads_label_counts_and_figure_values():
    """With no label counts given, the table takes five spread over the counts
    every run reached; the figure, like plot_curves, draws the runs that got
    furthest."""
    from skdbal.experiments.calibration import calibration_markdown, plot_calibration

    rows = [dict(preset="gal2017", strategy="bald", variant="bayesian", seed=s, step=i, n_labels=20 + 10 * i,
                 n_acquired=10 * i, accuracy=0.5, ece=0.1 * s + 0.01 * i, nll=1.0, noise_rate=None)
            for s in (1, 2) for i in range(9 if s == 1 else 7)]   # seed 2 stopped at 80 labels
    text = calibration_markdown(rows)
    counts = [int(line.split(" | ")[3]) for line in text.splitlines()[2:]]
    assert counts == [20, 40, 50, 60, 80]   # round(linspace(0, 6, 5)) = 0, 2, 3, 4, 6 over 20..80
    assert "| 50 | 50.00 ± 0.00% | 0.1800 ± 0.0500 | 1.0000 ± 0.0000 |" in text   # (0.13 + 0.23) / 2
    fig = plot_calibration(rows, None)
    ece = fig.axes[1].get_lines()[0].get_ydata()
    np.testing.assert_allclose(ece, 0.1 + 0.01 * np.arange(9))   # the run that got furthest, as plot_curves
    assert fig.axes[1].get_lines()[0].get_label() == "BALD (bayesian), 1 run(s) (not counted: seed 2 at step 6)"
    import matplotlib.pyplot as plt
    plt.close(fig)


def test_two_figures_by_hand_and_refuses_what_is_not_a_number():
    import pytest

    from skdbal.experiments.curve_facts import two_figures

    # 3.997 rounds to 4, kept as 4.0; 0.00636 x 100 = 0.636 -> 0.64; 12.3 -> 12; 0.5 -> 0.5; 123 -> 1.2e+02
    assert [two_figures(v) for v in (3.997, 0.636, 12.3, 0.5, 2.0, 123.0)] == ["4.0", "0.64", "12", "0.5", "2.0",
                                                                                "1.2e+02"]
    with pytest.raises(TypeError):
        two_figures(None)


def test_stored_preset_names_an_unknown_preset():
    import pytest

    from skdbal.experiments.configs import stored_preset

    with pytest.raises(ValueError, match="unknown preset 'nope'"):
        stored_preset({"preset": {"name": "nope"}})
    assert stored_preset({"preset": {"name": "gal2017", "mask_seeding": "row"}}).mask_seeding == "row"
