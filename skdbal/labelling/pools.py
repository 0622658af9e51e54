"""Pools to label: a folder of images, a ``.npy``/``.npz`` array, a CSV or Parquet table, or arrays in memory.

:func:`load_pool` reads any of them into a :class:`Pool`: the features the
model trains on (``X``, float32), a key per item (a file name relative to
the folder, or a row id) and what a person looks at (:meth:`Pool.png` for
images, :meth:`Pool.row` for the rows of a table).

Decisions:

- Images are the model's features as grey-scale (``mode="L"``, ITU-R 601-2
  luma, shape ``(N, S, S)``) or colour (``mode="RGB"``, shape
  ``(N, 3, S, S)``) float32 in [0, 1], each image resized (bilinear,
  antialiased) to ``S x S = image_size x image_size``: the aspect ratio is
  not kept, nothing is cropped. Transparent pixels are composited onto
  white, EXIF orientation is applied, 16-bit images are scaled to 8 bits.
- A folder is read recursively, in sorted order of the relative paths
  (``/``-separated), which are the keys. Files with another extension, and
  hidden files and folders (``.name``), are ignored. Linked folders are not
  entered; a linked file is read only if it resolves inside the folder,
  else the pool is refused (``ValueError`` naming the link).
- A person sees the original file, re-encoded as PNG with Pillow and
  downscaled to at most :data:`DISPLAY_SIZE` pixels on its long side:
  arbitrary files, or huge images, are never served as they are. The
  path is checked again (inside the folder) each time it is drawn.
- Arrays are read with ``allow_pickle=False``; ``uint8`` arrays are
  scaled to [0, 1]. Features must be finite.
"""
from __future__ import annotations

import functools
import importlib.util
import io
import os
from pathlib import Path
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np

__all__ = ["ColumnsError", "Pool", "load_pool", "IMAGE_EXTENSIONS", "DISPLAY_SIZE"]

#: Extensions (lower case) of the files read from a folder of images.
IMAGE_EXTENSIONS = (".bmp", ".gif", ".jpeg", ".jpg", ".png", ".tif", ".tiff", ".webp")
#: Longest side, in pixels, of an item drawn for a person.
DISPLAY_SIZE = 256


class Pool:
    """The items to label: features, keys, and how to show an item to a person.

    Usually made by :func:`load_pool`.

    Parameters
    ----------
    X : ndarray
        The features the model trains on, float32: ``(N, D)`` rows of a
        table, ``(N, H, W)`` or ``(N, C, H, W)`` images.
    keys : sequence of str, optional
        One per item, distinct; the positions by default.
    kind : {"images", "table"}, optional
        By default ``"table"`` for 2-d ``X``, else ``"images"``.
    columns : sequence of str, optional
        Names of a table's columns (``x0``, ``x1``, ... by default).
    root : path-like, optional
        The folder the keys of images are file names in: they are drawn
        from the files, else from ``X``.
    display_size : int, default=DISPLAY_SIZE
        Longest side of a drawn image, in pixels.

    Attributes
    ----------
    X : ndarray of float32
    keys : list of str
    kind : str
    columns : list of str or None
        None for images.
    root : pathlib.Path or None

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.labelling.pools import Pool
    >>> pool = Pool(np.array([[1.5, 2], [3, 4]]), keys=["a", "b"], columns=["height", "width"])
    >>> len(pool), pool.kind, pool.X.dtype
    (2, 'table', dtype('float32'))
    >>> pool.row(0)
    [('height', 1.5), ('width', 2.0)]
    >>> Pool(np.zeros((3, 8, 8))).png(2)[:8]          # images: drawn as PNG
    b'\\x89PNG\\r\\n\\x1a\\n'
    """

    def __init__(self, X, keys: Optional[Sequence] = None, *, kind: Optional[str] = None,
                 columns: Optional[Sequence[str]] = None, root: Union[str, os.PathLike, None] = None,
                 display_size: int = DISPLAY_SIZE):
        X = np.asarray(X)
        if X.dtype.kind not in "fiub":
            raise ValueError(f"the pool's features must be numeric; got dtype {X.dtype}")
        X = X.astype(np.float32) / np.float32(255) if X.dtype == np.uint8 else X.astype(np.float32, copy=False)
        if X.ndim not in (2, 3, 4) or len(X) == 0:
            raise ValueError(f"the pool must be rows (N, D) or images (N, H, W) / (N, C, H, W), N >= 1; "
                             f"got shape {X.shape}")
        if not np.isfinite(X).all():
            bad = np.flatnonzero(~np.isfinite(X.reshape(len(X), -1)).all(axis=1))
            raise ValueError(f"the pool's features must be finite; {len(bad)} items are not, the first {bad[0]}")
        kind = kind or ("table" if X.ndim == 2 else "images")
        if kind not in ("images", "table"):
            raise ValueError(f"kind must be 'images' or 'table'; got {kind!r}")
        if kind == "table" and X.ndim != 2:
            raise ValueError(f"a table has 2-d features; got shape {X.shape}")
        keys = [str(k) for k in (range(len(X)) if keys is None else keys)]
        if len(keys) != len(X):
            raise ValueError(f"{len(keys)} keys for {len(X)} items")
        if len(set(keys)) != len(keys):
            seen: set = set()
            repeated = [k for k in keys if k in seen or seen.add(k)]
            raise ValueError(f"keys must be distinct; repeated: {repeated[:5]}")
        if kind == "table":
            columns = [f"x{j}" for j in range(X.shape[1])] if columns is None else [str(c) for c in columns]
            if len(columns) != X.shape[1]:
                raise ValueError(f"{len(columns)} column names for {X.shape[1]} columns")
        else:
            columns = None
        self.X, self.keys, self.kind, self.columns = X, keys, kind, columns
        self.root = None if root is None else Path(root).resolve()
        self.display_size = int(display_size)
        self._png = functools.lru_cache(maxsize=256)(self._draw)

    def __len__(self) -> int:
        return len(self.keys)

    def __repr__(self) -> str:
        where = f", root={str(self.root)!r}" if self.root is not None else ""
        return f"Pool({self.kind}, {len(self)} items, X {tuple(self.X.shape)}{where})"

    def _item(self, i) -> int:
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)) or not 0 <= i < len(self):
            raise ValueError(f"unknown item {i!r}: items are ids in [0, {len(self)})")
        return int(i)

    def path(self, i: int) -> Path:
        """The file of image ``i``, checked to lie inside the pool's folder.

        Examples
        --------
        >>> import os, tempfile
        >>> from PIL import Image
        >>> from skdbal.labelling.pools import load_pool
        >>> folder = tempfile.mkdtemp()
        >>> Image.new("L", (4, 4)).save(os.path.join(folder, "a.png"))
        >>> load_pool(folder).path(0).name
        'a.png'
        """
        i = self._item(i)
        if self.root is None:
            raise ValueError("this pool's items are not files")
        path = (self.root / self.keys[i]).resolve()
        if not path.is_relative_to(self.root) or not path.is_file():
            raise ValueError(f"item {i} ({self.keys[i]!r}) is no longer a file inside {self.root}")
        return path

    def png(self, i: int) -> bytes:
        """Image ``i`` as PNG, at most ``display_size`` pixels on its long side.

        The original file re-encoded (in colour), or the features drawn
        (each image scaled to its own range) for arrays.

        Examples
        --------
        >>> import io
        >>> import numpy as np
        >>> from PIL import Image
        >>> from skdbal.labelling.pools import Pool
        >>> Image.open(io.BytesIO(Pool(np.zeros((1, 3, 600, 300))).png(0))).size
        (128, 256)
        """
        return self._png(self._item(i))

    def _draw(self, i: int) -> bytes:
        from PIL import Image

        if self.kind != "images":
            raise ValueError("the items of this pool are rows of a table: see Pool.row")
        if self.root is not None:
            path = self.path(i)
            try:
                with Image.open(path) as im:
                    im.draft("RGB", (self.display_size, self.display_size))
                    im = _oriented(im)
                    im = _eight_bit(im)
                    im = im.convert("RGBA" if _has_alpha(im) else ("L" if im.mode == "L" else "RGB"))
            except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
                raise ValueError(f"cannot read image {self.keys[i]!r}: {exc}") from None
        else:
            a = self.X[i].astype(np.float64)
            if a.ndim == 3:
                a = a[0] if a.shape[0] == 1 else np.moveaxis(a[:3], 0, -1)
            lo, hi = float(a.min()), float(a.max())
            g = np.zeros(a.shape, np.uint8) if hi <= lo else np.round(255 * (a - lo) / (hi - lo)).astype(np.uint8)
            im = Image.fromarray(g)
        im.thumbnail((self.display_size, self.display_size), Image.Resampling.LANCZOS)
        out = io.BytesIO()
        im.save(out, format="PNG")
        return out.getvalue()

    def row(self, i: int) -> List[Tuple[str, float]]:
        """Row ``i`` of a table as ``(column, value)`` pairs: the values the model sees.

        Each value is the shortest decimal that is the float32 feature
        (``0.1``, not ``0.10000000149011612``).

        Examples
        --------
        >>> import numpy as np
        >>> from skdbal.labelling.pools import Pool
        >>> Pool(np.array([[0.1, 7.0]])).row(0)
        [('x0', 0.1), ('x1', 7.0)]
        """
        i = self._item(i)
        if self.kind != "table":
            raise ValueError("the items of this pool are images: see Pool.png")
        return [(c, float(str(v))) for c, v in zip(self.columns, self.X[i])]


def load_pool(source, *, keys: Optional[Sequence] = None, image_size: int = 28, mode: str = "L",
              id_column: Optional[str] = None, columns: Optional[Sequence[str]] = None,
              drop_columns: Optional[Sequence[str]] = None, display_size: int = DISPLAY_SIZE) -> Pool:
    """Read a pool: a folder of images, a ``.npy``/``.npz`` array, a ``.csv``/``.parquet`` table, or arrays.

    Parameters
    ----------
    source : path-like, array-like, pandas.DataFrame or Pool
        - a folder: its images (extensions :data:`IMAGE_EXTENSIONS`, any
          case), recursively, sorted by relative path, which are the keys;
          other files and hidden ones are ignored;
        - ``.npy``: an array, ``(N, D)`` rows or ``(N, H, W)`` /
          ``(N, C, H, W)`` images; ``.npz``: its array ``X`` or its only
          array (and its string array ``keys``, if any); never unpickled;
        - ``.csv`` / ``.parquet``: a table whose columns are numeric
          features (save ``id_column``);
        - an array or DataFrame in memory, as the files above.
    keys : sequence of str, optional
        For arrays and tables (not a folder): a distinct name per item,
        instead of the file's or the positions.
    image_size : int, default=28
        Side of the square images the model sees, for a folder.
    mode : {"L", "RGB"}, default="L"
        Grey-scale features ``(N, S, S)`` or colour ``(N, 3, S, S)``, for a folder.
    id_column : str, optional
        A table's column of item names, used as keys and not as a feature.
    columns : sequence of str, optional
        A table's feature columns (default: all but ``id_column`` and
        ``drop_columns``).
    drop_columns : sequence of str, optional
        A table's columns that are not features (text, say), when
        ``columns`` is not given.
    display_size : int, default=DISPLAY_SIZE
        Longest side of the images drawn for people.

    Returns
    -------
    Pool

    Raises
    ------
    ValueError
        An empty folder or table, an unreadable image (named), a link out
        of the folder (named), non-numeric columns (named), missing values,
        an unknown extension, a pickled array.
    ImportError
        A Parquet file without pyarrow installed.

    Examples
    --------
    A folder of images:

    >>> import os, tempfile
    >>> import numpy as np
    >>> from PIL import Image
    >>> from skdbal.labelling.pools import load_pool
    >>> folder = tempfile.mkdtemp()
    >>> os.mkdir(os.path.join(folder, "cats"))
    >>> Image.new("RGB", (40, 30), "white").save(os.path.join(folder, "cats", "tom.jpg"))
    >>> Image.new("L", (8, 8), 0).save(os.path.join(folder, "night.png"))
    >>> pool = load_pool(folder, image_size=16)
    >>> pool.kind, pool.keys, pool.X.shape
    ('images', ['cats/tom.jpg', 'night.png'], (2, 16, 16))
    >>> float(pool.X[0].min()), float(pool.X[1].max())
    (1.0, 0.0)

    A CSV table with an id column:

    >>> path = os.path.join(tempfile.mkdtemp(), "flowers.csv")
    >>> with open(path, "w") as f:
    ...     _ = f.write("name,petal,sepal\\nrose,1.5,2\\ntulip,3,4\\n")
    >>> pool = load_pool(path, id_column="name")
    >>> pool.keys, pool.columns, pool.row(1)
    (['rose', 'tulip'], ['petal', 'sepal'], [('petal', 3.0), ('sepal', 4.0)])
    >>> load_pool(path, id_column="name", drop_columns=["sepal"]).columns
    ['petal']

    Arrays in memory:

    >>> load_pool(np.zeros((5, 8, 8)), keys=list("abcde"))
    Pool(images, 5 items, X (5, 8, 8))
    """
    if isinstance(source, Pool):
        return source
    if hasattr(source, "columns") and hasattr(source, "dtypes"):   # a DataFrame in memory
        return _from_frame(source, keys=keys, id_column=id_column, columns=columns, drop_columns=drop_columns,
                           display_size=display_size)
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if path.is_dir():
            if keys is not None:
                raise ValueError("the keys of a folder's images are their file names: give no keys")
            return _from_folder(path, image_size=image_size, mode=mode, display_size=display_size)
        if not path.exists():
            raise FileNotFoundError(f"no such file or folder: {str(path)!r}")
        suffix = path.suffix.lower()
        if suffix in (".npy", ".npz"):
            return _from_numpy(path, keys=keys, columns=columns, display_size=display_size)
        if suffix in (".csv", ".parquet", ".pq"):
            return _from_frame(_read_table(path), keys=keys, id_column=id_column, columns=columns,
                               drop_columns=drop_columns, display_size=display_size)
        raise ValueError(f"cannot read a pool from {path.name!r}: give a folder of images, a .npy/.npz array "
                         f"or a .csv/.parquet table")
    return Pool(source, keys, columns=columns, display_size=display_size)


def _from_numpy(path: Path, *, keys, columns, display_size) -> Pool:
    try:
        data = np.load(path, allow_pickle=False)
    except ValueError:   # object arrays are pickles: never loaded
        raise ValueError(f"cannot read {path.name!r} as a numeric array without unpickling: it is not a .npy "
                         f"file, or it holds objects; save a numeric array") from None
    if isinstance(data, np.lib.npyio.NpzFile):
        with data:
            names = list(data.files)
            arrays = [n for n in names if n != "keys"]
            if "X" in names:
                name = "X"
            elif len(arrays) == 1:
                name = arrays[0]
            else:
                raise ValueError(f"{path.name!r} holds the arrays {names}: name the pool's array 'X'")
            try:
                X = data[name]
                stored = data["keys"] if "keys" in names else None
            except ValueError:
                raise ValueError(f"cannot read {path.name!r} without unpickling: its arrays hold objects; save "
                                 f"numeric arrays") from None
        if keys is None and stored is not None:
            if stored.dtype.kind not in "UiS":
                raise ValueError(f"the keys in {path.name!r} must be strings or ints; got dtype {stored.dtype}")
            keys = [k.decode() if isinstance(k, bytes) else str(k) for k in stored.tolist()]
    else:
        X = data
    return Pool(X, keys, columns=columns, display_size=display_size)


def _read_table(path: Path):
    import pandas as pd

    if path.suffix.lower() == ".csv":
        return pd.read_csv(path)
    if importlib.util.find_spec("pyarrow") is None:
        raise ImportError(f"reading the Parquet file {path.name!r} needs pyarrow: pip install pyarrow "
                          f"(or pip install 'skdbal[label]')")
    return pd.read_parquet(path, engine="pyarrow")


class ColumnsError(ValueError):
    """A table's columns refused by :func:`load_pool`: ``problem`` says how (``"id"``: no such id
    column; ``"repeated ids"``; ``"unknown"``: no such columns; ``"empty"``: no feature column or no
    row; ``"text"``: columns that are not numeric; ``"missing"``: columns with missing values),
    ``columns`` the columns at fault and ``names`` all the table's columns, so that a caller (the
    ``skdbal label`` command) can say it in its own words.

    Examples
    --------
    >>> import pandas as pd
    >>> from skdbal.labelling.pools import ColumnsError, load_pool
    >>> try:
    ...     load_pool(pd.DataFrame({"name": ["rose", "tulip"], "petal": [1.5, 3.0]}))
    ... except ColumnsError as exc:
    ...     print(exc.problem, exc.columns, exc.names)
    text ['name'] ['name', 'petal']
    """

    def __init__(self, message: str, problem: str, columns: Sequence[str], names: Sequence[str]):
        super().__init__(message)
        self.problem, self.columns, self.names = problem, list(columns), list(names)


def _from_frame(frame, *, keys, id_column, columns, drop_columns=None, display_size) -> Pool:
    import pandas as pd

    names = [str(c) for c in frame.columns]
    frame = frame.set_axis(names, axis=1)
    if id_column is not None:
        if id_column not in names:
            raise ColumnsError(f"no id column {id_column!r}; the columns are {names}", "id", [id_column], names)
        if keys is None:
            keys = [str(k) for k in frame[id_column].tolist()]
            repeated = sorted(set(pd.Series(keys)[pd.Series(keys).duplicated()]))
            if repeated:
                raise ColumnsError(f"the id column {id_column!r} repeats {repeated[:5]}: ids must be distinct",
                                   "repeated ids", [id_column], names)
    if columns is not None and drop_columns is not None:
        raise ValueError("give the feature columns (columns) or the columns to drop (drop_columns), not both")
    dropped = [str(c) for c in drop_columns or ()]
    features = ([c for c in names if c != id_column and c not in dropped] if columns is None
                else [str(c) for c in columns])
    unknown = [c for c in features + dropped if c not in names]
    if unknown:
        raise ColumnsError(f"unknown columns {unknown}; the columns are {names}", "unknown", unknown, names)
    if not features or not len(frame):
        raise ColumnsError(f"the table has no feature columns or no rows (shape {frame.shape})", "empty", features,
                           names)
    text = [c for c in features if not pd.api.types.is_numeric_dtype(frame[c])]
    if text:
        raise ColumnsError(f"the columns {text} are not numeric: the features must be numbers "
                           f"(give the item names as id_column, choose the feature columns with columns= "
                           f"or leave some out with drop_columns=)", "text", text, names)
    missing = [c for c in features if frame[c].isna().any()]
    if missing:
        raise ColumnsError(f"the columns {missing} have missing values: fill or drop them first", "missing",
                           missing, names)
    return Pool(frame[features].to_numpy(dtype=np.float32), keys, kind="table", columns=features,
                display_size=display_size)


def _oriented(im):
    from PIL import ImageOps

    return ImageOps.exif_transpose(im)


def _has_alpha(im) -> bool:
    return "A" in im.getbands() or "transparency" in im.info


def _eight_bit(im):
    """16- and 32-bit integer images scaled to 8 bits (Pillow's convert would clip them)."""
    from PIL import Image

    if im.mode.startswith("I"):
        a = np.asarray(im).astype(np.float64)
        return Image.fromarray(np.clip(np.round(a / 257.0), 0, 255).astype(np.uint8), "L")
    if im.mode == "F":
        a = np.asarray(im, dtype=np.float64)
        top = 1.0 if a.max() <= 1.0 else 255.0
        return Image.fromarray(np.clip(np.round(255 * a / top), 0, 255).astype(np.uint8), "L")
    return im


def _features(im, size: int, mode: str) -> np.ndarray:
    from PIL import Image

    im.draft("RGB", (size, size))
    im = _eight_bit(_oriented(im))
    if _has_alpha(im):   # transparent pixels onto white
        rgba = im.convert("RGBA")
        im = Image.alpha_composite(Image.new("RGBA", rgba.size, (255, 255, 255, 255)), rgba)
    im = im.convert(mode).resize((size, size), Image.Resampling.BILINEAR)
    a = np.asarray(im, dtype=np.float32) / np.float32(255)
    return a if mode == "L" else np.moveaxis(a, -1, 0)


def _image_files(root: Path) -> List[str]:
    """Relative paths of the images under ``root``, sorted; links out of ``root`` refused."""
    found = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in files:
            if name.startswith(".") or not name.lower().endswith(IMAGE_EXTENSIONS):
                continue
            path = Path(folder, name)
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                target = path.resolve()
                if not target.is_relative_to(root):
                    raise ValueError(f"{rel!r} links to {str(target)!r}, outside the folder {str(root)!r}: "
                                     f"remove it or copy the file in")
            found.append(rel)
    return sorted(found)


def _from_folder(folder: Path, *, image_size: int, mode: str, display_size: int) -> Pool:
    from PIL import Image

    if mode not in ("L", "RGB"):
        raise ValueError(f"mode must be 'L' (grey-scale) or 'RGB'; got {mode!r}")
    if not isinstance(image_size, (int, np.integer)) or image_size < 1:
        raise ValueError(f"image_size must be a positive int; got {image_size!r}")
    root = folder.resolve()
    keys = _image_files(root)
    if not keys:
        raise ValueError(f"no images in {str(folder)!r} (extensions {', '.join(IMAGE_EXTENSIONS)})")
    shape = (image_size, image_size) if mode == "L" else (3, image_size, image_size)
    X = np.empty((len(keys),) + shape, np.float32)
    for i, key in enumerate(keys):
        path = (root / key).resolve()
        if not path.is_relative_to(root) or not path.is_file():
            raise ValueError(f"cannot read image {key!r}: not a file inside {str(root)!r}")
        try:
            with Image.open(path) as im:
                X[i] = _features(im, int(image_size), mode)
        except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
            raise ValueError(f"cannot read image {key!r}: {exc}") from None
    return Pool(X, keys, kind="images", root=root, display_size=display_size)
