"""Bayesian heads over embeddings: the refit after a batch of labels, and the pool scored at T = 100.

The goal: after each batch of labels, the head refits and a 60,000-row pool of
128-dimensional embeddings is scored (BALD) at T = 100 in at most 2 s on 2 CPU
cores. Each head is refitted on the same labelled rows and scores the same pool,
in turns, ``--repeats`` times (the best time counts); today's
``MCDropoutClassifier(MLP)`` trained by skorch with per-row masks stands beside
them (``--no-reference`` leaves it out: it takes tens of seconds on the full pool).

    python benchmarks/bench_heads.py [--pool 60000] [--dim 128] [--labels 100] [--T 100] [--threads 2]

The embeddings are synthetic (10 Gaussian classes), since only the shapes matter for time.
"""
import argparse
import sys
import time

import numpy as np
import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _common import machine, markdown_table  # noqa: E402

from skdbal import MCDropoutClassifier  # noqa: E402
from skdbal.acquisition import bald  # noqa: E402
from skdbal.models import MLP, BayesianLastLayerHead, DeepEnsembleClassifier, LaplaceClassifier, MCDropoutHead  # noqa: E402


def heads(T: int, reference: bool) -> dict:
    """The heads timed, by name, each unfitted."""
    classes = np.arange(10)
    out = {
        "MCDropoutHead": MCDropoutHead(n_samples=T, classes=classes, random_state=0),
        "LaplaceClassifier(MCDropoutHead)": LaplaceClassifier(MCDropoutHead(classes=classes, random_state=0),
                                                             n_samples=T, random_state=0),
        "DeepEnsembleClassifier(5 × MCDropoutHead)": DeepEnsembleClassifier(
            MCDropoutHead(classes=classes), n_members=5, samples_per_member=max(1, T // 5), random_state=0),
        "BayesianLastLayerHead analytic": BayesianLastLayerHead(n_samples=T, classes=classes, random_state=0),
        "BayesianLastLayerHead mfvi": BayesianLastLayerHead("mfvi", n_samples=T, classes=classes, random_state=0),
    }
    if reference:
        out["MCDropoutClassifier(MLP), skorch, 50 epochs"] = MCDropoutClassifier(
            MLP, classes=classes, n_samples=T, random_state=0)
    return out


def embeddings(n_pool: int, dim: int, n_labels: int, seed: int = 0):
    rng = np.random.RandomState(seed)
    centres = rng.normal(size=(10, dim)).astype(np.float32)
    y = rng.randint(0, 10, n_pool + n_labels)
    X = centres[y] + 2.0 * rng.normal(size=(len(y), dim)).astype(np.float32)
    return X[:n_labels], y[:n_labels], X[n_labels:]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool", type=int, default=60000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--labels", type=int, default=100)
    parser.add_argument("--T", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-reference", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    X_lab, y_lab, X_pool = embeddings(args.pool, args.dim, args.labels)
    print(f"machine: {machine()}")
    print(f"pool {args.pool} × {args.dim} float32 embeddings, {args.labels} labels, T={args.T}, "
          f"{args.threads} torch threads, best of {args.repeats}")
    models = heads(args.T, not args.no_reference)
    best = {name: [np.inf, np.inf] for name in models}
    for _ in range(args.repeats):
        for name, model in models.items():
            t0 = time.perf_counter()
            model.fit(X_lab, y_lab)
            t1 = time.perf_counter()
            idx, _ = bald(model, X_pool, n_instances=10)
            t2 = time.perf_counter()
            best[name] = [min(best[name][0], t1 - t0), min(best[name][1], t2 - t1)]
            print(f"  {name:45s} refit {t1 - t0:6.2f} s, BALD over the pool {t2 - t1:6.2f} s", flush=True)
    rows = [[name, f"{fit:.2f}", f"{score:.2f}", f"{fit + score:.2f}", "yes" if fit + score <= 2 else "no"]
            for name, (fit, score) in best.items()]
    print()
    print(markdown_table(["head", "refit s", "score s", "total s", "≤ 2 s"], rows))


if __name__ == "__main__":
    from _common import recorded  # the whole output and a JSON with the machine, versions, commit

    with recorded(__file__):
        main()
