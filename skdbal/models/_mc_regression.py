"""The MC-dropout skorch regressor, with an optional heteroscedastic head."""
from __future__ import annotations

from typing import Optional

import numpy as np
import torch
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_array
from skorch import NeuralNetRegressor
from torch import nn

from .._validation import check_bool
from ..uncertainty import decompose_gaussian
from ._mc_base import _MCDropoutNet
from ._mc_masks import _identity, _seed_from, _torch_seeded, mc_dropout_mode
from ._nets import MLP

__all__ = ["MCDropoutRegressor", "GaussianNLLLoss"]


class GaussianNLLLoss(nn.Module):
    """Gaussian negative log likelihood of a heteroscedastic head.

    The module's output holds ``2·D`` values per row: ``D`` means ``μ``,
    then ``D`` log variances ``s``. The loss is the mean over rows and
    outputs of ``½ (exp(−s) (y − μ)² + s)`` (the Gaussian NLL less its
    constant ``½ log 2π``). Log variances are clamped to
    ``[min_log_var, max_log_var]`` for stability.

    Parameters
    ----------
    min_log_var, max_log_var : float, default=-10.0, 10.0

    Examples
    --------
    >>> import torch
    >>> from skdbal.models import GaussianNLLLoss
    >>> out = torch.tensor([[1.0, 0.0]])          # μ = 1, log σ² = 0
    >>> float(GaussianNLLLoss()(out, torch.tensor([[3.0]])))   # ½ (1 · 2² + 0)
    2.0
    """

    def __init__(self, min_log_var: float = -10.0, max_log_var: float = 10.0):
        super().__init__()
        self.min_log_var = float(min_log_var)
        self.max_log_var = float(max_log_var)

    def forward(self, y_pred: torch.Tensor, y_true: torch.Tensor) -> torch.Tensor:
        D = y_pred.shape[-1] // 2
        mu = y_pred[..., :D]
        s = y_pred[..., D:].clamp(self.min_log_var, self.max_log_var)
        y_true = y_true.reshape(mu.shape).to(mu.dtype)
        return 0.5 * (torch.exp(-s) * (y_true - mu) ** 2 + s).mean()


class MCDropoutRegressor(_MCDropoutNet, NeuralNetRegressor):
    """A skorch regressor that samples predictions with MC dropout.

    A :class:`skorch.NeuralNetRegressor` whose :meth:`predict_samples`
    returns ``T`` stochastic forward passes with dropout on, drawn with the
    same trunk-cached sampling as :class:`~skdbal.MCDropoutClassifier`.
    With ``heteroscedastic=True`` the network also predicts a variance per
    output and trains on the Gaussian likelihood (:class:`GaussianNLLLoss`),
    which gives Kendall and Gal's split of the predictive variance:
    epistemic, the variance of the ``T`` means, and aleatoric, the mean of
    the ``T`` predicted variances. Without it the network trains on the
    squared error, and the aleatoric variance is one number for all inputs,
    ``noise_variance_``: the mean squared training residual (the maximum
    likelihood noise variance of the fitted network).

    It implements the regression side of the predictive interface
    (:mod:`skdbal.predictive`): :meth:`predictive_variance` (for the
    ``predictive_variance`` strategy), :meth:`predict_samples` and
    :meth:`output_gradient_gram` (for ``expected_gradient_length``).

    Parameters
    ----------
    module : torch module class or instance, default=skdbal.models.MLP
        Pass a class so that ``fit`` re-initialises it. Its output size
        (``n_outputs``, or ``n_classes`` for :mod:`skdbal.models` modules) is
        filled in from ``y``: ``D`` outputs, or ``2·D`` with
        ``heteroscedastic=True``; the input size as for the classifier.
    heteroscedastic : bool, default=False
        Predict a log variance per output as well, and train on the Gaussian
        negative log likelihood.
    n_samples : int, default=20
        Number of MC passes ``T``.
    mc_dropout : bool, default=True
        If False, dropout is off when predicting (the deterministic baseline).
    consistent_masks : bool, default=False
        Use the same ``T`` dropout masks for every input (see
        :class:`~skdbal.MCDropoutClassifier`).
    predict_method : {"mc", "deterministic"}, default="mc"
        How :meth:`predict` predicts: the mean of ``n_samples`` passes, or
        one pass with dropout off (weights scaled as at test time).
    mask_seeding : {"auto", "row_pcg64", "row_philox", "row", "stream"}, default="auto"
        As for :class:`~skdbal.MCDropoutClassifier`: ``"auto"`` is
        ``"row_philox"`` (counter-based masks computed on the device) on a
        CUDA device and ``"row_pcg64"`` elsewhere, resolved at fit
        (``mask_seeding_``); every value but ``"stream"`` makes a row's
        passes independent of the other rows.
    random_state : int, RandomState instance or None, default=None
        Seeds weight initialisation, batch shuffling and training dropout,
        and the masks of :meth:`predict_samples`.
    criterion : torch criterion class, default=None
        ``torch.nn.MSELoss``, or :class:`GaussianNLLLoss` with
        ``heteroscedastic=True``, which needs a :class:`GaussianNLLLoss` (or
        a subclass): another criterion is refused with a ``ValueError``.
    optimizer, lr, max_epochs, batch_size, train_split, verbose :
        As in :class:`skorch.NeuralNetRegressor`, with defaults ``Adam``,
        ``1e-3``, ``200``, ``128``, ``None`` and ``0``.
    **kwargs :
        Any other skorch parameter, e.g. ``module__hidden_layer_sizes=(64,)``.

    Attributes
    ----------
    n_outputs_ : int
        Number of targets ``D``.
    noise_variance_ : float
        Without a heteroscedastic head: the mean squared residual of the
        deterministic network on its training data, per output.
    module_ : torch.nn.Module
        The fitted network.
    mask_seeding_ : str
        The sampler that ``mask_seeding`` resolved to at fit.

    Notes
    -----
    The network fits the targets as they come; standardise them first
    (for example with :class:`~sklearn.preprocessing.StandardScaler` on
    ``y``) when they are far from unit scale.

    References
    ----------
    .. [1] Y. Gal and Z. Ghahramani, "Dropout as a Bayesian approximation:
       representing model uncertainty in deep learning", ICML 2016.
    .. [2] A. Kendall and Y. Gal, "What uncertainties do we need in Bayesian
       deep learning for computer vision?", NeurIPS 2017.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal import MCDropoutRegressor
    >>> rng = np.random.RandomState(0)
    >>> X = rng.uniform(-1, 1, size=(200, 1)).astype(np.float32)
    >>> y = np.sin(3 * X[:, 0])
    >>> reg = MCDropoutRegressor(module__hidden_layer_sizes=(64, 64), module__dropout=0.1,
    ...                          heteroscedastic=True, random_state=0).fit(X, y)
    >>> reg.predict_samples(X[:5]).shape                 # T = 20 passes of 5 means
    (20, 5)
    >>> d = reg.decompose(X[:5])                          # Kendall–Gal split of the variance
    >>> bool(np.allclose(d.total, d.aleatoric + d.epistemic))
    True
    >>> bool(reg.score(X, y) > 0.8)
    True
    """

    def __init__(
        self,
        module=MLP,
        *,
        criterion=None,
        optimizer=torch.optim.Adam,
        lr: float = 1e-3,
        max_epochs: int = 200,
        batch_size: int = 128,
        train_split=None,
        verbose: int = 0,
        heteroscedastic: bool = False,
        n_samples: int = 20,
        mc_dropout: bool = True,
        consistent_masks: bool = False,
        predict_method: str = "mc",
        mask_seeding: str = "auto",
        random_state=None,
        **kwargs,
    ):
        kwargs.setdefault("iterator_train__shuffle", True)
        super().__init__(
            module,
            criterion=criterion,
            optimizer=optimizer,
            lr=lr,
            max_epochs=max_epochs,
            batch_size=batch_size,
            train_split=train_split,
            verbose=verbose,
            **kwargs,
        )
        self.heteroscedastic = heteroscedastic
        self.n_samples = n_samples
        self.mc_dropout = mc_dropout
        self.consistent_masks = consistent_masks
        self.predict_method = predict_method
        self.mask_seeding = mask_seeding
        self.random_state = random_state

    # ------------------------------------------------------------- building
    def initialize_criterion(self):
        """The criterion: ``criterion`` when given, else the squared error or
        (``heteroscedastic=True``) :class:`GaussianNLLLoss`."""
        criterion = self.criterion
        if criterion is None:
            criterion = GaussianNLLLoss if self.heteroscedastic else nn.MSELoss
        self.criterion_ = self.initialized_instance(criterion, self.get_params_for("criterion"))
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True  # y of shape (N, D)
        return tags

    def _infer_module_kwargs(self, X: np.ndarray) -> dict:
        """Output size (``n_outputs`` and, for our nets, ``n_classes``) and input size."""
        size = self.n_outputs_ * (2 if self.heteroscedastic else 1)
        return {"n_outputs": size, "n_classes": size, **self._input_size_kwargs(X)}

    def _check_params(self):
        super()._check_params()
        check_bool(self.heteroscedastic, "heteroscedastic")
        crit = self.criterion
        if self.heteroscedastic and crit is not None:
            cls = crit if isinstance(crit, type) else type(crit)
            if not issubclass(cls, GaussianNLLLoss):
                # the head's second half would be trained as more means, then read as log variances
                raise ValueError(f"heteroscedastic=True needs a Gaussian likelihood for the head's means and log "
                                 f"variances: GaussianNLLLoss (or a subclass); got criterion={cls.__name__}")

    def _validate_y(self, y, n: int, reset: bool) -> np.ndarray:
        """Continuous targets as float32 ``(N, D)``."""
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None")
        y_arr = np.asarray(y)
        if y_arr.dtype.kind not in "fiu":
            raise ValueError(
                f"Unknown label type: {type(self).__name__} takes continuous targets; y has dtype {y_arr.dtype} "
                "(class labels?). Use MCDropoutClassifier for classification")
        y_arr = check_array(y_arr, input_name="y", ensure_2d=False, dtype=np.float32,
                            ensure_all_finite=True)
        if y_arr.ndim not in (1, 2):
            raise ValueError(f"y must have shape (n_samples,) or (n_samples, n_outputs); got {y_arr.shape}")
        if len(y_arr) != n:
            raise ValueError(f"X and y have inconsistent lengths: {n} and {len(y_arr)}")
        y2 = y_arr.reshape(n, -1)
        if reset:
            self.n_outputs_ = y2.shape[1]
            self.y_ndim_ = y_arr.ndim
        elif y2.shape[1] != self.n_outputs_ or y_arr.ndim != self.y_ndim_:
            raise ValueError(f"y has shape {y_arr.shape[1:]} per sample, but {type(self).__name__} "
                             f"was fitted on {self.n_outputs_} output(s)")
        return np.ascontiguousarray(y2)

    # -------------------------------------------------------------- training
    def fit(self, X, y, **fit_params):
        """Initialise the module and train it on ``(X, y)``.

        Parameters
        ----------
        X : array-like of shape (N, n_features), (N, H, W) or (N, C, H, W)
            Inputs; ``uint8`` is scaled to [0, 1], other numeric dtypes are
            cast to float32.
        y : array-like of shape (N,) or (N, n_outputs)
            Continuous targets.
        **fit_params :
            Passed to skorch's training loop.

        Returns
        -------
        self
        """
        self._check_params()
        X = self._validate_X(X, reset=True)
        y = self._validate_y(y, len(X), reset=True)
        self.module_kwargs_inferred_ = self._infer_module_kwargs(X)
        with _torch_seeded(_seed_from(self.random_state)):
            if not self.warm_start or not self.initialized_:
                self.initialize()
            self._train_loop(X, y, "fit", **fit_params)
        self._fit_noise(X, y)
        return self

    def partial_fit(self, X, y=None, classes=None, **fit_params):
        """Continue training for ``max_epochs`` without re-initialising.

        A module that is not initialised yet is initialised first, as by
        :meth:`fit`.

        Parameters
        ----------
        X : array-like of shape (N, n_features), (N, H, W) or (N, C, H, W)
        y : array-like of shape (N,) or (N, n_outputs)
            Targets, with as many outputs as before.
        classes : ignored
            Accepted for skorch compatibility.
        **fit_params :
            Passed to skorch's training loop.

        Returns
        -------
        self
        """
        self._check_params()
        fresh = not self.initialized_ or not hasattr(self, "n_outputs_")
        X = self._validate_X(X, reset=fresh)
        y = self._validate_y(y, len(X), reset=fresh)
        self.module_kwargs_inferred_ = self._infer_module_kwargs(X)
        with _torch_seeded(_seed_from(self.random_state, offset=1)):
            if not self.initialized_:
                self.initialize()
            self._train_loop(X, y, "partial_fit", **fit_params)
        self._fit_noise(X, y)
        return self

    def _fit_noise(self, X: np.ndarray, y: np.ndarray) -> None:
        """``noise_variance_``: the mean squared training residual per output."""
        if self.heteroscedastic:
            self.noise_variance_ = None
            return
        out = self._deterministic(X, _identity)
        self.noise_variance_ = float(np.mean((out - y) ** 2))

    # ------------------------------------------------------------ prediction
    @available_if(lambda self: False)
    def predict_proba(self, X):  # skorch's raw module output: not a regressor's method
        raise AttributeError("MCDropoutRegressor has no predict_proba")

    def _shape_out(self, a: np.ndarray) -> np.ndarray:
        """``(..., N, D)`` to ``(..., N)`` when ``y`` was 1-d."""
        return a[..., 0] if self.y_ndim_ == 1 else a

    def predict_samples(self, X, n_samples: Optional[int] = None, *, return_var: bool = False,
                        consistent: bool = False):
        """Predicted means from ``T`` stochastic forward passes.

        Parameters
        ----------
        X : array-like of shape (N, n_features), (N, H, W) or (N, C, H, W)
        n_samples : int, optional
            Number of passes ``T``; defaults to the ``n_samples`` parameter.
        return_var : bool, default=False
            Also return each pass's aleatoric variances: the predicted ones
            with a heteroscedastic head, else ``noise_variance_``.
        consistent : bool, default=False
            One set of ``T`` masks for every input, for this call (as
            ``consistent_masks=True``).

        Returns
        -------
        means : ndarray of shape (T, N) or (T, N, n_outputs), dtype float32
            Shaped like ``y`` at fit, with a leading pass axis.
        variances : ndarray of the same shape
            Only with ``return_var=True``.
        """
        T = self._n_passes(n_samples)
        self.check_is_fitted()
        out = self._sample_outputs(X, T, _identity, consistent=consistent)
        D = self.n_outputs_
        means = out[..., :D]
        if not return_var:
            return self._shape_out(means)
        if self.heteroscedastic:
            crit = self.criterion_ if isinstance(self.criterion_, GaussianNLLLoss) else GaussianNLLLoss()
            var = np.exp(np.clip(out[..., D:], crit.min_log_var, crit.max_log_var))
        else:
            var = np.full_like(means, self.noise_variance_)
        return self._shape_out(means), self._shape_out(var.astype(np.float32))

    def decompose(self, X, n_samples: Optional[int] = None):
        """Kendall and Gal's split of each output's predictive variance.

        Parameters
        ----------
        X : array-like of shape (N, n_features), (N, H, W) or (N, C, H, W)
        n_samples : int, optional
            Number of passes ``T``.

        Returns
        -------
        Decomposition
            ``(total, aleatoric, epistemic)`` from
            :func:`skdbal.uncertainty.decompose_gaussian`, each shaped like
            ``y``: the mean predicted variance, the variance of the means,
            and their sum.
        """
        return decompose_gaussian(*self.predict_samples(X, n_samples, return_var=True))

    def predictive_variance(self, X) -> np.ndarray:
        """Total predictive variance of each row, summed over outputs.

        Parameters
        ----------
        X : array-like of shape (N, n_features), (N, H, W) or (N, C, H, W)

        Returns
        -------
        variance : ndarray of shape (N,), dtype float64
            The trace of the predictive covariance: the variance of the
            ``T`` means plus the mean aleatoric variance.
        """
        total = np.asarray(self.decompose(X).total, dtype=np.float64)
        return total.reshape(len(total), -1).sum(axis=1)

    def predict(self, X, return_std: bool = False):
        """Predicted targets: the mean of the MC passes, or one deterministic pass.

        Parameters
        ----------
        X : array-like of shape (N, n_features), (N, H, W) or (N, C, H, W)
        return_std : bool, default=False
            Also return the predictive standard deviation (total:
            epistemic and aleatoric), as scikit-learn's probabilistic
            regressors do.

        Returns
        -------
        y_pred : ndarray of shape (N,) or (N, n_outputs), dtype float64
        y_std : ndarray of the same shape
            Only with ``return_std=True``.
        """
        if self.predict_method not in ("mc", "deterministic"):
            raise ValueError(f"predict_method must be 'mc' or 'deterministic'; got {self.predict_method!r}")
        self.check_is_fitted()
        if self.predict_method == "mc" and self.mc_dropout:
            means, var = self.predict_samples(X, return_var=True)
            mean = means.mean(axis=0)
            if return_std:
                d = decompose_gaussian(means, var)
        else:
            mean = self._shape_out(self._deterministic(X, _identity)[:, :self.n_outputs_])
            if return_std:
                d = self.decompose(X)
        mean = np.asarray(mean, dtype=np.float64)
        if return_std:
            return mean, np.sqrt(d.total)
        return mean

    def output_gradient_gram(self, X, *, return_output: bool = False):
        """Gram matrices of the gradients of the predicted means, dropout off.

        ``G[n, d, e] = ⟨∇_θ f_d(x_n), ∇_θ f_e(x_n)⟩`` over every trainable
        parameter ``θ`` of the network with dropout off (weights scaled as
        at test time): what :func:`skdbal.acquisition.functional.egl_scores`
        needs. Per-row Jacobians from :mod:`torch.func`, in chunks that keep
        them under about 64 MB.

        Parameters
        ----------
        X : array-like of shape (N, n_features), (N, H, W) or (N, C, H, W)
        return_output : bool, default=False
            Also return ``f(x)``, the deterministic prediction the gradients
            are taken at (EGL's reference).

        Returns
        -------
        gram : ndarray of shape (N, D, D), dtype float64
        output : ndarray of shape (N, D)
            Only with ``return_output=True``.
        """
        from torch.func import functional_call, jacrev, vmap

        self.check_is_fitted()
        X = self._validate_X(X)
        D = self.n_outputs_
        module = self.module_
        params = {k: v.detach() for k, v in module.named_parameters() if v.requires_grad}
        n_params = sum(v.numel() for v in params.values())
        rows = max(1, (64 * 2**20) // (4 * max(n_params * D, 1)))

        def f(p, x):
            out = functional_call(module, p, (x.unsqueeze(0),))[0, :D]
            return out, out

        grams, outs = [], []
        with mc_dropout_mode(module, dropout=False), torch.no_grad():
            for start in range(0, len(X), rows):
                xb = torch.as_tensor(X[start:start + rows], device=self.device)
                jac, out = vmap(jacrev(f, has_aux=True), in_dims=(None, 0))(params, xb)
                J = torch.cat([j.reshape(len(xb), D, -1) for j in jac.values()], dim=2).double()
                grams.append((J @ J.transpose(1, 2)).cpu())
                outs.append(out.cpu())
        gram = torch.cat(grams).numpy()
        if return_output:
            return gram, torch.cat(outs).numpy().astype(np.float64)
        return gram
