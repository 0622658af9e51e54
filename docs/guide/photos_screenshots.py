"""The screenshots of the labelling guide's "Your own photos": ``skdbal label --images`` on a folder of
Fashion-MNIST PNGs, served on 127.0.0.1 and drawn in headless Chromium at 1280x900.

    SKDBAL_DATA=/path/to/data python docs/guide/photos_screenshots.py [OUT_DIR]   # default: this folder

It writes 300 Fashion-MNIST training images (:func:`skdbal.datasets.load_fashion_mnist`, never
downloaded: ``$SKDBAL_DATA/fashion-mnist``) as PNGs into a temporary folder and builds the session as
``skdbal label --images FOLDER --classes top,trouser,...`` does (the encoder learnt from the folder, a
Bayesian head over it). ``labelling_photos_first_batch.png``: the first batch, typical items of the
folder, on the page while the encoder learns. ``labelling_photos_retrained.png``: the page after the
fourth retrain, labelled by key presses as a truthful annotator would. It needs Debian's chromium and
chromium-driver, and the tests' helpers (``tests/_helpers.py``).
"""
import argparse
import os
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests"))

import numpy as np  # noqa: E402

#: Fashion-MNIST's classes, in its label order, as one word each (keys 1-9 then 0).
CLASSES = ["top", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "boot"]


def _wait(condition, timeout=300.0, what="the page"):
    deadline = time.time() + timeout
    while not condition():
        if time.time() > deadline:
            raise TimeoutError(f"{what} did not get there in {timeout:g} s")
        time.sleep(0.1)


def main(out: str) -> None:
    import torch
    from _helpers import chromium_driver, serve
    from PIL import Image
    from selenium.webdriver.common.action_chains import ActionChains

    from skdbal.datasets import load_fashion_mnist
    from skdbal.labelling.app import make_app
    from skdbal.labelling.cli import add_parser, make_session
    from skdbal.models import PoolEncoder

    torch.set_num_threads(1)
    work = tempfile.mkdtemp()
    folder = os.path.join(work, "clothes")
    os.mkdir(folder)
    data = load_fashion_mnist(download=False)
    picks = np.random.RandomState(0).choice(len(data.images), 300, replace=False)
    truth = {}
    for j, i in enumerate(picks):
        name = f"item{j:03d}.png"
        Image.fromarray(np.asarray(data.images[i], dtype=np.uint8)).save(os.path.join(folder, name))
        truth[name] = CLASSES[int(data.target[i])]
    parser = add_parser(argparse.ArgumentParser(prog="skdbal").add_subparsers())
    args = parser.parse_args(["--images", folder, "--classes", ",".join(CLASSES),
                              "--store", os.path.join(work, "clothes.db")])
    # the encoder's learning held until the first shot is taken: the page as it is while the encoder learns
    fit, release = PoolEncoder.fit, threading.Event()

    def held_fit(self, *a, **k):
        release.wait(120)
        return fit(self, *a, **k)

    PoolEncoder.fit = held_fit
    session, pool, _ = make_session(args)
    session.start()
    base, stop = serve(make_app(session, pool=pool))
    driver = chromium_driver(os.path.join(work, "chrome"))
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False})

    def shot(name):
        time.sleep(0.5)   # the images drawn
        driver.save_screenshot(os.path.join(out, name))
        print("wrote", os.path.join(out, name))

    def shown():
        return driver.execute_script("return document.querySelectorAll('.item').length")

    def label_while(condition):
        while condition():
            current = driver.execute_script(
                "const c = document.querySelector('.item.current:not(.done):not(.saving)'); return c ? c.id : null")
            if current is None:
                time.sleep(0.1)
                continue
            item = int(current.split("-")[1])
            key = str((CLASSES.index(truth[session.keys[item]]) + 1) % 10)
            ActionChains(driver).send_keys(key).perform()
            _wait(lambda item=item: item in session.store.current_labels(), what=f"item {item}")

    try:
        driver.get(f"{base}/?annotator=alice&n=10")
        _wait(lambda: shown() == 10)
        shot("labelling_photos_first_batch.png")
        PoolEncoder.fit = fit
        release.set()
        label_while(lambda: len(session.store.current_labels()) < 10)     # the first batch, then the first model
        _wait(lambda: session.status()["model_version"] >= 0, what="the encoder and the first model")
        label_while(lambda: session.status()["model_version"] < 4)
        label_while(lambda: driver.execute_script(
            "return document.querySelectorAll('.item:not(.done):not(.saving)').length") < 5
            and session.status()["model_version"] == 4)
        _wait(lambda: driver.execute_script("return document.querySelectorAll('.item:not(.done)').length") >= 5
              and not session.status()["training"])
        shot("labelling_photos_retrained.png")
    finally:
        PoolEncoder.fit = fit
        release.set()
        driver.quit()
        stop()
        session.stop()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else HERE)
