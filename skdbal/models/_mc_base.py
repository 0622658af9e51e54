"""The skorch base that the MC-dropout classifier and regressor share.

Private to :mod:`skdbal.models`: input checks, module building, saving (a
pickle waits for its modules' locks, ``_mc_masks.module_lock``), training under
a Ctrl-C watch and its module's lock, and the sampling loop behind ``predict_proba_samples`` and
``predict_samples``, which picks a path of the engine (``_mc_masks``) for each
batch.
"""
from __future__ import annotations

import contextlib
import copy
import inspect
import io
import math
import os
import signal
import threading
import warnings

import numpy as np
import torch
from sklearn.utils import TransformerTags
from sklearn.utils.validation import check_array, validate_data
from skorch.utils import to_numpy
from torch import nn

from .._validation import check_bool, check_positive_int, is_int_seed
from ._mc_masks import (
    _AUTO_CHOICES,
    _DROPOUT,
    _SHARED_STATE_LOCK,  # noqa: F401  (the engine's lock, also found here)
    MASK_SEEDINGS,
    _draw_masks,
    _factored_conv,
    _mask_kind,
    _masked_head_passes,
    _private_generator,
    _row_keyed_factored_passes,
    _row_keyed_linear_passes,
    _row_keyed_passes,
    _row_streams,
    _seed_from,
    _softmax,
    _torch_seeded,
    mc_dropout_mode,
    module_lock,
    resolve_mask_seeding,
    row_seeds,
    stochastic_head,
    verified_split,
)
from ._row_masks import fused_linear


def _same_layout(a: tuple, b: tuple) -> bool:
    """Whether per-sample shapes ``a`` and ``b`` hold the same input: equal,
    equal once ``(H, W)`` reads as ``(1, H, W)``, or one of them flat with
    as many values (the nets of :mod:`skdbal.models` reshape flat rows)."""
    if len(a) == 1 or len(b) == 1:
        return math.prod(a) == math.prod(b)
    chw = [(1,) + s if len(s) == 2 else s for s in (a, b)]
    return chw[0] == chw[1]


@contextlib.contextmanager
def _sigint_watch():
    """Inside, a SIGINT is recorded as well as raised (``KeyboardInterrupt``);
    yields a function telling whether one arrived. Only in the main thread,
    and only where SIGINT raises ``KeyboardInterrupt`` already."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield lambda: False
        return
    hits = []

    def handler(signum, frame):
        hits.append(signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)
    try:
        yield lambda: bool(hits)
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


class _MCDropoutNet:
    """What the MC-dropout classifier and regressor share: input checks, module
    building, saving, training under a Ctrl-C watch, and trunk-cached MC
    sampling of the raw outputs through a link (softmax, or none)."""

    # ------------------------------------------------------------------ input
    def _dataset_X(self, dataset) -> np.ndarray:
        """The inputs of a torch ``Dataset`` (skorch's, or the ``Subset`` that
        its ``ValidSplit`` makes), read with skorch's own iterator."""
        parts = []
        for Xb, _ in self.get_iterator(dataset, training=False):
            if isinstance(Xb, dict):
                raise TypeError(f"{type(self).__name__} takes array inputs; the dataset yields dicts")
            parts.append(to_numpy(Xb))
        if not parts:
            raise ValueError("X is an empty dataset")
        return np.concatenate(parts)

    def _validate_X(self, X, reset: bool = False) -> np.ndarray:
        """Check and cast X at our boundary: finite, 2-4 dims, float32, C order.

        Through :func:`sklearn.utils.validation.validate_data`, so that ``fit``
        (``reset=True``) records ``n_features_in_`` (``X.shape[1]``, as
        scikit-learn counts) and, for a DataFrame, ``feature_names_in_``, and
        prediction on flat input checks them. The per-sample shape is
        recorded as ``input_shape_``; later inputs must have the same layout
        (``(H, W)`` and ``(1, H, W)`` are one layout, and flat rows of as many
        values fit any). A torch ``Dataset`` (what skorch passes to its
        scoring callbacks) is read as its inputs.
        """
        internal = isinstance(X, torch.utils.data.Dataset)
        if internal:
            X = self._dataset_X(X)
        if isinstance(X, torch.Tensor):
            X = X.detach().cpu().numpy()
        kwargs = dict(allow_nd=True, dtype="numeric", ensure_all_finite=True, order="C")
        fitted = getattr(self, "input_shape_", None)
        ndim = len(X.shape) if hasattr(X, "shape") else np.asarray(X).ndim
        tabular = reset or (fitted is not None and len(fitted) == 1 and ndim == 2)
        if tabular and not internal:  # feature names and counts, as scikit-learn checks them
            X = validate_data(self, X, reset=reset, **kwargs)
        else:  # images, or arrays skorch made from our own inputs (checked on the way in)
            X = check_array(X, input_name="X", **kwargs)
        if X.ndim not in (2, 3, 4):
            raise ValueError(
                "X must be flat (n_samples, n_features), images "
                "(n_samples, H, W) or (n_samples, C, H, W); got an array with "
                f"{X.ndim} dimensions, shape {X.shape}"
            )
        if X.dtype.kind not in "fiub":
            raise TypeError(f"X must be numeric; got dtype {X.dtype}")
        if reset:
            self.input_shape_ = tuple(X.shape[1:])
        elif fitted is not None and not _same_layout(tuple(X.shape[1:]), fitted):
            raise ValueError(f"X has samples of shape {tuple(X.shape[1:])}, but {type(self).__name__} was fitted "
                             f"on samples of shape {fitted}")
        if X.dtype == np.uint8:
            return X.astype(np.float32) / np.float32(255.0)
        return X.astype(np.float32, copy=False)

    def _input_size_kwargs(self, X: np.ndarray) -> dict:
        """The input size for the module, from the data: ``input_shape`` for
        images (and square flat rows), ``n_features`` always."""
        inferred = {}
        if X.ndim == 4:
            shape = tuple(X.shape[1:])
        elif X.ndim == 3:
            shape = (1,) + tuple(X.shape[1:])
        else:
            side = math.isqrt(X.shape[1])
            shape = (1, side, side) if side * side == X.shape[1] else None
        if shape is not None:
            inferred["input_shape"] = shape
        inferred["n_features"] = int(np.prod(X.shape[1:]))
        return inferred

    def initialize_module(self):
        kwargs = self.get_params_for("module")
        module = self.module
        if isinstance(module, type) or (callable(module) and not isinstance(module, nn.Module)):
            try:
                accepted = inspect.signature(module).parameters
            except (TypeError, ValueError):
                accepted = {}
            for key, value in getattr(self, "module_kwargs_inferred_", {}).items():
                if key in accepted and key not in kwargs:
                    kwargs[key] = value
        self.module_ = self.initialized_instance(module, kwargs)
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # transform gives the penultimate features, as float32
        tags.transformer_tags = TransformerTags(preserves_dtype=["float32"])
        tags.input_tags.three_d_array = True  # images (N, H, W); (N, C, H, W) too
        tags.non_deterministic = self.random_state is None
        return tags

    # ------------------------------------------------------------ saving
    def __getstate__(self):
        # MC scoring changes the module's mode flags and puts row-keyed dropout hooks (closures, which
        # cannot be pickled) on it, and training changes its weights, under the module's lock; a pickle
        # taken from another thread meanwhile (a Dask worker sending its copy to a peer, joblib,
        # copy.deepcopy) waits for them to end, so it holds the network as it is between calls and never
        # fails on a hook. skorch pickles the fitted module inside its __getstate__, but a module given as
        # an instance (module=MyNet()) is the same live object and stays in the returned state, pickled
        # after the locks are released: it is copied here, under them, so the pickle holds that copy.
        modules = {id(m): m for m in (getattr(self, "module_", None), getattr(self, "module", None))
                   if isinstance(m, nn.Module)}
        with contextlib.ExitStack() as held:
            for key in sorted(modules):  # one order for every thread
                held.enter_context(module_lock(modules[key]))
            state = super().__getstate__()
            return {key: copy.deepcopy(value) if isinstance(value, nn.Module) else value
                    for key, value in state.items()}

    def load_params(self, f_params=None, *args, **kwargs):
        """Load parameters saved by :meth:`save_params`, as skorch does.

        The sizes that :meth:`fit` infers from the data (input shape, number
        of classes) travel in the saved state of :mod:`skdbal.models` modules,
        so a new estimator can load them after a bare :meth:`initialize`: the
        module is rebuilt with the saved sizes first. Sizes set explicitly as
        ``module__*`` parameters win. Other arguments are skorch's.

        Raises
        ------
        ValueError
            If the saved parameters do not fit the module, naming the
            mismatched sizes.
        """
        if f_params is not None and self.initialized_ and not kwargs.get("use_safetensors"):
            f_params = self._rebuild_for(f_params)
        try:
            return super().load_params(f_params, *args, **kwargs)
        except RuntimeError as exc:
            if "size mismatch" not in str(exc):
                raise
            raise ValueError(
                f"the saved parameters do not fit this {type(self.module_).__name__}: {exc}\n"
                "Build the module with the sizes it was saved with (module__input_shape=..., "
                "module__n_features=..., classes=...), or pickle the fitted estimator instead") from None

    def _rebuild_for(self, f_params):
        """Rebuild ``module_`` with the sizes saved in ``f_params`` where they
        differ from its own; return ``f_params``, readable again."""
        if isinstance(f_params, (str, os.PathLike)):
            with open(f_params, "rb") as f:
                data = f.read()
        else:
            data = f_params.read()
        state = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
        extra = state.get("_extra_state") if isinstance(state, dict) else None
        sizes = extra.get("sizes") if isinstance(extra, dict) else None
        own = self.module_.get_extra_state().get("sizes") if hasattr(self.module_, "_sizes") else None
        if isinstance(sizes, dict) and own is not None and sizes != own:
            given = self.get_params_for("module")
            self.module_kwargs_inferred_ = {**getattr(self, "module_kwargs_inferred_", {}),
                                            **{k: v for k, v in sizes.items() if k not in given}}
            self.initialize()
        return io.BytesIO(data)

    # -------------------------------------------------------------- training
    def _check_params(self):
        """Validate the parameters that are used only after training, so that a
        bad one fails before the network trains, not at predict."""
        self._n_passes()
        if self.predict_method not in ("mc", "deterministic"):
            raise ValueError(f"predict_method must be 'mc' or 'deterministic'; got {self.predict_method!r}")
        self._check_mask_seeding()

    def _check_mask_seeding(self):
        allowed = ("auto",) + MASK_SEEDINGS
        if not isinstance(self.mask_seeding, str) or self.mask_seeding not in allowed:
            raise ValueError(f"mask_seeding must be one of {', '.join(map(repr, allowed))}; "
                             f"got {self.mask_seeding!r}")

    def _mask_seeding(self) -> str:
        """The sampler in use: ``mask_seeding``, or for ``"auto"`` what fit
        resolved it to (``mask_seeding_``; by ``device`` for a net fitted
        before that attribute existed)."""
        if self.mask_seeding != "auto":
            return self.mask_seeding
        resolved = getattr(self, "mask_seeding_", None)   # fit's, unless fit had another (set_params since)
        return resolved if resolved in _AUTO_CHOICES else resolve_mask_seeding("auto", self.device)

    def _n_passes(self, n_samples=None) -> int:
        """The number of MC passes ``T``: ``n_samples``, or the parameter; checked."""
        T = self.n_samples if n_samples is None else n_samples
        return check_positive_int(T, "n_samples (the number of MC passes T)")

    def _train_loop(self, X, y, routing_method: str, **fit_params):
        """skorch's ``partial_fit``, but a Ctrl-C (SIGINT) stops the program.

        skorch catches ``KeyboardInterrupt`` in training: its own callbacks
        (``EarlyStopping``) raise it to end training, and a user's Ctrl-C
        ends training early too, after which the program carries on with a
        half-trained network. Inside an active-learning loop or a grid that
        would give a step (and a saved row) from a model that did not train,
        so a real SIGINT received during training is raised again once
        skorch has stopped.
        """
        self.mask_seeding_ = resolve_mask_seeding(self.mask_seeding, self.device)
        if not self.initialized_:  # as skorch's partial_fit would, first: the module is needed for its lock
            self.initialize()
        # the module's lock: a prediction on this network waits for its training, one on another does not
        with module_lock(self.module_), _sigint_watch() as interrupted:
            super(_MCDropoutNet, self).partial_fit(X, y, _routing_method=routing_method, **fit_params)
        if interrupted():
            raise KeyboardInterrupt
        return self

    # ------------------------------------------------------------ prediction
    def _batches(self, X: np.ndarray, with_start: bool = False):
        bs = self.batch_size if self.batch_size and self.batch_size > 0 else len(X)
        bs = self.get_params_for("iterator_valid").get("batch_size", bs)
        for start in range(0, len(X), bs):
            xb = torch.as_tensor(X[start:start + bs], device=self.device)
            yield (start, xb) if with_start else xb

    def _sample_outputs(self, X, T: int, link, consistent: bool = False) -> np.ndarray:
        """``T`` MC passes ``(T, N, K)`` of ``link(module(X))``, float32: the sampling
        behind :meth:`predict_proba_samples` (``link`` a softmax) and the
        regressor's ``predict_samples`` (no link). ``consistent`` asks for
        ``consistent_masks=True`` for this call."""
        consistent = check_bool(consistent, "consistent") or bool(self.consistent_masks)
        self.check_is_fitted()
        X = self._validate_X(X)
        if self.mc_dropout and T > 1 and not any(isinstance(m, _DROPOUT) for m in self.module_.modules()):
            warnings.warn(
                f"{type(self.module_).__name__} has no dropout layers, so the {T} MC passes "
                "are identical; add nn.Dropout to the module, or use mc_dropout=False",
                UserWarning, stacklevel=2)
        self._check_mask_seeding()
        seeding = self._mask_seeding()
        module = self.module_      # read once: a refit on another thread may replace it meanwhile
        by_row = seeding != "stream" and not consistent
        chunks, masks, split, factored = [], None, None, 0
        seed = _seed_from(self.random_state, offset=2)
        # torch's global RNG is seeded (and its lock taken, so that a fit elsewhere waits) only for the
        # samplers that draw from it: "stream", and dropout layers that are not ours to draw
        own = by_row or consistent
        global_rng = self.mc_dropout and (not own or any(isinstance(m, _DROPOUT) and _mask_kind(m) is None
                                                         for m in module.modules()))
        with (_torch_seeded(seed) if global_rng else contextlib.nullcontext()), \
                mc_dropout_mode(module, dropout=bool(self.mc_dropout)) as net:
            # the key of every row's generator: the first draw of a generator seeded by random_state
            gen = None if global_rng else _private_generator(seed)
            base = int(torch.randint(2**62, (1,), generator=gen).item()) if by_row and self.mc_dropout else None
            for i, (start, xb) in enumerate(self._batches(X, with_start=True)):
                if i == 0 and self.mc_dropout:
                    split = verified_split(net, xb)
                    factored = _factored_conv(split[1]) if split is not None and T > 1 else 0
                if by_row and self.mc_dropout:
                    seeds = row_seeds(X[start:start + len(xb)], base)
                    streams_for = _row_streams(seeding, xb.device)
                    h = split[0](xb) if split is not None else None
                    fused = fused_linear(split[1], h, T) if h is not None and seeding == "row_pcg64" else 0
                    rows = self._CUDA_HEAD_ROWS if h is not None and h.device.type == "cuda" else self._HEAD_ROWS
                    if factored:
                        chunks.append(_row_keyed_factored_passes(split[1], factored, h, seeds, T,
                                                                 rows, link, streams_for))
                    elif fused:
                        chunks.append(_row_keyed_linear_passes(split[1], fused, h, seeds, T, self._HEAD_ROWS, link))
                    elif split is not None:
                        chunks.append(_row_keyed_passes(split[1], split[1], h, seeds, T, rows, link,
                                                        streams_for))
                    else:  # no trunk/head split: T full passes, masks drawn per row in every layer
                        chunks.append(_row_keyed_passes(net, net, xb, seeds, T, self._HEAD_ROWS, link, streams_for))
                elif not self.mc_dropout:
                    p = link(net(xb)).cpu()
                    chunks.append(p.unsqueeze(0).expand(T, *p.shape))
                elif consistent:
                    if split is None:
                        raise TypeError("consistent masks (consistent_masks=True, or consistent=True) need a module "
                                        "with `trunk` and `head` "
                                        f"such that forward(x) == head(trunk(x)) (see skdbal.models); "
                                        f"{type(self.module_).__name__} has none")
                    h = split[0](xb)
                    if masks is None:
                        masks = _draw_masks(split[1], h, T, _seed_from(self.random_state, offset=3))
                    chunks.append(_masked_head_passes(split[1], h, masks, self._HEAD_ROWS, link))
                elif split is not None:
                    chunks.append(self._head_passes(*split, xb, T, link))
                else:  # no trunk/head split: T full passes
                    chunks.append(torch.stack([link(net(xb)).cpu() for _ in range(T)]))
        return np.ascontiguousarray(torch.cat(chunks, dim=1).numpy(), dtype=np.float32)


    @property
    def stochastic_samples(self) -> bool:
        """Whether :meth:`predict_proba_samples` draws different passes (``mc_dropout``).

        Part of the predictive interface (:mod:`skdbal.predictive`): with
        ``mc_dropout=False`` the passes are identical, so strategies score
        one pass.
        """
        return bool(self.mc_dropout)

    @property
    def row_keyed_samples(self) -> bool:
        """Whether a row's passes depend on the row and the model alone, whatever rows it is sampled with.

        True for ``mc_dropout=False``, and for an int ``random_state`` with a
        row-keyed ``mask_seeding`` (``"auto"``, ``"row_pcg64"``, ``"row_philox"``, ``"row"``) or
        ``consistent_masks=True`` (one mask per pass and unit, for every row),
        as long as every dropout layer is one whose masks we draw
        (``nn.Dropout``, ``nn.Dropout1d/2d/3d``: an ``nn.AlphaDropout`` or a
        subclass draws from torch's global generator, once per call).
        ``"stream"`` draws one stream per call, and a ``random_state`` that is
        not an int seeds every call anew. Part of the predictive interface
        (:mod:`skdbal.predictive`): a pool scored in chunks is the pool scored
        at once only then. Before the module exists, its layers are not known.
        """
        if not self.mc_dropout:
            return True
        if not is_int_seed(self.random_state):
            return False
        module = getattr(self, "module_", None)
        module = module if module is not None else (self.module if isinstance(self.module, nn.Module) else None)
        if module is not None and any(isinstance(m, _DROPOUT) and _mask_kind(m) is None for m in module.modules()):
            return False
        return self._mask_seeding() != "stream" or bool(self.consistent_masks)

    #: Rows (pass × input) sent through the head at once by trunk-cached sampling:
    #: small enough for the CPU caches, large enough for efficient matrix products.
    _HEAD_ROWS = 1024
    #: The same for the row-keyed passes of a head on a CUDA device, where a row group's masks are drawn
    #: in a few dozen kernel launches per dropout layer (Philox's rounds), whatever its size: 8× the
    #: CPU's groups spread them over more rows. A row's masks do not depend on its group, only the
    #: memory held at once does. Not yet measured on a GPU (issue 43).
    _CUDA_HEAD_ROWS = 8192

    def _head_passes(self, trunk, head, xb, T, link=_softmax):
        """T passes of the stochastic head over one deterministic trunk output.

        The trunk has no dropout, so running it once is exact: every pass
        sees the same trunk output, and the head draws independent masks for
        each of the T·b rows (see :func:`stochastic_head`).
        """
        h = trunk(xb)
        b = h.shape[0]
        per_call = max(1, min(T, self._HEAD_ROWS // max(b, 1)))
        passes = []
        for start in range(0, T, per_call):
            t = min(per_call, T - start)
            rep = h.unsqueeze(0).expand(t, *h.shape).reshape(t * b, *h.shape[1:])
            passes.append(link(stochastic_head(head, rep)).reshape(t, b, -1).cpu())
        return torch.cat(passes)

    def _deterministic(self, X, link=_softmax) -> np.ndarray:
        X = self._validate_X(X)
        with mc_dropout_mode(self.module_, dropout=False) as net:
            out = [link(net(xb)).cpu() for xb in self._batches(X)]
        return torch.cat(out).numpy()

    def fit_transform(self, X, y=None, **fit_params) -> np.ndarray:
        """:meth:`fit`, then :meth:`transform` of the same ``X``.

        Parameters
        ----------
        X : array-like of shape (N, n_features), (N, H, W) or (N, C, H, W)
        y : array-like of shape (N,)
        **fit_params :
            Passed to :meth:`fit`.

        Returns
        -------
        features : ndarray of shape (N, n_hidden), dtype float32
        """
        return self.fit(X, y, **fit_params).transform(X)

    def transform(self, X) -> np.ndarray:
        """Penultimate-layer features (dropout off), shape ``(N, n_hidden)``.

        Requires a split module (``trunk`` and ``head`` attributes, see
        :mod:`skdbal.models`).

        Parameters
        ----------
        X : array-like of shape (N, n_features), (N, H, W) or (N, C, H, W)
            Inputs, as in :meth:`fit`.

        Returns
        -------
        features : ndarray of shape (N, n_hidden), dtype float32
            The input of the last layer of ``head``, flattened per row:
            128 features for :class:`~skdbal.models.BayesianCNN`, 84 for
            :class:`~skdbal.models.LeNet5`.

        Raises
        ------
        TypeError
            If the module has no ``trunk``/``head`` split with
            ``forward(x) == head(trunk(x))``.
        """
        self.check_is_fitted()
        X = self._validate_X(X)
        split = verified_split(self.module_, torch.as_tensor(X[:8], device=self.device))
        if split is None:
            raise TypeError(
                f"transform needs a module with `trunk` and `head` attributes such that "
                f"forward(x) == head(trunk(x)) (see skdbal.models); "
                f"{type(self.module_).__name__} has none"
            )
        trunk, head = split
        with mc_dropout_mode(self.module_, dropout=False):
            out = [head[:-1](trunk(xb)).reshape(len(xb), -1).cpu() for xb in self._batches(X)]
        return torch.cat(out).numpy()
