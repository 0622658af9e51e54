"""How presets train: test accuracy and step cost on the same labelled sets.

For each seed and labelled-set size, draws a balanced random labelled set
from MNIST's training set, trains each preset's network on it (as the
runner does at a step), and prints test accuracy (the preset's
``eval_method``), the time to train, to predict the 10,000 test images, and
to score 2,000 pool points with BALD at the preset's T (and, with
``--batch-bald``, to pick 10 of them with BatchBALD).

    SKDBAL_DATA=../shared/data python benchmarks/compare_presets.py \\
        --presets kirsch2019 gal2017 --labels 20 100 --seeds 0

Threads: 1 torch thread (``torch.set_num_threads(1)``).
"""
import argparse
import time

import numpy as np
import torch

from skdbal.acquisition import bald, batch_bald
from skdbal.datasets import load_mnist
from skdbal.experiments import get_preset, make_estimator


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=["kirsch2019", "gal2017"])
    parser.add_argument("--labels", type=int, nargs="+", default=[20, 100])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--batch-bald", action="store_true", help="also time BatchBALD's 10 picks")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    X, y = load_mnist(download=False, return_X_y=True)
    X_test, y_test = load_mnist(download=False, subset="test", return_X_y=True)
    print(f"{'preset':12s} {'seed':>4s} {'labels':>6s} {'accuracy':>8s} {'train':>7s} {'test':>6s} {'score':>7s}"
          + (f" {'batchbald':>9s}" if args.batch_bald else ""))
    for seed in args.seeds:
        rng = np.random.RandomState(seed)
        pool = rng.permutation(len(X) - 1000)[:2000]
        for n in args.labels:
            idx = np.concatenate([rng.choice(np.flatnonzero(y[:-1000] == c), n // 10, replace=False)
                                  for c in range(10)])
            for name in args.presets:
                preset = get_preset(name)
                t0 = time.perf_counter()
                # the last 1,000 training images validate, for presets that select by validation loss
                net = make_estimator(preset, random_state=seed, valid=(X[-1000:], y[-1000:]),
                                     n_train=len(idx)).fit(X[idx], y[idx])
                t1 = time.perf_counter()
                accuracy = np.mean(net.predict(X_test) == y_test)
                t2 = time.perf_counter()
                bald(net, X[pool], n_instances=10)
                t3 = time.perf_counter()
                extra = ""
                if args.batch_bald:
                    batch_bald(net, X[pool], n_instances=10)
                    extra = f" {time.perf_counter() - t3:8.1f}s"
                print(f"{name:12s} {seed:4d} {len(idx):6d} {accuracy:8.4f} {t1 - t0:6.1f}s {t2 - t1:5.1f}s "
                      f"{t3 - t2:6.1f}s{extra}", flush=True)


if __name__ == "__main__":
    from _common import recorded  # the whole output and a JSON with the machine, versions, commit

    with recorded(__file__):
        main()
