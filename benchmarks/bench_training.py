"""skdbal fit against a raw-torch loop: same net, data, epochs, batch size, optimizer.

Prints the time of each and their ratio, measured side by side in one run.

    python benchmarks/bench_training.py [--n 1020] [--epochs 50] [--repeats 3]
"""
import argparse
import os
import platform
import time

import numpy as np
import torch
from torch import nn

from skdbal import MCDropoutClassifier
from skdbal.models import BayesianCNN


def raw_torch_fit(X, y, epochs, batch_size, seed):
    torch.manual_seed(seed)
    net = BayesianCNN(n_classes=10, input_shape=X.shape[1:])
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    Xt, yt = torch.as_tensor(X), torch.as_tensor(y)
    net.train()
    for _ in range(epochs):
        perm = torch.randperm(len(Xt))
        for start in range(0, len(Xt), batch_size):
            idx = perm[start:start + batch_size]
            opt.zero_grad()
            loss = loss_fn(net(Xt[idx]), yt[idx])
            loss.backward()
            opt.step()
    return net


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1020)
    parser.add_argument("--epochs", type=int, default=50)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.RandomState(0)
    X = rng.rand(args.n, 28, 28).astype(np.float32)
    y = rng.randint(0, 10, args.n).astype(np.int64)
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads")
    print(f"BayesianCNN, {args.n} 28x28 images, {args.epochs} epochs, batch {args.batch_size}")
    times = {"raw torch": [], "skdbal fit": []}
    for r in range(args.repeats):  # interleaved, so drift hits both
        t0 = time.perf_counter()
        raw_torch_fit(X, y, args.epochs, args.batch_size, seed=r)
        times["raw torch"].append(time.perf_counter() - t0)
        clf = MCDropoutClassifier(module=BayesianCNN, classes=np.arange(10), max_epochs=args.epochs,
                                  batch_size=args.batch_size, random_state=r)
        t0 = time.perf_counter()
        clf.fit(X, y)
        times["skdbal fit"].append(time.perf_counter() - t0)
    best = {k: min(v) for k, v in times.items()}
    for k, v in times.items():
        print(f"{k:>11}: best {min(v):.2f} s, all {[round(t, 2) for t in v]}")
    from _common import markdown_table  # the script's folder is on the path when it runs as a program

    print(f"ratio skdbal / raw torch (best of {args.repeats}): {best['skdbal fit'] / best['raw torch']:.3f}")
    print()
    print(markdown_table(["method", "best s", "slowest s", "time over raw torch"],
                         [[k, f"{min(v):.2f}", f"{max(v):.2f}", f"{min(v) / best['raw torch']:.3f}"]
                          for k, v in times.items()]))


if __name__ == "__main__":
    from _common import recorded  # the whole output and a JSON with the machine, versions, commit

    with recorded(__file__):
        main()
