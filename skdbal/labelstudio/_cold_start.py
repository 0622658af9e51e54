"""The order a labelling session offers its pool in before its first model, as scores for Label Studio.

Private to :mod:`skdbal.labelstudio`: :meth:`LabelStudioSync.push_first_batch
<skdbal.labelstudio.LabelStudioSync.push_first_batch>` pushes it, so that every task Label Studio can serve
carries a score from the first push on.
"""
from __future__ import annotations

from typing import List, Sequence

import numpy as np

#: How many batches of the covering order are chosen greedily (each a pass over the pool); the rest of the
#: pool follows by its distance to what was chosen, farthest first (the greedy order's next criterion).
GREEDY_BATCHES = 10


def cold_start_order(X, first: Sequence[int], batch_size: int, seed: int) -> List[int]:
    """Every row of ``X``, in the order a session offers them before its first model: the first batch
    (``first``, as given), then the covering order that the session continues with while it waits for a
    second class (:class:`skdbal.labelling.CoveringOrder`, seeded as the session seeds it: farthest first
    from what was chosen), for ``GREEDY_BATCHES`` batches; then the rest by their distance to all chosen,
    farthest first; then any rows the covering order does not measure (a pool over 10,000 rows is measured
    over a seeded sample), by position.

    Examples
    --------
    Four points on a line, the first batch the leftmost: the farthest comes next, then the one between.

    >>> import numpy as np
    >>> from skdbal.labelstudio._cold_start import cold_start_order
    >>> cold_start_order(np.array([[0.0], [1.0], [3.0], [10.0]]), [0], batch_size=1, seed=0)
    [0, 3, 2, 1]
    """
    from ..labelling import CoveringOrder

    order = [int(i) for i in first]
    cover = CoveringOrder(X, order, seed)
    order += cover.next(GREEDY_BATCHES * int(batch_size))
    rest = np.flatnonzero(~cover.taken)
    rest = rest[np.argsort(-cover.dist[rest], kind="stable")]
    order += [int(cover.rows[j]) for j in rest]
    seen = set(order)
    order += [i for i in range(len(X)) if i not in seen]
    return order


def rank_scores(n: int) -> np.ndarray:
    """Scores on [0, 1] for ``n`` items in order, the first best: ``1 - rank / (n - 1)`` (1 for one item).

    Examples
    --------
    >>> from skdbal.labelstudio._cold_start import rank_scores
    >>> rank_scores(5).tolist(), rank_scores(1).tolist()
    ([1.0, 0.75, 0.5, 0.25, 0.0], [1.0])
    """
    return np.ones(1) if n == 1 else 1.0 - np.arange(n) / (n - 1)
