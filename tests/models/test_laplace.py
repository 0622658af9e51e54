"""LaplaceClassifier: the last-layer Laplace posterior of laplace-torch behind the predictive interface."""
import copy
import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

torch = pytest.importorskip("torch")
with warnings.catch_warnings():  # laplace's asdl backend calls torch.jit.script, which torch deprecates
    warnings.filterwarnings("ignore", message=r".*torch\.jit\.script", category=DeprecationWarning)
    laplace = pytest.importorskip("laplace")

from skdbal import ActiveLearner, MCDropoutClassifier  # noqa: E402
from skdbal.acquisition import bald, batch_bald, diversity_penalty, max_entropy, noise_filter  # noqa: E402
from skdbal.models import MLP, LaplaceClassifier  # noqa: E402
from skdbal.predictive import as_predictive  # noqa: E402

N_TRAIN = 200


@pytest.fixture(scope="module")
def flat(digits):
    X, y = digits
    return X.reshape(len(X), -1), y


def tabular_net(**params):
    defaults = dict(classes=np.arange(10), max_epochs=5, batch_size=32, n_samples=4, random_state=0,
                    module__hidden_layer_sizes=(32,))
    defaults.update(params)
    return MCDropoutClassifier(MLP, **defaults)


@pytest.fixture(scope="module")
def fitted(flat):
    X, y = flat
    return LaplaceClassifier(tabular_net(), n_samples=16, batch_size=64, random_state=3).fit(X[:N_TRAIN], y[:N_TRAIN])


def _loader(clf, X, y, batch_size):
    Xt, yt = torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(y, dtype=torch.long)
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(Xt, yt), batch_size=batch_size)


# ---------------------------------------------------------------- against the library itself
@pytest.mark.parametrize("pred_type", ["nn", "glm"])
def test_samples_are_the_librarys_predictive_samples(fitted, flat, pred_type):
    """Same seed, same samples: predict_proba_samples is la.predictive_samples with a generator seeded
    by random_state, over batches each seeded anew (so the batch size does not matter). With
    pred_type="nn" the same draws of the last layer are applied to every row at once (one matrix
    product, the library's one small layer per draw and batch): the same up to float32 rounding."""
    X, _ = flat
    x = X[N_TRAIN:N_TRAIN + 50]
    clf = clone(fitted).set_params(pred_type=pred_type, batch_size=1000)
    clf.estimator_, clf.laplace_, clf.classes_, clf.n_features_in_ = (
        fitted.estimator_, fitted.laplace_, fitted.classes_, fitted.n_features_in_)
    ours = clf.predict_proba_samples(x, n_samples=7)
    theirs = fitted.laplace_.predictive_samples(torch.as_tensor(x), pred_type=pred_type, n_samples=7,
                                                generator=torch.Generator().manual_seed(3)).numpy()
    assert ours.shape == (7, 50, 10) and ours.dtype == np.float32
    if pred_type == "nn":
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-6)
    else:
        np.testing.assert_array_equal(ours, theirs)
    # batches of 16 rows: each batch draws the same samples, so the rows get the same ones
    np.testing.assert_allclose(clf.set_params(batch_size=16).predict_proba_samples(x, n_samples=7), ours,
                               rtol=0, atol=1e-6)
    assert not np.allclose(ours[0], ours[1])  # posterior samples differ


def test_mean_matches_the_librarys_probit_and_mc_predictive(fitted, flat):
    X, _ = flat
    x = X[N_TRAIN:N_TRAIN + 60]
    la = fitted.laplace_
    probit = la(torch.as_tensor(x), pred_type="glm", link_approx="probit").numpy()
    np.testing.assert_allclose(fitted.predict_proba(x), probit, rtol=0, atol=1e-6)  # the library's probit
    mean = fitted.predict_proba_samples(x, n_samples=4000).mean(axis=0)
    mc = la(torch.as_tensor(x), pred_type="glm", link_approx="mc", n_samples=4000).numpy()
    np.testing.assert_allclose(mean, mc, atol=0.03)  # two MC estimates of one predictive
    np.testing.assert_allclose(mean, probit, atol=0.06)  # the probit approximation of it
    mc_clf = clone(fitted).set_params(link_approx="mc", n_samples=50)
    mc_clf.estimator_, mc_clf.laplace_, mc_clf.classes_, mc_clf.n_features_in_ = (
        fitted.estimator_, la, fitted.classes_, fitted.n_features_in_)
    np.testing.assert_allclose(mc_clf.predict_proba(x), mc_clf.predict_proba_samples(x).mean(axis=0), atol=1e-7)
    np.testing.assert_allclose(mc_clf.predict_proba(x).sum(axis=1), 1, atol=1e-5)


def test_prior_precision_is_the_librarys_marginal_likelihood_fit(fitted, flat):
    X, y = flat
    assert fitted.prior_precision_ != pytest.approx(1.0, rel=1e-3)  # moved from the initial value
    # the library's own routine on the same network and data
    la = laplace.Laplace(copy.deepcopy(fitted.estimator_.module_).eval(), "classification",
                         subset_of_weights="last_layer", hessian_structure="kron")
    la.fit(_loader(fitted, X[:N_TRAIN], y[:N_TRAIN], batch_size=64))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        la.optimize_prior_precision(pred_type="glm", method="marglik", n_steps=100)
    assert fitted.prior_precision_ == pytest.approx(float(la.prior_precision), rel=1e-5)
    assert fitted.log_marginal_likelihood_ == pytest.approx(float(la.log_marginal_likelihood()), rel=1e-5)
    # and it is a better evidence than the starting point
    la.prior_precision = 1.0
    assert fitted.log_marginal_likelihood_ > float(la.log_marginal_likelihood())


def test_without_optimisation_the_prior_is_kept(flat):
    X, y = flat
    clf = LaplaceClassifier(tabular_net(max_epochs=1), optimize_prior=False, prior_precision=3.5,
                            random_state=0).fit(X[:80], y[:80])
    assert clf.prior_precision_ == pytest.approx(3.5)


def test_the_posterior_sits_at_the_networks_eval_mode_function(flat):
    """No dropout in the Laplace model: with a prior that pins the weights at the MAP, every sample is the
    network's deterministic (eval-mode) prediction, and the network itself is left as it was."""
    X, y = flat
    net = tabular_net(max_epochs=2).fit(X[:100], y[:100])
    net.module_.train()
    before = [p.detach().clone() for p in net.module_.parameters()]
    clf = LaplaceClassifier(net, prefit=True, optimize_prior=False, prior_precision=1e10, n_samples=5,
                            random_state=0).fit(X[:100], y[:100])
    assert clf.estimator_ is net and net.module_.training  # frozen: the same object, its mode untouched
    assert not clf.laplace_.model.training
    assert all(torch.equal(a, b) for a, b in zip(before, net.module_.parameters()))
    x = X[100:140]
    with torch.no_grad():
        deterministic = torch.softmax(copy.deepcopy(net.module_).eval()(torch.as_tensor(x)), -1).numpy()
    samples = clf.predict_proba_samples(x)
    np.testing.assert_allclose(samples, np.broadcast_to(deterministic, samples.shape), atol=1e-4)
    np.testing.assert_allclose(clf.predict_proba(x), deterministic, atol=1e-4)


@pytest.mark.parametrize("structure", ["kron", "full", "diag"])
def test_every_hessian_structure(flat, structure):
    X, y = flat
    clf = LaplaceClassifier(tabular_net(max_epochs=2, module__hidden_layer_sizes=(8,)),
                            hessian_structure=structure, n_samples=3, random_state=0).fit(X[:80], y[:80])
    name = {"kron": "KronLLLaplace", "full": "FullLLLaplace", "diag": "DiagLLLaplace"}[structure]
    assert type(clf.laplace_).__name__ == name
    P = clf.predict_proba_samples(X[80:90])
    assert P.shape == (3, 10, 10)
    np.testing.assert_allclose(P.sum(axis=-1), 1, atol=1e-5)
    restored = pickle.loads(pickle.dumps(clf))
    assert type(restored.laplace_).__name__ == name
    np.testing.assert_array_equal(restored.predict_proba_samples(X[80:90]), P)
    with torch.no_grad():  # the caller's autograd mode does not matter
        np.testing.assert_array_equal(restored.set_params(pred_type="glm").predict_proba_samples(X[80:90]),
                                      clf.set_params(pred_type="glm").predict_proba_samples(X[80:90]))
        np.testing.assert_allclose(restored.predict_proba(X[80:90]), clf.predict_proba(X[80:90]), atol=1e-7)


# ---------------------------------------------------------------- seeding
def test_seeding(fitted, flat):
    X, _ = flat
    x = X[N_TRAIN:N_TRAIN + 20]
    state = torch.get_rng_state()
    a, b = fitted.predict_proba_samples(x), fitted.predict_proba_samples(x)
    np.testing.assert_array_equal(a, b)  # an int seed: every call the same
    assert torch.equal(state, torch.get_rng_state())  # the global generator untouched
    # a row's samples depend on the row and the seed only
    np.testing.assert_allclose(fitted.predict_proba_samples(x[::-1])[:, ::-1], a, rtol=0, atol=1e-6)
    np.testing.assert_allclose(fitted.predict_proba_samples(x[:5]), a[:, :5], rtol=0, atol=1e-6)
    assert fitted.row_keyed_samples  # what the row-wise checks above show, declared (skdbal.predictive)
    other = copy.deepcopy(fitted).set_params(random_state=4)
    assert not np.allclose(other.predict_proba_samples(x), a)
    unseeded = copy.deepcopy(fitted).set_params(random_state=None)
    assert not unseeded.row_keyed_samples
    assert not np.allclose(unseeded.predict_proba_samples(x), unseeded.predict_proba_samples(x))
    rs = copy.deepcopy(fitted).set_params(random_state=np.random.RandomState(0))
    first = rs.predict_proba_samples(x)
    assert not np.allclose(first, rs.predict_proba_samples(x))  # each call a seed drawn from it
    np.testing.assert_array_equal(
        copy.deepcopy(fitted).set_params(random_state=np.random.RandomState(0)).predict_proba_samples(x), first)


def test_consistent_samples(fitted, flat):
    X, _ = flat
    x = X[N_TRAIN:N_TRAIN + 10]
    np.testing.assert_array_equal(fitted.predict_proba_samples(x, consistent=True), fitted.predict_proba_samples(x))
    glm = copy.deepcopy(fitted).set_params(pred_type="glm")
    with pytest.raises(TypeError, match="pred_type='nn'"):
        glm.predict_proba_samples(x, consistent=True)


def test_pickles_and_deep_copies(fitted, flat):
    X, _ = flat
    x = X[N_TRAIN:N_TRAIN + 10]
    for restored in (pickle.loads(pickle.dumps(fitted)), copy.deepcopy(fitted)):
        np.testing.assert_array_equal(restored.predict_proba_samples(x), fitted.predict_proba_samples(x))
        np.testing.assert_array_equal(restored.predict_proba(x), fitted.predict_proba(x))
        assert restored.prior_precision_ == fitted.prior_precision_


# ---------------------------------------------------------------- scikit-learn conventions
def test_get_params_and_clone(fitted):
    params = fitted.get_params(deep=False)
    assert set(params) == {"estimator", "prefit", "hessian_structure", "pred_type", "link_approx", "n_samples",
                           "prior_precision", "optimize_prior", "marglik_steps", "batch_size", "random_state"}
    assert "estimator__max_epochs" in fitted.get_params()
    fresh = LaplaceClassifier(tabular_net(), n_samples=5)
    twin = clone(fresh)
    assert twin.get_params(deep=False).keys() == fresh.get_params(deep=False).keys()
    assert twin.estimator is not fresh.estimator and twin.n_samples == 5
    assert not hasattr(clone(fitted), "laplace_")
    # a trained network taken as it is (prefit=True) is shared by clones; with prefit=False it is cloned
    frozen = LaplaceClassifier(fitted.estimator_, prefit=True)
    assert clone(frozen).estimator is fitted.estimator_
    assert clone(frozen.set_params(prefit=False)).estimator is not fitted.estimator_


def test_prefit_fits_only_the_posterior(fitted, flat):
    X, y = flat
    net = fitted.estimator_
    n_epochs = len(net.history)
    clf = LaplaceClassifier(net, prefit=True, random_state=0).fit(X[:N_TRAIN], y[:N_TRAIN])
    assert clf.estimator_ is net and len(net.history) == n_epochs
    assert clf.prior_precision_ == pytest.approx(fitted.prior_precision_, rel=1e-5)
    with pytest.raises(ValueError, match="prefit=True needs a trained estimator"):
        LaplaceClassifier(tabular_net(), prefit=True).fit(X[:50], y[:50])
    with pytest.raises(ValueError, match="not in the network's classes_"):
        LaplaceClassifier(net, prefit=True).fit(X[:50], y[:50] + 20)


@pytest.mark.parametrize("params", [dict(hessian_structure="lowrank"), dict(pred_type="mc"),
                                    dict(link_approx="softmax"), dict(n_samples=0), dict(marglik_steps=0),
                                    dict(batch_size=0), dict(prior_precision=-1.0),
                                    dict(prior_precision=float("nan")), dict(prefit="yes")])
def test_bad_parameters_raise_before_training(flat, params):
    X, y = flat
    net = tabular_net()
    with pytest.raises(ValueError):
        LaplaceClassifier(net, **params).fit(X[:30], y[:30])
    assert not hasattr(net, "module_")  # refused before any training


def test_bad_input_raises(fitted, flat):
    X, y = flat
    bad = X[:40].copy()
    bad[3, 5] = np.nan
    with pytest.raises(ValueError):
        LaplaceClassifier(tabular_net()).fit(bad, y[:40])
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        LaplaceClassifier(tabular_net()).fit(X[:40], y[:39])
    with pytest.raises(ValueError):
        LaplaceClassifier(tabular_net()).fit(X[:40, 0], y[:40])  # 1-d X
    with pytest.raises(ValueError, match="features"):
        fitted.predict_proba_samples(X[:5, :10])
    with pytest.raises(ValueError):
        fitted.predict_proba(bad)
    with pytest.raises(ValueError):
        fitted.predict_proba_samples(X[:5], n_samples=0)
    with pytest.raises(NotFittedError):
        LaplaceClassifier(tabular_net()).predict_proba_samples(X[:5])


# ---------------------------------------------------------------- strategies, decorators, the learner
def test_the_predictive_interface_reads_it(fitted, flat):
    X, y = flat
    pred = as_predictive(fitted)
    assert pred.source == "samples" and pred.stochastic and pred.model is fitted
    assert pred.proba_samples(X[:7]).shape == (16, 7, 10)
    assert 0.0 <= fitted.score(X[N_TRAIN:N_TRAIN + 100], y[N_TRAIN:N_TRAIN + 100]) <= 1.0


@pytest.mark.parametrize("name", ["bald", "max_entropy", "noise_filter", "diversity_penalty", "batch_bald"])
def test_every_strategy_and_decorator(fitted, flat, name):
    X, y = flat
    pool, y_pool = X[N_TRAIN:N_TRAIN + 150], y[N_TRAIN:N_TRAIN + 150]
    strategy = {"bald": bald, "max_entropy": max_entropy, "noise_filter": noise_filter(bald, 0.05),
                "diversity_penalty": diversity_penalty(bald, 0.1), "batch_bald": batch_bald}[name]
    kwargs = {"y_pool": y_pool} if name == "noise_filter" else {}
    idx, scores = strategy(fitted, pool, 4, **kwargs)
    assert len(idx) == 4 == len(np.unique(idx)) and np.all((0 <= idx) & (idx < len(pool)))
    assert np.all(np.isfinite(scores))


def test_active_learner_simulates_on_digit_images(small_net, digits):
    X, y = digits
    learner = ActiveLearner(LaplaceClassifier(small_net(max_epochs=2), n_samples=8, random_state=0), bald,
                            random_state=0, verbose=False)
    history = learner.simulate(X[:300], y[:300], n_queries=2, n_instances=3, X_test=X[1500:1600],
                               y_test=y[1500:1600])
    assert [r["n_labels"] for r in history] == [20, 23, 26]
    assert type(learner.estimator_).__name__ == "LaplaceClassifier"
    assert learner.estimator_.laplace_.n_data == 26
    assert all(0.0 <= r["accuracy"] <= 1.0 for r in history)


def test_active_learner_with_a_trained_network_refits_only_the_posterior(fitted, flat):
    X, y = flat
    net = fitted.estimator_
    n_epochs = len(net.history)
    learner = ActiveLearner(LaplaceClassifier(net, prefit=True, n_samples=4, random_state=0), max_entropy,
                            random_state=0, verbose=False)
    history = learner.simulate(X[N_TRAIN:N_TRAIN + 200], y[N_TRAIN:N_TRAIN + 200], n_queries=1, n_instances=5)
    assert [r["n_labels"] for r in history] == [20, 25]
    assert learner.estimator_.estimator_ is net and len(net.history) == n_epochs  # never retrained
    assert learner.estimator_.laplace_.n_data == 25


def test_the_runner_scores_with_the_laplace_posterior_and_resumes(tmp_path, monkeypatch):
    import csv

    from skdbal.cli import main

    args = ["experiment", "--dataset", "digits", "--strategies", "bald", "--laplace", "--seeds", "1",
            "--torch-threads", "1", "--quiet", "--out", str(tmp_path)]
    tiny = ["n_queries=2", "max_epochs=2", "n_samples=8", "pool_subsample=100", "n_validation=50",
            "module_params={'kernel_size': 3}"]
    assert main(args + [a for kv in tiny for a in ("--set", kv)]) == 0
    rows = list(csv.DictReader(open(tmp_path / "results.csv")))
    assert {r["variant"] for r in rows} == {"laplace"} and [r["step"] for r in rows] == ["0", "1", "2"]
    # its figure draws the Laplace runs, named as such (a grid of them alone once gave an empty figure)
    import skdbal.experiments.report as report
    from skdbal.experiments import read_results

    results = read_results(tmp_path / "results.csv")
    fig = report.plot_curves(results, None, variants=("laplace",))
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["BALD (laplace), 1 run(s)"]
    calls, plot = [], report.plot_curves
    monkeypatch.setattr(report, "plot_curves", lambda rows, path, **kw: calls.append(kw) or plot(rows, path, **kw))
    report.write_report(tmp_path)
    assert calls[0]["variants"] == ("laplace",) and calls[0]["title"].startswith("digits, Bayesian CNN:")
    before = (tmp_path / "runs" / "gal2017__bald__laplace__seed1.csv").read_text()
    assert main(args + [a for kv in tiny for a in ("--set", kv)]) == 0        # nothing left: unchanged
    assert (tmp_path / "runs" / "gal2017__bald__laplace__seed1.csv").read_text() == before
    with pytest.raises(SystemExit):
        main(args + ["--ensemble", "3"])


def test_nn_samples_draw_the_last_layer_once_per_call(fitted, flat, monkeypatch):
    """pred_type="nn" draws the T last layers once for the whole call and applies them to every row
    (the library's predictive_samples would draw them again for every batch of batch_size rows)."""
    X, _ = flat
    clf = clone(fitted).set_params(batch_size=16)
    clf.estimator_, clf.laplace_, clf.classes_, clf.n_features_in_ = (
        fitted.estimator_, fitted.laplace_, fitted.classes_, fitted.n_features_in_)
    calls = []
    sample = type(fitted.laplace_).sample
    monkeypatch.setattr(type(fitted.laplace_), "sample", lambda self, *a, **k: calls.append(1) or sample(self, *a, **k))
    P = clf.predict_proba_samples(X[N_TRAIN:N_TRAIN + 50], n_samples=6)
    assert P.shape == (6, 50, 10) and len(calls) == 1
