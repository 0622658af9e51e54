"""write_pool / open_pool: a Zarr pool written block by block, read lazily, never silently overwritten."""
import numpy as np
import pytest

from skdbal.dask import open_pool, write_pool


def test_blocks_round_trip_with_their_chunking(tmp_path):
    rng = np.random.RandomState(0)
    blocks = [rng.randint(0, 256, (n, 4, 3), dtype=np.uint8) for n in (5, 0, 7, 2)]
    z = write_pool(str(tmp_path / "p.zarr"), iter(blocks), chunk_rows=4)
    assert z.shape == (14, 4, 3) and z.chunks == (4, 4, 3) and z.dtype == np.uint8
    X = open_pool(str(tmp_path / "p.zarr"))
    assert X.chunks == ((4, 4, 4, 2), (4,), (3,))
    np.testing.assert_array_equal(X.compute(), np.concatenate(blocks))
    assert open_pool(str(tmp_path / "p.zarr"), chunk_rows=6).chunks[0] == (6, 6, 2)


def test_refusals(tmp_path):
    path = str(tmp_path / "p.zarr")
    write_pool(path, np.zeros((3, 2)))
    with pytest.raises(FileExistsError, match="already holds data; pass overwrite=True"):  # never silently overwritten
        write_pool(path, np.ones((3, 2)))
    assert open_pool(path).compute().sum() == 0
    write_pool(path, np.ones((3, 2)), overwrite=True)
    assert open_pool(path).compute().sum() == 6
    with pytest.raises(ValueError, match="block of shape"):
        write_pool(str(tmp_path / "q.zarr"), [np.zeros((2, 3)), np.zeros((2, 4))])
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        write_pool(str(tmp_path / "r.zarr"), np.zeros(5))
    with pytest.raises(ValueError, match="no blocks"):
        write_pool(str(tmp_path / "s.zarr"), [])
    with pytest.raises(ValueError, match="chunk_rows"):
        write_pool(str(tmp_path / "t.zarr"), np.zeros((2, 2)), chunk_rows=0)
