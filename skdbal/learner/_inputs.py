"""What a learner is given, checked: inputs and labels against its estimator and its labelled set.

Functions of :mod:`skdbal.learner`; ``template`` is the estimator the learner trains (whether it
is a regressor, its ``classes``), ``labelled`` the learner's labelled inputs ``X_training_``.
"""
from __future__ import annotations

import numpy as np
from sklearn.base import is_regressor
from sklearn.utils.validation import check_array, column_or_1d

from .._validation import is_frame


def copy_rows(X):
    """A copy of the labelled inputs, in their container type."""
    return X.copy() if is_frame(X) else np.array(X, copy=True)


def check_X(X, name: str = "X"):
    """Finite numeric inputs, at least 2-d; a DataFrame is kept as it is (its columns are the
    estimator's to check), and objects that are numbers become float64, as scikit-learn's
    estimators do."""
    if not is_frame(X):
        X = check_array(X, allow_nd=True, dtype=None, ensure_all_finite=True, input_name=name)
        if X.dtype.kind == "O":
            X = check_array(X, allow_nd=True, dtype=np.float64, ensure_all_finite=True, input_name=name)
        if X.dtype.kind not in "fiub":
            raise TypeError(f"{name} must be numeric; got dtype {X.dtype}")
    return X


def check_y(y, template, name: str = "y") -> np.ndarray:
    """Labels (1-d) for classifiers; 1-d or 2-d numeric targets for regressors."""
    if is_regressor(template):
        y = check_array(y, ensure_2d=False, dtype="numeric", ensure_all_finite=True, input_name=name)
        if y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        if y.ndim not in (1, 2):
            raise ValueError(f"{name} must be 1-d or 2-d for a regressor; got shape {y.shape}")
        return y
    return column_or_1d(y, warn=True)


def check_like_labelled(X, labelled, name: str) -> None:
    """``X`` must have the labelled set's per-sample shape, and its kind of dtype: an estimator
    may read integer inputs of different types on different scales (MCDropoutClassifier scales
    uint8 images). Nothing is checked while there is no labelled set (``labelled`` None)."""
    if labelled is None:
        return
    old = labelled
    if is_frame(X) or is_frame(old):
        if not (is_frame(X) and is_frame(old)):
            raise TypeError(f"{name} is a {type(X).__name__}, but the labelled set is a {type(old).__name__}; "
                            "pass the same kind of container throughout")
        if list(X.columns) != list(old.columns):
            raise ValueError(f"{name} has columns {list(X.columns)[:10]}, but the labelled set has "
                             f"{list(old.columns)[:10]}")
        return
    if not hasattr(X, "dtype"):
        return
    if X.shape[1:] != labelled.shape[1:]:
        raise ValueError(
            f"{name} has per-sample shape {X.shape[1:]}, but the labelled set has "
            f"{labelled.shape[1:]}"
        )
    old = labelled.dtype
    if X.dtype.kind != old.kind or (old.kind in "iub" and X.dtype != old):
        raise TypeError(
            f"{name} has dtype {X.dtype}, but the labelled set has dtype {old}; integer "
            "inputs of another type or kind may be on another scale (uint8 images "
            f"are read as 0-255), so convert {name} to the labelled set's dtype"
        )


def validate_Xy(X, y, template, labelled=None):
    """``(X, y)`` checked as new labelled rows: finite numeric inputs (like ``labelled``, when
    given), as many labels, finite, and among the estimator's ``classes`` when it has them."""
    X = check_X(X)
    y = check_y(y, template)
    if len(X) != len(y):
        raise ValueError(f"X and y have inconsistent lengths: {len(X)} and {len(y)}")
    if y.dtype.kind == "f" and not np.isfinite(y).all():
        raise ValueError("y contains NaN or infinity")
    check_like_labelled(X, labelled, "X")
    classes = getattr(template, "classes", None)
    if classes is not None and not is_regressor(template):
        unknown = np.setdiff1d(np.unique(y), np.asarray(classes))
        if len(unknown):
            raise ValueError(
                f"y contains labels not in the estimator's classes: {unknown[:10].tolist()}"
            )
    return X, y
