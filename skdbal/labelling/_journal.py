"""The loop's journal in the store (private to :mod:`skdbal.labelling`; :class:`StoreJournal` is
exported by :mod:`skdbal.labelling.session`)."""
from __future__ import annotations

import time as _time
from typing import TYPE_CHECKING, List

if TYPE_CHECKING:  # pragma: no cover
    from .session import LabellingSession


class StoreJournal:
    """The loop's journal in the store: one row per model version.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from skdbal import ActiveLearner
    >>> from skdbal.labelling import LabellingSession
    >>> learner = ActiveLearner(LogisticRegression(), random_state=0, seeding="step")
    >>> session = LabellingSession(learner, np.eye(4), classes=["a", "b"],
    ...                            store=os.path.join(tempfile.mkdtemp(), "s.db"), batch_size=2)
    >>> session.journal.rows()          # no model version yet
    []
    """

    def __init__(self, session: "LabellingSession"):
        self.session = session

    def rows(self) -> List[dict]:
        store = self.session.store
        rows, before = [], set()
        for m in store.models():
            now = store.current_labels(upto=m["last_event"])
            new = [i for i in now if i not in before]
            rows.append({"step": m["version"], "n_labels": m["n_labels"], "query_indices": new,
                         "labelled_indices": new, **m["metrics"]})
            before = set(now)
        return rows

    def append(self, row: dict, learner) -> None:
        session = self.session
        metrics = {k: row[k] for k in ("accuracy",) if k in row}
        if row["fit_time"] or row["step"] == 0:  # a new model version
            session._publish()  # before the store says it exists: wait_for_version then finds it published
            session.store.add_model(learner.step_, session.oracle.cursor, len(learner.y_training_), metrics)
            session.last_retrain = _time.time()
