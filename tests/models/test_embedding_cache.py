"""EmbeddingCache: a pool's embeddings computed once, keyed by the encoder and the pool's content; a stale or
damaged cache refused; written in chunks, atomically, in bounded memory."""
import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.decomposition import PCA
from sklearn.exceptions import NotFittedError

from skdbal.models import (
    EmbeddingCache,
    FunctionEncoder,
    InputPreparation,
    StaleEmbeddingsError,
    TorchEncoder,
    content_sha256,
    encoder_fingerprint,
)

ROOT = Path(__file__).resolve().parents[2]
POOL = np.arange(40, dtype=np.float32).reshape(10, 4) / 10


#: The rows ``embed`` was called on since the encoder was fitted (a plain function's fingerprint is its code,
#: so a counter held by the function itself would change it).
CALLS = []


def embed(X):
    CALLS.append(len(X))
    return X[:, :2] * 2 + 1


class _Rows:
    @property
    def rows(self):
        return sum(CALLS)


def counting_encoder(X=POOL):
    encoder = FunctionEncoder(embed).fit(X)
    CALLS.clear()
    return encoder, _Rows()


# ----------------------------------------------------------------------------------------- the pool's hash
def test_content_hash_by_hand_and_in_chunks():
    a = np.arange(6, dtype=np.float32).reshape(3, 2)
    by_hand = hashlib.sha256(b"skdbal-array|<f4|(3, 2)|" + a.tobytes()).hexdigest()
    assert content_sha256(a) == by_hand
    assert content_sha256(a, chunk_bytes=1) == by_hand                       # row by row
    assert content_sha256(np.asfortranarray(a)) == by_hand                   # C order whatever the layout
    assert content_sha256(a[:, ::-1]) == content_sha256(np.ascontiguousarray(a[:, ::-1]))
    assert content_sha256(a.astype(np.float64)) != by_hand
    with pytest.raises(TypeError, match="numeric array"):
        content_sha256(np.array(["a", "b"]))


def test_a_memmapped_pool_hashes_as_its_array(tmp_path):
    mm = np.lib.format.open_memmap(tmp_path / "pool.npy", mode="w+", dtype=np.float32, shape=POOL.shape)
    mm[:] = POOL
    mm.flush()
    assert content_sha256(np.load(tmp_path / "pool.npy", mmap_mode="r"), chunk_bytes=32) == content_sha256(POOL)


# ------------------------------------------------------------------------------------------------ hits
def test_computed_once_then_read_back_without_calling_the_encoder(tmp_path):
    encoder, func = counting_encoder()
    cache = EmbeddingCache(tmp_path / "emb.npy", chunk_rows=3)
    Z = cache.get(encoder, POOL)
    assert func.rows == 10 and isinstance(Z, np.memmap) and not Z.flags.writeable
    np.testing.assert_array_equal(Z, POOL[:, :2] * 2 + 1)
    again = EmbeddingCache(tmp_path / "emb.npy").get(encoder, POOL)      # another object, the same files
    assert func.rows == 10
    np.testing.assert_array_equal(again, Z)
    key = json.loads((tmp_path / "emb.json").read_text())
    assert key["pool"] == {"sha256": content_sha256(POOL), "shape": [10, 4], "dtype": "<f4"}
    assert key["embedding"] == {"shape": [10, 2], "dtype": "<f4"}
    assert key["encoder"]["params"]["preparation"] == InputPreparation().to_dict()   # recorded with them
    assert sorted(p.name for p in tmp_path.iterdir()) == ["emb.json", "emb.npy"]      # no temporary left


def test_a_path_without_suffix_gets_npy(tmp_path):
    cache = EmbeddingCache(tmp_path / "sub" / "embeddings")
    assert cache.path.name == "embeddings.npy" and cache.key_path.name == "embeddings.json"
    cache.get(counting_encoder()[0], POOL)
    assert cache.path.is_file()


def test_any_fitted_transformer_can_be_cached(tmp_path):
    pca = PCA(n_components=2, random_state=0).fit(POOL)
    Z = EmbeddingCache(tmp_path / "pca").get(pca, POOL)
    np.testing.assert_allclose(Z, pca.transform(POOL).astype(np.float32), rtol=1e-6)
    assert encoder_fingerprint(pca)["class"] == "sklearn.decomposition._pca.PCA"
    with pytest.raises(NotFittedError, match="the PCA is not fitted: fit it on the pool first"):
        EmbeddingCache(tmp_path / "x").get(PCA(), POOL)


# --------------------------------------------------------------------------------------- stale caches
def linear_encoder(bias=0.0, **kwargs):
    linear = torch.nn.Linear(4, 3)
    with torch.no_grad():
        linear.weight.copy_(torch.arange(12.0).reshape(3, 4))
        linear.bias.fill_(bias)
    return TorchEncoder(linear, **kwargs).fit(POOL)


def test_changed_weights_are_refused_naming_the_hash(tmp_path):
    cache = EmbeddingCache(tmp_path / "emb")
    cache.get(linear_encoder(), POOL)
    with pytest.raises(StaleEmbeddingsError, match=r"belong to another encoder: encoder\.sha256: cache [0-9a-f]{12}…"
                                                   r", now [0-9a-f]{12}…\. Pass recompute=True") as caught:
        cache.get(linear_encoder(bias=1.0), POOL)
    assert [d.split(":")[0] for d in caught.value.differences] == ["encoder.sha256"]
    # the same weights in a batch size of their own: the same embeddings, read back
    np.testing.assert_array_equal(cache.get(linear_encoder(batch_size=3), POOL), linear_encoder().transform(POOL))


def test_a_changed_preparation_is_refused_naming_it(tmp_path):
    cache = EmbeddingCache(tmp_path / "emb")
    cache.get(linear_encoder(), POOL)
    with pytest.raises(StaleEmbeddingsError, match=r"encoder\.params\.preparation\.mean: cache null, now 0\.5"):
        cache.get(linear_encoder(preparation=InputPreparation(mean=0.5, std=1.0)), POOL)


def test_a_changed_pool_is_refused(tmp_path):
    encoder, func = counting_encoder()
    cache = EmbeddingCache(tmp_path / "emb")
    cache.get(encoder, POOL)
    changed = POOL.copy()
    changed[3, 1] += 1
    with pytest.raises(StaleEmbeddingsError, match=r"belong to another pool: pool\.sha256: cache"):
        cache.get(encoder, changed)
    with pytest.raises(StaleEmbeddingsError, match=r"pool\.shape: cache \[10, 4\], now \[9, 4\]"):
        cache.get(encoder, POOL[:9])
    assert func.rows == 10                    # nothing was computed for the refused pools


def test_a_truncated_file_is_refused_then_recomputed(tmp_path):
    encoder, func = counting_encoder()
    cache = EmbeddingCache(tmp_path / "emb")
    cache.get(encoder, POOL)
    size = cache.path.stat().st_size
    with open(cache.path, "r+b") as f:
        f.truncate(size - 4)
    with pytest.raises(StaleEmbeddingsError, match=f"emb.npy is truncated: {size - 4} bytes, {size} expected"):
        cache.get(encoder, POOL)
    Z = cache.get(encoder, POOL, recompute=True)
    assert func.rows == 20 and cache.path.stat().st_size == size
    np.testing.assert_array_equal(Z, POOL[:, :2] * 2 + 1)


def test_a_file_of_another_shape_or_a_damaged_key_is_refused(tmp_path):
    encoder, _ = counting_encoder()
    cache = EmbeddingCache(tmp_path / "emb")
    cache.get(encoder, POOL)
    np.save(cache.path, np.zeros((10, 3), np.float32))
    with pytest.raises(StaleEmbeddingsError, match=r"shape \[10, 3\] <f4, the key records \[10, 2\] <f4"):
        cache.get(encoder, POOL)
    cache.path.write_bytes(b"junk")
    with pytest.raises(StaleEmbeddingsError, match="not a readable .npy file"):
        cache.get(encoder, POOL)
    cache.key_path.write_text("{")
    with pytest.raises(StaleEmbeddingsError, match="unreadable key"):
        cache.get(encoder, POOL)
    cache.key_path.write_text(json.dumps({"format": 0}))
    with pytest.raises(StaleEmbeddingsError, match="another layout"):
        cache.get(encoder, POOL)


def test_embeddings_without_their_key_are_never_used(tmp_path):
    encoder, func = counting_encoder()
    cache = EmbeddingCache(tmp_path / "emb")
    np.save(cache.path, np.full((10, 2), 7.0, np.float32))     # as a write killed before its key leaves it
    Z = cache.get(encoder, POOL)
    assert func.rows == 10
    np.testing.assert_array_equal(Z, POOL[:, :2] * 2 + 1)


class Failing:
    def __call__(self, X):
        if X[0, 0] > 2:
            raise RuntimeError("the encoder broke")
        return X


def test_a_failed_write_leaves_the_previous_cache_whole(tmp_path):
    encoder, _ = counting_encoder()
    cache = EmbeddingCache(tmp_path / "emb", chunk_rows=2)
    before = np.array(cache.get(encoder, POOL))
    with pytest.raises(RuntimeError, match="the encoder broke"):
        cache.get(FunctionEncoder(Failing()).fit(POOL), POOL, recompute=True)
    np.testing.assert_array_equal(cache.get(encoder, POOL), before)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["emb.json", "emb.npy"]


def test_a_write_killed_midway_leaves_no_cache_that_is_used(tmp_path):
    """A process killed with SIGKILL while it writes: no key is left, so the next get computes afresh."""
    pool = np.lib.format.open_memmap(tmp_path / "pool.npy", mode="w+", dtype=np.float32, shape=(64, 4))
    pool[:] = np.arange(256, dtype=np.float32).reshape(64, 4)
    pool.flush()
    marker = tmp_path / "halfway"
    script = textwrap.dedent(f"""
        import time, numpy as np
        from pathlib import Path
        from skdbal.models import EmbeddingCache, FunctionEncoder

        def slow(X):
            if X[0, 0] >= 64:               # from the fifth chunk on: say so, then hang until killed
                Path({str(marker)!r}).touch()
                time.sleep(60)
            return X[:, :2]

        pool = np.load({str(tmp_path / "pool.npy")!r}, mmap_mode="r")
        EmbeddingCache({str(tmp_path / "emb")!r}, chunk_rows=4).get(FunctionEncoder(slow).fit(pool), pool)
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen([sys.executable, "-c", script], env=env)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), "the writer never got halfway"
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    assert not (tmp_path / "emb.json").exists() and not (tmp_path / "emb.npy").exists()
    assert [p for p in tmp_path.iterdir() if p.name.startswith(".emb.npy.")]   # the killed write's temporary
    encoder, func = counting_encoder(pool)
    Z = EmbeddingCache(tmp_path / "emb").get(encoder, pool)
    assert func.rows == 64
    np.testing.assert_array_equal(Z, np.asarray(pool)[:, :2] * 2 + 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["emb.json", "emb.npy", "halfway", "pool.npy"]


# ------------------------------------------------------------------------------------------ bounded memory
def test_a_large_memmapped_pool_is_hashed_and_embedded_in_bounded_memory(tmp_path):
    """200,000 rows of 64 float32 (51 MB) in, 200,000 x 32 (26 MB) out: the Python heap peaks at a few chunks,
    and the process's anonymous memory grows by far less than the pool."""
    n, d = 200_000, 64
    pool = np.lib.format.open_memmap(tmp_path / "pool.npy", mode="w+", dtype=np.float32, shape=(n, d))
    for start in range(0, n, 20_000):
        pool[start:start + 20_000] = np.random.default_rng(start).normal(size=(20_000, d)).astype(np.float32)
    pool.flush()
    del pool
    pool = np.load(tmp_path / "pool.npy", mmap_mode="r")
    projection = np.random.default_rng(0).normal(size=(d, 32)).astype(np.float32)
    encoder = FunctionEncoder(np.dot, kw_args={"b": projection}, batch_size=1024).fit(pool[:10])
    cache = EmbeddingCache(tmp_path / "emb", chunk_rows=4096)
    anon_before = _rss_anon()
    tracemalloc.start()
    try:
        Z = cache.get(encoder, pool)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    anon_growth = _rss_anon() - anon_before if anon_before is not None else 0
    pool_bytes = n * d * 4
    assert Z.shape == (n, 32)
    assert peak < 8 * 2**20, f"the heap peaked at {peak / 2**20:.1f} MiB for a {pool_bytes / 2**20:.0f} MiB pool"
    assert anon_growth < pool_bytes / 4, f"anonymous memory grew {anon_growth / 2**20:.1f} MiB"
    rows = np.random.default_rng(1).choice(n, 50, replace=False)
    np.testing.assert_allclose(Z[rows], np.asarray(pool[rows]) @ projection, rtol=1e-5, atol=1e-5)


def _rss_anon():
    """The process's resident anonymous memory in bytes (Linux), None elsewhere: file-backed pages of the
    memory-mapped pool are not counted, only what the process allocated."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


# ------------------------------------------------------------------------------------------ a dask pool
def test_a_dask_pools_embeddings_stay_on_its_cluster(tmp_path):
    da = pytest.importorskip("dask.array")
    images = np.arange(2 * 5 * 3 * 2, dtype=np.float32).reshape(10, 3, 2) / 10
    pool = da.from_array(images, chunks=(4, 2, 2))
    encoder = TorchEncoder(torch.nn.Flatten(), batch_size=3).fit(images[:2])
    Z = encoder.transform(pool)
    assert isinstance(Z, da.Array) and Z.shape == (10, 6) and Z.chunks == ((4, 4, 2), (6,))
    np.testing.assert_array_equal(Z.compute(), images.reshape(10, 6))
    with pytest.raises(TypeError, match="a dask pool's embeddings stay on its cluster"):
        EmbeddingCache(tmp_path / "emb").get(encoder, pool)
