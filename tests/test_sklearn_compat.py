import numpy as np
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

from skdbal import MCDropoutClassifier
from skdbal.acquisition import bald
from skdbal.models import MLP
from skdbal.uncertainty import mutual_information


def test_init_only_stores_params_and_clone_round_trips():
    net = MCDropoutClassifier(n_samples=7, mc_dropout=False, random_state=4, module__n_hidden=32, lr=0.01)
    params = net.get_params()
    assert params["n_samples"] == 7 and params["module__n_hidden"] == 32
    assert params["iterator_train__shuffle"] is True and params["train_split"] is None
    cloned = clone(net)
    for key in ("n_samples", "mc_dropout", "random_state", "module__n_hidden", "lr", "predict_method"):
        assert cloned.get_params()[key] == params[key]
    assert not hasattr(cloned, "module_")


def test_in_pipeline(small_net, digits):
    X, y = digits
    Xf = X.reshape(len(X), -1) * 16  # raw digit scale 0..16
    pipe = make_pipeline(FunctionTransformer(lambda Z: Z / 16.0),
                         small_net(module=MLP, max_epochs=30, lr=3e-3))
    pipe.fit(Xf[:500], y[:500])
    assert pipe.score(Xf[1000:1300], y[1000:1300]) > 0.8
    # a strategy can score through the pipeline
    idx, scores = bald(pipe, Xf[600:700], n_instances=5)
    P = pipe[-1].predict_proba_samples(Xf[600:700] / 16.0)
    np.testing.assert_allclose(scores, mutual_information(P)[idx], rtol=1e-6)


def test_grid_search_over_module_and_lr(small_net, digits):
    X, y = digits
    grid = GridSearchCV(
        small_net(module=MLP, max_epochs=15, n_samples=4),
        {"module__hidden_layer_sizes": [(8,), (64,)], "lr": [1e-4, 3e-3]},
        cv=2,
    )
    grid.fit(X[:400], y[:400])
    assert grid.best_params_ == {"module__hidden_layer_sizes": (64,), "lr": 3e-3}
    assert grid.best_estimator_.module_.head[-1].in_features == 64
