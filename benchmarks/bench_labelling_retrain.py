"""How long ``skdbal label``'s retrain takes as labels grow, and how good its model is.

The network ``skdbal label`` builds for a folder of 28x28 images
(:func:`skdbal.labelling.cli.pool_learner`) is trained on ``n`` labelled
Fashion-MNIST images (a seeded random sample of a 3,000-image pool, as a
session's folder) for each ``n`` in ``--labels``, two ways:

- ``epochs`` (before issue 52): 50 epochs over the labelled set in batches
  of 32, so that a retrain's gradient steps grow with the labels
  (50 × ceil(n / 32));
- ``draws`` (now): one epoch of a fixed number of draws
  (:data:`skdbal.labelling.cli.RETRAIN_DRAWS`, with repeats, through
  :class:`skdbal.models.FixedLengthLoader`), the same number of gradient
  steps whatever ``n`` (up to that many labels).

For each it reports the fit's time (torch on one thread) and the accuracy on
``--test`` held-out Fashion-MNIST test images (the net's own ``predict``,
20 dropout samples), over ``--seeds`` seeds (the sample and the net's seed),
and the time of one query's scoring of the 3,000-image pool (BALD, T = 20),
which each retrain adds (twice: the batch and the tail).

    python benchmarks/bench_labelling_retrain.py [--labels 10 50 100 150 200] [--seeds 0 1 2]

Writes its output to ``docs/results/bench_labelling_retrain/``
(:func:`_common.recorded`).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import markdown_table, recorded  # noqa: E402
from bench_labelling_wait import fashion_mnist  # noqa: E402


def epochs_net(net):
    """The network ``skdbal label`` built before issue 52: ``net`` with 50 epochs over the labelled set
    (torch's own loader) instead of one epoch of fixed draws."""
    from torch.utils.data import DataLoader

    params = {k: v for k, v in net.get_params(deep=False).items() if k != "iterator_train__n_samples"}
    return type(net)(**{**params, "max_epochs": 50, "iterator_train": DataLoader})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labels", type=int, nargs="+", default=[10, 50, 100, 150, 200])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--test", type=int, default=2000, help="held-out test images")
    parser.add_argument("--draws", type=int, nargs="+", default=None,
                        help="draws per retrain to compare (default: RETRAIN_DRAWS, skdbal label's)")
    args = parser.parse_args()
    import torch
    from sklearn.base import clone

    from skdbal.labelling.cli import RETRAIN_DRAWS, pool_learner
    from skdbal.labelling.pools import load_pool

    torch.set_num_threads(1)
    X_train, y_train = fashion_mnist("train")
    X_t10k, y_t10k = fashion_mnist("t10k")
    rng = np.random.RandomState(0)
    pool_rows = rng.choice(len(X_train), 3000, replace=False)
    pool = load_pool(X_train[pool_rows])   # the images as the session's model sees them
    X_pool, y_pool = pool.X, y_train[pool_rows]
    test_rows = rng.choice(len(X_t10k), args.test, replace=False)
    X_test, y_test = load_pool(X_t10k[test_rows]).X, y_t10k[test_rows]
    classes = [str(c) for c in range(10)]
    learner = pool_learner(classes, X_pool, images=True)
    nets = {"epochs": epochs_net(learner.estimator)}
    for draws in args.draws or [RETRAIN_DRAWS]:
        nets[f"draws {draws}"] = clone(learner.estimator).set_params(iterator_train__n_samples=draws)
    print(f"Fashion-MNIST: a pool of {len(X_pool)} training images, {len(X_test)} test images; "
          f"skdbal label's draws per retrain: {RETRAIN_DRAWS}; seeds {args.seeds}; torch on 1 thread", flush=True)
    rows = []
    for n in args.labels:
        res = {name: ([], [], []) for name in nets}
        for seed in args.seeds:
            picked = np.random.RandomState(seed).choice(len(X_pool), n, replace=False)
            y = np.asarray(classes)[y_pool[picked]]
            for name, template in nets.items():
                net = clone(template).set_params(random_state=seed)
                t0 = time.perf_counter()
                net.fit(X_pool[picked], y)
                fit_s = time.perf_counter() - t0
                steps = sum(len(h["batches"]) for h in net.history)
                acc = float(np.mean(net.predict(X_test) == np.asarray(classes)[y_test]))
                res[name][0].append(fit_s)
                res[name][1].append(acc)
                res[name][2].append(steps)
                print(f"  n={n:4d} seed={seed} {name:11s}: {steps:4d} steps, fit {fit_s:.2f} s, "
                      f"test accuracy {acc:.3f}", flush=True)
        row = [n]
        for name in nets:
            fit, acc, steps = (np.asarray(v) for v in res[name])
            row += [int(np.median(steps)), f"{np.median(fit):.2f}",
                    f"{acc.mean():.3f} ± {acc.std(ddof=1) / np.sqrt(len(acc)) if len(acc) > 1 else 0:.3f}"]
        rows.append(row)
    # one query's scoring of the pool (BALD, T = 20): each retrain adds it
    picked = np.random.RandomState(0).choice(len(X_pool), 100, replace=False)
    model = clone(list(nets.values())[-1]).set_params(random_state=0)
    model.fit(X_pool[picked], np.asarray(classes)[y_pool[picked]])
    t0 = time.perf_counter()
    model.predict_proba_samples(X_pool, n_samples=20)
    print(f"\nscoring the {len(X_pool)}-image pool (T = 20 dropout samples): {time.perf_counter() - t0:.2f} s")
    print("\nfit time (median over seeds) and test accuracy (mean ± standard error over seeds)")
    print(markdown_table(["labels"] + [f"{name}: {what}" for name in nets for what in ("steps", "fit s", "accuracy")],
                         rows))


if __name__ == "__main__":
    with recorded(__file__):
        main()
