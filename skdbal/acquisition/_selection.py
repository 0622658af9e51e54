"""What a query returns and the pieces a selection is made of: :class:`Acquisition`, :class:`PoolScores`,
:func:`select_top` and :func:`check_options`.

Private: public from :mod:`skdbal.acquisition.base`, where the bases that use them are defined.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import FrozenSet, Optional, Tuple

import numpy as np
from sklearn.utils import check_random_state

from .._validation import check_n_instances, check_pool, pool_kwargs
from ._messages import warn_fill

__all__ = ["Acquisition", "PoolScores", "select_top", "check_options", "check_call"]

@dataclass
class Acquisition:
    """What one query returns: the picks, their scores, and what was learnt.

    Parameters
    ----------
    indices : ndarray of shape (n_instances,)
        Unique positions in the pool, best first.
    scores : ndarray of shape (n_instances,) or None
        The acquisition values of ``indices`` (None when a plain callable
        returned bare indices).
    info : dict
        Whatever the strategy learnt about this query beyond the picks, for
        the learner's history (for example a filter's rejects). Empty for
        the pointwise strategies.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.acquisition import random
    >>> from skdbal.acquisition.base import Acquisition
    >>> acq = random.acquire(None, np.zeros((5, 2)), 2, random_state=0)
    >>> isinstance(acq, Acquisition), acq.indices.tolist(), acq.scores.round(4).tolist(), acq.info
    (True, [1, 2], [0.7152, 0.6028], {})
    >>> random(None, np.zeros((5, 2)), 2, random_state=0)[0].tolist()   # the modAL form
    [1, 2]
    """

    indices: np.ndarray
    scores: Optional[np.ndarray]
    info: dict = field(default_factory=dict)


@dataclass
class PoolScores:
    """A score for every pool point, the ranking, and which points may be picked.

    What a strategy that scores points one by one offers the decorators
    (:meth:`Strategy.pool_scores`): a filter narrows ``eligible``, a
    diversity penalty re-selects among the eligible points, and both read
    the same scores, so the pool is scored once however they are stacked.

    Parameters
    ----------
    scores : ndarray of shape (N,)
        Larger is more informative.
    order : ndarray of shape (N,), int
        Every pool position, best first (ties already broken).
    eligible : ndarray of shape (N,), bool, optional
        Points that may be picked; None: all of them.
    fill_priority : ndarray of shape (N,), optional
        When fewer points are eligible than asked, the batch is filled with
        the ineligible points of the highest priority (a filter: the model's
        probability of the label given).
    info : dict
        What the scorer learnt (a filter's threshold).

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.acquisition import max_entropy
    >>> class Fixed:
    ...     def predict_proba(self, X):
    ...         return np.array([[0.9, 0.1], [0.5, 0.5], [0.7, 0.3]])
    >>> ps = max_entropy.pool_scores(Fixed(), np.zeros((3, 1)), 2)
    >>> ps.order.tolist(), ps.scores.round(3).tolist(), ps.eligible
    ([1, 2, 0], [0.325, 0.693, 0.611], None)
    """

    scores: np.ndarray
    order: np.ndarray
    eligible: Optional[np.ndarray] = None
    fill_priority: Optional[np.ndarray] = None
    info: dict = field(default_factory=dict)

    def _rank(self) -> np.ndarray:
        """Each pool point's position in ``order``."""
        rank = np.empty(len(self.order), dtype=np.intp)
        rank[self.order] = np.arange(len(self.order))
        return rank

    def rejected(self, picks, n_instances: Optional[int] = None) -> np.ndarray:
        """Ineligible points ranked above the lowest-ranked eligible pick,
        best first: what the eligibility kept out of this batch. When fewer
        than ``n_instances`` eligible points were picked, every ineligible
        point was passed over."""
        if self.eligible is None:
            return np.zeros(0, dtype=np.intp)
        picks = np.asarray(picks, dtype=np.intp)
        eligible_picks = picks[self.eligible[picks]]
        short = n_instances is not None and len(eligible_picks) < n_instances
        depth = len(self.order) if short or not len(eligible_picks) else self._rank()[eligible_picks].max() + 1
        above = self.order[:depth]
        return above[~self.eligible[above]].astype(np.intp)

    def fill(self, picks, n_instances: int, who: str = "the strategy", eligible_word: str = "eligible",
             fill_words: str = "others of highest priority") -> Tuple[np.ndarray, int]:
        """``picks`` completed to ``n_instances`` with the ineligible points of
        highest ``fill_priority`` (with a warning); returns ``(picks, n_filled)``."""
        picks = np.asarray(picks, dtype=np.intp)
        n_filled = n_instances - len(picks)
        if n_filled <= 0:
            return picks, 0
        n_eligible = len(self.order) if self.eligible is None else int(self.eligible.sum())
        warn_fill(who, n_eligible, len(self.order), n_filled, self.info.get("threshold"), eligible_word, fill_words,
                  stacklevel=4)
        others = np.setdiff1d(np.arange(len(self.order)), picks)
        if self.fill_priority is not None:
            key = -np.asarray(self.fill_priority, dtype=np.float64)[others]
        else:  # by rank
            key = self._rank()[others]
        fill = others[np.argsort(key, kind="stable")][:n_filled]
        return np.concatenate([picks, fill]).astype(np.intp), n_filled

    def acquisition(self, picks, n_instances: int, who: str, eligible_word: str = "eligible",
                    fill_words: str = "others of highest priority", info: Optional[dict] = None) -> Acquisition:
        """The query's result from a selection among the eligible points:
        filled to ``n_instances`` (:meth:`fill`), with its scores, and, when
        some points are ineligible, its rejects (:meth:`rejected`, less the
        filled ones) in ``info``, after this object's ``info`` and ``info``."""
        rejected = None if self.eligible is None else self.rejected(picks, n_instances)
        picks, n_filled = self.fill(picks, n_instances, who, eligible_word, fill_words)
        info = {**self.info, **(info or {})}
        if rejected is not None:
            rejected = rejected[~np.isin(rejected, picks)]
            info.update({"n_rejected": int(len(rejected)), "rejected_indices": rejected, "n_filled": int(n_filled)})
        return Acquisition(picks, self.scores[picks], info)


def select_top(
    scores, n_instances: int = 1, *, random_tie_break: bool = False, random_state=None
) -> Tuple[np.ndarray, np.ndarray]:
    """Indices of the ``n_instances`` largest scores, best first.

    Ties go to the lower index, or to a seeded random order with
    ``random_tie_break=True``.

    Parameters
    ----------
    scores : array-like of shape (N,)
        One score per pool point; larger is more informative. NaN is refused.
    n_instances : int, default=1
        How many to select, at most ``N``.
    random_tie_break : bool, default=False
        Break ties by a random permutation instead of by index.
    random_state : int, RandomState instance or None, default=None
        Seeds the permutation of ``random_tie_break``.

    Returns
    -------
    indices : ndarray of shape (n_instances,), int
    scores : ndarray of shape (n_instances,)

    Examples
    --------
    >>> from skdbal.acquisition.base import select_top
    >>> idx, top = select_top([0.1, 0.7, 0.7, 0.3], n_instances=2)
    >>> idx.tolist(), top.tolist()
    ([1, 2], [0.7, 0.7])
    """
    scores = np.asarray(scores, dtype=np.float64)
    return _top(scores, check_n_instances(n_instances, len(scores)), random_tie_break, random_state)


def _top(scores, n_instances: int, random_tie_break: bool = False, random_state=None) -> Tuple[np.ndarray, np.ndarray]:
    """:func:`select_top` for an ``n_instances`` already checked against the scores."""
    scores = np.asarray(scores, dtype=np.float64)
    if np.isnan(scores).any():
        raise ValueError("scores contain NaN")
    if random_tie_break:
        order = check_random_state(random_state).permutation(len(scores))
    else:
        order = np.arange(len(scores))
    ranked = order[np.argsort(-scores[order], kind="stable")][:n_instances]
    return ranked.astype(np.intp), scores[ranked]


#: Keywords of the protocol itself, taken by every strategy.
_PROTOCOL_KEYWORDS = frozenset({"random_tie_break", "random_state"})
#: Parameters of acquire/score/pool_scores that are not per-call options.
_POSITIONAL = frozenset({"self", "estimator", "X_pool", "n_instances"})


def _keyword_names(method) -> FrozenSet[str]:
    """The named parameters of ``method``, less the positional ones of the protocol."""
    params = inspect.signature(method).parameters.values()
    return frozenset(p.name for p in params
                     if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and p.name not in _POSITIONAL)


def check_options(strategy, kwargs) -> None:
    """Refuse keywords ``strategy`` does not take, with a ``TypeError`` naming them.

    Accepted: the protocol's ``random_tie_break`` and ``random_state``,
    pool-aligned keywords (``*_pool``, which decorators consume), and the
    strategy's own per-call options (:meth:`Strategy.call_options`). A
    strategy whose options are unknown (a plain callable) accepts anything.

    Examples
    --------
    >>> from skdbal.acquisition import bald
    >>> from skdbal.acquisition.base import check_options
    >>> check_options(bald, {"random_state": 0, "n_samples": 10, "y_pool": None})   # all taken
    >>> check_options(bald, {"n_sample": 10})   # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    TypeError: BALD got unexpected keyword argument(s) 'n_sample'; it takes chunk_size, n_jobs, n_samples, ...
    """
    call_options = getattr(strategy, "call_options", None)   # a Strategy's; a plain callable takes anything
    options = call_options() if callable(call_options) else None
    if options is None:
        return
    unknown = sorted(k for k in kwargs
                     if not k.endswith("_pool") and k not in _PROTOCOL_KEYWORDS and k not in options)
    if unknown:
        takes = sorted(options | _PROTOCOL_KEYWORDS)
        raise TypeError(f"{type(strategy).__name__} got unexpected keyword argument(s) "
                        f"{', '.join(map(repr, unknown))}; it takes {', '.join(takes)} and pool-aligned "
                        "*_pool keywords")


def check_call(strategy, X_pool, n_instances, kwargs: dict):
    """The checks of a strategy's public entry (``acquire``, ``pool_scores``): its options, the pool,
    ``n_instances`` and the pool-aligned keywords; returns the checked pool and ``n_instances``."""
    check_options(strategy, kwargs)
    X_pool = check_pool(X_pool)
    n_instances = check_n_instances(n_instances, len(X_pool))
    pool_kwargs(kwargs, len(X_pool))  # pool-aligned keywords must match the pool
    return X_pool, n_instances
