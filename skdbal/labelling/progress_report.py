"""How good the model is and whether to stop, in one place: what the page's status carries and the
report that goes with ``labels.csv``.

:func:`progress` gathers, for a :class:`~skdbal.labelling.LabellingSession`, the accuracy estimate
(:mod:`skdbal.labelling.accuracy_panel`), the test accuracy when a test set was given, the forecast of the
learning curve (:mod:`skdbal.labelling.learning_forecast`) and what each stopping rule says
(:mod:`skdbal.labelling.stop_advice`), each with its words. :func:`progress_report` adds every model
version's figures: ``GET /api/report.json`` serves it, and :func:`save_progress_report` writes it
(``report.json``) whole or not at all, as :func:`~skdbal.labelling.export.save_labels_csv` writes
``labels.csv``. Everything is read from the store: a restarted session reports the same.
"""
from __future__ import annotations

import json
import os
from typing import List, Optional, Union

from .accuracy_panel import estimate_words
from .export import replace_file
from .learning_forecast import MIN_POINTS, MIN_SPAN, learning_forecast
from .stop_advice import advice_words, verdict_line, verdict_words

__all__ = ["progress", "version_figures", "progress_report", "save_progress_report", "FORECAST_NOT_YET"]

#: What the page says while the estimates are too few to forecast from (:mod:`skdbal.labelling.learning_forecast`).
FORECAST_NOT_YET = (f"No forecast yet: it needs {MIN_POINTS} estimates, the last at {MIN_SPAN:g} times the labels "
                    "of the first or more, rising.")


def _forecast(session, estimates: dict, latest: Optional[dict]) -> Optional[dict]:
    """The forecast from the estimates of the latest's kind (biased or not), independent of one another:
    a biased share pools the last ``window`` versions, so only every ``window``-th counts, back from the last."""
    if latest is None:
        return None
    same = [e for _, e in sorted(estimates.items()) if e["biased"] == latest["biased"]]
    if latest["biased"]:
        same = same[::-1][::session.panel.window][::-1]
    models = session.store.models()
    n_now = models[-1]["n_labels"] if models else 0
    return learning_forecast([e["n_labels_model"] for e in same], [e["accuracy"] for e in same],
                             [e["low"] for e in same], [e["high"] for e in same], n_now=n_now,
                             n_pool=len(session.keys), biased=latest["biased"], noun=session.item_noun,
                             confidence=latest["confidence"])


def progress(session) -> dict:
    """How good the model is and what the stopping rules say, now.

    Returns
    -------
    dict
        ``accuracy``: the latest estimate (:func:`~skdbal.labelling.accuracy_panel.estimate_fields`,
        with ``version``, ``n_labels_model`` and ``words``), None before one; ``accuracy_words``;
        ``test_accuracy``: the last model version's accuracy on the test set given (None without one),
        ``test_size``, ``test_version`` and ``test_words``; ``forecast`` (None when the estimates say too
        little) and ``forecast_words`` (:data:`FORECAST_NOT_YET` then, None before any estimate);
        ``stopping``: each rule's verdict at the last version (``rule``, ``kind``, ``params``,
        ``stop``, ``value``, ``reason``, ``stop_set_size``, ``words`` and ``line``, as the page lists
        it); ``advice``: the verdicts in one line.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from skdbal import ActiveLearner
    >>> from skdbal.labelling import LabellingSession
    >>> from skdbal.labelling.progress_report import progress
    >>> session = LabellingSession(ActiveLearner(LogisticRegression(), random_state=0, seeding="step"),
    ...                            np.eye(4), classes=["a", "b"], store=os.path.join(tempfile.mkdtemp(), "s.db"),
    ...                            batch_size=2)
    >>> p = progress(session)                   # no model yet
    >>> p["accuracy"], p["stopping"], p["forecast"]
    (None, [], None)
    """
    estimates = session.panel.estimates()
    latest = estimates[max(estimates)] if estimates else None
    noun = session.item_noun
    if latest is not None:
        latest = dict(latest, words=estimate_words(latest, noun))
    models = session.store.models()
    metrics: dict = models[-1]["metrics"] if models else {}
    version: int = int(models[-1]["version"]) if models else -1
    verdicts = [dict(v, words=verdict_words(v, noun), line=verdict_line(v, noun)) for v in metrics.get("stopping", [])]
    y_test = getattr(session, "y_test", None)
    n_test = None if y_test is None else len(y_test)
    test = float(metrics["accuracy"]) if "accuracy" in metrics else None
    forecast = _forecast(session, estimates, latest)
    return {"accuracy": latest, "accuracy_words": estimate_words(latest, noun),
            "test_accuracy": test, "test_size": n_test, "test_version": None if test is None else version,
            "test_words": None if test is None else (f"On the test set given ({n_test} {noun}): {100 * test:.1f}% "
                                                     f"right (model version {version})."),
            "forecast": forecast,
            "forecast_words": forecast["words"] if forecast else FORECAST_NOT_YET if latest else None,
            "stopping": verdicts, "advice": advice_words(verdicts, rules=session.stopping is not None)}


def version_figures(session) -> List[dict]:
    """Per model version: ``version``, ``n_labels``, ``estimate`` (the estimate of that version, as
    :func:`progress` gives it, None while it is current or when it judged nothing), ``test_accuracy``
    (None without a test set) and ``stopping`` (its rules' verdicts, with their words).

    Parameters
    ----------
    session : LabellingSession

    Returns
    -------
    list of dict
        One per model version in the store, oldest first; empty before the first model.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from skdbal import ActiveLearner
    >>> from skdbal.labelling import LabellingSession
    >>> from skdbal.labelling.progress_report import version_figures
    >>> session = LabellingSession(ActiveLearner(LogisticRegression(), random_state=0, seeding="step"),
    ...                            np.eye(4), classes=["a", "b"], store=os.path.join(tempfile.mkdtemp(), "s.db"),
    ...                            batch_size=2)
    >>> version_figures(session)                # no model trained yet
    []
    """
    estimates = session.panel.estimates()
    noun = session.item_noun
    out = []
    for m in session.store.models():
        e = estimates.get(m["version"])
        out.append({"version": m["version"], "n_labels": m["n_labels"],
                    "estimate": None if e is None else dict(e, words=estimate_words(e, noun)),
                    "test_accuracy": m["metrics"].get("accuracy"),
                    "stopping": [dict(v, words=verdict_words(v, noun)) for v in m["metrics"].get("stopping", [])]})
    return out


def progress_report(session) -> dict:
    """The companion report of ``labels.csv``: ``labelled`` (labels now), ``model_version``, what
    :func:`progress` gives, and ``versions`` (:func:`version_figures`).

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from skdbal import ActiveLearner
    >>> from skdbal.labelling import LabellingSession
    >>> from skdbal.labelling.progress_report import progress_report
    >>> session = LabellingSession(ActiveLearner(LogisticRegression(), random_state=0, seeding="step"),
    ...                            np.eye(4), classes=["a", "b"], store=os.path.join(tempfile.mkdtemp(), "s.db"),
    ...                            batch_size=2)
    >>> r = progress_report(session)
    >>> r["labelled"], r["model_version"], r["versions"], r["advice"]
    (0, -1, [], 'No stopping rule has spoken yet: they speak once a model is trained.')
    """
    models = session.store.models()
    return {"labelled": len(session.store.current_labels()),
            "model_version": models[-1]["version"] if models else -1,
            **progress(session), "versions": version_figures(session)}


def save_progress_report(session, path: Union[str, os.PathLike]) -> dict:
    """Write :func:`progress_report` as JSON to ``path``, whole or not at all (mode 600,
    :func:`~skdbal.labelling.export.replace_file`); the report.

    Examples
    --------
    >>> import json, os, pathlib, tempfile
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from skdbal import ActiveLearner
    >>> from skdbal.labelling import LabellingSession
    >>> from skdbal.labelling.progress_report import save_progress_report
    >>> session = LabellingSession(ActiveLearner(LogisticRegression(), random_state=0, seeding="step"),
    ...                            np.eye(4), classes=["a", "b"], store=os.path.join(tempfile.mkdtemp(), "s.db"),
    ...                            batch_size=2)
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "report.json"
    >>> _ = save_progress_report(session, path)
    >>> json.loads(path.read_text())["model_version"]
    -1
    """
    report = progress_report(session)
    replace_file(path, lambda f: json.dump(report, f, indent=1, allow_nan=False))
    return report
