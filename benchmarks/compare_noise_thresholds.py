"""How the noise filter's thresholds decide on the same model, pool and labels.

For each stored run of a label-noise grid (its last model, from the weights
cache ``runs/<run_id>.pt``), draws ``--pool`` points of the run's remaining
pool with its noisy labels, and prints, for each threshold rule, the
threshold, the noise-rate estimate, the rejects of one query of
``--n-instances`` and how many of the rejected and of the acquired labels
were truly flipped. Every rule sees the same MC samples (row-keyed masks).

    SKDBAL_DATA=../shared/data python benchmarks/compare_noise_thresholds.py docs/results/noise \\
        --runs gal2017__bald__bayesian__seed2__noise0.2 --rules dynamic batch quantile 0.1 0.25

Threads: 1 torch thread (``torch.set_num_threads(1)``).
"""
import argparse
import json
from pathlib import Path

import numpy as np
import torch

from skdbal.acquisition import get_strategy
from skdbal.datasets import make_noisy_labels
from skdbal.experiments import load_data, make_estimator, read_results
from skdbal.experiments.configs import stored_preset
from skdbal.experiments.factories import split_indices
from skdbal.experiments.journal import labelled_indices


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--runs", nargs="+", required=True, help="run ids in OUT_DIR/runs")
    parser.add_argument("--rules", nargs="+", default=["dynamic", "batch", "quantile", "0.1", "0.25"])
    parser.add_argument("--pool", type=int, default=2000)
    parser.add_argument("--n-instances", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=1, help="pool draws per run")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    runs = Path(args.out_dir) / "runs"
    for run_id in args.runs:
        config = json.loads((runs / f"{run_id}.json").read_text())
        preset = stored_preset(config)  # runs of results version 2 drew masks by stream
        seed, rate = int(config["seed"]), float(config["noise_rate"])
        X_train, y_train, _, y_test_all = load_data(preset.dataset)
        val, pool, initial, _ = split_indices(preset, seed, y_train, len(y_test_all))
        y_given, flipped = make_noisy_labels(y_train, rate, classes=np.unique(y_train),
                                             random_state=np.random.RandomState([seed, 7907]))
        y_given[initial], flipped[initial] = y_train[initial], False
        rows = read_results(runs / f"{run_id}.csv")
        labelled = labelled_indices(rows)
        state = torch.load(runs / f"{run_id}.pt", weights_only=True)
        net = make_estimator(preset, random_state=0, valid=(X_train[val], y_train[val]), n_train=len(labelled))
        net.set_params(max_epochs=0, callbacks=None)
        net.fit(X_train[labelled[:1]], y_given[labelled[:1]])  # builds the module
        net.module_.load_state_dict(state["model_state"])
        remaining = np.setdiff1d(pool, labelled)
        print(f"{run_id}: model of step {state['step']}, {len(labelled)} labels; {args.pool} pool points, "
              f"{100 * rate:g}% noise, {args.n_instances} per query")
        print(f"  {'rule':9s} {'tau':>6s} {'eps_hat':>7s} {'rejects':>7s} {'flipped':>7s} {'acq. flipped':>12s}")
        for r in range(args.repeats):
            cand = np.sort(np.random.RandomState([seed, r]).choice(remaining, args.pool, replace=False))
            for rule in args.rules:
                acq = get_strategy(f"filter(bald,{rule})").acquire(
                    net, X_train[cand], args.n_instances, y_pool=y_given[cand], random_tie_break=True, random_state=r)
                rejected = cand[acq.info["rejected_indices"]]
                print(f"  {rule:9s} {acq.info['threshold']:6.3f} {acq.info.get('noise_rate', float('nan')):7.3f} "
                      f"{len(rejected):7d} {int(flipped[rejected].sum()):7d} "
                      f"{int(flipped[cand[acq.indices]].sum()):12d}")


if __name__ == "__main__":
    from _common import recorded  # the whole output and a JSON with the machine, versions, commit

    with recorded(__file__):
        main()
