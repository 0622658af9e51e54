"""``skdbal labelstudio``: a Label Studio project's queue ordered by skdbal, retrained as labels come in.

The pool options are ``skdbal label``'s. The token comes from an environment
variable (``--token-env``) or a file (``--token-file``), never from the
command line, and is never printed or logged; an HTTPS server's certificate
is verified (against ``--ca-bundle`` if given), and a plain-HTTP URL off this
machine is refused unless ``--allow-http`` says so.
"""
from __future__ import annotations

import argparse
import os
import signal
import stat
import sys
import threading
from typing import Callable, Optional
from urllib.parse import urlparse
from xml.sax.saxutils import quoteattr

from .._validation import is_loopback, port_number, seconds
from ._outputs import keep_labels_csv, last_pull, say_stopped

__all__ = ["add_parser", "connect", "connect_backend", "image_size", "label_config", "labels_csv_path", "read_token",
           "run", "task_data", "which_button"]


def add_parser(sub) -> argparse.ArgumentParser:
    """Add the ``labelstudio`` command to the ``skdbal`` command line's subparsers.

    Examples
    --------
    >>> import argparse
    >>> from skdbal.labelstudio.cli import add_parser
    >>> parser = add_parser(argparse.ArgumentParser(prog="skdbal").add_subparsers())
    >>> args = parser.parse_args(["--demo", "digits", "--url", "http://127.0.0.1:8080", "--token-env", "LS_TOKEN",
    ...                           "--new-project", "digits"])
    >>> args.url, args.token_env, args.new_project, args.interval, args.key_field, args.sampling
    ('http://127.0.0.1:8080', 'LS_TOKEN', 'digits', 2.0, 'skdbal_key', 'uncertainty')

    The token itself is refused on the command line (without echoing it):

    >>> import contextlib, io
    >>> err = io.StringIO()
    >>> with contextlib.redirect_stderr(err):
    ...     parser.parse_args(["--demo", "digits", "--url", "http://127.0.0.1:8080", "--project", "1",
    ...                        "--token=s3cret"])
    Traceback (most recent call last):
        ...
    SystemExit: 2
    >>> "s3cret" in err.getvalue(), "--token-env" in err.getvalue()
    (False, True)
    """
    p = sub.add_parser("labelstudio", help="order a Label Studio project's queue by the model, retrained as "
                       "its annotations come in", allow_abbrev=False)
    from ..labelling.cli import add_pool_arguments

    add_pool_arguments(p)
    p.add_argument("--url", required=True, help="Label Studio's address, e.g. https://label.example.org")
    p.add_argument("--token", "--api-key", nargs="?", action=_RefuseToken, help=argparse.SUPPRESS)
    token = p.add_mutually_exclusive_group(required=True)
    token.add_argument("--token-env", metavar="VAR", help="the environment variable that holds the API token")
    token.add_argument("--token-file", metavar="FILE", help="a file that holds the API token (mode 600)")
    project = p.add_mutually_exclusive_group(required=True)
    project.add_argument("--project", type=int, metavar="ID", help="an existing project (its <Choices> must be "
                         "--classes)")
    project.add_argument("--new-project", metavar="TITLE", help="create a project with a classification config "
                         "for the pool")
    p.add_argument("--attach", metavar="FIELD", help="attach the project's existing tasks by the file name in "
                   "their data FIELD (a URL, path or local-files address ending in a pool key) instead of "
                   "importing the pool")
    p.add_argument("--key-field", default="skdbal_key", help="the task data field of the pool key, on tasks "
                   "skdbal imports (default skdbal_key)")
    p.add_argument("--keys", metavar="K1,K2,...", help="comma-separated keys, one character per "
                   "class in --classes' order, as the choices' hotkeys in a --new-project (default: classes 0-9 "
                   "their own digit, others 1-9 then 0)")
    p.add_argument("--interval", type=seconds, default=2.0, help="seconds between pulls of annotations (default 2)")
    p.add_argument("--sampling", choices=("uncertainty", "queue"), default="uncertainty",
                   help="how annotators are served: 'uncertainty' (default), the project set to Label Studio's "
                   "Uncertainty sampling and the best task scored lowest, so that Label All Tasks serves each "
                   "annotator the best task left; 'queue', the best scored highest, for one annotator who labels "
                   "the 'skdbal queue' tab with Label Tasks As Displayed (Label All Tasks then goes by task id)")
    p.add_argument("--ca-bundle", metavar="FILE", help="verify the server's certificate against this CA bundle")
    p.add_argument("--allow-http", action="store_true", help="send the token over plain HTTP to another machine")
    p.add_argument("--labels-csv", metavar="FILE", help="keep the labels as CSV here, rewritten atomically when "
                   "annotations have been recorded and on stop (default: beside the store, its name with "
                   "-labels.csv: skdbal-digits.db -> skdbal-digits-labels.csv)")
    backend = p.add_argument_group("ML backend", "serve skdbal to Label Studio as an ML backend: its webhooks "
                                   "bring the annotations at once (no pulls); Label Studio on this machine needs "
                                   "ML_BLOCK_LOCAL_IP=false and SSRF_PROTECTION_ENABLED=false in its environment")
    backend.add_argument("--backend", action="store_true", help="serve as Label Studio's ML backend instead of "
                         "pulling every --interval seconds")
    backend.add_argument("--backend-host", default="127.0.0.1", help="the address to serve on (default 127.0.0.1; "
                         "another needs --backend-token-env)")
    backend.add_argument("--backend-port", type=port_number, default=9090, help="the port to serve on (default 9090)")
    backend.add_argument("--backend-token-env", metavar="VAR", help="the environment variable that holds the "
                         "backend's token: Label Studio sends it as Basic Auth's password")
    backend.add_argument("--backend-url", metavar="URL", help="the address at which Label Studio reaches the "
                         "backend (default http://HOST:PORT)")
    backend.add_argument("--backend-allowed-hosts", metavar="NAMES", help="more host names the backend answers "
                         "to, comma-separated: the name by which Label Studio reaches it (a Docker network's); '*' "
                         "for any. Without a backend token it answers 127.0.0.1, localhost, ::1 and the host of "
                         "--backend-url only; with one, any name unless these are given")
    backend.add_argument("--connect", action="store_true", help="add the backend to the project (as Settings -> "
                         "Model does) unless one with its address is there")
    return p


def labels_csv_path(labels_csv: Optional[str], store) -> str:
    """Where ``skdbal labelstudio`` keeps the labels as CSV: ``--labels-csv``, else beside the store,
    named after it.

    Examples
    --------
    >>> from skdbal.labelstudio.cli import labels_csv_path
    >>> labels_csv_path(None, "runs/skdbal-digits.db"), labels_csv_path("out/l.csv", "skdbal-digits.db")
    ('runs/skdbal-digits-labels.csv', 'out/l.csv')
    """
    if labels_csv:
        return labels_csv
    folder, name = os.path.split(os.fspath(store))
    return os.path.join(folder, os.path.splitext(name)[0] + "-labels.csv")


def _wind_down(stop: threading.Event, exporter: threading.Thread, previous) -> None:
    """After the session: end the CSV's writer thread, and give SIGTERM back its handler."""
    stop.set()
    if exporter.is_alive():
        exporter.join()
    if previous is not None:
        signal.signal(signal.SIGTERM, previous)


class _RefuseToken(argparse.Action):
    """``--token`` is refused without echoing its value: on a command line a token would be in the shell's
    history and in every user's process list."""

    def __call__(self, parser, namespace, values, option_string=None):
        parser.error(f"{option_string} is not taken: a token on the command line is in the shell history and "
                     f"the process list; put it in an environment variable (--token-env VAR) or a file "
                     f"(--token-file FILE)")


def read_token(env: Optional[str] = None, file: Optional[str] = None, *, environ=None) -> str:
    """The API token, from the environment variable ``env`` or the file ``file``; errors name the
    source, never the token. A file that others can read is refused (like ssh's keys).

    Examples
    --------
    >>> from skdbal.labelstudio.cli import read_token
    >>> read_token(env="LS_TOKEN", environ={"LS_TOKEN": " abc123\\n"})
    'abc123'
    >>> read_token(env="LS_TOKEN", environ={})
    Traceback (most recent call last):
        ...
    ValueError: the environment variable LS_TOKEN (--token-env) is not set or empty
    """
    if (env is None) == (file is None):
        raise ValueError("give the token's environment variable or its file, one of them")
    if env is not None:
        token = (os.environ if environ is None else environ).get(env, "").strip()
        if not token:
            raise ValueError(f"the environment variable {env} (--token-env) is not set or empty")
        return token
    try:
        mode = os.stat(file).st_mode
        if os.name == "posix" and mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ValueError(f"the token file {file} can be read by others (mode {stat.S_IMODE(mode):o}); "
                             f"chmod 600 {file}")
        with open(file, encoding="utf-8") as f:
            token = f.read().strip()
    except (OSError, UnicodeDecodeError) as exc:   # said without the file's contents
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise ValueError(f"cannot read the token file {file} (--token-file): {reason}") from None
    if not token:
        raise ValueError(f"the token file {file} is empty")
    return token


def connect(url: str, token: str, *, ca_bundle: Optional[str] = None, allow_http: bool = False,
            timeout: float = 60.0):
    """A Label Studio client (``label_studio_sdk.LabelStudio``) for ``url``: certificates verified
    (by ``ca_bundle`` if given, else the system's), and plain HTTP only to this machine unless
    ``allow_http``.

    Raises
    ------
    ValueError
        For a URL that is not http(s), or plain HTTP to another machine without ``allow_http``.

    Examples
    --------
    >>> from skdbal.labelstudio.cli import connect
    >>> connect("http://label.example.org", "a-token")
    Traceback (most recent call last):
        ...
    ValueError: http://label.example.org is plain HTTP to another machine: the token would cross the network \
unencrypted; use https, or --allow-http
    """
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError(f"--url must be an http(s) address of Label Studio; got {url!r}")
    if parsed.scheme == "http" and not is_loopback(parsed.hostname) and not allow_http:
        raise ValueError(f"{url} is plain HTTP to another machine: the token would cross the network "
                         f"unencrypted; use https, or --allow-http")
    import httpx
    from label_studio_sdk import LabelStudio

    verify = True
    if ca_bundle is not None:
        import ssl

        verify = ssl.create_default_context(cafile=ca_bundle)
    http = httpx.Client(verify=verify, timeout=timeout, follow_redirects=True)  # drops the token off-origin
    return LabelStudio(base_url=url.rstrip("/"), api_key=token, httpx_client=http)


#: The side, in screen pixels, that a small image is drawn at, at most: the largest whole multiple of its size
#: that fits (an 8 x 8 digit at 40 x, a 28 x 28 one at 11 x); an image larger than it is drawn as Label Studio
#: draws any (fitted to the page, smoothed).
DRAWN_SIDE = 320


def label_config(kind: str, classes, *, keys=None, image_size=None) -> str:
    """A labelling config for a pool of ``kind`` ("images": an image, "table": its row as text) and one
    single choice among ``classes``.

    Each ``<Choice>`` gets the key that labels its class on ``skdbal label``'s page
    (:func:`skdbal.labelling._page.class_keys`: classes named by the digits take their own digit, others
    1-9 then 0, or one of ``keys`` each) as its ``hotkey``, so that Label Studio does not number the
    choices itself (it would give ``"0"`` the key 1). A class past the tenth with no key is left to Label
    Studio.

    ``image_size``, ``(width, height)`` in pixels of the pool's images as drawn (:meth:`Pool.png
    <skdbal.labelling.pools.Pool.png>`), when they share one: an image of :data:`DRAWN_SIDE` pixels or
    fewer on its long side is drawn without smoothing (``smoothing="false"``: each pixel a sharp square),
    at the largest whole multiple of its size that fits in :data:`DRAWN_SIDE` (``width`` and ``maxWidth``
    in pixels; Label Studio fits the image to that width).

    Examples
    --------
    >>> from skdbal.labelstudio.cli import label_config
    >>> print(label_config("images", ["cat", "dog & co"]))   # doctest: +NORMALIZE_WHITESPACE
    <View><Image name="image" value="$image"/><Choices name="label" toName="image" choice="single"
    showInLine="true"><Choice value="cat" hotkey="1"/><Choice value="dog &amp; co" hotkey="2"/></Choices></View>

    The demo's digits, 8 x 8: each digit its own key, drawn sharp at 40 times its size:

    >>> config = label_config("images", [str(d) for d in range(10)], image_size=(8, 8))
    >>> config[config.index("<Image"):config.index("/>") + 2]
    '<Image name="image" value="$image" smoothing="false" width="320px" maxWidth="320px"/>'
    >>> config.count("hotkey="), '<Choice value="7" hotkey="7"/>' in config
    (10, True)
    >>> label_config("images", ["0", "1"], keys="a,b").count('hotkey="a"')
    1
    """
    from ..labelling import class_keys

    hotkeys = class_keys(classes, keys)
    if kind == "images":
        drawn = ""
        if image_size is not None and 0 < max(image_size) <= DRAWN_SIDE:
            width = int(image_size[0]) * (DRAWN_SIDE // max(int(image_size[0]), int(image_size[1])))
            drawn = f' smoothing="false" width="{width}px" maxWidth="{width}px"'
        source = f'<Image name="image" value="$image"{drawn}/>'
    else:
        source = '<Text name="item" value="$item"/>'
    to_name = "image" if kind == "images" else "item"
    choices = "".join(f"<Choice value={quoteattr(str(c))}" + ("" if k is None else f" hotkey={quoteattr(k)}") + "/>"
                      for c, k in zip(classes, hotkeys))
    return (f'<View>{source}<Choices name="label" toName="{to_name}" choice="single" showInLine="true">'
            f"{choices}</Choices></View>")


def image_size(pool, sample: int = 5):
    """``(width, height)`` of the pool's images as drawn for Label Studio (:meth:`Pool.png
    <skdbal.labelling.pools.Pool.png>`) when the first ``sample`` share one, else None (a table, or
    images of several sizes).

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.labelling.pools import Pool
    >>> from skdbal.labelstudio.cli import image_size
    >>> image_size(Pool(np.zeros((3, 8, 8)))), image_size(Pool(np.zeros((2, 3)))) is None
    ((8, 8), True)
    """
    import io

    from PIL import Image

    if pool.kind != "images" or not len(pool):
        return None
    sizes = set()
    for i in range(min(sample, len(pool))):
        try:
            with Image.open(io.BytesIO(pool.png(i))) as im:
                sizes.add(im.size)
        except ValueError:        # an unreadable file: said when its task is imported
            return None
    return sizes.pop() if len(sizes) == 1 else None


def task_data(pool, field: str) -> Callable[[int], dict]:
    """``data(i)``, the task data of pool item ``i``: its image as a PNG data URI, or its row as text,
    in ``field``.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.labelling.pools import Pool
    >>> from skdbal.labelstudio.cli import task_data
    >>> task_data(Pool(np.array([[1.5, 2.0]]), columns=["height", "width"]), "item")(0)
    {'item': 'height = 1.5, width = 2'}
    >>> task_data(Pool(np.zeros((1, 8, 8))), "image")(0)["image"][:22]
    'data:image/png;base64,'
    """
    import base64

    if pool.kind == "images":
        return lambda i: {field: "data:image/png;base64," + base64.b64encode(pool.png(i)).decode("ascii")}
    return lambda i: {field: ", ".join(f"{name} = {value:g}" for name, value in pool.row(i))}


def which_button(sampling: str) -> str:
    """The line ``skdbal labelstudio`` prints at start: which of Label Studio's buttons serves the model's
    order in ``sampling``, and why.

    Examples
    --------
    >>> from skdbal.labelstudio.cli import which_button
    >>> print(which_button("uncertainty"))
    annotators: press Label All Tasks: the project is in Uncertainty sampling, which serves each annotator \
the model's best task left (scored lowest), one at a time
    """
    if sampling == "uncertainty":
        return ("annotators: press Label All Tasks: the project is in Uncertainty sampling, which serves each "
                "annotator the model's best task left (scored lowest), one at a time")
    return ("annotator: open the 'skdbal queue' tab and press Label Tasks As Displayed: it serves the model's "
            "best task first (Label All Tasks goes by task id; for a team, --sampling uncertainty)")


def _refusal(args, exc: BaseException) -> str:
    """What went wrong on the first request, in words (the token is in no exception's message)."""
    status = getattr(exc, "status_code", None)
    source = f"the environment variable {args.token_env}" if args.token_env else f"the file {args.token_file}"
    if status in (401, 403):
        return f"Label Studio at {args.url} refused the token from {source} ({status})"
    return f"cannot reach Label Studio at {args.url}: {type(exc).__name__}: {exc if status is None else status}"


def _pull_before_start(sync) -> int:
    """Pull once before the session's loop starts, so that the tasks labelled while skdbal was down are in
    the store before the first query and push: none of them scored at the queue's head. Label Studio being
    away here is said and left to the loop's pulls; the number of new events.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> from skdbal.labelstudio.cli import _pull_before_start
    >>> _pull_before_start(SimpleNamespace(pull=lambda: 3))
    3
    """
    from .sync import is_transient

    try:
        return sync.pull()
    except Exception as exc:  # noqa: BLE001 - only Label Studio being away is left for later
        if not is_transient(exc):
            raise
        print(f"Label Studio did not answer the first pull ({type(exc).__name__}); the loop pulls again",
              file=sys.stderr)
        return 0


def run(args) -> int:
    """Keep the session and the project in step until interrupted (Ctrl-C or SIGTERM).

    It reads the token, connects, sets torch's threads (``--torch-threads``, 1 by
    default), makes (or checks) the project, imports
    the pool as tasks (or attaches existing ones), makes the queue's Data
    Manager tab (and sets the project's sampling, ``--sampling``), prints
    its address, and pulls the annotations made meanwhile; then the session
    starts, retrains as annotations are pulled, and every query's scores are
    pushed. The labels are kept as CSV (:func:`labels_csv_path`), rewritten
    atomically when annotations have been recorded and once more on stop,
    with the page's ``report.json`` beside it (also after each retrain;
    :func:`skdbal.labelstudio.progress.report_json_path`).
    With ``--backend`` the annotations come by Label Studio's webhooks
    instead of pulls (:mod:`skdbal.labelstudio.backend`). After each retrain it
    prints the session's accuracy estimate and stopping advice (with ``--test``
    its test accuracy), and writes them at the head of the project's
    description and beside the CSV (:mod:`skdbal.labelstudio.progress`).

    Examples
    --------
    Everything is checked before anything is sent: here the token would
    cross the network in the clear.

    >>> import argparse, os
    >>> from skdbal.labelstudio.cli import add_parser, run
    >>> parser = add_parser(argparse.ArgumentParser(prog="skdbal").add_subparsers())
    >>> os.environ["EXAMPLE_LS_TOKEN"] = "not-a-real-token"
    >>> run(parser.parse_args(["--demo", "digits", "--url", "http://label.example.org", "--project", "1",
    ...                        "--token-env", "EXAMPLE_LS_TOKEN"]))
    Traceback (most recent call last):
        ...
    ValueError: http://label.example.org is plain HTTP to another machine: the token would cross the network \
unencrypted; use https, or --allow-http
    """
    from ..labelling.cli import make_session, representation_line, set_torch_threads, store_path
    from ..labelling.lock import StoreLock
    from .progress import ModelProgress, progress_csv_path
    from .sync import LabelStudioSync, choices_of, file_key

    backend = _backend_settings(args) if getattr(args, "backend", False) else None
    token = read_token(args.token_env, args.token_file)
    client = connect(args.url, token, ca_bundle=args.ca_bundle, allow_http=args.allow_http)
    try:
        client.projects.list(page_size=1)     # fails here, before the pool is read, if the server or token is wrong
    except Exception as exc:  # noqa: BLE001 - said without the token, which no message here contains
        raise ValueError(_refusal(args, exc)) from None
    threads = set_torch_threads(args.torch_threads)    # before the model is built
    lock = StoreLock(store_path(args))
    try:
        lock.acquire()   # one server per store, held till the end: a second is refused before it reads the store
        session, pool, store = make_session(args)
    except BaseException:
        lock.release()
        if backend is not None:
            backend["socket"].close()
        raise
    try:
        if args.new_project:
            project = client.projects.create(title=args.new_project,
                                             label_config=label_config(pool.kind, session.classes,
                                                                       keys=getattr(args, "keys", None),
                                                                       image_size=image_size(pool))).id
            print(f"made project {project}, {args.new_project!r}")
        else:
            project = args.project
        key_of = file_key(args.attach, session.keys) if args.attach else None
        sync = LabelStudioSync(session, client, project, key_field=args.key_field, key_of=key_of,
                               sampling=getattr(args, "sampling", "uncertainty"))
        # after each retrain: the session's estimate and stopping advice, said after the push
        progress = ModelProgress(session, client=client, project=project,
                                 report_path=progress_csv_path(labels_csv_path(args.labels_csv, store)))
        session.on_query.append(progress.after_query)
        if args.attach:
            attached = sync.map_tasks()
            print(f"attached {attached} of the project's tasks to {len(session.keys)} pool items")
            if not attached:
                raise ValueError(f"no task of project {project} has a file in {args.attach!r} that is a pool key")
        else:
            field = choices_of(sync.label_config)["data"] or ("image" if pool.kind == "images" else "item")
            made = sync.import_tasks(task_data(pool, field))
            print(f"imported {made} tasks ({len(session.keys) - made} were there)")
        view = sync.queue_view()
        csv_path = labels_csv_path(args.labels_csv, store)
        print(f"skdbal labelstudio: {len(session.keys)} items, store {store}, labels {csv_path}, torch threads "
              f"{threads}; the queue: {args.url.rstrip('/')}/projects/{project}/data?tab={view}", flush=True)
        print(which_button(sync.sampling), flush=True)
        line = representation_line(args, store)
        if line:
            print(f"skdbal labelstudio: {line}", flush=True)
        if backend is not None:
            return _serve_backend(args, sync, backend, store, csv_path)
        print(f"pulled {_pull_before_start(sync)} new annotation events before starting", flush=True)
        stop = threading.Event()
        previous = signal.signal(signal.SIGTERM, lambda *_: stop.set()) \
            if threading.current_thread() is threading.main_thread() else None
        exporter = threading.Thread(target=keep_labels_csv, args=(session, csv_path, stop, args.interval),
                                    kwargs={"sync": sync, "report": True}, name="skdbal-labels-csv", daemon=True)
        try:
            with session:
                exporter.start()
                try:
                    sync.run(stop, interval=args.interval)
                except KeyboardInterrupt:
                    pass
                last_pull(sync)          # once more: what was annotated up to the stop is in the CSV too
        except KeyboardInterrupt:
            pass
        finally:
            _wind_down(stop, exporter, previous)
        say_stopped(session, store, csv_path, sync, report=True)
    except Exception as exc:  # noqa: BLE001
        # the SDK's ApiError prints the answer's headers, among them a session cookie for the token's user:
        # said here by its status and body only, also when it ended the session's loop
        if getattr(session, "error", None) is not None and not isinstance(exc, ValueError):   # one line
            raise ValueError(f"the session's loop failed: {type(session.error).__name__}: {session.error}") \
                from None
        cause = exc
        while cause is not None and (getattr(cause, "status_code", None) is None or not hasattr(cause, "body")):
            cause = cause.__cause__
        if cause is None:
            raise
        raise ValueError(f"Label Studio answered {cause.status_code}: {cause.body}") from None
    finally:
        session.store.close()
        lock.release()   # after the store's last checkpoint
        if backend is not None:
            backend["socket"].close()
    return 0


# ------------------------------------------------------------------ the ML backend mode (--backend)
def _backend_settings(args) -> dict:
    """Check the backend's address and token, and bind its socket, before anything is sent or read: a
    non-loopback address without a token, or a port in use, is one line."""
    import socket

    host, port = args.backend_host, args.backend_port
    token = read_token(args.backend_token_env) if args.backend_token_env else None
    if token is None and not is_loopback(host):
        raise ValueError(f"--backend-host {host} serves other machines: give the backend a token "
                         f"(--backend-token-env VAR), which Label Studio sends as Basic Auth's password")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            sock.listen(2048)
        except BaseException:
            sock.close()
            raise
    except OSError as exc:
        raise ValueError(f"cannot serve the backend on {host}:{port} ({exc.strerror or exc}): another server may "
                         f"be there; choose another --backend-port") from None
    bound = sock.getsockname()[1]
    url = (args.backend_url or f"http://{'[' + host + ']' if ':' in host else host}:{bound}").rstrip("/")
    hosts = [h.strip() for h in (args.backend_allowed_hosts or "").split(",") if h.strip()]
    named = urlparse(url).hostname or ""
    if token is None and args.backend_url and not is_loopback(named) and named not in hosts:
        hosts.append(named)           # the name Label Studio is given for the backend (a rebound name is not)
    return {"socket": sock, "token": token, "host": host, "port": bound, "url": url, "hosts": hosts or None}


def connect_backend(client, project: int, url: str, *, token: Optional[str] = None,
                    title: str = "skdbal") -> Optional[int]:
    """Add the ML backend at ``url`` to ``project`` through Label Studio's API, as Settings -> Model ->
    Connect Model does (Label Studio then checks it: ``/health`` and ``/setup``, and makes its
    webhook); None if one with that address is there already, else its id. With a ``token`` it is
    sent as Basic Auth's password, and the backend's webhook is given the same ``Authorization``
    header (Label Studio sends none on the webhook it makes); a backend there already is given
    this token the same way (a restart with a new token). Label Studio 1.23 checks an update as it
    checks a new backend (``/health``, then ``/setup`` with the project), so the update names the
    project too (without it, Label Studio answers 500: ``setup_() missing ... 'project'``).

    Raises
    ------
    ValueError
        Where Label Studio has no webhook for the backend afterwards (it makes none to a local or
        private address while its ``SSRF_PROTECTION_ENABLED`` is on): the annotations would never
        reach the backend. A request Label Studio refuses raises its ``ApiError``.

    Examples
    --------
    A stand-in for the client, where the backend and its webhook are there already:

    >>> from types import SimpleNamespace
    >>> from skdbal.labelstudio.cli import connect_backend
    >>> client = SimpleNamespace(ml=SimpleNamespace(list=lambda project: [{"id": 3, "url": "http://127.0.0.1:9090"}]),
    ...                          webhooks=SimpleNamespace(list=lambda project: [{"url": "http://127.0.0.1:9090/webhook"}]))
    >>> connect_backend(client, 1, "http://127.0.0.1:9090/") is None
    True
    >>> client.webhooks.list = lambda project: []
    >>> connect_backend(client, 1, "http://127.0.0.1:9090/")
    Traceback (most recent call last):
        ...
    ValueError: Label Studio has no webhook for the backend (http://127.0.0.1:9090/webhook) in project 1: \
annotations would not reach it; a Label Studio on this machine needs SSRF_PROTECTION_ENABLED=false
    """

    from .sync import _plain

    url = url.rstrip("/")
    auth = {} if token is None else {"auth_method": "BASIC_AUTH", "basic_auth_user": "skdbal",
                                     "basic_auth_pass": token}
    there = [_plain(b) for b in client.ml.list(project=project)
             if str(_plain(b).get("url", "")).rstrip("/") == url]
    made = None
    if there:
        if token is not None:     # its credentials may be another run's: this token's, on it and its webhook
            for b in there:       # (Label Studio 1.23 checks an update with /setup, which needs the project)
                client.ml.update(id=b["id"], url=url, project=project, **auth)
    else:
        made = _plain(client.ml.create(url=url, project=project, title=title, is_interactive=False, **auth)).get("id")
    _webhook_auth(client, project, url, token)
    return made


def _webhook_auth(client, project: int, url: str, token: Optional[str]) -> None:
    """Give the backend's webhook (which Label Studio makes without headers) the token as Basic Auth; a
    ValueError if Label Studio has no webhook for the backend."""
    import base64

    from .sync import _plain

    hooks = [h for h in (_plain(h) for h in client.webhooks.list(project=project))
             if str(h.get("url", "")).rstrip("/") == url + "/webhook"]
    if not hooks:
        raise ValueError(f"Label Studio has no webhook for the backend ({url}/webhook) in project {project}: "
                         f"annotations would not reach it; a Label Studio on this machine needs "
                         f"SSRF_PROTECTION_ENABLED=false")
    if token is None:
        return
    header = "Basic " + base64.b64encode(f"skdbal:{token}".encode()).decode("ascii")
    for hook in hooks:
        client.webhooks.update(id=hook["id"], url=hook["url"], headers={"Authorization": header})


def _serve_backend(args, sync, backend: dict, store, csv_path: str) -> int:
    """Pull once (what was labelled while skdbal was down), start the session, and serve the backend with
    uvicorn on the bound socket until Ctrl-C or SIGTERM; no pulls then: the webhooks bring the
    annotations. A push that failed for want of Label Studio is sent again a second later. The labels
    are kept in ``csv_path`` as in client mode.

    On SIGTERM the session's loop stops first (so no push, and no webhook Label Studio sends about it,
    meets a backend that has stopped), then the server, then the webhooks already received are
    recorded, and the CSV is written a last time."""
    import uvicorn

    from ..labelling.serving import server_config
    from .backend import backend_app
    from .sync import is_transient

    session = sync.session
    app = backend_app(sync, token=backend["token"], hosts=backend["hosts"])
    stopping = threading.Event()        # asked to stop: the keeper stops the loop, then the server

    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame):     # uvicorn's SIGINT/SIGTERM handler while it serves
            if stopping.is_set() and sig == signal.SIGINT:
                self.force_exit = True         # a second Ctrl-C
            stopping.set()

    server = Server(server_config(app, host=backend["host"], port=backend["port"]))   # timeouts, a connection limit
    previous = signal.signal(signal.SIGTERM, lambda *_: stopping.set()) \
        if threading.current_thread() is threading.main_thread() else None   # before uvicorn serves
    stop = threading.Event()
    failure: list = []

    def keep():
        connected = not args.connect
        while not stop.wait(0.2 if stopping.is_set() or not connected else 0.5):
            if stopping.is_set():
                session.stop()              # the loop ends: no push after this
                server.should_exit = True
                return
            if session.error is not None:
                failure.append(ValueError(f"the session's loop failed: {type(session.error).__name__}: "
                                          f"{session.error}"))
                server.should_exit = True
                return
            if app.state.events.missed.is_set():   # a webhook not recorded (Label Studio away): pull
                app.state.events.missed.clear()
                try:
                    sync.pull()
                except Exception as exc:  # noqa: BLE001 - Label Studio still away: pulled again later
                    if not is_transient(exc):
                        failure.append(exc)
                        server.should_exit = True
                        return
                    app.state.events.missed.set()
            if not connected and server.started:
                try:
                    made = connect_backend(sync.client, sync.project, backend["url"], token=backend["token"])
                    print(f"connected the backend to project {sync.project}" + (" (it was there)" if made is None
                                                                                 else f" (ML backend {made})"),
                          flush=True)
                except Exception as exc:  # noqa: BLE001 - said in one line: serving unheard helps nobody
                    failure.append(ValueError(f"Label Studio did not accept the backend at {backend['url']} "
                                              f"(--connect): {_status_of(exc)}"))
                    server.should_exit = True
                    return
                connected = True
            try:
                sync.resume_push()                # a push cut by an outage of Label Studio, if any
            except Exception as exc:  # noqa: BLE001
                failure.append(exc)
                server.should_exit = True
                return

    keeper = threading.Thread(target=keep, name="skdbal-backend-keeper", daemon=True)
    exporter = threading.Thread(target=keep_labels_csv, args=(session, csv_path, stop, 1.0),
                                kwargs={"sync": sync, "report": True}, name="skdbal-labels-csv", daemon=True)
    try:
        pulled = _pull_before_start(sync)
        if sync.full_pulls == 0:               # Label Studio away at the start: the keeper pulls later
            app.state.events.missed.set()
        print(f"skdbal labelstudio: ML backend at {backend['url']} ({pulled} new annotations pulled at start; "
              f"then webhooks only)", flush=True)
        with session:
            keeper.start()
            exporter.start()
            try:
                server.run(sockets=[backend["socket"]])
            finally:
                stop.set()
                app.state.events.close()      # what the webhooks brought is recorded before the session stops
    except KeyboardInterrupt:
        pass
    finally:
        _wind_down(stop, exporter, previous)
    say_stopped(session, store, csv_path, sync, report=True)
    if failure:
        raise failure[0]
    return 0


def _status_of(exc: BaseException, limit: int = 300) -> str:
    """A failed request in one line of at most about ``limit`` characters: Label Studio's status and the
    start of its answer (a 500's answer holds a traceback), or the exception.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> from skdbal.labelstudio.cli import _status_of
    >>> _status_of(SimpleNamespace(status_code=500, body="setup_() missing 'project'; Traceback: File ..."), limit=60)
    "Label Studio answered 500: setup_() missing 'project'; Trace ..."
    >>> _status_of(OSError("no route   to host"))
    'OSError: no route to host'
    """
    status = getattr(exc, "status_code", None)
    said = f"{type(exc).__name__}: {exc}" if status is None else f"Label Studio answered {status}: " \
        f"{getattr(exc, 'body', '')}"
    said = " ".join(said.split())
    return said if len(said) <= limit else said[:limit].rstrip() + " ..."
