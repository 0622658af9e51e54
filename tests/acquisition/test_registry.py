"""A strategy is declared once: its class carries its name, one ``register`` line files it, and every place
that reads strategy names (get_strategy, the experiment runner, the labelling page, the refusals) knows it."""
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression

import skdbal.acquisition as acquisition
from skdbal.acquisition import DECORATORS, STRATEGIES, display_name, get_strategy, register, unregister
from skdbal.acquisition.base import SamplesStrategy, Strategy


def margin(samples):
    """One minus the gap between the two likeliest classes of the mean prediction."""
    top2 = np.sort(samples.mean(axis=0), axis=1)[:, -2:]
    return 1.0 - (top2[:, 1] - top2[:, 0])


class Margin(SamplesStrategy):
    """A strategy of the test's own: margin sampling."""

    name = "test_margin"
    display_name = "test margin"
    measure = staticmethod(margin)
    needs_stochastic = False


@pytest.fixture
def registered():
    register(Margin)                       # the one line
    yield Margin
    unregister("test_margin")
    assert "test_margin" not in STRATEGIES


def test_a_strategy_of_ones_own_is_found_by_name_through_get_strategy(registered):
    strategy = get_strategy("test_margin")
    assert type(strategy) is Margin and strategy is not STRATEGIES["test_margin"]   # a clone, never the shared one
    wrapped = get_strategy("filter(test_margin, 0.2)")
    assert type(wrapped.strategy) is Margin and wrapped.threshold == 0.2
    X = np.array([[0.0], [1.0], [2.0], [3.0]])
    clf = LogisticRegression().fit(X, [0, 0, 1, 1])
    idx, _ = strategy(clf, X, n_instances=2)
    assert sorted(idx.tolist()) == [1, 2]                    # the two points nearest the boundary
    with pytest.raises(ValueError, match="shared instance"):
        STRATEGIES["test_margin"].set_params(chunk_size=10)   # the shared instance refuses, as bald's does
    assert clone(STRATEGIES["test_margin"]).set_params(chunk_size=10).chunk_size == 10


def test_through_the_experiment_runner(registered):
    from skdbal.experiments import get_preset
    from skdbal.experiments.specs import grid_specs

    specs, arguments = grid_specs(get_preset("gal2017"), ["test_margin", "filter(test_margin,0.2)"], seeds=[1])
    assert arguments["strategies"] == ["test_margin", "filter(test_margin,0.2)"]
    assert [spec.config()["strategy_object"] for spec in specs] == [
        "Margin()", "NoiseFilter(strategy=Margin(), threshold=0.2)"]


def test_in_the_command_line_help(registered):
    from skdbal.experiments.cli import _experiment_epilog

    assert "test_margin" in _experiment_epilog().replace("\n  ", " ")


def test_in_the_labelling_page(registered, flat_digits, tmp_path):
    from starlette.testclient import TestClient

    from skdbal import ActiveLearner
    from skdbal.labelling import LabellingSession
    from skdbal.labelling._page import strategy_labels
    from skdbal.labelling.app import make_app

    assert strategy_labels()["test_margin"] == "test margin"
    X, _ = flat_digits
    session = LabellingSession(ActiveLearner(LogisticRegression(), Margin(), random_state=0, seeding="step"),
                               X[:40], classes=[0, 1], store=tmp_path / "s.db", batch_size=5)
    assert session.status()["strategy"] == "test_margin"             # what the page looks up
    with TestClient(make_app(session, token="secret"), base_url="http://127.0.0.1:8765") as c:
        page = c.get("/").text
    assert '"test_margin": "test margin"' in page and "__STRATEGY_NAMES__" not in page
    assert '"max_entropy": "max entropy"' in page


def test_in_the_refusals(registered):
    with pytest.raises(ValueError, match="test_margin"):
        get_strategy("no_such_strategy")                  # "choose from [...]" lists it
    from skdbal.acquisition import badge
    from skdbal.acquisition.base import ChunkedPool

    with pytest.raises(TypeError, match="test margin"):   # the strategies a chunked pool takes include it
        badge.plan_chunks(None, 2, ChunkedPool([5]))


def test_unregistered_it_is_gone_everywhere():
    with pytest.raises(ValueError, match="unknown strategy 'test_margin'"):
        get_strategy("test_margin")
    from skdbal.labelling._page import strategy_labels

    assert "test_margin" not in strategy_labels()


def test_register_refuses_what_it_cannot_file():
    class Nameless(Strategy):
        pass

    class Clash(Strategy):
        name = "bald"

    with pytest.raises(ValueError, match="must declare its own name"):
        register(Nameless)
    with pytest.raises(ValueError, match="already BALD's"):
        register(Clash)
    with pytest.raises(TypeError, match="Strategy subclass"):
        register(len)
    register(type(STRATEGIES["bald"]))                   # the same class again: nothing changes
    assert list(STRATEGIES) == ["bald", "max_entropy", "variation_ratios", "mean_std", "random",
                                "predictive_variance", "egl", "batch_bald", "badge", "ddu", "epig"]


def test_the_shared_instances_are_the_registry_s():
    for name, instance in STRATEGIES.items():
        assert getattr(acquisition, name) is instance and type(instance).name == name
    assert {name: params for name, (_, params) in DECORATORS.items()} == {
        "filter": ("threshold",), "diverse": ("weight", "features"), "stochastic": ("mode", "beta")}
    assert [display_name(s) for s in STRATEGIES.values()] == [
        "BALD", "max entropy", "variation ratio", "mean std", "random", "predictive variance", "EGL", "BatchBALD",
        "BADGE", "DDU", "EPIG"]
