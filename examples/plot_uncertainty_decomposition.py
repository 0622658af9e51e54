"""
=====================================================
Total, aleatoric and epistemic uncertainty on digits
=====================================================

MC dropout gives ``T`` class distributions per image. Their mean's entropy
(the total uncertainty) is the sum of the mean entropy of the passes
(aleatoric: what each sampled network finds ambiguous) and the mutual
information between the label and the weights (epistemic: what the sampled
networks disagree on, the score BALD acquires by). See the concepts page of
the user guide.

A Bayesian CNN trained on 60 labelled images scores 1,000 unlabelled images with
``T = 50`` passes. The first figure places every image by its two parts (the
dotted diagonals are lines of equal total uncertainty); the second shows the
images that each part ranks highest.
"""
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from skdbal.experiments.quickstart import digits_classifier, load_digits_images
from skdbal.uncertainty import expected_entropy, mutual_information, predictive_entropy

X_pool, X_test, y_pool, y_test = load_digits_images()
net = digits_classifier(random_state=0).fit(X_pool[:60], y_pool[:60])
P = net.predict_proba_samples(X_pool[60:1060], n_samples=50)   # (T, N, C)
total, aleatoric, epistemic = predictive_entropy(P), expected_entropy(P), mutual_information(P)
print(f"mean total {total.mean():.3f} nats = aleatoric {aleatoric.mean():.3f} + epistemic {epistemic.mean():.3f}; "
      f"correlation of the two parts {np.corrcoef(aleatoric, epistemic)[0, 1]:.2f}")

# %%
# Each image by its two parts
fig, ax = plt.subplots(figsize=(5.5, 4.5))
ax.scatter(aleatoric, epistemic, s=6, c=total, cmap="viridis")
for level in (0.5, 1.0, 1.5, 2.0):
    ax.plot([0, level], [level, 0], color="grey", lw=0.6, ls=":")
ax.set_xlabel("aleatoric: expected entropy of the passes (nats)")
ax.set_ylabel("epistemic: mutual information, BALD (nats)")
ax.set_title("1,000 digits, T = 50 passes (colour: total entropy)")
ax.set_xlim(0, None)
ax.set_ylim(0, None)
fig.tight_layout()

# %%
# The images each part ranks highest: BALD's picks are those the passes disagree on;
# the most aleatoric are those every pass finds ambiguous
fig, axes = plt.subplots(2, 8, figsize=(10, 3))
for row, (name, score) in enumerate([("epistemic", epistemic), ("aleatoric", aleatoric)]):
    for ax, i in zip(axes[row], np.argsort(-score)[:8]):
        ax.imshow(X_pool[60 + i], cmap="gray_r")
        ax.set_title(f"{name[:4]}. {score[i]:.2f}", fontsize=8)
        ax.axis("off")
fig.suptitle("top 8 by epistemic (top row) and by aleatoric uncertainty (bottom row)")
fig.tight_layout()

if "__file__" in globals():  # run as a script: the figures are saved beside it, and shown if there is a display
    for number in plt.get_fignums():
        plt.figure(number).savefig(Path(__file__).with_name(f"{Path(__file__).stem}_{number}.png"), dpi=120)
    print(f"figures saved as {Path(__file__).with_suffix('')}_<n>.png")
plt.show()
