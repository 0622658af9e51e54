"""Leases that end, shares that leave items for others, skips that can be reopened: an idle tab, a greedy
annotator and a skip-everything loop each leave a colleague labelling within a stated time.

The stated times, with ``lease_timeout`` 1 s here (300 s by default): a colleague is handed an idle or
greedy annotator's items within the lease period and 1 s after they were handed out (the long poll looks
again every 0.25 s; the rest is slack for a busy machine); a greedy annotator holds half the batch at
most while others come, so the colleague labels at once; a skip-everything loop stops after a batch of
skips in a row, at once. Through
the session's API, and through the real Starlette app served by uvicorn on 127.0.0.1 (each test failed
before the fix: polling renewed the leases, the cap was the whole batch, and skips had no limit and no way
back)."""
import json
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import pytest
from _helpers import serve
from sklearn.linear_model import LogisticRegression

from skdbal import ActiveLearner
from skdbal.acquisition import max_entropy
from skdbal.labelling import LabellingSession, LabelStore
from skdbal.labelling.app import make_app
from skdbal.labelling.store import LeaseHeld, SkipLimit

LEASE = 1.0            # seconds: the lease period of these tests
STATED = LEASE + 1.0   # a colleague is handed an idle annotator's items within this long of their lease
TOKENS = {"alice": "alice-token-0123456789abcdef", "bob": "bob-token-0123456789abcdef",
          "mallory": "mallory-token-0123456789abcdef"}


def pool(n=60):
    rng = np.random.RandomState(0)
    X = rng.randn(n, 2)
    return X, (X[:, 0] > 0).astype(int)


def new_session(path, n=60, batch_size=10, **kwargs):
    learner = ActiveLearner(LogisticRegression(), max_entropy, random_state=0, seeding="step", verbose=False)
    X, _ = pool(n)
    return LabellingSession(learner, X, classes=[0, 1], store=path, batch_size=batch_size, lease_timeout=LEASE,
                            **kwargs)


@pytest.fixture
def session(tmp_path):
    """A first batch of 10 items, 0..9, to share; leases of 1 s."""
    s = new_session(tmp_path / "s.db", initial=np.arange(10)).start()
    yield s
    s.stop()


def items(batch):
    return [b["item"] for b in batch]


def label(session, who, item):
    return session.submit(item, int(pool()[1][item]), annotator=who, exclusive=True)


def keep_asking(session, who, seconds, **kwargs):
    """``who`` asks for items every 0.1 s for ``seconds`` and never labels (a tab left open, a greedy
    script), in a thread; its join."""
    def ask():
        end = time.time() + seconds
        while time.time() < end:
            session.next_batch(who, n=1000, capped=True, **kwargs)
            time.sleep(0.1)
    thread = threading.Thread(target=ask, daemon=True)
    thread.start()
    return thread


# ------------------------------------------------------------------------------ through the session

def test_an_idle_tab_that_keeps_asking_leaves_its_items_to_a_colleague(session):
    """alice's tab holds 5 items and asks again and again, labelling nothing; bob labels his 5 and is
    handed alice's within the stated time (before, each ask renewed alice's leases: bob got nothing for
    as long as her tab was open, and no model was trained)."""
    handed = time.time()
    alices = items(session.next_batch("alice", n=5, capped=True))
    bobs = items(session.next_batch("bob", n=5, capped=True))
    assert (alices, bobs) == ([0, 1, 2, 3, 4], [5, 6, 7, 8, 9])
    for item in bobs:
        label(session, "bob", item)
    tab = keep_asking(session, "alice", 3 * LEASE, holding=alices)     # a page's long poll
    script = keep_asking(session, "alice", 3 * LEASE)                 # and a script asking again
    got = session.next_batch("bob", n=5, capped=True, timeout=3 * LEASE)
    waited = time.time() - handed
    assert items(got) == alices and LEASE <= waited < STATED, waited
    for item in items(got):
        label(session, "bob", item)
    session.wait_for_version(0, timeout=30)                           # the batch is answered: a model
    tab.join(), script.join()


def test_a_greedy_annotator_holds_half_a_batch_and_no_more_for_long(session):
    """alice asks for 1000 items eleven times: she holds 5 of the batch's 10 (ceil(10 / 2)), and bob is
    handed the other 5 at once; alice's asking again renews nothing, so bob is handed hers too within the
    stated time (before: alice held all 10, renewed by each ask, and bob got nothing)."""
    handed = time.time()
    for _ in range(11):
        alices = items(session.next_batch("alice", n=1000, capped=True))
    assert alices == [0, 1, 2, 3, 4]
    assert items(session.next_batch("bob", n=1000, capped=True)) == [5, 6, 7, 8, 9]
    for item in range(5, 10):
        label(session, "bob", item)
    greedy = keep_asking(session, "alice", 3 * LEASE)
    got = session.next_batch("bob", n=1000, capped=True, timeout=3 * LEASE)
    assert items(got) == alices and time.time() - handed < STATED
    greedy.join()


@pytest.mark.parametrize("k, share", [(1, 5), (2, 5), (3, 4), (4, 3), (10, 1), (12, 1)])
def test_the_share_is_a_batch_over_the_annotators_active_and_at_least_two(session, k, share):
    for who in range(k - 1):
        session.board.next_batch(f"a{who}", n=0)   # asked (for nothing): active
    assert session.board.share("me") == share


def test_a_skip_everything_loop_stops_after_a_batch_of_skips_and_a_colleague_labels(session):
    """mallory asks and skips everything she is handed, as fast as she can, for 2 s: her 11th skip in a
    row is refused (a batch, 10, is her share) and 10 items are skipped, not the pool; bob labels at once
    (before: every item of the pool was skipped in seconds, and nobody was handed anything again)."""
    refused, skipped, end = 0, 0, time.time() + 2
    while time.time() < end:
        for item in items(session.next_batch("mallory", n=1000, capped=True)):
            try:
                session.skip(item, annotator="mallory", exclusive=True)
                skipped += 1
            except SkipLimit as exc:
                assert str(exc) == "mallory skipped 10 items in a row: label one before skipping more"
                refused += 1
    assert skipped == 10 and refused > 0 and len(session.store.skipped()) == 10
    got = items(session.next_batch("bob", n=1000, capped=True, timeout=1))
    assert len(got) == 5
    for item in got:
        label(session, "bob", item)


def test_a_label_that_stands_starts_a_new_run_of_skips(tmp_path):
    store = LabelStore(tmp_path / "s.db")
    store.add_items([str(i) for i in range(6)])
    store.lease(range(6), "ann", 60)
    skip = lambda item: store.add_event(item, "skip", annotator="ann", exclusive=True, skip_limit=2)  # noqa: E731
    skip(0), skip(1)
    with pytest.raises(SkipLimit, match="ann skipped 2 items in a row"):
        skip(2)
    store.add_event(2, "label", "x", annotator="ann", exclusive=True)
    skip(3), skip(4)
    store.add_event(2, "undo", annotator="ann", exclusive=True, lease_for=60)   # the label no longer stands
    with pytest.raises(SkipLimit, match="ann skipped 4 items in a row"):
        skip(5)
    store.close()


def test_undoing_and_relabelling_one_item_starts_no_new_run_of_skips(tmp_path):
    """Label item 0, skip to the limit, then undo and relabel item 0 again and again: each skip after the
    first two is refused (before: each relabel started a new run, and 2 skips more went through each time,
    so the loop skipped every other item). A label of an item not labelled before starts a new run."""
    store = LabelStore(tmp_path / "s.db")
    store.add_items([str(i) for i in range(12)])
    store.lease(range(12), "ann", 60)
    skip = lambda item: store.add_event(item, "skip", annotator="ann", exclusive=True, skip_limit=2)  # noqa: E731
    store.add_event(0, "label", "x", annotator="ann", exclusive=True)
    skip(1), skip(2)
    refused = 0
    for item in range(3, 9):
        store.add_event(0, "undo", annotator="ann", exclusive=True, lease_for=60)
        store.add_event(0, "label", "x", annotator="ann", exclusive=True)
        with pytest.raises(SkipLimit, match="ann skipped 2 items in a row"):
            skip(item)
        refused += 1
    assert refused == 6 and store.skipped() == [1, 2]
    store.add_event(9, "label", "y", annotator="ann", exclusive=True)   # a new item labelled: a new run
    skip(10), skip(11)
    assert store.skipped() == [1, 2, 10, 11]
    store.close()


def test_skipped_items_are_offered_again_once_nothing_else_is_left(tmp_path):
    """A pool of 16, batches of 4: item 2 of the first batch is skipped, everything else labelled as
    offered; once fewer than two batches of other items are left to query (a batch and its tail), item 2
    is offered again and labelled (before: never again). (The loop then has less than a batch to query:
    that end of the pool is its own.)"""
    X, y = pool(16)
    s = new_session(tmp_path / "s.db", n=16, batch_size=4, initial=np.arange(4)).start()
    try:
        offered, end = [], time.time() + 60
        while offered.count(2) < 2 and time.time() < end:
            for item in items(s.next_batch("ann", timeout=1)):
                offered.append(item)
                if item == 2 and offered.count(2) == 1:
                    s.skip(2, annotator="ann")
                else:
                    s.submit(item, int(y[item]), annotator="ann")
        assert offered.count(2) == 2, (offered, s.error)
        assert 2 in s.store.current_labels() and s.store.skipped() == []
        again = offered.index(2, offered.index(2) + 1)
        assert len(set(offered[:again])) >= 16 - 2 * 4    # not before fewer than two batches were left
    finally:
        s.stop()


def test_a_skip_everything_loop_without_tokens_neither_stops_the_session_nor_starves_a_colleague(tmp_path):
    """Without tokens nothing limits one name's skips: a bot skips everything it is handed, as fast as it
    can, for 3 s, in a pool of 12 with batches of 3. The skips are reopened whenever the pool runs short,
    so the loop runs on and a colleague is handed items at once (before: every item was skipped, the loop
    failed, "n_instances=3 is larger than the pool", and nobody was handed anything again)."""
    X, y = pool(12)
    first = np.r_[np.flatnonzero(y == 0)[:2], np.flatnonzero(y == 1)[:1]]
    s = new_session(tmp_path / "s.db", n=12, batch_size=3, initial=first).start()
    try:
        for item in items(s.next_batch("ann", timeout=5)):
            s.submit(item, int(y[item]), annotator="ann")
        s.wait_for_version(0, timeout=30)
        end = time.time() + 3
        while time.time() < end:
            for item in items(s.next_batch("bot", timeout=0.2)):
                s.skip(item, annotator="bot")
        assert s.status()["error"] is None
        got = items(s.next_batch("colleague", timeout=1))
        assert got and not set(got) & set(s.store.current_labels())
    finally:
        s.stop()


def test_a_skipped_item_is_not_queried_again_after_a_restart(tmp_path):
    """Skips outlive a restart. A pool of 24, batches of 4: the first labelled (model 0), the next two
    skipped, the fourth labelled (model 1, which saw the skips); after a restart the batch queried is the
    one queried before it, with no skipped item (before, the restarted loop forgot the skips that model 1
    saw and could query them again: items nobody was offered, so that the batch was never answered)."""
    X, y = pool(24)
    first = np.r_[np.flatnonzero(y == 0)[:2], np.flatnonzero(y == 1)[:2]]   # two classes: model 0 at once
    path = tmp_path / "s.db"
    s = new_session(path, n=24, batch_size=4, initial=first).start()

    def next_four(since):
        deadline = time.time() + 30
        while (not s.status()["pending"] or s.board.batch == since) and time.time() < deadline:
            time.sleep(0.02)
        return items(s.next_batch("ann", timeout=5))

    for item in next_four(None):
        s.submit(item, int(y[item]), annotator="ann")
    s.wait_for_version(0, timeout=30)
    skipped = []
    for _ in range(2):
        batch = next_four(skipped[-4:] or None)
        skipped += batch
        for item in batch:
            s.skip(item, annotator="ann")
    for item in next_four(skipped[-4:]):
        s.submit(item, int(y[item]), annotator="ann")
    s.wait_for_version(1, timeout=30)
    deadline = time.time() + 30
    while len(s.status()["pending"]) < 4 and time.time() < deadline:
        time.sleep(0.02)
    before = sorted(s.status()["pending"])
    s.stop()
    s = new_session(path, n=24, batch_size=4, initial=first).start()
    try:
        deadline = time.time() + 30
        while len(s.status()["pending"]) < 4 and time.time() < deadline:
            time.sleep(0.02)
        after = sorted(s.board.batch)
        assert len(skipped) == 8 and not set(after) & set(skipped)
        assert after == before and sorted(s.status()["pending"]) == before
    finally:
        s.stop()


# ---------------------------------------------------------------------------------- a late label

def test_a_late_label_is_kept_while_nobody_else_was_handed_the_item(tmp_path):
    """alice's lease ran out; nobody else was handed item 0: her label is kept. Item 1 was handed to bob
    meanwhile: hers is refused (409 over HTTP), nothing recorded."""
    store = LabelStore(tmp_path / "s.db")
    store.add_items(["a", "b", "c"])
    assert store.lease([0, 1], "alice", LEASE, now=0.0) == [0, 1]
    assert store.lease([1], "bob", LEASE, now=5.0) == [1]          # alice's ran out at 1.0
    assert store.add_event(0, "label", "x", annotator="alice", exclusive=True, time=6.0) == 1
    with pytest.raises(LeaseHeld, match="item 1 is not leased to alice"):
        store.add_event(1, "label", "x", annotator="alice", exclusive=True, time=7.0)
    with pytest.raises(LeaseHeld, match="item 2 is not leased to alice"):
        store.add_event(2, "label", "x", annotator="alice", exclusive=True, time=7.0)
    assert [e["item"] for e in store.events()] == [0]
    store.close()


def test_activity_renews_the_annotators_leases_and_asking_does_not(tmp_path):
    store = LabelStore(tmp_path / "s.db")
    store.add_items(["a", "b", "c", "d"])
    assert store.lease([0, 1, 2], "alice", 10, now=0.0) == [0, 1, 2]
    assert store.lease([0, 1, 2], "alice", 10, now=9.0) == [0, 1, 2]      # asked again: not renewed
    assert store.live_leases(now=10.5) == {}
    assert store.lease([0, 1, 2], "alice", 10, now=11.0) == [0, 1, 2]
    store.add_event(0, "label", "x", annotator="alice", time=15.0, release=True, renew_for=10)
    assert store.live_leases(now=24.0) == {1: "alice", 2: "alice"}       # renewed to 25 by the label
    assert store.live_leases(now=25.5) == {}
    store.close()


def test_activity_renews_the_annotators_lapsed_leases_that_nobody_else_was_handed(tmp_path):
    """alice's 4 leases ran out at 10; bob was handed item 3 at 12; alice labels item 0 at 15: items 1 and
    2 are hers again until 25, item 3 stays bob's (before: her lapsed leases stayed lapsed)."""
    store = LabelStore(tmp_path / "s.db")
    store.add_items(["a", "b", "c", "d"])
    assert store.lease([0, 1, 2, 3], "alice", 10, now=0.0) == [0, 1, 2, 3]
    assert store.lease([3], "bob", 20, now=12.0) == [3]
    store.add_event(0, "label", "x", annotator="alice", exclusive=True, time=15.0, release=True, renew_for=10)
    assert store.live_leases(now=24.0) == {1: "alice", 2: "alice", 3: "bob"}
    assert store.lapsed("alice", [1, 2, 3], now=24.0) == []
    store.close()


def test_an_idle_page_gets_items_again_once_its_annotator_labels_one_of_her_lapsed_items(session):
    """alice holds 4 items and lets the leases run out; she labels item 0 (kept, late): her page, holding
    1, 2 and 3, is handed more at once (before: it stayed idle, handed nothing, as her other leases had
    stayed lapsed)."""
    assert items(session.next_batch("alice", n=4, capped=True)) == [0, 1, 2, 3]
    time.sleep(LEASE + 0.2)
    assert items(session.next_batch("alice", n=5, capped=True, holding=[0, 1, 2, 3])) == []   # idle
    label(session, "alice", 0)
    assert items(session.next_batch("alice", n=5, capped=True, holding=[1, 2, 3])) == [4, 5]  # share of 5


# ------------------------------------------------------------------------ through a real server

@pytest.fixture
def server(tmp_path):
    """The session of :func:`session` served by uvicorn on 127.0.0.1, a token per annotator."""
    s = new_session(tmp_path / "s.db", initial=np.arange(10)).start()
    url, stop = serve(make_app(s, annotators=TOKENS))
    yield s, url
    stop()
    s.stop()


def call(url, who, path, body=None):
    """(status, JSON) of a request as ``who``."""
    request = urllib.request.Request(url.rstrip("/") + "/" + path, method="POST" if body is not None else "GET",
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"X-Token": TOKENS[who], "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def page_items(url, who, n=5, have=(), wait=0):
    status, body = call(url, who, f"api/batch?n={n}&wait={wait}&have={','.join(map(str, have))}")
    assert status == 200, body
    return items(body["items"])


def submit(url, who, item):
    return call(url, who, "api/submit", {"item": item, "label": str(pool()[1][item])})[0]


def polling_page(url, who, have, seconds):
    """A page that holds ``have`` and long-polls for more, as the page does, labelling nothing."""
    def poll():
        end = time.time() + seconds
        while time.time() < end:
            page_items(url, who, have=have, wait=0.5)
    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    return thread


def test_over_http_an_idle_page_leaves_its_items_to_a_colleague_and_a_retrain_comes(server):
    session, url = server
    handed = time.time()
    alices = page_items(url, "alice")
    bobs = page_items(url, "bob")
    assert (alices, bobs) == ([0, 1, 2, 3, 4], [5, 6, 7, 8, 9])
    idle = polling_page(url, "alice", alices, 3 * LEASE)
    for item in bobs:
        assert submit(url, "bob", item) == 200
    got = page_items(url, "bob", have=[], wait=3 * LEASE)
    assert got == alices and time.time() - handed < STATED
    for item in got:
        assert submit(url, "bob", item) == 200
    session.wait_for_version(0, timeout=30)
    idle.join()
    # alice's page held them all along: her late labels are refused now that bob was handed them
    status, body = call(url, "alice", "api/submit", {"item": 0, "label": "1"})
    assert status == 409 and body["error"] == "item 0 is not leased to alice: ask for items (/api/batch) before " \
                                              "labelling or skipping them"


def test_over_http_an_idle_page_gets_nothing_new_until_its_annotator_acts_and_her_late_label_is_kept(server):
    session, url = server
    alices = page_items(url, "alice")
    time.sleep(LEASE + 0.1)                                        # her leases ran out; nobody asked
    assert page_items(url, "alice", have=alices, wait=0.5) == []  # idle: nothing new
    assert submit(url, "alice", alices[0]) == 200                  # back: her late label is kept
    # her label renewed her lapsed leases (nobody else was handed them): live again, her share (5) less
    # the 4 she holds
    assert page_items(url, "alice", have=alices[1:], wait=0.5) == [5]
    for item in alices[1:]:
        assert submit(url, "alice", item) == 200
    assert page_items(url, "alice", have=[]) == [5, 6, 7, 8, 9]
    assert sorted(session.store.current_labels()) == alices


def test_over_http_a_greedy_annotator_leaves_half_the_batch_to_a_colleague(server):
    session, url = server
    for _ in range(11):
        alices = page_items(url, "alice", n=1000)
    assert alices == [0, 1, 2, 3, 4]
    bobs = page_items(url, "bob", n=1000)
    assert bobs == [5, 6, 7, 8, 9]
    assert all(submit(url, "bob", item) == 200 for item in bobs)


def test_over_http_a_skip_everything_loop_is_stopped_and_a_colleague_labels(server):
    session, url = server
    skipped, refused, end = 0, [], time.time() + 2
    while time.time() < end:
        for item in page_items(url, "mallory", n=1000):
            status, body = call(url, "mallory", "api/skip", {"item": item})
            if status == 200:
                skipped += 1
            else:
                refused.append((status, body["error"]))
    assert skipped == 10 and len(session.store.skipped()) == 10
    assert refused and set(refused) == {(409, "mallory skipped 10 items in a row: label one before skipping more")}
    got = page_items(url, "bob", n=1000, wait=1)
    assert len(got) == 5 and all(submit(url, "bob", item) == 200 for item in got)
