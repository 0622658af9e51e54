"""How good the model is, and what the stopping rules say, after each retrain of ``skdbal labelstudio``.

``skdbal labelstudio`` runs a :class:`~skdbal.labelling.LabellingSession` underneath, and the session
already keeps the accuracy estimate, the test accuracy (``--test``), the forecast of the learning curve
and the stopping rules' verdicts, with their words (:func:`skdbal.labelling.progress_report.progress`, the
figures of its ``status()`` and of the labelling page). :class:`ModelProgress` says them where Label
Studio's users look, after each retrain (the first query of a new model version):

- in one line (:func:`progress_line`), printed;
- at the head of the Label Studio project's description (the text every user sees on the project's card
  in the project list, and in its settings; :func:`with_progress`);
- in a CSV beside the labels CSV, one row per version (:func:`progress_csv_path`).

It computes nothing of its own: the numbers and the words are the session's. Everything here runs in the
session's loop thread (an ``on_query`` callback); a failure to reach Label Studio is said once and the
description is written again after the next retrain.
"""
from __future__ import annotations

import csv
import logging
import os
import re
import sys
import time
from typing import Dict, List, Mapping, Optional

__all__ = ["ModelProgress", "progress_line", "progress_fields", "progress_csv_path", "report_json_path",
           "with_progress", "PROGRESS_MARK"]

logger = logging.getLogger("skdbal.labelstudio")

#: How the paragraph skdbal writes at the head of the project's description starts; it ends at the first
#: blank line. The rest of the description is the project's own, kept as it is.
PROGRESS_MARK = "skdbal: "


def progress_line(version: int, n_labels: int, status: Mapping) -> str:
    """The one line ``skdbal labelstudio`` says after model ``version`` is trained, from the session's
    ``status()`` (:func:`skdbal.labelling.progress_report.progress`): its words on the accuracy estimate,
    the test accuracy (with ``--test``), the forecast (once there is one), the stopping advice, and the
    words of each rule that says you could stop.

    Parameters
    ----------
    version : int
        The model just trained.
    n_labels : int
        The labels it was trained on.
    status : dict
        The session's ``status()``, or :func:`~skdbal.labelling.progress_report.progress`.

    Returns
    -------
    str

    Examples
    --------
    >>> from skdbal.labelstudio.progress import progress_line
    >>> status = {"accuracy_words": "Right on 80% of the last 10 rows it asked about (its hardest cases, so on "
    ...           "all rows it is likely higher).", "test_words": None, "forecast": None,
    ...           "advice": "No stopping rule says stop yet.", "stopping": [{"stop": False, "words": "..."}]}
    >>> print(progress_line(2, 30, status))
    model v2 (30 labels): Right on 80% of the last 10 rows it asked about (its hardest cases, so on all rows it \
is likely higher). No stopping rule says stop yet.
    """
    said = [status["accuracy_words"]]
    if status.get("test_words"):
        said.append(status["test_words"])
    if status.get("forecast"):
        said.append(status["forecast_words"])
    said.append(status["advice"])
    said += [v["words"] for v in status.get("stopping", ()) if v.get("stop")]
    return f"model v{version} ({n_labels} labels): " + " ".join(" ".join(str(s).split()) for s in said)


def progress_fields(status: Mapping) -> Dict[str, object]:
    """The session's figures as the columns of :func:`progress_csv_path`'s rows: the estimate
    (``estimate_version``, the model it is of; ``estimate_acc``, ``estimate_lo``, ``estimate_hi``,
    ``estimate_kind``, ``estimate_biased``, ``estimate_n``), ``test_accuracy``, the forecast
    (``forecast_n_labels``, ``forecast_acc``, ``forecast_lo``, ``forecast_hi``), each rule's
    ``stop_<rule>`` and ``stop_<rule>_value``, ``stop_reason`` (the reasons of the rules that say stop,
    else ``""``) and ``advice``. None where the session has no figure.

    Examples
    --------
    >>> from skdbal.labelstudio.progress import progress_fields
    >>> status = {"accuracy": {"version": 3, "accuracy": 0.8, "low": 0.49, "high": 0.94, "method": "wilson",
    ...                        "biased": False, "n_labels": 10}, "test_accuracy": None, "forecast": None,
    ...           "stopping": [{"rule": "label_budget", "stop": True, "value": 200.0, "reason": "spent"}],
    ...           "advice": "1 of 1 stopping rule says you could stop now; labelling goes on until you stop."}
    >>> f = progress_fields(status)
    >>> f["estimate_version"], f["estimate_acc"], f["estimate_n"], f["stop_label_budget"], f["stop_reason"]
    (3, 0.8, 10, True, 'spent')
    """
    e, fc = status.get("accuracy"), status.get("forecast")
    out: Dict[str, object] = {
        "estimate_version": None if e is None else e["version"],
        "estimate_acc": None if e is None else e["accuracy"], "estimate_lo": None if e is None else e["low"],
        "estimate_hi": None if e is None else e["high"], "estimate_kind": None if e is None else e["method"],
        "estimate_biased": None if e is None else e["biased"], "estimate_n": None if e is None else e["n_labels"],
        "test_accuracy": status.get("test_accuracy"),
        "forecast_n_labels": None if not fc else fc["n_labels"], "forecast_acc": None if not fc else fc["accuracy"],
        "forecast_lo": None if not fc else fc["low"], "forecast_hi": None if not fc else fc["high"]}
    verdicts = list(status.get("stopping", ()))
    for v in verdicts:
        out[f"stop_{v['rule']}"] = bool(v["stop"])
        out[f"stop_{v['rule']}_value"] = v.get("value")
    out["stop_reason"] = "; ".join(str(v.get("reason", "")) for v in verdicts if v["stop"]) if verdicts else None
    out["advice"] = status.get("advice")
    return out


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


def report_json_path(labels_csv: str) -> str:
    """The companion report of the labels CSV (:func:`skdbal.labelling.progress_report.save_progress_report`,
    the page's ``report.json``): beside it, its name with ``-report.json``.

    Examples
    --------
    >>> from skdbal.labelstudio.progress import report_json_path
    >>> report_json_path("runs/skdbal-digits-labels.csv")
    'runs/skdbal-digits-labels-report.json'
    """
    stem, _ = os.path.splitext(os.fspath(labels_csv))
    return f"{stem}-report.json"


class ModelProgress:
    """Say the session's accuracy estimate and stopping advice after each retrain of a Label Studio session.

    Add :meth:`after_query` to the session's ``on_query`` callbacks, after
    :class:`~skdbal.labelstudio.LabelStudioSync`'s: at the first query of each new model version it reads
    the session's ``status()`` (its estimate, test accuracy, forecast and rules' verdicts, with their words:
    :func:`skdbal.labelling.progress_report.progress`), and

    - prints :func:`progress_line` (to ``out``, standard output by default);
    - writes it at the head of the project's description, with ``client`` and ``project``
      (:func:`with_progress`);
    - rewrites ``report_path`` (a CSV, one row per version: ``version``, ``time``, ``n_labels``, ``line``
      and :func:`progress_fields`), when given.

    Parameters
    ----------
    session : LabellingSession
    client : label_studio_sdk.LabelStudio, optional
    project : int, optional
    report_path : str, optional
    out : file, optional

    Attributes
    ----------
    rows : list of dict
        One per version reported (as the CSV's rows), oldest first; a restart keeps those of the CSV.

    Examples
    --------
    >>> import io, os, tempfile
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from skdbal import ActiveLearner
    >>> from skdbal.labelling import LabellingSession
    >>> from skdbal.labelstudio.progress import ModelProgress
    >>> session = LabellingSession(ActiveLearner(LogisticRegression(), random_state=0, seeding="step"),
    ...                            np.eye(4), classes=["a", "b"], store=os.path.join(tempfile.mkdtemp(), "s.db"),
    ...                            batch_size=2)
    >>> progress = ModelProgress(session, out=io.StringIO())
    >>> progress.after_query([0, 1])         # no model yet: nothing to say
    >>> progress.rows
    []
    """

    def __init__(self, session, *, client=None, project: Optional[int] = None, report_path: Optional[str] = None,
                 out=None):
        self.session, self.client, self.project = session, client, project
        self.report_path, self.out = report_path, out
        self.rows: List[dict] = _read_rows(report_path)
        self._reported: Optional[int] = None
        self._described: Optional[str] = None     # the line the description should carry (None: it does)
        self._said = False

    def after_query(self, positions=None, scores=None) -> None:
        """The session's ``on_query`` callback (in its loop thread): report a new model version once. Never
        raises: a failure is logged, and the session goes on."""
        try:
            models = self.session.store.models()
            if not models or models[-1]["version"] == self._reported:
                return
            self._reported = int(models[-1]["version"])
            self.report(self._reported, int(models[-1]["n_labels"]))
        except Exception as exc:  # noqa: BLE001 - the advice must never stop the labelling
            logger.warning("skdbal labelstudio: no accuracy estimate for this model (%s: %s)", type(exc).__name__, exc)

    def report(self, version: int, n_labels: int) -> dict:
        """Say model ``version`` now, from the session's status (what :meth:`after_query` does once per
        version); the row written."""
        status = self.session.status()
        line = progress_line(version, n_labels, status)
        row = {"version": version, "time": round(time.time(), 3), "n_labels": n_labels, "line": line,
               **progress_fields(status)}
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

        columns = ["version", "time", "n_labels", "line", *progress_fields({})]
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
