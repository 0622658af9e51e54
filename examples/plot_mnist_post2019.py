"""
==========================================================================
After 2019 on MNIST: EPIG, PowerBALD, BADGE, DDU and a Laplace posterior
==========================================================================

The strategies that came after BatchBALD, beside BALD, BatchBALD and random
acquisition, on MNIST and Repeated-MNIST with Kirsch et al.'s training (the
``kirsch2019`` preset: 20 balanced initial labels, 10 per step, 30 steps,
three seeds), drawn from the committed results of three grids in
``docs/results`` (``post2019_cuda``, ``post2019_cuda_laplace`` and
``post2019_cuda_repeated``; their page gives the machine and the numbers).
Every run ran on one lent GPU, so the curves compare runs of one device. To
run or resume them (about 3.5 minutes on an H100 with CUDA MPS; hours on two
CPU cores, where ``docs/results/run_post2019.sh`` runs them one at a time)::

    SKDBAL_DATA=../shared/data bash docs/results/run_post2019_cuda.sh
    skdbal report docs/results/post2019_cuda --cost
"""
from pathlib import Path

import matplotlib.pyplot as plt

from skdbal.experiments import read_results
from skdbal.experiments.report import cost_markdown, plot_curves

here = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
results = here.parent / "docs" / "results"


def rows(name):
    return read_results(results / name / "results.csv")


# %%
# MNIST. BatchBALD is first to 90% (a median of 60 acquired labels); BADGE,
# EPIG and stochastic power-BALD are no better than BALD, and DDU's one-pass
# density score is well behind it, though far ahead of random acquisition.
mnist = rows("post2019_cuda")
plot_curves(mnist, None, title="MNIST, Kirsch et al.'s CNN: seven strategies")
print(cost_markdown(mnist))

# %%
# The same network scored by BALD through its last-layer Laplace posterior
# (laplace-torch, prior precision by marginal likelihood) instead of its MC
# dropout: it is no better than random acquisition for its first twenty
# steps (below it at first), and pulls ahead of random only past 200 labels.
laplace = rows("post2019_cuda_laplace")
plot_curves([r for r in mnist if r["strategy"] in ("bald", "random")] + laplace, None,
            variants=("bayesian", "laplace"),
            title="MNIST: BALD with MC dropout (bayesian) and with a last-layer Laplace posterior")
print(cost_markdown(laplace))

# %%
# Repeated-MNIST (every image three times, with a little noise): top-k BALD
# takes copies and falls behind the strategies that diversify a batch
# (BatchBALD, BADGE, power-BALD's sampling) until about 170 labels.
repeated = rows("post2019_cuda_repeated")
plot_curves(repeated, None, title="Repeated-MNIST, Kirsch et al.'s CNN: seven strategies")
print(cost_markdown(repeated))

if "__file__" in globals():  # run as a script: the figures are saved beside it, and shown if there is a display
    for number in plt.get_fignums():
        plt.figure(number).savefig(Path(__file__).with_name(f"{Path(__file__).stem}_{number}.png"), dpi=120)
    print(f"figures saved as {Path(__file__).with_suffix('')}_<n>.png")
plt.show()
