"""
=====================================================
Filtering noisy labels out of BALD's batches (digits)
=====================================================

An annotator who gets 20% of the labels wrong, always the same ones
(:func:`skdbal.datasets.make_noisy_labels`). BALD prefers points on which
the network's dropout passes disagree, and a wrongly labelled point often
looks like that, so it acquires wrong labels at least as often as random
sampling does.

:func:`skdbal.acquisition.noise_filter` gets the annotator's labels of the
pool (``y_pool``) with each query and skips the points whose label the
model finds unlikely, ``p̄(y = y_pool | x) < τ``. The skipped points are the
query's rejects; they stay in the pool. Two rules set ``τ`` from the noise
rate that they estimate from the pool's labels and the current model
(:mod:`skdbal.noisy_labels`): ``"dynamic"`` is the Bayes decision for one label
under symmetric noise (distrust a label when a flip is more likely than
not), and ``"batch"`` the Bayes decision for the batch, which counts that a
skipped point is replaced by the next one of the ranking rather than lost.

The figure shows test accuracy, and the flipped labels in the training set,
for BALD, filtered BALD (fixed ``τ = 0.1``, dynamic and batch) and random
sampling, on one seed. The dynamic rule's ``τ`` (printed) is small, so it
rejects little; where it rejects nothing, its curves lie on BALD's.
"""
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from skdbal import ActiveLearner
from skdbal.acquisition import bald, noise_filter, random
from skdbal.datasets import make_noisy_labels
from skdbal.experiments.quickstart import digits_classifier, load_digits_images

X_pool, X_test, y_pool, y_test = load_digits_images()
y_noisy, flipped = make_noisy_labels(y_pool, 0.2, random_state=0)
# the initial 20 labels (2 per class) are clean; every acquired label comes from the noisy annotator
clean = np.flatnonzero(~flipped)
initial = np.concatenate([clean[y_pool[clean] == c][:2] for c in range(10)])

strategies = {"BALD": bald, "BALD, filtered (τ = 0.1)": noise_filter(bald, 0.1),
              "BALD, filtered (dynamic τ)": noise_filter(bald, "dynamic"),
              "BALD, filtered (batch τ)": noise_filter(bald, "batch"), "random": random}
results = {}
for name, strategy in strategies.items():
    learner = ActiveLearner(digits_classifier(random_state=0), strategy, random_state=0,
                            verbose=False)
    history = learner.simulate(X_pool, y_noisy, n_queries=8, n_instances=10, initial_idx=initial,
                               X_test=X_test, y_test=y_test, query_kwargs={"y_pool": y_noisy})
    order = learner.labelled_idx_
    n_flipped = [int(flipped[order[:row["n_labels"]]].sum()) for row in history]
    rejects = [row.get("n_rejected", 0) for row in history[1:]]
    tau = [row["threshold"] for row in history[1:] if "threshold" in row]
    results[name] = ([r["n_labels"] for r in history], [r["accuracy"] for r in history], n_flipped)
    print(f"{name:28s} accuracy {history[-1]['accuracy']:.3f}, flipped labels acquired "
          f"{n_flipped[-1]} of {history[-1]['n_labels'] - 20}, rejects per step {np.mean(rejects):.1f}"
          + (f", mean τ {np.mean(tau):.3f}" if tau else ""))

# %%
# Accuracy and the wrong labels learnt from
# -----------------------------------------
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
for (name, (labels, acc, n_flipped)), style in zip(results.items(), ["-o", "-s", "--^", "-x", "-d"]):
    ax1.plot(labels, acc, style, label=name)
    ax2.plot(labels, n_flipped, style, label=name)
ax1.set_xlabel("labelled images")
ax1.set_ylabel("test accuracy (clean test set)")
ax2.set_xlabel("labelled images")
ax2.set_ylabel("flipped labels in the training set")
ax1.legend(fontsize=8)
fig.suptitle("digits, 20% symmetric label noise")
fig.tight_layout()
if "__file__" in globals():  # run as a script: the figures are saved beside it, and shown if there is a display
    for number in plt.get_fignums():
        plt.figure(number).savefig(Path(__file__).with_name(f"{Path(__file__).stem}_{number}.png"), dpi=120)
    print(f"figures saved as {Path(__file__).with_suffix('')}_<n>.png")
plt.show()
