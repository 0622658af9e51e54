"""The simulation loop: query → label → retrain → evaluate against known labels.

:class:`ActiveLearningLoop` drives a learner through its public protocol
(``query``, ``teach``, ``predict``), keeps the pool's bookkeeping in indices
of the original pool, times each step, and writes one history row per step.
:meth:`skdbal.ActiveLearner.simulate` validates its arguments, fits the
initial set and runs this loop; it can also drive any learner that has
those methods.
"""
from __future__ import annotations

import time
from typing import Callable, List, Optional

import numpy as np
from sklearn.base import is_regressor

from ._validation import take_rows

__all__ = ["ActiveLearningLoop", "evaluate"]

#: Keys of a history row that a strategy's ``Acquisition.info`` may not use.
_HISTORY_KEYS = frozenset({"step", "n_labels", "accuracy", "rmse", "query_indices", "query_time", "fit_time"})


def evaluate(model, X_test, y_test) -> dict:
    """Test metrics of a fitted model: ``accuracy``, or ``rmse`` for a regressor.

    For a regressor with 2-d one-hot targets the argmax ``accuracy`` is
    reported too.

    Parameters
    ----------
    model : estimator
        A fitted classifier or regressor (or a learner wrapping one).
    X_test, y_test : array-like or None
        The test set; ``None`` gives an empty dict.

    Returns
    -------
    dict

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.dummy import DummyClassifier
    >>> from skdbal.loop import evaluate
    >>> clf = DummyClassifier(strategy="most_frequent").fit([[0]] * 4, [1, 1, 1, 0])
    >>> evaluate(clf, [[0]] * 4, [1, 0, 1, 1])
    {'accuracy': 0.75}
    """
    if X_test is None:
        return {}
    pred = model.predict(X_test)
    if is_regressor(getattr(model, "estimator_", model)):
        y_test = np.asarray(y_test, dtype=float)
        pred = np.asarray(pred, dtype=float).reshape(y_test.shape)
        row = {"rmse": float(np.sqrt(np.mean((pred - y_test) ** 2)))}
        if y_test.ndim == 2 and y_test.shape[1] > 1:  # one-hot targets: also the argmax accuracy
            row["accuracy"] = float(np.mean(pred.argmax(axis=1) == y_test.argmax(axis=1)))
        return row
    return {"accuracy": float(np.mean(pred == np.asarray(y_test)))}


class ActiveLearningLoop:
    """Run a learner against an oracle with known labels, step by step.

    Parameters
    ----------
    learner : learner
        Has ``query(X_pool, n_instances, candidates=...)``, ``teach(X, y)``,
        ``predict`` and ``y_training_`` (:class:`skdbal.ActiveLearner`).
    X_pool, y_pool : ndarray
        The pool and the oracle's labels.
    n_instances : int, default=1
        Points acquired per step.
    X_test, y_test : array-like, optional
        Evaluated after every step.
    verbose : bool, default=True
        Show a tqdm progress bar.

    Attributes
    ----------
    labelled : ndarray of bool, shape (N,)
        Which pool points are labelled.
    order : list of int
        Pool indices in the order they were labelled.
    history : list of dict
        One row per step, as :meth:`skdbal.ActiveLearner.simulate` returns.

    References
    ----------
    .. [1] P. Atighehchian, F. Branchaud-Charron, J. Freyberg, R. Pardinas,
       L. Schell and G. Pearse, "Baal, a Bayesian active learning library",
       2022 (its ``ActiveLearningLoop``).

    Examples
    --------
    The first ten digits are one of each class: start from them, then
    acquire 5 points per step for two steps.

    >>> import numpy as np
    >>> from sklearn.datasets import load_digits
    >>> from sklearn.linear_model import LogisticRegression
    >>> from skdbal import ActiveLearner
    >>> from skdbal.acquisition import max_entropy
    >>> from skdbal.loop import ActiveLearningLoop
    >>> X, y = load_digits(return_X_y=True)              # 8x8 images, flattened to 64 columns
    >>> learner = ActiveLearner(LogisticRegression(max_iter=500), max_entropy, random_state=0)
    >>> loop = ActiveLearningLoop(learner, X[:200], y[:200], n_instances=5,
    ...                           X_test=X[200:400], y_test=y[200:400], verbose=False)
    >>> row = loop.start(np.arange(10), learner.fit)
    >>> history = loop.run(2)
    >>> [row["n_labels"] for row in history], int(loop.labelled.sum()), loop.order[:10] == list(range(10))
    ([10, 15, 20], 20, True)
    """

    def __init__(self, learner, X_pool, y_pool, *, n_instances: int = 1, X_test=None, y_test=None,
                 verbose: bool = True):
        self.learner = learner
        self.X_pool = X_pool
        self.y_pool = y_pool
        self.n_instances = n_instances
        self.X_test = X_test
        self.y_test = y_test
        self.verbose = verbose
        self.labelled = np.zeros(len(X_pool), dtype=bool)
        self.order: List[int] = []
        self.history: List[dict] = []

    def resume(self, labelled_idx, history) -> "ActiveLearningLoop":
        """Continue from earlier steps: these pool indices are labelled already."""
        self.labelled[np.asarray(labelled_idx, dtype=np.intp)] = True
        self.order = list(np.asarray(labelled_idx).tolist())
        self.history = list(history)
        return self

    def start(self, initial_idx, fit: Callable) -> dict:
        """Step 0: ``fit(X_pool[initial_idx], y_pool[initial_idx])`` and evaluate."""
        initial_idx = np.asarray(initial_idx, dtype=np.intp)
        t0 = time.perf_counter()
        fit(take_rows(self.X_pool, initial_idx), self.y_pool[initial_idx])
        self.labelled[initial_idx] = True
        self.order.extend(initial_idx.tolist())
        row = {"step": 0, "n_labels": len(self.learner.y_training_),
               **evaluate(self.learner, self.X_test, self.y_test),
               "query_indices": initial_idx.tolist(), "query_time": 0.0,
               "fit_time": time.perf_counter() - t0}
        self.history.append(row)
        return row

    def step(self, step: Optional[int] = None, **query_kwargs) -> dict:
        """One round: query the unlabelled pool, label the picks, retrain, evaluate.

        Parameters
        ----------
        step : int, optional
            The row's step number; one after the last by default.
        **query_kwargs :
            Passed to the learner's ``query``.

        Returns
        -------
        row : dict
            Also appended to ``history``.
        """
        if step is None:
            step = self.history[-1]["step"] + 1 if self.history else 1
        remaining = np.flatnonzero(~self.labelled)
        t0 = time.perf_counter()
        q, _ = self.learner.query(self.X_pool, self.n_instances, candidates=remaining, **query_kwargs)
        acquisition = getattr(self.learner, "last_acquisition_", None)
        info = dict(acquisition.info) if acquisition is not None else {}
        clash = sorted(set(info) & _HISTORY_KEYS)
        if clash:  # before teach: the picks stay unlabelled, no history row is written
            raise ValueError(f"the strategy's Acquisition.info uses the history's own keys {clash}; "
                             "rename them")
        t1 = time.perf_counter()
        if self.labelled[q].any():  # pragma: no cover - guarded by construction
            raise RuntimeError("internal error: queried a labelled point")
        self.learner.teach(take_rows(self.X_pool, q), self.y_pool[q])
        self.labelled[q] = True
        self.order.extend(q.tolist())
        t2 = time.perf_counter()
        row = {"step": step, "n_labels": len(self.learner.y_training_),
               **evaluate(self.learner, self.X_test, self.y_test), "query_indices": q.tolist(),
               "query_time": t1 - t0, "fit_time": t2 - t1,
               **{k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in info.items()}}
        self.history.append(row)
        return row

    def run(self, n_queries: int, **query_kwargs) -> List[dict]:
        """Run ``n_queries`` steps (with a progress bar when ``verbose``); return ``history``."""
        from tqdm.auto import tqdm

        first = self.history[-1]["step"] + 1 if self.history else 1
        for step in tqdm(range(first, first + n_queries), disable=not self.verbose,
                         desc="active learning"):
            self.step(step, **query_kwargs)
        return self.history
