"""EPIG: the estimator against brute force and by hand, chunking, consistent samples, the strategy end to end."""
import copy
import math
import warnings

import numpy as np
import pytest
from sklearn.datasets import load_iris
from sklearn.linear_model import LogisticRegression

from skdbal import uncertainty
from skdbal.acquisition import EPIG, STRATEGIES, epig, get_strategy
from skdbal.acquisition.base import DegenerateScoreWarning
from skdbal.acquisition.functional import epig_from_probs
from skdbal.predictive import as_predictive


def brute_force_epig(P, Q):
    """EPIG by explicit loops over y and y*, in plain Python floats."""
    T, N, C = len(P), len(P[0]), len(P[0][0])
    M = len(Q[0])
    scores = []
    for n in range(N):
        total = 0.0
        for m in range(M):
            p_y = [sum(P[t][n][y] for t in range(T)) / T for y in range(C)]
            p_ys = [sum(Q[t][m][y] for t in range(T)) / T for y in range(C)]
            for y in range(C):
                for ys in range(C):
                    joint = sum(P[t][n][y] * Q[t][m][ys] for t in range(T)) / T
                    if joint > 0:
                        total += joint * math.log(joint / (p_y[y] * p_ys[ys]))
        scores.append(total / M)
    return scores


def dirichlet_samples(T, N, C, seed, alpha=0.5):
    return np.random.default_rng(seed).dirichlet(np.full(C, alpha), size=(T, N))


# ------------------------------------------------------------------ the estimator
def test_epig_matches_brute_force_on_a_tiny_problem():
    P = [[[0.9, 0.1], [0.5, 0.5]],      # (T=3, N=2, C=2), chosen by hand
         [[0.3, 0.7], [0.6, 0.4]],
         [[0.2, 0.8], [0.1, 0.9]]]
    Q = [[[0.8, 0.2], [0.0, 1.0]],      # (T=3, M=2, C=2), with an exact zero (0 · log 0)
         [[0.4, 0.6], [0.5, 0.5]],
         [[0.1, 0.9], [1.0, 0.0]]]
    np.testing.assert_allclose(epig_from_probs(P, Q), brute_force_epig(P, Q), rtol=0, atol=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_epig_matches_brute_force_on_random_samples(seed):
    P, Q = dirichlet_samples(5, 4, 3, seed), dirichlet_samples(5, 3, 3, seed + 10)
    np.testing.assert_allclose(epig_from_probs(P, Q), brute_force_epig(P.tolist(), Q.tolist()), rtol=0, atol=1e-12)


def test_a_point_whose_predictions_do_not_vary_has_epig_zero():
    P = np.array([[[0.7, 0.3]], [[0.7, 0.3]], [[0.7, 0.3]]])          # the same under every sample
    Q = dirichlet_samples(3, 5, 2, 0)
    np.testing.assert_allclose(epig_from_probs(P, Q), [0.0], atol=1e-15)   # 0 up to rounding


def test_deterministic_labels_at_the_target_itself_give_the_bald_score():
    """x = x* and p(y | x, θ_t) one-hot: y = y* = f_t under sample t, so p(y, y*) = p̄(y) 1[y = y*]
    and I(y; y*) = Σ_y p̄(y) log(p̄(y) / p̄(y)²) = H[p̄], which is BALD's H[p̄] − E_t H[one-hot] = H[p̄]."""
    yes, no = [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]
    P = np.array([[yes], [yes], [no], [yes]])                        # (T=4, N=1, C=3): p̄ = [3/4, 0, 1/4]
    by_hand = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))
    assert epig_from_probs(P, P)[0] == pytest.approx(by_hand, abs=1e-12)
    assert uncertainty.mutual_information(P)[0] == pytest.approx(by_hand, abs=1e-12)


def test_two_samples_that_disagree_on_both_points_give_log_2():
    yes, no = [1.0, 0.0], [0.0, 1.0]
    pool = np.array([[yes], [no]])
    assert epig_from_probs(pool, np.array([[no], [yes]]))[0] == pytest.approx(math.log(2), abs=1e-12)
    assert epig_from_probs(pool, np.array([[yes], [yes]]))[0] == 0.0   # the target is known: nothing to learn


@pytest.mark.parametrize("seed", range(5))
def test_epig_is_at_most_bald(seed):
    """Data processing: y — θ — y*, so I(y; y*) ≤ I(y; θ), for the mixture of the T samples too."""
    P, Q = dirichlet_samples(8, 30, 4, seed), dirichlet_samples(8, 6, 4, seed + 100)
    scores = epig_from_probs(P, Q)
    assert np.all(scores >= 0)
    assert np.all(scores <= uncertainty.mutual_information(P) + 1e-12)


def test_chunking_does_not_change_the_scores():
    P, Q = dirichlet_samples(6, 7, 3, 0), dirichlet_samples(6, 5, 3, 1)
    whole = epig_from_probs(P, Q, chunk_size=7)
    for chunk_size in (1, 2, 100, None):
        np.testing.assert_allclose(epig_from_probs(P, Q, chunk_size=chunk_size), whole, rtol=1e-12, atol=1e-15)


def test_float32_samples_are_computed_in_float64():
    P, Q = dirichlet_samples(6, 7, 3, 0), dirichlet_samples(6, 5, 3, 1)
    scores = epig_from_probs(P.astype(np.float32), Q.astype(np.float32))
    assert scores.dtype == np.float64 and scores.shape == (7,)
    np.testing.assert_allclose(scores, epig_from_probs(P, Q), atol=1e-6)


@pytest.mark.parametrize("pool, target, kwargs, match", [
    (np.full((3, 4, 2), 0.5), np.full((3, 5, 4), 0.25), {}, "same number of classes C; got 2 and 4"),
    (np.full((3, 4, 2), 0.5), np.full((2, 5, 2), 0.5), {}, "same posterior samples T.*got 3 and 2"),
    (np.full((4, 2), 0.5), np.full((3, 5, 2), 0.5), {}, "probs_pool must have shape"),
    (np.full((3, 4, 2), 0.5), np.full((3, 5, 2), 0.7), {}, "probs_target rows must sum to 1"),
    (np.full((3, 4, 2), 0.5), np.full((3, 5, 2), 0.5), {"chunk_size": 0}, "chunk_size must be"),
])
def test_bad_input_is_refused_by_name(pool, target, kwargs, match):
    with pytest.raises(ValueError, match=match):
        epig_from_probs(pool, target, **kwargs)


# ------------------------------------------------------------ consistent samples
class RollingMembers:
    """T deterministic members, each a threshold on the first feature. Every call presents them in a new
    order (rolled by the call count): consistent within a call, as MC dropout with one set of masks
    per call and no seed, but not from one call to the next."""

    thresholds = np.array([0.0, 1.0, 2.0, 3.0])

    def __init__(self):
        self.requests = []

    def predict_proba_samples(self, X, n_samples=None, consistent=False):
        self.requests.append((len(X), consistent))
        x = np.asarray(X, dtype=float)[:, 0]
        order = np.roll(np.arange(len(self.thresholds)), len(self.requests))
        says_one = x[None, :] > self.thresholds[order, None]               # (T, n)
        return np.stack([~says_one, says_one], axis=-1).astype(float)


def test_pool_and_targets_are_sampled_together_consistently():
    X_pool = np.array([[1.5], [-1.0], [0.5], [2.5], [1.2], [4.0], [1.7]])
    X_target = np.array([[1.5]])                       # members say (1, 1, 0, 0) here: p̄ = [1/2, 1/2]
    model = RollingMembers()
    scores = EPIG(chunk_size=3).acquisition_scores(model, X_pool, X_target=X_target)
    # points labelled like the target by every member carry all of its information, log 2
    np.testing.assert_allclose(scores[[0, 4, 6]], math.log(2), atol=1e-12)
    assert scores[1] == 0 and scores[5] == 0                           # every member agrees there
    # one call per chunk, the target rows appended, consistent samples requested
    assert model.requests == [(3 + 1, True), (3 + 1, True), (1 + 1, True)]
    # the reference: each chunk's pool and targets from one call
    fresh, expected = RollingMembers(), []
    for start in range(0, len(X_pool), 3):
        chunk = X_pool[start:start + 3]
        P = fresh.predict_proba_samples(np.concatenate([chunk, X_target]))
        expected.append(epig_from_probs(P[:, :len(chunk)], P[:, len(chunk):]))
    np.testing.assert_allclose(scores, np.concatenate(expected), atol=1e-12)


def test_samples_drawn_in_separate_calls_would_give_another_score():
    """What the strategy avoids, so that the test above can fail: with the pool and the targets
    sampled in two calls, sample t of the pool and sample t of the targets are different members."""
    model = RollingMembers()
    X = np.array([[1.5]])
    separate = epig_from_probs(model.predict_proba_samples(X), model.predict_proba_samples(X))
    assert separate[0] == pytest.approx(0.0, abs=1e-12)                   # not log 2
    assert EPIG().acquisition_scores(RollingMembers(), X, X_target=X)[0] == pytest.approx(math.log(2), abs=1e-12)


def test_a_model_that_cannot_give_consistent_samples_is_refused():
    class PerRow:
        def predict_proba_samples(self, X, n_samples=None):
            return np.full((4, len(X), 2), 0.5)

    with pytest.raises(TypeError, match="cannot be asked for consistent samples"):
        epig(PerRow(), np.zeros((5, 1)), 1)


def test_a_deterministic_model_scores_zero_with_a_warning():
    X, y = load_iris(return_X_y=True)
    clf = LogisticRegression(max_iter=500).fit(X[::10], y[::10])
    with pytest.warns(DegenerateScoreWarning, match="EPIG is 0 for every point"):
        scores = EPIG(n_targets=10).acquisition_scores(clf, X, random_state=0)
    np.testing.assert_allclose(scores, 0.0, atol=1e-12)


# ------------------------------------------------------------ the strategy, end to end
@pytest.fixture(scope="module")
def pool(digits):
    return digits[0][300:500]


def consistent_reference(net, X_pool, targets):
    P = as_predictive(net).proba_samples(np.concatenate([X_pool, targets]), consistent=True)
    return epig_from_probs(P[:, :len(X_pool)], P[:, len(X_pool):])


def test_the_strategy_on_digits_is_epig_of_one_consistent_call(fitted_net, pool):
    strategy = EPIG(n_targets=20)
    targets = strategy.target_inputs(pool, random_state=0)
    scores = strategy.acquisition_scores(fitted_net, pool, random_state=0, chunk_size=len(pool))
    np.testing.assert_allclose(scores, consistent_reference(fitted_net, pool, targets), rtol=1e-10, atol=1e-12)
    assert np.all(scores >= 0) and scores.max() > 0
    # chunked: the net's int random_state draws the same masks in every call
    np.testing.assert_allclose(strategy.acquisition_scores(fitted_net, pool, random_state=0, chunk_size=64), scores,
                               rtol=1e-4, atol=1e-6)
    # the query is the top-k of the scores, best first
    idx, top = strategy(fitted_net, pool, n_instances=5, random_state=0, chunk_size=len(pool))
    np.testing.assert_array_equal(idx, np.argsort(-scores, kind="stable")[:5])
    np.testing.assert_allclose(top, scores[idx])


def test_the_strategy_is_seeded_and_the_seed_draws_the_targets(fitted_net, pool):
    strategy = EPIG(n_targets=20)
    a = strategy.acquire(fitted_net, pool, 5, random_state=0)
    b = strategy.acquire(fitted_net, pool, 5, random_state=0)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_array_equal(a.scores, b.scores)
    t0, t1 = strategy.target_inputs(pool, random_state=0), strategy.target_inputs(pool, random_state=1)
    assert t0.shape == t1.shape == (20, 8, 8)
    assert not np.array_equal(t0, t1)
    # distinct rows of the pool
    rows = [np.flatnonzero((pool == t).all(axis=(1, 2)))[0] for t in t0]
    assert len(set(rows)) == 20
    s0 = strategy.acquisition_scores(fitted_net, pool, random_state=0)
    s1 = strategy.acquisition_scores(fitted_net, pool, random_state=1)
    assert not np.allclose(s0, s1)
    np.testing.assert_allclose(s1, consistent_reference(fitted_net, pool, t1), rtol=1e-4, atol=1e-6)


def test_targets_given_as_a_parameter_or_with_the_query(fitted_net, pool, digits):
    X_target = digits[0][1000:1010]
    by_param = EPIG(target=X_target).acquisition_scores(fitted_net, pool, random_state=0)
    by_call = epig.acquisition_scores(fitted_net, pool, X_target=X_target, random_state=123)
    np.testing.assert_allclose(by_param, by_call, rtol=1e-10)
    np.testing.assert_allclose(by_call, consistent_reference(fitted_net, pool, X_target), rtol=1e-4, atol=1e-6)
    # the query's X_target overrides the parameter
    other = EPIG(target=digits[0][1500:1505]).acquisition_scores(fitted_net, pool, X_target=X_target)
    np.testing.assert_allclose(other, by_call, rtol=1e-10)
    # a small pool gives all its rows as targets
    assert len(EPIG(n_targets=50).target_inputs(pool[:7], random_state=0)) == 7


def test_a_net_with_unseeded_masks_is_still_consistent_within_a_chunk(fitted_net, pool):
    """random_state=None: every call draws new masks, so only one call per chunk keeps the pool's
    sample t and the targets' sample t the same network. A target that is also a pool point then
    gets exactly that point's samples, and the scores are EPIG of what each call gave."""
    net = copy.deepcopy(fitted_net)
    net.random_state = None
    calls = []

    class Spy:
        classes_ = net.classes_

        def predict_proba_samples(self, X, n_samples=None, consistent=False):
            calls.append((len(X), consistent, net.predict_proba_samples(X, n_samples, consistent=consistent)))
            return calls[-1][2]

    X_pool, X_target = pool[:6], pool[[1, 4]]
    scores = EPIG(target=X_target, chunk_size=3).acquisition_scores(Spy(), X_pool)
    assert [(n, c) for n, c, _ in calls] == [(5, True), (5, True)]
    P0, P1 = calls[0][2], calls[1][2]
    np.testing.assert_array_equal(P0[:, 1], P0[:, 3])       # pool row 1 and target 0: one network per sample
    np.testing.assert_array_equal(P1[:, 1], P1[:, 4])       # pool row 4 and target 1
    assert not np.array_equal(P0[:, 3:], P1[:, 3:])         # the two calls drew different masks
    expected = np.concatenate([epig_from_probs(P[:, :3], P[:, 3:]) for P in (P0, P1)])
    np.testing.assert_allclose(scores, expected, rtol=1e-12)
    assert np.all(scores > 0)


def test_bad_targets_are_refused_by_name(fitted_net, pool):
    with pytest.raises(ValueError, match=r"X_target's rows have shape \(64,\) but X_pool's have shape \(8, 8\)"):
        epig(fitted_net, pool, 2, X_target=pool.reshape(len(pool), -1))
    with pytest.raises(ValueError, match="X_target is empty"):
        epig(fitted_net, pool, 2, X_target=pool[:0])
    with pytest.raises(ValueError, match="n_targets must be an int >= 1"):
        epig(fitted_net, pool, 2, n_targets=0)
    with pytest.raises(TypeError, match="unexpected keyword argument.*'x_target'"):
        epig(fitted_net, pool, 2, x_target=pool[:3])


def test_it_is_registered_and_takes_its_options():
    assert STRATEGIES["epig"] is epig and repr(epig) == "EPIG()"
    assert sorted(epig.call_options()) == ["X_target", "chunk_size", "n_jobs", "n_samples", "n_targets"]
    named = get_strategy("epig")
    assert named is not epig and repr(named) == "EPIG()"
    with pytest.raises(ValueError, match="shared instance"):
        epig.set_params(n_targets=5)


def test_it_works_in_the_learner_and_under_a_decorator(digits, small_net):
    from skdbal import ActiveLearner

    X, y = digits
    learner = ActiveLearner(small_net(max_epochs=2), EPIG(n_targets=10), random_state=0, verbose=False)
    learner.teach(X[:60], y[:60])
    idx, _ = learner.query(X[60:260], n_instances=4)
    assert len(set(idx.tolist())) == 4
    idx, _ = learner.query(X[60:260], n_instances=4, X_target=X[1000:1005])
    assert len(set(idx.tolist())) == 4
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        diverse = get_strategy("diverse(epig,0.1)")
        assert len(set(diverse(learner, X[60:160], 3, random_state=0)[0].tolist())) == 3
