"""The predictive interface: how strategies get predictions from a model.

Strategies never check an estimator's class. They ask :func:`as_predictive`
for a :class:`Predictive`, which reads the model through one of two
interfaces:

**Classifiers** implement

``predict_proba_samples(X, n_samples=None) -> ndarray of shape (T, N, C)``
    ``T`` predictive samples of the class probabilities; each row sums to 1.
``stochastic_samples : bool`` (optional attribute, default True)
    Whether the ``T`` samples differ (MC dropout, an ensemble) or are one
    deterministic prediction repeated (:class:`~skdbal.MCDropoutClassifier`
    with ``mc_dropout=False``). A deterministic model is scored with one
    pass, and scores that need ``T > 1`` (BALD, mean std) warn.

**Consistent samples.** Joint scores (BatchBALD) need sample ``t`` to be one
function for every input: one dropout mask per pass across the whole pool,
not one per row. They ask for it with ``consistent=True``
(:meth:`Predictive.proba_samples`), and the request goes to the model:

``predict_proba_samples(X, n_samples=None, consistent=False)``
    A model whose method takes a ``consistent`` keyword is asked with
    ``consistent=True`` (:class:`~skdbal.MCDropoutClassifier`, and every
    wrapper of ours, which passes the request on: the learner, the ensemble).
``consistent_samples : bool`` (optional attribute, default False)
    A model whose samples are always consistent (an ensemble of
    deterministic members, each sample one member) says so here.

A deterministic model (one pass) is consistent trivially. Any other model
cannot honour the request, and :meth:`Predictive.proba_samples` raises a
``TypeError`` rather than return per-row samples as if they were consistent.

**Row-keyed samples.** A pool scored in chunks (:mod:`skdbal.dask`) is the
pool scored at once only if a row's samples do not depend on the other rows
of the call:

``row_keyed_samples : bool`` (optional attribute, default False)
    Whether each row's samples depend on that row and the model alone: masks
    seeded by the row (:class:`~skdbal.MCDropoutClassifier` with an int
    ``random_state``, any ``mask_seeding`` but ``"stream"``, and only
    dropout layers whose masks it draws), or one seed for every call and
    batch (:class:`~skdbal.LaplaceClassifier` with an int ``random_state``).
    A deterministic model is row-keyed trivially (:attr:`Predictive.row_keyed`).

**Regressors** implement

``predictive_variance(X) -> ndarray of shape (N,)``
    The trace of the predictive covariance of each row.
``predict_samples(X, n_samples=None, return_var=False)`` (optional)
    ``T`` sampled means ``(T, N)`` or ``(T, N, D)`` and, with
    ``return_var=True``, their aleatoric variances (e.g.
    :class:`~skdbal.MCDropoutRegressor`). A model with it needs no
    ``predictive_variance``.
``output_gradient_gram(X, return_output=False)`` (optional)
    The Gram matrices ``(N, D, D)`` of the output gradients, and the output
    they are taken at: what expected gradient length needs.

A third-party model that implements only one of these works with every
strategy. Everything else goes through the same adapter:

- an object that names the fitted model making its predictions with a method
  ``__skdbal_model__()`` (:class:`skdbal.ActiveLearner`) is read through that
  model, before any other rule, rather than through its own delegating methods
  (it is read itself while the method returns None);
- a scikit-learn :class:`~sklearn.pipeline.Pipeline` is read through its last
  step, after transforming ``X`` with the steps before it (``pipe[:-1]``);
- a fitted hyper-parameter search (:class:`~sklearn.model_selection.GridSearchCV`,
  refitted) is read through its ``best_estimator_``, with which it predicts;
- a wrapper with an ``estimator`` attribute and no fitted state of its own
  (a modAL learner) is read through what it wraps, while a fitted
  scikit-learn meta-estimator (``CalibratedClassifierCV``) is read itself;
- a plain classifier with ``predict_proba`` gives one deterministic sample
  (``T = 1``), and a request for more (``n_samples > 1``) is refused;
- a model that is not a classifier and whose ``predict`` takes ``return_std=True``
  (:class:`~sklearn.linear_model.BayesianRidge`,
  :class:`~sklearn.gaussian_process.GaussianProcessRegressor`) gives the sum
  of the squared standard deviations.

Examples
--------
>>> import numpy as np
>>> from skdbal.predictive import as_predictive
>>> class Coin:
...     '''A third-party model: two passes that disagree on every input.'''
...     def predict_proba_samples(self, X, n_samples=None):
...         one = np.tile([[1.0, 0.0]], (len(X), 1))
...         return np.stack([one, one[:, ::-1]])
>>> pred = as_predictive(Coin())
>>> pred.kind, pred.stochastic
('classifier', True)
>>> pred.proba_samples(np.zeros((3, 2))).shape
(2, 3, 2)
"""
from __future__ import annotations

import inspect
from typing import Optional, Sequence

import numpy as np
from sklearn.base import is_classifier
from sklearn.utils.validation import check_is_fitted

from ._validation import check_bool

__all__ = ["Predictive", "as_predictive"]

#: How a Predictive reads its model.
_SOURCES = ("samples", "proba", "variance", "std", "regression_samples")


class Predictive:
    """A model's predictions, read through the predictive interface.

    Made by :func:`as_predictive`; strategies use it instead of the model.
    It holds the model and the transformers to apply first (the steps of a
    pipeline), so it pickles whenever they do (joblib workers score chunks
    with it).

    Parameters
    ----------
    model : estimator
        The object whose interface is read.
    source : {"samples", "proba", "variance", "std", "regression_samples"}
        Which interface: ``predict_proba_samples``, ``predict_proba``,
        ``predictive_variance``, ``predict(return_std=True)`` or
        ``predict_samples``.
    stochastic : bool
        Whether the samples differ from one another.
    transforms : sequence of transformers, default=()
        Applied to ``X`` in order before ``model`` is called.
    n_samples : int, optional
        Number of samples ``T`` to ask for; by default the model's own, and
        1 for a deterministic model.

    Attributes
    ----------
    kind : {"classifier", "regressor"}
    name : str
        The model's class name, for messages.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.predictive import Predictive
    >>> class Fixed:
    ...     classes_ = np.array(["cat", "dog"])
    ...     def predict_proba(self, X):
    ...         return np.tile([0.25, 0.75], (len(X), 1))
    >>> pred = Predictive(Fixed(), "proba", stochastic=False)
    >>> pred
    Predictive(Fixed, source='proba', stochastic=False, n_transforms=0)
    >>> pred.kind, pred.classes.tolist()
    ('classifier', ['cat', 'dog'])
    >>> pred.proba_samples(np.zeros((2, 3))).tolist()      # one pass: shape (T=1, N=2, C=2)
    [[[0.25, 0.75], [0.25, 0.75]]]
    """

    def __init__(self, model, source: str, *, stochastic: bool, transforms: Sequence = (),
                 n_samples: Optional[int] = None):
        if source not in _SOURCES:
            raise ValueError(f"source must be one of {_SOURCES}; got {source!r}")
        self.model = model
        self.source = source
        self.stochastic = bool(stochastic)
        self.transforms = tuple(transforms)
        self.n_samples = n_samples

    @property
    def kind(self) -> str:
        return "classifier" if self.source in ("samples", "proba") else "regressor"

    @property
    def name(self) -> str:
        return type(self.model).__name__

    @property
    def row_keyed(self) -> bool:
        """Whether each row's samples depend on that row and the model alone, not on the other rows of a
        call: a deterministic model, or one whose ``row_keyed_samples`` says so.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.linear_model import LogisticRegression
        >>> from skdbal import MCDropoutClassifier
        >>> from skdbal.models import MLP
        >>> from skdbal.predictive import as_predictive
        >>> as_predictive(LogisticRegression().fit([[0.0], [1.0]], [0, 1])).row_keyed   # one deterministic pass
        True
        >>> net = MCDropoutClassifier(MLP, random_state=0)                # masks seeded by each row
        >>> as_predictive(net).row_keyed, as_predictive(net.set_params(mask_seeding="stream")).row_keyed
        (True, False)
        >>> class Sampler:                                                   # says nothing: not row-keyed
        ...     def predict_proba_samples(self, X, n_samples=None):
        ...         return np.full((2, len(X), 2), 0.5)
        >>> as_predictive(Sampler()).row_keyed
        False
        """
        if not self.stochastic or self.source in ("proba", "variance"):
            return True
        return bool(getattr(self.model, "row_keyed_samples", False))

    @property
    def classes(self):
        """The model's ``classes_`` (the columns of the samples), or None if it has none."""
        classes = getattr(self.model, "classes_", None)
        return None if classes is None else np.asarray(classes)

    def __repr__(self) -> str:
        return (f"Predictive({self.name}, source={self.source!r}, stochastic={self.stochastic}, "
                f"n_transforms={len(self.transforms)})")

    def prepare(self, X):
        """``X`` as the model reads it: passed through the transformers (a pipeline's steps before its model).

        A strategy that calls the model itself (its features, its density) passes ``X`` through this first.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.linear_model import LogisticRegression
        >>> from sklearn.pipeline import make_pipeline
        >>> from sklearn.preprocessing import StandardScaler
        >>> from skdbal.predictive import as_predictive
        >>> X = np.array([[0.0], [2.0], [4.0], [6.0]])
        >>> pred = as_predictive(make_pipeline(StandardScaler(), LogisticRegression()).fit(X, [0, 0, 1, 1]))
        >>> pred.prepare(np.array([[3.0], [5.0]])).round(3).tolist()   # (x - 3) / sqrt(5)
        [[0.0], [0.894]]
        """
        for step in self.transforms:
            X = step.transform(X)
        return X

    def _consistent_kwargs(self, method, consistent: bool) -> dict:
        """The keywords that ask ``method`` for consistent samples; raises if it cannot honour them."""
        if not check_bool(consistent, "consistent"):
            return {}
        if _takes_keyword(method, "consistent"):  # asked whenever it can be, whatever stochastic says
            return {"consistent": True}
        if getattr(self.model, "consistent_samples", False) or not self.stochastic:
            return {}  # declared consistent, or identical passes: consistent trivially
        raise TypeError(
            f"{self.name} cannot be asked for consistent samples (one function per pass for every "
            f"input, as BatchBALD needs): its {method.__name__} takes no `consistent` keyword and it "
            "does not declare consistent_samples=True; see skdbal.predictive")

    def proba_samples(self, X, *, consistent: bool = False) -> np.ndarray:
        """Class-probability samples of shape ``(T, n, C)``.

        Parameters
        ----------
        X : array-like of shape (n, ...)
        consistent : bool, default=False
            Ask for consistent samples: sample ``t`` one function of the
            input for every row (see the module docstring).

        Raises
        ------
        TypeError
            If the model is a regressor, or cannot honour ``consistent=True``.
        """
        if self.kind != "classifier":
            raise TypeError(f"{self.name} is a regressor: it gives predictive variances, "
                            "not class probabilities; use the predictive_variance strategy")
        if self.source == "proba":  # one deterministic pass: consistent trivially
            check_bool(consistent, "consistent")
            if self.n_samples is not None and self.n_samples != 1:
                raise ValueError(
                    f"{self.name} gives one deterministic sample (its predict_proba), so n_samples="
                    f"{self.n_samples} cannot be honoured; leave n_samples unset, or use a model with "
                    "predict_proba_samples (an MC-dropout network, an ensemble)")
            return np.asarray(self.model.predict_proba(self.prepare(X)))[np.newaxis]
        extra = self._consistent_kwargs(self.model.predict_proba_samples, consistent)
        X = self.prepare(X)
        T = self.n_samples
        if T is None and not self.stochastic:
            T = 1  # one deterministic pass, not T identical ones
        if T is None:  # third-party samplers need not take n_samples
            return np.asarray(self.model.predict_proba_samples(X, **extra))
        return np.asarray(self.model.predict_proba_samples(X, n_samples=T, **extra))

    def variance(self, X) -> np.ndarray:
        """Total predictive variance of shape ``(n,)``: the trace of the covariance.

        Raises
        ------
        TypeError
            If the model is a classifier, or its ``predict`` does not take
            ``return_std``.
        """
        if self.kind != "regressor":
            raise TypeError(f"{self.name} is a classifier: predictive_variance needs a "
                            "probabilistic regressor such as skdbal.BayesianLinearRegression")
        X = self.prepare(X)
        if self.source == "variance" or (self.source == "regression_samples"
                                         and hasattr(self.model, "predictive_variance")):
            return np.asarray(self.model.predictive_variance(X), dtype=np.float64).reshape(-1)
        if self.source == "regression_samples":
            means, var = self._samples(X)
            return (means.var(axis=0) + var.mean(axis=0)).sum(axis=1)
        try:
            _, std = self.model.predict(X, return_std=True)
        except TypeError:
            raise TypeError(
                f"{self.name}.predict does not take return_std; predictive_variance needs a "
                "probabilistic regressor such as skdbal.BayesianLinearRegression") from None
        std = np.asarray(std, dtype=np.float64)
        return (std ** 2).reshape(len(std), -1).sum(axis=1)

    def _raw_samples(self, X, consistent: bool = False):
        """``predict_samples(X, return_var=True)`` of already transformed ``X``, as the model gives them."""
        if self.source != "regression_samples":
            raise TypeError(f"{self.name} has no predict_samples: sampled regression needs a model such as "
                            "skdbal.MCDropoutRegressor")
        kwargs = {} if self.n_samples is None else {"n_samples": self.n_samples}
        kwargs.update(self._consistent_kwargs(self.model.predict_samples, consistent))
        return self.model.predict_samples(X, return_var=True, **kwargs)

    def _samples(self, X, consistent: bool = False):
        """``predict_samples`` of already transformed ``X``, as float64 ``(T, N, D)``."""
        means, var = self._raw_samples(X, consistent)
        means = np.asarray(means, dtype=np.float64)
        var = np.broadcast_to(np.asarray(var, dtype=np.float64), means.shape)  # shaped like means, or one value
        shape = means.shape[:2] + (-1,)
        return means.reshape(shape), var.reshape(shape)

    def regression_samples(self, X, *, consistent: bool = False, keep_shape: bool = False):
        """Sampled means and their aleatoric variances, each ``(T, n, D)``.

        Parameters
        ----------
        X : array-like of shape (n, ...)
        consistent : bool, default=False
            Ask for consistent samples (see the module docstring).
        keep_shape : bool, default=False
            Return them as the model gives them (``(T, n)`` for a model
            fitted on 1-d targets) instead of as float64 ``(T, n, D)``.

        Raises
        ------
        TypeError
            If the model has no ``predict_samples``, or cannot honour
            ``consistent=True``.
        """
        X = self.prepare(X)
        if keep_shape:
            return self._raw_samples(X, consistent)
        return self._samples(X, consistent)

    def gradient_gram(self, X):
        """Output-gradient Gram matrices ``(n, D, D)`` and the outputs ``(n, D)`` they are taken at.

        Raises
        ------
        TypeError
            If the model has no ``output_gradient_gram``.
        """
        if not hasattr(self.model, "output_gradient_gram"):
            raise TypeError(f"{self.name} has no output_gradient_gram: expected gradient length needs the "
                            "gradients of a network regressor such as skdbal.MCDropoutRegressor")
        gram, out = self.model.output_gradient_gram(self.prepare(X), return_output=True)
        out = np.asarray(out, dtype=np.float64)
        return np.asarray(gram, dtype=np.float64), out.reshape(len(out), -1)


def _takes_keyword(method, name: str) -> bool:
    """Whether ``method`` has a parameter called ``name`` (``**kwargs`` does not count)."""
    try:
        return name in inspect.signature(method).parameters
    except (TypeError, ValueError):  # no signature to read
        return False


def _is_fitted(est) -> bool:
    try:
        check_is_fitted(est)
    except Exception:  # NotFittedError, or not a scikit-learn estimator at all
        return False
    return True


def as_predictive(estimator, *, n_samples: Optional[int] = None) -> Predictive:
    """Read a fitted model through the predictive interface.

    The one adapter between models and strategies; see the module docstring
    for the rules, tried in that order. Nothing here checks a class: only
    which methods and attributes the object has.

    Parameters
    ----------
    estimator : estimator
        A fitted model, a pipeline ending in one, or a wrapper of one.
    n_samples : int, optional
        Number of samples ``T`` to ask a sampling classifier for, instead of
        its own default.

    Returns
    -------
    Predictive

    Raises
    ------
    TypeError
        If the object offers none of the interfaces.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> from skdbal.predictive import as_predictive
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0]])
    >>> pipe = make_pipeline(StandardScaler(), LogisticRegression()).fit(X, [0, 0, 1, 1])
    >>> pred = as_predictive(pipe)          # read through its last step
    >>> pred.source, pred.stochastic, pred.proba_samples(X).shape
    ('proba', False, (1, 4, 2))
    """
    return _resolve(estimator, n_samples, ())


def _resolve(est, n_samples, transforms) -> Predictive:
    if callable(getattr(type(est), "__skdbal_model__", None)):  # a learner: read its model, not its delegation
        model = est.__skdbal_model__()
        if model is not None:
            return _resolve(model, n_samples, transforms)
    if hasattr(est, "predict_proba_samples"):
        return Predictive(est, "samples", stochastic=getattr(est, "stochastic_samples", True),
                          transforms=transforms, n_samples=n_samples)
    if hasattr(est, "predict_samples"):
        return Predictive(est, "regression_samples", stochastic=getattr(est, "stochastic_samples", True),
                          transforms=transforms, n_samples=n_samples)
    if hasattr(est, "predictive_variance"):
        return Predictive(est, "variance", stochastic=True, transforms=transforms)
    best = getattr(est, "best_estimator_", None)
    if best is not None:  # a fitted search (GridSearchCV): it predicts with its best estimator
        return _resolve(best, n_samples, transforms)
    steps = getattr(est, "steps", None)
    if steps:  # a Pipeline: its own slicing transforms with all but the last step ("passthrough" too)
        head = (est[:-1],) if len(steps) > 1 else ()
        return _resolve(steps[-1][1], n_samples, transforms + head)
    inner = getattr(est, "estimator", None)
    # a wrapper with no fitted state of its own (modAL's learner) predicts with what it
    # wraps; a fitted scikit-learn meta-estimator (CalibratedClassifierCV) predicts itself
    if inner is not None and not _is_fitted(est):
        return _resolve(inner, n_samples, transforms)
    if hasattr(est, "predict_proba"):
        return Predictive(est, "proba", stochastic=False, transforms=transforms, n_samples=n_samples)
    if hasattr(est, "predict") and not is_classifier(est):
        return Predictive(est, "std", stochastic=True, transforms=transforms)
    raise TypeError(
        f"estimator must provide predict_proba_samples or predict_proba (a classifier), or "
        f"predict_samples, predictive_variance or predict(return_std=True) (a regressor); "
        f"got {type(est).__name__}")
