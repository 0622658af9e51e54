"""The learner's predictive surface, :class:`PredictiveMixin`: predictions, predictive samples and
scores, delegated to its fitted model (read through :func:`skdbal.predictive.as_predictive`).

This module never imports the learner: the mixin declares what it needs of the class it is mixed into.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from .._validation import is_frame
from ..predictive import as_predictive


def wrapped_kind(kind: str) -> Callable:
    """``available_if`` check: the wrapped model is read as a ``kind`` (no fit is triggered)."""

    def check(self) -> bool:
        try:
            return as_predictive(self._model_or_template()).kind == kind
        except TypeError:
            return False

    return check


def wrapped_source(source: str) -> Callable:
    """``available_if`` check: the wrapped model is read through ``source`` (no fit is triggered)."""

    def check(self) -> bool:
        try:
            return as_predictive(self._model_or_template()).source == source
        except TypeError:
            return False

    return check


class PredictiveMixin:
    """Mixin for a learner that predicts through a fitted model ``estimator_``.

    It gives :class:`~skdbal.ActiveLearner` its predictions, predictive samples and scores, so that
    the learner implements the predictive interface of :mod:`skdbal.predictive` and every strategy
    can score it; as scikit-learn's mixins do, it is public so that a class of one's own can be
    written the same way. Each method fits the initial set first if nothing is fitted yet; the
    ``available_if`` checks (``predict_proba_samples`` for a classifier, ``predictive_variance`` for
    a regressor, ``predict_samples`` and ``output_gradient_gram`` for a sampling regressor) and the
    two properties read the model, or what would be fitted, without fitting. Strategies that read
    the learner through :func:`~skdbal.predictive.as_predictive` reach its fitted model directly
    (:meth:`__skdbal_model__`), without a second trip through these methods.

    The class it is mixed into must be an estimator (it has ``fit``) and provide the members
    declared below: ``_ensure_initial_fit()`` and ``_model_or_template()``, and, once fitted,
    ``estimator_`` (and ``n_features_in_``, which :meth:`predict` and the others check ``X``
    against).

    Attributes
    ----------
    estimator_ : estimator
        Set by the host when it fits: the model every method delegates to.
    n_features_in_ : int
        Set by the host when it fits (optional): the number of features ``X`` must have.
    _ensure_initial_fit : callable () -> None
        The host's method that fits its initial labelled set if nothing is fitted yet.
    _model_or_template : callable () -> estimator
        The host's method that returns the fitted model, else the model that would be fitted.

    Examples
    --------
    A learner of one's own, which fits a clone of ``model``:

    >>> import numpy as np
    >>> from sklearn.base import BaseEstimator, clone
    >>> from sklearn.linear_model import LogisticRegression
    >>> from skdbal.learner import PredictiveMixin
    >>> class Fitter(PredictiveMixin, BaseEstimator):
    ...     def __init__(self, model=None):
    ...         self.model = model
    ...     def fit(self, X, y):
    ...         self.estimator_ = clone(self.model).fit(X, y)
    ...         return self
    ...     def _ensure_initial_fit(self):
    ...         pass                                     # no initial set to fit
    ...     def _model_or_template(self):
    ...         return getattr(self, "estimator_", self.model)
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0]])
    >>> learner = Fitter(LogisticRegression()).fit(X, [0, 0, 1, 1])
    >>> learner.predict(X).tolist(), learner.classes_.tolist()
    ([0, 0, 1, 1], [0, 1])
    >>> learner.predict_proba_samples(X).shape         # a plain classifier: T = 1 sample
    (1, 4, 2)
    >>> learner.stochastic_samples, hasattr(learner, "predictive_variance")   # a classifier's methods only
    (False, False)
    """

    estimator_: Any
    n_features_in_: int
    _ensure_initial_fit: Callable[[], None]
    _model_or_template: Callable[[], Any]

    def __skdbal_model__(self):
        """The fitted model that makes the learner's predictions, fitting the initial set first if
        nothing is fitted yet; None while there is none. What
        :func:`~skdbal.predictive.as_predictive` reads the learner as."""
        self._ensure_initial_fit()
        return getattr(self, "estimator_", None)

    def _fitted(self, X=None):
        """The fitted model (fitting the initial set first); with ``X``, after checking that it has
        the labelled set's number of features."""
        self._ensure_initial_fit()
        check_is_fitted(self, "estimator_")
        if X is not None and hasattr(self, "n_features_in_"):
            if not is_frame(X):  # at least 2-d; the values are the model's to check
                check_array(X, accept_sparse=True, allow_nd=True, dtype=None, ensure_all_finite=False)
            validate_data(self, X, reset=False, skip_check_array=True)
        return self.estimator_

    @property
    def classes_(self):
        """The fitted model's ``classes_`` (the columns of :meth:`predict_proba`), fitting the initial
        set first if nothing is fitted yet."""
        return self._fitted().classes_

    def predict(self, X):
        """Delegate to ``estimator_.predict``.

        The initial set ``X_training`` is fitted first if nothing is fitted yet.

        Parameters
        ----------
        X : array-like of shape (N, ...)
            Inputs in the form ``estimator_`` takes.

        Returns
        -------
        y_pred : ndarray of shape (N,) or (N, n_outputs)
            What ``estimator_.predict(X)`` returns: labels for a classifier,
            predicted targets for a regressor.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            If nothing has been fitted and there is no initial set.
        """
        return self._fitted(X).predict(X)

    def predict_proba(self, X):
        """Delegate to ``estimator_.predict_proba``.

        The initial set ``X_training`` is fitted first if nothing is fitted yet.

        Parameters
        ----------
        X : array-like of shape (N, ...)
            Inputs in the form ``estimator_`` takes.

        Returns
        -------
        proba : ndarray of shape (N, n_classes)
            What ``estimator_.predict_proba(X)`` returns; columns follow
            ``classes_``.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            If nothing has been fitted and there is no initial set.
        AttributeError
            If ``estimator_`` has no ``predict_proba``.
        """
        return self._fitted(X).predict_proba(X)

    @available_if(wrapped_kind("classifier"))
    def predict_proba_samples(self, X, n_samples: Optional[int] = None, *, consistent: bool = False):
        """Predictive samples ``(T, N, C)`` of ``estimator_``.

        Read through :func:`skdbal.predictive.as_predictive`: an MC estimator,
        a :class:`~sklearn.pipeline.Pipeline` ending in one, and any
        classifier (``T = 1``: its ``predict_proba``). Available only when the
        wrapped model is read as a classifier.

        Parameters
        ----------
        X : array-like of shape (N, ...)
            Inputs in the form ``estimator_`` takes.
        n_samples : int, optional
            Number of passes ``T`` to ask a sampling estimator for. By
            default its own ``n_samples``, or 1 when its passes are
            identical (``stochastic_samples`` False). A plain classifier
            gives one sample (its ``predict_proba``), and refuses more with
            a ``ValueError``.
        consistent : bool, default=False
            Ask for consistent samples (one function per pass for every
            input), passed on to ``estimator_`` through the predictive
            interface; a ``TypeError`` if it cannot honour it.

        Returns
        -------
        P : ndarray of shape (T, N, n_classes)
            ``P[t]`` is sample ``t``; each row sums to 1. The dtype is the
            estimator's (float32 for :class:`~skdbal.MCDropoutClassifier`).
        """
        return as_predictive(self._fitted(X), n_samples=n_samples).proba_samples(X, consistent=consistent)

    @available_if(wrapped_kind("regressor"))
    def predictive_variance(self, X):
        """Total predictive variance ``(N,)`` of ``estimator_`` (a probabilistic regressor).

        Read through :func:`skdbal.predictive.as_predictive`: the estimator's
        own ``predictive_variance`` (e.g.
        :meth:`skdbal.BayesianLinearRegression.predictive_variance`), or the
        sum over outputs of the squared ``std`` of
        ``predict(X, return_std=True)``. Available only when the wrapped
        model is read as a regressor.

        Parameters
        ----------
        X : array-like of shape (N, ...)
            Inputs in the form ``estimator_`` takes.

        Returns
        -------
        variance : ndarray of shape (N,), dtype float64
            The trace of each row's predictive covariance.
        """
        return as_predictive(self._fitted(X)).variance(X)

    @available_if(wrapped_source("regression_samples"))
    def predict_samples(self, X, n_samples: Optional[int] = None, *, return_var: bool = False,
                        consistent: bool = False):
        """Sampled means of ``estimator_`` (a sampling regressor), and their variances.

        Read through :func:`skdbal.predictive.as_predictive`, so a pipeline
        ending in a :class:`~skdbal.MCDropoutRegressor` works. Available
        only when the wrapped model has ``predict_samples``.

        Parameters
        ----------
        X : array-like of shape (N, ...)
            Inputs in the form ``estimator_`` takes.
        n_samples : int, optional
            Number of passes ``T``; by default the model's own.
        return_var : bool, default=False
            Also return the aleatoric variances.
        consistent : bool, default=False
            Ask for consistent samples, passed on to ``estimator_``.

        Returns
        -------
        means : ndarray of shape (T, N) or (T, N, D)
            As ``estimator_.predict_samples`` returns them: ``(T, N)`` for a
            model fitted on 1-d targets.
        variances : ndarray of the same shape
            Only with ``return_var=True``.
        """
        predictive = as_predictive(self._fitted(X), n_samples=n_samples)
        means, var = predictive.regression_samples(X, consistent=consistent, keep_shape=True)
        return (means, var) if return_var else means

    @available_if(wrapped_source("regression_samples"))
    def output_gradient_gram(self, X, *, return_output: bool = False):
        """Output-gradient Gram matrices of ``estimator_``, for expected gradient length.

        Parameters
        ----------
        X : array-like of shape (N, ...)
            Inputs in the form ``estimator_`` takes.
        return_output : bool, default=False
            Also return the outputs the gradients are taken at.

        Returns
        -------
        gram : ndarray of shape (N, D, D)
        output : ndarray of shape (N, D)
            Only with ``return_output=True``.
        """
        gram, out = as_predictive(self._fitted(X)).gradient_gram(X)
        return (gram, out) if return_output else gram

    @property
    def stochastic_samples(self) -> bool:
        """Whether the model's predictive samples differ from one another (no fit needed)."""
        return as_predictive(self._model_or_template()).stochastic

    @property
    def row_keyed_samples(self) -> bool:
        """Whether each row's samples depend on the row and the model alone (see :mod:`skdbal.predictive`)."""
        return as_predictive(self._model_or_template()).row_keyed

    def score(self, X, y, sample_weight=None):
        """Delegate to ``estimator_.score`` (accuracy for classifiers).

        The initial set ``X_training`` is fitted first if nothing is fitted yet.

        Parameters
        ----------
        X : array-like of shape (N, ...)
            Test inputs.
        y : array-like of shape (N,) or (N, n_outputs)
            True labels (targets for a regressor).
        sample_weight : array-like of shape (N,), default=None
            Passed on to ``estimator_.score``.

        Returns
        -------
        score : float
            Mean accuracy for a classifier, R² for a scikit-learn regressor.
        """
        return self._fitted(X).score(X, y, sample_weight=sample_weight)
