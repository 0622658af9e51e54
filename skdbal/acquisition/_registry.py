"""Strategies by name, decorators included: ``"bald"``, ``"filter(bald,dynamic)"``."""
from __future__ import annotations

import re
from typing import Callable, Dict, List, Optional, Tuple, Union

from ._badge import BADGE
from ._batchbald import BatchBALD
from ._ddu import DDU
from ._diversity import diversity_penalty
from ._epig import EPIG
from ._noise import noise_filter
from ._pointwise import BALD, MaxEntropy, MeanStd, RandomSampling, VariationRatios
from ._regression import ExpectedGradientLength, PredictiveVariance
from ._stochastic import stochastic_batch
from ._strategy import Strategy

__all__ = ["get_strategy", "canonical_name", "parse_strategy_name", "DECORATORS", "STRATEGIES"]

#: Decorators by name: constructor and the names of its positional parameters.
DECORATORS: Dict[str, Tuple[Callable, Tuple[str, ...]]] = {
    "filter": (noise_filter, ("threshold",)),
    "diverse": (diversity_penalty, ("weight", "features")),
    "stochastic": (stochastic_batch, ("mode", "beta")),
}

def _shared(instance, name: str):
    """``instance``, marked as the package's shared one: its set_params refuses (clone it first)."""
    instance._shared_name = name
    return instance


bald = _shared(BALD(), "bald")
max_entropy = _shared(MaxEntropy(), "max_entropy")
variation_ratios = _shared(VariationRatios(), "variation_ratios")
mean_std = _shared(MeanStd(), "mean_std")
random = _shared(RandomSampling(), "random")
predictive_variance = _shared(PredictiveVariance(), "predictive_variance")
egl = _shared(ExpectedGradientLength(), "egl")
batch_bald = _shared(BatchBALD(), "batch_bald")
badge = _shared(BADGE(), "badge")
ddu = _shared(DDU(), "ddu")
epig = _shared(EPIG(), "epig")

#: Strategies by name, as used by the command line and the experiment runner: each is the instance of that name.
STRATEGIES: Dict[str, Strategy] = {
    name: globals()[name] for name in ("bald", "max_entropy", "variation_ratios", "mean_std", "random",
                                       "predictive_variance", "egl", "batch_bald", "badge", "ddu", "epig")}


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


def parse_strategy_name(name: str) -> Tuple[Optional[str], str, Tuple[Union[int, float, str], ...]]:
    """The outermost layer of a strategy name, read without building anything.

    A name is a word (``"bald"``) or a decorator applied to a name with its
    parameters after it (``"diverse(filter(bald,0.1),0.2,embedding)"``), the
    grammar :func:`get_strategy` reads. This reads it with the same
    tokenizer, but only as text: the words need not be known strategies or
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
    if not isinstance(name, str):
        raise TypeError(f"a strategy name must be a str; got {type(name).__name__}")
    tokens = _tokens(name)

    def is_word(i):
        return i < len(tokens) and tokens[i] not in "(),"

    def skip(i):  # the position after the name that starts at i
        if not is_word(i) or not (tokens[i][0].isalpha() or tokens[i][0] == "_"):
            got = repr(tokens[i]) if i < len(tokens) else "the end"
            raise ValueError(f"cannot read strategy name {name!r}: expected a name, got {got}")
        i += 1
        if i < len(tokens) and tokens[i] == "(":
            i = skip(i + 1)
            while i < len(tokens) and tokens[i] == ",":
                if not is_word(i + 1):
                    raise ValueError(f"cannot read strategy name {name!r}: expected a parameter after ','")
                i += 2
            if i >= len(tokens) or tokens[i] != ")":
                raise ValueError(f"cannot read strategy name {name!r}: missing ')'")
            i += 1
        return i

    end = skip(0)
    if end != len(tokens):
        raise ValueError(f"cannot read strategy name {name!r}: unexpected {' '.join(tokens[end:])!r}")
    if len(tokens) == 1:
        return None, tokens[0], ()
    inner_end = skip(2)
    return tokens[0], "".join(tokens[2:inner_end]), tuple(_value(t) for t in tokens[inner_end + 1:-1:2])


def get_strategy(name: str, strategies=None) -> Strategy:
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
    if not isinstance(name, str):
        raise TypeError(f"a strategy name must be a str; got {type(name).__name__}")
    tokens = _tokens(name)

    def parse(i):
        word = tokens[i] if i < len(tokens) else ""
        if i + 1 < len(tokens) and tokens[i + 1] == "(":
            if word not in DECORATORS:
                raise ValueError(f"unknown decorator {word!r} in {name!r}; choose from {sorted(DECORATORS)}")
            inner, i = parse(i + 2)
            args = []
            while i < len(tokens) and tokens[i] == ",":
                if i + 1 >= len(tokens):
                    raise ValueError(f"cannot read strategy name {name!r}")
                args.append(_value(tokens[i + 1]))
                i += 2
            if i >= len(tokens) or tokens[i] != ")":
                raise ValueError(f"cannot read strategy name {name!r}: missing ')'")
            make, params = DECORATORS[word]
            if len(args) > len(params):
                raise ValueError(f"{word}() takes at most {len(params)} parameter(s) {list(params)}; got {args}")
            decorated = make(inner, **dict(zip(params, args)))
            for check in ("_check_threshold", "_check_params"):
                if hasattr(decorated, check):
                    getattr(decorated, check)()
            return decorated, i + 1
        if word not in strategies:
            raise ValueError(f"unknown strategy {word!r} in {name!r}; choose from {sorted(strategies)}")
        return clone(strategies[word]), i + 1

    strategy, end = parse(0)
    if end != len(tokens):
        raise ValueError(f"cannot read strategy name {name!r}: unexpected {' '.join(tokens[end:])!r}")
    return strategy


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
