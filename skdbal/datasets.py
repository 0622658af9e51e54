"""Data sets: the MNIST and Fashion-MNIST loaders, shaped like scikit-learn's fetchers, a noisy annotator and
Repeated-MNIST.

Files are looked up in ``data_home``, then ``$SKDBAL_DATA``, then the default
cache ``~/skdbal_data``, each holding an ``mnist/`` (or ``fashion-mnist/``)
folder with the four standard IDX ``.gz`` files. A missing file is downloaded
(when ``download=True``) from the usual public mirrors into the first of those
folders. Every file is verified by the SHA-256 of its *decompressed* IDX
content, so re-compressed copies are accepted and corrupted ones rejected.
"""
from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import tempfile
import urllib.request
from pathlib import Path
from typing import Optional, Sequence, Union

import numpy as np
from sklearn.utils import Bunch, check_random_state
from sklearn.utils.validation import column_or_1d

from ._validation import check_positive_int, label_columns

__all__ = ["get_data_home", "load_mnist", "load_fashion_mnist", "make_noisy_labels", "make_repeated",
           "MNIST_FILES", "MNIST_MIRRORS", "FASHION_MNIST_FILES", "FASHION_MNIST_MIRRORS", "FASHION_MNIST_CLASSES"]

#: SHA-256 of the decompressed IDX content of each file.
MNIST_FILES = {
    "train-images-idx3-ubyte.gz": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    "train-labels-idx1-ubyte.gz": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    "t10k-images-idx3-ubyte.gz": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    "t10k-labels-idx1-ubyte.gz": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
}

#: Public mirrors tried in order.
MNIST_MIRRORS = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
    "http://yann.lecun.com/exdb/mnist/",
)

#: SHA-256 of the decompressed IDX content of each Fashion-MNIST file (Xiao, Rasul & Vollgraf, 2017).
FASHION_MNIST_FILES = {
    "train-images-idx3-ubyte.gz": "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
    "train-labels-idx1-ubyte.gz": "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
    "t10k-images-idx3-ubyte.gz": "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
    "t10k-labels-idx1-ubyte.gz": "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
}

#: Fashion-MNIST's public mirrors, tried in order (the upstream bucket, then the upstream repository).
FASHION_MNIST_MIRRORS = (
    "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
    "https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion/",
)

#: Fashion-MNIST's class names, by label.
FASHION_MNIST_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker",
                         "Bag", "Ankle boot")

#: Which data set a decompressed file's SHA-256 belongs to, to say so when one is found in the other's place.
_KNOWN = {**{sha: "MNIST" for sha in MNIST_FILES.values()},
          **{sha: "Fashion-MNIST" for sha in FASHION_MNIST_FILES.values()}}

_SUBSETS = {"train": "train", "test": "t10k"}


def get_data_home(data_home: Optional[Union[str, os.PathLike]] = None) -> Path:
    """The folder datasets are cached in (not created here).

    ``data_home`` if given, else ``$SKDBAL_DATA``, else ``~/skdbal_data``.

    Parameters
    ----------
    data_home : str or path-like, optional
        The folder to use; ``~`` is expanded.

    Returns
    -------
    path : :class:`pathlib.Path`

    Examples
    --------
    >>> import os, tempfile
    >>> from pathlib import Path
    >>> from skdbal.datasets import get_data_home
    >>> get_data_home("~/datasets") == Path.home() / "datasets"
    True
    >>> saved = os.environ.get("SKDBAL_DATA")
    >>> os.environ["SKDBAL_DATA"] = tempfile.gettempdir()
    >>> get_data_home() == Path(tempfile.gettempdir()), get_data_home("elsewhere").name
    (True, 'elsewhere')
    >>> if saved is None:
    ...     del os.environ["SKDBAL_DATA"]
    ... else:
    ...     os.environ["SKDBAL_DATA"] = saved
    """
    if data_home is not None:
        return Path(data_home).expanduser()
    env = os.environ.get("SKDBAL_DATA")
    if env:
        return Path(env).expanduser()
    return Path("~/skdbal_data").expanduser()


def _candidates(data_home, subfolder: str = "mnist") -> list:
    homes = []
    if data_home is not None:
        homes.append(Path(data_home).expanduser())
    if os.environ.get("SKDBAL_DATA"):
        homes.append(Path(os.environ["SKDBAL_DATA"]).expanduser())
    homes.append(Path("~/skdbal_data").expanduser())
    out = []
    for home in homes:  # data_home may point at the data set's folder itself
        for folder in (home / subfolder, home):
            if folder not in out:
                out.append(folder)
    return out


def _read_verified(path: Path, sha256: str, dataset: str = "MNIST") -> bytes:
    try:
        with gzip.open(path, "rb") as f:
            content = f.read()
    except (OSError, EOFError) as exc:
        raise OSError(f"{path} is not a readable gzip file ({exc}); delete it and retry") from None
    digest = hashlib.sha256(content).hexdigest()
    other = _KNOWN.get(digest)
    if digest != sha256 and other is not None and other != dataset:
        raise OSError(f"{path} is {other}'s file of that name, not {dataset}'s: put {dataset}'s files in a folder "
                      f"of their own")
    if digest != sha256:
        raise OSError(
            f"checksum mismatch for {path}: SHA-256 of the decompressed content is "
            f"{digest}, expected {sha256}. The file is corrupted; delete it and retry."
        )
    return content


def _download(name: str, folder: Path, sha256: str, timeout: float, mirrors: Sequence[str],
              dataset: str = "MNIST") -> Path:
    created = [p for p in (folder, *folder.parents) if not p.exists()]
    folder.mkdir(parents=True, exist_ok=True)
    errors = []
    for mirror in mirrors:
        url = mirror + name
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".part")
        try:
            with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as resp:
                shutil.copyfileobj(resp, out)
            _read_verified(Path(tmp), sha256, dataset)
            target = folder / name
            os.replace(tmp, target)  # atomic: a killed download leaves no half file
            return target
        except Exception as exc:  # try the next mirror
            errors.append(f"{url}: {exc}")
            if os.path.exists(tmp):
                os.unlink(tmp)
    for p in created:  # leave no empty folders behind
        try:
            p.rmdir()
        except OSError:
            break
    raise OSError("could not download " + name + ":\n  " + "\n  ".join(errors))


def _parse_idx(content: bytes, name: str) -> np.ndarray:
    if len(content) < 4 or content[:2] != b"\x00\x00" or content[2] != 0x08:
        raise OSError(f"{name} is not an unsigned-byte IDX file")
    ndim = content[3]
    dims = np.frombuffer(content, dtype=">u4", count=ndim, offset=4).astype(int)
    data = np.frombuffer(content, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        raise OSError(f"{name}: header says {tuple(dims)}, found {data.size} values")
    return data.reshape(tuple(dims)).copy()


def load_mnist(
    data_home: Optional[Union[str, os.PathLike]] = None,
    download: bool = True,
    subset: str = "train",
    return_X_y: bool = False,
    timeout: float = 60.0,
):
    """Load MNIST (LeCun, Cortes & Burges) from the standard IDX files.

    Parameters
    ----------
    data_home : str or path-like, optional
        Folder holding ``mnist/`` (or the four files directly). Looked up
        first; then ``$SKDBAL_DATA``; then ``~/skdbal_data``.
    download : bool, default=True
        Download missing files into ``<data_home>/mnist`` (the first folder
        above). With False, a missing file raises :class:`FileNotFoundError`.
    subset : {"train", "test", "all"}, default="train"
        60,000 training images, 10,000 test images, or both (train first).
    return_X_y : bool, default=False
        Return ``(images, target)`` instead of a Bunch.
    timeout : float, default=60
        Seconds per download attempt.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        ``images`` uint8 ``(N, 28, 28)``; ``data`` the same, flat
        ``(N, 784)``; ``target`` int64 ``(N,)``; ``target_names``;
        ``DESCR``.
    (images, target) : tuple, with ``return_X_y=True``

    Raises
    ------
    FileNotFoundError
        Offline (``download=False``) with no copy; the message says where
        to put the files.
    OSError
        On a checksum mismatch, or when the download fails (the message
        also says where to put the files by hand).

    Examples
    --------
    >>> from skdbal.datasets import load_mnist
    >>> X, y = load_mnist(subset="test", return_X_y=True)  # doctest: +SKIP
    >>> X.shape, y[:5]  # doctest: +SKIP
    ((10000, 28, 28), array([7, 2, 1, 0, 4]))
    """
    images, target = _load_idx_set("MNIST", "mnist", MNIST_FILES, MNIST_MIRRORS, data_home, download, subset,
                                   timeout)
    if return_X_y:
        return images, target
    return Bunch(
        images=images,
        data=images.reshape(len(images), -1),
        target=target,
        target_names=np.arange(10),
        DESCR=f"MNIST handwritten digits, subset={subset!r}: {len(target)} uint8 28x28 images.",
    )


def load_fashion_mnist(
    data_home: Optional[Union[str, os.PathLike]] = None,
    download: bool = True,
    subset: str = "train",
    return_X_y: bool = False,
    timeout: float = 60.0,
):
    """Load Fashion-MNIST (Xiao, Rasul & Vollgraf, 2017) from the standard IDX files.

    Zalando's article images: 10 classes of clothing (:data:`FASHION_MNIST_CLASSES`), 28 × 28 grey-scale,
    the same IDX format and split sizes as MNIST (:func:`load_mnist`), and read the same way: the files are
    looked up in ``fashion-mnist/`` under ``data_home``, ``$SKDBAL_DATA`` and ``~/skdbal_data`` (or in
    those folders themselves), downloaded when missing, and verified by the SHA-256 of their decompressed
    content (:data:`FASHION_MNIST_FILES`), so any re-compression of the same files is accepted. Debian's
    package ``dataset-fashion-mnist`` installs the four files under ``/usr/share/datasets/fashion-mnist/``:
    pass that folder as ``data_home`` to read them offline.

    Parameters
    ----------
    data_home : str or path-like, optional
        Folder holding ``fashion-mnist/`` (or the four files directly). Looked up first; then
        ``$SKDBAL_DATA``; then ``~/skdbal_data``.
    download : bool, default=True
        Download missing files into ``<data_home>/fashion-mnist`` (the first folder above), from
        :data:`FASHION_MNIST_MIRRORS`. With False, a missing file raises :class:`FileNotFoundError`.
    subset : {"train", "test", "all"}, default="train"
        60,000 training images, 10,000 test images, or both (train first).
    return_X_y : bool, default=False
        Return ``(images, target)`` instead of a Bunch.
    timeout : float, default=60
        Seconds per download attempt.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        ``images`` uint8 ``(N, 28, 28)``; ``data`` the same, flat ``(N, 784)``; ``target`` int64 ``(N,)``;
        ``target_names``, the class names by label; ``DESCR``.
    (images, target) : tuple, with ``return_X_y=True``

    Raises
    ------
    FileNotFoundError
        Offline (``download=False``) with no copy; the message says where to put the files.
    OSError
        On a checksum mismatch (a corrupted file, or MNIST's file of the same name in Fashion-MNIST's
        place), or when the download fails (the message also says where to put the files by hand).

    Examples
    --------
    >>> from skdbal.datasets import load_fashion_mnist
    >>> fashion = load_fashion_mnist(subset="test")  # doctest: +SKIP
    >>> fashion.images.shape, fashion.target[:3], fashion.target_names[fashion.target[0]]  # doctest: +SKIP
    ((10000, 28, 28), array([9, 2, 1]), 'Ankle boot')
    """
    images, target = _load_idx_set("Fashion-MNIST", "fashion-mnist", FASHION_MNIST_FILES, FASHION_MNIST_MIRRORS,
                                   data_home, download, subset, timeout)
    if return_X_y:
        return images, target
    return Bunch(
        images=images,
        data=images.reshape(len(images), -1),
        target=target,
        target_names=np.asarray(FASHION_MNIST_CLASSES),
        DESCR=f"Fashion-MNIST article images, subset={subset!r}: {len(target)} uint8 28x28 images.",
    )


def _load_idx_set(dataset: str, subfolder: str, files: dict, mirrors: Sequence[str], data_home, download: bool,
                  subset: str, timeout: float):
    """``(images, target)`` of an MNIST-shaped data set: its four IDX files found (or downloaded) and verified."""
    if subset not in ("train", "test", "all"):
        raise ValueError(f"subset must be 'train', 'test' or 'all'; got {subset!r}")
    prefixes = ["train", "t10k"] if subset == "all" else [_SUBSETS[subset]]
    folders = _candidates(data_home, subfolder)
    arrays = {}
    for prefix in prefixes:
        for kind in ("images-idx3", "labels-idx1"):
            name = f"{prefix}-{kind}-ubyte.gz"
            path = next((f / name for f in folders if (f / name).is_file()), None)
            if path is None:
                where = (f"Put the four IDX files ({', '.join(files)}) in {folders[0]} (or set "
                         f"SKDBAL_DATA / data_home to a folder holding {subfolder}/). "
                         f"Looked in: {', '.join(map(str, folders))}")
                if not download:
                    raise FileNotFoundError(
                        f"{dataset} file {name} not found and download=False. {where}; or pass download=True."
                    )
                try:
                    path = _download(name, get_data_home(data_home) / subfolder, files[name], timeout, mirrors,
                                     dataset)
                except OSError as exc:
                    raise OSError(f"{exc}\nOffline? {where}.") from None
            arrays[(prefix, kind)] = _parse_idx(_read_verified(path, files[name], dataset), name)
    images = np.concatenate([arrays[(p, "images-idx3")] for p in prefixes])
    target = np.concatenate([arrays[(p, "labels-idx1")] for p in prefixes]).astype(np.int64)
    if len(images) != len(target):
        raise OSError(f"{dataset} images and labels disagree: {len(images)} vs {len(target)}")
    return images, target


def make_noisy_labels(y, noise_rate: float, *, classes=None, transition_matrix=None, random_state=None):
    """The labels of a noisy annotator: each label flipped once, for good.

    Symmetric noise flips each label with probability ``noise_rate`` to one
    of the other ``C − 1`` classes, uniformly. The draw is made once per
    point: a fixed annotator who gives the same answer if asked twice. Keep
    the test set clean.

    Parameters
    ----------
    y : array-like of shape (n,)
        The true labels.
    noise_rate : float in [0, 1)
        Probability that a label is flipped (symmetric noise). Ignored when
        ``transition_matrix`` is given.
    classes : array-like of shape (C,), optional
        All classes, distinct, each representable in ``y``'s dtype (a
        ``ValueError`` otherwise); by default those in ``y``.
    transition_matrix : array-like of shape (C, C), optional
        Class-dependent noise: row ``i`` is the distribution of the given
        label when the true class is ``classes[i]``. Rows must sum to 1.
    random_state : int, RandomState instance or None, default=None
        Seeds the flips.

    Returns
    -------
    y_noisy : ndarray of shape (n,)
        The annotator's labels, of the dtype of ``y``.
    is_flipped : ndarray of bool, shape (n,)
        Where ``y_noisy != y``.

    Raises
    ------
    ValueError
        If ``noise_rate`` is outside [0, 1), ``y`` holds labels outside
        ``classes``, or ``transition_matrix`` is not a (C, C) matrix of
        probabilities whose rows sum to 1.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.datasets import make_noisy_labels
    >>> y = np.repeat(np.arange(10), 1000)
    >>> y_noisy, flipped = make_noisy_labels(y, 0.2, random_state=0)
    >>> round(float(flipped.mean()), 2), bool(np.all((y_noisy != y) == flipped))
    (0.2, True)
    """
    y = column_or_1d(y)
    classes = np.unique(y) if classes is None else np.asarray(classes)
    if classes.ndim != 1 or len(classes) < 2:
        raise ValueError(f"classes must hold at least 2 labels; got {classes!r}")
    if len(np.unique(classes)) != len(classes):
        raise ValueError(f"classes must be distinct (a repeated class would draw more flips to it); got "
                         f"{classes.tolist()}")
    try:
        fits = classes.dtype == y.dtype or np.array_equal(classes.astype(y.dtype), classes)
    except (ValueError, TypeError, OverflowError):  # e.g. string classes for integer labels
        fits = False
    if not fits:
        # a flip to such a class would be stored as another label (cut, wrapped or rounded)
        raise ValueError(f"classes {classes.tolist()[:10]} do not all fit y's dtype {y.dtype}; convert y first")
    idx = label_columns(classes, y)  # position of each label in `classes`
    C = len(classes)
    if transition_matrix is None:
        rate = float(noise_rate)
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"noise_rate must lie in [0, 1); got {noise_rate!r}")
        T = np.full((C, C), rate / (C - 1))
        np.fill_diagonal(T, 1.0 - rate)
    else:
        T = np.asarray(transition_matrix, dtype=np.float64)
        if T.shape != (C, C):
            raise ValueError(f"transition_matrix must have shape ({C}, {C}); got {T.shape}")
        if not np.isfinite(T).all() or T.min() < 0:
            raise ValueError("transition_matrix must hold probabilities (finite, >= 0)")
        sums = T.sum(axis=1)
        if not np.allclose(sums, 1.0, atol=1e-8):
            raise ValueError(f"transition_matrix rows must sum to 1; got row sums {np.round(sums, 6).tolist()}")
    rng = check_random_state(random_state)
    u = rng.random_sample(len(y))
    cdf = np.cumsum(T, axis=1)
    cdf[:, -1] = 1.0
    new = (u[:, None] >= cdf[idx]).sum(axis=1)
    y_noisy = classes[new].astype(y.dtype, copy=False)
    return y_noisy, y_noisy != y


def make_repeated(X, y, n_repeats: int = 3, noise_std: float = 0.1, random_state=None, *,
                  return_origin: bool = False):
    """Repeat every example ``n_repeats`` times, each copy with its own Gaussian noise.

    Repeated-MNIST (Kirsch et al., 2019): a pool where every image comes in
    near-identical copies, so that a batch of the top-``k`` BALD points is
    full of duplicates. The copies are stacked block by block, ``[X + ε₁; X
    + ε₂; ...]``, and the noise is drawn once (a fixed data set).

    Parameters
    ----------
    X : array-like of shape (n, ...)
        The examples (any shape after the first axis: images stay images).
    y : array-like of shape (n,)
        Their labels.
    n_repeats : int, default=3
        Copies of each example, an int >= 1.
    noise_std : float, default=0.1
        Standard deviation of the isotropic Gaussian noise added to every
        copy, in the units of ``X`` (``0`` repeats exactly). Kirsch et al.
        add 0.1 to images standardised by MNIST's pixel std 0.3081, that is
        ``0.1 · 0.3081 ≈ 0.031`` on pixels in [0, 1].
    random_state : int, RandomState instance or None, default=None
        Seeds the noise.
    return_origin : bool, default=False
        Also return the row of ``X`` each copy comes from.

    Returns
    -------
    X_repeated : ndarray of shape (n_repeats * n, ...)
        Floating point, of ``X``'s float dtype (float32 for integer ``X``).
    y_repeated : ndarray of shape (n_repeats * n,)
    origin : ndarray of shape (n_repeats * n,), int
        Only with ``return_origin=True``: ``X_repeated[i]`` is a noisy copy
        of ``X[origin[i]]``.

    Raises
    ------
    ValueError
        If ``n_repeats`` is not an int >= 1, ``noise_std`` is negative or not
        finite, or ``X`` and ``y`` differ in length.

    References
    ----------
    .. [1] A. Kirsch, J. van Amersfoort and Y. Gal, "BatchBALD: Efficient and
       diverse batch acquisition for deep Bayesian active learning",
       NeurIPS 2019, arXiv:1906.08158.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.datasets import make_repeated
    >>> X, y = np.arange(6, dtype=float).reshape(3, 2), np.array([0, 1, 1])
    >>> Xr, yr, origin = make_repeated(X, y, n_repeats=2, noise_std=0.0, return_origin=True)
    >>> Xr.shape, yr.tolist(), origin.tolist()
    ((6, 2), [0, 1, 1, 0, 1, 1], [0, 1, 2, 0, 1, 2])
    >>> Xn, _ = make_repeated(X, y, n_repeats=2, noise_std=0.1, random_state=0)
    >>> bool(np.allclose(Xn, Xr, atol=0.5)), bool(np.array_equal(Xn[:3], Xn[3:]))   # close, not equal
    (True, False)
    """
    check_positive_int(n_repeats, "n_repeats")
    std = float(noise_std)
    if not np.isfinite(std) or std < 0:
        raise ValueError(f"noise_std must be a finite float >= 0; got {noise_std!r}")
    X = np.asarray(X)
    y = column_or_1d(y)
    if X.ndim < 1 or len(X) != len(y):
        raise ValueError(f"X and y differ in length: {len(X)} and {len(y)}")
    dtype = X.dtype if np.issubdtype(X.dtype, np.floating) else np.float32
    X_rep = np.concatenate([X.astype(dtype, copy=False)] * int(n_repeats), axis=0)
    if std > 0:  # drawn in blocks of rows, so float64 noise for the whole set never exists
        rng = check_random_state(random_state)
        for start in range(0, len(X_rep), 8192):
            block = X_rep[start:start + 8192]
            block += rng.normal(0.0, std, size=block.shape).astype(dtype, copy=False)
    y_rep = np.tile(y, int(n_repeats))
    if return_origin:
        return X_rep, y_rep, np.tile(np.arange(len(y), dtype=np.intp), int(n_repeats))
    return X_rep, y_rep
