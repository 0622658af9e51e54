"""A pool on disk that every worker reads: Zarr, chunked by rows.

Why Zarr: a Zarr array is a directory (or object-store prefix) of
independently compressed chunks plus a small JSON description of shape,
dtype and chunking. Any number of workers read their own chunks at once
without locks, from a shared file system or from S3/GCS through fsspec; it
is written block by block, so a pool larger than memory is built without
ever holding it; :func:`dask.array.from_zarr` reads it lazily. It is kept by
an active NumFOCUS project (zarr-python 3). Sharded ``.npy`` memmaps need
no dependency but have no compression, no object stores and no standard
index of the shards.
"""
from __future__ import annotations

from typing import Iterable, Optional, Union

import numpy as np

__all__ = ["write_pool", "open_pool"]


def _zarr():
    try:
        import zarr
    except ImportError as exc:  # pragma: no cover - the extra is installed in test
        raise ImportError("a pool on disk needs zarr: pip install 'skdbal[dask]'") from exc
    return zarr


def write_pool(path: str, blocks: Union[np.ndarray, Iterable[np.ndarray]], *, chunk_rows: int = 16384,
               overwrite: bool = False):
    """Write a pool to a Zarr array, block by block.

    Parameters
    ----------
    path : str
        A directory, or any store URL zarr accepts (``s3://...``).
    blocks : ndarray of shape (N, ...) or iterable of such arrays
        The pool, or its rows in consecutive blocks (so that a pool larger
        than memory never exists in one piece). Every block has the same
        row shape and dtype.
    chunk_rows : int, default=16384
        Rows per Zarr chunk: the unit a worker reads and scores. Other axes
        are one chunk.
    overwrite : bool, default=False
        Replace an existing array at ``path``; otherwise an existing one is
        an error, so that a pool is never silently overwritten.

    Returns
    -------
    zarr.Array

    Raises
    ------
    FileExistsError
        If ``path`` holds data and ``overwrite`` is False.

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> from skdbal.dask import write_pool, open_pool
    >>> path = tempfile.mkdtemp() + "/pool.zarr"
    >>> z = write_pool(path, (np.full((3, 2), i, dtype=np.uint8) for i in range(3)), chunk_rows=4)
    >>> z.shape, z.chunks
    ((9, 2), (4, 2))
    >>> open_pool(path)[:, 0].compute().tolist()
    [0, 0, 0, 1, 1, 1, 2, 2, 2]
    """
    zarr = _zarr()
    if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, (int, np.integer)) or chunk_rows < 1:
        raise ValueError(f"chunk_rows must be an int >= 1; got {chunk_rows!r}")
    if isinstance(blocks, np.ndarray):
        blocks = [blocks]
    z = None
    for block in blocks:
        block = np.asarray(block)
        if block.ndim < 2:
            raise ValueError(f"each block must have shape (n, ...) with at least 2 dimensions; got {block.shape}")
        if z is None:
            try:
                z = zarr.open_array(path, mode="w" if overwrite else "w-", shape=(0,) + block.shape[1:],
                                    chunks=(int(chunk_rows),) + block.shape[1:], dtype=block.dtype)
            except FileExistsError:
                raise FileExistsError(f"{path} already holds data; pass overwrite=True to replace it") from None
        elif block.shape[1:] != z.shape[1:] or block.dtype != z.dtype:
            raise ValueError(f"block of shape {block.shape[1:]} and dtype {block.dtype} after blocks of "
                             f"{z.shape[1:]} and {z.dtype}")
        if len(block):
            z.append(block, axis=0)
    if z is None:
        raise ValueError("no blocks to write: the pool is empty")
    return z


def open_pool(path: str, *, chunk_rows: Optional[int] = None):
    """A Zarr pool as a lazy :class:`dask.array.Array`, chunked by rows.

    Nothing is read here: each worker reads its own chunks when it scores
    them.

    Parameters
    ----------
    path : str
        Where :func:`write_pool` (or any Zarr writer) put the array.
    chunk_rows : int, optional
        Rows per task; by default the array's own chunks. Other axes are
        always one chunk.

    Returns
    -------
    dask.array.Array

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> from skdbal.dask import write_pool, open_pool
    >>> path = tempfile.mkdtemp() + "/pool.zarr"
    >>> _ = write_pool(path, np.zeros((10, 3)), chunk_rows=4)
    >>> open_pool(path).chunks
    ((4, 4, 2), (3,))
    """
    import dask.array as da

    X = da.from_zarr(_zarr().open_array(path, mode="r"))
    if X.ndim < 2:
        raise ValueError(f"a pool has at least 2 dimensions; {path} has shape {X.shape}")
    rows = X.chunks[0][0] if chunk_rows is None else int(chunk_rows)
    return X.rechunk((rows,) + tuple(-1 for _ in X.shape[1:]))
