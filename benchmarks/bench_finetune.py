"""The high-accuracy end: fine-tuning the pool's encoder under a dropout head, against the heads over its embeddings.

On the labels that ``bench_representation``'s runs chose (the spreading head's hand-off from TypiClust to
BALD, ``cold_start(bald)``, seeds 1 2 3, read from its committed ``results.csv``), at 20, 50, 100 and
300 labels, side by side in one run, each scored on the 10,000 test images:

- ``spread``: :class:`~skdbal.models.LabelSpreadingHead` over the encoder's embeddings (what the runs used);
- ``bll``: :class:`~skdbal.models.BayesianLastLayerHead` over the same embeddings, on the same labels;
- ``finetuned``: an :class:`~skdbal.MCDropoutClassifier` of :class:`~skdbal.models.EncoderWithHead`
  (its features scaled to length 10, dropout 0.2), the whole encoder trained with the head on the labels
  alone (Adam, the head at ``1e-2``, the encoder at ``3e-4``, 100 epochs of batches of 50: the best of
  the few settings tried on one seed's MNIST labels);
- ``self-trained``: the same network trained for 3 epochs on every training image, each labelled by the
  spreading head's prediction (pseudo-labels; its own label where it has one), the encoder at ``1e-3``:
  the unlabelled pool used a second time, beyond the encoder and the graph.

Each variant's seconds to fit on the labels (and, for ``self-trained``, the pool) are printed beside it
(the spreading head's graph of the pool is built once beforehand, as a session keeps it).
The encoder and embeddings are ``bench_representation``'s (its ``--cache``), learnt there if missing.

    python benchmarks/bench_finetune.py                   # both data sets, seeds 1 2 3 (about 20 min on 2 cores)
    python benchmarks/bench_finetune.py --datasets mnist --seeds 1 --labels 20   # a check
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
from bench_representation import embeddings, labelled_sets  # noqa: E402

STRATEGY = "cold_start(bald)"
VARIANTS = ("spread", "bll", "finetuned", "self-trained")


def chosen_labels(sets: dict, name: str, seed: int) -> np.ndarray:
    """Of ``sets`` (:func:`bench_representation.labelled_sets` of ``name``), the training-set indices the
    spreading head's ``cold_start(bald)`` run of ``seed`` labelled, in order."""
    found = [v for (variant, strategy, s), v in sets.items()
             if strategy == STRATEGY and variant.endswith("-spread") and s == seed]
    if not found:
        raise SystemExit(f"no {STRATEGY} run of seed {seed} on {name} in bench_representation's results")
    return found[0]


def network(encoder, epochs: int, batch_size: int, encoder_lr: float, seed: int):
    """The encoder's network under a dropout head, its head and encoder learning at their own rates."""
    from skdbal import MCDropoutClassifier
    from skdbal.models import EncoderWithHead

    return MCDropoutClassifier(EncoderWithHead, module__encoder=encoder.module_, module__dropout=0.2,
                               classes=np.arange(10),
                               max_epochs=epochs, batch_size=batch_size, lr=1e-2, n_samples=20, random_state=seed,
                               optimizer__param_groups=[("trunk.*", {"lr": encoder_lr})])


def one_set(encoder, images, y, Z, test_images, y_test, Z_test, labelled, seed: int) -> dict:
    """Each variant's test accuracy and fitting seconds on the labelled rows ``labelled``."""
    import torch

    from skdbal.models import BayesianLastLayerHead, LabelSpreadingHead

    torch.manual_seed(seed)
    out = {}
    start = time.perf_counter()
    spread = LabelSpreadingHead(Z, classes=np.arange(10), random_state=seed).fit(Z[labelled], y[labelled])
    out["spread"] = ((spread.predict(Z_test) == y_test).mean(), time.perf_counter() - start)
    start = time.perf_counter()
    bll = BayesianLastLayerHead(classes=np.arange(10), random_state=seed).fit(Z[labelled], y[labelled])
    out["bll"] = ((bll.predict(Z_test) == y_test).mean(), time.perf_counter() - start)
    start = time.perf_counter()
    net = network(encoder, 100, 50, 3e-4, seed).fit(images[labelled], y[labelled])
    out["finetuned"] = ((net.predict(test_images) == y_test).mean(), time.perf_counter() - start)
    start = time.perf_counter()
    pseudo = spread.predict(Z)
    pseudo[labelled] = y[labelled]
    net = network(encoder, 3, 128, 1e-3, seed).fit(images, pseudo)
    out["self-trained"] = ((net.predict(test_images) == y_test).mean(), time.perf_counter() - start)
    out["pseudo-labels"] = ((pseudo == y).mean(), 0.0)
    return {k: (float(a), float(s)) for k, (a, s) in out.items()}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", nargs="+", default=["mnist", "fashion_mnist"], choices=["mnist", "fashion_mnist"])
    p.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    p.add_argument("--labels", nargs="+", type=int, default=[20, 50, 100, 300])
    p.add_argument("--threads", type=int, default=2, help="torch threads")
    p.add_argument("--cache", default=os.environ.get("SKDBAL_BENCH_CACHE", str(Path.home() / ".cache" / "skdbal"
                                                                            / "bench_representation")))
    args = p.parse_args(argv)
    import torch

    from skdbal.experiments.seed_variance import bootstrap_band

    torch.set_num_threads(args.threads)
    out = Path(os.environ.get("SKDBAL_BENCH_OUT") or ROOT / "docs" / "results" / "bench_finetune")
    out.mkdir(parents=True, exist_ok=True)
    summary: dict = {"strategy": STRATEGY, "datasets": {}}
    for name in args.datasets:
        X, y = load_split(name)
        Xt, yt = load_split(name, "test")
        npy, _, _, _ = embeddings(name, Path(args.cache), args.threads)
        Z_all = np.load(npy, mmap_mode="r")
        Z, Z_test = np.asarray(Z_all[:len(X)]), np.asarray(Z_all[len(X):])
        encoder = pickle.loads((Path(args.cache) / f"{name}_encoder.pkl").read_bytes())
        images = (X.astype(np.float32) / 255).reshape(-1, 1, 28, 28)
        test_images = (Xt.astype(np.float32) / 255).reshape(-1, 1, 28, 28)
        y, yt = y.astype(int), yt.astype(int)
        from skdbal.models import LabelSpreadingHead

        LabelSpreadingHead(Z, classes=np.arange(10)).fit(Z[:20], y[:20])   # the pool's graph, built once, kept
        results: dict = {}
        sets = labelled_sets(name)
        for seed in args.seeds:
            order = chosen_labels(sets, name, seed)
            for n in args.labels:
                got = one_set(encoder, images, y, Z, test_images, yt, Z_test, order[:n], seed)
                print(f"{name} seed {seed}, {n} labels: " + ", ".join(
                    f"{k} {100 * a:.1f}% ({s:.1f} s)" for k, (a, s) in got.items()), flush=True)
                for k, v in got.items():
                    results.setdefault(k, {}).setdefault(n, []).append(v)
        rows, facts = [], {}
        for k in VARIANTS + ("pseudo-labels",):
            facts[k] = {}
            for n in args.labels:
                acc = [a for a, _ in results[k][n]]
                median, (low, high) = float(np.median(acc)), bootstrap_band(acc)
                seconds = float(np.median([s for _, s in results[k][n]]))
                facts[k][str(n)] = {"median": round(100 * median, 1), "low": round(100 * low, 1),
                                    "high": round(100 * high, 1), "seconds": round(seconds, 1),
                                    "text": f"{100 * median:.1f} ({100 * low:.1f}–{100 * high:.1f})"}
            rows.append([k] + [f"{facts[k][str(n)]['text']}, {facts[k][str(n)]['seconds']:.1f} s"
                               for n in args.labels])
        print(f"\n{name}: test accuracy (%) on the labels {STRATEGY} chose with the spreading head, median of "
              f"seeds {args.seeds} (bootstrap band), and the median seconds to fit")
        print(markdown_table(["variant"] + [f"{n} labels" for n in args.labels], rows))
        summary["datasets"][name] = facts
    (out / "results.json").write_text(json.dumps(summary, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    with recorded(__file__):
        main()
