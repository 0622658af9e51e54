"""The strategy contract: every registered strategy, every decorator (wrapping BALD) and a strategy of the
user's own pass the same checks.

- ``(indices, scores)``: ``n_instances`` unique in-range positions, scores aligned and finite; a plain top-k
  strategy's scores are its acquisition scores of those rows, best first;
- the same picks again under the same ``random_state``;
- through an :class:`~skdbal.ActiveLearner` holding its pool with some rows labelled, never a labelled row;
- ``clone`` and ``get_params`` give the same strategy back, and so does pickling;
- on a dask array pool (:func:`skdbal.dask.query_pool`): the in-memory picks, or a ``TypeError`` that says
  why the strategy cannot reduce over a pool read in chunks and names it;
- bad input (``n_instances`` of 0 or over the pool, rows of the wrong width) is a ``ValueError`` saying so.

A new strategy joins by being registered: the cases are read from :data:`~skdbal.acquisition.STRATEGIES` and
:data:`~skdbal.acquisition.DECORATORS`; one that needs another model than a classifier says so in its
``model_kind``, which picks the test's model (``MODEL`` below).
"""
import pickle

import numpy as np
import pytest
from _helpers import digits_flat
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression

from skdbal import ActiveLearner, MCDropoutClassifier, MCDropoutRegressor
from skdbal.acquisition import DECORATORS, STRATEGIES, get_strategy
from skdbal.acquisition.base import SamplesStrategy, Strategy
from skdbal.models import MLP, DDUClassifier

N_POOL, N_LABELLED, K = 120, 20, 5


class Margin(SamplesStrategy):
    """The user's own strategy: margin sampling, one minus the gap between the two likeliest classes."""

    needs_stochastic = False

    @staticmethod
    def measure(samples):
        top2 = np.sort(samples.mean(axis=0), axis=1)[:, -2:]
        return 1.0 - (top2[:, 1] - top2[:, 0])


class Features(LogisticRegression):
    """A 'network' whose features are its inputs, for DDU's density (as tests/test_ddu.py's)."""

    def transform(self, X):
        return np.asarray(X, dtype=np.float64)


#: The test's model for each ``model_kind`` a strategy declares (an MC-dropout regressor is a network regressor).
MODEL = {"classifier": "classifier", "regressor": "regressor", "network_regressor": "regressor", "density": "density"}
#: Strategies that never read the model or the pool's rows (so rows of the wrong width are theirs to pick).
READS_NO_ROWS = {"random"}

CASES = ([(name, lambda name=name: get_strategy(name), MODEL[s.model_kind]) for name, s in STRATEGIES.items()]
         + [(f"{word}(bald)", lambda word=word: get_strategy(f"{word}(bald)"),
             MODEL[get_strategy(f"{word}(bald)").model_kind]) for word in DECORATORS]
         + [("user's own", Margin, MODEL[Margin.model_kind])])
IDS = [case[0] for case in CASES]


def new_model(kind):
    if kind == "classifier":
        return MCDropoutClassifier(module=MLP, module__hidden_layer_sizes=(32,), classes=np.arange(10), max_epochs=2,
                                   batch_size=32, n_samples=4, random_state=0)
    if kind == "regressor":
        return MCDropoutRegressor(module=MLP, module__hidden_layer_sizes=(32,), max_epochs=2, batch_size=32,
                                  n_samples=4, random_state=0)
    return DDUClassifier(Features(max_iter=200), covariance_type="diag", reg_covar=1e-2)


@pytest.fixture(scope="module")
def data():
    X, y = digits_flat(N_POOL + 60, dtype=np.float32)
    return {"classifier": (X[:N_POOL], y[:N_POOL]), "density": (X[:N_POOL].astype(np.float64), y[:N_POOL]),
            "regressor": (X[:N_POOL], X[:N_POOL, :32].sum(axis=1))}


@pytest.fixture(scope="module")
def fitted(data):
    """Each kind of model, fitted on the first rows of its pool (the labelled ones)."""
    return {kind: new_model(kind).fit(X[:N_LABELLED], y[:N_LABELLED]) for kind, (X, y) in data.items()}


def call(strategy, model, X, y, n=K, **kwargs):
    return strategy(model, X, n, random_state=0, y_pool=y, **kwargs)


@pytest.mark.parametrize("name, make, kind", CASES, ids=IDS)
def test_indices_and_scores(name, make, kind, data, fitted):
    X, y = data[kind]
    strategy = make()
    idx, scores = call(strategy, fitted[kind], X, y)
    assert idx.shape == (K,) and scores.shape == (K,) and np.issubdtype(idx.dtype, np.integer)
    assert len(set(idx.tolist())) == K and 0 <= idx.min() and idx.max() < len(X)
    assert np.isfinite(scores).all()
    if (type(strategy).acquire is Strategy.acquire and type(strategy).acquire_checked is Strategy.acquire_checked
            and type(strategy).select is Strategy.select):
        # plain top-k: the scores are the acquisition scores of the picks, best first, and none left out beat them
        every = strategy.acquisition_scores(fitted[kind], X, random_state=0)
        np.testing.assert_allclose(scores, every[idx], rtol=1e-6)
        assert np.all(np.diff(scores) <= 0)
        assert np.delete(every, idx).max() <= scores[-1]


@pytest.mark.parametrize("name, make, kind", CASES, ids=IDS)
def test_the_same_random_state_gives_the_same_picks(name, make, kind, data, fitted):
    X, y = data[kind]
    first, again = call(make(), fitted[kind], X, y), call(make(), fitted[kind], X, y)
    np.testing.assert_array_equal(first[0], again[0])
    np.testing.assert_array_equal(first[1], again[1])


@pytest.mark.parametrize("name, make, kind", CASES, ids=IDS)
def test_the_learner_never_picks_a_labelled_row(name, make, kind, data):
    X, y = data[kind]
    classes = data["classifier"][1]        # two of each class, spread over the pool (DDU fits a density per class)
    labelled = np.sort(np.concatenate([np.flatnonzero(classes == c)[-2:] for c in range(10)]))
    y_partial = np.full(len(y), np.nan)
    y_partial[labelled] = y[labelled]
    learner = ActiveLearner(new_model(kind), make(), random_state=0, verbose=False).set_pool(X, y_partial)
    learner.refit()
    for _ in range(2):
        idx, X_query = learner.query(n_instances=K, y_pool=y)
        assert len(set(idx.tolist())) == K and not set(idx.tolist()) & set(learner.labelled_idx_.tolist())
        np.testing.assert_array_equal(X_query, X[idx])
        learner.label(idx, y[idx])      # the next query has these labelled too
    assert len(learner.labelled_idx_) == N_LABELLED + 2 * K


@pytest.mark.parametrize("name, make, kind", CASES, ids=IDS)
def test_clone_get_params_and_pickle_give_the_same_strategy(name, make, kind, data, fitted):
    X, y = data[kind]
    strategy = make()
    params = strategy.get_params(deep=False)
    for copy in (clone(strategy), type(strategy)(**params), pickle.loads(pickle.dumps(strategy))):
        assert type(copy) is type(strategy) and repr(copy) == repr(strategy)
        assert repr(copy.get_params()) == repr(strategy.get_params())
    np.testing.assert_array_equal(call(pickle.loads(pickle.dumps(strategy)), fitted[kind], X, y)[0],
                                  call(strategy, fitted[kind], X, y)[0])
    if name in STRATEGIES:      # the shared instance pickles to one of the user's own, whose set_params works
        copy = pickle.loads(pickle.dumps(STRATEGIES[name]))
        assert copy.set_params(**copy.get_params(deep=False)) is copy


@pytest.mark.parametrize("name, make, kind", CASES, ids=IDS)
def test_bad_input_is_a_clear_error(name, make, kind, data, fitted):
    X, y = data[kind]
    strategy, model = make(), fitted[kind]
    with pytest.raises(ValueError, match="n_instances"):
        call(strategy, model, X, y, n=0)
    with pytest.raises(ValueError, match="n_instances"):
        call(strategy, model, X, y, n=len(X) + 1)
    if name not in READS_NO_ROWS:
        with pytest.raises(ValueError, match="features") as error:
            call(strategy, model, X[:, :40], y)
        assert "40" in str(error.value) and "64" in str(error.value)      # what it got and what it expected


# ------------------------------------------------------------------ a pool on a cluster
@pytest.fixture(scope="module")
def client():
    pytest.importorskip("dask.array")
    from _helpers import local_dask_client

    with local_dask_client(processes=False, timeout=60) as client:
        yield client


@pytest.mark.parametrize("name, make, kind", CASES, ids=IDS)
def test_a_dask_pool_gives_the_in_memory_picks_or_a_refusal_naming_the_strategy(name, make, kind, data, fitted,
                                                                               client):
    import dask.array as da

    from skdbal.dask import query_pool

    X, y = data[kind]
    strategy, model = make(), fitted[kind]
    pool = da.from_array(X, chunks=(50, X.shape[1]))
    if type(strategy).plan_chunks is Strategy.plan_chunks:    # says nothing of chunks: refused, by name
        with pytest.raises(TypeError, match="pool read in chunks") as refusal:
            query_pool(strategy, model, pool, K, client=client, y_pool=y, random_state=0)
        assert type(strategy).__name__ in str(refusal.value)
        return
    on_dask = query_pool(strategy, model, pool, K, client=client, y_pool=y, random_state=0)
    local = strategy.acquire(model, X, K, y_pool=y, random_state=0)
    assert on_dask.indices.tolist() == local.indices.tolist()
    np.testing.assert_allclose(on_dask.scores, local.scores, rtol=1e-5, atol=1e-7)
