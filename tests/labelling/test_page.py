"""The labelling page (issue 41): keys that mean what they show, errors that reach the page, a long poll
that answers new work only, and, in headless Chromium, a keyboard that is never lost and the states
the page shows."""
import argparse
import os
import sqlite3
import threading
import time

import numpy as np
import pytest
from _helpers import chromium_driver, needs_chromium, serve
from sklearn.linear_model import LogisticRegression
from starlette.testclient import TestClient

from skdbal import ActiveLearner
from skdbal.acquisition import max_entropy
from skdbal.labelling import LabellingSession
from skdbal.labelling._page import class_keys
from skdbal.labelling.app import make_app

H = {"X-Token": "secret"}


def new_session(X, path, classes=range(10), **kwargs):
    learner = ActiveLearner(kwargs.pop("estimator", LogisticRegression(max_iter=300, random_state=0)), max_entropy,
                            random_state=0, seeding="step", verbose=False)
    n = min(len(X), 300)
    return LabellingSession(learner, X[:n].reshape(n, -1), classes=classes, store=path,
                            batch_size=kwargs.pop("batch_size", 10), **kwargs)


@pytest.fixture
def client(digits64, tmp_path):
    session = new_session(digits64[0], tmp_path / "s.db").start()
    with TestClient(make_app(session, token="secret")) as c:
        c.session = session
        yield c
    session.stop()


# ------------------------------------------------------------------------------------------- keys

def test_digit_classes_take_their_own_digit_and_others_one_to_nine_then_zero():
    """On the digits demo the keys were off by one: the page gave the first class (0) the key 1."""
    assert class_keys(range(10)) == [str(d) for d in range(10)]
    assert class_keys(["9", "4", "0"]) == ["9", "4", "0"]                  # by name, whatever the order
    assert class_keys(["cat", "dog"]) == ["1", "2"]
    assert class_keys(["0", "1", "cat"]) == ["1", "2", "3"]                # not all digits: by position
    assert class_keys(["10", "11"]) == ["1", "2"]                          # "10" is not one digit
    assert class_keys([f"c{i}" for i in range(11)]) == ["1", "2", "3", "4", "5", "6", "7", "8", "9", "0", None]
    assert class_keys(["cat", "dog", "bird"], "c,d,b") == ["c", "d", "b"]
    assert class_keys(["cat", "dog"], ["é", "?"]) == ["é", "?"]


@pytest.mark.parametrize("keys, message", [
    ("c,d,e", "3 keys for 2 classes: give one key per class"),
    ("c,c", "the keys must be distinct: 'c' is given for 'cat' and 'dog'"),
    ("c,u", "'u' is the page's own key to undo: give 'dog' another key"),
    ("cd,e", "the key of 'cat' must be one printable character other than a space; got 'cd'"),
    (" ,e", "the key of 'cat' must be one printable character other than a space; got ' '"),
    ("c,", "the key of 'dog' must be one printable character other than a space; got ''"),
])
def test_keys_that_cannot_work_are_refused_by_name(digits64, tmp_path, keys, message):
    session = new_session(digits64[0], tmp_path / "s.db", classes=["cat", "dog"])
    with pytest.raises(ValueError) as info:
        make_app(session, token="secret", keys=keys)
    assert message in str(info.value)


def test_the_page_gets_the_keys_and_the_command_takes_them(digits64, tmp_path):
    from skdbal.labelling.cli import add_parser, build

    session = new_session(digits64[0], tmp_path / "s.db", classes=["cat", "dog"])
    page = TestClient(make_app(session, token="secret", keys="c,d"), base_url="http://127.0.0.1").get("/").text
    assert 'KEYS = ["c", "d"]' in page
    page = TestClient(make_app(new_session(digits64[0], tmp_path / "t.db"), token="secret"),
                      base_url="http://127.0.0.1").get("/").text
    assert 'KEYS = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"]' in page

    np.save(tmp_path / "x.npy", digits64[0][:20])
    parser = add_parser(argparse.ArgumentParser(prog="skdbal").add_subparsers())
    base = ["--npy", str(tmp_path / "x.npy"), "--classes", "cat,dog,bird"]
    args = parser.parse_args(base + ["--keys", "c,d,b", "--store", str(tmp_path / "a.db")])
    assert args.keys == ["c", "d", "b"]
    session, app, _, _ = build(args)
    assert 'KEYS = ["c", "d", "b"]' in TestClient(app, base_url="http://127.0.0.1").get("/").text
    with pytest.raises(ValueError, match="2 keys for 3 classes"):
        build(parser.parse_args(base + ["--keys", "c,d", "--store", str(tmp_path / "b.db")]))
    with pytest.raises(SystemExit):      # argparse's one-line error
        parser.parse_args(base + ["--keys", "c,dd,b"])


# ---------------------------------------------------------------------------------------- errors

def test_a_storage_failure_is_a_json_500_and_nothing_is_acknowledged(client, monkeypatch, caplog):
    """Before, anything but ValueError, KeyError and TypeError was a bare-text 500 the page could not read.
    The log says each failure in one line, its traceback only at DEBUG."""
    def full(*args, **kwargs):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(client.session.store, "add_event", full)
    for path, body in [("/api/submit", {"item": 3, "label": "3", "annotator": "ann", "request_id": "r1"}),
                       ("/api/skip", {"item": 4, "annotator": "ann"})]:
        r = client.post(path, json=body, headers=H)
        assert r.status_code == 500
        assert r.json() == {"error": "the store could not be written: database or disk is full"}
    monkeypatch.undo()
    assert client.session.store.events() == []

    def malformed():
        raise sqlite3.DatabaseError("database disk image is malformed")

    monkeypatch.setattr(client.session, "status", malformed)
    r = client.get("/api/status", headers=H)
    assert r.status_code == 500
    assert r.json() == {"error": "the store could not be read: database disk image is malformed"}

    def broken(*args, **kwargs):
        raise RuntimeError("out of threads")

    monkeypatch.setattr(client.session, "versions", broken)
    r = client.get("/api/versions", headers=H)
    assert r.status_code == 500 and r.json() == {"error": "the server failed: RuntimeError: out of threads"}
    said = [(r.levelname, r.getMessage(), r.exc_info is not None) for r in caplog.records
            if r.name.startswith("skdbal")]
    assert [s for s in said if s[0] != "DEBUG"] == [
        ("ERROR", "POST /api/submit failed: the store could not be written: database or disk is full", False),
        ("ERROR", "POST /api/skip failed: the store could not be written: database or disk is full", False),
        ("ERROR", "GET /api/status failed: the store could not be read: database disk image is malformed", False),
        ("ERROR", "GET /api/versions failed: the server failed: RuntimeError: out of threads", False)]


def test_deeply_nested_json_is_a_400(client):
    """8,000 levels of [ (8 KB, under the 16 KiB limit): json.loads raised RecursionError, a 500."""
    for raw in (b"[" * 8000, b'{"item": ' + b"[" * 8000):
        r = client.post("/api/submit", content=raw, headers={**H, "Content-Type": "application/json"})
        assert r.status_code == 400 and r.json() == {"error": "the body's JSON is nested too deeply"}
    assert client.session.store.events() == []


# ------------------------------------------------------------------------------------- long poll

def test_a_long_poll_answers_new_items_only_and_as_soon_as_they_exist(digits64, tmp_path):
    """``have`` lists the items the page holds: they are not answered again (before, the annotator's own
    leased items came back at once, so the page could not wait for new work), and the request waits
    until there is something new: the next batch, the moment the retrain has queried it."""
    import httpx

    X, y = digits64
    session = new_session(X, tmp_path / "s.db").start()
    base, stop = serve(make_app(session, token="secret"))
    try:
        with httpx.Client(base_url=base, timeout=30, headers=H) as c:
            def ask(have, wait=5):
                url = f"/api/batch?annotator=ann&n=4&wait={wait}&have={','.join(map(str, have))}"
                return c.get(url).json()["items"]

            held = [b["item"] for b in ask([])]
            assert len(held) == 4
            more = [b["item"] for b in ask(held)]
            assert len(more) == 4 and set(more).isdisjoint(held)     # before: the same four again
            held += more
            rest = [b["item"] for b in ask(held)]
            held += rest
            assert len(rest) == 2 and sorted(held) == sorted(session.board.batch)   # the first batch: 4 + 4 + 2
            t0 = time.monotonic()
            assert ask(held, wait=1) == []                             # nothing new: it waited for some
            assert time.monotonic() - t0 >= 1

            answer = {}

            def long_poll():
                with httpx.Client(base_url=base, timeout=30, headers=H) as other:
                    r = other.get(f"/api/batch?annotator=ann&n=4&wait=10&have={','.join(map(str, held))}")
                    answer.update(items=r.json()["items"], status=r.json()["status"], at=time.monotonic())

            poll = threading.Thread(target=long_poll)
            poll.start()
            time.sleep(0.3)
            for i in held:                                             # the batch labelled while it waits
                r = c.post("/api/submit", json={"item": i, "label": str(y[i]), "annotator": "ann"})
                assert r.status_code == 200
            labelled = time.monotonic()
            poll.join(20)
            new = [b["item"] for b in answer["items"]]
            assert len(new) == 4 and set(new).isdisjoint(held)
            # the next batch, or while the model retrains the tail of the last query (issue 41: nobody waits)
            tail = {b["item"] for b in answer["items"] if b["tail"]}
            assert set(new) - tail <= set(session.board.batch)
            assert tail <= {i for q in session.store.queries() if q["kind"] == "tail" for i, _ in q["scores"]}
            assert answer["at"] - labelled < 8                         # well before its 10 s were up
            assert sorted(session.store.live_leases()) == sorted(new)  # no more than the four are held
    finally:
        stop()
        session.stop()


def test_a_bad_have_is_a_400(client):
    for have in ("1,x", "-1", ",".join(["1"] * 1001)):
        r = client.get(f"/api/batch?annotator=ann&have={have}", headers=H)
        assert r.status_code == 400 and r.json() == {"error": "have must be at most 1000 comma-separated item ids"}
    assert client.session.store.live_leases() == {}


def test_a_second_look_is_served_without_the_models_guess(digits64, tmp_path):
    """A second look showed "guess 6": the first label is hidden so as not to anchor, and so is the guess."""
    X, y = digits64
    session = new_session(X, tmp_path / "s.db", second_looks=0.1, second_look_budget=None).start()
    try:
        with TestClient(make_app(session, token="secret")) as c:
            first = c.get("/api/batch?annotator=ann&wait=5", headers=H).json()["items"]
            for b in first:
                label = {"item": b["item"], "label": str(y[b["item"]]), "annotator": "ann"}
                assert c.post("/api/submit", json=label, headers=H).status_code == 200
            session.wait_for_version(0, timeout=30)
            batch = c.get("/api/batch?annotator=ann&wait=5", headers=H).json()["items"]
            model = session.learner.estimator_
            P = model.predict_proba(X[:300].reshape(300, -1)[[b["item"] for b in batch]])
            k = int(P.min(axis=1).argmin())
            item, wrong = batch[k]["item"], str(model.classes_[P[k].argmin()])
            assert P[k].min() < 0.1 and batch[k]["guess"] is not None
            c.post("/api/submit", json={"item": item, "label": wrong, "annotator": "ann"}, headers=H)
            deadline = time.time() + 30
            while not any(ch["item"] == item and ch["flagged"] for ch in session.store.checks()):
                assert time.time() < deadline, "the wrong label was not flagged"
                time.sleep(0.05)
            look = c.get("/api/batch?annotator=bob&n=1&wait=5", headers=H).json()["items"]
            assert look == [{"item": item, "key": session.keys[item], "score": look[0]["score"],
                             "second_look": True, "tail": False, "guess": None}]
    finally:
        session.stop()


# ----------------------------------------------------------------------------- headless Chromium

def _page_helpers(driver):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.support.ui import WebDriverWait

    def shown():   # the items on the page, read in one go (the page redraws them after every answer)
        return [int(i.split("-")[1]) for i in
                driver.execute_script("return [...document.querySelectorAll('.item')].map(e => e.id)")]

    def press(key):   # to whatever has the focus, as a person's key press (not sent to an element)
        ActionChains(driver).send_keys(key).perform()

    return shown, press, WebDriverWait(driver, 30)


@pytest.mark.slow
@needs_chromium
def test_the_keyboard_is_never_lost(digits64, tmp_path):
    """On the digits demo: 4 labels "4" (it labelled 3); after a click on a class button Space and Enter do
    nothing (Space labelled the next item with that class); after toggling "show the model's guess" and
    after a click on a download link the keys still work (they did nothing after the toggle); and the
    header does not move as the progress text grows."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    X, y = digits64
    session = new_session(X, tmp_path / "s.db").start()
    base, stop = serve(make_app(session, token="secret"))
    driver = chromium_driver(tmp_path / "chrome")
    try:
        shown, press, wait = _page_helpers(driver)
        driver.get(f"{base}/?n=10")
        wait.until(lambda d: len(shown()) == 10)
        items = shown()

        def header():
            return driver.execute_script("const r = document.getElementById('showguess').getBoundingClientRect();"
                                         "return [r.left, r.top, document.querySelector('header').offsetHeight]")

        start = header()
        assert driver.execute_script("return document.querySelector('#class-4 kbd').textContent") == "4"

        def labelled(item, label):
            wait.until(lambda d: item in session.store.current_labels())
            assert session.store.current_labels()[item]["label"] == label

        press("4")
        labelled(items[0], "4")
        driver.find_element(By.ID, "class-7").click()
        labelled(items[1], "7")
        press(" ")
        press(Keys.ENTER)
        time.sleep(1.0)
        assert len(session.store.current_labels()) == 2          # Space and Enter repeated no click
        press("2")
        labelled(items[2], "2")
        driver.find_element(By.ID, "showguess").click()
        assert not driver.find_element(By.ID, "showguess").is_selected()
        press("5")
        labelled(items[3], "5")
        driver.find_element(By.ID, "csv").click()
        time.sleep(0.3)
        press("6")
        labelled(items[4], "6")
        for item in items[5:]:
            press(str(y[item]))
            labelled(item, str(y[item]))
        assert len(session.store.events()) == 10                  # one event per key press that labels
        session.wait_for_version(0, timeout=60)
        wait.until(lambda d: "last retrain" in d.find_element(By.ID, "progress").text)
        assert header() == start                                  # the longer progress moved nothing
    finally:
        driver.quit()
        stop()
        session.stop()


_FIT = threading.Event()   # cleared: a fit waits for it (30 s at most), a retrain held while the page is looked at
_FIT.set()


class _HeldLR(LogisticRegression):
    """A logistic regression whose fit waits until ``_FIT`` is set."""

    def fit(self, X, y, sample_weight=None):
        _FIT.wait(30)
        return super().fit(X, y, sample_weight)


@pytest.mark.slow
@needs_chromium
def test_the_page_shows_each_state(digits64, tmp_path):
    """12x12 images drawn at an integer multiple (10x: 120 px; 112 px before, blurred), pixelated; a full
    disk shown in a banner and the item not marked done (the key did nothing visible); the last item of a
    batch greyed (it stayed as it was while the progress said "0 left"); the training and waiting states
    and the strategy's name as the session's status gives them; the accuracy chart with labelled axes."""
    from selenium.webdriver.common.by import By

    X, y = digits64
    X12 = np.pad(X[:500], ((0, 0), (2, 2), (2, 2)))
    session = new_session(X12, tmp_path / "s.db", batch_size=6, estimator=_HeldLR(max_iter=300, random_state=0),
                          X_test=X12[300:500].reshape(200, -1), y_test=y[300:500]).start()
    real_status, forced = session.status, {}

    def status():   # the keys the session part adds, as the page would get them
        s = real_status()
        s.setdefault("strategy", "max_entropy")
        s.setdefault("training", False)
        s.setdefault("waiting_for", None)
        s.update(forced)
        return s

    session.status = status
    # no tail here: the page is looked at with nothing left to label (the tail is test_session_offers')
    session.board.offer_more = lambda unavailable: []
    base, stop = serve(make_app(session, token="secret"))
    driver = chromium_driver(tmp_path / "chrome")
    shots = os.environ.get("SKDBAL_SCREENSHOTS", str(tmp_path))
    try:
        shown, press, wait = _page_helpers(driver)
        driver.get(f"{base}/?n=6")
        wait.until(lambda d: len(shown()) == 6)
        items = shown()
        wait.until(lambda d: d.execute_script(
            "return [...document.querySelectorAll('.item img')].every(i => i.complete && i.naturalWidth == 12)"
            " && document.querySelectorAll('.item img.fit').length == 6"))
        drawn = driver.execute_script("return [...document.querySelectorAll('.item img')].map(i => "
                                      "[i.width, i.height, getComputedStyle(i).imageRendering])")
        assert drawn == [[120, 120, "pixelated"]] * 6

        # a full disk: the banner says so, the item stays to label, nothing is stored
        add_event = session.store.add_event

        def full(*args, **kwargs):
            raise sqlite3.OperationalError("database or disk is full")

        session.store.add_event = full
        press(str(y[items[0]]))
        wait.until(lambda d: d.find_element(By.ID, "error").is_displayed())
        assert "the store could not be written: database or disk is full" in driver.find_element(By.ID, "error").text
        assert "done" not in driver.find_element(By.ID, f"item-{items[0]}").get_attribute("class")
        assert session.store.events() == []
        driver.save_screenshot(os.path.join(shots, "labelling_error.png"))
        session.store.add_event = add_event
        press(str(y[items[0]]))
        wait.until(lambda d: items[0] in session.store.current_labels())
        wait.until(lambda d: not d.find_element(By.ID, "error").is_displayed())

        # the batch labelled: the last item greyed at once, while the model trains
        _FIT.clear()
        for item in items[1:]:
            press(str(y[item]))
            wait.until(lambda d, item=item: item in session.store.current_labels())
        # looked up afresh each time: the page may draw its list again (a long poll answering) meanwhile
        wait.until(lambda d: "done" in d.execute_script(
            "const e = document.getElementById(arguments[0]); return e ? e.className : ''", f"item-{items[-1]}"))
        forced["training"] = True
        wait.until(lambda d: d.find_element(By.ID, "state").text == "training…")
        assert "the model is training" in driver.find_element(By.ID, "empty").text
        assert "0 left in the batch" in driver.find_element(By.ID, "progress").text
        driver.save_screenshot(os.path.join(shots, "labelling_training.png"))
        forced.update(training=False, waiting_for="labels of at least two classes")
        wait.until(lambda d: "waiting for labels of at least two classes" in d.find_element(By.ID, "empty").text)
        assert driver.find_element(By.ID, "state").text == "waiting"
        forced.clear()
        _FIT.set()

        # the next batch: each item's score named by the strategy, and the curve
        session.wait_for_version(0, timeout=60)
        wait.until(lambda d: len(shown()) == 6 and set(shown()).isdisjoint(items))
        text = driver.execute_script("return document.querySelector('.item').innerText")
        assert "max entropy score " in text and "guess" in text
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#curve-svg rect.test"))   # model 0's test accuracy
        svg = driver.find_element(By.ID, "curve-svg")
        assert (svg.get_attribute("width"), svg.get_attribute("height")) == ("520", "240")
        texts = driver.execute_script("return [...document.querySelectorAll('#curve-svg text')]"
                                      ".map(t => t.textContent)")
        assert {"labels", "accuracy", "0%", "20%", "100%", "0"} <= set(texts)
        assert driver.find_element(By.ID, "test").text.startswith("On the test set given (200 items): ")
        assert driver.find_element(By.ID, "state").text == "ready"
    finally:
        _FIT.set()
        driver.quit()
        stop()
        session.stop()


@pytest.mark.slow
@needs_chromium
def test_the_header_fits_at_1280_px_and_says_who_the_second_looks_wait_for(digits64, tmp_path):
    """At 1280 px the second-look line was cut ("0 changed,…"), and "6 waiting" looks that only another
    annotator could give sat there with one annotator: now they wait "for another annotator", the page
    says when nobody else is labelling, and nothing in the header is cut."""
    X, _ = digits64
    session = new_session(X, tmp_path / "s.db").start()
    real_status = session.status

    def status():
        s = real_status()
        s.update(labelled=181, model_version=12, last_retrain=time.time(),
                 second_looks={"flagged": 18, "pending": 6, "confirmed": 9, "changed": 2, "withdrawn": 1})
        return s

    session.status = status
    base, stop = serve(make_app(session, token="secret"))
    driver = chromium_driver(tmp_path / "chrome")
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False})
    try:
        shown, _, wait = _page_helpers(driver)
        driver.get(f"{base}/?annotator=alice&n=5")
        wait.until(lambda d: len(shown()) == 5 and "flagged" in d.find_element("id", "looks").text)
        looks = driver.find_element("id", "looks").text
        assert looks == ("second looks: 18 flagged · 6 waiting for another annotator (nobody else is labelling "
                         "now) · 9 confirmed · 2 changed · 1 withdrawn")
        cut = driver.execute_script("return [...document.querySelectorAll('header *')].filter(e => "
                                    "e.scrollWidth > e.clientWidth + 1).map(e => e.id)")
        assert cut == []
        assert session.next_batch("bob", n=1)          # bob holds an item: someone else is labelling
        driver.execute_script("refreshStatus()")
        wait.until(lambda d: "nobody" not in d.find_element("id", "looks").text)
        assert driver.find_element("id", "looks").text == ("second looks: 18 flagged · 6 waiting for another "
                                                           "annotator · 9 confirmed · 2 changed · 1 withdrawn")
    finally:
        driver.quit()
        stop()
        session.stop()
