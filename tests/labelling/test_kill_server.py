"""``kill -9`` of the labelling server while labels are being submitted over HTTP.

20 trials on one store file. In each, a real server (``serve_for_kill.py``: a
:class:`LabellingSession` served by uvicorn on 127.0.0.1, in its own process)
is started on the store, four client threads fetch batches and submit the
true labels, each with its own request id, as fast as they can, and the
server is killed with SIGKILL at a random moment, 0.05 to 1 s after the
trial's first acknowledged label (every other kill waits, after that, for
a submission in flight). The server waits 10 ms between committing a label
and answering, so that some kills land in between. After each kill, in the
store:

- every acknowledged submission is there, with the event id the server
  answered, and its item, label and annotator;
- everything there is a submission a client sent (acknowledged, or left
  unanswered by the kill), no request id is there twice, and no item is
  labelled twice, but as a second look (the session's default: a label its
  model doubts is offered to another annotator), which the client was
  offered as one.

At each restart the session resumes from the same file (the server takes the
store's lock, which the kill released):

- ``/api/status`` shows the store's labels, and its last model version (or
  the next one, trained at once from a batch the kill left complete);
- the first model the restarted server trains is the store's last model
  version, on exactly the labels that version saw;
- an acknowledged request sent again gets the same event id and adds no event;
- the submissions the kill left unanswered, sent again with their request
  ids (as a client retries), are each stored exactly once.

After a last restart, the store holds exactly the acknowledged labels, and
the model versions are 0, 1, 2, ... with no gap.

The sessions' leases last 600 s (the default), or, in the second case, 0.05 s:
leases expire while labels arrive, an item whose lease ended may be handed to
another annotator, and both labels are then stored (the later one counts);
every acknowledged label is kept all the same.
"""
import importlib.util
import json
import os
import random
import signal
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from _helpers import digits_flat, free_port, spawn, stop_process, wait_for_http

from skdbal.labelling import LabelStore

SERVER = Path(__file__).with_name("serve_for_kill.py")
TOKEN = "kill-9-token"
H = {"X-Token": TOKEN}
N_TRIALS = 20
N_CLIENTS = 4
MAX_REQUESTS = 200          # per client and trial: a bound, never reached in about a second
START_TIMEOUT = 60.0        # seconds for a server to answer, and for its first model


def _training_digest():
    spec = importlib.util.spec_from_file_location("serve_for_kill", SERVER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.training_digest


training_digest = _training_digest()


def first_fit(fits_log: Path, pid: int, deadline: float) -> dict:
    """The first model trained by process ``pid``, from the fits log (whole lines only)."""
    while True:
        if fits_log.exists():
            for line in fits_log.read_text().splitlines():
                try:
                    fit = json.loads(line)
                except ValueError:      # a line cut by a kill
                    continue
                if fit["pid"] == pid:
                    return fit
        assert time.time() < deadline, f"the server {pid} trained no model in time"
        time.sleep(0.05)


class Clients:
    """Annotators a0..a3 labelling over HTTP until the server dies; what they sent and what was acknowledged."""

    def __init__(self, y, lease_timeout=600.0):
        self.y = y
        self.lock = threading.Lock()
        self.sent = {}          # request id -> (item, label, annotator), recorded before sending
        self.second_look = {}   # request id -> whether its item was offered as a second look
        self.acked = {}         # request id -> event id answered by the server
        self.unanswered = []    # request ids sent, with no answer (the server died)
        self.errors = []        # any other answer than 200
        self.trial_acked = 0
        self.in_flight = 0      # submissions sent and not answered yet
        self.relabelled = {}    # item -> labels by another annotator after its first, not as second looks
        self.lease_timeout = lease_timeout
        self.late = 0           # submissions sent after their item's lease had ended

    def body(self, rid):
        item, label, annotator = self.sent[rid]
        return {"item": item, "label": label, "annotator": annotator, "request_id": rid}

    def run(self, base, stop):
        self.trial_acked = self.in_flight = 0
        threads = [threading.Thread(target=self._annotate, args=(f"a{k}", base, stop), daemon=True)
                   for k in range(N_CLIENTS)]
        for t in threads:
            t.start()
        return threads

    def _annotate(self, name, base, stop):
        import httpx

        with httpx.Client(base_url=base, headers=H, timeout=5.0) as c:
            for _ in range(MAX_REQUESTS):
                if stop.is_set():
                    return
                try:   # waits up to 1 s while the next batch is being chosen
                    r = c.get("/api/batch", params={"annotator": name, "n": 3, "wait": 1})
                except httpx.HTTPError:
                    return
                if r.status_code != 200:
                    with self.lock:
                        self.errors.append(("batch", name, r.status_code, r.text))
                    return
                leased_at = time.time()
                for it in r.json()["items"]:
                    if stop.is_set():
                        return
                    rid = uuid.uuid4().hex
                    with self.lock:
                        self.sent[rid] = (it["item"], str(self.y[it["item"]]), name)
                        self.second_look[rid] = bool(it.get("second_look"))
                        self.in_flight += 1
                        self.late += time.time() - leased_at > self.lease_timeout
                    try:
                        r = c.post("/api/submit", json=self.body(rid))
                    except httpx.HTTPError:
                        with self.lock:
                            self.unanswered.append(rid)
                        return
                    with self.lock:
                        self.in_flight -= 1
                        if r.status_code == 200:
                            self.acked[rid] = r.json()["event"]
                            self.trial_acked += 1
                        else:
                            self.errors.append(("submit", rid, r.status_code, r.text))
                            return


def check_store(path, clients, models_before, leases_expire=False):
    """The store after a kill holds the acknowledged submissions, and only what clients sent, once each;
    its events and models. With ``leases_expire``, an item may be labelled again by another annotator (its
    lease ended while its first annotator labelled it): counted in ``clients.relabelled``, not refused."""
    store = LabelStore(path)
    try:
        events, models = store.events(), store.models()
    finally:
        store.close()
    assert {e["kind"] for e in events} <= {"label"}
    rids = [e["request_id"] for e in events]
    assert len(rids) == len(set(rids)), "a request id was stored twice"
    stored = {e["request_id"]: e for e in events}
    missing = sorted(set(clients.acked) - set(stored))
    assert not missing, f"{len(missing)} acknowledged labels are not in the store: {missing[:5]}"
    assert {rid: stored[rid]["event"] for rid in clients.acked} == clients.acked
    for rid, e in stored.items():
        assert rid in clients.sent, f"the store holds event {e} that no client sent"
        assert (e["item"], e["label"], e["annotator"]) == clients.sent[rid]
    assert set(stored) - set(clients.acked) <= set(clients.unanswered)
    by_item = {}
    for e in events:
        by_item.setdefault(e["item"], []).append(e)
    for item, labels in by_item.items():
        annotators = [e["annotator"] for e in labels]
        assert len(annotators) == len(set(annotators)), f"item {item} was labelled twice by one annotator: {labels}"
        again = [e for e in labels[1:] if not clients.second_look.get(e["request_id"])]
        if leases_expire:
            clients.relabelled[item] = len(again)
        else:
            assert not again, f"item {item} was labelled again, and not as a second look: {labels}"
    assert models[:len(models_before)] == models_before, "a restart changed the recorded models"
    assert [m["version"] for m in models] == list(range(len(models)))
    return events, models


def post(base, body):
    import httpx

    return httpx.post(base + "/api/submit", json=body, headers=H, timeout=10.0)


@pytest.mark.slow
@pytest.mark.parametrize("lease_timeout", [600.0, 0.05], ids=["leases-600s", "leases-expiring-0.05s"])
def test_kill_9_of_the_server_loses_no_acknowledged_label_and_resumes(tmp_path, lease_timeout):
    _, y = digits_flat()
    path = tmp_path / "kill.db"
    rng = random.Random(0)
    clients = Clients(y, lease_timeout)
    procs = []
    leases_expire = lease_timeout < 10
    stats = {"start_s": [], "resumed_models": 0, "replays": 0, "retried": 0, "retried_were_stored": 0,
             "unanswered_at_kill": []}

    def start(fits_log):
        """A server on the store, answering on a free port (a port taken meanwhile: another port)."""
        for _ in range(3):
            port = free_port()
            proc = spawn([sys.executable, SERVER, path, port, TOKEN, fits_log, lease_timeout],
                         tmp_path / f"server{len(procs)}.log")
            procs.append(proc)
            base = f"http://127.0.0.1:{port}"
            r = wait_for_http(base + "/api/status", process=proc, timeout=START_TIMEOUT, headers=H)
            if r is not None:
                return proc, base, r.json()
            stop_process(proc, signal.SIGKILL, grace=10)
        text = (tmp_path / f"server{len(procs) - 1}.log").read_text(errors="replace")
        pytest.fail(f"the server did not start; its output:\n{text[-3000:]}")

    try:
        models = []
        for trial in range(N_TRIALS + 1):
            # ---- the state before (re)starting: what the resumed session must show
            store = LabelStore(path)
            labelled, models = len(store.current_labels()), store.models()
            seen = store.current_labels(upto=models[-1]["last_event"]) if models else {}
            n_events = len(store.events())
            store.close()
            t0 = time.time()
            fits_log = tmp_path / f"fits{trial}.jsonl"
            proc, base, status = start(fits_log)
            stats["start_s"].append(round(time.time() - t0, 1))
            assert status["labelled"] == labelled and status["error"] is None
            last_version = models[-1]["version"] if models else -1
            assert last_version <= status["model_version"] <= last_version + 1
            if models:   # it trains the last recorded version again, on the labels that version saw
                fit, last = first_fit(fits_log, proc.pid, time.time() + START_TIMEOUT), models[-1]
                assert (fit["step"], fit["n_labels"]) == (last["version"], last["n_labels"])
                assert fit["digest"] == training_digest((i, r["label"]) for i, r in seen.items())
                stats["resumed_models"] += 1

            # ---- a replayed acknowledged request: the same event, nothing added
            if clients.acked:
                rid = max(clients.acked, key=clients.acked.get)      # the latest acknowledged
                r = post(base, clients.body(rid))
                assert r.status_code == 200 and r.json() == {"event": clients.acked[rid]}, r.text
                stats["replays"] += 1
            store = LabelStore(path)
            assert len(store.events()) == n_events
            # ---- the submissions the kill left unanswered, retried: each stored once
            before = {e["request_id"]: e["event"] for e in store.events()}
            for rid in clients.unanswered:
                r = post(base, clients.body(rid))
                assert r.status_code == 200, r.text
                event = r.json()["event"]
                if rid in before:
                    assert event == before[rid]
                    stats["retried_were_stored"] += 1
                clients.acked[rid] = event
                stats["retried"] += 1
            new = len([rid for rid in clients.unanswered if rid not in before])
            assert len(store.events()) == n_events + new
            store.close()
            clients.unanswered = []

            if trial == N_TRIALS:      # the last restart only checks the resume
                proc.kill()
                proc.wait(10)
                break
            # ---- label until killed
            stop = threading.Event()
            threads = clients.run(base, stop)
            deadline = time.time() + 30
            while clients.trial_acked == 0 and time.time() < deadline and not clients.errors:
                time.sleep(0.01)
            assert clients.trial_acked > 0 and not clients.errors, clients.errors
            time.sleep(rng.uniform(0.05, 1.0))
            if trial % 2:    # every other kill lands while a submission is in flight (else: any moment)
                deadline = time.time() + 10
                while clients.in_flight == 0 and time.time() < deadline:
                    time.sleep(0.001)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
            stop.set()
            for t in threads:
                t.join(15)
            assert not any(t.is_alive() for t in threads)
            assert not clients.errors, clients.errors
            stats["unanswered_at_kill"].append(len(clients.unanswered))
            check_store(path, clients, models, leases_expire)

        # ---- in the end, the store holds exactly the acknowledged labels (every one sent was, at last)
        events, models = check_store(path, clients, models, leases_expire)
        assert set(clients.acked) == set(clients.sent)
        assert {e["request_id"]: e["event"] for e in events} == clients.acked
        assert all(e["label"] == str(y[e["item"]]) for e in events)
        assert all(a["last_event"] <= b["last_event"] and a["n_labels"] <= b["n_labels"]
                   for a, b in zip(models, models[1:]))
        for log in sorted(tmp_path.glob("server*.log")):     # no server failed on its own
            text = log.read_text(errors="replace")
            assert "Traceback" not in text and "ERROR" not in text, f"{log.name}:\n{text[-3000:]}"
        stats["second_looks"] = sum(clients.second_look[rid] for rid in clients.acked)
        stats["relabelled_after_a_lease_ended"] = sum(clients.relabelled.values())
        stats["sent_after_the_lease_ended"] = clients.late
        print(f"\n{len(events)} labels, {len(models)} model versions, {stats}")
        # the trials did what they are for: kills during submissions, some between a commit and its answer,
        # restarts that resumed a model, replays
        assert len(clients.acked) >= 10 * N_TRIALS and stats["replays"] == N_TRIALS
        assert stats["resumed_models"] >= N_TRIALS - 2
        assert sum(n > 0 for n in stats["unanswered_at_kill"]) >= N_TRIALS // 2
        assert stats["retried_were_stored"] >= 1
        # a label, skip or undo renews its annotator's leases, so a submission sent past the period from its
        # lease is a lapsed lease only when its client was idle that long: a quarter of the trials suffices
        assert not leases_expire or clients.late >= N_TRIALS // 4, "leases did not expire while labels arrived"
    finally:
        for proc in procs:
            stop_process(proc, signal.SIGKILL, grace=10)
