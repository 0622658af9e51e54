"""Over- or under-confident? The sign that ECE leaves out, for runs of a grid.

ECE measures the size of the gap between confidence and accuracy, not its
direction. For each given run of a grid, this script rebuilds the model of
one step exactly as the runner does (same labelled set, same seed: the
runner's models are reproducible from their labels), predicts the run's
test set with the preset's ``eval_method``, and prints accuracy, the mean
top-label confidence, their difference (positive: over-confident), the
weight of the reliability bins that are over-confident, and the ECE, next
to the ECE stored in the run's row, which checks the rebuild.

    SKDBAL_DATA=../shared/data python benchmarks/calibration_gap.py docs/results/ensemble \\
        --runs gal2017__bald__bayesian__seed1 gal2017__bald__ensemble5__seed1

Threads: 1 torch thread (``torch.set_num_threads(1)``).
"""
import argparse
import json
from pathlib import Path

import numpy as np
import torch

from skdbal.experiments import RunSpec, load_data, read_results
from skdbal.experiments.configs import stored_preset
from skdbal.experiments.factories import fit_step_model, split_indices
from skdbal.experiments.journal import labelled_indices
from skdbal.metrics import expected_calibration_error


def rebuild(out_dir: Path, run_id: str, step=None):
    """The run's model at ``step`` (default: its last), its test set and its row."""
    runs = out_dir / "runs"
    config = json.loads((runs / f"{run_id}.json").read_text())
    preset = stored_preset(config)
    spec = RunSpec(preset, config["strategy"], int(config["seed"]), mc_dropout=config["mc_dropout"],
                   ensemble=int(config.get("ensemble", 0)))
    if config.get("noise_rate") or config.get("last_layer") or config.get("initial_set"):
        raise ValueError(f"{run_id}: only clean, network-only runs from the balanced random set are rebuilt here")
    rows = read_results(runs / f"{run_id}.csv")
    step = rows[-1]["step"] if step is None else step
    X_train, y_train, X_test_all, y_test_all = load_data(preset.dataset)
    val, _, _, test = split_indices(preset, spec.seed, y_train, len(y_test_all), X_train, spec.initial_set)
    labelled = labelled_indices(rows[:step + 1])
    est = fit_step_model(spec, step, X_train[labelled], y_train[labelled], (X_train[val], y_train[val]))
    return est, X_test_all[test], y_test_all[test], rows[step]


def gap_row(proba: np.ndarray, y: np.ndarray, classes, n_bins: int = 15) -> dict:
    """Accuracy, mean confidence, their gap and the over-confident bins' weight."""
    confidence = proba.max(axis=1)
    correct = classes[proba.argmax(axis=1)] == y
    bins = np.clip(np.ceil(confidence * n_bins).astype(int) - 1, 0, n_bins - 1)
    over = 0.0
    for b in np.unique(bins):
        in_bin = bins == b
        if confidence[in_bin].mean() > correct[in_bin].mean():
            over += in_bin.mean()
    return {"accuracy": correct.mean(), "confidence": confidence.mean(),
            "gap": confidence.mean() - correct.mean(), "over_weight": over,
            "ece": expected_calibration_error(y, proba, classes=classes, n_bins=n_bins)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--runs", nargs="+", required=True, help="run ids in OUT_DIR/runs")
    parser.add_argument("--step", type=int, default=None, help="the step whose model to rebuild (default: last)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    print(f"{'run':40s} {'step':>4s} {'labels':>6s} {'acc':>6s} {'conf':>6s} {'gap':>7s} "
          f"{'over-bins':>9s} {'ECE':>6s} {'stored':>6s}")
    for run_id in args.runs:
        est, X_test, y_test, row = rebuild(Path(args.out_dir), run_id, args.step)
        proba = np.asarray(est.predict_proba(X_test), dtype=np.float64)
        r = gap_row(proba, y_test, est.classes_)
        print(f"{run_id:40s} {row['step']:4d} {row['n_labels']:6d} {r['accuracy']:6.4f} {r['confidence']:6.4f} "
              f"{r['gap']:+7.4f} {r['over_weight']:9.2f} {r['ece']:6.4f} {row['ece']:6.4f}", flush=True)


if __name__ == "__main__":
    from _common import recorded  # the whole output and a JSON with the machine, versions, commit

    with recorded(__file__):
        main()
