"""Deep ensembles: M independently trained copies of a classifier as M predictive samples."""
from __future__ import annotations

from typing import Optional

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.utils import check_random_state, get_tags
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from .._validation import check_bool, check_positive_int, is_frame

__all__ = ["DeepEnsembleClassifier"]


def _seed_keys(estimator) -> list:
    """Every ``random_state`` parameter of ``estimator``, its own and its parts' (a pipeline's steps)."""
    params = estimator.get_params(deep=True) if hasattr(estimator, "get_params") else {}
    return sorted(k for k in params if k == "random_state" or k.endswith("__random_state"))


def _fit_member(estimator, seed, X, y, fit_params):
    member = clone(estimator)
    member.set_params(**{key: int(seed) for key in _seed_keys(member)})
    return member.fit(X, y, **fit_params)


class DeepEnsembleClassifier(ClassifierMixin, BaseEstimator):
    """A deep ensemble: ``n_members`` clones of a classifier, trained from different seeds.

    Each member is a clone of ``estimator`` with its own ``random_state``
    (weight initialisation, batch order, dropout), trained on the same data
    (Lakshminarayanan et al., 2017). The members are the ensemble's
    predictive samples: :meth:`predict_proba_samples` returns ``(M, N, C)``,
    so every strategy, decorator and the learner work with it as with an
    MC-dropout network. Members that sample themselves (an
    :class:`~skdbal.MCDropoutClassifier`) can contribute ``T`` passes each,
    ``(M·T, N, C)``, with ``samples_per_member=T``.

    Parameters
    ----------
    estimator : classifier
        Any classifier with ``predict_proba`` and a ``random_state``
        parameter, its own or its parts' (a pipeline's steps): every one is
        set to the member's seed. One without any is refused, since its
        members would be identical.
    n_members : int, default=5
        ``M``, at least 1.
    samples_per_member : int, optional
        ``T`` passes of each member's ``predict_proba_samples`` instead of
        its ``predict_proba`` (MC dropout inside each member).
    n_jobs : int, optional
        Members trained in parallel (joblib processes). Results do not depend
        on it.
    random_state : int, RandomState instance or None, default=None
        Draws the members' seeds.

    Attributes
    ----------
    estimators_ : list of fitted classifiers
    classes_ : ndarray of shape (C,)
    seeds_ : ndarray of shape (M,)
    n_features_in_ : int
        Number of features (``X.shape[1]``) seen in ``fit``.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Column names, when ``X`` was a DataFrame with string column names.

    References
    ----------
    .. [1] B. Lakshminarayanan, A. Pritzel and C. Blundell, "Simple and
       scalable predictive uncertainty estimation using deep ensembles",
       NeurIPS 2017.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.linear_model import SGDClassifier
    >>> from skdbal import DeepEnsembleClassifier
    >>> from skdbal.acquisition import bald
    >>> X, y = load_iris(return_X_y=True)
    >>> ens = DeepEnsembleClassifier(SGDClassifier(loss="log_loss", max_iter=5, tol=None), n_members=4,
    ...                              random_state=0).fit(X[::5], y[::5])
    >>> ens.predict_proba_samples(X).shape            # (M, N, C)
    (4, 150, 3)
    >>> idx, scores = bald(ens, X, n_instances=3)     # the members disagree most on these
    >>> len(idx), bool(scores[0] > 0)
    (3, True)
    """

    def __init__(self, estimator, n_members: int = 5, *, samples_per_member: Optional[int] = None,
                 n_jobs: Optional[int] = None, random_state=None):
        self.estimator = estimator
        self.n_members = n_members
        self.samples_per_member = samples_per_member
        self.n_jobs = n_jobs
        self.random_state = random_state

    def _check_params(self):
        check_positive_int(self.n_members, "n_members")
        T = self.samples_per_member
        if T is not None:
            check_positive_int(T, "samples_per_member")
        if not hasattr(self.estimator, "fit") or not hasattr(self.estimator, "predict_proba"):
            raise TypeError(f"estimator must be a classifier with fit and predict_proba; got {self.estimator!r}")
        if not _seed_keys(self.estimator):
            raise TypeError(f"{type(self.estimator).__name__} has no random_state parameter (nor do its parts), so "
                            "the members, which differ only by seed, would be identical copies")
        if T is not None and not hasattr(self.estimator, "predict_proba_samples"):
            raise TypeError(f"samples_per_member needs members with predict_proba_samples; "
                            f"{type(self.estimator).__name__} has none")

    def fit(self, X, y, **fit_params):
        """Train the members on ``(X, y)``, each from its own seed.

        Parameters
        ----------
        X : array-like
            Passed to each member's ``fit`` as given (a network validates it).
        y : array-like of shape (n,)
        **fit_params :
            Passed to each member's ``fit``.

        Returns
        -------
        self
        """
        from joblib import Parallel, delayed
        from sklearn.utils.multiclass import check_classification_targets

        self._check_params()
        X = self._check_X(X, reset=True)
        check_classification_targets(y)
        seeds = check_random_state(self.random_state).randint(np.iinfo(np.int32).max, size=int(self.n_members))
        members = Parallel(n_jobs=self.n_jobs)(
            delayed(_fit_member)(self.estimator, seed, X, y, fit_params) for seed in seeds)
        classes = [np.asarray(m.classes_) for m in members]
        for i, c in enumerate(classes[1:], start=1):
            if len(c) != len(classes[0]) or not np.array_equal(c, classes[0]):
                raise ValueError(f"the members' classes_ differ: member 0 has {classes[0].tolist()}, member {i} "
                                 f"{c.tolist()}; give the estimator all classes (e.g. classes=...)")
        self.estimators_ = members
        self.classes_ = classes[0]
        self.seeds_ = seeds
        return self

    def _check_X(self, X, reset: bool = False):
        """``X`` checked (features against those seen in ``fit``, at least 2-d,
        sparse only if the members take it) but not converted: a DataFrame or
        an image array goes to the members as given, and they check its values."""
        if not is_frame(X):
            check_array(X, accept_sparse=self.__sklearn_tags__().input_tags.sparse, allow_nd=True, dtype=None,
                        ensure_all_finite=False, ensure_min_samples=1)
        validate_data(self, X, reset=reset, skip_check_array=True)  # n_features_in_, feature_names_in_
        return X

    def __sklearn_tags__(self):
        """The members' input tags (sparse input, NaN): the ensemble passes ``X`` on to them."""
        tags = super().__sklearn_tags__()
        try:
            inner = get_tags(self.estimator)
        except (TypeError, AttributeError, ValueError):
            return tags
        tags.input_tags.sparse = inner.input_tags.sparse
        tags.input_tags.allow_nan = inner.input_tags.allow_nan
        return tags

    def predict_proba_samples(self, X, n_samples: Optional[int] = None, *,
                              consistent: bool = False) -> np.ndarray:
        """The members' class probabilities, one sample per member (or ``T`` each).

        Parameters
        ----------
        X : array-like
        n_samples : int, optional
            ``T``, passes *per member*: the result has ``M·T`` samples. By
            default ``samples_per_member`` (None: one ``predict_proba`` per
            member, ``M`` samples). Without ``samples_per_member``,
            ``n_samples=1`` is that one ``predict_proba`` per member too.
            Members without ``predict_proba_samples`` give one sample each,
            so for them only ``n_samples=1`` is accepted; any other value is
            refused, not ignored.
        consistent : bool, default=False
            Ask for consistent samples (sample ``t`` one function for every
            input). One ``predict_proba`` per member is consistent by
            nature; with ``T`` passes per member the request is passed on to
            each member, and a member that cannot honour it raises.

        Returns
        -------
        ndarray of shape (M, N, C), or (M·T, N, C)

        Raises
        ------
        ValueError
            If ``n_samples`` is not an int >= 1, or is more than 1 for
            members that do not sample.
        TypeError
            If ``consistent=True`` and a member cannot honour it.
        """
        from ..predictive import as_predictive

        check_is_fitted(self, "estimators_")
        X = self._check_X(X)
        if n_samples is not None:
            n_samples = check_positive_int(n_samples, "n_samples")
        consistent = check_bool(consistent, "consistent")
        sampling = all(hasattr(m, "predict_proba_samples") for m in self.estimators_)
        if n_samples is not None and n_samples > 1 and not sampling:
            raise ValueError(f"n_samples={n_samples} asks for {n_samples} passes per member, but the members "
                             f"({type(self.estimators_[0]).__name__}) have no predict_proba_samples: they give one "
                             "sample each; leave n_samples unset (or 1), or use sampling members")
        T = self.samples_per_member if n_samples is None else n_samples
        if T is None or not sampling or (T == 1 and self.samples_per_member is None):
            # one predict_proba per member: the ensemble's own single sample of each
            return np.stack([np.asarray(m.predict_proba(X), dtype=np.float32) for m in self.estimators_])
        return np.concatenate([
            np.asarray(as_predictive(m, n_samples=int(T)).proba_samples(X, consistent=consistent),
                       dtype=np.float32) for m in self.estimators_])

    @property
    def row_keyed_samples(self) -> bool:
        """Whether a row's samples depend on the row and the ensemble alone: whether every member's
        are (a deterministic member's trivially; a pipeline is read through its last step). Part of the
        predictive interface (:mod:`skdbal.predictive`)."""
        from ..predictive import as_predictive

        members = getattr(self, "estimators_", None)
        if members is None:  # before fit: a member as it will be, a clone with int seeds
            member = clone(self.estimator)
            members = [member.set_params(**{key: 0 for key in _seed_keys(member)})]
        try:  # each member read as a strategy reads it: a pipeline through its last step
            return all(as_predictive(m).row_keyed for m in members)
        except TypeError:  # a member the predictive interface cannot read: nothing is known
            return False

    @property
    def stochastic_samples(self) -> bool:
        """Whether the samples differ: more than one member, or sampling members."""
        return int(self.n_members) > 1 or self.samples_per_member not in (None, 1)

    def predict_proba(self, X) -> np.ndarray:
        """The ensemble's predictive distribution: the mean over its samples.

        Returns
        -------
        ndarray of shape (N, C)
        """
        return self.predict_proba_samples(X).astype(np.float64).mean(axis=0)

    def predict(self, X) -> np.ndarray:
        """The most probable class of the averaged prediction.

        Returns
        -------
        ndarray of shape (N,)
        """
        proba = self.predict_proba(X)  # NotFittedError before fit, not an AttributeError on classes_
        return self.classes_[np.argmax(proba, axis=1)]
