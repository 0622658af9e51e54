"""The leases of a labelling store: who holds which item, until when (the ``leases`` table).

:class:`Leases` holds :class:`~skdbal.labelling.LabelStore`'s lease methods, which it inherits: a lease is
handed out for a while, never renewed by asking again, and renewed by its holder's labelling activity
(:meth:`~skdbal.labelling.LabelStore.add_event`'s ``renew_for``). A lease that ran out keeps its row, naming
its last holder, until the item is answered or handed to someone else (:meth:`Leases.lapsed`).
"""
from __future__ import annotations

import sqlite3
import time as _time
from typing import Any, Callable, ContextManager, Dict, Iterable, List, Optional, Sequence

__all__ = ["Leases"]


class Leases:
    """The lease methods of :class:`~skdbal.labelling.LabelStore` (which provides ``_transaction`` and
    ``_read``).

    Examples
    --------
    >>> import os, tempfile
    >>> from skdbal.labelling import LabelStore
    >>> store = LabelStore(os.path.join(tempfile.mkdtemp(), "s.db"))
    >>> _ = store.add_items(["a", "b", "c"])
    >>> store.lease([0, 1, 2], "ann", 60, now=0.0, cap=2), store.lease([0, 1, 2], "bob", 60, now=1.0)
    ([0, 1], [2])
    >>> store.lease([0, 1], "ann", 60, now=50.0)          # asking again does not renew
    [0, 1]
    >>> store.live_leases(now=60.5)              # ann's ran out at 60, bob's runs to 61
    {2: 'bob'}
    """

    # provided by LabelStore: one write transaction, and one read, on the store's connection
    _transaction: Callable[[], ContextManager[sqlite3.Connection]]
    _read: Callable[..., List[Any]]

    def lease(self, items: Sequence[int], annotator: str, timeout: float, *, now: Optional[float] = None,
              limit: Optional[int] = None, unchanged_since: Optional[int] = None,
              cap: Optional[int] = None) -> List[int]:
        """Lease to ``annotator`` those of ``items`` (in order) that nobody else
        holds a live lease on, up to ``limit``; a new lease lasts ``timeout`` s.
        One transaction: no item is ever held by two live leases.

        An item the annotator holds already is given back (it counts toward
        ``limit``) but its lease is not renewed: asking again, as a page's
        long poll does, never keeps items; a label, skip or undo does
        (:meth:`add_event`'s ``renew_for``).

        ``cap`` is the most live leases ``annotator`` may hold in all, those
        held before included: so that one annotator cannot take every free
        item from the others.

        ``unchanged_since``, an event id (:meth:`last_event`, read before the
        caller chose ``items``), leaves out the items that have an event
        after it: their label or skip came while the caller was choosing.
        """
        now = _time.time() if now is None else float(now)
        granted: List[int] = []
        with self._transaction() as conn:
            mine = {i for (i,) in conn.execute("SELECT item FROM leases WHERE annotator=? AND expires > ?",
                                               (annotator, now))}
            for item in items:
                if limit is not None and len(granted) >= limit:
                    break
                if unchanged_since is not None and conn.execute(
                        "SELECT 1 FROM events WHERE item=? AND event>? LIMIT 1",
                        (int(item), int(unchanged_since))).fetchone() is not None:
                    continue
                if int(item) in mine:   # held already: given back as it is, not renewed
                    granted.append(int(item))
                    continue
                held = conn.execute("SELECT annotator, expires FROM leases WHERE item=?", (int(item),)).fetchone()
                if held is not None and held[1] > now:
                    continue
                if cap is not None and len(mine) >= cap:
                    continue   # at the cap: nothing more
                conn.execute("INSERT OR REPLACE INTO leases VALUES (?, ?, ?)", (int(item), annotator, now + timeout))
                granted.append(int(item))
                mine.add(int(item))
        return granted

    def lapsed(self, annotator: str, items: Iterable[int], *, now: Optional[float] = None) -> List[int]:
        """Those of ``items`` whose lease ran out in ``annotator``'s hands: nobody answered them or was
        handed them since (their late label is still the annotator's, :meth:`add_event`).

        Examples
        --------
        >>> import os, tempfile
        >>> from skdbal.labelling import LabelStore
        >>> store = LabelStore(os.path.join(tempfile.mkdtemp(), "s.db"))
        >>> _ = store.add_items(["a", "b", "c"])
        >>> store.lease([0, 1], "ann", 60, now=0.0)
        [0, 1]
        >>> store.lapsed("ann", [0, 1, 2], now=30.0), store.lapsed("ann", [0, 1, 2], now=61.0)
        ([], [0, 1])
        >>> store.lease([1], "bob", 60, now=62.0)          # free again: handed to bob
        [1]
        >>> store.lapsed("ann", [0, 1, 2], now=63.0)
        [0]
        """
        now = _time.time() if now is None else float(now)
        wanted = {int(i) for i in items}
        if not wanted:
            return []
        rows = self._read("SELECT item FROM leases WHERE annotator=? AND expires <= ? ORDER BY item",
                          (annotator, now))
        return [i for (i,) in rows if i in wanted]

    def release(self, item: int) -> None:
        """End the lease on ``item``, if any."""
        with self._transaction() as conn:
            conn.execute("DELETE FROM leases WHERE item=?", (int(item),))

    def live_leases(self, *, now: Optional[float] = None) -> Dict[int, str]:
        """``{item: annotator}`` of the leases not expired."""
        now = _time.time() if now is None else float(now)
        return dict(self._read("SELECT item, annotator FROM leases WHERE expires > ?", (now,)))

    def lapsed_leases(self, *, now: Optional[float] = None) -> Dict[int, str]:
        """``{item: annotator}`` of the leases that ran out, each naming its last holder (:meth:`lapsed`'s,
        for every annotator at once).

        Examples
        --------
        >>> import os, tempfile
        >>> from skdbal.labelling import LabelStore
        >>> store = LabelStore(os.path.join(tempfile.mkdtemp(), "s.db"))
        >>> _ = store.add_items(["a", "b", "c"])
        >>> store.lease([0], "ann", 60, now=0.0), store.lease([1], "bob", 10, now=0.0)
        ([0], [1])
        >>> store.lapsed_leases(now=30.0), store.lapsed_leases(now=61.0)
        ({1: 'bob'}, {0: 'ann', 1: 'bob'})
        """
        now = _time.time() if now is None else float(now)
        return dict(self._read("SELECT item, annotator FROM leases WHERE expires <= ?", (now,)))
