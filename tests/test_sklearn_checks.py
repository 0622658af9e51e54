"""scikit-learn's estimator checks on a tabular MCDropoutClassifier and on the estimators that pass them."""
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from skdbal import MCDropoutClassifier
from skdbal.models import MLP

#: Checks that MCDropoutClassifier fails by skorch's design, not ours; skorch's own
#: NeuralNetClassifier fails them the same way.
SKORCH_BY_DESIGN = {
    "check_no_attributes_set_in_init":
        "skorch's NeuralNet.__init__ sets history_, initialized_ and virtual_params_, and stores "
        "its routed parameters (iterator_train__shuffle) as attributes",
    "check_set_params":
        "skorch lists its private _params_to_validate set among the parameters, and the check overwrites "
        "it with a float",
}


def tabular_net():
    return MCDropoutClassifier(MLP, max_epochs=5, n_samples=5, random_state=0)


@parametrize_with_checks([tabular_net()], expected_failed_checks=lambda est: SKORCH_BY_DESIGN)
def test_mc_dropout_classifier_passes_sklearn_checks(estimator, check):
    check(estimator)


def test_the_expected_failures_are_skorchs():
    """The listed failures fail for skorch's NeuralNetClassifier itself."""
    import warnings

    from sklearn.utils.estimator_checks import check_no_attributes_set_in_init, check_set_params
    from skorch import NeuralNetClassifier

    net = NeuralNetClassifier(MLP)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(AssertionError, match="history_"):
            check_no_attributes_set_in_init("NeuralNetClassifier", net)
        with pytest.raises(AttributeError, match="'float' object has no attribute 'add'"):
            check_set_params("NeuralNetClassifier", net)


def tabular_regressor():
    from skdbal import MCDropoutRegressor

    return MCDropoutRegressor(MLP, max_epochs=20, n_samples=5, random_state=0)


@parametrize_with_checks([tabular_regressor()], expected_failed_checks=lambda est: SKORCH_BY_DESIGN)
def test_mc_dropout_regressor_passes_sklearn_checks(estimator, check):
    if getattr(check, "func", check).__name__ != "check_methods_subset_invariance":
        check(estimator)
        return
    # A row's passes use the same masks however the rows are batched (mask_seeding="row_pcg64"), but
    # the float32 matrix products over one row's T passes and over all rows' round differently in
    # the last bits: up to 2 ulp on these outputs, over the check's atol of 1e-7 (which one passes
    # depends on the masks and the BLAS). The check, else the same comparison at float32's tolerance.
    try:
        check(estimator)
    except AssertionError:
        import numpy as np
        from sklearn.base import clone

        rng = np.random.RandomState(0)
        X = 3 * rng.uniform(size=(20, 3)).astype(np.float32)
        y = X.sum(1) + rng.normal(size=20).astype(np.float32)
        est = clone(estimator).fit(X, y)
        full = est.predict(X)
        by_row = np.concatenate([est.predict(x[None]) for x in X])
        np.testing.assert_allclose(by_row, full, rtol=1e-6, atol=1e-6)
        assert np.isfinite(full).all() and full.std() > 0.1  # real predictions, not a constant


# ---------------------------------------------------------------- every public estimator (issue 27, item 8)
#: What a float32 network's features cannot promise to scikit-learn's tolerance, checked here at a
#: float32 one instead: its matrix products over batches of other sizes may differ in the last bit
#: (about 2e-7 relative on features of size 2, over the check's 1e-7) or not, by the CPU's kernels (an
#: AMD EPYC differed, an Intel Xeon did not), so neither a pass nor an expected failure can be pinned.
FLOAT32_NET = {"check_methods_subset_invariance": "_subset_invariance_to_float32"}


def _check_name(check) -> str:
    return getattr(check, "func", check).__name__


def _subset_invariance_to_float32(estimator):
    """sklearn's check_methods_subset_invariance at float32's tolerance: transform over the whole set,
    over batches of 7 and row by row agree to 1e-5 relative."""
    import numpy as np
    from sklearn.base import clone

    rng = np.random.RandomState(0)
    X = rng.normal(size=(40, 4)).astype(np.float32)
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    est = clone(estimator).fit(X, y)
    full = est.transform(X)
    batches = np.concatenate([est.transform(X[s:s + 7]) for s in range(0, len(X), 7)])
    rows = np.concatenate([est.transform(X[i:i + 1]) for i in range(len(X))])
    np.testing.assert_allclose(batches, full, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rows, full, rtol=1e-5, atol=1e-6)
    assert full.std() > 1e-3  # real features, not a constant


def _net_features():
    from skdbal import NetFeatures

    return NetFeatures(MCDropoutClassifier(MLP, max_epochs=5, n_samples=5, random_state=0))


def _ensemble():
    from skdbal import DeepEnsembleClassifier

    return DeepEnsembleClassifier(MCDropoutClassifier(MLP, max_epochs=5, n_samples=5, random_state=0),
                                  n_members=2, samples_per_member=2, random_state=0)


def _learner():
    from skdbal import ActiveLearner

    return ActiveLearner(MCDropoutClassifier(MLP, max_epochs=5, n_samples=5, random_state=0), random_state=0,
                         verbose=False)


def _blr(inference):
    from skdbal import BayesianLinearRegression

    return BayesianLinearRegression(inference=inference)


@parametrize_with_checks([_ensemble(), _learner(), _blr("analytic"), _blr("mfvi"), _net_features()])
def test_public_estimators_pass_sklearn_checks(estimator, check):
    if type(estimator).__name__ == "NetFeatures" and _check_name(check) in FLOAT32_NET:
        _subset_invariance_to_float32(estimator)  # the same property at float32's tolerance
    else:
        check(estimator)


def test_learner_checks_features_and_refuses_unconvertible_objects():
    """The two failures check_estimator found in the learner, pinned by hand."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    from skdbal import ActiveLearner

    X = np.random.RandomState(0).normal(size=(20, 3))
    y = (X[:, 0] > 0).astype(int)
    learner = ActiveLearner(LogisticRegression(), verbose=False).fit(X.astype(object), y)
    assert learner.n_features_in_ == 3 and learner.X_training_.dtype == np.float64
    with pytest.raises(ValueError, match="X has 2 features, but ActiveLearner is expecting 3"):
        learner.predict(X[:, :2])
    bad = X.astype(object)
    bad[0, 0] = {"a": 1}
    with pytest.raises(TypeError, match="argument must be a string or a real number"):
        ActiveLearner(LogisticRegression(), verbose=False).fit(bad, y)


def _laplace():
    from skdbal.models import LaplaceClassifier  # laplace-torch itself is imported by fit only

    return LaplaceClassifier(MCDropoutClassifier(MLP, max_epochs=5, n_samples=5, random_state=0), n_samples=5,
                             random_state=0)


@parametrize_with_checks([_laplace()])
def test_laplace_classifier_passes_sklearn_checks(estimator, check):
    pytest.importorskip("laplace")  # the optional laplace-torch, not in the test extra
    check(estimator)
