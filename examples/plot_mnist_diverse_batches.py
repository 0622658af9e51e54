"""
===================================================================
Diverse batches on MNIST: the diversity penalty, k-means, BatchBALD
===================================================================

Figure 7 of Anonymous (n.d., §5.2), its k-means initial set, and BatchBALD
(Kirsch et al., 2019), drawn from the committed results of five grids in
``docs/results`` (``diversity``, ``initial_set``, ``repeated``, ``batchbald``
and ``kirsch2019``; their page gives the protocol, the machine and the
numbers). Every run of these grids ran on one GPU, with BALD's baseline
rerun there too, because a GPU's numbers differ from a CPU's by as much as
the effects measured here. To run or resume the first of them::

    SKDBAL_DATA=../shared/data skdbal experiment --preset gal2017 \\
        --strategies "bald,diverse(bald,-0.1),diverse(bald,0.05),diverse(bald,0.1),diverse(bald,0.5)" \\
        --seeds 1 2 3 --n-jobs 2 --torch-threads 1 --set n_queries=20 --set mask_seeding="'stream'" \\
        --out docs/results/diversity
    skdbal report docs/results/diversity
"""
from pathlib import Path

import matplotlib.pyplot as plt

from skdbal.experiments import read_results
from skdbal.experiments.report import diversity_markdown, plot_curves, plot_diversity_weights

here = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
results = here.parent / "docs" / "results"


def rows(name):
    return read_results(results / name / "results.csv")


# %%
# Figure 7: what each diversity weight adds to BALD, seed by seed. No weight
# is ahead of BALD over the first five steps, and the large one (0.5) is
# several points behind there.
diversity = rows("diversity")
plot_diversity_weights(diversity, None, title="MNIST: accuracy gain of the diversity penalty over BALD")
print(diversity_markdown(diversity))

# %%
# The k-means initial sets start far ahead of a random balanced set of the
# same size (20 labels), and the lead is gone by about 150 labels.
initial = rows("initial_set")
plot_curves(initial, None, variants=("bayesian", "bayesian-init-kmeans", "bayesian-init-kmeans_per_class"),
            title="MNIST, BALD from three initial sets of 20 labels")

# %%
# On Repeated-MNIST (every image three times, with a little noise) top-k
# BALD picks copies; BatchBALD, which scores the batch jointly, does not.
plot_curves(rows("repeated"), None, title="Repeated-MNIST: BALD, BatchBALD, the penalty and random")

# %%
# With Kirsch et al.'s training (the ``kirsch2019`` preset) BatchBALD reaches
# 90% and 95% test accuracy after 70 and 160 acquired labels (medians over
# three seeds), below the published 90 and 200.
plot_curves(rows("kirsch2019"), None, title="MNIST, Kirsch et al.'s training: BALD, BatchBALD and random")

if "__file__" in globals():  # run as a script: the figures are saved beside it, and shown if there is a display
    for number in plt.get_fignums():
        plt.figure(number).savefig(Path(__file__).with_name(f"{Path(__file__).stem}_{number}.png"), dpi=120)
    print(f"figures saved as {Path(__file__).with_suffix('')}_<n>.png")
plt.show()
