"""An active-learning set-up as an estimator, to be chosen by cross-validation.

:class:`ActiveLearningBudget` spends a labelling budget on the ``(X, y)`` it
is fitted on, with ``y`` acting as the oracle, and predicts with the model
it ends with. Its score on held-out data is the metric after the budget, or
(``score_curve=True``) the area under the learning curve, so that
:class:`~sklearn.model_selection.GridSearchCV`,
:func:`~sklearn.model_selection.cross_val_score` and
:func:`~sklearn.model_selection.cross_validate` compare strategies, batch
sizes, numbers of MC samples and decorators on held-out folds.

It runs the one loop, :class:`skdbal.loop.ActiveLearningLoop`, exactly as
:meth:`skdbal.ActiveLearner.simulate` does (same initial set, same picks for
the same ``random_state``).
"""
from __future__ import annotations

import copy
from numbers import Integral
from typing import List, Optional, Tuple

import numpy as np
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone, is_regressor
from sklearn.metrics import check_scoring
from sklearn.utils import check_random_state, get_tags
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array, check_consistent_length, check_is_fitted, column_or_1d, validate_data

from ._validation import check_bool, check_positive_int, is_frame
from .initial import balanced_random
from .learner import ActiveLearner
from .loop import ActiveLearningLoop, MemoryJournal, check_stopping
from .oracles import KnownLabels

__all__ = ["ActiveLearningBudget", "learning_curve_area"]

_trapezoid = getattr(np, "trapezoid", None) or np.trapz  # numpy < 2 has only trapz


def learning_curve_area(n_labels, scores) -> float:
    """The normalised area under a learning curve.

    The trapezoid of ``scores`` over ``n_labels``, divided by the range of
    ``n_labels``: the mean of the metric over the labelling budget, on the
    metric's own scale (an accuracy stays in [0, 1]). Two set-ups that end
    at the same accuracy differ in it when one gets there with fewer labels.
    A curve of one point (no query) has that point's score.

    Parameters
    ----------
    n_labels : array-like of shape (n_steps,)
        Number of labels at each step, increasing.
    scores : array-like of shape (n_steps,)
        The metric at each step.

    Returns
    -------
    area : float
        The mean of ``scores`` over the range of ``n_labels``.

    Examples
    --------
    >>> from skdbal.budget import learning_curve_area
    >>> learning_curve_area([20, 30, 40], [0.5, 0.7, 0.8])   # (0.6 * 10 + 0.75 * 10) / 20
    0.675
    >>> learning_curve_area([20], [0.5])
    0.5
    """
    n_labels = np.asarray(n_labels, dtype=float).reshape(-1)
    scores = np.asarray(scores, dtype=float).reshape(-1)
    if len(n_labels) != len(scores) or not len(n_labels):
        raise ValueError(f"n_labels and scores must be non-empty and of one length; got {len(n_labels)} "
                         f"and {len(scores)}")
    if len(n_labels) == 1:
        return float(scores[0])
    if np.any(np.diff(n_labels) <= 0):
        raise ValueError(f"n_labels must be increasing; got {n_labels.tolist()}")
    return float(_trapezoid(scores, n_labels) / (n_labels[-1] - n_labels[0]))


class _ModelJournal(MemoryJournal):
    """An in-memory journal that also keeps a copy of every step's fitted model."""

    def __init__(self, keep_models: bool):
        super().__init__()
        self.keep_models = keep_models
        self.models: List = []

    def append(self, row: dict, learner) -> None:
        model = copy.deepcopy(learner.estimator_) if self.keep_models else None  # before the row: all or nothing
        super().append(row, learner)
        if self.keep_models:
            self.models.append(model)


class ActiveLearningBudget(MetaEstimatorMixin, BaseEstimator):
    """An active-learning set-up as an estimator: ``fit`` spends a labelling budget.

    ``fit(X, y)`` treats ``X`` as the pool and ``y`` as the oracle: it
    labels ``n_initial_per_class`` random points per class, then runs
    ``n_queries`` rounds that query ``n_instances`` points each, label them
    from ``y`` and retrain, in the one loop
    (:class:`~skdbal.loop.ActiveLearningLoop`, as
    :meth:`skdbal.ActiveLearner.simulate` runs it). It predicts with the
    model of the last round. Every set-up therefore uses the same number of
    labels, ``n_initial_per_class * n_classes + n_queries * n_instances``,
    and cross-validation compares what they achieve with them on held-out
    folds: :class:`~sklearn.model_selection.GridSearchCV` over
    ``query_strategy``, ``n_instances``, ``estimator__n_samples`` (T) or
    decorated strategies.

    The labels of the training fold act as the oracle, so they are assumed
    to be what an annotator would answer; the held-out fold is scored with
    its own labels, which the loop never sees.

    Parameters
    ----------
    estimator : estimator, default=None
        The model retrained after every round (cloned); ``None`` means
        :class:`~skdbal.MCDropoutClassifier` with its defaults, seeded by
        ``random_state`` when it is an int (as in
        :class:`~skdbal.ActiveLearner`). Regressors work too (see Notes).
    query_strategy : Strategy, callable, str or None, default=None
        As :class:`~skdbal.ActiveLearner`'s (``None`` means
        :data:`~skdbal.acquisition.bald`), or a name that
        :func:`skdbal.acquisition.get_strategy` reads, decorators included
        (``"bald"``, ``"filter(bald,dynamic)"``): names keep a grid's table
        readable. The training fold's labels are passed to every query as
        ``y_pool``, what :func:`~skdbal.acquisition.noise_filter` reads as
        the annotator's labels; other strategies ignore them.
    n_queries : int, default=10
        Acquisition rounds, an int >= 0 (0: the initial set alone).
    n_instances : int, default=10
        Points labelled per round, an int >= 1.
    n_initial_per_class : int, default=2
        Size per class of the random initial set
        (:func:`skdbal.initial.balanced_random`, drawn from ``y``). For a
        regressor with 1-d targets, which has no classes, the initial set is
        this many random rows.
    pool_subsample : int or None, default=None
        Score only a seeded random subset of this many unlabelled points at
        each query (as :class:`~skdbal.ActiveLearner`'s).
    random_state : int, RandomState instance or None, default=None
        Seeds the initial set, then the queries (one stream, as in
        :meth:`~skdbal.ActiveLearner.simulate`). The same int gives the same
        run, in any fold order and under any joblib backend.
    score_curve : bool, default=False
        What :meth:`score` returns: with False, the final model's score
        (``estimator.score``: accuracy for a classifier, R² for a
        regressor); with True, the normalised area under the held-out
        learning curve (:func:`~skdbal.budget.learning_curve_area` of
        :meth:`learning_curve`), which rewards reaching a score with fewer
        labels. True keeps a copy of every round's model (``models_``).
    query_kwargs : dict, optional
        Keywords for every query (``n_samples``, ``chunk_size``,
        ``n_jobs``...). Pool-aligned keywords (``*_pool``) are refused:
        they could not follow the folds (``y_pool`` is passed already).
    stopping : StoppingRule, optional
        A stopping rule (:mod:`skdbal.stopping`), cloned at fit: the loop
        ends at the first step whose verdict says stop, so the label budget
        above becomes a maximum and ``n_labels_`` shows where it stopped.
        Its parameters are the budget's (``stopping__kappa``), so that
        :class:`~sklearn.model_selection.GridSearchCV` tunes them; the
        stop set is drawn from the training fold.

    Attributes
    ----------
    learner_ : ActiveLearner
        The learner after the budget: its pool is the training fold,
        ``labelled_idx_`` the positions labelled in order, ``estimator_``
        the final model.
    history_ : list of dict
        One row per step of the loop (step 0 is the initial fit):
        ``n_labels``, ``query_indices`` (positions in the training fold),
        ``query_time``, ``fit_time``.
    n_labels_ : ndarray of int, shape (n_steps,)
        Labels the model of each step was trained on; ``n_queries + 1``
        steps unless a stopping rule ended the loop earlier.
    stopped_by_ : list of str or None
        The stopping rules that ended the loop, None when none did.
    models_ : list of estimator
        The fitted model of every step, only with ``score_curve=True``.
    classes_ : ndarray
        The class labels (classifiers only).
    n_features_in_ : int
        Number of features of ``X``.
    feature_names_in_ : ndarray
        Column names, when ``X`` is a DataFrame with string column names.

    See Also
    --------
    skdbal.ActiveLearner.simulate : The same loop, with a test set given.

    Notes
    -----
    A regressor is scored by its own ``score`` (R² for scikit-learn's),
    and its 1-d targets, which have no classes, give a random initial set
    of ``n_initial_per_class`` rows; 2-d (one-hot) targets are balanced by
    their argmax, as in :meth:`~skdbal.ActiveLearner.simulate`.

    Under :class:`~sklearn.model_selection.GridSearchCV`, keep its default
    ``scoring=None``: a scorer such as ``"accuracy"`` scores the final model
    and ignores ``score_curve``.

    Examples
    --------
    Entropy sampling against random sampling, 20 rounds of 10 labels after
    2 per class, compared on held-out folds of digits:

    >>> from sklearn.datasets import load_digits
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.model_selection import GridSearchCV
    >>> from skdbal import ActiveLearningBudget
    >>> X, y = load_digits(return_X_y=True)          # 8x8 images, flattened to 64 columns
    >>> budget = ActiveLearningBudget(LogisticRegression(max_iter=500, tol=1e-3), n_queries=20,
    ...                               n_instances=10, random_state=0)
    >>> search = GridSearchCV(budget, {"query_strategy": ["max_entropy", "random"]}, cv=3).fit(X / 16, y)
    >>> search.best_params_                          # held-out accuracy after 220 labels
    {'query_strategy': 'max_entropy'}
    >>> search.best_estimator_.n_labels_[[0, -1]]    # labels spent: 20 to start, 220 in all
    array([ 20, 220])

    A stopping rule ends the loop before the budget is spent; its
    parameters are a grid axis:

    >>> from skdbal.stopping import LabelBudget
    >>> budget = budget.set_params(query_strategy="max_entropy", stopping=LabelBudget(max_labels=100))
    >>> fitted = budget.fit(X / 16, y)
    >>> fitted.n_labels_[[0, -1]], fitted.stopped_by_
    (array([ 20, 100]), ['label_budget'])
    >>> search = GridSearchCV(budget, {"stopping__max_labels": [60, 100]}, cv=3).fit(X / 16, y)
    >>> search.best_estimator_.stopped_by_
    ['label_budget']
    """

    def __init__(
        self,
        estimator=None,
        query_strategy=None,
        *,
        n_queries: int = 10,
        n_instances: int = 10,
        n_initial_per_class: int = 2,
        pool_subsample: Optional[int] = None,
        random_state=None,
        score_curve: bool = False,
        query_kwargs: Optional[dict] = None,
        stopping=None,
    ):
        self.estimator = estimator
        self.query_strategy = query_strategy
        self.n_queries = n_queries
        self.n_instances = n_instances
        self.n_initial_per_class = n_initial_per_class
        self.pool_subsample = pool_subsample
        self.random_state = random_state
        self.score_curve = score_curve
        self.query_kwargs = query_kwargs
        self.stopping = stopping

    # ------------------------------------------------------------ helpers
    def _template(self):
        """``estimator``, or the default MCDropoutClassifier seeded by an int ``random_state``."""
        if self.estimator is not None:
            return self.estimator
        from .models import MCDropoutClassifier

        seed = self.random_state if isinstance(self.random_state, Integral) else None
        return MCDropoutClassifier(random_state=seed)

    def _strategy(self):
        if isinstance(self.query_strategy, str):
            from .acquisition import get_strategy

            return get_strategy(self.query_strategy)  # a ValueError naming an unknown name
        return self.query_strategy

    def _check_params(self) -> dict:
        """Every parameter checked; the query keywords returned as a dict."""
        if isinstance(self.n_queries, bool) or not isinstance(self.n_queries, Integral) or self.n_queries < 0:
            raise ValueError(f"n_queries must be an int >= 0; got {self.n_queries!r}")
        check_positive_int(self.n_instances, "n_instances")
        check_positive_int(self.n_initial_per_class, "n_initial_per_class")
        check_positive_int(self.pool_subsample, "pool_subsample", allow_none=True)
        check_bool(self.score_curve, "score_curve")
        if self.query_kwargs is not None and not isinstance(self.query_kwargs, dict):
            raise TypeError(f"query_kwargs must be a dict or None; got {type(self.query_kwargs).__name__}")
        query_kwargs = dict(self.query_kwargs or {})
        aligned = sorted(k for k in query_kwargs if k.endswith("_pool"))
        if aligned:
            raise ValueError(f"query_kwargs holds pool-aligned keywords {aligned}, which cannot follow the "
                             "cross-validation folds; the training fold's labels are passed as y_pool already")
        if self.query_strategy is not None and not isinstance(self.query_strategy, str) \
                and not callable(self.query_strategy):
            raise TypeError(f"query_strategy must be a strategy, a callable, a strategy name or None; "
                            f"got {self.query_strategy!r}")
        if self.estimator is not None and not hasattr(self.estimator, "fit"):
            raise TypeError(f"estimator must be an estimator with fit; got {self.estimator!r}")
        check_stopping(self.stopping)
        return query_kwargs

    # ------------------------------------------------------------ fitting
    def fit(self, X, y):
        """Spend the labelling budget on ``(X, y)``, with ``y`` as the oracle.

        Nothing is changed if it fails: the fitted attributes (and a
        ``random_state`` generator) are as before.

        Parameters
        ----------
        X : array-like of shape (n_samples, ...)
            The pool: the training fold.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Its labels, asked for as the loop queries them.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            For a bad parameter (named), or a budget larger than ``X``: the
            initial set and ``n_queries * n_instances`` must fit in it.
        """
        query_kwargs = self._check_params()
        strategy = self._strategy()
        template = self._template()
        regressor = is_regressor(template)
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None")
        if regressor:
            y = check_array(y, ensure_2d=False, dtype="numeric", input_name="y")
            if y.ndim == 2 and y.shape[1] == 1:
                y = y[:, 0]
        else:
            y = column_or_1d(y, warn=True)
            check_classification_targets(y)  # continuous targets for a classifier: "Unknown label type"
        if not is_frame(X):
            X = check_array(X, allow_nd=True, dtype=None, input_name="X")
        check_consistent_length(X, y)
        n = len(y)
        if regressor and y.ndim == 1:
            groups, n_initial, initial_text = None, self.n_initial_per_class, f"{self.n_initial_per_class} initial"
        else:
            groups = y.argmax(axis=1) if y.ndim == 2 else y
            n_classes = len(np.unique(groups))
            n_initial = n_classes * self.n_initial_per_class
            initial_text = (f"{n_initial} initial ({self.n_initial_per_class} per class x {n_classes} "
                            f"classes)")
        needed = n_initial + self.n_queries * self.n_instances
        if needed > n:
            raise ValueError(f"the budget needs {needed} labels, {initial_text} + n_queries={self.n_queries} x "
                             f"n_instances={self.n_instances}, but X has only {n} rows")

        template = clone(template)
        params = template.get_params(deep=False) if hasattr(template, "get_params") else {}
        if not regressor and "classes" in params and params["classes"] is None:
            template.set_params(classes=np.unique(y))  # a stable output size, as simulate sets it

        rng = check_random_state(self.random_state)
        state = rng.get_state()  # a generator passed in is restored if the fit fails
        try:
            if groups is None:
                initial_idx = np.sort(rng.choice(n, n_initial, replace=False))
            else:
                initial_idx = balanced_random(groups, self.n_initial_per_class, rng)
            # the generator that drew the initial set goes on to seed the queries, as in simulate
            learner = ActiveLearner(template, strategy, pool_subsample=self.pool_subsample, random_state=rng,
                                    verbose=False)
            learner.set_pool(X)
            journal = _ModelJournal(keep_models=bool(self.score_curve))
            seed = self.random_state if isinstance(self.random_state, Integral) \
                and not isinstance(self.random_state, bool) else None
            loop = ActiveLearningLoop(learner, KnownLabels(y), n_instances=self.n_instances, journal=journal,
                                      query_kwargs=query_kwargs, pass_pool_labels=True, verbose=False,
                                      stopping=self.stopping, stop_seed=seed)
            loop.start(initial_idx)
            loop.run(self.n_queries)
        except BaseException:
            rng.set_state(state)
            raise

        # ---- nothing is changed before this point
        self.learner_ = learner
        self.history_ = journal.rows()
        self.n_labels_ = np.asarray([row["n_labels"] for row in self.history_], dtype=np.intp)
        self.stopped_by_ = loop.stopped_by_
        if self.score_curve:
            self.models_ = journal.models
        elif hasattr(self, "models_"):
            del self.models_
        for name in ("classes_", "feature_names_in_"):
            if hasattr(self, name):
                delattr(self, name)
        if not regressor:
            self.classes_ = learner.classes_
        self.n_features_in_ = learner.n_features_in_
        if hasattr(learner, "feature_names_in_"):
            self.feature_names_in_ = learner.feature_names_in_
        return self

    # ---------------------------------------------------------- prediction
    def predict(self, X):
        """Predict with the final model.

        Parameters
        ----------
        X : array-like of shape (n_samples, ...)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_outputs)
        """
        check_is_fitted(self, "learner_")
        return self.learner_.predict(X)

    def predict_proba(self, X):
        """Class probabilities of the final model.

        Parameters
        ----------
        X : array-like of shape (n_samples, ...)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Columns follow ``classes_``.
        """
        check_is_fitted(self, "learner_")
        return self.learner_.predict_proba(X)

    def learning_curve(self, X, y, *, scoring=None, sample_weight=None) -> Tuple[np.ndarray, np.ndarray]:
        """The held-out learning curve: every step's model scored on ``(X, y)``.

        Needs ``score_curve=True`` at fit, which keeps every step's model.

        Parameters
        ----------
        X : array-like of shape (n_samples, ...)
            Held-out inputs.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Their labels.
        scoring : str or callable, optional
            A scikit-learn scorer (``"neg_log_loss"``, ...); by default each
            model's ``score`` (accuracy for a classifier).
        sample_weight : array-like of shape (n_samples,), optional
            Passed to the scorer.

        Returns
        -------
        n_labels : ndarray of int, shape (n_queries + 1,)
            ``n_labels_``.
        scores : ndarray of float, shape (n_queries + 1,)
            The score of each step's model.

        Raises
        ------
        ValueError
            When fitted with ``score_curve=False`` (only the final model was
            kept).
        """
        check_is_fitted(self, "learner_")
        if not hasattr(self, "models_"):
            raise ValueError("learning_curve needs the model of every step, which only a fit with "
                             "score_curve=True keeps; set_params(score_curve=True) and fit again")
        if not is_frame(X):
            X = check_array(X, allow_nd=True, dtype=None, input_name="X")
        validate_data(self, X, reset=False, skip_check_array=True)  # the features the models were fitted on
        scorer = check_scoring(self.models_[-1], scoring=scoring)
        kwargs = {} if sample_weight is None else {"sample_weight": sample_weight}
        scores = np.asarray([scorer(model, X, y, **kwargs) for model in self.models_], dtype=float)
        return self.n_labels_.copy(), scores

    def score(self, X, y, sample_weight=None) -> float:
        """The held-out score after the budget, or the area under the learning curve.

        Parameters
        ----------
        X : array-like of shape (n_samples, ...)
            Held-out inputs.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Their labels.
        sample_weight : array-like of shape (n_samples,), optional
            Passed to the models' ``score``.

        Returns
        -------
        score : float
            With ``score_curve=False``, the final model's ``score``
            (accuracy for a classifier, R² for a scikit-learn regressor);
            with True, :func:`~skdbal.budget.learning_curve_area` of :meth:`learning_curve`
            on the same scale.
        """
        check_is_fitted(self, "learner_")
        if self.score_curve:
            return learning_curve_area(*self.learning_curve(X, y, sample_weight=sample_weight))
        return float(self.learner_.score(X, y, sample_weight=sample_weight))

    def __sklearn_tags__(self):
        """The wrapped estimator's type and target tags (read as
        :class:`~skdbal.ActiveLearner` reads them), so that
        ``cross_val_score`` stratifies the folds of a classifier."""
        tags = super().__sklearn_tags__()
        try:
            inner = get_tags(ActiveLearner(self._template(), verbose=False))
        except (TypeError, AttributeError, ValueError, ImportError):
            return tags
        tags.estimator_type = inner.estimator_type
        tags.classifier_tags = inner.classifier_tags
        tags.regressor_tags = inner.regressor_tags
        tags.target_tags = inner.target_tags
        tags.target_tags.required = True
        tags.input_tags.allow_nan = False
        return tags
