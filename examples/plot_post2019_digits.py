"""
=================================================================
After 2019: PowerBALD, EPIG, BADGE and DDU beside BALD, on digits
=================================================================

Four strategies from after BatchBALD, each a drop-in for ``bald``:

- **PowerBALD** (Kirsch et al., TMLR 2023): the batch is *drawn* with
  probabilities proportional to BALD's scores, not taken as their top-k
  (:func:`skdbal.acquisition.stochastic_batch`, ``"power"``, ``β = 1``);
- **EPIG** (Bickford Smith et al., AISTATS 2023): what a label tells about the
  predictions on target inputs, here 100 pool images
  (:class:`skdbal.acquisition.EPIG`);
- **BADGE** (Ash et al., ICLR 2020): k-means++ over last-layer gradient
  embeddings of one deterministic pass (:class:`skdbal.acquisition.BADGE`);
- **DDU** (Mukhoti et al., CVPR 2023): the least dense features under one
  Gaussian per class (:class:`skdbal.DDUClassifier` and
  :class:`skdbal.acquisition.DDU`): one forward pass, no sampling.

Two seeds of seven batches of ten on scikit-learn's digits, with the small
Bayesian CNN of the quick start (T = 20 passes). The curves are the mean test
accuracy over the two seeds; the printed table adds each strategy's query time per
step on this machine. On so few labels and seeds the ranking is noise as much
as signal: the comparison is the complete MNIST grid on a GPU,
``docs/results/post2019_cuda`` (three seeds; its page gives each median's
noise and the gallery page "After 2019 on MNIST" draws it), not the partial
CPU grid ``docs/results/post2019``.
"""

import matplotlib.pyplot as plt
import numpy as np

from skdbal import ActiveLearner, DDUClassifier
from skdbal.acquisition import BADGE, DDU, EPIG, bald, random, stochastic_batch
from skdbal.experiments.quickstart import digits_classifier, load_digits_images

X_pool, X_test, y_pool, y_test = load_digits_images()
strategies = {
    "BALD (top-k)": (bald, False),
    "PowerBALD (β = 1)": (stochastic_batch(bald, "power", 1.0), False),
    "EPIG (100 targets)": (EPIG(n_targets=100), False),
    "BADGE": (BADGE(), False),
    "DDU": (DDU(), True),
    "random": (random, False),
}
curves, costs = {}, {}
for name, (strategy, density) in strategies.items():
    runs, spent = [], []
    for seed in (0, 1):
        net = digits_classifier(random_state=seed)
        model = DDUClassifier(net, reg_covar=1e-2) if density else net
        learner = ActiveLearner(model, strategy, random_state=seed, verbose=False)
        rng = np.random.RandomState(seed)
        initial = np.concatenate([rng.choice(np.flatnonzero(y_pool == c), 2, replace=False) for c in range(10)])
        history = learner.simulate(X_pool, y_pool, n_queries=7, n_instances=10, initial_idx=initial,
                                   X_test=X_test, y_test=y_test)
        runs.append([r["accuracy"] for r in history])
        spent += [r["query_time"] for r in history[1:] if "query_time" in r]
    curves[name] = ([r["n_labels"] for r in history], np.mean(runs, axis=0))
    costs[name] = float(np.median(spent)) if spent else float("nan")
    print(f"{name:20s} accuracy at {history[-1]['n_labels']} labels: {curves[name][1][-1]:.3f} "
          f"(seeds {', '.join(f'{r[-1]:.3f}' for r in runs)}); query {costs[name]:.2f} s per step")

# %%
# Mean test accuracy over two seeds
# ---------------------------------
fig, ax = plt.subplots(figsize=(7, 4.2))
for (name, (labels, acc)), style in zip(curves.items(), ["-o", "-s", "-^", "-d", "-v", "--x"]):
    ax.plot(labels, acc, style, label=name)
ax.set_xlabel("labelled images (20 initial + acquired)")
ax.set_ylabel("test accuracy (mean of 2 seeds)")
ax.grid(alpha=0.3)
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()
