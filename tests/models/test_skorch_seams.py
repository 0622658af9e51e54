"""Where MCDropoutClassifier meets skorch and scikit-learn conventions (each case once failed)."""
import io

import numpy as np
import pandas as pd
import pytest
import skorch
from sklearn.exceptions import NotFittedError

from skdbal import ActiveLearner, MCDropoutClassifier
from skdbal.models import MLP


@pytest.fixture
def iris():
    from sklearn.datasets import load_iris
    X, y = load_iris(return_X_y=True)
    return X.astype(np.float32), y


def test_valid_split_and_early_stopping(iris, digits, small_net):
    X, y = iris
    net = MCDropoutClassifier(MLP, max_epochs=30, train_split=skorch.dataset.ValidSplit(5), random_state=0,
                              callbacks=[skorch.callbacks.EarlyStopping(patience=2)]).fit(X, y)
    assert "valid_loss" in net.history[-1] and "valid_acc" in net.history[-1]
    assert len(net.history) < 30  # stopped early on the validation loss
    # inside the learner too
    Xd, yd = digits
    learner = ActiveLearner(small_net(max_epochs=3, train_split=skorch.dataset.ValidSplit(4)))
    learner.teach(Xd[:40], yd[:40])
    assert "valid_loss" in learner.estimator_.history[-1]


def test_save_params_into_a_bare_initialized_net(iris, digits, small_net, tmp_path):
    X, y = iris
    net = MCDropoutClassifier(MLP, max_epochs=3, random_state=0).fit(X, y)
    net.save_params(f_params=tmp_path / "p.pt")
    new = MCDropoutClassifier(MLP, classes=[0, 1, 2], random_state=0).initialize()  # default sizes: 64 inputs
    new.load_params(f_params=tmp_path / "p.pt")
    np.testing.assert_allclose(new.predict_proba(X), net.predict_proba(X))
    # images, with a file object
    Xd, yd = digits
    cnn = small_net(max_epochs=2).fit(Xd[:60], yd[:60])
    buf = io.BytesIO()
    cnn.save_params(f_params=buf)
    buf.seek(0)
    other = small_net().initialize()
    other.load_params(f_params=buf)
    assert other.module_.trunk[0].shape == (1, 8, 8)
    np.testing.assert_allclose(other.predict_proba(Xd[:5]), cnn.predict_proba(Xd[:5]), atol=1e-6)
    # sizes given explicitly win, and a mismatch names the parameter
    fixed = MCDropoutClassifier(MLP, classes=[0, 1, 2], module__n_features=5).initialize()
    with pytest.raises(ValueError, match="(?s)do not fit this MLP.*trunk.1.weight"):
        fixed.load_params(f_params=tmp_path / "p.pt")


def test_a_state_saved_before_sizes_were_recorded_still_loads(digits, small_net):
    # the noise grid's weights caches of results version 2 hold no "_extra_state"
    Xd, yd = digits
    cnn = small_net(max_epochs=2).fit(Xd[:60], yd[:60])
    state = {k: v for k, v in cnn.module_.state_dict().items() if k != "_extra_state"}
    other = small_net(max_epochs=1).fit(Xd[60:120], yd[60:120])  # other weights, the same sizes
    assert not np.allclose(other.predict_proba(Xd[:5]), cnn.predict_proba(Xd[:5]), atol=1e-3)
    other.module_.load_state_dict(state)
    np.testing.assert_allclose(other.predict_proba(Xd[:5]), cnn.predict_proba(Xd[:5]), atol=1e-6)
    # a tensor of another size still fails, and an unknown key still counts
    bad = dict(state)
    first = next(iter(bad))
    bad[first] = bad[first][..., :1]
    with pytest.raises(RuntimeError, match="size mismatch"):
        other.module_.load_state_dict(bad)
    with pytest.raises(RuntimeError, match="Unexpected key"):
        other.module_.load_state_dict({**state, "stray": state[first]})


def test_sample_weight_is_refused_before_training(iris):
    X, y = iris
    net = MCDropoutClassifier(MLP, max_epochs=1)
    with pytest.raises(TypeError, match="does not support sample_weight.*criterion__weight"):
        net.fit(X, y, sample_weight=np.ones(len(y)))
    assert not net.initialized_


@pytest.mark.parametrize("params, fit_y, error, match", [
    ({}, "continuous", ValueError, "Unknown label type: continuous"),
    ({"n_samples": 0}, None, ValueError, r"n_samples \(the number of MC passes T\) must be an int >= 1; got 0"),
    ({"n_samples": -2}, None, ValueError, "got -2"),
    ({"predict_method": "mean"}, None, ValueError, "predict_method must be"),
    ({"mask_seeding": "cell"}, None, ValueError,
     "mask_seeding must be one of 'auto', 'row_pcg64', 'row', 'stream', 'row_philox'; got 'cell'"),
])
def test_bad_parameters_and_targets_fail_before_training(iris, params, fit_y, error, match):
    X, y = iris
    if fit_y == "continuous":
        y = np.random.RandomState(0).rand(len(y))
    net = MCDropoutClassifier(MLP, max_epochs=1, **params)
    with pytest.raises(error, match=match):
        net.fit(X, y)
    assert not net.initialized_


def test_predict_before_fit_raises_not_fitted(iris):
    X, _ = iris
    for method in ("predict", "predict_proba", "predict_proba_samples", "transform"):
        with pytest.raises(NotFittedError):
            getattr(MCDropoutClassifier(MLP), method)(X)


def test_feature_counts_and_names_are_checked(iris):
    X, y = iris
    net = MCDropoutClassifier(MLP, max_epochs=2, random_state=0).fit(X, y)
    assert net.n_features_in_ == 4 and not hasattr(net, "feature_names_in_")
    with pytest.raises(ValueError, match="X has 3 features, but MCDropoutClassifier is expecting 4"):
        net.predict(X[:, :3])
    df = pd.DataFrame(X, columns=["sl", "sw", "pl", "pw"])
    net = MCDropoutClassifier(MLP, max_epochs=2, random_state=0).fit(df, y)
    assert list(net.feature_names_in_) == ["sl", "sw", "pl", "pw"]
    with pytest.raises(ValueError, match="Feature names must be in the same order"):
        net.predict(df[["pw", "pl", "sw", "sl"]])
    np.testing.assert_array_equal(net.predict(df), net.predict(X))  # a plain array is accepted, as in sklearn
    # a non-contiguous view (negative strides) is copied, not refused by torch
    np.testing.assert_allclose(net.predict_proba(X[::-1]), net.predict_proba(X.copy()[::-1].copy()))


def test_ctrl_c_stops_fit_instead_of_a_half_trained_net(iris):
    """skorch swallows KeyboardInterrupt in fit (its EarlyStopping raises one) and returns the half-trained
    net; in a loop or a grid that becomes a step (and a saved row) from a model that did not train. A real
    SIGINT gets through ours; early stopping still works (see test_valid_split_and_early_stopping)."""
    import os
    import signal
    X, y = iris

    class CtrlC(skorch.callbacks.Callback):
        def on_epoch_end(self, net, **kwargs):
            if len(net.history) == 2:
                os.kill(os.getpid(), signal.SIGINT)

    # Python's own SIGINT handler, also where the shell started the tests with SIGINT ignored
    # (a command run in the background with `&` by a non-interactive shell); there a Ctrl-C
    # cannot reach the program, and MCDropoutClassifier leaves SIGINT alone, by design
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        net = MCDropoutClassifier(MLP, max_epochs=10, callbacks=[CtrlC()])
        with pytest.raises(KeyboardInterrupt):
            net.fit(X, y)
        assert len(net.history) == 2
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)

    class Stop(skorch.callbacks.Callback):  # skorch's own way of ending training
        def on_epoch_end(self, net, **kwargs):
            if len(net.history) == 3:
                raise KeyboardInterrupt

    net = MCDropoutClassifier(MLP, max_epochs=10, callbacks=[Stop()]).fit(X, y)
    assert len(net.history) == 3
