"""``skdbal label --images`` on a representation: the first batch's wait, the encoder's learning, each retrain.

A folder of ``--images`` Fashion-MNIST training images (2,000 by default) as 28x28 PNGs (the raw IDX
files in ``$SKDBAL_DATA/fashion-mnist``), classes ``0``..``9``, labelled truthfully through the session
(no browser), torch on one thread as ``skdbal label`` runs by default. For each representation in
``--representations`` (``pool``, the default, and ``pixels``, the network on the thumbnails, by default):

- **first batch**: seconds from reading the folder (:func:`skdbal.labelling.cli.make_session`) to the first
  batch being offered (:meth:`LabellingSession.next_batch`), the encoder still learning;
- **encoder**: seconds the pool's encoder took to learn (in its thread, while the first batch waits for
  labels) and to embed the pool;
- **retrain**: after each batch of labels (``--rounds`` of them, the first model's included), seconds
  from the batch's last label to the next batch offered: the model's refit, the query that scores the
  pool and the tail's query; median and max over the rounds;
- the accuracy of the last model on the pool's unlabelled images (their true labels are known here).

Labelled through the session at once, nothing is labelled while the first model waits for the encoder:
its first retrain is the encoder's time. At the page, people label items that cover the pool meanwhile;
``benchmarks/bench_label_pace.py`` measures what they wait for there, in a browser at a person's pace.

    python benchmarks/bench_label_representation.py [--images 2000] [--rounds 10]

A few minutes on two cores. Writes its output to ``docs/results/bench_label_representation/``
(:func:`_common.recorded`). The timings depend on what else the machine runs: measure on a quiet one.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import markdown_table, recorded  # noqa: E402
from bench_labelling_wait import fashion_mnist, write_pngs  # noqa: E402


def one_run(folder: Path, truth: dict, representation: str, rounds: int, batch_size: int, tmp: Path) -> dict:
    """A session on ``folder`` in ``representation``, labelled truthfully for ``rounds`` batches."""
    from skdbal.labelling.cli import add_parser, make_session

    parser = add_parser(argparse.ArgumentParser(prog="skdbal").add_subparsers())
    args = parser.parse_args(["--images", str(folder), "--classes", ",".join(str(c) for c in range(10)),
                              "--store", str(tmp / f"{representation}.db"), "--batch-size", str(batch_size),
                              "--representation", representation, "--second-looks", "off"])
    t0 = time.perf_counter()
    session, pool, _ = make_session(args)
    with session:
        batch = [b["item"] for b in session.next_batch(annotator="ann", timeout=60)]
        first_batch = time.perf_counter() - t0
        features = getattr(session, "representation", None)
        retrains = []
        for version in range(rounds):
            for item in batch:
                session.submit(item, truth[item], annotator="ann")
            t1 = time.perf_counter()
            session.wait_for_version(version, timeout=600)
            while session.training:
                time.sleep(0.005)
            retrains.append(time.perf_counter() - t1)
            batch = [b["item"] for b in session.next_batch(annotator="ann", timeout=60) if not b["tail"]][:batch_size]
        if features is not None:
            features.future.result()
        model = session.board.published[1]
        labelled = set(session.store.current_labels())
        rest = np.array([i for i in range(len(session.keys)) if i not in labelled])
        guesses = model.predict(np.asarray(session.X)[rest])
        accuracy = float(np.mean([str(g) == truth[i] for g, i in zip(guesses, rest)]))
    return {"first_batch": first_batch, "retrains": retrains, "accuracy": accuracy, "labels": len(labelled),
            "learn": None if features is None else features.learn_time,
            "embed": None if features is None else features.embed_time}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=10, help="batches labelled, the first included")
    parser.add_argument("--batch-size", type=int, default=10)
    parser.add_argument("--representations", nargs="+", default=["pool", "pixels"],
                        choices=["pool", "pca", "pixels"])
    parser.add_argument("--head", choices=["bll", "mc_dropout", "spread"], default=None,
                        help="the head over the embeddings (default: the session's, DEFAULT_HEAD)")
    args = parser.parse_args()
    import torch

    from skdbal.labelling import _representation
    from skdbal.labelling._representation import ENCODER_TIME

    if args.head is not None:
        _representation.DEFAULT_HEAD = args.head    # the session's learner reads it when it is built
    DEFAULT_HEAD = _representation.DEFAULT_HEAD

    torch.set_num_threads(1)
    X, y = fashion_mnist("train")
    print(f"Fashion-MNIST: a folder of {args.images} training images; batches of {args.batch_size}, {args.rounds} "
          f"rounds; torch on 1 thread; head {DEFAULT_HEAD!r}; encoder time budget {ENCODER_TIME:g} s", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        folder = tmp / "images"
        folder.mkdir()
        truth = write_pngs(folder, X, y, args.images)
        for representation in args.representations:
            r = one_run(folder, truth, representation, args.rounds, args.batch_size, tmp)
            retrains = np.asarray(r["retrains"])
            print(f"{representation}: first batch after {r['first_batch']:.2f} s; encoder learnt in "
                  f"{r['learn'] or 0:.1f} s, pool embedded in {r['embed'] or 0:.2f} s; retrains (s): "
                  f"{' '.join(f'{t:.2f}' for t in retrains)}; accuracy on the unlabelled pool at {r['labels']} "
                  f"labels: {r['accuracy']:.3f}", flush=True)
            rows.append([representation, f"{r['first_batch']:.2f}",
                         "-" if r["learn"] is None else f"{r['learn']:.1f}",
                         "-" if r["embed"] is None else f"{r['embed']:.2f}",
                         f"{np.median(retrains):.2f}", f"{retrains.max():.2f}", r["labels"], f"{r['accuracy']:.3f}"])
    print()
    print(markdown_table(["representation", "first batch s", "encoder learnt s", "pool embedded s",
                          "retrain s (median)", "retrain s (max)", "labels", "pool accuracy"], rows))


if __name__ == "__main__":
    with recorded(__file__):
        main()
