"""Where a session's audit items go in the order Label Studio serves its tasks in (``--audit-share``).

Private to :mod:`skdbal.labelstudio`: :class:`~skdbal.labelstudio.LabelStudioSync`'s pushes score the
tasks so that Label Studio serves the model's choices best first; a session with an audit share
(:mod:`skdbal.labelling.audit_share`) needs a share ``S`` of the labels to be of its reservoir, drawn at
random, never by the model. So the reservoir's items leave the model's order, and the next ones in the
reservoir's own random order are spread through it: those due for the next batch through its first
``head`` tasks, and as many as make a share ``S`` of the rest through the rest.
"""
from __future__ import annotations

from typing import Collection, List, Mapping, Optional, Sequence, Tuple

import numpy as np


def audit_order(audit, items: Sequence[int], scores: Sequence[float], labels: Mapping[int, object],
                skipped, head: int, servable: Optional[Collection[int]] = None) -> Tuple[List[int], List[float]]:
    """``items`` (best first) and their ``scores`` with ``audit``'s reservoir spread through them.

    Parameters
    ----------
    audit : AuditShare or None
        The session's audit share (:class:`skdbal.labelling.audit_share.AuditShare`); None or a share
        of 0 leaves ``items`` as they are.
    items, scores : sequences
        The tasks' pool items in the order they are to be served, best first, and the scores pushed
        for them (monotone in that order).
    labels, skipped :
        The store's current labels (item -> label) and skipped items: the audit items answered.
    head : int
        How many of ``items`` the next batch is: the audit items due for it go among them.
    servable : collection of int, optional
        The items that can be served (those with a task, not answered nor kept aside); a reservoir item
        outside it is passed over as a skipped one is. All, by default.

    Returns
    -------
    items : list of int
        ``items`` without the reservoir's, with the audit items to serve spread through them.
    scores : list of float
        Theirs: an item of ``items`` keeps its score; an audit item gets the mean of its neighbours'
        (the one before's alone at the end), so that Label Studio serves it in its place.

    Examples
    --------
    A fifth audited, the reservoir items 7 and 9 (served in that order); the model ranked 9 first. It
    leaves the model's order, and the one audit due for a batch of four, 7, goes among the batch with a
    score between its neighbours'; the rest of the order, one item, gets none (a quarter of an audit).

    >>> from skdbal.labelling.audit_share import AuditShare
    >>> from skdbal.labelstudio._audit_order import audit_order
    >>> audit_order(AuditShare(0.2, [7, 9]), [9, 0, 1, 2, 3, 4], [0.95, 0.9, 0.8, 0.6, 0.5, 0.4],
    ...             labels={}, skipped=(), head=4)
    ([0, 1, 7, 2, 3, 4], [0.9, 0.8, 0.7, 0.6, 0.5, 0.4])
    """
    score_of = dict(zip((int(i) for i in items), (float(s) for s in scores)))
    if audit is None or not audit.share or not audit.order:
        return [int(i) for i in items], [float(s) for s in scores]
    reserved, skipped = audit.reserved, set(skipped)
    if servable is not None:
        skipped |= {i for i in audit.order if i not in servable}
    order = [int(i) for i in items if int(i) not in reserved]
    first, rest = order[:head], order[head:]
    due = audit.due(labels, skipped, first)                      # the first of those waiting
    left = audit.waiting(labels, skipped)[len(due):]
    served = audit.interleave(first, due) + audit.interleave(rest, left[:audit.beside(len(rest))])
    given = np.array([score_of.get(i, np.nan) if i not in reserved else np.nan for i in served])
    known = np.flatnonzero(~np.isnan(given))
    for j in np.flatnonzero(np.isnan(given)):
        before, after = known[known < j], known[known > j]
        ends = [given[before[-1]]] if len(before) else []
        ends += [given[after[0]]] if len(after) else []
        given[j] = float(np.mean(ends)) if ends else 0.5
    return served, [float(s) for s in given]


def session_audit_order(session, items: Sequence[int], scores: Sequence[float],
                        servable: Optional[Collection[int]] = None) -> Tuple[List[int], List[float]]:
    """:func:`audit_order` for a labelling session: its audit share (``session.audit``; none without), its
    store's labels and skips, and its batch size as the head."""
    store = session.store
    current = store.current_labels()
    return audit_order(getattr(session, "audit", None), items, scores, current, store.skipped(current),
                       head=getattr(session, "batch_size", 0), servable=servable)
