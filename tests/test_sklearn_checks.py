"""scikit-learn's estimator checks on a tabular MCDropoutClassifier and on the estimators that pass them."""
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from skdbal import MCDropoutClassifier
from skdbal.nets import MLP

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

    from skorch import NeuralNetClassifier
    from sklearn.utils.estimator_checks import check_no_attributes_set_in_init, check_set_params

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
    check(estimator)
