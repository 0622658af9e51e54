"""The predictive interface: one adapter, no class checks, third-party models welcome."""
import ast
import re
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.calibration import CalibratedClassifierCV
from sklearn.linear_model import BayesianRidge, LinearRegression, LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skdbal import ActiveLearner, BayesianLinearRegression, uncertainty
from skdbal.acquisition import STRATEGIES, bald, max_entropy, predictive_variance
from skdbal.predictive import Predictive, as_predictive

PACKAGE = Path(__file__).resolve().parents[1] / "skdbal"


class BootstrapEnsemble(ClassifierMixin, BaseEstimator):
    """A third-party classifier: only ``predict_proba_samples`` (no ``predict_proba``)."""

    def __init__(self, n_members=4, random_state=0):
        self.n_members = n_members
        self.random_state = random_state

    def fit(self, X, y):
        X = np.asarray(X).reshape(len(X), -1)
        rng = np.random.RandomState(self.random_state)
        self.classes_ = np.unique(y)
        self.members_ = []
        for _ in range(self.n_members):
            rows = rng.randint(len(X), size=len(X))
            rows[:len(self.classes_)] = [np.flatnonzero(y == c)[0] for c in self.classes_]  # every class
            self.members_.append(LogisticRegression(max_iter=300).fit(X[rows], np.asarray(y)[rows]))
        return self

    def predict_proba_samples(self, X, n_samples=None):
        X = np.asarray(X).reshape(len(X), -1)
        return np.stack([m.predict_proba(X) for m in self.members_])

    def predict(self, X):
        return self.classes_[self.predict_proba_samples(X).mean(axis=0).argmax(axis=1)]


class VarianceOnly(RegressorMixin, BaseEstimator):
    """A third-party regressor: only ``predictive_variance`` (distance to the training data)."""

    def fit(self, X, y):
        self.X_ = np.asarray(X, dtype=float).reshape(len(X), -1)
        self.mean_ = np.mean(y, axis=0)
        return self

    def predict(self, X):
        return np.tile(self.mean_, (len(X),) + (1,) * np.ndim(self.mean_))

    def predictive_variance(self, X):
        X = np.asarray(X, dtype=float).reshape(len(X), -1)
        return ((X[:, None, :] - self.X_[None]) ** 2).sum(-1).min(axis=1)


@pytest.mark.parametrize("name", ["bald", "max_entropy", "variation_ratios", "mean_std", "random"])
def test_third_party_classifier_runs_every_strategy_through_simulate(name, flat_digits):
    X, y = flat_digits
    strategy = STRATEGIES[name]
    learner = ActiveLearner(BootstrapEnsemble(), strategy, random_state=0, verbose=False)
    history = learner.simulate(X[:400], y[:400], n_queries=3, n_instances=5, X_test=X[1000:], y_test=y[1000:])
    assert [r["n_labels"] for r in history] == [20, 25, 30, 35]
    assert len(set(learner.labelled_idx_.tolist())) == 35
    assert 0.3 < history[-1]["accuracy"] <= 1.0
    # the picks of the last step are the strategy's top scores among the points unlabelled then
    before = learner.labelled_idx_[:30]
    remaining = np.setdiff1d(np.arange(400), before)
    assert not np.isin(history[-1]["query_indices"], before).any()
    if name != "random":
        model = BootstrapEnsemble().fit(X[before], y[before])
        measure = {"bald": uncertainty.mutual_information, "max_entropy": uncertainty.predictive_entropy,
                   "variation_ratios": uncertainty.variation_ratio,
                   "mean_std": uncertainty.mean_standard_deviation}[name]
        scores = measure(model.predict_proba_samples(X[remaining]))
        picked = np.asarray(history[-1]["query_indices"])
        chosen = scores[np.searchsorted(remaining, picked)]
        assert chosen.min() >= np.sort(scores)[::-1][4] - 1e-12  # nothing better was left behind


def test_third_party_regressor_runs_predictive_variance_through_simulate():
    X = np.linspace(0, 1, 60)[:, None]
    learner = ActiveLearner(VarianceOnly(), predictive_variance, random_state=0, verbose=False)
    history = learner.simulate(X, X[:, 0] * 2, n_queries=3, n_instances=1, initial_idx=[0])
    # farthest-point picks, by hand: 59 (x=1), then the middle 30 (ties go to the lower index: 29.5 -> 29 or 30)
    assert history[1]["query_indices"] == [59]
    assert history[2]["query_indices"] in ([29], [30])


def test_adapter_rules_by_interface_not_class(fitted_net, digits):
    X, y = digits
    flat = X.reshape(len(X), -1)
    lr = LogisticRegression(max_iter=300).fit(flat[:100], y[:100])
    pred = as_predictive(lr)
    assert (pred.kind, pred.source, pred.stochastic) == ("classifier", "proba", False)
    np.testing.assert_allclose(pred.proba_samples(flat[:5]), lr.predict_proba(flat[:5])[None])

    pred = as_predictive(fitted_net)
    assert (pred.source, pred.stochastic) == ("samples", True)
    assert pred.proba_samples(X[:4]).shape == (8, 4, 10)
    det = as_predictive(fitted_net.set_params(mc_dropout=False))
    try:
        assert det.stochastic is False
        assert det.proba_samples(X[:4]).shape == (1, 4, 10)  # one pass, not T identical ones
    finally:
        fitted_net.set_params(mc_dropout=True)

    pipe = make_pipeline(StandardScaler(), LogisticRegression(max_iter=300)).fit(flat[:100], y[:100])
    pred = as_predictive(pipe)
    assert pred.model is pipe[-1] and len(pred.transforms) == 1
    np.testing.assert_allclose(pred.proba_samples(flat[:5])[0], pipe.predict_proba(flat[:5]))

    # a fitted scikit-learn meta-estimator: its own predict_proba, not its unfitted template's
    cal = CalibratedClassifierCV(LogisticRegression(max_iter=300), cv=3).fit(flat[:150], y[:150])
    pred = as_predictive(cal)
    assert pred.model is cal
    np.testing.assert_allclose(pred.proba_samples(flat[:5])[0], cal.predict_proba(flat[:5]))

    rng = np.random.RandomState(0)
    Z = rng.normal(size=(30, 3))
    br = BayesianRidge().fit(Z, Z[:, 0])
    _, std = br.predict(Z, return_std=True)
    np.testing.assert_allclose(as_predictive(br).variance(Z), std ** 2)
    blr = BayesianLinearRegression().fit(Z, np.c_[Z[:, 0], Z[:, 1]])
    np.testing.assert_allclose(as_predictive(blr).variance(Z), blr.predictive_variance(Z))

    with pytest.raises(TypeError, match="predict_proba_samples or predict_proba"):
        as_predictive(object())
    from sklearn.svm import SVC  # a classifier without predict_proba is not read as a regressor
    with pytest.raises(TypeError, match="got SVC"):
        as_predictive(SVC().fit(flat[:100], y[:100]))
    assert not hasattr(ActiveLearner(SVC()), "predictive_variance")
    # "passthrough" and None steps of a pipeline
    from sklearn.pipeline import Pipeline
    for skip in ("passthrough", None):
        p2 = Pipeline([("skip", skip), ("clf", LogisticRegression(max_iter=300))]).fit(flat[:100], y[:100])
        np.testing.assert_allclose(as_predictive(p2).proba_samples(flat[:5])[0], p2.predict_proba(flat[:5]))
    with pytest.raises(TypeError, match="regressor"):
        as_predictive(br).proba_samples(Z)
    with pytest.raises(TypeError, match="return_std"):
        as_predictive(LinearRegression().fit(Z, Z[:, 0])).variance(Z)


class PlainSampler:
    """Not a scikit-learn estimator, no fitted attributes ending in '_': only the interface."""

    def fit(self, X, y):
        self.w = np.linspace(-1, 1, np.shape(X)[1])
        return self

    def predict_proba_samples(self, X, n_samples=None):
        z = np.asarray(X) @ self.w
        p = np.stack([1 / (1 + np.exp(-z * s)) for s in (0.5, 2.0)])  # two passes that disagree
        return np.stack([p, 1 - p], axis=-1)


def test_modal_learner_is_read_through_what_it_wraps(fitted_net, digits):
    from modAL.models import ActiveLearner as ModalLearner

    X, _ = digits
    modal = ModalLearner(estimator=fitted_net, query_strategy=bald)
    pred = as_predictive(modal)
    assert pred.model is fitted_net and pred.stochastic
    Z = np.random.RandomState(0).normal(size=(30, 4))
    plain = PlainSampler().fit(Z, None)
    modal = ModalLearner(estimator=plain, query_strategy=bald)
    assert as_predictive(modal).model is plain
    np.testing.assert_array_equal(bald(modal, Z, 3)[0], bald(plain, Z, 3)[0])
    assert bald(modal, Z, 3)[1].min() > 0  # scored by its samples, not as one deterministic pass


def test_active_learner_delegates_the_interface(digits):
    X, y = digits
    flat = X.reshape(len(X), -1)
    clf = ActiveLearner(LogisticRegression(max_iter=300), max_entropy, verbose=False)
    assert hasattr(clf, "predict_proba_samples") and not hasattr(clf, "predictive_variance")
    clf.fit(flat[:50], y[:50])
    assert clf.stochastic_samples is False
    np.testing.assert_allclose(clf.predict_proba_samples(flat[:3])[0], clf.estimator_.predict_proba(flat[:3]))

    reg = ActiveLearner(BayesianLinearRegression(), predictive_variance, verbose=False)
    assert hasattr(reg, "predictive_variance") and not hasattr(reg, "predict_proba_samples")
    Z = np.random.RandomState(0).normal(size=(20, 4))
    reg.fit(Z[:10], Z[:10, :2])
    np.testing.assert_allclose(reg.predictive_variance(Z), reg.estimator_.predictive_variance(Z))
    pred = as_predictive(reg)
    # read through its fitted model (__skdbal_model__), once, not through its delegating methods
    assert isinstance(pred, Predictive) and pred.kind == "regressor" and pred.model is reg.estimator_


def _imports():
    """``(path relative to the package, line, names)`` of every import statement in the package: the
    module, and for ``from ... import`` the names imported too."""
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                yield rel, node.lineno, [node.module or ""] + [a.name for a in node.names]
            elif isinstance(node, ast.Import):
                yield rel, node.lineno, [a.name for a in node.names]


def _parts(names):
    return {p for n in names for p in n.split(".")}


def test_no_module_imports_the_learner_or_the_experiments():
    """Arrows point one way: strategies know the learner by its protocol, not by import."""
    # the learner, and what is built on it (an active-learning set-up as an estimator, budget.py)
    allowed = ("__init__.py", "__main__.py", "cli.py", "learner.py", "budget.py")
    offenders = [(rel, line) for rel, line, names in _imports()
                 if not (rel in allowed or rel.startswith(("learner/", "experiments/", "labelling/")))
                 and {"learner", "ActiveLearner", "experiments"} & _parts(names)]
    assert offenders == []


def test_only_the_command_line_imports_the_labelling_server():
    """The labelling store, session and page sit on top, and Label Studio's sync on them: estimators,
    strategies and the loop never import either (they need optional extras); only the command line
    does, lazily."""
    offenders = [(rel, line) for rel, line, names in _imports()
                 if not (rel.startswith("labelstudio/") or rel == "cli.py")
                 and ("labelstudio" in _parts(names)
                      or (not rel.startswith("labelling/") and "labelling" in _parts(names)))]
    assert offenders == []


def test_only_the_runner_imports_the_dask_subpackage():
    """Dask is an optional extra: estimators, strategies and the loop never import it (skdbal.dask or dask
    itself); the grid runner does, lazily, when asked for a scheduler."""
    offenders = [(rel, line) for rel, line, names in _imports()
                 if not (rel.startswith("dask/") or rel == "experiments/runner.py")
                 and {"dask", "distributed", "zarr"} & _parts(names)]
    assert offenders == []


def test_strategies_never_check_estimator_classes():
    """No isinstance on estimators in the acquisition package or the adapter."""
    for path in list((PACKAGE / "acquisition").glob("*.py")) + [PACKAGE / "predictive.py"]:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance":
                # our own Strategy and plain value types may be checked; no model classes
                checked = ast.unparse(node.args[1])
                assert not re.search(r"Classifier|Regressor|Learner|Pipeline|Estimator|Net|Module", checked), \
                    (path.name, checked)


def test_row_keyed_samples_by_hand(fitted_net, digits):
    """Which models' samples of a row depend on that row alone (what a pool scored in chunks needs)."""
    import torch
    from sklearn.base import clone
    from sklearn.linear_model import LogisticRegression

    from skdbal import ActiveLearner, DeepEnsembleClassifier
    from skdbal.predictive import as_predictive

    X, y = digits
    assert fitted_net.row_keyed_samples and as_predictive(fitted_net).row_keyed      # row_pcg64, int seed
    for params, expected in (({"mask_seeding": "row"}, True), ({"mask_seeding": "stream"}, False),
                             ({"random_state": None}, False), ({"random_state": np.random.RandomState(0)}, False),
                             ({"random_state": True}, False),
                             ({"mask_seeding": "stream", "random_state": None, "mc_dropout": False}, True)):
        assert clone(fitted_net).set_params(**params).row_keyed_samples is expected, params
    plain = LogisticRegression(max_iter=200).fit(X[:100].reshape(100, -1), y[:100])
    assert as_predictive(plain).row_keyed                       # one deterministic pass

    class Sampler:  # a third-party sampler that does not say
        classes_ = np.arange(2)

        def predict_proba_samples(self, X, n_samples=None):
            return np.full((2, len(X), 2), 0.5)

    assert not as_predictive(Sampler()).row_keyed
    ens = DeepEnsembleClassifier(clone(fitted_net).set_params(max_epochs=1, random_state=None), n_members=2,
                                 samples_per_member=2, random_state=0)
    assert ens.row_keyed_samples                                 # before fit: members will get int seeds
    ens.fit(X[:100], y[:100])
    assert ens.row_keyed_samples
    ens.estimators_[1].set_params(mask_seeding="stream")
    assert not ens.row_keyed_samples
    # a member that hides its sampler in a pipeline: its predict_proba is an MC average of one stream
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    hidden = DeepEnsembleClassifier(make_pipeline(FunctionTransformer(), clone(fitted_net).set_params(
        mask_seeding="stream", max_epochs=1)), n_members=2, random_state=0)
    assert not hidden.row_keyed_samples

    # dropout layers whose masks are not drawn per row (they use torch's generator, once per call)
    class AlphaMLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 16), torch.nn.AlphaDropout(0.3),
                                            torch.nn.Linear(16, 10))

        def forward(self, x):
            return self.body(x)

    from skdbal import MCDropoutClassifier

    alpha = MCDropoutClassifier(AlphaMLP, classes=np.arange(10), max_epochs=1, random_state=0).fit(X[:100], y[:100])
    assert not alpha.row_keyed_samples
    assert not np.allclose(alpha.predict_proba_samples(X[:20], n_samples=4)[:, 10:],
                           alpha.predict_proba_samples(X[10:20], n_samples=4))  # what it means
    assert clone(fitted_net).set_params(mask_seeding="stream", consistent_masks=True).row_keyed_samples
    learner = ActiveLearner(clone(fitted_net).set_params(mask_seeding="stream"), verbose=False)
    assert not learner.row_keyed_samples and ActiveLearner(clone(fitted_net), verbose=False).row_keyed_samples
