"""Labels to accuracy on MNIST and Fashion-MNIST: the network on the pixels against heads on a representation.

For each data set in ``--datasets``, in one run, on the same seeds and the
``fewlabels`` protocol (10 balanced initial labels, batches of 10 up to 300
labels, 2,000 random candidates a step, all 10,000 test images):

- ``none``: today's Bayesian CNN trained from scratch on the labels (Gal et
  al.'s network), with BALD and BatchBALD;
- ``spread``: :class:`~skdbal.models.LabelSpreadingHead` over the embeddings
  of a :class:`~skdbal.models.PoolEncoder` learnt from the 60,000 training
  images without labels, with random labels, TypiClust, ProbCover, BALD and
  the hand-off from TypiClust to BALD (``cold_start(bald)``: at ten labels a class, and at four);
- ``bll``: :class:`~skdbal.models.BayesianLastLayerHead` on the same
  embeddings, with random labels, TypiClust, BALD, BatchBALD, EPIG and the
  two hand-offs.

The encoder is learnt once per data set (seed 0) and shared by the seeds,
whose pools, initial labels and draws differ; it is kept with its embeddings
under ``--cache`` (an :class:`~skdbal.models.EmbeddingCache`: a later run
reads them back, and its time to learn is the one recorded when it was
learnt). Then the time for a head to refit on 20, 100 and 300 labels and score
the 60,000 training embeddings at ``T = 100``, median of 5. The grids and their
reports (``table.md``, ``learning_curves.png``: medians with the seeds'
bootstrap bands) go under ``docs/results/bench_representation/<data set>/``.

    python benchmarks/bench_representation.py                    # both data sets, seeds 1 2 3, 2 jobs
    python benchmarks/bench_representation.py --datasets mnist --seeds 1 --skip-network --n-queries 2  # a check
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, load_split, markdown_table, recorded  # noqa: E402

NETWORK = ["bald", "batch_bald"]
EARLY = "cold_start(bald,typiclust,per_class,4)"      # the hand-off four labels a class, against the default ten
SPREAD = ["random", "typiclust", "probcover", "bald", "cold_start(bald)", EARLY]
BLL = ["random", "typiclust", "bald", "batch_bald", "epig", "cold_start(bald)", EARLY]
TARGETS = {"mnist": (0.90, 0.95, 0.99), "fashion_mnist": (0.80, 0.85)}


def embeddings(name: str, cache: Path, threads: int) -> tuple:
    """The training then test images' embeddings by a PoolEncoder learnt on the training images (seed 0),
    from the cache when there; the path of the ``.npy`` and the recorded times."""
    from skdbal.models import EmbeddingCache, PoolEncoder

    X, _ = load_split(name)
    Xt, _ = load_split(name, "test")
    images = np.concatenate([X, Xt]).astype(np.float32) / 255
    cache.mkdir(parents=True, exist_ok=True)
    encoder_file, timing_file = cache / f"{name}_encoder.pkl", cache / f"{name}_timing.json"
    if encoder_file.exists() and timing_file.exists():
        encoder = pickle.loads(encoder_file.read_bytes())
        timing = json.loads(timing_file.read_text())
        print(f"{name}: the encoder learnt earlier ({timing['learn_s']:.0f} s then{timing.get('note', '')}), "
              f"read from {encoder_file}")
    else:
        start = time.perf_counter()
        encoder = PoolEncoder(random_state=0, n_threads=threads).fit(images[:len(X)])
        timing = {"learn_s": time.perf_counter() - start, "epochs": encoder.n_epochs_, "threads": threads}
        encoder_file.write_bytes(pickle.dumps(encoder))
        timing_file.write_text(json.dumps(timing))
        print(f"{name}: encoder learnt in {timing['learn_s']:.0f} s ({encoder.n_epochs_:.2f} epochs)")
    store = EmbeddingCache(cache / f"{name}_embeddings.npy")
    start = time.perf_counter()
    Z = store.get(encoder, images)
    embed_s = time.perf_counter() - start
    print(f"{name}: {len(Z)} embeddings ready in {embed_s:.1f} s (read back or computed)")
    return Path(store.path), timing, embed_s, Z[:len(X)]


def labelled_sets(name: str) -> dict:
    """(variant, strategy, seed) -> the training-set indices the run labelled, in order."""
    from skdbal.experiments.journal import labelled_indices
    from skdbal.experiments.results import read_results

    runs: dict = {}
    for r in read_results(ROOT / "docs" / "results" / "bench_representation" / name / "results.csv"):
        runs.setdefault((r["variant"], r["strategy"], int(r["seed"])), []).append(r)
    return {k: labelled_indices(sorted(v, key=lambda r: int(r["step"]))) for k, v in runs.items()}


def refit_times(Z: np.ndarray, y: np.ndarray, repeats: int = 5) -> list:
    """Seconds for each head to refit on n labels and score every row at T = 100 (median of ``repeats``)."""
    from skdbal.models import BayesianLastLayerHead, LabelSpreadingHead

    rows = []
    rng = np.random.RandomState(0)
    LabelSpreadingHead(Z, classes=np.arange(10)).fit(Z[:20], y[:20])      # the pool's graph, built once
    for n in (20, 100, 300):
        labelled = rng.choice(len(Z), n, replace=False)
        for name, make in (("spread", lambda: LabelSpreadingHead(Z, classes=np.arange(10), random_state=0)),
                           ("bll", lambda: BayesianLastLayerHead(classes=np.arange(10), random_state=0))):
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                make().fit(Z[labelled], y[labelled]).predict_proba_samples(Z, n_samples=100)
                times.append(time.perf_counter() - start)
            rows.append({"head": name, "labels": n, "seconds": float(np.median(times))})
    return rows


def labels_to(rows: list, target: float) -> dict:
    """Median over seeds of the labels at which each (variant, strategy) first reaches ``target``."""
    runs = {}
    for r in rows:
        runs.setdefault((r["variant"], r["strategy"], r["seed"]), []).append((int(r["n_labels"]), float(r["accuracy"])))
    first = {}
    for (variant, strategy, _), curve in runs.items():
        hit = [n for n, acc in sorted(curve) if acc >= target]
        first.setdefault((variant, strategy), []).append(hit[0] if hit else None)
    return {k: (None if sum(v is None for v in vs) > len(vs) // 2 else
                float(np.median([v if v is not None else np.inf for v in vs]))) for k, vs in first.items()}


AT_LABELS = (20, 30, 50, 100, 300)


def accuracy_at(rows: list) -> dict:
    """(variant, strategy) -> {labels: (median, band low, band high)} of the seeds' test accuracy at each of
    :data:`AT_LABELS`, the band the percentile bootstrap over seeds of the median (as ``skdbal report``'s)."""
    from skdbal.experiments.seed_variance import bootstrap_band

    per = {}
    for r in rows:
        if int(r["n_labels"]) in AT_LABELS:
            per.setdefault((r["variant"], r["strategy"]), {}).setdefault(int(r["n_labels"]), []).append(
                float(r["accuracy"]))
    return {k: {n: (float(np.median(v)), *bootstrap_band(v)) for n, v in d.items()} for k, d in per.items()}


def quoted(m) -> str:
    """``"90.0 (88.3–92.8)"``: a median and its band in percent; a band of one value is named once."""
    median, low, high = (f"{100 * x:.1f}" for x in m)
    return f"{median} ({low}–{high})" if low != high else f"{median} (every resample {low})"


def plot(rows: list, path: Path, title: str) -> None:
    """The median test accuracy over seeds against labels, with the bootstrap band of the median."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from skdbal.experiments.seed_variance import bootstrap_band

    curves = {}
    for r in rows:
        curves.setdefault((r["variant"], r["strategy"]), {}).setdefault(int(r["n_labels"]), []).append(
            float(r["accuracy"]))
    fig, ax = plt.subplots(figsize=(9, 5))
    colours = plt.get_cmap("tab20").colors
    for i, ((variant, strategy), by_labels) in enumerate(sorted(curves.items())):
        head = variant.rsplit("-", 1)[-1] if variant.startswith("file-") else "Bayesian CNN"
        labels = sorted(by_labels)
        median = [np.median(by_labels[n]) for n in labels]
        bands = np.array([bootstrap_band(by_labels[n]) for n in labels])
        style = {"Bayesian CNN": ":", "bll": "--", "spread": "-"}.get(head, "-.")
        line, = ax.plot(labels, median, style, color=colours[i % len(colours)], label=f"{strategy}, {head}")
        ax.fill_between(labels, bands[:, 0], bands[:, 1], alpha=0.12, color=line.get_color())
    ax.set_xscale("log")
    ax.set_xlabel("labelled images (10 initial + acquired; log scale)")
    ax.set_ylabel("test accuracy (median over seeds, bootstrap band)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", nargs="+", default=["mnist", "fashion_mnist"], choices=["mnist", "fashion_mnist"])
    p.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    p.add_argument("--n-jobs", type=int, default=2)
    p.add_argument("--threads", type=int, default=2, help="torch threads to learn the encoder")
    p.add_argument("--cache", default=os.environ.get("SKDBAL_BENCH_CACHE", str(Path.home() / ".cache" / "skdbal"
                                                                            / "bench_representation")))
    p.add_argument("--skip-network", action="store_true", help="leave out the network on the pixels")
    p.add_argument("--n-queries", type=int, default=None, help="batches after the initial labels (default: "
                                                                 "the preset's 29; fewer for a check)")
    args = p.parse_args(argv)
    from skdbal.experiments import run_grid
    from skdbal.experiments.report import write_report
    from skdbal.experiments.results import read_results

    out = Path(os.environ.get("SKDBAL_BENCH_OUT") or ROOT / "docs" / "results" / "bench_representation")
    summary = {"datasets": {}}
    for name in args.datasets:
        npy, timing, embed_s, Z = embeddings(name, Path(args.cache), args.threads)
        folder = out / name
        common = dict(dataset=name, n_jobs=args.n_jobs, torch_threads=1, verbose=True,
                      **({} if args.n_queries is None else {"n_queries": args.n_queries}))
        if not args.skip_network:
            run_grid("fewlabels", NETWORK, args.seeds, folder, **common)
        run_grid("fewlabels", SPREAD, args.seeds, folder, representations=[f"file:{npy}"], head="spread", **common)
        run_grid("fewlabels", BLL, args.seeds, folder, representations=[f"file:{npy}"], head="bll", **common)
        write_report(folder)
        rows = read_results(folder / "results.csv")
        refits = refit_times(np.asarray(Z), load_split(name)[1].astype(int))
        table = {}
        for target in TARGETS[name]:
            for key, n in labels_to(rows, target).items():
                table.setdefault(key, {})[f"{target:.0%}"] = n
        print(f"\n{name}: labels to reach each test accuracy (median of seeds {args.seeds}; '>300': not reached)")
        columns = [f"{t:.0%}" for t in TARGETS[name]]
        print(markdown_table(["variant", "strategy"] + columns,
                             [[v, s] + [">300" if t.get(c) is None else f"{t[c]:.0f}" for c in columns]
                              for (v, s), t in sorted(table.items())]))
        at = accuracy_at(rows)
        print(f"\n{name}: test accuracy (%) at n labels, median of seeds {args.seeds} and the bootstrap band")
        print(markdown_table(["variant", "strategy"] + [f"at {n}" for n in AT_LABELS],
                             [[v, s] + [f"{100 * d[n][0]:.1f} ({100 * d[n][1]:.1f}-{100 * d[n][2]:.1f})"
                                        if n in d else "-" for n in AT_LABELS] for (v, s), d in sorted(at.items())]))
        plot(rows, folder / "curves.png", f"{name}: the network on the pixels and heads on a pool encoder")
        print(f"\n{name}: head refit on n labels + scoring {len(Z)} rows at T=100, seconds (median of 5)")
        print(markdown_table(["head", "labels", "seconds"],
                             [[r["head"], r["labels"], f"{r['seconds']:.2f}"] for r in refits]))
        summary["datasets"][name] = {
            "encoder": timing, "embed_s": embed_s,
            "refit_s": {head: {str(r["labels"]): round(r["seconds"], 2) for r in refits if r["head"] == head}
                        for head in ("spread", "bll")},
            "labels_to": {f"{v}|{s}": t for (v, s), t in table.items()},
            # percent, one decimal: the median over seeds and its bootstrap band, and both as a page quotes them
            "accuracy_at": {f"{v}|{s}": {str(n): {**dict(zip(("median", "low", "high"),
                                                             (round(100 * x, 1) for x in m))), "text": quoted(m)}
                                         for n, m in d.items()} for (v, s), d in at.items()}}
    (out / "results.json").write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    with recorded(__file__):
        main()
