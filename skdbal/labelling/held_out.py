"""A labelled test set given to ``skdbal label --test PATH``, read in the pool's own format.

- With ``--images DIR`` (and ``--representation pixels``): a folder with one subfolder per class, named
  as in ``--classes``, holding that class's images (``cat/tom.jpg``), read as the pool's images are
  (``--image-size``, ``--mode``). With an encoder (``--representation pool`` or ``pca``, ``--encoder``) the
  model sees embeddings of the pool only, so a test set is refused.
- With ``--table FILE``: a ``.csv`` or ``.parquet`` table with the pool's feature columns and a column
  ``label`` (other columns are ignored).
- With ``--npy FILE``: a ``.npz`` with an array ``X`` of the pool's item shape and an array ``y``.

Every label must be one of the classes. A file that is not so is refused, naming it and what is wrong,
before the store is made (:func:`load_test_set`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence, Tuple

import numpy as np

__all__ = ["LABEL_COLUMN", "load_test_set"]

#: The column of a test table that holds the labels.
LABEL_COLUMN = "label"


def _labels(values, classes: Sequence, where: str) -> np.ndarray:
    by_text = {str(c): c for c in classes}
    texts = [str(v) for v in values]
    unknown = sorted({t for t in texts if t not in by_text})
    if unknown:
        raise ValueError(f"{where}: the labels {', '.join(unknown[:5])} are not among the classes "
                         f"({', '.join(by_text)})")
    return np.asarray([by_text[t] for t in texts], dtype=object if not isinstance(classes[0], (int, np.integer))
                      else None)


def load_test_set(path, pool, classes: Sequence, *, source: str, image_size: int = 28,
                  mode: str = "L") -> Tuple[np.ndarray, np.ndarray]:
    """The test set at ``path``, in the pool's format (its features shaped as the pool's), and its labels.

    Parameters
    ----------
    path : path-like
        A folder of class subfolders (``source="images"``), a table (``"table"``) or a ``.npz``
        (``"npy"``).
    pool : Pool
        The pool being labelled (:func:`skdbal.labelling.pools.load_pool`): its ``columns`` and the
        shape of its items.
    classes : sequence
        The session's classes; each label must be one of them, as text.
    source : {"images", "table", "npy"}
        Where the pool came from (``--images``, ``--table``, ``--npy``).
    image_size : int, default=28
    mode : {"L", "RGB"}, default="L"

    Returns
    -------
    X_test : ndarray
    y_test : ndarray
        The labels as the classes (``"cat"``, or ``3`` for integer classes).

    Raises
    ------
    ValueError
        Starting ``--test PATH:``, saying what is wrong.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from skdbal.labelling.pools import load_pool
    >>> from skdbal.labelling.held_out import load_test_set
    >>> pool = load_pool(np.zeros((5, 3), np.float32))
    >>> path = os.path.join(tempfile.mkdtemp(), "test.npz")
    >>> np.savez(path, X=np.ones((2, 3)), y=np.array(["a", "b"]))
    >>> X, y = load_test_set(path, pool, ["a", "b"], source="npy")
    >>> X.shape, y.tolist()
    ((2, 3), ['a', 'b'])
    >>> np.savez(path, X=np.ones((2, 4)), y=np.array(["a", "b"]))
    >>> try:
    ...     load_test_set(path, pool, ["a", "b"], source="npy")
    ... except ValueError as exc:
    ...     print(str(exc).split(": ", 1)[1])
    its items have shape (4,), the pool's (3,)
    """
    from .pools import load_pool

    path = Path(path)
    where = f"--test {path}"
    if not path.exists():
        raise ValueError(f"{where}: no such file or folder")
    if source not in ("images", "table", "npy"):
        raise ValueError(f"source must be 'images', 'table' or 'npy'; got {source!r}")
    if source == "images":
        if not path.is_dir():
            raise ValueError(f"{where}: not a folder (a test set of images is a folder with a subfolder per class)")
        try:
            test = load_pool(path, image_size=image_size, mode=mode)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        loose = [k for k in test.keys if "/" not in k]
        if loose:
            raise ValueError(f"{where}: {loose[0]} is not in a class's folder; put each image in a subfolder named "
                             f"for its class (cat/tom.jpg)")
        y = _labels([k.split("/", 1)[0] for k in test.keys], classes, where)
        X = test.X
    elif source == "table":
        if path.suffix.lower() not in (".csv", ".parquet", ".pq"):
            raise ValueError(f"{where}: a test table is a .csv or .parquet file with the pool's columns and a "
                             f"column {LABEL_COLUMN!r}")
        try:
            from .pools import _read_table

            frame = _read_table(path)
        except (OSError, ValueError, ImportError) as exc:
            raise ValueError(f"{where}: {exc}") from None
        names = [str(c) for c in frame.columns]
        frame = frame.set_axis(names, axis=1)
        if LABEL_COLUMN not in names:
            raise ValueError(f"{where}: no column {LABEL_COLUMN!r} (the labels); its columns are {', '.join(names)}")
        missing = [c for c in pool.columns if c not in names]
        if missing:
            raise ValueError(f"{where}: no column {', '.join(missing)}; it needs the pool's columns "
                             f"({', '.join(pool.columns)}) and {LABEL_COLUMN!r}")
        try:
            X = np.asarray(frame[pool.columns].to_numpy(dtype=np.float32))
        except (TypeError, ValueError):
            raise ValueError(f"{where}: the pool's columns must hold numbers") from None
        if frame[LABEL_COLUMN].isna().any():
            raise ValueError(f"{where}: the column {LABEL_COLUMN!r} has missing labels")
        y = _labels(frame[LABEL_COLUMN].tolist(), classes, where)
    else:
        if path.suffix.lower() != ".npz":
            raise ValueError(f"{where}: a test set of an array is a .npz with arrays X and y")
        try:
            with np.load(path, allow_pickle=False) as f:
                if "X" not in f.files or "y" not in f.files:
                    raise ValueError(f"{where}: it needs arrays X and y; it has {', '.join(f.files) or 'none'}")
                X, labels = np.asarray(f["X"]), np.asarray(f["y"])
        except (OSError, ValueError) as exc:
            if str(exc).startswith(where):
                raise
            raise ValueError(f"{where}: not a readable .npz ({exc})") from None
        if X.dtype.kind not in "fiub":
            raise ValueError(f"{where}: X must be numeric; got dtype {X.dtype}")
        X = X.astype(np.float32) / np.float32(255) if X.dtype == np.uint8 else X.astype(np.float32)
        if labels.ndim != 1 or len(labels) != len(X):
            raise ValueError(f"{where}: y must hold one label per item of X ({len(X)}); got shape {labels.shape}")
        y = _labels(labels.tolist(), classes, where)
    if not len(X):
        raise ValueError(f"{where}: it holds no item")
    if X.shape[1:] != pool.X.shape[1:]:
        raise ValueError(f"{where}: its items have shape {X.shape[1:]}, the pool's {pool.X.shape[1:]}")
    if not np.isfinite(X).all():
        raise ValueError(f"{where}: its features must be finite")
    return X, y
