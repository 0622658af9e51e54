"""The MC-dropout skorch classifier.

:class:`MCDropoutClassifier` only: its sampling engine is ``_mc_masks``, and
the skorch base it shares with the regressor ``_mc_base``.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import torch
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import column_or_1d
from skorch import NeuralNetClassifier
from torch import nn

from .._validation import label_columns
from ._mc_base import _MCDropoutNet
from ._mc_masks import _seed_from, _softmax, _torch_seeded
from ._nets import BayesianCNN

__all__ = ["MCDropoutClassifier"]


class MCDropoutClassifier(_MCDropoutNet, NeuralNetClassifier):
    """A skorch classifier that samples predictions with MC dropout.

    A :class:`skorch.NeuralNetClassifier` whose
    :meth:`predict_proba_samples` returns ``T`` stochastic forward passes with
    dropout on and every other layer in eval mode (Gal and Ghahramani,
    2016). With ``mc_dropout=False`` it is the deterministic baseline of
    Gal et al. (2017, §5.2): the ``T`` passes are identical, with weights
    scaled as at test time.

    Defaults suit the tiny labelled sets of active learning: no validation
    split, shuffled training batches, silent training, and a module that is
    re-initialised by every :meth:`fit`.

    Parameters
    ----------
    module : torch module class or instance, default=:class:`~skdbal.models.BayesianCNN`
        Pass a class so that ``fit`` re-initialises it. ``n_classes`` and the
        input size (``input_shape`` or ``n_features``) are filled in from the
        data when the module accepts them and they are not given as
        ``module__*`` parameters.
    n_samples : int, default=20
        Number of MC passes ``T`` used by :meth:`predict_proba_samples` and,
        with ``predict_method="mc"``, by :meth:`predict_proba`.
    mc_dropout : bool, default=True
        If False, dropout is off when predicting (the deterministic baseline).
    consistent_masks : bool, default=False
        Use the same ``T`` dropout masks for every input: pass ``t`` is then
        one fixed sub-network applied to the whole pool, as BatchBALD needs.
        Needs a split module (see :mod:`skdbal.models`) whose head uses
        ``nn.Dropout``/``nn.DropoutNd``. With an int ``random_state`` the masks
        are also the same in every call, so chunked scoring stays consistent.
    predict_method : {"mc", "deterministic"}, default="mc"
        How :meth:`predict_proba` and :meth:`predict` predict: the average of
        ``n_samples`` MC passes, or one deterministic (weight-scaled) pass.
    mask_seeding : {"auto", "row_pcg64", "row_philox", "row", "stream"}, default="auto"
        How :meth:`predict_proba_samples` draws its dropout masks.
        ``"auto"`` resolves at fit by ``device``: ``"row_philox"`` on a CUDA
        device, ``"row_pcg64"`` elsewhere (recorded as ``mask_seeding_``).
        ``"row_pcg64"``, ``"row_philox"`` and ``"row"``: each input row has
        its own masks, keyed by ``random_state`` and the row's values, so a
        row's passes do not depend on its position, on the other rows or on
        the batch size (scikit-learn's sample-order and subset invariance).
        ``"row_pcg64"`` draws from numpy's PCG64 on the CPU, the same masks
        on every device and the fastest on a CPU (results version 4; a head
        opening with dropout and a linear layer is then computed only over
        the non-zero inputs of each row). ``"row_philox"`` computes each mask
        bit on the model's device as a counter-based function of (row, pass,
        layer, unit), Philox-4x32-10 (``skdbal.models._philox``): no
        host draws or copies, and the same bits on the CPU and on CUDA
        (results version 5; several times slower than ``"row_pcg64"`` on a
        CPU, docs/performance.md). ``"row"`` draws from a
        ``torch.Generator`` per row on the model's device, as results version
        3 did. ``"stream"``: one random stream for the whole call, as skdbal
        drew masks up to results version 2 (a row's masks then depend on the
        rows scored with it). The committed grids of ``docs/results`` say
        which they use. ``consistent_masks=True`` shares its masks between
        rows either way.
    random_state : int, RandomState instance or None, default=None
        Seeds weight initialisation, batch shuffling and training dropout in
        :meth:`fit`, and the masks of :meth:`predict_proba_samples`. With an
        int, repeated calls give identical results. torch's global RNG state
        outside these calls is left untouched.
    classes : array-like or None, default=None
        All class labels. Set it when early labelled sets may miss classes,
        so that ``classes_`` and the output size are stable.
    criterion, optimizer, lr, max_epochs, batch_size, train_split, verbose :
        As in :class:`skorch.NeuralNetClassifier`, with defaults
        ``CrossEntropyLoss`` (the module outputs logits), ``Adam``, ``1e-3``,
        ``50``, ``128``, ``None`` and ``0``.
    **kwargs :
        Any other skorch parameter, e.g. ``module__n_hidden=64`` or
        ``optimizer__weight_decay=1e-4``.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels, from ``classes`` or from ``y`` at fit.
    module_ : torch.nn.Module
        The fitted network.
    mask_seeding_ : str
        The sampler that ``mask_seeding`` resolved to at fit (``"auto"``
        names one by ``device``).

    Notes
    -----
    Inputs may be images ``(N, H, W)`` or ``(N, C, H, W)``, or flat
    ``(N, n_features)``; ``uint8`` inputs are scaled to [0, 1], other dtypes
    are cast to float32 unchanged. Labels are encoded to ``0..C-1`` using
    ``classes_``; :meth:`predict` returns the original labels.

    References
    ----------
    .. [1] Y. Gal and Z. Ghahramani, "Dropout as a Bayesian approximation:
       representing model uncertainty in deep learning", ICML 2016,
       arXiv:1506.02142.
    .. [2] Y. Gal, R. Islam and Z. Ghahramani, "Deep Bayesian active learning
       with image data", ICML 2017, arXiv:1703.02910.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import load_digits
    >>> from skdbal import MCDropoutClassifier
    >>> X, y = load_digits(return_X_y=True)
    >>> X = (X / 16.0).reshape(-1, 8, 8).astype(np.float32)
    >>> clf = MCDropoutClassifier(max_epochs=5, n_samples=10, random_state=0,
    ...                           classes=np.arange(10))
    >>> clf = clf.fit(X[:200], y[:200])
    >>> P = clf.predict_proba_samples(X[200:210])
    >>> P.shape
    (10, 10, 10)
    >>> bool(np.allclose(P.sum(axis=-1), 1, atol=1e-5))
    True
    """

    def __init__(
        self,
        module=BayesianCNN,
        *,
        criterion=nn.CrossEntropyLoss,
        optimizer=torch.optim.Adam,
        lr: float = 1e-3,
        max_epochs: int = 50,
        batch_size: int = 128,
        train_split=None,
        verbose: int = 0,
        classes=None,
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
            classes=classes,
            **kwargs,
        )
        self.n_samples = n_samples
        self.mc_dropout = mc_dropout
        self.consistent_masks = consistent_masks
        self.predict_method = predict_method
        self.mask_seeding = mask_seeding
        self.random_state = random_state


    def _encode_y(self, y) -> np.ndarray:
        return label_columns(self.classes_, column_or_1d(y, warn=True)).astype(np.int64)

    @property
    def classes_(self):
        if self.classes is not None:
            classes = np.asarray(self.classes)
            if classes.ndim != 1 or not len(classes):
                raise ValueError(f"classes must be a non-empty 1-d array; got {self.classes!r}")
            if len(np.unique(classes)) != len(classes):
                raise ValueError(f"classes must be unique; got {self.classes!r}")
            return np.sort(classes)
        try:
            return self.classes_fit_
        except AttributeError:
            raise AttributeError(
                f"{type(self).__name__} has no classes_ before fit when "
                "classes=None; pass classes=... or fit first"
            ) from None

    def _infer_module_kwargs(self, X: np.ndarray) -> dict:
        """``n_classes`` and input size for the module, from the data."""
        return {"n_classes": len(self.classes_), **self._input_size_kwargs(X)}

    # -------------------------------------------------------------- training
    def _prepare_fit(self, X, y, keep_classes: bool = False, fit_params=None):
        self._check_params()
        if fit_params and "sample_weight" in fit_params:
            raise TypeError(
                f"{type(self).__name__} does not support sample_weight: skorch would pass it to the module's "
                "forward. Weight the classes through the criterion instead, e.g. "
                "criterion__weight=torch.tensor(class_weights)")
        X = self._validate_X(X, reset=not keep_classes or not hasattr(self, "input_shape_"))
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None")
        y = column_or_1d(y, warn=True)
        check_classification_targets(y)
        if len(y) != len(X):
            raise ValueError(f"X and y have inconsistent lengths: {len(X)} and {len(y)}")
        if self.classes is None and not (keep_classes and hasattr(self, "classes_fit_")):
            self.classes_fit_ = np.unique(y)
        y_enc = self._encode_y(y)
        self.module_kwargs_inferred_ = self._infer_module_kwargs(X)
        return X, y_enc

    def fit(self, X, y, **fit_params):
        """Initialise the module and train it on ``(X, y)``.

        Parameters
        ----------
        X : array-like of shape (N, n_features), (N, H, W) or (N, C, H, W)
            Inputs; ``uint8`` is scaled to [0, 1], other numeric dtypes are
            cast to float32.
        y : array-like of shape (N,)
            Labels, all in ``classes`` when it is set.
        **fit_params :
            Passed to skorch's training loop (the module's ``forward`` and
            the ``train_split`` call).

        Returns
        -------
        self
        """
        X, y = self._prepare_fit(X, y, fit_params=fit_params)
        with _torch_seeded(_seed_from(self.random_state)):
            if not self.warm_start or not self.initialized_:
                self.initialize()
            # skorch's fit would route through our partial_fit and prepare twice
            return self._train_loop(X, y, "fit", **fit_params)

    def partial_fit(self, X, y=None, classes=None, **fit_params):
        """Continue training for ``max_epochs`` without re-initialising.

        A module that is not initialised yet is initialised first, as by
        :meth:`fit`. An int ``random_state`` seeds training as in
        :meth:`fit`, with a different seed.

        Parameters
        ----------
        X : array-like of shape (N, n_features), (N, H, W) or (N, C, H, W)
            Inputs, as in :meth:`fit`.
        y : array-like of shape (N,)
            Labels. Required, despite the default of None (which raises
            ValueError). When the estimator's ``classes`` parameter is None
            and the module is already initialised, the classes seen by the
            earlier fit are kept, so every label must be among them.
        classes : ignored
            Accepted for scikit-learn compatibility; set the estimator's
            ``classes`` parameter instead.
        **fit_params :
            Passed to skorch's training loop, as in :meth:`fit`.

        Returns
        -------
        self
        """
        X, y = self._prepare_fit(X, y, keep_classes=self.initialized_, fit_params=fit_params)
        with _torch_seeded(_seed_from(self.random_state, offset=1)):
            return self._train_loop(X, y, "partial_fit", **fit_params)

    # ------------------------------------------------------------ prediction
    def predict_proba_samples(self, X, n_samples: Optional[int] = None, *,
                              consistent: bool = False) -> np.ndarray:
        """Class probabilities from ``T`` stochastic forward passes.

        Dropout is active (unless ``mc_dropout=False``) and every other layer
        is in eval mode; the module's train/eval state is restored afterwards.
        Runs under ``torch.no_grad``. Passes are seeded from ``random_state``.

        Parameters
        ----------
        X : array-like of shape (N, n_features), (N, H, W) or (N, C, H, W)
        n_samples : int, optional
            Number of passes ``T``; defaults to the ``n_samples`` parameter.
        consistent : bool, default=False
            Draw the passes with one set of ``T`` masks for every input, as
            ``consistent_masks=True`` does, for this call only: the request
            of the predictive interface (:mod:`skdbal.predictive`) that
            BatchBALD makes. Needs a split module, as ``consistent_masks``.

        Returns
        -------
        P : ndarray of shape (T, N, n_classes), dtype float32
            ``P[t]`` is pass ``t``; each row sums to 1.
        """
        T = self._n_passes(n_samples)
        return self._sample_outputs(X, T, _softmax, consistent=consistent)

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities: the MC average, or one deterministic pass.

        With ``predict_method="mc"`` (and ``mc_dropout=True``), the mean of
        ``n_samples`` passes of :meth:`predict_proba_samples`; otherwise one
        pass with dropout off (weight-scaled). Columns follow ``classes_``.

        Parameters
        ----------
        X : array-like of shape (N, n_features), (N, H, W) or (N, C, H, W)
            Inputs, as in :meth:`fit`.

        Returns
        -------
        proba : ndarray of shape (N, n_classes), dtype float32
            Each row sums to 1.

        Raises
        ------
        ValueError
            If ``predict_method`` is not ``"mc"`` or ``"deterministic"``.
        """
        if self.predict_method not in ("mc", "deterministic"):
            raise ValueError(f"predict_method must be 'mc' or 'deterministic'; got {self.predict_method!r}")
        self.check_is_fitted()
        if self.predict_method == "mc" and self.mc_dropout:
            return self.predict_proba_samples(X).mean(axis=0)
        return self._deterministic(X)

    def predict_proba_deterministic(self, X) -> np.ndarray:
        """Class probabilities of one pass with dropout off: the deterministic network, whatever
        ``predict_method`` says (what BADGE's gradient embedding and DDU's aleatoric part read).

        Parameters
        ----------
        X : array-like of shape (N, n_features), (N, H, W) or (N, C, H, W)

        Returns
        -------
        proba : ndarray of shape (N, n_classes), dtype float32

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.datasets import load_digits
        >>> from skdbal import MCDropoutClassifier
        >>> X, y = load_digits(return_X_y=True)
        >>> net = MCDropoutClassifier(classes=np.arange(10), module__kernel_size=3, max_epochs=2,
        ...                           random_state=0).fit((X[:100] / 16).reshape(-1, 8, 8).astype("float32"), y[:100])
        >>> P = net.predict_proba_deterministic((X[:3] / 16).reshape(-1, 8, 8).astype("float32"))
        >>> P.shape, np.allclose(P.sum(axis=1), 1, atol=1e-5)
        ((3, 10), True)
        >>> np.array_equal(P, net.predict_proba_deterministic((X[:3] / 16).reshape(-1, 8, 8).astype("float32")))
        True
        """
        self.check_is_fitted()
        return self._deterministic(X)

    def predict(self, X) -> np.ndarray:
        """Most probable class label under :meth:`predict_proba`.

        Parameters
        ----------
        X : array-like of shape (N, n_features), (N, H, W) or (N, C, H, W)
            Inputs, as in :meth:`fit`.

        Returns
        -------
        y_pred : ndarray of shape (N,)
            Labels from ``classes_`` (ties go to the first class).
        """
        proba = self.predict_proba(X)  # first: before fit, NotInitializedError, not classes_'s AttributeError
        return self.classes_[proba.argmax(axis=1)]
