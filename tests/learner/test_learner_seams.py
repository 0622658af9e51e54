"""ActiveLearner where it meets scikit-learn: its type, and bad input that must change nothing."""
import copy

import numpy as np
import pytest
from sklearn.base import is_classifier, is_regressor
from sklearn.datasets import load_breast_cancer
from sklearn.ensemble import VotingClassifier
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.model_selection import StratifiedKFold, check_cv, cross_val_score

from skdbal import ActiveLearner


def test_the_learner_has_its_estimators_type():
    X, y = load_breast_cancer(return_X_y=True)
    learner = ActiveLearner(LogisticRegression(max_iter=3000), verbose=False)
    assert is_classifier(learner) and not is_regressor(learner)
    assert is_regressor(ActiveLearner(LinearRegression())) and not is_classifier(ActiveLearner(LinearRegression()))
    assert is_classifier(ActiveLearner())  # the default MCDropoutClassifier
    assert isinstance(check_cv(3, y, classifier=is_classifier(learner)), StratifiedKFold)
    auc = cross_val_score(learner, X, y, scoring="roc_auc", cv=3)
    assert np.all(np.isfinite(auc)) and auc.min() > 0.95
    vote = VotingClassifier([("al", learner), ("lr", LogisticRegression(max_iter=3000))], voting="soft")
    assert vote.fit(X, y).score(X, y) > 0.9


def test_query_refuses_a_pool_of_another_shape(fitted_net, digits, small_net):
    X, y = digits
    learner = ActiveLearner(small_net(max_epochs=1), verbose=False).fit(X[:30], y[:30])
    state = learner.rng_.get_state()[1].copy()
    with pytest.raises(ValueError, match=r"X_pool has per-sample shape \(4, 16\), but the labelled set has \(8, 8\)"):
        learner.query(X[100:200].reshape(100, 4, 16), n_instances=3)
    with pytest.raises(TypeError, match="X_pool has dtype uint8"):
        learner.query((X[100:200] * 255).astype(np.uint8), n_instances=3)
    np.testing.assert_array_equal(learner.rng_.get_state()[1], state)


@pytest.mark.parametrize("bad, match", [
    ("nan", "X_test contains NaN"),
    ("strings", "y_test has labels of dtype <U1, but y_pool of dtype int64"),
    ("unknown", r"y_test contains labels that y_pool does not: \[42\]"),
])
def test_simulate_checks_the_test_set_before_changing_anything(digits, small_net, bad, match):
    X, y = digits
    learner = ActiveLearner(small_net(max_epochs=1), random_state=0, verbose=False)
    learner.simulate(X[:200], y[:200], n_queries=1, n_instances=5, X_test=X[1000:1100], y_test=y[1000:1100])
    before = (copy.deepcopy(learner.history_), learner.labelled_idx_.copy(), learner.X_training_.copy(),
              learner.estimator_)
    X_test, y_test = X[1000:1100].copy(), y[1000:1100].copy()
    if bad == "nan":
        X_test[3, 2, 2] = np.nan
    elif bad == "strings":
        y_test = np.array(list("abcdefghij") * 10)
    else:
        y_test[7] = 42
    with pytest.raises(ValueError, match=match):
        learner.simulate(X[:200], y[:200], n_queries=1, n_instances=5, X_test=X_test, y_test=y_test)
    assert learner.history_ == before[0] and learner.estimator_ is before[3]
    np.testing.assert_array_equal(learner.labelled_idx_, before[1])
    np.testing.assert_array_equal(learner.X_training_, before[2])


def _frame(n, seed=0):
    import pandas as pd
    rng = np.random.RandomState(seed)
    a, b = rng.randn(n), rng.randn(n)
    c = rng.choice(["red", "green", "blue"], n)
    y = ((a + (c == "red") * 1.5) > 0.3).astype(int)
    return pd.DataFrame({"a": a, "b": b, "c": c}), y


def _by_name_pipeline():
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler
    columns = ColumnTransformer([("num", StandardScaler(), ["a", "b"]), ("cat", OneHotEncoder(), ["c"])])
    return make_pipeline(columns, LogisticRegression())


def test_dataframes_stay_dataframes_through_the_learner():
    from skdbal.acquisition import max_entropy
    X, y = _frame(300)
    learner = ActiveLearner(_by_name_pipeline(), max_entropy, random_state=0, verbose=False)
    learner.fit(X.iloc[:20], y[:20])
    idx, X_query = learner.query(X.iloc[100:], n_instances=5)
    assert X_query.columns.tolist() == ["a", "b", "c"] and len(X_query) == 5
    learner.teach(X_query, y[100:][idx])
    assert type(learner.X_training_).__name__ == "DataFrame" and len(learner.X_training_) == 25
    assert learner.X_training_["c"].tolist()[:20] == X["c"].tolist()[:20]  # mixed types kept
    assert learner.predict(X.iloc[:5]).shape == (5,)
    with pytest.raises(ValueError, match=r"columns \['b', 'a', 'c'\], but the labelled set has \['a', 'b', 'c'\]"):
        learner.teach(X_query[["b", "a", "c"]], y[:5])
    assert len(learner.X_training_) == 25
    history = ActiveLearner(_by_name_pipeline(), max_entropy, random_state=0, verbose=False).simulate(
        X.iloc[:200], y[:200], n_queries=3, n_instances=5, X_test=X.iloc[200:], y_test=y[200:])
    assert [r["n_labels"] for r in history] == [4, 9, 14, 19] and history[-1]["accuracy"] > 0.6


@pytest.mark.parametrize("dump", ["pickle", "joblib"])
def test_a_saved_learner_continues_the_loop_as_if_never_stopped(digits, small_net, tmp_path, dump):
    import pickle

    import joblib
    X, y = digits
    kw = dict(n_instances=5, X_test=X[1000:1200], y_test=y[1000:1200])
    whole = ActiveLearner(small_net(max_epochs=3), random_state=0, verbose=False)
    whole.simulate(X[:300], y[:300], n_queries=4, **kw)
    first = ActiveLearner(small_net(max_epochs=3), random_state=0, verbose=False)
    first.simulate(X[:300], y[:300], n_queries=2, **kw)
    path = tmp_path / "learner.bin"
    if dump == "pickle":
        path.write_bytes(pickle.dumps(first))
        again = pickle.loads(path.read_bytes())
    else:
        joblib.dump(first, path)
        again = joblib.load(path)
    np.testing.assert_array_equal(again.predict_proba_samples(X[:20]), first.predict_proba_samples(X[:20]))
    again.simulate(X[:300], y[:300], n_queries=2, warm_start=True, **kw)
    strip = lambda h: [{k: v for k, v in r.items() if not k.endswith("time")} for r in h]  # noqa: E731
    assert strip(again.history_) == strip(whole.history_)
    np.testing.assert_array_equal(again.labelled_idx_, whole.labelled_idx_)
