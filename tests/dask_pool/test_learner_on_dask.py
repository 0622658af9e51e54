"""One query path, local or on a cluster (issue 40): an ActiveLearner whose pool is a dask array queries it
on the cluster, and so do the loop and the labelling session that drive it, with the local picks.

One LocalCluster for the module (two single-threaded worker processes on 127.0.0.1, bounded in time); its
client is the default one, which the learner's queries find (distributed.get_client).
"""
from urllib.parse import urlparse

import numpy as np
import pytest

da = pytest.importorskip("dask.array")  # in the test extra: the import succeeds wherever the suite runs

from _helpers import bounded as _bounded  # noqa: E402
from _helpers import local_dask_client, small_net
from sklearn.linear_model import LogisticRegression  # noqa: E402

from skdbal import ActiveLearner  # noqa: E402  (no import skdbal.dask: the learner finds its driver)
from skdbal.acquisition import bald, max_entropy, noise_filter, stochastic_batch  # noqa: E402
from skdbal.acquisition.base import acquire_among  # noqa: E402
from skdbal.labelling import LabellingSession  # noqa: E402
from skdbal.loop import ActiveLearningLoop  # noqa: E402
from skdbal.oracles import KnownLabels  # noqa: E402

TIMEOUT = 180.0


@pytest.fixture(scope="module")
def cluster():
    with local_dask_client(processes=True, timeout=60) as client:
        assert urlparse(client.scheduler.address).hostname == "127.0.0.1"
        assert {urlparse(w).hostname for w in client.scheduler_info()["workers"]} == {"127.0.0.1"}
        yield client


def bounded(fn):
    return _bounded(fn, TIMEOUT)


@pytest.fixture(scope="module")
def pool(digits):
    X, y = digits
    return X[400:1000], y[400:1000]


def partial(y, n=20):
    y_partial = np.full(len(y), np.nan)
    y_partial[:n] = y[:n]
    return y_partial


def learner_of(strategy, **params):
    return ActiveLearner(small_net(max_epochs=3), strategy, random_state=0, verbose=False, **params)


@pytest.mark.parametrize("strategy", [bald, noise_filter(bald, 0.1), stochastic_batch(bald, "softmax", 30.0)],
                         ids=["bald", "noise_filter", "stochastic_batch"])
def test_a_learner_queries_its_dask_pool_on_the_cluster_with_the_local_picks(cluster, pool, strategy):
    X, y = pool
    kwargs = {"y_pool": y} if "noise" in repr(strategy).lower() else {}
    local = learner_of(strategy).set_pool(X, partial(y)).refit()
    dist = learner_of(strategy).set_pool(da.from_array(X, chunks=(70, 8, 8)), partial(y)).refit()
    assert isinstance(dist.X_pool_, da.Array) and isinstance(dist.X_training_, np.ndarray)
    np.testing.assert_array_equal(dist.X_training_, local.X_training_)
    for _ in range(2):  # a query, labels, a second query
        i_local, X_local, s_local = local.query(n_instances=8, return_scores=True, **kwargs)
        i_dist, X_dist, s_dist = bounded(lambda: dist.query(n_instances=8, return_scores=True, **kwargs))
        assert i_dist.tolist() == i_local.tolist()
        np.testing.assert_allclose(s_dist, s_local, rtol=1e-5, atol=1e-7)
        assert isinstance(X_dist, np.ndarray)
        np.testing.assert_array_equal(X_dist, X_local)
        info = dict(dist.last_acquisition_.info)
        assert info.pop("dask")["exact"] and dist.last_acquisition_.info["dask"]["tasks"] == -(-len(X) // 70)
        assert info.keys() == local.last_acquisition_.info.keys()
        for key, value in local.last_acquisition_.info.items():  # a filter's rejects too
            if isinstance(value, str):
                assert info[key] == value, key
            else:
                np.testing.assert_allclose(np.asarray(info[key], dtype=float), np.asarray(value, dtype=float))
        local.label(i_local, y[i_local])
        dist.label(i_dist, y[i_dist])
        np.testing.assert_array_equal(dist.X_training_, local.X_training_)
        assert dist.labelled_idx_.tolist() == local.labelled_idx_.tolist()


def test_fit_with_missing_labels_keeps_the_dask_pool_and_its_modal_form_queries_it(cluster, pool):
    X, y = pool
    Xd = da.from_array(X, chunks=(100, 8, 8))
    dist = learner_of(bald).fit(Xd, partial(y))
    local = learner_of(bald).fit(X, partial(y))
    assert dist.X_pool_ is Xd
    assert bounded(lambda: dist.query(n_instances=5))[0].tolist() == local.query(n_instances=5)[0].tolist()
    # modAL's form over the whole dask array, with candidates
    cand = np.arange(100, 400)
    i_dist, X_dist = bounded(lambda: dist.query(Xd, 4, candidates=cand))
    i_local, X_local = local.query(X, 4, candidates=cand)
    assert i_dist.tolist() == i_local.tolist()
    np.testing.assert_array_equal(X_dist, X_local)


@pytest.mark.parametrize("pool_subsample", [None, 250])
def test_the_loop_over_a_dask_pool_writes_the_local_journal(cluster, pool, pool_subsample):
    X, y = pool
    journals = []
    for X_pool in (X, da.from_array(X, chunks=(64, 8, 8))):
        learner = learner_of(bald, pool_subsample=pool_subsample).set_pool(X_pool)
        loop = ActiveLearningLoop(learner, KnownLabels(y), n_instances=6, verbose=False)
        loop.start(np.arange(20))
        journals.append(bounded(lambda loop=loop: loop.run(3)))
    local, dist = journals
    assert [r["query_indices"] for r in dist] == [r["query_indices"] for r in local]
    assert all(r["dask"]["exact"] for r in dist[1:])


def test_a_labelling_session_over_a_dask_pool_offers_the_local_batches(cluster, flat_digits, tmp_path):
    X, y = flat_digits

    def batches(X_pool, path):
        learner = ActiveLearner(LogisticRegression(max_iter=300, random_state=0), max_entropy, random_state=0,
                                seeding="step", verbose=False)
        out = []
        with LabellingSession(learner, X_pool, classes=range(10), store=path, batch_size=10) as session:
            for version in range(2):   # a truthful annotator labels two batches
                batch = session.next_batch(annotator="ann", timeout=60)
                out.append(sorted(b["item"] for b in batch))
                for b in batch:
                    session.submit(b["item"], int(y[b["item"]]), annotator="ann")
                session.wait_for_version(version, timeout=60)
            out.append(sorted(b["item"] for b in session.next_batch(annotator="ann", timeout=60)))
            assert session.error is None
        return out

    local = batches(X[:300], tmp_path / "local.db")
    dist = bounded(lambda: batches(da.from_array(X[:300], chunks=(64, 64)), tmp_path / "dask.db"))
    assert dist == local and len(dist) == 3 and all(len(b) == 10 for b in dist)


def test_a_lazy_pool_that_no_driver_reads_is_refused_clearly(pool):
    X, y = pool
    net = small_net(max_epochs=1).fit(X[:50], y[:50])

    class Lazy:  # any lazy collection no driver claims
        shape, dtype = (5, 8, 8), np.dtype(float)

        def __dask_graph__(self):
            raise AssertionError("never read")

        def __len__(self):
            return 5

    message = "a Lazy pool is never read whole into memory, and no driver queries it where it lives"
    with pytest.raises(TypeError, match=message):
        acquire_among(bald, net, Lazy(), np.arange(5), 2)
    with pytest.raises(TypeError, match=message):
        learner_of(bald).set_pool(Lazy())
    learner = learner_of(bald).set_pool(X, partial(y)).refit()
    with pytest.raises(TypeError, match=message):  # modAL's form, with a lazy pool of its own
        learner.query(Lazy(), 2)


def test_a_dask_array_pool_finds_its_driver_by_its_type(pool):
    from skdbal._validation import pool_backend
    from skdbal.dask import acquire_among as on_the_cluster

    X, _ = pool
    assert pool_backend(da.from_array(X, chunks=(100, 8, 8))) is on_the_cluster
    assert pool_backend(X) is None


#: A fresh interpreter: skdbal alone imports no dask; a learner given a dask array pool then queries it on a
#: cluster without import skdbal.dask, with the local picks.
FRESH = """
import sys
import numpy as np
import skdbal
from skdbal import ActiveLearner
from skdbal.acquisition import max_entropy
from sklearn.linear_model import LogisticRegression
assert not [m for m in sys.modules if m == "dask" or m.startswith(("dask.", "distributed", "skdbal.dask"))]
import dask.array as da
from distributed import Client
X = np.random.RandomState(0).normal(size=(200, 4))
y = np.full(200, np.nan)
y[:10] = (X[:10, 0] > 0).astype(int)
with Client(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None):
    learner = ActiveLearner(LogisticRegression(), max_entropy, random_state=0, verbose=False)
    idx, _ = learner.fit(da.from_array(X, chunks=(50, 4)), y).query(n_instances=5)
    assert "skdbal.dask" in sys.modules
local = ActiveLearner(LogisticRegression(), max_entropy, random_state=0, verbose=False).fit(X, y)
assert idx.tolist() == local.query(n_instances=5)[0].tolist(), (idx, local.query(n_instances=5)[0])
print("picks", idx.tolist())
"""


def test_a_fresh_interpreter_queries_a_dask_pool_without_importing_skdbal_dask():
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", FRESH], capture_output=True, text=True, timeout=300, cwd=root,
                          env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("picks [")


def test_simulate_refuses_a_dask_pool_and_points_to_the_loop(pool):
    X, y = pool
    with pytest.raises(TypeError, match=r"ActiveLearningLoop\(learner, skdbal.oracles.KnownLabels"):
        learner_of(bald).simulate(da.from_array(X, chunks=100), y, n_queries=1)


def test_the_client_never_reads_the_pool_whole(cluster, pool, monkeypatch):
    """Every dask array the client computes (np.asarray calls compute) has at most a batch of rows: the
    labelled rows, the rows queried; the chunks are scored on the workers, which return candidates."""
    from distributed import Client

    X, y = pool
    Xd = da.from_array(X, chunks=(70, 8, 8))
    reads = []

    def check(arr):
        reads.append(arr.shape[0])
        if arr.shape[0] > 20:
            raise AssertionError(f"the client read {arr.shape[0]} rows of the pool")

    compute, client_compute = da.Array.compute, Client.compute

    def guarded_compute(self, **kwargs):
        check(self)
        return compute(self, **kwargs)

    def guarded_client_compute(self, collections, *args, **kwargs):
        for c in collections if isinstance(collections, (list, tuple)) else [collections]:
            if isinstance(c, da.Array):
                check(c)
        return client_compute(self, collections, *args, **kwargs)

    monkeypatch.setattr(da.Array, "compute", guarded_compute)
    monkeypatch.setattr(Client, "compute", guarded_client_compute)
    monkeypatch.setattr(da.Array, "persist", lambda self, **kw: pytest.fail("the pool was persisted"))
    with pytest.raises(AssertionError, match="the client read 600 rows"):  # the guard itself
        np.asarray(Xd)
    reads.clear()
    learner = learner_of(noise_filter(bald, 0.1)).set_pool(Xd, partial(y)).refit()
    loop = ActiveLearningLoop(learner, KnownLabels(y), n_instances=8, query_kwargs={"y_pool": y}, verbose=False)
    bounded(lambda: loop.run(2))
    assert len(learner.y_training_) == 36 and reads and max(reads) <= 20
