"""The MC-dropout skorch classifier."""
from __future__ import annotations

import contextlib
import copy
import hashlib
import inspect
import io
import math
import os
import signal
import threading
import warnings
import weakref
from typing import Optional

import numpy as np
import torch
from skorch import NeuralNetClassifier
from sklearn.utils import TransformerTags, check_random_state
from skorch.utils import to_numpy
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array, column_or_1d, validate_data
from torch import nn

from .._validation import check_bool, check_positive_int, is_int_seed, label_columns
from ._row_masks import PCG64RowStreams, TorchRowStreams, fused_linear, fused_linear_outputs
from ._nets import MLP, BayesianCNN, KirschCNN, LeNet5, split_module

__all__ = ["MCDropoutClassifier", "mc_dropout_mode", "stochastic_head"]

_DROPOUT = nn.modules.dropout._DropoutNd
#: The values of ``mask_seeding``: masks per row from numpy's PCG64 (results version 4), per row from
#: torch's generators (version 3), or from one stream per call (version 2).
MASK_SEEDINGS = ("row_pcg64", "row", "stream")
#: Dropout layers whose masks we draw ourselves (exactly as torch would).
_CHANNEL_DROPOUT = (nn.Dropout1d, nn.Dropout2d, nn.Dropout3d)
#: Held while a module's mode flags and dropout hooks are changed for inference (mc_dropout_mode),
#: and while torch's global RNG is seeded (_torch_seeded). Both are shared by every thread of the
#: process, so calls from several threads (joblib's threading backend, a Dask worker's threads) on one
#: network take turns instead of changing them under each other; re-entrant, as the two nest.
_SHARED_STATE_LOCK = threading.RLock()
#: forward() methods known to compute ``head(trunk(x))``.
_SPLIT_FORWARDS = frozenset({BayesianCNN.forward, KirschCNN.forward, LeNet5.forward, MLP.forward})
#: Modules whose split was checked numerically: module -> bool.
_SPLIT_CHECKED: "weakref.WeakKeyDictionary[nn.Module, bool]" = weakref.WeakKeyDictionary()


def _mask_kind(m: nn.Module) -> Optional[str]:
    """``"element"``/``"channel"`` for dropout layers we sample ourselves, else None.

    Only the exact torch classes qualify: a subclass may change what
    ``forward`` does, so it is run as it is (in train mode).
    """
    if type(m) is nn.Dropout:
        return "element"
    if type(m) in _CHANNEL_DROPOUT:
        return "channel"
    return None


def _same_layout(a: tuple, b: tuple) -> bool:
    """Whether per-sample shapes ``a`` and ``b`` hold the same input: equal,
    equal once ``(H, W)`` reads as ``(1, H, W)``, or one of them flat with
    as many values (the nets of :mod:`skdbal.models` reshape flat rows)."""
    if len(a) == 1 or len(b) == 1:
        return math.prod(a) == math.prod(b)
    chw = [(1,) + s if len(s) == 2 else s for s in (a, b)]
    return chw[0] == chw[1]


def verified_split(module: nn.Module, x: Optional[torch.Tensor] = None):
    """``(trunk, head)`` if ``module(x) == head(trunk(x))``, else ``None``.

    Our nets are trusted by their ``forward``; any other module with a
    ``trunk`` and a ``head`` is checked once, on ``x`` with dropout off, and
    the answer is remembered for that module object. A module whose
    ``forward`` does something else is sampled with full passes.
    """
    split = split_module(module)
    if split is None or type(module).forward in _SPLIT_FORWARDS:
        return split
    ok = _SPLIT_CHECKED.get(module)
    if ok is None:
        if x is None:
            return None
        with mc_dropout_mode(module, dropout=False):
            xb = x[:8]
            ok = bool(torch.allclose(module(xb), split[1](split[0](xb)), rtol=1e-4, atol=1e-5))
        _SPLIT_CHECKED[module] = ok
        if not ok:
            warnings.warn(
                f"{type(module).__name__}.forward(x) differs from head(trunk(x)), so its "
                "trunk/head split is not used: MC sampling runs full forward passes",
                UserWarning, stacklevel=3)
    return split if ok else None


@contextlib.contextmanager
def mc_dropout_mode(module: nn.Module, dropout: bool = True):
    """Context manager: eval mode everywhere, dropout layers in train mode.

    BatchNorm and every other layer stay in eval mode, so running statistics
    are neither used from the batch nor updated. Each submodule's previous
    ``training`` flag is restored on exit, even when an exception is raised.
    Autograd is disabled inside. The flags are shared by every thread that
    uses the module, so one thread at a time holds this mode (others wait).

    Parameters
    ----------
    module : torch.nn.Module
    dropout : bool, default=True
        Put the dropout layers in train mode; with False every layer is in
        eval mode (one deterministic pass).

    Examples
    --------
    >>> import torch
    >>> from torch import nn
    >>> from skdbal.models import mc_dropout_mode
    >>> net = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Dropout(0.5))
    >>> with mc_dropout_mode(net):
    ...     print([m.training for m in net], torch.is_grad_enabled())
    [False, False, True] False
    >>> with mc_dropout_mode(net, dropout=False):
    ...     print([m.training for m in net])
    [False, False, False]
    >>> [m.training for m in net]                   # restored on exit
    [True, True, True]
    """
    with _SHARED_STATE_LOCK:
        saved = [(m, m.training) for m in module.modules()]
        try:
            module.eval()
            if dropout:
                for m in module.modules():
                    if isinstance(m, _DROPOUT):
                        m.train()
            with torch.no_grad():
                yield module
        finally:
            for m, flag in saved:
                m.training = flag


def _seed_from(random_state, offset: int = 0) -> Optional[int]:
    """A torch seed from an int / RandomState / None (None: don't seed)."""
    if random_state is None:
        return None
    if isinstance(random_state, (int, np.integer)):
        return (int(random_state) + offset) % (2**63 - 1)
    return int(check_random_state(random_state).randint(2**31 - 1))


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


@contextlib.contextmanager
def _torch_seeded(seed: Optional[int]):
    """Seed torch's global RNG inside, leaving the caller's RNG state untouched;
    one thread at a time, as the global RNG is the process's."""
    if seed is None:
        yield
        return
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with _SHARED_STATE_LOCK, torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield


def stochastic_head(head: nn.Sequential, x: torch.Tensor) -> torch.Tensor:
    """Run ``head`` with fresh dropout masks drawn as ``uniform < 1 − p``.

    The same distribution as ``nn.Dropout`` in train mode (inverted dropout:
    kept units are scaled by ``1/(1 − p)``), but about 2–3× cheaper to draw on a
    CPU than torch's Bernoulli sampling, which dominates MC scoring of a
    cached trunk. ``nn.Dropout1d/2d/3d`` drop whole channels. Any other
    dropout (alpha dropout, subclasses) and every other layer run as they
    are, in the caller's mode.

    Parameters
    ----------
    head : torch.nn.Sequential
        The stochastic part of a split network.
    x : torch.Tensor
        Its input (the trunk's output).

    Returns
    -------
    torch.Tensor

    Examples
    --------
    >>> import torch
    >>> from torch import nn
    >>> from skdbal.models import stochastic_head
    >>> out = stochastic_head(nn.Sequential(nn.Dropout(0.5)), torch.ones(2, 1000))
    >>> sorted(out.unique().tolist())               # dropped, or kept and scaled by 1/(1 - p)
    [0.0, 2.0]
    >>> out = stochastic_head(nn.Sequential(nn.Dropout1d(0.5)), torch.ones(1, 1000, 3))
    >>> bool((out.amin(-1) == out.amax(-1)).all())   # whole channels kept or dropped
    True
    >>> stochastic_head(nn.Sequential(nn.Dropout(1.0)), torch.ones(1, 3)).tolist()   # p = 1 drops all
    [[0.0, 0.0, 0.0]]
    """
    for m in head:
        kind = _mask_kind(m)
        if kind is None:
            x = m(x)
            continue
        keep = 1.0 - m.p
        if keep <= 0.0:
            x = torch.zeros_like(x)
        elif keep < 1.0:
            shape = x.shape if kind == "element" else x.shape[:2] + (1,) * (x.dim() - 2)
            kept = torch.rand(shape, device=x.device) < keep
            x = x * kept.to(x.dtype) * (1.0 / keep)
    return x


def row_seeds(X: np.ndarray, seed: int) -> list:
    """One 63-bit seed per row of ``X``: a keyed hash (BLAKE2b) of the row's
    bytes and ``seed``. A row's seed depends on its values only, not on its
    position, its neighbours or the batch it is in."""
    key = (int(seed) % 2**64).to_bytes(8, "little")
    X = np.ascontiguousarray(X)
    return [int.from_bytes(hashlib.blake2b(row.tobytes(), digest_size=8, key=key).digest(), "little") >> 1
            for row in X]


@contextlib.contextmanager
def _row_keyed_dropout(module: nn.Module, state: dict):
    """Inside, every dropout layer of ``module`` that :func:`_mask_kind` knows
    multiplies its input by masks drawn row by row: the input holds
    ``len(state["streams"])`` rows, each repeated ``state["T"]`` times
    (row-major), and row ``r``'s ``T`` masks come from the row's generator in
    ``state["streams"]`` (:mod:`skdbal._row_masks`), in layer order. Layers are
    left in eval mode for this (any other dropout stays in train mode, drawing
    from torch's global RNG)."""

    def hook(m, inputs, output):
        x = inputs[0]
        keep = 1.0 - m.p
        if keep >= 1.0:
            return x
        if keep <= 0.0:
            return torch.zeros_like(x)
        streams, T = state["streams"], state["T"]
        feat = tuple(x.shape[1:])
        if _mask_kind(m) == "channel":
            feat = feat[:1] + (1,) * (len(feat) - 1)
        masks = streams.masks(T, feat, keep, x.device).reshape((len(streams) * T,) + feat)
        return x * masks.to(dtype=x.dtype)

    layers = [m for m in module.modules() if _mask_kind(m) is not None]
    handles = [m.register_forward_hook(hook) for m in layers]
    saved = [(m, m.training) for m in layers]
    try:
        for m in layers:
            m.eval()
        yield
    finally:
        for h in handles:
            h.remove()
        for m, flag in saved:
            m.training = flag


def _softmax(z: torch.Tensor) -> torch.Tensor:
    return torch.softmax(z, dim=-1)


def _identity(z: torch.Tensor) -> torch.Tensor:
    return z


#: Layers that commute with scaling a channel by a number >= 0 (a dropped or a kept and rescaled channel).
_CHANNEL_HOMOGENEOUS = (nn.MaxPool2d, nn.AvgPool2d, nn.ReLU, nn.Identity)
#: Largest per-input-channel contributions (bytes) held at once by the factored first convolution.
_FACTORED_BYTES = 2**28


def _factored_conv(head: nn.Sequential) -> int:
    """``k`` if ``head`` opens with channel dropout (``nn.Dropout2d``, 0 < p < 1),
    then only layers that commute with scaling a channel by a number >= 0,
    then ``head[k]``, a plain ``nn.Conv2d`` with a kernel larger than 1×1;
    else 0.

    Then ``conv(u ⊙ m) = Σ_c m_c · conv_c(u_c) + bias`` for the channel mask
    ``m`` of a pass, where ``u`` is the (deterministic) output of the layers
    between the dropout and the convolution: the convolution of each input
    channel is computed once per row, and each of the ``T`` passes only sums
    them, which costs ``kernel area`` times less than convolving per pass.
    The result is the same up to floating-point summation order.
    """
    if not len(head) or type(head[0]) is not nn.Dropout2d or not 0.0 < head[0].p < 1.0:
        return 0
    for k in range(1, len(head)):
        m = head[k]
        if type(m) is nn.Conv2d:
            plain = m.groups == 1 and m.padding_mode == "zeros" and math.prod(m.kernel_size) > 1
            return k if plain else 0
        if type(m) not in _CHANNEL_HOMOGENEOUS:
            return 0
    return 0


def _channel_contributions(head: nn.Sequential, k: int, h: torch.Tensor) -> torch.Tensor:
    """``(b, C, O, H', W')``: the convolution ``head[k]`` (bias left out) of each
    input channel alone, on the deterministic layers ``head[1:k]`` of ``h``
    (see :func:`_factored_conv`); one grouped convolution."""
    conv = head[k]
    inplace = any(getattr(m, "inplace", False) for m in head[1:k])
    u = head[1:k](h.clone() if inplace else h)  # an in-place ReLU must not change the trunk's output
    C, O = conv.in_channels, conv.out_channels
    w = conv.weight.transpose(0, 1).reshape(C * O, 1, *conv.weight.shape[2:])
    U = torch.nn.functional.conv2d(u, w, None, conv.stride, conv.padding, conv.dilation, groups=C)
    return U.reshape(u.shape[0], C, O, *U.shape[2:])


def _contribution_bytes(head: nn.Sequential, k: int, h: torch.Tensor) -> int:
    """Bytes of one row's :func:`_channel_contributions`, from one row's output size."""
    conv = head[k]
    area = math.prod(conv(head[1:k](h[:1].clone())).shape[2:])
    return conv.in_channels * conv.out_channels * max(1, area) * h.element_size()


def _sum_channels(masks: torch.Tensor, U: torch.Tensor, conv: nn.Conv2d, spec: str) -> torch.Tensor:
    """``Σ_c masks[..., c] · U[:, c] + bias``, shaped as ``conv``'s output;
    ``spec`` the einsum of the mask and contribution axes."""
    z = torch.einsum(spec, masks.to(U.dtype), U.reshape(U.shape[0], U.shape[1], -1))
    z = z.reshape(*z.shape[:2], *U.shape[2:])
    return z if conv.bias is None else z + conv.bias.view(-1, 1, 1)


def _row_streams(mask_seeding: str, device):
    """The per-row generators of a row-keyed ``mask_seeding``: ``seeds -> streams``."""
    if mask_seeding == "row_pcg64":
        return PCG64RowStreams
    return lambda seeds: TorchRowStreams(seeds, device)


def _row_keyed_factored_passes(head: nn.Sequential, k: int, h: torch.Tensor, seeds: list, T: int,
                               rows_per_call: int, link=_softmax, streams_for=None) -> torch.Tensor:
    """:func:`_row_keyed_passes` of ``head`` on trunk outputs ``h``, with its
    first convolution factored (:func:`_factored_conv`): row ``r``'s channel
    masks are drawn first from its generator, exactly as the dropout hook
    would draw them, and the layers after the convolution draw theirs next."""
    streams_for = streams_for or _row_streams("row", h.device)
    b, conv, rest = h.shape[0], head[k], head[k + 1:]
    keep = 1.0 - head[0].p
    group = max(1, min(rows_per_call // T, _FACTORED_BYTES // _contribution_bytes(head, k, h)))
    state = {"T": T}
    out = []
    with _row_keyed_dropout(rest, state):
        for r0 in range(0, b, group):
            r1 = min(b, r0 + group)
            streams = streams_for(seeds[r0:r1])
            masks = streams.masks(T, (conv.in_channels, 1, 1), keep, h.device).reshape(r1 - r0, T, -1)
            U = _channel_contributions(head, k, h[r0:r1])
            z = _sum_channels(masks, U, conv, "rtc,rcx->rtx")  # (R, T, O, H', W')
            state["streams"] = streams
            p = link(rest(z.reshape((r1 - r0) * T, *z.shape[2:]))).reshape(r1 - r0, T, -1)
            out.append(p.transpose(0, 1).cpu())
    return torch.cat(out, dim=1)


def _row_keyed_linear_passes(head: nn.Sequential, k: int, h: torch.Tensor, seeds: list, T: int,
                             rows_per_call: int, link=_softmax) -> torch.Tensor:
    """:func:`_row_keyed_passes` of ``head`` on trunk outputs ``h`` with
    ``mask_seeding="row_pcg64"``, its opening dropout and linear layer fused
    (:func:`skdbal._row_masks.fused_linear`): row ``r``'s masks of that
    dropout are drawn first from its generator, exactly as the dropout hook
    would draw them, and the layers after the linear one draw theirs next."""
    b, rest = h.shape[0], head[k + 1:]
    group = max(1, rows_per_call // T)
    state = {"T": T}
    out = []
    with _row_keyed_dropout(rest, state):
        for r0 in range(0, b, group):
            r1 = min(b, r0 + group)
            streams = PCG64RowStreams(seeds[r0:r1])
            z = fused_linear_outputs(head, k, h[r0:r1], streams, T)  # (R, T, out_features)
            state["streams"] = streams
            p = link(rest(z.reshape((r1 - r0) * T, -1))).reshape(r1 - r0, T, -1)
            out.append(p.transpose(0, 1).cpu())
    return torch.cat(out, dim=1)


def _row_keyed_passes(fn, module: nn.Module, x: torch.Tensor, seeds: list, T: int, rows_per_call: int,
                      link=_softmax, streams_for=None):
    """Outputs ``(T, b, K)`` of ``link(fn(x))`` with ``module``'s dropout masks
    drawn per row of ``x`` from generators seeded by ``seeds`` (see
    :func:`_row_keyed_dropout`; ``streams_for(seeds)`` makes them, torch's
    by default): row ``i``'s passes depend on ``seeds[i]`` and on its own
    values only."""
    streams_for = streams_for or _row_streams("row", x.device)
    b = x.shape[0]
    group = max(1, rows_per_call // T)
    state = {"T": T}
    out = []
    with _row_keyed_dropout(module, state):
        for r0 in range(0, b, group):
            r1 = min(b, r0 + group)
            state["streams"] = streams_for(seeds[r0:r1])
            rep = x[r0:r1].unsqueeze(1).expand(r1 - r0, T, *x.shape[1:]).reshape((r1 - r0) * T, *x.shape[1:])
            p = link(fn(rep)).reshape(r1 - r0, T, -1)
            out.append(p.transpose(0, 1).cpu())
    return torch.cat(out, dim=1)


def _draw_masks(head: nn.Sequential, h: torch.Tensor, T: int, seed: Optional[int]) -> list:
    """T fixed, already scaled dropout masks per dropout layer of ``head``.

    Shapes follow each layer's input (without the batch axis): element-wise
    for ``nn.Dropout``, one value per channel for ``nn.Dropout1d/2d/3d``.
    """
    n_top = sum(isinstance(m, _DROPOUT) for m in head)
    if sum(isinstance(m, _DROPOUT) for m in head.modules()) != n_top:
        # a dropout inside a block of the head would draw its own mask per row and pass
        raise TypeError("consistent masks need every dropout layer of the head at its top level (head = "
                        "nn.Sequential(..., nn.Dropout(p), ...)); this head nests one inside a block, whose "
                        "masks would be drawn per row")
    gen = torch.Generator(device=h.device)
    gen.manual_seed(seed if seed is not None else int(torch.randint(2**62, (1,)).item()))
    masks = []
    x = h[:1]
    for m in head:
        if isinstance(m, _DROPOUT):
            kind = _mask_kind(m)
            if kind is None:
                raise TypeError("consistent_masks supports nn.Dropout and nn.Dropout1d/2d/3d; "
                                f"the head has {type(m).__name__}")
            feat = tuple(x.shape[1:])
            if kind == "channel":  # one draw per channel
                feat = feat[:1] + (1,) * (len(feat) - 1)
            keep = 1.0 - m.p
            mask = torch.bernoulli(torch.full((T,) + feat, keep, device=h.device), generator=gen)
            masks.append(mask / keep if keep > 0 else mask)
        else:
            x = m(x)
    return masks


def _masked_head_passes(head: nn.Sequential, h: torch.Tensor, masks: list, rows_per_call: int,
                        link=_softmax) -> torch.Tensor:
    """Outputs ``(T, b, K)`` of ``link(head(h))`` with fixed dropout masks
    (the first convolution factored when :func:`_factored_conv` allows)."""
    T, b = masks[0].shape[0] if masks else 1, h.shape[0]
    out = []
    per_call = max(1, rows_per_call // max(b, 1))
    f = _factored_conv(head) if masks else 0
    if f and b * _contribution_bytes(head, f, h) > _FACTORED_BYTES:
        f = 0  # too many rows at once to hold their contributions: plain passes
    if f:
        U = _channel_contributions(head, f, h)
    for t0 in range(0, T, per_call):
        t1 = min(T, t0 + per_call)
        if f:  # the first channel dropout and convolution as a sum of per-channel convolutions
            x = _sum_channels(masks[0][t0:t1].reshape(t1 - t0, -1), U, head[f], "tc,bcx->tbx")
            layers, k = head[f + 1:], 1
        else:
            x = h.unsqueeze(0).expand(t1 - t0, *h.shape)
            layers, k = head, 0
        for m in layers:
            if isinstance(m, _DROPOUT):
                x = x * masks[k][t0:t1].unsqueeze(1)
                k += 1
            else:
                y = m(x.reshape((t1 - t0) * b, *x.shape[2:]))
                x = y.reshape(t1 - t0, b, *y.shape[1:])
        out.append(link(x).cpu())
    return torch.cat(out)


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
        # cannot be pickled) on it, under _SHARED_STATE_LOCK; a pickle taken from another thread meanwhile
        # (a Dask worker sending its copy to a peer, joblib, copy.deepcopy) waits for the scoring to end,
        # so it holds the network as it is between calls and never fails on a hook. skorch pickles the
        # fitted module inside its __getstate__, but a module given as an instance (module=MyNet()) is the
        # same live object and stays in the returned state, pickled after the lock is released: it is
        # copied here, under the lock, so the pickle holds that copy.
        with _SHARED_STATE_LOCK:
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
        if not isinstance(self.mask_seeding, str) or self.mask_seeding not in MASK_SEEDINGS:
            raise ValueError(f"mask_seeding must be one of {', '.join(map(repr, MASK_SEEDINGS))}; "
                             f"got {self.mask_seeding!r}")

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
        with _sigint_watch() as interrupted:
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
        by_row = self.mask_seeding != "stream" and not consistent
        chunks, masks, split, factored = [], None, None, 0
        with _torch_seeded(_seed_from(self.random_state, offset=2)), \
                mc_dropout_mode(self.module_, dropout=bool(self.mc_dropout)) as net:
            # the key of every row's generator: from random_state (torch is seeded above by an int)
            base = int(torch.randint(2**62, (1,)).item()) if by_row and self.mc_dropout else None
            for i, (start, xb) in enumerate(self._batches(X, with_start=True)):
                if i == 0 and self.mc_dropout:
                    split = verified_split(self.module_, xb)
                    factored = _factored_conv(split[1]) if split is not None and T > 1 else 0
                if by_row and self.mc_dropout:
                    seeds = row_seeds(X[start:start + len(xb)], base)
                    streams_for = _row_streams(self.mask_seeding, xb.device)
                    h = split[0](xb) if split is not None else None
                    fused = fused_linear(split[1], h, T) if h is not None and self.mask_seeding == "row_pcg64" else 0
                    if factored:
                        chunks.append(_row_keyed_factored_passes(split[1], factored, h, seeds, T,
                                                                 self._HEAD_ROWS, link, streams_for))
                    elif fused:
                        chunks.append(_row_keyed_linear_passes(split[1], fused, h, seeds, T, self._HEAD_ROWS, link))
                    elif split is not None:
                        chunks.append(_row_keyed_passes(split[1], split[1], h, seeds, T, self._HEAD_ROWS, link,
                                                        streams_for))
                    else:  # no trunk/head split: T full passes, masks drawn per row in every layer
                        chunks.append(_row_keyed_passes(net, net, xb, seeds, T, self._HEAD_ROWS, link, streams_for))
                elif not self.mc_dropout:
                    p = link(net(xb)).cpu()
                    chunks.append(p.unsqueeze(0).expand(T, *p.shape))
                elif consistent:
                    if split is None:
                        raise TypeError("consistent masks (consistent_masks=True, or consistent=True) need a module with `trunk` and `head` "
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
        row-keyed ``mask_seeding`` (``"row_pcg64"``, ``"row"``) or
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
        return self.mask_seeding != "stream" or bool(self.consistent_masks)

    #: Rows (pass × input) sent through the head at once by trunk-cached sampling:
    #: small enough for the CPU caches, large enough for efficient matrix products.
    _HEAD_ROWS = 1024

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
    mask_seeding : {"row_pcg64", "row", "stream"}, default="row_pcg64"
        How :meth:`predict_proba_samples` draws its dropout masks.
        ``"row_pcg64"`` and ``"row"``: each input row has its own generator,
        keyed by ``random_state`` and the row's values, so a row's passes do
        not depend on its position, on the other rows or on the batch size
        (scikit-learn's sample-order and subset invariance). ``"row_pcg64"``
        draws from numpy's PCG64 on the CPU, the same masks on every device
        and the fastest on a CPU (results version 4; a head opening with
        dropout and a linear layer is then computed only over the non-zero
        inputs of each row). ``"row"`` draws from a ``torch.Generator`` on the
        model's device, as results version 3 did (the faster on a GPU, where
        the CPU's draws bound the throughput: 4.1× ``"row_pcg64"``'s rate at
        T=100 on an H100, docs/performance.md). ``"stream"``: one random
        stream for the whole call, as skdbal drew masks up to results version
        2 (9× ``"row_pcg64"``'s rate on that GPU, but a row's masks then
        depend on the rows scored with it). The committed grids of ``docs/results`` say which they use.
        ``consistent_masks=True`` shares its masks between rows either way.
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
        mask_seeding: str = "row_pcg64",
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
