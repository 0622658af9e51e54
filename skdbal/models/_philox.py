"""Counter-based dropout masks drawn on the model's device: ``mask_seeding="row_philox"``.

Each mask unit's draw is a pure function of (row key, pass, layer, unit),
computed with the Philox-4x32-10 block cipher of Salmon et al. (2011,
"Parallel random numbers: as easy as 1, 2, 3", the Random123 library) in
int64 tensor arithmetic, so that the CPU and CUDA give the same bits and a
row's masks do not depend on the rows, the chunks or the batches it is drawn
with. Nothing is drawn on the host and nothing is copied but the row keys
(one int64 per row).

The specification, for a row with 63-bit key ``s`` (``row_seeds``: a keyed
hash of the row's bytes and the sampling seed), in its pass ``t`` (0-based),
at its ``l``-th mask-drawing dropout layer (0-based, in forward order; a
layer with ``p = 0`` or ``p = 1`` draws nothing and takes no index), with
``units`` mask units per pass (elements for ``nn.Dropout``, channels for
``nn.Dropout1d/2d/3d``, in C order) and ``keep = 1 − p``:

1. :func:`~skdbal.models._row_masks.unit_threshold` gives the draw width
   ``w`` (8, 16 or 32 bits) and the threshold ``θ`` (``keep · 2ʷ``, exact for
   8 and 16 bits; ``keep`` rounded to a multiple of 2⁻³² for 32 bits).
2. A block holds ``128 / w`` units. Unit ``u`` is in block ``b = u // (128 / w)``,
   word ``j = (u mod (128 / w)) // (32 / w)``, lane ``i = u mod (32 / w)``.
3. ``(y₀, y₁, y₂, y₃) = Philox4x32-10(counter=(b, t, l, 0), key=(s mod 2³², s // 2³²))``.
4. The unit's draw is ``d = (y_j >> (w · i)) & (2ʷ − 1)``; the unit is kept
   iff ``d < θ`` (that is, iff ``d / 2ʷ < 1 − p``), and the mask is
   ``1 / keep`` where kept, 0 where dropped (inverted dropout).

Philox's 32 × 32 → 64-bit products are taken as ``x · (M − 2³²)``, which
fits in a signed int64, with ``lo = product & (2³² − 1)`` and ``hi = (product
>> 32) + x`` (an arithmetic shift): exact on every device, without unsigned
arithmetic or overflow.
"""
from __future__ import annotations

import math
import sys
from typing import Sequence, Tuple

import torch

from ._row_masks import unit_threshold

__all__ = ["PhiloxRowStreams", "philox4x32", "philox_kept"]

_MASK32 = 0xFFFFFFFF
#: Philox-4x32's multipliers and Weyl key increments (Random123's PHILOX_M4x32_0/1, PHILOX_W32_0/1).
_M0, _M1 = 0xD2511F53, 0xCD9E8D57
_W0, _W1 = 0x9E3779B9, 0xBB67AE85
_ROUNDS = 10


def _mulhilo(x: torch.Tensor, m: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(hi, lo)`` 32-bit halves of ``m · x`` for int64 tensors ``x`` in ``[0, 2³²)``."""
    p = x * (m - 2**32)  # |p| < 2⁶², no overflow
    return (p >> 32).add_(x), p.bitwise_and_(_MASK32)


def _xor3(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """``a ^ b ^ c``, in ``a``'s memory (a fresh tensor) when it has the result's shape."""
    if a.shape == torch.broadcast_shapes(a.shape, b.shape, c.shape):
        return a.bitwise_xor_(b).bitwise_xor_(c)
    return a ^ b ^ c


def philox4x32(counter: Sequence, key: Sequence, rounds: int = _ROUNDS) -> Tuple[torch.Tensor, ...]:
    """Philox-4x32-``rounds`` of int64 tensors (or ints) holding 32-bit words.

    Broadcasts its four counter words and two key words against each other;
    every value must lie in ``[0, 2³²)``.

    Parameters
    ----------
    counter : sequence of 4 int64 tensors or ints
    key : sequence of 2 int64 tensors or ints
    rounds : int, default=10

    Returns
    -------
    tuple of 4 int64 tensors
        The output words, each in ``[0, 2³²)``.

    Examples
    --------
    Random123's known-answer vectors for Philox-4x32-10:

    >>> import torch
    >>> from skdbal.models._philox import philox4x32
    >>> z = torch.zeros((), dtype=torch.int64)
    >>> [f"{int(y):08x}" for y in philox4x32((z, z, z, z), (z, z))]
    ['6627e8d5', 'e169c58d', 'bc57ac4c', '9b00dbd8']
    >>> f = torch.full((), 0xFFFFFFFF, dtype=torch.int64)
    >>> [f"{int(y):08x}" for y in philox4x32((f, f, f, f), (f, f))]
    ['408f276d', '41c83b0e', 'a20bc7c6', '6d5451fd']
    """
    x0, x1, x2, x3 = (torch.as_tensor(c, dtype=torch.int64) for c in counter)
    k0, k1 = (torch.as_tensor(k, dtype=torch.int64) for k in key)
    for r in range(rounds):
        if r:
            k0, k1 = (k0 + _W0) & _MASK32, (k1 + _W1) & _MASK32
        hi0, lo0 = _mulhilo(x0, _M0)
        hi1, lo1 = _mulhilo(x2, _M1)
        x0, x1, x2, x3 = _xor3(hi1, x1, k0), lo1, _xor3(hi0, x3, k1), lo0
    return x0, x1, x2, x3


def philox_kept(keys: torch.Tensor, T: int, units: int, layer: int, keep: float) -> torch.Tensor:
    """``(rows, T, units)`` booleans: which units each row keeps in each pass
    of its ``layer``-th mask-drawing layer (see the module's specification).

    Computed on ``keys``' device, vectorised over rows, passes and blocks.

    Parameters
    ----------
    keys : torch.Tensor of shape (rows,), int64
        The rows' 63-bit keys.
    T : int
        Passes.
    units : int
        Mask units per pass.
    layer : int
        The layer's index among the mask-drawing layers.
    keep : float
        ``1 − p``, in (0, 1).

    Returns
    -------
    torch.Tensor of shape (rows, T, units), bool

    Examples
    --------
    >>> import torch
    >>> from skdbal.models._philox import philox_kept
    >>> kept = philox_kept(torch.tensor([1, 2**62]), T=100, units=1000, layer=0, keep=0.75)
    >>> kept.shape, round(kept.float().mean().item(), 2)
    (torch.Size([2, 100, 1000]), 0.75)
    """
    dtype, threshold = unit_threshold(keep)
    w = dtype.itemsize * 8
    per_word = 32 // w
    blocks = -(-units // (4 * per_word))
    device = keys.device
    k = keys.to(torch.int64).view(-1, 1, 1)
    c0 = torch.arange(blocks, dtype=torch.int64, device=device).view(1, 1, -1)
    c1 = torch.arange(T, dtype=torch.int64, device=device).view(1, -1, 1)
    c2 = torch.full((), layer & _MASK32, dtype=torch.int64, device=device)
    c3 = torch.zeros((), dtype=torch.int64, device=device)
    y = torch.stack(torch.broadcast_tensors(*philox4x32((c0, c1, c2, c3), (k & _MASK32, k >> 32))), dim=-1)
    if w == 8 and sys.byteorder == "little":  # a word's lanes are its first 4 bytes in memory
        lanes = y.view(torch.uint8).reshape(y.shape + (8,))[..., :4]
    elif per_word > 1:  # (rows, T, blocks, 4 words, lanes): lane i is bits w·i ... w·i + w − 1
        lanes = (y.unsqueeze(-1) >> torch.arange(0, 32, w, dtype=torch.int64, device=device)) & ((1 << w) - 1)
    else:
        lanes = y
    return lanes.reshape(len(keys), T, -1)[..., :units] < threshold

class PhiloxRowStreams:
    """The rows' counter-based masks (``mask_seeding="row_philox"``), keyed by ``seeds``.

    Drop-in for the per-row generators of :mod:`skdbal.models._row_masks`:
    each :meth:`masks` call is the next mask-drawing layer (its index counts
    the calls), so a row's masks follow the layer order whatever path
    computes the passes.

    Examples
    --------
    >>> import torch
    >>> from skdbal.models._philox import PhiloxRowStreams
    >>> streams = PhiloxRowStreams([7, 8], "cpu")
    >>> m = streams.masks(T=3, feat=(4,), keep=0.5, device="cpu")
    >>> m.shape, sorted(m.unique().tolist()) == [0.0, 2.0]
    (torch.Size([2, 3, 4]), True)
    >>> torch.equal(PhiloxRowStreams([8], "cpu").masks(3, (4,), 0.5, "cpu")[0], m[1])  # row 8's own
    True
    """

    def __init__(self, seeds: Sequence[int], device) -> None:
        self.keys = torch.tensor([int(s) for s in seeds], dtype=torch.int64).to(device)
        self.layer = 0

    def __len__(self) -> int:
        return len(self.keys)

    def kept(self, T: int, units: int, keep: float) -> torch.Tensor:
        """``(rows, T, units)`` booleans of the next layer."""
        out = philox_kept(self.keys, T, units, self.layer, keep)
        self.layer += 1
        return out

    def masks(self, T: int, feat: tuple, keep: float, device, dtype=torch.float32) -> torch.Tensor:
        """``(rows, T) + feat`` masks of the next layer, kept units scaled by ``1 / keep``."""
        kept = self.kept(T, math.prod(feat), keep).to(device)
        return (kept.to(dtype) * (1.0 / keep)).reshape((len(self.keys), T) + tuple(feat))
