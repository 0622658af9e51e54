"""The chunk protocol (Strategy.plan_chunks, ChunkPlan) against the single-process query, in one process.

acquire_in_chunks runs a strategy's plan as skdbal.dask.query_pool runs it on workers (score a chunk,
keep its candidates, merge theirs, with more rounds where the exact answer needs them), so every
composition the cluster supports is checked here in milliseconds, over many chunkings; the Dask tests
(tests/dask_pool) check the same plans on a real cluster.
"""
import warnings

import numpy as np
import pytest

from skdbal.acquisition import (
    EPIG,
    BatchBALD,
    badge,
    bald,
    ddu,
    diversity_penalty,
    max_entropy,
    mean_std,
    noise_filter,
    predictive_variance,
    random,
    stochastic_batch,
    to_modal,
    variation_ratios,
)
from skdbal.acquisition._chunks import _ArrayChunks
from skdbal.acquisition._pointwise import _RandomPlan
from skdbal.acquisition.base import (
    ChunkPlan,
    MeasureStrategy,
    PointwisePlan,
    SamplesStrategy,
    Strategy,
    StrategyDecorator,
    acquire_among,
    acquire_in_chunks,
)
from skdbal.uncertainty import expected_entropy


class Passes:
    """Four consistent passes of a 3-class softmax, each row's a function of the row alone."""

    classes_ = np.arange(3)
    consistent_samples = True
    row_keyed_samples = True

    def __init__(self, row_keyed=True):
        self.W = np.random.RandomState(0).randn(4, 5, 3)
        self.row_keyed_samples = row_keyed

    def predict_proba_samples(self, X, n_samples=None):
        logits = np.einsum("nd,tdc->tnc", np.asarray(X, dtype=np.float64).reshape(len(X), -1), self.W)
        logits -= logits.max(axis=-1, keepdims=True)
        P = np.exp(logits)
        return P / P.sum(axis=-1, keepdims=True)


def margin(samples):
    """One minus the gap between the two likeliest classes of the mean prediction."""
    top2 = np.sort(samples.mean(axis=0), axis=1)[:, -2:]
    return 1.0 - (top2[:, 1] - top2[:, 0])


class Margin(SamplesStrategy):
    """A strategy of a user's own: no plan of its own, SamplesStrategy's."""

    measure = staticmethod(margin)
    needs_stochastic = False


@pytest.fixture(scope="module")
def pool():
    rng = np.random.RandomState(1)
    X = rng.randn(230, 5)
    X[17] = X[3]  # a copy, for the diversity penalty
    y = Passes().predict_proba_samples(X).mean(axis=0).argmax(axis=1)
    y_noisy = np.where(rng.rand(len(X)) < 0.3, (y + 1) % 3, y)
    return X, y_noisy


def same(dist, local, keys=None):
    assert dist.indices.tolist() == local.indices.tolist()
    np.testing.assert_allclose(dist.scores, local.scores, rtol=1e-12, atol=1e-12)
    assert (set(dist.info) == set(local.info)) if keys is None else (set(keys) <= set(dist.info))
    for k in local.info if keys is None else keys:
        a, b = dist.info[k], local.info[k]
        if isinstance(b, np.ndarray):
            assert np.asarray(a).tolist() == b.tolist(), k
        else:
            assert a == pytest.approx(b), k


STACKS = {
    "bald": bald, "max_entropy": max_entropy, "variation_ratios": variation_ratios, "mean_std": mean_std,
    "measure": MeasureStrategy(expected_entropy), "margin": Margin(), "epig": EPIG(n_targets=20),
    "random": random,
    "filter": noise_filter(bald, 0.3), "filter_epig": noise_filter(EPIG(n_targets=20), 0.3),
    "filter_filter": noise_filter(noise_filter(max_entropy, 0.2), 0.35),
    "diverse": diversity_penalty(bald, 0.05), "diverse_filter": diversity_penalty(noise_filter(max_entropy, 0.3), 0.1),
    "diverse_capped": diversity_penalty(margin_strategy := Margin(), 0.2, n_candidates=30),
    "power": stochastic_batch(bald, "power", 1.0), "softmax": stochastic_batch(max_entropy, "softmax", 20.0),
    "power_epig": stochastic_batch(EPIG(n_targets=20), "power", 2.0),
    "power_margin": stochastic_batch(margin_strategy, "power", 1.0),
    "decorator_base": StrategyDecorator(bald), "modal_041": to_modal(bald, "0.4.1"),
}


@pytest.mark.parametrize("name", list(STACKS))
@pytest.mark.parametrize("rows", [7, 64, 500])
def test_chunks_give_the_local_query_among_the_rest(pool, name, rows):
    X, y = pool
    strategy = STACKS[name]
    for labelled in (np.zeros(0, dtype=int), np.random.RandomState(2).choice(len(X), 60, replace=False)):
        rest = np.setdiff1d(np.arange(len(X)), labelled)
        local = acquire_among(strategy, Passes(), X, rest, 9, y_pool=y, random_state=4)
        dist = acquire_in_chunks(strategy, Passes(), X, 9, chunk_rows=rows, exclude=labelled, y_pool=y,
                                 n_candidates=5, random_state=4)
        same(dist, local)


def test_the_filter_rejects_and_fills_as_locally(pool):
    """A threshold that trusts few points: the batch is filled, with the local warning."""
    X, y = pool
    for strategy in (noise_filter(bald, 0.97), diversity_penalty(noise_filter(bald, 0.97), 0.1)):
        with warnings.catch_warnings(record=True) as w_local:
            warnings.simplefilter("always")
            local = strategy.acquire(Passes(), X, 40, y_pool=y)
        with warnings.catch_warnings(record=True) as w_dist:
            warnings.simplefilter("always")
            dist = acquire_in_chunks(strategy, Passes(), X, 40, chunk_rows=13, y_pool=y)
        same(dist, local)
        assert local.info["n_filled"] > 0 and local.info["n_rejected"] > 0
        assert [str(w.message) for w in w_dist] == [str(w.message) for w in w_local]


def test_more_rounds_only_where_the_exact_answer_needs_them(pool):
    X, y = pool
    cases = [(bald, 1), (noise_filter(bald, 0.3), 1), (noise_filter(bald, 0.6), 2), (diversity_penalty(bald, 0.05), 1),
             (diversity_penalty(bald, 0.2), 2),
             (diversity_penalty(bald, 0.2, n_candidates=50), 1), (stochastic_batch(bald), 1), (random, 0)]
    for strategy, rounds in cases:
        chunks = _ArrayChunks(X, 20, aligned={"y_pool": y})
        acq = chunks.acquire(strategy, Passes(), 6, n_candidates=3, random_state=0)
        same(acq, strategy.acquire(Passes(), X, 6, y_pool=y, random_state=0))
        assert chunks.report["rounds"] == rounds, strategy
        assert chunks.report["exact"] and chunks.report["tasks"] == 12


def test_random_sampling_streams_the_local_draw_in_blocks(pool, monkeypatch):
    X, _ = pool
    monkeypatch.setattr(_RandomPlan, "block_rows", 17)
    same(acquire_in_chunks(random, None, X, 7, exclude=[0, 5], random_state=11),
         acquire_among(random, None, X, np.setdiff1d(np.arange(len(X)), [0, 5]), 7, random_state=11))


def test_batch_bald_is_exact_by_its_candidates(pool):
    X, _ = pool
    strategy = BatchBALD(n_joint_samples=100)
    chunks = _ArrayChunks(X[:80], 16)
    local = strategy.acquire(Passes(), X[:80], 3, random_state=0)
    acq = chunks.acquire(strategy, Passes(row_keyed=False), 3, n_candidates=80, random_state=0)
    same(acq, local, list(local.info))
    assert acq.info["n_candidates"] == 80
    assert chunks.report["exact"]  # the whole pool, whatever the model: the local call on the client
    pre = _ArrayChunks(X[:80], 16)
    acq = pre.acquire(strategy, Passes(), 3, n_candidates=10, random_state=0)
    assert not pre.report["exact"] and acq.info["n_candidates"] == 10
    assert set(acq.indices.tolist()) <= set(bald.acquire(Passes(), X[:80], 10).indices.tolist())


def test_samples_that_are_not_row_keyed_are_not_exact_and_say_so(pool):
    X, y = pool
    for strategy in (bald, noise_filter(bald, 0.3), stochastic_batch(bald), diversity_penalty(bald),
                     noise_filter(FirstFeature(), 0.3)):  # the filter's p(y | x) is sampled too
        chunks = _ArrayChunks(X, 50, aligned={"y_pool": y})
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            chunks.acquire(strategy, Passes(row_keyed=False), 3)
        assert ["not row-keyed" in str(w.message) for w in caught] == [True], strategy  # said once
        assert chunks.report["exact"] is False


class FirstFeature(Strategy):
    """A strategy that is not a SamplesStrategy: it says how it reduces with a PointwisePlan."""

    def acquisition_scores(self, estimator, X_pool, **kwargs):
        return np.asarray(X_pool)[:, 0]

    def plan_chunks(self, estimator, n_instances, pool, **options):
        return PointwisePlan(n_instances, self, estimator)


def test_a_strategy_of_your_own_composes_with_the_decorators(pool):
    X, y = pool
    for strategy in (FirstFeature(), diversity_penalty(FirstFeature(), 0.1), noise_filter(FirstFeature(), 0.3),
                     stochastic_batch(FirstFeature(), "softmax", 3.0)):
        local = acquire_among(strategy, Passes(), X, np.arange(len(X)), 5, y_pool=y, random_state=1)
        same(acquire_in_chunks(strategy, Passes(), X, 5, chunk_rows=31, y_pool=y, random_state=1), local)


class Reranked(SamplesStrategy):
    measure = staticmethod(margin)

    def select(self, scores, n_instances, **kwargs):  # not the top k: no plan
        return super().select(-scores, n_instances)


@pytest.mark.parametrize("strategy, error, match", [
    (badge, TypeError, "not BADGE"), (ddu, TypeError, "not DDU"),
    (predictive_variance, TypeError, "not PredictiveVariance"),
    (lambda est, X, n_instances=1: np.arange(n_instances), TypeError, "not CallableStrategy"),
    (Reranked(), TypeError, "not Reranked"),
    (noise_filter(bald, "dynamic"), ValueError, "float threshold"),
    (noise_filter(BatchBALD(), 0.2), TypeError, "not BatchBALD"),
    (noise_filter(random, 0.2), TypeError, "not RandomSampling"),
    (diversity_penalty(BatchBALD()), TypeError, "not BatchBALD"),
    (diversity_penalty(diversity_penalty(bald)), TypeError, "not DiversityPenalty"),
    (stochastic_batch(bald, "softrank"), ValueError, "'softrank' weighs a point by its rank in the whole pool"),
    (stochastic_batch(noise_filter(bald, 0.2)), TypeError, "not from NoiseFilter"),
    (stochastic_batch(BatchBALD()), TypeError, "not from BatchBALD"),
    (stochastic_batch(diversity_penalty(bald)), TypeError, "not from DiversityPenalty"),
    (stochastic_batch(bald, beta=-1.0), ValueError, "beta must be"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_refusals_name_the_strategy(pool, strategy, error, match):
    X, y = pool
    with pytest.raises(error, match=match):
        acquire_in_chunks(strategy, Passes(), X, 2, y_pool=y)


def test_query_checks(pool):
    X, _ = pool
    with pytest.raises(ValueError, match="random_tie_break"):
        acquire_in_chunks(bald, Passes(), X, 2, random_tie_break=True)
    with pytest.raises(ValueError, match="needs y_pool"):
        acquire_in_chunks(noise_filter(bald, 0.2), Passes(), X, 2)
    with pytest.raises(ValueError, match=r"exclude must lie in \[0, 230\)"):
        acquire_in_chunks(bald, Passes(), X, 2, exclude=[230])
    with pytest.raises(ValueError, match="every pool point is excluded"):
        acquire_in_chunks(bald, Passes(), X, 2, exclude=np.arange(230))
    with pytest.raises(TypeError, match="unexpected keyword"):
        acquire_in_chunks(bald, Passes(), X, 2, n_joint_samples=3)
    with pytest.raises(ValueError, match="n_instances"):
        acquire_in_chunks(bald, Passes(), X, 2, exclude=np.arange(229))
    with pytest.raises(ValueError, match="y_pool must be aligned with the pool"):
        acquire_in_chunks(noise_filter(bald, 0.2), Passes(), X, 2, y_pool=np.zeros(3))


def test_a_plan_of_your_own(pool):
    """A reduction that is not a top-k: the rows of lowest index, each chunk sending its first k."""
    X, _ = pool

    class FirstRowsPlan(ChunkPlan):
        def __init__(self, n):
            self.n = n

        def score_chunk(self, chunk):
            return None

        def keep(self, chunk, scores, request):
            return chunk.index[chunk.valid][:self.n]

        def merge(self, pool):
            from skdbal.acquisition.base import Acquisition

            kept = np.sort(np.concatenate([rows for _, rows in pool.round(None)]))[:self.n]
            self.candidates = sum(1 for _ in kept)
            return Acquisition(kept, np.zeros(len(kept)))

    class FirstRows(Strategy):
        def acquisition_scores(self, estimator, X_pool, **kwargs):
            return -np.arange(len(X_pool), dtype=float)

        def plan_chunks(self, estimator, n_instances, pool, **options):
            return FirstRowsPlan(n_instances)

    excluded = [0, 1, 2, 40]
    got = acquire_in_chunks(FirstRows(), None, X, 5, chunk_rows=3, exclude=excluded).indices.tolist()
    assert got == acquire_among(FirstRows(), None, X, np.setdiff1d(np.arange(len(X)), excluded), 5).indices.tolist()

