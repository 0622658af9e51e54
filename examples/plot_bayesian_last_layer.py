"""
=====================================================
A Bayesian last layer: analytic against mean-field VI
=====================================================

Anonymous (n.d., §4): keep a CNN's features ``phi(x)`` frozen and put Bayesian linear
regression on one-hot targets over them, with the exact matrix-normal
posterior or its mean-field approximation. Fitted to the same labels, both
give the same predictive mean; mean field ignores the correlations between
weights and so underestimates the posterior variance of each weight, by
orders of magnitude here (note the log scale).

Here on scikit-learn's digits (``8 × 8`` pixels): a small CNN trained on 300 labelled images
gives the features, and an active learner then acquires labels for the last
layer alone by the trace of its predictive covariance
(:func:`skdbal.acquisition.predictive_variance`); random acquisition is the
baseline. The left panel is the test RMSE, the right the mean predictive
variance, against acquired images (Anonymous, n.d., Fig. 3). The MNIST
version, from the committed runs, is
:ref:`sphx_glr_auto_examples_plot_mnist_last_layer.py`.

Two things to read in the figure. The two inferences' RMSE curves differ
although their means agree on the same labels: each acquires by its own
variances, so after the first step they are fitted to different labels.
And the RMSE *rises* for a while before it falls, with random acquisition
too: that is the double descent of a weakly regularised linear fit. The
features' non-zero dimensions are printed below, and ``prior_variance=1.0``
with ``noise_variance=0.1`` amount to a ridge penalty of ``0.1``, small next to the
features' scale, and the posterior mean is at its worst when the labels are
about as many as the dimensions. Fitting the evidence
(``fit_hyperparameters=True``) or a larger noise variance (``noise_variance=1.0``)
regularises the fit more, which is the remedy for the bump.
"""
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from skdbal import ActiveLearner, BayesianLinearRegression
from skdbal.acquisition import predictive_variance, random
from skdbal.experiments.quickstart import digits_classifier, load_digits_images

X_pool, X_test, y_pool, y_test = load_digits_images()
onehot = np.eye(10)

# the feature extractor, trained once on 300 images outside the pool
net = digits_classifier(random_state=0).fit(X_pool[-300:], y_pool[-300:])
X_pool, y_pool = X_pool[:-300], y_pool[:-300]

# The features are frozen, so compute them once. (``make_pipeline(NetFeatures(net),
# BayesianLinearRegression())`` is the same model on raw images, and works with
# ActiveLearner and GridSearchCV, but recomputes the features at every query.)
F_pool, F_test = net.transform(X_pool), net.transform(X_test)
print(f"features: {F_pool.shape[1]} dimensions, {np.linalg.matrix_rank(F_pool)} of them non-degenerate")

fig, (ax_rmse, ax_var) = plt.subplots(1, 2, figsize=(10, 4))
runs = [("analytic", predictive_variance, "-"), ("mfvi", predictive_variance, "-"),
        ("analytic", random, "--")]
for inference, strategy, style in runs:
    name = f"{inference}, {'variance' if strategy is predictive_variance else 'random'} acquisition"
    layer = BayesianLinearRegression(inference=inference, noise_variance=0.1)
    learner = ActiveLearner(layer, strategy, random_state=0, verbose=False)
    history = learner.simulate(F_pool, onehot[y_pool], n_queries=20, n_instances=10,
                               X_test=F_test, y_test=onehot[y_test])
    acquired = [r["n_labels"] - history[0]["n_labels"] for r in history]
    # the mean predictive variance on the test set after each step
    mean_var = []
    for step in range(len(history)):
        idx = np.concatenate([r["query_indices"] for r in history[:step + 1]])
        fitted = BayesianLinearRegression(inference=inference, noise_variance=0.1).fit(
            F_pool[idx], onehot[y_pool[idx]])
        mean_var.append(fitted.predictive_variance(F_test).mean())
    ax_rmse.plot(acquired, [r["rmse"] for r in history], style, label=name)
    ax_var.plot(acquired, mean_var, style, label=name)
    rmse = [r["rmse"] for r in history]
    print(f"{name:32s} RMSE {rmse[0]:.3f} -> max {max(rmse):.3f} -> {rmse[-1]:.3f}, "
          f"accuracy {history[-1]['accuracy']:.3f}, mean predictive variance {mean_var[-1]:.4f}")

ax_rmse.set(xlabel="acquired images", ylabel="test RMSE (one-hot targets)", title="test RMSE")
ax_var.set(xlabel="acquired images", ylabel="mean predictive variance (trace, log scale)", yscale="log",
           title="mean predictive variance on the test set")
for ax in (ax_rmse, ax_var):
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
fig.suptitle("digits, Bayesian last layer on frozen CNN features")
fig.tight_layout()
if "__file__" in globals():  # run as a script: the figures are saved beside it, and shown if there is a display
    for number in plt.get_fignums():
        plt.figure(number).savefig(Path(__file__).with_name(f"{Path(__file__).stem}_{number}.png"), dpi=120)
    print(f"figures saved as {Path(__file__).with_suffix('')}_<n>.png")
plt.show()
