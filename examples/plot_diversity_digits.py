"""
=========================================================
Diverse batches on Repeated digits: penalty and BatchBALD
=========================================================

Top-k BALD scores each point alone, so a batch of ten can hold the same
informative image several times. Repeated digits makes that visible: every
pool image comes in three copies, each with a little Gaussian noise
(:func:`skdbal.datasets.make_repeated`, as Kirsch et al.'s Repeated-MNIST).

Two remedies, both drop-in strategies:

- :func:`skdbal.acquisition.diversity_penalty` builds the batch greedily,
  penalising each candidate's largest cosine similarity to the points already
  picked (Anonymous, n.d., §5.2): ``weight`` is in units of the pool's score
  range, so ``weight=0.1`` trades a tenth of it for a cosine of ``1``;
- :class:`skdbal.acquisition.BatchBALD` scores the batch's joint mutual
  information, in which a copy of a picked point adds little. It is given
  T = 100 passes (the other strategies use the classifier's ``n_samples``): the
  information a batch can hold about the passes is at most ``log T``.

The figure shows test accuracy and how many acquired images are copies of an
image acquired before, step by step, for one seed (the printed numbers are
this run's). Read it for the mechanism, not the ranking: one seed of a few
dozen labels decides nothing. The penalty looks at the inputs, so a larger weight
takes fewer copies. BatchBALD looks at the labels: its model treats a label
as a fresh draw given the weights, so a second label of an image the passes
are unsure about still carries information, and on this weak network it
still takes copies, at times more than top-k BALD.
"""
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from skdbal import ActiveLearner
from skdbal.acquisition import BatchBALD, bald, diversity_penalty, random
from skdbal.datasets import make_repeated
from skdbal.experiments.quickstart import digits_classifier, load_digits_images

X, X_test, y, y_test = load_digits_images()
# three noisy copies of every pool image; noise 0.03 on pixels in [0, 1], as Repeated-MNIST
X_pool, y_pool, origin = make_repeated(X, y, n_repeats=3, noise_std=0.03, random_state=0, return_origin=True)
initial = np.concatenate([np.flatnonzero(y_pool == c)[:2] for c in range(10)])

strategies = {"BALD (top-k)": bald,
              "diversity penalty, w = 0.1": diversity_penalty(bald, 0.1),
              "diversity penalty, w = 0.5": diversity_penalty(bald, 0.5),
              "BatchBALD (T = 100)": BatchBALD(n_samples=100),
              "random": random}
results = {}
for name, strategy in strategies.items():
    learner = ActiveLearner(digits_classifier(random_state=0), strategy, random_state=0,
                            verbose=False)
    history = learner.simulate(X_pool, y_pool, n_queries=6, n_instances=10, initial_idx=initial,
                               X_test=X_test, y_test=y_test)
    order = learner.labelled_idx_
    # acquired images whose original was already acquired (a copy, or the same image again)
    seen, copies, running = set(origin[initial].tolist()), [0], 0
    for row in history[1:]:
        for i in order[row["n_labels"] - 10:row["n_labels"]]:
            running += origin[i] in seen
            seen.add(origin[i])
        copies.append(running)
    results[name] = ([r["n_labels"] for r in history], [r["accuracy"] for r in history], copies)
    print(f"{name:28s} accuracy {history[-1]['accuracy']:.3f} at {history[-1]['n_labels']} labels, "
          f"copies acquired {copies[-1]} of {history[-1]['n_labels'] - 20}")

# %%
# Accuracy, and the copies acquired
# ---------------------------------
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
for (name, (labels, acc, copies)), style in zip(results.items(), ["-o", "-s", "--^", "-x", "-d"]):
    ax1.plot(labels, acc, style, label=name)
    ax2.plot(labels, copies, style, label=name)
ax1.set_xlabel("labelled images")
ax1.set_ylabel("test accuracy")
ax2.set_xlabel("labelled images")
ax2.set_ylabel("acquired copies of acquired images")
ax1.legend(fontsize=8)
fig.suptitle("Repeated digits (3 noisy copies of each pool image), batches of 10")
fig.tight_layout()
if "__file__" in globals():  # run as a script: the figures are saved beside it, and shown if there is a display
    for number in plt.get_fignums():
        plt.figure(number).savefig(Path(__file__).with_name(f"{Path(__file__).stem}_{number}.png"), dpi=120)
    print(f"figures saved as {Path(__file__).with_suffix('')}_<n>.png")
plt.show()
