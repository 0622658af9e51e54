"""
==================================================
Reproducing Gal et al. (2017) on MNIST: the curves
==================================================

Figures 1 and 2 and Table 1 of Gal, Islam & Ghahramani (2017), drawn from the
committed results of the ``gal2017`` grid (``docs/results/gal2017``): test
accuracy against labelled images for the five acquisition functions, and the
Bayesian CNN against its deterministic twin for max entropy and variation
ratios. The grid itself takes hours on a CPU; this page only reads its
``results.csv``. To run it again (it resumes where it stopped)::

    SKDBAL_DATA=../shared/data skdbal experiment --preset gal2017 \\
        --strategies bald,variation_ratios,random,max_entropy,mean_std \\
        --seeds 1 2 3 --n-jobs 2 --deterministic-baseline --out docs/results/gal2017
    skdbal report docs/results/gal2017
"""
from pathlib import Path

import matplotlib.pyplot as plt

from skdbal.experiments import read_results
from skdbal.experiments.curves import plot_curves, table_markdown

here = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
rows = read_results(here.parent / "docs" / "results" / "gal2017" / "results.csv")

# %%
# Figure 1: the acquisition functions (3 seeds each, 100 acquisitions of 10)
plot_curves(rows, None, title="MNIST, Bayesian CNN: test accuracy (mean ± std over seeds)")

# %%
# Figure 2: the Bayesian CNN (solid) against the deterministic one (dashed)
plot_curves(rows, None, variants=("bayesian", "deterministic"), strategies=("max_entropy", "variation_ratios"),
            title="Bayesian (solid) against deterministic (dashed) scoring")

# %%
# Table 1: labels to 90% and 95% test accuracy, beside the published numbers
print(table_markdown(rows))

if "__file__" in globals():  # run as a script: the figures are saved beside it, and shown if there is a display
    for number in plt.get_fignums():
        plt.figure(number).savefig(Path(__file__).with_name(f"{Path(__file__).stem}_{number}.png"), dpi=120)
    print(f"figures saved as {Path(__file__).with_suffix('')}_<n>.png")
plt.show()
