"""One acquisition step of the gal2017 preset, timed by part, at several labelled-set sizes.

A step is: train from scratch on the labelled set (50 epochs, batch 128),
score 2,000 pool points with BALD at T=100, and evaluate on the 10,000 test
images. The sum over the 100 steps of a run is estimated from the
interpolated step times.

    SKDBAL_DATA=../shared/data python benchmarks/bench_step.py [--labels 20 520 1020]
"""
import argparse
import sys
import time

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _common import machine  # noqa: E402

from skdbal.acquisition import bald  # noqa: E402
from skdbal.datasets import load_mnist  # noqa: E402
from skdbal.experiments import make_estimator  # noqa: E402
from skdbal.experiments.presets import get_preset  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--labels", type=int, nargs="+", default=[20, 520, 1020])
    parser.add_argument("--preset", default="gal2017")
    args = parser.parse_args()
    preset = get_preset(args.preset)
    X, y = load_mnist(download=False, return_X_y=True)
    X_test, y_test = load_mnist(download=False, subset="test", return_X_y=True)
    rng = np.random.RandomState(0)
    perm = rng.permutation(len(X))
    pool = perm[-preset.pool_subsample:]
    print(f"machine: {machine()}")
    print(f"preset {preset.name}: {preset.max_epochs} epochs, batch {preset.batch_size}, "
          f"T={preset.n_samples}, {preset.pool_subsample} pool points scored, {len(y_test)} test images")
    rows = []
    for n in args.labels:
        est = make_estimator(preset, random_state=0)
        t0 = time.perf_counter()
        est.fit(X[perm[:n]], y[perm[:n]])
        t_fit = time.perf_counter() - t0
        t0 = time.perf_counter()
        bald(est, X[pool], preset.n_instances)
        t_score = time.perf_counter() - t0
        t0 = time.perf_counter()
        acc = np.mean(est.predict(X_test) == y_test)
        t_eval = time.perf_counter() - t0
        rows.append((n, t_fit, t_score, t_eval))
        print(f"{n:>5} labels: train {t_fit:6.1f} s, score {t_score:5.1f} s, evaluate {t_eval:4.1f} s, "
              f"step {t_fit + t_score + t_eval:6.1f} s (accuracy {acc:.3f})", flush=True)
    ns = np.array([r[0] for r in rows])
    steps = np.arange(20, 20 + 10 * (preset.n_queries + 1), 10)
    total = sum(np.interp(steps, ns, [r[i] for r in rows]).sum() for i in (1, 2, 3))
    print(f"estimated {preset.n_queries}-step run: {total / 60:.0f} min")


if __name__ == "__main__":
    main()
