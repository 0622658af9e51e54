"""A learner's simulation, :class:`SimulationMixin`: the one loop (:class:`~skdbal.loop.ActiveLearningLoop`)
run on a pool against known labels or an oracle, from a checked start.

Its private methods after :meth:`~SimulationMixin.simulate` check what it is given, in the order it
checks them, before anything changes. This module never imports the learner: the mixin declares
what it needs of the class it is mixed into.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, ContextManager, List, Optional

import joblib
import numpy as np
from sklearn.base import is_regressor
from sklearn.utils import check_random_state

from .._validation import check_n_instances, check_pool, is_lazy, pool_kwargs
from ..accuracy_monitor import reservoir_size
from ..initial import balanced_random
from ..loop import ActiveLearningLoop, MemoryJournal, check_monitor, check_stopping, evaluate
from ..oracles import KnownLabels
from ._inputs import check_y


class SimulationMixin:
    """Mixin for a learner that simulates active learning: :meth:`simulate`, the loop run against known labels.

    It gives :class:`~skdbal.ActiveLearner` its :meth:`simulate`: the pool becomes the learner's own,
    and the one loop (:class:`~skdbal.loop.ActiveLearningLoop`) queries, labels and retrains against
    an oracle, after every input is checked. Public, as scikit-learn's mixins are, so that a learner
    of one's own with the same members simulates the same way.

    The class it is mixed into drives the loop (``query``, ``label`` and ``refit``, as
    :class:`~skdbal.loop.ActiveLearningLoop` calls them) and provides the members declared below.

    Attributes
    ----------
    random_state : int, RandomState instance or None
        The host's parameter: seeds the initial set (and, through ``rng_``, the queries).
    verbose : bool
        The host's parameter: show a progress bar.
    rng_ : numpy.random.RandomState
        Set here: the generator the initial set was drawn from, which the queries continue.
    history_ : list of dict
        Set here: one row per step of the simulation, grown by a warm start.
    stopped_by_ : list of str or None
        Set here: the stopping rules that ended the last simulation, None when none did.
    labelled_idx_ : ndarray of int
        The host's: every pool index labelled, in order (read by a warm start).
    n_pool_ : int
        The host's: the number of rows of its pool (read by a warm start).
    _pool_hash : str
        Set here: a hash of the simulated pool and labels, which a warm start must match.
    _check_params : callable () -> None
        The host's check of its parameters.
    _template : callable () -> estimator
        The host's model that the next retrain clones.
    _make_template : callable (y=None) -> estimator
        The host's model made anew, its classes taken from ``y`` when given.
    _unchanged_on_error : callable () -> context manager
        The host's guard that puts every attribute back if its block raises.
    _reset_pool : callable (X, y, ids, template) -> learner
        The host's: own the pool ``X`` (labels ``y``, ``missing_label`` where unknown), forgetting
        every label and the model.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.linear_model import LogisticRegression
    >>> from skdbal.acquisition import max_entropy
    >>> from skdbal.learner import ActiveLearner, SimulationMixin
    >>> issubclass(ActiveLearner, SimulationMixin)
    True
    >>> X, y = load_iris(return_X_y=True)
    >>> learner = ActiveLearner(LogisticRegression(max_iter=500), max_entropy, random_state=0, verbose=False)
    >>> history = learner.simulate(X, y, n_queries=2, n_instances=5)
    >>> [(row["step"], row["n_labels"], len(row["query_indices"])) for row in history]
    [(0, 6, 6), (1, 11, 5), (2, 16, 5)]
    >>> more = learner.simulate(X, y, n_queries=1, n_instances=5, warm_start=True)   # continues it
    >>> [row["n_labels"] for row in more], len(learner.labelled_idx_)
    ([6, 11, 16, 21], 21)
    """

    random_state: Any
    verbose: bool
    rng_: np.random.RandomState
    history_: List[dict]
    _pool_hash: str
    _check_params: Callable[[], None]
    _template: Callable[[], Any]
    _make_template: Callable[..., Any]
    _unchanged_on_error: Callable[[], ContextManager[None]]
    _reset_pool: Callable[..., Any]
    if TYPE_CHECKING:  # the host's read-only properties

        @property
        def labelled_idx_(self) -> np.ndarray: ...

        @property
        def n_pool_(self) -> int: ...

    def simulate(
        self,
        X_pool,
        y_pool,
        n_queries: int,
        n_instances: int = 1,
        *,
        initial_idx=None,
        n_initial_per_class: Optional[int] = None,
        X_test=None,
        y_test=None,
        warm_start: bool = False,
        query_kwargs: Optional[dict] = None,
        oracle=None,
        pool_ids=None,
        stopping=None,
        stop_on: str = "any",
        monitor=None,
    ) -> List[dict]:
        """Run ``n_queries`` rounds of query → label → retrain against an oracle.

        The pool becomes the learner's own (:meth:`set_pool`), and the one
        loop, :class:`~skdbal.loop.ActiveLearningLoop`, runs against
        :class:`~skdbal.oracles.KnownLabels` ``(y_pool)``, or ``oracle``.
        Afterwards ``query(n_instances=...)`` ranks the rows still
        unlabelled.

        Parameters
        ----------
        X_pool, y_pool : array-like
            The pool and its labels (the oracle). A dask array is refused (its
            warm start hashes the pool); run :class:`~skdbal.loop.ActiveLearningLoop`
            with :class:`~skdbal.oracles.KnownLabels` over ``set_pool(X_pool)``.
        n_queries : int
            Number of acquisition rounds.
        n_instances : int, default=1
            Points acquired per round.
        initial_idx : array-like of int, optional
            Pool indices labelled first. By default ``n_initial_per_class``
            random points per class (:func:`skdbal.initial.balanced_random`);
            for 2-d targets (one-hot labels for a regressor) the class of a
            row is its argmax. A regressor with continuous 1-d targets needs
            ``initial_idx``.
        n_initial_per_class : int, optional
            Points per class of the random initial set; 2 when neither it nor
            ``initial_idx`` is given. Refused (``ValueError``) together with
            ``initial_idx`` or ``warm_start``, which fix the initial set.
        X_test, y_test : array-like, optional
            Evaluated after every round.
        warm_start : bool, default=False
            Continue a previous :meth:`simulate` on the same pool (the same
            rows and labels, checked by a hash): its labels stay labelled,
            are never queried again, and ``history_`` grows.
            Otherwise the simulation starts afresh from the initial set and
            forgets earlier labels (as :meth:`fit` does).
        query_kwargs : dict, optional
            Keywords for every query. Those named ``*_pool`` are aligned with
            ``X_pool`` and subset with the unlabelled rows and
            ``pool_subsample``: for example ``{"y_pool": y_pool}`` gives
            :func:`~skdbal.acquisition.noise_filter` the annotator's labels.
        oracle : Oracle, optional
            Who answers, instead of the known labels ``y_pool`` (which may
            then be None): a :class:`~skdbal.oracles.NoisyAnnotator`, say.
            Without ``y_pool`` the initial set is drawn from the oracle's
            ``pool_labels()``, or must be given as ``initial_idx``.
        pool_ids : array-like of shape (N,), optional
            Identifiers of the pool rows (see :meth:`set_pool`).
        stopping : StoppingRule, optional
            A stopping rule (:mod:`skdbal.stopping`), as
            :class:`~skdbal.loop.ActiveLearningLoop` takes it: ``n_queries``
            becomes a maximum, every row carries the rules' verdicts
            (``stop_<name>``, ``stop_<name>_value``, ``stop_reason``), and
            ``stopped_by_`` names the rules that ended the run (None when
            none did). The object given is not changed. A warm start draws
            a new stop set only when the first run had none, and restarts
            the rules' windows from the last model.
        stop_on : {"any", "record"}, default="any"
            ``"record"`` writes the verdicts and runs all ``n_queries``.
        monitor : bool or AccuracyMonitor, optional
            Estimate the accuracy at every step from the labels bought, as
            :class:`~skdbal.loop.ActiveLearningLoop` does: every row gets
            ``estimate_acc``, ``estimate_lo``, ``estimate_hi``,
            ``estimate_kind``, ``estimate_biased`` and ``estimate_n`` (None at
            step 0). Unbiased, with an interval, for a stochastic batch
            strategy; marked ``estimate_biased`` for a top-k one. A warm start
            begins a fresh monitor.

        Returns
        -------
        history : list of dict
            One row per step (step 0 is the initial fit): ``step``,
            ``n_labels`` (the whole labelled set), ``accuracy`` (``rmse`` for
            regressors, the root mean square over rows and outputs, plus the
            argmax ``accuracy`` for 2-d one-hot targets) when a test set is
            given, ``query_indices`` (indices into the original pool),
            ``query_time`` and ``fit_time`` (s), and whatever the strategy
            reported about the query (:attr:`Acquisition.info`). Also stored
            as ``history_``; ``labelled_idx_`` holds every pool index
            labelled, in order. If a step fails, both keep every step that
            completed before the error is raised.

        Notes
        -----
        If the estimator has a ``classes`` parameter left at ``None`` (as
        :class:`~skdbal.MCDropoutClassifier` by default), the simulation sets
        it to the classes of ``y_pool`` on the clone it trains
        (``template_``), so that the output size is stable.
        """
        # ---- validate everything before changing anything
        self._check_params()
        if is_lazy(X_pool):  # its warm start hashes the whole pool, which would read it all to this machine
            raise TypeError("simulate() reads the whole pool (its warm start checks a hash of it); a pool on a "
                            "cluster (a dask array) is simulated by the loop: learner.set_pool(X_pool), then "
                            "skdbal.loop.ActiveLearningLoop(learner, skdbal.oracles.KnownLabels(y_pool)) and its "
                            "start(initial_idx) and run(n_queries)")
        X_pool = check_pool(X_pool)
        n_pool = len(X_pool)
        y_pool, oracle = self._check_answers(n_pool, y_pool, oracle)
        X_test, y_test = self._check_test_set(X_pool, y_pool, X_test, y_test)
        if isinstance(n_queries, bool) or not isinstance(n_queries, (int, np.integer)) or n_queries < 0:
            raise ValueError(f"n_queries must be an int >= 0; got {n_queries!r}")
        n_instances = check_n_instances(n_instances, n_pool)
        check_stopping(stopping)
        own_monitor = check_monitor(monitor)
        if stop_on not in ("any", "record"):
            raise ValueError(f"stop_on must be 'any' or 'record'; got {stop_on!r}")
        query_kwargs = dict(query_kwargs or {})
        pool_kwargs(query_kwargs, n_pool)  # *_pool keywords must be aligned with the pool
        if y_pool is None and initial_idx is None and not warm_start:
            raise ValueError("the oracle does not know its labels in advance, so the initial set cannot be "
                             "drawn by class: pass initial_idx")
        rng = self.rng_ if warm_start and hasattr(self, "rng_") else check_random_state(self.random_state)
        rng_state = rng.get_state()
        pool_hash = joblib.hash((X_pool, y_pool))
        try:
            already, initial_idx = self._check_start(n_pool, y_pool, initial_idx, n_initial_per_class,
                                                     warm_start, rng, pool_hash)
            left = n_pool - len(already)
            held = 0   # the audit reservoir, which acquisition never draws from
            if own_monitor is not None and own_monitor.audit_share > 0 and left >= 2:
                stored = self.history_[0].get("reservoir") if warm_start and self.history_ else None
                held = len(stored) if stored is not None else reservoir_size(left, own_monitor.reservoir_share)
            if n_queries * n_instances > left - held:
                raise ValueError(f"{n_queries} queries of {n_instances} need {n_queries * n_instances} "
                                 f"unlabelled pool points; only {left - held} are left"
                                 + (f" outside the audit reservoir of {held}" if held else ""))
        except BaseException:
            rng.set_state(rng_state)
            raise

        evaluation = None if X_test is None else (lambda learner: evaluate(learner, X_test, y_test))
        stop = dict(stopping=stopping, stop_on=stop_on, monitor=monitor,
                    stop_seed=self.random_state if isinstance(self.random_state, (int, np.integer))
                    and not isinstance(self.random_state, bool) else None)
        if warm_start:
            loop = ActiveLearningLoop(self, oracle, n_instances=n_instances, evaluate=evaluation,
                                      journal=MemoryJournal(self.history_), query_kwargs=query_kwargs,
                                      verbose=self.verbose, **stop)
            loop.prime()
        else:
            try:
                with self._unchanged_on_error():  # nothing is kept of a simulation that could not start
                    self._reset_pool(X_pool, None, pool_ids, self._make_template(y_pool))
                    loop = ActiveLearningLoop(self, oracle, n_instances=n_instances, evaluate=evaluation,
                                              query_kwargs=query_kwargs, verbose=self.verbose, **stop)
                    loop.start(initial_idx)
            except BaseException:
                rng.set_state(rng_state)
                raise
            self.rng_ = rng  # the initial set was drawn from it: queries continue it
            self.history_ = loop.history
            self._pool_hash = pool_hash
        self.stopped_by_ = None
        try:
            loop.run(n_queries)  # a failed step keeps the rows before it (history_ is the journal's list)
        finally:
            self.stopped_by_ = loop.stopped_by_
        return loop.history


    def _check_answers(self, n_pool: int, y_pool, oracle):
        """``(y_pool, oracle)``: the known labels (or the oracle's, if it knows them; else None) and
        who answers (:class:`~skdbal.oracles.KnownLabels` of ``y_pool`` unless an oracle is given)."""
        if oracle is None:
            if y_pool is None:
                raise ValueError("pass y_pool (the known labels) or an oracle")
            y_pool = check_y(y_pool, self._template(), "y_pool")
            if len(y_pool) != n_pool:
                raise ValueError(f"X_pool and y_pool have inconsistent lengths: {n_pool} and {len(y_pool)}")
            return y_pool, KnownLabels(y_pool)
        if not (callable(getattr(oracle, "request", None)) and callable(getattr(oracle, "collect", None))):
            raise TypeError(f"oracle must have request() and collect() (skdbal.oracles.Oracle); "
                            f"got {type(oracle).__name__}")
        if y_pool is not None:
            raise ValueError("pass y_pool or an oracle, not both: the oracle gives the labels")
        known = oracle.pool_labels() if callable(getattr(oracle, "pool_labels", None)) else None
        if known is not None:
            y_pool = check_y(known, self._template(), "the oracle's pool_labels()")
            if len(y_pool) != n_pool:
                raise ValueError(f"the oracle knows {len(y_pool)} labels, but X_pool has {n_pool} rows")
        return y_pool, oracle


    def _check_test_set(self, X_pool, y_pool, X_test, y_test):
        """``(X_test, y_test)``, both or neither, checked against the pool: the same per-sample
        shape, and for a classifier no label that ``y_pool`` (when known) lacks."""
        if (X_test is None) != (y_test is None):
            raise ValueError("pass both X_test and y_test, or neither")
        if X_test is None:
            return X_test, y_test
        X_test = check_pool(X_test, "X_test")
        y_test = check_y(y_test, self._template(), "y_test")
        if len(X_test) != len(y_test):
            raise ValueError(f"X_test and y_test have inconsistent lengths: {len(X_test)} and {len(y_test)}")
        if np.shape(X_test)[1:] != X_pool.shape[1:]:
            raise ValueError(f"X_test has per-sample shape {np.shape(X_test)[1:]}, "
                             f"but X_pool has {X_pool.shape[1:]}")
        if y_pool is not None and not is_regressor(self._make_template()) and y_test.ndim == 1:
            numeric = {y_test.dtype.kind, y_pool.dtype.kind} <= set("biuf")
            if not numeric and y_test.dtype.kind != y_pool.dtype.kind:
                raise ValueError(f"y_test has labels of dtype {y_test.dtype}, but y_pool of dtype "
                                 f"{y_pool.dtype}; accuracy against them would be meaningless")
            unknown = np.setdiff1d(np.unique(y_test), np.unique(y_pool))
            if len(unknown):
                raise ValueError(f"y_test contains labels that y_pool does not: {unknown[:10].tolist()}; "
                                 "accuracy against them would be meaningless")
        return X_test, y_test


    def _check_start(self, n_pool, y_pool, initial_idx, n_initial_per_class, warm_start, rng, pool_hash=None):
        """Validate the start of a simulation; return (labelled, initial_idx): the rows labelled
        before it and the initial set to label (None when ``warm_start`` continues the last one)."""
        if warm_start:
            if not hasattr(self, "labelled_idx_") or getattr(self, "n_pool_", None) != n_pool:
                raise ValueError("warm_start=True continues a previous simulate() on the same pool; "
                                 "this learner has none for a pool of this size")
            if getattr(self, "_pool_hash", None) != pool_hash:
                raise ValueError("warm_start=True continues a previous simulate() on the same pool, but X_pool "
                                 "or y_pool differ from that simulation's (same size, other rows or labels)")
            if initial_idx is not None:
                raise ValueError("initial_idx cannot be given with warm_start=True")
            if n_initial_per_class is not None:
                raise ValueError("n_initial_per_class cannot be given with warm_start=True: the labelled set "
                                 "is the previous simulation's")
            return self.labelled_idx_, None
        if initial_idx is not None and n_initial_per_class is not None:
            raise ValueError("give initial_idx or n_initial_per_class, not both: n_initial_per_class draws "
                             "the initial set that initial_idx names")
        n_initial_per_class = 2 if n_initial_per_class is None else n_initial_per_class
        if initial_idx is None:
            if y_pool.ndim == 2:  # one-hot (or score) targets: classes by argmax
                initial_idx = balanced_random(y_pool.argmax(axis=1), n_initial_per_class, rng)
            elif y_pool.dtype.kind == "f" and is_regressor(self._make_template()):
                raise ValueError("a regressor with continuous 1-d targets has no classes to "
                                 "balance the initial set; pass initial_idx")
            else:
                initial_idx = balanced_random(y_pool, n_initial_per_class, rng)
        initial_idx = np.asarray(initial_idx).reshape(-1)
        if not len(initial_idx):
            raise ValueError("initial_idx is empty: the initial model needs labels")
        if initial_idx.dtype.kind not in "iu":
            raise TypeError(f"initial_idx must hold integer indices; got dtype {initial_idx.dtype}")
        initial_idx = initial_idx.astype(np.intp)
        if initial_idx.min() < 0 or initial_idx.max() >= n_pool:
            raise ValueError(f"initial_idx must lie in [0, {n_pool}); got "
                             f"[{initial_idx.min()}, {initial_idx.max()}]")
        if len(np.unique(initial_idx)) != len(initial_idx):
            raise ValueError("initial_idx contains duplicates")
        return initial_idx, initial_idx
