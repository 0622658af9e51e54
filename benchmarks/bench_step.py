"""One acquisition step of the gal2017 preset, timed by part, at several labelled-set sizes, for two
configurations side by side.

A step is: train on the labelled set, score 2,000 pool points with BALD at T=100, and evaluate on
the 10,000 test images. The configurations:

- "Gal": the preset as Gal et al. train, from scratch with 50 fixed epochs, and the per-row masks of
  results version 3 (``mask_seeding="row"``, torch's generators);
- "fast": ``warm_epochs=10`` (train on for 10 epochs from the previous step's weights: here a model
  trained untimed, as Gal's, on 10 labels fewer), and the masks of results version 4
  (``"row_pcg64"``, the default).

The sizes are interleaved (Gal then fast at each size), so both see the same machine. The sum over
the 100 steps of a run is estimated from the interpolated step times, and their ratio printed.

    SKDBAL_DATA=../shared/data python benchmarks/bench_step.py [--labels 20 520 1020] [--threads 2]
"""
import argparse
import sys
import time

import numpy as np
import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _common import machine, markdown_table  # noqa: E402

from skdbal.acquisition import bald  # noqa: E402
from skdbal.datasets import load_mnist  # noqa: E402
from skdbal.experiments import make_estimator  # noqa: E402
from skdbal.experiments.presets import get_preset  # noqa: E402

CONFIGS = {
    "Gal": dict(mask_seeding="row"),
    "fast": dict(warm_epochs=10),
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--labels", type=int, nargs="+", default=[20, 520, 1020])
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    X, y = load_mnist(download=False, return_X_y=True)
    X_test, y_test = load_mnist(download=False, subset="test", return_X_y=True)
    rng = np.random.RandomState(0)
    perm = rng.permutation(len(X))
    base = get_preset("gal2017")
    val = perm[:base.n_validation]
    pool = perm[-base.pool_subsample:]
    labelled = perm[base.n_validation:]
    print(f"machine: {machine()}")
    print(f"gal2017: batch {base.batch_size}, T={base.n_samples}, {base.pool_subsample} pool points scored, "
          f"{len(y_test)} test images, {args.threads} torch threads")
    rows = {name: [] for name in CONFIGS}
    for n in args.labels:
        for name, changes in CONFIGS.items():
            preset = base.replace(**changes)
            est = make_estimator(preset, random_state=0, valid=(X[val], y[val]), n_train=n)
            if preset.warm_epochs and n > 10:  # the previous step's model, trained untimed
                prev = make_estimator(preset, random_state=1, valid=(X[val], y[val]), n_train=n - 10)
                prev.fit(X[labelled[:n - 10]], y[labelled[:n - 10]])
                est.set_params(max_epochs=0).fit(X[labelled[:1]], y[labelled[:1]])
                est.module_.load_state_dict(prev.module_.state_dict())
                est.set_params(warm_start=True, max_epochs=preset.warm_epochs)
            t0 = time.perf_counter()
            est.fit(X[labelled[:n]], y[labelled[:n]])
            t_fit = time.perf_counter() - t0
            epochs = len(est.history)
            t0 = time.perf_counter()
            bald(est, X[pool], base.n_instances)
            t_score = time.perf_counter() - t0
            t0 = time.perf_counter()
            acc = np.mean(est.predict(X_test) == y_test)
            t_eval = time.perf_counter() - t0
            rows[name].append((n, t_fit, t_score, t_eval))
            print(f"{name:>5} {n:>5} labels: train {t_fit:6.1f} s ({epochs} epochs), score {t_score:5.1f} s, "
                  f"evaluate {t_eval:4.1f} s, step {t_fit + t_score + t_eval:6.1f} s (accuracy {acc:.3f})",
                  flush=True)
    steps = np.arange(20, 20 + 10 * (base.n_queries + 1), 10)
    totals = {}
    for name, r in rows.items():
        ns = np.array([x[0] for x in r])
        parts = [np.interp(steps, ns, [x[i] for x in r]).sum() for i in (1, 2, 3)]
        totals[name] = sum(parts)
        print(f"estimated {base.n_queries}-step run, {name}: {totals[name] / 60:.1f} min "
              f"(train {parts[0]:.0f} s, score {parts[1]:.0f} s, evaluate {parts[2]:.0f} s)")
    print(f"fast / Gal: {totals['fast'] / totals['Gal']:.2f}")
    print()
    print(markdown_table(["step", "train s", "score s", "evaluate s", "step s"],
                         [[f"{name} at {n} labels", f"{a:.1f}", f"{b:.1f}", f"{c:.1f}", f"{a + b + c:.1f}"]
                          for name, r in rows.items() for n, a, b, c in r]))


if __name__ == "__main__":
    from _common import recorded  # the whole output and a JSON with the machine, versions, commit

    with recorded(__file__):
        main()
