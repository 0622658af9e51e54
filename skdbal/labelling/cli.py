"""``skdbal label``: serve a labelling page for a pool (or the digits demo) on this machine."""
from __future__ import annotations

import argparse
import signal
import socket
import sqlite3
import sys
import threading
from pathlib import Path
from typing import List

import numpy as np

from .._validation import is_loopback, number_in, port_number, seconds, whole_number
from ._representation import representation_line

__all__ = ["add_parser", "add_pool_arguments", "build", "demo_initial", "demo_learner", "links", "make_session", "run",
           "representation_line", "set_torch_threads", "DEMO_INITIAL", "pool_learner", "RETRAIN_DRAWS"]

_DESCRIPTION = """\
Serve a page on this machine where people label a pool (a folder of images, a table, an array, or
scikit-learn's digits with --demo), the model choosing what comes next and retraining as labels
arrive. Every label is kept in a SQLite store as soon as it is acknowledged; run the same command
again to resume.

example:
  skdbal label --images photos/ --classes cat,dog --store pets.db
  skdbal label --demo digits          # the whole loop, no data to bring"""

#: Size of the demo's first batch: 20 labels, as the quickstart's initial set (2 per class).
DEMO_INITIAL = 20


def add_parser(sub) -> argparse.ArgumentParser:
    """Add the ``label`` command to the ``skdbal`` command line's subparsers.

    Examples
    --------
    >>> import argparse
    >>> from skdbal.labelling.cli import add_parser
    >>> sub = argparse.ArgumentParser(prog="skdbal").add_subparsers()
    >>> parser = add_parser(sub)
    >>> args = parser.parse_args(["--demo", "digits"])
    >>> args.host, args.port, args.batch_size
    ('127.0.0.1', 8765, 10)
    >>> args = parser.parse_args(["--images", "photos", "--classes", "cat,dog", "--store", "project.db"])
    >>> args.images, args.classes, args.image_size, args.mode, args.second_looks, args.torch_threads
    ('photos', 'cat,dog', 28, 'L', 'dynamic', 1)
    >>> parser.parse_args(["--demo", "digits", "--second-looks", "0.05"]).second_looks
    0.05
    >>> parser.parse_args(["--demo", "digits", "--second-looks", "off"]).second_looks is None
    True
    >>> parser.parse_args(["--demo", "digits", "--annotators", "alice,bob"]).annotators
    ['alice', 'bob']
    >>> args = parser.parse_args(["--demo", "digits", "--lease-timeout", "90", "--reopen-skips"])
    >>> args.lease_timeout, args.reopen_skips
    (90.0, True)
    """
    p = sub.add_parser("label", help="label a pool in the browser, the model choosing what comes next",
                       description=_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.error = _one_line_error(p)
    add_pool_arguments(p)
    p.add_argument("--host", default="127.0.0.1", help="interface to serve on (default: 127.0.0.1, this machine "
                   "only; any other needs the token printed at start on every request)")
    p.add_argument("--port", type=port_number, default=8765, help="TCP port to serve on, checked free before anything "
                   "else starts (default: 8765; 0 takes a free one)")
    p.add_argument("--annotators", type=_annotator_names, metavar="NAMES",
                   help="comma-separated names, each given a link with a token of their own (printed once at "
                   "start): the server knows who labels from the token, an annotator undoes only their own "
                   "labels and labels only their own items (default: none, one shared token and the name typed in "
                   "the page)")
    p.add_argument("--keys", type=_keys, metavar="K1,K2,...", help="comma-separated keys, one character per "
                   "class in --classes' order (default: classes 0-9 their own digit, others 1-9 then 0)")
    p.add_argument("--lease-timeout", type=seconds, default=300.0, metavar="SECONDS",
                   help="an item handed out stays its annotator's this long after their last label, skip or "
                   "undo (asking for items does not count), then goes back to the batch (default: 300)")
    p.add_argument("--reopen-skips", action="store_true", help="offer every item skipped so far again, then "
                   "serve (skipped items are also offered again once nothing else is left to label)")
    return p


def _one_line_error(parser: argparse.ArgumentParser):
    """``parser.error`` as one line on stderr (``skdbal label: error: ...``, exit status 2), without
    the usage, which ``--help`` shows."""
    def error(message):
        parser.exit(2, f"{parser.prog}: error: {' '.join(str(message).split())}\n")
    return error


def _keys(text: str) -> List[str]:
    """``--keys a,b,c`` as a list; each one printable character (their count is checked with the classes)."""
    keys = text.split(",")
    bad = [k for k in keys if len(k) != 1 or not k.isprintable() or k.isspace()]
    if bad:
        raise argparse.ArgumentTypeError(f"each key must be one printable character other than a space; got {bad[0]!r}")
    return keys


def add_pool_arguments(p: argparse.ArgumentParser) -> None:
    """The pool, store and session options of ``skdbal label`` (shared by ``skdbal labelstudio``).

    Examples
    --------
    >>> import argparse
    >>> from skdbal.labelling.cli import add_pool_arguments
    >>> parser = argparse.ArgumentParser()
    >>> add_pool_arguments(parser)
    >>> args = parser.parse_args(["--table", "items.csv", "--id-column", "name", "--classes", "a,b"])
    >>> args.table, args.id_column, args.batch_size, args.second_look_budget, args.torch_threads
    ('items.csv', 'name', 10, 0.1, 1)
    """
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--demo", choices=["digits"], help="scikit-learn's digits: the whole loop, no data to bring "
                     "(one of --demo, --images, --table and --npy is required)")
    src.add_argument("--images", metavar="DIR", help="a folder of images (png, jpg, bmp, gif, tif, webp; "
                     "recursive; each image's key is its path relative to DIR, /-separated: cats/tom.jpg)")
    src.add_argument("--table", metavar="FILE", help="a .csv or .parquet table of numeric features")
    src.add_argument("--npy", metavar="FILE", help="a .npy array of images (N, H, W) or rows (N, D), or a .npz "
                     "with an array X")
    p.add_argument("--classes", help="comma-separated class names (required but with --demo, whose classes are "
                   "0-9)")
    p.add_argument("--id-column", help="the table's column of item names: the keys, not a feature (default: "
                   "none, the keys are the row numbers)")
    columns = p.add_mutually_exclusive_group()
    columns.add_argument("--columns", type=_names, metavar="A,B,...", help="the table's feature columns, "
                         "comma-separated (default: all but --id-column)")
    columns.add_argument("--drop-columns", type=_names, metavar="A,B,...", help="the table's columns that are "
                         "not features, comma-separated: text columns, say (default: none)")
    p.add_argument("--image-size", type=whole_number(1), default=28, help="side of the square images the model "
                   "sees, with --images (default: 28)")
    p.add_argument("--mode", choices=["L", "RGB"], default="L", help="images as grey-scale (L) or colour (RGB) "
                   "features, with --images (default: L)")
    p.add_argument("--store", metavar="FILE", help="the SQLite store; resumed if it exists, refused if it is "
                   "not a store of this pool and classes (default: skdbal-<name>.db in this folder, <name> "
                   "the folder's or file's name, or digits)")
    p.add_argument("--batch-size", type=whole_number(1), default=10, help="items the model chooses at a time "
                   "(default: 10)")
    p.add_argument("--retrain-after", type=whole_number(1), default=None, help="new labels before a retrain "
                   "(default: the batch size)")
    p.add_argument("--second-looks", type=_second_looks, default="dynamic", metavar="RULE",
                   help="flag a label the model finds unlikely for another annotator's look: 'dynamic' (the "
                   "noise filter's Bayes threshold, from the noise rate it estimates), 'quantile', a "
                   "threshold in (0, 1), or 'off' (default: dynamic)")
    p.add_argument("--second-look-budget", type=number_in("(0, 1]", "a share"), default=0.1, metavar="SHARE",
                   help="at most this share of the labels is flagged, the least likely first (default: 0.1)")
    p.add_argument("--test", metavar="PATH", help="a labelled test set, whose accuracy is shown after each retrain: "
                   "with --images a folder with a subfolder per class (cat/tom.jpg), with --table a table of the "
                   "same columns and a column 'label', with --npy a .npz with arrays X and y (default: none)")
    p.add_argument("--audit-share", type=number_in("(0, 1)", "an audit share"), default=0.0, metavar="SHARE",
                   help="this share of the labels asked checks the model: drawn at random from a fifth of the "
                   "pool set aside when the store is made, never trained on; the page's estimate is then theirs, "
                   "with its interval (default: none)")
    p.add_argument("--label-budget", type=whole_number(1), default=None, metavar="N", help="a number of labels "
                   "to buy: a stopping rule says when it is spent, as advice (default: no budget)")
    p.add_argument("--torch-threads", type=whole_number(1), default=1, metavar="N",
                   help="threads torch trains and predicts with (default: 1: on a busy machine a retrain took "
                   "0.16-1.64 s on one thread, 0.22-12.88 s on two)")
    from ._representation import add_representation_arguments

    add_representation_arguments(p)


def _names(text: str) -> List[str]:
    """``--columns a,b,c`` as a list of names, none empty."""
    names = [n.strip() for n in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"an empty column name in {text!r}: give names separated by commas")
    return names


def _second_looks(text: str):
    if text in ("dynamic", "quantile"):
        return text
    if text == "off":
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not 'dynamic', 'quantile', 'off' or a number") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"a threshold must lie in (0, 1); got {text}")
    return value


def _annotator_names(text: str):
    from ._tokens import parse_names

    try:
        return parse_names(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _demo():
    from ..experiments.data import load_digits_images

    X_pool, X_test, _, y_test = load_digits_images()   # the quickstart's pool and test set
    return X_pool, X_test, y_test, list(range(10))


def demo_learner(random_state: int = 0):
    """The learner of ``skdbal label --demo digits``: the quickstart's.

    The quickstart's Bayesian CNN for 8×8 digits
    (:func:`skdbal.experiments.quickstart.digits_classifier`: 3×3 kernels,
    100 epochs in batches of 32, T=20 dropout samples for the query,
    weight-scaled predictions), BALD, and ``seeding="step"`` so that a
    restarted session trains the same models again. It reaches 90% test
    accuracy by 100 labels (``docs/results/demo_learning``).

    Examples
    --------
    >>> from skdbal.labelling.cli import demo_learner
    >>> learner = demo_learner(random_state=1)
    >>> learner.estimator.max_epochs, learner.estimator.predict_method, learner.seeding, learner.random_state
    (100, 'deterministic', 'step', 1)
    """
    from ..acquisition import bald
    from ..experiments.quickstart import digits_classifier
    from ..learner import ActiveLearner

    return ActiveLearner(digits_classifier(random_state=random_state), bald, random_state=random_state,
                         seeding="step", verbose=False)


def demo_initial(X, random_state: int = 0) -> np.ndarray:
    """The demo's first batch: ``DEMO_INITIAL`` (20) items that cover the pool, those nearest the
    centroids of k-means over the pixels (:func:`skdbal.initial.kmeans_representative`, seeded); no
    label is needed to choose them.

    Examples
    --------
    >>> from skdbal.labelling.cli import _demo, demo_initial
    >>> X_pool, _, _, _ = _demo()
    >>> first = demo_initial(X_pool, random_state=0)
    >>> len(first), len(set(first.tolist()))
    (20, 20)
    """
    from ..initial import kmeans_representative

    X = np.asarray(X)
    return kmeans_representative(X.reshape(len(X), -1), n_clusters=DEMO_INITIAL, random_state=random_state)


#: Labelled items drawn (with repeats) in each retrain of the network :func:`pool_learner` builds: 100
#: gradient steps in batches of 32, whatever the number of labels up to 3,200 (one epoch over them
#: beyond). 50 epochs over the labelled set before took 50 steps at 10 labels and 350 at 200, and
#: the retrain's time grew with them (``docs/results/bench_labelling_retrain``).
RETRAIN_DRAWS = 3200
#: Items scored per query on a pool of one's own: a seeded random subset of the unlabelled items, as Gal et
#: al. score 2,000 of MNIST's pool, so that a query's time does not grow with the pool.
POOL_SUBSAMPLE = 1000


def pool_learner(classes, X, *, images: bool, random_state: int = 0):
    """The learner ``skdbal label`` builds for a pool of one's own (not ``--demo``).

    A Bayesian CNN for images (3×3 kernels below 16 pixels a side), else an MLP, with MC dropout
    (T=20 for the query), BALD, and ``seeding="step"``. Each retrain trains a fresh network on one
    epoch of :data:`RETRAIN_DRAWS` draws of the labelled items in batches of 32
    (:class:`skdbal.models.FixedLengthLoader`): the same 100 gradient steps at 10 labels as at 200, so
    that a retrain's time does not grow with the labels (up to 3,200 of them, beyond which it is one
    epoch over them). Each query scores a seeded random subset of :data:`POOL_SUBSAMPLE` unlabelled
    items (all of them in a smaller pool), so that its time does not grow with the pool.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.labelling.cli import pool_learner
    >>> learner = pool_learner(["cat", "dog"], np.zeros((5, 28, 28), np.float32), images=True)
    >>> net = learner.estimator
    >>> net.max_epochs, net.batch_size, net.get_params()["iterator_train__n_samples"], learner.seeding
    (1, 32, 3200, 'step')
    >>> learner.pool_subsample
    1000
    """
    from ..acquisition import bald
    from ..learner import ActiveLearner
    from ..models import MLP, FixedLengthLoader, MCDropoutClassifier

    net = MCDropoutClassifier(classes=np.array(classes), max_epochs=1, batch_size=32, n_samples=20,
                              iterator_train=FixedLengthLoader, iterator_train__n_samples=RETRAIN_DRAWS,
                              random_state=random_state,
                              **({"module__kernel_size": 3} if images and min(X.shape[-2:]) < 16 else {}),
                              **({} if images else {"module": MLP}))
    return ActiveLearner(net, bald, random_state=random_state, seeding="step", verbose=False,
                         pool_subsample=POOL_SUBSAMPLE)


def make_session(args):
    """The session, the pool and the store's path that ``args`` name (the pool options of ``skdbal label``,
    shared by ``skdbal labelstudio``).

    A folder of images is labelled in the representation ``--representation`` or ``--encoder`` names
    (:mod:`skdbal.labelling._representation`): with ``pool`` or an encoder file, the session's model is a
    Bayesian head over the embeddings, which a thread learns or computes from the moment the session is
    made (the session's ``representation``, a :class:`~skdbal.labelling._representation.PoolFeatures`),
    and the first batch is typical in the thumbnails' principal components, ready at once.

    Examples
    --------
    >>> import argparse, os, tempfile
    >>> from skdbal.labelling.cli import add_parser, make_session
    >>> sub = argparse.ArgumentParser(prog="skdbal").add_subparsers()
    >>> args = add_parser(sub).parse_args(["--demo", "digits", "--store", os.path.join(tempfile.mkdtemp(), "d.db")])
    >>> session, pool, store = make_session(args)
    >>> pool.kind, len(pool), session.batch_size
    ('images', 1297, 10)
    """
    from concurrent.futures import Future

    from ._representation import (
        PoolFeatures,
        cache_folder,
        cheap_representation,
        check_encoder_file,
        representation_learner,
        representation_of,
        typical_first_batch,
    )
    from .pools import load_pool
    from .session import LabellingSession

    X_test = y_test = None
    for option in ("columns", "drop_columns"):
        if getattr(args, option, None) is not None and not args.table:
            raise ValueError(f"--{option.replace('_', '-')} chooses a table's columns: it goes with --table")
    if args.demo:
        X, X_test, y_test, classes = _demo()
        pool = load_pool(X)
    else:
        if not args.classes:
            raise ValueError("--classes is required with --images, --table and --npy")
        classes = [c.strip() for c in args.classes.split(",") if c.strip()]
        repeated = sorted({c for c in classes if classes.count(c) > 1})
        if repeated:
            raise ValueError(f"--classes names {', '.join(repeated)} more than once")
        if len(classes) < 2:
            raise ValueError(f"--classes must name at least two classes (a model learns from two or more); "
                             f"got {args.classes!r}")
        if args.images:
            pool = load_pool(args.images, image_size=args.image_size, mode=args.mode)
        elif args.table:
            if Path(args.table).suffix.lower() not in (".csv", ".parquet", ".pq"):
                raise ValueError(f"--table reads .csv or .parquet files; got {args.table!r}")
            pool = _load_table(args)
        else:
            if Path(args.npy).suffix.lower() not in (".npy", ".npz"):
                raise ValueError(f"--npy reads .npy or .npz files; got {args.npy!r}")
            pool = load_pool(args.npy)
    _check_batch_size(args, len(pool))
    if getattr(args, "test", None) is not None:   # a bad test set is refused before the store is made
        X_test, y_test = _test_set(args, pool, classes)
    X = pool.X
    images = pool.kind == "images"
    initial = None   # the session's own: a first batch that covers the pool
    kind = representation_of(args)
    features = encoder = None
    if args.demo:
        learner, initial = demo_learner(0), demo_initial(X, 0)
    elif kind in (None, "pixels"):
        learner = pool_learner(classes, X, images=images)
    else:   # a head over embeddings; the first batch typical in a representation ready at once
        if kind == "encoder":
            encoder = check_encoder_file(args, X)   # a bad file is refused here, before the store is made
        learner = representation_learner(classes)
        X_cheap = cheap_representation(X)
        initial = typical_first_batch(X_cheap, args.batch_size)
        X, features = X_cheap, Future()
        if kind == "pca":
            features.set_result(X_cheap)
    store = store_path(args)
    if getattr(args, "keys", None) is not None:
        from ._page import class_keys

        try:
            class_keys(classes, args.keys)   # keys that cannot work are refused before the store is made
        except ValueError as exc:
            raise ValueError(f"--keys: {exc}") from None
    session = LabellingSession(learner, X, classes, store, keys=pool.keys, batch_size=args.batch_size,
                               retrain_after=args.retrain_after, X_test=X_test, y_test=y_test, initial=initial,
                               second_looks=args.second_looks, second_look_budget=args.second_look_budget,
                               lease_timeout=getattr(args, "lease_timeout", 300.0), features=features,
                               label_budget=getattr(args, "label_budget", None),
                               audit_share=getattr(args, "audit_share", 0.0),
                               item_noun="images" if images else "rows")
    if kind in ("pool", "encoder"):   # learnt or embedded in a thread of its own, once the store is taken
        session.representation = PoolFeatures(pool.X, cache_folder(store), encoder=encoder,
                                              max_time=args.encoder_time, future=features).start()
    return session, pool, store


def _test_set(args, pool, classes):
    """``--test``'s labelled items, read in the pool's format (:func:`skdbal.labelling.held_out.load_test_set`)."""
    from ._representation import representation_of
    from .held_out import load_test_set

    if args.demo:
        raise ValueError("--test goes with --images, --table or --npy: the digits demo has its own test set")
    kind = representation_of(args)
    if kind not in (None, "pixels"):
        raise ValueError(f"--test {args.test}: with --representation {kind if kind != 'encoder' else 'from --encoder'}"
                         " the model sees embeddings of the pool only; give --representation pixels to test it")
    source = "images" if args.images else "table" if args.table else "npy"
    return load_test_set(args.test, pool, classes, source=source, image_size=args.image_size, mode=args.mode)


def store_path(args) -> str:
    """The store that ``args`` name: ``--store``, else ``skdbal-<name>.db`` in this folder, ``<name>`` the
    folder's, table's or array's name (``digits`` for the demo). Known before the pool is read: the
    store is locked (:class:`~skdbal.labelling.lock.StoreLock`) before anything reads it.

    Examples
    --------
    >>> import argparse
    >>> from skdbal.labelling.cli import add_parser, store_path
    >>> parser = add_parser(argparse.ArgumentParser(prog="skdbal").add_subparsers())
    >>> store_path(parser.parse_args(["--table", "data/iris.csv", "--classes", "a,b"]))
    'skdbal-iris.db'
    >>> store_path(parser.parse_args(["--demo", "digits", "--store", "mine.db"]))
    'mine.db'
    """
    if args.store:
        return args.store
    if args.demo:
        name = "digits"
    elif args.images:
        name = Path(args.images).resolve().name
    else:
        name = Path(args.table or args.npy).stem
    return f"skdbal-{name}.db"


def _load_table(args):
    """The pool of ``--table``, its columns refused in the command's words (``--id-column``,
    ``--columns``, ``--drop-columns``)."""
    from .pools import ColumnsError, load_pool

    try:
        return load_pool(args.table, id_column=args.id_column, columns=getattr(args, "columns", None),
                         drop_columns=getattr(args, "drop_columns", None))
    except ColumnsError as exc:
        listed = ", ".join(exc.columns)
        where = f"--table {args.table}"
        if exc.problem == "id":
            raise ValueError(f"--id-column {args.id_column}: {where} has no such column; its columns are "
                             f"{', '.join(exc.names)}") from None
        if exc.problem == "repeated ids":
            raise ValueError(f"--id-column {args.id_column}: the item names repeat; they must be distinct") from None
        if exc.problem == "unknown":
            raise ValueError(f"{where} has no column {listed}; its columns are {', '.join(exc.names)}") from None
        if exc.problem == "text":
            hint = ("name the item names' column with --id-column, " if args.id_column is None else "")
            raise ValueError(f"{where}: the columns {listed} are not numbers, and the model's features must be; "
                             f"{hint}leave them out with --drop-columns {','.join(exc.columns)}, or choose the "
                             f"features with --columns") from None
        if exc.problem == "missing":
            raise ValueError(f"{where}: the columns {listed} have missing values; fill them, or leave them out "
                             f"with --drop-columns {','.join(exc.columns)}") from None
        raise ValueError(f"{where} has no feature column or no row") from None


def _check_batch_size(args, n: int) -> None:
    """Refuse a pool too small for ``--batch-size`` (the first batch would leave the model nothing to
    choose), saying how many items it holds and how many it needs."""
    size = args.batch_size
    if size < n:
        return
    if args.demo:
        what, noun = "the digits demo", "items"
    elif args.images:
        what, noun = f"the folder {args.images}", "images"
    elif args.table:
        what, noun = f"the table {args.table}", "rows"
    else:
        what, noun = f"the array {args.npy}", "items"
    held = f"{n} {noun[:-1] if n == 1 else noun}"
    if n < 2:
        raise ValueError(f"{what} holds {held}, too few to label: the model chooses among what the first batch "
                         f"(--batch-size {size}) leaves, so it needs at least {size + 1} {noun}")
    raise ValueError(f"{what} holds {held}, too few for --batch-size {size}: the first batch would leave the "
                     f"model nothing to choose; it needs at least {size + 1} {noun}, or give --batch-size "
                     f"{n - 1} or less")


def build(args):
    """The session, the application, whether it serves loopback only, and the store of ``args``.

    Examples
    --------
    >>> import argparse, os, tempfile
    >>> from skdbal.labelling.cli import add_parser, build
    >>> sub = argparse.ArgumentParser(prog="skdbal").add_subparsers()
    >>> store = os.path.join(tempfile.mkdtemp(), "demo.db")
    >>> parser = add_parser(sub)
    >>> args = parser.parse_args(["--demo", "digits", "--store", store])
    >>> session, app, loopback, path = build(args)       # what run() serves, not started
    >>> len(session.keys), session.classes[:3], loopback
    (1297, [0, 1, 2], True)

    A folder of images (the keys are the file names):

    >>> from PIL import Image
    >>> folder = tempfile.mkdtemp()
    >>> Image.new("L", (20, 20), 0).save(os.path.join(folder, "cat1.png"))
    >>> Image.new("L", (20, 20), 255).save(os.path.join(folder, "dog1.jpg"))
    >>> _ = open(os.path.join(folder, "notes.txt"), "w").write("not an image")      # ignored
    >>> args = parser.parse_args(["--images", folder, "--classes", "cat,dog", "--batch-size", "1",
    ...                           "--store", os.path.join(folder, "project.db"), "--representation", "pixels"])
    >>> session, app, loopback, path = build(args)
    >>> session.keys, session.X.shape, session.classes
    (['cat1.png', 'dog1.jpg'], (2, 28, 28), ['cat', 'dog'])

    A token per annotator (their links: :func:`links`):

    >>> args = parser.parse_args(["--demo", "digits", "--store", store, "--annotators", "alice,bob"])
    >>> session, app, loopback, path = build(args)
    >>> sorted(app.state.annotators), app.state.token
    (['alice', 'bob'], None)
    """
    from ._tokens import make_tokens
    from .app import make_app

    session, pool, store = make_session(args)
    loopback = is_loopback(args.host)
    names = getattr(args, "annotators", None)
    try:
        app = make_app(session, require_token_everywhere=not loopback, pool=pool,
                       annotators=make_tokens(names) if names else None, keys=getattr(args, "keys", None))
    except BaseException:
        session.store.close()   # checkpointed: nothing left beside the store
        raise
    return session, app, loopback, store


def set_torch_threads(n: int) -> int:
    """Set the threads torch computes with (``torch.set_num_threads``), before a model is built; ``n``.

    ``skdbal label`` and ``skdbal labelstudio`` call it with ``--torch-threads`` (1 by default): a
    session's retrains are small, and on a machine shared with other work one thread was both faster
    and steadier (0.16-1.64 s a retrain, against 0.22-12.88 s on two threads).

    Examples
    --------
    >>> import torch
    >>> from skdbal.labelling.cli import set_torch_threads
    >>> before = torch.get_num_threads()
    >>> set_torch_threads(1), torch.get_num_threads()
    (1, 1)
    >>> _ = set_torch_threads(before)
    """
    import torch

    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"torch threads must be a whole number of at least 1; got {n!r}")
    torch.set_num_threads(n)
    return n


def check_source(args) -> None:
    """Raise ValueError, naming the option, if the folder or file that ``args`` name is not there.

    Examples
    --------
    >>> import argparse
    >>> from skdbal.labelling.cli import add_parser, check_source
    >>> parser = add_parser(argparse.ArgumentParser(prog="skdbal").add_subparsers())
    >>> check_source(parser.parse_args(["--images", "no/such/folder", "--classes", "a,b"]))
    Traceback (most recent call last):
        ...
    ValueError: --images no/such/folder: no such folder
    """
    from ._representation import representation_of

    if representation_of(args) == "encoder" and not Path(args.encoder).is_file():
        raise ValueError(f"--encoder {args.encoder}: " + ("not a file" if Path(args.encoder).exists()
                                                          else "no such file"))
    if getattr(args, "images", None) is not None and not Path(args.images).is_dir():
        raise ValueError(f"--images {args.images}: " + ("not a folder" if Path(args.images).exists()
                                                         else "no such folder"))
    for option in ("table", "npy", "test"):
        value = getattr(args, option, None)
        if option == "test" and value is not None and Path(value).exists():
            continue   # a folder or a file, checked when it is read
        if value is not None and not Path(value).is_file():
            raise ValueError(f"--{option} {value}: " + ("not a file" if Path(value).exists() else "no such file"))


class _Terminated(Exception):
    """SIGTERM arrived: the server has stopped, and the session stops and closes its store."""


def _on_sigterm(signum, frame):
    raise _Terminated()


def _listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` and listening, for uvicorn to serve on; OSError if it is taken."""
    from .serving import BACKLOG

    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                         flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # as uvicorn: not a port in use, though
        sock.bind(address)
        sock.listen(BACKLOG)
    except BaseException:
        sock.close()
        raise
    return sock


def _fail(message: str) -> int:
    print(f"skdbal label: error: {message}", file=sys.stderr)
    return 2


def run(args) -> int:
    """Serve until interrupted (Ctrl-C) or terminated (SIGTERM); every label is in the store as soon
    as it is acknowledged, and the store is closed (checkpointed into its ``.db`` file) at the end.

    Before anything is printed or written it checks the pool's folder or file, then binds the port
    (a port in use is refused, before the store is made); then it sets torch's threads
    (:func:`set_torch_threads`), serves what :func:`build` makes with uvicorn on that socket, and
    prints the address (and, off loopback, the token, once). A bad pool, store or setting is one
    line on stderr and exit status 2.

    Examples
    --------
    >>> import argparse, contextlib, io, os, socket, tempfile
    >>> from skdbal.labelling.cli import add_parser, run
    >>> parser = add_parser(argparse.ArgumentParser(prog="skdbal").add_subparsers())
    >>> parser.parse_args(["--npy", "x.npy", "--host", "0.0.0.0"]).host   # run() would print a token
    '0.0.0.0'
    >>> err = io.StringIO()
    >>> with contextlib.redirect_stderr(err):
    ...     run(parser.parse_args(["--images", "no/such/folder", "--classes", "cat,dog"]))
    2
    >>> print(err.getvalue().strip())
    skdbal label: error: --images no/such/folder: no such folder

    A port in use is refused before the store is made:

    >>> busy = socket.socket(); busy.bind(("127.0.0.1", 0)); busy.listen()
    >>> store = os.path.join(tempfile.mkdtemp(), "demo.db")
    >>> with contextlib.redirect_stderr(io.StringIO()):
    ...     run(parser.parse_args(["--demo", "digits", "--store", store, "--port", str(busy.getsockname()[1])]))
    2
    >>> os.path.exists(store)
    False
    >>> busy.close()
    """
    import uvicorn

    from .lock import StoreLock
    from .serving import server_config

    try:
        check_source(args)
    except ValueError as exc:
        return _fail(str(exc))
    try:
        sock = _listen(args.host, args.port)
    except OSError as exc:
        return _fail(f"cannot serve on {args.host}:{args.port} ({exc.strerror or exc}): another server may "
                     "be there; choose another --port")
    try:   # one server per store, held till the end: a second is refused before it reads the store
        lock = StoreLock(store_path(args)).acquire()
    except ValueError as exc:
        sock.close()
        return _fail(str(exc))
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if main else None  # uvicorn stops, then passes it on
    session = None
    try:
        try:
            threads = set_torch_threads(args.torch_threads)
            session, app, loopback, store = build(args)
        except (ValueError, OSError, ImportError) as exc:   # a StoreError is a ValueError; parquet needs pyarrow
            return _fail(str(exc))
        except sqlite3.Error as exc:
            return _fail(f"the store {args.store}: {exc}")
        if getattr(args, "reopen_skips", False):
            print(f"skdbal label: {len(session.reopen_skips())} skipped items reopened", flush=True)
        line = representation_line(args, store)
        if line:
            print(f"skdbal label: {line}", flush=True)
        port = sock.getsockname()[1]
        url = f"http://{args.host}:{port}/"
        if app.state.annotators:   # a link per annotator, with their token, once
            print(f"skdbal label: {len(session.keys)} items, store {store}, torch threads {threads}; each "
                  "annotator opens their own link:\n" + "\n".join(links(app, url)), flush=True)
        else:
            if not loopback:
                url += f"?token={app.state.token}"
                print(f"serving on {args.host}: every request needs the token {app.state.token} (shown once)")
            print(f"skdbal label: {len(session.keys)} items, store {store}, torch threads {threads}; open {url}",
                  flush=True)
        with session:   # stop() closes the store: its .db file alone then holds every label
            # the server's limits: request and idle timeouts, a connection limit (serving's docstring)
            uvicorn.Server(server_config(app, host=args.host, port=port)).run(sockets=[sock])
    except _Terminated:
        pass
    finally:
        sock.close()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if session is None:
            lock.release()
    if session is not None:
        print(f"skdbal label: stopped; {len(session.store.current_labels())} labels in {store}", file=sys.stderr)
        session.store.close()
        lock.release()   # after the last read and the checkpoint
    return 0


def links(app, url: str) -> list:
    """One line per annotator of ``app`` (``make_app(..., annotators=...)``): their name and their link,
    ``url`` with their token.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> from skdbal.labelling.cli import links
    >>> app = SimpleNamespace(state=SimpleNamespace(annotators={"alice": "tok-a", "bob": "tok-b"}))
    >>> for line in links(app, "http://127.0.0.1:8765/"):
    ...     print(line)
      alice: http://127.0.0.1:8765/?token=tok-a
      bob: http://127.0.0.1:8765/?token=tok-b
    """
    return [f"  {name}: {url}?token={token}" for name, token in (app.state.annotators or {}).items()]
