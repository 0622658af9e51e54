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
import json
from pathlib import Path

import matplotlib.pyplot as plt

from skdbal.experiments import read_results
from skdbal.experiments.curves import plot_curves
from skdbal.experiments.diversity_weights import diversity_markdown, plot_diversity_weights

here = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
results = here.parent / "docs" / "results"


def rows(name):
    return read_results(results / name / "results.csv")


# %%
# Figure 7: what each diversity weight adds to BALD, seed by seed. No weight
# is ahead of BALD over the first five steps, and the large one (``diverse(bald,0.5)``) is
# several points behind there.
diversity = rows("diversity")
plot_diversity_weights(diversity, None, title="MNIST: accuracy gain of the diversity penalty over BALD")
print(diversity_markdown(diversity))

# %%
# The k-means initial sets start far ahead of a random balanced set of the
# same size. The lines printed give, from the mean curves in
# ``initial_set/facts.json``, each set's lead at the start, the acquired
# labels at which it is first not ahead, and from which, if ever, it stays behind.
initial = rows("initial_set")
initial_facts = json.loads((results / "initial_set" / "facts.json").read_text())
balanced = initial_facts["groups"]["bald"]
n0 = initial_facts["n_initial"]
for key in ("bald__bayesian_init_kmeans", "bald__bayesian_init_kmeans_per_class"):
    group = initial_facts["groups"][key]
    lead = [a - b for a, b in zip(group["mean_accuracy"], balanced["mean_accuracy"])]
    labels = group["labels"][:len(lead)]
    first_not = next((n for n, d in zip(labels, lead) if d <= 0), None)
    never_again = next((n for i, n in enumerate(labels) if all(d <= 0 for d in lead[i:])), None)
    print(f"{group['variant']}: {100 * lead[0]:+.1f} points at the start; first not ahead at "
          f"{'-' if first_not is None else f'{first_not - n0:.0f}'} acquired labels, never ahead again from "
          f"{'-' if never_again is None else f'{never_again - n0:.0f}'}")
plot_curves(initial, None, variants=("bayesian", "bayesian-init-kmeans", "bayesian-init-kmeans_per_class"),
            title="MNIST, BALD from three initial sets of 20 labels")

# %%
# On Repeated-MNIST (every image three times, with a little noise) top-k
# BALD picks copies; BatchBALD, which scores the batch jointly, does not.
plot_curves(rows("repeated"), None, title="Repeated-MNIST: BALD, BatchBALD, the penalty and random")

# %%
# With Kirsch et al.'s training (the ``kirsch2019`` preset), the acquired
# labels BatchBALD needs to reach 90% and 95% test accuracy (medians over
# three seeds, from ``kirsch2019/facts.json``) are printed beside the
# published figures.
kirsch = json.loads((results / "kirsch2019" / "facts.json").read_text())
for threshold, published in (("acc90", 90), ("acc95", 200)):
    median = kirsch["groups"]["batch_bald"][threshold]["median"]
    print(f"BatchBALD, {threshold[3:]}%: {median - kirsch['n_initial']:.0f} acquired labels (published: {published})")
plot_curves(rows("kirsch2019"), None, title="MNIST, Kirsch et al.'s training: BALD, BatchBALD and random")

if "__file__" in globals():  # run as a script: the figures are saved beside it, and shown if there is a display
    for number in plt.get_fignums():
        plt.figure(number).savefig(Path(__file__).with_name(f"{Path(__file__).stem}_{number}.png"), dpi=120)
    print(f"figures saved as {Path(__file__).with_suffix('')}_<n>.png")
plt.show()
