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


# ------------------------------------------------------------------ Fashion-MNIST
@pytest.fixture(scope="module")
def fashion_home():
    """A folder holding fashion-mnist/ with the four IDX files (never downloaded in tests)."""
    from _helpers import mnist_candidates

    for home in mnist_candidates():
        if (home / "fashion-mnist" / "train-labels-idx1-ubyte.gz").is_file():
            return home
    pytest.skip("Fashion-MNIST not found in " + ", ".join(f"{p}/fashion-mnist" for p in mnist_candidates()))


def test_load_fashion_mnist_reads_the_real_files(fashion_home, monkeypatch):
    from skdbal.datasets import FASHION_MNIST_CLASSES, load_fashion_mnist

    monkeypatch.setenv("SKDBAL_DATA", str(fashion_home))
    bunch = load_fashion_mnist(download=False, subset="test")        # found through $SKDBAL_DATA/fashion-mnist
    assert bunch.images.shape == (10000, 28, 28) and bunch.images.dtype == np.uint8
    assert bunch.data.shape == (10000, 784) and bunch.target.dtype == np.int64
    assert np.bincount(bunch.target).tolist() == [1000] * 10          # 1,000 of each class
    assert bunch.target[:5].tolist() == [9, 2, 1, 1, 6]                # the test set's first labels upstream
    assert bunch.target_names[9] == "Ankle boot" and len(bunch.target_names) == 10
    assert tuple(bunch.target_names) == FASHION_MNIST_CLASSES
    y = load_fashion_mnist(data_home=fashion_home, download=False, return_X_y=True)[1]
    assert np.bincount(y).tolist() == [6000] * 10
    X_all, y_all = load_fashion_mnist(data_home=fashion_home, download=False, subset="all", return_X_y=True)
    assert X_all.shape == (70000, 28, 28) and np.array_equal(y_all[:60000], y)
    mnist_X = load_mnist(data_home=fashion_home, download=False, subset="test", return_X_y=True)[0] \
        if (fashion_home / "mnist").is_dir() else None
    if mnist_X is not None:
        assert not np.array_equal(mnist_X, bunch.images)              # not MNIST's images by another name


def _copy_fashion(fashion_home, dst):
    from skdbal.datasets import FASHION_MNIST_FILES

    (dst / "fashion-mnist").mkdir(parents=True)
    for name in FASHION_MNIST_FILES:
        shutil.copy(fashion_home / "fashion-mnist" / name, dst / "fashion-mnist" / name)
    return dst / "fashion-mnist"


def test_a_corrupted_fashion_mnist_copy_is_refused(fashion_home, tmp_path, monkeypatch):
    from skdbal.datasets import FASHION_MNIST_FILES, load_fashion_mnist

    monkeypatch.delenv("SKDBAL_DATA", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    folder = _copy_fashion(fashion_home, tmp_path)
    name = "t10k-labels-idx1-ubyte.gz"
    with gzip.open(folder / name, "rb") as f:
        content = bytearray(f.read())
    content[100] = (content[100] + 1) % 10       # one label changed: still valid IDX, wrong content
    with gzip.open(folder / name, "wb") as f:     # re-compressed, as a copy of the right content would be
        f.write(bytes(content))
    with pytest.raises(OSError, match="checksum mismatch") as error:
        load_fashion_mnist(data_home=tmp_path, download=False, subset="test")
    assert FASHION_MNIST_FILES[name] in str(error.value) and str(folder / name) in str(error.value)
    content[100] = (content[100] - 1) % 10       # the right content, re-compressed at another level: accepted
    with gzip.open(folder / name, "wb", compresslevel=1) as f:
        f.write(bytes(content))
    assert len(load_fashion_mnist(data_home=tmp_path, download=False, subset="test", return_X_y=True)[1]) == 10000


def test_mnist_files_in_fashion_mnists_place_are_named(mnist_home, tmp_path, monkeypatch):
    from skdbal.datasets import load_fashion_mnist

    monkeypatch.delenv("SKDBAL_DATA", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "fashion-mnist").mkdir()
    for name in MNIST_FILES:
        shutil.copy(mnist_home / "mnist" / name, tmp_path / "fashion-mnist" / name)
    with pytest.raises(OSError, match="is MNIST's file of that name, not Fashion-MNIST's"):
        load_fashion_mnist(data_home=tmp_path, download=False, subset="test")


def test_fashion_mnist_offline_says_where_and_downloads_from_its_own_mirrors(fashion_home, tmp_path, monkeypatch):
    import skdbal.datasets as ds

    monkeypatch.delenv("SKDBAL_DATA", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    with pytest.raises(FileNotFoundError, match="Fashion-MNIST file .* not found and download=False") as error:
        ds.load_fashion_mnist(data_home=tmp_path / "empty", download=False)
    assert str(tmp_path / "empty" / "fashion-mnist") in str(error.value)
    monkeypatch.setattr(ds, "FASHION_MNIST_MIRRORS", ((fashion_home / "fashion-mnist").as_uri() + "/",))
    monkeypatch.setattr(ds, "MNIST_MIRRORS", ())       # MNIST's mirrors are not Fashion-MNIST's
    y = ds.load_fashion_mnist(data_home=tmp_path / "cache", subset="test", return_X_y=True)[1]
    assert np.bincount(y).tolist() == [1000] * 10
    assert sorted(p.name for p in (tmp_path / "cache" / "fashion-mnist").iterdir()) == [
        "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"]
    with pytest.raises(ValueError, match="subset"):
        ds.load_fashion_mnist(subset="validation")


def test_the_experiments_read_fashion_mnist(fashion_home, monkeypatch):
    from skdbal.experiments import get_preset, load_data
    from skdbal.experiments.specs import check_sizes

    monkeypatch.setenv("SKDBAL_DATA", str(fashion_home))
    load_data.cache_clear()
    try:
        X, y, X_test, y_test = load_data("fashion_mnist")
    finally:
        load_data.cache_clear()
    assert X.shape == (60000, 28, 28) and X_test.shape == (10000, 28, 28)
    assert np.bincount(y).tolist() == [6000] * 10 and y_test[:5].tolist() == [9, 2, 1, 1, 6]
    preset = get_preset("gal2017", dataset="fashion_mnist")
    assert preset.dataset == "fashion_mnist"
    check_sizes(preset)                                                # its sizes are known before a run
    with pytest.raises(ValueError, match="fashion_mnist"):
        load_data("fashion")
