import warnings

import numpy as np
import pytest
from _helpers import run_on_local_dask
from sklearn.datasets import load_iris
from sklearn.linear_model import LogisticRegression

from skdbal import uncertainty
from skdbal.acquisition import bald, max_entropy, mean_std, random, score_pool, variation_ratios
from skdbal.acquisition.base import DegenerateScoreWarning, select_top

MC_STRATEGIES = [(bald, uncertainty.mutual_information), (max_entropy, uncertainty.predictive_entropy),
                 (variation_ratios, uncertainty.variation_ratio), (mean_std, uncertainty.mean_standard_deviation)]


class FixedSampler:
    """Deterministic 'MC' estimator: samples are a fixed function of each row."""

    def __init__(self, T=6, C=3):
        self.T, self.C = T, C

    def predict_proba_samples(self, X):
        X = np.asarray(X, dtype=float).reshape(len(X), -1)
        t = np.arange(self.T)[:, None, None]
        c = np.arange(self.C)[None, None, :]
        logits = np.sin(X[None, :, :1] * (t + 1) + c) * X[None, :, 1:2] * 3
        e = np.exp(logits - logits.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)


@pytest.fixture
def pool():
    return np.random.default_rng(0).uniform(-2, 2, size=(57, 2))


@pytest.mark.parametrize("strategy, score_fn", MC_STRATEGIES)
def test_strategy_picks_the_top_scores_best_first(strategy, score_fn, pool):
    est = FixedSampler()
    all_scores = score_fn(est.predict_proba_samples(pool))
    idx, scores = strategy(est, pool, n_instances=7)
    assert len(idx) == 7 and len(np.unique(idx)) == 7
    np.testing.assert_allclose(scores, all_scores[idx])
    assert np.all(np.diff(scores) <= 0)
    # nothing outside the selection scores higher than the worst selected
    rest = np.setdiff1d(np.arange(len(pool)), idx)
    assert all_scores[rest].max() <= scores[-1]


@pytest.mark.parametrize("strategy, _", MC_STRATEGIES)
def test_chunking_does_not_change_the_result(strategy, _, pool):
    est = FixedSampler()
    a = strategy(est, pool, n_instances=10, chunk_size=5)
    b = strategy(est, pool, n_instances=10, chunk_size=10_000)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_allclose(a[1], b[1])


def test_chunks_are_bounded(pool):
    seen = []

    class Spy(FixedSampler):
        def predict_proba_samples(self, X):
            seen.append(len(X))
            return super().predict_proba_samples(X)

    bald(Spy(), pool, n_instances=3, chunk_size=10)
    assert max(seen) == 10 and sum(seen) == len(pool)


def test_ties_go_to_the_lower_index_or_a_seeded_shuffle():
    scores = np.array([1.0, 3.0, 3.0, 3.0, 0.0])
    idx, vals = select_top(scores, 2)
    np.testing.assert_array_equal(idx, [1, 2])
    a = select_top(scores, 3, random_tie_break=True, random_state=0)[0]
    b = select_top(scores, 3, random_tie_break=True, random_state=0)[0]
    np.testing.assert_array_equal(a, b)
    assert set(a) == {1, 2, 3}
    draws = {tuple(select_top(scores, 1, random_tie_break=True, random_state=s)[0]) for s in range(20)}
    assert len(draws) > 1


def test_random_sampling_is_seeded_and_unique(pool):
    a, _ = random(None, pool, n_instances=20, random_state=3)
    b, _ = random(None, pool, n_instances=20, random_state=3)
    c, _ = random(None, pool, n_instances=20, random_state=4)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert len(np.unique(a)) == 20


@pytest.mark.parametrize("strategy", [bald, max_entropy, variation_ratios, mean_std, random])
@pytest.mark.parametrize("n, exc", [(0, ValueError), (-1, ValueError), (58, ValueError), (1.5, TypeError)])
def test_bad_n_instances(strategy, n, exc, pool):
    with pytest.raises(exc, match="n_instances"):
        strategy(FixedSampler(), pool, n_instances=n)


@pytest.mark.parametrize("strategy", [bald, max_entropy, random])
def test_empty_pool(strategy):
    with pytest.raises(ValueError, match="empty"):
        strategy(FixedSampler(), np.zeros((0, 2)), n_instances=1)


def test_nan_pool_rejected(pool):
    pool = pool.copy()
    pool[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        bald(FixedSampler(), pool)


def test_plain_sklearn_classifier_is_T1():
    X, y = load_iris(return_X_y=True)
    clf = LogisticRegression(max_iter=500).fit(X[::10], y[::10])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # entropy of predict_proba is meaningful: no warning
        idx, scores = max_entropy(clf, X, n_instances=5)
    ent = uncertainty.entropy(clf.predict_proba(X))
    np.testing.assert_allclose(scores, np.sort(ent)[::-1][:5])
    with pytest.warns(DegenerateScoreWarning, match="T=1"):
        _, s = bald(clf, X, n_instances=3)
    np.testing.assert_array_equal(s, 0.0)


def test_mc_net_scores(fitted_net, digits):
    X, _ = digits
    pool = X[300:420]
    idx, scores = bald(fitted_net, pool, n_instances=10, chunk_size=1000)
    ref = uncertainty.mutual_information(fitted_net.predict_proba_samples(pool))
    np.testing.assert_allclose(scores, ref[idx], rtol=1e-6)
    assert scores[0] == pytest.approx(ref.max())


def test_score_pool_rejects_non_estimators(pool):
    with pytest.raises(TypeError, match="predict_proba"):
        score_pool(object(), pool, uncertainty.mutual_information)


def test_variation_ratios_for_a_deterministic_pass_is_least_confidence():
    X, y = load_iris(return_X_y=True)
    clf = LogisticRegression(max_iter=500).fit(X[::10], y[::10])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        idx, scores = variation_ratios(clf, X, n_instances=4)
    lc = 1 - clf.predict_proba(X).max(axis=1)
    np.testing.assert_allclose(scores, np.sort(lc)[::-1][:4])
    np.testing.assert_allclose(uncertainty.least_confidence(uncertainty.check_samples(
        clf.predict_proba(X)[None])), lc)


def test_deterministic_baseline_net_is_scored_with_one_pass(fitted_net, digits):
    import copy
    X, _ = digits
    det = copy.deepcopy(fitted_net).set_params(mc_dropout=False)
    pool = X[300:400]
    p = det.predict_proba(pool)
    _, s = variation_ratios(det, pool, n_instances=5)
    np.testing.assert_allclose(s, np.sort(1 - p.max(1))[::-1][:5], rtol=1e-6)
    _, s = max_entropy(det, pool, n_instances=5)
    np.testing.assert_allclose(s, np.sort(uncertainty.entropy(p))[::-1][:5], rtol=1e-5)
    with pytest.warns(DegenerateScoreWarning):
        bald(det, pool)


def test_a_real_net_scores_alike_in_any_chunks_and_order(fitted_net, digits):
    """A memory setting or the pool's order does not change the picks: each row's MC passes depend on the
    seed and the row only (mask_seeding="row"). Once, 1 of 10 picks survived chunk_size 64 -> 2048."""
    X, _ = digits
    pool = X[300:1300]
    small = bald(fitted_net, pool, n_instances=10, chunk_size=64)
    large = bald(fitted_net, pool, n_instances=10, chunk_size=2048)
    np.testing.assert_array_equal(small[0], large[0])
    np.testing.assert_allclose(small[1], large[1], rtol=1e-4)
    perm = np.random.RandomState(0).permutation(len(pool))
    shuffled = bald(fitted_net, pool[perm], n_instances=10, chunk_size=100)
    np.testing.assert_array_equal(perm[shuffled[0]], small[0])


def test_parallel_chunks_equal_serial(fitted_net, digits):
    X, _ = digits
    pool = X[300:700]
    serial = bald(fitted_net, pool, n_instances=15, chunk_size=64)
    parallel = bald(fitted_net, pool, n_instances=15, chunk_size=64, n_jobs=2)
    np.testing.assert_array_equal(serial[0], parallel[0])
    np.testing.assert_allclose(serial[1], parallel[1], rtol=1e-12)


def test_threads_sharing_one_net_equal_serial(fitted_net, digits):
    """joblib's threading backend, like a Dask worker's threads, scores chunks with one shared net: the
    MC passes take turns with the module's mode flags, dropout hooks and torch's global RNG instead of
    changing them under each other (which gave other scores, or a shape error, for some chunks)."""
    import joblib

    X, _ = digits
    pool = X[300:700]
    serial = score_pool(fitted_net, pool, uncertainty.mean_standard_deviation, chunk_size=25)
    for _ in range(3):
        with joblib.parallel_backend("threading", n_jobs=4):
            threaded = score_pool(fitted_net, pool, uncertainty.mean_standard_deviation, chunk_size=25, n_jobs=4)
        np.testing.assert_array_equal(threaded, serial)


def test_dask_backend_equals_serial(fitted_net, digits):
    """joblib's Dask backend on a real local dask.distributed cluster: every pool score equals the local one.

    ``dask[distributed]`` is in the ``test`` extra, so this runs wherever the suite does: a missing
    ``distributed`` fails the test instead of skipping it. The cluster (two single-threaded workers
    talking TCP on 127.0.0.1, in this process to keep the test fast) is bounded in time and shut down
    by its context manager, even on failure.
    """
    X, _ = digits
    pool = X[300:700]
    local = score_pool(fitted_net, pool, uncertainty.mean_standard_deviation, chunk_size=50)
    local_top = mean_std(fitted_net, pool, n_instances=15, chunk_size=50)
    (scores, top), tasks, expected_workers = run_on_local_dask(lambda: (
        score_pool(fitted_net, pool, uncertainty.mean_standard_deviation, chunk_size=50, n_jobs=-1),
        mean_std(fitted_net, pool, n_instances=15, chunk_size=50, n_jobs=-1)))
    # the chunks ran as tasks on the cluster's workers (joblib batches them, so there may be fewer tasks than chunks)
    assert len(tasks) >= 2 and {task["worker"] for task in tasks} <= expected_workers
    np.testing.assert_array_equal(scores, local)  # every row's score, not only the picks
    np.testing.assert_array_equal(top[0], local_top[0])
    np.testing.assert_array_equal(top[1], local_top[1])


def test_strategies_accept_protocol_kwargs_and_forward_n_samples():
    class Recorder:
        def __init__(self):
            self.T = []

        def predict_proba_samples(self, X, n_samples=None):
            self.T.append(n_samples)
            T = 4 if n_samples is None else n_samples
            rng = np.random.RandomState(len(X))
            P = rng.dirichlet(np.ones(3), size=(T, len(X)))
            return P

    est = Recorder()
    X = np.zeros((10, 2))
    idx, _ = bald(est, X, 2, some_decorator_pool=np.ones(10))  # pool-aligned keywords accepted
    bald(est, X, 2, n_samples=7)
    assert est.T == [None, 7]
    with pytest.raises(TypeError, match="'some_decorator_option'"):  # anything else is refused
        bald(est, X, 2, some_decorator_option=True)
    assert est.T == [None, 7]
    assert len(idx) == 2
