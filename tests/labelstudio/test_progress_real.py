"""The model's accuracy estimate where a real Label Studio 1.23 shows it (slow): the project's description."""
import csv
import os
import subprocess
import sys

import numpy as np
import pytest
from _helpers import digits_flat
from lsserver import TOKEN, started_or_skip
from test_real_server import annotate, lines_until, queue, wait_until

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = started_or_skip(tmp_path_factory.mktemp("label-studio"))
    yield s
    s.stop()


def test_the_command_says_the_estimate_after_each_retrain_in_the_projects_description(server, tmp_path):
    """``skdbal labelstudio`` as a user runs it: after model v1 the line it prints about the model heads the
    project's description (the project's own text kept below it), and the report beside the labels CSV has a
    row per version with the estimate's columns."""
    import signal

    from label_studio_sdk import LabelStudio

    X, y = digits_flat(200)
    np.save(tmp_path / "pool.npy", X.reshape(-1, 8, 8).astype(np.float32))
    store = tmp_path / "cli.db"
    client = LabelStudio(base_url=server.url, api_key=TOKEN)
    env = dict(os.environ, SKDBAL_TEST_LS_TOKEN=TOKEN, OMP_NUM_THREADS="1")
    process = subprocess.Popen([sys.executable, "-u", "-m", "skdbal", "labelstudio",
                                "--npy", str(tmp_path / "pool.npy"), "--classes", ",".join(map(str, range(10))),
                                "--url", server.url, "--token-env", "SKDBAL_TEST_LS_TOKEN", "--store", str(store),
                                "--interval", "0.5", "--new-project", "estimate digits"],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out = lines_until(process, "the queue:")
        project = int(next(line for line in out if line.startswith("made project")).split()[2].rstrip(","))
        client.projects.update(id=project, description="Sort the digits.")
        for version in ("skdbal-first", "skdbal-v0"):
            wait_until(lambda v=version: client.projects.get(id=project).model_version == v, timeout=180, what=version)
            top, ids = queue(client, project, sampling="uncertainty")
            for key, _ in top:
                annotate(client, ids[key], y[int(key)], from_name="label")
        wait_until(lambda: client.projects.get(id=project).description.startswith("skdbal: model v1:"), timeout=180,
                   what="the estimate in the project's description")
        said = [line for line in lines_until(process, "model v1:", timeout=30) if line.startswith("model v")]
        assert said[0].startswith("model v0: no accuracy estimate yet")
        line = said[-1].strip()
        assert line.startswith("model v1: the models before it were right on ") and \
            "of the last 10 tasks they asked about (their hardest; biased low); stopping advice: " in line
        assert client.projects.get(id=project).description == f"skdbal: {line}\n\nSort the digits."
        report = store.with_name(store.stem + "-labels-model.csv")
        with open(report, newline="") as f:
            rows = list(csv.DictReader(f))
        assert [r["version"] for r in rows] == ["0", "1"] and rows[1]["line"] == line
        assert rows[1]["estimate_kind"] == "prequential-biased" and rows[1]["estimate_n"] == "10"
        assert rows[1]["stop_stabilizing_predictions"] == "False"
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
    finally:
        if process.poll() is None:
            process.kill()
