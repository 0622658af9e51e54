"""The limits of skdbal's web servers: the labelling page (``skdbal label``) and the Label Studio backend.

Both are served by uvicorn with :func:`server_config`, which bounds what a client can hold:

- **a request must arrive in time**: its line and headers within :data:`REQUEST_TIMEOUT` seconds of
  the connection opening (or of its first byte, on a kept-alive connection), and its body within the
  same time again; else the connection is closed. uvicorn has no such timeout of its own (its
  keep-alive timer starts only after a first response), so a client that sends half a request line
  would hold its connection, and a file descriptor, for ever; :class:`BoundedH11Protocol` adds it
  (so the servers speak HTTP/1.1 through h11, uvicorn's pure-Python parser, even where httptools is
  installed);
- **idle connections end**: a kept-alive connection with no request for :data:`KEEP_ALIVE` seconds is
  closed (uvicorn's ``timeout_keep_alive``);
- **connections are counted**: at most :data:`MAX_CONNECTIONS` open at once (fewer when the process
  may open fewer files: see :func:`max_connections`). A new connection beyond them first closes the
  connection that has waited longest for a request (half-sent or idle), so that stalled clients cannot
  shut out a working one. When none waits for a request but some wait for something to answer (long
  polls, which say so through :class:`GiveWay`), the new connection is let in for one request: unless
  that is a long poll itself (which the application refuses, a 503: the page asks again later), the
  long poll that has waited longest is answered at once and its connection closed after the answer
  (the page asks again). When every connection is busy with another request, the new one is closed
  at once. Requests being answered at once are capped as well
  (uvicorn's ``limit_concurrency``: beyond it, a 503);
- **headers are small**: a request line and headers still incomplete after :data:`MAX_HEADER_BYTES`
  are refused with a 400 (``h11_max_incomplete_event_size``); bodies are capped by each application
  (:data:`skdbal.labelling.app.MAX_BODY`);
- **a stop is prompt**: on Ctrl-C or SIGTERM, requests in progress get :data:`GRACEFUL_SHUTDOWN`
  seconds to finish (a submit is answered once committed, in milliseconds; a waiting long poll is
  ended), then the server stops.

The labelling page's long polls (``/api/batch?wait=``) wait on the event loop and hold no worker
thread (:mod:`skdbal.labelling.app`), so the open pages of a team do not slow a submit.
"""
from __future__ import annotations

import asyncio
import collections
import resource
import time
import weakref
from typing import Any, Callable, Dict, MutableMapping, Optional, cast

from uvicorn import Config
from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle

__all__ = ["GRACEFUL_SHUTDOWN", "GIVE_WAY", "KEEP_ALIVE", "LOOPBACK_NAMES", "MAX_CONNECTIONS",
           "MAX_HEADER_BYTES", "REQUEST_TIMEOUT", "BACKLOG", "BoundedH11Protocol", "GiveWay", "max_connections",
           "server_config"]

#: This machine's own host names: the page, and the Label Studio backend without a token, answer to
#: these only (a ``Host`` of another name, as a DNS-rebinding page sends, is refused).
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})

#: Seconds a connection has to send a request's line and headers, and again its body.
REQUEST_TIMEOUT = 10.0
#: Seconds an idle kept-alive connection stays open.
KEEP_ALIVE = 5
#: Most connections open at once (fewer when the process may open fewer files).
MAX_CONNECTIONS = 1000
#: Connections waiting to be accepted, in the kernel's queue.
BACKLOG = 1024
#: Largest request line and headers, in bytes (h11's own default, made explicit).
MAX_HEADER_BYTES = 16 * 1024
#: Seconds the requests in progress get to finish when the server stops.
GRACEFUL_SHUTDOWN = 3
#: File descriptors kept free for everything else (the store, the pool's files, logs).
_SPARE_FILES = 64
#: Most connections over the limit at once while the long polls that gave way to them are answered.
_GIVING_WAY = 16
#: The key of a request's :class:`GiveWay` in its ASGI scope (set by :class:`BoundedH11Protocol`).
GIVE_WAY = "skdbal.give_way"


class GiveWay:
    """How a request that waits for something to answer (a long poll) offers to end its wait early, so
    that its connection gives way to a new one at the connection limit.

    :class:`BoundedH11Protocol` puts one in each request's scope, under :data:`GIVE_WAY`. While the
    request waits it offers to give way (:meth:`offer`, with a function that ends its wait). A request
    on a connection let in over the limit (:attr:`over`) calls :meth:`make_room`: the request that has
    offered longest is asked (:meth:`ask`), its wait ends (:attr:`asked` is True), it answers what it
    has, and its connection is closed after the answer. A connection over the limit whose request makes
    no room is closed once it is answered.

    Examples
    --------
    >>> from skdbal.labelling.serving import GiveWay
    >>> way = GiveWay()
    >>> way.willing
    False
    >>> way.offer(lambda: print("the wait ends"))
    >>> way.willing
    True
    >>> way.ask()
    the wait ends
    >>> way.asked, way.willing
    (True, False)
    """

    def __init__(self, over: bool = False, make_room: Optional[Callable[[], bool]] = None) -> None:
        self.asked = False
        self.since = 0.0
        #: whether the request's connection was let in over the connection limit
        self.over = bool(over)
        self._end: Optional[Callable[[], None]] = None
        self._make_room = make_room

    def make_room(self) -> bool:
        """On a connection over the limit, ask the longest waiting long poll to give way; whether there is
        room for this request now (always, on a connection within the limit)."""
        if self.over and self._make_room is not None and self._make_room():
            self.over = False
        return not self.over

    @property
    def willing(self) -> bool:
        """Whether the request waits and may be asked to give way."""
        return self._end is not None and not self.asked

    def offer(self, end: Callable[[], None]) -> None:
        """Offer to give way while waiting; ``end`` ends the wait (called on the event loop)."""
        self._end, self.since = end, time.monotonic()

    def withdraw(self) -> None:
        """The wait is over: no longer willing."""
        self._end = None

    def ask(self) -> None:
        """Ask the request to give way: its wait ends now."""
        end, self._end, self.asked = self._end, None, True
        if end is not None:
            end()


def max_connections(limit: int = MAX_CONNECTIONS) -> int:
    """The most connections to keep open: ``limit``, or fewer if the process may open fewer files
    (its soft ``RLIMIT_NOFILE``, less some for the store, the pool's files and logs).

    Examples
    --------
    >>> from skdbal.labelling.serving import max_connections
    >>> 1 <= max_connections(500) <= 500
    True
    """
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return limit
    return max(1, min(limit, soft - _SPARE_FILES))


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a request timeout and a bounded number of connections.

    A connection must send a request's line and headers within :attr:`request_timeout` seconds of
    opening (on a kept-alive connection: of the next request's first byte), and its body within as
    long again; else it is closed. At :attr:`max_connections` open, a new connection closes the one that
    has waited longest for a request; else the long poll that has waited longest (:class:`GiveWay`) is
    answered at once, and its connection closed after; else (every one busy with another request) the
    new one is closed itself.
    :func:`server_config` makes a subclass with its own limits.

    Examples
    --------
    >>> from skdbal.labelling.serving import BoundedH11Protocol
    >>> BoundedH11Protocol.request_timeout, BoundedH11Protocol.max_connections
    (10.0, 1000)
    """

    request_timeout: float = REQUEST_TIMEOUT
    max_connections: int = MAX_CONNECTIONS
    #: per server: its connections waiting for a request, oldest first
    _waiting_of: "weakref.WeakKeyDictionary[Any, collections.OrderedDict]" = weakref.WeakKeyDictionary()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._timer: Optional[asyncio.TimerHandle] = None
        # the request whose body is awaited, once its headers came
        self._request: Optional[RequestResponseCycle] = None
        self._give_way: Optional[GiveWay] = None   # the request in progress's
        self._closing_after = False                   # it gave way: closed once answered
        self._over = False                            # let in over the limit, for a request that makes room
        waiting = self._waiting_of.setdefault(self.server_state, collections.OrderedDict())
        self._waiting = waiting
        super().connection_made(transport)
        extra = sum(1 for c in self.connections if getattr(c, "beyond_the_limit", False))
        if len(self.connections) - extra > self.max_connections:
            if waiting:   # the connection that has waited longest for a request gives way
                oldest, _ = waiting.popitem(last=False)
                oldest.drop("the connection limit was reached and it sent no request")
            elif extra < _GIVING_WAY and self._long_polls():   # its request may make room (GiveWay)
                self._over = True
            else:         # every connection is busy with a request: this one waits for none
                self.drop("the connection limit was reached")
                return
        self._wait_for_request()

    def data_received(self, data: bytes) -> None:
        cycle = self.cycle
        super().data_received(data)
        if self.transport.is_closing():
            return
        if self.cycle is not cycle:                      # a request's headers came in full
            self._give_way = GiveWay(self._over, self._make_room)
            cast(MutableMapping[str, Any], self.cycle.scope)[GIVE_WAY] = self._give_way   # read by the app
            self._stop_waiting()
            if self.cycle.more_body:                     # its body has as long again
                self._request = self.cycle
                self._timer = self.loop.call_later(self.request_timeout, self._timed_out, "its body")
        elif self._request is not None and not self._request.more_body:   # the body came in full
            self._stop_waiting()
        elif self._timer is None and (self.cycle is None or self.cycle.response_complete):
            self._wait_for_request()                      # the first bytes of the next request

    def on_response_complete(self) -> None:
        super().on_response_complete()                  # uvicorn's keep-alive timer: idle from now
        self._stop_waiting()
        if self._closing_after or self._over:
            self.drop("it gave way at the connection limit" if self._closing_after else
                      "it was let in over the connection limit and made no room")
            return
        if not self.transport.is_closing() and self.cycle.response_complete:
            self._waiting[self] = None                  # it waits for a request again (not pipelined)

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self._stop_waiting()
        super().connection_lost(exc)

    # ------------------------------------------------------------------
    @property
    def beyond_the_limit(self) -> bool:
        """Whether the connection is counted beyond the limit: let in over it for one request, or giving
        way (closed once answered)."""
        return self._over or self._closing_after

    @property
    def waiting_since(self) -> Optional[float]:
        """Since when (``time.monotonic``) the request in progress waits and may give way, else None."""
        way = self._give_way
        return way.since if way is not None and way.willing else None

    def give_way(self) -> None:
        """End the request's wait now (:meth:`GiveWay.ask`); the connection is closed once it is answered."""
        self._closing_after = True
        if self._give_way is not None:
            self._give_way.ask()

    def _long_polls(self) -> list:
        """The other connections whose requests wait and may give way (:class:`GiveWay`)."""
        return [c for c in self.connections if c is not self and getattr(c, "waiting_since", None) is not None]

    def _make_room(self) -> bool:
        """Ask the long poll that has waited longest to give way: answered now, closed after; whether one did."""
        polls = self._long_polls()
        if not polls:
            return False
        min(polls, key=lambda c: c.waiting_since).give_way()
        self._over = False
        return True

    def _wait_for_request(self) -> None:
        self._stop_waiting()
        self._waiting[self] = None
        self._timer = self.loop.call_later(self.request_timeout, self._timed_out, "a request")

    def _stop_waiting(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._request = None
        self._waiting.pop(self, None)

    def _timed_out(self, what: str) -> None:
        self._timer = None
        self.drop(f"it sent {what} too slowly (more than {self.request_timeout:g} s)")

    def drop(self, why: str) -> None:
        """Close the connection (``why`` is logged at debug level)."""
        self._stop_waiting()
        if not self.transport.is_closing():
            self.logger.debug("closing a connection: %s", why)
            self.transport.close()


def server_config(app, *, host: str, port: int, log_level: str = "warning", request_timeout: float = REQUEST_TIMEOUT,
                  keep_alive: int = KEEP_ALIVE, connections: int = MAX_CONNECTIONS, **kwargs) -> Config:
    """A uvicorn :class:`~uvicorn.Config` for ``app`` with skdbal's server limits (see the module).

    Parameters
    ----------
    app : ASGI application
    host, port : str, int
        Where to serve (a socket given to ``Server.run(sockets=...)`` is served instead).
    log_level : str, default="warning"
    request_timeout : float
        Seconds a connection has to send a request's line and headers, and again its body.
    keep_alive : int
        Seconds an idle kept-alive connection stays open.
    connections : int
        Most connections open at once (:func:`max_connections` lowers it to what the process may open).
    **kwargs
        Passed to :class:`uvicorn.Config`.

    Returns
    -------
    uvicorn.Config

    Examples
    --------
    >>> from skdbal.labelling.serving import server_config
    >>> config = server_config(lambda scope, receive, send: None, host="127.0.0.1", port=0)
    >>> config.timeout_keep_alive, config.http.request_timeout, config.h11_max_incomplete_event_size
    (5, 10.0, 16384)
    """
    most = max_connections(connections)
    protocol = type("BoundedH11Protocol", (BoundedH11Protocol,),
                    {"request_timeout": float(request_timeout), "max_connections": most})
    # uvicorn answers 503 from ``limit_concurrency`` connections (or requests) on: one more than are kept,
    # and those whose long polls give way, for the moments they are answered
    options: Dict[str, Any] = dict(
        host=host, port=port, log_level=log_level, http=protocol, timeout_keep_alive=keep_alive,
        limit_concurrency=most + 1 + _GIVING_WAY, backlog=BACKLOG, h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN)
    options.update(kwargs)
    return Config(app, **options)
