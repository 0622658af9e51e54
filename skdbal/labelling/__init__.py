"""Labelling with people: a session whose oracle is people, kept in a durable store (SQLite).

:class:`LabellingSession` runs the one loop (:class:`skdbal.loop.ActiveLearningLoop`) in
a background thread with the store as its oracle and journal (:class:`StoreOracle` and
:class:`StoreJournal`, a session's ``oracle`` and ``journal``); :class:`LabelStore` is the
store.

The store is the journal of a labelling session: every label, skip and
undo is an append-only event, committed before the call returns, and the
current label of an item is its latest event. Queries (with the model
version and the scores) and model versions (with the labelled set they saw)
are recorded beside the events, so that a session can be redone from it.

This subpackage uses only the standard library's :mod:`sqlite3`; the
estimators never import it.
"""
from ._offers import CoveringOrder
from ._oracle import StoreJournal, StoreOracle
from ._page import class_keys
from .session import LabellingSession
from .store import LabelStore, StoreError

__all__ = ["CoveringOrder", "LabellingSession", "LabelStore", "StoreError", "StoreOracle", "StoreJournal",
           "class_keys"]
