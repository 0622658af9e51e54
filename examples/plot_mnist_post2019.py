"""
==========================================================================
After 2019 on MNIST: EPIG, PowerBALD, BADGE, DDU and a Laplace posterior
==========================================================================

The strategies that came after BatchBALD, beside BALD, BatchBALD and random
acquisition, on MNIST and Repeated-MNIST with Kirsch et al.'s training (the
``kirsch2019`` preset: 20 balanced initial labels, 10 per step, three seeds),
drawn from the committed results of three grids in ``docs/results``
(``post2019_cuda``, ``post2019_cuda_laplace`` and ``post2019_cuda_repeated``;
their page gives the machine and compares the strategies with their noise).
Every run ran on one NVIDIA H100 GPU, so the curves compare runs of one device. Every
figure below is computed here from those results. To run or resume them
(minutes on an H100 with CUDA MPS, where the runs share the GPU; hours on two
CPU cores, where ``docs/results/run_post2019.sh`` runs them one at a time)::

    SKDBAL_DATA=../shared/data bash docs/results/run_post2019_cuda.sh
    skdbal report docs/results/post2019_cuda --cost
"""
from pathlib import Path

import matplotlib.pyplot as plt

from skdbal.experiments import read_results
from skdbal.experiments.curves import cost_markdown, plot_curves
from skdbal.experiments.grouping import group_runs
from skdbal.experiments.seed_variance import above_from
from skdbal.metrics import curves_from_histories, labels_to_accuracy

here = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
results = here.parent / "docs" / "results"


def rows(name):
    return read_results(results / name / "results.csv")


def order(rows, threshold):
    """The strategies by the median over seeds of the acquired labels to ``threshold`` (a run that never
    reaches it counts as more than any that does; "not reached" where half the seeds do not)."""
    n_initial = min(r["n_labels"] for r in rows)
    medians = sorted((labels_to_accuracy(runs, threshold, "median")["value"] - n_initial, strategy)
                     for (_, strategy, _), runs in group_runs(rows).items())
    return ", ".join(f"{s} {m:.0f}" if m == m else f"{s} not reached" for m, s in
                     sorted(medians, key=lambda p: (p[0] != p[0], p[0])))


def mean_curve(rows, strategy, variant="bayesian"):
    runs = next(runs for (_, s, v), runs in group_runs(rows).items() if (s, v) == (strategy, variant))
    labels, acc = curves_from_histories(runs)
    return labels, acc.mean(axis=0)


# %%
# MNIST: the strategies ordered by the median number of acquired labels to 90%
# and to 95% test accuracy, then the table of ``skdbal report --cost``; the
# runs' own step times add up to the seconds printed last.
mnist = rows("post2019_cuda")
plot_curves(mnist, None, title="MNIST, Kirsch et al.'s CNN: seven strategies")
print("to 90%:", order(mnist, 0.90))
print("to 95%:", order(mnist, 0.95))
print(cost_markdown(mnist))
longest = max(sum(float(r["time"]) for r in run) for runs in group_runs(mnist).values() for run in runs)
print(f"the longest run's steps took {longest:.0f} s in all")

# %%
# The same network scored by BALD through its last-layer Laplace posterior
# (laplace-torch, prior precision by marginal likelihood) instead of its MC
# dropout, beside random acquisition: the first line printed is the number of
# acquired labels from which its mean curve stays above random's.
laplace = rows("post2019_cuda_laplace")
labels, with_laplace = mean_curve(laplace, "bald", "laplace")
_, with_random = mean_curve(mnist, "random")
n = min(len(with_laplace), len(with_random))
print(f"Laplace BALD above random from {above_from(labels[:n], with_laplace[:n], with_random[:n]) - labels[0]:.0f} "
      "acquired labels on")
plot_curves([r for r in mnist if r["strategy"] in ("bald", "random")] + laplace, None,
            variants=("bayesian", "laplace"),
            title="MNIST: BALD with MC dropout (bayesian) and with a last-layer Laplace posterior")
print(cost_markdown(laplace))

# %%
# Repeated-MNIST (every image three times, with a little noise), where top-k
# BALD can take copies of one image into a batch and the strategies that
# diversify a batch (BatchBALD, BADGE, power-BALD's sampling) need not: the
# order by median acquired labels to each accuracy, then the report's table.
repeated = rows("post2019_cuda_repeated")
plot_curves(repeated, None, title="Repeated-MNIST, Kirsch et al.'s CNN: seven strategies")
print("to 90%:", order(repeated, 0.90))
print("to 95%:", order(repeated, 0.95))
print(cost_markdown(repeated))

if "__file__" in globals():  # run as a script: the figures are saved beside it, and shown if there is a display
    for number in plt.get_fignums():
        plt.figure(number).savefig(Path(__file__).with_name(f"{Path(__file__).stem}_{number}.png"), dpi=120)
    print(f"figures saved as {Path(__file__).with_suffix('')}_<n>.png")
plt.show()
