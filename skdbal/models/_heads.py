"""Bayesian heads: small classifiers over embeddings whose randomness is in the last layer only.

A head reads an embedding ``(N, D)`` (an encoder's output, see
:class:`~skdbal.models.TorchEncoder`) and gives ``predict_proba_samples(X) ->
(T, N, C)`` like every classifier of :mod:`skdbal.models`, so that every
strategy and decorator works on it unchanged. Its hidden features, if any,
are deterministic: a call computes them once, and each of the ``T`` samples
is one draw of the last layer's weights ``W_t`` (a dropout mask, a posterior
draw), applied to every row. The samples are therefore consistent (sample
``t`` is one function for every input, as BatchBALD needs) and scoring a
60,000-row pool at ``T = 100`` is one matrix product of ``(N, D)`` by
``(D, T·C)`` and a softmax (:func:`_linear_samples`).

- :class:`MCDropoutHead`: a multilayer perceptron with dropout before its last
  layer only, trained by a fixed number of Adam steps (no per-epoch overhead);
- :class:`BayesianLastLayerHead`: the Bayesian last layer of
  :class:`~skdbal.BayesianLinearRegression` (analytic or mean-field) fitted
  on one-hot labels, its outputs read as logits.

The last-layer Laplace head is :class:`~skdbal.models.LaplaceClassifier` over
an :class:`MCDropoutHead` (it samples through :func:`_linear_samples` too),
and an ensemble of heads is :class:`~skdbal.models.DeepEnsembleClassifier`
over one.
"""
from __future__ import annotations

import numbers
from typing import Optional, Sequence

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data

from .._validation import check_bool, check_positive_int, is_int_seed, label_columns

__all__ = ["MCDropoutHead", "BayesianLastLayerHead", "EncoderWithHead"]

#: Logits held at once by :func:`_linear_samples` (rows × T × C floats): 32 MB.
_CHUNK_VALUES = 8_000_000


def _linear_samples(features, weights, biases=None, scale: float = 1.0) -> np.ndarray:
    """``softmax(scale · (features @ weights[t] + biases[t]))`` for every ``t``: ``(T, N, C)`` float32.

    Parameters
    ----------
    features : torch.Tensor of shape (N, K)
    weights : torch.Tensor of shape (T, K, C)
    biases : torch.Tensor of shape (T, C) or (C,), optional
    scale : float
        Multiplies the logits before the softmax.

    The ``T`` weight matrices are laid side by side, ``(K, T·C)``, so that a
    chunk of rows is one matrix product; the softmax over the short last axis
    is written out (torch's is several times slower on ``C = 10``).
    """
    T, K, C = weights.shape
    N = features.shape[0]
    features = features.to(weights.dtype)
    side = weights.permute(1, 0, 2).reshape(K, T * C)
    if scale != 1.0:
        side = side * scale
    if biases is None:
        bias = torch.zeros(T * C, dtype=weights.dtype, device=weights.device)
    else:
        bias = torch.broadcast_to(biases, (T, C)).reshape(T * C) * scale
    out = torch.empty((T, N, C), dtype=torch.float32)
    rows = max(1, _CHUNK_VALUES // (T * C))
    with torch.no_grad():
        for start in range(0, N, rows):
            z = torch.addmm(bias, features[start:start + rows], side).view(-1, T, C)
            z.sub_(z.amax(dim=-1, keepdim=True))
            z.exp_()
            z.div_(z.sum(dim=-1, keepdim=True))
            out[:, start:start + rows].copy_(z.transpose(0, 1))
    return out.numpy()


def _check_classes(classes) -> Optional[np.ndarray]:
    if classes is None:
        return None
    classes = np.asarray(classes)
    if classes.ndim != 1 or len(classes) < 2 or len(np.unique(classes)) != len(classes):
        raise ValueError(f"classes must be a 1-d array of at least 2 distinct labels; got {classes!r}")
    return np.sort(classes)


class _SampledHead(ClassifierMixin, BaseEstimator):
    """What the heads share: input checks, classes, the call's seed, and prediction from samples."""

    def _fit_inputs(self, X, y):
        X, y = validate_data(self, X, y, dtype=np.float32, ensure_min_samples=1)
        y = column_or_1d(y, warn=True)
        check_classification_targets(y)
        classes = _check_classes(self.classes)
        self.classes_ = np.unique(y) if classes is None else classes
        if len(self.classes_) < 2:
            raise ValueError(f"{type(self).__name__} needs at least 2 classes; y has only one class, "
                             f"{self.classes_.tolist()}: pass classes=... with every class")
        return X, label_columns(self.classes_, y)

    def _inputs(self, X) -> np.ndarray:
        check_is_fitted(self, "classes_")
        return validate_data(self, X, reset=False, dtype=np.float32)

    def _call_seed(self, offset: int) -> int:
        """The seed of this call's draws: ``random_state`` (plus ``offset``) for an int, so that every
        call draws the same last layers; otherwise one drawn anew."""
        rs = self.random_state
        if is_int_seed(rs):
            return (int(rs) + offset) % 2**63
        if rs is None:
            return int(np.random.SeedSequence().generate_state(1, np.uint64)[0] % 2**63)
        return int(rs.randint(np.iinfo(np.int32).max))

    def _check_samples_request(self, n_samples, consistent) -> int:
        check_bool(consistent, "consistent")  # always honoured: sample t is one last layer for every row
        return check_positive_int(self.n_samples if n_samples is None else n_samples, "n_samples") or 1

    @property
    def consistent_samples(self) -> bool:
        """Always True: sample ``t`` is one draw of the last layer, applied to every row (what
        BatchBALD asks for). Part of the predictive interface (:mod:`skdbal.predictive`)."""
        return True

    @property
    def row_keyed_samples(self) -> bool:
        """Whether a row's samples depend on the row and the model alone: with an int ``random_state``
        every call draws the same last layers. Part of the predictive interface."""
        return is_int_seed(self.random_state)

    def predict_proba(self, X) -> np.ndarray:
        """The mean of :meth:`predict_proba_samples`: the Monte Carlo predictive.

        Parameters
        ----------
        X : array-like of shape (N, n_features)

        Returns
        -------
        proba : ndarray of shape (N, C), dtype float32
            Each row sums to 1; columns follow ``classes_``.
        """
        return self.predict_proba_samples(X).mean(axis=0)

    def predict(self, X) -> np.ndarray:
        """The most probable class under :meth:`predict_proba`.

        Parameters
        ----------
        X : array-like of shape (N, n_features)

        Returns
        -------
        y_pred : ndarray of shape (N,)
            Labels from ``classes_``.
        """
        proba = self.predict_proba(X)  # first: NotFittedError before fit, not an AttributeError on classes_
        return self.classes_[np.argmax(proba, axis=1)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = self.random_state is None
        return tags


class _HeadNet(torch.nn.Module):
    """``trunk`` (dense–ReLU blocks, no dropout) and ``head`` (dropout, dense): ``forward = head ∘ trunk``."""

    def __init__(self, n_features: int, n_classes: int, hidden: Sequence[int], dropout: float):
        super().__init__()
        sizes = [int(n_features)] + [int(h) for h in hidden]
        layers: list = []
        for n_in, n_out in zip(sizes[:-1], sizes[1:]):
            layers += [torch.nn.Linear(n_in, n_out), torch.nn.ReLU()]
        self.trunk = torch.nn.Sequential(*layers)
        self.head = torch.nn.Sequential(torch.nn.Dropout(dropout), torch.nn.Linear(sizes[-1], n_classes))

    def forward(self, x):
        return self.head(self.trunk(x))


class MCDropoutHead(_SampledHead):
    """A multilayer perceptron over embeddings with MC dropout before its last layer only.

    dense(h₁) – ReLU – … – dense(h_k) – ReLU – dropout(p) – dense(C). The
    hidden layers are deterministic, so :meth:`predict_proba_samples`
    computes them once and draws ``T`` dropout masks of the last layer's
    input: sample ``t`` is the last layer with the rows of its weight matrix
    kept by mask ``t`` (scaled by ``1 / (1 - p)``), applied to every row.
    That is the MC dropout of Gal and Ghahramani (2016) on the last layer,
    with one mask per sample for the whole pool (consistent samples, as
    :class:`~skdbal.MCDropoutClassifier` gives with ``consistent_masks=True``),
    and a pool of 60,000 rows at ``T = 100`` costs one matrix product.

    Training is a fixed number of Adam steps on mini-batches drawn from the
    labelled rows (``n_steps``; dropout on, as in training any dropout net),
    so a refit takes about the same time at 20 labels and at 2,000, without
    the per-epoch overhead of a skorch loop. Every :meth:`fit` starts from
    fresh weights.

    Parameters
    ----------
    hidden_layer_sizes : tuple of int, default=(128,)
        Sizes of the deterministic hidden layers; ``()`` makes a linear
        softmax head with dropout on its input.
    dropout : float, default=0.5
        ``p``, the probability of dropping each input of the last layer, in
        ``[0, 1)``.
    n_samples : int, default=100
        ``T``, the samples of :meth:`predict_proba_samples` and of
        :meth:`predict_proba`'s mean.
    n_steps : int, default=500
        Adam steps of :meth:`fit`.
    batch_size : int, default=128
        Rows per step (all of them when fewer).
    lr : float, default=1e-3
        Adam's learning rate.
    weight_decay : float, default=1e-4
        L2 penalty on the weights (Adam's ``weight_decay``).
    classes : array-like or None, default=None
        All class labels; set it when the first labelled set may miss some,
        so that ``classes_`` and the output size are stable.
    random_state : int, RandomState instance or None, default=None
        Seeds the initial weights, the batches and training dropout, and the
        masks of :meth:`predict_proba_samples`: with an int, every call
        draws the same ``T`` masks. torch's global generator is left as it was.

    Attributes
    ----------
    module_ : torch.nn.Module
        The trained network: ``trunk`` (the hidden layers) and ``head``
        (``nn.Dropout``, ``nn.Linear``), so that
        :class:`~skdbal.models.LaplaceClassifier` can put a posterior on its
        last layer.
    classes_ : ndarray of shape (C,)
    n_features_in_ : int
    loss_ : float
        The training loss of the last step.

    See Also
    --------
    skdbal.MCDropoutClassifier : any network, dropout anywhere, trained by skorch.
    BayesianLastLayerHead : a closed-form posterior on the last layer.

    References
    ----------
    .. [1] Y. Gal and Z. Ghahramani, "Dropout as a Bayesian approximation:
       representing model uncertainty in deep learning", ICML 2016.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import load_digits
    >>> from skdbal.models import MCDropoutHead
    >>> X, y = load_digits(return_X_y=True)
    >>> X = (X / 16).astype(np.float32)
    >>> head = MCDropoutHead(n_samples=50, random_state=0).fit(X[:300], y[:300])
    >>> P = head.predict_proba_samples(X[300:])
    >>> P.shape                                   # (T, N, C)
    (50, 1497, 10)
    >>> bool(np.allclose(P.sum(axis=-1), 1, atol=1e-5))
    True
    >>> float(head.score(X[300:], y[300:])) > 0.85
    True
    """

    def __init__(self, hidden_layer_sizes: Sequence[int] = (128,), dropout: float = 0.5, n_samples: int = 100,
                 n_steps: int = 500, batch_size: int = 128, lr: float = 1e-3, weight_decay: float = 1e-4,
                 classes=None, random_state=None):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.dropout = dropout
        self.n_samples = n_samples
        self.n_steps = n_steps
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.classes = classes
        self.random_state = random_state

    def _check_params(self) -> tuple:
        try:
            hidden = tuple(self.hidden_layer_sizes)
        except TypeError:
            hidden = None
        if hidden is None or any(isinstance(h, bool) or not isinstance(h, (int, np.integer)) or h < 1
                                 for h in hidden):
            raise ValueError(f"hidden_layer_sizes must be a tuple of ints >= 1; got {self.hidden_layer_sizes!r}")
        p = self.dropout
        if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0 <= p < 1:
            raise ValueError(f"dropout must be a float in [0, 1); got {p!r}")
        check_positive_int(self.n_samples, "n_samples")
        check_positive_int(self.n_steps, "n_steps")
        check_positive_int(self.batch_size, "batch_size")
        for name in ("lr", "weight_decay"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value) \
                    or value < 0 or (name == "lr" and value == 0):
                raise ValueError(f"{name} must be a finite float {'> 0' if name == 'lr' else '>= 0'}; got {value!r}")
        return hidden

    def fit(self, X, y):
        """Train fresh weights on the embeddings ``X`` and labels ``y``.

        Parameters
        ----------
        X : array-like of shape (N, n_features)
            Embeddings.
        y : array-like of shape (N,)
            Labels, all among ``classes`` when it is set.

        Returns
        -------
        self
        """
        from ._mc_masks import _seed_from, _torch_seeded

        hidden = self._check_params()
        X, y = self._fit_inputs(X, y)
        Xt, yt = torch.from_numpy(np.ascontiguousarray(X)), torch.from_numpy(y.astype(np.int64))
        n, bs = len(Xt), min(int(self.batch_size), len(Xt))
        loss = torch.nn.CrossEntropyLoss()
        with _torch_seeded(_seed_from(self.random_state)):  # None: torch's global generator, as it stands
            net = _HeadNet(X.shape[1], len(self.classes_), hidden, float(self.dropout))
            opt = torch.optim.Adam(net.parameters(), lr=float(self.lr), weight_decay=float(self.weight_decay))
            net.train()
            order, at = torch.randperm(n), 0
            for _ in range(int(self.n_steps)):
                if at + bs > n:  # a new pass over the rows, in a new order
                    order, at = torch.randperm(n), 0
                batch = order[at:at + bs]
                at += bs
                opt.zero_grad()
                value = loss(net(Xt[batch]), yt[batch])
                value.backward()
                opt.step()
        net.eval()
        self.module_ = net
        self.loss_ = float(value.detach())
        return self

    def _hidden(self, X):
        with torch.no_grad():
            return self.module_.trunk(torch.from_numpy(np.ascontiguousarray(X)))

    def predict_proba_samples(self, X, n_samples: Optional[int] = None, *, consistent: bool = False) -> np.ndarray:
        """``T`` samples of the class probabilities, one dropout mask of the last layer each.

        Parameters
        ----------
        X : array-like of shape (N, n_features)
        n_samples : int, optional
            ``T``; by default the ``n_samples`` parameter.
        consistent : bool, default=False
            Accepted for the predictive interface: the samples are always
            consistent (mask ``t`` is shared by every row).

        Returns
        -------
        P : ndarray of shape (T, N, C), dtype float32
            Each row sums to 1.
        """
        T = self._check_samples_request(n_samples, consistent)
        X = self._inputs(X)
        last = self.module_.head[-1]
        W = last.weight.detach().T                          # (K, C)
        keep = 1.0 - float(self.module_.head[0].p)
        gen = torch.Generator().manual_seed(self._call_seed(2))
        masks = torch.bernoulli(torch.full((T, W.shape[0]), keep), generator=gen) / keep
        return _linear_samples(self._hidden(X), masks[:, :, None] * W, last.bias.detach())

    def predict_proba_deterministic(self, X) -> np.ndarray:
        """Class probabilities of one pass with dropout off (weights as trained, the expected mask).

        Parameters
        ----------
        X : array-like of shape (N, n_features)

        Returns
        -------
        proba : ndarray of shape (N, C), dtype float32
        """
        X = self._inputs(X)
        with torch.no_grad():
            return torch.softmax(self.module_.head[-1](self._hidden(X)), dim=-1).numpy()


#: The grid of :func:`_grid_variances`: noise variances of one-hot targets, and the prior variance of an
#: output (``s² · K · mean feature variance``) relative to it.
_NOISE_GRID = np.logspace(-3, 0, 25)
_SIGNAL_GRID = np.logspace(-3, 2, 41)


def _grid_objectives(Phi: np.ndarray, Y: np.ndarray, noise, prior, inference: str) -> np.ndarray:
    """The log evidence (``"analytic"``) or the mean-field ELBO (``"mfvi"``) of
    :func:`skdbal.models.linear_posterior.log_marginal_likelihood` and
    :func:`~skdbal.models.linear_posterior.mfvi_elbo` at every pair ``(noise[i], prior[i])``, from one
    eigendecomposition of ``Phi^T Phi``: each pair then costs ``O(K D)``, not a Cholesky factor."""
    from scipy import linalg

    N, K = Phi.shape
    D = Y.shape[1]
    G = Phi.T @ Phi
    e, V = linalg.eigh(G, check_finite=False)
    e = np.clip(e, 0.0, None)[None, :]                       # (1, K)
    P2 = ((V.T @ (Phi.T @ Y)) ** 2).sum(axis=1)[None, :]      # (1, K): squared projections, summed over D
    yy = float(np.sum(Y ** 2))
    n2, s2 = np.asarray(noise, float)[:, None], np.asarray(prior, float)[:, None]
    r = n2 / s2
    fit = (P2 / (e + r)).sum(axis=1)                            # tr(M^T Phi^T Y)
    mm = (P2 / (e + r) ** 2).sum(axis=1)                        # ||M||^2
    n2, s2 = n2[:, 0], s2[:, 0]
    if inference == "analytic":                                 # Y_d ~ N(0, n2 I + s2 Phi Phi^T)
        logdet = N * np.log(n2) + np.log1p(e / r).sum(axis=1)
        quad = (yy - fit) / n2
        return -0.5 * (D * (logdet + N * np.log(2 * np.pi)) + quad)
    resid = yy - 2 * fit + (P2 * e / (e + r) ** 2).sum(axis=1)  # ||Y - Phi M||^2
    var = 1.0 / (np.diag(G)[None, :] / n2[:, None] + 1.0 / s2[:, None])   # (pairs, K)
    resid = resid + D * (var * np.diag(G)[None, :]).sum(axis=1)
    loglik = -0.5 * resid / n2 - 0.5 * N * D * np.log(2 * np.pi * n2)
    kl = 0.5 * D * (var / s2[:, None] - 1.0 + np.log(s2[:, None]) - np.log(var)).sum(axis=1) + 0.5 * mm / s2
    return loglik - kl


def _grid_variances(Phi: np.ndarray, Y: np.ndarray, inference: str) -> tuple:
    """``(σ², s²)`` maximising the evidence (or the ELBO) over a log grid.

    The fixed-point iterations of :class:`~skdbal.BayesianLinearRegression`
    follow the objective from their start, and on a few labels of many
    features it has other maxima: ``s² → 0`` (every prediction the class
    frequencies) or ``σ² → 0`` (interpolation). A bounded grid
    (``σ²`` in ``[1e-3, 1]`` for one-hot targets; the prior variance of an
    output, ``s² · K · v̄`` with ``v̄`` the mean feature variance, in
    ``[1e-3, 1e2] · σ²``) never reaches them."""
    N, K = Phi.shape
    scale = max(float(np.sum(Phi ** 2)) / max(N, 1), np.finfo(float).tiny)   # K · v̄
    noise = np.repeat(_NOISE_GRID, len(_SIGNAL_GRID))
    prior = noise * np.tile(_SIGNAL_GRID, len(_NOISE_GRID)) / scale
    best = int(np.nanargmax(_grid_objectives(Phi, Y, noise, prior, inference)))
    return float(noise[best]), float(prior[best])


class BayesianLastLayerHead(_SampledHead):
    """The Bayesian last layer (analytic or mean-field) as a classification head.

    :class:`~skdbal.BayesianLinearRegression` fitted on one-hot labels, as in
    Anonymous (n.d., §4): the weights ``W`` (features × classes) of a linear
    layer over the embeddings get the Gaussian posterior of a regression with
    noise variance ``σ²`` and prior variance ``s²`` (fitted by the evidence or
    the ELBO with ``fit_hyperparameters=True``), exact (``"analytic"``,
    the matrix-normal posterior with independent outputs) or mean-field
    (``"mfvi"``). Sample ``t`` of :meth:`predict_proba_samples` is one draw
    ``W_t`` of that posterior, and its class probabilities are
    ``softmax(logit_scale · (φ W_t + b))``: the regression's outputs, near 1
    for the labelled class and near 0 for the others, read as logits. Fitting
    is closed form (a Cholesky factor of a ``D × D`` matrix).

    Parameters
    ----------
    inference : {"analytic", "mfvi"}, default="analytic"
        As :class:`~skdbal.BayesianLinearRegression`'s.
    noise_variance, prior_variance : float, default=1.0
        ``σ²`` and ``s²`` (the starting values when ``fit_hyperparameters``).
    fit_hyperparameters : bool, default=True
        Fit ``σ²`` and ``s²``: the evidence (analytic) or the ELBO (mfvi).
    logit_scale : float, default=10.0
        Multiplies the sampled outputs before the softmax: the gap between
        the labelled class (about 1) and the others (about 0), in logits.
        See the docs' guide on representations for how it was chosen.
    n_samples : int, default=100
        ``T``.
    classes : array-like or None, default=None
        All class labels (one-hot columns); set it when the first labelled
        set may miss some.
    class_prior : {"uniform", "frequencies"}, default="uniform"
        The outputs' offset ``b̄`` where the embedding is the labelled
        set's mean: ``"uniform"``, ``1 / C`` for every class;
        ``"frequencies"``, the labelled set's class frequencies (the
        regression's own intercept). Labels an active learner chose are not
        a sample of the pool's classes (BALD and EPIG pick the classes they
        are unsure of, often many of one), and with few of them the shrunk
        weights leave the offset to decide: on the frequencies, a head of
        such labels can predict their commonest class nearly everywhere.
        The guide on representations gives the measurement.
    random_state : int, RandomState instance or None, default=None
        Seeds the posterior draws: with an int, every call draws the same
        ``T`` last layers.

    Attributes
    ----------
    regressor_ : BayesianLinearRegression
        The fitted regression on the one-hot labels (``fit_intercept=True``):
        its ``coef_``, ``coef_var_``, ``noise_variance_``,
        ``prior_variance_`` and ``log_marginal_likelihood_``.
    classes_ : ndarray of shape (C,)
    n_features_in_ : int

    See Also
    --------
    skdbal.BayesianLinearRegression : the regression, with its predictive variance.
    MCDropoutHead : a trained head with dropout on its last layer.

    References
    ----------
    .. [1] Anonymous (candidate number 1091797), "Uncertainty in deep
       learning", anonymised report, undated. Code:
       https://www.github.com/anonymous-account-67/UncertaintyInDeepLearning.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import load_digits
    >>> from skdbal.models import BayesianLastLayerHead
    >>> X, y = load_digits(return_X_y=True)
    >>> X = (X / 16).astype(np.float32)
    >>> head = BayesianLastLayerHead(n_samples=20, random_state=0).fit(X[:300], y[:300])
    >>> head.predict_proba_samples(X[300:305]).shape
    (20, 5, 10)
    >>> float(head.score(X[300:], y[300:])) > 0.75
    True
    >>> fixed = dict(fit_hyperparameters=False, noise_variance=0.05, prior_variance=0.05)
    >>> exact = BayesianLastLayerHead(**fixed).fit(X[:300], y[:300])
    >>> mf = BayesianLastLayerHead(inference="mfvi", **fixed).fit(X[:300], y[:300])
    >>> bool(np.allclose(mf.regressor_.coef_, exact.regressor_.coef_))   # one mean, narrower weights
    True
    >>> bool(np.all(mf.regressor_.coef_var_ <= exact.regressor_.coef_var_ + 1e-12))
    True
    """

    def __init__(self, inference: str = "analytic", noise_variance: float = 1.0, prior_variance: float = 1.0,
                 fit_hyperparameters: bool = True, logit_scale: float = 10.0, n_samples: int = 100,
                 classes=None, class_prior: str = "uniform", random_state=None):
        self.inference = inference
        self.noise_variance = noise_variance
        self.prior_variance = prior_variance
        self.fit_hyperparameters = fit_hyperparameters
        self.logit_scale = logit_scale
        self.n_samples = n_samples
        self.classes = classes
        self.class_prior = class_prior
        self.random_state = random_state

    def fit(self, X, y):
        """Fit the posterior of the last layer on the embeddings ``X`` and one-hot ``y``.

        Parameters
        ----------
        X : array-like of shape (N, n_features)
        y : array-like of shape (N,)

        Returns
        -------
        self
        """
        from ._bayesian_linear import BayesianLinearRegression

        scale = self.logit_scale
        if isinstance(scale, bool) or not isinstance(scale, numbers.Real) or not np.isfinite(scale) or scale <= 0:
            raise ValueError(f"logit_scale must be a finite float > 0; got {scale!r}")
        check_positive_int(self.n_samples, "n_samples")
        check_bool(self.fit_hyperparameters, "fit_hyperparameters")
        if self.class_prior not in ("uniform", "frequencies"):
            raise ValueError(f"class_prior must be 'uniform' or 'frequencies'; got {self.class_prior!r}")
        X, cols = self._fit_inputs(X, y)
        Y = np.eye(len(self.classes_))[cols]
        X = X.astype(np.float64)
        self._x_mean, self._y_mean = X.mean(axis=0), Y.mean(axis=0)
        noise, prior = self.noise_variance, self.prior_variance
        if self.inference not in ("analytic", "mfvi"):
            raise ValueError(f"inference must be 'analytic' or 'mfvi', got {self.inference!r}")
        if self.fit_hyperparameters:
            noise, prior = _grid_variances(X - self._x_mean, Y - self._y_mean, self.inference)
        reg = BayesianLinearRegression(inference=self.inference, noise_variance=noise, prior_variance=prior,
                                       fit_intercept=True)
        self.regressor_ = reg.fit(X, Y)
        # the outputs at the labelled mean: the class frequencies (the regression's intercept) or uniform
        self._offset = self._y_mean if self.class_prior == "frequencies" else np.full(len(Y[0]), 1 / len(Y[0]))
        return self

    def _weight_draws(self, T: int, seed: int) -> np.ndarray:
        """``T`` draws ``(T, K, C)`` of the posterior of the weights (on centred features)."""
        from scipy import linalg

        reg = self.regressor_
        M = reg.coef_.T                                       # (K, C)
        K, C = M.shape
        E = np.random.default_rng(seed).standard_normal((K, T * C))
        if self.inference == "analytic":                      # A = L L^T, A^{-1} = L^{-T} L^{-1}
            noise = linalg.solve_triangular(reg.precision_cholesky_, E, lower=True, trans="T",
                                            check_finite=False)
        else:
            noise = np.sqrt(np.tile(reg.coef_var_.T, (1, T))) * E
        return M[None] + noise.reshape(K, T, C).transpose(1, 0, 2)

    def predict_proba_samples(self, X, n_samples: Optional[int] = None, *, consistent: bool = False) -> np.ndarray:
        """``T`` samples of the class probabilities, one posterior draw of the last layer each.

        Parameters
        ----------
        X : array-like of shape (N, n_features)
        n_samples : int, optional
            ``T``; by default the ``n_samples`` parameter.
        consistent : bool, default=False
            Accepted for the predictive interface: the samples are always
            consistent (draw ``t`` is shared by every row).

        Returns
        -------
        P : ndarray of shape (T, N, C), dtype float32
            ``softmax(logit_scale · ((x - x̄) W_t + b̄))``, with ``x̄`` the
            mean of the training embeddings and ``b̄`` the offset
            ``class_prior`` names.
        """
        T = self._check_samples_request(n_samples, consistent)
        X = self._inputs(X)
        W = self._weight_draws(T, self._call_seed(0))
        b = self._offset[None, :] - np.einsum("k,tkc->tc", self._x_mean, W)
        return _linear_samples(torch.from_numpy(X), torch.from_numpy(W.astype(np.float32)),
                               torch.from_numpy(b.astype(np.float32)), scale=float(self.logit_scale))


class _Reshape(torch.nn.Module):
    """Each row to ``shape`` (flat rows to the images an encoder takes, or images to flat rows)."""

    def __init__(self, shape: tuple):
        super().__init__()
        self.shape = tuple(shape)

    def forward(self, x):
        return x.reshape((len(x),) + self.shape)


class _ToLength(torch.nn.Module):
    """Each row scaled to the Euclidean length ``length``."""

    def __init__(self, length: float):
        super().__init__()
        self.length = length

    def forward(self, x):
        return torch.nn.functional.normalize(x, dim=1) * self.length


class EncoderWithHead(torch.nn.Module):
    """An encoder's network under a dropout head, to fine-tune with :class:`~skdbal.MCDropoutClassifier`.

    ``trunk``: a copy of the encoder's network, its output flattened, then
    the hidden dense–ReLU layers; ``head``: dropout and a dense layer to the
    classes. Given as the ``module`` of an
    :class:`~skdbal.MCDropoutClassifier`, every :meth:`fit` trains the whole
    of it, the encoder included, from the encoder's own weights (the copy is
    taken anew each time, and the encoder you pass is never changed), and MC
    sampling runs the trunk once per input and draws the ``T`` dropout masks
    on the head only (the network is split, see :mod:`skdbal.models`). This is
    the high-accuracy end of a head over fixed embeddings: slower to refit,
    since every step goes through the encoder.

    Parameters
    ----------
    encoder : torch.nn.Module or TorchEncoder
        The network with its weights: for a fitted
        :class:`~skdbal.models.TorchEncoder`, its ``module_`` (feed the
        classifier inputs prepared by its ``preparation_``). A fitted
        ``TorchEncoder`` itself is taken too, but scikit-learn's ``clone``
        (which :class:`~skdbal.ActiveLearner` uses) gives back an unfitted
        one, which is refused; so is one whose ``output`` names a layer
        (give it ``output=callable`` instead).
    n_classes : int, default=10
        Filled in by :class:`~skdbal.MCDropoutClassifier` from ``classes``.
    hidden_layer_sizes : tuple of int, default=()
        Dense–ReLU layers between the encoder and the head.
    dropout : float, default=0.5
        The head's dropout probability.
    feature_norm : float or None, default=10.0
        The head reads each row of the trunk's output (the embedding
        :meth:`~skdbal.MCDropoutClassifier.transform` gives) scaled to this length
        (the cosine geometry a :class:`~skdbal.models.PoolEncoder`'s
        embeddings have); ``None``: as it comes. Measured on MNIST
        (``benchmarks/bench_finetune.py``'s recipe), the raw features of a
        small encoder, a fraction of a unit long, left the head learning
        far slower than the encoder under it.
    input_shape : tuple of int, optional
        The shape of one input, filled in by the classifier from the data: a
        zero input of that shape, put through the encoder once, gives the
        embedding's width.
    n_features : int, optional
        The width of a flat input, when ``input_shape`` is not given.

    Examples
    --------
    >>> import numpy as np, torch
    >>> from sklearn.datasets import load_digits
    >>> from skdbal import MCDropoutClassifier
    >>> from skdbal.models import EncoderWithHead
    >>> X, y = load_digits(return_X_y=True)
    >>> X = (X / 16).astype(np.float32)
    >>> encoder = torch.nn.Sequential(torch.nn.Linear(64, 16), torch.nn.Tanh())   # say, pretrained
    >>> net = MCDropoutClassifier(EncoderWithHead, module__encoder=encoder, classes=np.arange(10),
    ...                           max_epochs=20, n_samples=30, random_state=0).fit(X[:200], y[:200])
    >>> net.predict_proba_samples(X[200:205]).shape
    (30, 5, 10)
    >>> net.transform(X[:2]).shape                # the fine-tuned embedding
    (2, 16)
    """

    def __init__(self, encoder, n_classes: int = 10, hidden_layer_sizes: Sequence[int] = (), dropout: float = 0.5,
                 feature_norm: Optional[float] = 10.0, input_shape=None, n_features=None):
        import copy

        super().__init__()
        module = encoder
        if not isinstance(encoder, torch.nn.Module):
            if isinstance(getattr(encoder, "output", None), str):
                raise TypeError("EncoderWithHead cannot fine-tune an encoder whose output names a layer "
                                f"({encoder.output!r}): give the TorchEncoder output=a callable that returns the "
                                "feature extractor, e.g. lambda m: torch.nn.Sequential(*list(m.children())[:-1])")
            module = getattr(encoder, "module_", None)
            if not isinstance(module, torch.nn.Module):
                raise TypeError("encoder must be a torch.nn.Module or a fitted TorchEncoder; got "
                                f"{type(encoder).__name__}" + (
                                    " not fitted (scikit-learn's clone, which the learner uses, unfits it): "
                                    "pass its fitted network instead, module__encoder=encoder.module_"
                                    if hasattr(encoder, "module") else ""))
        module = copy.deepcopy(module).cpu().train().requires_grad_(True)   # an encoder freezes its own
        if input_shape is None and n_features is None:
            raise ValueError("EncoderWithHead needs input_shape or n_features (MCDropoutClassifier fills them "
                             "in from the data)")
        shape = tuple(input_shape) if input_shape is not None else (int(n_features),)
        was = module.training
        module.eval()
        with torch.no_grad():
            try:
                width = int(module(torch.zeros((1,) + shape)).reshape(1, -1).shape[1])
            except RuntimeError:   # an encoder of flat rows, given images' shape
                shape = (int(np.prod(shape)),)
                width = int(module(torch.zeros((1,) + shape)).reshape(1, -1).shape[1])
        module.train(was)
        sizes = [width] + [int(h) for h in hidden_layer_sizes]
        layers: list = [_Reshape(shape), module, torch.nn.Flatten()]
        for n_in, n_out in zip(sizes[:-1], sizes[1:]):
            layers += [torch.nn.Linear(n_in, n_out), torch.nn.ReLU()]
        if feature_norm is not None and not (isinstance(feature_norm, numbers.Real) and feature_norm > 0):
            raise ValueError(f"feature_norm must be a length > 0 or None; got {feature_norm!r}")
        if feature_norm is not None:      # the trunk's last step: the head stays dropout and a dense layer
            layers.append(_ToLength(float(feature_norm)))
        self.trunk = torch.nn.Sequential(*layers)
        self.head = torch.nn.Sequential(torch.nn.Dropout(dropout), torch.nn.Linear(sizes[-1], int(n_classes)))

    def forward(self, x):
        return self.head(self.trunk(x))
