"""Issue 52 against a real Label Studio on 127.0.0.1 (slow): two annotators label through Label Studio's API
as its labelling stream does (*Label All Tasks*: ``POST /api/dm/actions?id=next_task`` with an empty body, as
Label Studio 1.23.2's Data Manager sends it in its "all" stream, then the annotation),
at a person's pace, while ``skdbal labelstudio`` runs with its defaults, and every task served to either
is the model's choice: the best scored unlabelled task of the project's model version at that moment (the
cold-start order's before the first model), leaving out the one the other annotator holds."""
import os
import random
import subprocess
import sys
import threading
import time

import httpx
import numpy as np
import pytest
from _helpers import digits_flat, stop_process
from lsserver import TOKEN
from test_real_server import lines_until
from test_sync_real import second_user

pytestmark = pytest.mark.slow

#: Labels each annotator gives, and the pause before each (a person looking at the image), in seconds.
LABELS_EACH, PAUSE = 30, (0.2, 0.7)


def test_every_task_served_to_two_annotators_is_the_models_choice(server, tmp_path):
    from label_studio_sdk import LabelStudio

    client = LabelStudio(base_url=server.url, api_key=TOKEN)
    _, second = second_user(server, client)
    X, y = digits_flat(300)
    np.save(tmp_path / "pool.npy", X.reshape(-1, 8, 8).astype(np.float32))
    env = dict(os.environ, SKDBAL_TEST_LS_TOKEN=TOKEN, OMP_NUM_THREADS="1")
    process = subprocess.Popen(
        [sys.executable, "-u", "-m", "skdbal", "labelstudio", "--npy", str(tmp_path / "pool.npy"),
         "--classes", ",".join(map(str, range(10))), "--url", server.url, "--token-env", "SKDBAL_TEST_LS_TOKEN",
         "--store", str(tmp_path / "two.db"), "--interval", "0.5", "--torch-threads", "1",
         "--new-project", "two annotators"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    served, annotated, errors = [], [], []        # (user, task, versions, t0, t1); (user, task, t0, t1)
    try:
        seen = lines_until(process, "the queue:", timeout=180)
        project = int(next(line for line in seen if line.startswith("made project")).split()[2].rstrip(","))
        seen += lines_until(process, "Label All Tasks", timeout=30)
        tab = int(next(line for line in seen if "the queue:" in line).rsplit("tab=", 1)[1])
        threading.Thread(target=lambda: [seen.append(line) for line in process.stdout], daemon=True).start()
        http = httpx.Client(base_url=server.url, timeout=60)

        def version():
            return http.get(f"/api/projects/{project}/", headers={"Authorization": f"Token {TOKEN}"}).json()[
                "model_version"]

        deadline = time.time() + 180
        while version() != "skdbal-first":
            assert time.time() < deadline and process.poll() is None, "".join(seen)
            time.sleep(0.2)
        lock = threading.Lock()
        again = []              # (user, the status Label Studio answered) of each request a person sent again

        def asked_again(user, url, **kw):
            """The response to ``POST url``; on a 500, sent again after a second (a person pressing again, as
            Label Studio's error page asks), at most three times. Label Studio on SQLite can answer a 500
            while its database is locked, its own retries spent or not reaching the write (one was seen on a
            2-core CI machine); the test checks below that its log says the database was locked."""
            r = http.post(url, **kw)
            for _ in range(3):
                if r.status_code != 500:
                    break
                with lock:
                    again.append((user, url))
                time.sleep(1.0)
                r = http.post(url, **kw)
            return r

        def annotator(user, token, seed):
            rng = random.Random(seed)
            headers = {"Authorization": f"Token {token}"}
            try:
                for _ in range(LABELS_EACH):
                    before, t0 = version(), time.monotonic()
                    # Label All Tasks, as the Data Manager asks (its "all" label stream, nothing selected: no
                    # filters, ordering or selection in the body; the tab's id, which the action does not read)
                    r = asked_again(user, "/api/dm/actions", headers=headers, json={},
                                    params={"id": "next_task", "project": project, "tabID": tab})
                    t1, after = time.monotonic(), version()
                    assert r.status_code == 200, r.text
                    task = r.json()
                    with lock:
                        served.append((user, task["id"], {before, after}, t0, t1))
                    time.sleep(rng.uniform(*PAUSE))                  # looking at the digit
                    truth = str(y[int(task["data"]["skdbal_key"])])
                    a0 = time.monotonic()
                    r = asked_again(user, f"/api/tasks/{task['id']}/annotations/", headers=headers, json={
                        "result": [{"from_name": "label", "to_name": "image", "type": "choices",
                                    "value": {"choices": [truth]}}], "lead_time": 0.5})
                    assert r.status_code == 201, r.text
                    with lock:
                        annotated.append((user, task["id"], a0, time.monotonic()))
            except BaseException as exc:  # noqa: BLE001 - said by the test's thread
                errors.append(exc)

        threads = [threading.Thread(target=annotator, args=(u, t, s))
                   for u, t, s in (("first", TOKEN, 1), ("second", second, 2))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
        assert not errors, errors
        # a request sent again is one Label Studio's own log says met a locked SQLite database; a few at most
        assert not again or "database is locked" in server.log(), (again, server.log()[-3000:])
        assert len(again) <= 6, again
        assert process.poll() is None, "".join(seen)
        final = version()
        # the "skdbal queue" tab holds the unlabelled tasks only (Label Studio's Data Manager, filtered by the view)
        from skdbal.labelstudio.sync import list_tasks

        in_tab = list_tasks(client, project, view=tab, fields="all")
        assert len(in_tab) == 300 - len({task for _, task, _, _ in annotated})
        assert not any(t["total_annotations"] or t["cancelled_annotations"] for t in in_tab)
    finally:
        stop_process(process, grace=60)              # SIGTERM: the command writes its CSV and stops

    # every prediction Label Studio holds: {(task, version): score}
    scores = {}
    for p in client.predictions.list(project=project):
        p = p if isinstance(p, dict) else p.model_dump()
        scores[(p["task"], p["model_version"])] = p["score"]
    done_at = {task: t1 for _, task, _, t1 in annotated}

    def choice_ok(user, task, version, t0, t1):
        """Whether ``task`` was the best scored (the lowest: Uncertainty sampling) of ``version`` among the
        tasks not labelled before the request and not held by the other annotator then."""
        held = {tk for u, tk, _, s0, s1 in served if u != user and s0 <= t1 and done_at.get(tk, np.inf) >= t0}
        candidates = [s for (tk, v), s in scores.items()
                      if v == version and done_at.get(tk, np.inf) >= t0 and tk not in held]
        mine = scores.get((task, version))
        return mine is not None and candidates and mine <= min(candidates) + 1e-9

    wrong = [(user, task, sorted(vs)) for user, task, vs, t0, t1 in served
             if not any(choice_ok(user, task, v, t0, t1) for v in vs)]
    for user, task, vs, t0, t1 in served:
        if (user, task, sorted(vs)) in wrong:
            for v in vs:
                best = sorted((sc, tk) for (tk, ver), sc in scores.items()
                              if ver == v and done_at.get(tk, np.inf) >= t0)[:3]
                print(f"{user} served {task} ({scores.get((task, v))}) in {v} at {t0:.3f}-{t1:.3f}; the best then:",
                      [(tk, round(sc, 4), [(u, round(s0, 3), round(s1, 3)) for u, x, _, s0, s1 in served if x == tk],
                        [(u, round(a0, 3), round(a1, 3)) for u, x, a0, a1 in annotated if x == tk])
                       for sc, tk in best])
    # the best of all then, the other annotator's task not left out: how often a lock moved one to the next best
    unheld = sum(not any(choice_ok(user, task, v, t0, -np.inf) for v in vs) for user, task, vs, t0, t1 in served)
    # Label Studio on SQLite selects and locks a task outside a transaction (conditional_atomic, select_for_update
    # a no-op): two requests at the same moment may both be served it. Only those may share a task.
    twice = {task for _, task, _, _, _ in served if sum(t == task for _, t, _, _, _ in served) > 1}
    raced = {task for task in twice if _overlap([(t0, t1) for _, t, _, t0, t1 in served if t == task])}
    versions = sorted({v for _, _, vs, _, _ in served for v in vs})
    print(f"\n{len(served)} tasks served to two annotators over versions {versions} (the project's last: "
          f"{final}); not the model's choice: {wrong}; the next best as the best was the other's: {unheld}; "
          f"served to both by requests at the same moment (Label Studio on SQLite): {len(raced)}; "
          f"requests sent again after a 500 (a locked SQLite database): {len(again)}")
    assert len(served) == 2 * LABELS_EACH and twice == raced
    assert "skdbal-first" in versions and len(versions) >= 4            # the cold start, then models
    assert wrong == []


def _overlap(windows):
    """Whether the time windows ``(start, end)`` all overlap one another."""
    return max(s for s, _ in windows) <= min(e for _, e in windows)
