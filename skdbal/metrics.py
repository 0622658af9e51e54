"""Learning-curve metrics: labels needed to reach an accuracy, after Pilz (2025, Appendix A)."""
from __future__ import annotations

import numpy as np

__all__ = ["labels_to_accuracy", "curves_from_histories", "accuracy_at"]


def curves_from_histories(histories, x: str = "n_labels", y: str = "accuracy"):
    """Stack runs into ``(labels, values)`` with ``values`` of shape (n_runs, n_steps).

    Parameters
    ----------
    histories : sequence of runs
        Each run a sequence of rows (dicts) with keys ``x`` and ``y``, as
        returned by :meth:`skdbal.ActiveLearner.simulate`, or a pandas
        DataFrame.
    x : str, default="n_labels"
        Key of the step's label count (the x axis); every run must hold the
        same values in the same order, at least over the steps they share.
    y : str, default="accuracy"
        Key of the value to stack; each value is cast to float.

    Returns
    -------
    labels : ndarray of shape (n_steps,)
        The ``x`` values of the first run, cut to the shortest run's length.
    values : ndarray of shape (n_runs, n_steps), dtype float64
        ``values[r, i]`` is the ``y`` value of run ``r`` at step ``i``.

    Raises
    ------
    ValueError
        If runs are empty or disagree on their label counts.

    Examples
    --------
    The second run stopped one step early, so both are cut to two steps:

    >>> from skdbal.metrics import curves_from_histories
    >>> run_a = [{"n_labels": 20, "accuracy": 0.85}, {"n_labels": 30, "accuracy": 0.91},
    ...          {"n_labels": 40, "accuracy": 0.95}]
    >>> run_b = [{"n_labels": 20, "accuracy": 0.80}, {"n_labels": 30, "accuracy": 0.88}]
    >>> labels, values = curves_from_histories([run_a, run_b])
    >>> labels.tolist(), values.tolist()
    ([20, 30], [[0.85, 0.91], [0.8, 0.88]])
    """
    runs = []
    for h in histories:
        if hasattr(h, "to_dict"):
            h = h.to_dict("records")
        runs.append(list(h))
    if not runs or any(len(r) == 0 for r in runs):
        raise ValueError("histories must hold at least one non-empty run")
    labels = np.array([row[x] for row in runs[0]])
    n = min(len(r) for r in runs)
    for r in runs:
        if not np.array_equal([row[x] for row in r[:n]], labels[:n]):
            raise ValueError(f"runs disagree on their {x!r} column; they cannot be averaged step by step")
    values = np.array([[float(row[y]) for row in r[:n]] for r in runs])
    return labels[:n], values


#: Slack on the threshold comparison, so that a mean of accuracies that equals
#: the threshold exactly (e.g. (0.8990 + 0.9004 + 0.9006) / 3) is not lost to rounding.
_TOL = 1e-9


def _first_reaching(labels: np.ndarray, acc: np.ndarray, threshold: float) -> float:
    hit = np.flatnonzero(acc >= threshold - _TOL)
    return float(labels[hit[0]]) if len(hit) else np.nan


def labels_to_accuracy(
    histories,
    threshold: float,
    method: str = "average-step",
) -> dict:
    """Labels needed to reach test accuracy ``threshold`` (Pilz, 2025, Appendix A).

    Parameters
    ----------
    histories : sequence of runs
        The runs of one strategy (e.g. one per seed); see
        :func:`curves_from_histories`.
    threshold : float
        Accuracy in (0, 1], e.g. 0.90 for 10% test error.
    method : {"average-step", "step-average"}, default="average-step"
        ``"average-step"``: average the accuracy over runs step by step, then
        take the first label count where the average reaches the threshold
        (an integer; Gal et al.'s Table 1 reports it). Runs of unequal length
        are averaged over the steps they share. ``"step-average"``: take the
        first label count of each run (over all of its steps), then their
        mean and (population) standard deviation.

    Returns
    -------
    result : dict
        ``value`` (labels; NaN if never reached), ``std`` (step-average only,
        else NaN) and ``runs`` (per-run label counts, step-average only). A
        run that never reaches the threshold makes the step-average NaN.

    Raises
    ------
    ValueError
        If ``threshold`` is not in (0, 1], ``method`` is unknown, or the
        runs are empty or disagree on their label counts.

    Notes
    -----
    Pilz (2025, §3.2.2 and Appendix A) names the two orders of operation
    Average-Step and Step-Average and shows that they can give very
    different counts. Gal et al. (2017) do not say which one their Table 1
    uses; its integer counts suggest Average-Step (Pilz, 2025, §3.2.2).

    References
    ----------
    .. [1] P. Pilz, "Deep active learning for image data", preprint
       (Practical Work in AI, Institute for Machine Learning, Johannes
       Kepler University Linz), 2025.
    .. [2] Y. Gal, R. Islam and Z. Ghahramani, "Deep Bayesian active learning
       with image data", ICML 2017, arXiv:1703.02910.

    Examples
    --------
    >>> runs = [[{"n_labels": n, "accuracy": a} for n, a in zip([20, 30, 40], accs)]
    ...         for accs in ([0.85, 0.91, 0.95], [0.80, 0.88, 0.93])]
    >>> labels_to_accuracy(runs, 0.9)["value"]          # mean curve 0.825, 0.895, 0.94
    40.0
    >>> r = labels_to_accuracy(runs, 0.9, method="step-average")
    >>> r["runs"], r["value"], r["std"]
    ([30.0, 40.0], 35.0, 5.0)
    """
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be an accuracy in (0, 1]; got {threshold!r}")
    histories = list(histories)
    if method not in ("average-step", "step-average"):
        raise ValueError(f"method must be 'average-step' or 'step-average'; got {method!r}")
    labels, acc = curves_from_histories(histories)
    if method == "average-step":
        return {"value": _first_reaching(labels, acc.mean(axis=0), threshold), "std": np.nan, "runs": []}
    if method == "step-average":
        per_run = []
        for h in histories:  # each run on its own steps: no truncation to the shortest
            run_labels, run_acc = curves_from_histories([h])
            per_run.append(_first_reaching(run_labels, run_acc[0], threshold))
        arr = np.array(per_run)
        return {"value": float(arr.mean()), "std": float(arr.std(ddof=0)), "runs": per_run}


def accuracy_at(histories, n_labels: int) -> tuple:
    """Mean and population std of accuracy over runs at ``n_labels`` labels.

    Parameters
    ----------
    histories : sequence of runs
        As for :func:`curves_from_histories` (rows with ``n_labels`` and
        ``accuracy``).
    n_labels : int
        The label count (``n_labels`` column) at which to read the accuracy.

    Returns
    -------
    mean, std : float
        Mean and population standard deviation (``ddof=0``) over runs of the
        accuracy at the first step with ``n_labels`` labels; ``(nan, nan)``
        when no step has that label count.

    Examples
    --------
    >>> from skdbal.metrics import accuracy_at
    >>> runs = [[{"n_labels": n, "accuracy": a} for n, a in zip([20, 30], accs)]
    ...         for accs in ([0.85, 0.91], [0.80, 0.88])]
    >>> mean, std = accuracy_at(runs, 30)                # (0.91 + 0.88) / 2, |0.91 - 0.88| / 2
    >>> round(mean, 4), round(std, 4)
    (0.895, 0.015)
    >>> accuracy_at(runs, 25)
    (nan, nan)
    """
    labels, acc = curves_from_histories(histories)
    hit = np.flatnonzero(labels == n_labels)
    if not len(hit):
        return np.nan, np.nan
    col = acc[:, hit[0]]
    return float(col.mean()), float(col.std(ddof=0))
