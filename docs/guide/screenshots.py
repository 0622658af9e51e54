"""The labelling guide's screenshots: ``skdbal label --demo digits``'s session, served on 127.0.0.1 and
drawn in headless Chromium at 1280x900, in each state the page can be in.

    python docs/guide/screenshots.py [OUT_DIR]      # default: this folder

It needs Debian's chromium and chromium-driver, and the tests' helpers (``tests/_helpers.py``: the
loopback server, the browser that opens loopback pages only). The labels are given as a truthful
annotator would give them (the demo's own digits), through the session, and by key presses on the page.
The demo's first retrain is held for the "training…" shot, while the
tail (the items offered while the model trains) is on the page. The header alone
(``labelling_header.png``) is shot while one annotator's flagged labels wait for another.
"""
import argparse
import base64
import os
import sqlite3
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests"))

import numpy as np  # noqa: E402


def _wait(condition, timeout=120.0, what="the page"):
    deadline = time.time() + timeout
    while not condition():
        if time.time() > deadline:
            raise TimeoutError(f"{what} did not get there in {timeout:g} s")
        time.sleep(0.1)


def _viewport(driver):
    """A 1280x900 page, whatever the window's frame takes."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False})


def main(out: str) -> None:
    import torch
    from _helpers import chromium_driver, serve
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression

    from skdbal import ActiveLearner
    from skdbal.acquisition import max_entropy
    from skdbal.experiments.data import load_digits_images
    from skdbal.labelling import LabellingSession
    from skdbal.labelling.app import make_app
    from skdbal.labelling.cli import add_parser, make_session

    torch.set_num_threads(1)
    work = tempfile.mkdtemp()
    X, y = load_digits(return_X_y=True)
    y_pool = load_digits_images()[2]   # the demo's pool
    parser = add_parser(argparse.ArgumentParser(prog="skdbal").add_subparsers())
    args = parser.parse_args(["--demo", "digits", "--store", os.path.join(work, "demo.db"),
                              "--second-looks", "0.1", "--second-look-budget", "1"])
    session, pool, _ = make_session(args)
    session.start()
    base, stop = serve(make_app(session, pool=pool))
    driver = chromium_driver(os.path.join(work, "chrome"))
    _viewport(driver)

    def shot(name):
        time.sleep(0.5)   # the images drawn
        driver.save_screenshot(os.path.join(out, name))
        print("wrote", os.path.join(out, name))

    def press(key):
        ActionChains(driver).send_keys(key).perform()

    def header_shot(name):   # the page's header alone, 1280 pixels wide
        time.sleep(0.5)
        height = driver.execute_script("return document.querySelector('header').getBoundingClientRect().bottom")
        png = driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "clip": {
            "x": 0, "y": 0, "width": 1280, "height": height + 1, "scale": 1}})
        with open(os.path.join(out, name), "wb") as f:
            f.write(base64.b64decode(png["data"]))
        print("wrote", os.path.join(out, name))

    def shown():
        return [int(i.split("-")[1]) for i in
                driver.execute_script("return [...document.querySelectorAll('.item')].map(e => e.id)")]

    try:
        # 1. the first batch: no model yet, no scores, no guesses
        driver.get(f"{base}/?annotator=alice&n=10")
        _wait(lambda: len(shown()) == 10)
        shot("labelling_first_batch.png")

        # 2. a full disk: the banner, and the item still to label
        items = shown()
        add_event = session.store.add_event

        def full(*a, **k):
            raise sqlite3.OperationalError("database or disk is full")

        session.store.add_event = full
        press(str(y_pool[items[0]]))
        _wait(lambda: driver.execute_script("return !document.getElementById('error').hidden"))
        shot("labelling_error.png")
        session.store.add_event = add_event

        # 3. the first batch (20) labelled by keys, its first model's fit held: the page goes on with the
        #    items that cover the pool, and says the model is training
        net_class = type(session.learner.estimator)
        fit, release = net_class.fit, threading.Event()

        def held_fit(self, *a, **k):
            release.wait(120)
            return fit(self, *a, **k)

        net_class.fit = held_fit
        try:
            while not session.status()["training"]:
                _wait(lambda: driver.execute_script(
                    "return document.querySelectorAll('.item.current:not(.done):not(.saving)').length") == 1,
                      what="an item to label")
                item = int(driver.execute_script("return document.querySelector('.item.current').id")
                           .split("-")[1])
                press(str(y_pool[item]))
                _wait(lambda item=item: item in session.store.current_labels(), what=f"item {item}")
            _wait(lambda: driver.execute_script("return document.getElementById('state').textContent") == "training…"
                  and "Meanwhile" in driver.execute_script("return document.getElementById('notice').textContent")
                  and driver.execute_script("return document.querySelectorAll('.item:not(.done)').length") > 0)
            shot("labelling_training.png")
        finally:
            net_class.fit = fit
            release.set()

        # 4. labelled on, by keys, to model version 2; the page with scores, guesses and the curve
        def label_while(condition):
            while condition():
                current = driver.execute_script(
                    "const c = document.querySelector('.item.current:not(.done):not(.saving)'); "
                    "return c ? c.id : null")
                if current is None:
                    time.sleep(0.1)
                    continue
                item = int(current.split("-")[1])
                press(str(y_pool[item]))
                _wait(lambda item=item: item in session.store.current_labels(), what=f"item {item}")

        label_while(lambda: session.status()["model_version"] < 2)
        # and on, while the page shows fewer than five items to label (the rest of a page done): its
        # next page comes once these are done, before model 3 (fewer than a retrain's worth of labels)
        label_while(lambda: driver.execute_script(
            "return document.querySelectorAll('.item:not(.done):not(.saving)').length") < 5
            and session.status()["model_version"] == 2)
        _wait(lambda: driver.execute_script("return document.querySelectorAll('#curve-svg circle').length") >= 3
              and driver.execute_script("return document.querySelectorAll('.item:not(.done)').length") >= 5)
        shot("labelling_page.png")

        # 5. a slip of alice's that the model finds unlikely, offered to carol as a second look
        items = [int(i.split("-")[1]) for i in driver.execute_script(
            "return [...document.querySelectorAll('.item:not(.done)')].map(e => e.id)")]
        model = session.learner.estimator_
        P = model.predict_proba(session.X[items])
        k = int(P.min(axis=1).argmin())
        item = items[k]
        driver.find_element(By.ID, f"item-{item}").click()
        press(str(int(P[k].argmin())))
        _wait(lambda: any(c["item"] == item and c["flagged"] for c in session.store.checks()), what="the flag")
        # alice alone: her flagged labels wait for another annotator, and the header says nobody else is here
        driver.execute_script("refreshStatus()")
        _wait(lambda: "nobody else" in driver.execute_script("return document.getElementById('looks').textContent"),
              what="the second looks in the header")
        header_shot("labelling_header.png")
        driver.get(f"{base}/?annotator=carol&n=6")
        _wait(lambda: driver.execute_script("return document.querySelectorAll('.item.look').length") > 0,
              what="the second look")
        shot("labelling_second_looks.png")
    finally:
        driver.quit()
        stop()
        session.stop()

    # 6. a session whose first batch holds one class: it waits for labels of a second one
    Xz = (X[y <= 1] / 16.0)[:60].reshape(-1, 8, 8)
    yz = y[y <= 1][:60]
    one = LabellingSession(ActiveLearner(LogisticRegression(), max_entropy, random_state=0, seeding="step",
                                         verbose=False), Xz.reshape(60, -1), classes=["zero", "one"],
                           store=os.path.join(work, "one.db"), batch_size=10,
                           initial=np.flatnonzero(yz == 0)[:10])
    one.start()
    base, stop = serve(make_app(one, keys="0,1"))
    driver = chromium_driver(os.path.join(work, "chrome2"))
    _viewport(driver)
    try:
        driver.get(f"{base}/?annotator=alice&n=10")
        _wait(lambda: len(shown()) == 10)
        for item in shown():
            press("0")
            _wait(lambda item=item: item in one.store.current_labels(), what=f"item {item}")
        _wait(lambda: "two classes" in driver.execute_script("return document.getElementById('notice').textContent")
              and driver.execute_script("return document.querySelectorAll('.item:not(.done)').length") > 0)
        shot("labelling_waiting.png")
    finally:
        driver.quit()
        stop()
        one.stop()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else HERE)
