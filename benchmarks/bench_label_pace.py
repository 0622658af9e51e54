"""``skdbal label --images`` at a person's pace in a real browser: how long each batch's last label waits.

A real ``skdbal label`` command (a subprocess, torch on one thread: ``--torch-threads 1``) on a folder of
``--images`` Fashion-MNIST training images (1,000 by default) as 28x28 PNGs (the raw IDX files in
``$SKDBAL_DATA/fashion-mnist``), classes ``0``..``9``, in its default representation (``pool``: an encoder
learnt from the folder in the background, the first batch typical in the thumbnails' principal components),
and a real headless Chromium (Debian's ``chromium`` and ``chromium-driver``, through Selenium) on 127.0.0.1.
A scripted, truthful annotator labels at a person's pace: it looks at the highlighted image for ``--think``
seconds (2.5 by default), presses its class's digit key, and goes on, until ``--batches`` model versions
are trained and their batch is shown (7 by default).

For each model version, read back from the store afterwards, the label that completed the batch it waited
for (the first model: the first batch's last label, chosen by typicality; a later one: the label that made
its count of new labels):

- **next image**: seconds from that label's key press to the page highlighting the next image to label:
  what the person waits for, whatever the model does meanwhile;
- **model**: seconds from that label to the model version being recorded: for the first model, the wait
  for the encoder to learn and embed the pool, then the fit; for a later one, the refit. People need not
  wait for it: the page offers more items meanwhile (the tail);
- what the page said when the next image was shown (its notice line, or its state).

And over every label: the seconds from each key press to the next image shown (median, p99, max), and how
many labels went to items offered on the tail (while the model trained, or waited for the embeddings).
``--shots DIR`` keeps a screenshot of the page whenever its model version, training or waiting changes,
and one whenever the person waits over a second.

    python benchmarks/bench_label_pace.py [--images 1000] [--batches 7] [--think 2.5] [--encoder-time 300]

Four to six minutes on two cores. Writes its output to ``docs/results/bench_label_pace/``
(:func:`_common.recorded`). The waits depend on what else the machine runs: measure on a quiet one.
"""
from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
from _common import ROOT, markdown_table, recorded  # noqa: E402
from bench_labelling_wait import CURRENT, fashion_mnist, free_port, wait_http, write_pngs  # noqa: E402

#: What the page says now: its status's model version, training and waiting_for, its notice line and state.
PAGE_STATE = ("const s = (typeof status === 'object' && status) || {}; return [s.model_version ?? -1, "
              "!!s.training, s.waiting_for || null, (document.getElementById('notice') || {}).textContent || '', "
              "(document.getElementById('state') || {}).textContent || ''];")
#: The highlighted item's id and whether the page got it as a tail item (offered while the model trains).
ITEM = "const it = page[current]; return it ? [Number(it.item), !!it.tail, !!it.second_look] : null;"


def store_models(store: Path) -> tuple:
    """The store's models ``[(version, time, last_event, n_labels)]`` in order, its label events
    ``{event: (item, time)}`` and the items of its first batch."""
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        models = [(int(v), float(t), int(e), int(n)) for v, t, e, n in
                  conn.execute("SELECT version, time, last_event, n_labels FROM models ORDER BY version")]
        events = {int(e): (int(i), float(t)) for e, i, t in
                  conn.execute("SELECT event, item, time FROM events WHERE kind = 'label'")}
        first = conn.execute("SELECT scores FROM queries WHERE kind = 'batch' ORDER BY query LIMIT 1").fetchone()
    finally:
        conn.close()
    return models, events, [int(pair[0]) for pair in json.loads(first[0])] if first else []


def label_at_pace(driver, truth: dict, *, think: float, batches: int, limit: float, shots, log, server) -> tuple:
    """Label truthfully at ``think`` seconds an image until model version ``batches - 1`` is on the page
    and its first image shown. Returns one record per key press (the item, whether it was a tail item,
    the seconds until the next image was shown and what the page said then) and when the first image
    was shown (``time.perf_counter()``)."""
    from selenium.webdriver.common.action_chains import ActionChains

    presses, last_state, start, shot, first_shown = [], None, time.perf_counter(), 0, None

    def screenshot(why: str) -> None:
        nonlocal shot
        if shots is None or shot >= 40:
            return
        shot += 1
        path = shots / f"{shot:02d}-{why}.png"
        driver.save_screenshot(str(path))
        log(f"  screenshot {path.name}")

    while True:
        pressed = time.perf_counter()
        shot_here = False
        while (current := driver.execute_script(CURRENT)) is None:
            if server.poll() is not None:
                raise RuntimeError("skdbal label exited")
            waited = time.perf_counter() - pressed
            if waited > 1.0 and not shot_here:
                screenshot(f"waiting-after-{len(presses)}-labels")
                shot_here = True
            if waited > 300:
                raise TimeoutError(f"no image to label for 300 s after {len(presses)} labels")
            time.sleep(0.01)
        shown = time.perf_counter()
        first_shown = shown if first_shown is None else first_shown
        state = driver.execute_script(PAGE_STATE)
        if presses:
            presses[-1].update(next_shown_s=shown - presses[-1]["perf"], page_said=state[3] or state[4])
        key = (state[0], state[1], state[2])
        if key != last_state:
            log(f"  after {len(presses)} labels ({shown - start:.1f} s): model version {state[0]}, "
                f"training {state[1]}, waiting for {state[2]}; the page says {state[3]!r} [{state[4]}]")
            screenshot(f"v{state[0]}-{'training' if state[1] else 'waiting' if state[2] else 'ready'}"
                       f"-{len(presses)}-labels")
            last_state = key
        if state[0] >= batches - 1 and not state[1]:
            return presses, first_shown
        if shown - start > limit:
            raise TimeoutError(f"model version {batches - 1} not shown within {limit:g} s ({len(presses)} labels)")
        time.sleep(max(0.0, think - (time.perf_counter() - shown)))
        info = driver.execute_script(ITEM)
        item = int(current.split("-")[-1])
        ActionChains(driver).send_keys(truth[item]).perform()
        presses.append({"item": item, "tail": bool(info and info[1]), "perf": time.perf_counter(),
                        "next_shown_s": None, "page_said": None})


def one_run(args, tmp: Path, truth: dict, log) -> dict:
    from _helpers import chromium_driver

    port, store = free_port(), tmp / "s.db"
    argv = [sys.executable, "-m", "skdbal", "label", "--port", str(port), "--store", str(store),
            "--torch-threads", "1", "--images", str(tmp / "images"), "--classes", ",".join(map(str, range(10))),
            "--batch-size", str(args.batch_size), "--encoder-time", str(args.encoder_time),
            "--representation", args.representation]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    driver = chromium_driver(tmp / "profile")       # started first: its start is not the command's
    server = None
    try:
        launched = time.perf_counter()
        with open(tmp / "server.log", "w") as out:
            server = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
        url = f"http://127.0.0.1:{port}/"
        wait_http(url, timeout=300)
        page_up = time.perf_counter() - launched
        driver.get(url + "?annotator=pace")
        presses, first_shown = label_at_pace(driver, truth, think=args.think, batches=args.batches,
                                             limit=args.limit, shots=args.shots, log=log, server=server)
    finally:
        driver.quit()
        if server is not None:
            server.terminate()
            server.wait(60)
    log("  server: " + " | ".join(line.strip() for line in (tmp / "server.log").read_text().splitlines()
                                  if "encoder" in line or "embedding" in line or "failed" in line))
    models, events, first = store_models(store)
    last_press = {p["item"]: p for p in presses}      # an item is labelled once here (truthfully, no undo)
    labelled_at = {item: t for item, t in events.values()}
    rounds = []
    for version, recorded_at, last_event, n_labels in models[:args.batches]:
        # the label that completed the batch this model waited for: the first batch's last (the first model
        # waits for it, then for the embeddings, and sees the labels given meanwhile too), else the label
        # that made the retrain's count of new labels
        item = max(first, key=labelled_at.get) if version == 0 else events[last_event][0]
        press = last_press.get(item, {})
        rounds.append({"version": version, "labels": n_labels, "next_shown_s": press.get("next_shown_s"),
                       "model_s": recorded_at - labelled_at[item], "page_said": press.get("page_said")})
    waits = np.asarray([p["next_shown_s"] for p in presses if p["next_shown_s"] is not None])
    return {"rounds": rounds, "waits": waits, "labels": len(presses), "page_up": page_up,
            "first_image": first_shown - launched,
            "tail": sum(p["tail"] for p in presses)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=1000)
    parser.add_argument("--batches", type=int, default=7, help="model versions trained and shown")
    parser.add_argument("--batch-size", type=int, default=10)
    parser.add_argument("--think", type=float, default=2.5, help="seconds a label (a person's pace)")
    parser.add_argument("--encoder-time", type=float, default=300.0, help="skdbal label's --encoder-time")
    parser.add_argument("--representation", choices=["pool", "pca", "pixels"], default="pool")
    parser.add_argument("--limit", type=float, default=1200.0, help="seconds the labelling may take at most")
    parser.add_argument("--shots", type=Path, default=None, help="a folder for screenshots of the page")
    args = parser.parse_args()
    if args.shots is not None:
        args.shots.mkdir(parents=True, exist_ok=True)

    def log(text: str = "") -> None:
        print(text, flush=True)

    X, y = fashion_mnist("train")
    log(f"Fashion-MNIST: a folder of {args.images} training images; --representation {args.representation}, "
        f"--encoder-time {args.encoder_time:g}; batches of {args.batch_size}; a label every {args.think:g} s in "
        f"headless Chromium until model version {args.batches - 1} is shown; torch on 1 thread")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "images").mkdir()
        truth = write_pngs(tmp / "images", X, y, args.images)
        r = one_run(args, tmp, truth, log)
    w = r["waits"]
    log(f"from the command's start: the page answered after {r['page_up']:.1f} s, the first image was shown "
        f"after {r['first_image']:.1f} s")
    rows = []
    for b in r["rounds"]:
        rows.append([b["version"], b["labels"], "-" if b["next_shown_s"] is None else f"{b['next_shown_s']:.2f}",
                     f"{b['model_s']:.2f}", repr(b["page_said"] or "")])
    log(f"{r['labels']} labels, {r['tail']} of them items offered while the model trained or waited; "
        f"seconds from a key press to the next image: median {np.median(w):.3f}, p99 "
        f"{np.percentile(w, 99):.3f}, max {w.max():.3f}")
    batch_waits = np.asarray([b["next_shown_s"] for b in r["rounds"] if b["next_shown_s"] is not None])
    if len(batch_waits):
        log(f"after a batch's last label, seconds to the next image: median {np.median(batch_waits):.3f}, "
            f"max {batch_waits.max():.3f}, over {len(batch_waits)} batches")
    log()
    log(markdown_table(["model version", "labels", "next image s", "model s", "the page said meanwhile"], rows))
    out = Path(os.environ.get("SKDBAL_BENCH_OUT") or ROOT / "docs" / "results" / "bench_label_pace")
    out.mkdir(parents=True, exist_ok=True)
    first = r["rounds"][0] if r["rounds"] else {}
    (out / "results.json").write_text(json.dumps({
        "images": args.images, "think_s": args.think, "labels": r["labels"], "tail_labels": r["tail"],
        "page_up_s": round(r["page_up"], 2), "first_image_s": round(r["first_image"], 2),
        "next_image_s": {"median": round(float(np.median(w)), 3), "p99": round(float(np.percentile(w, 99)), 3),
                         "max": round(float(w.max()), 3)},
        "after_batch_next_image_s": ({"median": round(float(np.median(batch_waits)), 3),
                                      "max": round(float(batch_waits.max()), 3), "batches": len(batch_waits)}
                                     if len(batch_waits) else None),
        "first_model": {"labels": first.get("labels"), "model_s": round(first["model_s"], 1) if first else None},
        "later_models_s_max": round(max((b["model_s"] for b in r["rounds"][1:]), default=0.0), 2)}, indent=1))


if __name__ == "__main__":
    with recorded(__file__):
        main()
