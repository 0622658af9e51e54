"""The labelling guide's screenshots: ``skdbal label --demo digits``'s session, served on 127.0.0.1 and
drawn in headless Chromium at 1280x900, in each state the page can be in.

    python docs/guide/screenshots.py [OUT_DIR]      # default: this folder

It needs Debian's chromium and chromium-driver, and the tests' helpers (``tests/_helpers.py``: the
loopback server, the browser that opens loopback pages only). The labels are given as a truthful
annotator would give them (the demo's own digits), through the session, and by key presses on the page.
A retrain of the demo's model takes about a second here: its fit is held 4 s for the "training…"
shot. Where the session's status does not give ``training``, ``waiting_for`` or ``strategy`` (before
the session part of issue 41), they are filled in: ``training`` while the fit is held, ``waiting_for`` for
the session whose first batch holds one class, ``strategy`` from the learner's strategy.
"""
import argparse
import os
import sqlite3
import sys
import tempfile
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


def _status_with(session, forced):
    """``session.status`` with the keys the page reads filled in (where the session gives none) and
    ``forced`` on top."""
    from skdbal.acquisition import STRATEGIES

    real = session.status
    chosen = getattr(session.learner, "query_strategy", None)
    strategy = next((name for name, s in STRATEGIES.items() if type(s) is type(chosen)), None)

    def status():
        s = real()
        s.setdefault("strategy", strategy)
        s.setdefault("training", False)
        s.setdefault("waiting_for", None)
        s.update(forced)
        return s

    session.status = status


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
    from sklearn.model_selection import train_test_split

    from skdbal import ActiveLearner
    from skdbal.acquisition import max_entropy
    from skdbal.labelling import LabellingSession
    from skdbal.labelling.app import make_app
    from skdbal.labelling.cli import add_parser, make_session

    torch.set_num_threads(1)
    work = tempfile.mkdtemp()
    X, y = load_digits(return_X_y=True)
    _, _, y_pool, _ = train_test_split(X, y, test_size=500, random_state=0, stratify=y)   # as the demo splits
    parser = add_parser(argparse.ArgumentParser(prog="skdbal").add_subparsers())
    args = parser.parse_args(["--demo", "digits", "--store", os.path.join(work, "demo.db"),
                              "--second-looks", "0.1", "--second-look-budget", "1"])
    session, pool, _ = make_session(args)
    forced = {}
    _status_with(session, forced)
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

        # 3. the batch labelled by keys; the last item greyed while the model trains (its fit held for 4 s,
        #    long enough to be drawn: it takes about a second here)
        net_class = type(session.learner.estimator)
        fit = net_class.fit

        def held_fit(self, *a, **k):
            time.sleep(4.0)
            return fit(self, *a, **k)

        net_class.fit = held_fit
        forced["training"] = True
        try:
            for item in items:
                press(str(y_pool[item]))
                _wait(lambda item=item: item in session.store.current_labels(), what=f"item {item}")
            _wait(lambda: driver.execute_script("return document.getElementById('state').textContent") == "training…"
                  and driver.execute_script("return document.querySelectorAll('.item.done').length") == 10)
            shot("labelling_training.png")
        finally:
            net_class.fit = fit
            forced.clear()

        # 4. two more batches by keys; the page with scores, guesses and the curve
        for version in range(2):
            session.wait_for_version(version, timeout=300)
            _wait(lambda: driver.execute_script("return document.querySelectorAll('.item:not(.done)').length") == 10)
            for item in shown():
                press(str(y_pool[item]))
                _wait(lambda item=item: item in session.store.current_labels(), what=f"item {item}")
        session.wait_for_version(2, timeout=300)
        _wait(lambda: driver.execute_script("return document.querySelectorAll('#curve-svg circle').length") >= 3
              and driver.execute_script("return document.querySelectorAll('.item:not(.done)').length") == 10)
        shot("labelling_page.png")

        # 5. a slip of alice's that the model finds unlikely, offered to carol as a second look
        items = shown()
        model = session.learner.estimator_
        P = model.predict_proba(session.X[items])
        k = int(P.min(axis=1).argmin())
        item = items[k]
        driver.find_element(By.ID, f"item-{item}").click()
        press(str(int(P[k].argmin())))
        _wait(lambda: any(c["item"] == item and c["flagged"] for c in session.store.checks()), what="the flag")
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
    forced = {}
    _status_with(one, forced)
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
        forced["waiting_for"] = "labels of at least two classes"
        _wait(lambda: "two classes" in driver.execute_script("return document.getElementById('empty').textContent"))
        shot("labelling_waiting.png")
    finally:
        driver.quit()
        stop()
        one.stop()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else HERE)
