"""MC sampling of Kirsch et al.'s CNN with and without the factored first convolution.

KirschCNN drops whole channels right after its first convolution, so the
trunk cache holds that one convolution only and every pass runs the rest.
The sampler factors the next convolution instead (``conv(u ⊙ m) =
Σ_c m_c conv_c(u_c) + b``: each input channel convolved once per row, each
pass only sums them). This script times ``predict_proba_samples`` on the same
trained net, pool and T with the factoring on and off (monkeypatched),
interleaved, for per-row masks (BALD's) and consistent masks (BatchBALD's),
and checks the passes agree.

    SKDBAL_DATA=../shared/data python benchmarks/bench_factored.py [--pool 2000] [--T 100] [--repeats 2]

Threads: ``--threads`` torch threads (default 1).
"""
import argparse
import sys
import time
from unittest import mock

import numpy as np
import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _common import machine, markdown_table, mnist_or_synthetic  # noqa: E402

import skdbal.models._mc_base as md  # noqa: E402
from skdbal import MCDropoutClassifier  # noqa: E402
from skdbal.models import KirschCNN  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool", type=int, default=2000)
    parser.add_argument("--T", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    X_train, y_train, X_pool, source = mnist_or_synthetic(100, args.pool)
    print(f"machine: {machine()}")
    print(f"KirschCNN trained 1 epoch of 2,048 draws on 100 {source} images; pool {len(X_pool)}, T={args.T}")
    from skdbal.models import FixedLengthLoader
    net = MCDropoutClassifier(KirschCNN, max_epochs=1, batch_size=64, n_samples=args.T, random_state=0,
                              iterator_train=FixedLengthLoader, iterator_train__n_samples=2048).fit(X_train, y_train)
    table = []
    for consistent in (False, True):
        net.set_params(consistent_masks=consistent)
        best = {}
        for _ in range(args.repeats):
            for factored in (True, False):
                patch = mock.patch.object(md, "_factored_conv", md._factored_conv if factored else (lambda head: 0))
                with patch:
                    t0 = time.perf_counter()
                    P = net.predict_proba_samples(X_pool)
                    dt = time.perf_counter() - t0
                best[factored] = min(best.get(factored, np.inf), dt)
                if factored:
                    reference = P
                else:
                    diff = float(np.abs(P - reference).max())
        name = "consistent masks (BatchBALD)" if consistent else "per-row masks (BALD)"
        print(f"  {name:30s} factored {best[True]:6.2f} s, plain {best[False]:6.2f} s: "
              f"{best[False] / best[True]:.1f}x faster; max |difference| {diff:.1e}")
        table.append([name, f"{best[True]:.2f}", f"{best[False]:.2f}", f"{best[False] / best[True]:.1f}",
                      f"{diff:.1e}"])
    print()
    print(markdown_table(["masks", "factored s", "plain s", "speed-up", "max abs difference"], table))


if __name__ == "__main__":
    from _common import recorded  # the whole output and a JSON with the machine, versions, commit

    with recorded(__file__):
        main()
