"""scikit-activeml both ways: their query strategies in our learner, our models in their strategies.

`scikit-activeml <https://scikit-activeml.github.io>`_ (``pip install
skdbal[skactiveml]``, import name ``skactiveml``, 1.0.x) marks the unlabelled
rows of one ``(X, y)`` with ``MISSING_LABEL`` (NaN) and calls a pool strategy
as ``qs.query(X, y, clf=..., fit_clf=..., batch_size=...)``, where ``clf`` is
one of *its* classifiers (:class:`skactiveml.base.SkactivemlClassifier`).

- **Their strategies in our learner.** :class:`SkactivemlStrategy` wraps
  one of their pool strategies as a :class:`~skdbal.acquisition.base.Strategy`:
  ``ActiveLearner(net, SkactivemlStrategy(CoreSet()))``. Each query builds
  their ``(X, y)`` from the learner's labels so far and the pool's
  candidates, hands a strategy that wants a classifier the learner's
  fitted model (:class:`SkdbalClassifier`, *not* refitted), seeds the
  strategy with the query's ``random_state``, and maps their indices back
  to pool positions.
- **Our models in their strategies.** :class:`SkdbalClassifier` (or
  :func:`as_skactiveml_classifier`) makes any fitted model that
  :func:`skdbal.predictive.as_predictive` reads (an
  :class:`~skdbal.MCDropoutClassifier`, a
  :class:`~skdbal.DeepEnsembleClassifier`, a pipeline, a plain scikit-learn
  classifier) one of their classifiers, with a ``predict_proba_samples``
  method of the shape ``(T, N, C)`` that their sample-based strategies
  read: ``BatchBALD(sample_predictions_method_name="predict_proba_samples")``
  and ``GreedyBALD``/``QueryByCommittee`` likewise.

Their ``GreedyBALD`` utilities are our :data:`~skdbal.acquisition.bald`
scores when both read the same samples (up to their clipping of
probabilities at ``eps=1e-7``): for an MC-dropout network that means the
wrapper's ``consistent=False``, the per-row masks ``bald`` reads. With the
default ``consistent=True`` (one mask set for the pool, which BatchBALD
needs) they are the same formula on other masks, another Monte Carlo
estimate of the mutual information, and their top picks differ from ours
(a deep ensemble's samples are its members by default, the same either way). Their
BatchBALD picks are ours while both compute the joint entropy exactly (``C^(b-1)`` at most their ``n_MC_samples``, our
``n_joint_samples``). This module imports ``skactiveml`` when it is
installed; without it the module still imports, and making any of its
objects raises an ``ImportError`` naming the extra. Which of their strategies
run, and which do not (their regression strategies; those tied to one of
their classifiers), is in the migration guide's scikit-activeml section.

Examples
--------
>>> import pytest
>>> _ = pytest.importorskip("skactiveml")   # the optional extra: pip install skdbal[skactiveml]
>>> import numpy as np
>>> from sklearn.datasets import load_digits
>>> from sklearn.linear_model import LogisticRegression
>>> from skactiveml.pool import CoreSet
>>> from skdbal import ActiveLearner
>>> from skdbal.interop.skactiveml import SkactivemlStrategy
>>> X, y = load_digits(return_X_y=True)
>>> learner = ActiveLearner(LogisticRegression(max_iter=200), SkactivemlStrategy(CoreSet()),
...                         random_state=0, verbose=False)
>>> history = learner.simulate(X[:500], y[:500], n_queries=2, n_instances=5)
>>> [row["n_labels"] for row in history]
[20, 25, 30]
"""
from __future__ import annotations

import inspect
from typing import Optional

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.utils import check_random_state

from .._validation import check_n_instances, check_pool, is_frame, label_columns, pool_kwargs
from ..acquisition.base import Acquisition, Strategy, check_options
from ..predictive import as_predictive

try:  # the optional extra
    from skactiveml.base import SkactivemlClassifier as _SkactivemlClassifier
    from skactiveml.utils import MISSING_LABEL, is_labeled
except ImportError:  # pragma: no cover - exercised only without the extra
    _SkactivemlClassifier = None
    MISSING_LABEL = np.nan

__all__ = ["SkactivemlStrategy", "SkdbalClassifier", "as_skactiveml_classifier"]

_EXTRA = "scikit-activeml is not installed: pip install 'skdbal[skactiveml]' (or 'scikit-activeml>=1.0,<1.1')"


def _require():
    if _SkactivemlClassifier is None:
        raise ImportError(_EXTRA)


# Without the extra the class still exists (documented, importable), on plain scikit-learn bases.
_Base = (_SkactivemlClassifier,) if _SkactivemlClassifier is not None else (ClassifierMixin, BaseEstimator)


class SkdbalClassifier(*_Base):
    """A fitted model as a scikit-activeml classifier, without refitting it.

    Their strategies take a :class:`skactiveml.base.SkactivemlClassifier`;
    this one reads ``estimator`` through
    :func:`skdbal.predictive.as_predictive`, so an
    :class:`~skdbal.MCDropoutClassifier`, a
    :class:`~skdbal.DeepEnsembleClassifier`, a pipeline ending in one, or any
    scikit-learn classifier serves. A fitted ``estimator`` is used as it is
    (no copy, no refit): pass ``fit_clf=False`` (``fit_ensemble=False``) to
    their ``query``. With ``fit_clf=True`` they :meth:`fit` a clone of this
    wrapper, which fits a clone of ``estimator`` on the labelled rows only.

    Parameters
    ----------
    estimator : estimator
        A classifier, fitted or not (then :meth:`fit` it, or let their
        strategy with ``fit_clf=True``).
    classes : array-like of shape (C,), optional
        The classes, in column order. By default the model's ``classes_``.
        Given, the model's columns are put in this order (zeros for a class
        it does not know; a class of the model's that is not in ``classes``
        is a ``ValueError``), and :meth:`fit` sets the ``classes`` parameter of
        an estimator that has one and left it None (so a network has an
        output for every class even if some are not labelled yet).
    missing_label : scalar, str, np.nan or None, default=np.nan
        What marks an unlabelled row in the ``y`` given to :meth:`fit`; must
        be the strategy's ``missing_label``.
    n_samples : int, optional
        Number of predictive samples ``T`` of :meth:`predict_proba_samples`;
        by default the model's own.
    consistent : bool, default=True
        Ask the model for consistent samples: sample ``t`` is one function
        for every row (one set of dropout masks for the pool), which
        BatchBALD's joint entropies need (see :mod:`skdbal.predictive`).
        ``False`` gives the per-row samples that our pointwise strategies
        (:data:`~skdbal.acquisition.bald`) read: their ``GreedyBALD`` scores
        equal our ``bald``'s (to round-off, with their ``eps`` tiny) only
        with ``consistent=False``. With ``True`` an MC-dropout network's
        samples are other masks, so their BALD is another estimate and its
        top picks differ from ours; a deep ensemble's samples are its
        members (by default), the same either way.
    input_shape : tuple of int, optional
        The per-row shape the model takes, when the strategy is given rows
        flattened to 2-d (their distance-based strategies need 2-d ``X``):
        each ``X`` is reshaped to ``(len(X), *input_shape)`` before it
        reaches the model. :class:`SkactivemlStrategy` sets it.

    Attributes
    ----------
    estimator_ : estimator
        The model predictions come from: the one :meth:`fit` trained, else
        ``estimator`` itself.
    classes_ : ndarray of shape (C,)

    Examples
    --------
    >>> import pytest
    >>> _ = pytest.importorskip("skactiveml")
    >>> import numpy as np
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.linear_model import SGDClassifier
    >>> from skactiveml.pool import BatchBALD
    >>> from skdbal import DeepEnsembleClassifier
    >>> from skdbal.interop.skactiveml import SkdbalClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> ens = DeepEnsembleClassifier(SGDClassifier(loss="log_loss", max_iter=5, tol=None), n_members=4,
    ...                              random_state=0).fit(X[::10], y[::10])
    >>> clf = SkdbalClassifier(ens)                  # the fitted ensemble, as it is
    >>> clf.predict_proba_samples(X[:5]).shape       # (members, N, C), what their BALD reads
    (4, 5, 3)
    >>> y_partial = np.full(len(y), np.nan)
    >>> y_partial[::10] = y[::10]
    >>> qs = BatchBALD(sample_predictions_method_name="predict_proba_samples", random_state=0)
    >>> idx = qs.query(X, y_partial, ensemble=clf, fit_ensemble=False, batch_size=3)
    >>> len(set(idx.tolist())), bool(np.isnan(y_partial[idx]).all())
    (3, True)
    """

    def __init__(self, estimator, classes=None, missing_label=MISSING_LABEL, *, n_samples: Optional[int] = None,
                 consistent: bool = True, input_shape=None):
        _require()
        super().__init__(classes=classes, missing_label=missing_label)
        self.estimator = estimator
        self.n_samples = n_samples
        self.consistent = consistent
        self.input_shape = input_shape

    # --------------------------------------------------------------- model
    def _model(self):
        return self.__dict__.get("estimator_", self.estimator)

    @property
    def row_keyed_samples(self) -> bool:
        """Whether the wrapped model's samples of a row depend on that row alone (:mod:`skdbal.predictive`)."""
        try:
            return as_predictive(self._model()).row_keyed
        except TypeError:
            return False

    def __sklearn_is_fitted__(self) -> bool:
        if "estimator_" in self.__dict__:
            return True
        model = self.estimator
        try:
            from sklearn.utils.validation import check_is_fitted

            check_is_fitted(model)
        except Exception:  # NotFittedError, or an object scikit-learn cannot tell about
            return hasattr(model, "classes_")
        return True

    @property
    def classes_(self) -> np.ndarray:
        if self.classes is not None:
            return np.asarray(self.classes)
        classes = getattr(self._model(), "classes_", None)
        if classes is None:
            raise AttributeError(f"{type(self._model()).__name__} has no classes_; fit it, or pass classes")
        return np.asarray(classes)

    def _rows(self, X):
        X = np.asarray(X)
        if self.input_shape is not None:
            X = X.reshape((len(X),) + tuple(self.input_shape))
        return X

    def _align(self, P) -> np.ndarray:
        """``P``'s last axis (the model's ``classes_``) in the order of ``classes_``, as float64."""
        P = np.array(P, dtype=np.float64)  # a copy: their BatchBALD clips its input in place
        own = getattr(self._model(), "classes_", None)
        if self.classes is None or own is None:
            return P
        own, classes = np.asarray(own), np.asarray(self.classes)
        if own.shape == classes.shape and np.array_equal(own, classes):
            return P
        out = np.zeros(P.shape[:-1] + (len(classes),))
        out[..., label_columns(classes, own, "the model's classes_")] = P
        return out

    # ------------------------------------------------------------- fitting
    def fit(self, X, y, sample_weight=None, **fit_params):
        """Fit a clone of ``estimator`` on the labelled rows of ``(X, y)``.

        Parameters
        ----------
        X : array-like of shape (N, ...)
        y : array-like of shape (N,)
            Labels, ``missing_label`` where unknown; those rows are dropped.
        sample_weight : array-like of shape (N,), optional
            Passed on (for the labelled rows) when given.
        **fit_params :
            Passed to the estimator's ``fit``.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            If no row is labelled.
        """
        X = self._rows(X)
        y = np.asarray(y)
        keep = is_labeled(y, missing_label=self.missing_label)
        if not keep.any():
            raise ValueError("SkdbalClassifier.fit: no row of y is labelled")
        y_lab = y[keep]
        model = clone(self.estimator)
        if self.classes is not None:
            classes = np.asarray(self.classes)
            if y_lab.dtype != classes.dtype and y_lab.dtype.kind == "f" and classes.dtype.kind in "iu" \
                    and np.all(y_lab == np.round(y_lab)):
                y_lab = y_lab.astype(classes.dtype)  # NaN made integer labels float: give them back
            params = model.get_params(deep=False) if hasattr(model, "get_params") else {}
            if "classes" in params and params["classes"] is None:
                model.set_params(classes=classes)
        if sample_weight is not None:
            fit_params["sample_weight"] = np.asarray(sample_weight)[keep]
        self.estimator_ = model.fit(X[keep], y_lab, **fit_params)
        return self

    # ---------------------------------------------------------- prediction
    def predict_proba(self, X, return_embeddings: bool = False):
        """Class probabilities, the model's ``predict_proba``; with the embeddings.

        Parameters
        ----------
        X : array-like of shape (N, ...)
        return_embeddings : bool, default=False
            Also return the model's own features (its ``transform``: a
            network's penultimate layer), as their ``Badge`` reads them with
            ``clf_embedding_flag_name="return_embeddings"``.

        Returns
        -------
        proba : ndarray of shape (N, C), float64
        embeddings : ndarray of shape (N, n_features), only with ``return_embeddings=True``
        """
        X = self._rows(X)
        model = self._model()
        if hasattr(model, "predict_proba"):
            P = self._align(model.predict_proba(X))
        else:  # a sampler without predict_proba: the mean of its samples
            P = self._align(as_predictive(model, n_samples=self.n_samples).proba_samples(X).mean(axis=0))
        if not return_embeddings:
            return P
        if not hasattr(model, "transform"):
            raise TypeError(f"return_embeddings needs a model with transform (a network's features); "
                            f"{type(model).__name__} has none")
        return P, np.asarray(model.transform(X), dtype=np.float64).reshape(len(X), -1)

    def predict_proba_samples(self, X, n_samples: Optional[int] = None) -> np.ndarray:
        """``T`` predictive samples of the class probabilities, as their sample-based strategies read them.

        Name this method in their ``sample_predictions_method_name``
        (``BatchBALD``, ``GreedyBALD``, ``QueryByCommittee``); their
        ``sample_predictions_dict={"n_samples": T}`` sets ``T``.

        Parameters
        ----------
        X : array-like of shape (N, ...)
        n_samples : int, optional
            ``T``; by default the ``n_samples`` parameter, else the model's.

        Returns
        -------
        P : ndarray of shape (T, N, C), float64
            Consistent samples unless ``consistent=False``.
        """
        T = self.n_samples if n_samples is None else n_samples
        P = as_predictive(self._model(), n_samples=T).proba_samples(self._rows(X), consistent=self.consistent)
        return self._align(P)

    def predict(self, X) -> np.ndarray:
        """The most probable class under :meth:`predict_proba`.

        Returns
        -------
        y_pred : ndarray of shape (N,)
        """
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]


def as_skactiveml_classifier(estimator, *, missing_label=MISSING_LABEL, **params) -> SkdbalClassifier:
    """Wrap a fitted model (ours or any classifier) for scikit-activeml's strategies, without refitting.

    The same as ``SkdbalClassifier(estimator, classes=estimator.classes_,
    missing_label=missing_label, **params)``: the classes are fixed to the
    model's, so a clone their strategy fits keeps them.

    Parameters
    ----------
    estimator : estimator
        A fitted classifier.
    missing_label : scalar, str, np.nan or None, default=np.nan
    **params :
        Further parameters of :class:`SkdbalClassifier` (``n_samples``,
        ``consistent``, ``input_shape``).

    Returns
    -------
    SkdbalClassifier

    Examples
    --------
    >>> import pytest
    >>> _ = pytest.importorskip("skactiveml")
    >>> import numpy as np
    >>> from sklearn.datasets import load_digits
    >>> from skactiveml.pool import GreedyBALD
    >>> from skdbal import MCDropoutClassifier
    >>> from skdbal.acquisition import bald
    >>> from skdbal.interop.skactiveml import as_skactiveml_classifier
    >>> X, y = load_digits(return_X_y=True)
    >>> X = (X / 16).reshape(-1, 8, 8).astype("float32")
    >>> net = MCDropoutClassifier(classes=np.arange(10), module__kernel_size=3, max_epochs=2, n_samples=10,
    ...                           random_state=0).fit(X[:100], y[:100])
    >>> clf = as_skactiveml_classifier(net, consistent=False)   # per-row samples, as bald reads them
    >>> y_partial = np.full(300, np.nan)
    >>> y_partial[:100] = y[:100]
    >>> qs = GreedyBALD(sample_predictions_method_name="predict_proba_samples", eps=1e-300, random_state=0)
    >>> idx, utilities = qs.query(X[:300], y_partial, ensemble=clf, fit_ensemble=False, batch_size=3,
    ...                           return_utilities=True)
    >>> ours = bald.acquisition_scores(net, X[100:300])                        # the same samples, our BALD
    >>> bool(np.allclose(utilities[0, 100:], ours, atol=1e-5)), sorted(idx - 100) == sorted(bald(net, X[100:300], 3)[0])
    (True, True)
    """
    classes = getattr(estimator, "classes_", None)
    if classes is None:
        raise TypeError(f"{type(estimator).__name__} has no classes_: fit it first, or use "
                        "SkdbalClassifier(estimator, classes=...)")
    return SkdbalClassifier(estimator, classes=np.asarray(classes), missing_label=missing_label, **params)


def _labelled_set(estimator):
    """``(X_labelled, y_labelled, model)`` of what a strategy was given: our learner's labels so far
    and fitted model (``X_training_``, ``y_training_``, ``estimator_``), a modAL learner's
    (``X_training``, ``y_training``, ``estimator``), or a bare model with no labelled set."""
    if hasattr(estimator, "X_training_"):
        return estimator.X_training_, estimator.y_training_, getattr(estimator, "estimator_", estimator)
    if hasattr(estimator, "X_training") and hasattr(estimator, "estimator"):
        return estimator.X_training, estimator.y_training, estimator.estimator
    return None, None, estimator


#: The names under which their pool strategies take a classifier (Clue: ``estimator``), each with ``fit_<name>``.
_CLASSIFIER_KEYWORDS = ("clf", "ensemble", "estimator")


def _query_parameters(qs) -> set:
    return set(inspect.signature(qs.query).parameters)


class SkactivemlStrategy(Strategy):
    """One of scikit-activeml's pool strategies as a skdbal strategy.

    Each query hands ``query_strategy.query`` one ``(X, y)``: the labelled
    set the strategy is shown (an :class:`~skdbal.ActiveLearner`'s labels so
    far, ``X_training_``/``y_training_``; a modAL learner's
    ``X_training``/``y_training``; nothing for a bare model) followed by the
    pool's candidates with ``y = MISSING_LABEL``. Their indices, which fall
    on the candidates, become pool positions, and each pick's score is its
    utility when it was picked (``return_utilities=True``).

    **The model.** A strategy whose ``query`` takes ``clf`` (uncertainty
    sampling, Badge, ...), ``ensemble`` (BatchBALD, GreedyBALD,
    query by committee) or ``estimator`` (Clue) is given the learner's fitted model wrapped as a
    :class:`SkdbalClassifier`, with ``fit_clf=False`` (``fit_ensemble``): it
    is not refitted nor copied, so the scores are those of the model the
    learner trained. The wrapper gives consistent samples
    (``consistent=True``, as BatchBALD needs): their GreedyBALD here scores
    an MC-dropout network on one mask set for the pool, not the per-row
    masks of our :data:`~skdbal.acquisition.bald`, so its picks are not
    ``bald``'s (use ``bald`` for those). ``fit_clf=True`` lets them fit a clone on the labelled
    set instead (a second training of the same model on the same labels);
    ``clf=`` gives them a classifier of your own.

    **Rows.** ``X`` is given to them flattened to 2-d (their distance-based
    strategies need it); the wrapped model gets its rows back in their own
    shape. With ``features="embedding"`` a strategy that takes no classifier
    (CoreSet, TypiClust, ProbCover) sees the model's features instead (its
    ``transform``: a network's penultimate layer), as the deep active
    learning papers use them. For Badge's gradient embedding on those
    features, give it ``Badge(clf_embedding_flag_name="return_embeddings")``.

    **Seeding.** The strategy is cloned with ``random_state`` set to the
    query's (the learner draws one per query), so a seeded learner makes
    the same picks every run; ``random_tie_break`` is not used (they break
    ties with that seed). Their ``missing_label`` is set to NaN for numeric
    labels and None for others; a classifier of your own must use the same.

    Parameters
    ----------
    query_strategy : skactiveml.base.SingleAnnotatorPoolQueryStrategy
        E.g. ``UncertaintySampling(method="entropy")``, ``CoreSet()``,
        ``TypiClust()``, ``Badge()``,
        ``BatchBALD(sample_predictions_method_name="predict_proba_samples")``.
    clf : skactiveml.base.SkactivemlClassifier, optional
        The classifier for a strategy that takes one (``clf``, ``ensemble``
        or ``estimator``); by default the model being trained, wrapped (:class:`SkdbalClassifier`).
    fit_clf : bool, default=False
        Let the strategy fit (a clone of) the classifier on the labelled set
        before it scores, instead of using it as fitted.
    features : {"input", "embedding"}, default="input"
        What a strategy without a classifier measures distances on.
    query_params : dict, optional
        Further keywords of their ``query`` (``utility_weight``, a
        ``discriminator``, ...).

    Examples
    --------
    >>> import pytest
    >>> _ = pytest.importorskip("skactiveml")
    >>> import numpy as np
    >>> from sklearn.datasets import load_digits
    >>> from sklearn.linear_model import LogisticRegression
    >>> from skactiveml.pool import UncertaintySampling
    >>> from skdbal import ActiveLearner
    >>> from skdbal.acquisition import max_entropy
    >>> from skdbal.interop.skactiveml import SkactivemlStrategy
    >>> X, y = load_digits(return_X_y=True)
    >>> theirs = SkactivemlStrategy(UncertaintySampling(method="entropy"))
    >>> learner = ActiveLearner(LogisticRegression(max_iter=200), theirs, random_state=0, verbose=False)
    >>> y_partial = np.full(500, np.nan)
    >>> y_partial[:30] = y[:30]
    >>> idx, _ = learner.fit(X[:500], y_partial).query(n_instances=5)
    >>> ours, _ = max_entropy(learner, X[30:500], 5)           # our entropy, same model
    >>> idx.tolist() == (ours + 30).tolist()
    True
    """

    def __init__(self, query_strategy, *, clf=None, fit_clf: bool = False, features: str = "input",
                 query_params: Optional[dict] = None):
        self.query_strategy = query_strategy
        self.clf = clf
        self.fit_clf = fit_clf
        self.features = features
        self.query_params = query_params

    def acquire(self, estimator, X_pool, n_instances: int = 1, *, random_tie_break: bool = False,
                random_state=None, **kwargs) -> Acquisition:
        """Ask their strategy for ``n_instances`` of ``X_pool``.

        Parameters
        ----------
        estimator : estimator
            The learner (its labels so far and fitted model are read), a
            modAL learner, or a fitted model alone (no labelled set).
        X_pool : ndarray of shape (N, ...)
            The candidates.
        n_instances : int, default=1
            Their ``batch_size``.
        random_tie_break : bool, default=False
            Not used: their strategy breaks ties with ``random_state``.
        random_state : int, RandomState instance or None, default=None
            Seeds their strategy (a clone of it), and so its tie breaks,
            clusterings and samplings.
        **kwargs :
            Pool-aligned keywords (``*_pool``), unused.

        Returns
        -------
        Acquisition
            Pool positions, best first as they picked them, and their
            utilities at the time of each pick.
        """
        _require()
        check_options(self, kwargs)
        X_pool = check_pool(X_pool)
        n_instances = check_n_instances(n_instances, len(X_pool))
        pool_kwargs(kwargs, len(X_pool))
        if self.features not in ("input", "embedding"):
            raise ValueError(f"features must be 'input' or 'embedding'; got {self.features!r}")
        X_lab, y_lab, model = _labelled_set(estimator)
        if is_frame(X_pool) or is_frame(X_lab):
            raise TypeError("SkactivemlStrategy needs array pools (scikit-activeml reads arrays); "
                            "convert the DataFrame with .to_numpy()")
        X_pool = np.asarray(X_pool)
        n_lab = 0 if X_lab is None else len(X_lab)
        X_all = X_pool if not n_lab else np.concatenate([np.asarray(X_lab), X_pool])
        y_known = np.asarray(y_lab) if n_lab else np.zeros(0)
        if y_known.ndim != 1:
            raise ValueError(f"scikit-activeml's pool strategies take one label per row; the labelled set has "
                             f"labels of shape {y_known.shape}")
        numeric = y_known.dtype.kind in "biuf" or not n_lab
        missing = np.nan if numeric else None
        y_all = np.concatenate([y_known.astype(np.float64 if numeric else object),
                                np.full(len(X_pool), missing, dtype=np.float64 if numeric else object)])

        qs = clone(self.query_strategy)
        params = qs.get_params(deep=False)
        if "missing_label" in params:
            qs.set_params(missing_label=missing)
        if random_state is not None and "random_state" in params:
            seed = (random_state if isinstance(random_state, (int, np.integer))
                    else check_random_state(random_state).randint(2**31 - 1))
            qs.set_params(random_state=int(seed))

        takes = _query_parameters(qs)
        call = {}
        wants = next((name for name in _CLASSIFIER_KEYWORDS if name in takes), None)
        if wants is not None:
            clf = self.clf
            if clf is None:
                clf = SkdbalClassifier(model, classes=getattr(model, "classes_", None), missing_label=missing,
                                       input_shape=X_pool.shape[1:] if X_pool.ndim > 2 else None)
            call = {wants: clf, f"fit_{wants}": bool(self.fit_clf)}
        if self.features == "embedding":
            if wants is not None:
                raise ValueError(f"features='embedding' is for strategies without a classifier; "
                                 f"{type(qs).__name__} predicts with its {wants} on the inputs (for Badge on the "
                                 "network's features use Badge(clf_embedding_flag_name='return_embeddings'))")
            if not hasattr(model, "transform"):
                raise TypeError(f"features='embedding' needs a model with transform (a network's features); "
                                f"{type(model).__name__} has none")
            X_all = np.asarray(model.transform(X_all), dtype=np.float64)
        X_all = X_all.reshape(len(X_all), -1)
        call.update(self.query_params or {})
        if "return_utilities" in takes:
            call["return_utilities"] = True
        result = qs.query(X_all, y_all, batch_size=n_instances, **call)
        idx, utilities = result if isinstance(result, tuple) else (result, None)
        idx = np.asarray(idx, dtype=np.intp).reshape(-1)
        if len(idx) != n_instances or np.any(idx < n_lab) or np.any(idx >= len(X_all)):
            raise ValueError(f"{type(qs).__name__}.query returned {idx.tolist()[:10]} for a batch of {n_instances} "
                             f"among rows {n_lab}..{len(X_all) - 1} (the candidates)")
        scores = None
        if utilities is not None:
            utilities = np.asarray(utilities, dtype=np.float64)
            scores = (utilities[np.arange(len(idx)), idx] if utilities.ndim == 2 else utilities[idx])
        return Acquisition(idx - n_lab, scores)
