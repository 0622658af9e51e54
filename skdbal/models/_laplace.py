"""A last-layer Laplace posterior over a trained network, through ``laplace-torch``.

:class:`LaplaceClassifier` takes a network trained to a MAP estimate (an
:class:`~skdbal.MCDropoutClassifier`, or any skorch classifier whose module
ends in ``nn.Linear``) and puts a Gaussian posterior on its last layer with
the `laplace-torch <https://github.com/aleximmer/Laplace>`_ library (Daxberger
et al., 2021): the Hessian of the training loss at the MAP, a prior precision
fitted by the library's marginal-likelihood routine, and predictive samples
drawn by the library. The Laplace approximation is the library's; this
module only connects it to scikit-learn and to the predictive interface of
:mod:`skdbal.predictive`, so that every strategy, decorator and
:class:`skdbal.ActiveLearner` take it as they take an MC-dropout network.

``laplace-torch`` is an optional dependency (``pip install "skdbal[laplace]"``);
it is imported when a :class:`LaplaceClassifier` is fitted, not before.
"""
from __future__ import annotations

import contextlib
import math
import threading
import warnings
from typing import Optional

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.exceptions import NotFittedError
from sklearn.utils import check_random_state, get_tags
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array, check_consistent_length, check_is_fitted, column_or_1d, validate_data

from .._validation import check_bool, check_positive_int, is_frame, is_int_seed, label_columns

__all__ = ["LaplaceClassifier"]

#: Hessian structures of the last layer that this wrapper offers (the library's names).
_HESSIANS = ("kron", "full", "diag")
#: How samples are drawn: weights of the last layer ("nn") or the linearised outputs ("glm").
_PRED_TYPES = ("nn", "glm")
#: How predict_proba approximates the predictive: the library's closed forms, or the mean of our samples.
_LINK_APPROX = ("probit", "bridge", "bridge_norm", "mc")
#: Held while a fitted posterior samples: the library writes each weight sample into its copy of
#: the last layer and restores the mean afterwards, so two threads on one estimator take turns.
_SAMPLING_LOCK = threading.RLock()
#: The warning optimize_prior_precision always gives for classification (it is about la(...) calls).
_LINK_WARNING = r"By default `link_approx` is `probit`"


@contextlib.contextmanager
def _quiet_jit():
    """Inside, torch's deprecation of ``torch.jit.script`` is not shown: the library's asdl backend calls
    it when imported, and torch's own forward-mode decompositions when the first Jacobian-vector
    product loads them (the curvature backend's); neither is the caller's to fix."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*torch\.jit\.script", category=DeprecationWarning)
        yield


def _laplace_library():
    """The ``laplace`` package, or an ImportError that says how to install it."""
    try:
        with _quiet_jit():
            import laplace
    except ImportError as exc:
        raise ImportError(
            "LaplaceClassifier needs the laplace-torch package: pip install \"skdbal[laplace]\" "
            "(it depends on torchvision; with a CPU-only torch, install laplace-torch, "
            "backpack-for-pytorch and curvlinops-for-pytorch with --no-deps and their other "
            "dependencies by hand, see setup.cfg)") from exc
    return laplace


def _is_fitted(net) -> bool:
    try:
        check_is_fitted(net)
    except (NotFittedError, TypeError):
        return False
    return True


class LaplaceClassifier(ClassifierMixin, BaseEstimator):
    """A network with a last-layer Laplace posterior (``laplace-torch``).

    :meth:`fit` trains a clone of ``estimator`` (or takes a trained one as
    it is, see ``prefit``), then fits ``laplace.Laplace(module,
    "classification", subset_of_weights="last_layer",
    hessian_structure=...)`` on the training data and, by default, the
    prior precision by the library's marginal-likelihood routine
    (``optimize_prior_precision(method="marglik")``, MacKay's evidence
    framework). :meth:`predict_proba_samples` returns ``T`` samples
    ``(T, N, C)`` of the library's posterior predictive, so every strategy,
    decorator and the learner work with it as with an MC-dropout network.

    The Laplace approximation sits at the network's deterministic function:
    the library works on its own copy of the module, put in eval mode by
    :meth:`fit` and again before every prediction, so dropout is off and
    batch-norm layers use their running statistics. The randomness of the
    samples is the posterior's only, never dropout's. ``estimator``'s own
    network is not modified.

    Parameters
    ----------
    estimator : skorch classifier, default=None
        A network whose ``module_`` (a ``torch.nn.Module``) ends in an
        ``nn.Linear`` layer and whose ``classes_`` name its outputs, such as
        :class:`~skdbal.MCDropoutClassifier`. None means
        ``MCDropoutClassifier(random_state=random_state)``.
    prefit : bool, default=False
        As :class:`~skdbal.models.DDUClassifier`'s (scikit-learn's
        ``CalibratedClassifierCV(cv="prefit")`` idea). False: :meth:`fit`
        trains a clone of ``estimator`` on ``(X, y)``. True: ``estimator``
        is trained already; its weights are the MAP as they are (the same
        object, never modified), and :meth:`fit` fits only the posterior,
        on ``(X, y)`` (best the data it was trained on).
        :func:`sklearn.base.clone` (so ``ActiveLearner``'s retraining)
        then shares that network instead of returning an untrained copy,
        as :class:`~skdbal.NetFeatures` does for a frozen network.
    hessian_structure : {"kron", "full", "diag"}, default="kron"
        The library's approximation of the last layer's Hessian (a
        generalised Gauss-Newton matrix). ``"kron"`` (K-FAC) stores two
        factors of sizes ``d_in²`` and ``C²`` instead of ``(d_in·C)²`` and
        fits its prior precision by marginal likelihood from their
        eigendecompositions; ``"full"`` inverts the dense matrix at every
        step of that optimisation (on the digits' 1290 last-layer weights,
        about 20 s against 0.1 s), so it suits small heads only.
        ``"diag"`` is the cheapest and the crudest.
    pred_type : {"nn", "glm"}, default="nn"
        How :meth:`predict_proba_samples` samples, both by the library's
        ``predictive_samples``. ``"nn"``: ``T`` weight samples of the last
        layer, each applied to every input, so sample ``t`` is one function
        (consistent samples, as BatchBALD needs). ``"glm"``: ``T`` draws of
        the linearised network's Gaussian over each input's logits. The
        network is linear in its last layer, so the two have the same
        per-input distribution; only ``"nn"`` has the posterior's joint one
        across inputs.
    link_approx : {"probit", "bridge", "bridge_norm", "mc"}, default="probit"
        How :meth:`predict_proba` and :meth:`predict` approximate the
        predictive: the library's closed form (``la(x, pred_type="glm",
        link_approx=...)``; probit: the softmax of the mean logits scaled by
        ``1/sqrt(1 + π/8 σ²)``), or ``"mc"``, the mean of :meth:`predict_proba_samples`.
    n_samples : int, default=20
        Number of samples ``T`` drawn by :meth:`predict_proba_samples`.
    prior_precision : float, default=1.0
        The Gaussian prior's precision on the last layer's weights: the
        starting point of the marginal-likelihood fit, or the value used
        with ``optimize_prior=False``.
    optimize_prior : bool, default=True
        Fit the (scalar) prior precision by the library's marginal
        likelihood routine, ``marglik_steps`` Adam steps on its logarithm.
    marglik_steps : int, default=100
        Steps of that optimisation (the library's ``n_steps``).
    batch_size : int, default=128
        Rows per batch of the ``DataLoader`` that the posterior is fitted
        on, and per call of the library when predicting.
    random_state : int, RandomState instance or None, default=None
        Seeds the samples of :meth:`predict_proba_samples` (and
        ``link_approx="mc"``): each call draws from a ``torch.Generator``
        seeded with the int itself, so repeated calls give identical
        samples and a row's samples do not depend on the other rows or on
        the batch size; a RandomState instance gives each call a seed drawn
        from it; None a seed drawn from torch's global generator. torch's
        global RNG is never reseeded. With ``estimator=None`` it also seeds
        the default network.

    Attributes
    ----------
    estimator_ : skorch classifier
        The network at whose weights the posterior sits: the fitted clone,
        or ``estimator`` itself when frozen.
    laplace_ : laplace.baselaplace.BaseLaplace
        The library's fitted last-layer Laplace approximation
        (``KronLLLaplace``, ``FullLLLaplace`` or ``DiagLLLaplace``).
    classes_ : ndarray of shape (C,)
        The network's classes, the columns of every prediction.
    prior_precision_ : float
        The prior precision after fitting.
    log_marginal_likelihood_ : float
        The library's Laplace estimate of the log marginal likelihood at it.
    n_features_in_ : int
        Number of features (``X.shape[1]``) seen in :meth:`fit`.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Column names, when ``X`` was a DataFrame with string column names.

    Notes
    -----
    A fitted estimator pickles (joblib workers, ``copy.deepcopy``) as the
    library's ``state_dict`` and is rebuilt around ``estimator_`` when
    loaded; ``laplace-torch`` must be installed where it is loaded.

    References
    ----------
    .. [1] E. Daxberger, A. Kristiadi, A. Immer, R. Eschenhagen, M. Bauer and
       P. Hennig, "Laplace redux -- effortless Bayesian deep learning",
       NeurIPS 2021, arXiv:2106.14806.
    .. [2] A. Kristiadi, M. Hein and P. Hennig, "Being Bayesian, even just a
       bit, fixes overconfidence in ReLU networks", ICML 2020,
       arXiv:2002.10118.
    .. [3] D. J. C. MacKay, "A practical Bayesian framework for
       backpropagation networks", Neural Computation 4(3), 1992.

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("laplace")   # needs laplace-torch
    >>> import numpy as np
    >>> from sklearn.datasets import load_digits
    >>> from skdbal import MCDropoutClassifier
    >>> from skdbal.acquisition import bald
    >>> from skdbal.models import LaplaceClassifier
    >>> from skdbal.models import MLP
    >>> X, y = load_digits(return_X_y=True)
    >>> X = (X / 16.0).astype(np.float32)
    >>> net = MCDropoutClassifier(MLP, max_epochs=5, classes=np.arange(10), random_state=0)
    >>> clf = LaplaceClassifier(net, n_samples=8, random_state=0).fit(X[:200], y[:200])
    >>> clf.predict_proba_samples(X[200:260]).shape      # (T, N, C), from the last-layer posterior
    (8, 60, 10)
    >>> clf.prior_precision_ != 1.0                      # fitted by marginal likelihood
    True
    >>> idx, scores = bald(clf, X[200:260], n_instances=3)
    >>> len(idx)
    3
    """

    def __init__(self, estimator=None, *, prefit: bool = False, hessian_structure: str = "kron",
                 pred_type: str = "nn", link_approx: str = "probit", n_samples: int = 20,
                 prior_precision: float = 1.0, optimize_prior: bool = True, marglik_steps: int = 100,
                 batch_size: int = 128, random_state=None):
        self.estimator = estimator
        self.prefit = prefit
        self.hessian_structure = hessian_structure
        self.pred_type = pred_type
        self.link_approx = link_approx
        self.n_samples = n_samples
        self.prior_precision = prior_precision
        self.optimize_prior = optimize_prior
        self.marglik_steps = marglik_steps
        self.batch_size = batch_size
        self.random_state = random_state

    # ------------------------------------------------------------------ cloning and pickling
    def __sklearn_clone__(self):
        if self.prefit is True and self.estimator is not None and _is_fitted(self.estimator):
            # a trained network taken as it is: the clone shares it (as NetFeatures does), the rest is copied
            params = self.get_params(deep=False)
            params = {k: (v if k == "estimator" else clone(v, safe=False)) for k, v in params.items()}
            return type(self)(**params)
        return super().__sklearn_clone__()

    def __getstate__(self):
        state = dict(super().__getstate__())  # a copy: object.__getstate__ returns the live __dict__
        la = state.pop("laplace_", None)
        if la is not None:  # the library's object holds closures (forward hooks): keep its state instead
            saved = dict(la.state_dict())
            data = saved.get("data")
            if data is not None:  # the library finds the last layer again with one input row
                saved["data"] = tuple(part[:1] for part in data)
            state["_laplace_state"] = saved
        return state

    def __setstate__(self, state):
        saved = state.pop("_laplace_state", None)
        super().__setstate__(state)
        if saved is not None:
            la = self._new_laplace()
            la.load_state_dict(saved)
            la.model.eval()
            self.laplace_ = la

    # ------------------------------------------------------------------ checks
    def _check_params(self) -> bool:
        """Validate every parameter before training; return whether the network is trained here."""
        for name, allowed in (("hessian_structure", _HESSIANS), ("pred_type", _PRED_TYPES),
                              ("link_approx", _LINK_APPROX)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}; got {getattr(self, name)!r}")
        check_positive_int(self.n_samples, "n_samples")
        check_positive_int(self.marglik_steps, "marglik_steps")
        check_positive_int(self.batch_size, "batch_size")
        check_bool(self.optimize_prior, "optimize_prior")
        prior = self.prior_precision
        if (isinstance(prior, bool) or not isinstance(prior, (int, float, np.integer, np.floating))
                or not math.isfinite(prior) or prior <= 0):
            raise ValueError(f"prior_precision must be a finite number > 0; got {prior!r}")
        if not isinstance(self.prefit, (bool, np.bool_)):
            raise ValueError(f"prefit must be True or False; got {self.prefit!r}")
        if self.estimator is not None and not hasattr(self.estimator, "fit"):
            raise TypeError(f"estimator must be a network with fit; got {self.estimator!r}")
        if self.prefit and (self.estimator is None or not _is_fitted(self.estimator)):
            raise ValueError("prefit=True needs a trained estimator; fit it first, or use prefit=False")
        return not self.prefit

    def _check_X(self, X, reset: bool = False):
        """``X`` checked (at least 2-d, features against those seen in ``fit``), not converted:
        the network converts it as it does for its own predictions."""
        if not is_frame(X):
            check_array(X, allow_nd=True, dtype=None, ensure_all_finite=False, ensure_min_samples=1)
        validate_data(self, X, reset=reset, skip_check_array=True)  # n_features_in_, feature_names_in_
        return X

    def __sklearn_tags__(self):
        """The network's input tags (images as 3-d arrays); sampled, so non-deterministic without a seed."""
        tags = super().__sklearn_tags__()
        tags.non_deterministic = self.random_state is None
        if self.estimator is None:
            tags.input_tags.three_d_array = True
            return tags
        try:
            inner = get_tags(self.estimator)
        except (TypeError, AttributeError, ValueError):
            return tags
        tags.input_tags.three_d_array = inner.input_tags.three_d_array
        tags.non_deterministic = tags.non_deterministic or inner.non_deterministic
        return tags

    @staticmethod
    def _module_of(net):
        import torch

        module = getattr(net, "module_", None)
        if not isinstance(module, torch.nn.Module):
            raise TypeError(f"estimator must be a skorch network with a torch module_ after fit; "
                            f"{type(net).__name__} has none")
        return module

    def _inputs(self, net, X) -> np.ndarray:
        """``X`` as the network feeds it to its module: float32, C order (the network's own
        conversion for an skdbal network, which scales uint8 images to [0, 1])."""
        convert = getattr(net, "_validate_X", None)
        if convert is not None:
            return convert(X)
        return check_array(X, allow_nd=True, dtype=np.float32, order="C")

    def _new_laplace(self):
        """The library's last-layer Laplace approximation around a copy of ``estimator_``'s module."""
        laplace = _laplace_library()
        return laplace.Laplace(self._module_of(self.estimator_), "classification",
                               subset_of_weights="last_layer", hessian_structure=self.hessian_structure,
                               prior_precision=float(self.prior_precision))

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y):
        """Train the network (unless frozen), then fit its last-layer Laplace posterior.

        Parameters
        ----------
        X : array-like
            Inputs in the form the network takes, e.g. ``(n, n_features)``
            or images ``(n, H, W)``.
        y : array-like of shape (n,)
            Labels; with a frozen network, all among its ``classes_``.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            If a parameter is invalid, the inputs are (not finite, wrong
            shape, inconsistent lengths), ``prefit=True`` with an untrained
            estimator, the network has fewer than 2 classes, or a label is
            not among a frozen network's classes.
        TypeError
            If the network has no torch ``module_``.
        ImportError
            If laplace-torch is not installed.
        """
        import torch

        train = self._check_params()
        _laplace_library()  # before training: fail fast without the library
        X = self._check_X(X, reset=True)
        y = column_or_1d(y, warn=True)
        check_classification_targets(y)
        check_consistent_length(X, y)
        if train:
            if self.estimator is None:
                from ._mc_dropout import MCDropoutClassifier

                net = MCDropoutClassifier(random_state=self.random_state)
            else:
                net = clone(self.estimator)
            net = net.fit(X, y)
        else:
            net = self.estimator
        self._module_of(net)
        self.estimator_ = net
        self.classes_ = np.asarray(net.classes_)
        if len(self.classes_) < 2:  # one output: its softmax is constant, and its loss has no curvature
            raise ValueError(f"LaplaceClassifier needs a network with at least 2 classes; it has "
                             f"{len(self.classes_)} class ({self.classes_.tolist()}): give it classes=... or "
                             "labels of several classes")
        Xt = torch.as_tensor(self._inputs(net, X))
        yt = torch.as_tensor(label_columns(self.classes_, y, classes_name="the network's classes_"),
                             dtype=torch.long)
        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(Xt, yt),
                                             batch_size=int(self.batch_size), shuffle=False)
        la = self._new_laplace()
        la.model.eval()  # the library's copy of the module: no dropout, batch-norm's running statistics
        with _quiet_jit():
            la.fit(loader)
        if self.optimize_prior:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=_LINK_WARNING, category=UserWarning)
                la.optimize_prior_precision(pred_type="glm", method="marglik", n_steps=int(self.marglik_steps),
                                            init_prior_prec=float(self.prior_precision), prior_structure="scalar")
        la.model.eval()
        self.laplace_ = la
        prior = la.prior_precision.detach().cpu().numpy().reshape(-1)
        self.prior_precision_ = float(prior[0]) if prior.size == 1 else prior
        with torch.no_grad():
            self.log_marginal_likelihood_ = float(la.log_marginal_likelihood())
        return self

    # ------------------------------------------------------------------ prediction
    def _fitted_inputs(self, X):
        check_is_fitted(self, "laplace_")
        X = self._check_X(X)
        return self._inputs(self.estimator_, X)

    def _sampling_seed(self) -> int:
        """The seed of this call's generator: ``random_state`` itself for an int."""
        rs = self.random_state
        if is_int_seed(rs):
            return int(rs) % 2**64
        if rs is None:
            import torch

            return int(torch.randint(2**62, (1,)).item())
        return int(check_random_state(rs).randint(np.iinfo(np.int32).max))

    def _chunks(self, Xt):
        import torch

        device = next(self.laplace_.model.parameters()).device  # the network's: where its inputs go
        for start in range(0, len(Xt), int(self.batch_size)):
            yield torch.as_tensor(Xt[start:start + int(self.batch_size)], device=device)

    @property
    def stochastic_samples(self) -> bool:
        """Always True: the samples are draws from the posterior.

        Part of the predictive interface (:mod:`skdbal.predictive`).
        """
        return True

    @property
    def row_keyed_samples(self) -> bool:
        """Whether a row's samples are the same whatever rows it is sampled with: with an int
        ``random_state`` every batch of every call draws from the same seed. Part of the predictive
        interface (:mod:`skdbal.predictive`)."""
        return is_int_seed(self.random_state)

    def predict_proba_samples(self, X, n_samples: Optional[int] = None, *,
                              consistent: bool = False) -> np.ndarray:
        """``T`` samples of the last-layer Laplace posterior predictive.

        ``laplace_.predictive_samples(x, pred_type=pred_type, n_samples=T,
        generator=g)`` over batches of ``batch_size`` rows, each batch with
        ``g`` seeded anew by the call's seed (``random_state`` for an int):
        every batch draws the same weight (``"nn"``) or standard-normal
        (``"glm"``) samples, so the result does not depend on the batch
        size, and the module is in eval mode.

        Parameters
        ----------
        X : array-like
            Inputs, as in :meth:`fit`.
        n_samples : int, optional
            Number of samples ``T``; defaults to the ``n_samples`` parameter.
        consistent : bool, default=False
            Ask for consistent samples (sample ``t`` one function for every
            input, as BatchBALD needs; see :mod:`skdbal.predictive`). With
            ``pred_type="nn"`` they always are; ``"glm"`` draws each input's
            logits on their own and refuses.

        Returns
        -------
        P : ndarray of shape (T, N, C), dtype float32
            ``P[t]`` is sample ``t``; each row sums to 1.

        Raises
        ------
        TypeError
            If ``consistent=True`` with ``pred_type="glm"``.
        """
        import torch
        from torch.nn.utils import vector_to_parameters

        T = check_positive_int(self.n_samples if n_samples is None else n_samples, "n_samples")
        if check_bool(consistent, "consistent") and self.pred_type != "nn":
            raise TypeError(f"pred_type={self.pred_type!r} draws each input's logits independently, so its samples "
                            "are not one function per sample for every input; use pred_type='nn' for consistent "
                            "samples (BatchBALD)")
        Xt = self._fitted_inputs(X)
        la = self.laplace_
        device = next(la.model.parameters()).device
        seed = self._sampling_seed()
        out = []
        with _SAMPLING_LOCK:
            la.model.eval()
            if self.pred_type == "nn" and isinstance(getattr(la.model, "last_layer", None), torch.nn.Linear):
                return self._last_layer_samples(Xt, T or 1, torch.Generator(device=device).manual_seed(seed))
            try:
                for xb in self._chunks(Xt):
                    gen = torch.Generator(device=device).manual_seed(seed)
                    p = la.predictive_samples(xb, pred_type=self.pred_type, n_samples=T, generator=gen)
                    out.append(p.detach().cpu())
            finally:  # the library restores the MAP weights itself, but not if it raised in between
                vector_to_parameters(la.mean, la.model.last_layer.parameters())
        return np.ascontiguousarray(torch.cat(out, dim=1).numpy(), dtype=np.float32)

    def _last_layer_samples(self, Xt, T: int, gen) -> np.ndarray:
        """The library's ``"nn"`` predictive samples, computed at once: its ``T`` draws of the last
        layer (``laplace_.sample``, the same draws as ``predictive_samples`` with this generator),
        the features of every row once (``forward_with_features``), then one matrix product for all
        draws (:func:`~skdbal.models._heads._linear_samples`) instead of ``T`` small layers per batch."""
        import torch

        from ._heads import _linear_samples

        la = self.laplace_
        layer = la.model.last_layer
        C, K = layer.weight.shape
        draws = la.sample(T, generator=gen).detach().cpu()           # (T, P): weight (C, K), then bias
        weights = draws[:, :C * K].reshape(T, C, K).transpose(1, 2)
        biases = draws[:, C * K:] if layer.bias is not None else None
        with torch.no_grad():
            feats = torch.cat([la.model.forward_with_features(xb)[1].detach().cpu() for xb in self._chunks(Xt)])
        return _linear_samples(feats.reshape(len(feats), -1), weights, biases)

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities of the Laplace predictive, by ``link_approx``.

        Parameters
        ----------
        X : array-like
            Inputs, as in :meth:`fit`.

        Returns
        -------
        proba : ndarray of shape (N, C), dtype float32
            Each row sums to 1; columns follow ``classes_``.
        """
        import torch

        if self.link_approx not in _LINK_APPROX:
            raise ValueError(f"link_approx must be one of {_LINK_APPROX}; got {self.link_approx!r}")
        if self.link_approx == "mc":
            return self.predict_proba_samples(X).mean(axis=0)
        Xt = self._fitted_inputs(X)
        la = self.laplace_
        with _SAMPLING_LOCK:
            la.model.eval()
            out = [la(xb, pred_type="glm", link_approx=self.link_approx).detach().cpu() for xb in self._chunks(Xt)]
        return np.ascontiguousarray(torch.cat(out).numpy(), dtype=np.float32)

    def predict(self, X) -> np.ndarray:
        """The most probable class under :meth:`predict_proba`.

        Parameters
        ----------
        X : array-like
            Inputs, as in :meth:`fit`.

        Returns
        -------
        y_pred : ndarray of shape (N,)
            Labels from ``classes_``.
        """
        proba = self.predict_proba(X)  # NotFittedError before fit
        return self.classes_[np.argmax(proba, axis=1)]
