"""The representation ``skdbal label --images`` and ``skdbal labelstudio --images`` train their model on.

A folder of images is labelled in one of three representations (``--representation``, ``--encoder``):

- ``pool`` (the default, :data:`DEFAULT_IMAGE_REPRESENTATION`): a :class:`~skdbal.models.PoolEncoder`
  learnt from the folder's own images, with no label, in a thread of its own while people label;
- an encoder file (``--encoder FILE``): TorchScript or an exported program, read by
  :class:`~skdbal.models.TorchEncoder`, or ONNX, by :class:`~skdbal.models.OnnxEncoder`, with the input
  preparation declared by ``--encoder-size``, ``--encoder-channels``, ``--encoder-mean`` and
  ``--encoder-std``;
- ``pixels``: a Bayesian CNN trained on the thumbnails from scratch at every retrain (the learner of
  :func:`skdbal.labelling.cli.pool_learner`).

With an encoder, the model is a Bayesian head over the embeddings (:func:`representation_learner`) and the
strategy TypiClust, handing off to BALD at ten labels a class. Nobody waits for the encoder: the first batch
is chosen at once by typicality (TypiClust) in a cheap representation (:func:`cheap_representation`: principal
components of the thumbnails' pixels), and the session (:class:`~skdbal.labelling.LabellingSession`'s
``features``) waits for the embeddings only before its first fit. The embeddings, and a learnt encoder, are
kept beside the store (:func:`cache_folder`), so that a restart reads them back; what no longer matches the
folder or the encoder file is computed again, with a line that says why.
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Callable, List, Optional

import numpy as np

from .._validation import seconds, whole_number

__all__ = ["REPRESENTATIONS", "DEFAULT_IMAGE_REPRESENTATION", "HEADS", "DEFAULT_HEAD", "ENCODER_TIME",
           "add_representation_arguments", "representation_of", "check_encoder_file", "representation_learner",
           "cheap_representation", "typical_first_batch", "cache_folder", "PoolFeatures", "representation_line"]

#: ``--representation`` choices for a folder of images.
REPRESENTATIONS = ("pool", "pca", "pixels")
#: The representation of ``--images`` when neither ``--representation`` nor ``--encoder`` is given.
DEFAULT_IMAGE_REPRESENTATION = "pool"
#: Heads over the embeddings (:func:`representation_learner`): the Bayesian last layer, MC dropout, or the
#: labels spread over the pool's neighbour graph.
HEADS = ("bll", "mc_dropout", "spread")
#: The head the session trains over the embeddings.
DEFAULT_HEAD = "bll"
#: ``--encoder-time``'s default: seconds the pool's encoder may learn (the step that crosses it is the last).
ENCODER_TIME = 300.0
#: Passes over the pool the pool's encoder takes at most (:class:`~skdbal.models.PoolEncoder`'s default) ...
ENCODER_EPOCHS = 15
#: ... and at least this many training steps on a small pool, whatever the passes that takes.
ENCODER_MIN_STEPS = 1000
#: Principal components of the cheap representation, ...
CHEAP_COMPONENTS = 50
#: ... of the thumbnails shrunk to at most this many pixels a side.
CHEAP_SIDE = 28
#: The first batch is chosen among a seeded sample of this many items of a larger pool.
TYPICAL_ROWS = 10_000
#: Items a query scores: a seeded subset of the unlabelled items of a larger pool.
HEAD_SUBSAMPLE = 10_000
#: Layout of the learnt encoder's record beside the store.
_FORMAT = 1


def _numbers(text: str) -> List[float]:
    """``--encoder-mean 0.485,0.456,0.406`` as a list of finite numbers."""
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not numbers separated by commas") from None
    if not all(np.isfinite(values)):
        raise argparse.ArgumentTypeError(f"{text!r}: the numbers must be finite")
    return values


def add_representation_arguments(p: argparse.ArgumentParser) -> None:
    """The options that choose what the model of a folder of images learns on.

    Examples
    --------
    >>> import argparse
    >>> from skdbal.labelling._representation import add_representation_arguments
    >>> parser = argparse.ArgumentParser()
    >>> add_representation_arguments(parser)
    >>> args = parser.parse_args(["--encoder", "enc.pt", "--encoder-size", "224", "--encoder-channels", "3",
    ...                           "--encoder-mean", "0.485,0.456,0.406", "--encoder-std", "0.229,0.224,0.225"])
    >>> args.encoder, args.encoder_size, args.encoder_channels, args.encoder_mean
    ('enc.pt', 224, 3, [0.485, 0.456, 0.406])
    >>> parser.parse_args([]).encoder_time
    300.0
    """
    p.add_argument("--representation", choices=REPRESENTATIONS, default=None,
                   help="what the model of --images learns on: 'pool', an encoder learnt from the folder's own "
                   "images (no labels, while people label) with a Bayesian head over its embeddings; 'pca', "
                   "the head over the principal components of the thumbnails' pixels, ready at once; or "
                   "'pixels', a Bayesian CNN on the thumbnails trained from scratch at each retrain (default: "
                   f"{DEFAULT_IMAGE_REPRESENTATION}, or the --encoder file)")
    p.add_argument("--encoder", metavar="FILE", help="a pretrained encoder of --images on disk: a TorchScript "
                   "(.pt, torch.jit.save) or exported (.pt2) file, or ONNX (.onnx, with the onnx extra), whose "
                   "output is the embedding; it sees the images as --image-size and --mode read them, prepared "
                   "as the --encoder-* options declare (default: none)")
    p.add_argument("--encoder-size", type=whole_number(1), metavar="PIXELS", help="side of the square images "
                   "the encoder takes, resized from --image-size (default: --image-size, no resizing)")
    p.add_argument("--encoder-channels", type=int, choices=[1, 3], help="channels the encoder takes: 3 repeats a "
                   "grey image's channel (default: those of --mode)")
    p.add_argument("--encoder-mean", type=_numbers, metavar="M1,M2,...", help="per-channel mean subtracted "
                   "from pixels in [0, 1] before the encoder, with --encoder-std (default: none)")
    p.add_argument("--encoder-std", type=_numbers, metavar="S1,S2,...", help="per-channel standard deviation "
                   "the pixels are divided by, with --encoder-mean (default: none)")
    p.add_argument("--encoder-time", type=seconds, default=ENCODER_TIME, metavar="SECONDS",
                   help=f"at most this long to learn the 'pool' encoder, in the background (default: "
                   f"{ENCODER_TIME:g})")


def representation_of(args) -> Optional[str]:
    """``"pool"``, ``"pca"``, ``"pixels"`` or ``"encoder"`` for ``--images``; None for another pool (``--table``,
    ``--npy``, ``--demo``: today's learners). A misplaced option is a ValueError naming it.

    Examples
    --------
    >>> import argparse
    >>> from skdbal.labelling.cli import add_parser
    >>> from skdbal.labelling._representation import representation_of
    >>> parser = add_parser(argparse.ArgumentParser(prog="skdbal").add_subparsers())
    >>> representation_of(parser.parse_args(["--images", "photos", "--classes", "a,b"]))
    'pool'
    >>> representation_of(parser.parse_args(["--images", "photos", "--classes", "a,b", "--encoder", "e.pt"]))
    'encoder'
    >>> representation_of(parser.parse_args(["--npy", "x.npy", "--classes", "a,b"])) is None
    True
    >>> representation_of(parser.parse_args(["--npy", "x.npy", "--classes", "a,b", "--representation", "pool"]))
    Traceback (most recent call last):
        ...
    ValueError: --representation chooses what the model of a folder of images learns on: it goes with --images
    """
    given = getattr(args, "representation", None)
    encoder = getattr(args, "encoder", None)
    prepared = [f"--{name.replace('_', '-')}" for name in ("encoder_size", "encoder_channels", "encoder_mean",
                                                           "encoder_std") if getattr(args, name, None) is not None]
    if not getattr(args, "images", None):
        for option, value in (("--representation", given), ("--encoder", encoder)):
            if value is not None:
                raise ValueError(f"{option} chooses what the model of a folder of images learns on: it goes "
                                 f"with --images")
        if prepared:
            raise ValueError(f"{prepared[0]} prepares the images for --encoder: it goes with --images and --encoder")
        return None
    if encoder is not None:
        if given is not None:
            raise ValueError(f"--encoder {encoder} is the representation: leave out --representation {given}")
        if (getattr(args, "encoder_mean", None) is None) != (getattr(args, "encoder_std", None) is None):
            raise ValueError("--encoder-mean and --encoder-std go together: give both, or neither")
        return "encoder"
    if prepared:
        raise ValueError(f"{prepared[0]} prepares the images for --encoder: give --encoder FILE")
    return given or DEFAULT_IMAGE_REPRESENTATION


def _preparation(args):
    from ..models import InputPreparation

    size = getattr(args, "encoder_size", None)
    try:
        return InputPreparation(size=None if size is None else (size, size),
                                channels=getattr(args, "encoder_channels", None),
                                mean=getattr(args, "encoder_mean", None), std=getattr(args, "encoder_std", None))
    except ValueError as exc:
        raise ValueError(f"--encoder-mean, --encoder-std: {exc}") from None


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split("\n")[0].split())
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__


def check_encoder_file(args, X):
    """The ``--encoder`` file of ``args`` as a fitted encoder (:func:`skdbal.models.load_encoder`), tried on
    the pool's first images ``X`` as the ``--encoder-*`` options prepare them; a ValueError naming the file,
    in one line, for a file that is not there, not an encoder, or that fails on the images as prepared.

    Examples
    --------
    >>> import argparse, os, tempfile
    >>> import numpy as np
    >>> from skdbal.labelling.cli import add_parser
    >>> from skdbal.labelling._representation import check_encoder_file
    >>> parser = add_parser(argparse.ArgumentParser(prog="skdbal").add_subparsers())
    >>> path = os.path.join(tempfile.mkdtemp(), "notes.pt")
    >>> _ = open(path, "w").write("not a network")
    >>> check_encoder_file(parser.parse_args(["--images", "photos", "--classes", "a,b", "--encoder", path]),
    ...                    np.zeros((2, 8, 8), np.float32))      # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    ValueError: --encoder .../notes.pt: not a TorchScript file (torch.jit.save) nor an exported program (.pt2)...
    """
    from ..models import EncoderInputError, load_encoder

    preparation = _preparation(args)
    try:
        return load_encoder(args.encoder, X, preparation=preparation)
    except EncoderInputError as exc:
        raise ValueError(f"--encoder {exc}; check --image-size, --mode and the --encoder-* options") from None
    except ValueError as exc:
        raise ValueError(f"--encoder {exc}") from None


def representation_learner(classes, *, head: Optional[str] = None, random_state: int = 0):
    """The learner of a session over embeddings: a Bayesian head (``head``, :data:`DEFAULT_HEAD` when None),
    TypiClust handing off to BALD at ten labels a class (:func:`~skdbal.acquisition.cold_start`'s default),
    ``seeding="step"`` (a restart trains the same model again) and :data:`HEAD_SUBSAMPLE` items scored per
    query.

    ``"bll"``: :class:`~skdbal.models.BayesianLastLayerHead` (analytic; a closed-form refit, its variances by
    the evidence); ``"mc_dropout"``: :class:`~skdbal.models.MCDropoutHead` (a hidden layer, trained);
    ``"spread"``: :class:`~skdbal.models.LabelSpreadingHead`, given the pool's embeddings by the session when
    they arrive.

    Examples
    --------
    >>> from skdbal.labelling._representation import representation_learner
    >>> learner = representation_learner(["cat", "dog"])
    >>> type(learner.estimator).__name__, learner.seeding, learner.pool_subsample
    ('BayesianLastLayerHead', 'step', 10000)
    >>> type(representation_learner(["cat", "dog"], head="mc_dropout").estimator).__name__
    'MCDropoutHead'
    >>> type(representation_learner(["cat", "dog"], head="spread").estimator).__name__
    'LabelSpreadingHead'
    """
    from ..acquisition import bald, cold_start
    from ..learner import ActiveLearner
    from ..models import BayesianLastLayerHead, LabelSpreadingHead, MCDropoutHead

    classes = np.asarray(classes)
    head = DEFAULT_HEAD if head is None else head
    if head == "bll":
        model = BayesianLastLayerHead("analytic", classes=classes, random_state=random_state)
    elif head == "mc_dropout":
        model = MCDropoutHead(classes=classes, random_state=random_state)
    elif head == "spread":
        model = LabelSpreadingHead(classes=classes, random_state=random_state)
    else:
        raise ValueError(f"unknown head {head!r}; choose from {', '.join(HEADS)}")
    # typical items first, BALD once the labels reach the hand-off's default (ten a class): at few labels
    # TypiClust chose better than BALD on these heads (benchmarks/bench_representation.py)
    return ActiveLearner(model, cold_start(bald), random_state=random_state, seeding="step", verbose=False,
                         pool_subsample=HEAD_SUBSAMPLE)


def cheap_representation(X, random_state: int = 0) -> np.ndarray:
    """A representation of the images ``X`` ready at once: the first :data:`CHEAP_COMPONENTS` principal
    components of their pixels, the images first shrunk to at most :data:`CHEAP_SIDE` pixels a side.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.labelling._representation import cheap_representation
    >>> cheap_representation(np.random.RandomState(0).rand(30, 8, 8)).shape
    (30, 30)
    >>> cheap_representation(np.random.RandomState(0).rand(80, 3, 64, 64)).shape
    (80, 50)
    """
    from sklearn.decomposition import PCA

    X = np.asarray(X, dtype=np.float32)
    if X.ndim >= 3 and max(X.shape[-2:]) > CHEAP_SIDE:
        from ..models import InputPreparation

        shrink = InputPreparation(size=(CHEAP_SIDE, CHEAP_SIDE))
        X = np.concatenate([shrink(X[s:s + 1024]) for s in range(0, len(X), 1024)])
    rows = X.reshape(len(X), -1)
    k = min(CHEAP_COMPONENTS, *rows.shape)
    return PCA(n_components=k, random_state=random_state).fit_transform(rows).astype(np.float32)


def typical_first_batch(E, n: int, random_state: int = 0) -> np.ndarray:
    """The first batch: ``n`` typical items of the representation ``E`` (TypiClust,
    :func:`skdbal.acquisition.typiclust`, seeded), over a seeded sample of :data:`TYPICAL_ROWS` items of a
    larger pool; in the order TypiClust picks them.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.acquisition import typiclust
    >>> from skdbal.labelling._representation import typical_first_batch
    >>> E = np.random.RandomState(0).rand(60, 4)
    >>> first = typical_first_batch(E, 3)
    >>> first.tolist() == typiclust(None, E, 3, random_state=0)[0].tolist()
    True
    """
    from ..acquisition import typiclust

    E = np.asarray(E)
    rows: np.ndarray = np.arange(len(E))
    if len(E) > TYPICAL_ROWS:
        rows = np.sort(np.random.RandomState([int(random_state), 54]).choice(len(E), TYPICAL_ROWS, replace=False))
    picks, _ = typiclust(None, E[rows], int(n), random_state=random_state)
    return rows[np.asarray(picks, dtype=np.intp)]


def cache_folder(store) -> Path:
    """The folder beside the store where the embeddings (and a learnt encoder) are kept:
    ``<store>.embeddings``.

    Examples
    --------
    >>> from skdbal.labelling._representation import cache_folder
    >>> cache_folder("projects/pets.db").as_posix()
    'projects/pets.db.embeddings'
    """
    store = Path(store)
    return store.with_name(store.name + ".embeddings")


def _say(message: str) -> None:
    print(f"skdbal: {message}", flush=True)


class PoolFeatures:
    """The embeddings of a folder's images, learnt or loaded in a thread of their own, cached beside the store.

    :meth:`start` starts the thread; :attr:`future` holds the embeddings (memory-mapped) once they are
    there, for :class:`~skdbal.labelling.LabellingSession`'s ``features``.

    ``"pool"``: a :class:`~skdbal.models.PoolEncoder` (seeded by ``random_state``, at most ``max_time``
    seconds, :data:`ENCODER_EPOCHS` passes or :data:`ENCODER_MIN_STEPS` steps on a small pool) is learnt
    from ``X`` and kept in ``encoder.pkl`` in :func:`cache_folder`, with ``encoder.json``, the pool's
    content and the settings it was learnt from; a restart reads it back when both match, else learns it
    again (the folder's images changed). ``encoder``: the fitted encoder of an ``--encoder`` file. Either
    way its embeddings of ``X`` go through :class:`~skdbal.models.EmbeddingCache` (``embeddings.npy``):
    read back when they belong to this encoder and pool, computed again when they do not (a changed
    folder or encoder file: they are a cache, computed from what is on disk, and the labels do not depend
    on them), with a line that says so.

    Examples
    --------
    >>> import tempfile
    >>> import numpy as np
    >>> from skdbal.models import FunctionEncoder
    >>> from skdbal.labelling._representation import PoolFeatures
    >>> X = np.random.RandomState(0).rand(20, 8, 8).astype(np.float32)
    >>> encoder = FunctionEncoder(np.mean, kw_args={"axis": (1, 2)}).fit(X)
    >>> features = PoolFeatures(X, tempfile.mkdtemp(), encoder=encoder, say=lambda m: None).start()
    >>> features.future.result(timeout=30).shape
    (20, 1)
    """

    def __init__(self, X, folder, *, encoder=None, max_time: float = ENCODER_TIME, random_state: int = 0,
                 say: Callable[[str], None] = _say, future: Optional[Future] = None):
        self.X, self.folder, self.encoder = X, Path(folder), encoder
        self.max_time, self.random_state, self.say = float(max_time), int(random_state), say
        #: The embeddings, once there (a new future unless one is given, for a session made before).
        self.future: Future = Future() if future is None else future
        #: Seconds the encoder took to learn (None: read back, or brought), and to embed the pool.
        self.learn_time: Optional[float] = None
        self.embed_time: Optional[float] = None

    def start(self) -> "PoolFeatures":
        """Start learning or loading, in a daemon thread (a stopped server does not wait for it)."""
        self.future.set_running_or_notify_cancel()
        threading.Thread(target=self._run, name="skdbal-representation", daemon=True).start()
        return self

    def _run(self) -> None:
        try:
            self.future.set_result(self._embeddings())
        except BaseException as exc:  # noqa: BLE001 - the session reports it
            self.say(f"the representation failed: {_first_line(exc)}")
            self.future.set_exception(exc)

    def _settings(self, n: int) -> dict:
        steps_per_epoch = max(1, n // min(128, max(n, 1)))    # PoolEncoder's batches of 128
        epochs = max(float(ENCODER_EPOCHS), float(np.ceil(ENCODER_MIN_STEPS / steps_per_epoch)))
        return {"method": "simclr", "max_epochs": epochs, "random_state": self.random_state}

    def _pool_encoder(self):
        from ..models import PoolEncoder, content_sha256

        record_path, pickled = self.folder / "encoder.json", self.folder / "encoder.pkl"
        record = {"format": _FORMAT, "pool_sha256": content_sha256(self.X), "settings": self._settings(len(self.X))}
        if record_path.is_file() and pickled.is_file():
            try:
                kept = json.loads(record_path.read_text())
            except ValueError:
                kept = None
            if kept == record:
                with open(pickled, "rb") as f:
                    return pickle.load(f)
            self.say(f"the encoder in {self.folder} was learnt from other images or settings: learning it again")
        start = time.perf_counter()
        encoder = PoolEncoder(**record["settings"], max_time=self.max_time).fit(self.X)
        self.learn_time = time.perf_counter() - start
        self.say(f"the encoder learnt from the pool in {self.learn_time:.1f} s ({encoder.n_epochs_:.1f} passes)")
        self.folder.mkdir(parents=True, exist_ok=True)
        for path, data in ((pickled, pickle.dumps(encoder)), (record_path, json.dumps(record).encode())):
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)   # the record last: an encoder without its record is learnt again
        return encoder

    def _embeddings(self):
        from ..models import EmbeddingCache, StaleEmbeddingsError

        encoder = self._pool_encoder() if self.encoder is None else self.encoder
        cache = EmbeddingCache(self.folder / "embeddings.npy")
        start = time.perf_counter()
        try:
            Z = cache.get(encoder, self.X)
        except StaleEmbeddingsError as exc:
            why = "; ".join(exc.differences) or str(exc)
            self.say(f"the embeddings in {cache.path} belong to another encoder or folder ({why[:200]}): "
                     "computing them again")
            Z = cache.get(encoder, self.X, recompute=True)
        self.embed_time = time.perf_counter() - start
        return Z


def representation_line(args, store) -> Optional[str]:
    """What the model of ``args`` learns on, in a start line; None for a pool that is not a folder of images.

    Examples
    --------
    >>> import argparse
    >>> from skdbal.labelling.cli import add_parser
    >>> from skdbal.labelling._representation import representation_line
    >>> parser = add_parser(argparse.ArgumentParser(prog="skdbal").add_subparsers())
    >>> print(representation_line(parser.parse_args(["--images", "photos", "--classes", "a,b"]), "p.db"))
    the model: a Bayesian head over an encoder learnt from the images (no labels; at most 300 s, while the first \
batch, chosen by typicality, is labelled), typical items then BALD; kept in p.db.embeddings
    """
    kind = representation_of(args)
    if kind is None:
        return None
    if kind == "pixels":
        return "the model: a Bayesian CNN on the pixels, trained from scratch at each retrain, BALD"
    where = cache_folder(store).as_posix()
    if kind == "pca":
        return (f"the model: a Bayesian head over the first {CHEAP_COMPONENTS} principal components of the "
                "thumbnails' pixels, typical items then BALD")
    if kind == "pool":
        return (f"the model: a Bayesian head over an encoder learnt from the images (no labels; at most "
                f"{args.encoder_time:g} s, while the first batch, chosen by typicality, is labelled), typical items "
                "then BALD; "
                f"kept in {where}")
    line = (f"the model: a Bayesian head over {args.encoder}'s embeddings (computed while the first batch, chosen "
            f"by typicality, is labelled), typical items then BALD; kept in {where}")
    if args.encoder_size is not None and args.image_size < args.encoder_size:
        line += (f"; the images are read at {args.image_size} pixels and enlarged to {args.encoder_size}: give "
                 f"--image-size {args.encoder_size}")
    return line
