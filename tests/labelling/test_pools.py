"""Pools from real files: a folder of images, .npy/.npz, CSV, Parquet, arrays; the page draws them by id only."""
import argparse
import io
import json
import os
import re
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest
from _helpers import chromium_driver, needs_chromium, serve
from PIL import Image
from sklearn.linear_model import LogisticRegression
from starlette.testclient import TestClient

from skdbal import ActiveLearner
from skdbal.labelling import LabellingSession
from skdbal.labelling._page import PAGE as _PAGE
from skdbal.labelling.app import make_app
from skdbal.labelling.cli import add_parser, build
from skdbal.labelling.pools import DISPLAY_SIZE, Pool, load_pool


def save(path, image):
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path)
    return path


@pytest.fixture
def folder(tmp_path):
    """white.png (all 255), half.png (left half black), grey.jpg (uniform 128, in colour), sub/red.bmp,
    a big photo-sized image, and files that are not images."""
    root = tmp_path / "photos"
    save(root / "white.png", Image.new("L", (10, 10), 255))
    half = np.zeros((8, 8), np.uint8)
    half[:, 4:] = 255
    save(root / "half.png", Image.fromarray(half))
    save(root / "grey.jpg", Image.new("RGB", (30, 20), (128, 128, 128)))
    save(root / "sub" / "red.bmp", Image.new("RGB", (6, 6), (255, 0, 0)))
    save(root / "big.PNG", Image.new("RGB", (1200, 600), (0, 0, 255)))
    (root / "notes.txt").write_text("not an image")
    (root / "labels.csv").write_text("a,b\n1,2\n")
    save(root / ".hidden.png", Image.new("L", (4, 4), 0))
    return root


def test_a_folder_of_images(folder):
    pool = load_pool(folder, image_size=8)
    assert pool.kind == "images" and pool.columns is None
    assert pool.keys == ["big.PNG", "grey.jpg", "half.png", "sub/red.bmp", "white.png"]   # sorted, recursive
    assert pool.X.shape == (5, 8, 8) and pool.X.dtype == np.float32
    X = dict(zip(pool.keys, pool.X))
    assert np.all(X["white.png"] == 1.0)
    assert np.allclose(X["half.png"][:, :4], 0) and np.allclose(X["half.png"][:, 4:], 1)   # same size: exact
    assert X["half.png"].mean() == pytest.approx(0.5)
    assert np.allclose(X["grey.jpg"], 128 / 255, atol=2 / 255)     # JPEG: nearly
    # grey-scale is ITU-R 601-2 luma: L = 0.299 R + 0.587 G + 0.114 B
    assert np.allclose(X["sub/red.bmp"], round(0.299 * 255) / 255, atol=1 / 255)
    assert np.allclose(X["big.PNG"], round(0.114 * 255) / 255, atol=1 / 255)


def test_resized_and_in_colour(folder):
    pool = load_pool(folder, image_size=28)
    half = pool.X[pool.keys.index("half.png")]
    assert half.shape == (28, 28) and half.mean() == pytest.approx(0.5, abs=0.01)
    assert np.all(half[:, :12] == 0) and np.all(half[:, -12:] == 1)
    rgb = load_pool(folder, image_size=5, mode="RGB")
    assert rgb.X.shape == (5, 3, 5, 5)
    red = rgb.X[rgb.keys.index("sub/red.bmp")]
    assert np.all(red[0] == 1) and np.all(red[1:] == 0)


def test_transparent_and_16_bit_images(tmp_path):
    save(tmp_path / "a_clear.png", Image.new("RGBA", (4, 4), (0, 0, 0, 0)))    # transparent black: on white
    save(tmp_path / "b_deep.png", Image.fromarray(np.full((4, 4), 65535, np.uint16)))  # 16-bit white
    pool = load_pool(tmp_path, image_size=4)
    assert Image.open(tmp_path / "b_deep.png").mode.startswith("I")
    assert np.all(pool.X == 1.0)


def test_empty_folder_and_corrupt_image(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "readme.txt").write_text("no images here")
    with pytest.raises(ValueError, match="no images in"):
        load_pool(tmp_path / "empty")
    bad = tmp_path / "bad"
    save(bad / "good.png", Image.new("L", (4, 4), 0))
    (bad / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 this is not a JPEG")
    with pytest.raises(ValueError, match=r"cannot read image 'broken.jpg'"):
        load_pool(bad)
    with pytest.raises(FileNotFoundError, match="no such file or folder"):
        load_pool(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="mode must be"):
        load_pool(bad, mode="CMYK")


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symlinks")
def test_links_out_of_the_folder_are_refused(tmp_path, folder):
    outside = save(tmp_path / "secret.png", Image.new("L", (4, 4), 0))
    (folder / "inside_link.png").symlink_to(folder / "white.png")      # inside: read
    (tmp_path / "elsewhere").mkdir()
    save(tmp_path / "elsewhere" / "x.png", Image.new("L", (4, 4), 0))
    (folder / "linked_dir").symlink_to(tmp_path / "elsewhere", target_is_directory=True)   # not entered
    pool = load_pool(folder, image_size=4)
    assert "inside_link.png" in pool.keys and not any(k.startswith("linked_dir") for k in pool.keys)
    (folder / "escape.png").symlink_to(outside)
    with pytest.raises(ValueError, match=r"'escape.png' links to .*secret.png.*outside the folder"):
        load_pool(folder)
    # a file swapped for a link out after loading is not drawn
    (folder / "escape.png").unlink()
    (folder / "white.png").unlink()
    (folder / "white.png").symlink_to(outside)
    with pytest.raises(ValueError, match="no longer a file inside"):
        pool.png(pool.keys.index("white.png"))


def test_the_display_is_the_original_downscaled(folder):
    pool = load_pool(folder)
    big = Image.open(io.BytesIO(pool.png(pool.keys.index("big.PNG"))))
    assert big.format == "PNG" and big.size == (DISPLAY_SIZE, DISPLAY_SIZE // 2)
    assert big.mode == "RGB" and big.getpixel((10, 10)) == (0, 0, 255)     # in colour, not the features
    small = Image.open(io.BytesIO(pool.png(pool.keys.index("grey.jpg"))))
    assert small.size == (30, 20)                                         # never upscaled
    with pytest.raises(ValueError, match="unknown item"):
        pool.png(99)
    with pytest.raises(ValueError, match="rows of a table"):
        Pool(np.zeros((2, 3))).png(0)


def test_npy_and_npz(tmp_path):
    X = np.arange(24, dtype=np.float64).reshape(4, 6)
    np.save(tmp_path / "rows.npy", X)
    pool = load_pool(tmp_path / "rows.npy")
    assert pool.kind == "table" and pool.keys == ["0", "1", "2", "3"] and np.array_equal(pool.X, X)
    np.save(tmp_path / "imgs.npy", np.full((3, 5, 5), 255, np.uint8))
    pool = load_pool(tmp_path / "imgs.npy")
    assert pool.kind == "images" and np.all(pool.X == 1.0)                # uint8 scaled to [0, 1]
    np.savez(tmp_path / "named.npz", X=X, y=np.arange(4), keys=np.array(["a", "b", "c", "d"]))
    assert load_pool(tmp_path / "named.npz").keys == ["a", "b", "c", "d"]
    np.savez(tmp_path / "only.npz", features=X)
    assert np.array_equal(load_pool(tmp_path / "only.npz").X, X)
    np.savez(tmp_path / "two.npz", a=X, b=X)
    with pytest.raises(ValueError, match="name the pool's array 'X'"):
        load_pool(tmp_path / "two.npz")
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="without unpickling"):
        load_pool(tmp_path / "objects.npy")
    np.save(tmp_path / "nan.npy", np.array([[0.0, np.nan]]))
    with pytest.raises(ValueError, match="must be finite"):
        load_pool(tmp_path / "nan.npy")
    (tmp_path / "pool.txt").write_text("1 2 3")
    with pytest.raises(ValueError, match="cannot read a pool from 'pool.txt'"):
        load_pool(tmp_path / "pool.txt")


def test_csv_with_an_id_column(tmp_path):
    path = tmp_path / "flowers.csv"
    path.write_text("name,petal,sepal,count\nrose,0.1,2,3\ntulip,3.5,4,5\n")
    pool = load_pool(path, id_column="name")
    assert pool.kind == "table" and pool.keys == ["rose", "tulip"] and pool.columns == ["petal", "sepal", "count"]
    assert pool.row(0) == [("petal", 0.1), ("sepal", 2.0), ("count", 3.0)]
    assert np.array_equal(pool.X, np.array([[0.1, 2, 3], [3.5, 4, 5]], np.float32))
    assert load_pool(path, id_column="name", columns=["sepal"]).columns == ["sepal"]
    plain = load_pool(tmp_path / "flowers.csv", columns=["petal", "sepal"])
    assert plain.keys == ["0", "1"]
    with pytest.raises(ValueError, match=r"the columns \['name'\] are not numeric"):
        load_pool(path)
    with pytest.raises(ValueError, match="no id column 'id'"):
        load_pool(path, id_column="id")
    (tmp_path / "dup.csv").write_text("name,x\na,1\na,2\n")
    with pytest.raises(ValueError, match=r"the id column 'name' repeats \['a'\]"):
        load_pool(tmp_path / "dup.csv", id_column="name")
    (tmp_path / "gap.csv").write_text("x,y\n1,\n2,3\n")
    with pytest.raises(ValueError, match=r"the columns \['y'\] have missing values"):
        load_pool(tmp_path / "gap.csv")


def test_parquet_round_trip(tmp_path):
    pytest.importorskip("pyarrow")
    frame = pd.DataFrame({"id": ["u1", "u2", "u3"], "age": [31, 45, 27], "score": [0.25, 0.5, 0.75]})
    frame.to_parquet(tmp_path / "users.parquet")
    pool = load_pool(tmp_path / "users.parquet", id_column="id")
    assert pool.keys == ["u1", "u2", "u3"] and pool.columns == ["age", "score"]
    assert np.array_equal(pool.X, frame[["age", "score"]].to_numpy(np.float32))
    assert load_pool(frame, id_column="id").keys == pool.keys                  # a DataFrame in memory


def test_parquet_without_pyarrow_says_what_to_install(tmp_path, monkeypatch):
    import importlib.util

    (tmp_path / "t.parquet").write_bytes(b"PAR1")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pyarrow" else real(name, *a))
    with pytest.raises(ImportError, match=r"pip install pyarrow .*skdbal\[label\]"):
        load_pool(tmp_path / "t.parquet")


def test_arrays_in_memory():
    pool = load_pool(np.zeros((3, 2, 4, 4)), keys=["a", "b", "c"])
    assert pool.kind == "images" and pool.keys == ["a", "b", "c"] and pool.X.shape == (3, 2, 4, 4)
    assert load_pool(pool) is pool
    with pytest.raises(ValueError, match="keys must be distinct"):
        load_pool(np.zeros((2, 3)), keys=["a", "a"])
    with pytest.raises(ValueError, match="2 keys for 3 items"):
        load_pool(np.zeros((3, 3)), keys=["a", "b"])


def new_session(pool, path, **kw):
    learner = ActiveLearner(LogisticRegression(), random_state=0, seeding="step", verbose=False)
    return LabellingSession(learner, pool.X.reshape(len(pool), -1), classes=["cat", "dog"], store=path,
                            keys=pool.keys, batch_size=1, **kw)


def test_the_app_draws_the_original_by_id_only(folder, tmp_path):
    pool = load_pool(folder)
    client = TestClient(make_app(new_session(pool, tmp_path / "s.db"), token="t", pool=pool),
                        base_url="http://127.0.0.1", headers={"X-Token": "t"})
    r = client.get(f"/api/item/{pool.keys.index('big.PNG')}.png")
    assert r.status_code == 200 and r.headers["content-type"] == "image/png"
    shown = Image.open(io.BytesIO(r.content))
    assert shown.format == "PNG" and shown.size == (256, 128) and shown.getpixel((0, 0)) == (0, 0, 255)
    for path in ["/api/item/../../etc/passwd", "/api/item/..%2F..%2Fetc%2Fpasswd.png", "/api/item/5.png",
                 "/api/item/-1.png", "/api/item/white.png", "/api/item/sub%2Fred.bmp.png", "/api/item/1e3.png"]:
        r = client.get(path)
        assert r.status_code == 404 and b"root:" not in r.content and not r.content.startswith(b"\x89PNG"), path
    page = client.get("/").text
    assert "const TOKEN" in page and 'IMAGES = true' in page


def test_the_app_shows_the_rows_of_a_table(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("name,petal,sepal\n<b>rose</b>,0.1,2\ntulip,3,4\n")
    pool = load_pool(path, id_column="name")
    client = TestClient(make_app(new_session(pool, tmp_path / "s.db"), token="t", pool=pool),
                        base_url="http://127.0.0.1", headers={"X-Token": "t"})
    assert client.get("/api/item/0").json() == {"item": 0, "key": "<b>rose</b>", "columns": ["petal", "sepal"],
                                                "values": [0.1, 2.0]}
    assert client.get("/api/item/0.png").status_code == 404
    assert "IMAGES = false" in client.get("/").text
    with pytest.raises(ValueError, match="keys"):
        make_app(new_session(load_pool(np.zeros((3, 2))), tmp_path / "other.db"), pool=pool)


def test_the_page_escapes_what_it_interpolates():
    script = _PAGE[_PAGE.index("function render()"):_PAGE.index("function niceStep(")]
    assert "function esc(" in _PAGE
    for raw in ["${it.key}", "${it.guess}", "${it.done}"]:       # only through esc()
        assert raw not in script
    for escaped in ["esc(it.key)", "esc(it.guess)", "esc(it.done)"]:
        assert escaped in script


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_esc_in_javascript():
    esc = re.search(r"function esc\(s\)\{.*?\n\}", _PAGE, re.S).group(0)
    key = "<script>alert('x')</script> & \"quotes\".png"
    out = subprocess.run(["node", "-e", esc + f"\nprocess.stdout.write(esc({json.dumps(key)}))"],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    assert out == "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;quotes&quot;.png"


def test_the_cli_builds_a_session_for_a_folder(folder, tmp_path):
    parser = add_parser(argparse.ArgumentParser(prog="skdbal").add_subparsers())
    args = parser.parse_args(["--images", str(folder), "--classes", "cat,dog", "--store", str(tmp_path / "p.db"),
                              "--image-size", "12", "--batch-size", "2", "--representation", "pixels"])
    session, app, loopback, store = build(args)
    assert session.keys == load_pool(folder).keys and len(session.X) == 5 and session.X.shape == (5, 12, 12)
    assert session.classes == ["cat", "dog"] and store == str(tmp_path / "p.db") and loopback
    assert session.learner.estimator.module__kernel_size == 3          # small images: a smaller kernel
    with TestClient(app, headers={"X-Token": app.state.token}) as client:
        assert client.get("/api/item/0.png").content[:8] == b"\x89PNG\r\n\x1a\n"
    args = parser.parse_args(["--images", str(folder), "--classes", "cat,dog", "--store", str(tmp_path / "q.db"),
                              "--mode", "RGB", "--batch-size", "2", "--representation", "pixels"])
    assert build(args)[0].X.shape == (5, 3, 28, 28)


def test_the_cli_builds_a_session_for_a_table(tmp_path):
    path = tmp_path / "flowers.csv"
    path.write_text("name,petal,sepal\nrose,0.1,2\ntulip,3,4\nlily,1,1\n")
    parser = add_parser(argparse.ArgumentParser(prog="skdbal").add_subparsers())
    args = parser.parse_args(["--table", str(path), "--id-column", "name", "--classes", "a,b",
                              "--store", str(tmp_path / "t.db"), "--batch-size", "2"])
    session, app, _, _ = build(args)
    assert session.keys == ["rose", "tulip", "lily"] and session.X.shape == (3, 2)
    assert session.learner.estimator.module.__name__ == "MLP"
    with TestClient(app, headers={"X-Token": app.state.token}) as client:
        assert client.get("/api/item/2").json()["values"] == [1.0, 1.0]
    with pytest.raises(ValueError, match="--classes is required"):
        build(parser.parse_args(["--table", str(path), "--id-column", "name"]))
    with pytest.raises(ValueError, match="--table reads .csv or .parquet"):
        build(parser.parse_args(["--table", str(tmp_path / "t.db"), "--classes", "a,b"]))


@pytest.mark.slow
@needs_chromium
@pytest.mark.parametrize("kind", ["images", "table"])
def test_hostile_keys_in_headless_chromium(tmp_path, kind):
    """File names and ids holding markup are shown as text in a real browser; a table's rows are shown."""
    from selenium.webdriver.support.ui import WebDriverWait

    hostile = ["<img src=x onerror=\"window.pwned=1\">", "a&amp;b 'q'"]
    if kind == "images":
        root = tmp_path / "photos"
        for i, name in enumerate(hostile):
            save(root / f"{name}.png", Image.new("L", (8, 8), 100 * i))
        pool = load_pool(root)
    else:
        frame = pd.DataFrame({"id": hostile, "petal<i>": [0.5, 1.5], "sepal": [2, 3]})
        pool = load_pool(frame, id_column="id")
    session = new_session(pool, tmp_path / "s.db", initial=[0, 1]).start()   # both on the first page
    page, stop_page = serve(make_app(session, pool=pool))
    driver = chromium_driver(tmp_path / "chrome")
    try:
        driver.get(f"{page}/")
        wait = WebDriverWait(driver, 30)
        texts = lambda d: d.execute_script("return [...document.querySelectorAll('.item')].map(e => e.innerText)")
        if kind == "images":
            wait.until(lambda d: len(texts(d)) == 2)
        else:
            wait.until(lambda d: len(texts(d)) == 2 and all("sepal" in t for t in texts(d)))
        shown = "\n".join(texts(driver))
        assert all(name in shown for name in hostile)                      # as text
        assert driver.execute_script("return window.pwned") is None
        n_img = driver.execute_script("return document.querySelectorAll('#batch img').length")
        assert n_img == (2 if kind == "images" else 0)
        if kind == "table":
            assert "petal<i>: 0.5" in shown and "sepal: 2" in shown
        else:
            assert driver.execute_script(
                "return [...document.querySelectorAll('#batch img')].every(i => i.complete && i.naturalWidth == 8)")
    finally:
        driver.quit()
        stop_page()
        session.stop()
