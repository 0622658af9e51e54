"""A learner's own pool, as one object: :class:`LabelledPool`.

Its rows, their identifiers, which of them are labelled and where each label sits in the
learner's training set, in what order the labels came, and the log of every change of a label.
:class:`~skdbal.ActiveLearner` owns one as ``pool_`` (given by ``set_pool``, ``fit`` with missing
labels or ``simulate``) and reads its ``X_pool_``, ``pool_ids_``, ``labelled_idx_``,
``label_log_``, ``n_pool_``, ``labelled_mask_`` and ``y_pool_`` from it.

The functions after :func:`missing_mask` are the pieces a pool and its learner share: which labels
are missing, the known ones, a pool's ids, the training labels after labelling, log entries.
This module never imports the learner.
"""
from __future__ import annotations

from typing import Any, List, Optional, Tuple

import numpy as np
from sklearn.base import is_regressor

from .._validation import check_candidates, check_pool, is_lazy, pool_backend, read_rows, take_rows
from ._inputs import check_X, copy_rows, validate_Xy

__all__ = ["LabelledPool"]

def missing_mask(y, missing_label) -> np.ndarray:
    """Which rows of ``y`` are unlabelled: equal to ``missing_label`` (NaN and None match NaN and
    None). A 2-d row is unlabelled when all its entries are.

    >>> missing_mask(np.array([0.0, np.nan, 2.0]), np.nan).tolist()
    [False, True, False]
    >>> missing_mask(np.array([[np.nan, 1.0], [np.nan, np.nan]]), None).tolist()
    [False, True]
    >>> missing_mask(np.array([0, -1, 1]), -1).tolist()
    [False, True, False]
    """
    y = np.asarray(y)
    ml = missing_label
    nan_like = ml is None or (isinstance(ml, (float, np.floating)) and np.isnan(ml))
    if nan_like and y.dtype.kind == "f":
        miss = np.isnan(y)
    elif nan_like and y.dtype.kind == "O":
        miss = np.asarray(np.frompyfunc(lambda v: v is None or (isinstance(v, float) and v != v), 1, 1)(y), dtype=bool)
    elif nan_like:
        miss = np.zeros(y.shape, dtype=bool)
    else:
        miss = y == ml if y.dtype.kind not in "fO" or not isinstance(ml, str) else np.zeros(y.shape, bool)
        miss = np.asarray(miss, dtype=bool).reshape(y.shape)
    return miss.all(axis=1) if miss.ndim == 2 else miss


def has_missing(y, missing_label) -> bool:
    """Whether some row of ``y`` is unlabelled; False for a ``y`` that cannot be compared."""
    try:
        return bool(missing_mask(y, missing_label).any())
    except (TypeError, ValueError):
        return False


def known_labels(y: np.ndarray, missing: np.ndarray, template) -> np.ndarray:
    """The labels of the rows of ``y`` that are not ``missing``, in row order. Integer class
    labels stored in a float array because of NaN become integers again (unless ``template``,
    the estimator to train, is a regressor); labels from an object array get the dtype of
    their values.

    >>> from sklearn.linear_model import LinearRegression, LogisticRegression
    >>> y, missing = np.array([0.0, np.nan, 1.0]), np.array([False, True, False])
    >>> known_labels(y, missing, LogisticRegression()), known_labels(y, missing, LinearRegression())
    (array([0, 1]), array([0., 1.]))
    """
    y_known = y[np.flatnonzero(~missing)]
    if y.dtype.kind == "f" and missing.any() and not is_regressor(template) \
            and y_known.ndim == 1 and np.all(np.mod(y_known, 1) == 0):
        y_known = y_known.astype(np.int64)  # 0., 1., NaN -> 0, 1: the labels were integers
    elif y.dtype.kind == "O" and len(y_known):
        y_known = np.array(y_known.tolist())
    return y_known


def check_ids(ids, n: int) -> np.ndarray:
    """The identifiers of a pool's ``n`` rows: their positions by default, else unique, one per row."""
    if ids is None:
        return np.arange(n)
    ids = np.asarray(ids)
    if ids.shape != (n,):
        raise ValueError(f"ids must have one entry per pool row ({n}); got shape {ids.shape}")
    if len(np.unique(ids)) != n:
        raise ValueError("ids contain duplicates")
    return ids


def plain(value):
    """A label or id as a plain Python value (a list for a row of targets)."""
    return value.tolist() if hasattr(value, "tolist") else value


def merge_labels(y_training: np.ndarray, y: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The training labels after labelling: ``y[i]`` replaces training label ``rows[i]`` where
    ``rows[i] >= 0`` (a changed label keeps its place), and the others are appended, in order.
    A new array; the dtype widens to hold both.

    >>> merge_labels(np.array([3, 4]), np.array([7, 8, 9]), np.array([-1, 0, -1])).tolist()
    [8, 4, 7, 9]
    """
    new = rows < 0
    if len(y_training) == 0:
        y_training = y[:0]
    y_all = np.concatenate([y_training, y[new]]) if new.any() else np.array(y_training, copy=True)
    if (~new).any():
        if not np.can_cast(y.dtype, y_all.dtype, casting="same_kind"):
            y_all = y_all.astype(np.result_type(y_all.dtype, y.dtype))
        y_all[rows[~new]] = y[~new]
    return y_all


def log_entries(positions, ids, labels, annotators, times, rows, y_training) -> List[dict]:
    """One ``label_log_`` entry per position: its ``id``, the ``label`` given (None when it is
    withdrawn), ``annotator``, ``time``, and the ``previous`` label, training label ``rows[i]``
    (None where ``rows[i] < 0``: the row was unlabelled).

    >>> log_entries([2], np.array([10, 11, 12]), [1], ["ann"], [None], [0], np.array([5]))
    [{'position': 2, 'id': 12, 'label': 1, 'annotator': 'ann', 'time': None, 'previous': 5}]
    """
    return [{"position": int(p), "id": plain(ids[p]), "label": plain(lab), "annotator": a, "time": t,
             "previous": None if r < 0 else plain(y_training[r])}
            for p, lab, a, t, r in zip(positions, labels, annotators, times, rows)]


class LabelledPool:
    """A learner's own pool: its rows, which are labelled, and the log of every label given.

    ``row`` and ``order`` are the bookkeeping: which training-set row holds the label of each
    position, and the labelled positions in the order their labels came. :meth:`add` and
    :meth:`remove` return new pools and never change this one, so that the learner computes its
    next state aside and commits it only once the labels are checked and the model, if asked, is
    retrained. The log is the one exception: it only grows, and is shared by a pool and the pools
    made from it, since the learner appends to it (:meth:`record`) only when it commits.

    Parameters
    ----------
    row : ndarray of intp, shape (n,)
        The training-set row of each pool position's label; -1 where it is unlabelled.
    order : ndarray of intp
        The labelled positions, in the order their labels came.
    X : array-like of shape (n, ...), optional
        The pool's rows (an array, a DataFrame, or a dask array left where it lives).
    ids : ndarray of shape (n,), optional
        The rows' identifiers; their positions by default.
    log : list of dict, optional
        One entry per label given or withdrawn (see :func:`log_entries`); empty by default.

    Attributes
    ----------
    n : int
        The number of rows.
    mask : ndarray of bool, shape (n,)
        Which positions are labelled.

    Examples
    --------
    >>> pool = LabelledPool.of(5, [1, 3])
    >>> pool.row.tolist(), pool.order.tolist()
    ([-1, 0, -1, 1, -1], [1, 3])
    >>> pool = pool.add(np.array([4, 1]), n_rows=2)   # 4 is new (training row 2); 1 is relabelled
    >>> pool.row.tolist(), pool.order.tolist()
    ([-1, 0, -1, 1, 2], [1, 3, 4])
    >>> pool, keep = pool.remove(np.array([3]), n_rows=3)
    >>> pool.row.tolist(), pool.order.tolist(), keep.tolist()
    ([-1, 0, -1, -1, 1], [1, 4], [True, False, True])
    """

    def __init__(self, row: np.ndarray, order: np.ndarray, *, X=None, ids=None, log: Optional[list] = None):
        self.row = row
        self.order = order
        self.X = X
        self.ids = np.arange(len(row)) if ids is None else ids
        self.log = [] if log is None else log

    @classmethod
    def of(cls, n: int, labelled, *, X=None, ids=None) -> "LabelledPool":
        """A pool of ``n`` rows whose ``labelled`` positions are training rows 0, 1, ..., in that order."""
        labelled = np.array(labelled, dtype=np.intp).reshape(-1)
        row = np.full(n, -1, dtype=np.intp)
        row[labelled] = np.arange(len(labelled))
        return cls(row, labelled, X=X, ids=ids)

    @classmethod
    def from_labels(cls, X, y, missing_label, template, ids=None) -> Tuple["LabelledPool", Any, np.ndarray]:
        """The pool ``X`` with labels ``y`` (``missing_label`` where unknown), checked, and its
        labelled set: ``(pool, X_labelled, y_labelled)``, in row order.

        ``X`` is copied, unless it is a dask array: that stays where it lives (only its labelled
        rows are read, and its NaN are not looked for, which would read it whole), and is refused
        unless a driver queries it there. ``template`` is the estimator to train, which the labels
        are checked against (its ``classes``, whether it is a regressor).

        >>> from sklearn.linear_model import LogisticRegression
        >>> pool, X_lab, y_lab = LabelledPool.from_labels(np.arange(6.0).reshape(3, 2), [np.nan, 1, 0],
        ...                                                np.nan, LogisticRegression())
        >>> pool.order.tolist(), X_lab.tolist(), y_lab.tolist()
        ([1, 2], [[2.0, 3.0], [4.0, 5.0]], [1, 0])
        """
        X = check_pool(X)
        lazy = is_lazy(X)
        if lazy:
            pool_backend(X)  # refused unless a driver queries it where it lives
        else:
            X = check_X(X)
        n = len(X)
        y = np.full(n, np.nan) if y is None else np.asarray(y)
        if len(y) != n:
            raise ValueError(f"X and y have inconsistent lengths: {n} and {len(y)}")
        missing = missing_mask(y, missing_label)
        labelled = np.flatnonzero(~missing)
        y_known = known_labels(y, missing, template)
        X_labelled = read_rows(X, labelled)
        if len(labelled):
            _, y_known = validate_Xy(X_labelled, y_known, template)
        else:
            y_known = np.asarray([], dtype=y_known.dtype)
        ids = check_ids(ids, n)
        if not lazy:
            X = copy_rows(X)
            X_labelled = take_rows(X, labelled)
        return cls.of(n, labelled, X=X, ids=ids), X_labelled, np.asarray(y_known)

    @property
    def n(self) -> int:
        """The number of rows of the pool."""
        return len(self.row)

    @property
    def mask(self) -> np.ndarray:
        """Which positions are labelled."""
        return self.row >= 0

    def unlabelled(self) -> np.ndarray:
        """The unlabelled positions, in pool order."""
        return np.flatnonzero(self.row < 0)

    def rows(self, positions) -> Any:
        """The pool's rows at ``positions``, in memory (of a pool on a cluster, only these are read)."""
        return read_rows(self.X, positions)

    def candidates(self, candidates=None) -> np.ndarray:
        """What a query may choose from: ``candidates`` (checked to be unlabelled positions), or
        by default every unlabelled position.

        >>> LabelledPool.of(4, [0, 2]).candidates().tolist()
        [1, 3]
        """
        unlabelled = self.row < 0
        if candidates is None:
            candidates = np.flatnonzero(unlabelled)
            if not len(candidates):
                raise ValueError("every row of the learner's pool is labelled: there is nothing left to query")
            return candidates
        candidates = check_candidates(candidates, self.n)
        if not unlabelled[candidates].all():
            raise ValueError(f"candidates hold labelled pool rows "
                             f"{candidates[~unlabelled[candidates]][:10].tolist()}")
        return candidates

    def check_labels(self, positions, y, missing_label) -> Tuple[np.ndarray, np.ndarray]:
        """``(positions, y)`` checked as labels of this pool: unique integer positions in it, one
        label each, none of them ``missing_label`` (labels of an object array get the dtype of
        their values).

        >>> LabelledPool.of(3, []).check_labels([2], 1, np.nan)
        (array([2]), array([1]))
        """
        positions = np.asarray(positions).reshape(-1)
        if positions.dtype.kind not in "iu":
            raise TypeError(f"positions must be integer positions in the pool; got dtype {positions.dtype}")
        positions = check_candidates(positions, self.n)
        y = np.asarray(y)
        if y.ndim == 0:
            y = y.reshape(1)
        if len(y) != len(positions):
            raise ValueError(f"positions and y have inconsistent lengths: {len(positions)} and {len(y)}")
        missing = missing_mask(y, missing_label)
        if missing.any():
            raise ValueError(f"y holds a missing label ({missing_label!r}) at "
                             f"{positions[missing][:10].tolist()}; skipped points are not labelled")
        if y.dtype.kind == "O":
            y = np.array(y.tolist())
        return positions, y

    def _derived(self, row: np.ndarray, order: np.ndarray) -> "LabelledPool":
        return LabelledPool(row, order, X=self.X, ids=self.ids, log=self.log)

    def add(self, positions: np.ndarray, n_rows: int) -> "LabelledPool":
        """The pool after labelling ``positions`` (unique): those already labelled keep their
        training rows; the new ones become training rows ``n_rows``, ``n_rows + 1``, ... in
        the order given, and follow the earlier ones in ``order``."""
        new = positions[self.row[positions] < 0]
        row = self.row.copy()
        row[new] = n_rows + np.arange(len(new))
        return self._derived(row, np.concatenate([self.order, new]).astype(np.intp))

    def remove(self, positions: np.ndarray, n_rows: int) -> Tuple["LabelledPool", np.ndarray]:
        """The pool after withdrawing the labels of ``positions`` (unique, labelled), and which
        of the ``n_rows`` training rows are kept; the rows after a removed one move up.

        Raises
        ------
        ValueError
            If a position is not labelled.
        """
        rows = self.row[positions]
        if (rows < 0).any():
            raise ValueError(f"pool rows {positions[rows < 0][:10].tolist()} are not labelled")
        keep = np.ones(n_rows, dtype=bool)
        keep[rows] = False
        row = self.row.copy()
        row[positions] = -1
        labelled = row >= 0
        row[labelled] = np.cumsum(keep)[row[labelled]] - 1
        return self._derived(row, self.order[~np.isin(self.order, positions)]), keep

    def entries(self, positions, labels, annotator, time, y_training: np.ndarray) -> List[dict]:
        """The log entries of labelling ``positions`` with ``labels`` (None: withdrawn), by
        ``annotator`` at ``time`` (one, or one per position), each with the label it replaces,
        read from ``y_training`` through this pool's rows.

        >>> LabelledPool.of(3, [2], ids=np.array([10, 11, 12])).entries([2], [1], "ann", None, np.array([5]))
        [{'position': 2, 'id': 12, 'label': 1, 'annotator': 'ann', 'time': None, 'previous': 5}]
        """
        positions = np.asarray(positions).reshape(-1)
        shape = positions.shape
        annotators = np.broadcast_to(np.asarray(annotator, dtype=object), shape)
        times = np.broadcast_to(np.asarray(time, dtype=object), shape)
        return log_entries(positions, self.ids, labels, annotators, times, self.row[positions], y_training)

    def record(self, entries: List[dict]) -> None:
        """Append ``entries`` to the log (the learner does, when it commits the change they describe)."""
        self.log.extend(entries)

    def labels(self, y_training: np.ndarray, fill) -> np.ndarray:
        """The pool's labels read from the training labels, ``fill`` where unlabelled.

        >>> LabelledPool.of(3, [2]).labels(np.array([7]), -1).tolist()
        [-1, -1, 7]
        """
        known = self.row >= 0
        dtype = np.result_type(y_training.dtype, np.asarray(fill).dtype) if fill is not None else object
        out = np.empty((self.n,) + y_training.shape[1:], dtype=dtype)
        out[...] = fill
        out[known] = y_training[self.row[known]]
        return out
