"""What ``skdbal labelstudio`` writes beside its store as it runs and when it stops, and its last pull.

Private to :mod:`skdbal.labelstudio`: the labels CSV (:func:`skdbal.labelling.export.save_labels_csv`),
rewritten by :func:`keep_labels_csv` while the command runs, its companion report (the page's
``report.json``) and the report of the annotations kept aside (naming no single class), and on stop
:func:`last_pull` then :func:`say_stopped`, so that the CSV holds what was annotated up to the stop.
"""
from __future__ import annotations

import sys
import threading

from ._unknown import save_unknown_csv, unknown_csv_path


def last_pull(sync) -> int:
    """Pull once more as the command stops, so that what was annotated up to then is in the store and the
    CSV; how many events it added. Best effort: Label Studio away, refusing, or a second Ctrl-C is said in
    one line and the command stops all the same (the next start pulls what this one missed).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> from skdbal.labelstudio._outputs import last_pull
    >>> last_pull(SimpleNamespace(pull=lambda: 2))
    2
    >>> def away():
    ...     raise ConnectionError("refused")
    >>> import contextlib, io
    >>> with contextlib.redirect_stderr(io.StringIO()) as err:
    ...     last_pull(SimpleNamespace(pull=away))
    0
    >>> print(err.getvalue().strip())
    the last pull did not happen (ConnectionError: refused); the next start pulls what it would have
    """
    try:
        return sync.pull()
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - stopping as asked, and said
        text = " ".join(str(exc).split())[:200]
        print(f"the last pull did not happen ({type(exc).__name__}: {text}); the next start pulls what it "
              f"would have", file=sys.stderr, flush=True)
        return 0


def say_stopped(session, store, csv_path: str, sync=None, report: bool = False) -> None:
    """Write the CSV (with ``report`` its companion report, :func:`save_report`; with a ``sync``, the report
    of the annotations kept aside) a last time, and say where the labels are."""
    from ..labelling.export import save_labels_csv

    n = save_labels_csv(session, csv_path)
    if report:
        save_report(session, csv_path)
    aside = save_unknown(sync, csv_path)
    print(f"stopped; {n} labels in {store} and {csv_path}" + ("" if not aside else
          f"; {aside} annotations naming no single class of the session kept aside, in {unknown_csv_path(csv_path)}"),
          file=sys.stderr)


def save_unknown(sync, csv_path: str) -> int:
    """Write the report of ``sync``'s annotations kept aside beside the CSV (once there is one); how many."""
    if sync is None:
        return 0
    return save_unknown_csv(sync.unknown_labels(), unknown_csv_path(csv_path)) or 0


def save_report(session, csv_path: str) -> None:
    """Write the labels CSV's companion report (the page's ``report.json``) beside it
    (:func:`skdbal.labelstudio.progress.report_json_path`)."""
    from ..labelling import progress_report
    from .progress import report_json_path

    progress_report.save_progress_report(session, report_json_path(csv_path))


def keep_labels_csv(session, path: str, stop: threading.Event, interval: float, sync=None,
                     report: bool = False) -> None:
    """Rewrite ``path`` (atomically) each time the store has new events, until ``stop``; with ``report``, its
    companion report too (:func:`save_report`), also after a new model version; and with a ``sync`` the
    report of its annotations kept aside beside it (:func:`save_unknown`) when they change. A failed write
    (a full disk) is said once on stderr and tried again at the next change."""
    from ..labelling.export import save_labels_csv

    written, said = None, False
    while not stop.wait(interval):
        models = session.store.models() if report else None
        last = (session.store.last_event(), models[-1]["version"] if models else -1,
                None if sync is None else sync.kept_aside.changes)
        if last == written:
            continue
        try:
            save_labels_csv(session, path)
            if report:
                save_report(session, path)
            save_unknown(sync, path)
            written, said = last, False
        except Exception as exc:  # noqa: BLE001 - the sync goes on; the file is written again on stop
            if not said:
                print(f"cannot write {path}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
                said = True


