"""An encoder learnt from the unlabelled pool (:class:`skdbal.models.PoolEncoder`) against PCA-50.

For each data set in ``--datasets`` (MNIST, Fashion-MNIST): learns the
encoder on a pool of ``--n-pool`` training images (60,000: the whole
training set) with no labels, within ``--max-time`` seconds of training
(torch on ``--threads`` threads, one process), embeds the pool and the
``--n-test`` test images, and fits PCA with 50 components on the same pool.
On each representation it reports:

- ``knn``: the test accuracy of a 20-nearest-neighbour vote over the whole
  labelled pool (cosine on the encoder's unit-length embeddings, Euclidean
  on PCA's), the usual measure of a self-supervised representation;
- ``random n``: the test accuracy of a logistic regression (scikit-learn's,
  ``C=1``) on ``n`` balanced random labels (``n / 10`` a class) for each
  ``n`` in ``--labels``, median (min-max) over ``--seeds``, on the features
  as they are (``raw``) and standardised with the whole pool's mean and
  deviation (``std``, which uses no labels): PCA does better raw (its last
  components are noise that standardising inflates), the encoder better
  standardised, so each is shown both ways;
- ``typiclust n`` (with ``--typiclust``): the same on the ``n`` rows
  TypiClust picks in that representation (k-means with ``n`` clusters,
  seeded), for ``n`` up to 100;
- the time to learn the encoder, to embed pool and test, and its epochs,
  for each method in ``--methods``.

    python benchmarks/bench_encoder.py [--datasets mnist fashion_mnist] [--max-time 540] [--threads 2]
    python benchmarks/bench_encoder.py --device cuda           # on a GPU
    python benchmarks/bench_encoder.py --methods simclr vicreg # both losses, side by side
    python benchmarks/bench_encoder.py --n-pool 2000 --n-test 1000 --max-epochs 1 --seeds 0   # a check

Writes its output and ``results.json`` to ``docs/results/bench_encoder/``
(or ``$SKDBAL_BENCH_OUT``; :func:`_common.recorded`).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, load_split, markdown_table, recorded  # noqa: E402


def load(name: str, n_pool: int, n_test: int, seed: int = 0):
    X, y = load_split(name)
    Xt, yt = load_split(name, "test")
    rows = np.random.RandomState(seed).permutation(len(X))[:n_pool]
    return (X[rows].astype(np.float32) / 255, y[rows].astype(int),
            Xt[:n_test].astype(np.float32) / 255, yt[:n_test].astype(int))


def balanced(y, n: int, seed: int) -> np.ndarray:
    """``n`` rows, ``n // classes`` of each class (the rest from the first classes), seeded."""
    rng = np.random.RandomState(seed)
    classes = np.unique(y)
    per = [n // len(classes) + (i < n % len(classes)) for i in range(len(classes))]
    return np.concatenate([rng.choice(np.flatnonzero(y == c), k, replace=False) for c, k in zip(classes, per)])


def probe(Z, y, Zt, yt, rows, standardise: bool = True) -> float:
    """A logistic regression on the rows given; the features standardised with the whole pool's statistics,
    or as they are."""
    from sklearn.linear_model import LogisticRegression

    mean, std = (Z.mean(0), Z.std(0) + 1e-6) if standardise else (0.0, 1.0)
    clf = LogisticRegression(C=1.0, max_iter=2000).fit((Z[rows] - mean) / std, y[rows])
    return float(clf.score((Zt - mean) / std, yt))


def knn(Z, y, Zt, yt, metric: str, k: int = 20) -> float:
    from sklearn.neighbors import KNeighborsClassifier

    return float(KNeighborsClassifier(k, metric=metric).fit(Z, y).score(Zt, yt))


def typiclust_rows(Z, n: int, seed: int) -> np.ndarray:
    from skdbal.acquisition.functional import typiclust_clusters, typiclust_select

    clusters = typiclust_clusters(Z, n, random_state=seed)
    return typiclust_select(Z, clusters, np.zeros(len(Z), bool), n)[0]


def evaluate(Z, y, Zt, yt, *, metric: str, labels, seeds, typiclust: bool = False) -> dict:
    """Every accuracy of one representation (see the module's description)."""
    def summary(accs):
        return {"median": float(np.median(accs)), "min": min(accs), "max": max(accs), "all": accs}

    out = {"knn": knn(Z, y, Zt, yt, metric)}
    for n in labels:
        picks = {"random": [balanced(y, n, seed) for seed in seeds]}
        if typiclust and n <= 100:
            picks["typiclust"] = [typiclust_rows(Z, n, seed) for seed in seeds]
        for how, rows in picks.items():
            for scaling in ("raw", "std"):
                out[f"{how} {n} {scaling}"] = summary([probe(Z, y, Zt, yt, r, scaling == "std") for r in rows])
    return out


def cell(value) -> str:
    if isinstance(value, dict):
        if value["min"] == value["max"]:
            return f"{100 * value['median']:.1f}"
        return f"{100 * value['median']:.1f} ({100 * value['min']:.1f}–{100 * value['max']:.1f})"
    return f"{100 * value:.1f}"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["mnist", "fashion_mnist"],
                        choices=["mnist", "fashion_mnist"])
    parser.add_argument("--n-pool", type=int, default=60000)
    parser.add_argument("--n-test", type=int, default=10000)
    parser.add_argument("--methods", nargs="+", default=["simclr"], choices=["simclr", "vicreg"],
                        help="PoolEncoder's methods, each learnt and measured in turn")
    parser.add_argument("--width", type=int, default=None, help="the encoder's width (default: its default)")
    parser.add_argument("--max-epochs", type=float, default=None, help="default: the encoder's default")
    parser.add_argument("--max-time", type=float, default=None,
                        help="training budget in seconds (default: none, the epochs decide)")
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--labels", type=int, nargs="+", default=[20, 40, 100, 300])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--typiclust", action="store_true", help="also TypiClust-picked labels (n <= 100)")
    parser.add_argument("--seed", type=int, default=0, help="the encoder's random_state and the pool's sample")
    args = parser.parse_args(argv)

    import torch
    from sklearn.decomposition import PCA

    from skdbal.models import PoolEncoder

    torch.set_num_threads(args.threads)
    params = {k: v for k, v in {"width": args.width, "max_epochs": args.max_epochs, "max_time": args.max_time,
                                "batch_size": args.batch_size}.items() if v is not None}
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, device {args.device}, "
          f"{os.cpu_count()} CPUs; encoder: PoolEncoder(method in {args.methods}, {params})", flush=True)
    results = {"args": vars(args), "datasets": {}}
    rows, times = [], []
    out = Path(os.environ.get("SKDBAL_BENCH_OUT") or ROOT / "docs" / "results" / "bench_encoder")
    out.mkdir(parents=True, exist_ok=True)
    for name in args.datasets:
        X, y, Xt, yt = load(name, args.n_pool, args.n_test, args.seed)
        kw = dict(labels=args.labels, seeds=args.seeds, typiclust=args.typiclust)
        start = time.perf_counter()
        pca = PCA(50, random_state=0).fit(X.reshape(len(X), -1))
        P, Pt = pca.transform(X.reshape(len(X), -1)), pca.transform(Xt.reshape(len(Xt), -1))
        pca_time = time.perf_counter() - start
        record = results["datasets"][name] = {"pca50": {"fit_s": pca_time}}
        reps = []
        for method in args.methods:
            encoder = PoolEncoder(method, device=args.device, n_threads=args.threads, random_state=args.seed,
                                  verbose=1, **params)
            start = time.perf_counter()
            encoder.fit(X)
            learn = time.perf_counter() - start
            start = time.perf_counter()
            Z, Zt = encoder.transform(X), encoder.transform(Xt)
            embed = time.perf_counter() - start
            print(f"{name}, {method}: learnt in {learn:.1f} s ({encoder.n_epochs_:.2f} epochs, {encoder.n_steps_} "
                  f"steps, loss {encoder.loss_curve_[0]:.3f} -> {encoder.loss_curve_[-1]:.3f}); embedded "
                  f"{len(X) + len(Xt)} images in {embed:.1f} s", flush=True)
            acc = evaluate(Z, y, Zt, yt, metric="cosine", **kw)
            record[method] = {"learn_s": learn, "embed_s": embed, "epochs": encoder.n_epochs_,
                              "steps": encoder.n_steps_, "loss_curve": encoder.loss_curve_,
                              "n_features": encoder.n_features_out_, "accuracy": acc}
            times.append([name, method, f"{learn:.0f}", f"{encoder.n_epochs_:.2f}", f"{embed:.1f}"])
            reps.append((f"PoolEncoder {method}", acc))
        record["pca50"]["accuracy"] = base = evaluate(P, y, Pt, yt, metric="euclidean", **kw)
        times.append([name, "PCA-50", f"{pca_time:.1f}", "", ""])
        reps.append(("PCA-50", base))
        header = ["data set", "representation"] + list(base)
        rows += [[name, label] + [cell(acc[k]) for k in base] for label, acc in reps]
        print(markdown_table(header, rows[-len(reps):]), flush=True)
        (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")   # after each data set
    print(markdown_table(["data set", "representation", "learn s", "epochs", "embed s"], times))
    print(markdown_table(header, rows))

if __name__ == "__main__":
    with recorded(__file__):
        main()
