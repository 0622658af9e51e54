"""Pieces combined the way users combine them: nothing may be substituted silently (issue 27, items 1-7).

Each test pins what was asked for against an independent reference: the model's own
``consistent_masks=True`` passes, the ``n_samples`` the strategy was given, the rows a
bootstrap draws, the shape the wrapped regressor returns.
"""
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler
from sklearn.utils import check_random_state

from skdbal import ActiveLearner, DeepEnsembleClassifier, MCDropoutClassifier, MCDropoutRegressor
from skdbal.acquisition import (
    BALD,
    BatchBALD,
    PredictiveVariance,
    bald,
    batch_bald,
    diversity_penalty,
    max_entropy,
    noise_filter,
    predictive_variance,
    random,
)
from skdbal.acquisition import _batchbald as batchbald_module
from skdbal.models import MLP


@pytest.fixture(scope="module")
def tabular():
    rng = np.random.RandomState(0)
    X = rng.normal(size=(120, 6)).astype(np.float32)
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.int64) + (X[:, 2] > 1).astype(np.int64)
    return X, y


def mlp_net(**params):
    defaults = dict(module=MLP, module__hidden_layer_sizes=(16,), classes=np.arange(3), max_epochs=3,
                    batch_size=16, n_samples=6, random_state=0)
    defaults.update(params)
    return MCDropoutClassifier(**defaults)


def consistent_reference(net, X, T):
    """The fitted net's own consistent passes: ``consistent_masks=True`` set on it."""
    ref = clone(net)  # same parameters, then the fitted module
    ref.__dict__.update({k: v for k, v in net.__dict__.items() if k.endswith("_")})
    ref.consistent_masks = True
    return ref.predict_proba_samples(X, n_samples=T)


@pytest.fixture
def seen_by_batchbald(monkeypatch):
    """The samples array that BatchBALD's selection receives."""
    seen = []
    select = batchbald_module.batch_bald_select

    def spy(P, *args, **kwargs):
        seen.append(np.asarray(P))
        return select(P, *args, **kwargs)

    monkeypatch.setattr(batchbald_module, "batch_bald_select", spy)
    return seen


# ------------------------------------------------------------------ item 1: consistency requests
def test_batchbald_through_learner_around_pipeline_gets_consistent_masks(tabular, seen_by_batchbald):
    X, y = tabular
    pipe = Pipeline([("scale", StandardScaler()), ("net", mlp_net())])
    learner = ActiveLearner(pipe, batch_bald, random_state=0, verbose=False).fit(X[:40], y[:40])
    learner.query(X[40:], n_instances=3)
    fitted = learner.estimator_
    Xt = fitted[:-1].transform(X[40:])
    expected = consistent_reference(fitted[-1], Xt, 6)
    per_row = fitted[-1].predict_proba_samples(Xt, n_samples=6)
    assert not np.allclose(per_row, expected)  # the two kinds of masks do differ here
    np.testing.assert_array_equal(seen_by_batchbald[0], expected)
    np.testing.assert_array_equal(learner.predict_proba_samples(X[40:], consistent=True), expected)


def test_batchbald_picks_through_learner_equal_those_on_the_reference(tabular):
    X, y = tabular
    pipe = Pipeline([("scale", StandardScaler()), ("net", mlp_net())])
    learner = ActiveLearner(pipe, batch_bald, random_state=0, verbose=False).fit(X[:40], y[:40])
    acq = BatchBALD().acquire(learner, X[40:], 3, random_state=5)
    fitted = learner.estimator_
    expected = consistent_reference(fitted[-1], fitted[:-1].transform(X[40:]), 6)
    idx, gains = batchbald_module.batch_bald_select(expected, 3, random_state=5)
    np.testing.assert_array_equal(acq.indices, idx)
    np.testing.assert_allclose(acq.scores, gains)


def test_ensemble_of_mc_members_passes_the_consistency_request_on(tabular, seen_by_batchbald):
    X, y = tabular
    ens = DeepEnsembleClassifier(mlp_net(), n_members=2, samples_per_member=5, random_state=0).fit(X[:40], y[:40])
    batch_bald(ens, X[40:], 3)
    expected = np.concatenate([consistent_reference(m, X[40:], 5) for m in ens.estimators_])
    np.testing.assert_array_equal(seen_by_batchbald[0], expected)
    np.testing.assert_array_equal(ens.predict_proba_samples(X[40:], consistent=True), expected)
    assert not np.allclose(ens.predict_proba_samples(X[40:]), expected)


def test_modal_learner_passes_the_consistency_request_on(tabular, seen_by_batchbald):
    modal = pytest.importorskip("modAL.models")
    X, y = tabular
    learner = modal.ActiveLearner(estimator=mlp_net(), X_training=X[:40], y_training=y[:40])
    batch_bald(learner, X[40:], 3)
    np.testing.assert_array_equal(seen_by_batchbald[0], consistent_reference(learner.estimator, X[40:], 6))


class PerRowSampler:
    """A third-party sampler that cannot promise consistent passes."""
    classes_ = np.array([0, 1])

    def fit(self, X, y):
        return self

    def predict_proba_samples(self, X, n_samples=None):
        p = check_random_state(0).uniform(size=(4, len(X), 1))
        return np.concatenate([p, 1 - p], axis=2)


def test_a_model_that_cannot_honour_the_request_is_refused():
    X = np.zeros((5, 2))
    with pytest.raises(TypeError, match="cannot be asked for consistent samples"):
        batch_bald(PerRowSampler(), X, 2)
    assert len(bald(PerRowSampler(), X, 2)[0]) == 2  # pointwise strategies need no consistency
    with pytest.raises(TypeError, match="consistent samples"):  # a pipeline ending in it, too
        batch_bald(Pipeline([("id", FunctionTransformer()), ("m", PerRowSampler())]).fit(X, [0, 1, 0, 1, 0]), X, 2)
    PerRowSampler.consistent_samples = True  # a model that declares its samples consistent is trusted
    try:
        assert len(batch_bald(PerRowSampler(), X, 2)[0]) == 2
    finally:
        del PerRowSampler.consistent_samples


def test_ensemble_member_that_cannot_honour_the_request_raises(tabular):
    X, y = tabular

    class Sampling(LogisticRegression):  # samples, but takes no `consistent`
        def predict_proba_samples(self, X, n_samples=None):
            return np.stack([self.predict_proba(X)] * (n_samples or 1)) * 1.0

    ens = DeepEnsembleClassifier(Sampling(max_iter=200), n_members=2, samples_per_member=3,
                                 random_state=0).fit(X, y)
    with pytest.raises(TypeError, match="consistent samples"):
        ens.predict_proba_samples(X, consistent=True)


# ------------------------------------------------------------------ item 2: the filter's T
class RecordsT:
    """Two passes whatever is asked; records the T it was asked for."""
    classes_ = np.array([0, 1])

    def __init__(self):
        self.asked = []

    def predict_proba_samples(self, X, n_samples=None):
        self.asked.append(n_samples)
        a = np.linspace(0.1, 0.9, len(X))
        return np.stack([np.c_[a, 1 - a], np.c_[1 - a, a]])


def test_noise_filter_samples_with_the_wrapped_strategys_n_samples():
    model, X, y = RecordsT(), np.zeros((6, 1)), np.array([0, 1, 0, 1, 0, 1])
    noise_filter(BALD(n_samples=50), 0.1).acquire(model, X, 2, y_pool=y)
    assert set(model.asked) == {50}
    model.asked.clear()  # a strategy without pool scores: BatchBALD chooses among the trusted
    model.consistent_samples = True
    noise_filter(BatchBALD(n_samples=7), 0.1).acquire(model, X, 2, y_pool=y)
    assert set(model.asked) == {7}
    model.asked.clear()  # a call's n_samples overrides both
    noise_filter(BALD(n_samples=50), 0.1).acquire(model, X, 2, y_pool=y, n_samples=9)
    assert set(model.asked) == {9}
    model.asked.clear()  # nested: the diversity penalty's strategy sets it
    diversity_penalty(noise_filter(BALD(n_samples=11), 0.1), 0.1)(model, X, 2, y_pool=y)
    assert set(model.asked) == {11}
    with pytest.raises(ValueError, match="n_samples=20 but the strategy it wraps has n_samples=50"):
        noise_filter(BALD(n_samples=50), 0.1, n_samples=20).acquire(model, X, 2, y_pool=y)


# ------------------------------------------------------------------ item 3: no silent fallback
def test_batch_rule_around_a_strategy_without_pool_scores_is_refused():
    model, X, y = RecordsT(), np.random.RandomState(0).normal(size=(6, 2)), np.array([0, 1, 0, 1, 0, 1])
    with pytest.raises(ValueError, match="threshold='batch'.*DiversityPenalty has none"):
        noise_filter(diversity_penalty(bald, 0.1), "batch").acquire(model, X, 2, y_pool=y)
    # the filter inside the penalty is the supported form, and it uses the batch rule
    acq = diversity_penalty(noise_filter(bald, "batch"), 0.1).acquire(model, X, 2, y_pool=y)
    assert "threshold" in acq.info and "noise_rate" in acq.info


# ------------------------------------------------------------------ item 4: options do what they say
class Tied:
    """Consistent passes on which every pool point is the same: all gains tie."""
    classes_ = np.array([0, 1])
    consistent_samples = True

    def predict_proba_samples(self, X, n_samples=None):
        return np.stack([np.tile([[0.9, 0.1]], (len(X), 1)), np.tile([[0.1, 0.9]], (len(X), 1))])


def test_batchbald_random_tie_break_breaks_ties_at_random():
    X = np.zeros((30, 1))
    firsts = {int(batch_bald(Tied(), X, 1, random_tie_break=True, random_state=s)[0][0]) for s in range(8)}
    assert len(firsts) > 1
    assert {int(batch_bald(Tied(), X, 1, random_state=s)[0][0]) for s in range(8)} == {0}
    a = batch_bald(Tied(), X, 3, random_tie_break=True, random_state=3)
    b = batch_bald(Tied(), X, 3, random_tie_break=True, random_state=3)
    np.testing.assert_array_equal(a[0], b[0])  # seeded


def test_predictive_variance_honours_n_jobs(monkeypatch):
    from skdbal import BayesianLinearRegression
    from skdbal.acquisition import _regression

    rng = np.random.RandomState(0)
    X = rng.normal(size=(50, 3))
    blr = BayesianLinearRegression().fit(X[:10], X[:10] @ [1.0, -1.0, 0.5])
    serial = predictive_variance.acquisition_scores(blr, X, chunk_size=10)
    calls = []
    real = _regression.map_chunks
    monkeypatch.setattr(_regression, "map_chunks", lambda *a, **k: calls.append(k["n_jobs"]) or real(*a, **k))
    np.testing.assert_allclose(predictive_variance.acquisition_scores(blr, X, chunk_size=10, n_jobs=2), serial)
    np.testing.assert_allclose(PredictiveVariance(n_jobs=2, chunk_size=10).acquisition_scores(blr, X), serial)
    assert calls == [2, 2]
    idx, _ = predictive_variance(blr, X, 3, n_jobs=2)
    np.testing.assert_array_equal(idx, np.argsort(-serial, kind="stable")[:3])


@pytest.mark.parametrize("strategy", [bald, max_entropy, batch_bald, random, noise_filter(bald, 0.1),
                                      diversity_penalty(bald, 0.1), predictive_variance],
                         ids=lambda s: type(s).__name__)
def test_misspelt_keywords_are_refused_naming_them(strategy):
    X, y = np.zeros((6, 1)), np.array([0, 1, 0, 1, 0, 1])
    with pytest.raises(TypeError, match="unexpected keyword argument.*'n_sample'"):
        strategy(Tied(), X, 2, y_pool=y, n_sample=1000)
    with pytest.raises(TypeError, match="'chunksize'"):
        strategy(Tied(), X, 2, y_pool=y, chunksize=3)


def test_pool_keywords_and_options_are_accepted():
    X, y = np.zeros((6, 1)), np.array([0, 1, 0, 1, 0, 1])
    for strategy in (bald, max_entropy, diversity_penalty(bald, 0.1)):  # y_pool is unused by these, not refused
        assert len(strategy(Tied(), X, 2, y_pool=y, chunk_size=2, n_samples=2)[0]) == 2
    assert len(noise_filter(bald, 0.05)(Tied(), X, 2, y_pool=y, chunk_size=2, n_jobs=1)[0]) == 2
    assert len(batch_bald(Tied(), X, 2, n_joint_samples=10, chunk_size=2)[0]) == 2


def test_a_learner_refuses_a_misspelt_query_keyword_and_changes_nothing(tabular):
    X, y = tabular
    learner = ActiveLearner(LogisticRegression(max_iter=200), max_entropy, random_state=0,
                            verbose=False).fit(X[:20], y[:20])
    state = learner.rng_.get_state()[1].copy()
    with pytest.raises(TypeError, match="'n_sample'"):
        learner.query(X[20:], 2, n_sample=5)
    np.testing.assert_array_equal(learner.rng_.get_state()[1], state)


# ------------------------------------------------------------------ item 5: DataFrames
def test_teach_bootstrap_with_a_dataframe_trains_on_the_drawn_rows(tabular):
    pd = pytest.importorskip("pandas")
    X, y = tabular
    df = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    learner = ActiveLearner(LogisticRegression(max_iter=500), random_state=0, verbose=False)
    learner.fit(df.iloc[:20], y[:20])
    rng = np.random.RandomState()
    rng.set_state(learner.rng_.get_state())
    learner.teach(df.iloc[20:40], y[20:40], bootstrap=True)
    rows = rng.randint(40, size=40)
    expected = LogisticRegression(max_iter=500).fit(df.iloc[:40].iloc[rows], y[:40][rows])
    np.testing.assert_allclose(learner.estimator_.coef_, expected.coef_)
    assert len(learner.y_training_) == 40  # every label kept
    assert list(learner.X_training_.columns) == list(df.columns)


# ------------------------------------------------------------------ item 6: the ensemble's n_samples
def test_ensemble_n_samples_is_honoured_or_refused(tabular):
    X, y = tabular
    plain = DeepEnsembleClassifier(LogisticRegression(max_iter=200), n_members=3, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="n_samples=4 asks for 4 passes per member"):
        plain.predict_proba_samples(X, n_samples=4)
    with pytest.raises(ValueError, match="n_samples=4 asks for 4 passes per member"):
        BALD(n_samples=4)(plain, X, 2)
    one = plain.predict_proba_samples(X, n_samples=1)
    np.testing.assert_allclose(one, np.stack([m.predict_proba(X) for m in plain.estimators_]), rtol=1e-6)
    with pytest.raises(ValueError, match="n_samples must be an int >= 1"):
        plain.predict_proba_samples(X, n_samples=0)
    mc = DeepEnsembleClassifier(mlp_net(max_epochs=1), n_members=2, random_state=0).fit(X[:40], y[:40])
    P = mc.predict_proba_samples(X[:10], n_samples=4)  # 4 passes per member
    np.testing.assert_array_equal(P[4:], mc.estimators_[1].predict_proba_samples(X[:10], n_samples=4))


# ------------------------------------------------------------------ item 7: shapes as the model gives them
def test_learner_predict_samples_keeps_the_regressors_shape(tabular):
    X, _ = tabular
    t = X[:, 0] - X[:, 1]
    reg = MCDropoutRegressor(MLP, module__hidden_layer_sizes=(8,), max_epochs=2, n_samples=5, random_state=0)
    learner = ActiveLearner(reg, predictive_variance, random_state=0, verbose=False).fit(X[:30], t[:30])
    means = learner.predict_samples(X[30:40])
    direct = learner.estimator_.predict_samples(X[30:40])
    assert means.shape == direct.shape == (5, 10)
    np.testing.assert_array_equal(means, direct)
    m, v = learner.predict_samples(X[30:40], return_var=True)
    dm, dv = learner.estimator_.predict_samples(X[30:40], return_var=True)
    assert v.shape == dv.shape == (5, 10)
    np.testing.assert_array_equal(v, dv)


# ------------------------------------------------------------------ found by combining further (review of issue 27)
def test_warm_retrain_of_a_model_that_cannot_continue_is_refused_and_changes_nothing(tabular):
    from sklearn.linear_model import SGDClassifier
    from sklearn.pipeline import make_pipeline

    X, y = tabular
    pipe = make_pipeline(StandardScaler(), LogisticRegression(max_iter=200))
    with pytest.raises(ValueError, match="retrain='warm'.*Pipeline has no partial_fit and no warm_start=True"):
        ActiveLearner(pipe, retrain="warm", verbose=False).fit(X[:20], y[:20])
    learner = ActiveLearner(pipe, retrain="scratch", verbose=False).fit(X[:20], y[:20])
    learner.set_params(retrain="warm")
    with pytest.raises(ValueError, match="retrain='warm'"):
        learner.teach(X[20:25], y[20:25])
    assert len(learner.y_training_) == 20  # no label lost, none added
    with pytest.raises(ValueError, match="DeepEnsembleClassifier has no partial_fit"):
        ActiveLearner(DeepEnsembleClassifier(SGDClassifier(loss="log_loss")), retrain="warm",
                      verbose=False).fit(X[:20], y[:20])
    # warm_start on the pipeline's model: fit continues from the current coefficients
    warm = ActiveLearner(make_pipeline(StandardScaler(), LogisticRegression(max_iter=200, warm_start=True)),
                         retrain="warm", verbose=False).fit(X[:20], y[:20])
    model = warm.estimator_
    warm.teach(X[20:25], y[20:25])
    assert warm.estimator_ is model and len(warm.y_training_) == 25


def test_ensemble_seeds_the_random_state_of_every_part(tabular):
    from sklearn.linear_model import SGDClassifier
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import make_pipeline

    X, y = tabular
    ens = DeepEnsembleClassifier(make_pipeline(StandardScaler(), SGDClassifier(loss="log_loss", max_iter=5, tol=None)),
                                 n_members=3, random_state=0).fit(X, y)
    assert [m[-1].random_state for m in ens.estimators_] == ens.seeds_.tolist()
    assert np.ptp(ens.predict_proba_samples(X), axis=0).max() > 0.05  # the members differ
    with pytest.raises(TypeError, match="no random_state parameter.*identical"):
        DeepEnsembleClassifier(KNeighborsClassifier(), n_members=2).fit(X, y)


def test_noise_filter_keeps_a_subclasss_own_score():
    class FavourFirstFeature(BALD):  # BALD divided by a cost: the points with x0 > 0 cost 100 times more
        def acquisition_scores(self, estimator, X_pool, **kwargs):
            return super().acquisition_scores(estimator, X_pool, **kwargs) / np.where(X_pool[:, 0] > 0, 100.0, 1.0)

    rng = np.random.RandomState(0)
    X = rng.normal(size=(40, 2))

    class Passes:
        classes_ = np.array([0, 1])

        def predict_proba_samples(self, X, n_samples=None):
            a = 1 / (1 + np.exp(-X[:, 1]))
            return np.stack([np.c_[a, 1 - a], np.c_[1 - a, a]])

    y = np.zeros(40, dtype=int)
    alone = FavourFirstFeature().acquire(Passes(), X, 5).indices
    filtered = noise_filter(FavourFirstFeature(), 1e-12).acquire(Passes(), X, 5, y_pool=y).indices
    np.testing.assert_array_equal(filtered, alone)  # a threshold that trusts everything changes nothing
    assert not np.array_equal(bald(Passes(), X, 5)[0], alone)


def test_the_default_model_of_a_seeded_learner_is_seeded():
    assert ActiveLearner(random_state=3, verbose=False)._template().random_state == 3
    assert ActiveLearner(verbose=False)._template().random_state is None


def test_shared_strategy_instances_refuse_set_params():
    from skdbal.acquisition import STRATEGIES, get_strategy

    with pytest.raises(ValueError, match="bald is the package's shared instance.*clone it first"):
        ActiveLearner(query_strategy=noise_filter(bald)).set_params(query_strategy__strategy__n_samples=5)
    assert bald.n_samples is None and STRATEGIES["bald"].n_samples is None and get_strategy("bald").n_samples is None
    assert clone(bald).set_params(n_samples=5).n_samples == 5
    learner = clone(ActiveLearner(query_strategy=noise_filter(bald)))  # what GridSearchCV does first
    learner.set_params(query_strategy__strategy__n_samples=5)
    assert learner.query_strategy.strategy.n_samples == 5 and bald.n_samples is None


def test_one_pass_of_a_stochastic_model_warns_that_the_score_is_constant():
    from skdbal.acquisition.base import DegenerateScoreWarning

    with pytest.warns(DegenerateScoreWarning, match="n_samples=1"):
        BALD(n_samples=1)(Tied(), np.zeros((5, 1)), 2)


def test_a_constant_regression_score_warns():
    from skdbal.acquisition.base import DegenerateScoreWarning

    class SameVariance:
        def predictive_variance(self, X):
            return np.full(len(X), 0.3)

    with pytest.warns(DegenerateScoreWarning, match="0.3 for every pool point"):
        predictive_variance(SameVariance(), np.zeros((5, 1)), 2)


def test_consistent_masks_refuse_a_dropout_nested_in_the_head(tabular):
    import torch
    from torch import nn

    class NestedHead(nn.Module):
        def __init__(self, n_features=6, n_classes=3):
            super().__init__()
            self.trunk = nn.Sequential(nn.Linear(n_features, 8), nn.ReLU())
            self.head = nn.Sequential(nn.Sequential(nn.Dropout(0.5), nn.Linear(8, 8), nn.ReLU()),
                                      nn.Linear(8, n_classes))

        def forward(self, x):
            return self.head(self.trunk(x))

    X, y = tabular
    net = MCDropoutClassifier(NestedHead, classes=np.arange(3), max_epochs=1, random_state=0).fit(X[:30], y[:30])
    assert net.predict_proba_samples(X[:4], n_samples=3).shape == (3, 4, 3)  # per-row sampling still works
    with pytest.raises(TypeError, match="nests one inside a block"):
        net.predict_proba_samples(X[:4], n_samples=3, consistent=True)
    with pytest.raises(TypeError, match="nests one inside a block"):
        batch_bald(net, X, 2)
    assert isinstance(torch.zeros(1), torch.Tensor)


def test_a_fitted_search_is_read_through_its_best_estimator(tabular):
    from sklearn.model_selection import GridSearchCV

    from skdbal.acquisition import variation_ratios

    X, y = tabular
    search = GridSearchCV(mlp_net(), {"max_epochs": [2, 3]}, cv=2).fit(X[:60], y[:60])
    P = search.best_estimator_.predict_proba_samples(X[60:])
    assert P.shape[0] == 6  # T passes, not one predict_proba
    np.testing.assert_array_equal(variation_ratios(search, X[60:], 4)[0],
                                  variation_ratios(search.best_estimator_, X[60:], 4)[0])


def test_a_one_member_ensemble_of_mc_members_reads_the_members_predict_proba(tabular):
    X, y = tabular
    one = DeepEnsembleClassifier(mlp_net(max_epochs=1), n_members=1, random_state=0).fit(X[:30], y[:30])
    assert one.stochastic_samples is False
    np.testing.assert_allclose(one.predict_proba_samples(X[:10], n_samples=1)[0],
                               one.estimators_[0].predict_proba(X[:10]), rtol=1e-6)
    # an explicit T asks the member for T passes, and the consistency request goes with it
    np.testing.assert_array_equal(one.predict_proba_samples(X[:10], n_samples=4, consistent=True),
                                  consistent_reference(one.estimators_[0], X[:10], 4))


def test_noise_filter_honours_its_chunk_size():
    class Rows(RecordsT):
        def predict_proba_samples(self, X, n_samples=None):
            self.asked.append(len(X))
            return super().predict_proba_samples(X, n_samples)

    X, y = np.zeros((7, 1)), np.array([0, 1, 0, 1, 0, 1, 0])
    model = Rows()
    noise_filter(bald, 0.1, chunk_size=3).acquire(model, X, 2, y_pool=y)
    assert [n for n in model.asked if n != 7] and max(a for a in model.asked if a is not None) <= 3
    model.asked.clear()
    noise_filter(bald, 0.1).acquire(model, X, 2, y_pool=y, chunk_size=2)  # the call's overrides
    assert max(a for a in model.asked if a is not None) <= 2


def test_a_plain_classifier_refuses_more_than_one_sample(tabular):
    X, y = tabular
    learner = ActiveLearner(LogisticRegression(max_iter=200), verbose=False).fit(X[:30], y[:30])
    with pytest.raises(ValueError, match="one deterministic sample.*n_samples=5"):
        learner.predict_proba_samples(X, n_samples=5)
    with pytest.raises(ValueError, match="n_samples=50 cannot be honoured"):
        max_entropy.__class__(n_samples=50)(learner, X, 2)
    np.testing.assert_allclose(learner.predict_proba_samples(X, n_samples=1)[0], learner.predict_proba(X))


def test_deterministic_baseline_without_a_strategy_that_has_one_is_refused(tmp_path):
    from skdbal.experiments import run_grid

    with pytest.raises(ValueError, match="deterministic-baseline runs for max_entropy and variation_ratios only"):
        run_grid("gal2017", ["bald", "random"], [1], tmp_path / "grid", deterministic_baseline=True, verbose=False)
    assert not (tmp_path / "grid").exists()


def test_heteroscedastic_head_refuses_a_criterion_that_is_not_a_likelihood(tabular):
    import torch

    X, _ = tabular
    reg = MCDropoutRegressor(MLP, heteroscedastic=True, criterion=torch.nn.MSELoss, max_epochs=1)
    with pytest.raises(ValueError, match="heteroscedastic=True needs a Gaussian likelihood.*MSELoss"):
        reg.fit(X[:20], X[:20, 0])


def test_to_modal_keeps_the_pool_scores_for_the_decorators():
    from skdbal.acquisition import to_modal
    from skdbal.acquisition.base import pool_scores_of

    rng = np.random.RandomState(1)
    X = rng.normal(size=(30, 3))
    y = rng.randint(2, size=30)

    class Passes:
        classes_ = np.array([0, 1])

        def predict_proba_samples(self, X, n_samples=None):
            a = 1 / (1 + np.exp(-X[:, 0])), 1 / (1 + np.exp(-X[:, 1]))
            return np.stack([np.c_[p, 1 - p] for p in a])

    old = to_modal(bald, "0.4.1")
    np.testing.assert_array_equal(pool_scores_of(old, Passes(), X, 3).order, pool_scores_of(bald, Passes(), X, 3).order)
    np.testing.assert_array_equal(diversity_penalty(old, 0.3)(Passes(), X, 4)[0],
                                  diversity_penalty(bald, 0.3)(Passes(), X, 4)[0])
    np.testing.assert_array_equal(noise_filter(old, "batch").acquire(Passes(), X, 3, y_pool=y).indices,
                                  noise_filter(bald, "batch").acquire(Passes(), X, 3, y_pool=y).indices)


# ------------------------------------------------------------------ the loop and the data (review of issue 27)
def test_simulate_refuses_an_initial_set_given_twice_or_a_changed_pool(tabular):
    X, y = tabular
    learner = ActiveLearner(LogisticRegression(max_iter=200), max_entropy, random_state=0, verbose=False)
    with pytest.raises(ValueError, match="initial_idx or n_initial_per_class, not both"):
        learner.simulate(X, y, 1, 2, initial_idx=np.arange(6), n_initial_per_class=5)
    history = learner.simulate(X, y, 1, 2, initial_idx=np.arange(6))
    assert history[0]["n_labels"] == 6
    with pytest.raises(ValueError, match="n_initial_per_class cannot be given with warm_start"):
        learner.simulate(X, y, 1, 2, n_initial_per_class=5, warm_start=True)
    other = X[::-1].copy()  # the same size, other rows
    with pytest.raises(ValueError, match="X_pool or y_pool differ"):
        learner.simulate(other, y, 1, 2, warm_start=True)
    assert len(learner.history_) == 2 and len(learner.labelled_idx_) == 8  # nothing changed
    learner.simulate(X, y, 1, 2, warm_start=True)
    assert len(learner.labelled_idx_) == 10
    assert learner.simulate(X, y, 0, 2)[0]["n_labels"] == 2 * len(np.unique(y))  # the default: 2 per class


def test_make_noisy_labels_refuses_classes_it_would_store_as_others():
    from skdbal.datasets import make_noisy_labels

    y = np.repeat(np.arange(3), 50)
    with pytest.raises(ValueError, match="classes must be distinct"):
        make_noisy_labels(y, 0.2, classes=[0, 1, 1, 2])
    with pytest.raises(ValueError, match="do not all fit y's dtype uint8"):
        make_noisy_labels(y.astype(np.uint8), 0.2, classes=[0, 1, 300])
    with pytest.raises(ValueError, match="do not all fit y's dtype int64"):
        make_noisy_labels(y, 0.2, classes=[0, 1, 2.5])
    with pytest.raises(ValueError, match="do not all fit"):
        make_noisy_labels(np.array(["a", "b", "c"])[y], 0.2, classes=["a", "b", "c", "dddd"])
    noisy, flipped = make_noisy_labels(y, 0.2, classes=np.array([0.0, 1.0, 2.0, 3.0]), random_state=0)
    assert noisy.dtype == y.dtype and set(noisy.tolist()) <= {0, 1, 2, 3} and flipped.any()


def test_quickstart_refuses_a_seed_counted_twice():
    from skdbal.experiments.quickstart import run_quickstart

    with pytest.raises(ValueError, match=r"seeds repeat \[0\]"):
        run_quickstart(("random",), seeds=(0, 0), n_queries=1, verbose=False, n_jobs=1)
    with pytest.raises(ValueError, match="strategies repeat"):
        run_quickstart(("random", "random"), seeds=(0,), n_queries=1, verbose=False, n_jobs=1)
