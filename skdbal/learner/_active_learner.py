"""The :class:`ActiveLearner` itself: its parameters, training, pool, labels and queries.

Its predictive methods come from the mixin ``PredictiveMixin`` (``_delegation``) and ``simulate``
from ``SimulationMixin`` (``_simulation``), defined in modules that never import the learner; its
pool is a :class:`~skdbal.learner.LabelledPool` it owns (``pool_``).
"""
from __future__ import annotations

import copy
from contextlib import contextmanager
from typing import Callable, Optional

import numpy as np
from sklearn.base import BaseEstimator, MetaEstimatorMixin
from sklearn.utils import check_random_state, get_tags
from sklearn.utils.validation import check_is_fitted, validate_data

from .._validation import (
    check_candidates,
    check_n_instances,
    check_pool,
    check_positive_int,
    concat_rows,
    is_lazy,
    pool_kwargs,
    read_rows,
    take_rows,
)
from ..acquisition import bald
from ..acquisition.base import as_strategy
from ._delegation import PredictiveMixin
from ._inputs import check_like_labelled, copy_rows, validate_Xy
from ._labelled_pool import LabelledPool, has_missing, merge_labels
from ._query import acquire
from ._simulation import SimulationMixin
from ._training import check_warm, make_template, train_fresh, train_further

__all__ = ["ActiveLearner"]


class ActiveLearner(PredictiveMixin, SimulationMixin, MetaEstimatorMixin, BaseEstimator):
    """Pool-based active learning around any scikit-learn estimator.

    It takes the place of :class:`modAL.models.ActiveLearner`: the same
    constructor (``estimator, query_strategy, X_training, y_training``), the
    same loop :meth:`query` → label → :meth:`teach` (with ``bootstrap`` and
    ``only_new``), and modAL's strategies work unchanged. Differences,
    because this is a scikit-learn estimator: the constructor only stores
    its arguments (the initial set is fitted at the first ``query``,
    ``teach`` or prediction), the fitted model is ``estimator_`` and the
    growing labelled set is ``X_training_``/``y_training_``. :meth:`simulate`
    runs the loop against known labels (:class:`~skdbal.loop.ActiveLearningLoop`).

    The learner can also own its pool: give it a pool with partial labels
    (:meth:`set_pool`, or :meth:`fit` with ``missing_label`` where a label
    is unknown), then ``query(n_instances=...)`` ranks only the unlabelled
    rows and :meth:`label` records answers by position, with who gave them
    and when.

    The learner implements the predictive interface of
    :mod:`skdbal.predictive` by delegating to its fitted model
    (``predict_proba_samples`` and ``stochastic_samples`` for a classifier,
    ``predictive_variance`` for a regressor), so every strategy can score it
    (the mixin ``PredictiveMixin``); :meth:`simulate` comes from the mixin
    ``SimulationMixin``.

    Parameters
    ----------
    estimator : estimator, default=None
        The model to train; ``None`` means
        :class:`~skdbal.MCDropoutClassifier` with its defaults. It is cloned:
        the fitted copy is ``estimator_``.
    query_strategy : callable, default=None
        A :class:`~skdbal.acquisition.base.Strategy`, or any callable
        ``strategy(learner, X_pool, n_instances, **kwargs)`` returning
        ``(indices, scores)`` or bare indices (modAL's strategies); ``None``
        means :data:`skdbal.acquisition.bald`. A ``Strategy`` gets a
        ``random_state`` drawn from the learner's generator for every query;
        a plain callable is called as modAL calls it, with the caller's
        keywords (wrap it in
        :class:`~skdbal.acquisition.base.CallableStrategy` with
        ``takes_random_state=True`` to have it seeded).
    X_training, y_training : array-like, default=None
        An initial labelled set, as in modAL. It is fitted lazily, at the
        first :meth:`query`, :meth:`teach` or prediction; :meth:`fit` and
        :meth:`simulate` replace it.
    retrain : {"scratch", "warm"}, default="scratch"
        ``"scratch"`` fits a fresh clone of ``estimator`` on all labels after
        every :meth:`teach`; ``"warm"`` continues training the current model:
        ``partial_fit`` when it has one, else ``fit`` when it (or a pipeline
        step) has ``warm_start=True``. Any other model is refused with a
        ``ValueError``, since its ``fit`` would start from scratch.
    pool_subsample : int or None, default=None
        If set, each query scores only a seeded random subset of this many
        pool points; Gal et al. (2017) score 2,000 of the MNIST pool.
    random_state : int, RandomState instance or None, default=None
        Seeds pool subsampling, strategy tie breaks, random sampling and the
        initial set of :meth:`simulate`. The model's own randomness (weight
        initialisation, MC-dropout masks) is seeded by the model's
        ``random_state``; the default model (``estimator=None``) is given
        the learner's when it is an int.
    seeding : {"stream", "step"}, default="stream"
        ``"stream"``: every draw continues the learner's one generator
        (``rng_``). ``"step"``: each step's randomness is a function of
        ``(random_state, step)`` alone, as the experiment runner does: the
        query preparing step ``s`` draws from ``RandomState([random_state,
        s])`` (asking twice gives the same answer), and the model of step
        ``s`` is trained with ``random_state=``
        :func:`skdbal.loop.step_seed` ``(random_state, s)``. So a model can
        be trained again, identically, from its labels, and a run resumes
        from its journal alone. Needs an int ``random_state`` and a model
        with a ``random_state`` parameter.
    missing_label : scalar, None or NaN, default=np.nan
        What marks an unknown label in the ``y`` given to :meth:`fit` or
        :meth:`set_pool` (scikit-activeml's convention). NaN needs a float
        array (integer labels in it are converted back to integers); use
        ``None`` with an object array of string labels, or ``-1`` as
        scikit-learn's semi-supervised estimators do (then ``-1`` cannot
        be a class, which is why it is not the default: binary labels are
        often in ``{-1, 1}``).
    verbose : bool, default=True
        Show a tqdm progress bar in :meth:`simulate`.

    Attributes
    ----------
    estimator_ : estimator
        The fitted model.
    template_ : estimator
        What each retrain clones: ``estimator`` (or the default), with its
        ``classes`` parameter set to the labels of the pool when it was
        ``None`` and :meth:`simulate` knew them.
    X_training_, y_training_ : ndarray
        Every label received so far, in arrival order (a changed label
        replaces the old one in its place).
    pool_ : :class:`~skdbal.learner.LabelledPool`
        The learner's own pool and its bookkeeping, which the attributes
        below read: absent while it has none.
    X_pool_ : ndarray or dask array
        The learner's own pool, given by :meth:`set_pool`, :meth:`fit` with
        missing labels or :meth:`simulate`; absent after a :meth:`fit` with
        every label given (modAL's form), which keeps no pool. A dask array
        is kept as it is (not copied) and queried on its cluster.
    n_pool_ : int
        Number of rows of the learner's pool.
    pool_ids_ : ndarray of shape (`n_pool_`,)
        The pool rows' identifiers (their positions by default).
    labelled_idx_ : ndarray of int
        Positions in the pool of the labelled rows, in arrival order.
    labelled_mask_ : ndarray of bool, shape (`n_pool_`,)
        Which pool rows are labelled.
    y_pool_ : ndarray of shape (`n_pool_`,)
        The pool's labels, ``missing_label`` where unknown.
    label_log_ : list of dict
        One entry per label given with :meth:`label` (or by the loop's
        oracle): ``position``, ``id``, ``label``, ``annotator``, ``time``
        and ``previous`` (the label it replaced, or None).
    step_ : int
        The step of the current model: 0 after the initial fit, one more
        after each retrain.
    n_features_in_ : int
        Number of features (``X.shape[1]``) of the labelled set; predictions
        on inputs with another number raise a ``ValueError``.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Column names, when the labelled set is a DataFrame with string
        column names.
    last_acquisition_ : :class:`~skdbal.acquisition.base.Acquisition`
        The latest query: indices into the ``X_pool`` it was given, scores,
        and what the strategy reported about it (``info``).
    history_ : list of dict
        Set by :meth:`simulate`: the loop's journal, one row per step.
    stopped_by_ : list of str or None
        Set by :meth:`simulate`: the stopping rules that ended it (None when
        none did, or none was given).

    References
    ----------
    .. [1] B. Settles, "Active learning literature survey", Computer Sciences
       Technical Report 1648, University of Wisconsin–Madison, 2009.
    .. [2] T. Danka and P. Horvath, "modAL: A modular active learning framework
       for Python", arXiv:1805.00979, 2018.
    .. [3] Y. Gal, R. Islam and Z. Ghahramani, "Deep Bayesian active learning
       with image data", ICML 2017, arXiv:1703.02910.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import load_digits
    >>> from sklearn.linear_model import LogisticRegression
    >>> from skdbal import ActiveLearner
    >>> from skdbal.acquisition import max_entropy
    >>> X, y = load_digits(return_X_y=True)
    >>> learner = ActiveLearner(LogisticRegression(max_iter=200), max_entropy,
    ...                         random_state=0, verbose=False)
    >>> history = learner.simulate(X[:1000], y[:1000], n_queries=3,
    ...                            n_instances=5, X_test=X[1000:], y_test=y[1000:])
    >>> [row["n_labels"] for row in history]
    [20, 25, 30, 35]
    """

    def __init__(
        self,
        estimator=None,
        query_strategy: Optional[Callable] = None,
        X_training=None,
        y_training=None,
        *,
        retrain: str = "scratch",
        pool_subsample: Optional[int] = None,
        random_state=None,
        seeding: str = "stream",
        missing_label=np.nan,
        verbose: bool = True,
    ):
        self.estimator = estimator
        self.query_strategy = query_strategy
        self.X_training = X_training
        self.y_training = y_training
        self.retrain = retrain
        self.pool_subsample = pool_subsample
        self.random_state = random_state
        self.seeding = seeding
        self.missing_label = missing_label
        self.verbose = verbose

    # ------------------------------------------------------------ helpers
    def _make_template(self, y_all=None):
        """``estimator`` (or the default), with ``classes`` from ``y_all`` if unset."""
        return make_template(self.estimator, self.random_state, y_all)

    def _template(self):
        """What the next retrain clones: ``template_`` while ``estimator`` is the
        object it was made from (``set_params(estimator=...)`` replaces it)."""
        template = getattr(self, "template_", None)
        if template is not None and getattr(self, "_template_source", None) is self.estimator:
            return template
        return self._make_template()

    def _model_or_template(self):
        """The fitted model, else what would be fitted: read without triggering a fit."""
        model = getattr(self, "estimator_", None)
        return self._template() if model is None else model

    def _strategy(self):
        return bald if self.query_strategy is None else as_strategy(self.query_strategy)

    def _get_rng(self, salt: int = 0) -> np.random.RandomState:
        """The generator of the next draw: the learner's stream, or with
        ``seeding="step"`` a new one seeded by ``(random_state, step)``, where
        ``step`` is the step the draw prepares (one after the model's)."""
        if self.seeding == "step":
            step = getattr(self, "step_", -1) + 1
            return np.random.RandomState([int(self.random_state), step] + ([salt] if salt else []))
        if not hasattr(self, "rng_"):
            self.rng_ = check_random_state(self.random_state)
        return self.rng_

    def _check_params(self):
        if self.retrain not in ("scratch", "warm"):
            raise ValueError(f"retrain must be 'scratch' or 'warm'; got {self.retrain!r}")
        if self.retrain == "warm":
            check_warm(self._model_or_template())
        check_positive_int(self.pool_subsample, "pool_subsample", allow_none=True)
        if self.seeding not in ("stream", "step"):
            raise ValueError(f"seeding must be 'stream' or 'step'; got {self.seeding!r}")
        if self.seeding == "step":
            if isinstance(self.random_state, bool) or not isinstance(self.random_state, (int, np.integer)):
                raise ValueError("seeding='step' seeds every step from (random_state, step), so random_state "
                                 f"must be an int; got {self.random_state!r}")
        self._strategy()  # TypeError if not callable
        if (self.X_training is None) != (self.y_training is None):
            raise ValueError("pass both X_training and y_training, or neither")

    def _validate_Xy(self, X, y, check_shape: bool = True, template=None):
        """``(X, y)`` checked as new labelled rows (like the labelled set, with ``check_shape``)."""
        template = self._template() if template is None else template
        return validate_Xy(X, y, template, getattr(self, "X_training_", None) if check_shape else None)

    @contextmanager
    def _unchanged_on_error(self):
        """Restore every attribute if the block raises. A shallow copy is the state before, since
        the blocks that use it start with ``_reset_pool``, which gives the learner a new pool object."""
        before = dict(self.__dict__)
        try:
            yield
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(before)
            raise

    def _ensure_initial_fit(self):
        """Fit the modAL-style initial set ``X_training`` on first use."""
        if not hasattr(self, "estimator_") and self.X_training is not None and not hasattr(self, "X_pool_"):
            self.fit(self.X_training, self.y_training)

    def _train(self, X, y, template, *, step: int, fresh: bool = False, **fit_params):
        """Return the model of ``step`` trained on (X, y); never modifies state on error."""
        if self.retrain == "warm" and hasattr(self, "estimator_") and not fresh:
            return train_further(self.estimator_, X, y, fit_params)  # warm_start: checked by _check_params
        return train_fresh(template, X, y, fit_params,
                           step_seeds=(self.random_state, step) if self.seeding == "step" else None)

    def _train_labelled(self, X, y, template, fit_params, step):
        if len(y) == 0:
            raise ValueError("there are no labels to train on: label some pool rows first")
        return self._train(X, y, template, step=step, **fit_params)

    def _commit_model(self, est, template, step=None):
        self.template_, self._template_source = template, self.estimator
        self.estimator_ = est
        self.step_ = getattr(self, "step_", -1) + 1 if step is None else int(step)

    # ------------------------------------------------------------ fitting
    def fit(self, X, y, **fit_params):
        """Forget all labels, then fit on the labelled rows of ``(X, y)``.

        With every label given, ``(X, y)`` is the labelled set (no pool is
        kept). When some labels are missing (``missing_label``, NaN by
        default), ``X`` is the pool: the learner keeps it, trains on its
        labelled rows, and :meth:`query` without a pool ranks only its
        unlabelled rows. That is :meth:`set_pool` then :meth:`refit`.

        Parameters
        ----------
        X : array-like of shape (n, ...)
            The labelled inputs, or the pool. A pool that is a dask array
            stays on its cluster, as with :meth:`set_pool` (with every label
            given, ``X`` is the labelled set: the model trains on it in
            memory).
        y : array-like of shape (n,) or (n, n_outputs)
            Their labels (targets for a regressor), ``missing_label`` where
            unknown.
        **fit_params :
            Passed to the estimator's ``fit``.

        Returns
        -------
        self
        """
        if y is None:
            raise ValueError("ActiveLearner requires y to be passed, but the target y is None")
        template = self._make_template()
        if has_missing(y, self.missing_label):
            self._check_params()
            with self._unchanged_on_error():  # a failed fit changes nothing
                self._reset_pool(X, y, None, template)
                return self._refit_checked(None, fit_params)
        return self._fit(X, y, template, **fit_params)

    def _fit(self, X, y, template, **fit_params):
        self._check_params()
        X, y = self._validate_Xy(X, y, check_shape=False, template=template)
        est = self._train(X, y, template, step=0, fresh=True, **fit_params)
        self._forget_pool()
        self.template_ = template
        self._template_source = self.estimator
        self.estimator_ = est
        self.step_ = 0
        self.X_training_ = copy_rows(X)
        self.y_training_ = np.array(y, copy=True)
        validate_data(self, self.X_training_, reset=True, skip_check_array=True)  # n_features_in_
        self._get_rng()
        return self

    def refit(self, *, model=None, step: Optional[int] = None, **fit_params) -> "ActiveLearner":
        """Retrain on every label received so far.

        As after :meth:`teach`: a fresh clone with ``retrain="scratch"``,
        the current model trained further with ``"warm"``.

        Parameters
        ----------
        model : estimator, optional
            A fitted model already trained on exactly these labels, used
            instead of training (the experiment runner's per-step models,
            or its weights read back from disk).
        step : int, optional
            The model's step number (``step_``); one more than the last by
            default. With ``seeding="step"`` it seeds the next query.
        **fit_params :
            Passed to the estimator's ``fit``.

        Returns
        -------
        self
        """
        self._check_params()
        return self._refit_checked(model, fit_params, step)

    def _refit_checked(self, model, fit_params, step=None):
        if not hasattr(self, "y_training_"):
            raise ValueError("there are no labels to train on: fit, set_pool or teach first")
        template = self._template()
        if model is not None:
            check_is_fitted(model)
            est = model
        else:
            est = self._train_labelled(self.X_training_, self.y_training_, template, fit_params,
                                       getattr(self, "step_", -1) + 1 if step is None else int(step))
        self._commit_model(est, template, step)
        if self.seeding == "stream":
            self._get_rng()
        return self

    def teach(self, X, y, bootstrap: bool = False, only_new: bool = False, **fit_params):
        """Add labelled points and retrain.

        Parameters
        ----------
        X : array-like of shape (n, ...)
        y : array-like of shape (n,)
        bootstrap : bool, default=False
            Train on a bootstrap resample (drawn with replacement, seeded by
            ``random_state``) of the training rows, as modAL's option. Every
            label is still kept.
        only_new : bool, default=False
            Train only on the new points (modAL's option); with
            ``retrain="scratch"`` this refits from scratch on them alone.
        **fit_params :
            Passed to the estimator's ``fit`` (``partial_fit`` when warm).

        Returns
        -------
        self

        Raises
        ------
        ValueError
            On NaN/inf, a shape unlike the labelled set, or labels outside the
            estimator's ``classes``; nothing is changed then.
        TypeError
            When ``X`` mixes integer inputs (uint8 images) with a float
            labelled set, or the reverse; nothing is changed then.
        """
        self._check_params()
        self._ensure_initial_fit()
        template = self._template()
        X, y = self._validate_Xy(X, y, template=template)
        if hasattr(self, "X_training_"):
            X_all = concat_rows(self.X_training_, X)
            y_all = np.concatenate([self.y_training_, y])
        else:
            X_all, y_all = X, y
        X_fit, y_fit = (X, y) if only_new else (X_all, y_all)
        rng = self._get_rng(salt=1)
        state = rng.get_state()
        try:
            if bootstrap:
                rows = rng.randint(len(y_fit), size=len(y_fit)) if len(y_fit) else np.arange(0)
                X_fit, y_fit = take_rows(X_fit, rows), y_fit[rows]
            est = self._train(X_fit, y_fit, template, step=getattr(self, "step_", -1) + 1, **fit_params)
        except BaseException:
            rng.set_state(state)
            raise
        self._commit_model(est, template)
        self.X_training_ = copy_rows(X_all) if X_all is X else X_all
        self.y_training_ = np.array(y_all, copy=True) if y_all is y else y_all
        validate_data(self, self.X_training_, reset=True, skip_check_array=True)  # n_features_in_
        return self

    # ---------------------------------------------------------------- the pool
    def _own_pool(self, what: Optional[str] = None) -> LabelledPool:
        """The learner's pool (``pool_``). Without one: an ``AttributeError`` (for the attributes
        that read it), or with ``what`` a ``ValueError`` saying how to give it one."""
        pool = self.__dict__.get("pool_")
        if pool is None:
            if what is None:
                raise AttributeError(f"this {type(self).__name__} has no pool of its own")
            raise ValueError(f"{what} needs the learner's pool: give it one with set_pool(X, y) or fit(X, y) "
                             "with missing labels (missing_label), or run simulate(); or pass X_pool")
        return pool

    #: The attributes that hold the pool (and the hash of a simulated one), dropped with it.
    _POOL_ATTRIBUTES = ("pool_", "_pool_hash")

    def _forget_pool(self) -> None:
        """Drop the pool (the labelled set and the model stay)."""
        for name in self._POOL_ATTRIBUTES:
            self.__dict__.pop(name, None)

    def _without_pool(self) -> "ActiveLearner":
        """A shallow copy without the pool and its bookkeeping (``O(N)`` of them): what a query on a
        cluster sends to every worker with the strategy, whose predictions are the learner's.

        >>> learner = ActiveLearner(verbose=False).set_pool(np.zeros((4, 2)))
        >>> hasattr(learner._without_pool(), "X_pool_"), hasattr(learner, "X_pool_")
        (False, True)
        """
        lean = copy.copy(self)
        for name in self._POOL_ATTRIBUTES:
            lean.__dict__.pop(name, None)
        return lean

    def _reset_pool(self, X, y, ids, template) -> "ActiveLearner":
        """Own the pool ``X`` with labels ``y`` (``missing_label`` where unknown) and no model, the
        estimator to be ``template``; every check comes before any change."""
        pool, X_labelled, y_labelled = LabelledPool.from_labels(X, y, self.missing_label, template, ids)
        # ---- nothing is changed before this point
        self._forget_pool()
        for name in ("estimator_", "X_training_", "y_training_", "last_acquisition_"):
            self.__dict__.pop(name, None)
        self.template_, self._template_source = template, self.estimator
        self.pool_ = pool
        self.X_training_, self.y_training_ = X_labelled, y_labelled
        self.step_ = -1
        if len(y_labelled):
            validate_data(self, self.X_training_, reset=True, skip_check_array=True)
        return self

    def set_pool(self, X, y=None, *, ids=None) -> "ActiveLearner":
        """Give the learner a pool with partial labels, without training.

        Every earlier label is forgotten and the model is dropped; the rows
        of ``y`` that are not ``missing_label`` become the labelled set, in
        row order. Train with :meth:`refit`, or :meth:`label` rows first.

        Parameters
        ----------
        X : array-like of shape (N, ...)
            The pool. A dask array stays where it lives: queries run on its
            cluster (:mod:`skdbal.dask`, found by itself), and only the rows
            labelled are read (its NaN are not looked for, which would read
            it whole).
        y : array-like of shape (N,) or (N, n_outputs), optional
            Labels, ``missing_label`` (NaN by default) where unknown; none
            known when omitted. Integer labels stored in a float array
            because of NaN are converted back to integers.
        ids : array-like of shape (N,), optional
            Unique, sortable identifiers of the pool rows (file names, row
            numbers of a larger table), recorded in the label log; a
            subsample drawn by ``pool_subsample`` is scored in the order of
            the ids. By default the positions.

        Returns
        -------
        self

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.linear_model import LogisticRegression
        >>> from skdbal import ActiveLearner
        >>> X = np.array([[0.0], [0.2], [0.9], [1.0], [0.5], [0.45]])
        >>> learner = ActiveLearner(LogisticRegression(), random_state=0, verbose=False)
        >>> learner.set_pool(X, [0, np.nan, np.nan, 1, np.nan, np.nan]).labelled_idx_
        array([0, 3])
        """
        self._check_params()
        return self._reset_pool(X, y, ids, self._make_template())

    @property
    def X_pool_(self):
        return self._own_pool().X

    @property
    def pool_ids_(self) -> np.ndarray:
        return self._own_pool().ids

    @property
    def n_pool_(self) -> int:
        return self._own_pool().n

    @property
    def labelled_idx_(self) -> np.ndarray:
        return self._own_pool().order

    @property
    def label_log_(self) -> list:
        return self._own_pool().log

    @property
    def labelled_mask_(self) -> np.ndarray:
        """Which rows of the learner's pool are labelled, shape ``(n_pool_,)``."""
        return self._own_pool("labelled_mask_").mask

    @property
    def y_pool_(self) -> np.ndarray:
        """The pool's labels, ``missing_label`` where unknown."""
        return self._own_pool("y_pool_").labels(self.y_training_, self.missing_label)

    def label(self, positions, y, *, annotator: Optional[str] = None, time=None, refit: bool = True,
              **fit_params) -> "ActiveLearner":
        """Record labels of pool rows, by position, and retrain.

        A row labelled before gets its new label (a person changed their
        mind); the old one is kept in ``label_log_``.

        Parameters
        ----------
        positions : array-like of int
            Positions in the learner's pool.
        y : array-like
            Their labels.
        annotator : str or array-like of str, optional
            Who gave them (one name, or one per position), recorded in
            ``label_log_``.
        time : float or array-like of float, optional
            When (seconds since the epoch), recorded in ``label_log_``.
        refit : bool, default=True
            Retrain afterwards (:meth:`refit`); with False the labels are
            recorded and the model is left as it is.
        **fit_params :
            Passed to the estimator's ``fit``.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            For positions outside the pool or given twice, a missing label,
            or a label the estimator does not know; nothing is changed then,
            and nothing either if the retraining fails.
        """
        pool = self._own_pool("label()")
        positions, y = pool.check_labels(positions, y, self.missing_label)
        template = self._template()
        X_rows = pool.rows(positions)  # of a pool on a cluster, only these rows are read
        _, y = self._validate_Xy(X_rows, y, template=template)
        refit = bool(refit)
        # ---- the new state, computed aside: committed only when (if asked) retraining succeeds
        rows = pool.row[positions]  # each position's training row before, -1 for a new label
        new = rows < 0
        y_all = merge_labels(self.y_training_, y, rows)
        X_all = concat_rows(self.X_training_, take_rows(X_rows, np.flatnonzero(new))) if new.any() \
            else self.X_training_
        after = pool.add(positions, len(self.y_training_))
        log = pool.entries(positions, y, annotator, time, self.y_training_)
        est = None
        if refit:
            est = self._train_labelled(X_all, y_all, template, fit_params, getattr(self, "step_", -1) + 1)
        self.X_training_, self.y_training_, self.pool_ = X_all, y_all, after
        after.record(log)
        validate_data(self, self.X_training_, reset=True, skip_check_array=True)
        if est is not None:
            self._commit_model(est, template)
        return self

    def unlabel(self, positions, *, annotator: Optional[str] = None, time=None) -> "ActiveLearner":
        """Withdraw the labels of pool rows (an undone label): they are unlabelled again.

        The model is left as it is; :meth:`refit` retrains without them.

        Parameters
        ----------
        positions : array-like of int
            Labelled positions in the learner's pool.
        annotator : str, optional
            Who withdrew them, recorded in ``label_log_`` (``label`` None).
        time : float, optional
            When.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            For a position that is not labelled; nothing is changed then.
        """
        pool = self._own_pool("unlabel()")
        positions = check_candidates(np.asarray(positions).reshape(-1), pool.n)
        after, keep = pool.remove(positions, len(self.y_training_))
        log = pool.entries(positions, [None] * len(positions), annotator, time, self.y_training_)
        self.X_training_ = take_rows(self.X_training_, np.flatnonzero(keep))
        self.y_training_ = self.y_training_[keep]
        self.pool_ = after
        after.record(log)
        return self

    # ------------------------------------------------------------- queries
    def query(self, X_pool=None, n_instances: int = 1, *, candidates=None, return_scores: bool = False,
              **kwargs):
        """Choose the pool points to label next.

        Two forms:

        - ``query(n_instances=5)`` ranks the unlabelled rows of the learner's
          own pool (given by :meth:`set_pool`, :meth:`fit` with missing
          labels, or :meth:`simulate`): a labelled row is never returned;
        - ``query(X_pool, 5)`` (modAL's form) ranks every row of ``X_pool``
          (or its ``candidates``); the caller keeps track of what is
          labelled.

        Parameters
        ----------
        X_pool : array-like of shape (N, ...), optional
            A pool to rank; the learner's own pool when omitted.
        n_instances : int, default=1
        candidates : array-like of int, optional
            Positions that may be chosen; all of ``X_pool``, or every
            unlabelled row of the learner's pool, by default. In the
            learner's pool they must be unlabelled.
        return_scores : bool, default=False
            Also return the strategy's scores of the chosen points.
        **kwargs :
            Passed to the strategy. Keywords named ``*_pool`` (``y_pool``)
            must be aligned with the pool and are subset with it.

        Returns
        -------
        indices : ndarray of shape (n_instances,)
            Positions in the pool, best first.
        X_query : ndarray
            The pool's rows at ``indices``.
        scores : ndarray, only with ``return_scores=True``

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.datasets import load_digits
        >>> from sklearn.linear_model import LogisticRegression
        >>> from skdbal import ActiveLearner
        >>> X, y = load_digits(return_X_y=True)
        >>> y_partial = np.full(len(y), np.nan)
        >>> y_partial[:20] = y[:20]                      # 20 labels, the rest unknown
        >>> learner = ActiveLearner(LogisticRegression(max_iter=500), random_state=0).fit(X, y_partial)
        >>> idx, _ = learner.query(n_instances=5)        # unlabelled rows of the pool only
        >>> bool(np.all(idx >= 20))
        True
        >>> learner.label(idx, y[idx], annotator="ann").labelled_idx_.shape
        (25,)
        """
        if X_pool is None:
            pool = self._own_pool("query() without X_pool")
            candidates = pool.candidates(candidates)
            X_pool, ids = pool.X, pool.ids
        else:
            if isinstance(X_pool, (int, np.integer)) and not isinstance(X_pool, bool):
                raise TypeError(f"query's first argument is the pool; to rank the learner's own pool, pass "
                                f"n_instances={X_pool} by keyword")
            X_pool, ids = check_pool(X_pool), None
            check_like_labelled(X_pool, getattr(self, "X_training_", None), "X_pool")
            candidates = (np.arange(len(X_pool)) if candidates is None
                          else check_candidates(candidates, len(X_pool)))
        # ---- checked once, here: the strategy is called without checking them again
        self._check_params()
        subsample = self.pool_subsample
        n_instances = check_n_instances(n_instances, len(candidates) if subsample is None
                                        else min(len(candidates), subsample))
        pool_kwargs(kwargs, len(X_pool))  # pool-aligned keywords (y_pool) must match the pool
        self._ensure_initial_fit()
        # on any error the learner's random state is restored: a failed query changes nothing
        scored = self._without_pool() if is_lazy(X_pool) else self  # a cluster's workers get no pool
        acq = acquire(self._strategy(), scored, X_pool, candidates, n_instances, self._get_rng(), ids, subsample,
                      kwargs)
        self.last_acquisition_ = acq
        X_query = read_rows(X_pool, acq.indices)  # of a pool on a cluster, only the rows chosen are read
        if return_scores:
            return acq.indices, X_query, acq.scores
        return acq.indices, X_query

    def __sklearn_tags__(self):
        """The wrapped estimator's type and target tags, so that scikit-learn
        treats the learner as the classifier (or regressor) it trains:
        stratified folds in ``cross_val_score``, ``roc_auc`` scoring,
        ``VotingClassifier``."""
        tags = super().__sklearn_tags__()
        try:
            inner = get_tags(self._template())
        except (TypeError, AttributeError, ValueError):
            return tags
        tags.estimator_type = inner.estimator_type
        tags.classifier_tags = inner.classifier_tags
        tags.regressor_tags = inner.regressor_tags
        tags.target_tags = inner.target_tags
        tags.input_tags.allow_nan = False
        return tags
