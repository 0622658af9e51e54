"""How differently MC-dropout and deterministic scores rank the same pool.

The deterministic baseline of Gal et al. §5.2 scores the pool with one
weight-scaled pass (``mc_dropout=False``): max entropy becomes the entropy of
that softmax, variation ratios becomes least confidence (1 - max p). This
trains the ``gal2017`` network on random labelled sets of MNIST, scores the
same random pool subset both ways on the *same* trained network, and prints,
per strategy, the Spearman rank correlation of the two scores and how many of
the top ``--batch`` points (the acquired batch) the two choose in common.
It isolates the scoring from the rest of the loop (in the grid the labelled
sets drift apart after the first step).

    SKDBAL_DATA=../shared/data python benchmarks/compare_scoring.py [--seeds 3] [--labels 220]
"""
import argparse
import sys

import numpy as np
import torch
from scipy.stats import spearmanr

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _common import machine  # noqa: E402

from skdbal.acquisition.base import select_top  # noqa: E402
from skdbal.datasets import load_mnist  # noqa: E402
from skdbal.experiments import make_estimator  # noqa: E402
from skdbal.experiments.presets import get_preset  # noqa: E402
from skdbal.uncertainty import least_confidence, predictive_entropy, variation_ratio  # noqa: E402

#: strategy -> (Bayesian score over T samples, deterministic score over one pass)
PAIRS = {
    "max_entropy": (predictive_entropy, predictive_entropy),
    "variation_ratios": (variation_ratio, least_confidence),
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--labels", type=int, nargs="+", default=[220])
    parser.add_argument("--pool", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    preset = get_preset("gal2017")
    X_train, y_train = load_mnist(subset="train", return_X_y=True)
    print(machine())
    print(f"T = {preset.n_samples}, pool subset {args.pool}, top {args.batch}; same network for both scores")
    print(f"{'labels':>6} | {'strategy':>16} | {'Spearman rho':>13} | {'top-k shared':>13}")
    for n in args.labels:
        res = {s: ([], []) for s in PAIRS}
        for seed in range(args.seeds):
            perm = np.random.RandomState(200 + seed).permutation(len(y_train))
            labelled, pool = perm[:n], perm[n:n + args.pool]
            net = make_estimator(preset, random_state=seed, n_train=n).fit(X_train[labelled], y_train[labelled])
            P_mc = net.predict_proba_samples(X_train[pool])  # (T, pool, classes), dropout on
            P_det = net.predict_proba(X_train[pool])[None]  # one weight-scaled pass
            for name, (bayes, det) in PAIRS.items():
                a, b = bayes(P_mc), det(P_det)
                res[name][0].append(spearmanr(a, b).correlation)
                top_a, _ = select_top(a, args.batch)
                top_b, _ = select_top(b, args.batch)
                res[name][1].append(len(set(top_a) & set(top_b)))
        for name, (rho, shared) in res.items():
            rho, shared = np.array(rho), np.array(shared, dtype=float)
            print(f"{n:>6} | {name:>16} | {rho.mean():.3f} ± {rho.std():.3f} | "
                  f"{shared.mean():4.1f} ± {shared.std():.1f} / {args.batch}")
    print(f"({args.seeds} seeds, random labelled sets; mean ± std over seeds)")


if __name__ == "__main__":
    from _common import recorded  # the whole output and a JSON with the machine, versions, commit

    with recorded(__file__):
        main()
