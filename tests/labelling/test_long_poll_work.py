"""The work a change costs while pages wait for items: counted, not timed.

With many pages waiting on ``/api/batch`` and nothing for them, a submit must cost one look at the
board (:class:`~skdbal.labelling._long_poll.Offerable`), not one ``next_batch`` per waiting page.
"""
import asyncio
import threading

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from skdbal import ActiveLearner
from skdbal.labelling import LabellingSession
from skdbal.labelling._long_poll import ChangeWatch
from skdbal.labelling.app import _new_items

PAGES = 200


@pytest.fixture
def busy_session(tmp_path):
    """A session (its loop not started: no retrain) whose one batch, items 0-49, is all held by ``worker``."""
    rng = np.random.default_rng(0)
    learner = ActiveLearner(LogisticRegression(), random_state=0, seeding="step", verbose=False)
    session = LabellingSession(learner, rng.random((100, 4)), classes=["0", "1"], store=tmp_path / "s.db",
                               batch_size=50)
    session.board.offer_first(list(range(50)))
    assert len(session.next_batch("worker", n=1000)) == 50
    yield session
    session.store.close()


class Counted:
    """``session.next_batch`` counted, by annotator."""

    def __init__(self, session):
        self.calls, self.given, self._next_batch = {}, 0, session.next_batch
        self._lock = threading.Lock()

    def __call__(self, annotator=None, **kwargs):
        items = self._next_batch(annotator=annotator, **kwargs)
        with self._lock:
            self.calls[annotator] = self.calls.get(annotator, 0) + 1
            self.given += len(items)
        return items

    def total(self) -> int:
        with self._lock:
            return sum(self.calls.values())


def submit_during_the_next_look(session, item: int) -> dict:
    """Make the next look at the board (:meth:`Offerable.of`) meet a submit of ``item`` by ``worker``
    committed right after its first read of the store, as a submit answered while a look runs does."""
    store, fired = session.store, {"done": False}

    def hooked(name):
        original = getattr(store, name)

        def read(*args, **kwargs):
            result = original(*args, **kwargs)
            if not fired["done"] and threading.current_thread().name != "skdbal-long-polls":
                fired["done"] = True
                session.submit(item, "0", annotator="worker", request_id=f"r{item}")
            return result
        return read

    store.current_labels, store.live_leases = hooked("current_labels"), hooked("live_leases")
    return fired


def calls_around_a_change(session, counted, waiters, change) -> tuple:
    """``next_batch`` calls (``counted``) before and after ``change``, while ``waiters`` wait for items.

    ``waiters``: ``(annotator, n, have, capped)`` of each page, a long poll on a watcher with no periodic
    look within the test (only the changes'). Once each page has had its first look, and the watcher's
    first looks are done, ``await change()`` makes the change; a second later (its look and its wakes
    done) the pages are cancelled and the watcher, with nobody listening, ends."""
    watch = ChangeWatch(session, period=60.0)

    async def scenario():
        listeners = [watch.listen(a, have=have, capped=capped) for a, _, have, capped in waiters]
        pages = [asyncio.ensure_future(_new_items(session, a, n, have, wait=30.0, capped=capped, listener=listener))
                 for (a, n, have, capped), listener in zip(waiters, listeners)]
        while counted.total() < len(waiters):     # each page's first look: nothing for it
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)                  # the watcher's first looks are done
        before = counted.total()
        await change()
        await asyncio.sleep(1.0)                  # the change's look is done, and its wakes
        after = counted.total()
        for page in pages:
            page.cancel()
        await asyncio.gather(*pages, return_exceptions=True)
        for listener in listeners:
            listener.close()
        session.board.notify()                    # the watcher sees nobody listens, and ends
        return before, after

    try:
        return asyncio.run(scenario())
    finally:
        for thread in threading.enumerate():
            if thread.name == "skdbal-long-polls":
                thread.join(5)


def test_a_submit_during_a_look_wakes_no_page_that_cannot_get_items(busy_session):
    """200 pages wait for items and none can get one (``worker`` holds the whole batch). A label that
    ``worker`` commits while the watcher's look reads the store leaves them waiting: no page runs
    ``next_batch`` again. The look read the labels and then the leases: the item just labelled was
    neither labelled nor leased in what it read, looked free, and every waiting page woke and ran
    ``next_batch`` (200 calls for one submit, 0 items given)."""
    session = busy_session
    counted = Counted(session)
    session.next_batch = counted
    hooked = {}

    async def a_label_within_a_look():
        fired = hooked["fired"] = submit_during_the_next_look(session, 0)
        session.board.notify()                    # a change: the watcher looks, and the label lands in its look
        for _ in range(40):
            await asyncio.sleep(0.05)
            if fired["done"]:
                break

    before, after = calls_around_a_change(session, counted, [(f"p{k}", 5, [], False) for k in range(PAGES)],
                                          a_label_within_a_look)
    assert hooked["fired"]["done"]                 # the label landed within a look
    assert before == PAGES
    assert 0 in session.store.current_labels()
    assert counted.given == 0
    assert after - before == 0, f"{after - before} next_batch calls for one submit, no item to give"


def test_a_submit_wakes_no_idle_page(tmp_path):
    """200 idle pages wait (each holds an item whose lease ran out in its annotator's hands: ``next_batch``
    gives it nothing until its annotator acts) while items are free and ``worker`` labels: a submit wakes
    none of them. Before the look knew the idle rule, the free items woke every idle page on every
    change and each ran ``next_batch`` for nothing (200 calls for one submit)."""
    import time

    rng = np.random.default_rng(0)
    learner = ActiveLearner(LogisticRegression(), random_state=0, seeding="step", verbose=False)
    session = LabellingSession(learner, rng.random((500, 4)), classes=["0", "1"], store=tmp_path / "s.db",
                               batch_size=250)
    session.board.offer_first(list(range(250)))
    store = session.store
    assert store.lease(list(range(200, 240)), "worker", 3600) == list(range(200, 240))
    long_ago = time.time() - 100
    for k in range(PAGES):                          # p{k}'s lease on item k ran out 99 s ago
        assert store.lease([k], f"p{k}", 1, now=long_ago) == [k]
    assert len(store.lapsed_leases()) == PAGES and set(store.live_leases().values()) == {"worker"}
    counted = Counted(session)
    session.next_batch = counted
    async def a_label():
        session.submit(200, "0", annotator="worker", request_id="r200")   # notifies the board

    try:
        before, after = calls_around_a_change(session, counted, [(f"p{k}", 5, [k], False) for k in range(PAGES)],
                                              a_label)
    finally:
        store.close()
    assert before == PAGES, f"{before - PAGES} next_batch calls beyond each page's first, before any submit"
    assert counted.given == 0
    assert 200 in store.current_labels()
    assert after - before == 0, f"{after - before} next_batch calls for one submit, no item to give"


def test_a_submit_wakes_no_page_whose_annotator_holds_a_whole_share(tmp_path):
    """Annotators known by their tokens (``next_batch`` capped): ``ann`` and ``bob`` hold a whole share
    each, 7 of the batch of 20 (three annotators active, with ``worker``: ``ceil(20 / 3)``), and wait on
    100 pages each while 4 items are free. ``worker``'s submit wakes none of the 200 pages: they could get
    nothing more. Before the look knew the share, the free items woke all 200 on every change, and each
    ran ``next_batch`` for nothing."""
    rng = np.random.default_rng(0)
    learner = ActiveLearner(LogisticRegression(), random_state=0, seeding="step", verbose=False)
    session = LabellingSession(learner, rng.random((40, 4)), classes=["0", "1"], store=tmp_path / "s.db",
                               batch_size=20)
    session.board.offer_first(list(range(20)))
    store = session.store
    holds = {"ann": list(range(0, 7)), "bob": list(range(7, 14)), "worker": [14, 15]}
    for who, items in holds.items():
        assert store.lease(items, who, 3600) == items
    assert session.board.share("ann") == 7          # ann, bob and worker active: ceil(20 / 3)
    counted = Counted(session)
    session.next_batch = counted
    async def a_label():
        session.submit(14, "0", annotator="worker", request_id="r14")   # notifies the board

    who = ["ann" if k % 2 == 0 else "bob" for k in range(PAGES)]
    try:
        before, after = calls_around_a_change(session, counted, [(a, None, holds[a], True) for a in who], a_label)
    finally:
        store.close()
    assert before == PAGES, f"{before - PAGES} next_batch calls beyond each page's first, before any submit"
    assert counted.given == 0
    assert after - before == 0, f"{after - before} next_batch calls for one submit, no item to give"
