"""``skdbal label --test PATH``: a labelled test set in the pool's own format, whose accuracy the page shows
beside the estimate after each version; a bad one refused in one line before anything starts."""
import argparse
import contextlib
import io

import numpy as np
import pandas as pd
import pytest
from PIL import Image
from sklearn.linear_model import LogisticRegression

from skdbal import ActiveLearner
from skdbal.acquisition import max_entropy
from skdbal.labelling import LabellingSession
from skdbal.labelling.cli import add_parser, build, run
from skdbal.labelling.held_out import load_test_set
from skdbal.labelling.pools import load_pool


def table(path, n, rng, label=True):
    """Two classes: ``a`` around -1, ``b`` around +1, in four columns, with a name column."""
    y = np.where(np.arange(n) % 2, "b", "a")
    X = rng.normal(size=(n, 4)) + np.where(y == "b", 1.0, -1.0)[:, None]
    frame = pd.DataFrame(X, columns=["f0", "f1", "f2", "f3"])
    frame.insert(0, "name", [f"{path.stem}{i}" for i in range(n)])
    if label:
        frame["label"] = y
    frame.to_csv(path, index=False)
    return X.astype(np.float32), y


def images(folder, per_class, loose=False):
    """A folder of 12 x 12 images: cats dark, dogs bright, each class in its own subfolder."""
    rng = np.random.RandomState(1)
    for kind, level in (("cat", 40), ("dog", 210)):
        (folder / kind).mkdir(parents=True)
        for i in range(per_class):
            pixels = np.clip(level + rng.randint(-30, 30, (12, 12)), 0, 255).astype(np.uint8)
            Image.fromarray(pixels, "L").save(folder / kind / f"{i}.png")
    if loose:
        Image.fromarray(np.zeros((12, 12), np.uint8), "L").save(folder / "stray.png")
    return folder


def test_the_test_accuracy_is_the_share_of_the_test_set_the_model_guesses_right(tmp_path):
    rng = np.random.RandomState(0)
    X, y = table(tmp_path / "pool.csv", 60, rng, label=False)
    X_test, y_true = table(tmp_path / "test.csv", 30, rng)
    pool = load_pool(tmp_path / "pool.csv", id_column="name")
    X_read, y_read = load_test_set(tmp_path / "test.csv", pool, ["a", "b"], source="table")
    assert np.allclose(X_read, X_test) and y_read.tolist() == y_true.tolist()
    learner = ActiveLearner(LogisticRegression(max_iter=300, random_state=0), max_entropy, random_state=0,
                            seeding="step")
    with LabellingSession(learner, pool.X, ["a", "b"], tmp_path / "s.db", batch_size=6, X_test=X_read,
                          y_test=y_read, item_noun="rows") as s:
        for item in s.next_batch(annotator="ann", timeout=30):
            s.submit(item["item"], y[item["item"]], annotator="ann")
        s.wait_for_version(0, timeout=60)
        status = s.status()
        labelled = sorted(s.store.current_labels())
    # the same model fitted here on the same six labels
    model = LogisticRegression(max_iter=300, random_state=0).fit(pool.X[labelled], y[labelled])
    share = float(np.mean(model.predict(X_test) == y_true))
    assert status["test_accuracy"] == pytest.approx(share) and (status["test_size"], status["test_version"]) == (30, 0)
    assert status["test_words"] == f"On the test set given (30 rows): {100 * share:.1f}% right (model version 0)."


def test_a_test_folder_has_a_subfolder_per_class_and_an_array_an_npz(tmp_path):
    pool = load_pool(images(tmp_path / "pool", 4), image_size=12)
    X, y = load_test_set(images(tmp_path / "test", 3), pool, ["cat", "dog"], source="images", image_size=12)
    assert X.shape == (6, 12, 12) and y.tolist() == ["cat"] * 3 + ["dog"] * 3
    assert X[:3].mean() < 0.3 < 0.7 < X[3:].mean()
    np.savez(tmp_path / "t.npz", X=np.ones((3, 2)), y=np.array([0, 1, 1]))
    X, y = load_test_set(tmp_path / "t.npz", load_pool(np.zeros((5, 2))), list(range(2)), source="npy")
    assert X.shape == (3, 2) and y.tolist() == [0, 1, 1]


class Served(AssertionError):
    """The command got as far as serving: what it was given was not refused."""


def label_run(*argv):
    """``skdbal label ARGV`` in this process: its exit status and what it wrote to stderr (a command that
    gets as far as serving raises :class:`Served` instead of serving forever)."""
    import uvicorn

    def serve(self, *args, **kwargs):
        raise Served("skdbal label started serving")

    parser = add_parser(argparse.ArgumentParser(prog="skdbal").add_subparsers())
    err = io.StringIO()
    real, uvicorn.Server.run = uvicorn.Server.run, serve
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            status = run(parser.parse_args([str(a) for a in argv]))
    finally:
        uvicorn.Server.run = real
    return status, err.getvalue()


@pytest.fixture
def pool_csv(tmp_path):
    table(tmp_path / "pool.csv", 40, np.random.RandomState(0), label=False)
    return tmp_path / "pool.csv"


@pytest.mark.parametrize("make, message", [
    (lambda d: table(d / "t.csv", 8, np.random.RandomState(2), label=False) and d / "t.csv",
     "--test {}: no column 'label' (the labels); its columns are name, f0, f1, f2, f3"),
    (lambda d: (pd.DataFrame({"f0": [1.0], "f1": [2.0], "label": ["a"]}).to_csv(d / "t.csv", index=False),
                d / "t.csv")[1],
     "--test {}: no column f2, f3; it needs the pool's columns (f0, f1, f2, f3) and 'label'"),
    (lambda d: (pd.DataFrame({"f0": [1.0], "f1": [2.0], "f2": [0.0], "f3": [0.0], "label": ["cow"]})
                .to_csv(d / "t.csv", index=False), d / "t.csv")[1],
     "--test {}: the labels cow are not among the classes (a, b)"),
    (lambda d: d / "missing.csv", "--test {}: no such file"),
    (lambda d: (np.save(d / "t.npy", np.zeros(3)), d / "t.npy")[1],
     "--test {}: a test table is a .csv or .parquet file with the pool's columns and a column 'label'"),
])
def test_a_bad_test_file_is_refused_in_one_line_and_the_store_is_left_as_it_was(tmp_path, pool_csv, make, message):
    path = make(tmp_path)
    store = tmp_path / "s.db"
    status, err = label_run("--table", pool_csv, "--id-column", "name", "--classes", "a,b", "--store", store,
                            "--port", 0, "--test", path)
    assert status == 2 and err.strip().splitlines() == ["skdbal label: error: " + message.format(path)]
    assert not store.exists()
    # a store made before keeps its bytes
    parser = add_parser(argparse.ArgumentParser(prog="skdbal").add_subparsers())
    session, _, _, _ = build(parser.parse_args(["--table", str(pool_csv), "--id-column", "name", "--classes", "a,b",
                                                "--store", str(store)]))
    session.store.close()
    before = store.read_bytes()
    status, err = label_run("--table", pool_csv, "--id-column", "name", "--classes", "a,b", "--store", store,
                            "--port", 0, "--test", path)
    assert status == 2 and len(err.strip().splitlines()) == 1 and store.read_bytes() == before


@pytest.mark.parametrize("extra, message", [
    (["--representation", "pixels"], "--test {test}: stray.png is not in a class's folder; put each image in a "
                                     "subfolder named for its class (cat/tom.jpg)"),
    ([], "--test {test}: with --representation pool the model sees embeddings of the pool only; give "
         "--representation pixels to test it"),
])
def test_a_test_folder_of_images_is_checked(tmp_path, extra, message):
    pool = images(tmp_path / "pool", 4)
    test = images(tmp_path / "test", 2, loose=True)
    status, err = label_run("--images", pool, "--classes", "cat,dog", "--store", tmp_path / "s.db", "--port", 0,
                            "--batch-size", "2", "--test", test, *extra)
    assert status == 2 and err.strip().splitlines() == ["skdbal label: error: " + message.format(test=test)]
    assert not (tmp_path / "s.db").exists()


def test_the_demo_has_its_own_test_set(tmp_path):
    status, err = label_run("--demo", "digits", "--store", tmp_path / "s.db", "--port", 0, "--test", tmp_path)
    assert status == 2 and err.strip() == ("skdbal label: error: --test goes with --images, --table or --npy: the "
                                           "digits demo has its own test set")
