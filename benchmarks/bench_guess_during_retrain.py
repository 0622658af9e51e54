"""How long people's request for the guesses of their batch waits while the model retrains.

A labelling session on scikit-learn's digits (no download) with an MC-dropout MLP that retrains for a
few seconds (1,500 epochs on 150 labels): 50 labels of a 100-item batch start the retrain, and the page
then asks for the guesses of the 50 items it still shows, three times, and of 3 items nobody is shown.
A seeded network's fit holds the lock on torch's global generator and mode flags throughout; the
session guesses what people are offered in the loop's thread, so those requests should not wait.
torch is pinned to one thread, as everywhere on 2 cores.

    python benchmarks/bench_guess_during_retrain.py
"""
import os
import tempfile
import time

import numpy as np
import torch
from sklearn.datasets import load_digits

from skdbal import ActiveLearner, MCDropoutClassifier
from skdbal.acquisition import max_entropy
from skdbal.labelling import LabellingSession
from skdbal.models import MLP


def main():
    torch.set_num_threads(1)
    X, y = load_digits(return_X_y=True)
    X = (X / 16).astype(np.float32)
    net = MCDropoutClassifier(MLP, module__hidden_layer_sizes=(256,), classes=list(range(10)), max_epochs=1500,
                              random_state=0, train_split=None, verbose=0)
    learner = ActiveLearner(net, max_entropy, random_state=0, seeding="step", verbose=False)
    store = os.path.join(tempfile.mkdtemp(), "s.db")
    with LabellingSession(learner, X[:1000], classes=range(10), store=store, batch_size=100,
                          retrain_after=50) as s:
        for it in s.next_batch(annotator="a", timeout=10):
            s.submit(it["item"], int(y[it["item"]]), annotator="a")
        s.wait_for_version(0, timeout=300)
        batch = s.next_batch(annotator="a", timeout=10)
        t0 = time.perf_counter()
        for it in batch[:50]:
            s.submit(it["item"], int(y[it["item"]]), annotator="a")
        time.sleep(0.5)  # the retrain on 150 labels has begun
        rest = [it["item"] for it in s.next_batch(annotator="a", timeout=1)]
        for _ in range(3):
            t = time.perf_counter()
            s.guesses(rest)
            print(f"guesses of the {len(rest)} items offered: {time.perf_counter() - t:.3f} s", flush=True)
        t = time.perf_counter()
        s.guesses([0, 1, 2])
        print(f"guesses of 3 items nobody is offered (computed on demand): {time.perf_counter() - t:.2f} s")
        s.wait_for_version(1, timeout=300)
        print(f"the retrain and the next query took about {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    from _common import recorded  # the whole output and a JSON with the machine, versions, commit

    with recorded(__file__):
        main()
