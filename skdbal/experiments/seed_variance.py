"""How far a labels-to-accuracy median can be trusted: plain functions over arrays.

A run's *labels to accuracy* is the first label count at which its test
accuracy reaches a threshold; a run that never reaches it counts as
``inf`` (more labels than any run that does), so that the median over seeds
is finite while more than half the runs reach the threshold, and ``inf``
otherwise (:func:`median_rule` says it in words; with an even number of
seeds, half of them reaching it is not enough: the median of
``[230, inf]`` is ``inf``). The noise of that median is measured two ways:

- a percentile bootstrap over seeds (:func:`bootstrap_band`): the seeds are
  resampled with replacement ``n_resamples`` times with a fixed generator, and
  the band is the central ``level`` of the resampled medians. With three
  seeds this band is the range of the seeds' values (each extreme is the
  median of a resample with probability 7/27, above the 5% tail);
- the rerun spread (:func:`rerun_spread`): how far the median moved when the
  same runs (same preset, strategy, seeds and masks) ran again.

:func:`verdict` turns two bands into the word a page may use.
"""
from __future__ import annotations

from typing import Iterable, Sequence, Tuple

import numpy as np

__all__ = ["first_reach", "median_labels", "median_rule", "bootstrap_band", "rerun_spread", "verdict", "above_from",
           "N_RESAMPLES", "BAND_LEVEL", "BOOTSTRAP_SEED"]

#: Resamples of the bootstrap over seeds.
N_RESAMPLES = 10_000
#: The central share of the resampled medians that the band holds.
BAND_LEVEL = 0.90
#: The seed of the bootstrap's generator (numpy's PCG64), so that the band is reproducible.
BOOTSTRAP_SEED = 0


def first_reach(labels: Sequence[float], accuracy: Sequence[float], threshold: float) -> float:
    """The first label count at which ``accuracy`` reaches ``threshold``; ``inf`` if it never does.

    Examples
    --------
    >>> from skdbal.experiments.seed_variance import first_reach
    >>> first_reach([20, 30, 40], [0.85, 0.91, 0.95], 0.9), first_reach([20, 30], [0.5, 0.6], 0.9)
    (30.0, inf)
    """
    hit = np.flatnonzero(np.asarray(accuracy, dtype=float) >= threshold)
    return float(np.asarray(labels, dtype=float)[hit[0]]) if hit.size else float("inf")


def median_rule(not_reached: str = "not reached") -> str:
    """How :func:`median_labels` treats a run that never reaches the threshold, in words.

    The one text that the facts files, ``cost.md`` and the results pages
    state; ``not_reached`` is how the page shows such a median.

    Examples
    --------
    >>> from skdbal.experiments.seed_variance import median_rule
    >>> median_rule("`> N`").split(": ")[1]
    'the median over seeds is a label count while more than half of the seeds reach the threshold, and `> N` otherwise'
    """
    return ("a run that never reaches the threshold counts as more labels than any run that does: the median over "
            f"seeds is a label count while more than half of the seeds reach the threshold, and {not_reached} "
            "otherwise")


def median_labels(values: Iterable[float]) -> float:
    """The median of per-seed label counts, a run that never reached the threshold counting as ``inf``.

    The median is finite only while more than half of the values are
    (:func:`median_rule`): with two seeds, one reaching is not enough.

    Examples
    --------
    >>> from skdbal.experiments.seed_variance import median_labels
    >>> median_labels([290, 300, float("inf")]), median_labels([300, float("inf"), float("inf")])
    (300.0, inf)
    >>> median_labels([230, float("inf")]), median_labels([200, 230, 250, float("inf")])
    (inf, 240.0)
    """
    return float(np.median(np.asarray(list(values), dtype=float)))


def bootstrap_band(values: Sequence[float], n_resamples: int = N_RESAMPLES, level: float = BAND_LEVEL,
                   seed: int = BOOTSTRAP_SEED) -> Tuple[float, float]:
    """The percentile-bootstrap band of the median over seeds.

    The seeds' values are resampled with replacement; the band is the
    ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles of the resampled
    medians, taken as observed values (no interpolation, so ``inf`` stays
    ``inf``).

    Examples
    --------
    >>> from skdbal.experiments.seed_variance import bootstrap_band
    >>> bootstrap_band([80, 90, 100])
    (80.0, 100.0)
    >>> bootstrap_band([90, 90, 90])
    (90.0, 90.0)
    """
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        raise ValueError("no values to resample")
    rng = np.random.default_rng(seed)
    draws = values[rng.integers(0, values.size, size=(n_resamples, values.size))]
    medians = np.sort(np.median(draws, axis=1))
    lo = medians[int(np.floor((1 - level) / 2 * (n_resamples - 1)))]
    hi = medians[int(np.ceil((1 + level) / 2 * (n_resamples - 1)))]
    return float(lo), float(hi)


def rerun_spread(medians: Sequence[float]) -> float:
    """How far one median moved across reruns of the same runs: max minus min (``inf`` if only some reached).

    Examples
    --------
    >>> from skdbal.experiments.seed_variance import rerun_spread
    >>> rerun_spread([60, 70]), rerun_spread([200])
    (10.0, 0.0)
    """
    medians = np.asarray(medians, dtype=float)
    if np.isinf(medians).all():
        return 0.0
    return float(medians.max() - medians.min())


def verdict(band_a: Tuple[float, float], band_b: Tuple[float, float], widen: float = 0.0) -> str:
    """``"ahead"``, ``"behind"`` or ``"within noise"``: A against B in labels to an accuracy (fewer is ahead).

    A is ahead only when its band, widened by ``widen`` labels on each side
    (the rerun spread), lies wholly below B's, widened alike; behind when
    wholly above; otherwise the two are within noise.

    Examples
    --------
    >>> from skdbal.experiments.seed_variance import verdict
    >>> verdict((60, 90), (160, 200)), verdict((90, 90), (100, 120)), verdict((90, 90), (100, 120), widen=10)
    ('ahead', 'ahead', 'within noise')
    >>> verdict((160, 200), (60, 90))
    'behind'
    """
    if band_a[1] + widen < band_b[0] - widen:
        return "ahead"
    if band_a[0] - widen > band_b[1] + widen:
        return "behind"
    return "within noise"


def above_from(labels: Sequence[float], mean_a: Sequence[float], mean_b: Sequence[float]) -> float:
    """The first label count from which curve A stays strictly above curve B to the end; ``inf`` if never.

    Examples
    --------
    >>> from skdbal.experiments.seed_variance import above_from
    >>> above_from([20, 30, 40, 50], [0.5, 0.7, 0.6, 0.8], [0.5, 0.6, 0.65, 0.7])
    50.0
    """
    above = np.asarray(mean_a, dtype=float) > np.asarray(mean_b, dtype=float)
    if not above[-1]:
        return float("inf")
    below = np.flatnonzero(~above)
    start = below[-1] + 1 if below.size else 0
    return float(np.asarray(labels, dtype=float)[start])
