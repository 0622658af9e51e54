"""The strategies and decorators by name, and the grammar of names: ``"bald"``, ``"filter(bald,dynamic)"``.

A strategy class declares its own name (``name = "bald"``, and a ``display_name`` people read); one call of
:func:`register`, in the strategy's own module, files it here and returns its shared instance
(``bald = register(BALD)``), after which :func:`get_strategy`, the command line, the experiment runner, the
labelling page and the refusals that list strategies all know it. A decorator class
(:class:`~skdbal.acquisition.base.StrategyDecorator`) registers the same way, with the parameters its names take
(``name_params``). The registry's order is the order in which the strategies' modules are imported
(``skdbal/acquisition/__init__.py``, one line per module).
"""
from __future__ import annotations

import re
from typing import Callable, Dict, List, NamedTuple, Optional, Tuple, Union

from sklearn.base import BaseEstimator  # the bases import this module: its values are typed by the bases' base

__all__ = ["get_strategy", "canonical_name", "parse_strategy_name", "register", "unregister", "display_name",
           "DECORATORS", "STRATEGIES"]

#: Strategies by name, as used by the command line and the experiment runner: each is the package's shared
#: instance of its class (its ``set_params`` refuses: clone it first). Filled by :func:`register`, in the order
#: the strategies' modules register them.
STRATEGIES: Dict[str, BaseEstimator] = {}

#: Decorators by name: the class, and the names of the parameters a name gives after the wrapped strategy.
DECORATORS: Dict[str, Tuple[Callable, Tuple[str, ...]]] = {}

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def register(cls: type):
    """File a strategy class (or a decorator class) under the name it declares.

    A strategy is then known by its name everywhere names are read: :func:`get_strategy` (and so the experiment
    runner and ``skdbal experiment``), the command's help, the labelling page's labels and the refusals that list
    strategies. Its shared instance, ``cls()``, becomes ``STRATEGIES[cls.name]`` and is returned, so that the
    strategy's module binds it by name: ``bald = register(BALD)``. A decorator
    (a :class:`~skdbal.acquisition.base.StrategyDecorator`) becomes ``DECORATORS[cls.name]``, reading the
    parameters ``cls.name_params`` after the strategy; it has no shared instance, and ``cls`` is returned.
    Registering a class again changes nothing (its shared instance stays the one returned before).

    Parameters
    ----------
    cls : type
        A :class:`~skdbal.acquisition.base.Strategy` subclass that sets ``name`` itself (a word), constructible
        without arguments (a decorator: from the strategy it wraps).

    Returns
    -------
    Strategy or type
        The strategy's shared instance; a decorator's class.

    Raises
    ------
    ValueError
        If ``cls`` declares no name of its own, or its name is another class's.
    TypeError
        If ``cls`` is not a Strategy subclass.

    Examples
    --------
    >>> from skdbal.acquisition import get_strategy, register, unregister
    >>> from skdbal.acquisition.base import Strategy
    >>> class FirstFeature(Strategy):
    ...     name = "first_feature"
    ...     def acquisition_scores(self, estimator, X_pool, **kwargs):
    ...         return X_pool[:, 0]
    >>> first_feature = register(FirstFeature)
    >>> first_feature, get_strategy("first_feature") is first_feature   # the shared one; get_strategy clones
    (FirstFeature(), False)
    >>> get_strategy("filter(first_feature,0.2)")
    NoiseFilter(strategy=FirstFeature(), threshold=0.2)
    >>> unregister("first_feature")              # doctest: +ELLIPSIS
    <class '...FirstFeature'>
    """
    # read by what it has, not by importing the bases: the refusals that list this registry are theirs
    if not (isinstance(cls, type) and callable(getattr(cls, "acquire", None))):
        raise TypeError(f"register takes a Strategy subclass; got {cls!r}")
    name = cls.__dict__.get("name")
    if not isinstance(name, str) or not _WORD.fullmatch(name):
        raise ValueError(f"{cls.__name__} must declare its own name, a word (name = \"my_strategy\"); "
                         f"got {name!r}")
    decorator = hasattr(cls, "name_params")  # a StrategyDecorator
    table, other = (DECORATORS, STRATEGIES) if decorator else (STRATEGIES, DECORATORS)
    known = _class_of(table.get(name))
    owner = known or _class_of(other.get(name))
    if owner is not None and owner is not cls:
        raise ValueError(f"the name {name!r} is already {owner.__name__}'s; choose another name for {cls.__name__}")
    if table is DECORATORS:
        DECORATORS[name] = (cls, tuple(cls.name_params))
        return cls
    if known is None:
        STRATEGIES[name] = cls()  # the package's shared instance: its set_params refuses (clone it first)
    return STRATEGIES[name]


def unregister(name: str) -> type:
    """Remove the strategy or decorator of that name (a test's strategy, once done); returns its class.

    Raises
    ------
    KeyError
        For a name not registered.

    Examples
    --------
    >>> from skdbal.acquisition import STRATEGIES, register, unregister
    >>> from skdbal.acquisition.base import Strategy
    >>> class Last(Strategy):
    ...     name = "last"
    ...     def acquisition_scores(self, estimator, X_pool, **kwargs):
    ...         return X_pool[:, -1]
    >>> "last" in STRATEGIES, register(Last) is STRATEGIES["last"]
    (False, True)
    >>> unregister("last").__name__, "last" in STRATEGIES
    ('Last', False)
    """
    if name in STRATEGIES:
        return type(STRATEGIES.pop(name))
    if name in DECORATORS:
        return DECORATORS.pop(name)[0]
    raise KeyError(f"no strategy or decorator is registered as {name!r}")


def _class_of(entry) -> Optional[type]:
    if entry is None:
        return None
    return entry[0] if isinstance(entry, tuple) else type(entry)


def display_name(strategy) -> str:
    """How people read a strategy's (or its class's) name: its ``display_name``, else its ``name`` with spaces
    for underscores, else its class's name.

    Examples
    --------
    >>> from skdbal.acquisition import display_name, max_entropy, DDU
    >>> display_name(max_entropy), display_name(DDU), display_name(lambda model, X, n: X[:n])
    ('max entropy', 'DDU', 'function')
    """
    cls = strategy if isinstance(strategy, type) else type(strategy)
    return (getattr(cls, "display_name", None) or (getattr(cls, "name", None) or "").replace("_", " ")
            or cls.__name__)


_TOKEN = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_.]*|[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|[(),])\s*")


def _tokens(name: str) -> List[str]:
    pos, out = 0, []
    while pos < len(name):
        m = _TOKEN.match(name, pos)
        if not m:
            raise ValueError(f"cannot read strategy name {name!r} at {name[pos:]!r}")
        out.append(m.group(1))
        pos = m.end()
    return out


def _value(token: str):
    try:
        return int(token)
    except ValueError:
        try:
            return float(token)
        except ValueError:
            return token


class _Name(NamedTuple):
    """A name, read: its word, the name it decorates (None for a strategy) and its parameters as tokens;
    ``start:end`` are its tokens."""
    word: str
    inner: Optional["_Name"]
    params: Tuple[str, ...]
    start: int
    end: int


def _parse(name: str) -> Tuple[List[str], _Name]:
    """The one reader of the grammar: ``name``'s tokens and its tree (syntax only; words need not be known)."""
    if not isinstance(name, str):
        raise TypeError(f"a strategy name must be a str; got {type(name).__name__}")
    tokens = _tokens(name)

    def is_word(i):
        return i < len(tokens) and tokens[i] not in "(),"

    def read(i) -> _Name:  # the name that starts at token i
        if not is_word(i) or not (tokens[i][0].isalpha() or tokens[i][0] == "_"):
            got = repr(tokens[i]) if i < len(tokens) else "the end"
            raise ValueError(f"cannot read strategy name {name!r}: expected a name, got {got}")
        if i + 1 >= len(tokens) or tokens[i + 1] != "(":
            return _Name(tokens[i], None, (), i, i + 1)
        inner = read(i + 2)
        j, params = inner.end, []
        while j < len(tokens) and tokens[j] == ",":
            if not is_word(j + 1):
                raise ValueError(f"cannot read strategy name {name!r}: expected a parameter after ','")
            params.append(tokens[j + 1])
            j += 2
        if j >= len(tokens) or tokens[j] != ")":
            raise ValueError(f"cannot read strategy name {name!r}: missing ')'")
        return _Name(tokens[i], inner, tuple(params), i, j + 1)

    tree = read(0)
    if tree.end != len(tokens):
        raise ValueError(f"cannot read strategy name {name!r}: unexpected {' '.join(tokens[tree.end:])!r}")
    return tokens, tree


def parse_strategy_name(name: str) -> Tuple[Optional[str], str, Tuple[Union[int, float, str], ...]]:
    """The outermost layer of a strategy name, read without building anything.

    A name is a word (``"bald"``) or a decorator applied to a name with its
    parameters after it (``"diverse(filter(bald,0.1),0.2,embedding)"``), the
    grammar :func:`get_strategy` reads. This reads it with the same
    parser, but only as text: the words need not be known strategies or
    decorators, and nothing is constructed or checked beyond the syntax.

    Parameters
    ----------
    name : str

    Returns
    -------
    decorator : str or None
        The outermost decorator's name; None for an undecorated name.
    strategy : str
        The name the decorator applies to, spaces removed (numbers keep their
        spelling: :func:`canonical_name` gives the one spelling); for an
        undecorated name, the name itself.
    params : tuple of int, float or str
        The decorator's parameters, each read as an int, else a float, else
        kept as a word; empty for an undecorated name.

    Raises
    ------
    ValueError
        For a name that does not follow the grammar (unbalanced parentheses,
        a missing name, trailing text).
    TypeError
        If ``name`` is not a str.

    Examples
    --------
    >>> from skdbal.acquisition import parse_strategy_name
    >>> parse_strategy_name("diverse(filter(bald, 0.1), 0.2, embedding)")
    ('diverse', 'filter(bald,0.1)', (0.2, 'embedding'))
    >>> parse_strategy_name("filter(bald,dynamic)")
    ('filter', 'bald', ('dynamic',))
    >>> parse_strategy_name("bald")
    (None, 'bald', ())
    >>> parse_strategy_name("filter(bald,0.1")
    Traceback (most recent call last):
        ...
    ValueError: cannot read strategy name 'filter(bald,0.1': missing ')'
    """
    tokens, tree = _parse(name)
    if tree.inner is None:
        return None, tree.word, ()
    return tree.word, "".join(tokens[tree.inner.start:tree.inner.end]), tuple(_value(t) for t in tree.params)


def get_strategy(name: str, strategies=None) -> BaseEstimator:
    """The strategy a name stands for, decorators included.

    A name is a strategy of :data:`skdbal.acquisition.STRATEGIES`, or a
    decorator of :data:`DECORATORS` applied to a name, with its parameters
    after it: ``"filter(bald,0.1)"``, ``"filter(bald,dynamic)"``. Decorators
    nest: ``"filter(filter(bald,0.1),dynamic)"``. Each call returns new
    objects (a clone of a named strategy), so the shared instances are never
    changed through it.

    Parameters
    ----------
    name : str
    strategies : dict, optional
        Base names; :data:`skdbal.acquisition.STRATEGIES` by default.

    Returns
    -------
    Strategy

    Raises
    ------
    ValueError
        For an unknown name, decorator or a malformed expression.

    Examples
    --------
    >>> from skdbal.acquisition import get_strategy
    >>> get_strategy("filter(bald,dynamic)")
    NoiseFilter(strategy=BALD(), threshold='dynamic')
    """
    from sklearn.base import clone

    if strategies is None:
        strategies = STRATEGIES

    def build(node: _Name):
        if node.inner is None:
            if node.word not in strategies:
                raise ValueError(f"unknown strategy {node.word!r} in {name!r}; choose from {sorted(strategies)}")
            return clone(strategies[node.word])
        if node.word not in DECORATORS:
            raise ValueError(f"unknown decorator {node.word!r} in {name!r}; choose from {sorted(DECORATORS)}")
        make, params = DECORATORS[node.word]
        args = [_value(t) for t in node.params]
        if len(args) > len(params):
            raise ValueError(f"{node.word}() takes at most {len(params)} parameter(s) {list(params)}; got {args}")
        decorated = make(build(node.inner), **dict(zip(params, args)))
        decorated.check_params()  # a bad parameter is refused when the name is read, not at the first query
        return decorated

    return build(_parse(name)[1])


def canonical_name(name: str, strategies=None) -> str:
    """The one spelling of a strategy name: no spaces, floats as ``repr``.

    ``"filter(bald, dynamic)"``, ``"diverse(bald,0.10)"`` and
    ``"diverse(bald,1e-1)"`` name the same strategies as
    ``"filter(bald,dynamic)"`` and ``"diverse(bald,0.1)"``; the runner names
    its runs by this spelling, so that one strategy gets one set of files.
    Integers stay integers (``str(int)``: ``+3`` is ``3``).

    Parameters
    ----------
    name : str
    strategies : dict, optional
        Base names; :data:`skdbal.acquisition.STRATEGIES` by default.

    Returns
    -------
    str

    Raises
    ------
    ValueError, TypeError
        As :func:`get_strategy` does, for a name it cannot read.

    Examples
    --------
    >>> from skdbal.acquisition import canonical_name
    >>> [canonical_name(n) for n in ("filter( bald , dynamic )", "diverse(bald,0.10)", "filter(bald,1e-1)")]
    ['filter(bald,dynamic)', 'diverse(bald,0.1)', 'filter(bald,0.1)']
    >>> canonical_name("diverse(bald,-5e-2)")
    'diverse(bald,-0.05)'
    """
    get_strategy(name, strategies)  # a name it cannot read raises here
    out = []
    for token in _tokens(name):
        value = _value(token)
        out.append(repr(float(value)) if isinstance(value, float) else str(value))
    return "".join(out)
