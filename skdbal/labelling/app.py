"""The labelling page: a Starlette application over a :class:`LabellingSession`.

Routes (JSON unless said). Every ``/api`` request carries the session's
token (the ``X-Token`` header, or ``?token=`` for images and downloads), or,
with a token per annotator (``annotators``), its annotator's, which names the
annotator (an ``annotator`` in a body or query is then ignored),
which another site cannot read, so it can neither change state (CSRF) nor
lease items or read labels. The page itself, which holds the token, is
served on loopback only to requests for this machine's own names
(``127.0.0.1``, ``localhost``, ``::1``: no DNS rebinding), and, when the
server is bound to another interface, only with ``?token=``:

- ``GET /``: the page (HTML, CSS and JavaScript inline: nothing is fetched
  from elsewhere);
- ``GET /api/batch?annotator=NAME&n=K&wait=S&have=I,J``: items leased to the
  annotator (at most ``K``, waiting up to ``S`` <= 10 s for a batch), with
  their acquisition scores and the model's guess (none for a second look);
  ``have`` lists the items the page holds already: they are left out, and
  the request waits (a long poll) until there is something new;
- ``GET /api/item/{id}.png``: an item drawn as PNG (images: with a
  :class:`~skdbal.labelling.pools.Pool` of a folder, the original file
  re-encoded and downscaled), ``GET /api/item/{id}``: its ``columns`` and
  ``values`` (tabular rows). Items are served by integer id only: no
  client-supplied path reaches the file system;
- ``POST /api/submit`` ``{"item", "label", "annotator", "request_id"}``,
  ``POST /api/skip`` ``{"item", "annotator"}`` and ``POST /api/undo``
  ``{"item", "annotator", "request_id"}`` (a retried undo with the same id takes back one label only);
- ``GET /api/status`` (:meth:`LabellingSession.status`, with ``pending`` as a
  count and ``annotators``, the names holding items now);
  ``GET /api/versions`` (each model version with its
  test accuracy, if a test set was given, its guess accuracy, its accuracy estimate and what the
  stopping rules said of it);
- ``GET /api/labels.csv`` (the labels, with the second looks), ``GET /api/report.json`` (its companion:
  the accuracy estimate, the test accuracy, the forecast and the rules' verdicts, now and per version),
  ``GET /api/model.pt`` (the current model, with skorch's ``save_params``).

The guide's "The page's HTTP API" (``docs/guide/labelling.md``) documents every route, its fields and
its errors; ``tests/labelling/test_api_doc.py`` checks it against these routes and their answers.

Bodies larger than ``max_body`` bytes are refused (413), unknown items and
classes with 4xx and a message, JSON nested too deeply with 400; any other
failure (the store's disk is full) is a 500 whose JSON ``error`` says what
failed, and nothing is acknowledged then. Nothing from a client is
unpickled. Every call into the session runs in Starlette's thread pool (40 threads) and is short,
so that no request holds up the others, and concurrent submissions share their commits
(:meth:`LabelStore.add_event`). A long poll (``/api/batch?wait=``) holds no thread while it waits:
it waits on the event loop, woken when a label, a batch, a tail or (within a second) a lease run
out may bring its annotator items, and each look it takes is a ``next_batch`` that does not wait
(``skdbal.labelling._long_poll``). With 200 pages waiting, a submit is answered in milliseconds.

Served by ``skdbal label``, the server has limits (:mod:`skdbal.labelling.serving`): a request's
line and headers must come within 10 s, and its body within 10 s more; an idle connection is closed
after 5 s; at most 1000 connections are open (fewer if the process may open fewer files), the
longest-waiting idle one giving way to a new one, else the longest-waiting long poll (answered at once
with what it has, then its connection closed); headers still unfinished after 16 KiB are refused.

Each route is a module-level function (``batch``, ``submit``, ...) that reads the session and
the server's settings from ``request.app.state`` (set by :func:`make_app`), run behind one guard that
checks the token and answers every refusal and failure as JSON.
"""
from __future__ import annotations

import hmac
import io
import json
import logging
import math
import re
import secrets
import struct
import time
import zlib
from functools import partial
from typing import Dict, List, Optional, Sequence

import numpy as np
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from ._long_poll import ChangeWatch, Listener
from ._page import PAGE, class_keys, strategy_labels
from ._tokens import annotator_of, check_tokens
from .export import labels_csv_text
from .json_body import Refused, failure_message, read_json_object
from .pools import Pool
from .progress_report import progress_report
from .serving import GIVE_WAY, LOOPBACK_NAMES, GiveWay
from .session import LabellingSession
from .store import LeaseHeld, NotYours, SkipLimit

__all__ = ["make_app", "png_bytes"]

#: Largest request body accepted, in bytes.
MAX_BODY = 16 * 1024


def png_bytes(image) -> bytes:
    """A 2-d array (any range) as an 8-bit grey-scale PNG, with the standard library only.

    Examples
    --------
    >>> from skdbal.labelling.app import png_bytes
    >>> png_bytes([[0, 1], [1, 0]])[:8]
    b'\\x89PNG\\r\\n\\x1a\\n'
    """
    a = np.asarray(image, dtype=np.float64)
    if a.ndim != 2:
        side = int(round(np.sqrt(a.size)))
        if side * side != a.size:
            raise ValueError(f"cannot draw an item of shape {a.shape} as an image")
        a = a.reshape(side, side)
    lo, hi = float(a.min()), float(a.max())
    g = np.zeros(a.shape, np.uint8) if hi <= lo else np.round(255 * (a - lo) / (hi - lo)).astype(np.uint8)
    raw = b"".join(b"\x00" + row.tobytes() for row in g)
    header = struct.pack(">IIBBBBB", g.shape[1], g.shape[0], 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", header) + _png_chunk(b"IDAT", zlib.compress(raw)) + \
        _png_chunk(b"IEND", b"")


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def make_app(session: LabellingSession, *, token: Optional[str] = None, require_token_everywhere: bool = False,
             images: Optional[bool] = None, max_body: int = MAX_BODY, pool: Optional[Pool] = None,
             annotators: Optional[Dict[str, str]] = None, keys: Optional[Sequence[str]] = None) -> Starlette:
    """The Starlette application of the labelling page.

    Parameters
    ----------
    session : LabellingSession
        Started (or to be started by the caller).
    token : str, optional
        The session's token; a new random one by default (``app.state.token``).
    require_token_everywhere : bool, default=False
        Ask for the token for the page too (every ``/api`` request needs it
        always), and answer to any host name: for a server bound to another
        interface than loopback.
    images : bool, optional
        Items are images (drawn as PNG), else rows of a table; by default
        the pool's kind, else True.
    max_body : int
        Largest request body, in bytes.
    pool : Pool, optional
        The session's pool (:func:`~skdbal.labelling.pools.load_pool`),
        which draws its items: by default ``session.X`` is drawn.
    annotators : dict of str to str, optional
        A token per annotator (``{"alice": token_a, "bob": token_b}``;
        ``skdbal label --annotators`` makes them). Then
        there is no session token (``token`` must be None): the page needs
        its annotator's ``?token=`` on any host, every ``/api`` request one
        of these tokens, and the annotator is the name of the token, never
        the ``annotator`` of a body or query (which is ignored). An
        annotator may undo only an item whose latest label is theirs (else
        403), and may not label or skip an item leased to someone else
        (409); one holds at most a share of the batch leased
        (:meth:`LabellingSession.next_batch`), and skips at most a batch in a row (409).
    keys : sequence of str, optional
        The key that labels each class on the page, one printable character
        per class (a string is split at commas). By default classes named
        ``0``-``9`` take their own digit, others 1-9 then 0 (at most ten
        keyed; the others are clicked).

    Returns
    -------
    starlette.applications.Starlette

    Raises
    ------
    ValueError
        For ``keys`` that are not one distinct character per class, or that
        take the page's own keys (``s``, ``u``).

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from starlette.testclient import TestClient
    >>> from skdbal import ActiveLearner
    >>> from skdbal.labelling import LabellingSession
    >>> from skdbal.labelling.app import make_app
    >>> learner = ActiveLearner(LogisticRegression(), random_state=0, seeding="step")
    >>> session = LabellingSession(learner, np.eye(4), classes=["a", "b"],
    ...                            store=os.path.join(tempfile.mkdtemp(), "s.db"), batch_size=2)
    >>> client = TestClient(make_app(session, token="t0k"))
    >>> client.post("/api/submit", json={"item": 0, "label": "c"}, headers={"X-Token": "t0k"}).json()
    {'error': "unknown class 'c'; the classes are ['a', 'b']"}
    >>> client.post("/api/submit", json={"item": 0, "label": "a"}).status_code      # no token
    403
    >>> client.get("/api/status").status_code          # reads need it too
    403
    >>> client.get("/").status_code                     # the page: for this machine's own names only
    403
    >>> TestClient(make_app(session, token="t0k"), base_url="http://127.0.0.1").get("/").status_code
    200

    One token per annotator: the name is the token's, whatever the body says.

    >>> tokens = {"alice": "alice-token-0123456789", "bob": "bob-token-0123456789"}
    >>> client = TestClient(make_app(session, annotators=tokens))
    >>> session.store.lease([1], "alice", 600)          # alice was handed item 1 (/api/batch does this)
    [1]
    >>> client.post("/api/submit", json={"item": 1, "label": "a", "annotator": "bob"},
    ...             headers={"X-Token": tokens["alice"]}).status_code
    200
    >>> session.store.events()[-1]["annotator"]
    'alice'
    >>> client.get("/api/status", headers={"X-Token": "t0k"}).status_code     # no shared token then
    403

    Keys that cannot work are refused by name:

    >>> make_app(session, keys="a,s")
    Traceback (most recent call last):
        ...
    ValueError: 's' is the page's own key to skip: give 'b' another key
    """
    if annotators is not None:
        if token is not None:
            raise ValueError("give a session token or a token per annotator, not both")
        annotators = check_tokens(annotators)
    else:
        token = token or secrets.token_urlsafe(24)
    if pool is not None and pool.keys != session.keys:
        raise ValueError(f"the pool's {len(pool)} keys are not the session's {len(session.keys)} keys")
    if images is None:
        images = pool is None or pool.kind == "images"
    routes = [
        Route("/", partial(_guarded, page, False)),
        Route("/api/batch", partial(_guarded, batch, True)),
        Route("/api/item/{item:int}.png", partial(_guarded, item_png, True)),
        Route("/api/item/{item:int}", partial(_guarded, item_values, True)),
        Route("/api/submit", partial(_guarded, submit, True), methods=["POST"]),
        Route("/api/skip", partial(_guarded, skip, True), methods=["POST"]),
        Route("/api/undo", partial(_guarded, undo, True), methods=["POST"]),
        Route("/api/status", partial(_guarded, status, True)),
        Route("/api/labels.csv", partial(_guarded, labels_csv, True)),
        Route("/api/versions", partial(_guarded, versions, True)),
        Route("/api/report.json", partial(_guarded, report, True)),
        Route("/api/model.pt", partial(_guarded, model_file, True)),
    ]
    app = Starlette(routes=routes)
    # what the handlers read (request.app.state)
    app.state.session, app.state.pool, app.state.images = session, pool, bool(images)
    app.state.token = token                 # None with a token per annotator
    app.state.annotators = annotators
    app.state.require_token_everywhere, app.state.max_body = require_token_everywhere, max_body
    app.state.page_keys = class_keys(session.classes, keys)
    app.state.changes = ChangeWatch(session)   # wakes the long polls, which hold no thread
    return app


_log = logging.getLogger(__name__)
#: the answer to a request the server has no connection for
_AT_THE_LIMIT = "the server is at its connection limit: ask again in a moment"


# ------------------------------------------------------------------ guards
async def _guarded(handler, always_token: bool, request: Request) -> Response:
    """Run ``handler`` on ``request`` once its token is checked; every refusal and failure as JSON."""
    try:
        request.state.annotator = _check_token(request, always_token)
        give_way = request.scope.get(GIVE_WAY)   # a connection let in over the server's limit
        if handler is not batch and give_way is not None and not give_way.make_room():
            raise Refused(503, _AT_THE_LIMIT)
        return await handler(request)
    except Refused as exc:
        return JSONResponse({"error": exc.message}, status_code=exc.status)
    except ClientDisconnect:   # gone before its body came (or cut off by the server's request timeout)
        _log.debug("%s %s: the client went before its request's body came", request.method, request.url.path)
        return Response(status_code=400)
    except (NotYours, LeaseHeld, SkipLimit) as exc:   # another's label or lease, a skip past one's share
        return JSONResponse({"error": str(exc).strip('"')}, status_code=403 if isinstance(exc, NotYours) else 409)
    except (ValueError, KeyError, TypeError) as exc:
        return JSONResponse({"error": str(exc).strip('"')}, status_code=400)
    except Exception as exc:  # noqa: BLE001 - every answer is JSON the page can show
        said = failure_message(exc, writing=request.method == "POST")
        _log.error("%s %s failed: %s", request.method, request.url.path, said)   # one line
        _log.debug("%s %s failed", request.method, request.url.path, exc_info=True)
        return JSONResponse({"error": said}, status_code=500)


def _check_token(request: Request, always: bool) -> Optional[str]:
    """The annotator whose token the request carries (None in single-user mode), else 403."""
    state = request.app.state
    if not (always or state.require_token_everywhere or state.annotators):
        return None
    given = request.headers.get("x-token") or request.query_params.get("token") or ""
    if state.annotators:
        name = annotator_of(given, state.annotators)
        if name is None:
            raise Refused(403, "missing or wrong token: each annotator opens the page with their own link")
        return name
    if not hmac.compare_digest(given.encode(), state.token.encode()):
        raise Refused(403, "missing or wrong token")
    return None


def _who(request: Request, given) -> str:
    """The annotator of a request: the token's name, else (single-user mode) the name it sends."""
    return request.state.annotator or str(given or "anonymous")[:64]


def _exclusive(request: Request) -> bool:
    """Whether annotators are known by their tokens: leases are capped and labels exclusive then."""
    return bool(request.app.state.annotators)


async def _body(request: Request) -> dict:
    return await read_json_object(request, request.app.state.max_body)


def _request_id_of(data) -> "str | None":
    """The request's id, by which a retried request is answered as the first (at most 100 characters)."""
    request_id = data.get("request_id")
    if request_id is not None and (not isinstance(request_id, str) or len(request_id) > 100):
        raise Refused(400, "request_id must be a string of at most 100 characters")
    return request_id


def _item_of(request: Request, value) -> int:
    try:
        return request.app.state.session.check_item(value)
    except ValueError as exc:
        raise Refused(404, str(exc)) from None


# ------------------------------------------------------------------ routes
async def page(request: Request) -> Response:
    """``GET /``: the page, its token and annotator in it."""
    state = request.app.state
    if not state.require_token_everywhere and (request.url.hostname or "") not in LOOPBACK_NAMES:
        # the page holds the token: on loopback it goes only to this machine's own names, so that
        # another site's name rebound to 127.0.0.1 (DNS rebinding) cannot read it
        raise Refused(403, f"this page is served to {', '.join(sorted(LOOPBACK_NAMES))} only")
    name = request.state.annotator   # with annotators: the page is its annotator's, their token in it
    values = {"__TOKEN__": state.annotators[name] if state.annotators else state.token, "__ANNOTATOR__": name,
              "__CLASSES__": [str(c) for c in state.session.classes], "__KEYS__": state.page_keys,
              "__IMAGES__": state.images, "__STRATEGY_NAMES__": strategy_labels()}
    html = re.sub("__TOKEN__|__ANNOTATOR__|__CLASSES__|__KEYS__|__IMAGES__|__STRATEGY_NAMES__",
                  lambda m: _script_json(values[m.group(0)]), PAGE)
    return HTMLResponse(html, headers={"Cache-Control": "no-store", "X-Frame-Options": "DENY",
                                       "Content-Security-Policy": "default-src 'self'; img-src 'self'; "
                                       "style-src 'unsafe-inline'; script-src 'unsafe-inline'"})


async def batch(request: Request) -> Response:
    """``GET /api/batch``: items leased to the annotator, with their scores and the model's guesses."""
    session = request.app.state.session
    annotator = _who(request, request.query_params.get("annotator"))
    try:
        wait = float(request.query_params.get("wait", 0) or 0)
        n = request.query_params.get("n")
        n = None if n is None else int(n)
        if not math.isfinite(wait):   # NaN passed min/max and would wait for ever
            raise ValueError
    except ValueError:
        raise Refused(400, "wait must be a number of seconds and n an int") from None
    wait = min(max(wait, 0.0), 10.0)
    if n is not None and not 1 <= n <= 1000:
        raise Refused(400, "n must lie in [1, 1000]")
    give_way = request.scope.get(GIVE_WAY)   # at the server's connection limit, the wait may end early
    if give_way is not None and give_way.over and (wait > 0 or not give_way.make_room()):
        raise Refused(503, _AT_THE_LIMIT)    # a long poll makes no room for another: the page asks again later
    have = _item_ids(request.query_params.get("have", ""))
    # listening before the first look: no change is missed
    with request.app.state.changes.listen(annotator, have, _exclusive(request)) as listener:
        if give_way is not None:
            give_way.offer(listener.event.set)
        try:
            items = await _new_items(session, annotator, n, have, wait, capped=_exclusive(request),
                                     listener=listener, give_way=give_way)
        finally:
            if give_way is not None:
                give_way.withdraw()
    guesses = await run_in_threadpool(session.guesses, [b["item"] for b in items])
    audited = bool(session.audit.reserved)   # an audit item has no acquisition score: then no item shows one
    for b, g in zip(items, guesses):
        b["guess"] = None if b.get("second_look") else g   # a second look: nothing to anchor on
        b["score"] = None if audited or b["score"] != b["score"] else b["score"]   # NaN is not JSON
    return JSONResponse({"items": items, "status": await run_in_threadpool(_status_of, session)})


async def item_png(request: Request) -> Response:
    """``GET /api/item/{id}.png``: an image item drawn as PNG."""
    state = request.app.state
    item = _item_of(request, int(request.path_params["item"]))
    if state.pool is None:
        return Response(png_bytes(state.session.X[item]), media_type="image/png")
    if state.pool.kind != "images":
        raise Refused(404, "the items are rows of a table: see /api/item/{id}")
    return Response(await run_in_threadpool(state.pool.png, item), media_type="image/png")   # decoding blocks


async def item_values(request: Request) -> Response:
    """``GET /api/item/{id}``: a row's ``columns`` and ``values``."""
    state = request.app.state
    session, pool = state.session, state.pool
    item = _item_of(request, int(request.path_params["item"]))
    if pool is not None and pool.kind == "table":
        row = pool.row(item)
        return JSONResponse({"item": item, "key": session.keys[item], "columns": [c for c, _ in row],
                             "values": [v for _, v in row]})
    return JSONResponse({"item": item, "key": session.keys[item], "columns": None,
                         "values": np.asarray(session.X[item], dtype=float).ravel().tolist()})


async def submit(request: Request) -> Response:
    """``POST /api/submit``: a label, committed before the answer."""
    session = request.app.state.session
    data = await _body(request)
    item = _item_of(request, data.get("item"))
    label = data.get("label")
    if not isinstance(label, (str, int)) or isinstance(label, bool):
        raise Refused(400, "label must be a class name")
    request_id = _request_id_of(data)
    event = await run_in_threadpool(session.submit, item, label, annotator=_who(request, data.get("annotator")),
                                    request_id=request_id, exclusive=_exclusive(request))
    return JSONResponse({"event": event})   # committed; the page asks /api/status on its own


async def skip(request: Request) -> Response:
    """``POST /api/skip``: decline an item."""
    data = await _body(request)
    event = await run_in_threadpool(request.app.state.session.skip, _item_of(request, data.get("item")),
                                    annotator=_who(request, data.get("annotator")), exclusive=_exclusive(request))
    return JSONResponse({"event": event})


async def undo(request: Request) -> Response:
    """``POST /api/undo``: take back an item's latest label."""
    data = await _body(request)
    event = await run_in_threadpool(request.app.state.session.undo, _item_of(request, data.get("item")),
                                    annotator=_who(request, data.get("annotator")),
                                    request_id=_request_id_of(data), exclusive=_exclusive(request))
    return JSONResponse({"event": event})


async def status(request: Request) -> Response:
    """``GET /api/status``: the session's status, the batch's pending items counted, and the annotators
    holding items now (the page says when nobody but its annotator is there for the second looks)."""
    return JSONResponse(await run_in_threadpool(_status_of, request.app.state.session))


async def labels_csv(request: Request) -> Response:
    """``GET /api/labels.csv``: the labels, with the second looks."""
    text = await run_in_threadpool(labels_csv_text, request.app.state.session)
    return PlainTextResponse(text, media_type="text/csv",
                             headers={"Content-Disposition": 'attachment; filename="labels.csv"'})


async def versions(request: Request) -> Response:
    """``GET /api/versions``: each model version."""
    return JSONResponse({"versions": await run_in_threadpool(request.app.state.session.versions)})


async def report(request: Request) -> Response:
    """``GET /api/report.json``: how good the model is and what the stopping rules say, with every model
    version's figures (:func:`~skdbal.labelling.progress_report.progress_report`): the companion of
    ``labels.csv``."""
    body = await run_in_threadpool(progress_report, request.app.state.session)
    return JSONResponse(body, headers={"Content-Disposition": 'attachment; filename="report.json"'})


async def model_file(request: Request) -> Response:
    """``GET /api/model.pt``: the current model, with skorch's ``save_params``."""
    buffer = io.BytesIO()
    try:
        version = await run_in_threadpool(request.app.state.session.save_model, buffer)
    except (LookupError, TypeError) as exc:   # no model yet; not a skorch net
        raise Refused(404, str(exc)) from None
    return Response(buffer.getvalue(), media_type="application/octet-stream", headers={
        "Content-Disposition": f'attachment; filename="model-v{version}.pt"'})


# ------------------------------------------------------------------ helpers
def _item_ids(text: str) -> List[int]:
    """``have=3,17,5`` as ints (at most 1000), else a 400."""
    parts = [p for p in text.split(",") if p.strip()]
    if len(parts) > 1000 or not all(p.strip().isdigit() for p in parts):
        raise Refused(400, "have must be at most 1000 comma-separated item ids")
    return [int(p) for p in parts]


async def _new_items(session: LabellingSession, annotator: str, n: Optional[int], have: List[int],
                     wait: float, capped: bool = False, *, listener: Listener,
                     give_way: Optional[GiveWay] = None) -> List[dict]:
    """The items newly leased to ``annotator``, none of ``have`` (the page holds those), waiting up to
    ``wait`` s for one: a long poll that answers as soon as there is new work. The items held are not
    leased again, nor their leases renewed: only the annotator's labels, skips and undos keep them, and
    a page whose items' leases ran out (idle) is handed nothing more until its annotator acts.

    The wait holds no thread: ``listener`` (:meth:`ChangeWatch.listen`, opened before the first look)
    wakes it on the event loop when a change may bring the annotator items (a label, a batch, a tail, a
    lease run out), and each look is a ``next_batch(timeout=0)`` in the thread pool. Asked to give way
    (``give_way``, at the server's connection limit), it answers what it has at once: the page asks again."""
    deadline = time.monotonic() + wait
    while True:
        new = await run_in_threadpool(session.next_batch, annotator=annotator, n=n, timeout=0, capped=capped,
                                      holding=have)
        remaining = deadline - time.monotonic()
        if new or remaining <= 0 or (give_way is not None and give_way.asked):
            return new
        # woken on the event loop once a label, batch, tail or lease run out may bring new items
        await listener.wait(remaining)


def _script_json(value) -> str:
    """JSON for inside a ``<script>``: no ``</`` can end the script early."""
    return json.dumps(value).replace("</", "<\\/")


def _status_of(session: LabellingSession) -> dict:
    s = session.status()
    s["pending"] = len(s["pending"])
    # who holds items now: the page says when no one but its annotator is there to give second looks
    s["annotators"] = sorted(set(session.store.live_leases().values()))
    return s
