"""One token per annotator: who a request comes from is the token it carries, never a name it sends.

``skdbal label --annotators alice,bob`` makes a token for each name
(:func:`make_tokens`); the page and every ``/api`` request of an annotator
carry theirs, and the server takes the annotator's name from it
(:func:`annotator_of`). A name in a request body or query is then ignored.
"""
from __future__ import annotations

import hmac
import secrets
import unicodedata
from typing import Dict, Iterable, List, Mapping, Optional

#: Longest annotator name (the store and the page cut names there in single-user mode too).
MAX_NAME = 64
#: Shortest token accepted in ``make_app(annotators=...)``: 16 characters of ``token_urlsafe`` are 96 bits.
MIN_TOKEN = 16


def check_names(names: Iterable) -> List[str]:
    """The annotators' names, checked: strings, non-empty, distinct, at most 64 characters, no control
    characters (and no leading or trailing space); else a ``ValueError`` naming the first bad one.

    Examples
    --------
    >>> from skdbal.labelling._tokens import check_names
    >>> check_names(["alice", "bob"])
    ['alice', 'bob']
    >>> check_names(["alice", "alice"])
    Traceback (most recent call last):
        ...
    ValueError: annotator 'alice' is named twice: the names must be distinct
    """
    out: List[str] = []
    for name in names:
        if not isinstance(name, str):
            raise ValueError(f"an annotator's name must be a string; got {name!r}")
        if not name:
            raise ValueError("an annotator's name is empty")
        if len(name) > MAX_NAME:
            raise ValueError(f"annotator {name[:20]!r}... is named with {len(name)} characters; at most "
                             f"{MAX_NAME} are allowed")
        if any(unicodedata.category(ch).startswith("C") for ch in name):
            raise ValueError(f"annotator {name!r} has a control character in its name")
        if name != name.strip():
            raise ValueError(f"annotator {name!r} has a space at the start or end of its name")
        if name in out:
            raise ValueError(f"annotator {name!r} is named twice: the names must be distinct")
        out.append(name)
    if not out:
        raise ValueError("no annotator named: give at least one name")
    return out


def parse_names(text: str) -> List[str]:
    """The names of a comma-separated list (``--annotators alice,bob``), checked by :func:`check_names`
    (spaces around a comma are dropped).

    Examples
    --------
    >>> from skdbal.labelling._tokens import parse_names
    >>> parse_names("alice, bob")
    ['alice', 'bob']
    >>> parse_names("alice,,bob")
    Traceback (most recent call last):
        ...
    ValueError: an annotator's name is empty
    """
    return check_names(part.strip() for part in str(text).split(","))


def make_tokens(names: Iterable[str]) -> Dict[str, str]:
    """A new random token (``secrets.token_urlsafe(24)``, 192 bits) for each of ``names``, checked.

    Examples
    --------
    >>> from skdbal.labelling._tokens import make_tokens
    >>> tokens = make_tokens(["alice", "bob"])
    >>> sorted(tokens), len(tokens["alice"]), tokens["alice"] != tokens["bob"]
    (['alice', 'bob'], 32, True)
    """
    return {name: secrets.token_urlsafe(24) for name in check_names(names)}


def check_tokens(annotators: Mapping) -> Dict[str, str]:
    """``{name: token}`` checked: valid names (:func:`check_names`), and tokens that are strings of at
    least 16 characters, distinct (one token is one annotator).

    Examples
    --------
    >>> from skdbal.labelling._tokens import check_tokens
    >>> check_tokens({"alice": "a" * 16})
    {'alice': 'aaaaaaaaaaaaaaaa'}
    >>> check_tokens({"alice": "short"})
    Traceback (most recent call last):
        ...
    ValueError: annotator 'alice''s token must be a string of at least 16 characters
    """
    if not isinstance(annotators, Mapping):
        raise ValueError(f"annotators must be a dict of name -> token; got {type(annotators).__name__}")
    names = check_names(list(annotators))
    tokens = [annotators[n] for n in names]
    for name, token in zip(names, tokens):
        if not isinstance(token, str) or len(token) < MIN_TOKEN:
            raise ValueError(f"annotator {name!r}'s token must be a string of at least {MIN_TOKEN} characters")
    if len(set(tokens)) != len(tokens):
        raise ValueError("two annotators have the same token: each needs their own")
    return dict(zip(names, tokens))


def annotator_of(given: str, annotators: Mapping[str, str]) -> Optional[str]:
    """The name whose token ``given`` is, or None. Every token is compared, in constant time each, so
    the time taken does not tell which name came close.

    Examples
    --------
    >>> from skdbal.labelling._tokens import annotator_of
    >>> tokens = {"alice": "a" * 16, "bob": "b" * 16}
    >>> annotator_of("b" * 16, tokens), annotator_of("c" * 16, tokens), annotator_of("", tokens)
    ('bob', None, None)
    """
    found = None
    for name, token in annotators.items():
        if hmac.compare_digest(given.encode(), token.encode()):
            found = name
    return found
