"""MC-dropout pool scoring: skdbal (masks seeded per row from numpy's PCG64, the default on a CPU;
per row from Philox-4x32-10 computed in torch's integer ops, results version 5, the default on CUDA;
per row from torch's generators, as results version 3; from one stream per call, as up to results
version 2) against a naive T-loop, a trunk-once loop,
baal's ModelWrapper (replicate on/off, with and without MCCachingModule) and
modAL 0.4.2.x's ``mc_dropout_bald``, on the same net, pool and T.

Every method runs on the same trained Gal CNN (5 epochs on 1,000 MNIST
images) and the same pool, in one process; the script prints images/s and
each method's time relative to skdbal, and checks that the BALD scores of
the peers agree with ours (they are independent MC estimates, so agreement is
a correlation, and the mean BALD over the pool).

    python benchmarks/bench_scoring.py [--n 2000] [--T 20 100] [--batch-size 128] [--threads 1]
        [--repeats 1] [--only skdbal trunk-once]   # --repeats: best of that many, interleaved
        [--modal-path DIR]   # a folder holding modAL 0.4.2.x's `modAL` package

baal is used when importable (`pip install --no-deps baal structlog torchmetrics
lightning-utilities`); modAL 0.4.2.x pins skorch 0.9, so point --modal-path at
an unpacked wheel instead of installing it.
"""
import argparse
import copy
import os
import sys
import time

import numpy as np
import torch
from torch import nn

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _common import machine, markdown_table, mnist_or_synthetic, trained_net  # noqa: E402

from skdbal.models import mc_dropout_mode  # noqa: E402
from skdbal.uncertainty import mutual_information  # noqa: E402


def naive_loop(net, X, T, bs):
    out = []
    with mc_dropout_mode(net):
        for s in range(0, len(X), bs):
            xb = X[s:s + bs]
            out.append(torch.stack([torch.softmax(net(xb), -1) for _ in range(T)]))
    return torch.cat(out, 1).cpu().numpy()  # .cpu(): bench_gpu.py runs these loops on a GPU


def trunk_once_loop(net, X, T, bs):
    out = []
    with mc_dropout_mode(net):
        for s in range(0, len(X), bs):
            h = net.trunk(X[s:s + bs])
            out.append(torch.stack([torch.softmax(net.head(h), -1) for _ in range(T)]))
    return torch.cat(out, 1).cpu().numpy()  # .cpu(): bench_gpu.py runs these loops on a GPU


def baal_runner(net, replicate, caching, bs):
    from baal.bayesian.caching_utils import MCCachingModule
    from baal.bayesian.dropout import MCDropoutModule
    from baal.modelwrapper import ModelWrapper, TrainingArgs

    model = MCDropoutModule(copy.deepcopy(net))
    if caching:
        model = MCCachingModule(model)
    model.eval()
    wrapper = ModelWrapper(model, TrainingArgs(batch_size=bs, use_cuda=False, workers=0,
                                               replicate_in_memory=replicate, criterion=nn.CrossEntropyLoss()))

    def run(X, T):
        ds = torch.utils.data.TensorDataset(X, torch.zeros(len(X), dtype=torch.long))
        logits = wrapper.predict_on_dataset(ds, iterations=T, verbose=False)  # (N, C, T)
        return torch.softmax(torch.as_tensor(logits), 1).permute(2, 0, 1).numpy()

    return run


def modal_runner(clf, modal_path, bs):
    sys.path.insert(0, modal_path)
    for name in [m for m in sys.modules if m == "modAL" or m.startswith("modAL.")]:
        del sys.modules[name]
    from modAL.dropout import mc_dropout_bald  # 0.4.2.x

    class Learner:  # what mc_dropout_bald reads: .estimator.module_
        estimator = clf

    def run(X, T):
        idx, scores = mc_dropout_bald(Learner, X, n_instances=len(X), num_cycles=T, sample_per_forward_pass=bs)
        full = np.empty(len(X))
        full[np.asarray(idx)] = np.asarray(scores)  # back to pool order
        return full

    return run


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--T", type=int, nargs="+", default=[20, 100])
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--modal-path", default=None)
    parser.add_argument("--skip-slow", action="store_true", help="skip the full-pass methods at T >= 100")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--repeats", type=int, default=1, help="best of this many runs per method, interleaved")
    parser.add_argument("--only", nargs="+", default=None,
                        help="run only the methods whose names contain one of these words (skdbal's always runs)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    X_train, y_train, X_pool, source = mnist_or_synthetic(1000, args.n)
    clf = trained_net(X_train, y_train)
    net = clf.module_
    Xp = torch.as_tensor(X_pool.astype(np.float32) / 255.0)
    bs = args.batch_size
    print(f"machine: {machine()}")
    print("load average (1, 5, 15 min) at the start: " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    print(f"pool: {args.n} {source} images, Gal CNN, batch {bs}")

    methods = {
        "skdbal predict_proba_samples": lambda X, T: clf.set_params(batch_size=bs, mask_seeding="row_pcg64")
        .predict_proba_samples(X.numpy(), n_samples=T),
        "skdbal mask_seeding='row_philox' (version 5)": lambda X, T: clf.set_params(
            batch_size=bs, mask_seeding="row_philox").predict_proba_samples(X.numpy(), n_samples=T),
        "skdbal mask_seeding='row' (version 3)": lambda X, T: clf.set_params(batch_size=bs, mask_seeding="row")
        .predict_proba_samples(X.numpy(), n_samples=T),
        "skdbal mask_seeding='stream'": lambda X, T: clf.set_params(batch_size=bs, mask_seeding="stream")
        .predict_proba_samples(X.numpy(), n_samples=T),
        "trunk-once loop": lambda X, T: trunk_once_loop(net, X, T, bs),
        "naive T-loop (full passes)": lambda X, T: naive_loop(net, X, T, bs),
    }
    try:
        import baal  # noqa: F401

        for replicate in (True, False):
            for caching in (False, True):
                name = f"baal ModelWrapper replicate={replicate} caching={caching}"
                methods[name] = baal_runner(net, replicate, caching, bs)
    except ImportError:
        print("baal not importable: skipped")
    if args.modal_path:
        methods["modAL 0.4.2 mc_dropout_bald"] = modal_runner(clf, args.modal_path, bs)
    else:
        print("modAL 0.4.2.x not given (--modal-path): skipped")

    if args.only:
        methods = {name: fn for name, fn in methods.items()
                   if name == "skdbal predict_proba_samples" or any(word in name for word in args.only)}
    print(f"best of {args.repeats} interleaved run(s) per method, {args.threads} torch thread(s)")
    for T in args.T:
        print(f"\nT = {T}")
        results = {}
        for _ in range(args.repeats):
            for name, fn in methods.items():
                full = "naive" in name or ("replicate=True" in name) or ("caching=False" in name and "baal" in name)
                if args.skip_slow and T >= 100 and full:
                    continue
                t0 = time.perf_counter()
                out = fn(Xp, T)
                dt = time.perf_counter() - t0
                scores = out if out.ndim == 1 else mutual_information(out)
                if name not in results or dt < results[name][0]:
                    results[name] = (dt, scores)
        ref_t, ref = results["skdbal predict_proba_samples"]
        print(f"{'method':<44}{'img/s':>9}{'time/skdbal':>13}{'corr(BALD)':>12}{'mean BALD':>11}")
        for name, (dt, scores) in results.items():
            corr = np.corrcoef(ref, scores)[0, 1]
            print(f"{name:<44}{args.n / dt:>9.0f}{dt / ref_t:>13.2f}{corr:>12.3f}{scores.mean():>11.4f}")
        # the same as a Markdown table, whose cells the docs quote (docs/_substitutions.py, RAW_TABLES)
        floor = results.get("trunk-once loop", (None,))[0]
        print()
        print(markdown_table(
            ["method", f"img/s at T={T}", f"time over skdbal at T={T}", f"time over the trunk-once loop at T={T}",
             f"corr(BALD) at T={T}", f"mean BALD at T={T}"],
            [[name, f"{args.n / dt:.0f}", f"{dt / ref_t:.2f}", f"{dt / floor:.2f}" if floor else "n/a",
              f"{np.corrcoef(ref, scores)[0, 1]:.3f}", f"{scores.mean():.4f}"]
             for name, (dt, scores) in results.items()]))
    print("load average (1, 5, 15 min) at the end: " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    from _common import recorded  # the whole output and a JSON with the machine, versions, commit

    with recorded(__file__):
        main()
