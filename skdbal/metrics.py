"""Learning-curve metrics: labels needed to reach an accuracy, after Pilz (2025, Appendix A).

Also calibration (reliability curves, expected calibration error) and
:func:`label_columns`, the package's one lookup of labels in a model's
``classes_``, which the metrics and the experiment runner share.
"""
from __future__ import annotations

import numpy as np

from ._validation import check_positive_int, label_columns

__all__ = ["labels_to_accuracy", "curves_from_histories", "accuracy_at", "reliability_curve",
           "expected_calibration_error", "plot_reliability_diagram", "label_columns"]


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
    method : {"average-step", "step-average", "median"}, default="average-step"
        ``"average-step"``: average the accuracy over runs step by step, then
        take the first label count where the average reaches the threshold
        (an integer; Gal et al.'s Table 1 reports it). Runs of unequal length
        are averaged over the steps they share. ``"step-average"``: take the
        first label count of each run (over all of its steps), then their
        mean and (population) standard deviation. ``"median"``: the median of
        those per-run counts (Kirsch et al., 2019, report medians), where a
        run that never reaches the threshold counts as more labels than any
        run that does; the median is NaN only if it falls on such runs.

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
    >>> runs.append([{"n_labels": n, "accuracy": a} for n, a in zip([20, 30, 40], [0.5, 0.6, 0.7])])
    >>> labels_to_accuracy(runs, 0.9, method="median")["value"]   # 30, 40 and never: the middle is 40
    40.0
    """
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be an accuracy in (0, 1]; got {threshold!r}")
    histories = list(histories)
    if method not in ("average-step", "step-average", "median"):
        raise ValueError(f"method must be 'average-step', 'step-average' or 'median'; got {method!r}")
    labels, acc = curves_from_histories(histories)
    if method == "average-step":
        return {"value": _first_reaching(labels, acc.mean(axis=0), threshold), "std": np.nan, "runs": []}
    per_run = []
    for h in histories:  # each run on its own steps: no truncation to the shortest
        run_labels, run_acc = curves_from_histories([h])
        per_run.append(_first_reaching(run_labels, run_acc[0], threshold))
    arr = np.array(per_run)
    if method == "median":  # never reached: above every count reached; NaN where the median lands there
        med = float(np.median(np.where(np.isnan(arr), np.inf, arr)))
        return {"value": med if np.isfinite(med) else np.nan, "std": np.nan, "runs": per_run}
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


def _top_label(y, proba, n_bins, classes):
    """Validated ``(confidence, correct)`` of the top label of each row."""
    proba = np.asarray(proba, dtype=np.float64)
    if proba.ndim != 2 or proba.shape[1] < 2:
        raise ValueError(f"proba must have shape (n_samples, n_classes >= 2); got {proba.shape}")
    check_positive_int(n_bins, "n_bins")
    y = np.asarray(y).reshape(-1)
    if len(y) != len(proba):
        raise ValueError(f"y and proba differ in length: {len(y)} and {len(proba)}")
    if len(y) == 0:
        raise ValueError("y is empty")
    if not np.isfinite(proba).all() or proba.min() < 0 or proba.max() > 1 + 1e-9:
        raise ValueError("proba must hold probabilities in [0, 1]")
    sums = proba.sum(axis=1)
    if not np.allclose(sums, 1.0, atol=1e-3):
        worst = int(np.argmax(np.abs(sums - 1)))
        raise ValueError(f"the rows of proba must sum to 1; row {worst} sums to {sums[worst]:.6g}")
    if classes is not None and len(classes) != proba.shape[1]:
        raise ValueError(f"classes has {len(classes)} labels for {proba.shape[1]} columns of proba")
    index = label_columns(classes, y, n_columns=proba.shape[1])
    confidence = proba.max(axis=1)
    correct = proba.argmax(axis=1) == index
    return confidence, correct


def reliability_curve(y, proba, n_bins: int = 15, *, classes=None):
    """Top-label confidence against accuracy, in equal-width confidence bins.

    Each prediction goes to the bin ``((m−1)/M, m/M]`` of its largest
    probability: the bins are right-closed, as in Guo et al. (2017), and the
    first also takes 0. A confidence on an edge goes to the bin below it
    (0.6 to ``(0.5, 0.6]`` with ``M = 10``), and a confidence of exactly 1.0
    to the last bin. The edges are ``m/M`` rounded to float64
    (``np.arange(M + 1) / M``), and confidences are compared at their exact
    values: a float32 0.6 is 0.60000002, in ``(0.6, 0.7]``.

    Parameters
    ----------
    y : array-like of shape (n,)
        True labels: column indices of ``proba``, or labels of ``classes``.
    proba : array-like of shape (n, C)
        Predicted probabilities; rows sum to 1.
    n_bins : int, default=15
        ``M``.
    classes : array-like of shape (C,), optional
        The label of each column (an estimator's ``classes_``).

    Returns
    -------
    confidence : ndarray of shape (n_bins,)
        Mean top-label probability in each bin (NaN where empty).
    accuracy : ndarray of shape (n_bins,)
        Fraction of correct top labels in each bin (NaN where empty).
    counts : ndarray of shape (n_bins,), int
    edges : ndarray of shape (n_bins + 1,)

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.metrics import reliability_curve
    >>> proba = np.array([[0.9, 0.1], [0.8, 0.2], [0.4, 0.6], [0.45, 0.55]])
    >>> conf, acc, counts, edges = reliability_curve([0, 1, 1, 0], proba, n_bins=5)
    >>> counts.tolist()                 # top-label probabilities 0.9, 0.8, 0.6, 0.55
    [0, 0, 2, 1, 1]
    >>> conf.round(3).tolist(), acc.tolist()   # bin (0.4, 0.6]: one of two right
    ([nan, nan, 0.575, 0.8, 0.9], [nan, nan, 0.5, 0.0, 1.0])
    """
    confidence, correct = _top_label(y, proba, n_bins, classes)
    edges = np.arange(int(n_bins) + 1) / int(n_bins)  # m/M exactly rounded: linspace's m·(1/M) can fall below it
    which = np.clip(np.searchsorted(edges, confidence, side="left") - 1, 0, int(n_bins) - 1)
    counts = np.bincount(which, minlength=int(n_bins))
    with np.errstate(invalid="ignore", divide="ignore"):
        conf = np.bincount(which, weights=confidence, minlength=int(n_bins)) / counts
        acc = np.bincount(which, weights=correct.astype(float), minlength=int(n_bins)) / counts
    return conf, acc, counts, edges


def expected_calibration_error(y, proba, n_bins: int = 15, *, classes=None) -> float:
    """Top-label expected calibration error (Guo et al., 2017).

    ``ECE = Σ_m (n_m / n) · |accuracy_m − confidence_m|`` over ``M`` equal-width
    bins of the top-label probability (:func:`reliability_curve`). For any
    number of classes: scikit-learn's ``calibration_curve`` is binary only.

    The bins are right-closed, ``((m−1)/M, m/M]``, as in Guo et al. (2017):
    a confidence on an edge goes to the bin below it, and a confidence of
    exactly 1.0 (a saturated float32 softmax gives it) to the last bin,
    ``((M−1)/M, 1]``. torchmetrics' ``calibration_error`` bins are
    left-closed, with 1.0 in a bin of its own, so the two differ when
    confidences lie on edges: in the second example below, theirs puts 0.6
    with 0.65 in ``[0.6, 0.7)`` and gives 0.4333, ours 0.1667.

    Parameters
    ----------
    y : array-like of shape (n,)
        True labels: column indices of ``proba``, or labels of ``classes``.
    proba : array-like of shape (n, C)
        Predicted probabilities; rows sum to 1.
    n_bins : int, default=15
    classes : array-like of shape (C,), optional
        The label of each column (an estimator's ``classes_``).

    Returns
    -------
    float in [0, 1]

    Raises
    ------
    ValueError
        If rows of ``proba`` do not sum to 1, ``n_bins < 1``, ``y`` holds
        labels outside the classes, or the lengths differ.

    References
    ----------
    .. [1] C. Guo, G. Pleiss, Y. Sun and K. Q. Weinberger, "On calibration of
       modern neural networks", ICML 2017.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.metrics import expected_calibration_error
    >>> proba = np.array([[0.9, 0.1], [0.9, 0.1], [0.6, 0.4], [0.4, 0.6]])
    >>> # bin (0.8, 1]: confidence 0.9, accuracy 1/2; bin (0.5, 0.6]: confidence 0.6, accuracy 1
    >>> round(expected_calibration_error([0, 1, 0, 1], proba, n_bins=10), 4)   # (2·0.4 + 2·0.4) / 4
    0.4
    >>> proba = np.array([[0.6, 0.4], [0.55, 0.45], [0.65, 0.35]])
    >>> # 0.6 is on an edge: bin (0.5, 0.6] with 0.55 (accuracy 1/2), and 0.65 alone in (0.6, 0.7]
    >>> round(expected_calibration_error([0, 1, 0], proba, n_bins=10), 4)   # (2·0.075 + 0.35) / 3
    0.1667
    """
    conf, acc, counts, _ = reliability_curve(y, proba, n_bins, classes=classes)
    return _ece_of_curve(conf, acc, counts)


def _ece_of_curve(conf, acc, counts) -> float:
    """ECE from a :func:`reliability_curve`: the count-weighted mean gap."""
    full = counts > 0
    return float(np.sum(counts[full] * np.abs(acc[full] - conf[full])) / counts.sum())


def plot_reliability_diagram(y, proba, n_bins: int = 15, *, classes=None, ax=None, label=None):
    """Draw a reliability diagram: accuracy against confidence, with the diagonal.

    Parameters
    ----------
    y, proba, n_bins, classes :
        As for :func:`reliability_curve`.
    ax : matplotlib Axes, optional
        Drawn into; a new figure's by default.
    label : str, optional
        The curve's legend entry; its ECE is appended.

    Returns
    -------
    matplotlib Axes

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> from skdbal.metrics import plot_reliability_diagram
    >>> proba = np.array([[0.9, 0.1], [0.9, 0.1], [0.6, 0.4], [0.4, 0.6]])
    >>> ax = plot_reliability_diagram([0, 1, 0, 1], proba, n_bins=10, label="model")
    >>> ax.get_xlabel(), ax.get_legend().get_texts()[1].get_text()
    ('confidence (top-label probability)', 'model (ECE 0.400)')
    """
    import matplotlib.pyplot as plt

    conf, acc, counts, _ = reliability_curve(y, proba, n_bins, classes=classes)
    ece = _ece_of_curve(conf, acc, counts)
    if ax is None:
        _, ax = plt.subplots(figsize=(4.5, 4.5))
    if not any(line.get_label() == "perfectly calibrated" for line in ax.get_lines()):  # once per axes
        ax.plot([0, 1], [0, 1], ":", color="gray", label="perfectly calibrated")
    full = counts > 0
    ax.plot(conf[full], acc[full], "o-", label=f"{label or 'model'} (ECE {ece:.3f})")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("confidence (top-label probability)")
    ax.set_ylabel("accuracy")
    ax.set_title(f"reliability diagram, {int(n_bins)} bins")
    ax.legend(loc="upper left", fontsize=8)
    return ax
