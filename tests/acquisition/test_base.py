"""Strategies as small objects: parameters, repr, pickling, composition, the info channel."""
import pickle

import numpy as np
import pytest
from _helpers import TwoPasses
from modAL.uncertainty import uncertainty_sampling
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression

from skdbal import ActiveLearner, uncertainty
from skdbal.acquisition import BALD, MaxEntropy, bald, max_entropy, mean_std, random, to_modal, variation_ratios
from skdbal.acquisition.base import (
    Acquisition,
    CallableStrategy,
    MeasureStrategy,
    Strategy,
    StrategyDecorator,
    acquire_among,
    as_strategy,
)


@pytest.fixture
def fixed():
    # point 0: confident; 1: aleatoric (both passes 50/50); 2: epistemic (passes disagree); 3: mild
    return TwoPasses([0.99, 0.5, 1.0, 0.7], [0.99, 0.5, 0.0, 0.9]), np.arange(4)[:, None]


def test_hand_computed_rankings(fixed):
    est, X = fixed
    # BALD: only point 2 has epistemic uncertainty (log 2); point 3 has a little
    idx, s = bald(est, X, n_instances=2)
    assert idx.tolist() == [2, 3]
    assert s[0] == pytest.approx(np.log(2))
    # max entropy: points 1 and 2 both have H[p̄] = log 2 (tie: the lower index first)
    idx, s = max_entropy(est, X, n_instances=2)
    assert idx.tolist() == [1, 2] and s == pytest.approx([np.log(2), np.log(2)])
    # variation ratio: passes' argmax disagree only on point 2 -> 1 - 1/2
    idx, s = variation_ratios(est, X, n_instances=1)
    assert idx.tolist() == [2] and s[0] == pytest.approx(0.5)
    # mean std: point 2 has std 0.5 in both classes
    idx, s = mean_std(est, X, n_instances=1)
    assert idx.tolist() == [2] and s[0] == pytest.approx(0.5)


def test_objects_have_params_repr_clone_and_pickle(fixed):
    est, X = fixed
    assert repr(bald) == "BALD()" and repr(BALD(n_samples=7)) == "BALD(n_samples=7)"
    assert bald.get_params() == {"chunk_size": 2048, "n_jobs": None, "n_samples": None}
    s = clone(BALD(chunk_size=3))
    assert s.chunk_size == 3 and s is not bald
    s.set_params(chunk_size=1)
    assert s.chunk_size == 1
    restored = pickle.loads(pickle.dumps(MaxEntropy(chunk_size=2)))
    assert restored.get_params()["chunk_size"] == 2
    for a, b in zip(restored(est, X, 3), max_entropy(est, X, 3)):
        np.testing.assert_array_equal(a, b)
    custom = MeasureStrategy(uncertainty.expected_entropy, needs_stochastic=False)
    assert "expected_entropy" in repr(custom)
    idx, _ = custom(est, X, n_instances=1)
    assert idx.tolist() == [1]  # the aleatoric point: both passes 50/50


def test_call_options_override_constructor_options(fixed):
    est, X = fixed
    seen = []

    class Spy(TwoPasses):
        def predict_proba_samples(self, X, n_samples=None):
            seen.append((len(X), n_samples))
            return super().predict_proba_samples(X)

    spy = Spy(est.a, est.b)
    BALD(chunk_size=3, n_samples=5)(spy, X, 1)
    assert seen == [(3, 5), (1, 5)]
    seen.clear()
    BALD(chunk_size=3, n_samples=5)(spy, X, 1, chunk_size=10, n_samples=9)
    assert seen == [(4, 9)]


def test_callable_strategy_wraps_plain_functions(digits):
    X, y = digits
    flat = X.reshape(len(X), -1)
    clf = LogisticRegression(max_iter=300).fit(flat[:60], y[:60])
    wrapped = as_strategy(uncertainty_sampling)
    assert isinstance(wrapped, CallableStrategy) and as_strategy(bald) is bald
    acq = wrapped.acquire(clf, flat[100:300], 4, random_state=123)  # random_state is not passed on
    res = uncertainty_sampling(clf, flat[100:300], 4)  # modAL 0.4.1: bare indices; 0.4.2: a tuple
    expected = np.asarray(res[0] if isinstance(res, tuple) else res)
    np.testing.assert_array_equal(np.sort(acq.indices), np.sort(expected))
    bare = CallableStrategy(lambda est, X_pool, n_instances=1: np.array([3, 1]))
    acq = bare.acquire(None, flat[:5], 2)
    assert acq.indices.tolist() == [3, 1] and acq.scores is None
    with pytest.raises(ValueError, match="duplicate"):
        CallableStrategy(lambda est, X_pool, n_instances: np.array([1, 1])).acquire(None, flat[:5], 2)
    with pytest.raises(TypeError, match="callable"):
        as_strategy("bald")


class RecordingStrategy(Strategy):
    """Picks the largest ``y_pool`` values, and reports the smallest as ``rejected_indices``."""

    def acquire(self, estimator, X_pool, n_instances=1, *, y_pool=None, random_state=None, **kwargs):
        if y_pool is None:
            raise ValueError("RecordingStrategy needs y_pool")
        self.seen_ = np.asarray(y_pool).copy()
        order = np.argsort(-self.seen_, kind="stable")
        return Acquisition(order[:n_instances], self.seen_[order[:n_instances]],
                           {"rejected_indices": order[-1:], "n_seen": len(self.seen_)})


def test_pool_aligned_keywords_are_subset_with_the_pool_and_info_maps_back(digits):
    X, y = digits
    flat = X.reshape(len(X), -1)
    strategy = RecordingStrategy()
    learner = ActiveLearner(LogisticRegression(max_iter=300), strategy, pool_subsample=50, random_state=0,
                            verbose=False).fit(flat[:40], y[:40])
    pool = flat[200:500]
    labels = np.arange(300) * 7 % 301  # distinct values, aligned with the pool
    idx, _ = learner.query(pool, 3, y_pool=labels)
    # the strategy saw exactly the labels of the 50 rows it was given
    assert len(strategy.seen_) == 50
    np.testing.assert_array_equal(labels[idx], np.sort(strategy.seen_)[::-1][:3])
    info = learner.last_acquisition_.info
    assert info["n_seen"] == 50
    # rejected_indices came back as positions in the whole pool
    assert labels[info["rejected_indices"][0]] == strategy.seen_.min()
    # candidates: a labelled part of the pool is never offered, and y_pool follows
    learner.set_params(pool_subsample=None)
    idx, _ = learner.query(pool, 2, candidates=np.arange(100, 300), y_pool=labels)
    assert set(idx) <= set(range(100, 300)) and len(strategy.seen_) == 200
    np.testing.assert_array_equal(labels[idx], np.sort(labels[100:])[::-1][:2])


def test_bad_pool_aligned_keyword_changes_nothing(digits):
    X, y = digits
    flat = X.reshape(len(X), -1)
    learner = ActiveLearner(LogisticRegression(max_iter=300), RecordingStrategy(), pool_subsample=50,
                            random_state=0, verbose=False).fit(flat[:40], y[:40])
    learner.query(flat[200:500], 1, y_pool=np.arange(300))  # a used generator, not a fresh one
    del learner.last_acquisition_
    state = learner.rng_.get_state()
    with pytest.raises(ValueError, match="y_pool must be aligned with the pool: 300 entries; got 299"):
        learner.query(flat[200:500], 3, y_pool=np.arange(299))
    after = learner.rng_.get_state()
    assert after[2:] == state[2:] and np.array_equal(after[1], state[1])
    assert not hasattr(learner, "last_acquisition_")
    with pytest.raises(ValueError, match="y_pool must be aligned"):
        bald(TwoPasses([0.5], [0.5]), np.zeros((1, 1)), 1, y_pool=[1, 2])


def test_simulation_history_carries_the_strategy_info(digits):
    X, y = digits
    flat = X.reshape(len(X), -1)

    class Reporting(Strategy):
        def acquire(self, estimator, X_pool, n_instances=1, **kwargs):
            acq = random.acquire(estimator, X_pool, n_instances, **kwargs)
            acq.info = {"rejected_indices": np.array([0]), "n_rejected": 1}
            return acq

    learner = ActiveLearner(LogisticRegression(max_iter=300), Reporting(), random_state=0, verbose=False)
    history = learner.simulate(flat[:200], y[:200], n_queries=2, n_instances=3)
    assert "n_rejected" not in history[0]
    assert [r["n_rejected"] for r in history[1:]] == [1, 1]
    # position 0 of the remaining pool, as an index into the original pool
    remaining_before_step1 = np.setdiff1d(np.arange(200), history[0]["query_indices"])
    assert history[1]["rejected_indices"] == [int(remaining_before_step1[0])]


class OnlyEven(StrategyDecorator):
    """A toy decorator: offers the strategy it wraps the even pool positions only."""

    def acquire(self, estimator, X_pool, n_instances=1, **kwargs):
        acq = acquire_among(self.strategy, estimator, X_pool, np.arange(0, len(X_pool), 2), n_instances, **kwargs)
        acq.info = {**acq.info, "skipped_indices": np.arange(1, len(X_pool), 2)}
        return acq


def test_decorators_wrap_any_strategy_and_stack(fixed, digits):
    est, X = fixed
    idx, s = OnlyEven(bald)(est, X, 1)
    assert idx.tolist() == [2] and s[0] == pytest.approx(np.log(2))
    idx, _ = OnlyEven(bald)(est, X, 2)  # the best of the even positions, even if 3 beats 0
    assert idx.tolist() == [2, 0]
    eight = TwoPasses(np.r_[est.a, est.a], np.r_[est.b, est.b])
    acq = OnlyEven(OnlyEven(bald)).acquire(eight, np.arange(8)[:, None], 2)
    assert sorted(acq.indices.tolist()) == [0, 4]  # positions 0, 2, 4, 6, then their even ones
    assert acq.info["skipped_indices"].tolist() == [1, 3, 5, 7]  # the outer decorator's, in pool positions
    # parameters nest, and the object reads, clones and pickles like an estimator
    deco = OnlyEven(BALD(n_samples=3))
    assert deco.get_params()["strategy__n_samples"] == 3
    assert repr(deco) == "OnlyEven(strategy=BALD(n_samples=3))"
    assert clone(deco).strategy.n_samples == 3
    assert pickle.loads(pickle.dumps(deco)).get_params()["strategy__n_samples"] == 3
    # a plain modAL function can be decorated too
    flat = digits[0].reshape(len(digits[0]), -1)
    clf = LogisticRegression(max_iter=300).fit(flat[:60], digits[1][:60])
    idx, _ = OnlyEven(uncertainty_sampling)(clf, flat[100:300], 5)
    assert all(i % 2 == 0 for i in idx)


def test_decorator_inside_the_learner_keeps_y_pool_aligned(digits):
    X, y = digits
    flat = X.reshape(len(X), -1)
    inner = RecordingStrategy()
    learner = ActiveLearner(LogisticRegression(max_iter=300), OnlyEven(inner), pool_subsample=60,
                            random_state=0, verbose=False).fit(flat[:40], y[:40])
    labels = np.arange(300) * 7 % 301
    idx, _ = learner.query(flat[200:500], 2, y_pool=labels)
    assert len(inner.seen_) == 30  # 60 subsampled rows, of which every other one
    np.testing.assert_array_equal(labels[idx], np.sort(inner.seen_)[::-1][:2])
    info = learner.last_acquisition_.info
    assert len(info["skipped_indices"]) == 30 and not np.isin(info["skipped_indices"], idx).any()
    assert labels[info["rejected_indices"][0]] == inner.seen_.min()


def test_decorated_strategy_through_modal(fitted_net, digits):
    from modAL.models import ActiveLearner as ModalLearner

    pool = digits[0][400:600]
    modal = ModalLearner(estimator=fitted_net, query_strategy=to_modal(OnlyEven(bald)))
    idx, _ = modal.query(pool, n_instances=4)
    expected = np.arange(0, 200, 2)[bald(fitted_net, pool[::2], 4)[0]]
    np.testing.assert_array_equal(np.asarray(idx), expected)


def test_acquire_among_checks_its_candidates(fixed):
    est, X = fixed
    with pytest.raises(ValueError, match="duplicates"):
        acquire_among(bald, est, X, [1, 1, 2], 2)
    with pytest.raises(ValueError, match=r"candidates must lie in \[0, 4\)"):
        acquire_among(bald, est, X, [1, 9], 1)
    with pytest.raises(ValueError, match="candidates must lie"):
        acquire_among(bald, est, X, [-1, 2], 1)
    with pytest.raises(TypeError, match="integer"):
        acquire_among(bald, est, X, [0.5], 1)


def test_subclass_measure_may_be_a_plain_function(fixed):
    from skdbal.acquisition.base import SamplesStrategy

    class MyBALD(SamplesStrategy):
        measure = uncertainty.mutual_information  # no staticmethod

    est, X = fixed
    np.testing.assert_array_equal(MyBALD()(est, X, 2)[0], bald(est, X, 2)[0])
