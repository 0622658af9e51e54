"""Runs on a representation: an encoder's embeddings of the data set, and a Bayesian head over them.

A run whose :attr:`~skdbal.experiments.RunSpec.representation` is not
``"none"`` trains no network on the pixels: its training and test images are
replaced by their embeddings, and each step fits a head (a
:attr:`~skdbal.experiments.RunSpec.head`) on the embeddings of the labelled
rows. The strategies choose among the pool's embeddings as they choose among
images. The representations:

- ``"pool"``: a :class:`~skdbal.models.PoolEncoder` learnt by
  self-supervision from the run's pool (its images, no labels), seeded by
  the run's seed;
- ``"pca"``: the first 50 principal components of the pool's pixels, a cheap
  baseline;
- ``"file:PATH"``: a ``.npy`` file of embeddings (the training images' rows
  then the test images', in the data set's order), or an encoder file that
  :func:`~skdbal.models.load_encoder` reads (TorchScript ``.pt``, exported
  ``.pt2``) or, with the ``onnx`` extra, ``.onnx``.

The encoder is learnt once per data set, seed and setting, and its
embeddings of the training and test images are kept under the output
folder's ``cache/representations/`` (:class:`~skdbal.models.EmbeddingCache`,
memory-mapped), so that every strategy of a grid reads the same embeddings
and a resumed grid does not learn them again.
"""
from __future__ import annotations

import hashlib
import json
import os
import pickle
from contextlib import contextmanager
from pathlib import Path
from typing import Tuple

import numpy as np

__all__ = ["REPRESENTATIONS", "HEADS", "check_representation", "representation_label", "embed_run_data",
           "make_head"]

#: Representation names a run takes (besides ``"file:PATH"``); ``"none"``: the network on the pixels.
REPRESENTATIONS = ("none", "pool", "pca")
#: Heads over the embeddings (``RunSpec.head``).
HEADS = ("mc_dropout", "laplace", "ensemble", "bll", "bll_mfvi", "spread")
#: Principal components of the ``"pca"`` representation.
PCA_COMPONENTS = 50
#: Members of the ``"ensemble"`` head.
ENSEMBLE_MEMBERS = 5


def check_representation(representation: str, head: str) -> None:
    """Raise ValueError naming a representation or head that does not exist.

    Examples
    --------
    >>> from skdbal.experiments.representations import check_representation
    >>> check_representation("pool", "bll")
    >>> check_representation("simclr", "bll")
    Traceback (most recent call last):
        ...
    ValueError: unknown representation 'simclr'; choose from 'none', 'pool', 'pca' or 'file:PATH'
    """
    from ..models import ENCODER_SUFFIXES

    if not isinstance(representation, str) or not (
            representation in REPRESENTATIONS or (representation.startswith("file:") and representation[5:])):
        raise ValueError(f"unknown representation {representation!r}; choose from 'none', 'pool', 'pca' or "
                         "'file:PATH'")
    if head not in HEADS:
        raise ValueError(f"unknown head {head!r}; choose from {', '.join(HEADS)}")
    if representation.startswith("file:"):
        path = Path(representation[5:])
        if not path.is_file():
            raise ValueError(f"representation {representation!r}: {path} is not a file")
        if path.suffix.lower() not in (".npy",) + ENCODER_SUFFIXES:
            raise ValueError(f"representation {representation!r}: give a .npy file of embeddings or an encoder "
                             f"file ({', '.join(ENCODER_SUFFIXES)})")


def representation_label(representation: str) -> str:
    """The representation as it appears in a variant's name: ``"file:enc/simclr.npy"`` is ``"file-simclr"``.

    Examples
    --------
    >>> from skdbal.experiments.representations import representation_label
    >>> representation_label("pool"), representation_label("file:/data/emb.v2.npy")
    ('pool', 'file-emb.v2')
    """
    if representation.startswith("file:"):
        stem = Path(representation[5:]).stem
        return "file-" + "".join(c if c.isalnum() or c in "_." else "-" for c in stem).strip("-.")
    return representation


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@contextmanager
def _blocking_lock(path: Path):
    """An exclusive lock on ``path`` that waits: parallel runs of one seed learn its encoder once."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _encoder_for(spec, X_pool, device: str):
    """The encoder of ``spec``'s representation (``"pool"``, ``"pca"`` or an encoder file), fitted on the
    pool ``X_pool``."""
    from ..models import FunctionEncoder, PoolEncoder, load_encoder

    representation = spec.representation
    if representation == "pool":
        return PoolEncoder(max_epochs=spec.encoder_epochs, random_state=spec.seed, device=device).fit(X_pool)
    if representation == "pca":
        from sklearn.decomposition import PCA

        rows = X_pool.reshape(len(X_pool), -1)
        pca = PCA(n_components=min(PCA_COMPONENTS, *rows.shape), random_state=spec.seed).fit(rows)
        # a fixed projection: the encoder's key records its matrix and mean
        return FunctionEncoder(_project, kw_args={"components": pca.components_.astype(np.float32),
                                                  "mean": pca.mean_.astype(np.float32)}).fit(X_pool)
    return load_encoder(representation[5:], X_pool, device=device)


def _project(X, components, mean):
    """PCA's transform of image rows, flattened: ``(X - mean) @ components.T``."""
    rows = np.asarray(X, dtype=np.float32).reshape(len(X), -1)
    return (rows - mean) @ components.T


def _key(spec, pool) -> dict:
    """What the embeddings of ``spec``'s run depend on: the data set, the seed's pool, the representation."""
    key = {"dataset": spec.preset.dataset, "representation": spec.representation,
           "pool_sha256": _sha256(np.ascontiguousarray(pool, dtype=np.int64).tobytes())}
    if spec.representation == "pool":
        key.update(seed=spec.seed, encoder_epochs=spec.encoder_epochs)
    elif spec.representation == "pca":
        key.update(seed=spec.seed, n_components=PCA_COMPONENTS)
    else:
        digest = hashlib.sha256()
        with open(spec.representation[5:], "rb") as f:
            for chunk in iter(lambda: f.read(1 << 22), b""):
                digest.update(chunk)
        key.update(file_sha256=digest.hexdigest())
    return key


def embed_run_data(spec, X_train, X_test, pool, out_dir, device: str = "cpu") -> Tuple[np.ndarray, np.ndarray]:
    """The embeddings of a run's training and test images, learnt and computed once and cached.

    The encoder of ``spec.representation`` is fitted on ``X_train[pool]``
    (no labels), kept (pickled) with the embeddings of ``X_train`` and
    ``X_test`` under ``out_dir/cache/representations/<folder>``, where the
    folder's name hashes what they depend on (:func:`_key`: the data set,
    the pool's indices, the representation and its settings, the seed where
    the encoder is learnt); a later run of the same seed reads them back.

    Parameters
    ----------
    spec : RunSpec
        A run with ``representation != "none"``.
    X_train, X_test : ndarray
        The data set's training and test images; ``uint8`` pixels are
        divided by 255 before an encoder sees them.
    pool : ndarray of int
        The run's pool, indices into ``X_train``.
    out_dir : path
        The grid's output folder.
    device : str, default="cpu"
        Where a learnt encoder trains and embeds.

    Returns
    -------
    Z_train, Z_test : ndarray
        Row ``i`` embeds ``X_train[i]`` (``X_test[i]``); memory-mapped.

    Examples
    --------
    >>> import tempfile
    >>> import numpy as np
    >>> from skdbal.experiments.presets import get_preset
    >>> from skdbal.experiments.specs import RunSpec
    >>> from skdbal.experiments.representations import embed_run_data
    >>> rng = np.random.default_rng(0)
    >>> X_train = rng.integers(0, 256, size=(80, 8, 8), dtype=np.uint8)
    >>> X_test = rng.integers(0, 256, size=(20, 8, 8), dtype=np.uint8)
    >>> spec = RunSpec(get_preset("gal2017"), "bald", 1, representation="pca", head="bll")
    >>> out = tempfile.mkdtemp()
    >>> Z_train, Z_test = embed_run_data(spec, X_train, X_test, np.arange(60), out)
    >>> Z_train.shape, Z_test.shape
    ((80, 50), (20, 50))
    >>> again, _ = embed_run_data(spec, X_train, X_test, np.arange(60), out)   # read back from the cache
    >>> bool(np.array_equal(again, Z_train))
    True
    """
    from ..models import EmbeddingCache

    # pixels in [0, 1], as the networks see them: MNIST's uint8 pixels would be 255 times the augmentations'
    # scale, and the embeddings 255 times the heads' priors
    X_train, X_test = _unit_pixels(X_train), _unit_pixels(X_test)
    key = _key(spec, pool)
    digest = _sha256(json.dumps(key, sort_keys=True).encode())[:12]
    folder = Path(out_dir) / "cache" / "representations" / (
        f"{spec.preset.dataset}__{representation_label(spec.representation)}__{digest}")
    folder.mkdir(parents=True, exist_ok=True)
    if spec.representation.endswith(".npy") and spec.representation.startswith("file:"):
        return _read_embeddings(spec.representation[5:], len(X_train), len(X_test))
    with _blocking_lock(folder / ".lock"):
        encoder_path = folder / "encoder.pkl"
        if encoder_path.is_file():
            with open(encoder_path, "rb") as f:
                encoder = pickle.load(f)
        else:
            encoder = _encoder_for(spec, X_train[pool], device)
            tmp = folder / ".encoder.pkl.tmp"
            with open(tmp, "wb") as f:
                pickle.dump(encoder, f)
            os.replace(tmp, encoder_path)
            (folder / "key.json").write_text(json.dumps(key, indent=1))
        Z_train = EmbeddingCache(folder / "train.npy").get(encoder, X_train)
        Z_test = EmbeddingCache(folder / "test.npy").get(encoder, X_test)
    return Z_train, Z_test


def _unit_pixels(X) -> np.ndarray:
    """``X`` as float32; ``uint8`` pixels divided by 255."""
    return X.astype(np.float32) / 255.0 if X.dtype == np.uint8 else np.asarray(X, dtype=np.float32)


def _read_embeddings(path, n_train: int, n_test: int):
    """A ``.npy`` file's rows: the training set's then the test set's."""
    Z = np.load(path, mmap_mode="r")
    if Z.ndim != 2 or len(Z) != n_train + n_test:
        raise ValueError(f"{path} holds an array of shape {Z.shape}; a representation file holds one row per "
                         f"training image then one per test image, ({n_train + n_test}, D)")
    return np.asarray(Z[:n_train], dtype=np.float32), np.asarray(Z[n_train:], dtype=np.float32)


def make_head(spec, random_state: int, device: str = "cpu", pool=None):
    """The head ``spec.head`` of one step, seeded by ``random_state``, with the preset's ``n_samples``.

    ``"mc_dropout"``: :class:`~skdbal.models.MCDropoutHead`; ``"laplace"``:
    :class:`~skdbal.LaplaceClassifier` over one; ``"ensemble"``:
    :class:`~skdbal.DeepEnsembleClassifier` of five, ``n_samples / 5`` masks
    each; ``"bll"`` and ``"bll_mfvi"``:
    :class:`~skdbal.models.BayesianLastLayerHead`, analytic or mean-field;
    ``"spread"``: :class:`~skdbal.models.LabelSpreadingHead` over ``pool``
    (the run's pool embeddings). ``device`` is unused: the heads train on the CPU, where they refit in a
    moment.

    Examples
    --------
    >>> from skdbal.experiments import RunSpec, get_preset
    >>> from skdbal.experiments.representations import make_head
    >>> spec = RunSpec(get_preset("gal2017"), "bald", 1, representation="pca", head="bll_mfvi")
    >>> head = make_head(spec, random_state=0)
    >>> type(head).__name__, head.inference, head.n_samples
    ('BayesianLastLayerHead', 'mfvi', 100)
    """
    from ..models import (
        BayesianLastLayerHead,
        DeepEnsembleClassifier,
        LabelSpreadingHead,
        LaplaceClassifier,
        MCDropoutHead,
    )

    classes, n_samples = np.arange(10), spec.preset.n_samples
    if spec.head in ("bll", "bll_mfvi"):
        return BayesianLastLayerHead("mfvi" if spec.head == "bll_mfvi" else "analytic", classes=classes,
                                     n_samples=n_samples, random_state=random_state)
    if spec.head == "spread":
        return LabelSpreadingHead(pool, classes=classes, n_samples=n_samples, random_state=random_state)
    if spec.head == "mc_dropout":
        return MCDropoutHead(classes=classes, n_samples=n_samples, random_state=random_state)
    if spec.head == "laplace":
        return LaplaceClassifier(MCDropoutHead(classes=classes, random_state=random_state), n_samples=n_samples,
                                 random_state=random_state)
    if spec.head == "ensemble":
        return DeepEnsembleClassifier(MCDropoutHead(classes=classes), n_members=ENSEMBLE_MEMBERS,
                                      samples_per_member=max(1, n_samples // ENSEMBLE_MEMBERS),
                                      random_state=random_state)
    raise ValueError(f"unknown head {spec.head!r}; choose from {', '.join(HEADS)}")
