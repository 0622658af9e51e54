"""The guide's Label Studio screenshots: skdbal connected as the ML backend of a real Label Studio 1.23
on 127.0.0.1, drawn in headless Chromium at 1280x800, logged in as the preset user.

    python docs/guide/labelstudio_screenshots.py [OUT_DIR]      # default: this folder

It starts Label Studio as the slow tests do (``tests/labelstudio/lsserver.py``: ``$SKDBAL_LABEL_STUDIO``
or ``.venv-ls/bin/label-studio``, a fresh SQLite data folder, a preset user and token, on 127.0.0.1,
with ``ML_BLOCK_LOCAL_IP=false SSRF_PROTECTION_ENABLED=false`` so that it reaches a backend on this
machine), then runs the command as a user would::

    skdbal labelstudio --demo digits --url URL --token-env VAR --new-project "skdbal digits" \\
        --backend --connect --backend-port PORT --torch-threads 1

labels two batches truthfully through Label Studio's API (the demo's own digits: its first batch,
then the top 10 of the "skdbal queue" tab, lowest score first; the webhooks bring them to skdbal),
waits for the second model's push, logs in through ``/user/login`` and takes:

- ``labelstudio_model.png``: the project's Settings -> Model page, the skdbal backend connected;
- ``labelstudio_task.png``: the queue's top task opened in the labelling view, its 8 x 8 digit drawn
  sharp at 40 times its size, each choice with its digit as its key, after pressing a digit's key (the
  choice of that digit is selected; the guess was pre-selected), its prediction's score beside the model
  version;
- ``labelstudio_queue.png``: the "skdbal queue" tab, sorted by prediction score.

It needs Debian's chromium and chromium-driver (``tests/_helpers.py``: the browser that opens loopback
pages only).
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT / "tests" / "labelstudio"), str(ROOT / "tests")]

WIDTH, HEIGHT = 1280, 800
TOKEN_VAR = "SKDBAL_SCREENSHOTS_LS_TOKEN"


def _wait(condition, timeout=120.0, what="the page"):
    deadline = time.time() + timeout
    while True:
        try:
            if condition():
                return
        except Exception:  # noqa: BLE001 - a page still loading
            pass
        if time.time() > deadline:
            raise TimeoutError(f"{what} did not get there in {timeout:g} s")
        time.sleep(0.2)


def _text(driver) -> str:
    return driver.execute_script("return document.body ? document.body.innerText : ''") or ""


def label_batches(client, project: int, y_pool, n_batches: int) -> None:
    """Label the queue's first batch, then its top 10, truthfully, ``n_batches`` times in all, each time until
    the next model is pushed. The queue is the "skdbal queue" tab's order: the lowest score first (the
    command's default, Uncertainty sampling)."""
    from skdbal.labelling.cli import DEMO_INITIAL
    from skdbal.labelstudio.sync import list_tasks

    query = json.dumps({"ordering": ["tasks:predictions_score"]})
    for b in range(n_batches):
        tasks = [t for t in list_tasks(client, project, query=query, fields="all") if not t["total_annotations"]]
        for t in tasks[:DEMO_INITIAL if b == 0 else 10]:      # the demo's first batch: 20 that cover the pool
            client.annotations.create(id=t["id"], result=[{
                "from_name": "label", "to_name": "image", "type": "choices",
                "value": {"choices": [str(y_pool[int(t["data"]["skdbal_key"])])]}}])
        _wait(lambda b=b: client.projects.get(id=project).model_version == f"skdbal-v{b}", 300,
              f"model skdbal-v{b}")
        print(f"labelled batch {b + 1}; the project's model version is skdbal-v{b}", flush=True)


#: The size of the largest canvas (the task's image, as Label Studio draws it), the choices checked, and the
#: choices' labels with their keys, as the page has them.
_IMAGE = """
const canvas = [...document.querySelectorAll('canvas')].map(e => e.getBoundingClientRect())
                .sort((a, b) => b.width * b.height - a.width * a.height)[0] || {};
return {drawn: [canvas.width, canvas.height],
        checked: [...document.querySelectorAll('input[type=checkbox]')].filter(e => e.checked)
                 .map(e => e.closest('label').innerText.replace(/\\s+/g, '').split('[')[0]),
        keys: [...document.querySelectorAll('label')].map(e => e.innerText.replace(/\\s+/g, ''))
              .filter(t => /^.+\\[.\\]$/.test(t))};
"""


def main(out: Path) -> None:
    import httpx
    from _helpers import chromium_driver, free_port
    from lsserver import PASSWORD, SSRF_OFF, TOKEN, USER, Server, label_studio_executable
    from selenium.webdriver.common.by import By

    from skdbal.experiments.data import load_digits_images
    from skdbal.labelstudio.cli import connect

    executable = label_studio_executable()
    if executable is None:
        sys.exit("no label-studio: set SKDBAL_LABEL_STUDIO (see tests/labelstudio/lsserver.py)")
    work = Path(tempfile.mkdtemp(prefix="skdbal-ls-shots-"))
    (work / "label-studio").mkdir()
    server = Server(executable, work / "label-studio", env=SSRF_OFF).start()
    port = free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1", **{TOKEN_VAR: TOKEN})
    command = subprocess.Popen(
        [sys.executable, "-u", "-m", "skdbal", "labelstudio", "--demo", "digits", "--url", server.url,
         "--token-env", TOKEN_VAR, "--new-project", "skdbal digits", "--store", str(work / "skdbal-digits.db"),
         "--backend", "--connect", "--backend-port", str(port), "--torch-threads", "1"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=work)
    driver = None
    try:
        seen = []
        while not any("connected the backend" in line for line in seen):
            line = command.stdout.readline()
            if not line and command.poll() is not None:
                raise RuntimeError("the command exited:\n" + "".join(seen))
            seen.append(line)
            print("  | " + line, end="", flush=True)
        project = int(next(line for line in seen if line.startswith("made project")).split()[2].rstrip(","))
        view = int(re.search(r"tab=(\d+)", next(line for line in seen if "the queue:" in line)).group(1))
        client = connect(server.url, TOKEN)
        _wait(lambda: client.projects.get(id=project).model_version == "skdbal-first", 300, "the first batch")
        y_pool = load_digits_images()[2]
        label_batches(client, project, y_pool, 2)
        http = httpx.Client(base_url=server.url, headers={"Authorization": f"Token {TOKEN}"}, timeout=60)
        unlabelled = len(y_pool) - client.projects.get(id=project).num_tasks_with_annotations
        _wait(lambda: http.get(f"/api/projects/{project}/model-versions/").json().get("skdbal-v1", 0) >= unlabelled,
              300, "the push of skdbal-v1")
        head = client.tasks.list(project=project, page=1, page_size=1, fields="task_only",
                                 query=json.dumps({"ordering": ["tasks:predictions_score"],
                                                   "filters": {"conjunction": "and", "items": [
                                                       {"filter": "filter:tasks:total_annotations",
                                                        "operator": "equal", "type": "Number", "value": 0}]}})
                                 ).items[0]

        driver = chromium_driver(str(work / "chrome"))
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                               {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False})
        driver.get(f"{server.url}/user/login/")
        _wait(lambda: driver.find_element(By.NAME, "email"), 60, "the login form")
        driver.find_element(By.NAME, "email").send_keys(USER)
        driver.find_element(By.NAME, "password").send_keys(PASSWORD)
        driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        _wait(lambda: "/user/login" not in driver.current_url, 60, "the login")

        def shot(name):
            time.sleep(2.0)        # images and fonts drawn
            driver.save_screenshot(str(out / name))
            print("wrote", out / name, flush=True)

        # (a) Settings -> Model: the skdbal backend, connected
        driver.get(f"{server.url}/projects/{project}/settings/ml")
        _wait(lambda: "skdbal" in _text(driver) and "Connected" in _text(driver), 90, "the Model settings")
        shot("labelstudio_model.png")

        # (b) the queue's top task in the labelling view: the guess pre-selected, the score by the version
        driver.get(f"{server.url}/projects/{project}/data?tab={view}&task={head.id}")
        _wait(lambda: "skdbal-v1" in _text(driver) and "Submit" in _text(driver)
              and driver.execute_script("return [...document.querySelectorAll('input[type=checkbox]')]"
                                        ".some(e => e.checked)"), 90, "the labelling view with the guess")
        drawn = driver.execute_script(_IMAGE)
        print(f"the task's image: {drawn}", flush=True)
        # the digit's own key selects it (Label Studio's hotkey, as the page's): pressed once more after
        # clearing the model's guess if the guess is the digit already (a press toggles the choice)
        truth = str(y_pool[int(head.data["skdbal_key"])])
        from selenium.webdriver.common.action_chains import ActionChains

        driver.find_element(By.TAG_NAME, "body").click()
        if drawn["checked"] == [truth]:
            ActionChains(driver).send_keys(truth).perform()
            _wait(lambda: driver.execute_script(_IMAGE)["checked"] == [], 30, f"key {truth} clearing the guess")
        ActionChains(driver).send_keys(truth).perform()
        _wait(lambda: driver.execute_script(_IMAGE)["checked"] == [truth], 30, f"key {truth} selecting {truth}")
        print(f"pressed {truth} (the guess was {drawn['checked']}): checked {driver.execute_script(_IMAGE)['checked']}",
              flush=True)
        shot("labelstudio_task.png")

        # (c) the "skdbal queue" tab, sorted by prediction score
        driver.get(f"{server.url}/projects/{project}/data?tab={view}")
        _wait(lambda: "skdbal queue" in _text(driver) and str(head.id) in _text(driver), 90, "the queue")
        shot("labelstudio_queue.png")
    finally:
        if driver is not None:
            driver.quit()
        if command.poll() is None:
            command.terminate()
            try:
                command.wait(60)
            except subprocess.TimeoutExpired:
                command.kill()
        server.stop()


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))     # a kill stops Label Studio and the command too
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
