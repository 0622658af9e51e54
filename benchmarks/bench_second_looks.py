"""Second looks on a simulated labelling session: the flags' precision and recall, and the flag rate.

A real :class:`skdbal.labelling.LabellingSession` (its loop in its thread, a SQLite store) on the
digits demo's pool (1,297 images; the 500 others are the test set), labelled by two scripted
annotators who take turns asking for work (``next_batch``, second looks first) and label each
item truthfully except a share ``--noise`` of them, flipped uniformly to one of the nine other
classes. A session runs until ``--labels`` labels are given (second looks included). With
``--second-joins-at N`` the second annotator starts only after N labels, so flags wait for a
second look while models are retrained (and may be withdrawn).

For each flag raised on a judged label: was the label wrong (precision), and of the judged
labels that were wrong, how many were flagged (recall)? A flag that a later model withdrew costs
no label: precision and the flag rate count the flags *offered* (raised and not withdrawn).

    python benchmarks/bench_second_looks.py                  # LogisticRegression stand-in, 3 seeds
    python benchmarks/bench_second_looks.py --model demo     # the demo's MC-dropout CNN with BALD

Writes ``raw_<model><tag>.txt`` and ``results_<model><tag>.json`` (machine, versions, git commit) under
``--out`` (``docs/results/second_looks``). torch runs on one thread.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import sklearn  # noqa: E402
import torch  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

import skdbal  # noqa: E402
from skdbal import ActiveLearner  # noqa: E402
from skdbal.acquisition import bald, max_entropy  # noqa: E402
from skdbal.labelling import LabellingSession  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def pool():
    """The demo's pool and test set (``skdbal label --demo digits``)."""
    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32).reshape(-1, 8, 8)
    return train_test_split(X, y, test_size=500, random_state=0, stratify=y)


def learner_of(model: str, seed: int):
    if model == "lr":   # a stand-in: fast, and queries by max entropy (one sample: BALD would be 0)
        return ActiveLearner(LogisticRegression(C=10, max_iter=500), max_entropy, random_state=seed,
                             seeding="step", verbose=False)
    from skdbal import MCDropoutClassifier  # the demo's model and strategy (skdbal.labelling.cli)

    net = MCDropoutClassifier(classes=np.arange(10), max_epochs=50, batch_size=32, n_samples=20,
                              random_state=seed, module__kernel_size=3)
    return ActiveLearner(net, bald, random_state=seed, seeding="step", verbose=False)


def run(model: str, seed: int, noise: float, n_labels: int, batch_size: int, X, y, X_test, y_test,
        joins_at: int = 0) -> dict:
    rng = np.random.RandomState(1000 + seed)
    path = Path(tempfile.mkdtemp()) / "s.db"
    if model == "lr":   # on the flattened images
        X, X_test = X.reshape(len(X), -1), X_test.reshape(len(X_test), -1)
    session = LabellingSession(learner_of(model, seed), X, classes=range(10), store=path, batch_size=batch_size,
                               X_test=X_test, y_test=y_test)
    given = 0
    t0 = time.perf_counter()
    with session:
        turn = 0
        while given < n_labels:
            annotator = ("ann", "bob")[turn % 2] if given >= joins_at else "ann"
            turn += 1
            batch = session.next_batch(annotator=annotator, timeout=5)
            if session.error is not None or time.perf_counter() - t0 > 1800:
                raise RuntimeError("the session's loop failed") from session.error
            for b in batch:
                i = b["item"]
                label = int(y[i])
                if rng.rand() < noise:
                    label = int((label + rng.randint(1, 10)) % 10)
                session.submit(i, label, annotator=annotator)
                given += 1
                if given >= n_labels:
                    break
        # the last labels are judged as they arrive, in the loop's thread: wait for it to catch up
        deadline = time.time() + 120
        last = session.store.last_event()
        while session.oracle.judged < last and time.time() < deadline and session.error is None:
            time.sleep(0.05)
        checks, looks = session.store.checks(), session.store.second_looks()
        versions = session.versions()
        events = session.store.events(after=0)
    elapsed = time.perf_counter() - t0
    firsts = [e for e in events if e["kind"] == "label"]
    second_events = {c["second_event"] for c in looks if c["second_event"] is not None}
    wrong_label = {e["event"]: e["label"] != str(y[e["item"]]) for e in firsts}
    offered = [c for c in checks if c["flagged"] and not c.get("withdrawn", False)]
    withdrawn = [c for c in checks if c.get("withdrawn", False)]
    wrong_judged = [c for c in checks if wrong_label[c["event"]]]
    tp = [c for c in offered if wrong_label[c["event"]]]
    outcomes = {k: sum(c["outcome"] == k for c in looks) for k in ("pending", "confirmed", "changed", "withdrawn")}
    return {
        "model": model, "seed": seed, "noise": noise, "labels": len(firsts),
        "first_labels": len(firsts) - len(second_events), "wrong_labels": sum(wrong_label.values()),
        "judged": len(checks), "wrong_judged": len(wrong_judged),
        "flagged": sum(c["flagged"] for c in checks), "withdrawn": len(withdrawn),
        "withdrawn_wrong": sum(wrong_label[c["event"]] for c in withdrawn),
        "offered": len(offered), "offered_wrong": len(tp),
        "precision": len(tp) / len(offered) if offered else None,
        "recall_judged": len(tp) / len(wrong_judged) if wrong_judged else None,
        "flag_rate_judged": len(offered) / len(checks) if checks else 0.0,
        "flag_rate_labels": len(offered) / len(firsts),
        "outcomes": outcomes, "versions": len(versions),
        "final_test_accuracy": versions[-1]["metrics"].get("accuracy") if versions else None,
        "flags": [{"event": c["event"], "item": c["item"], "label": c["label"], "true": int(y[c["item"]]),
                   "p_given": c["p_given"], "threshold": c["threshold"], "model_version": c["model_version"],
                   "withdrawn": c.get("withdrawn", False)} for c in checks if c["flagged"]],
        "seconds": round(elapsed, 1),
    }


def git_commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except OSError:
        return "unknown"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("lr", "demo"), default="lr")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--labels", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=10)
    parser.add_argument("--noise", type=float, nargs="+", default=[0.1, 0.0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "results" / "second_looks"))
    parser.add_argument("--second-joins-at", type=int, default=0,
                        help="the second annotator asks for work only from this many labels on (second looks wait)")
    parser.add_argument("--tag", default="", help="appended to the file names (e.g. _before, for a run of the "
                        "code before the rule, put first on PYTHONPATH)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    X, X_test, y, y_test = pool()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lines, runs = [], []

    def say(text):
        print(text, flush=True)
        lines.append(text)

    say(f"# bench_second_looks --model {args.model}: {args.seeds} seeds x noise {args.noise}, "
        f"{args.labels} labels, batch {args.batch_size}, second annotator from label {args.second_joins_at}")
    for noise in args.noise:
        for seed in range(args.seeds):
            r = run(args.model, seed, noise, args.labels, args.batch_size, X, y, X_test, y_test, args.second_joins_at)
            runs.append(r)
            say(f"noise {noise:.2f} seed {seed}: {r['labels']} labels ({r['wrong_labels']} wrong), judged "
                f"{r['judged']} ({r['wrong_judged']} wrong); flagged {r['flagged']}, withdrawn {r['withdrawn']} "
                f"({r['withdrawn_wrong']} wrong), offered {r['offered']} ({r['offered_wrong']} wrong); "
                f"precision {r['precision']}, recall {r['recall_judged']}, flag rate {r['flag_rate_judged']:.3f} "
                f"of judged; outcomes {r['outcomes']}; test acc {r['final_test_accuracy']}; {r['seconds']} s")
    summary = {}
    for noise in args.noise:
        rs = [r for r in runs if r["noise"] == noise]
        offered, tp = sum(r["offered"] for r in rs), sum(r["offered_wrong"] for r in rs)
        wrong = sum(r["wrong_judged"] for r in rs)
        summary[str(noise)] = {
            "offered": offered, "offered_wrong": tp, "withdrawn": sum(r["withdrawn"] for r in rs),
            "withdrawn_wrong": sum(r["withdrawn_wrong"] for r in rs), "judged": sum(r["judged"] for r in rs),
            "wrong_judged": wrong, "labels": sum(r["labels"] for r in rs),
            "precision_pooled": tp / offered if offered else None,
            "recall_pooled": tp / wrong if wrong else None,
            "flag_rate_judged_pooled": offered / sum(r["judged"] for r in rs),
            "flag_rate_labels_max": max(r["flag_rate_labels"] for r in rs),
            "precision_per_seed": [r["precision"] for r in rs], "recall_per_seed": [r["recall_judged"] for r in rs],
        }
        s = summary[str(noise)]
        say(f"noise {noise:.2f}, pooled over {len(rs)} seeds: offered {offered} flags, {tp} on wrong labels: "
            f"precision {s['precision_pooled']}, recall {s['recall_pooled']} of {wrong} wrong judged labels; "
            f"flag rate {s['flag_rate_judged_pooled']:.4f} of judged labels, at most "
            f"{s['flag_rate_labels_max']:.4f} of labels in a run; withdrawn {s['withdrawn']} "
            f"({s['withdrawn_wrong']} of them wrong labels)")
    meta = {"machine": f"{platform.platform()}, {os.cpu_count()} CPUs, python {platform.python_version()}",
            "versions": {"skdbal": getattr(skdbal, "__version__", "?"), "torch": torch.__version__,
                         "torch_threads": torch.get_num_threads(), "sklearn": sklearn.__version__,
                         "numpy": np.__version__},
            "git_commit": git_commit(), "skdbal_imported_from": str(Path(skdbal.__file__).parent),
            "argv": sys.argv[1:], "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    name = f"{args.model}{args.tag}"
    (out / f"raw_{name}.txt").write_text("\n".join(lines) + "\n")
    (out / f"results_{name}.json").write_text(json.dumps({**meta, "summary": summary, "runs": runs}, indent=1) + "\n")
    print(f"wrote {out / f'raw_{name}.txt'} and {out / f'results_{name}.json'}")


if __name__ == "__main__":
    main()
