"""``skdbal label --images``: a representation learnt from the folder or brought as a file, a Bayesian head over
it, the first batch typical in a representation ready at once, embeddings kept beside the store."""
import argparse
import contextlib
import io
import os
import threading
import time

import numpy as np
import pytest
import torch
from _helpers import chromium_driver, needs_chromium, serve
from PIL import Image
from sklearn.decomposition import PCA

from skdbal.acquisition import typiclust
from skdbal.labelling.cli import add_parser, make_session, run
from skdbal.labelling.session import EMBEDDINGS
from skdbal.models import PoolEncoder

N = 120   # images in the folder: 60 dark squares, 60 bright discs


@pytest.fixture
def photos(tmp_path):
    """A folder of 120 grey 28 x 28 PNGs: ``dark/`` holds dark squares, ``bright/`` bright discs, placed at random."""
    rng = np.random.RandomState(0)
    folder = tmp_path / "photos"
    yy, xx = np.mgrid[:28, :28]
    for kind in ("dark", "bright"):
        (folder / kind).mkdir(parents=True)
        for i in range(N // 2):
            cy, cx = rng.randint(9, 19, 2)
            if kind == "dark":
                shape = (abs(yy - cy) < 6) & (abs(xx - cx) < 6)
                level = 90
            else:
                shape = (yy - cy) ** 2 + (xx - cx) ** 2 < 36
                level = 230
            pixels = np.clip(20 + level * shape + rng.randint(0, 20, (28, 28)), 0, 255).astype(np.uint8)
            Image.fromarray(pixels, "L").save(folder / kind / f"{i:03d}.png")
    return folder


def parse(*argv):
    parser = add_parser(argparse.ArgumentParser(prog="skdbal").add_subparsers())
    return parser.parse_args([str(a) for a in argv])


def truth(key):
    return "dark" if key.startswith("dark/") else "bright"


def images_args(photos, store, *more):
    return parse("--images", photos, "--classes", "dark,bright", "--store", store, "--batch-size", "6",
                 "--encoder-time", "1", *more)


def label(session, items):
    for i in items:
        session.submit(i, truth(session.keys[i]), annotator="ann")


def label_first_batch(session):
    first = [b["item"] for b in session.next_batch(annotator="ann", timeout=10)]
    assert len(first) == session.batch_size
    label(session, first)
    return first


def torchscript_encoder(path, seed=0, out=8):
    """A TorchScript encoder file: flatten a 28 x 28 grey image, a fixed linear map to ``out`` features."""
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, out)).eval()
    torch.jit.trace(net, torch.zeros(2, 1, 28, 28)).save(str(path))
    return net


ENCODER_KINDS = ("an encoder file is TorchScript (.pt, .pth, torch.jit.save), an exported program (.pt2, "
                 "torch.export.save) or ONNX (.onnx, with the onnx extra)")


def call_run(args):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        status = run(args)
    return status, err.getvalue()


# ------------------------------------------------------------------------------------------------ options

def test_the_options_parse_and_pool_is_the_default_for_a_folder():
    from skdbal.labelling._representation import DEFAULT_IMAGE_REPRESENTATION, representation_of

    args = parse("--images", "photos", "--classes", "a,b")
    assert representation_of(args) == DEFAULT_IMAGE_REPRESENTATION == "pool"
    args = parse("--images", "photos", "--classes", "a,b", "--encoder", "enc.pt", "--encoder-size", "224",
                 "--encoder-channels", "3", "--encoder-mean", "0.5,0.5,0.5", "--encoder-std", "0.25,0.25,0.25",
                 "--encoder-time", "30")
    assert representation_of(args) == "encoder"
    assert (args.encoder_size, args.encoder_channels, args.encoder_mean, args.encoder_std, args.encoder_time) == \
        (224, 3, [0.5, 0.5, 0.5], [0.25, 0.25, 0.25], 30.0)
    assert representation_of(parse("--npy", "x.npy", "--classes", "a,b")) is None


@pytest.mark.parametrize("make, extra, message", [
    (None, ["--encoder", "{tmp}/missing.pt"], "--encoder {tmp}/missing.pt: no such file"),
    ("folder.pt", ["--encoder", "{tmp}/folder.pt"], "--encoder {tmp}/folder.pt: not a file"),
    ("text.pt", ["--encoder", "{tmp}/text.pt"],
     "--encoder {tmp}/text.pt: not a TorchScript file (torch.jit.save) nor an exported program (.pt2); save the "
     "network with torch.jit.save, or with torch.export.save as a .pt2 file"),
    ("text.txt", ["--encoder", "{tmp}/text.txt"],
     "--encoder {tmp}/text.txt: not an encoder file (the ending .txt); " + ENCODER_KINDS),
    ("enc.pt", ["--encoder", "{tmp}/enc.pt", "--encoder-mean", "0.5"],
     "--encoder-mean and --encoder-std go together: give both, or neither"),
    ("enc.pt", ["--encoder", "{tmp}/enc.pt", "--representation", "pool"],
     "--encoder {tmp}/enc.pt is the representation: leave out --representation pool"),
    (None, ["--encoder-size", "224"], "--encoder-size prepares the images for --encoder: give --encoder FILE"),
])
def test_a_bad_encoder_setting_is_one_line_and_no_store(tmp_path, photos, make, extra, message):
    if make == "enc.pt":
        torchscript_encoder(tmp_path / "enc.pt")
    elif make == "folder.pt":
        (tmp_path / make).mkdir()
    elif make:
        (tmp_path / make).write_text("not a network")
    store = tmp_path / "s.db"
    extra = [e.format(tmp=tmp_path) for e in extra]
    status, err = call_run(images_args(photos, store, "--port", "0", *extra))
    assert status == 2 and err == f"skdbal label: error: {message.format(tmp=tmp_path)}\n"
    assert not store.exists() and not (tmp_path / "s.db.embeddings").exists()


def test_an_encoder_that_fails_on_the_images_is_one_line(tmp_path, photos):
    """A TorchScript network for 3 x 32 x 32 images, given 28 x 28 grey ones: refused before the store."""
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 32 * 32, 4)).eval()
    torch.jit.trace(net, torch.zeros(2, 3, 32, 32)).save(str(tmp_path / "rgb.pt"))
    status, err = call_run(images_args(photos, tmp_path / "s.db", "--port", "0", "--encoder", tmp_path / "rgb.pt"))
    assert status == 2 and err.count("\n") == 1
    assert err.startswith(f"skdbal label: error: --encoder {tmp_path}/rgb.pt: it fails on the inputs as prepared "
                          f"(RuntimeError: mat1 and mat2 shapes cannot be multiplied (1x784 and 3072x4)); ") and \
        err.endswith("check --image-size, --mode and the --encoder-* options\n")
    assert not (tmp_path / "s.db").exists()


def test_the_representation_options_go_with_images_only(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((20, 2), np.float32))
    for extra, message in [(["--representation", "pool"], "--representation chooses what the model of a folder of "
                            "images learns on: it goes with --images"),
                           (["--encoder", "e.pt"], "--encoder chooses what the model of a folder of images "
                            "learns on: it goes with --images")]:
        status, err = call_run(parse("--npy", tmp_path / "x.npy", "--classes", "a,b", "--port", "0",
                                     "--store", tmp_path / "s.db", *extra))
        assert (status, err) == (2, f"skdbal label: error: {message}\n")


# ------------------------------------------------------------------------------------------- first batch

def test_the_first_batch_is_typiclust_on_the_thumbnails_principal_components(tmp_path, photos):
    session, pool, _ = make_session(images_args(photos, tmp_path / "s.db", "--representation", "pca"))
    rows = pool.X.reshape(len(pool.X), -1)
    expected, _ = typiclust(None, PCA(n_components=50, random_state=0).fit_transform(rows), 6, random_state=0)
    assert list(session.initial) == list(expected)
    with session:
        offered = [b["item"] for b in session.next_batch(annotator="ann", timeout=10)]
    assert offered == list(expected)


def test_pixels_is_todays_network_on_the_thumbnails(tmp_path, photos):
    from skdbal.models import MCDropoutClassifier

    session, pool, _ = make_session(images_args(photos, tmp_path / "s.db", "--representation", "pixels"))
    assert isinstance(session.learner.estimator, MCDropoutClassifier) and session.X is pool.X
    assert session.X.shape == (N, 28, 28) and session.initial is None and session.features is None
    assert not hasattr(session, "representation") and not (tmp_path / "s.db.embeddings").exists()


# ---------------------------------------------------------------------------- labels while the encoder learns

def test_labels_given_while_the_encoder_learns_are_kept_and_used_at_the_first_fit(tmp_path, photos, monkeypatch):
    release, fits = threading.Event(), []
    fit = PoolEncoder.fit

    def slow_fit(self, X, y=None):     # the encoder learns until the test lets it finish
        fits.append(len(X))
        assert release.wait(60)
        return fit(self, X, y)

    monkeypatch.setattr(PoolEncoder, "fit", slow_fit)
    start = time.perf_counter()
    session, pool, _ = make_session(images_args(photos, tmp_path / "s.db"))
    with session:
        first = label_first_batch(session)
        assert time.perf_counter() - start < 10 and fits == [N] and not session.representation.future.done()
        # the batch is answered: more of the covering order while the first model waits for the embeddings
        deadline = time.time() + 10
        while session.status()["waiting_for"] != EMBEDDINGS and time.time() < deadline:
            time.sleep(0.02)
        assert session.status()["waiting_for"] == EMBEDDINGS and session.status()["model_version"] == -1
        more = [b["item"] for b in session.next_batch(annotator="ann", timeout=10)]
        assert more and not set(more) & set(first)
        label(session, more[:3])
        release.set()
        session.wait_for_version(0, timeout=60)
        learner = session.learner
        assert sorted(learner.labelled_idx_.tolist()) == sorted(first + more[:3])
        assert learner.X_pool_.shape == (N, 64) and np.array_equal(learner.X_pool_, session.X)
        assert type(learner.estimator_).__name__ == "BayesianLastLayerHead"
        assert session.status()["waiting_for"] is None and session.error is None


# ------------------------------------------------------------------------------------ kept beside the store

def test_the_pool_encoder_is_learnt_once_and_read_back_at_a_restart(tmp_path, photos, monkeypatch):
    fits = []
    fit = PoolEncoder.fit
    monkeypatch.setattr(PoolEncoder, "fit", lambda self, X, y=None: fits.append(1) or fit(self, X, y))
    store = tmp_path / "s.db"
    session, _, _ = make_session(images_args(photos, store))
    Z = np.array(session.representation.future.result(timeout=60))
    session.store.close()
    folder = tmp_path / "s.db.embeddings"
    kept = {name: os.stat(folder / name).st_mtime_ns for name in ("encoder.pkl", "embeddings.npy")}
    assert fits == [1] and Z.shape == (N, 64) and session.representation.learn_time is not None

    session, _, _ = make_session(images_args(photos, store))      # a restart: nothing learnt or computed again
    again = session.representation.future.result(timeout=60)
    session.store.close()
    assert fits == [1] and session.representation.learn_time is None and np.array_equal(again, Z)
    assert {name: os.stat(folder / name).st_mtime_ns for name in kept} == kept


def test_a_changed_folder_learns_the_encoder_again(tmp_path, photos, monkeypatch, capsys):
    fits = []
    fit = PoolEncoder.fit
    monkeypatch.setattr(PoolEncoder, "fit", lambda self, X, y=None: fits.append(1) or fit(self, X, y))
    store = tmp_path / "s.db"
    session, _, _ = make_session(images_args(photos, store))
    session.representation.future.result(timeout=60)
    session.store.close()
    Image.new("L", (28, 28), 255).save(photos / "dark" / "000.png")      # same name, other pixels
    session, _, _ = make_session(images_args(photos, store))
    session.representation.future.result(timeout=60)
    session.store.close()
    assert fits == [1, 1]
    assert f"skdbal: the encoder in {tmp_path}/s.db.embeddings was learnt from other images or settings: learning " \
           "it again" in capsys.readouterr().out


def test_an_encoder_file_embeds_once_and_a_changed_file_is_embedded_again(tmp_path, photos, capsys):
    net = torchscript_encoder(tmp_path / "enc.pt")
    store = tmp_path / "s.db"
    session, pool, _ = make_session(images_args(photos, store, "--encoder", tmp_path / "enc.pt"))
    Z = np.array(session.representation.future.result(timeout=60))
    session.store.close()
    with torch.no_grad():
        expected = net(torch.from_numpy(pool.X[:, None])).numpy()
    np.testing.assert_allclose(Z, expected, rtol=1e-5, atol=1e-6)
    embeddings = tmp_path / "s.db.embeddings" / "embeddings.npy"
    written = os.stat(embeddings).st_mtime_ns

    session, _, _ = make_session(images_args(photos, store, "--encoder", tmp_path / "enc.pt"))
    np.testing.assert_array_equal(session.representation.future.result(timeout=60), Z)
    session.store.close()
    assert os.stat(embeddings).st_mtime_ns == written and "computing them again" not in capsys.readouterr().out

    other = torchscript_encoder(tmp_path / "enc.pt", seed=1)       # the same file name, other weights
    session, _, _ = make_session(images_args(photos, store, "--encoder", tmp_path / "enc.pt"))
    Z2 = np.array(session.representation.future.result(timeout=60))
    session.store.close()
    with torch.no_grad():
        np.testing.assert_allclose(Z2, other(torch.from_numpy(pool.X[:, None])).numpy(), rtol=1e-5, atol=1e-6)
    out = capsys.readouterr().out
    assert f"skdbal: the embeddings in {embeddings} belong to another encoder or folder (encoder." in out
    assert out.rstrip().endswith("computing them again")


def test_an_encoder_file_session_trains_a_head_on_its_embeddings(tmp_path, photos):
    torchscript_encoder(tmp_path / "enc.pt")
    session, _, _ = make_session(images_args(photos, tmp_path / "s.db", "--encoder", tmp_path / "enc.pt"))
    with session:
        label_first_batch(session)
        session.wait_for_version(0, timeout=60)
        assert session.learner.X_pool_.shape == (N, 8)
        batch = session.next_batch(annotator="ann", timeout=30)
        assert batch and all(b["score"] == b["score"] for b in batch)       # BALD's scores, not NaN


def test_the_page_names_the_scores_by_the_side_of_the_hand_off_that_picked_them(tmp_path, photos):
    """TypiClust's scores while the labels are under ten a class (2 classes: under 20 labels), BALD's from
    the query after 24 labels (12 a class); the page read "ColdStart score" throughout."""
    torchscript_encoder(tmp_path / "enc.pt")
    session, _, _ = make_session(images_args(photos, tmp_path / "s.db", "--encoder", tmp_path / "enc.pt"))
    assert session.status()["strategy"] == "cold_start"          # no query yet
    with session:
        names = []
        for version in range(4):                                 # 6, 12, 18, then 24 labels
            batch = [b["item"] for b in session.next_batch(annotator="ann", timeout=30) if not b["tail"]]
            label(session, batch[:6])
            session.wait_for_version(version, timeout=60)
            while session.training:
                time.sleep(0.01)
            names.append(session.status()["strategy"])
        assert len(session.store.current_labels()) == 24
    assert names == ["typiclust", "typiclust", "typiclust", "bald"]


def test_a_spreading_head_is_given_the_pool_s_embeddings_when_they_arrive(tmp_path, photos, monkeypatch):
    """The spreading head's graph is the whole pool's: the session hands it the embeddings before the
    first fit, and the model it publishes spreads the first batch's labels over all N items."""
    from skdbal.labelling import _representation

    monkeypatch.setattr(_representation, "DEFAULT_HEAD", "spread")
    torchscript_encoder(tmp_path / "enc.pt")
    session, _, _ = make_session(images_args(photos, tmp_path / "s.db", "--encoder", tmp_path / "enc.pt"))
    assert session.learner.estimator.pool is None
    with session:
        label_first_batch(session)
        session.wait_for_version(0, timeout=60)
        model = session.board.published[1]
        assert type(model).__name__ == "LabelSpreadingHead"
        assert model.evidence_.shape == (N, 2)                       # one row per item of the pool
        np.testing.assert_array_equal(session.learner.estimator.pool, session.X)


def test_labelstudio_takes_the_same_options_and_builds_the_same_session(tmp_path, photos):
    from skdbal.labelling._representation import representation_line
    from skdbal.labelstudio.cli import add_parser as labelstudio_parser

    parser = labelstudio_parser(argparse.ArgumentParser(prog="skdbal").add_subparsers())
    torchscript_encoder(tmp_path / "enc.pt")
    args = parser.parse_args(["--images", str(photos), "--classes", "dark,bright", "--url", "http://127.0.0.1:9",
                              "--project", "1", "--token-env", "NO_SUCH_TOKEN", "--store", str(tmp_path / "s.db"),
                              "--batch-size", "6",
                              "--encoder", str(tmp_path / "enc.pt")])
    session, _, store = make_session(args)
    try:
        assert session.representation.future.result(timeout=60).shape == (N, 8)
        assert type(session.learner.estimator).__name__ == "BayesianLastLayerHead"
        assert representation_line(args, store).startswith(f"the model: a Bayesian head over {tmp_path}/enc.pt's "
                                                           "embeddings")
    finally:
        session.store.close()


# -------------------------------------------------------------------------- the page while the encoder learns

#: The highlighted image still to label, drawn: its element's id (benchmarks/bench_labelling_wait.py's CURRENT).
_CURRENT = ("const c = document.querySelector('.item.current:not(.done):not(.saving)'); if(!c) return null; "
            "const i = c.querySelector('img'); return (i && i.complete && i.naturalWidth > 0) ? c.id : null;")


def _encoder_held(monkeypatch) -> threading.Event:
    """The pool's encoder learns until the test sets the event returned (at most 90 s)."""
    release = threading.Event()
    fit = PoolEncoder.fit

    def slow_fit(self, X, y=None):
        assert release.wait(90)
        return fit(self, X, y)

    monkeypatch.setattr(PoolEncoder, "fit", slow_fit)
    return release


@needs_chromium
def test_the_page_never_goes_blank_while_the_encoder_learns(tmp_path, photos, monkeypatch):
    """In Chromium, a person labels the first batch and four more with the keys while the encoder learns:
    after every key press, the first batch's last included, the next image is highlighted within 2 s (the
    covering order's items, the notice saying that the first model waits for the embeddings; no blank
    "nothing to label" page). Once the encoder is let finish, the first model is trained on all ten
    labels, and the page shows its version."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from skdbal.labelling._page import class_keys
    from skdbal.labelling.app import make_app

    release = _encoder_held(monkeypatch)
    session, pool, _ = make_session(images_args(photos, tmp_path / "s.db"))
    session.start()
    base, stop = serve(make_app(session, token="secret", pool=pool))
    driver = chromium_driver(tmp_path / "chrome")
    try:
        wait = WebDriverWait(driver, 30)
        driver.get(f"{base}/?annotator=ann")
        shown = WebDriverWait(driver, 5)     # no image to label 5 s after a key press: a blank page
        keys = dict(zip(["dark", "bright"], class_keys(["dark", "bright"])))
        labelled, waits, notices = [], [], []
        for k in range(session.batch_size + 4):
            pressed = time.perf_counter()
            current = shown.until(lambda d: d.execute_script(_CURRENT))
            if k:
                waits.append(time.perf_counter() - pressed)
            notices.append(driver.find_element(By.ID, "notice").text)
            item = int(current.split("-")[-1])
            ActionChains(driver).send_keys(keys[truth(session.keys[item])]).perform()
            labelled.append(item)
            count = len(labelled)
            wait.until(lambda d, count=count: len(session.store.current_labels()) == count)
        assert max(waits) < 2.0, waits       # the first batch's last key press included
        assert not session.representation.future.done() and session.status()["model_version"] == -1
        assert session.status()["waiting_for"] == EMBEDDINGS
        assert notices[-1] == "The first model waits for the pool's embeddings: these items are chosen to cover " \
                              "the pool."
        assert {int(i): v["label"] for i, v in session.store.current_labels().items()} == \
            {i: truth(session.keys[i]) for i in labelled}
        release.set()
        session.wait_for_version(0, timeout=60)
        assert sorted(session.learner.labelled_idx_.tolist()) == sorted(labelled)
        wait.until(lambda d: "model version 0" in d.find_element(By.ID, "progress").text)
    finally:
        release.set()
        driver.quit()
        stop()
        session.stop()


@needs_chromium
def test_a_restart_that_learns_the_encoder_again_says_it_waits_for_it(tmp_path, photos, monkeypatch):
    """A store with a model, its embeddings gone (a store copied without its folder): the restart learns
    the encoder again, and meanwhile the session waits for the embeddings, not "training" (it said
    "training…" and "the next best items under the last model" for as long as the encoder learnt, while
    offering the covering order); the page says the model waits for them, offers images to label, and
    the label given meanwhile is kept; then the last model is trained again and the next batch offered."""
    import shutil

    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from skdbal.labelling._page import class_keys
    from skdbal.labelling.app import make_app

    store = tmp_path / "s.db"
    session, _, _ = make_session(images_args(photos, store))
    with session:
        first = label_first_batch(session)
        session.wait_for_version(0, timeout=60)
    shutil.rmtree(tmp_path / "s.db.embeddings")

    release = _encoder_held(monkeypatch)
    session, pool, _ = make_session(images_args(photos, store))
    session.start()
    base, stop = serve(make_app(session, token="secret", pool=pool))
    driver = chromium_driver(tmp_path / "chrome")
    try:
        deadline = time.time() + 10
        while session.status()["waiting_for"] != EMBEDDINGS and time.time() < deadline:
            time.sleep(0.02)
        status = session.status()
        assert (status["waiting_for"], status["training"], status["model_version"]) == (EMBEDDINGS, False, 0)
        driver.get(f"{base}/?annotator=ann")
        current = WebDriverWait(driver, 10).until(lambda d: d.execute_script(_CURRENT))
        assert driver.find_element(By.ID, "notice").text == "The model waits for the pool's embeddings: these items " \
                                                            "are chosen to cover the pool."
        assert driver.find_element(By.ID, "state").text == "ready"
        item = int(current.split("-")[-1])
        assert item not in first
        ActionChains(driver).send_keys(dict(zip(["dark", "bright"], class_keys(["dark", "bright"])))[
            truth(session.keys[item])]).perform()
        WebDriverWait(driver, 10).until(lambda d: item in session.store.current_labels())
        release.set()
        deadline = time.time() + 60
        while (session.waiting_for or session.training or not session.board.batch) and time.time() < deadline:
            time.sleep(0.02)
        batch = [b["item"] for b in session.next_batch(annotator="ann", timeout=10) if not b["tail"]]
        assert batch and item not in batch and session.error is None
        assert session.status()["waiting_for"] is None and len(session.store.current_labels()) == 7
    finally:
        release.set()
        driver.quit()
        stop()
        session.stop()
