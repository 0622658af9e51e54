"""A strategy (and a decorator) registered in the user's own code runs in a grid's worker processes: the runner
sends the classes registered beyond the built-ins with each run and registers them there first."""
import numpy as np
import pytest

from skdbal.acquisition import DECORATORS, STRATEGIES, get_strategy, register, unregister
from skdbal.acquisition.base import SamplesStrategy, StrategyDecorator
from skdbal.experiments import run_grid, runner

TINY = dict(dataset="digits", n_queries=1, max_epochs=2, module_params={"kernel_size": 3}, n_samples=4,
            pool_subsample=120, n_validation=40)


def without_times(path):
    lines = path.read_text().splitlines()
    header = lines[0].split(",")
    keep = [i for i, h in enumerate(header) if not h.endswith("time")]
    return [[row.split(",")[i] for i in keep] for row in lines]


class UserMargin(SamplesStrategy):
    """Margin sampling, defined here: no worker process imports it by itself."""

    name = "user_margin"
    needs_stochastic = False

    @staticmethod
    def measure(samples):
        top2 = np.sort(samples.mean(axis=0), axis=1)[:, -2:]
        return 1.0 - (top2[:, 1] - top2[:, 0])


class UserPassthrough(StrategyDecorator):
    """A decorator of the test's own that changes nothing."""

    name = "user_passthrough"


@pytest.fixture
def registered():
    register(UserMargin)
    register(UserPassthrough)
    yield
    unregister("user_margin")
    unregister("user_passthrough")


def test_only_the_classes_beyond_the_built_ins_are_sent(registered):
    assert runner._user_registrations() == [UserMargin, UserPassthrough]
    assert all(type(s).__module__.startswith("skdbal.") for name, s in STRATEGIES.items() if name != "user_margin")


def test_a_worker_registers_what_the_parent_had(registered):
    # a worker's registry: the built-ins and, from an earlier grid, another class under the same name
    class Earlier(UserMargin):
        name = "user_margin"

    unregister("user_margin")
    register(Earlier)
    runner._register_all([UserMargin, UserPassthrough])
    assert type(STRATEGIES["user_margin"]) is UserMargin and DECORATORS["user_passthrough"][0] is UserPassthrough
    runner._register_all([UserMargin, UserPassthrough])  # already there: nothing changes
    assert type(get_strategy("user_passthrough(user_margin)").strategy) is UserMargin


def test_a_users_strategy_runs_in_the_worker_processes(registered, tmp_path):
    names = ["user_margin", "user_passthrough(user_margin)"]
    kw = dict(verbose=False, torch_threads=1, **TINY)
    run_grid("gal2017", names, [2], tmp_path / "serial", n_jobs=1, **kw)
    rows = run_grid("gal2017", names, [2], tmp_path / "parallel", n_jobs=2, **kw)  # was: unknown strategy
    assert sorted({(r["strategy"], r["step"]) for r in rows}) == [
        ("user_margin", 0), ("user_margin", 1), ("user_passthrough(user_margin)", 0),
        ("user_passthrough(user_margin)", 1)]
    assert without_times(tmp_path / "serial" / "results.csv") == without_times(tmp_path / "parallel" / "results.csv")
    # the decorator passes the margin's picks through
    picks = {r["strategy"]: r["query_indices"] for r in rows if r["step"] == 1}
    assert picks["user_margin"] == picks["user_passthrough(user_margin)"]
    config = tmp_path / "parallel" / "runs" / "gal2017__user_passthrough-user_margin__bayesian__seed2.json"
    assert '"strategy_object": "UserPassthrough(strategy=UserMargin())"' in config.read_text()  # read in a worker


def test_a_users_strategy_runs_on_a_dask_cluster(registered, tmp_path):
    distributed = pytest.importorskip("distributed")
    from _helpers import bounded

    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        rows = bounded(lambda: run_grid("gal2017", ["user_margin"], [2], tmp_path, verbose=False,
                                        scheduler=cluster.scheduler_address, **TINY), 240.0, "the grid on the cluster")
    assert [(r["strategy"], r["step"]) for r in rows] == [("user_margin", 0), ("user_margin", 1)]
