"""A request's JSON body, read within a size bound: what the labelling page and the Label Studio backend take.

A body is read as it streams, and refused (:class:`Refused`, with an HTTP status) when it is larger than
the bound, not JSON, nested deeper than the parser goes, or not an object. The servers answer a refusal
as JSON with its status, never with a traceback; any other failure is a 500 whose JSON ``error`` is
:func:`failure_message`.
"""
from __future__ import annotations

import json
import sqlite3

__all__ = ["Refused", "failure_message", "read_json_object"]


class Refused(Exception):
    """A request refused with an HTTP ``status`` and a ``message`` that says why.

    Examples
    --------
    >>> from skdbal.labelling.json_body import Refused
    >>> e = Refused(413, "request body larger than 10 bytes")
    >>> e.status, e.message
    (413, 'request body larger than 10 bytes')
    """

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


async def read_json_object(request, max_body: int) -> dict:
    """The body of ``request`` (a Starlette request) as a JSON object; :class:`Refused` otherwise.

    An empty body is ``{}``. A ``Content-Length`` over ``max_body`` is refused before anything is read,
    and a body that streams past it is refused as soon as it does.

    Examples
    --------
    >>> import asyncio
    >>> from skdbal.labelling.json_body import Refused, read_json_object
    >>> class Request:                       # a stand-in: the headers and the body's parts
    ...     def __init__(self, body):
    ...         self.headers, self.body = {"content-length": str(len(body))}, body
    ...     async def stream(self):
    ...         yield self.body
    >>> asyncio.run(read_json_object(Request(b'{"item": 3}'), 100))
    {'item': 3}
    >>> try:
    ...     asyncio.run(read_json_object(Request(b"[1, 2]"), 100))
    ... except Refused as e:
    ...     print(e.status, e.message)
    400 the body must be a JSON object
    """
    length = request.headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) > max_body):
        raise Refused(413, f"request body larger than {max_body} bytes")
    raw = b""
    async for part in request.stream():
        raw += part
        if len(raw) > max_body:
            raise Refused(413, f"request body larger than {max_body} bytes")
    try:
        data = json.loads(raw or b"{}")
    except ValueError:
        raise Refused(400, "the body must be JSON") from None
    except RecursionError:   # a few KiB of [[[[... nest deeper than the parser goes
        raise Refused(400, "the body's JSON is nested too deeply") from None
    if not isinstance(data, dict):
        raise Refused(400, "the body must be a JSON object")
    return data


def failure_message(exc: BaseException, *, writing: bool = False) -> str:
    """What failed, in the ``error`` of a 500 and its log line: the store (written, if the request was
    ``writing``, else read), or the server; on one line, whatever the error's text holds.

    Examples
    --------
    >>> import sqlite3
    >>> from skdbal.labelling.json_body import failure_message
    >>> failure_message(sqlite3.OperationalError("database or disk is full"), writing=True)
    'the store could not be written: database or disk is full'
    >>> failure_message(RuntimeError("boom"))
    'the server failed: RuntimeError: boom'
    >>> failure_message(RuntimeError("the model\\nis gone"))
    'the server failed: RuntimeError: the model is gone'
    """
    if isinstance(exc, sqlite3.Error):
        said = f"the store could not be {'written' if writing else 'read'}: {exc}"
    else:
        said = f"the server failed: {type(exc).__name__}: {exc}"
    return " ".join(said.split())
