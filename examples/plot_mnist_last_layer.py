"""
=========================================================
A Bayesian last layer on MNIST: analytic against MFVI
=========================================================

Figure 3 of Anonymous (n.d., §4), drawn from the committed results of the
``gal2017_last_layer`` grid (``docs/results/gal2017_last_layer``): the
Bayesian CNN's penultimate features, frozen at each step, carry a Bayesian
linear regression on one-hot targets, with the exact posterior (analytic) or
its mean-field approximation (MFVI); points are acquired by the trace of the
predictive covariance. Test RMSE and mean predictive variance against acquired
images. The digits version that runs in seconds is
:ref:`sphx_glr_auto_examples_plot_bayesian_last_layer.py`. To run the grid again::

    SKDBAL_DATA=../shared/data skdbal experiment --preset gal2017 --last-layer analytic,mfvi \\
        --strategies predictive_variance --seeds 1 --out docs/results/gal2017_last_layer
    skdbal report docs/results/gal2017_last_layer
"""
from pathlib import Path

import matplotlib.pyplot as plt

from skdbal.experiments import read_results
from skdbal.experiments.last_layer import last_layer_markdown, plot_last_layer

here = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
rows = read_results(here.parent / "docs" / "results" / "gal2017_last_layer" / "results.csv")

# %%
# Figure 3: test RMSE and mean predictive variance against acquired images
plot_last_layer(rows, None, title="MNIST, Bayesian last layer: analytic against mean-field VI")

# %%
# The numbers at a few points of the curves
print(last_layer_markdown(rows))

if "__file__" in globals():  # run as a script: the figures are saved beside it, and shown if there is a display
    for number in plt.get_fignums():
        plt.figure(number).savefig(Path(__file__).with_name(f"{Path(__file__).stem}_{number}.png"), dpi=120)
    print(f"figures saved as {Path(__file__).with_suffix('')}_<n>.png")
plt.show()
