"""The input preparation an encoder declares: scale, image size, channels and normalisation."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Optional, Sequence, Tuple, Union

import numpy as np

__all__ = ["InputPreparation"]

Number = Union[int, float]


def _as_tuple(value, name: str, length: Optional[int] = None) -> Optional[tuple]:
    if value is None:
        return None
    values = tuple(float(v) for v in np.atleast_1d(np.asarray(value, dtype=float)).ravel())
    if not values or not all(np.isfinite(values)):
        raise ValueError(f"{name} must be finite numbers; got {value!r}")
    if length is not None and len(values) != length:
        raise ValueError(f"{name} must have {length} values; got {value!r}")
    return values


@dataclass(frozen=True)
class InputPreparation:
    """What an encoder does to its input before the network sees it, declared beside the encoder.

    The steps run in this order, on each batch: multiply by ``scale``; give
    grey images ``(N, H, W)`` a channel axis when ``size`` or ``channels`` is
    declared; resize to ``size`` (bilinear, with antialiasing when shrinking,
    as torchvision's ``Resize`` does on tensors); repeat a grey channel to
    ``channels``; subtract ``mean`` and divide by ``std`` per channel (per
    feature for rows ``(N, D)``). The result is float32. Images are
    channel-first, ``(N, C, H, W)``, as :func:`skdbal.labelling.pools.load_pool`
    gives them.

    Parameters
    ----------
    size : (int, int), optional
        ``(height, width)`` the network takes; ``None`` keeps the size.
    channels : int, optional
        Channels the network takes: 3 repeats a grey image's channel three
        times; ``None`` keeps the channels.
    mean, std : float or sequence of float, optional
        Per-channel (or per-feature) normalisation, e.g. ImageNet's
        ``mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225)``. A scalar
        applies to all. Each needs the other.
    scale : float, optional
        Factor applied first, e.g. ``1 / 255`` for ``uint8`` images.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.models import InputPreparation
    >>> prep = InputPreparation(size=(1, 4), channels=3, mean=0.5, std=0.5)
    >>> out = prep(np.array([[[0.0, 1.0]]]))        # one grey 1 x 2 image
    >>> out.shape, out.dtype
    ((1, 3, 1, 4), dtype('float32'))
    >>> out[0, 2, 0].tolist()                         # bilinear to width 4, then (x - 0.5) / 0.5
    [-1.0, -0.5, 0.5, 1.0]
    >>> prep.to_dict()["size"]
    [1, 4]
    """

    size: Optional[Tuple[int, int]] = None
    channels: Optional[int] = None
    mean: Optional[Union[Number, Sequence[Number]]] = None
    std: Optional[Union[Number, Sequence[Number]]] = None
    scale: Optional[Number] = None

    def __post_init__(self):
        if self.size is not None:
            size = tuple(self.size) if not isinstance(self.size, (int, np.integer)) else (self.size, self.size)
            if len(size) != 2 or not all(isinstance(s, (int, np.integer)) and s > 0 for s in size):
                raise ValueError(f"size must be (height, width) of positive integers; got {self.size!r}")
            object.__setattr__(self, "size", (int(size[0]), int(size[1])))
        if self.channels is not None and (not isinstance(self.channels, (int, np.integer)) or self.channels < 1):
            raise ValueError(f"channels must be a positive integer; got {self.channels!r}")
        if (self.mean is None) != (self.std is None):
            raise ValueError("mean and std are declared together (or neither)")
        mean, std = _as_tuple(self.mean, "mean"), _as_tuple(self.std, "std")
        if std is not None and any(s <= 0 for s in std):
            raise ValueError(f"std must be positive; got {self.std!r}")
        if mean is not None:
            object.__setattr__(self, "mean", mean if len(mean) > 1 else mean[0])
            object.__setattr__(self, "std", std if len(std) > 1 else std[0])
        if self.scale is not None:
            if not np.isfinite(self.scale) or self.scale == 0:
                raise ValueError(f"scale must be a finite non-zero number; got {self.scale!r}")
            object.__setattr__(self, "scale", float(self.scale))

    @property
    def is_identity(self) -> bool:
        """True when nothing is declared: the input passes as float32."""
        return all(v is None for v in asdict(self).values())

    def to_dict(self) -> dict:
        """The declared steps as JSON-able values (recorded with cached embeddings)."""
        out = asdict(self)
        for key in ("size", "mean", "std"):
            if isinstance(out[key], tuple):
                out[key] = list(out[key])
        return out

    def __call__(self, X) -> np.ndarray:
        """Prepare a batch ``X``; returns a new float32 array."""
        X = np.asarray(X)
        if X.dtype.kind not in "biuf":
            raise TypeError(f"the input must be numeric; got dtype {X.dtype}")
        X = X.astype(np.float32)           # a copy: the caller's array is never changed
        if self.scale is not None:
            X *= np.float32(self.scale)
        images = self.size is not None or self.channels is not None
        if images:
            if X.ndim == 3:
                X = X[:, None]
            if X.ndim != 4:
                raise ValueError("size and channels apply to images, (N, H, W) or (N, C, H, W); "
                                 f"got shape {X.shape}")
        if self.size is not None and tuple(X.shape[2:]) != self.size:
            X = _resize(X, self.size)
        if self.channels is not None and X.shape[1] != self.channels:
            if X.shape[1] != 1:
                raise ValueError(f"cannot make {X.shape[1]} channels into {self.channels}: only a grey "
                                 f"(1-channel) image is repeated")
            X = np.repeat(X, self.channels, axis=1)
        if self.mean is not None:
            mean, std = np.asarray(self.mean, np.float32), np.asarray(self.std, np.float32)
            if mean.ndim or std.ndim:       # per channel of (N, C, ...) images, per feature of (N, D) rows
                if X.ndim not in (2, 4):
                    raise ValueError(f"a mean and std per channel need (N, C, H, W) images or (N, D) rows; "
                                     f"got shape {X.shape}")
                what = "channels" if X.ndim == 4 else "features"
                for name, v in (("mean", mean), ("std", std)):
                    if v.ndim and len(v) != X.shape[1]:
                        raise ValueError(f"{name} has {len(v)} values for {X.shape[1]} {what}")
                shape = (1, -1) + (1,) * (X.ndim - 2)
                mean, std = mean.reshape(shape if mean.ndim else ()), std.reshape(shape if std.ndim else ())
            X = (X - mean) / std
        return np.ascontiguousarray(X, dtype=np.float32)


def _resize(X: np.ndarray, size: Tuple[int, int]) -> np.ndarray:
    import torch
    import torch.nn.functional as F

    t = torch.from_numpy(np.ascontiguousarray(X))
    shrink = size[0] < X.shape[2] or size[1] < X.shape[3]
    with torch.no_grad():
        out = F.interpolate(t, size=size, mode="bilinear", align_corners=False, antialias=shrink)
    return out.numpy()
