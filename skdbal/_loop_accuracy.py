"""The loop's accuracy following (:class:`~skdbal.loop.ActiveLearningLoop` with ``monitor=``): what it feeds
its :class:`~skdbal.accuracy_monitor.AccuracyMonitor` at each step, and what it writes into the journal.

A part of the loop, kept in a module of its own: :class:`LoopAccuracy` is a base class of
:class:`~skdbal.loop.ActiveLearningLoop`, and its methods read the loop's learner, stop set and monitor.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Set

import numpy as np

from ._validation import read_rows
from .accuracy_monitor import AccuracyMonitor, journal_fields, reservoir
from .audit import draw_audit

__all__ = ["check_monitor", "LoopAccuracy", "AUDIT_KEYS"]

#: The journal columns of the audits, which a strategy's ``Acquisition.info`` may not use when the loop audits.
AUDIT_KEYS = frozenset({"n_audit", "audit_indices", "audit_q", "reservoir"})
#: Salts of the reservoir's and the audits' generators, so that they are neither the queries' nor the stop set's.
_RESERVOIR_SALT, _AUDIT_SALT = 2021, 2023


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
    return AccuracyMonitor(window=monitor.window, confidence=monitor.confidence, audit_share=monitor.audit_share,
                           audit_proposal=monitor.audit_proposal, reservoir_share=monitor.reservoir_share,
                           audit_epsilon=monitor.audit_epsilon)


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

    learner: Any
    monitor: Any
    monitor_: Optional[AccuracyMonitor]
    stop_set_: Optional[np.ndarray]
    journal: Any
    _pending: List[int]
    _sample_pred: Optional[np.ndarray]
    _chooser_pred: Optional[np.ndarray]
    #: The audit reservoir's pool positions, sorted (None without audits), and what was drawn and answered.
    reservoir_: Optional[np.ndarray] = None
    _audit_rows: List[int]
    _audit_q: List[float]
    _audit_labels: Dict[int, object]
    _audit_skipped: Set[int]

    def _seed(self) -> Optional[int]:  # pragma: no cover - the loop's
        raise NotImplementedError

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
        self._feed_audits()
        if monitor.n_batches or monitor.n_audit:
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

    # ------------------------------------------------------------ audits
    @property
    def audits(self) -> bool:
        """Whether the loop buys audit labels (a monitor with ``audit_share > 0``)."""
        return self.monitor_ is not None and self.monitor_.audit_share > 0

    def _reset_audits(self, rows: Optional[np.ndarray]) -> None:
        """A reservoir (None for none) with nothing drawn from it yet."""
        self.reservoir_ = None if rows is None else np.asarray(rows, dtype=np.intp)
        self._audit_rows, self._audit_q, self._audit_labels, self._audit_skipped = [], [], {}, set()

    def _draw_reservoir(self, exclude) -> np.ndarray:
        """The audit reservoir: a uniform ``reservoir_share`` of the pool rows outside ``exclude`` and the
        labelled ones, sorted; its own generator, so that no query draws differently."""
        free = ~self.learner.labelled_mask_
        free[np.asarray(exclude, dtype=np.intp)] = False
        rows = np.flatnonzero(free)
        if len(rows) < 2:
            raise ValueError("audits need a reservoir of unlabelled pool rows, and fewer than 2 pool rows are left "
                             "outside the initial set")
        seed = self._seed()
        rng = np.random.RandomState(None if seed is None else [seed, _RESERVOIR_SALT])
        return rows[reservoir(len(rows), self._own_monitor().reservoir_share, rng)]

    def _not_acquirable(self) -> np.ndarray:
        """Pool rows acquisition never draws: the reservoir's."""
        return self.reservoir_ if self.reservoir_ is not None else np.zeros(0, dtype=np.intp)

    def _draw_audits(self, step: int, n_picks: int) -> np.ndarray:
        """This step's audit rows (pool positions, in the order drawn): enough that the audit holds an
        ``audit_share`` of the labels asked since the initial set, from the reservoir rows not drawn yet,
        uniformly or by active testing with the current model; each draw's probability is kept."""
        if self.reservoir_ is None or not self.audits:
            return np.zeros(0, dtype=np.intp)
        monitor = self._own_monitor()
        asked = sum(len(r["query_indices"]) for r in self.journal.rows()[1:]) + int(n_picks)
        ratio = monitor.audit_share / (1.0 - monitor.audit_share)
        left = np.setdiff1d(self.reservoir_, np.asarray(self._audit_rows, dtype=np.intp))
        n = min(int(np.floor(ratio * asked + 0.5)) - len(self._audit_rows), len(left))
        if n <= 0:
            return np.zeros(0, dtype=np.intp)
        seed = self._seed()
        rng = np.random.RandomState(None if seed is None else [seed, int(step), _AUDIT_SALT])
        if monitor.audit_proposal == "active":
            proba = self.learner.predict_proba(read_rows(self.learner.X_pool_, left))
            rows, q = draw_audit(proba, n, epsilon=monitor.audit_epsilon, random_state=rng)
        else:
            rows, q = draw_audit(len(left), n, proposal="uniform", random_state=rng)
        drawn = left[rows]
        self._audit_rows += drawn.tolist()
        self._audit_q += q.tolist()
        return drawn

    def _route_audit_answers(self, answers: list) -> list:
        """Keep the answers about reservoir rows as audit labels (never trained on); return the others."""
        if self.reservoir_ is None:
            return answers
        mask = np.zeros(len(self.learner.labelled_mask_), dtype=bool)
        mask[self.reservoir_] = True
        others = []
        for a in answers:
            p = int(a.position)
            if not mask[p]:
                others.append(a)
                continue
            if a.position in self._pending:
                self._pending.remove(a.position)
            if a.retract:
                self._audit_labels.pop(p, None)
            elif a.skipped:
                if p not in self._audit_labels:
                    self._audit_skipped.add(p)
            else:
                self._audit_labels[p] = a.label
                self._audit_skipped.discard(p)
        return others

    @property
    def n_audit(self) -> int:
        """Audit labels bought (answered) so far."""
        return sum(1 for p in self._audit_rows if p in self._audit_labels) if self.reservoir_ is not None else 0

    def _audit_columns(self, drawn: Optional[np.ndarray] = None) -> dict:
        """The row's audit columns: the labels bought so far, and this step's draws."""
        if not self.audits:
            return {}
        row: Dict[str, object] = {"n_audit": self.n_audit}
        if drawn is not None:
            k = len(drawn)
            row["audit_indices"] = drawn.tolist()
            row["audit_q"] = self._audit_q[len(self._audit_q) - k:] if k else []
        return row

    def _feed_audits(self) -> None:
        """Give the monitor the answered prefix of the audit draws, all judged by the current model.

        A draw still unanswered (or skipped) ends the prefix: the draws after it wait, since leaving a draw out
        would make the audit depend on which labels came back."""
        if self.reservoir_ is None or not self.audits:
            return
        m = 0
        while m < len(self._audit_rows) and self._audit_rows[m] in self._audit_labels:
            m += 1
        if not m:
            return
        rows = np.asarray(self._audit_rows[:m], dtype=np.intp)
        proba = self.learner.predict_proba(read_rows(self.learner.X_pool_, rows))
        guesses = np.asarray(self.learner.classes_)[np.asarray(proba).argmax(axis=1)]
        labels = np.asarray([self._audit_labels[int(p)] for p in rows])
        correct = guesses == labels
        monitor = self._own_monitor()
        done = monitor.n_audit
        if m > done:
            monitor.audit(correct[done:m], q=self._audit_q[done:m], n_reservoir=len(self.reservoir_))
        monitor.rejudge_audit(correct)

    def _restore_audits(self) -> None:
        """The reservoir and the audit draws from the journal (a resume, a warm start), and their labels asked
        again from the oracle; a journal written without audits gets a new reservoir."""
        rows = self.journal.rows()
        if not self.audits or not rows:
            return
        stored = rows[0].get("reservoir")
        if stored is None:
            initial = rows[0].get("labelled_indices", rows[0]["query_indices"])
            self._reset_audits(self._draw_reservoir(initial))
            return
        self._reset_audits(np.asarray(stored, dtype=np.intp))
        for r in rows[1:]:
            self._audit_rows += [int(p) for p in r.get("audit_indices") or []]
            self._audit_q += [float(x) for x in r.get("audit_q") or []]
        if self._audit_rows:
            self._ask(np.asarray(self._audit_rows, dtype=np.intp))

    def _ask(self, positions) -> tuple:  # pragma: no cover - the loop's
        raise NotImplementedError
