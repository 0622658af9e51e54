"""Long polls that wait without a thread: the page's ``/api/batch`` waits on the event loop.

A long poll used to wait in Starlette's thread pool (40 threads) on the offer board's condition, so
40 idle pages took every thread and a submit queued behind them for seconds. Now:

- one thread, this module's, waits on the board's condition for every waiting request (while someone
  waits), and on each notification, and every :attr:`ChangeWatch.period` seconds (a lease that runs
  out notifies no one), asks their event loop (``call_soon_threadsafe``) for a look;
- the look (:class:`Offerable`: a few reads of the store, in the thread pool) says what the board could
  offer now; only the requests it may offer something are woken, and they look for their items
  with ``next_batch(timeout=0)``. With 200 pages waiting, a submit costs one look, not 200, and
  wakes none of the pages that cannot get an item from it.

:meth:`Offerable.may_offer` must stay a superset of what :meth:`OfferBoard.next_batch` may give: a
request it passes over waits on, up to the end of its wait (at most 10 s), where the page asks again.
"""
from __future__ import annotations

import asyncio
import threading
import time
import weakref
from typing import Callable, Dict, Iterable, List, Optional, Set

from starlette.concurrency import run_in_threadpool


class Offerable:
    """What a board may offer now, as far as waiting requests need to know (taken in a worker thread).

    ``open``: items of the batch, the second looks pending and the tail (while one may be offered)
    that nobody holds; ``held``: those items leased, by annotator; ``more``: whether the tail may
    offer new items (a retrain or a wait for a class, with the tail's items all answered); ``lapsed``:
    the items whose lease ran out, by their last holder (a page holding one is idle: ``next_batch``
    gives it nothing until its annotator labels, skips or undoes, which is a change looked at again);
    ``counts``: the live leases each annotator holds, ``active``: the annotators active now
    (:meth:`OfferBoard.active`) and ``share_among``: the share of ``k`` of them, so that a capped request
    (annotators known by their tokens) whose annotator holds a whole share is offered nothing new.

    Examples
    --------
    >>> from skdbal.labelling._long_poll import Offerable
    >>> look = Offerable(open_items=[], held={"ann": [3]}, more=False)
    >>> look.may_offer("ann", have={3}), look.may_offer("ann", have=set()), look.may_offer("bob", set())
    (False, True, False)
    >>> idle = Offerable(open_items=[5], held={}, more=False, lapsed={2: "bob"})
    >>> idle.may_offer("bob", have={2}), idle.may_offer("bob", have={7}), idle.may_offer("ann", have={2})
    (False, True, True)
    >>> full = Offerable([5], {"ann": [1, 2]}, False, counts={"ann": 2}, active={"bob"}, share_among=lambda k: 2)
    >>> full.may_offer("ann", {1, 2}, capped=True), full.may_offer("ann", {1}, True), full.may_offer("ann", {1, 2})
    (False, True, True)
    """

    def __init__(self, open_items: Iterable[int], held: Dict[str, List[int]], more: bool,
                 lapsed: Optional[Dict[int, str]] = None, counts: Optional[Dict[str, int]] = None,
                 active: Iterable[str] = (), share_among: Optional[Callable[[int], int]] = None):
        self.open, self.held, self.more = list(open_items), held, bool(more)
        self.lapsed = dict(lapsed or {})
        self.counts, self.active, self.share_among = dict(counts or {}), set(active), share_among

    @classmethod
    def of(cls, session) -> "Offerable":
        board, store = session.board, session.store
        tail_time = board.training or board.waiting_for is not None   # read first: a later change notifies
        # the leases before the answers: a label committed between the two reads then shows its item held
        # and answered (left out), not free; read the other way round, it showed free (neither labelled
        # nor leased), and a look taken during a submit woke every waiting page for nothing
        now = time.time()
        leases, lapsed = store.live_leases(now=now), store.lapsed_leases(now=now)
        active = board.active(None, now)
        labelled = store.current_labels()
        answered = set(labelled) | set(store.skipped(labelled))
        candidates = [i for i in board.batch if i not in answered]
        if board.second_looks:
            candidates += board.pending_looks()
        more = False
        if tail_time:
            tail = [i for i in board.tail if i not in answered]
            candidates += tail
            more = not tail   # offer_more makes new ones: the second query's, or a covering order's
        open_items: List[int] = []
        held: Dict[str, List[int]] = {}
        for item in dict.fromkeys(candidates):
            holder = leases.get(item)
            if holder is None:
                open_items.append(item)
            else:
                held.setdefault(holder, []).append(item)
        counts: Dict[str, int] = {}
        for holder in leases.values():
            counts[holder] = counts.get(holder, 0) + 1
        return cls(open_items, held, more, lapsed, counts, active, board.share_among)

    def may_offer(self, annotator: str, have: Set[int], capped: bool = False) -> bool:
        """Whether ``next_batch`` may give ``annotator`` an item not in ``have`` (the page's): never while
        the page is idle (it holds an item whose lease ran out in ``annotator``'s hands); with ``capped``
        (``next_batch``'s), only the items they hold already once they hold a whole share."""
        if any(self.lapsed.get(i) == annotator for i in have):
            return False
        held_elsewhere = any(i not in have for i in self.held.get(annotator, ()))
        if capped and self.share_among is not None and \
                self.counts.get(annotator, 0) >= self.share_among(len(self.active | {annotator})):
            return held_elsewhere
        return self.more or any(i not in have for i in self.open) or \
            any(i not in have for i in self.held.get(annotator, ()))


class ChangeWatch:
    """Wakes the requests that wait for new items of a session, with one thread for all of them.

    The thread runs while someone listens, holding the board's condition except inside its ``wait``:
    every ``notify_all`` made while it runs reaches it. On each notification, every :attr:`period`
    seconds, and once when it starts (a change made before it held the condition would be missed
    otherwise), each event loop with listeners takes a look (:class:`Offerable`), and wakes the
    listeners it may offer items to. A change during a look is looked at again.

    Parameters
    ----------
    session : LabellingSession
    period : float, default=1.0
        Seconds between looks without a notification (leases run out silently).

    Examples
    --------
    >>> import asyncio, os, tempfile
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from skdbal import ActiveLearner
    >>> from skdbal.labelling import LabellingSession
    >>> from skdbal.labelling._long_poll import ChangeWatch
    >>> learner = ActiveLearner(LogisticRegression(), random_state=0, seeding="step")
    >>> session = LabellingSession(learner, np.eye(4), classes=["a", "b"],
    ...                            store=os.path.join(tempfile.mkdtemp(), "s.db"), batch_size=2)
    >>> watch = ChangeWatch(session)
    >>> async def wait_for_a_batch():
    ...     with watch.listen("ann", have=[]) as listener:
    ...         asyncio.get_running_loop().call_later(0.2, session.board.offer_first, [0, 3])
    ...         return await listener.wait(5)
    >>> asyncio.run(wait_for_a_batch())
    True
    """

    def __init__(self, session, period: float = 1.0):
        self.session = session
        self.period = float(period)
        self._condition = session.board.changed
        self._lock = threading.Lock()           # guards the listeners, the generation and the thread
        self._listeners: Set[Listener] = set()
        self._thread: Optional[threading.Thread] = None
        #: how many rounds of looks were asked for: a look begun at generation g sees every change before it
        self._generation = 0
        #: the event loops whose look is under way (only read and changed in their own thread)
        self._looking: "weakref.WeakSet[asyncio.AbstractEventLoop]" = weakref.WeakSet()

    def listen(self, annotator: str, have: Iterable[int], capped: bool = False) -> "Listener":
        """A listener for ``annotator``'s request (the page holding ``have``; ``capped``: its ``next_batch``
        is), on the running event loop, woken by the changes that may bring it items until it is closed."""
        listener = Listener(self, asyncio.get_running_loop(), annotator, set(have), capped)
        with self._lock:
            self._listeners.add(listener)
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="skdbal-long-polls", daemon=True)
                self._thread.start()
        return listener

    @property
    def generation(self) -> int:
        with self._lock:
            return self._generation

    def forget(self, listener: "Listener") -> None:
        """Wake ``listener`` no more (:meth:`Listener.close`)."""
        with self._lock:
            self._listeners.discard(listener)

    def _watch(self) -> None:
        with self._condition:
            while True:
                with self._lock:
                    if not self._listeners:
                        self._thread = None
                        return
                    self._generation += 1
                    loops = {listener.loop for listener in self._listeners}
                for loop in loops:
                    try:
                        loop.call_soon_threadsafe(self._look_soon, loop)
                    except RuntimeError:   # the loop is closed: its listeners wait no more
                        with self._lock:
                            self._listeners = {li for li in self._listeners if li.loop is not loop}
                self._condition.wait(self.period)

    def _look_soon(self, loop: asyncio.AbstractEventLoop) -> None:
        if loop not in self._looking:       # a look under way looks again if the generation moved
            self._looking.add(loop)
            loop.create_task(self._look(loop))

    async def _look(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            while True:
                generation = self.generation   # read before the look: it sees every change up to it
                try:
                    look = await run_in_threadpool(Offerable.of, self.session)
                except Exception:   # noqa: BLE001 - the requests look for themselves, and answer the failure
                    look = None
                with self._lock:
                    listeners = [li for li in self._listeners if li.loop is loop]
                for listener in listeners:
                    if look is None or look.may_offer(listener.annotator, listener.have, listener.capped):
                        listener.event.set()
                if self.generation == generation:
                    return
        finally:
            self._looking.discard(loop)


class Listener:
    """One waiting request's wake-ups (:meth:`ChangeWatch.listen`); a context manager that closes it."""

    def __init__(self, watch: ChangeWatch, loop: asyncio.AbstractEventLoop, annotator: str, have: Set[int],
                 capped: bool = False):
        self.watch, self.loop, self.annotator, self.have, self.capped = watch, loop, annotator, have, capped
        self.event = asyncio.Event()

    async def wait(self, seconds: float) -> bool:
        """Wait up to ``seconds`` for a change since the last wait that may bring the request items; whether
        one came."""
        try:
            await asyncio.wait_for(self.event.wait(), max(0.0, seconds))
        except asyncio.TimeoutError:
            return False
        self.event.clear()
        return True

    def close(self) -> None:
        self.watch.forget(self)

    def __enter__(self) -> "Listener":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
