"""
==================================================
Reproducing Gal et al. (2017) on MNIST: the curves
==================================================

Figures 1 and 2 of Gal, Islam & Ghahramani (2017) from the committed results
of ``skdbal experiment --preset gal2017`` (see ``docs/results``): test
accuracy against labelled images for the five acquisition functions, and the
Bayesian CNN against its deterministic twin for max entropy and variation
ratios. Running the grid itself takes hours on a CPU; this script only reads
its ``results.csv`` and rewrites the table and figures.
"""
from pathlib import Path

from skdbal.experiments import read_results
from skdbal.experiments.report import plot_curves, table_markdown

here = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
results = here.parent / "docs" / "results" / "gal2017" / "results.csv"
rows = read_results(results)

# %%
# Figure 1: acquisition functions
plot_curves(rows, "gal2017_curves.png", title="MNIST, Bayesian CNN (mean ± std over seeds)")

# %%
# Figure 2: Bayesian against deterministic
if any(r["variant"] == "deterministic" for r in rows):
    plot_curves(rows, "gal2017_deterministic.png", variants=("bayesian", "deterministic"),
                strategies=("max_entropy", "variation_ratios"))

# %%
# Table 1: labels to 90% and 95% accuracy
print(table_markdown(rows))
