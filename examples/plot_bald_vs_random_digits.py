"""
=======================================
BALD against random sampling on digits
=======================================

The smallest complete active-learning experiment: a Bayesian CNN on
scikit-learn's digits (images of ``8 × 8`` pixels), starting from 2 labelled images per
class, asks for ten labels per round either by BALD (the mutual information between the
label and the network weights, from MC-dropout samples) or at random.

It also shows what BALD looks at. Each pick's title gives its BALD score,
the mutual information (MI: how much the T dropout passes disagree), and
its expected entropy (EH: how unsure each pass is on its own; both in
nats). BALD ranks by MI alone. On this small network trained on 100 images,
each pass is itself unsure of BALD's picks (their EH, in the titles, is a
large part of a uniform guess's ``ln 10`` nats over the ten classes), and the passes also
disagree: BALD picks where the disagreement comes on top of that.
"""
from pathlib import Path

import matplotlib.pyplot as plt

from skdbal import ActiveLearner
from skdbal.acquisition import bald, random
from skdbal.experiments.quickstart import digits_classifier, load_digits_images
from skdbal.uncertainty import expected_entropy, mutual_information

X_pool, X_test, y_pool, y_test = load_digits_images()

curves = {}
learners = {}
for name, strategy in [("BALD", bald), ("random", random)]:
    learner = ActiveLearner(digits_classifier(random_state=0), strategy, random_state=0, verbose=False)
    history = learner.simulate(X_pool, y_pool, n_queries=8, n_instances=10, X_test=X_test, y_test=y_test)
    curves[name] = ([r["n_labels"] for r in history], [r["accuracy"] for r in history])
    learners[name] = learner

# %%
# Learning curves
# ---------------
fig, ax = plt.subplots(figsize=(5, 3.5))
for name, (labels, acc) in curves.items():
    ax.plot(labels, acc, marker="o", label=name)
ax.set_xlabel("labelled images")
ax.set_ylabel("test accuracy")
ax.set_title("digits: BALD against random, one seed")
ax.legend()
fig.tight_layout()

# %%
# What BALD picks
# ---------------
# The eight unlabelled pool images with the highest BALD score under the final
# model, with their epistemic (BALD) and aleatoric (expected entropy) parts.
# After ``simulate`` the learner owns its pool, so ``query(n_instances=8)``
# ranks only the rows still unlabelled.
learner = learners["BALD"]
idx, X_query = learner.query(n_instances=8)
P = learner.predict_proba_samples(X_query)
epistemic, aleatoric = mutual_information(P), expected_entropy(P)
fig, axes = plt.subplots(1, 8, figsize=(10, 1.8))
for ax, image, e, a in zip(axes, X_query, epistemic, aleatoric):
    ax.imshow(image, cmap="gray_r")
    ax.set_title(f"MI {e:.2f}\nEH {a:.2f}", fontsize=8)
    ax.axis("off")
fig.suptitle("BALD's next 8 picks: mutual information (MI) and expected entropy (EH), nats", fontsize=10)
fig.tight_layout()
print(f"BALD's picks: MI {epistemic.min():.2f}-{epistemic.max():.2f}, "
      f"EH {aleatoric.min():.2f}-{aleatoric.max():.2f} nats")
if "__file__" in globals():  # run as a script: the figures are saved beside it, and shown if there is a display
    for number in plt.get_fignums():
        plt.figure(number).savefig(Path(__file__).with_name(f"{Path(__file__).stem}_{number}.png"), dpi=120)
    print(f"figures saved as {Path(__file__).with_suffix('')}_<n>.png")
plt.show()
