"""
======================================================================
Calibration: MC dropout, a deep ensemble and the deterministic network
======================================================================

Active learning ranks the pool by the model's probabilities, and a user
reads them as confidence, so it matters whether "90% sure" is right nine
times in ten. Top-label *expected calibration error* (ECE) measures the gap:
bin the test images by their top probability, and average
``|accuracy - confidence|`` over the bins, weighted by their size
(:func:`skdbal.metrics.expected_calibration_error`; scikit-learn's
``calibration_curve`` is binary only).

Four predictive distributions on the same digits (``8 × 8`` pixels):

* the **deterministic** network: one Bayesian CNN with dropout switched off
  at prediction (Gal et al.'s weight-scaling);
* **MC dropout**: the same trained network, the mean of ``T = 50`` dropout
  passes;
* a **deep ensemble** of five such networks from different seeds
  (:class:`skdbal.DeepEnsembleClassifier`), each deterministic;
* **temperature scaling** of the deterministic network, fitted by
  scikit-learn's ``CalibratedClassifierCV(method="temperature")`` on a held-out
  set of two hundred more labels, which an active learner would have to buy.

The first figure shows reliability diagrams at one hundred random labels; the second
how ECE and the test negative log-likelihood move as the labelled set grows.
The MNIST results page has the same comparison along BALD's acquisitions.
"""
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from sklearn.calibration import CalibratedClassifierCV
from sklearn.frozen import FrozenEstimator
from sklearn.metrics import log_loss

from skdbal import DeepEnsembleClassifier
from skdbal.experiments.quickstart import digits_classifier, load_digits_images
from skdbal.metrics import expected_calibration_error, plot_reliability_diagram

X_pool, X_test, y_pool, y_test = load_digits_images()
order = np.random.RandomState(0).permutation(len(X_pool))
X_cal, y_cal = X_pool[order[-200:]], y_pool[order[-200:]]   # held out, for temperature scaling only


def predictions(n_labels):
    """Test probabilities of the four models trained on the first n_labels of a random order."""
    X, y = X_pool[order[:n_labels]], y_pool[order[:n_labels]]
    net = digits_classifier(random_state=0).fit(X, y)
    members = digits_classifier(mc_dropout=False)
    ensemble = DeepEnsembleClassifier(members, n_members=5, random_state=0).fit(X, y)
    scaled = CalibratedClassifierCV(FrozenEstimator(net), method="temperature").fit(X_cal, y_cal)
    proba = {
        "deterministic": net.predict_proba(X_test),
        "MC dropout, T = 50": net.predict_proba_samples(X_test, n_samples=50).mean(axis=0),
        "deep ensemble, 5 members": ensemble.predict_proba(X_test),
        "temperature-scaled (+200 labels)": scaled.predict_proba(X_test),
    }
    # float32 rows sum to 1 within 1e-7, short of log_loss's float64 check
    proba = {name: np.float64(p) for name, p in proba.items()}
    return {name: p / p.sum(axis=1, keepdims=True) for name, p in proba.items()}


at_100 = predictions(100)
print("100 random labels, 500 test digits:")
for name, proba in at_100.items():
    print(f"  {name:34s} accuracy {np.mean(proba.argmax(1) == y_test):.3f}  "
          f"ECE {expected_calibration_error(y_test, proba, classes=np.arange(10)):.3f}  "
          f"NLL {log_loss(y_test, proba, labels=np.arange(10)):.3f}")

# %%
# Reliability diagrams at one hundred labels (``n_bins=15``; empty bins are not drawn): points below the
# diagonal are over-confident bins, points above it under-confident ones
fig, axes = plt.subplots(2, 2, figsize=(9, 9))
for ax, (name, proba) in zip(axes.ravel(), at_100.items()):
    plot_reliability_diagram(y_test, proba, classes=np.arange(10), ax=ax, label=name)
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title(name)
fig.tight_layout()

# %%
# ECE and NLL against the number of random labels
sizes = [50, 100, 200, 400]
curves = {name: [] for name in at_100}
for n in sizes:
    for name, proba in (at_100 if n == 100 else predictions(n)).items():
        curves[name].append((expected_calibration_error(y_test, proba, classes=np.arange(10)),
                             log_loss(y_test, proba, labels=np.arange(10))))
fig, (ax_ece, ax_nll) = plt.subplots(1, 2, figsize=(10, 4))
for name, values in curves.items():
    ece, nll = np.array(values).T
    ax_ece.plot(sizes, ece, "o-", label=name)
    ax_nll.plot(sizes, nll, "o-", label=name)
ax_ece.set_ylabel("ECE (top label, 15 bins)")
ax_nll.set_ylabel("test NLL (nats)")
for ax in (ax_ece, ax_nll):
    ax.set_xlabel("random labels")
    ax.set_xscale("log")
    ax.set_xticks(sizes, [str(n) for n in sizes])
    ax.minorticks_off()
    ax.grid(alpha=0.3)
ax_ece.legend(fontsize=8)
fig.tight_layout()

# %%
# What this shows. With dropout 0.5 in the head and a few hundred labels, the mean of the
# dropout passes is *under*-confident: its points sit above the diagonal, and its ECE is the
# highest of the four, although its NLL is close to the others'. Averaging passes that
# disagree spreads probability; that is what makes BALD work, and what costs MC dropout's
# top-label calibration here. The deterministic network and the ensemble are better
# calibrated; temperature scaling helps most as labels grow, at the price of the held-out
# labels it is fitted on. ECE over 500 test images and a single seed is noisy: read the
# second figure's trends, not its wiggles.

if "__file__" in globals():  # run as a script: the figures are saved beside it, and shown if there is a display
    for number in plt.get_fignums():
        plt.figure(number).savefig(Path(__file__).with_name(f"{Path(__file__).stem}_{number}.png"), dpi=120)
    print(f"figures saved as {Path(__file__).with_suffix('')}_<n>.png")
plt.show()
