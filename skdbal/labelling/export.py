"""The labels as CSV: what ``GET /api/labels.csv`` serves and ``skdbal labelstudio`` writes beside its store.

One row per labelled item, with the columns :data:`LABELS_CSV_COLUMNS`: the
current label, and for a flagged one the first label and its second look
(:meth:`LabellingSession.labels`). Every text cell (a key, a class, an
annotator's name: people and files choose them) is written so that a
spreadsheet does not run it as a formula (:func:`spreadsheet_safe`).
"""
from __future__ import annotations

import csv
import io
import os
import re
import tempfile
from typing import Callable, Iterable, Mapping, TextIO, TypeVar, Union

_T = TypeVar("_T")

__all__ = ["FORMULA_STARTS", "LABELS_CSV_COLUMNS", "labels_csv_text", "replace_file", "save_labels_csv",
           "spreadsheet_safe", "write_labels_csv"]

#: The labels CSV's columns: the current label, and for a flagged one the first label and its second look;
#: ``audit``: whether it is an audit label (never trained on), when the session audits.
LABELS_CSV_COLUMNS = ("item", "key", "label", "annotator", "time", "p_given", "first_label", "first_annotator",
                      "second_look", "audit")


#: What a text may start with and be run as a formula: OWASP's list (``= + - @``, tab, carriage return) and
#: the null character of its ASVS (1.2.10).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\0")
#: A plain decimal number below zero (``-1``, ``-0.25``): a spreadsheet reads it as a number, and runs nothing.
_NEGATIVE_NUMBER = re.compile(r"-[0-9]+(\.[0-9]+)?", re.ASCII)


def spreadsheet_safe(value):
    """``value`` as a cell that a spreadsheet will not run as a formula: a text that starts with one of
    :data:`FORMULA_STARTS` (``= + - @``, a tab, a carriage return, a null) gets a leading quote, but for a plain
    negative number (``-1``, ``-1.5``: a minus, digits, and at most one point followed by digits), which stays
    as it is: a key or class ``-1`` is exported as ``-1``. A minus followed by anything else (``-1+1``,
    ``-cmd``, ``-1e5``) gets the quote. Numbers pass as they are.

    Examples
    --------
    >>> from skdbal.labelling.export import spreadsheet_safe
    >>> spreadsheet_safe('=HYPERLINK("http://evil.example")'), spreadsheet_safe("cat"), spreadsheet_safe(-1.5)
    ('\\'=HYPERLINK("http://evil.example")', 'cat', -1.5)
    >>> spreadsheet_safe("-1"), spreadsheet_safe("-1+1"), spreadsheet_safe("+1")
    ('-1', "'-1+1", "'+1")
    """
    if isinstance(value, str) and value[:1] in FORMULA_STARTS and not _NEGATIVE_NUMBER.fullmatch(value):
        return "'" + value
    return value


def write_labels_csv(rows: Iterable[Mapping], file: TextIO) -> int:
    """Write the header and ``rows`` (dicts with the keys :data:`LABELS_CSV_COLUMNS`, as
    :meth:`LabellingSession.labels` gives them) to the text ``file``; None is an empty cell.

    Returns
    -------
    int
        The number of rows written (the header not counted).

    Examples
    --------
    >>> import io
    >>> from skdbal.labelling.export import write_labels_csv
    >>> out = io.StringIO()
    >>> write_labels_csv([{"item": 3, "key": "3", "label": "7", "annotator": "=cmd", "time": 1.5}], out)
    1
    >>> out.getvalue().splitlines()[1]       # lines end in CRLF, as RFC 4180 says
    "3,3,7,'=cmd,1.5,,,,,"
    """
    writer = csv.writer(file, lineterminator="\r\n")
    writer.writerow(LABELS_CSV_COLUMNS)
    n = 0
    for r in rows:
        writer.writerow(["" if r.get(c) is None else spreadsheet_safe(r[c]) for c in LABELS_CSV_COLUMNS])
        n += 1
    return n


def labels_csv_text(session) -> str:
    """The current labels of ``session`` (a :class:`~skdbal.labelling.LabellingSession`) as CSV text.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> from skdbal.labelling.export import labels_csv_text
    >>> session = SimpleNamespace(labels=lambda: [{"item": 0, "key": "a.png", "label": "cat"}])
    >>> labels_csv_text(session).splitlines()[1]
    '0,a.png,cat,,,,,,,'
    """
    out = io.StringIO()
    write_labels_csv(session.labels(), out)
    return out.getvalue()


def save_labels_csv(session, path: Union[str, os.PathLike]) -> int:
    """Write the labels of ``session`` to ``path`` atomically: to a temporary file in the same
    folder, flushed to disk, then renamed over ``path`` (:func:`os.replace`), so that a reader, or a
    kill at any moment, sees the old file or the new one, never half of one. The file is readable
    by its owner only (mode 600, as :func:`tempfile.mkstemp` makes it): labels can be private.

    Returns
    -------
    int
        The number of labels written.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from types import SimpleNamespace
    >>> from skdbal.labelling.export import save_labels_csv
    >>> session = SimpleNamespace(labels=lambda: [{"item": 0, "key": "a.png", "label": "cat"}])
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "labels.csv"
    >>> save_labels_csv(session, path)
    1
    >>> path.read_text().splitlines()[1]
    '0,a.png,cat,,,,,,,'
    """
    rows = session.labels()
    return replace_file(path, lambda f: write_labels_csv(rows, f))


def replace_file(path: Union[str, os.PathLike], write: Callable[[TextIO], _T]) -> _T:
    """Write a text file whole or not at all: ``write(f)`` fills a temporary file beside ``path``
    (mode 600, as :func:`tempfile.mkstemp` makes it), which is synced and renamed over ``path``; if
    ``write`` fails, the temporary file is removed and ``path`` is left as it was. Returns what
    ``write`` returns.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from skdbal.labelling.export import replace_file
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "notes.txt"
    >>> replace_file(path, lambda f: f.write("one\\n"))
    4
    >>> def fails(f):
    ...     f.write("half")
    ...     raise OSError("disk full")
    >>> try:
    ...     replace_file(path, fails)
    ... except OSError as exc:
    ...     print(exc)
    disk full
    >>> path.read_text(), sorted(p.name for p in path.parent.iterdir())
    ('one\\n', ['notes.txt'])
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            result = write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return result

