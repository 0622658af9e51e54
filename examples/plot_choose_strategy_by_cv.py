"""
==========================================
Choosing a strategy by cross-validation
==========================================

Which acquisition set-up should a new labelling project use? An
:class:`~skdbal.ActiveLearningBudget` turns a set-up (strategy, batch size,
model, number of MC samples, decorators) into a scikit-learn estimator whose
``fit(X, y)`` spends a fixed labelling budget on ``X``, asking ``y`` as the
oracle, and whose score is measured on held-out data. scikit-learn's
:class:`~sklearn.model_selection.GridSearchCV` then compares set-ups on
held-out folds, as it compares any hyperparameters.

Here, on scikit-learn's digits (flattened, ``8 × 8`` pixels), a logistic regression
starts from 2 labelled images per class and gets a budget of two hundred more,
either 20 rounds of 10 or 10 rounds of 20, chosen by least confidence (``variation_ratios``,
``1 - max_c p_c`` for a model with one predictive distribution), by
predictive entropy (``max_entropy``) or at random. Every set-up spends the
same labels (the initial ones and the budget) of each training fold.

Two scores are reported for each set-up: the held-out accuracy of the final
model (after the whole budget), and, with ``score_curve=True``, the normalised
area under the held-out learning curve (the mean accuracy over the budget),
which also rewards getting there with fewer labels. The labels of the
training fold act as the oracle: this assumes they are what an annotator
would answer.

The estimator is a logistic regression so that the whole search runs in
seconds; an :class:`~skdbal.MCDropoutClassifier` with ``"bald"`` is searched
the same way (``estimator__n_samples`` makes the number of MC samples T a
grid axis). scikit-learn's BLAS threads are pinned to one: on these tiny
fits more threads only wait on each other.
"""
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, RepeatedStratifiedKFold, cross_validate
from threadpoolctl import threadpool_limits

from skdbal import ActiveLearningBudget

threadpool_limits(limits=1)  # one BLAS thread: the fits on 20-220 labels are too small to split

X, y = load_digits(return_X_y=True)
X = X / 16.0
strategies = ["variation_ratios", "max_entropy", "random"]
budget = ActiveLearningBudget(LogisticRegression(max_iter=500, tol=1e-3), n_queries=20, n_instances=10,
                              random_state=0, score_curve=True)
# equal budgets: 20 rounds of 10 labels, or 10 rounds of 20
grid = [{"query_strategy": strategies, "n_queries": [20], "n_instances": [10]},
        {"query_strategy": strategies, "n_queries": [10], "n_instances": [20]}]
# 3 folds, 3 times over: the rows of digits come ordered by writer, so the folds are shuffled
cv = RepeatedStratifiedKFold(n_splits=3, n_repeats=3, random_state=0)
scoring = {"area": lambda est, X, y: est.score(X, y),  # score_curve=True: the area under the curve
           "final": "accuracy"}                        # the final model's accuracy
search = GridSearchCV(budget, grid, cv=cv, scoring=scoring, refit="area").fit(X, y)

# %%
# The cross-validation table
# --------------------------
# Mean and standard deviation over the 9 held-out folds; ranked by the area.
results = search.cv_results_
print(f"{'strategy':<18}{'batch':>6}{'final accuracy':>20}{'area under curve':>22}{'rank':>6}")
for i in np.argsort(results["rank_test_area"]):
    print(f"{results['param_query_strategy'][i]:<18}{results['param_n_instances'][i]:>6}"
          f"{results['mean_test_final'][i]:>13.3f} ± {results['std_test_final'][i]:.3f}"
          f"{results['mean_test_area'][i]:>15.3f} ± {results['std_test_area'][i]:.3f}"
          f"{results['rank_test_area'][i]:>6}")
print(f"chosen by the area: {search.best_params_}")

# %%
# Held-out learning curves
# ------------------------
# The candidates with batches of 10: each fold's model of every round is
# scored on that fold's held-out part (``learning_curve``), and the curves
# are averaged over the 9 folds; the band is one standard deviation over
# the folds.
fig, ax = plt.subplots(figsize=(6, 4))
means = {}
for strategy in strategies:
    candidate = clone(budget).set_params(query_strategy=strategy)
    runs = cross_validate(candidate, X, y, cv=cv, return_estimator=True, return_indices=True)
    curves = [est.learning_curve(X[test], y[test]) for est, test in zip(runs["estimator"], runs["indices"]["test"])]
    n_labels = curves[0][0]
    accuracy = np.array([scores for _, scores in curves])
    mean, std = accuracy.mean(axis=0), accuracy.std(axis=0)
    means[strategy] = mean
    line, = ax.plot(n_labels, mean, marker="o", markersize=3,
                    label=f"{strategy} (area {runs['test_score'].mean():.3f})")
    ax.fill_between(n_labels, mean - std, mean + std, color=line.get_color(), alpha=0.2)
ax.set_xlabel("labelled images")
ax.set_ylabel("held-out accuracy (mean of 9 folds)")
ax.set_title("digits, logistic regression: 20 rounds of 10 labels")
ax.legend(loc="lower right")
fig.tight_layout()
for strategy in strategies[:-1]:  # from which label count each mean curve stays above random sampling's
    above = means[strategy] > means["random"]
    stays = next((int(n) for i, n in enumerate(n_labels) if above[i:].all()), None)
    print(f"{strategy}: above random sampling from {stays} labelled images on" if stays is not None
          else f"{strategy}: not above random sampling at the end")

# %%
# Both uncertainty strategies start behind random sampling: a model trained
# on its first few rounds' labels does not yet know what it does not know. Least confidence
# overtakes it (the lines printed above give from which label count each
# curve stays above random sampling's) and ends ahead, with the best area and the
# best final accuracy: the search chooses it. Entropy sampling also ends ahead
# of random sampling, but it spent more of the budget behind it, so by the
# area, which counts every label on the way, random sampling ranks above it:
# the end point alone would rank those two the other way. Batches of 10 beat
# batches of 20 for both uncertainty strategies (their model is updated more
# often); for random sampling, as it should, the batch size makes no
# difference beyond the noise.
if "__file__" in globals():  # run as a script: the figure is saved beside it, and shown if there is a display
    for number in plt.get_fignums():
        plt.figure(number).savefig(Path(__file__).with_name(f"{Path(__file__).stem}_{number}.png"), dpi=120)
    print(f"figures saved as {Path(__file__).with_suffix('')}_<n>.png")
plt.show()
