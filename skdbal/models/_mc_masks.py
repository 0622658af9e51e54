"""The MC-dropout sampling engine: how the classifier and the regressor draw their passes.

Private to :mod:`skdbal.models`. It holds

- the mode a network is sampled in (:func:`mc_dropout_mode`, under the
  module's own lock, :func:`module_lock`) and the check of a module's
  trunk/head split (:func:`verified_split`);
- torch's global RNG, seeded under ``_SHARED_STATE_LOCK`` (:func:`_torch_seeded`):
  only a seeded fit and the samplers that draw from it take that lock;
- the masks of each ``mask_seeding`` (:data:`MASK_SEEDINGS`): per row, keyed
  by :func:`row_seeds` and drawn by the generators of ``_row_masks`` and
  ``_philox`` through
  the dropout hooks of :func:`_row_keyed_dropout`; one set for every row
  (:func:`_draw_masks`, ``consistent_masks``); or from torch's global stream
  (:func:`stochastic_head`);
- the passes over a trunk's output, with the first convolution after a
  channel dropout factored per input channel (:func:`_factored_conv`), or the
  opening dropout and linear layer fused (``_row_masks.fused_linear``).

The estimators' skorch base (``_mc_base``) chooses among these; nothing here
knows skorch.
"""
from __future__ import annotations

import contextlib
import hashlib
import math
import threading
import warnings
import weakref
from typing import Optional

import numpy as np
import torch
from sklearn.utils import check_random_state
from torch import nn

from ._nets import MLP, BayesianCNN, KirschCNN, LeNet5, split_module
from ._philox import PhiloxRowStreams
from ._row_masks import PCG64RowStreams, TorchRowStreams, fused_linear_outputs

__all__ = ["MASK_SEEDINGS", "mc_dropout_mode", "module_lock", "resolve_mask_seeding", "row_seeds",
           "stochastic_head", "verified_split"]

_DROPOUT = nn.modules.dropout._DropoutNd
#: The values of ``mask_seeding`` that name a sampler: masks per row from numpy's PCG64 (results version
#: 4), per row from torch's generators (version 3), from one stream per call (version 2), or per row
#: from the counter-based Philox-4x32-10 on the model's device (version 5). An estimator also takes
#: ``"auto"`` (:func:`resolve_mask_seeding`).
MASK_SEEDINGS = ("row_pcg64", "row", "stream", "row_philox")
#: Dropout layers whose masks we draw ourselves (exactly as torch would).
_CHANNEL_DROPOUT = (nn.Dropout1d, nn.Dropout2d, nn.Dropout3d)
#: Held while torch's global RNG is seeded and drawn from (_torch_seeded): by a seeded fit, and by
#: the samplers that draw from it (``"stream"``, dropout layers we do not draw ourselves). The RNG is
#: the process's, so such calls from several threads take turns; the row-keyed and consistent
#: samplers draw from generators of their own and never take it. Re-entrant.
_SHARED_STATE_LOCK = threading.RLock()
#: One re-entrant lock per module object (module_lock): held while its mode flags and dropout hooks
#: are changed for inference (mc_dropout_mode), while it trains, and while a net holding it is
#: pickled, so that threads using one network (joblib's threading backend, a Dask worker's threads)
#: take turns, and threads using different networks do not wait for each other.
_MODULE_LOCKS: "weakref.WeakKeyDictionary[nn.Module, threading.RLock]" = weakref.WeakKeyDictionary()
_MODULE_LOCKS_GUARD = threading.Lock()
#: forward() methods known to compute ``head(trunk(x))``.
_SPLIT_FORWARDS = frozenset({BayesianCNN.forward, KirschCNN.forward, LeNet5.forward, MLP.forward})
#: Modules whose split was checked numerically: module -> bool.
_SPLIT_CHECKED: "weakref.WeakKeyDictionary[nn.Module, bool]" = weakref.WeakKeyDictionary()


def module_lock(module: nn.Module) -> threading.RLock:
    """The re-entrant lock of ``module`` (one per module object, made on first use).

    Examples
    --------
    >>> from torch import nn
    >>> from skdbal.models._mc_masks import module_lock
    >>> a, b = nn.Linear(2, 2), nn.Linear(2, 2)
    >>> module_lock(a) is module_lock(a), module_lock(a) is module_lock(b)
    (True, False)
    """
    with _MODULE_LOCKS_GUARD:
        lock = _MODULE_LOCKS.get(module)
        if lock is None:
            lock = _MODULE_LOCKS[module] = threading.RLock()
        return lock


#: What ``mask_seeding="auto"`` resolves to, by device.
_AUTO_CHOICES = ("row_pcg64", "row_philox")


def resolve_mask_seeding(mask_seeding: str, device) -> str:
    """The sampler that ``mask_seeding`` names on ``device``: ``"auto"`` is
    ``"row_philox"`` on a CUDA device (masks drawn there) and ``"row_pcg64"``
    elsewhere (the fastest on a CPU); any other value is itself.

    Examples
    --------
    >>> from skdbal.models._mc_masks import resolve_mask_seeding
    >>> resolve_mask_seeding("auto", "cpu"), resolve_mask_seeding("auto", "cuda:0")
    ('row_pcg64', 'row_philox')
    >>> resolve_mask_seeding("row", "cuda")
    'row'
    """
    if mask_seeding != "auto":
        return mask_seeding
    return "row_philox" if torch.device(device).type == "cuda" else "row_pcg64"


def _private_generator(seed: Optional[int]) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded by ``seed`` (fresh entropy for None),
    apart from torch's global RNG: seeded alike, it draws what the global
    generator would."""
    gen = torch.Generator()
    if seed is None:
        gen.seed()
    else:
        gen.manual_seed(seed)
    return gen


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
    uses the module, so one thread at a time holds this mode (others wait on
    :func:`module_lock`); other modules are not held up.

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
    with module_lock(module):
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
def _torch_seeded(seed: Optional[int]):
    """Seed torch's global RNG inside, leaving the caller's RNG state untouched;
    one thread at a time, as the global RNG is the process's."""
    if seed is None:       # draws from the global RNG unseeded: still one at a time, so that they never land
        with _SHARED_STATE_LOCK:    # inside a seeded fit on another thread (its weights would change)
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
    ``state["streams"]`` (:mod:`skdbal.models._row_masks`), in layer order. Layers are
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
    if mask_seeding == "row_philox":
        return lambda seeds: PhiloxRowStreams(seeds, device)
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
    (:func:`skdbal.models._row_masks.fused_linear`): row ``r``'s masks of that
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
    gen = torch.Generator(device=h.device)  # unseeded: not from torch's global RNG, which a fit may be using
    gen.manual_seed(seed if seed is not None else int(torch.randint(2**62, (1,), generator=_private_generator(None))))
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
