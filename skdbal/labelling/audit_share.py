"""A uniform audit share for a labelling session: labels bought only to check the model, never trained on.

With ``audit_share=S`` (``skdbal label --audit-share S``) the session sets a reservoir aside when its
store is made: a uniform :data:`RESERVOIR_SHARE` of the pool (:func:`skdbal.accuracy_monitor.reservoir`,
seeded), kept in the store's configuration in the order its items are served, so that a restart uses the
same one. Acquisition never offers a reservoir item (the offer board counts them as taken), the model
never trains on one (the loop's oracle and journal leave them out), and each batch people see carries
enough of them, the next ones in that fixed random order, that they are a share ``S`` of the labels given
(:meth:`AuditShare.due`). After each retrain the new model judges every reservoir item labelled so far
(:meth:`AuditShare.judge`, kept with the model version in the store), and the page's estimate is then the
share it guessed right with Wilson's interval (:func:`audit_estimate`): the reservoir is a uniform sample of
the pool, and these labels a uniform sample of it, so the estimate is unbiased for the pool's accuracy
(a label the annotator skipped is the exception: the next reservoir item takes its place).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Iterable, List, Mapping, Optional, Sequence

import numpy as np

from .._validation import read_rows
from ..accuracy_monitor import reservoir
from ..estimates import AccuracyEstimate, estimate_accuracy

__all__ = ["RESERVOIR_SHARE", "AUDIT_METHOD", "check_audit_share", "draw_reservoir", "AuditShare", "audit_estimate"]

#: The share of the pool set aside for audits when a store is made with an audit share.
RESERVOIR_SHARE = 0.2
#: The estimate's ``method`` when it is the audit's (:func:`audit_estimate`).
AUDIT_METHOD = "audit-uniform-wilson"
#: Salts of the reservoir's and its order's generators, so that they are neither the queries' nor the stop set's.
_RESERVOIR_SALT, _ORDER_SALT = 2021, 2023


def check_audit_share(share) -> float:
    """``share`` as a float: 0 (no audit) or a share in (0, 1), else a ``ValueError`` naming it.

    Examples
    --------
    >>> from skdbal.labelling.audit_share import check_audit_share
    >>> check_audit_share(0.2), check_audit_share(0)
    (0.2, 0.0)
    >>> check_audit_share(1.5)
    Traceback (most recent call last):
        ...
    ValueError: audit_share must be 0 (no audit) or a share in (0, 1); got 1.5
    """
    if isinstance(share, bool) or not isinstance(share, (int, float, np.integer, np.floating)) \
            or not (share == 0 or 0 < share < 1):
        raise ValueError(f"audit_share must be 0 (no audit) or a share in (0, 1); got {share!r}")
    return float(share)


def draw_reservoir(n_items: int, seed: int, share: float = RESERVOIR_SHARE) -> List[int]:
    """A uniform ``share`` of ``n_items`` pool items, in a uniform random order (the order audits serve them).

    Examples
    --------
    >>> from skdbal.labelling.audit_share import draw_reservoir
    >>> kept = draw_reservoir(10, seed=0)
    >>> len(kept), len(set(kept)), kept == draw_reservoir(10, seed=0)
    (2, 2, True)
    """
    rows = reservoir(int(n_items), share, np.random.RandomState([int(seed), _RESERVOIR_SALT]))
    return [int(i) for i in np.random.RandomState([int(seed), _ORDER_SALT]).permutation(rows)]


class AuditShare:
    """Which reservoir items to serve, and the current model's judgement of those labelled.

    Parameters
    ----------
    share : float
        0 (serve none) or the share of the labels given that are audit labels, in (0, 1).
    order : sequence of int
        The reservoir's items, in the order they are served (:func:`draw_reservoir`).

    Examples
    --------
    A share of a fifth: one audit label for every four others.

    >>> from skdbal.labelling.audit_share import AuditShare
    >>> audit = AuditShare(0.2, [7, 3, 9, 5])
    >>> audit.due(labels={0: "a", 1: "b", 2: "a", 3: "b"}, skipped=(), offered=[4, 6, 8])
    [7]
    >>> AuditShare.interleave([0, 1, 2, 4], [7, 9])
    [0, 7, 1, 2, 9, 4]
    """

    def __init__(self, share: float, order: Sequence[int]):
        self.share = check_audit_share(share)
        self.order = [int(i) for i in order]
        #: The reservoir: never offered by acquisition, never trained on.
        self.reserved = frozenset(self.order)

    def due(self, labels: Mapping[int, object], skipped: Iterable[int], offered: Iterable[int]) -> List[int]:
        """The reservoir items to offer now, beside the batch ``offered``: with ``n`` the items labelled
        outside the reservoir and those of ``offered`` still unlabelled, and ``a`` the reservoir items
        labelled, the next ``round(S / (1 - S) · n) - a`` reservoir items (in :attr:`order`) that are
        neither labelled nor ``skipped``; so that, once all are answered, audit labels are a share ``S``
        of the labels given."""
        if not self.share or not self.order:
            return []
        reserved, skipped = self.reserved, set(skipped)
        n = sum(1 for i in labels if i not in reserved) + \
            len({int(i) for i in offered if i not in labels and i not in reserved})
        a = sum(1 for i in labels if i in reserved)
        k = self.beside(n) - a
        if k <= 0:
            return []
        return self.waiting(labels, skipped)[:k]

    def beside(self, n: int) -> int:
        """How many audit labels go with ``n`` others: ``round(S / (1 - S) · n)``, so that they are a share
        ``S`` of all."""
        return int(np.floor(self.share / (1.0 - self.share) * n + 0.5))

    def waiting(self, labels: Mapping[int, object], skipped: Iterable[int]) -> List[int]:
        """The reservoir's items neither labelled nor ``skipped``, in :attr:`order`: those audits take next."""
        skipped = set(skipped)
        return [i for i in self.order if i not in labels and i not in skipped]

    @staticmethod
    def interleave(batch: Sequence[int], audits: Sequence[int]) -> List[int]:
        """``audits`` spread evenly through ``batch`` (nothing on the page tells them apart)."""
        batch, audits = [int(i) for i in batch if i not in set(audits)], [int(i) for i in audits]
        if not audits:
            return batch
        out: List[int] = []
        step = (len(batch) + len(audits)) / len(audits)
        places = {int(step * j + step / 2) for j in range(len(audits))}
        b, a = iter(batch), iter(audits)
        for pos in range(len(batch) + len(audits)):
            nxt = next(a, None) if pos in places else next(b, None)
            if nxt is None:
                nxt = next(b, None) if pos in places else next(a, None)
            if nxt is not None:
                out.append(nxt)
        return out

    def judge(self, model, X, labels: Mapping[int, str]) -> Optional[dict]:
        """The model's judgement of every reservoir item labelled (``labels``: item -> label text):
        ``{"items": [...], "correct": [0 or 1, ...]}``, as the store keeps it with the model version;
        None when none is labelled."""
        items = sorted(i for i in labels if i in self.reserved)
        if not items:
            return None
        guesses = model.predict(read_rows(X, np.asarray(items, dtype=np.intp)))
        return {"items": items, "correct": [int(str(g) == str(labels[i])) for i, g in zip(items, guesses)]}


def audit_estimate(judged: Mapping, n_reservoir: int, confidence: float = 0.95) -> AccuracyEstimate:
    """A model version's audit estimate: the share of the judged audit labels (``judged`` as
    :meth:`AuditShare.judge` gives it) it guessed right, with Wilson's interval
    (:func:`skdbal.estimates.estimate_accuracy` on a uniform draw), its ``method`` :data:`AUDIT_METHOD`.

    Examples
    --------
    >>> from skdbal.labelling.audit_share import audit_estimate
    >>> e = audit_estimate({"items": [1, 4, 6, 9], "correct": [1, 1, 0, 1]}, n_reservoir=20)
    >>> e.accuracy, e.n_labels, e.biased, round(e.low, 3), round(e.high, 3), e.method
    (0.75, 4, False, 0.301, 0.954, 'audit-uniform-wilson')
    """
    e = estimate_accuracy(judged["correct"], N=n_reservoir, confidence=confidence,
                          population=f"the {n_reservoir} items set aside for checking")
    return replace(e, method=AUDIT_METHOD)
