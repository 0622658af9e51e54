"""DDU: the class-conditional density by hand, seed 003's worked example (epistemic and aleatoric apart),
and the ddu strategy with the learner."""
import numpy as np
import pytest
from scipy.stats import norm
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression

from skdbal import ActiveLearner
from skdbal.acquisition import ddu, get_strategy, stochastic_batch
from skdbal.models import ClassConditionalGaussian, DDUClassifier


class Identity(LogisticRegression):
    """A 'network' whose features are its inputs (as seed 003's SimpleDDU, on raw x)."""

    def transform(self, X):
        return np.asarray(X, dtype=float)


def test_the_density_by_hand():
    Z = np.array([[0.0], [2.0], [3.0], [10.0], [12.0]])
    y = np.array([0, 0, 0, 1, 1])
    d = ClassConditionalGaussian(reg_covar=0.5).fit(Z, y)
    # class 0: mean 5/3, MLE variance 14/9 (+0.5); class 1: mean 11, variance 1 (+0.5); priors 3/5, 2/5
    for z in (-1.0, 1.5, 7.0, 11.0):
        expected = np.log(0.6 * norm.pdf(z, 5 / 3, np.sqrt(14 / 9 + 0.5)) + 0.4 * norm.pdf(z, 11, np.sqrt(1.5)))
        np.testing.assert_allclose(d.score_samples([[z]])[0], expected, rtol=1e-10)
    with pytest.raises(ValueError, match="covariance_type"):
        ClassConditionalGaussian("banded").fit(Z, y)
    with pytest.raises(ValueError, match="Z has 2 features"):
        d.score_samples(np.zeros((1, 2)))


def _two_classes_apart(seed=0):
    """Two 3-d classes with very different covariances (one stretched along an axis, one small and
    correlated) and unequal sizes, so that a pooled covariance is neither class's."""
    rng = np.random.RandomState(seed)
    a = rng.randn(60, 3) @ np.diag([3.0, 0.5, 1.0]) + [0.0, 0.0, 0.0]
    b = rng.randn(25, 3) @ np.array([[0.3, 0.2, 0.0], [0.0, 0.4, 0.1], [0.0, 0.0, 0.2]]) + [2.0, -1.0, 0.5]
    return np.vstack([a, b]), np.repeat(["a", "b"], [60, 25])


def test_tied_is_one_covariance_shared_by_the_classes():
    """Issue 44: "tied" fitted each class its own one-component mixture, so it equalled "full" (to 3.6e-15).
    It is the pooled within-class covariance, by hand: Σ = Σ_c Σ_{i in c} (z_i - μ_c)(z_i - μ_c)ᵀ / N + reg I,
    log q(z) = logsumexp_c [log(N_c / N) + log N(z; μ_c, Σ)]."""
    from scipy.special import logsumexp
    from scipy.stats import multivariate_normal
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

    Z, y = _two_classes_apart()
    reg = 1e-3
    tied = ClassConditionalGaussian("tied", reg_covar=reg).fit(Z, y)
    full = ClassConditionalGaussian("full", reg_covar=reg).fit(Z, y)
    grid = np.random.RandomState(1).randn(40, 3) * 2 + [1.0, -0.5, 0.25]

    means = [Z[y == c].mean(axis=0) for c in ("a", "b")]
    scatter = sum((Z[y == c] - m).T @ (Z[y == c] - m) for c, m in zip(("a", "b"), means))
    pooled = scatter / len(Z) + reg * np.eye(3)
    priors = np.array([60, 25]) / 85
    reference = logsumexp(np.stack([np.log(p) + multivariate_normal(m, pooled).logpdf(grid)
                                    for p, m in zip(priors, means)], axis=1), axis=1)
    np.testing.assert_allclose(tied.score_samples(grid), reference, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(tied.covariance_, pooled, rtol=1e-12)
    np.testing.assert_allclose(tied.means_, means, rtol=1e-12)
    # per class as well, and the same decomposition as the other types: log π_c + log N(z; μ_c, Σ)
    np.testing.assert_allclose(tied.class_log_densities(grid)[:, 1],
                               np.log(priors[1]) + multivariate_normal(means[1], pooled).logpdf(grid), rtol=1e-10)
    # no longer "full" under another name: the classes' own covariances give another density
    assert np.abs(tied.score_samples(grid) - full.score_samples(grid)).max() > 1.0
    assert full.covariance_ is None and tied.gaussians_ is None
    # the estimator: over N, the classes' ML covariances weighted by N_c / N, which is what scikit-learn pools
    # (LinearDiscriminantAnalysis's within-class covariance, GaussianMixture's "tied" with hard assignments)
    lda = LinearDiscriminantAnalysis(solver="lsqr", store_covariance=True).fit(Z, y)
    np.testing.assert_allclose(tied.covariance_ - reg * np.eye(3), lda.covariance_, rtol=1e-10)
    weighted = sum(p * full.gaussians_[k].covariances_[0] for k, p in enumerate(priors))
    np.testing.assert_allclose(tied.covariance_, weighted, rtol=1e-10)  # reg added once, as each full one has it


def test_tied_refuses_what_it_cannot_factor_and_unknown_types_at_fit():
    Z, y = np.array([[0.0, 0.0], [1.0, 1.0], [5.0, 5.0], [6.0, 6.0]]), [0, 0, 1, 1]   # collinear features
    with pytest.raises(ValueError, match="increase reg_covar"):
        ClassConditionalGaussian("tied", reg_covar=0.0).fit(Z, y)
    assert np.isfinite(ClassConditionalGaussian("tied", reg_covar=1e-6).fit(Z, y).score_samples(Z)).all()
    for bad in ("Tied", "banded", None):
        model = ClassConditionalGaussian(bad)                         # __init__ only stores
        assert model.get_params()["covariance_type"] == bad
        with pytest.raises(ValueError, match=r"covariance_type must be one of \['full', 'tied', 'diag', 'spherical'\]"):
            model.fit(Z, y)
    ddu_tied = DDUClassifier(Identity(), covariance_type="tied", reg_covar=1e-3).fit(*_two_classes_apart())
    assert ddu_tied.density_.covariance_.shape == (3, 3)


@pytest.fixture(scope="module")
def worked_example():
    """Seed 003's regions: unambiguous points in [-6, -4] (class 0), no data in [-2, 2], ambiguous points
    in [3.5, 4.5] (classes 1 and 2, half each: the same inputs, either label)."""
    rng = np.random.RandomState(0)
    X = np.concatenate([rng.uniform(-6, -4, 100), rng.uniform(3.5, 4.5, 100)])[:, None]
    y = np.concatenate([np.zeros(100, int), rng.permutation(np.repeat([1, 2], 50))])
    return DDUClassifier(Identity(), reg_covar=1e-3).fit(X, y)


def test_epistemic_and_aleatoric_apart_on_seed_003s_example(worked_example):
    model = worked_example
    x = np.array([[-5.0], [0.0], [4.0]])          # unambiguous, no data, ambiguous
    epistemic = -model.log_density(x)
    aleatoric = model.aleatoric_score(x)
    # no data: far less dense than either region with data
    assert epistemic[1] > epistemic[0] + 5 and epistemic[1] > epistemic[2] + 5
    # ambiguous: dense (known), but the classes overlap; unambiguous: dense and sure
    assert aleatoric[2] > 0.5 > 0.2 > aleatoric[0]
    assert epistemic[2] < epistemic[1]
    # the strategy picks in the gap, never among the ambiguous points, however high their entropy
    grid = np.linspace(-6, 4.5, 106)[:, None]
    picks = ddu(model, grid, n_instances=10)[0]
    assert np.all((grid[picks, 0] > -4) & (grid[picks, 0] < 3.5))


def test_ddu_stacks_with_decorators_and_the_learner(digits, small_net):
    X, y = digits
    model = DDUClassifier(small_net(max_epochs=3), reg_covar=1e-2)
    learner = ActiveLearner(model, get_strategy("ddu"), random_state=0, verbose=False)
    history = learner.simulate(X[:300], y[:300], n_queries=2, n_instances=5, initial_idx=np.arange(30))
    assert len(set(learner.labelled_idx_.tolist())) == 40 and len(history) == 3
    # the picks are the least dense unlabelled points of the model of that step
    scores = -learner.estimator_.log_density(X[:300])
    unlabelled = np.setdiff1d(np.arange(300), learner.labelled_idx_)
    idx, _ = learner.query(n_instances=3)
    np.testing.assert_array_equal(np.sort(idx), np.sort(unlabelled[np.argsort(-scores[unlabelled])[:3]]))
    learner.set_params(query_strategy=stochastic_batch(ddu, "softmax", 1.0))
    assert len(set(learner.query(n_instances=5)[0].tolist()) - set(learner.labelled_idx_.tolist())) == 5
    with pytest.raises(ValueError, match="power sampling needs scores >= 0"):
        stochastic_batch(ddu, "power", 1.0)(learner, X[:300], 2, random_state=0)


def test_clone_and_refusals():
    model = DDUClassifier(Identity(), covariance_type="diag", reg_covar=0.1)
    assert clone(model).get_params()["covariance_type"] == "diag"
    with pytest.raises(TypeError, match="has no log_density"):
        ddu(LogisticRegression().fit(np.eye(4), [0, 1, 0, 1]), np.eye(4), 1)
    with pytest.raises(TypeError, match="needs a network with transform"):
        DDUClassifier(LogisticRegression()).fit(np.eye(4), [0, 1, 0, 1])


def test_the_runner_wraps_the_network_for_ddu(tmp_path):
    import csv

    from skdbal.cli import main

    tiny = ["n_queries=2", "max_epochs=2", "n_samples=4", "pool_subsample=100", "n_validation=50",
            "module_params={'kernel_size': 3}"]
    assert main(["experiment", "--dataset", "digits", "--strategies", "ddu,stochastic(ddu,softrank,1)", "--seeds",
                 "1", "--torch-threads", "1", "--quiet", "--out", str(tmp_path)]
                + [a for kv in tiny for a in ("--set", kv)]) == 0
    rows = list(csv.DictReader(open(tmp_path / "results.csv")))
    assert sorted({r["strategy"] for r in rows}) == ["ddu", "stochastic(ddu,softrank,1)"]
    assert all(len(r["query_indices"].split()) == (20 if r["step"] == "0" else 10) for r in rows)
    # resumed: the cached network of the last step, wrapped again, gives the same rows
    assert main(["experiment", "--dataset", "digits", "--strategies", "ddu", "--seeds", "1", "--torch-threads", "1",
                 "--quiet", "--out", str(tmp_path)] + [a for kv in tiny for a in ("--set", kv)]) == 0
