"""Tasks made outside skdbal, attached to pool items by the file named in their data.

Private to :mod:`skdbal.labelstudio`: :func:`file_key` is public as :func:`skdbal.labelstudio.file_key`
(and :mod:`skdbal.labelstudio.sync` gives it too).
"""
from __future__ import annotations

from typing import Callable, Optional


def file_key(field: str, keys) -> Callable[[dict], Optional[str]]:
    """A ``key_of`` that attaches tasks made outside skdbal by the file named in their ``field``: a URL,
    a path, or Label Studio's local-files address (``/data/local-files/?d=...``), whose trailing path
    is one of ``keys`` (the longest that fits).

    Examples
    --------
    >>> from skdbal.labelstudio.sync import file_key
    >>> key_of = file_key("image", ["cat1.png", "dogs/dog 1.png"])
    >>> key_of({"image": "s3://bucket/photos/cat1.png"})
    'cat1.png'
    >>> key_of({"image": "/data/local-files/?d=photos/dogs/dog%201.png"})
    'dogs/dog 1.png'
    >>> key_of({"image": "https://example.org/cat2.png"}) is None
    True
    """
    from urllib.parse import parse_qs, unquote, urlparse

    known = {str(k) for k in keys}

    def key_of(data: dict) -> Optional[str]:
        value = data.get(field)
        if not isinstance(value, str):
            return None
        url = urlparse(value)
        local = parse_qs(url.query).get("d")      # a local file's path, in ?d=
        path = (local[0] if local else "") or unquote(url.path)
        parts = [p for p in path.split("/") if p]
        for j in range(len(parts)):
            candidate = "/".join(parts[j:])
            if candidate in known:
                return candidate
        return None

    return key_of
