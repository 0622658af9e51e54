"""The labelling page's HTTP interface: in-process (Starlette's TestClient), a real uvicorn server on
127.0.0.1, and the page in headless Chromium."""
import os
import threading
import time

import pytest
from _helpers import chromium_driver, needs_chromium, serve
from sklearn.linear_model import LogisticRegression
from starlette.testclient import TestClient

from skdbal import ActiveLearner
from skdbal.acquisition import max_entropy
from skdbal.labelling import LabellingSession
from skdbal.labelling.app import MAX_BODY, make_app


def new_session(X, path, **kwargs):
    learner = ActiveLearner(LogisticRegression(max_iter=300, random_state=0), max_entropy, random_state=0,
                            seeding="step", verbose=False)
    # LogisticRegression takes rows: the session's pool is the flattened images, drawn as 8x8 PNGs
    return LabellingSession(learner, X[:300].reshape(300, -1), classes=range(10), store=path, batch_size=10,
                            **kwargs)


@pytest.fixture
def client(digits64, tmp_path):
    session = new_session(digits64[0], tmp_path / "s.db").start()
    app = make_app(session, token="secret")
    with TestClient(app) as c:
        c.session = session
        yield c
    session.stop()


H = {"X-Token": "secret"}


def test_label_a_batch_over_http(client, digits64):
    _, y = digits64
    batch = client.get("/api/batch?annotator=ann&wait=5", headers=H).json()["items"]
    assert len(batch) == 10 and all(b["score"] is None and b["guess"] is None for b in batch)
    png = client.get(f"/api/item/{batch[0]['item']}.png", headers=H)
    assert png.status_code == 200 and png.content[:8] == b"\x89PNG\r\n\x1a\n"
    for b in batch:
        r = client.post("/api/submit", json={"item": b["item"], "label": str(y[b["item"]]), "annotator": "ann",
                                             "request_id": f"r{b['item']}"}, headers=H)
        assert r.status_code == 200, r.text
    client.session.wait_for_version(0, timeout=30)
    nxt = client.get("/api/batch?annotator=ann&wait=5", headers=H).json()
    assert nxt["status"]["model_version"] == 0 and len(nxt["items"]) == 10
    assert all(isinstance(b["score"], float) and b["guess"] in [str(c) for c in range(10)] for b in nxt["items"])
    csv_text = client.get("/api/labels.csv", headers=H).text.splitlines()
    assert csv_text[0] == "item,key,label,annotator,time,p_given,first_label,first_annotator,second_look,audit"
    assert len(csv_text) == 11


@pytest.mark.parametrize("path, payload, headers, status, message", [
    ("/api/submit", {"item": 1, "label": "cat"}, H, 400, "unknown class 'cat'"),
    ("/api/submit", {"item": 300, "label": "1"}, H, 404, "unknown item 300"),
    ("/api/submit", {"item": "../../etc/passwd", "label": "1"}, H, 404, "unknown item"),
    ("/api/submit", {"item": 1, "label": "1"}, {}, 403, "missing or wrong token"),
    ("/api/submit", {"item": 1, "label": "1"}, {"X-Token": "guess"}, 403, "missing or wrong token"),
    ("/api/submit", {"item": 1, "label": "1", "pad": "x" * MAX_BODY}, H, 413, "larger than"),
    ("/api/skip", {"item": -1}, H, 404, "unknown item -1"),
    ("/api/undo", {"item": 5}, H, 400, "item 5 has no label to undo"),
])
def test_bad_requests_get_a_4xx_and_change_nothing(client, path, payload, headers, status, message):
    before = client.session.store.events()
    r = client.post(path, json=payload, headers=headers)
    assert r.status_code == status and message in r.json()["error"]
    assert client.session.store.events() == before


def test_no_path_reaches_the_file_system(client):
    for path in ["/api/item/..%2F..%2Fetc%2Fpasswd.png", "/api/item/../../etc/passwd", "/api/item/-1.png",
                 "/api/item/99999.png", "/static/../../etc/passwd"]:
        r = client.get(path, headers=H)
        assert r.status_code == 404 and b"root:" not in r.content


def test_a_replayed_submission_is_idempotent(client, digits64):
    _, y = digits64
    item = client.get("/api/batch?annotator=ann&wait=5", headers=H).json()["items"][0]["item"]
    body = {"item": item, "label": str(y[item]), "request_id": "same"}
    a, b = (client.post("/api/submit", json=body, headers=H).json()["event"] for _ in range(2))
    assert a == b and len(client.session.store.events()) == 1
    r = client.post("/api/submit", json={**body, "label": str((y[item] + 1) % 10)}, headers=H)
    assert r.status_code == 400 and "already used" in r.json()["error"]


def test_off_loopback_every_request_needs_the_token(digits64, tmp_path):
    session = new_session(digits64[0], tmp_path / "s.db")
    with TestClient(make_app(session, token="secret", require_token_everywhere=True)) as c:
        assert c.get("/").status_code == 403 and c.get("/api/status").status_code == 403
        assert c.get("/?token=secret").status_code == 200 and c.get("/api/status", headers=H).status_code == 200
        assert c.get("/?token=secret", headers={"Host": "labelling.example.org"}).status_code == 200


def test_on_loopback_every_api_request_needs_the_token_and_the_page_its_own_names(digits64, tmp_path):
    """Another site can neither read nor lease (the token), nor read the page's token by a name of its
    own rebound to 127.0.0.1 (DNS rebinding: the Host header names that site)."""
    session = new_session(digits64[0], tmp_path / "s.db")
    app = make_app(session, token="secret")
    with TestClient(app, base_url="http://127.0.0.1:8765") as c:
        for path in ["/api/batch?annotator=x&n=1000", "/api/status", "/api/labels.csv", "/api/versions",
                     "/api/model.pt", "/api/item/0.png", "/api/item/0"]:
            r = c.get(path)
            assert r.status_code == 403 and r.json()["error"] == "missing or wrong token", path
        assert session.store.live_leases() == {}                          # nothing was leased
        page = c.get("/")
        assert page.status_code == 200 and '"secret"' in page.text
        assert c.get("/", headers={"Host": "localhost:8765"}).status_code == 200
        rebound = c.get("/", headers={"Host": "attacker.example:8765"})
        assert rebound.status_code == 403 and "secret" not in rebound.text
        assert c.get("/api/item/0.png?token=secret").content[:4] == b"\x89PNG"


@pytest.mark.slow
@needs_chromium
def test_the_page_in_headless_chromium(digits64, tmp_path):
    """A real uvicorn server on 127.0.0.1 and the page in real headless Chromium: label a batch by keys and
    by clicks, skip, undo, and see the next batch after the retrain; label it by keys alone, one label
    wrong, and see the learning curve; then, as another annotator on a server that needs the token on
    every request (as off loopback), see the wrong label offered for a second look, and give it."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    X, y = digits64
    session = new_session(X, tmp_path / "s.db", second_looks=0.1, second_look_budget=None).start()
    page, stop_page = serve(make_app(session))
    driver = chromium_driver(tmp_path / "chrome")
    shots = os.environ.get("SKDBAL_SCREENSHOTS", str(tmp_path))
    try:
        driver.get(f"{page}/?n=10")  # the whole batch at once (the page asks for 5)
        wait = WebDriverWait(driver, 30)
        def shown():  # the items on the page (read in one go: the page redraws them after every answer)
            return [int(i.split("-")[1]) for i in
                    driver.execute_script("return [...document.querySelectorAll('.item')].map(e => e.id)")]

        def click(element_id):
            for _ in range(20):
                try:
                    return driver.find_element(By.ID, element_id).click()
                except StaleElementReferenceException:
                    time.sleep(0.05)
            raise AssertionError(f"{element_id} kept being redrawn")

        wait.until(lambda d: len(shown()) == 10)
        driver.save_screenshot(os.path.join(shots, "labelling_first_batch.png"))
        items = shown()
        body = driver.find_element(By.TAG_NAME, "body")
        # the first by a key, the second skipped, the third labelled wrong then undone, the rest by clicks
        body.send_keys(str(y[items[0]]))   # digit classes: each its own key
        wait.until(lambda d: items[0] in session.store.current_labels())
        body.send_keys("s")
        wait.until(lambda d: items[1] in session.store.skipped())
        body.send_keys(str((y[items[2]] + 1) % 10))
        wait.until(lambda d: items[2] in session.store.current_labels())
        body.send_keys("u")
        wait.until(lambda d: items[2] not in session.store.current_labels())
        for item in items[2:]:
            click(f"item-{item}")
            click(f"class-{y[item]}")
            wait.until(lambda d, item=item: item in session.store.current_labels())
        labels = {i: r["label"] for i, r in session.store.current_labels().items()}
        assert labels == {i: str(y[i]) for i in [items[0]] + items[2:]}
        session.wait_for_version(0, timeout=60)
        # the page loads the next items with model 0's guesses: those of a batch it queried with their
        # scores, those of the covering order offered while it trained (the batch's last label started it)
        # without
        wait.until(lambda d: "model version 0" in d.find_element(By.ID, "progress").text and
                   len(shown()) == 10 and set(shown()).isdisjoint(items))
        def drawn_items(d):
            return d.execute_script("return [...document.querySelectorAll('.item')].map(e => [e.id, e.innerText])")

        # an item's guess is fetched after it is drawn, from the model of that moment: model 0's batch shows
        # its guesses and scores; an item of the covering order, offered while model 0 trained, may have been
        # drawn before there was a model to guess (its guess then stays empty) and has no score
        scored = {i for q in session.store.queries() if q["model_version"] == 0 for i, _ in q["scores"]}

        def item_of(element_id):
            return int(element_id.split("-")[1])

        wait.until(lambda d: all("guess" in t for i, t in drawn_items(d) if item_of(i) in scored))
        drawn = drawn_items(driver)
        assert all(("score" in t) == (item_of(i) in scored) for i, t in drawn)
        driver.save_screenshot(os.path.join(shots, "labelling_next_batch.png"))

        # the second batch by keys alone; the label model 0 finds least likely given to one item
        second = shown()
        model = session.learner.estimator_         # model 0: a LogisticRegression knows the classes it saw
        P = model.predict_proba(X[:300].reshape(300, -1)[second])
        k = int(P[:5].min(axis=1).argmin())   # among the first five: judged by model 0 before any retrain
        wrong = int(model.classes_[P[k].argmin()])
        assert P[k].min() < 0.1
        for j, item in enumerate(second):
            wait.until(lambda d, item=item: driver.execute_script(
                "return document.querySelector('.item.current').id") == f"item-{item}")
            body.send_keys(str(wrong if j == k else y[item]))
            wait.until(lambda d, item=item: item in session.store.current_labels())
        session.wait_for_version(1, timeout=60)
        # judged: the labels of classes model 0 knows (LogisticRegression), the wrong one flagged
        checks = {c["item"]: c for c in session.store.checks()}
        assert checks[second[k]]["flagged"] and checks[second[k]]["model_version"] == 0
        assert all(checks[i]["p_given"] == pytest.approx(P[j, list(model.classes_).index(y[i])])
                   for j, i in enumerate(second) if i in checks and j != k and checks[i]["model_version"] == 0)
        # model 0's guesses on this batch, drawn as the learning curve
        wait.until(lambda d: "model version 1" in d.find_element(By.ID, "progress").text and
                   len(d.find_elements(By.CSS_SELECTOR, "#curve-svg circle")) >= 1)
        looks = driver.find_element(By.ID, "looks").text   # the flagged label is this page's: not for it
        assert looks.startswith("second looks: ") and "waiting for another annotator" in looks

        # another annotator, on a server that needs the token on every request: the page, its images and
        # its batch all work, and the wrong label comes first, marked as a second look
        base, stop = serve(make_app(session, token="secret", require_token_everywhere=True))
        try:
            driver.get(f"{base}/?token=secret&annotator=bob")
            wait.until(lambda d: len(shown()) >= 1)
            assert shown()[0] == second[k]
            assert driver.execute_script("return document.querySelector('.item').className").endswith("look")
            # no stray guess on a second look (it showed "· guess 6"): nothing to anchor on
            assert "guess" not in driver.execute_script("return document.querySelector('.item').innerText")
            wait.until(lambda d: d.execute_script(
                "return [...document.querySelectorAll('.item img')].every(i => i.complete && i.naturalWidth == 8)"))
            driver.save_screenshot(os.path.join(shots, "labelling_second_look.png"))
            driver.find_element(By.TAG_NAME, "body").send_keys(str(y[second[k]]))
            wait.until(lambda d: session.status()["second_looks"]["changed"] == 1)
            assert session.store.current_labels()[second[k]]["annotator"] == "bob"
        finally:
            stop()
    finally:
        driver.quit()
        stop_page()
        session.stop()


def test_twenty_annotators_over_http_share_no_item_and_lose_no_label(digits64, tmp_path):
    """20 annotators on a real server on 127.0.0.1, each bounded to 9 requests and 30 s: every
    acknowledged label is in the store, and no item was labelled by two annotators (leases are exclusive)."""
    import httpx

    X, y = digits64
    learner = ActiveLearner(LogisticRegression(max_iter=300, random_state=0), max_entropy, random_state=0,
                            seeding="step", verbose=False)
    session = LabellingSession(learner, X[:300].reshape(300, -1), classes=range(10), store=tmp_path / "s.db",
                               batch_size=120, retrain_after=10_000).start()   # one big batch, no retrain
    app = make_app(session, token="secret")
    base, stop = serve(app)
    acked, errors = [], []

    def annotator(k):
        deadline = time.time() + 30
        with httpx.Client(base_url=base, timeout=10) as c:
            for _ in range(3):                                     # 3 x (1 batch + 2 labels) = 9 requests
                if time.time() > deadline:
                    return
                items = c.get(f"/api/batch?annotator=a{k}&n=2", headers=H).json()["items"]
                for it in items:
                    rid = f"a{k}-{it['item']}"
                    r = c.post("/api/submit", headers=H, json={"item": it["item"], "label": str(y[it["item"]]),
                                                               "annotator": f"a{k}", "request_id": rid})
                    (acked if r.status_code == 200 else errors).append((rid, r.status_code, r.text))

    threads = [threading.Thread(target=annotator, args=(k,)) for k in range(20)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        stop()
        session.stop()
    assert not errors and len(acked) >= 100
    events = session.store.events()
    stored = {e["request_id"] for e in events}
    assert {rid for rid, *_ in acked} <= stored
    by_item = {}
    for e in events:
        by_item.setdefault(e["item"], set()).add(e["annotator"])
    assert all(len(annotators) == 1 for annotators in by_item.values())   # never two annotators on an item


def test_every_text_cell_of_labels_csv_is_safe_in_a_spreadsheet(digits64, tmp_path):
    """A hostile key (a table id or file name), class name and annotator never reach a spreadsheet as a formula:
    each text cell that starts with = + - @ or a tab or carriage return is written with a leading quote."""
    import csv
    import io

    X, y = digits64
    keys = [f"item{i}" for i in range(300)]
    keys[:3] = ['=HYPERLINK("http://x.invalid","a")', '=HYPERLINK("y")&".png"', "+1+1"]
    classes = ["@SUM(A1)", "-2+3"] + [str(c) for c in range(2, 10)]
    learner = ActiveLearner(LogisticRegression(max_iter=300, random_state=0), max_entropy, random_state=0,
                            seeding="step", verbose=False)
    session = LabellingSession(learner, X[:300].reshape(300, -1), classes=classes, store=tmp_path / "s.db",
                               keys=keys, batch_size=10, initial=[0, 1, 2]).start()
    try:
        with TestClient(make_app(session, token="secret")) as client:
            for item, label in [(0, classes[0]), (1, classes[1]), (2, "2")]:
                r = client.post("/api/submit", headers=H, json={"item": item, "label": label,
                                                                "annotator": "=cmd|' /C calc'!A0"})
                assert r.status_code == 200, r.text
            rows = list(csv.DictReader(io.StringIO(client.get("/api/labels.csv", headers=H).text)))
    finally:
        session.stop()
    by_item = {int(r["item"]): r for r in rows}
    assert by_item[0]["key"] == "'" + keys[0] and by_item[1]["key"] == "'" + keys[1]
    assert by_item[2]["key"] == "'+1+1"
    assert by_item[0]["label"] == "'@SUM(A1)" and by_item[1]["label"] == "'-2+3" and by_item[2]["label"] == "2"
    assert {r["annotator"] for r in rows} == {"'=cmd|' /C calc'!A0"}
    for r in rows:  # no text cell of the file starts a formula
        assert all(not v or v[0] not in "=+-@\t\r" for v in r.values()), r


def test_a_retried_undo_takes_back_one_label_only(client):
    """Two labels of one item by one annotator; the same undo (one request_id) sent twice takes back the
    second only: before, the retry undid the first label too."""
    for label, rid in (("3", "a"), ("4", "b")):
        assert client.post("/api/submit", headers=H, json={"item": 5, "label": label, "annotator": "ann",
                                                           "request_id": rid}).status_code == 200
    undo = {"item": 5, "annotator": "ann", "request_id": "undo-1"}
    first = client.post("/api/undo", headers=H, json=undo)
    again = client.post("/api/undo", headers=H, json=undo)
    assert first.status_code == again.status_code == 200, (first.text, again.text)
    assert first.json()["event"] == again.json()["event"]          # the replay answers the first event's id
    labels = {r["item"]: r["label"] for r in client.session.labels()}
    assert str(labels[5]) == "3"                                    # the first label stands
    bad = client.post("/api/undo", headers=H, json={"item": 5, "annotator": "ann", "request_id": 7})
    assert bad.status_code == 400 and "request_id" in bad.json()["error"]


def test_the_status_names_the_annotators_who_hold_items_now(client):
    """The page tells its annotator when nobody else is there to give the second looks waiting."""
    assert client.get("/api/status", headers=H).json()["annotators"] == []
    client.get("/api/batch?annotator=bob&n=2&wait=5", headers=H)
    client.get("/api/batch?annotator=alice&n=1&wait=5", headers=H)
    assert client.get("/api/status", headers=H).json()["annotators"] == ["alice", "bob"]
