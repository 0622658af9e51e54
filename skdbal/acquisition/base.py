"""The bases for writing a strategy, defined here, and the helpers strategies share.

Everything a strategy of your own needs: subclass :class:`Strategy` (a score
per pool point, or ``acquire_checked`` for a joint batch), :class:`SamplesStrategy`
(a score from predictive samples ``(T, n, C)``, chunked for you) or
:class:`StrategyDecorator` (wraps another strategy, as the noise filter
does). :class:`Acquisition` and :class:`PoolScores` are what they return;
:func:`select_top`, :func:`map_chunks` and :func:`acquire_among` are the pieces
the built-in strategies are made of. The strategies themselves are in
:mod:`skdbal.acquisition`, with :func:`~skdbal.acquisition.score_pool` (a
measure's scores, the functional form of :class:`MeasureStrategy`) and
:func:`~skdbal.acquisition.to_modal`.

A strategy says how its query reduces over a pool read in chunks (a cluster's,
:func:`skdbal.dask.query_pool`) through :meth:`Strategy.plan_chunks`, a
:class:`ChunkPlan` (:mod:`skdbal.acquisition._chunks` tells the protocol); every
:class:`SamplesStrategy` has one, so a strategy of your own runs on a cluster
unchanged; :func:`acquire_in_chunks` runs a plan in this process.

Examples
--------
>>> import numpy as np
>>> from sklearn.linear_model import LogisticRegression
>>> from skdbal.acquisition.base import SamplesStrategy
>>> def margin(samples):
...     '''One minus the gap between the two likeliest classes of the mean prediction.'''
...     top2 = np.sort(samples.mean(axis=0), axis=1)[:, -2:]
...     return 1.0 - (top2[:, 1] - top2[:, 0])
>>> class Margin(SamplesStrategy):
...     measure = staticmethod(margin)
...     needs_stochastic = False            # meaningful for one pass too
>>> X = np.array([[0.0], [1.0], [2.0], [3.0]])
>>> clf = LogisticRegression().fit(X, [0, 0, 1, 1])
>>> idx, scores = Margin()(clf, X, n_instances=2)
>>> sorted(idx.tolist())
[1, 2]
"""

from __future__ import annotations

import warnings
from typing import Callable, FrozenSet, Optional, Tuple

import numpy as np
from sklearn.base import BaseEstimator

from .._validation import (
    check_candidates,
    check_query_result,
    pool_backend,
    subset_pool_kwargs,
    take_rows,
)
from ..predictive import Predictive, as_predictive
from ._chunks import (
    ChunkedPool,
    ChunkPlan,
    ChunkScores,
    PointwisePlan,
    PoolChunk,
    acquire_in_chunks,
    check_row_keyed,
)
from ._messages import chunk_refusal
from ._modal_view import _ModalView
from ._registry import STRATEGIES
from ._scoring import DEFAULT_CHUNK_SIZE, DegenerateScoreWarning, _ChunkScorer, _unbound, map_chunks
from ._selection import (
    _PROTOCOL_KEYWORDS,
    Acquisition,
    PoolScores,
    _keyword_names,
    _top,
    check_call,
    check_options,
    select_top,
)

__all__ = ["Strategy", "StrategyDecorator", "SamplesStrategy", "MeasureStrategy", "CallableStrategy", "Acquisition",
           "PoolScores", "as_strategy", "acquire_among", "pool_scores_of", "select_top", "map_chunks",
           "check_options", "DegenerateScoreWarning", "DEFAULT_CHUNK_SIZE",
           # a query reduced over a pool read in chunks (a cluster's): the protocol and a driver in one process
           "ChunkPlan", "PointwisePlan", "PoolChunk", "ChunkScores", "ChunkedPool", "acquire_in_chunks",
           # pools that live elsewhere (a cluster's), queried by their driver through acquire_among
           "pool_backend"]


class Strategy(BaseEstimator):
    """Base class of query strategies: score the pool, then select a batch.

    A strategy is a modAL-style callable::

        strategy(estimator, X_pool, n_instances=1, *, random_tie_break=False,
                 random_state=None, **kwargs) -> (indices, scores)

    so it works wherever a function strategy does, inside modAL's learner
    included. Subclasses implement :meth:`acquisition_scores` (one value per pool point,
    larger is better) and may override :meth:`select` (top-k by default) or
    :meth:`acquire_checked` as a whole (joint selections, decorators).

    **Validate once.** :meth:`acquire` and :meth:`pool_scores` check their
    input, then call :meth:`acquire_checked` and :meth:`pool_scores_checked`,
    which a subclass overrides, and a decorator (and the learner's query)
    calls on checked values: a query checks each thing once.

    :meth:`acquire` is the richer form used by :class:`skdbal.ActiveLearner`:
    it returns an :class:`Acquisition`, whose ``info`` carries what the
    strategy learnt about the query (a filter's rejects) without changing the
    ``(indices, scores)`` that modAL expects.

    **Pool-aligned keywords.** A keyword named ``*_pool`` (``y_pool``, the
    oracle's labels) holds one entry per row of ``X_pool``. Whoever subsets
    the pool (the learner's ``pool_subsample``, a decorator passing candidates
    to the strategy it wraps) subsets these keywords with the same indices.
    A strategy that does not use one ignores it, since decorators consume
    them. Any other keyword must be one of the strategy's per-call options
    (:meth:`call_options`): a misspelt one (``n_sample=``) is a ``TypeError``
    naming it, never silently ignored.

    Parameters are stored by ``__init__`` only, so ``get_params``,
    ``set_params``, ``clone``, ``repr`` and pickling work as for a
    scikit-learn estimator. The instances in :mod:`skdbal.acquisition`
    (``bald``, ...) are shared: make your own (``BALD(n_samples=50)``) to
    change parameters, and ``clone`` one before ``set_params``.

    Attributes
    ----------
    takes_random_state : bool
        Whether :meth:`acquire` takes ``random_state``; the learner then
        draws one from its own generator for every query. True for every
        ``Strategy``; see :class:`CallableStrategy` for plain functions.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.acquisition.base import Strategy
    >>> class FirstFeature(Strategy):
    ...     def acquisition_scores(self, estimator, X_pool, **kwargs):
    ...         return X_pool[:, 0]
    >>> idx, scores = FirstFeature()(None, np.array([[0.2], [0.9], [0.5]]), n_instances=2)
    >>> idx.tolist(), scores.tolist()
    ([1, 2], [0.9, 0.5])
    >>> FirstFeature()
    FirstFeature()
    """

    takes_random_state = True
    name: Optional[str] = None  # its registered name, "bald" (skdbal.acquisition.register)
    #: The model the scores read: "classifier", "regressor" (a predictive Gaussian: a Bayesian last layer),
    #: "network_regressor" (output gradients too: skdbal.MCDropoutRegressor) or "density" (DDUClassifier's); the
    #: runner builds it, its grid refuses what it cannot build. A decorator's is the wrapped strategy's.
    model_kind: str = "classifier"
    display_name: Optional[str] = None  # as people read it, "max entropy"; None: name with spaces

    def set_params(self, **params):
        """Set parameters, as a scikit-learn estimator.

        Raises
        ------
        ValueError
            On one of the shared instances of :mod:`skdbal.acquisition`
            (``bald``, ...), which every other user of the name would see
            changed: ``clone`` it first.
        """
        if params and any(shared is self for shared in STRATEGIES.values()):
            name, cls = type(self).name, type(self).__name__
            raise ValueError(
                f"{name} is the package's shared instance (STRATEGIES[{name!r}]), and set_params would change it "
                f"for every user of the name {name!r} (get_strategy, the runner's strategy names); clone it first "
                f"(sklearn.base.clone(...).set_params(...)) or make your own, e.g. {cls}(...)")
        return super().set_params(**params)

    def call_options(self) -> Optional[FrozenSet[str]]:
        """The per-call options this strategy takes, besides ``random_tie_break``,
        ``random_state`` and pool-aligned ``*_pool`` keywords; None if unknown
        (anything is then passed on).

        By default the named keyword parameters of :meth:`acquisition_scores` when the
        strategy scores points one by one, and of :meth:`acquire_checked` (or :meth:`acquire`): declare an
        option as a parameter and it is accepted; ``**kwargs`` accepts no name.

        Returns
        -------
        frozenset of str or None

        Examples
        --------
        >>> from skdbal.acquisition import bald, batch_bald
        >>> sorted(bald.call_options())
        ['chunk_size', 'n_jobs', 'n_samples']
        >>> sorted(batch_bald.call_options())
        ['chunk_size', 'n_joint_samples', 'n_samples']
        """
        names = _keyword_names(type(self).acquire) | _keyword_names(type(self).acquire_checked)
        if type(self).acquisition_scores is not Strategy.acquisition_scores:
            names |= _keyword_names(type(self).acquisition_scores)
        return frozenset(names - _PROTOCOL_KEYWORDS)

    def __call__(self, estimator, X_pool, n_instances: int = 1, **kwargs) -> Tuple[np.ndarray, np.ndarray]:
        acq = self.acquire(estimator, X_pool, n_instances, **kwargs)
        return acq.indices, acq.scores

    def acquire(
        self,
        estimator,
        X_pool,
        n_instances: int = 1,
        *,
        random_tie_break: bool = False,
        random_state=None,
        **kwargs,
    ) -> Acquisition:
        """Score ``X_pool`` and select ``n_instances`` of it: check the input, then :meth:`acquire_checked`.

        Parameters
        ----------
        estimator : estimator
            A fitted model read through :func:`skdbal.predictive.as_predictive`.
        X_pool : array-like of shape (N, ...)
            The pool to choose from.
        n_instances : int, default=1
            How many points to select.
        random_tie_break : bool, default=False
            Break ties between equal scores at random instead of by index.
        random_state : int, RandomState instance or None, default=None
            Seeds the tie break and the strategy's own randomness (random
            sampling's scores). A model's predictive samples (MC-dropout
            masks) are seeded by the model's ``random_state``, not by this.
        **kwargs :
            Options of :meth:`acquisition_scores` and pool-aligned keywords (``*_pool``).

        Returns
        -------
        Acquisition

        Raises
        ------
        TypeError
            For a keyword that is neither an option nor pool-aligned.
        """
        X_pool, n_instances = check_call(self, X_pool, n_instances, kwargs)
        call = dict(kwargs, random_tie_break=random_tie_break, random_state=random_state)
        if type(self).acquire_checked is Strategy.acquire_checked:  # also for a subclass's acquire calling this one
            return self._choose(estimator, X_pool, n_instances, **call)
        return self.acquire_checked(estimator, X_pool, n_instances, **call)

    def acquire_checked(self, estimator, X_pool, n_instances: int, **kwargs) -> Acquisition:
        """:meth:`acquire` on checked values (the pool checked, ``n_instances`` in range, ``*_pool`` keywords
        aligned, options this strategy's or its decorator's): what a subclass overrides to choose its batch
        otherwise, and what a decorator (and the learner's query) calls. By default :meth:`acquisition_scores`,
        then :meth:`select`; a subclass that overrides :meth:`acquire` itself is called through it."""
        if type(self).acquire is not Strategy.acquire:
            return self.acquire(estimator, X_pool, n_instances, **kwargs)
        return self._choose(estimator, X_pool, n_instances, **kwargs)

    def _scores(self, estimator, X_pool, random_state, kwargs) -> np.ndarray:
        scores = np.asarray(self.acquisition_scores(estimator, X_pool, random_state=random_state, **kwargs),
                            dtype=np.float64).reshape(-1)
        if len(scores) != len(X_pool):
            raise ValueError(f"{type(self).__name__}.acquisition_scores gave {len(scores)} scores for "
                             f"{len(X_pool)} pool rows")
        return scores

    def _choose(self, estimator, X_pool, n_instances: int, *, random_tie_break: bool = False,
                random_state=None, **kwargs) -> Acquisition:
        """This base's choice on checked input: :meth:`acquisition_scores`, then :meth:`select`."""
        scores = self._scores(estimator, X_pool, random_state, kwargs)
        idx, top = self.select(scores, n_instances, random_tie_break=random_tie_break,
                               random_state=random_state)
        return Acquisition(idx, top)

    def pool_scores(self, estimator, X_pool, n_instances: int = 1, **kwargs) -> Optional[PoolScores]:
        """Every pool point's score and the ranking, for decorators (None if the strategy chooses its batch
        jointly): check the input, then :meth:`pool_scores_checked`. A strategy that implements
        :meth:`acquisition_scores` and keeps :meth:`acquire_checked` has them: ``order`` is :meth:`select`
        over the whole pool. One that overrides it has none, unless it overrides :meth:`pool_scores_checked`.

        Returns
        -------
        PoolScores or None
        """
        X_pool, n_instances = check_call(self, X_pool, n_instances, kwargs)
        if type(self).pool_scores_checked is Strategy.pool_scores_checked:  # as acquire's
            return self._pool_scores(estimator, X_pool, n_instances, **kwargs)
        return self.pool_scores_checked(estimator, X_pool, n_instances, **kwargs)

    def pool_scores_checked(self, estimator, X_pool, n_instances: int, **kwargs) -> Optional[PoolScores]:
        """:meth:`pool_scores` on checked values (as :meth:`acquire_checked` takes them): what a decorator
        calls on the strategy it wraps, and what a subclass with pool scores of its own overrides."""
        if type(self).pool_scores is not Strategy.pool_scores:  # a subclass's own, which checks its input
            return self.pool_scores(estimator, X_pool, n_instances, **kwargs)
        return self._pool_scores(estimator, X_pool, n_instances, **kwargs)

    def _pool_scores(self, estimator, X_pool, n_instances: int, *, random_tie_break: bool = False,
                     random_state=None, **kwargs) -> Optional[PoolScores]:
        if _own_selection(self) or type(self).acquisition_scores is Strategy.acquisition_scores:
            return None
        scores = self._scores(estimator, X_pool, random_state, kwargs)
        order, _ = self.select(scores, len(scores), random_tie_break=random_tie_break, random_state=random_state)
        return PoolScores(scores, np.asarray(order, dtype=np.intp))

    def acquisition_scores(self, estimator, X_pool, **kwargs) -> np.ndarray:
        """One score per row of the (checked) pool ``X_pool``, larger is more informative, from the fitted
        ``estimator``; ``**kwargs`` are ``random_state`` and the options of :meth:`acquire`. Returns an
        ndarray of shape (N,)."""
        raise NotImplementedError(f"{type(self).__name__} must implement acquisition_scores() or acquire_checked()")

    def select(self, scores, n_instances: int, *, random_tie_break: bool = False,
               random_state=None) -> Tuple[np.ndarray, np.ndarray]:
        """The batch: the ``n_instances`` best scores (:func:`select_top`); ``n_instances`` is checked."""
        return _top(scores, n_instances, random_tie_break, random_state)

    def plan_chunks(self, estimator, n_instances: int, pool, *, random_state=None, n_candidates=None, **options):
        """How a query of this strategy reduces over a pool read in chunks (on a cluster).

        Returns a :class:`~skdbal.acquisition.base.ChunkPlan`: how to score a chunk, keep its
        candidates and merge theirs, which :func:`skdbal.dask.query_pool` and
        :func:`~skdbal.acquisition.base.acquire_in_chunks` run. This default refuses; a strategy
        that can say overrides it, as :class:`~skdbal.acquisition.base.SamplesStrategy` does for
        every strategy that scores rows one by one (a subclass of your own included).

        Parameters
        ----------
        estimator : estimator
            The fitted model.
        n_instances : int
            The batch size, already checked against the rows not excluded.
        pool : ChunkedPool
            Its rows not excluded, chunks and pool-aligned keywords; ``pool.rows`` reads rows.
        random_state, n_candidates, **options :
            As for :meth:`ChunkedPool.acquire <skdbal.acquisition.base.ChunkedPool.acquire>`.

        Returns
        -------
        ChunkPlan

        Raises
        ------
        TypeError
            If the query needs every score in one place; the message names the strategy.

        Examples
        --------
        >>> import numpy as np
        >>> from skdbal.acquisition import badge, max_entropy
        >>> from skdbal.acquisition.base import ChunkedPool
        >>> class Fixed:
        ...     def predict_proba(self, X):
        ...         return np.full((len(X), 2), 0.5)
        >>> max_entropy.plan_chunks(Fixed(), 2, ChunkedPool([5])).pointwise    # top-k of a score per row
        True
        >>> badge.plan_chunks(None, 2, ChunkedPool([5]))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        TypeError: BADGE does not say how its query reduces over a pool read in chunks ...; not BADGE
        """
        raise TypeError(chunk_refusal(self))


class StrategyDecorator(Strategy):
    """Base class of strategy decorators: a strategy that wraps another.

    A decorator takes any strategy (one of ours, a plain callable such as
    modAL's, or another decorator) and is itself a strategy with the same
    protocol, so decorators stack in any order. This base passes every call
    through unchanged; a subclass overrides :meth:`~Strategy.acquire_checked` (to filter the
    candidates, it calls :func:`acquire_among` with ``check_input=False``; to change the selection, it
    scores with the wrapped strategy's :meth:`~Strategy.pool_scores_checked` and selects itself), and is
    given checked input: the wrapped strategy is not checked again. The wrapped
    strategy's parameters are nested in ``get_params`` as
    ``strategy__<name>``.

    Parameters
    ----------
    strategy : Strategy or callable
        The strategy to decorate.

    Examples
    --------
    >>> from skdbal.acquisition import BALD
    >>> from skdbal.acquisition.base import StrategyDecorator
    >>> StrategyDecorator(BALD(n_samples=50)).get_params()["strategy__n_samples"]
    50
    """

    name_params: Tuple[str, ...] = ()  # a registered name's parameters after the strategy: filter(bald,0.1)

    def __init__(self, strategy):
        self.strategy = strategy

    @property
    def model_kind(self) -> str:  # type: ignore[override]
        """The wrapped strategy's :attr:`Strategy.model_kind`: a decorator reads the model it reads."""
        return as_strategy(self.strategy).model_kind

    def check_params(self) -> None:
        """Refuse a bad parameter of this decorator with a ``ValueError``; this base has none to check.

        Called when a name is read (:func:`~skdbal.acquisition.get_strategy`: ``"filter(bald,2)"`` is refused
        there, not at the first query) and by a subclass's :meth:`~Strategy.acquire_checked`. A decorator of
        your own with parameters overrides it.
        """

    def call_options(self) -> Optional[FrozenSet[str]]:
        """The wrapped strategy's options and this decorator's own (None if the
        wrapped strategy's are unknown)."""
        inner = as_strategy(self.strategy).call_options()
        if inner is None:
            return None
        own = (_keyword_names(type(self).acquire) | _keyword_names(type(self).acquire_checked)) - {"y_pool"}
        return frozenset((own | inner) - _PROTOCOL_KEYWORDS)

    def _choose(self, estimator, X_pool, n_instances: int, **kwargs) -> Acquisition:
        """This base's choice on checked input: the wrapped strategy's (it changes nothing)."""
        return as_strategy(self.strategy).acquire_checked(estimator, X_pool, n_instances, **kwargs)

    def _pool_scores(self, estimator, X_pool, n_instances: int, **kwargs) -> Optional[PoolScores]:
        """The wrapped strategy's pool scores, for a decorator that keeps its selection (this base,
        :func:`~skdbal.acquisition.to_modal`'s); None for one that overrides
        :meth:`~Strategy.acquire_checked` without overriding :meth:`~Strategy.pool_scores_checked`."""
        if _own_selection(self):
            return None
        return as_strategy(self.strategy).pool_scores_checked(estimator, X_pool, n_instances, **kwargs)

    def plan_chunks(self, estimator, n_instances: int, pool, **kwargs):
        """The wrapped strategy's plan, for a decorator that keeps its selection
        (this base, :func:`~skdbal.acquisition.to_modal`'s); refused for one that overrides
        :meth:`~Strategy.acquire_checked` without overriding this method."""
        if _own_selection(self):
            raise TypeError(chunk_refusal(self))
        return as_strategy(self.strategy).plan_chunks(estimator, n_instances, pool, **kwargs)


class CallableStrategy(Strategy):
    """A plain strategy function, such as modAL's, as a :class:`Strategy`.

    The function is called as modAL's learner calls it, ``func(estimator,
    X_pool, n_instances=n_instances, **kwargs)``, with the caller's keywords.
    No signature is inspected: it gets a ``random_state`` only when it says
    it takes one (``takes_random_state=True``), since modAL's strategies
    forward unknown keywords to ``predict_proba``. It may return
    ``(indices, scores)`` or bare indices. A learner with a growing labelled
    set (``X_training_``, as :class:`~skdbal.ActiveLearner`) is shown under
    modAL's names: ``X_training``/``y_training`` are the labels so far,
    ``estimator`` the fitted model and ``on_transformed`` False.

    Parameters
    ----------
    func : callable
        ``func(estimator, X_pool, n_instances=..., **kwargs)``.
    takes_random_state : bool, default=False
        Pass ``random_state`` on (the learner then draws one per query, so
        a seeded learner makes the same picks every run).
    takes_pool_keywords : bool, default=False
        Pass the pool-aligned keywords (``*_pool``, such as a filter's
        ``y_pool``) on; by default they are kept from the function, which
        modAL's would forward to ``predict_proba``.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.acquisition.base import CallableStrategy
    >>> first = CallableStrategy(lambda est, X, n_instances=1: np.arange(n_instances))
    >>> first.acquire(None, np.zeros((5, 2)), 2).indices.tolist()
    [0, 1]
    """

    def __init__(self, func: Callable, *, takes_random_state: bool = False, takes_pool_keywords: bool = False):
        self.func = func
        self.takes_random_state = takes_random_state
        self.takes_pool_keywords = takes_pool_keywords

    def call_options(self) -> None:
        """Unknown: the function checks its own keywords."""
        return None

    def acquire(self, estimator, X_pool, n_instances: int = 1, **kwargs) -> Acquisition:
        if not self.takes_random_state:
            kwargs.pop("random_state", None)
        if not self.takes_pool_keywords:
            kwargs = {k: v for k, v in kwargs.items() if not k.endswith("_pool")}
        if not callable(self.func):
            raise TypeError(f"query strategy must be callable; got {self.func!r}")
        if hasattr(estimator, "X_training_") and not isinstance(estimator, _ModalView):
            estimator = _ModalView(estimator)
        result = self.func(estimator, X_pool, n_instances=n_instances, **kwargs)
        idx, scores = check_query_result(result, len(X_pool),
                                         name=getattr(self.func, "__name__", "query_strategy"))
        return Acquisition(idx, scores)


def as_strategy(strategy) -> Strategy:
    """``strategy`` itself if it is a :class:`Strategy`, else wrapped in :class:`CallableStrategy`.

    Parameters
    ----------
    strategy : Strategy or callable

    Returns
    -------
    Strategy

    Raises
    ------
    TypeError
        If ``strategy`` is not callable.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.acquisition import bald
    >>> from skdbal.acquisition.base import as_strategy
    >>> as_strategy(bald) is bald
    True
    >>> first = as_strategy(lambda est, X, n_instances=1: np.arange(n_instances))
    >>> type(first).__name__, first.acquire(None, np.zeros((4, 2)), 2).indices.tolist()
    ('CallableStrategy', [0, 1])
    >>> as_strategy("bald")
    Traceback (most recent call last):
        ...
    TypeError: query_strategy must be callable; got 'bald'
    """
    if isinstance(strategy, Strategy):
        return strategy
    if not callable(strategy):
        raise TypeError(f"query_strategy must be callable; got {strategy!r}")
    return CallableStrategy(strategy)


def pool_scores_of(strategy, estimator, X_pool, n_instances: int = 1, **kwargs) -> Optional[PoolScores]:
    """``strategy.pool_scores(...)``, or None for a strategy without pool scores.

    Plain callables (modAL's functions) and strategies that choose their
    batch jointly have none.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.acquisition import random
    >>> from skdbal.acquisition.base import pool_scores_of
    >>> pool_scores_of(random, None, np.zeros((4, 1)), 2, random_state=0).order.tolist()
    [1, 2, 0, 3]
    >>> pool_scores_of(lambda est, X, n_instances=1: np.arange(n_instances), None, np.zeros((4, 1))) is None
    True
    """
    method = getattr(strategy, "pool_scores", None)
    if not isinstance(strategy, Strategy) or method is None:
        return None
    return method(estimator, X_pool, n_instances, **kwargs)


def acquire_among(strategy, estimator, X_pool, candidates, n_instances: int = 1, *, check_input: bool = True,
                  **kwargs) -> Acquisition:
    """Let ``strategy`` choose among the rows ``candidates`` of ``X_pool``.

    The one place where a pool is subset for a strategy: the learner uses it
    for its unlabelled rows and ``pool_subsample``, a decorator for the
    candidates it passes to the strategy it wraps. Pool-aligned keywords
    (``*_pool``) are subset with the same indices, and the returned indices,
    like every ``*_indices`` entry of ``info``, are mapped back to positions
    in ``X_pool``. A pool that lives elsewhere (a dask array) goes to its
    driver (:func:`pool_backend`), which chooses among the candidates in pool
    order: the local choice among them, sorted, wherever its result is exact.

    Parameters
    ----------
    strategy : Strategy or callable
        Plain callables are wrapped by :class:`CallableStrategy`.
    estimator : estimator
        Passed to the strategy.
    X_pool : array-like of shape (N, ...)
        The whole pool.
    candidates : array-like of int
        Positions in ``X_pool`` the strategy may choose from.
    n_instances : int, default=1
        How many to choose.
    check_input : bool, default=True
        False for a caller that has checked the pool, ``candidates``,
        ``n_instances`` and the ``*_pool`` keywords (the learner's query, a
        decorator): the strategy is then called on checked values
        (:meth:`Strategy.acquire_checked`), its options only checked.
    **kwargs :
        Passed to the strategy; ``*_pool`` keywords must be aligned with
        ``X_pool``.

    Returns
    -------
    Acquisition
        With indices into ``X_pool``.

    Raises
    ------
    TypeError, ValueError
        If ``candidates`` or the strategy's indices are not unique integers
        in range, or a pool-aligned keyword has the wrong length.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.acquisition import random
    >>> from skdbal.acquisition.base import acquire_among
    >>> acq = acquire_among(random, None, np.zeros((10, 2)), [7, 8, 9], 2, random_state=0)
    >>> set(acq.indices.tolist()) <= {7, 8, 9}
    True
    """
    strategy = as_strategy(strategy)
    if check_input:
        candidates = check_candidates(candidates, len(X_pool))
    backend = pool_backend(X_pool)
    if backend is not None:  # the pool's driver scores it where it lives, leaving out the other rows
        return backend(strategy, estimator, X_pool, candidates, n_instances, **kwargs)
    if check_input:
        kwargs = subset_pool_kwargs(kwargs, candidates, len(X_pool))
        acq = strategy.acquire(estimator, take_rows(X_pool, candidates), n_instances, **kwargs)
    else:
        kwargs = subset_pool_kwargs(kwargs, candidates)   # checked by the caller
        check_options(strategy, kwargs)
        acq = strategy.acquire_checked(estimator, take_rows(X_pool, candidates), n_instances, **kwargs)
    idx, _ = check_query_result((acq.indices, None), len(candidates))
    info = {k: candidates[np.asarray(v, dtype=np.intp)] if k.endswith("_indices") else v
            for k, v in acq.info.items()}
    return Acquisition(candidates[idx], acq.scores, info)


def _own_selection(strategy) -> bool:
    """Whether ``strategy``'s class chooses its batch itself: it overrides either entry of :class:`Strategy`."""
    cls = type(strategy)
    return cls.acquire is not Strategy.acquire or cls.acquire_checked is not Strategy.acquire_checked


class SamplesStrategy(Strategy):
    """Base class: score each pool point by a measure of its predictive samples.

    The pool is read in chunks of ``chunk_size`` rows, so the ``(T, N, C)``
    samples never exist for the whole pool; each chunk's samples come from
    :meth:`skdbal.predictive.Predictive.proba_samples`. Subclasses set:

    ``measure``
        ``(T, n, C) -> (n,)``, larger is more informative (a function of
        :mod:`skdbal.uncertainty`).
    ``deterministic_measure``
        Used instead for a deterministic model (one pass), or None.
    ``needs_stochastic``
        Warn with :class:`DegenerateScoreWarning` when a deterministic model
        is scored by ``measure`` (it is then constant).

    Parameters
    ----------
    chunk_size : int, default=2048
        Pool rows scored at a time; bounds memory to ``T · chunk_size · C``
        floats (per worker).
    n_jobs : int, optional
        Chunks scored in parallel with joblib. Each chunk is seeded as in a
        serial call, so the scores do not depend on ``n_jobs``.
    n_samples : int, optional
        Number of passes ``T``, overriding the model's own.

    Each of these may also be given when calling the strategy, which
    overrides the value set here.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.acquisition.base import SamplesStrategy
    >>> from skdbal.uncertainty import least_confidence
    >>> class LeastConfidence(SamplesStrategy):
    ...     measure = staticmethod(least_confidence)
    ...     needs_stochastic = False            # meaningful for one pass too
    >>> class Fixed:                            # a deterministic classifier
    ...     def predict_proba(self, X):
    ...         return np.array([[0.9, 0.1], [0.5, 0.5], [1.0, 0.0]])
    >>> LeastConfidence().acquisition_scores(Fixed(), np.zeros((3, 1))).round(4).tolist()
    [0.1, 0.5, 0.0]
    >>> LeastConfidence()(Fixed(), np.zeros((3, 1)), n_instances=1)[0].tolist()
    [1]
    """

    measure: Callable = None
    deterministic_measure: Optional[Callable] = None
    needs_stochastic: bool = True

    def __init__(self, *, chunk_size: int = DEFAULT_CHUNK_SIZE, n_jobs: Optional[int] = None,
                 n_samples: Optional[int] = None):
        self.chunk_size = chunk_size
        self.n_jobs = n_jobs
        self.n_samples = n_samples

    def measure_for(self, predictive: Predictive) -> Callable:
        """The measure that scores ``predictive``'s samples (warns if it is constant)."""
        # a function set on a subclass without staticmethod is bound to self: unbind it
        measure = _unbound(self.measure, self)
        if predictive.stochastic and predictive.n_samples == 1 and self.needs_stochastic:
            warnings.warn(
                f"n_samples=1: {predictive.name} is scored with one pass, so "
                f"{getattr(measure, '__name__', 'this score')} is the same for every point; ask for more passes",
                DegenerateScoreWarning, stacklevel=5)
        if not predictive.stochastic:
            if self.deterministic_measure is not None:
                return _unbound(self.deterministic_measure, self)
            if self.needs_stochastic:
                warnings.warn(
                    f"{predictive.name} gives one deterministic pass, so it is scored as T=1 and "
                    f"{getattr(measure, '__name__', 'this score')} is the same for every point; "
                    "use an MC estimator", DegenerateScoreWarning, stacklevel=5)
        return measure

    def acquisition_scores(self, estimator, X_pool, *, chunk_size: Optional[int] = None, n_jobs: Optional[int] = None,
              n_samples: Optional[int] = None, **kwargs) -> np.ndarray:
        """Scores of every pool row, chunk by chunk.

        Parameters
        ----------
        estimator : estimator
            A fitted model, read through :func:`~skdbal.predictive.as_predictive`.
        X_pool : array-like of shape (N, ...)
        chunk_size, n_jobs, n_samples : optional
            Override the parameters of the same names.
        **kwargs :
            Ignored.

        Returns
        -------
        scores : ndarray of shape (N,), float64
        """
        n_samples = self.n_samples if n_samples is None else n_samples
        predictive = as_predictive(estimator, n_samples=n_samples)
        scorer = _ChunkScorer(predictive, self.measure_for(predictive))
        return map_chunks(scorer, X_pool, chunk_size=self.chunk_size if chunk_size is None else chunk_size,
                          n_jobs=self.n_jobs if n_jobs is None else n_jobs)

    def plan_chunks(self, estimator, n_instances: int, pool, *, random_state=None, n_candidates=None, **options):
        """The top ``k`` of a score per row: each chunk sends its best ``k``
        (:class:`~skdbal.acquisition.base.PointwisePlan`), so a strategy of
        your own runs on a cluster as it is. Refused for a subclass that
        overrides ``select`` or ``acquire`` (its batch is not the top ``k``).

        A model whose samples of a row depend on the other rows sampled with
        it (not row-keyed, :mod:`skdbal.predictive`) gives picks that change
        with the chunking: the plan is not ``exact``, with a warning.
        """
        if type(self).select is not Strategy.select or _own_selection(self):
            return super().plan_chunks(estimator, n_instances, pool, **options)
        return self.samples_plan(estimator, n_instances, options)

    def samples_plan(self, estimator, n_instances: int, options: dict, *, row_keyed: bool = True,
                     measure: bool = True) -> PointwisePlan:
        """The top ``n_instances`` of :meth:`acquisition_scores` over a pool read in chunks, scored with
        ``options`` (per-call options; ``n_jobs`` dropped, a chunk being one worker's), whatever this class's
        ``select`` or ``acquire``: what :meth:`plan_chunks` returns, and the pre-selection of a strategy that
        chooses among the best of these scores (BatchBALD's, among the best BALD). Its warnings are said once,
        here: a constant score (``measure``), samples that are not row-keyed (``row_keyed``: the plan is then
        not exact). Returns a :class:`~skdbal.acquisition.base.PointwisePlan`."""
        predictive = as_predictive(estimator, n_samples=options["n_samples"] if "n_samples" in options
                                   else self.n_samples)
        if measure:
            self.measure_for(predictive)
        plan = PointwisePlan(n_instances, self, estimator, dict(options, n_jobs=None))
        if row_keyed:
            check_row_keyed(plan, predictive)
        return plan


class MeasureStrategy(SamplesStrategy):
    """A pointwise strategy from any measure of the samples: write your own.

    Parameters
    ----------
    measure : callable
        ``(T, n, C) -> (n,)``, larger is more informative.
    deterministic_measure : callable, optional
        Used instead for a deterministic model (one pass).
    needs_stochastic : bool, default=True
        Warn when a deterministic model is scored by ``measure``.
    chunk_size, n_jobs, n_samples :
        As for :class:`SamplesStrategy`.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from skdbal.acquisition.base import MeasureStrategy
    >>> from skdbal.uncertainty import predictive_entropy
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0]])
    >>> clf = LogisticRegression().fit(X, [0, 0, 1, 1])
    >>> entropy_sampling = MeasureStrategy(predictive_entropy, needs_stochastic=False)
    >>> idx, _ = entropy_sampling(clf, X, n_instances=2)
    >>> sorted(idx.tolist())                 # the two points next to the boundary
    [1, 2]
    """

    def __init__(self, measure: Callable, *, deterministic_measure: Optional[Callable] = None,
                 needs_stochastic: bool = True, chunk_size: int = DEFAULT_CHUNK_SIZE,
                 n_jobs: Optional[int] = None, n_samples: Optional[int] = None):
        super().__init__(chunk_size=chunk_size, n_jobs=n_jobs, n_samples=n_samples)
        self.measure = measure
        self.deterministic_measure = deterministic_measure
        self.needs_stochastic = needs_stochastic
