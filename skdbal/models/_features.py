"""Frozen network features as a scikit-learn transformer (Anonymous, n.d., §4)."""
from __future__ import annotations

import copy
from typing import Optional, Union

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin, clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from .._validation import is_frame

__all__ = ["NetFeatures"]


def _is_fitted(net) -> bool:
    try:
        check_is_fitted(net)
    except NotFittedError:
        return False
    return True


class NetFeatures(TransformerMixin, BaseEstimator):
    """Penultimate-layer features of a network, for a Bayesian last layer.

    ``transform(X)`` returns ``net.transform(X)``: for
    :class:`skdbal.MCDropoutClassifier` the activations that feed the last
    dense layer, with dropout off (128 features for
    :class:`~skdbal.models.BayesianCNN`), as float64.

    Parameters
    ----------
    net : estimator with ``transform``, default=None
        Usually a :class:`skdbal.MCDropoutClassifier`, fitted or not.
        ``None`` means ``MCDropoutClassifier(random_state=random_state)``.
    refit : {"auto", True, False}, default="auto"
        ``False``: ``net`` must already be fitted; its weights are frozen and
        :meth:`fit` only records the number of features. ``True``: :meth:`fit`
        trains a clone of ``net`` on ``(X, y)``. ``"auto"``: ``False`` if
        ``net`` is fitted, ``True`` otherwise.
    random_state : int or None, default=None
        Passed to the network that :meth:`fit` trains when ``net`` is None.

    Attributes
    ----------
    net_ : estimator
        The network whose features are returned: ``net`` itself when frozen
        (shared, never modified), else the fitted clone.
    n_features_out_ : int
        Number of features ``transform`` returns.
    n_features_in_ : int
        Number of input features (``X.shape[1]``) seen in :meth:`fit`.

    Notes
    -----
    When :meth:`fit` trains the network, ``y`` may be class labels or a 2-d
    target matrix such as the one-hot targets of the regression of
    Anonymous (n.d., §4); a 2-d ``y`` is turned into labels by its argmax
    over columns.

    :func:`sklearn.base.clone` (and so ``GridSearchCV`` and
    ``ActiveLearner(retrain="scratch")``) keeps a frozen fitted ``net``:
    cloning a ``NetFeatures`` whose ``net`` is fitted and ``refit`` is not
    True shares that network instead of returning an untrained copy, so a
    grid search over the last layer's parameters searches over the same
    features.

    References
    ----------
    .. [1] Anonymous (candidate number 1091797), "Uncertainty in deep
       learning", anonymised report, undated. Code:
       https://www.github.com/anonymous-account-67/UncertaintyInDeepLearning.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import load_digits
    >>> from sklearn.pipeline import make_pipeline
    >>> from skdbal import BayesianLinearRegression, MCDropoutClassifier, NetFeatures
    >>> X, y = load_digits(return_X_y=True)
    >>> X = (X / 16.0).reshape(-1, 8, 8).astype(np.float32)
    >>> net = MCDropoutClassifier(max_epochs=3, classes=np.arange(10), random_state=0,
    ...                           module__kernel_size=3).fit(X[:300], y[:300])
    >>> model = make_pipeline(NetFeatures(net), BayesianLinearRegression(noise_variance=0.1))
    >>> model = model.fit(X[:100], np.eye(10)[y[:100]])      # one-hot targets
    >>> model.predict(X[100:103]).shape
    (3, 10)
    >>> model[0].transform(X[:2]).shape
    (2, 128)
    """

    def __init__(self, net=None, refit: Union[str, bool] = "auto", random_state: Optional[int] = None):
        self.net = net
        self.refit = refit
        self.random_state = random_state

    def __sklearn_clone__(self):
        if self.refit is not True and self.net is not None and _is_fitted(self.net):
            # frozen features: share the fitted network, clone nothing else
            return type(self)(net=self.net, refit=self.refit, random_state=copy.deepcopy(self.random_state))
        return super().__sklearn_clone__()

    def _check_refit(self) -> bool:
        if self.refit not in ("auto", True, False):
            raise ValueError(f"refit must be 'auto', True or False, got {self.refit!r}")
        if self.refit == "auto":
            return self.net is None or not _is_fitted(self.net)
        if self.refit is False:
            if self.net is None or not _is_fitted(self.net):
                raise ValueError("refit=False needs a fitted net; fit it first or use refit='auto'")
        return bool(self.refit)

    def fit(self, X, y=None):
        """Train the network (unless frozen) and record the feature size.

        Parameters
        ----------
        X : array-like of images or features
            Inputs in the form the network takes, e.g. ``(n_samples, H, W)``
            or ``(n_samples, n_features)`` for
            :class:`skdbal.MCDropoutClassifier`.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs), optional
            Needed only when the network is trained here; a 2-d ``y`` is
            reduced to labels by its argmax.

        Returns
        -------
        self : NetFeatures

        Raises
        ------
        ValueError
            If ``refit`` is invalid, ``refit=False`` with an unfitted or
            missing ``net``, or the network must be trained and ``y`` is None.
        TypeError
            If the network has no ``transform`` method.
        """
        refit = self._check_refit()
        if not is_frame(X):  # at least 2-d, any dtype: the network checks the values
            X = check_array(X, allow_nd=True, dtype=None, ensure_all_finite=False)
        validate_data(self, X, skip_check_array=True)  # n_features_in_; the network checks the values
        if refit:
            if y is None:
                raise ValueError("NetFeatures needs y to train its network (or pass a fitted net)")
            y = np.asarray(y)
            labels = y.argmax(axis=1) if y.ndim == 2 else y
            if self.net is None:
                from ._mc_dropout import MCDropoutClassifier

                net = MCDropoutClassifier(random_state=self.random_state)
            else:
                net = clone(self.net)
            self.net_ = net.fit(X, labels)
        else:
            self.net_ = self.net
        if not hasattr(self.net_, "transform"):
            raise TypeError(f"net must provide transform(X); {type(self.net_).__name__} does not")
        first = X.iloc[:1] if hasattr(X, "iloc") else X[:1]
        self.n_features_out_ = int(np.asarray(self.net_.transform(first)).shape[1])
        return self

    def transform(self, X) -> np.ndarray:
        """Features of ``X``, shape ``(n_samples, n_features_out_)``, float64.

        Parameters
        ----------
        X : array-like of images or features
            Inputs in the form the network takes, as in :meth:`fit`.

        Returns
        -------
        features : ndarray of shape (n_samples, n_features_out), dtype float64
            ``net_.transform(X)``, cast to float64.
        """
        check_is_fitted(self, "net_")
        if not is_frame(X):
            X = check_array(X, allow_nd=True, dtype=None, ensure_all_finite=False)
        validate_data(self, X, reset=False, skip_check_array=True)
        return np.asarray(self.net_.transform(X), dtype=np.float64)

    def get_feature_names_out(self, input_features=None) -> np.ndarray:
        """Names of the output features: ``netfeatures0``, ``netfeatures1``, ...

        Parameters
        ----------
        input_features : ignored
            Accepted for scikit-learn's API; the names do not depend on it.

        Returns
        -------
        names : ndarray of str objects, shape (n_features_out,)
        """
        check_is_fitted(self, "n_features_out_")
        return np.asarray([f"netfeatures{i}" for i in range(self.n_features_out_)], dtype=object)

