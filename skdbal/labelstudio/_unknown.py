"""Annotations whose choice is not one of the session's classes: kept aside, never recorded as labels.

Private to :mod:`skdbal.labelstudio`. Label Studio accepts a choice that is not in its labelling config
(posted through its API), and an admin may add a choice to the config while skdbal runs: such an
annotation is no label the model can learn, so :meth:`LabelStudioSync.record
<skdbal.labelstudio.LabelStudioSync.record>` keeps it here, by task, rather than failing. Each pull
(and each webhook) reads a task's annotations again, so what is kept here is what Label Studio holds
now: a task relabelled with a class, or whose annotation is deleted, leaves it; and a session whose
classes include the label (a new store: a session's classes are fixed) records it at its first pull.

An annotation that names no single class (several choices, no choice, or only another control's
result) is kept aside in the same way, with its reason: the task has no label from it, and a label an
earlier version of it gave the item is taken back.
"""
from __future__ import annotations

import csv
import json
import logging
import os
import threading
from typing import Dict, List, Optional, Tuple

logger = logging.getLogger("skdbal.labelstudio")

#: The columns of the report of the annotations kept aside (:func:`save_unknown_csv`).
UNKNOWN_COLUMNS = ("task", "item", "key", "label", "annotator", "annotation", "updated_at", "reason")
#: Why an annotation is kept aside: its one choice is not a class, or it names no single class.
NOT_A_CLASS, SEVERAL, NO_CHOICE, OTHER_CONTROL = "not a class", "several choices", "no choice", "another control"
#: A label is shown in the log line at most this long (Label Studio takes any text as a choice).
_SHOWN = 80
#: A label kept aside is kept (and reported) at most this long; the rest is cut, and its length said.
MAX_LABEL = 1000


def chosen_label(annotation: dict, from_name: str) -> Tuple[str, str]:
    """The label an annotation chose with the ``<Choices>`` named ``from_name``, and ``""``; or, when it
    names no single choice there, ``(what it named, reason)``: :data:`SEVERAL` (the choices, as a JSON
    list), :data:`NO_CHOICE` (an empty result, or empty choices), :data:`OTHER_CONTROL` (results of
    other controls only: another ``from_name``, a text area...).

    Examples
    --------
    >>> from skdbal.labelstudio._unknown import chosen_label
    >>> def of(*results):
    ...     return {"result": list(results)}
    >>> chosen_label(of({"from_name": "c", "type": "choices", "value": {"choices": ["7"]}}), "c")
    ('7', '')
    >>> chosen_label(of({"from_name": "c", "type": "choices", "value": {"choices": ["8", "9"]}}), "c")
    ('["8", "9"]', 'several choices')
    >>> chosen_label(of(), "c"), chosen_label(of({"from_name": "t", "type": "textarea"}), "c")
    (('', 'no choice'), ('', 'another control'))
    """
    results = [r for r in annotation.get("result") or [] if isinstance(r, dict)]
    chosen: List[str] = []
    ours = False
    for r in results:
        if r.get("from_name") == from_name and r.get("type") == "choices":
            ours = True
            raw = r.get("value")
            value = raw if isinstance(raw, dict) else {}
            given = value.get("choices") or []
            for c in given if isinstance(given, list) else [given]:
                if str(c) not in chosen:
                    chosen.append(str(c))
    if len(chosen) == 1:
        return chosen[0], ""
    if chosen:
        return json.dumps(chosen, ensure_ascii=False), SEVERAL
    return "", OTHER_CONTROL if results and not ours else NO_CHOICE


def _capped(text: str) -> str:
    """``text`` cut to :data:`MAX_LABEL` characters, its length said after the cut."""
    text = str(text)
    return text if len(text) <= MAX_LABEL else f"{text[:MAX_LABEL]}... ({len(text):,} characters)"


def printable(text) -> str:
    r"""``text`` with every character that is not printable (control characters: ESC, a line break, a
    tab; format characters such as a right-to-left override) written as Python escapes it (``\x1b``,
    ``\n``, ``\u202e``), so that a report shown in a terminal plays no escape sequence.

    Examples
    --------
    >>> from skdbal.labelstudio._unknown import printable
    >>> print(printable("a\x1b[31mb\nc d"))
    a\x1b[31mb\nc d
    """
    text = str(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


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
        """Keep ``row`` (the :data:`UNKNOWN_COLUMNS`; ``reason`` :data:`NOT_A_CLASS` if not given; the label
        cut to :data:`MAX_LABEL` characters) for its task, replacing the task's earlier one; the first
        time this annotation is kept with this label and reason, one line is logged
        (``skdbal.labelstudio``, WARNING). Whether it changed what is kept."""
        row = {**row, "label": _capped(row["label"]), "reason": row.get("reason") or NOT_A_CLASS}
        said = (row["task"], row["annotation"], row["label"], row["reason"])
        with self._lock:
            if self._rows.get(row["task"]) == row:
                return False
            self._rows[row["task"]] = row
            self.changes += 1
            new = said not in self._said
            self._said.add(said)
        if new and row["reason"] == NOT_A_CLASS:
            logger.warning("skdbal labelstudio: annotation %s of task %s (item %s) chose %s, which is not one of "
                           "the classes %s: kept aside, not trained on (a session with that class records it)",
                           row["annotation"], row["task"], _shown(row["key"]), _shown(row["label"]), self.classes)
        elif new:
            named = f" {_shown(row['label'])}" if row["label"] else ""
            logger.warning("skdbal labelstudio: annotation %s of task %s (item %s) names no single class (%s%s): "
                           "kept aside, the item has no label from it", row["annotation"], row["task"],
                           _shown(row["key"]), row["reason"], named)
        return True

    def not_one_class(self) -> int:
        """How many of the tasks kept aside have a latest annotation that names no single class."""
        with self._lock:
            return sum(r["reason"] != NOT_A_CLASS for r in self._rows.values())

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
    owner only (as :func:`skdbal.labelling.export.save_labels_csv`), every text cell spreadsheet-safe and
    printable (:func:`printable`: a control character is written as its escape, ``\\x1b``).
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
    ...                    "annotation": 31, "updated_at": "2026-01-01T00:00:00Z", "reason": "not a class"}],
    ...                  str(path))
    1
    >>> path.read_text().splitlines()[1]
    "7,2,c.png,'=bird,labelstudio:1,31,2026-01-01T00:00:00Z,not a class"
    """
    from ..labelling.export import replace_file, spreadsheet_safe

    if not rows and not always and not os.path.exists(path):
        return None
    def write(f) -> None:
        writer = csv.writer(f, lineterminator="\r\n")
        writer.writerow(UNKNOWN_COLUMNS)
        for r in rows:
            writer.writerow(["" if r.get(c) is None else spreadsheet_safe(printable(r[c]) if isinstance(r[c], str)
                                                                         else r[c]) for c in UNKNOWN_COLUMNS])

    replace_file(path, write)
    return len(rows)
