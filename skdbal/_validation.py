"""Input checks shared by the strategies and the learner (package-internal)."""
from __future__ import annotations

import argparse
import importlib
import ipaddress
from typing import Callable, Dict, Literal, Optional, overload

import numpy as np
from sklearn.utils import _safe_indexing
from sklearn.utils.validation import check_array

__all__ = ["is_frame", "is_lazy", "read_rows", "take_rows", "concat_rows", "check_pool", "check_n_instances",
           "check_positive_int", "check_bool", "check_candidates", "check_query_result", "label_columns",
           "pool_kwargs", "subset_pool_kwargs", "check_query_kwargs", "is_loopback", "pool_backend",
           "whole_number", "port_number", "seconds", "positive_number", "number_in"]

#: The drivers of pools that live elsewhere: the module of a lazy pool's type -> the module whose
#: ``acquire_among`` queries it where it lives, imported only when such a pool is met.
POOL_DRIVERS = {"dask.array": "skdbal.dask"}


def is_frame(X) -> bool:
    """Whether ``X`` is a table with row indexing of its own (a pandas or
    polars DataFrame): kept as it is, so that a pipeline can select its
    columns by name and hold columns of several types."""
    return hasattr(X, "columns") and hasattr(X, "shape") and not isinstance(X, np.ndarray)


def is_lazy(X) -> bool:
    """Whether ``X`` is a lazy collection (a dask array: it has ``__dask_graph__``), whose rows live
    elsewhere and are read only where needed, never whole (a pool on a cluster)."""
    return hasattr(X, "__dask_graph__") and not isinstance(X, np.ndarray)


def pool_backend(X_pool) -> Optional[Callable]:
    """The driver that queries ``X_pool`` where it lives, or None for a pool in memory.

    A dask array's is :func:`skdbal.dask.acquire_among`, found by the module of its type and imported
    here (so a learner given one needs no ``import skdbal.dask`` first, and ``import skdbal`` never
    imports dask): :data:`POOL_DRIVERS`.

    Raises
    ------
    TypeError
        For another lazy pool (:func:`is_lazy`), which no driver reads: it is never read whole.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.acquisition.base import pool_backend
    >>> pool_backend(np.zeros((3, 2))) is None
    True
    """
    if not is_lazy(X_pool):
        return None
    module = type(X_pool).__module__
    for prefix, driver in POOL_DRIVERS.items():
        if module == prefix or module.startswith(prefix + "."):
            return importlib.import_module(driver).acquire_among
    raise TypeError(f"a {type(X_pool).__name__} pool is never read whole into memory, and no driver queries it "
                    f"where it lives (a dask array is queried on its cluster by skdbal.dask)")


def read_rows(X, rows):
    """``take_rows(X, rows)``, in memory: of a lazy ``X`` only those rows are read (in pool order,
    then put in the order asked)."""
    if not is_lazy(X):
        return take_rows(X, rows)
    rows = np.asarray(rows, dtype=np.intp).reshape(-1)
    order = np.argsort(rows, kind="stable")
    inverse = np.empty_like(order)
    inverse[order] = np.arange(len(order))
    return np.asarray(X[rows[order]])[inverse]


def take_rows(X, rows):
    """``X[rows]`` for an array, a DataFrame (by position) or a list; ``rows``
    may be an integer array or a slice."""
    if isinstance(X, np.ndarray):
        return X[rows]
    return _safe_indexing(X, rows)


def concat_rows(a, b):
    """``a`` then ``b``, in ``a``'s container type."""
    if isinstance(a, np.ndarray):
        return np.concatenate([a, b])
    if hasattr(a, "iloc"):
        import pandas as pd

        return pd.concat([a, b], ignore_index=True)
    if is_frame(a):  # polars
        return type(a).concat([a, b]) if hasattr(type(a), "concat") else __import__("polars").concat([a, b])
    return list(a) + list(b)


def check_pool(X_pool, name: str = "X_pool"):
    """A non-empty, finite, numeric pool of at least 2 dimensions (arrays pass
    unchanged). A DataFrame is kept as it is: its columns are the estimator's
    to check. Of a lazy pool (:func:`is_lazy`) only the shape and dtype are
    checked: NaN would be found by reading it whole, so its chunks' scoring
    meets them instead."""
    if X_pool is None:
        raise ValueError(f"{name} is None; pass the unlabelled pool")
    if is_lazy(X_pool):  # its shape and dtype only: reading it to look for NaN would read it whole
        shape = tuple(getattr(X_pool, "shape", ()))
        if len(shape) < 2 or any(not isinstance(d, (int, np.integer)) for d in shape):
            raise ValueError(f"{name} must have shape (N, ...) with known sizes and at least 2 dimensions; "
                             f"got {shape}")
        if shape[0] == 0:
            raise ValueError(f"{name} is empty: there is nothing left to query")
        if np.dtype(X_pool.dtype).kind not in "fiub":
            raise TypeError(f"{name} must be numeric; got dtype {X_pool.dtype}")
        return X_pool
    if not hasattr(X_pool, "__len__") or len(X_pool) == 0:
        raise ValueError(f"{name} is empty: there is nothing left to query")
    if is_frame(X_pool):
        return X_pool
    if isinstance(X_pool, np.ndarray) and X_pool.dtype.kind in "fiub":
        if X_pool.ndim < 2:
            raise ValueError(f"{name} must have at least 2 dimensions; got shape {X_pool.shape}")
        if X_pool.dtype.kind == "f" and not np.isfinite(X_pool).all():
            raise ValueError(f"{name} contains NaN or infinity")
        return X_pool
    return check_array(X_pool, allow_nd=True, dtype=None, input_name=name)


def check_n_instances(n_instances, n_pool: int) -> int:
    """``n_instances`` as an int in ``[1, n_pool]``."""
    if isinstance(n_instances, bool) or not isinstance(n_instances, (int, np.integer)):
        raise TypeError(f"n_instances must be an int; got {type(n_instances).__name__}")
    if n_instances < 1:
        raise ValueError(f"n_instances must be >= 1; got {n_instances}")
    if n_instances > n_pool:
        raise ValueError(f"n_instances={n_instances} is larger than the pool ({n_pool} items)")
    return int(n_instances)


@overload
def check_positive_int(value, name: str, *, allow_none: Literal[False] = ...) -> int: ...
@overload
def check_positive_int(value, name: str, *, allow_none: bool) -> Optional[int]: ...
def check_positive_int(value, name: str, *, allow_none: bool = False) -> Optional[int]:
    """``value`` as an int >= 1 (or None, with ``allow_none``), else a
    ValueError naming ``name``: the package's one "int >= 1" check. A bool
    is refused, although Python counts it as an int."""
    if allow_none and value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be {'None or ' if allow_none else ''}an int >= 1; got {value!r}")
    return int(value)


def label_columns(classes, y, name: str = "y", *, n_columns: Optional[int] = None,
                  classes_name: str = "classes") -> np.ndarray:
    """The column of each label of ``y`` in ``classes``: the package's one label lookup.

    Parameters
    ----------
    classes : array-like of shape (C,) or None
        The label of each column (an estimator's ``classes_``), in any order
        and of any type. None: ``y`` holds the column indices already.
    y : array-like of shape (n,)
        Labels.
    name : str, default="y"
        What ``y`` is called in error messages.
    n_columns : int, optional
        With ``classes=None``, the number of columns the indices must fall in.
    classes_name : str, default="classes"
        What ``classes`` is called in error messages.

    Returns
    -------
    ndarray of intp, shape (n,)
        ``classes[out[i]] == y[i]``.

    Raises
    ------
    ValueError
        Naming ``name`` and (up to 10 of) its labels that are not in
        ``classes``, or its indices outside ``[0, n_columns)`` when
        ``classes`` is None.
    TypeError
        If ``classes`` is None and ``y`` does not hold integers.

    Examples
    --------
    >>> from skdbal.metrics import label_columns
    >>> label_columns(["dog", "cat"], ["cat", "cat", "dog"]).tolist()
    [1, 1, 0]
    >>> label_columns(["dog", "cat"], ["cat", "emu"])
    Traceback (most recent call last):
        ...
    ValueError: y contains labels not in classes: ['emu'] (classes: ['dog', 'cat'])
    """
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"{name} must be 1-D; got shape {y.shape}")
    if classes is None:
        if len(y) and y.dtype.kind not in "iu":
            raise TypeError(f"{name} must hold integer class indices when classes is not given; got dtype "
                            f"{y.dtype}")
        bad = (y < 0) | (y >= n_columns) if n_columns is not None else y < 0
        if bad.any():
            span = f"[0, {n_columns})" if n_columns is not None else "[0, n_classes)"
            raise ValueError(f"{name} must hold class indices in {span} when classes is not given (the columns, "
                             f"in order); pass classes=estimator.classes_ for other labels; got "
                             f"{np.unique(y[bad])[:10].tolist()}")
        return y.astype(np.intp)
    classes = np.asarray(classes)
    if classes.ndim != 1 or len(classes) == 0:
        raise ValueError(f"{classes_name} must be 1-D and non-empty; got shape {classes.shape}")
    kinds = {classes.dtype.kind, y.dtype.kind if len(y) else classes.dtype.kind}
    if kinds <= set("biuf") or kinds in ({"U"}, {"S"}):  # comparable: sort the classes, search the labels
        order = np.argsort(classes, kind="stable")
        pos = np.clip(np.searchsorted(classes[order], y), 0, len(classes) - 1)
        bad = classes[order][pos] != y
        unknown = np.unique(y[bad]).tolist()
        columns = order[pos]
    else:  # object arrays, or labels of another type than the classes: compare by value
        lookup = {c: i for i, c in enumerate(classes.tolist())}
        values = y.tolist()
        unknown = sorted({v for v in values if v not in lookup}, key=str)
        columns = np.array([lookup.get(v, 0) for v in values], dtype=np.intp)
    if unknown:
        listed = classes.tolist()
        raise ValueError(f"{name} contains labels not in {classes_name}: {unknown[:10]} "
                         f"({classes_name}: {listed[:20]}{' ...' if len(listed) > 20 else ''})")
    return np.asarray(columns, dtype=np.intp)


def is_int_seed(random_state) -> bool:
    """Whether ``random_state`` is an int seed (not a bool, a RandomState or None)."""
    return isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool)


def check_bool(value, name: str) -> bool:
    """``value`` as a bool (numpy's included), else a TypeError naming ``name``."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool; got {value!r}")
    return bool(value)


def check_candidates(candidates, n_pool: int) -> np.ndarray:
    """Unique integer positions in ``[0, n_pool)``, as an intp array."""
    candidates = np.asarray(candidates).reshape(-1)
    if candidates.dtype.kind not in "iu":
        raise TypeError(f"candidates must be integer indices; got dtype {candidates.dtype}")
    if len(candidates) and (candidates.min() < 0 or candidates.max() >= n_pool):
        raise ValueError(f"candidates must lie in [0, {n_pool}); got "
                         f"[{candidates.min()}, {candidates.max()}]")
    if len(np.unique(candidates)) != len(candidates):
        raise ValueError("candidates contain duplicates")
    return candidates.astype(np.intp)


def check_query_result(result, n_pool: int, name: str = "query_strategy"):
    """``(indices, scores or None)`` from a strategy's return value, checked.

    A strategy may return ``(indices, scores)`` (our protocol, modAL 0.4.2) or
    bare indices (modAL <= 0.4.1). Indices must be unique integers in
    ``[0, n_pool)``.
    """
    scores = None
    if isinstance(result, tuple):
        result, scores = result[0], (result[1] if len(result) > 1 else None)
    idx = np.asarray(result).reshape(-1)
    if idx.dtype.kind not in "iu":
        raise TypeError(f"{name} must return integer indices; got dtype {idx.dtype}")
    if len(np.unique(idx)) != len(idx):
        raise ValueError(f"{name} returned duplicate indices: {idx.tolist()}")
    if len(idx) and (idx.min() < 0 or idx.max() >= n_pool):
        raise ValueError(f"{name} returned indices outside the pool")
    return idx.astype(np.intp), (None if scores is None else np.asarray(scores).reshape(-1))


def _aligned(kwargs: Dict) -> Dict:
    """The keywords of ``kwargs`` named ``*_pool`` and given (not None), unchecked."""
    return {k: v for k, v in kwargs.items() if k.endswith("_pool") and v is not None}


def pool_kwargs(kwargs: Dict, n_pool: int) -> Dict:
    """The pool-aligned keywords of ``kwargs``: those named ``*_pool``, checked for length.

    By design, a keyword named like ``y_pool`` holds one entry per pool row,
    and whoever subsets the pool subsets these with the same indices.
    """
    aligned = _aligned(kwargs)
    for k, v in aligned.items():
        if not hasattr(v, "__len__") or len(v) != n_pool:
            got = len(v) if hasattr(v, "__len__") else type(v).__name__
            raise ValueError(f"{k} must be aligned with the pool: {n_pool} entries; got {got}")
    return aligned


def subset_pool_kwargs(kwargs: Dict, indices, n_pool: Optional[int] = None) -> Dict:
    """``kwargs`` with every pool-aligned keyword (``*_pool``) taken at ``indices``; their lengths are
    checked against ``n_pool`` (:func:`pool_kwargs`) unless it is None (keywords a public entry checked)."""
    aligned = pool_kwargs(kwargs, n_pool) if n_pool is not None else _aligned(kwargs)
    out = dict(kwargs)
    for k, v in aligned.items():
        out[k] = np.asarray(v)[indices]
    return out


def check_query_kwargs(query_kwargs: Optional[dict]) -> dict:
    """``query_kwargs`` as a dict, refusing the keywords that the loop sets itself."""
    query_kwargs = dict(query_kwargs or {})
    for own in sorted({"candidates", "n_instances", "X_pool"} & set(query_kwargs)):
        raise ValueError(f"query_kwargs may not set {own!r}: the loop sets it (pending and skipped rows "
                         "are left out of the candidates; a random subsample of a large pool is the "
                         "learner's pool_subsample)")
    return query_kwargs


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or a name) is this machine only; a name other than localhost is not."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: served beyond loopback, so the token is required everywhere
        return False


def whole_number(low: int, what: str = ""):
    """An argparse type for the commands' flags: a whole number of at least ``low`` (``what`` follows
    the bound in the refusal).

    Examples
    --------
    >>> from skdbal._validation import whole_number
    >>> whole_number(1)("3")
    3
    >>> whole_number(0, " (0: none)")("-1")
    Traceback (most recent call last):
        ...
    argparse.ArgumentTypeError: must be at least 0 (0: none); got -1
    """
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}{what}; got {value}")
        return value
    return parse


def seconds(text: str) -> float:
    """An argparse type for the commands' flags: a finite number of seconds above 0.

    Examples
    --------
    >>> from skdbal._validation import seconds
    >>> seconds("2.5")
    2.5
    >>> seconds("nan")
    Traceback (most recent call last):
        ...
    argparse.ArgumentTypeError: a number of seconds above 0; got nan
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"a number of seconds above 0; got {text}")
    return value


def positive_number(text: str) -> float:
    """An argparse type for the commands' flags: a finite number above 0.

    Examples
    --------
    >>> from skdbal._validation import positive_number
    >>> positive_number("0.5")
    0.5
    >>> positive_number("0")
    Traceback (most recent call last):
        ...
    argparse.ArgumentTypeError: must be a number above 0; got 0
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number above 0; got {text}")
    return value


def number_in(interval: str, what: str = "a number"):
    """An argparse type for the commands' flags: a number in ``interval``, written as in mathematics
    (``"[0, 1)"``: 0 included, 1 not); ``what`` names the number in the refusal.

    Examples
    --------
    >>> from skdbal._validation import number_in
    >>> rate = number_in("[0, 1)", "a noise rate")
    >>> rate("0"), rate("0.25")
    (0.0, 0.25)
    >>> rate("1")
    Traceback (most recent call last):
        ...
    argparse.ArgumentTypeError: a noise rate lies in [0, 1); got 1
    >>> number_in("(0, 1]")("nan")
    Traceback (most recent call last):
        ...
    argparse.ArgumentTypeError: a number lies in (0, 1]; got nan
    """
    text = interval.strip()
    try:
        low, high = (float(v) for v in text[1:-1].split(","))
    except ValueError:
        low = high = float("nan")
    if text[:1] not in "[(" or text[-1:] not in ")]" or not low <= high:
        raise ValueError(f"interval must read like '[0, 1)'; got {interval!r}")
    above = (lambda v: v >= low) if text[0] == "[" else (lambda v: v > low)
    below = (lambda v: v <= high) if text[-1] == "]" else (lambda v: v < high)

    def parse(value_text: str) -> float:
        try:
            value = float(value_text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value_text!r} is not a number") from None
        if not (above(value) and below(value)):
            raise argparse.ArgumentTypeError(f"{what} lies in {text}; got {value_text}")
        return value
    return parse


def port_number(text: str) -> int:
    """An argparse type for the commands' flags: a TCP port, 0..65535 (0 takes a free one).

    Examples
    --------
    >>> from skdbal._validation import port_number
    >>> port_number("8765")
    8765
    >>> port_number("70000")
    Traceback (most recent call last):
        ...
    argparse.ArgumentTypeError: a port lies in 0..65535; got 70000
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port lies in 0..65535; got {value}")
    return value
