"""
=================================================================
Regression: MC dropout, the variance split and EGL acquisition
=================================================================

:class:`skdbal.MCDropoutRegressor` is a skorch regressor that samples ``T``
forward passes with dropout on. With ``heteroscedastic=True`` each pass also
predicts a noise variance, so the predictive variance splits in two
(Kendall and Gal, 2017): *epistemic*, the spread of the passes' means, which
more labels shrink, and *aleatoric*, the mean predicted noise, which they do
not.

Two strategies read it:

- :data:`~skdbal.acquisition.predictive_variance` acquires where the total
  variance is largest;
- :data:`~skdbal.acquisition.egl` (EGL) acquires where
  the expected squared norm of the gradient a new label would give is
  largest. In seed 004's closed form that is the same predictive variance
  around the network's output, weighted by ``‖∇_θ f(x)‖²``: how strongly the
  label would move the weights.

A third reads one part of the split:
``PredictiveVariance(part="epistemic")`` acquires where the passes disagree
most, the regression counterpart of BALD.

The task is 1-D: ``y = sin(2x)`` on ``[−3, 3]``, with noise whose standard
deviation is ``0.05`` for ``x < 1`` and ``0.4`` beyond (a third of the pool). The
network has two hidden layers of 64 units with dropout 0.25 and a
heteroscedastic head. The first figure is the model fitted to its initial random
labels: the two bands, and below them the three scores over ``x``, with the
10 points each would acquire next. The second is the test RMSE against the
labels, 10 acquired at a time, averaged over 3 seeds, with random
acquisition as the baseline.

What the run shows (the printed lines give the numbers):

- The heteroscedastic head learns the noise only roughly from its initial labels. It
  also reports a wide aleatoric band at the left edge, where the noise is
  small but the mean misses the curve: the likelihood lets the predicted
  variance absorb a misfit.
- The total variance is largest where the noise is, so
  ``predictive_variance`` spends about two thirds of its labels in the noisy
  third of the input range, where each label says least about ``sin(2x)``.
- EGL does so even more (about four fifths). Its weight ``‖∇_θ f(x)‖²``
  grows with ``|x|``, because the first layer's gradient is proportional to
  the input, so it also favours the edges, and the right edge is noisy. EGL
  is not invariant to how the inputs are scaled.
- The epistemic part spends its labels about in proportion to the pool,
  and its RMSE stays close to random's.
- None of the three beats random acquisition here within this budget. On a
  smooth 1-D function random points cover the input well, and MC dropout's
  epistemic variance is a rough guide to where the fit is wrong.

"""
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch

from skdbal import ActiveLearner, MCDropoutRegressor
from skdbal.acquisition import PredictiveVariance, egl, predictive_variance, random

torch.set_num_threads(1)  # small networks: one thread is faster on a few cores


def make_data(n, rng):
    x = rng.uniform(-3, 3, size=n)
    noise = np.where(x < 1, 0.05, 0.4)
    return x.reshape(-1, 1).astype(np.float32), (np.sin(2 * x) + noise * rng.normal(size=n)).astype(np.float32)


X_pool, y_pool = make_data(400, np.random.RandomState(0))
X_test, y_test = make_data(500, np.random.RandomState(1))


def regressor(seed):
    return MCDropoutRegressor(module__hidden_layer_sizes=(64, 64), module__dropout=0.25, heteroscedastic=True,
                              max_epochs=500, lr=3e-3, n_samples=20, random_state=seed)


# %%
# The fitted model and the two scores
first = np.random.RandomState(0).choice(len(X_pool), 20, replace=False)
reg = regressor(0).fit(X_pool[first], y_pool[first])
grid = np.linspace(-3, 3, 300, dtype=np.float32).reshape(-1, 1)
d = reg.decompose(grid)
mean = reg.predict(grid)

fig, (ax, ax_s) = plt.subplots(2, 1, figsize=(8, 6), sharex=True, gridspec_kw={"height_ratios": [3, 2]})
ax.fill_between(grid[:, 0], mean - 2 * np.sqrt(d.total), mean + 2 * np.sqrt(d.total), color="C0", alpha=0.15,
                label="±2 sd, total")
ax.fill_between(grid[:, 0], mean - 2 * np.sqrt(d.epistemic), mean + 2 * np.sqrt(d.epistemic), color="C0",
                alpha=0.35, label="±2 sd, epistemic")
ax.plot(grid[:, 0], mean, color="C0", label="MC mean")
ax.plot(grid[:, 0], np.sin(2 * grid[:, 0]), "k:", lw=1, label="sin(2x)")
ax.scatter(X_pool[first, 0], y_pool[first], color="k", zorder=3, s=20, label="20 labels")
ax.set(ylabel="y", ylim=(-3, 3), title="MCDropoutRegressor fitted to 20 labels (heteroscedastic head)")
ax.legend(fontsize=8, ncol=3, loc="lower left")

shown = {"predictive variance": predictive_variance, "EGL": egl,
         "epistemic variance": PredictiveVariance(part="epistemic")}
for k, ((name, strategy), colour) in enumerate(zip(shown.items(), ("C1", "C2", "C3"))):
    s = strategy.acquisition_scores(reg, grid)
    ax_s.plot(grid[:, 0], s / s.max(), color=colour, label=f"{name} (scaled to max 1)")
    picks, _ = strategy(reg, X_pool, n_instances=10)
    ax_s.plot(X_pool[picks, 0], np.full(10, -0.07 * (k + 1)), "|", color=colour, ms=8)
    print(f"{name:20s} next 10 picks: {np.sum(X_pool[picks, 0] >= 1)} in the noisy region x >= 1")
ax_s.set(xlabel="x", ylabel="score; next 10 picks", ylim=(-0.25, 1.05))
ax_s.legend(fontsize=8)
ax_s.grid(alpha=0.3)
fig.tight_layout()

# %%
# Active learning: test RMSE against labels
strategies = {"random": random, "predictive variance": predictive_variance,
              "EGL": egl, "epistemic variance": PredictiveVariance(part="epistemic")}
n_queries, n_instances = 6, 10
fig2, ax2 = plt.subplots(figsize=(6, 4))
for (name, strategy), style in zip(strategies.items(), ("k--", "C1-", "C2-", "C3-")):
    curves, noisy = [], []
    for seed in range(3):
        start = np.random.RandomState(seed).choice(len(X_pool), 20, replace=False)
        learner = ActiveLearner(regressor(seed), strategy, random_state=seed, verbose=False)
        history = learner.simulate(X_pool, y_pool, n_queries=n_queries, n_instances=n_instances,
                                   initial_idx=start, X_test=X_test, y_test=y_test)
        curves.append([r["rmse"] for r in history])
        acquired = np.concatenate([r["query_indices"] for r in history[1:]])
        noisy.append(np.mean(X_pool[acquired, 0] >= 1))
    labels = [r["n_labels"] for r in history]
    curve = np.mean(curves, axis=0)
    ax2.plot(labels, curve, style, label=name)
    print(f"{name:20s} test RMSE {curve[0]:.3f} -> {curve[-1]:.3f} at {labels[-1]} labels; "
          f"{100 * np.mean(noisy):.0f}% of its picks at x >= 1 (a third of the pool)")
ax2.set(xlabel="labelled points", ylabel="test RMSE (mean of 3 seeds)",
        title="1-D regression with input-dependent noise")
ax2.grid(alpha=0.3)
ax2.legend()
fig2.tight_layout()
if "__file__" in globals():  # run as a script: the figures are saved beside it, and shown if there is a display
    for number in plt.get_fignums():
        plt.figure(number).savefig(Path(__file__).with_name(f"{Path(__file__).stem}_{number}.png"), dpi=120)
    print(f"figures saved as {Path(__file__).with_suffix('')}_<n>.png")
plt.show()
