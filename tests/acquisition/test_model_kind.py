"""One attribute says which model a strategy's scores read (``model_kind``); the runner, the grid's checks and
the tests read it, a decorator's being the strategy's it wraps."""
import pytest

from skdbal.acquisition import DECORATORS, STRATEGIES, get_strategy, noise_filter
from skdbal.acquisition.base import Strategy


def test_each_strategy_declares_the_model_it_reads():
    assert {name: s.model_kind for name, s in STRATEGIES.items() if s.model_kind != "classifier"} == {
        "predictive_variance": "regressor", "egl": "network_regressor", "ddu": "density"}
    assert Strategy.model_kind == "classifier"


@pytest.mark.parametrize("word", sorted(DECORATORS))
@pytest.mark.parametrize("inner", ["bald", "predictive_variance", "ddu"])
def test_a_decorator_s_model_is_the_wrapped_strategy_s(word, inner):
    assert get_strategy(f"{word}({inner})").model_kind == STRATEGIES[inner].model_kind
    assert noise_filter(noise_filter(STRATEGIES[inner])).model_kind == STRATEGIES[inner].model_kind


def test_the_runner_wraps_a_density_strategy_s_network_by_its_kind():
    from skdbal.experiments.factories import uses_density

    assert [uses_density(n) for n in ("ddu", "stochastic(ddu,softmax,1)", "filter(diverse(ddu,0.1),0.1)", "bald",
                                      "predictive_variance")] == [True, True, True, False, False]


def test_the_grid_refuses_at_spec_time_a_strategy_whose_model_it_cannot_build():
    from skdbal.experiments import get_preset
    from skdbal.experiments.specs import grid_specs

    gal2017 = get_preset("gal2017")
    with pytest.raises(ValueError, match=r"^the predictive_variance strategy needs a regressor: pass last_layer$"):
        grid_specs(gal2017, ["predictive_variance"], [1])
    with pytest.raises(ValueError, match=r"the diverse\(predictive_variance,0\.1\) strategy needs a regressor"):
        grid_specs(gal2017, ["diverse(predictive_variance,0.1)"], [1])
    for last_layer in ((), ("analytic",)):   # no model of the runner has a network regressor's output gradients
        with pytest.raises(ValueError, match=r"^the egl strategy needs a network regressor \(its output gradients, "
                                             r"as skdbal\.MCDropoutRegressor has\)"):
            grid_specs(gal2017, ["egl"], [1], last_layer=last_layer)
    specs, _ = grid_specs(gal2017, ["predictive_variance", "ddu"], [1], last_layer=["analytic"])
    assert [s.strategy for s in specs] == ["predictive_variance", "ddu"]
