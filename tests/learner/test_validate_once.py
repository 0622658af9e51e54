"""Validate once, at the public entry: one query checks its pool, ``n_instances`` and pool-aligned keywords
once, and reaches the model through ``as_predictive`` once, however many layers it crosses."""
import collections
import sys

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression

from skdbal import ActiveLearner, _validation, predictive
from skdbal.acquisition import DECORATORS, STRATEGIES, get_strategy, max_entropy
from skdbal.acquisition.base import pool_scores_of

CHECKS = {"check_pool": _validation.check_pool, "check_n_instances": _validation.check_n_instances,
          "pool_kwargs": _validation.pool_kwargs, "as_predictive": predictive.as_predictive}


@pytest.fixture
def counts(monkeypatch):
    """Every reference to the checks, in every loaded module of the package, counts its calls."""
    counted = collections.Counter()

    def counting(name, fn):
        def wrapper(*args, **kwargs):
            counted[name] += 1
            return fn(*args, **kwargs)
        return wrapper

    wrappers = {name: counting(name, fn) for name, fn in CHECKS.items()}
    for module in [m for name, m in sys.modules.items() if name.startswith("skdbal") and m is not None]:
        for attr, value in list(vars(module).items()):
            for name, fn in CHECKS.items():
                if value is fn:
                    monkeypatch.setattr(module, attr, wrappers[name])
    return counted


def toy():
    X = np.random.RandomState(0).normal(size=(300, 3))
    y = np.full(300, np.nan)
    y[:10] = (X[:10, 0] > 0).astype(int)
    return X, y


def test_a_query_of_a_given_pool_checks_each_thing_once(counts):
    X, y = toy()
    learner = ActiveLearner(LogisticRegression(), max_entropy, random_state=0).fit(X[:10], y[:10].astype(int))
    counts.clear()
    learner.query(X, n_instances=3, chunk_size=100)  # three chunks: still one trip through as_predictive
    assert counts == {"check_pool": 1, "check_n_instances": 1, "pool_kwargs": 1, "as_predictive": 1}


@pytest.mark.parametrize("pool_subsample", [None, 50])
def test_a_query_of_the_learners_own_pool_checks_each_thing_once(counts, pool_subsample):
    X, y = toy()
    learner = ActiveLearner(LogisticRegression(), max_entropy, random_state=0, pool_subsample=pool_subsample)
    learner.fit(X, y)
    counts.clear()
    learner.query(n_instances=3, y_pool=np.zeros(300))  # its pool was checked when it was given
    assert counts == {"check_n_instances": 1, "pool_kwargs": 1, "as_predictive": 1}


def test_a_direct_strategy_call_checks_its_input_once(counts):
    X, y = toy()
    model = LogisticRegression().fit(X[:10], y[:10].astype(int))
    counts.clear()
    max_entropy(model, X, 3)
    assert counts == {"check_pool": 1, "check_n_instances": 1, "pool_kwargs": 1, "as_predictive": 1}


def test_the_checks_at_the_entry_still_refuse_bad_input():
    X, y = toy()
    learner = ActiveLearner(LogisticRegression(), max_entropy, random_state=0, pool_subsample=5).fit(X, y)
    with pytest.raises(ValueError, match=r"n_instances=6 is larger than the pool \(5 items\)"):
        learner.query(n_instances=6)  # more than the subsample scored
    with pytest.raises(ValueError, match="y_pool must be aligned with the pool: 300 entries; got 4"):
        learner.query(n_instances=2, y_pool=np.zeros(4))
    with pytest.raises(TypeError, match="unexpected keyword argument.*'n_sample'"):
        learner.query(n_instances=2, n_sample=3)  # a misspelt option is still refused
    with pytest.raises(ValueError, match="X_pool contains NaN or infinity"):
        learner.query(np.full((4, 3), np.nan), 2)
    assert not hasattr(learner, "last_acquisition_")


def test_the_learner_is_scored_through_its_fitted_model():
    X, y = toy()
    learner = ActiveLearner(LogisticRegression(), max_entropy, random_state=0).fit(X, y)
    assert predictive.as_predictive(learner).model is learner.estimator_
    unfitted = ActiveLearner(LogisticRegression())
    assert predictive.as_predictive(unfitted).model is unfitted  # read itself while nothing is fitted


# ------------------------------------------------ every registered strategy and decorator
def _models():
    """One small fitted model per ``model_kind``, with its pool and labels (an MC-dropout regressor is a
    network regressor too)."""
    from _helpers import digits_flat

    from skdbal import MCDropoutClassifier, MCDropoutRegressor
    from skdbal.models import MLP, DDUClassifier

    class Features(LogisticRegression):
        def transform(self, X):
            return np.asarray(X, dtype=np.float64)

    X, y = digits_flat(120, dtype=np.float32)
    target = X[:, :32].sum(axis=1)
    net = dict(module=MLP, module__hidden_layer_sizes=(16,), max_epochs=1, batch_size=32, n_samples=3, random_state=0)
    regressor = (MCDropoutRegressor(**net), X, target)
    return {"classifier": (MCDropoutClassifier(classes=np.arange(10), **net), X, y),
            "regressor": regressor, "network_regressor": regressor,
            "density": (DDUClassifier(Features(max_iter=200), covariance_type="diag", reg_covar=1e-2),
                        X.astype(np.float64), y)}


NAMES = (list(STRATEGIES) + [f"{word}(bald)" for word in DECORATORS]
         + ["diverse(filter(bald,0.1),0.1)", "stochastic(filter(bald,0.1),power,1)", "filter(batch_bald,0.1)",
            "diverse(batch_bald,0.1)", "diverse(badge,0.1)"])


@pytest.fixture(scope="module")
def models():
    return _models()


@pytest.mark.parametrize("name", NAMES)
def test_every_strategy_and_decorator_is_checked_once_per_query(counts, models, name):
    strategy = get_strategy(name)
    model, X, y = models[strategy.model_kind]
    keywords = {"y_pool": y} if "filter" in name else {}
    learner = ActiveLearner(clone(model), strategy, random_state=0, verbose=False).fit(X[:20], y[:20])
    # what each reads of the model: random nothing; a filter around a joint strategy its own p(y | x) and the
    # strategy's query twice (unfiltered, for the rejects, and among the trusted points)
    reads = 0 if name == "random" else 3 if name == "filter(batch_bald,0.1)" else 1
    once = {"check_pool": 1, "check_n_instances": 1, "pool_kwargs": 1, **({"as_predictive": reads} if reads else {})}
    counts.clear()
    learner.query(X, 3, **keywords)
    assert counts == once, name
    counts.clear()
    strategy.acquire(learner.estimator_, X, 3, random_state=0, **keywords)   # a direct call: the same
    assert counts == once, name


@pytest.mark.parametrize("name", ["filter(bald,0.1)", "diverse(bald,0.1)", "stochastic(bald,power,1)"])
def test_a_decorator_s_pool_scores_are_checked_once(counts, models, name):
    model, X, y = models["classifier"]
    fitted = clone(model).fit(X[:20], y[:20])
    counts.clear()
    pool_scores_of(get_strategy(name), fitted, X, 3, y_pool=y)
    assert {k: v for k, v in counts.items() if k != "as_predictive"} == {
        "check_pool": 1, "check_n_instances": 1, "pool_kwargs": 1}
    with pytest.raises(ValueError, match="y_pool must be aligned with the pool: 120 entries; got 3"):
        get_strategy(name).acquire(fitted, X, 3, y_pool=y[:3])   # the entry still refuses bad input
