"""The loop's accuracy following (:class:`~skdbal.loop.ActiveLearningLoop` with ``monitor=``): what it feeds
its :class:`~skdbal.accuracy_monitor.AccuracyMonitor` at each step, and what it writes into the journal.

A part of the loop, kept in a module of its own: :class:`LoopAccuracy` is a base class of
:class:`~skdbal.loop.ActiveLearningLoop`, and its methods read the loop's learner, stop set and monitor.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ._validation import read_rows
from .accuracy_monitor import AccuracyMonitor, journal_fields

__all__ = ["check_monitor", "LoopAccuracy"]


def check_monitor(monitor) -> Optional[AccuracyMonitor]:
    """The loop's own, fresh accuracy monitor for ``monitor`` (None and False give None).

    Parameters
    ----------
    monitor : bool, AccuracyMonitor or None
        True for an :class:`~skdbal.accuracy_monitor.AccuracyMonitor` with
        its defaults; a monitor that has observed nothing, whose settings
        (``window``, ``confidence``) are copied; None or False for none.

    Returns
    -------
    AccuracyMonitor or None
        A new monitor, so that the caller's object is never changed.

    Raises
    ------
    ValueError
        For anything else, or a monitor that has already observed labels.

    Examples
    --------
    >>> from skdbal.accuracy_monitor import AccuracyMonitor
    >>> from skdbal.loop import check_monitor
    >>> given = AccuracyMonitor(window=5)
    >>> own = check_monitor(given)
    >>> own is not given, own.window, check_monitor(None)
    (True, 5, None)
    """
    if monitor is None or monitor is False:
        return None
    if monitor is True:
        return AccuracyMonitor()
    if not isinstance(monitor, AccuracyMonitor):
        raise ValueError(f"monitor must be True, False, None or an AccuracyMonitor "
                         f"(skdbal.accuracy_monitor); got {monitor!r}")
    if monitor.n_batches or monitor.n_audit:
        raise ValueError(f"monitor must be a fresh AccuracyMonitor (the loop feeds it from its first step); "
                         f"this one has observed {monitor.n_batches} batches and {monitor.n_audit} audit labels")
    return AccuracyMonitor(window=monitor.window, confidence=monitor.confidence)

class LoopAccuracy:
    """The accuracy-following steps of :class:`~skdbal.loop.ActiveLearningLoop`, which inherits them.

    Not used alone: its methods read the loop's ``learner``, ``stop_set_``,
    ``monitor`` and ``monitor_``.

    Examples
    --------
    >>> from skdbal.loop import ActiveLearningLoop
    >>> from skdbal._loop_accuracy import LoopAccuracy
    >>> issubclass(ActiveLearningLoop, LoopAccuracy)
    True
    """

    learner: object
    monitor: object
    monitor_: Optional[AccuracyMonitor]
    stop_set_: Optional[np.ndarray]
    _sample_pred: Optional[np.ndarray]
    _chooser_pred: Optional[np.ndarray]

    def _guesses(self, view: Optional[dict] = None) -> np.ndarray:
        """The current model's guesses on the stop set (from the rule's view when it holds them)."""
        rows = self.stop_set_
        if rows is None or not len(rows):
            return np.zeros(0)
        proba = view.get("stop_proba") if view is not None else None
        if proba is None:
            proba = self.learner.predict_proba(read_rows(self.learner.X_pool_, rows))
        return np.asarray(self.learner.classes_)[np.asarray(proba).argmax(axis=1)]

    def _observe(self, picks, guesses, labelled, info: dict, n_candidates: int, n_unlabelled: int) -> None:
        """Feed the monitor the picks labelled in this step, judged by the model that chose them."""
        done = {int(p) for p in labelled}
        log_q = info.get("draw_log_q")
        if log_q is not None and "rejected_indices" not in info and "n_rejected" not in info:
            m = 0   # the labelled prefix of the draw: a prefix of a sequential draw is one
            while m < len(picks) and int(picks[m]) in done:
                m += 1
            keep: np.ndarray = np.arange(m)
            log_q = np.asarray(log_q, dtype=np.float64)[:m]
        else:   # a top-k batch, or a noise filter's draw, which depends on the labels
            keep, log_q = np.flatnonzero([int(p) in done for p in picks]), None
        if not len(keep):
            return
        correct = np.asarray(guesses)[keep] == self.learner.y_pool_[np.asarray(picks)[keep]]
        self._own_monitor().observe(correct, n_candidates=n_candidates, log_q=log_q, n_unlabelled=n_unlabelled)
        self._chooser_pred = self._sample_pred

    def _estimate(self, row: dict, view: Optional[dict]) -> None:
        """Write the monitor's estimate for the model just fitted into the row."""
        monitor = self._own_monitor()
        current = self._guesses(view)
        previous, self._sample_pred = self._chooser_pred, current
        estimate = None
        if monitor.n_batches:
            unlabelled = ~self.learner.labelled_mask_[self.stop_set_] if len(current) else np.zeros(0, bool)
            try:
                if previous is not None and unlabelled.any():
                    estimate = monitor.estimate(previous[unlabelled], current[unlabelled])
                else:
                    estimate = monitor.estimate()
            except ValueError:   # no unlabelled row is left to estimate on
                estimate = None
        row.update(journal_fields(estimate))

    def _own_monitor(self) -> AccuracyMonitor:
        """The loop's own monitor (only called where there is one)."""
        if self.monitor_ is None:
            raise RuntimeError("this loop has no accuracy monitor")
        return self.monitor_
