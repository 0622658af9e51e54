"""How good the model is, and what the stopping rules say, after each retrain of ``skdbal labelstudio``.

:class:`ModelProgress` follows a :class:`~skdbal.labelling.LabellingSession` kept in step with a Label
Studio project. After each retrain (the first query of a new model version) it

- estimates the accuracy from the labels people gave, each judged by the model of its time, which had not
  seen it (the session's store keeps that judgement): an :class:`~skdbal.accuracy_monitor.AccuracyMonitor`
  is fed, version by version, the labels that arrived while that version was current, with the draw
  probabilities of its batch when the strategy recorded them (a stochastic batch's ``info["draw_log_q"]``)
  and the labels are the first of its draw, in the order drawn; else without (a top-k batch: the estimate is
  then the biased share of the last batches guessed right, and says so);
- shows the stopping rule (:mod:`skdbal.stopping`; by default
  :class:`~skdbal.stopping.StabilizingPredictions`) the new model's predictions on a fixed stop set of pool
  items: advice only, the session goes on labelling whatever it says;
- says both in one line (:func:`progress_line`), printed, written at the head of the Label Studio project's
  description (the text every user sees on the project's card in the project list, and in its settings),
  and kept with the journal's columns (``estimate_*``, ``stop_*``) in a CSV beside the labels CSV
  (:func:`progress_csv_path`).

Everything here runs in the session's loop thread (an ``on_query`` callback); a failure to reach Label
Studio is said once and the description is written again after the next retrain.
"""
from __future__ import annotations

import csv
import logging
import os
import re
import sys
import time
from typing import Dict, List, Optional

import numpy as np

from .._validation import read_rows
from ..accuracy_monitor import AccuracyMonitor, journal_fields
from ..estimates import AccuracyEstimate
from ..stopping import AnyOf, StabilizingPredictions, StoppingRule, Verdict

__all__ = ["ModelProgress", "accuracy_words", "advice_words", "progress_line", "progress_csv_path",
           "with_progress", "PROGRESS_MARK"]

logger = logging.getLogger("skdbal.labelstudio")

#: How the paragraph skdbal writes at the head of the project's description starts; it ends at the first
#: blank line. The rest of the description is the project's own, kept as it is.
PROGRESS_MARK = "skdbal: "


def _pct(x: float) -> str:
    return f"{100 * float(x):.0f}"


def accuracy_words(version: int, estimate: Optional[AccuracyEstimate], *, judged_by: Optional[int] = None) -> str:
    """What the estimate says about model ``version``, in words: what is estimated, and how sure it is.

    Parameters
    ----------
    version : int
        The model just trained.
    estimate : AccuracyEstimate or None
        From :class:`~skdbal.accuracy_monitor.AccuracyMonitor`: a biased prequential share
        (``"prequential-biased"``), an unbiased estimate of the model that chose the last batch
        (``"stratified-lure-kish-wilson"``), or that estimate carried over to ``version`` through the two
        models' disagreement (``"bridge-..."``). None: no judged label yet.
    judged_by : int, optional
        The version that chose the last batch (the one an unbiased estimate is of, when not carried over).

    Returns
    -------
    str

    Examples
    --------
    >>> from skdbal.estimates import estimate_accuracy, prequential_accuracy
    >>> from skdbal.labelstudio.progress import accuracy_words
    >>> print(accuracy_words(4, prequential_accuracy([[1] * 7 + [0] * 3, [1] * 8 + [0] * 2], window=3)))
    model v4: the models before it were right on 75% of the last 20 tasks they asked about (their hardest; biased low)
    >>> print(accuracy_words(0, None))
    model v0: no accuracy estimate yet (no label has come in since the first model)
    """
    if estimate is None:
        return f"model v{version}: no accuracy estimate yet (no label has come in since the first model)"
    if estimate.biased:
        return (f"model v{version}: the models before it were right on {_pct(estimate.accuracy)}% of the last "
                f"{estimate.n_labels} tasks they asked about (their hardest; biased low)")
    figures = (f"estimated accuracy {_pct(estimate.accuracy)}% ({_pct(estimate.low)}–{_pct(estimate.high)}%, "
               f"{_pct(estimate.confidence)}% interval) from {estimate.n_labels} labels drawn with known odds")
    if estimate.method.startswith("bridge-"):
        source = "" if judged_by is None else f" model v{judged_by}'s,"
        return f"model v{version}: {figures},{source} widened by how often the two models disagree"
    if judged_by is not None and judged_by != version:
        return f"model v{judged_by} (before v{version}): {figures}"
    return f"model v{version}: {figures}"


def advice_words(verdict: Optional[Verdict]) -> str:
    """What the stopping rule says, as advice: its reason, and whether one could stop.

    Examples
    --------
    >>> from skdbal.stopping import Verdict
    >>> from skdbal.labelstudio.progress import advice_words
    >>> print(advice_words(Verdict(False, 0.9, "the predictions are still changing")))
    stopping advice: keep labelling: the predictions are still changing
    >>> print(advice_words(Verdict(True, 1.0, "the predictions have stopped changing")))
    stopping advice: you could stop: the predictions have stopped changing (labelling goes on until you do)
    """
    if verdict is None:
        return "stopping advice: none yet"
    if verdict.stop:
        return f"stopping advice: you could stop: {verdict.reason} (labelling goes on until you do)"
    return f"stopping advice: keep labelling: {verdict.reason}"


def progress_line(version: int, estimate: Optional[AccuracyEstimate], verdict: Optional[Verdict], *,
                  judged_by: Optional[int] = None) -> str:
    """The one line ``skdbal labelstudio`` prints after each retrain: :func:`accuracy_words`, then
    :func:`advice_words`.

    Examples
    --------
    Eight of ten labels drawn uniformly from 100 rows, guessed right by model v2; model v3 just trained:

    >>> from skdbal.accuracy_monitor import AccuracyMonitor
    >>> from skdbal.labelstudio.progress import progress_line
    >>> from skdbal.stopping import Verdict
    >>> monitor = AccuracyMonitor()
    >>> monitor.observe([1] * 8 + [0] * 2, q=[1 / (100 - m) for m in range(10)], n_candidates=100)
    >>> print(progress_line(3, monitor.previous_model(), Verdict(False, 0.5, "still changing"), judged_by=2))
    model v2 (before v3): estimated accuracy 80% (49–94%, 95% interval) from 10 labels drawn with known odds; \
stopping advice: keep labelling: still changing
    """
    return f"{accuracy_words(version, estimate, judged_by=judged_by)}; {advice_words(verdict)}"


def with_progress(description: Optional[str], line: str) -> str:
    """A project description with ``line`` as its first paragraph (marked :data:`PROGRESS_MARK`), in place of
    the one skdbal wrote before; the rest of the description is kept as it was.

    Examples
    --------
    >>> from skdbal.labelstudio.progress import with_progress
    >>> text = with_progress("Digits to sort.", "model v1: ...")
    >>> text
    'skdbal: model v1: ...\\n\\nDigits to sort.'
    >>> with_progress(text, "model v2: ...")
    'skdbal: model v2: ...\\n\\nDigits to sort.'
    >>> with_progress(None, "model v0: ...")
    'skdbal: model v0: ...'
    """
    rest = description or ""
    if rest.startswith(PROGRESS_MARK):      # ours ends at the first blank line (a browser may have sent CRLFs)
        parts = re.split(r"\r?\n[ \t]*\r?\n", rest, maxsplit=1)
        rest = parts[1] if len(parts) > 1 else ""
    ours = PROGRESS_MARK + " ".join(line.split())
    return ours + ("\n\n" + rest if rest.strip() else "")


def progress_csv_path(labels_csv: str) -> str:
    """The model report beside the labels CSV: its name with ``-model``.

    Examples
    --------
    >>> from skdbal.labelstudio.progress import progress_csv_path
    >>> progress_csv_path("runs/skdbal-digits-labels.csv")
    'runs/skdbal-digits-labels-model.csv'
    """
    stem, ext = os.path.splitext(os.fspath(labels_csv))
    return f"{stem}-model{ext or '.csv'}"


def _rule_names(rule: StoppingRule) -> List[str]:
    return [rule.name] + (list(rule.named_rules()) if isinstance(rule, AnyOf) else [])


def _verdict_fields(rule: StoppingRule, verdict: Optional[Verdict]) -> Dict[str, object]:
    """The loop's journal columns for a verdict: ``stop_<name>``, ``stop_<name>_value`` (for each rule of an
    AnyOf too) and ``stop_reason`` (the reason when it says stop, else ``""``)."""
    verdicts = {rule.name: verdict}
    if isinstance(rule, AnyOf) and verdict is not None:
        verdicts.update(rule.verdicts_)
    out: Dict[str, object] = {}
    for name in _rule_names(rule):
        v = verdicts.get(name)
        out[f"stop_{name}"] = None if v is None else bool(v.stop)
        out[f"stop_{name}_value"] = None if v is None else float(v.value)
    out["stop_reason"] = None if verdict is None else (verdict.reason if verdict.stop else "")
    return out


class ModelProgress:
    """The accuracy estimate and the stopping rule's advice after each retrain of a Label Studio session.

    Put :meth:`note_batch` first among the session's ``on_query`` callbacks and add :meth:`after_query`
    after :class:`~skdbal.labelstudio.LabelStudioSync`'s: at the first query of each new model version it
    computes the estimate and the verdict (see the module's text), and then

    - prints :func:`progress_line` (to ``out``, standard output by default);
    - writes it at the head of the project's description, with ``client`` and ``project``
      (:func:`with_progress`);
    - rewrites ``report_path`` (a CSV, one row per version: ``version``, ``time``, ``n_labels``, ``line``,
      the journal's ``estimate_*`` and ``stop_*`` columns), when given.

    Parameters
    ----------
    session : LabellingSession
    client : label_studio_sdk.LabelStudio, optional
    project : int, optional
    rule : StoppingRule, optional
        Cloned; :class:`~skdbal.stopping.StabilizingPredictions` by default. Rules that read the model's
        samples on the stop set (``stop_samples``) are refused: a retrain would wait for them.
    stop_set_size : int, default=500
        Pool items, drawn once (seeded) among those unlabelled at the first model, that every version
        predicts: the rule's stop set, and the rows where two versions' disagreement is counted.
    report_path : str, optional
    out : file, optional
    random_state : int, default=0

    Attributes
    ----------
    rows : list of dict
        One per version reported (as the CSV's rows), oldest first.
    draws : dict
        Per version, the batch it drew: ``positions`` (in the order drawn), ``log_q`` (or None),
        ``n_candidates``, ``n_unlabelled``.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> from skdbal.labelstudio.progress import ModelProgress
    >>> ModelProgress(SimpleNamespace(), stop_set_size=0)
    Traceback (most recent call last):
        ...
    ValueError: stop_set_size must be an int >= 1; got 0
    """

    def __init__(self, session, *, client=None, project: Optional[int] = None, rule: Optional[StoppingRule] = None,
                 stop_set_size: int = 500, report_path: Optional[str] = None, out=None, random_state: int = 0):
        from sklearn.base import clone

        if isinstance(stop_set_size, bool) or not isinstance(stop_set_size, (int, np.integer)) or stop_set_size < 1:
            raise ValueError(f"stop_set_size must be an int >= 1; got {stop_set_size!r}")
        rule = StabilizingPredictions() if rule is None else rule
        if not isinstance(rule, StoppingRule):
            raise ValueError(f"rule must be a stopping rule (skdbal.stopping); got {rule!r}")
        self.rule = clone(rule).validate()
        unread = sorted(self.rule.needs() & {"stop_samples", "batch_scores"})
        if unread:
            raise ValueError(f"{type(rule).__name__} reads {unread}; skdbal labelstudio shows the rules the model's "
                             "class probabilities only")
        self.session, self.client, self.project = session, client, project
        self.stop_set_size, self.random_state = int(stop_set_size), random_state
        self.report_path, self.out = report_path, out
        self.rows: List[dict] = _read_rows(report_path)
        self.draws: Dict[int, dict] = {}
        self._guesses: Dict[int, np.ndarray] = {}
        self._stop_set: Optional[np.ndarray] = None
        self._reported: Optional[int] = None
        self._described: Optional[str] = None     # the line the description should carry (None: it does)
        self._said = False

    # ------------------------------------------------------------ the callback
    def after_query(self, positions, scores=None) -> None:
        """The session's ``on_query`` callback (in its loop thread): note the batch's draw, and report a new
        version once. Never raises: a failure is logged, and the session goes on."""
        try:
            learner = self.session.learner
            version = int(getattr(learner, "step_", -1))
            if version < 0:
                return
            self._note_draw(version, positions)
            if version != self._reported:
                self._reported = version
                self.report(version)
        except Exception as exc:  # noqa: BLE001 - the advice must never stop the labelling
            logger.warning("skdbal labelstudio: no accuracy estimate for this model (%s: %s)", type(exc).__name__, exc)

    def note_batch(self, positions, scores=None) -> None:
        """An ``on_query`` callback to put *first* among the session's: it notes the batch's draw while the
        learner's last acquisition is the batch's (a later callback, such as a push's, may query again). Never
        raises."""
        try:
            version = int(getattr(self.session.learner, "step_", -1))
            if version >= 0:
                self._note_draw(version, positions)
        except Exception as exc:  # noqa: BLE001 - the advice must never stop the labelling
            logger.warning("skdbal labelstudio: the batch's draw is not known (%s: %s)", type(exc).__name__, exc)

    def _note_draw(self, version: int, positions) -> None:
        """The first batch ``version`` drew: its positions in the order drawn and their log-probabilities."""
        if version in self.draws:
            return
        learner = self.session.learner
        acq = getattr(learner, "last_acquisition_", None)
        info = dict(getattr(acq, "info", {}) or {})
        log_q = info.get("draw_log_q")
        positions = [int(p) for p in positions]
        indices = getattr(acq, "indices", None)
        if indices is not None and [int(i) for i in indices] != positions:
            log_q = None          # the learner's last query is another one's (a push's): not this batch's draw
        if log_q is not None and (len(log_q) != len(positions) or "rejected_indices" in info
                                  or "n_rejected" in info):
            log_q = None          # a filter's draw depends on the labels: no known probabilities
        loop = getattr(self.session, "loop", None)
        busy = {int(p) for name in ("pending", "skipped")
                for p in np.asarray(getattr(loop, name, None) if loop is not None else (), dtype=np.intp).ravel()}
        free = ~np.asarray(learner.labelled_mask_, dtype=bool)
        free[sorted(busy - set(positions))] = False
        n_unlabelled = int(np.count_nonzero(free))
        subsample = getattr(learner, "pool_subsample", None)
        n_candidates = n_unlabelled if subsample is None else min(n_unlabelled, int(subsample))
        self.draws[version] = {"positions": positions, "log_q": None if log_q is None else [float(v) for v in log_q],
                               "n_candidates": max(n_candidates, len(positions)),
                               "n_unlabelled": max(n_unlabelled, len(positions))}

    # ------------------------------------------------------------ the report
    def _stop_rows(self, learner) -> np.ndarray:
        if self._stop_set is None:
            free = np.flatnonzero(~learner.labelled_mask_)
            rng = np.random.RandomState(self.random_state)
            rows = free if len(free) <= self.stop_set_size else rng.choice(free, self.stop_set_size, replace=False)
            self._stop_set = np.sort(rows).astype(np.intp)
        return self._stop_set

    def monitor(self, before: int) -> AccuracyMonitor:
        """A fresh monitor fed with the labels judged by each version before ``before``, oldest first."""
        judged: Dict[int, List[dict]] = {}
        for c in self.session.store.checks():
            if c["model_version"] < before and c.get("guess") is not None:
                judged.setdefault(int(c["model_version"]), []).append(c)
        monitor = AccuracyMonitor()
        for version in sorted(judged):
            checks = judged[version]
            correct = {int(c["item"]): str(c["guess"]) == str(c["label"]) for c in checks}   # an item's last
            draw = self.draws.get(version)
            if draw is not None and draw["log_q"] is not None:
                order = draw["positions"]
                m = len(correct)
                if len(checks) == m and set(correct) == set(order[:m]):   # the first m of the draw, each once
                    monitor.observe([correct[i] for i in order[:m]], log_q=draw["log_q"][:m],
                                    n_candidates=draw["n_candidates"], n_unlabelled=draw["n_unlabelled"],
                                    model=version)
                    continue
            monitor.observe(list(correct.values()), model=version)
        return monitor

    def report(self, version: int) -> dict:
        """Estimate, judge and say model ``version`` now (what :meth:`after_query` does once per version); the
        row written."""
        learner = self.session.learner
        rows = self._stop_rows(learner)
        proba = np.asarray(learner.predict_proba(read_rows(learner.X_pool_, rows)))
        guesses = np.asarray(learner.classes_)[proba.argmax(axis=1)]
        self._guesses[version] = guesses
        monitor = self.monitor(version)
        estimate, judged_by = None, None
        if monitor.n_batches:
            judged_by = monitor.followed[-1] if monitor.followed else None
            estimate = monitor.estimate()
            unlabelled = ~learner.labelled_mask_[rows]
            if not estimate.biased and judged_by in self._guesses and unlabelled.any():
                estimate = monitor.estimate(self._guesses[judged_by][unlabelled], guesses[unlabelled])
        view = {"step": version, "n_labels": len(learner.y_training_), "stop_proba": proba,
                "batch_size": int(getattr(self.session, "batch_size", 1)),
                "n_unlabelled": int(np.count_nonzero(~learner.labelled_mask_))}
        verdict = self.rule.update(view)
        line = progress_line(version, estimate, verdict, judged_by=judged_by)
        row = {"version": version, "time": round(time.time(), 3), "n_labels": len(learner.y_training_), "line": line,
               **journal_fields(estimate), **_verdict_fields(self.rule, verdict)}
        self.rows = [r for r in self.rows if _int(r.get("version")) != version] + [row]
        print(line, file=self.out or sys.stdout, flush=True)
        self._described = line
        self.describe()
        if self.report_path:
            self.save(self.report_path)
        return row

    def describe(self) -> bool:
        """Write the latest line at the head of the project's description, if it is not there yet; whether
        it is there now. A failure is said once (logged) and tried again after the next retrain."""
        if self._described is None or self.client is None or self.project is None:
            return self._described is None
        try:
            from .sync import _plain

            current = _plain(self.client.projects.get(id=self.project)).get("description")
            self.client.projects.update(id=self.project, description=with_progress(current, self._described))
            self._described, self._said = None, False
            return True
        except Exception as exc:  # noqa: BLE001 - Label Studio away: written again after the next retrain
            if not self._said:
                logger.warning("skdbal labelstudio: cannot write the estimate into project %s's description "
                               "(%s)", self.project, type(exc).__name__)
                self._said = True
            return False

    def save(self, path: str) -> int:
        """Write :attr:`rows` to ``path`` as CSV, atomically (readable by its owner only); how many."""
        from ..labelling.export import replace_file, spreadsheet_safe

        columns = ["version", "time", "n_labels", "line", *journal_fields(None)]
        for r in self.rows:
            columns += [k for k in r if k not in columns]
        rows = sorted(self.rows, key=lambda r: _int(r.get("version")))

        def write(f) -> int:
            writer = csv.writer(f, lineterminator="\r\n")
            writer.writerow(columns)
            for r in rows:
                writer.writerow(["" if r.get(c) is None else spreadsheet_safe(r[c]) for c in columns])
            return len(rows)

        return replace_file(path, write)


def _int(value) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return -1


def _read_rows(path: Optional[str]) -> List[dict]:
    """The rows of an earlier run's report (a restart keeps the versions reported before it); none if
    there is no readable one."""
    if not path or not os.path.exists(path):
        return []
    try:
        with open(path, newline="", encoding="utf-8") as f:
            return [r for r in csv.DictReader(f) if _int(r.get("version")) >= 0]
    except (OSError, UnicodeDecodeError, csv.Error):
        return []
