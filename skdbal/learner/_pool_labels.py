"""The labels of a learner's own pool: :meth:`~skdbal.ActiveLearner.set_pool`,
:meth:`~skdbal.ActiveLearner.label`, :meth:`~skdbal.ActiveLearner.unlabel`, and what they
read back (``labelled_mask_``, ``y_pool_``).

``set_pool``, ``label``, ``unlabel`` and the two properties are methods of
:class:`~skdbal.ActiveLearner`, bound in its class body (``self`` is the learner); the other
functions are helpers that the learner's other parts call. The bookkeeping itself, which
position is which training row, is ``LabelledPool`` (``_pool``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import numpy as np
from sklearn.utils.validation import validate_data

from .._validation import check_candidates, check_pool, concat_rows, is_lazy, read_rows, take_rows
from ..acquisition.base import pool_backend
from ._inputs import check_X, copy_rows
from ._pool import POOL_ATTRIBUTES, LabelledPool, check_ids, known_labels, log_entries, merge_labels, missing_mask

if TYPE_CHECKING:  # the class these functions are methods of; imported for the annotations only
    from ._active_learner import ActiveLearner


def labelled_pool(learner) -> LabelledPool:
    """The bookkeeping of ``learner``'s pool, read from its attributes."""
    return LabelledPool(learner._pool_row, learner.labelled_idx_)


def require_pool(learner, what: str) -> None:
    """Refuse ``what`` when ``learner`` has no pool of its own."""
    if not hasattr(learner, "X_pool_"):
        raise ValueError(f"{what} needs the learner's pool: give it one with set_pool(X, y) or fit(X, y) with "
                         "missing labels (missing_label), or run simulate(); or pass X_pool")


def forget_pool(learner) -> None:
    """Drop ``learner``'s pool (its labelled set and model stay)."""
    for name in POOL_ATTRIBUTES:
        if hasattr(learner, name):
            delattr(learner, name)


def set_pool(self, X, y=None, *, ids=None) -> "ActiveLearner":
    """Give the learner a pool with partial labels, without training.

    Every earlier label is forgotten and the model is dropped; the rows
    of ``y`` that are not ``missing_label`` become the labelled set, in
    row order. Train with :meth:`refit`, or :meth:`label` rows first.

    Parameters
    ----------
    X : array-like of shape (N, ...)
        The pool. A dask array (with :mod:`skdbal.dask` imported) stays
        where it lives: queries run on its cluster, and only the rows
        labelled are read (its NaN are not looked for, which would read
        it whole).
    y : array-like of shape (N,) or (N, n_outputs), optional
        Labels, ``missing_label`` (NaN by default) where unknown; none
        known when omitted. Integer labels stored in a float array
        because of NaN are converted back to integers.
    ids : array-like of shape (N,), optional
        Unique, sortable identifiers of the pool rows (file names, row
        numbers of a larger table), recorded in the label log; a
        subsample drawn by ``pool_subsample`` is scored in the order of
        the ids. By default the positions.

    Returns
    -------
    self

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from skdbal import ActiveLearner
    >>> X = np.array([[0.0], [0.2], [0.9], [1.0], [0.5], [0.45]])
    >>> learner = ActiveLearner(LogisticRegression(), random_state=0, verbose=False)
    >>> learner.set_pool(X, [0, np.nan, np.nan, 1, np.nan, np.nan]).labelled_idx_
    array([0, 3])
    """
    self._check_params()
    return reset_pool(self, X, y, ids, self._make_template())


def reset_pool(learner, X, y, ids, template):
    """Give ``learner`` the pool ``X`` with labels ``y`` (``missing_label`` where unknown) and no
    model, its estimator to be ``template``; every check comes before any change. Returns it."""
    X = check_pool(X)
    lazy = is_lazy(X)  # a pool on a cluster (a dask array): kept where it lives, only labelled rows are read
    if lazy:
        pool_backend(X)  # refused unless a driver queries it there (import skdbal.dask)
    else:
        X = check_X(X)
    n = len(X)
    if y is None:
        y = np.full(n, np.nan)
    y = np.asarray(y)
    if len(y) != n:
        raise ValueError(f"X and y have inconsistent lengths: {n} and {len(y)}")
    missing = missing_mask(y, learner.missing_label)
    labelled = np.flatnonzero(~missing)
    y_known = known_labels(y, missing, template)
    X_labelled = read_rows(X, labelled)
    if len(labelled):
        _, y_known = learner._validate_Xy(X_labelled, y_known, check_shape=False, template=template)
    ids = check_ids(ids, n)
    # ---- nothing is changed before this point
    forget_pool(learner)
    for name in ("estimator_", "X_training_", "y_training_", "last_acquisition_"):
        if hasattr(learner, name):
            delattr(learner, name)
    learner.template_, learner._template_source = template, learner.estimator
    learner.X_pool_ = X if lazy else copy_rows(X)
    learner.pool_ids_ = ids
    pool = LabelledPool.of(n, labelled)
    learner._pool_row = pool.row  # the row of each pool position in the training set
    learner.labelled_idx_ = pool.order
    learner.label_log_ = []
    learner.n_pool_ = n
    learner.X_training_ = X_labelled if lazy else take_rows(learner.X_pool_, labelled)
    learner.y_training_ = np.asarray(y_known) if len(labelled) else np.asarray([], dtype=y_known.dtype)
    learner.step_ = -1
    if len(labelled):
        validate_data(learner, learner.X_training_, reset=True, skip_check_array=True)
    return learner


@property
def labelled_mask_(self) -> np.ndarray:
    """Which rows of the learner's pool are labelled, shape ``(n_pool_,)``."""
    require_pool(self, "labelled_mask_")
    return labelled_pool(self).mask


@property
def y_pool_(self) -> np.ndarray:
    """The pool's labels, ``missing_label`` where unknown."""
    require_pool(self, "y_pool_")
    return labelled_pool(self).labels(self.y_training_, self.missing_label)


def label(self, positions, y, *, annotator: Optional[str] = None, time=None, refit: bool = True,
          **fit_params) -> "ActiveLearner":
    """Record labels of pool rows, by position, and retrain.

    A row labelled before gets its new label (a person changed their
    mind); the old one is kept in ``label_log_``.

    Parameters
    ----------
    positions : array-like of int
        Positions in the learner's pool.
    y : array-like
        Their labels.
    annotator : str or array-like of str, optional
        Who gave them (one name, or one per position), recorded in
        ``label_log_``.
    time : float or array-like of float, optional
        When (seconds since the epoch), recorded in ``label_log_``.
    refit : bool, default=True
        Retrain afterwards (:meth:`refit`); with False the labels are
        recorded and the model is left as it is.
    **fit_params :
        Passed to the estimator's ``fit``.

    Returns
    -------
    self

    Raises
    ------
    ValueError
        For positions outside the pool or given twice, a missing label,
        or a label the estimator does not know; nothing is changed then,
        and nothing either if the retraining fails.
    """
    require_pool(self, "label()")
    positions = np.asarray(positions).reshape(-1)
    if positions.dtype.kind not in "iu":
        raise TypeError(f"positions must be integer positions in the pool; got dtype {positions.dtype}")
    positions = check_candidates(positions, self.n_pool_)
    y = np.asarray(y)
    if y.ndim == 0:
        y = y.reshape(1)
    if len(y) != len(positions):
        raise ValueError(f"positions and y have inconsistent lengths: {len(positions)} and {len(y)}")
    missing = missing_mask(y, self.missing_label)
    if missing.any():
        raise ValueError(f"y holds a missing label ({self.missing_label!r}) at "
                         f"{positions[missing][:10].tolist()}; skipped points are not labelled")
    if y.dtype.kind == "O":
        y = np.array(y.tolist())
    template = self._template()
    X_rows = read_rows(self.X_pool_, positions)  # of a pool on a cluster, only these rows are read
    _, y = self._validate_Xy(X_rows, y, template=template)
    times = np.broadcast_to(np.asarray(time, dtype=object), positions.shape)
    annotators = np.broadcast_to(np.asarray(annotator, dtype=object), positions.shape)
    refit = bool(refit)
    # ---- the new state, computed aside: committed only when (if asked) retraining succeeds
    pool = labelled_pool(self)
    rows = pool.row[positions]  # each position's training row before, -1 for a new label
    new = rows < 0
    y_all = merge_labels(self.y_training_, y, rows)
    X_all = concat_rows(self.X_training_, take_rows(X_rows, np.flatnonzero(new))) if new.any() \
        else self.X_training_
    pool = pool.add(positions, len(self.y_training_))
    log = log_entries(positions, self.pool_ids_, y, annotators, times, rows, self.y_training_)
    est = None
    if refit:
        est = self._train_labelled(X_all, y_all, template, fit_params, getattr(self, "step_", -1) + 1)
    self.X_training_, self.y_training_, self._pool_row = X_all, y_all, pool.row
    self.labelled_idx_ = pool.order
    self.label_log_.extend(log)
    validate_data(self, self.X_training_, reset=True, skip_check_array=True)
    if est is not None:
        self._commit_model(est, template)
    return self


def unlabel(self, positions, *, annotator: Optional[str] = None, time=None) -> "ActiveLearner":
    """Withdraw the labels of pool rows (an undone label): they are unlabelled again.

    The model is left as it is; :meth:`refit` retrains without them.

    Parameters
    ----------
    positions : array-like of int
        Labelled positions in the learner's pool.
    annotator : str, optional
        Who withdrew them, recorded in ``label_log_`` (``label`` None).
    time : float, optional
        When.

    Returns
    -------
    self

    Raises
    ------
    ValueError
        For a position that is not labelled; nothing is changed then.
    """
    require_pool(self, "unlabel()")
    positions = check_candidates(np.asarray(positions).reshape(-1), self.n_pool_)
    before = labelled_pool(self)
    pool, keep = before.remove(positions, len(self.y_training_))
    n = len(positions)
    log = log_entries(positions, self.pool_ids_, [None] * n, [annotator] * n, [time] * n,
                      before.row[positions], self.y_training_)
    self.X_training_ = take_rows(self.X_training_, np.flatnonzero(keep))
    self.y_training_ = self.y_training_[keep]
    self._pool_row = pool.row
    self.labelled_idx_ = pool.order
    self.label_log_.extend(log)
    return self
