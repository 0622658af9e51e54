"""Deep Deterministic Uncertainty (DDU): a class-conditional Gaussian density over a network's features.

Mukhoti, Kirsch, van Amersfoort, Torr and Gal, "Deep deterministic
uncertainty: a new simple baseline" (CVPR 2023). A deterministic network's
penultimate features ``z = f(x)`` are modelled, after training, by one
Gaussian per class (Gaussian discriminant analysis), each fitted with
scikit-learn's :class:`~sklearn.mixture.GaussianMixture` (one component), as
in the seed's ``ClassConditionalGMM``:

    q(z) = Σ_c π_c N(z; μ_c, Σ_c)

With ``covariance_type="tied"`` the classes share one covariance, the pooled
within-class one (linear discriminant analysis): ``Σ_c = Σ`` for every ``c``.

``-log q(z)`` is the *epistemic* uncertainty (low density: far from what the
network was trained on, reducible by labelling there); the softmax entropy of
the same deterministic pass is the *aleatoric* part (classes that overlap).
One forward pass, no sampling.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
from scipy.linalg import cholesky, solve_triangular
from scipy.special import logsumexp
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array, check_is_fitted, check_X_y

__all__ = ["ClassConditionalGaussian", "DDUClassifier"]

_COVARIANCES = ("full", "tied", "diag", "spherical")


def _cholesky(covariance: np.ndarray) -> np.ndarray:
    """The lower Cholesky factor of a covariance, or a ``ValueError`` that says how to make it one."""
    try:
        return cholesky(covariance, lower=True)
    except np.linalg.LinAlgError:
        raise ValueError("the shared ('tied') covariance is not positive definite: the features are collinear "
                         "or too few; increase reg_covar") from None


class ClassConditionalGaussian(BaseEstimator):
    """One Gaussian per class over features, and their mixture's log-density.

    Parameters
    ----------
    covariance_type : {"full", "tied", "diag", "spherical"}, default="full"
        The covariance of each class's Gaussian.

        - ``"full"``, ``"diag"``, ``"spherical"``: each class has its own,
          fitted to its rows alone, as
          :class:`~sklearn.mixture.GaussianMixture`'s of that type (maximum
          likelihood: scatter about the class mean over ``N_c``).
        - ``"tied"``: one covariance shared by all classes, the pooled
          within-class covariance ``Σ = (1/N) Σ_c Σ_{i: y_i=c} (z_i - μ_c)(z_i - μ_c)ᵀ``
          (each class's scatter about its own mean, summed, over ``N``, the
          maximum-likelihood estimate). It is the average of the classes'
          ``"full"`` covariances weighted by ``N_c / N``, as
          :class:`~sklearn.mixture.GaussianMixture`'s ``"tied"`` averages its
          components' and :class:`~sklearn.discriminant_analysis.LinearDiscriminantAnalysis`
          pools its classes'; the means stay per class.

        Anything else is a ``ValueError`` at :meth:`fit`.
    reg_covar : float, default=1e-4
        Added to the covariances' diagonals (DDU's jitter), once to the
        shared one when ``"tied"``. With few labels per class and many
        features the class covariances are singular, and this sets the
        density's scale across the directions they miss.

    Attributes
    ----------
    classes_ : ndarray of shape (C,)
    gaussians_ : list of GaussianMixture or None
        One fitted single-component mixture per class; None when
        ``covariance_type="tied"`` (see ``means_`` and ``covariance_``).
    means_ : ndarray of shape (C, d)
        ``μ_c``, each class's mean.
    covariance_ : ndarray of shape (d, d) or None
        The shared covariance ``Σ`` (``reg_covar`` added) when
        ``covariance_type="tied"``; None otherwise (each class's is in
        ``gaussians_[c].covariances_``).
    log_priors_ : ndarray of shape (C,)
        ``log π_c``: the classes' shares of the training points.
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.models import ClassConditionalGaussian
    >>> Z = np.array([[-1.0], [1.0], [9.0], [11.0]])
    >>> density = ClassConditionalGaussian(reg_covar=0.0).fit(Z, [0, 0, 1, 1])
    >>> # each class N(mean, 1) (its MLE variance), priors 1/2: at 0, 0.5 N(0; 0, 1) + 0.5 N(0; 10, 1)
    >>> float(density.score_samples([[0.0]])[0].round(6)), float(np.log(0.5 / np.sqrt(2 * np.pi)).round(6))
    (-1.612086, -1.612086)

    Tied, the classes share one covariance: with scatters 2 and 8 about their
    means over N = 4 points, the variance is 10 / 4 for both classes.

    >>> Z = np.array([[-1.0], [1.0], [8.0], [12.0]])
    >>> tied = ClassConditionalGaussian("tied", reg_covar=0.0).fit(Z, [0, 0, 1, 1])
    >>> tied.covariance_.tolist(), tied.means_.ravel().tolist()
    ([[2.5]], [0.0, 10.0])
    """

    def __init__(self, covariance_type: str = "full", reg_covar: float = 1e-4):
        self.covariance_type = covariance_type
        self.reg_covar = reg_covar

    def fit(self, Z, y):
        """Fit each class's Gaussian to its rows of ``Z`` (with ``"tied"``, one covariance to all of them).

        Parameters
        ----------
        Z : array-like of shape (N, d)
        y : array-like of shape (N,)

        Returns
        -------
        self

        Raises
        ------
        ValueError
            If ``covariance_type`` is not one of ``"full"``, ``"tied"``,
            ``"diag"``, ``"spherical"``, or ``reg_covar`` is negative or not
            finite.
        """
        from sklearn.mixture import GaussianMixture

        if not isinstance(self.covariance_type, str) or self.covariance_type not in _COVARIANCES:
            raise ValueError(f"covariance_type must be one of {list(_COVARIANCES)}; got {self.covariance_type!r}")
        if not np.isfinite(self.reg_covar) or self.reg_covar < 0:
            raise ValueError(f"reg_covar must be a finite number >= 0; got {self.reg_covar!r}")
        Z, y = check_X_y(Z, y, dtype=np.float64)
        check_classification_targets(y)
        self.classes_, inverse, counts = np.unique(y, return_inverse=True, return_counts=True)
        self.means_ = np.stack([Z[inverse == k].mean(axis=0) for k in range(len(self.classes_))])
        if self.covariance_type == "tied":
            # the pooled within-class covariance: each class's scatter about its own mean, summed, over N
            # (the maximum-likelihood estimate; GaussianMixture's "tied" with each point in its class's component)
            centred = Z - self.means_[inverse]
            covariance = centred.T @ centred / len(Z)
            covariance.flat[:: Z.shape[1] + 1] += self.reg_covar
            self.covariance_ = covariance
            self._covariance_cholesky = _cholesky(covariance)
            self.gaussians_ = None
        else:
            self.gaussians_ = [GaussianMixture(n_components=1, covariance_type=self.covariance_type,
                                               reg_covar=self.reg_covar, random_state=0).fit(Z[inverse == k])
                               for k in range(len(self.classes_))]
            self.covariance_ = None
        self.log_priors_ = np.log(counts / counts.sum())
        self.n_features_in_ = Z.shape[1]
        return self

    def class_log_densities(self, Z) -> np.ndarray:
        """``log π_c + log N(z; μ_c, Σ_c)`` for each class: shape ``(N, C)``.

        Examples
        --------
        >>> import numpy as np
        >>> from skdbal.models import ClassConditionalGaussian
        >>> d = ClassConditionalGaussian().fit([[0.0], [0.2], [5.0], [5.2]], ["a", "a", "b", "b"])
        >>> d.class_log_densities([[0.1]]).argmax(axis=1).tolist()
        [0]
        """
        check_is_fitted(self, "log_priors_")
        Z = check_array(Z, dtype=np.float64)
        if Z.shape[1] != self.n_features_in_:
            raise ValueError(f"Z has {Z.shape[1]} features; the density was fitted on {self.n_features_in_}")
        if self.gaussians_ is None:  # tied: one covariance, log N(z; μ_c, Σ) = -(d log 2π + log|Σ| + m²) / 2
            L = self._covariance_cholesky
            log_det = 2.0 * np.log(np.diag(L)).sum()
            const = -0.5 * (Z.shape[1] * np.log(2 * np.pi) + log_det)
            log_n = np.stack([const - 0.5 * np.sum(solve_triangular(L, (Z - mu).T, lower=True) ** 2, axis=0)
                              for mu in self.means_], axis=1)
        else:
            log_n = np.stack([g.score_samples(Z) for g in self.gaussians_], axis=1)
        return log_n + self.log_priors_

    def score_samples(self, Z) -> np.ndarray:
        """``log q(z)``, the mixture's log-density, for each row of ``Z``.

        Examples
        --------
        >>> import numpy as np
        >>> from skdbal.models import ClassConditionalGaussian
        >>> d = ClassConditionalGaussian().fit([[0.0], [0.2], [5.0], [5.2]], [0, 0, 1, 1])
        >>> bool(d.score_samples([[0.1]])[0] > d.score_samples([[2.5]])[0])   # data, then the gap
        True
        """
        return logsumexp(self.class_log_densities(Z), axis=1)


class DDUClassifier(ClassifierMixin, BaseEstimator):
    """A deterministic network with a feature density: DDU's epistemic and aleatoric uncertainty.

    :meth:`fit` trains a clone of ``estimator`` (a network with ``transform``,
    its penultimate features), then fits a :class:`ClassConditionalGaussian`
    to the features of the training points. Predictions are the
    deterministic network's (dropout off); :meth:`log_density` is the
    features' log-density, and the ``ddu`` strategy
    (:class:`skdbal.acquisition.DDU`) acquires where it is lowest.

    Parameters
    ----------
    estimator : estimator with ``transform``, default=None
        The network; None is ``MCDropoutClassifier(random_state=random_state)``.
        DDU's own networks add spectral normalisation and residual
        connections to keep features sensitive to the input; any network of
        ours works, without those guarantees.
    covariance_type : {"full", "tied", "diag", "spherical"}, default="full"
        Each class its own covariance (``"full"``, ``"diag"``,
        ``"spherical"``), or one shared by all (``"tied"``: the pooled
        within-class covariance); see :class:`ClassConditionalGaussian`.
    reg_covar : float, default=1e-4
        See :class:`ClassConditionalGaussian`.
    random_state : int or None, default=None
        For the default network.
    prefit : bool, default=False
        ``estimator`` is already trained: :meth:`fit` uses it as it is (not
        a clone) and fits only the density of its features of ``X``.

    Attributes
    ----------
    estimator_ : estimator
        The fitted network.
    density_ : ClassConditionalGaussian
    classes_ : ndarray of shape (C,)

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import load_digits
    >>> from skdbal import MCDropoutClassifier
    >>> from skdbal.models import DDUClassifier
    >>> X, y = load_digits(return_X_y=True)
    >>> X = (X / 16).reshape(-1, 8, 8).astype("float32")
    >>> ddu = DDUClassifier(MCDropoutClassifier(classes=np.arange(10), module__kernel_size=3, max_epochs=5,
    ...                                         random_state=0)).fit(X[:300], y[:300])
    >>> ddu.predict_proba(X[300:302]).shape, ddu.log_density(X[300:302]).shape
    ((2, 10), (2,))
    >>> noise = np.random.RandomState(0).rand(2, 8, 8).astype("float32")     # nothing like a digit
    >>> bool(ddu.log_density(noise).max() < np.median(ddu.log_density(X[300:400])))
    True
    """

    def __init__(self, estimator=None, covariance_type: str = "full", reg_covar: float = 1e-4,
                 random_state: Optional[int] = None, prefit: bool = False):
        self.estimator = estimator
        self.covariance_type = covariance_type
        self.reg_covar = reg_covar
        self.random_state = random_state
        self.prefit = prefit

    def fit(self, X, y, **fit_params):
        """Train the network, then the density of its training features.

        Parameters
        ----------
        X : array-like
            The network's inputs.
        y : array-like of shape (N,)
        **fit_params :
            Passed to the network's ``fit``.

        Returns
        -------
        self
        """
        if self.prefit:
            if self.estimator is None:
                raise ValueError("prefit=True needs a trained estimator; got None")
            net = self.estimator
        elif self.estimator is None:
            from ._mc_dropout import MCDropoutClassifier

            net = MCDropoutClassifier(random_state=self.random_state)
        else:
            net = clone(self.estimator)
        if not hasattr(net, "transform"):
            raise TypeError(f"DDU needs a network with transform (its penultimate features); "
                            f"{type(net).__name__} has none")
        y = np.asarray(y)
        self.estimator_ = net if self.prefit else net.fit(X, y, **fit_params)
        Z = np.asarray(self.estimator_.transform(X)).reshape(len(y), -1)
        self.density_ = ClassConditionalGaussian(self.covariance_type, self.reg_covar).fit(Z, y)
        self.classes_ = np.asarray(self.estimator_.classes_)
        return self

    def transform(self, X) -> np.ndarray:
        """The network's penultimate features (dropout off).

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.linear_model import LogisticRegression
        >>> from skdbal.models import DDUClassifier
        >>> class Identity(LogisticRegression):
        ...     def transform(self, X):
        ...         return np.asarray(X, dtype=float)
        >>> X = np.array([[0.0], [0.1], [3.0], [3.1]])
        >>> DDUClassifier(Identity()).fit(X, [0, 0, 1, 1]).transform(X[:1]).tolist()
        [[0.0]]
        """
        check_is_fitted(self, "density_")
        X_feat = np.asarray(self.estimator_.transform(X))
        return X_feat.reshape(len(X_feat), -1)

    def predict_proba(self, X) -> np.ndarray:
        """The deterministic network's class probabilities (one pass, dropout off).

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.linear_model import LogisticRegression
        >>> from skdbal.models import DDUClassifier
        >>> class Identity(LogisticRegression):
        ...     def transform(self, X):
        ...         return np.asarray(X, dtype=float)
        >>> X = np.array([[0.0], [0.1], [3.0], [3.1]])
        >>> DDUClassifier(Identity()).fit(X, [0, 0, 1, 1]).predict_proba(X).argmax(axis=1).tolist()
        [0, 0, 1, 1]
        """
        check_is_fitted(self, "density_")
        net = self.estimator_
        return np.asarray(getattr(net, "predict_proba_deterministic", net.predict_proba)(X))

    def predict(self, X) -> np.ndarray:
        """The most probable class (:meth:`predict_proba`).

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.linear_model import LogisticRegression
        >>> from skdbal.models import DDUClassifier
        >>> class Identity(LogisticRegression):
        ...     def transform(self, X):
        ...         return np.asarray(X, dtype=float)
        >>> X = np.array([[0.0], [0.1], [3.0], [3.1]])
        >>> DDUClassifier(Identity()).fit(X, ["a", "a", "b", "b"]).predict([[3.2]]).tolist()
        ['b']
        """
        return self.classes_[self.predict_proba(X).argmax(axis=1)]

    def log_density(self, X) -> np.ndarray:
        """``log q(f(x))``: the features' log-density under the class-conditional Gaussians.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.linear_model import LogisticRegression
        >>> from skdbal.models import DDUClassifier
        >>> class Identity(LogisticRegression):
        ...     def transform(self, X):
        ...         return np.asarray(X, dtype=float)
        >>> X = np.array([[0.0], [0.1], [3.0], [3.1]])
        >>> d = DDUClassifier(Identity()).fit(X, [0, 0, 1, 1]).log_density([[0.05], [1.5]])
        >>> bool(d[0] > d[1])
        True
        """
        return self.density_.score_samples(self.transform(X))

    def aleatoric_score(self, X) -> np.ndarray:
        """The softmax entropy of the deterministic pass (nats): DDU's aleatoric uncertainty.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.linear_model import LogisticRegression
        >>> from skdbal.models import DDUClassifier
        >>> class Identity(LogisticRegression):
        ...     def transform(self, X):
        ...         return np.asarray(X, dtype=float)
        >>> X = np.array([[0.0], [0.1], [3.0], [3.1]])
        >>> a = DDUClassifier(Identity()).fit(X, [0, 0, 1, 1]).aleatoric_score([[1.55], [-5.0]])
        >>> bool(a[0] > 0.6 > a[1])                     # on the boundary: near ln 2
        True
        """
        P = np.clip(self.predict_proba(X).astype(np.float64), 0.0, 1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            return -np.sum(np.where(P > 0, P * np.log(P), 0.0), axis=1)
