import gzip
import shutil

import numpy as np
import pytest

from skdbal.datasets import MNIST_FILES, get_data_home, load_mnist

TRAIN_COUNTS = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
TEST_COUNTS = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]


def test_load_real_files(mnist_home):
    bunch = load_mnist(data_home=mnist_home, download=False)
    assert bunch.images.shape == (60000, 28, 28) and bunch.images.dtype == np.uint8
    assert bunch.data.shape == (60000, 784)
    assert np.bincount(bunch.target).tolist() == TRAIN_COUNTS
    X, y = load_mnist(data_home=mnist_home, download=False, subset="test", return_X_y=True)
    assert X.shape == (10000, 28, 28) and np.bincount(y).tolist() == TEST_COUNTS
    assert y[:5].tolist() == [7, 2, 1, 0, 4]
    assert 0 < X.mean() < 255 and X.max() == 255


def test_env_var_and_mnist_subfolder(mnist_home, monkeypatch, tmp_path):
    monkeypatch.setenv("SKDBAL_DATA", str(mnist_home))
    assert get_data_home() == mnist_home
    y = load_mnist(data_home=tmp_path, download=False, subset="test", return_X_y=True)[1]  # falls through to env
    assert len(y) == 10000
    assert get_data_home(tmp_path) == tmp_path


def _copy(mnist_home, dst):
    (dst / "mnist").mkdir(parents=True)
    for name in MNIST_FILES:
        shutil.copy(mnist_home / "mnist" / name, dst / "mnist" / name)
    return dst / "mnist"


def test_checksum_failure_on_corrupted_copy(mnist_home, tmp_path, monkeypatch):
    monkeypatch.delenv("SKDBAL_DATA", raising=False)
    folder = _copy(mnist_home, tmp_path)
    name = "t10k-labels-idx1-ubyte.gz"
    with gzip.open(folder / name, "rb") as f:
        content = bytearray(f.read())
    content[100] = (content[100] + 1) % 10  # one label changed: still valid IDX, wrong content
    with gzip.open(folder / name, "wb") as f:
        f.write(bytes(content))
    with pytest.raises(OSError, match="checksum mismatch"):
        load_mnist(data_home=tmp_path, download=False, subset="test")
    (folder / name).write_bytes(b"not gzip at all")
    with pytest.raises(OSError, match="not a readable gzip"):
        load_mnist(data_home=tmp_path, download=False, subset="test")


def test_offline_without_files_says_where_to_put_them(tmp_path, monkeypatch):
    monkeypatch.delenv("SKDBAL_DATA", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "empty" / "mnist")):
        load_mnist(data_home=tmp_path / "empty", download=False)


def test_download_verifies_and_is_atomic(mnist_home, tmp_path, monkeypatch):
    """Downloads go through the checksum; a bad mirror falls through to the next."""
    import skdbal.datasets as ds

    monkeypatch.delenv("SKDBAL_DATA", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    good = mnist_home / "mnist"
    bad = tmp_path / "bad"
    bad.mkdir()
    for name in MNIST_FILES:
        with gzip.open(bad / name, "wb") as f:
            f.write(b"\x00\x00\x08\x01\x00\x00\x00\x01\x05")
    monkeypatch.setattr(ds, "MNIST_MIRRORS", (bad.as_uri() + "/", good.as_uri() + "/"))
    X, y = load_mnist(data_home=tmp_path / "cache", subset="test", return_X_y=True)
    assert np.bincount(y).tolist() == TEST_COUNTS
    cached = sorted(p.name for p in (tmp_path / "cache" / "mnist").iterdir())
    assert cached == ["t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"]  # no partial files left
    monkeypatch.setattr(ds, "MNIST_MIRRORS", (bad.as_uri() + "/",))
    with pytest.raises(OSError, match="could not download") as exc:
        load_mnist(data_home=tmp_path / "cache2", subset="test")
    # offline with download=True: the message also says where to put the files by hand
    assert f"Offline? Put the four IDX files ({', '.join(MNIST_FILES)}) in {tmp_path / 'cache2' / 'mnist'}" \
        in str(exc.value)
    assert not (tmp_path / "cache2").exists()  # no empty cache folders left behind


def test_bad_subset():
    with pytest.raises(ValueError, match="subset"):
        load_mnist(subset="validation")


def test_make_repeated_copies_with_their_own_noise():
    from skdbal.datasets import make_repeated

    X = np.arange(24, dtype=np.float32).reshape(3, 2, 4)  # images stay images
    y = np.array([5, 6, 7])
    Xr, yr, origin = make_repeated(X, y, n_repeats=3, noise_std=0.5, random_state=0, return_origin=True)
    assert Xr.shape == (9, 2, 4) and Xr.dtype == np.float32
    np.testing.assert_array_equal(yr, [5, 6, 7] * 3)
    np.testing.assert_array_equal(origin, [0, 1, 2] * 3)
    noise = Xr - X[origin]
    assert abs(noise.std() - 0.5) < 0.15 and abs(noise.mean()) < 0.2
    assert not np.allclose(noise[:3], noise[3:6])            # each copy its own noise
    again, _ = make_repeated(X, y, n_repeats=3, noise_std=0.5, random_state=0)
    np.testing.assert_array_equal(again, Xr)                # a fixed data set
    exact, _ = make_repeated(X.astype(np.uint8), y, n_repeats=2, noise_std=0)
    assert exact.dtype == np.float32 and np.array_equal(exact[3:], X)
    big = np.zeros((20000, 3))
    Xb, _ = make_repeated(big, np.zeros(20000), n_repeats=2, noise_std=1.0, random_state=0)
    assert abs(Xb.std() - 1.0) < 0.01 and not np.allclose(Xb[:20000], Xb[20000:])   # every block got noise
    for bad, match in [(dict(n_repeats=0), "n_repeats must be an int >= 1"),
                       (dict(n_repeats=2.0), "n_repeats must be an int"),
                       (dict(noise_std=-0.1), "noise_std must be"), (dict(noise_std=np.inf), "noise_std must be")]:
        with pytest.raises(ValueError, match=match):
            make_repeated(X, y, **bad)
    with pytest.raises(ValueError, match="differ in length"):
        make_repeated(X, y[:2])
