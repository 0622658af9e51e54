"""The bookkeeping of a learner's pool: which rows are labelled, where their labels sit in the
training set, in what order they came, and what each change of a label is logged as.

:class:`LabelledPool` is a value: its methods return new ones and never change it, so that the
learner (:mod:`skdbal.learner`) computes its next state aside and commits it only once the
labels are checked and the model, if asked, is retrained. The learner stores the two arrays
of a ``LabelledPool`` as its attributes ``_pool_row`` and ``labelled_idx_``.
"""
from __future__ import annotations

from typing import List, Tuple

import numpy as np
from sklearn.base import is_regressor

from .._validation import check_candidates

#: The learner's attributes that describe its pool, dropped when it forgets the pool.
POOL_ATTRIBUTES = ("X_pool_", "pool_ids_", "labelled_idx_", "label_log_", "_pool_row", "n_pool_", "_pool_hash")


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
    """Which rows of a pool are labelled, and where their labels sit in the training set.

    Parameters
    ----------
    row : ndarray of intp, shape (n,)
        The training-set row of each pool position's label; -1 where it is unlabelled.
    order : ndarray of intp
        The labelled positions, in the order their labels came.

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

    def __init__(self, row: np.ndarray, order: np.ndarray):
        self.row = row
        self.order = order

    @classmethod
    def of(cls, n: int, labelled) -> "LabelledPool":
        """A pool of ``n`` rows whose ``labelled`` positions are training rows 0, 1, ..., in that order."""
        labelled = np.array(labelled, dtype=np.intp).reshape(-1)
        row = np.full(n, -1, dtype=np.intp)
        row[labelled] = np.arange(len(labelled))
        return cls(row, labelled)

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

    def add(self, positions: np.ndarray, n_rows: int) -> "LabelledPool":
        """The pool after labelling ``positions`` (unique): those already labelled keep their
        training rows; the new ones become training rows ``n_rows``, ``n_rows + 1``, ... in
        the order given, and follow the earlier ones in ``order``."""
        new = positions[self.row[positions] < 0]
        row = self.row.copy()
        row[new] = n_rows + np.arange(len(new))
        return LabelledPool(row, np.concatenate([self.order, new]).astype(np.intp))

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
        return LabelledPool(row, self.order[~np.isin(self.order, positions)]), keep

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

