"""DeepEnsembleClassifier: members as predictive samples, through strategies, learner, clone and pickle."""
import pickle

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.datasets import load_iris
from sklearn.linear_model import SGDClassifier

from skdbal import ActiveLearner, DeepEnsembleClassifier
from skdbal.acquisition import bald, batch_bald, diversity_penalty, noise_filter
from skdbal.acquisition.functional import batch_bald_select
from skdbal.uncertainty import mutual_information


@pytest.fixture
def iris():
    X, y = load_iris(return_X_y=True)
    return (X - X.mean(0)) / X.std(0), y


def sgd():
    return SGDClassifier(loss="log_loss", alpha=0.01, max_iter=3, tol=None)


def test_members_are_the_samples(iris):
    X, y = iris
    ens = DeepEnsembleClassifier(sgd(), n_members=3, random_state=0).fit(X[::3], y[::3])
    by_hand = np.stack([m.predict_proba(X) for m in ens.estimators_])
    np.testing.assert_allclose(ens.predict_proba_samples(X), by_hand, rtol=1e-6, atol=1e-7)  # float32
    np.testing.assert_allclose(ens.predict_proba(X), by_hand.mean(0), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(ens.predict(X), ens.classes_[by_hand.mean(0).argmax(1)])
    # the members differ (their own seeds), so BALD sees their disagreement
    assert len(set(ens.seeds_.tolist())) == 3 and [m.random_state for m in ens.estimators_] == ens.seeds_.tolist()
    assert mutual_information(by_hand).max() > 1e-4
    idx, scores = bald(ens, X, 5)
    assert idx[0] == np.argmax(mutual_information(ens.predict_proba_samples(X)))
    # one member: deterministic, scored with one pass
    one = DeepEnsembleClassifier(sgd(), n_members=1, random_state=0).fit(X, y)
    assert one.stochastic_samples is False and one.predict_proba_samples(X).shape == (1, 150, 3)


def test_parallel_fit_gives_the_same_members(iris):
    X, y = iris
    a = DeepEnsembleClassifier(sgd(), n_members=3, random_state=1).fit(X, y)
    b = DeepEnsembleClassifier(sgd(), n_members=3, random_state=1, n_jobs=2).fit(X, y)
    np.testing.assert_allclose(a.predict_proba_samples(X), b.predict_proba_samples(X))


def test_mc_members_strategies_learner_clone_pickle(digits, small_net):
    Xd, yd = digits
    ens = DeepEnsembleClassifier(small_net(max_epochs=2, n_samples=4), n_members=2, samples_per_member=3,
                                 random_state=0).fit(Xd[:60], yd[:60])
    P = ens.predict_proba_samples(Xd[60:160])
    assert P.shape == (6, 100, 10)
    np.testing.assert_allclose(P[:3], ens.estimators_[0].predict_proba_samples(Xd[60:160], n_samples=3))
    for strategy in (bald, diversity_penalty(bald, 0.1)):
        assert len(set(strategy(ens, Xd[60:160], 4)[0].tolist())) == 4
    # BatchBALD asks for consistent samples, and the ensemble passes the request to its members: its picks
    # are those of the members' consistent passes (each member's masks shared by every input), not of
    # their per-row passes
    consistent = np.concatenate([m.set_params(consistent_masks=True).predict_proba_samples(Xd[60:160], n_samples=3)
                                 for m in ens.estimators_])
    for m in ens.estimators_:
        m.set_params(consistent_masks=False)
    np.testing.assert_array_equal(ens.predict_proba_samples(Xd[60:160], consistent=True), consistent)
    assert not np.allclose(ens.predict_proba_samples(Xd[60:160]), consistent)
    idx, gains = batch_bald(ens, Xd[60:160], 4, random_state=0)
    ref_idx, ref_gains = batch_bald_select(consistent, 4, random_state=0)
    np.testing.assert_array_equal(idx, ref_idx)
    np.testing.assert_allclose(gains, ref_gains)
    acq = noise_filter(bald, "dynamic").acquire(ens, Xd[60:160], 3, y_pool=yd[60:160])
    assert len(acq.indices) == 3 and "threshold" in acq.info
    learner = ActiveLearner(DeepEnsembleClassifier(small_net(max_epochs=2), n_members=2, random_state=0), bald,
                            random_state=0, verbose=False)
    learner.teach(Xd[:40], yd[:40])
    assert len(learner.query(Xd[40:200], n_instances=3)[0]) == 3
    assert clone(ens).get_params()["n_members"] == 2 and not hasattr(clone(ens), "estimators_")
    again = pickle.loads(pickle.dumps(ens))
    np.testing.assert_allclose(again.predict_proba(Xd[:20]), ens.predict_proba(Xd[:20]), atol=1e-6)


class SeedLabels(ClassifierMixin, BaseEstimator):
    """A toy whose classes depend on its seed: member 0 sees all, the others drop one."""

    def __init__(self, random_state=None):
        self.random_state = random_state

    def fit(self, X, y):
        self.classes_ = np.unique(y)[: 3 if self.random_state % 2 else 2]
        return self

    def predict_proba(self, X):
        return np.full((len(X), len(self.classes_)), 1 / len(self.classes_))


@pytest.mark.parametrize("params, y_kind, error, match", [
    (dict(n_members=0), "labels", ValueError, "n_members must be an int >= 1; got 0"),
    (dict(n_members=2.5), "labels", ValueError, "n_members must be an int >= 1"),
    (dict(samples_per_member=0), "labels", ValueError, "samples_per_member must be"),
    (dict(samples_per_member=3), "labels", TypeError, "samples_per_member needs members with predict_proba_samples"),
    (dict(), "continuous", ValueError, "Unknown label type"),
])
def test_bad_input(iris, params, y_kind, error, match):
    X, y = iris
    if y_kind == "continuous":
        y = np.random.RandomState(0).rand(len(y))
    ens = DeepEnsembleClassifier(sgd(), **params)
    with pytest.raises(error, match=match):
        ens.fit(X, y)
    assert not hasattr(ens, "estimators_")


def test_members_whose_classes_differ(iris):
    X, y = iris
    with pytest.raises(ValueError, match="the members' classes_ differ"):
        DeepEnsembleClassifier(SeedLabels(), n_members=6, random_state=0).fit(X, y)
    with pytest.raises(TypeError, match="must be a classifier with fit and predict_proba"):
        DeepEnsembleClassifier(object()).fit(X, y)
