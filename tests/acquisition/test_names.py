"""Strategy names: the public parser, the one spelling and the decorators, from skdbal.acquisition."""
import pytest

import skdbal.acquisition as acquisition
from skdbal.acquisition import DECORATORS, canonical_name, get_strategy, parse_strategy_name


def test_the_name_helpers_are_public():
    assert {"canonical_name", "parse_strategy_name", "DECORATORS", "get_strategy"} <= set(acquisition.__all__)
    assert set(DECORATORS) == {"filter", "diverse", "stochastic", "cold_start"}


@pytest.mark.parametrize("name, parts", [
    ("bald", (None, "bald", ())),
    ("filter(bald,dynamic)", ("filter", "bald", ("dynamic",))),
    (" filter( bald , 0.25 ) ", ("filter", "bald", (0.25,))),
    ("diverse(filter(bald,0.1),0.2,embedding)", ("diverse", "filter(bald,0.1)", (0.2, "embedding"))),
    ("filter(diverse(bald,-5e-2),3)", ("filter", "diverse(bald,-5e-2)", (3,))),
    ("nope(whatever,x)", ("nope", "whatever", ("x",))),  # syntax only: the words need not be known
])
def test_parse_strategy_name(name, parts):
    assert parse_strategy_name(name) == parts
    assert [type(p) for p in parse_strategy_name(name)[2]] == [type(p) for p in parts[2]]


def test_parse_strategy_name_agrees_with_get_strategy():
    for name in ("filter(filter(max_entropy,0.25),dynamic)", "diverse(filter(bald,0.1),0.2,embedding)",
                 "filter(diverse(bald,-0.1),dynamic)", "batch_bald"):
        decorator, inner, params = parse_strategy_name(name)
        strategy = get_strategy(name)
        if decorator is None:
            assert repr(strategy) == repr(get_strategy(inner))
            continue
        assert repr(strategy.strategy) == repr(get_strategy(inner))
        names = DECORATORS[decorator][1]
        assert [getattr(strategy, n) for n in names[:len(params)]] == list(params)
        assert canonical_name(name) == name


@pytest.mark.parametrize("bad, match", [
    ("", "expected a name, got the end"), ("filter(bald,0.1", "missing '\\)'"), ("bald)", "unexpected"),
    ("bald()", "expected a name, got '\\)'"), ("filter(bald,)", "expected a parameter"), ("0.1", "expected a name"),
    ("filter(bald;0.1)", "cannot read strategy name"),
])
def test_parse_strategy_name_refuses_malformed_names(bad, match):
    with pytest.raises(ValueError, match=match):
        parse_strategy_name(bad)
    with pytest.raises(ValueError):
        get_strategy(bad)


def test_parse_strategy_name_needs_a_str():
    with pytest.raises(TypeError, match="must be a str"):
        parse_strategy_name(None)
