"""The Bayesian last layer's offset on actively chosen labels: uniform against the labelled class frequencies.

:class:`~skdbal.models.BayesianLastLayerHead` centres its outputs, at the mean of the labelled
embeddings, on ``1 / C`` (``class_prior="uniform"``) or on the labelled set's class frequencies
(``"frequencies"``, the regression's own intercept). For every run of ``bench_representation`` (its
committed ``results.csv``: the network, the spreading head and the last layer, every strategy and seed)
and each of 20, 30, 50, 100 and 300 labels, both heads are fitted on the same labelled rows of the pool
encoder's embeddings and scored on the 10,000 test images, side by side. Printed per data set and label
count: the mean and the worst accuracy of each, the share of labelled sets where uniform is ahead, level or
behind, and the median paired difference with its bootstrap band over the labelled sets.

    python benchmarks/bench_class_prior.py       # a minute on 2 cores, after bench_representation
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, load_split, markdown_table, recorded  # noqa: E402
from bench_representation import embeddings, labelled_sets  # noqa: E402

LABELS = (20, 30, 50, 100, 300)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", nargs="+", default=["mnist", "fashion_mnist"], choices=["mnist", "fashion_mnist"])
    p.add_argument("--cache", default=os.environ.get("SKDBAL_BENCH_CACHE", str(Path.home() / ".cache" / "skdbal"
                                                                            / "bench_representation")))
    args = p.parse_args(argv)
    from skdbal.experiments.seed_variance import bootstrap_band
    from skdbal.models import BayesianLastLayerHead

    out = Path(os.environ.get("SKDBAL_BENCH_OUT") or ROOT / "docs" / "results" / "bench_class_prior")
    out.mkdir(parents=True, exist_ok=True)
    summary: dict = {"datasets": {}}
    for name in args.datasets:
        y = load_split(name)[1].astype(int)
        y_test = load_split(name, "test")[1].astype(int)
        npy, _, _, _ = embeddings(name, Path(args.cache), 1)
        Z_all = np.load(npy, mmap_mode="r")
        Z, Z_test = np.asarray(Z_all[:len(y)]), np.asarray(Z_all[len(y):])
        sets = labelled_sets(name)
        rows, facts = [], {}
        for n in LABELS:
            acc = {"uniform": [], "frequencies": []}
            for labelled in sets.values():
                rows_n = labelled[:n]
                for prior in acc:
                    head = BayesianLastLayerHead(classes=np.arange(10), class_prior=prior, random_state=0)
                    acc[prior].append(float(head.fit(Z[rows_n], y[rows_n]).score(Z_test, y_test)))
            u, f = np.array(acc["uniform"]), np.array(acc["frequencies"])
            diff = u - f
            low, high = bootstrap_band(diff)
            facts[str(n)] = {"sets": len(u), "uniform_mean": round(100 * u.mean(), 1),
                             "uniform_worst": round(100 * u.min(), 1),
                             "frequencies_mean": round(100 * f.mean(), 1),
                             "frequencies_worst": round(100 * f.min(), 1),
                             "uniform_ahead": int((diff > 0).sum()), "level": int((diff == 0).sum()),
                             "uniform_behind": int((diff < 0).sum()),
                             "median_gain": round(100 * float(np.median(diff)), 1),
                             "median_gain_band": [round(100 * low, 1), round(100 * high, 1)]}
            d = facts[str(n)]
            rows.append([n, d["sets"], f"{d['uniform_mean']:.1f} / {d['uniform_worst']:.1f}",
                         f"{d['frequencies_mean']:.1f} / {d['frequencies_worst']:.1f}",
                         f"{d['uniform_ahead']} / {d['level']} / {d['uniform_behind']}",
                         "{:+.1f} ({:+.1f} to {:+.1f})".format(d["median_gain"], *d["median_gain_band"])])
        print(f"\n{name}: test accuracy (%) of the last layer on the labels bench_representation's runs chose")
        print(markdown_table(["labels", "labelled sets", "uniform: mean / worst", "frequencies: mean / worst",
                              "uniform ahead / level / behind", "median gain, points (bootstrap band)"], rows))
        summary["datasets"][name] = facts
    (out / "results.json").write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    with recorded(__file__):
        main()
