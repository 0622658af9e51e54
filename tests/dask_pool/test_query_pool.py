"""skdbal.dask.query_pool on a real dask.distributed cluster against the single-process result.

One LocalCluster for the module: two single-threaded worker processes talking TCP on 127.0.0.1, bounded
in time, shut down by its context managers even on failure. The pool is a Zarr array on disk that the
workers read; the client only ever holds candidates.
"""
import time
import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array")  # in the test extra: the import succeeds wherever the suite runs

from _helpers import bounded as _bounded  # noqa: E402
from _helpers import local_dask_client, small_net

from skdbal.acquisition import (  # noqa: E402
    EPIG,
    BatchBALD,
    badge,
    bald,
    diversity_penalty,
    max_entropy,
    mean_std,
    noise_filter,
    random,
    stochastic_batch,
    variation_ratios,
)
from skdbal.acquisition._pointwise import _RandomPlan  # noqa: E402
from skdbal.acquisition.base import ChunkedPool, SamplesStrategy, acquire_among  # noqa: E402
from skdbal.dask import open_pool, query_pool, write_pool  # noqa: E402

TIMEOUT = 120.0


@pytest.fixture(scope="module")
def cluster():
    with local_dask_client(processes=True, timeout=60) as client:
        yield client


def bounded(fn):
    """``fn()``, failing the test if the cluster hangs."""
    return _bounded(fn, TIMEOUT)


@pytest.fixture(scope="module")
def pool(digits, tmp_path_factory):
    X, y = digits
    path = str(tmp_path_factory.mktemp("pool") / "pool.zarr")
    write_pool(path, (X[s:s + 250] for s in range(400, len(X), 250)), chunk_rows=97)
    return path, X[400:], y[400:]


@pytest.fixture(scope="module")
def net(digits):
    X, y = digits
    return small_net().fit(X[:300], y[:300])


def same(dist, local, keys=()):
    assert dist.indices.tolist() == local.indices.tolist()
    np.testing.assert_allclose(dist.scores, local.scores, rtol=1e-6, atol=1e-9)
    for k in keys:
        a, b = dist.info[k], local.info[k]
        if isinstance(b, np.ndarray):
            assert np.asarray(a).tolist() == b.tolist(), k
        else:
            assert a == pytest.approx(b), k


@pytest.mark.parametrize("strategy", [bald, max_entropy, variation_ratios, mean_std], ids=lambda s: type(s).__name__)
def test_pointwise_equals_local_and_ignores_chunking(cluster, pool, net, strategy):
    path, X, _ = pool
    local = strategy.acquire(net, X, 12)
    for rows in (97, 300):  # 14 and 5 tasks, over two workers
        dist = bounded(lambda rows=rows:
                query_pool(strategy, net, open_pool(path, chunk_rows=rows), 12, client=cluster))
        same(dist, local)
        assert dist.info["dask"]["exact"] and dist.info["dask"]["tasks"] == -(-len(X) // rows)


def margin(samples):
    """One minus the gap between the two likeliest classes of the mean prediction."""
    top2 = np.sort(samples.mean(axis=0), axis=1)[:, -2:]
    return 1.0 - (top2[:, 1] - top2[:, 0])


class Margin(SamplesStrategy):
    """A strategy written here, in the test: nothing in skdbal.dask knows it."""

    measure = staticmethod(margin)
    needs_stochastic = False


def test_a_strategy_of_your_own_runs_on_the_cluster(cluster, pool, net):
    """A SamplesStrategy subclass defined in this file runs on a real two-worker cluster on the loopback,
    alone and under the decorators, with the picks of the single process: its plan is SamplesStrategy's."""
    from urllib.parse import urlparse

    assert urlparse(cluster.scheduler.address).hostname == "127.0.0.1"
    assert {urlparse(w).hostname for w in cluster.scheduler_info()["workers"]} == {"127.0.0.1"}
    path, X, y = pool
    labelled = np.random.RandomState(3).choice(len(X), 200, replace=False)
    rest = np.setdiff1d(np.arange(len(X)), labelled)
    for strategy in (Margin(), stochastic_batch(Margin(), "softmax", 30.0), noise_filter(Margin(), 0.3)):
        local = acquire_among(strategy, net, X, rest, 10, y_pool=y, random_state=5)
        dist = bounded(lambda strategy=strategy:
                query_pool(strategy, net, open_pool(path, chunk_rows=97), 10, client=cluster,
                                          exclude=labelled, y_pool=y, random_state=5))
        same(dist, local, [k for k in local.info])
        assert dist.info["dask"]["exact"] and dist.info["dask"]["tasks"] == -(-len(X) // 97)


def test_the_driver_knows_no_strategy_by_its_type():
    """skdbal.dask imports the protocol from skdbal.acquisition.base (the driver of dask arrays, which the
    learner finds by their type), no strategy class, and checks no strategy's type: a new strategy needs no
    edit there."""
    import ast
    from pathlib import Path

    import skdbal.dask

    for path in Path(skdbal.dask.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text())
        taken = {a.asname or a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                 and "acquisition" in (node.module or "") for a in node.names}
        assert taken <= {"Acquisition", "ChunkedPool", "ChunkPlan", "PoolChunk"}, \
            (path.name, taken)
        checked = {ast.unparse(node.args[1]) for node in ast.walk(tree)
                   if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance"}
        assert not checked & taken and all("Strateg" not in c for c in checked), (path.name, checked)


def test_exclude_is_the_local_query_among_the_rest(cluster, pool, net):
    path, X, _ = pool
    rng = np.random.RandomState(0)
    labelled = rng.choice(len(X), 600, replace=False)
    rest = np.setdiff1d(np.arange(len(X)), labelled)
    for strategy in (bald, random, EPIG(n_targets=30)):
        local = acquire_among(strategy, net, X, rest, 10, random_state=3)
        dist = bounded(lambda strategy=strategy:
                query_pool(strategy, net, open_pool(path), 10, client=cluster, exclude=labelled,
                                          random_state=3))
        same(dist, local)
        assert not np.isin(dist.indices, labelled).any()


@pytest.mark.parametrize("mode, beta, base", [("power", 1.0, bald), ("softmax", 40.0, bald),
                                               ("power", 2.0, EPIG(n_targets=30))], ids=["power", "softmax", "epig"])
def test_stochastic_batch_draws_the_local_batch(cluster, pool, net, mode, beta, base):
    """The Gumbel-top-k of the whole pool from each chunk's top k, with the local query's noise stream cut
    along the chunks; the same draw whatever the chunking."""
    path, X, _ = pool
    labelled = np.random.RandomState(1).choice(len(X), 300, replace=False)
    rest = np.setdiff1d(np.arange(len(X)), labelled)
    strategy = stochastic_batch(base, mode, beta)
    local = acquire_among(strategy, net, X, rest, 25, random_state=7)
    for rows in (97, 300):
        dist = bounded(lambda rows=rows: query_pool(strategy, net, open_pool(path, chunk_rows=rows), 25, client=cluster,
                                          exclude=labelled, random_state=7))
        same(dist, local, ("mode", "beta"))
        assert dist.info["dask"]["exact"]
    top = bounded(lambda: query_pool(base, net, open_pool(path), 25, client=cluster, exclude=labelled,
                                     random_state=7))
    assert sorted(dist.indices.tolist()) != sorted(top.indices.tolist())  # a draw, not the top-k
    other = bounded(lambda: query_pool(strategy, net, open_pool(path), 25, client=cluster, exclude=labelled,
                                       random_state=8))
    assert other.indices.tolist() == acquire_among(strategy, net, X, rest, 25, random_state=8).indices.tolist()
    assert other.indices.tolist() != dist.indices.tolist()


def test_stochastic_batch_runs_out_of_weight_as_locally(cluster, tmp_path):
    """Fewer points of positive weight than the batch: the rest are the points of weight 0 by score, then
    lower index, as locally; 9 chunks go a window of 4 tasks at a time (2 worker threads)."""
    class Fixed:  # max entropy is 0 for every point but those of row sum 1 mod 3 (rows of exact 0/1 probs)
        classes_ = np.array([0, 1])

        def predict_proba(self, X):
            p = (np.asarray(X).reshape(len(X), -1).sum(axis=1) % 3 == 1) * 0.3
            return np.stack([1 - p, p], axis=1)

    X = np.repeat(np.arange(60.0)[:, None], 2, axis=1) / 2  # row sums 0, 1, 2, ...
    write_pool(str(tmp_path / "p.zarr"), [X], chunk_rows=7)
    strategy = stochastic_batch(max_entropy, "power", 1.0)
    local = strategy.acquire(Fixed(), X, 30, random_state=2)
    dist = bounded(lambda: query_pool(strategy, Fixed(), open_pool(str(tmp_path / "p.zarr")), 30, client=cluster,
                                      random_state=2))
    same(dist, local)
    assert np.sum(local.scores > 0) == 20  # 20 of positive weight, then 10 of weight 0 by index


def test_kept_to_global_by_hand():
    pool = ChunkedPool([4, 6], exclude=[0, 1, 4, 7])
    # the points kept are 2, 3, 5, 6, 8, 9
    assert pool.positions_to_indices([0, 1, 2, 3, 4, 5]).tolist() == [2, 3, 5, 6, 8, 9]
    assert pool.positions_to_indices([5, 0, 3]).tolist() == [9, 2, 6]  # element by element


def test_random_sampling_streams_the_local_draw(cluster, pool, monkeypatch):
    path, X, _ = pool
    monkeypatch.setattr(_RandomPlan, "block_rows", 100)  # many client blocks: the same stream
    local = random.acquire(None, X, 7, random_state=11)
    dist = query_pool(random, None, open_pool(path), 7, client=cluster, random_state=11)
    same(dist, local)


def test_epig_targets_drawn_as_locally(cluster, pool, net):
    path, X, _ = pool
    strategy = EPIG(n_targets=40)
    local = strategy.acquire(net, X, 8, random_state=5)
    dist = bounded(lambda: query_pool(strategy, net, open_pool(path), 8, client=cluster, random_state=5))
    same(dist, local)


def test_noise_filter_fixed_threshold_with_rejects_and_fill(cluster, pool, net):
    path, X, y = pool
    y_noisy = y.copy()
    y_noisy[::3] = (y_noisy[::3] + 1) % 10  # a third of the labels wrong: many rejects
    for tau, n in ((0.3, 15), (0.999, 40)):  # the second trusts few points: the batch is filled
        strategy = noise_filter(bald, tau)
        with warnings.catch_warnings(record=True) as w_local:
            warnings.simplefilter("always")
            local = strategy.acquire(net, X, n, y_pool=y_noisy)
        with warnings.catch_warnings(record=True) as w_dist:
            warnings.simplefilter("always")
            dist = bounded(lambda n=n, strategy=strategy:
                    query_pool(strategy, net, open_pool(path, chunk_rows=61), n, client=cluster,
                                              y_pool=da.from_array(y_noisy, chunks=200)))
        same(dist, local, ("threshold", "n_rejected", "rejected_indices", "n_filled"))
        assert local.info["n_rejected"] > 0
        assert [str(w.message) for w in w_dist if w.category is UserWarning] == \
            [str(w.message) for w in w_local if w.category is UserWarning]
    assert local.info["n_filled"] > 0


def test_diversity_penalty_gathers_every_candidate(cluster, pool, net, monkeypatch):
    """Each chunk sends 6 candidates at first (5 asked, and never fewer than the batch); the bound needs
    more, so the chunks that may hold them are scored again: the batch is the local one, over the same
    candidates."""
    path, X, y = pool
    rounds = []
    for strategy in (diversity_penalty(bald, 0.1), diversity_penalty(noise_filter(max_entropy, 0.2), 0.1),
                     diversity_penalty(bald, 0.1, n_candidates=50)):
        local = strategy.acquire(net, X, 6, y_pool=y)
        dist = bounded(lambda strategy=strategy: query_pool(strategy, net, open_pool(path), 6, client=cluster, y_pool=y,
                                          n_candidates=5))
        same(dist, local, ("n_candidates",))
        assert dist.info["dask"]["exact"]
        rounds.append(dist.info["dask"]["rounds"])
    assert rounds[0] == 2 and rounds[2] == 1  # fetched more once; with n_candidates set, one round is exact


def test_batch_bald_exact_when_the_candidates_are_the_pool(cluster, pool, net):
    path, X, _ = pool
    strategy = BatchBALD(n_joint_samples=200)
    sub = X[:300]
    local = strategy.acquire(net, sub, 4, random_state=0)
    dask_pool = da.from_array(sub, chunks=64)
    dist = bounded(lambda: query_pool(strategy, net, dask_pool, 4, client=cluster, n_candidates=300, random_state=0))
    same(dist, local)
    assert dist.info["dask"]["exact"]
    pre = bounded(lambda: query_pool(strategy, net, dask_pool, 4, client=cluster, n_candidates=40, random_state=0))
    assert not pre.info["dask"]["exact"] and pre.info["n_candidates"] == 40
    top40 = bald.acquire(net, sub, 40).indices
    assert set(pre.indices.tolist()) <= set(top40.tolist())


def test_refusals_name_the_problem(cluster, pool, net):
    path, X, y = pool
    Xd = open_pool(path)
    with pytest.raises(ValueError, match="float threshold"):
        query_pool(noise_filter(bald, "dynamic"), net, Xd, 2, client=cluster, y_pool=y)
    with pytest.raises(ValueError, match="'softrank' weighs a point by its rank in the whole pool"):
        query_pool(stochastic_batch(bald, "softrank"), net, Xd, 2, client=cluster)
    with pytest.raises(TypeError, match="not from NoiseFilter"):
        query_pool(stochastic_batch(noise_filter(bald, 0.2)), net, Xd, 2, client=cluster, y_pool=y)
    with pytest.raises(TypeError, match="not from BatchBALD"):
        query_pool(stochastic_batch(BatchBALD()), net, Xd, 2, client=cluster)
    with pytest.raises(ValueError, match="beta must be"):
        query_pool(stochastic_batch(bald, beta=-1.0), net, Xd, 2, client=cluster)
    with pytest.raises(TypeError, match="not BADGE"):
        query_pool(badge, net, Xd, 2, client=cluster)
    with pytest.raises(TypeError, match="dask array"):
        query_pool(bald, net, X, 2, client=cluster)
    with pytest.raises(ValueError, match="random_tie_break"):
        query_pool(bald, net, Xd, 2, client=cluster, random_tie_break=True)
    with pytest.raises(ValueError, match="needs y_pool"):
        query_pool(noise_filter(bald, 0.2), net, Xd, 2, client=cluster)
    with pytest.raises(ValueError, match=r"exclude must lie in \[0, 1397\)"):
        query_pool(bald, net, Xd, 2, client=cluster, exclude=[1397])
    with pytest.raises(TypeError, match="unexpected keyword"):
        query_pool(bald, net, Xd, 2, client=cluster, n_joint_samples=3)
    with pytest.raises(ValueError, match="n_instances"):
        query_pool(bald, net, Xd, 2, client=cluster, exclude=np.arange(1396))


_UNPICKLED = []


class CountedNet:
    """A model that counts, in each process, how often it was unpickled there."""

    def __init__(self, net):
        self.net = net

    def predict_proba_samples(self, X, n_samples=None):
        return self.net.predict_proba_samples(X, n_samples=n_samples)

    @property
    def row_keyed_samples(self):
        return self.net.row_keyed_samples

    def __setstate__(self, state):
        _UNPICKLED.append(1)
        self.__dict__.update(state)


def _unpickled():
    return len(_UNPICKLED)


def test_model_sent_once_per_worker(cluster, pool, net):
    """14 tasks over 2 worker processes: the model is unpickled once on each worker, not once per task."""
    path, X, _ = pool
    model = CountedNet(net)
    before = cluster.run(_unpickled)
    dist = bounded(lambda: query_pool(bald, model, open_pool(path, chunk_rows=97), 3, client=cluster))
    after = cluster.run(_unpickled)
    assert {w: after[w] - before[w] for w in after} == {w: 1 for w in after}
    assert dist.indices.tolist() == bald.acquire(net, X, 3).indices.tolist()



def test_plan_stays_on_every_worker_through_every_round(pool, net, monkeypatch):
    """The scheduler's memory manager drops replicas of a scattered key that no task waits for (here every
    50 ms); the plan is outside its reach: a query of three rounds (two of scores, one of features), with
    pauses between them, unpickles the model once on each worker and leaves nothing behind."""
    import dask

    import skdbal.dask.scoring as scoring

    path, X, y = pool
    slow = scoring._map_rows

    def paused(*args, **kwargs):
        time.sleep(0.5)  # ten turns of the memory manager with no task waiting
        return slow(*args, **kwargs)

    monkeypatch.setattr(scoring, "_map_rows", paused)
    with dask.config.set({"distributed.scheduler.active-memory-manager.interval": "50ms"}), \
            local_dask_client(processes=True, timeout=60) as client:
        model = CountedNet(net)
        strategy = diversity_penalty(bald, 0.1)
        dist = bounded(lambda: query_pool(strategy, model, open_pool(path), 6, client=client, n_candidates=5))
        assert dist.info["dask"]["rounds"] == 2
        assert set(client.run(_unpickled).values()) == {1}
        assert set(client.run(lambda: len(scoring._PLANS)).values()) == {0}
    same(dist, strategy.acquire(net, X, 6), ("n_candidates",))


def _forget_plans():
    import skdbal.dask.scoring as scoring

    scoring._PLANS.clear()


def test_a_worker_that_lost_the_plan_unpickles_it_again(cluster, pool, net, monkeypatch):
    """A worker restarted mid-query (here: its plans forgotten between two rounds) gets the plan's bytes
    as the next task's dependency and unpickles it again, instead of failing or waiting for ever."""
    import skdbal.dask.scoring as scoring

    path, X, y = pool
    gather = scoring._map_rows

    def forgetting(client, *args, **kwargs):
        client.run(_forget_plans)
        return gather(client, *args, **kwargs)

    monkeypatch.setattr(scoring, "_map_rows", forgetting)
    model = CountedNet(net)
    strategy = diversity_penalty(bald, 0.1)
    before = cluster.run(_unpickled)
    dist = bounded(lambda: query_pool(strategy, model, open_pool(path), 6, client=cluster, n_candidates=5))
    after = cluster.run(_unpickled)
    same(dist, strategy.acquire(net, X, 6), ("n_candidates",))
    again = [after[w] - before[w] for w in after]
    assert sorted(again) in ([1, 2], [2, 2])  # once each, and once more by the worker(s) that read the features


class _CorruptChunk:
    """Max entropy's model that fails on a chunk with a corrupt row (first value > 100)."""
    classes_ = np.arange(2)

    def predict_proba(self, X):
        X = np.asarray(X).reshape(len(X), -1)
        if (X[:, 0] > 100).any():
            raise ValueError("a corrupt row in this chunk")
        return np.stack([X[:, 1] % 1, 1 - X[:, 1] % 1], axis=1)


def _n_plans():
    import skdbal.dask.scoring as scoring

    return len(scoring._PLANS)


def test_a_failing_chunk_fails_the_query_and_leaves_no_plan(cluster, tmp_path):
    X = np.random.RandomState(0).rand(400, 3)
    X[250, 0] = 1000.0
    write_pool(str(tmp_path / "bad.zarr"), [X], chunk_rows=50)
    for strategy in (max_entropy, stochastic_batch(max_entropy)):
        with pytest.raises(ValueError, match="a corrupt row in this chunk"):
            bounded(lambda strategy=strategy:
                    query_pool(strategy, _CorruptChunk(), open_pool(str(tmp_path / "bad.zarr")), 3,
                                       client=cluster))
        assert set(cluster.run(_n_plans).values()) == {0}
    X[250, 0] = 0.5  # mended: the same cluster answers as the single process
    write_pool(str(tmp_path / "good.zarr"), [X], chunk_rows=50)
    ok = bounded(lambda: query_pool(max_entropy, _CorruptChunk(), open_pool(str(tmp_path / "good.zarr")), 3,
                                    client=cluster))
    assert ok.indices.tolist() == max_entropy.acquire(_CorruptChunk(), X, 3).indices.tolist()


def test_a_model_whose_samples_are_not_row_keyed_is_not_exact_and_says_so(cluster, pool, net):
    """With one mask stream per call (or no int seed), each chunk draws its own masks: the picks change
    with the chunking, and the query warns and reports exact=False instead of claiming the local result."""
    import copy

    path, X, _ = pool
    streamed = copy.deepcopy(net).set_params(mask_seeding="stream")
    assert net.row_keyed_samples and not streamed.row_keyed_samples
    with pytest.warns(UserWarning, match="not row-keyed"):
        dist = bounded(lambda: query_pool(bald, streamed, open_pool(path, chunk_rows=97), 12, client=cluster))
    assert dist.info["dask"]["exact"] is False
    bb = bounded(lambda: query_pool(BatchBALD(n_joint_samples=50), streamed, open_pool(path)[:200], 2,
                                    client=cluster))
    assert bb.info["dask"]["exact"]  # its candidates are the whole pool: the local call, on the client
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the row-keyed net: no warning, exact
        assert bounded(lambda: query_pool(bald, net, open_pool(path), 12, client=cluster)).info["dask"]["exact"]
