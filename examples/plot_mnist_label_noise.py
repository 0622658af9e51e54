"""
==========================================================
Label noise on MNIST: BALD, the noise filter and random
==========================================================

Figures 4–6 and Tables 2–3 of Anonymous (n.d., §5.1), drawn from the committed
results of the label-noise grid (``docs/results/noise``; see its page for the
protocol and the stage it has reached). The pool's labels are flipped
symmetrically, once per point; the initial, validation and test sets are
clean. The 0% panels reuse the ``gal2017`` runs. Two adaptive thresholds
are compared with the seed's fixed ones: ``dynamic``, the Bayes decision for
one label, and ``batch``, the Bayes decision for the batch (see
:func:`skdbal.noisy_labels.batch_threshold`). To run or resume the grid's first
stage (the results page lists the others)::

    SKDBAL_DATA=../shared/data skdbal experiment --preset gal2017 \\
        --strategies "filter(bald,dynamic),bald,random,filter(bald,0.1),filter(bald,0.25),filter(bald,batch)" \\
        --noise-rates 0.2 --seeds 1 2 3 --n-jobs 2 --torch-threads 1 --set n_queries=50 \\
        --set mask_seeding="'stream'" --out docs/results/noise
    skdbal report docs/results/noise --clean docs/results/gal2017
"""
import json
from pathlib import Path

import matplotlib.pyplot as plt

from skdbal.experiments import read_results
from skdbal.experiments.curves import plot_curves
from skdbal.experiments.label_noise import noise_markdown, plot_flipped, plot_noise_levels

here = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
results = here.parent / "docs" / "results"
n_queries = json.loads((results / "noise" / "grid.json").read_text())["preset"]["n_queries"]
noisy = [r for r in read_results(results / "noise" / "results.csv") if r["step"] <= n_queries]
reached = max(r["n_labels"] for r in noisy)
clean = [r for r in read_results(results / "gal2017" / "results.csv")
         if r["strategy"] in ("bald", "random") and r["variant"] == "bayesian" and r["n_labels"] <= reached]

# %%
# Figures 4 and 5: BALD, filtered BALD (both adaptive thresholds) and random, by noise rate
plot_noise_levels(noisy + clean, None, strategies=("bald", "filter(bald,dynamic)", "filter(bald,batch)", "random"),
                  title="MNIST: BALD, filtered BALD and random under label noise")

# %%
# Figure 6: the thresholds at 20% noise
plot_curves([r for r in noisy if r["noise_rate"] == 0.2], None,
            title="MNIST, 20% label noise: test accuracy (mean ± std over seeds)")

# %%
# The share of flipped labels in the training set: what the filter keeps out
plot_flipped(noisy, None, title="MNIST: flipped labels in the training set")

# %%
# Tables 2 and 3: rejects per step, their precision and recall against the true flips,
# beside the seed's own numbers
print(noise_markdown(noisy + clean, at_labels=(250, 500)))

if "__file__" in globals():  # run as a script: the figures are saved beside it, and shown if there is a display
    for number in plt.get_fignums():
        plt.figure(number).savefig(Path(__file__).with_name(f"{Path(__file__).stem}_{number}.png"), dpi=120)
    print(f"figures saved as {Path(__file__).with_suffix('')}_<n>.png")
plt.show()
