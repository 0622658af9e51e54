"""Embeddings computed once: a memory-mapped ``.npy`` beside a JSON key (the encoder and the pool's content)."""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import uuid
from pathlib import Path
from typing import List, NoReturn, Optional, Union

import numpy as np
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from .._validation import is_lazy
from ._encoders import callable_name, json_value

__all__ = ["EmbeddingCache", "StaleEmbeddingsError", "content_sha256", "encoder_fingerprint"]

#: The layout of the key file; a cache written by another layout is refused.
FORMAT = 1


class StaleEmbeddingsError(ValueError):
    """Cached embeddings that do not belong to this encoder and pool, or a damaged cache file.

    ``differences`` lists what differs, one line each (``"encoder.sha256:
    cache 3f1a…, now 9c0d…"``).

    Examples
    --------
    >>> from skdbal.models import StaleEmbeddingsError
    >>> error = StaleEmbeddingsError("stale", ["pool.sha256: cache 3f1a, now 9c0d"])
    >>> error.differences
    ['pool.sha256: cache 3f1a, now 9c0d']
    """

    def __init__(self, message: str, differences: Optional[List[str]] = None):
        super().__init__(message)
        self.differences = list(differences or [])


def content_sha256(X, chunk_bytes: int = 1 << 24) -> str:
    """SHA-256 of an array's content: its dtype, its shape and its bytes in C order.

    Read ``chunk_bytes`` at a time, so a memory-mapped pool of any size is
    hashed in bounded memory. The same values in another dtype or shape hash
    differently.

    Parameters
    ----------
    X : array-like of numbers, at least 1-d
    chunk_bytes : int, default=16 MiB

    Returns
    -------
    hexdigest : str

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.models import content_sha256
    >>> a = np.arange(6, dtype=np.float32).reshape(3, 2)
    >>> content_sha256(a) == content_sha256(a.copy())
    True
    >>> content_sha256(a) == content_sha256(a.reshape(2, 3)), content_sha256(a) == content_sha256(a.astype(float))
    (False, False)
    """
    X = np.asarray(X)
    if X.ndim == 0 or X.dtype.kind not in "biufc":
        raise TypeError(f"a pool to hash is a numeric array of at least one dimension; got dtype {X.dtype}, "
                        f"shape {X.shape}")
    digest = hashlib.sha256(f"skdbal-array|{X.dtype.str}|{tuple(X.shape)}|".encode())
    row_bytes = max(int(np.prod(X.shape[1:], dtype=np.int64)) * X.dtype.itemsize, 1)
    rows = max(1, int(chunk_bytes) // row_bytes)
    for start in range(0, len(X), rows):
        digest.update(memoryview(np.ascontiguousarray(X[start:start + rows])).cast("B"))  # type: ignore[arg-type]
    return digest.hexdigest()


def encoder_fingerprint(encoder) -> dict:
    """What identifies a fitted encoder's embeddings, as JSON-able values.

    An skdbal encoder's own :meth:`~skdbal.models.TorchEncoder.fingerprint`
    (its class, the parameters that change the embedding, its input
    preparation and a SHA-256 of its weights). For another fitted scikit-learn
    transformer (a ``PCA``, say): its class, its parameters and a SHA-256 of
    its pickle.

    Parameters
    ----------
    encoder : fitted transformer

    Returns
    -------
    fingerprint : dict

    Raises
    ------
    sklearn.exceptions.NotFittedError
        If the encoder is not fitted.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.models import PrecomputedEmbeddings, encoder_fingerprint
    >>> encoder_fingerprint(PrecomputedEmbeddings().fit(np.zeros((2, 3))))["class"]
    'skdbal.models.PrecomputedEmbeddings'
    """
    try:
        check_is_fitted(encoder)
    except NotFittedError:
        raise NotFittedError(f"the {type(encoder).__name__} is not fitted: fit it on the pool first "
                             f"(encoder.fit(X)), then cache its embeddings") from None
    if hasattr(encoder, "fingerprint"):
        return encoder.fingerprint()
    params = {k: json_value(v) for k, v in sorted(encoder.get_params(deep=False).items())} \
        if hasattr(encoder, "get_params") else {}
    try:
        state = hashlib.sha256(pickle.dumps(encoder, protocol=4)).hexdigest()
    except Exception as error:
        raise TypeError(f"cannot fingerprint a {type(encoder).__name__}: it does not pickle ({error})") from None
    return {"class": callable_name(type(encoder)), "params": params, "sha256": state}


def _flatten(value, prefix: str = "") -> dict:
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}


def _short(value) -> str:
    text = json.dumps(value)
    if isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value):
        return value[:12] + "…"
    return text if len(text) <= 80 else text[:77] + "…"


def _differences(stored: dict, expected: dict) -> List[str]:
    a, b = _flatten(stored), _flatten(expected)
    return [f"{k}: cache {_short(a.get(k, '(absent)'))}, now {_short(b.get(k, '(absent)'))}"
            for k in sorted(set(a) | set(b)) if a.get(k, "(absent)") != b.get(k, "(absent)")]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:             # another user's process, or no signals here: leave its files alone
        return True
    return True


def _fsync(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class EmbeddingCache:
    """An encoder's embeddings of a pool, computed once and kept in a memory-mapped ``.npy`` file.

    Beside ``path`` (``embeddings.npy``) a small JSON key (``embeddings.json``)
    records what the embeddings belong to: the encoder (its class, the
    parameters that change the embedding, its input preparation and a SHA-256
    of its weights; see :func:`encoder_fingerprint`) and the pool (a SHA-256 of
    its content, its shape and dtype; see :func:`content_sha256`).
    :meth:`get` returns the cached embeddings when the key matches, computes
    and stores them when there are none, and refuses a cache that belongs to
    another encoder or pool, or whose file is damaged, with a
    :class:`StaleEmbeddingsError` naming what differs; ``recompute=True``
    replaces it.

    The embeddings are written ``chunk_rows`` rows at a time straight to the
    file, and read back memory-mapped, so a pool of a million items is
    embedded and read in bounded memory. A write goes to a temporary file
    renamed into place, and the key is written last: a write killed halfway
    leaves no key, and embeddings without a key are never used.

    Parameters
    ----------
    path : path
        The ``.npy`` file (``.npy`` is added if missing); its folder is made
        when needed. Keep it beside the data or the labelling store.
    chunk_rows : int, default=8192
        Rows embedded and written at a time.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.models import EmbeddingCache, FunctionEncoder
    >>> pool = np.arange(12, dtype=np.float32).reshape(6, 2)
    >>> encoder = FunctionEncoder(np.sum, kw_args={"axis": 1, "keepdims": True}).fit(pool)
    >>> cache = EmbeddingCache(getfixture("tmp_path") / "embeddings.npy")
    >>> Z = cache.get(encoder, pool)           # computed and stored
    >>> Z[:3, 0].tolist()
    [1.0, 5.0, 9.0]
    >>> cache.get(encoder, pool) is not None   # read back, not computed again
    True
    >>> cache.get(encoder, pool[::-1])         # another pool: refused  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    skdbal.models._embedding_cache.StaleEmbeddingsError: the embeddings in ... belong to another pool: pool.sha256: ...
    """

    def __init__(self, path: Union[str, "os.PathLike[str]"], chunk_rows: int = 8192):
        path = Path(path)
        self.path = path if path.suffix == ".npy" else path.with_name(path.name + ".npy")
        if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, (int, np.integer)) or chunk_rows < 1:
            raise ValueError(f"chunk_rows must be a positive integer; got {chunk_rows!r}")
        self.chunk_rows = int(chunk_rows)

    @property
    def key_path(self) -> Path:
        """The JSON key beside the embeddings."""
        return self.path.with_suffix(".json")

    def __repr__(self) -> str:
        return f"EmbeddingCache({str(self.path)!r})"

    def key(self, encoder, X) -> dict:
        """The key embeddings of ``X`` by ``encoder`` are stored under (hashes the pool once)."""
        X = np.asarray(X)
        return {"format": FORMAT, "encoder": encoder_fingerprint(encoder),
                "pool": {"sha256": content_sha256(X), "shape": list(X.shape), "dtype": X.dtype.str}}

    def _refuse(self, reason: str, differences: List[str]) -> NoReturn:
        raise StaleEmbeddingsError(f"the embeddings in {self.path} {reason}: {'; '.join(differences)}. "
                                   f"Pass recompute=True to compute them again, or use another path",
                                   differences)

    def load(self, encoder, X, *, key: Optional[dict] = None) -> Optional[np.memmap]:
        """The cached embeddings of ``X`` by ``encoder``, memory-mapped read-only; None when there are none.

        Raises
        ------
        StaleEmbeddingsError
            The cache belongs to another encoder or pool, or its file is
            truncated or is not the shape its key records.
        """
        if not self.key_path.is_file():
            return None        # no key: nothing was written, or a write was killed before its end
        key = self.key(encoder, X) if key is None else key
        try:
            stored = json.loads(self.key_path.read_text())
        except (OSError, ValueError) as error:
            self._refuse("have an unreadable key", [f"{self.key_path.name}: {error}"])
        embedding = stored.pop("embedding", None) if isinstance(stored, dict) else None
        if not isinstance(stored, dict) or stored.get("format") != FORMAT or not isinstance(embedding, dict):
            self._refuse("were written in another layout", [f"format: cache {stored.get('format')!r}, "
                                                           f"now {FORMAT}" if isinstance(stored, dict) else
                                                           "the key is not a JSON object"])
        for part, what in (("pool", "another pool"), ("encoder", "another encoder")):
            differences = _differences({part: stored.get(part)}, {part: key[part]})
            if differences:
                self._refuse(f"belong to {what}", differences)
        return self._open(embedding, len(np.asarray(X)))

    def _open(self, embedding: dict, n_rows: int) -> np.memmap:
        if not self.path.is_file():
            self._refuse("are missing", [f"{self.path.name} is absent beside its key"])
        try:
            with open(self.path, "rb") as f:
                version = np.lib.format.read_magic(f)
                if version not in ((1, 0), (2, 0)):
                    raise ValueError(f".npy format version {version}")
                read = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
                    np.lib.format.read_array_header_2_0
                shape, fortran, dtype = read(f)
                offset = f.tell()
        except (OSError, ValueError) as error:
            self._refuse("are damaged", [f"{self.path.name} is not a readable .npy file ({error})"])
        expected_shape = [n_rows, embedding.get("shape", [None, None])[1]]
        if list(shape) != list(embedding.get("shape", [])) or list(shape) != expected_shape \
                or dtype.str != embedding.get("dtype") or fortran:
            self._refuse("are damaged", [f"shape {list(shape)} {dtype.str}, the key records "
                                         f"{embedding.get('shape')} {embedding.get('dtype')} for {n_rows} rows"])
        size, expected = self.path.stat().st_size, offset + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if size != expected:
            self._refuse("are damaged", [f"{self.path.name} is truncated: {size} bytes, {expected} expected"])
        return np.load(self.path, mmap_mode="r")

    def get(self, encoder, X, *, recompute: bool = False) -> np.memmap:
        """The embeddings of ``X`` by the fitted ``encoder``: read from the cache, or computed and stored.

        Parameters
        ----------
        encoder : fitted transformer
            An skdbal encoder or any fitted scikit-learn transformer.
        X : array-like
            The pool, as the encoder takes it; a memory-mapped array is read
            ``chunk_rows`` rows at a time.
        recompute : bool, default=False
            Compute and store the embeddings even when a cache exists (a stale
            one included).

        Returns
        -------
        embeddings : numpy.memmap of shape (n_samples, D), float32, read-only

        Raises
        ------
        StaleEmbeddingsError
            Without ``recompute``: the cache belongs to another encoder or
            pool, or its file is damaged.
        """
        if is_lazy(X):
            raise TypeError("a dask pool's embeddings stay on its cluster: encoder.transform(pool) gives them "
                            "as a dask array, block by block (store them there with .to_zarr(...)); "
                            "EmbeddingCache keeps a local array's")
        X = np.asarray(X)
        key = self.key(encoder, X)
        if not recompute:
            found = self.load(encoder, X, key=key)
            if found is not None:
                return found
        return self._write(encoder, X, key)

    def _write(self, encoder, X, key: dict) -> np.memmap:
        if len(X) == 0:
            raise ValueError("the pool is empty: there is nothing to embed")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        token = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp_data = self.path.with_name(f".{self.path.name}.{token}.tmp")
        tmp_key = self.key_path.with_name(f".{self.key_path.name}.{token}.tmp")
        try:
            with open(tmp_data, "wb") as f:
                width = None
                for start in range(0, len(X), self.chunk_rows):
                    rows = X[start:start + self.chunk_rows]
                    Z = np.asarray(encoder.transform(rows))
                    if Z.ndim != 2 or len(Z) != len(rows) or (width is not None and Z.shape[1] != width):
                        raise ValueError(f"the encoder returned shape {Z.shape} for {len(rows)} rows; an "
                                         f"encoder returns one row of a fixed width per input row")
                    if width is None:
                        width = Z.shape[1]
                        np.lib.format.write_array_header_1_0(f, {"descr": np.dtype(np.float32).str,
                                                                 "fortran_order": False, "shape": (len(X), width)})
                    f.write(np.ascontiguousarray(Z, dtype=np.float32).tobytes())
                f.flush()
                os.fsync(f.fileno())
            record = {**key, "embedding": {"shape": [len(X), width], "dtype": np.dtype(np.float32).str}}
            tmp_key.write_text(json.dumps(record, indent=1, sort_keys=True))
            _fsync(tmp_key)
            self.key_path.unlink(missing_ok=True)   # from here until the key is renamed, no cache is used
            os.replace(tmp_data, self.path)
            os.replace(tmp_key, self.key_path)
            _fsync(self.path.parent)
        finally:
            for tmp in (tmp_data, tmp_key):
                tmp.unlink(missing_ok=True)
        self._remove_killed_writes()
        return self._open(record["embedding"], len(X))

    def _remove_killed_writes(self) -> None:
        """Delete the temporary files that writes killed halfway left (their process is gone)."""
        for name in (self.path.name, self.key_path.name):
            for tmp in self.path.parent.glob(f".{name}.*-*.tmp"):
                pid = tmp.name[len(name) + 2:].split("-", 1)[0]
                if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
                    tmp.unlink(missing_ok=True)
