"""Dropout masks drawn per pool row: the generators behind ``mask_seeding``.

Each input row owns a generator, seeded by a hash of the row's values (see
``skdbal.models._mc_masks.row_seeds``), so that a row's MC passes do not depend
on its position, on the other rows or on how the pool is chunked. Two kinds of
generator give the two row-keyed seedings:

- ``"row_pcg64"`` (:class:`PCG64RowStreams`, results version 4): numpy's PCG64,
  read as small unsigned integers and compared with an integer threshold. The
  same masks on every device, and several times cheaper to draw on a CPU than
  torch's uniforms.
- ``"row"`` (:class:`TorchRowStreams`, results version 3): one
  ``torch.Generator`` per row on the model's device, drawing uniforms.

The third row-keyed seeding, ``"row_philox"`` (results version 5), is
counter-based and computed on the model's device: ``_philox``.

Either way a row's generator is consumed layer by layer, in the head's order,
whatever path computes the passes; every sampling path draws through these
classes so that they agree.
"""
from __future__ import annotations

import math
from typing import Sequence, Tuple

import numpy as np
import torch
from torch import nn


def _draw_row_masks(generators: list, T: int, feat: tuple, keep: float, device) -> torch.Tensor:
    """``(len(generators), T) + feat`` inverted-dropout masks: row ``r``'s ``T``
    masks drawn as ``uniform < keep`` from ``generators[r]``, kept units
    scaled by ``1 / keep`` (results version 3)."""
    masks = torch.empty((len(generators), T) + tuple(feat), device=device)
    for r, gen in enumerate(generators):  # generators live on the input's device
        torch.rand((T,) + tuple(feat), generator=gen, device=device, out=masks[r])
    return masks.lt_(keep).mul_(1.0 / keep)


class TorchRowStreams:
    """One ``torch.Generator`` per row on ``device``, seeded by ``seeds``
    (``mask_seeding="row"``): a layer's ``T`` masks of a row are ``T ×
    units`` uniforms, pass-major, each kept when below ``keep``."""

    def __init__(self, seeds: Sequence[int], device) -> None:
        self.generators = [torch.Generator(device=device).manual_seed(int(s)) for s in seeds]

    def __len__(self) -> int:
        return len(self.generators)

    def masks(self, T: int, feat: tuple, keep: float, device, dtype=torch.float32) -> torch.Tensor:
        """``(rows, T) + feat`` masks, kept units scaled by ``1 / keep``."""
        return _draw_row_masks(self.generators, T, feat, keep, device).to(dtype)


def unit_threshold(keep: float) -> Tuple[np.dtype, int]:
    """The unsigned integers a unit's draw is read as, and the threshold below
    which the unit is kept: 8 bits when ``keep · 2⁸`` is a whole number (p = 0.5,
    0.25, 0.125...), else 16 bits when ``keep · 2¹⁶`` is, both exact; else 32 bits,
    where ``keep`` is rounded to a multiple of 2⁻³² (finer than a float32
    uniform's 2⁻²⁴).

    Examples
    --------
    >>> from skdbal.models._row_masks import unit_threshold
    >>> unit_threshold(0.75), unit_threshold(0.5)
    ((dtype('uint8'), 192), (dtype('uint8'), 128))
    >>> unit_threshold(0.9)
    (dtype('uint32'), 3865470566)
    """
    for bits in (8, 16):
        t = keep * 2**bits
        if t == int(t):
            return np.dtype(f"<u{bits // 8}"), int(t)
    return np.dtype("<u4"), min(int(round(keep * 2**32)), 2**32 - 1)


class PCG64RowStreams:
    """One numpy PCG64 bit generator per row, seeded by ``seeds``
    (``mask_seeding="row_pcg64"``).

    A layer with ``units`` mask units per pass (elements for ``nn.Dropout``,
    channels for ``nn.Dropout1d/2d/3d``) takes ``units × T`` draws from each
    row, unit-major (the ``T`` draws of unit 0 first): the little-endian
    unsigned integers of :func:`unit_threshold`'s width packed into the next
    whole 64-bit outputs of the row's generator. A unit is kept in pass ``t``
    when its draw is below the threshold, and scaled by ``1 / keep``.
    """

    def __init__(self, seeds: Sequence[int]) -> None:
        self.bitgens = [np.random.PCG64(int(s)) for s in seeds]

    def __len__(self) -> int:
        return len(self.bitgens)

    def kept(self, T: int, units: int, keep: float) -> np.ndarray:
        """``(rows, units, T)`` booleans: which units each row keeps in each pass."""
        dtype, threshold = unit_threshold(keep)
        n = units * T
        words = -(-n * dtype.itemsize // 8)
        out = np.empty((len(self.bitgens), n), dtype=bool)
        for r, bitgen in enumerate(self.bitgens):
            draws = bitgen.random_raw(words).astype("<u8", copy=False).view(dtype)[:n]
            np.less(draws, threshold, out=out[r])
        return out.reshape(len(self.bitgens), units, T)

    def masks(self, T: int, feat: tuple, keep: float, device, dtype=torch.float32) -> torch.Tensor:
        """``(rows, T) + feat`` masks, kept units scaled by ``1 / keep``."""
        kept = torch.from_numpy(self.kept(T, math.prod(feat), keep).view(np.uint8)).to(device)
        masks = kept.transpose(1, 2).to(dtype) * (1.0 / keep)  # from uint8: torch converts bool slowly
        return masks.reshape((len(self.bitgens), T) + tuple(feat))


#: Fewest mask draws per row (T × the linear layer's inputs) for which the fused
#: path pays for its per-row calls; below it the plain passes are faster.
_FUSE_MIN_DRAWS = 2**15


def fused_linear(head: nn.Sequential, h: torch.Tensor, T: int) -> int:
    """``k`` if ``head`` opens with ``nn.Dropout`` (0 < p < 1) and an
    ``nn.Flatten`` (before or after it, or none when ``h`` is flat already),
    ``head[k]`` is the ``nn.Linear`` that follows, ``h`` is on the CPU and a
    row takes at least ``_FUSE_MIN_DRAWS`` draws for it; else 0.

    Then a pass's product ``W (m ⊙ x) / keep`` needs only the units where
    the row's input ``x`` is non-zero: row by row, the ``T`` masks of those
    units times the rows of ``W`` that they meet, scaled by ``x / keep``. The
    input of such a head is the trunk's output, often after a ReLU, so many
    units are zero, and the masked input is never built. The result is the
    same up to floating-point summation order.
    """
    if h.device.type != "cpu":
        return 0

    def is_(i, kind):
        return i < len(head) and type(head[i]) is kind

    def flattens(i):
        return is_(i, nn.Flatten) and head[i].start_dim == 1 and head[i].end_dim in (-1, h.dim() - 1)

    if is_(0, nn.Dropout) and flattens(1):
        drop, k = 0, 2
    elif flattens(0) and is_(1, nn.Dropout):
        drop, k = 1, 2
    elif is_(0, nn.Dropout) and h.dim() == 2:
        drop, k = 0, 1
    else:
        return 0
    if not (0.0 < head[drop].p < 1.0 and is_(k, nn.Linear)) or T * head[k].in_features < _FUSE_MIN_DRAWS:
        return 0
    return k


@torch.no_grad()
def fused_linear_outputs(head: nn.Sequential, k: int, h: torch.Tensor, streams: PCG64RowStreams,
                         T: int) -> torch.Tensor:
    """``(rows, T, out_features)``: ``head[:k + 1]`` (see :func:`fused_linear`) on
    the rows ``h``, with the dropout's masks drawn from ``streams``; no gradients
    (sampling is inference)."""
    drop = head[0] if type(head[0]) is nn.Dropout else head[1]
    linear = head[k]
    keep = 1.0 - drop.p
    x = h.reshape(h.shape[0], -1)
    kept = streams.kept(T, x.shape[1], keep)
    weight_t = linear.weight.t().contiguous()  # rows of W^T: one gather per row below
    z = torch.empty((x.shape[0], T, linear.out_features), dtype=x.dtype)
    for r in range(x.shape[0]):
        nz = torch.nonzero(x[r]).squeeze(1)
        rows = weight_t.index_select(0, nz).mul_(x[r].index_select(0, nz).mul_(1.0 / keep).unsqueeze(1))
        m = torch.from_numpy(kept[r][nz.numpy()].view(np.uint8)).to(x.dtype)  # (nnz, T); uint8 converts fastest
        if linear.bias is None:
            torch.mm(m.t(), rows, out=z[r])
        else:
            torch.addmm(linear.bias, m.t(), rows, out=z[r])
    return z
