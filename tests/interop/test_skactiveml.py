"""scikit-activeml both ways: their strategies in our learner, our models in their BALD and BatchBALD."""
import copy

import numpy as np
import pytest

skactiveml = pytest.importorskip("skactiveml")

from skactiveml.pool import Badge, BatchBALD, CoreSet, GreedyBALD, TypiClust, UncertaintySampling  # noqa: E402
from sklearn.base import clone  # noqa: E402
from sklearn.linear_model import SGDClassifier  # noqa: E402

from skdbal import ActiveLearner, DeepEnsembleClassifier  # noqa: E402
from skdbal.acquisition import BatchBALD as OurBatchBALD  # noqa: E402
from skdbal.acquisition import bald, max_entropy  # noqa: E402
from skdbal.interop.skactiveml import SkactivemlStrategy, SkdbalClassifier, as_skactiveml_classifier  # noqa: E402
from skdbal.uncertainty import mutual_information  # noqa: E402

N_POOL = 300
TINY = 1e-300  # their eps: no clipping, so that their entropies are ours to round-off


def _run(small_net, digits, strategy, random_state=0):
    X, y = digits
    learner = ActiveLearner(small_net(max_epochs=3), strategy, random_state=random_state, verbose=False)
    history = learner.simulate(X[:N_POOL], y[:N_POOL], n_queries=2, n_instances=4)
    return learner, history


STRATEGIES = {
    "uncertainty": lambda: SkactivemlStrategy(UncertaintySampling(method="entropy")),
    "coreset": lambda: SkactivemlStrategy(CoreSet()),
    "coreset-embedding": lambda: SkactivemlStrategy(CoreSet(), features="embedding"),
    "typiclust": lambda: SkactivemlStrategy(TypiClust()),
    "badge": lambda: SkactivemlStrategy(Badge()),
    "badge-embedding": lambda: SkactivemlStrategy(Badge(clf_embedding_flag_name="return_embeddings")),
}


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_their_strategy_in_our_learner(name, small_net, digits):
    learner, history = _run(small_net, digits, STRATEGIES[name]())
    assert [row["n_labels"] for row in history] == [20, 24, 28]
    seen = set(history[0]["query_indices"])  # the initial set
    for row in history[1:]:
        picks = list(row["query_indices"])
        assert len(picks) == 4 and len(set(picks)) == 4
        assert all(0 <= i < N_POOL for i in picks) and not seen & set(picks)  # unlabelled when asked
        seen |= set(picks)
    assert np.isfinite(learner.last_acquisition_.scores).all()
    # the same random_state, the same picks
    again, _ = _run(small_net, digits, STRATEGIES[name]())
    assert again.labelled_idx_.tolist() == learner.labelled_idx_.tolist()


def test_their_seed_is_the_querys(fitted_net, digits):
    """The strategy is cloned with the query's random_state: a seed repeats the picks; its own is untouched."""
    X, _ = digits
    qs = TypiClust(random_state=None)
    strategy = SkactivemlStrategy(qs)
    first = strategy.acquire(fitted_net, X[:200], 5, random_state=3).indices
    assert strategy.acquire(fitted_net, X[:200], 5, random_state=3).indices.tolist() == first.tolist()
    assert qs.random_state is None


def test_their_entropy_is_our_max_entropy(small_net, digits):
    """UncertaintySampling(method="entropy") reads our model's predict_proba, the mean of the MC samples our
    max_entropy reads: the same picks, query after query, and the same top-k on the final model."""
    theirs, _ = _run(small_net, digits, SkactivemlStrategy(UncertaintySampling(method="entropy")))
    ours, _ = _run(small_net, digits, max_entropy)
    assert theirs.labelled_idx_.tolist() == ours.labelled_idx_.tolist()
    X, _ = digits
    unlabelled = np.flatnonzero(~theirs.labelled_mask_)
    acq = SkactivemlStrategy(UncertaintySampling(method="entropy")).acquire(theirs, X[unlabelled], 6,
                                                                           random_state=0)
    top = max_entropy.acquire(theirs, X[unlabelled], 6)
    assert acq.indices.tolist() == top.indices.tolist()
    np.testing.assert_allclose(acq.scores, top.scores, rtol=1e-5)


def test_no_refit_by_default_and_a_clone_with_fit_clf(fitted_net, digits):
    """By default their strategy reads the learner's model as it is; fit_clf=True trains a clone."""
    X, y = digits
    seen = []

    class Spy(UncertaintySampling):
        def query(self, X, y, clf, fit_clf=True, **kwargs):
            seen.append((clf, fit_clf))
            return super().query(X, y, clf, fit_clf=fit_clf, **kwargs)

    learner = ActiveLearner(clone(fitted_net), SkactivemlStrategy(Spy(method="entropy")), random_state=0,
                            verbose=False)
    y_partial = np.full(N_POOL, np.nan)
    y_partial[:40] = y[:40]
    learner.fit(X[:N_POOL], y_partial)
    learner.query(n_instances=3)
    clf, fit_clf = seen[-1]
    assert isinstance(clf, SkdbalClassifier) and clf.estimator is learner.estimator_ and fit_clf is False
    assert "estimator_" not in clf.__dict__  # not copied
    learner.set_params(query_strategy=SkactivemlStrategy(Spy(method="entropy"), fit_clf=True))
    idx, _ = learner.query(n_instances=3)
    assert len(set(idx.tolist())) == 3 and (idx >= 40).all()
    refit = clone(seen[-1][0]).fit(X[:N_POOL].reshape(N_POOL, -1), y_partial)  # what fit_clf=True trains
    assert refit.estimator_ is not learner.estimator_ and refit.classes_.tolist() == list(range(10))


def test_their_bald_reads_our_samples(fitted_net, digits):
    """GreedyBALD on our per-row samples (consistent=False) gives our BALD scores (to round-off) and our top-k.
    Only those: on the wrapper's default consistent samples (one mask set for the pool) it is the same formula
    on other masks, and its top 10 is another set (issue 44)."""
    X, y = digits
    pool = X[300:600]
    X_all = np.concatenate([X[:300], pool])
    y_partial = np.concatenate([y[:300], np.full(len(pool), np.nan)])

    def greedy_bald(clf):
        qs = GreedyBALD(sample_predictions_method_name="predict_proba_samples", eps=TINY, random_state=0)
        idx, utilities = qs.query(X_all, y_partial, ensemble=clf, fit_ensemble=False, batch_size=10,
                                  return_utilities=True)
        return np.asarray(idx) - 300, utilities[0]

    ours = bald.acquisition_scores(fitted_net, pool)
    top = bald(fitted_net, pool, 10)[0]
    idx, utilities = greedy_bald(as_skactiveml_classifier(fitted_net, consistent=False))
    np.testing.assert_allclose(utilities[300:], ours, rtol=1e-5, atol=1e-6)
    assert np.isnan(utilities[:300]).all()
    assert idx.tolist() == top.tolist()
    # consistent=True (the default): their BALD of the consistent samples, which is not ours
    clf = as_skactiveml_classifier(fitted_net)
    assert clf.consistent
    idx, utilities = greedy_bald(clf)
    shared = clf.predict_proba_samples(X_all)[:, 300:]
    np.testing.assert_allclose(utilities[300:], mutual_information(shared), rtol=1e-5, atol=1e-6)
    assert np.abs(utilities[300:] - ours).max() > 1e-2
    assert set(idx.tolist()) != set(top.tolist())
    # the wrapper says what the wrapped net says about its samples (skdbal.predictive)
    assert as_skactiveml_classifier(fitted_net).row_keyed_samples
    assert not as_skactiveml_classifier(copy.deepcopy(fitted_net).set_params(mask_seeding="stream")).row_keyed_samples


def test_their_bald_reads_our_ensemble(digits):
    X, y = digits
    X2 = X.reshape(len(X), -1)
    ens = DeepEnsembleClassifier(SGDClassifier(loss="log_loss", max_iter=20, tol=None), n_members=5,
                                 random_state=0).fit(X2[:200], y[:200])
    y_partial = np.concatenate([y[:200], np.full(300, np.nan)])
    qs = GreedyBALD(sample_predictions_method_name="predict_proba_samples", eps=TINY, random_state=0)
    idx, utilities = qs.query(X2[:500], y_partial, ensemble=SkdbalClassifier(ens), fit_ensemble=False,
                              batch_size=4, return_utilities=True)
    np.testing.assert_allclose(utilities[0, 200:], bald.acquisition_scores(ens, X2[200:500]), rtol=1e-5, atol=1e-6)
    assert (np.asarray(idx) - 200).tolist() == bald(ens, X2[200:500], 4)[0].tolist()


@pytest.mark.parametrize("model", ["mc_dropout", "ensemble"])
def test_their_batchbald_is_our_batchbald(model, fitted_net, small_net, digits):
    """With consistent samples and exact joint entropies (their n_MC_samples and our n_joint_samples at
    1000 >= 10^3 configurations), their BatchBALD picks ours, and each pick's utility, the batch's mutual
    information so far, is the running sum of our gains."""
    X, y = digits
    if model == "mc_dropout":
        est = fitted_net
    else:
        est = DeepEnsembleClassifier(small_net(max_epochs=2), n_members=4, random_state=0).fit(X[:300], y[:300])
    pool = X[300:500]
    y_partial = np.concatenate([y[:300], np.full(len(pool), np.nan)])
    qs = BatchBALD(sample_predictions_method_name="predict_proba_samples", n_MC_samples=1000, eps=TINY,
                   random_state=0)
    idx, utilities = qs.query(np.concatenate([X[:300], pool]), y_partial, ensemble=as_skactiveml_classifier(est),
                              fit_ensemble=False, batch_size=4, return_utilities=True)
    ours = OurBatchBALD(n_joint_samples=1000).acquire(est, pool, 4, random_state=0)
    assert (np.asarray(idx) - 300).tolist() == ours.indices.tolist()
    theirs = utilities[np.arange(4), idx]
    np.testing.assert_allclose(theirs, np.cumsum(ours.scores), rtol=1e-4, atol=1e-5)


def test_their_batchbald_in_our_learner(fitted_net, digits):
    """Their BatchBALD through the adapter: the learner's model, consistent samples, our picks."""
    X, y = digits
    learner = ActiveLearner(clone(fitted_net), random_state=0, verbose=False)
    y_partial = np.full(N_POOL, np.nan)
    y_partial[:40] = y[:40]
    learner.fit(X[:N_POOL], y_partial)
    unlabelled = X[40:N_POOL]
    theirs = SkactivemlStrategy(BatchBALD(sample_predictions_method_name="predict_proba_samples",
                                          n_MC_samples=1000, eps=TINY))
    acq = theirs.acquire(learner, unlabelled, 3, random_state=0)
    ours = OurBatchBALD().acquire(learner, unlabelled, 3, random_state=0)
    assert acq.indices.tolist() == ours.indices.tolist()
    np.testing.assert_allclose(acq.scores, np.cumsum(ours.scores), rtol=1e-4, atol=1e-5)


def test_the_wrapper_refuses_and_explains(digits):
    X, y = digits
    with pytest.raises(TypeError, match="classes_"):
        as_skactiveml_classifier(SGDClassifier())
    clf = SkdbalClassifier(SGDClassifier(loss="log_loss"), classes=np.arange(10))
    with pytest.raises(ValueError, match="no row of y is labelled"):
        clf.fit(X[:5].reshape(5, -1), np.full(5, np.nan))
    fitted = clf.fit(X[:50].reshape(50, -1), np.where(np.arange(50) < 30, y[:50], np.nan))
    assert fitted.predict_proba(X[:3].reshape(3, -1)).shape == (3, 10)
    with pytest.raises(TypeError, match="transform"):
        fitted.predict_proba(X[:3].reshape(3, -1), return_embeddings=True)
    with pytest.raises(ValueError, match="features='embedding' is for strategies without a classifier"):
        SkactivemlStrategy(UncertaintySampling(), features="embedding").acquire(fitted.estimator_,
                                                                                 X[:20].reshape(20, -1), 2)


def test_class_columns_follow_classes(digits):
    """A model that knows fewer classes gets zero columns for the others, in the order of ``classes``."""
    X, y = digits
    X2 = X.reshape(len(X), -1)
    keep = y < 3
    sgd = SGDClassifier(loss="log_loss", random_state=0).fit(X2[keep][:60], y[keep][:60])
    clf = SkdbalClassifier(sgd, classes=np.arange(5))
    P = clf.predict_proba(X2[:4])
    assert P.shape == (4, 5) and np.allclose(P[:, 3:], 0) and np.allclose(P[:, :3], sgd.predict_proba(X2[:4]))
    assert clf.predict(X2[:4]).tolist() == sgd.predict(X2[:4]).tolist()


@pytest.mark.parametrize("fit_clf", [False, True])
def test_string_labels_use_none_as_their_missing_label(fit_clf):
    """Labels that are not numbers cannot sit beside NaN: their missing_label is None then."""
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    X, y = load_iris(return_X_y=True)
    names = np.array(["setosa", "versicolor", "virginica"])[y]
    picks = []
    for labels in (y, names):
        learner = ActiveLearner(LogisticRegression(max_iter=200),
                                SkactivemlStrategy(UncertaintySampling(method="entropy"), fit_clf=fit_clf),
                                random_state=0, verbose=False)
        picks.append([row["query_indices"] for row in learner.simulate(X, labels, n_queries=2, n_instances=3)])
    assert picks[0] == picks[1]


def test_a_class_the_model_knows_must_be_in_classes(digits):
    X, y = digits
    X2 = X.reshape(len(X), -1)
    sgd = SGDClassifier(loss="log_loss", random_state=0).fit(X2[:100], y[:100])
    with pytest.raises(ValueError, match=r"the model's classes_ contains labels not in classes: \[3, 4"):
        SkdbalClassifier(sgd, classes=np.arange(3)).predict_proba(X2[:2])
