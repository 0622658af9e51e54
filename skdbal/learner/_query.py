"""One query of a learner: the seeded draws around its strategy (the pool subsample, the strategy's
``random_state``), undone if anything fails. Functions of :mod:`skdbal.learner`."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..acquisition.base import Acquisition, acquire_among


def subsample(candidates: np.ndarray, size: int, rng: np.random.RandomState, ids=None) -> np.ndarray:
    """The draw of ``rng.choice(candidates, size, replace=False)``, in the order of the rows'
    ``ids`` (of their positions, ``candidates`` themselves, without ids).

    >>> np.random.RandomState(0).permutation(4)[:2].tolist()  # the rows drawn
    [2, 3]
    >>> subsample(np.array([13, 12, 11, 10]), 2, np.random.RandomState(0)).tolist()
    [10, 11]
    >>> ids = np.arange(14)[::-1]                            # row 11's id is 2, row 10's is 3
    >>> subsample(np.array([13, 12, 11, 10]), 2, np.random.RandomState(0), ids).tolist()
    [11, 10]
    """
    rows = rng.permutation(len(candidates))[:size]
    key = candidates[rows] if ids is None else ids[candidates[rows]]
    return candidates[rows[np.argsort(key, kind="stable")]]


def acquire(strategy, learner, X_pool, candidates: np.ndarray, n_instances: int, rng: np.random.RandomState,
            ids=None, pool_subsample: Optional[int] = None, kwargs: Optional[dict] = None) -> Acquisition:
    """Query ``strategy`` for ``learner`` among ``candidates`` (indices into ``X_pool``), scoring
    a subsample of ``pool_subsample`` of them when there are more; a strategy that takes a
    ``random_state`` gets one drawn from ``rng`` unless ``kwargs`` (its keywords, changed in
    place) give one. On any error ``rng`` is put back as it was, so a failed query draws nothing.
    ``learner`` is what the strategy scores: for a pool on a cluster (a dask array), which its
    driver (``acquire_among``) queries there, the learner's copy without its pool, which is sent to
    every worker.

    Its input is the learner's query's, checked there once: ``X_pool``, ``candidates`` (unique
    positions in it), ``n_instances`` (at most the candidates, and ``pool_subsample``) and the
    ``*_pool`` keywords of ``kwargs`` (aligned with ``X_pool``); none is checked again on the way.
    """
    kwargs = {} if kwargs is None else kwargs
    state = rng.get_state()
    try:
        if pool_subsample is not None and pool_subsample < len(candidates):
            candidates = subsample(candidates, pool_subsample, rng, ids)
        if strategy.takes_random_state and "random_state" not in kwargs:
            kwargs["random_state"] = rng.randint(2**31 - 1)
        return acquire_among(strategy, learner, X_pool, candidates, n_instances, check_input=False, **kwargs)
    except BaseException:
        rng.set_state(state)
        raise
