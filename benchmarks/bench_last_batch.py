"""Test accuracy with a tiny last mini-batch, side by side with even batches.

The gal2017 preset trains 50 epochs of Adam with batch 128. With 130 labels
each epoch is a batch of 128 and a batch of 2; Adam steps as far on the
2-image batch as on the full one, and the last step of training is one of
them. This trains the preset's network on the same random labelled sets of
120, 130 and 140 MNIST images with ``batch_split="fixed"`` (128 + rest) and
``"even"`` (ceil(N/128) equal batches), and prints the mean test accuracy
(all 10,000 test images) and the ratio.

    SKDBAL_DATA=../shared/data python benchmarks/bench_last_batch.py [--seeds 5] [--labels 120 130 140]
"""
import argparse
import sys

import numpy as np
import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _common import machine  # noqa: E402

from skdbal.datasets import load_mnist  # noqa: E402
from skdbal.experiments import make_estimator  # noqa: E402
from skdbal.experiments.presets import get_preset  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--labels", type=int, nargs="+", default=[120, 130, 140])
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    X_train, y_train = load_mnist(subset="train", return_X_y=True)
    X_test, y_test = load_mnist(subset="test", return_X_y=True)
    print(machine())
    acc = {}
    for seed in range(args.seeds):
        labelled = np.random.RandomState(100 + seed).permutation(len(y_train))[:max(args.labels)]
        for n in args.labels:
            for split in ("fixed", "even"):
                est = make_estimator(get_preset("gal2017", batch_split=split), random_state=seed, n_train=n)
                est.fit(X_train[labelled[:n]], y_train[labelled[:n]])
                acc.setdefault((n, split), []).append(float(np.mean(est.predict(X_test) == y_test)))
    print(f"{'labels':>6} | {'batches (fixed)':>15} | {'fixed':>15} | {'even':>15} | even/fixed")
    for n in args.labels:
        f, e = np.array(acc[(n, "fixed")]), np.array(acc[(n, "even")])
        batches = " + ".join(map(str, [128] * (n // 128) + ([n % 128] if n % 128 else [])))
        print(f"{n:>6} | {batches:>15} | {f.mean():.4f} ± {f.std():.4f} | {e.mean():.4f} ± {e.std():.4f} | "
              f"{e.mean() / f.mean():.3f}")
    print(f"({args.seeds} seeds: the same labelled set and initial weights for both splits; mean ± std)")


if __name__ == "__main__":
    from _common import recorded  # the whole output and a JSON with the machine, versions, commit

    with recorded(__file__):
        main()
