"""The labelling guide's documented surfaces (issue 52): its table of the page's HTTP API lists exactly the
server's routes, the fields it names are in real answers, and its "Use the model you trained" examples run
on a model downloaded from a session."""
import argparse
import contextlib
import io
import os
import re
from pathlib import Path

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from starlette.testclient import TestClient

from skdbal import ActiveLearner
from skdbal.labelling import LabellingSession
from skdbal.labelling.app import make_app
from skdbal.labelling.cli import add_parser, build

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "labelling.md"


def section(title: str) -> str:
    """The guide's section under ``## title``, up to the next ``## `` heading."""
    text = GUIDE.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else None]


def route_table() -> dict:
    """``{(method, path): {"asks": cell, "answers": cell, "errors": cell}}`` from the API section's table."""
    rows = {}
    for line in section("The page's HTTP API").splitlines():
        m = re.match(r"\| `(GET|POST) ([^`]+)` \|(.*)\|(.*)\|(.*)\|$", line)
        if m:
            assert (m[1], m[2]) not in rows, f"{m[1]} {m[2]} is listed twice"
            rows[(m[1], m[2])] = {"asks": m[3], "answers": m[4], "errors": m[5]}
    return rows


def spans(cell: str) -> set:
    """The code spans of a table cell: the fields it names."""
    return set(re.findall(r"`([^`]+)`", cell))


def app_routes(app) -> set:
    """The application's routes as ``(method, path)``, paths with ``{name}`` for ``{name:int}``."""
    return {(method, re.sub(r"\{(\w+):\w+\}", r"{\1}", route.path))
            for route in app.routes for method in route.methods - {"HEAD"}}


def label_command(*argv):
    parser = add_parser(argparse.ArgumentParser(prog="skdbal").add_subparsers())
    return build(parser.parse_args(list(argv)))


@pytest.fixture
def photos(tmp_path):
    """A folder of 12 images 20 x 20: cats dark, dogs bright, in two subfolders."""
    from PIL import Image

    rng = np.random.RandomState(0)
    folder = tmp_path / "photos"
    for kind, level in (("cats", 40), ("dogs", 210)):
        (folder / kind).mkdir(parents=True)
        for i in range(6):
            pixels = np.clip(level + rng.randint(-30, 30, (20, 20)), 0, 255).astype(np.uint8)
            Image.fromarray(pixels, "L").save(folder / kind / f"{i}.png")
    return folder


def test_the_route_table_lists_exactly_the_servers_routes(digits64, tmp_path):
    session = LabellingSession(ActiveLearner(LogisticRegression(), random_state=0, seeding="step"),
                               digits64[0][:40].reshape(40, -1), classes=range(10), store=tmp_path / "s.db")
    documented = set(route_table())
    served = app_routes(make_app(session, token="t0k"))
    assert documented == served, f"in the guide only: {documented - served}; served only: {served - documented}"
    assert len(served) == 12     # a new route: document it in the table


def test_the_documented_fields_are_in_real_answers(photos, tmp_path):
    table = route_table()
    session, app, _, _ = label_command("--images", str(photos), "--classes", "cat,dog", "--batch-size", "4",
                                       "--store", str(tmp_path / "s.db"), "--representation", "pixels")
    H = {"X-Token": app.state.token}
    with TestClient(app) as client, session:
        answer = client.get("/api/batch?annotator=ann&n=2&wait=10", headers=H).json()
        item_fields = {"item", "key", "score", "guess", "second_look", "tail"}
        assert item_fields <= spans(table[("GET", "/api/batch")]["answers"])
        assert {"items", "status"} <= set(answer) and all(set(b) == item_fields for b in answer["items"])
        assert {"annotator", "n", "wait", "have"} <= spans(table[("GET", "/api/batch")]["asks"])

        status = client.get("/api/status", headers=H).json()
        documented = spans(table[("GET", "/api/status")]["answers"])
        assert set(status) <= documented and set(status["second_looks"]) <= documented
        assert status["annotators"] == ["ann"]

        row = client.get(f"/api/item/{answer['items'][0]['item']}", headers=H).json()
        assert set(row) <= spans(table[("GET", "/api/item/{item}")]["answers"])

        body = {"item": answer["items"][0]["item"], "label": "cat", "annotator": "ann", "request_id": "r1"}
        assert set(body) <= spans(table[("POST", "/api/submit")]["asks"])
        r = client.post("/api/submit", json=body, headers=H)
        assert r.status_code == 200 and set(r.json()) == {"event"} <= spans(table[("POST", "/api/submit")]["answers"])

        # the errors, with the documented status codes
        errors = {key: spans(row["errors"]) for key, row in table.items()}
        r = client.post("/api/submit", json={**body, "label": "cow", "request_id": "r2"}, headers=H)
        assert r.status_code == 400 and "400" in errors[("POST", "/api/submit")] and "cow" in r.json()["error"]
        r = client.post("/api/submit", json={**body, "item": 10_000, "request_id": "r3"}, headers=H)
        assert r.status_code == 404 and "404" in errors[("POST", "/api/submit")]
        r = client.post("/api/undo", json={"item": answer["items"][1]["item"], "annotator": "ann"}, headers=H)
        assert r.status_code == 400 and "400" in errors[("POST", "/api/undo")]
        r = client.get("/api/model.pt", headers=H)
        assert r.status_code == 404 and "404" in errors[("GET", "/api/model.pt")] and "no model" in r.json()["error"]
        r = client.get("/api/batch?n=0", headers=H)
        assert r.status_code == 400 and "400" in errors[("GET", "/api/batch")]
        assert client.get("/api/status").status_code == 403               # no token
        assert client.get("/api/status", headers={"X-Token": "wrong"}).status_code == 403
        assert client.get(f"/api/status?token={app.state.token}").status_code == 200   # ?token= works too

        versions = client.get("/api/versions", headers=H).json()
        assert versions == {"versions": []} and "versions" in spans(table[("GET", "/api/versions")]["answers"])
        csv_header = client.get("/api/labels.csv", headers=H).text.splitlines()[0].split(",")
        assert len(csv_header) == 10 and set(csv_header) <= spans(table[("GET", "/api/labels.csv")]["answers"])


def python_blocks(text: str) -> list:
    return re.findall(r"```python\n(.*?)```", text, re.S)


def run_block(code: str, folder: Path):
    """Run a guide's example in ``folder`` (its files named as the guide names them): what it printed, and
    its names."""
    out = io.StringIO()
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        namespace = {}
        with contextlib.redirect_stdout(out):
            exec(compile(code, str(GUIDE), "exec"), namespace)
    finally:
        os.chdir(cwd)
    return out.getvalue(), namespace


def label_first_batch(client, session, truth, headers):
    """Label the first batch through the API, truthfully; the model's version 0 then trains."""
    items = client.get("/api/batch?annotator=ann&wait=10", headers=headers).json()["items"]
    assert items and all(b["score"] is None for b in items)     # the first batch, all of it
    for b in items:
        r = client.post("/api/submit", json={"item": b["item"], "label": truth(b["key"]), "annotator": "ann"},
                        headers=headers)
        assert r.status_code == 200, r.text
    session.wait_for_version(0, timeout=120)


def test_the_guides_model_example_predicts_new_images_with_the_downloaded_model(photos, tmp_path):
    """The first example of "Use the model you trained", on `skdbal label --images photos/ --classes cat,dog`."""
    session, app, _, _ = label_command("--images", str(photos), "--classes", "cat,dog", "--batch-size", "4",
                                       "--store", str(tmp_path / "s.db"), "--representation", "pixels")
    H = {"X-Token": app.state.token}
    with TestClient(app) as client, session:
        label_first_batch(client, session, lambda key: "cat" if key.startswith("cats/") else "dog", H)
        r = client.get("/api/model.pt", headers=H)
        assert r.status_code == 200 and r.headers["content-disposition"].endswith('filename="model-v0.pt"')
        (tmp_path / "model-v0.pt").write_bytes(r.content)
        trained = session.board.published[1]
    new = tmp_path / "new_photos"
    new.mkdir()
    for name in ("a.png", "b.png"):   # two of the pool's images, under new names
        (new / name).write_bytes((photos / ("cats" if name == "a.png" else "dogs") / "0.png").read_bytes())
    first = python_blocks(section("Use the model you trained"))[0]
    printed, ns = run_block(first, tmp_path)
    lines = [line.split() for line in printed.splitlines()]
    assert [line[0] for line in lines] == ["a.png", "b.png"]
    assert all(line[1] in ("cat", "dog") and 0.5 <= float(line[2]) <= 1 for line in lines)
    # the loaded net is the session's model: the same weights, the same predictions
    net, X = ns["net"], ns["new"].X
    mine, theirs = net.module_.state_dict(), trained.module_.state_dict()
    assert list(mine) == list(theirs) and all(np.array_equal(mine[k].numpy(), theirs[k].numpy())
                                              for k in mine if k != "_extra_state")
    np.testing.assert_array_equal(net.predict(X), trained.predict(X))
    assert [line[1] for line in lines] == list(trained.predict(X))


def test_the_guides_demo_example_tests_the_downloaded_demo_model(tmp_path):
    """The second example: the demo's model, downloaded at version 0, tested on the demo's test digits."""
    from skdbal.experiments.data import load_digits_images

    _, X_test, y_pool, y_test = load_digits_images()
    session, app, _, _ = label_command("--demo", "digits", "--store", str(tmp_path / "demo.db"))
    H = {"X-Token": app.state.token}
    with TestClient(app) as client, session:
        label_first_batch(client, session, lambda key: str(y_pool[int(key)]), H)
        (tmp_path / "model-v0.pt").write_bytes(client.get("/api/model.pt", headers=H).content)
        accuracy = session.versions()[0]["metrics"]["accuracy"]
    second = python_blocks(section("Use the model you trained"))[1]
    printed, _ = run_block(second, tmp_path)
    assert printed.startswith("test accuracy ")
    assert float(printed.split()[-1]) == pytest.approx(accuracy)   # as the session measured version 0
