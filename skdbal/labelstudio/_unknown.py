"""Annotations whose choice is not one of the session's classes: kept aside, never recorded as labels.

Private to :mod:`skdbal.labelstudio`. Label Studio accepts a choice that is not in its labelling config
(posted through its API), and an admin may add a choice to the config while skdbal runs: such an
annotation is no label the model can learn, so :meth:`LabelStudioSync.record
<skdbal.labelstudio.LabelStudioSync.record>` keeps it here, by task, rather than failing. Each pull
(and each webhook) reads a task's annotations again, so what is kept here is what Label Studio holds
now: a task relabelled with a class, or whose annotation is deleted, leaves it; and a session whose
classes include the label (a new store: a session's classes are fixed) records it at its first pull.
"""
from __future__ import annotations

import csv
import logging
import os
import tempfile
import threading
from typing import Dict, List, Optional

logger = logging.getLogger("skdbal.labelstudio")

#: The columns of the report of the annotations kept aside (:func:`save_unknown_csv`).
UNKNOWN_COLUMNS = ("task", "item", "key", "label", "annotator", "annotation", "updated_at")
#: A label is shown in the log line at most this long (Label Studio takes any text as a choice).
_SHOWN = 80


def _shown(text: str) -> str:
    """``text`` as the log line shows it: quoted, escaped (no line break gets through), cut to ``_SHOWN``."""
    said = repr(str(text))
    return said if len(said) <= _SHOWN else said[:_SHOWN - 4] + "...'"


class KeptAside:
    """The tasks whose latest annotation chose a label outside ``classes``, by task id (thread-safe:
    pulls and webhooks record from their own threads).

    Examples
    --------
    >>> from skdbal.labelstudio._unknown import KeptAside
    >>> kept = KeptAside(["cat", "dog"])
    >>> kept.keep({"task": 7, "item": 2, "key": "c.png", "label": "bird", "annotator": "labelstudio:1",
    ...            "annotation": 31, "updated_at": "2026-01-01T00:00:00Z"})
    True
    >>> [r["label"] for r in kept.rows()], kept.items(), kept.changes
    (['bird'], {2}, 1)
    >>> kept.drop(7), kept.rows(), kept.changes
    (True, [], 2)
    """

    def __init__(self, classes):
        self.classes = [str(c) for c in classes]
        self._rows: Dict[int, dict] = {}
        self._said: set = set()
        self._lock = threading.Lock()
        #: Moves at each change: what the report's writer watches.
        self.changes = 0

    def keep(self, row: dict) -> bool:
        """Keep ``row`` (the :data:`UNKNOWN_COLUMNS`) for its task, replacing the task's earlier one; the
        first time this annotation is kept with this label, one line is logged (``skdbal.labelstudio``,
        WARNING). Whether it changed what is kept."""
        said = (row["task"], row["annotation"], row["label"])
        with self._lock:
            if self._rows.get(row["task"]) == row:
                return False
            self._rows[row["task"]] = dict(row)
            self.changes += 1
            new = said not in self._said
            self._said.add(said)
        if new:
            logger.warning("skdbal labelstudio: annotation %s of task %s (item %s) chose %s, which is not one of "
                           "the classes %s: kept aside, not trained on (a session with that class records it)",
                           row["annotation"], row["task"], _shown(row["key"]), _shown(row["label"]), self.classes)
        return True

    def drop(self, task: int) -> bool:
        """Forget the task's annotation kept aside (its latest is a class now, or it has none); whether
        there was one."""
        with self._lock:
            if self._rows.pop(task, None) is None:
                return False
            self.changes += 1
            return True

    def rows(self) -> List[dict]:
        """What is kept aside, by task id."""
        with self._lock:
            return [dict(self._rows[t]) for t in sorted(self._rows)]

    def items(self) -> set:
        """The pool items of the tasks kept aside."""
        with self._lock:
            return {r["item"] for r in self._rows.values()}

    def __len__(self) -> int:
        with self._lock:
            return len(self._rows)


def unknown_csv_path(labels_csv: str) -> str:
    """The report of the annotations kept aside, beside the labels CSV: its name with ``-unknown``.

    Examples
    --------
    >>> from skdbal.labelstudio._unknown import unknown_csv_path
    >>> unknown_csv_path("runs/skdbal-digits-labels.csv")
    'runs/skdbal-digits-labels-unknown.csv'
    """
    stem, ext = os.path.splitext(os.fspath(labels_csv))
    return f"{stem}-unknown{ext or '.csv'}"


def save_unknown_csv(rows: List[dict], path: str, *, always: bool = False) -> Optional[int]:
    """Write ``rows`` (the :data:`UNKNOWN_COLUMNS`) to ``path`` as CSV, atomically and readable by its
    owner only (as :func:`skdbal.labelling.export.save_labels_csv`), every text cell spreadsheet-safe.
    With no rows and no file there (and not ``always``) nothing is written: the report appears with
    the first annotation kept aside, and stays (emptied) once it has. The number of rows, or None.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from skdbal.labelstudio._unknown import save_unknown_csv
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "labels-unknown.csv"
    >>> save_unknown_csv([], str(path)), path.exists()
    (None, False)
    >>> save_unknown_csv([{"task": 7, "item": 2, "key": "c.png", "label": "=bird", "annotator": "labelstudio:1",
    ...                    "annotation": 31, "updated_at": "2026-01-01T00:00:00Z"}], str(path))
    1
    >>> path.read_text().splitlines()[1]
    "7,2,c.png,'=bird,labelstudio:1,31,2026-01-01T00:00:00Z"
    """
    from ..labelling.export import spreadsheet_safe

    if not rows and not always and not os.path.exists(path):
        return None
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f, lineterminator="\r\n")
            writer.writerow(UNKNOWN_COLUMNS)
            for r in rows:
                writer.writerow(["" if r.get(c) is None else spreadsheet_safe(r[c]) for c in UNKNOWN_COLUMNS])
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return len(rows)
