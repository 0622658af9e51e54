"""``skdbal label``: serve a labelling page for a pool (or the digits demo) on this machine."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import List

import numpy as np

from .._validation import is_loopback

__all__ = ["add_parser", "add_pool_arguments", "build", "make_session", "run"]


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
    >>> args.images, args.classes, args.image_size, args.mode, args.second_looks
    ('photos', 'cat,dog', 28, 'L', 'dynamic')
    >>> parser.parse_args(["--demo", "digits", "--second-looks", "0.05"]).second_looks
    0.05
    >>> parser.parse_args(["--demo", "digits", "--second-looks", "off"]).second_looks is None
    True
    """
    p = sub.add_parser("label", help="label a pool in the browser, the model choosing what comes next")
    add_pool_arguments(p)
    p.add_argument("--host", default="127.0.0.1", help="interface to serve on (default 127.0.0.1: this machine "
                   "only; any other needs the token printed at start on every request)")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--keys", type=_keys, metavar="K1,K2,...", help="comma-separated keys, one character per "
                   "class in --classes' order (default: classes 0-9 their own digit, others 1-9 then 0)")
    return p


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
    >>> args.table, args.id_column, args.batch_size, args.second_look_budget
    ('items.csv', 'name', 10, 0.1)
    """
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--demo", choices=["digits"], help="scikit-learn's digits: the whole loop, no data to bring")
    src.add_argument("--images", metavar="DIR", help="a folder of images (png, jpg, bmp, gif, tif, webp; "
                     "recursive; the keys are the file names in it)")
    src.add_argument("--table", metavar="FILE", help="a .csv or .parquet table of numeric features")
    src.add_argument("--npy", help="a .npy array of images (N, H, W) or rows (N, D), or a .npz with an array X")
    p.add_argument("--classes", help="comma-separated class names (required but with --demo)")
    p.add_argument("--id-column", help="the table's column of item names (the keys; not a feature)")
    p.add_argument("--image-size", type=int, default=28, help="side of the square images the model sees "
                   "(with --images; default 28)")
    p.add_argument("--mode", choices=["L", "RGB"], default="L", help="images as grey-scale (L, default) or "
                   "colour (RGB) features, with --images")
    p.add_argument("--store", help="the SQLite store; resumed if it exists (default: skdbal-<name>.db here)")
    p.add_argument("--batch-size", type=int, default=10)
    p.add_argument("--retrain-after", type=int, default=None, help="new labels before a retrain (default: a batch)")
    p.add_argument("--second-looks", type=_second_looks, default="dynamic", metavar="RULE",
                   help="flag a label the model finds unlikely for another annotator's look: 'dynamic' (default: "
                   "the noise filter's Bayes threshold, from the noise rate it estimates), 'quantile', a "
                   "threshold in (0, 1), or 'off'")
    p.add_argument("--second-look-budget", type=float, default=0.1, metavar="SHARE",
                   help="at most this share of the labels is flagged, the least likely first (default 0.1)")


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


def _demo():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32).reshape(-1, 8, 8)
    X_pool, X_test, _, y_test = train_test_split(X, y, test_size=500, random_state=0, stratify=y)
    return X_pool, X_test, y_test, list(range(10))


def make_session(args):
    """The session, the pool and the store's path that ``args`` name (the pool options of ``skdbal label``,
    shared by ``skdbal labelstudio``).

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
    from ..acquisition import bald
    from ..learner import ActiveLearner
    from ..models import MLP, MCDropoutClassifier
    from .pools import load_pool
    from .session import LabellingSession

    X_test = y_test = None
    if args.demo:
        X, X_test, y_test, classes = _demo()
        pool = load_pool(X)
        name = "digits"
    else:
        if not args.classes:
            raise ValueError("--classes is required with --images, --table and --npy")
        classes = [c.strip() for c in args.classes.split(",") if c.strip()]
        if args.images:
            pool = load_pool(args.images, image_size=args.image_size, mode=args.mode)
            name = Path(args.images).resolve().name
        elif args.table:
            if Path(args.table).suffix.lower() not in (".csv", ".parquet", ".pq"):
                raise ValueError(f"--table reads .csv or .parquet files; got {args.table!r}")
            pool = load_pool(args.table, id_column=args.id_column)
            name = Path(args.table).stem
        else:
            if Path(args.npy).suffix.lower() not in (".npy", ".npz"):
                raise ValueError(f"--npy reads .npy or .npz files; got {args.npy!r}")
            pool = load_pool(args.npy)
            name = Path(args.npy).stem
    X = pool.X
    images = pool.kind == "images"
    net = MCDropoutClassifier(classes=np.arange(len(classes)) if args.demo else np.array(classes),
                              max_epochs=50, batch_size=32, n_samples=20, random_state=0,
                              **({"module__kernel_size": 3} if images and min(X.shape[-2:]) < 16 else {}),
                              **({} if images else {"module": MLP}))
    learner = ActiveLearner(net, bald, random_state=0, seeding="step", verbose=False)
    store = args.store or f"skdbal-{name}.db"
    session = LabellingSession(learner, X, classes, store, keys=pool.keys, batch_size=args.batch_size,
                               retrain_after=args.retrain_after, X_test=X_test, y_test=y_test,
                               second_looks=args.second_looks, second_look_budget=args.second_look_budget)
    return session, pool, store


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
    >>> args = parser.parse_args(["--images", folder, "--classes", "cat,dog",
    ...                           "--store", os.path.join(folder, "project.db")])
    >>> session, app, loopback, path = build(args)
    >>> session.keys, session.X.shape, session.classes
    (['cat1.png', 'dog1.jpg'], (2, 28, 28), ['cat', 'dog'])
    """
    from .app import make_app

    session, pool, store = make_session(args)
    loopback = is_loopback(args.host)
    app = make_app(session, require_token_everywhere=not loopback, pool=pool, keys=getattr(args, "keys", None))
    return session, app, loopback, store


def run(args) -> int:
    """Serve until interrupted; every label is in the store as soon as it is acknowledged.

    It serves what :func:`build` makes, with uvicorn, and prints the address
    (and, off loopback, the token, once).

    Examples
    --------
    >>> import argparse
    >>> from skdbal.labelling.cli import add_parser
    >>> sub = argparse.ArgumentParser(prog="skdbal").add_subparsers()
    >>> add_parser(sub).parse_args(["--npy", "x.npy", "--host", "0.0.0.0"]).host   # run() would print a token
    '0.0.0.0'
    """
    import uvicorn

    session, app, loopback, store = build(args)
    url = f"http://{args.host}:{args.port}/"
    if not loopback:
        url += f"?token={app.state.token}"
        print(f"serving on {args.host}: every request needs the token {app.state.token} (shown once)")
    print(f"skdbal label: {len(session.keys)} items, store {store}; open {url}", flush=True)
    with session:
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0
