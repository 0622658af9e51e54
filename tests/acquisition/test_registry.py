"""A strategy is declared once: its module declares the class with its name and registers it in one line
(``test_margin = register(Margin)``), one import line brings the module in, and every place that reads strategy
names (get_strategy, the experiment runner, the labelling page, the refusals) knows it."""
import ast
import importlib
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression

import skdbal.acquisition as acquisition
from skdbal.acquisition import DECORATORS, STRATEGIES, display_name, get_strategy, register, unregister
from skdbal.acquisition.base import Strategy

#: The one module: a strategy of the test's own, margin sampling, as a user (or this package) writes it.
MODULE = textwrap.dedent('''
    import numpy as np

    from skdbal.acquisition import register
    from skdbal.acquisition.base import SamplesStrategy


    def margin(samples):
        """One minus the gap between the two likeliest classes of the mean prediction."""
        top2 = np.sort(samples.mean(axis=0), axis=1)[:, -2:]
        return 1.0 - (top2[:, 1] - top2[:, 0])


    class Margin(SamplesStrategy):
        name = "test_margin"
        display_name = "test margin"
        measure = staticmethod(margin)
        needs_stochastic = False


    test_margin = register(Margin)
''')


@pytest.fixture
def registered(tmp_path, monkeypatch):
    (tmp_path / "margin_strategy.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    from margin_strategy import Margin, test_margin  # the one line, as skdbal/acquisition/__init__.py has one

    assert test_margin is STRATEGIES["test_margin"] and type(test_margin) is Margin
    yield sys.modules["margin_strategy"]
    unregister("test_margin")
    del sys.modules["margin_strategy"]
    assert "test_margin" not in STRATEGIES


def test_a_strategy_of_ones_own_is_found_by_name_through_get_strategy(registered):
    Margin = registered.Margin
    strategy = get_strategy("test_margin")
    assert type(strategy) is Margin and strategy is not STRATEGIES["test_margin"]   # a clone, never the shared one
    wrapped = get_strategy("filter(test_margin, 0.2)")
    assert type(wrapped.strategy) is Margin and wrapped.threshold == 0.2
    X = np.array([[0.0], [1.0], [2.0], [3.0]])
    clf = LogisticRegression().fit(X, [0, 0, 1, 1])
    idx, _ = strategy(clf, X, n_instances=2)
    assert sorted(idx.tolist()) == [1, 2]                    # the two points nearest the boundary
    with pytest.raises(ValueError, match=r"test_margin is the package's shared instance \(STRATEGIES\['test_margin'\]\)"
                       r".*clone it first.*Margin\(\.\.\.\)") as refused:
        STRATEGIES["test_margin"].set_params(chunk_size=10)   # the shared instance refuses, as bald's does
    assert "skdbal.acquisition.test_margin" not in str(refused.value)   # no such name: it is the user's
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
    learner = ActiveLearner(LogisticRegression(), registered.Margin(), random_state=0, seeding="step")
    session = LabellingSession(learner,
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
    assert register(type(STRATEGIES["bald"])) is acquisition.bald   # the same class again: nothing changes
    assert register(acquisition.NoiseFilter) is acquisition.NoiseFilter   # a decorator: its class
    assert list(STRATEGIES) == ["bald", "max_entropy", "variation_ratios", "mean_std", "random",
                                "predictive_variance", "egl", "batch_bald", "badge", "ddu", "epig", "typiclust",
                                "probcover"]


def test_the_shared_instances_are_the_registry_s():
    for name, instance in STRATEGIES.items():
        assert getattr(acquisition, name) is instance and type(instance).name == name
    assert {name: params for name, (_, params) in DECORATORS.items()} == {
        "filter": ("threshold",), "diverse": ("weight", "features"), "stochastic": ("mode", "beta"),
        "cold_start": ("cold", "rule", "at")}
    assert [display_name(s) for s in STRATEGIES.values()] == [
        "BALD", "max entropy", "variation ratio", "mean std", "random", "predictive variance", "EGL", "BatchBALD",
        "BADGE", "DDU", "EPIG", "TypiClust", "ProbCover"]


def test_the_package_exports_every_registered_strategy_and_decorator():
    for name, instance in STRATEGIES.items():
        cls = type(instance)
        assert name in acquisition.__all__ and cls.__name__ in acquisition.__all__
        assert getattr(acquisition, cls.__name__) is cls
    for cls, _ in DECORATORS.values():
        assert cls.__name__ in acquisition.__all__ and getattr(acquisition, cls.__name__) is cls
    assert all(hasattr(acquisition, name) for name in acquisition.__all__)


def test_each_module_of_strategies_registers_its_own_and_is_one_line_of_the_package():
    """What makes "one module plus one line" hold for the package's own: every ``register`` call is in the
    strategy's module, and ``__init__`` imports each such module in one line (in the registry's order)."""
    root = Path(acquisition.__file__).parent
    registering = []
    for path in sorted(root.glob("_*.py")):
        calls = [node for node in ast.walk(ast.parse(path.read_text()))
                 if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "register"]
        if calls and path.stem != "_registry":
            registering.append(path.stem)
    init = ast.parse((root / "__init__.py").read_text())
    assert not [node for node in ast.walk(init) if isinstance(node, ast.Call) and getattr(node.func, "id", None)
                in ("register", "unregister")]
    lines = [node.module for node in init.body if isinstance(node, ast.ImportFrom) and node.module in registering]
    assert sorted(lines) == sorted(registering) and len(lines) == len(set(lines))
    modules = [importlib.import_module(f"skdbal.acquisition.{m}") for m in lines]
    owners = [next(m.__name__ for m in modules if isinstance(getattr(m, name, None), type(s)))
              for name, s in STRATEGIES.items()]
    assert owners == sorted(owners, key=[m.__name__ for m in modules].index)   # the lines' order is the registry's


def test_get_strategy_checks_a_decorator_of_ones_own_when_the_name_is_read():
    from skdbal.acquisition.base import StrategyDecorator

    class Top(StrategyDecorator):
        """Passes the call through; its one parameter must be positive."""

        name = "test_top"
        name_params = ("k",)

        def __init__(self, strategy, k=1):
            super().__init__(strategy)
            self.k = k

        def check_params(self):
            if self.k <= 0:
                raise ValueError(f"k must be positive; got {self.k}")

    assert register(Top) is Top
    try:
        assert get_strategy("test_top(bald,2)").k == 2
        with pytest.raises(ValueError, match="k must be positive; got -1"):
            get_strategy("test_top(bald,-1)")
    finally:
        unregister("test_top")
