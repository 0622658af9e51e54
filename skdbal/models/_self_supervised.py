"""An encoder learnt from the unlabelled pool itself: a small CNN trained by self-supervision (SimCLR's
contrastive NT-Xent loss, or VICReg's), with cheap image augmentations computed in torch on each batch.

The losses are written here (a few lines each) rather than taken from lightly: lightly depends on
torchvision, whose wheels replace the CPU torch build skdbal pins.
"""
from __future__ import annotations

import contextlib
import math
import time
from typing import Optional

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ._encoders import BaseEncoder, _torch_device, check_batch_size, module_sha256

__all__ = ["PoolEncoder", "nt_xent_loss", "vicreg_loss", "augment_images"]

METHODS = ("simclr", "vicreg")


# ------------------------------------------------------------------------------------------------ losses

def nt_xent_loss(z1, z2, temperature: float = 0.5):
    """SimCLR's normalised-temperature cross-entropy of two views' projections ``(B, K)``.

    Each row's positive is its other view; the other ``2B - 2`` rows are its
    negatives. Rows are L2-normalised; the loss is the mean over the ``2B``
    rows of ``-log softmax`` of the positive's cosine over ``temperature``.
    """
    import torch
    import torch.nn.functional as F

    z = F.normalize(torch.cat([z1, z2]), dim=1)
    n = len(z1)
    logits = z @ z.T / temperature
    logits = logits.masked_fill(torch.eye(2 * n, dtype=torch.bool, device=z.device), float("-inf"))
    target = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)]).to(z.device)
    return F.cross_entropy(logits, target)


def vicreg_loss(z1, z2, invariance: float = 25.0, variance: float = 25.0, covariance: float = 1.0):
    """VICReg's loss (Bardes, Ponce & LeCun, 2022): the views' mean squared distance, a hinge keeping each
    dimension's standard deviation near 1, and the off-diagonal covariances squared."""
    import torch
    import torch.nn.functional as F

    n, k = z1.shape
    loss = invariance * F.mse_loss(z1, z2)
    for z in (z1, z2):
        z = z - z.mean(dim=0)
        std = torch.sqrt(z.var(dim=0) + 1e-4)
        loss = loss + variance * torch.relu(1 - std).mean() / 2
        cov = (z.T @ z) / (n - 1)
        off = cov - torch.diag(torch.diag(cov))
        loss = loss + covariance * off.pow(2).sum() / k
    return loss


# ----------------------------------------------------------------------------------------- augmentations

def augment_images(x, generator, *, crop_scale=(0.6, 1.0), max_rotation: float = 15.0,
                   noise: float = 0.1, erase: float = 0.0):
    """A random view of each image of a batch ``(B, C, H, W)``, drawn from ``generator``.

    A random resized crop (the crop's area a uniform fraction in
    ``crop_scale``, its aspect ratio in [3/4, 4/3], anywhere inside the image)
    with a rotation of up to ``max_rotation`` degrees, as one affine warp
    (bilinear, zeros outside); a brightness and contrast jitter; Gaussian
    noise of standard deviation up to ``noise``; and, with probability
    ``erase``, a random rectangle set to zero (random erasing; off by default:
    on MNIST it made the embedding worse).
    """
    import torch
    import torch.nn.functional as F

    b, c, h, w = x.shape
    dev = x.device

    def uniform(low, high, *shape):
        return low + (high - low) * torch.rand(*shape, generator=generator, device="cpu").to(dev)

    area = uniform(crop_scale[0], crop_scale[1], b)
    log_ratio = uniform(math.log(3 / 4), math.log(4 / 3), b)
    sx = torch.sqrt(area * torch.exp(log_ratio)).clamp(max=1.0)    # the crop's width as a fraction
    sy = torch.sqrt(area / torch.exp(log_ratio)).clamp(max=1.0)
    tx = uniform(-1, 1, b) * (1 - sx)
    ty = uniform(-1, 1, b) * (1 - sy)
    angle = uniform(-1, 1, b) * math.radians(max_rotation)
    cos, sin = torch.cos(angle), torch.sin(angle)
    theta = torch.stack([torch.stack([sx * cos, -sy * sin, tx], 1),
                         torch.stack([sx * sin, sy * cos, ty], 1)], 1)
    grid = F.affine_grid(theta, [b, c, h, w], align_corners=False)
    out = F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    contrast = uniform(0.6, 1.4, b, 1, 1, 1)
    brightness = uniform(-0.2, 0.2, b, 1, 1, 1)
    out = out * contrast + brightness
    out = out + uniform(0, noise, b, 1, 1, 1) * torch.randn(out.shape, generator=generator).to(dev)
    if erase > 0:
        ew = (uniform(0.2, 0.5, b) * w).long()
        eh = (uniform(0.2, 0.5, b) * h).long()
        ex = (uniform(0, 1, b) * (w - ew)).long()
        ey = (uniform(0, 1, b) * (h - eh)).long()
        on = uniform(0, 1, b) < erase
        cols = torch.arange(w, device=dev)[None, :]
        rows = torch.arange(h, device=dev)[None, :]
        mask_x = (cols >= ex[:, None]) & (cols < (ex + ew)[:, None])
        mask_y = (rows >= ey[:, None]) & (rows < (ey + eh)[:, None])
        mask = (mask_y[:, :, None] & mask_x[:, None, :] & on[:, None, None])[:, None]
        out = out.masked_fill(mask, 0.0)
    return out


# -------------------------------------------------------------------------------------------- the network

def _backbone(in_channels: int, width: int):
    """Three 3x3 convolution blocks (``width``, 2 ``width``, 4 ``width`` channels) with batch norm, the
    first two max-pooled, then a global average: an embedding of ``4 * width`` features."""
    import torch.nn as nn

    def block(i, o):
        return [nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU(inplace=True)]

    return nn.Sequential(*block(in_channels, width), nn.MaxPool2d(2, ceil_mode=True),
                         *block(width, 2 * width), nn.MaxPool2d(2, ceil_mode=True),
                         *block(2 * width, 4 * width), nn.AdaptiveAvgPool2d(1), nn.Flatten())


def _projector(d_in: int, d_hidden: int, d_out: int):
    import torch.nn as nn

    return nn.Sequential(nn.Linear(d_in, d_hidden, bias=False), nn.BatchNorm1d(d_hidden), nn.ReLU(inplace=True),
                         nn.Linear(d_hidden, d_out))


@contextlib.contextmanager
def _threads(n: Optional[int]):
    """torch's intra-op threads set to ``n`` inside, restored after (``None``: unchanged)."""
    import torch

    if n is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _seed(random_state) -> int:
    if random_state is None:
        return int(np.random.randint(0, 2 ** 31 - 1))
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2 ** 31 - 1))
    if isinstance(random_state, (bool, np.bool_)) or not isinstance(random_state, (int, np.integer)):
        raise ValueError(f"random_state must be None, an int or a RandomState; got {random_state!r}")
    return int(random_state) % (2 ** 31 - 1)


# ------------------------------------------------------------------------------------------- the encoder

class PoolEncoder(BaseEncoder):
    """An encoder learnt by self-supervision from the unlabelled pool itself: no labels, no download.

    :meth:`fit` trains a small CNN (three 3x3 convolution blocks with batch
    norm, ``4 * width`` features after a global average) and a projection
    head on two random views of each image of the pool: a random resized crop
    with a small rotation, brightness and contrast jitter and Gaussian noise,
    drawn in torch on each batch. ``method="simclr"`` pulls
    the two views' projections together and pushes the batch's other images
    away (SimCLR's NT-Xent loss, Chen et al., 2020); ``method="vicreg"``
    pulls them together while keeping each dimension's variance up and the
    dimensions decorrelated (VICReg, Bardes et al., 2022), with no negatives.
    :meth:`transform` gives the CNN's features (the projection head is
    dropped, as in both papers), L2-normalised when ``normalize``.

    Inputs are grey or colour images ``(N, H, W)`` / ``(N, C, H, W)``, or rows
    ``(N, H * W)`` of square grey images (MNIST's ``(N, 784)``), scaled to
    [0, 1] (declare ``preparation=InputPreparation(scale=1 / 255)`` for
    ``uint8`` pixels). Rows whose width is not a square are read as
    one-pixel-high strips, so that any array is accepted; the network and
    its augmentations are meant for images. Training stops after
    ``max_epochs`` passes over the pool, or at the end of the step that
    crosses ``max_time`` seconds.

    Parameters
    ----------
    method : {"simclr", "vicreg"}, default="simclr"
        The self-supervised loss.
    width : int, default=16
        Channels of the first convolution; the embedding has ``4 * width``
        features.
    projection_dim : int, default=64
        Width of the projection head's output (its hidden layer has
        ``4 * width`` units for SimCLR, ``4 * projection_dim`` for VICReg).
    max_epochs : float, default=15
        Passes over the pool (a fraction allowed: ``0.5`` is half a pass).
    max_time : float, optional
        A wall-clock budget for training, in seconds: the step that crosses
        it is the last. The embedding then depends on the machine's speed;
        set only ``max_epochs`` for results that repeat across machines.
    batch_size : int, default=128
        Images per training step (each gives two views), and rows per
        forward pass in :meth:`transform`.
    learning_rate : float, default=5e-3
        AdamW's learning rate, decayed to zero along a cosine over the steps
        ``max_epochs`` allows.
    weight_decay : float, default=1e-5
    temperature : float, default=0.5
        SimCLR's softmax temperature.
    crop_scale : (float, float), default=(0.6, 1.0)
        The range of the random crop's area, as a fraction of the image's.
    normalize : bool, default=True
        Scale each embedding to unit length (cosine geometry, as the losses
        see it).
    n_threads : int, optional
        torch's intra-op threads during :meth:`fit` and :meth:`transform`
        (restored after); ``None`` keeps torch's setting.
    device : str, default="cpu"
        ``"cuda"`` trains and embeds on a GPU (refused when torch sees none).
        A GPU's kernels are not bitwise repeatable: the same ``random_state``
        gives the same embedding on the CPU only.
    random_state : int, RandomState or None
        Seeds the network's initialisation, the shuffling and the
        augmentations.
    verbose : int, default=0
        ``1`` prints the mean loss after each epoch.
    preparation : InputPreparation or dict, optional
        Applied to each batch before the network, at training and after.

    Attributes
    ----------
    module_ : torch.nn.Module
        The trained CNN (in eval mode, on ``device``).
    loss_curve_ : list of float
        The mean training loss of each epoch (the last may be partial).
    n_steps_ : int
        Training steps taken.
    n_epochs_ : float
        Passes over the pool taken (``n_steps_ * batch_size / N``).
    fit_time_ : float
        Seconds the training took.
    n_features_in_ : int
    n_features_out_ : int
        ``4 * width``.

    Notes
    -----
    The defaults were chosen by measurement on 10,000-image MNIST and
    Fashion-MNIST pools (a 20-nearest-neighbour vote and logistic
    regressions on 20 and 100 random labels): a narrower network trained for
    more steps beat a wider one in the same time, lighter crops beat heavier
    ones and random erasing, and SimCLR and VICReg came out level (SimCLR
    kept: fewer weights to set, a cheaper step). The losses are written here
    in a few lines each: lightly, which has them, needs torchvision, whose
    wheels would replace the CPU torch build.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.models import PoolEncoder
    >>> rng = np.random.RandomState(0)
    >>> X = rng.rand(64, 12, 12).astype(np.float32)
    >>> encoder = PoolEncoder(width=4, max_epochs=1, batch_size=32, random_state=0).fit(X)
    >>> Z = encoder.transform(X)
    >>> Z.shape, Z.dtype, encoder.n_steps_
    ((64, 16), dtype('float32'), 2)
    >>> bool(np.allclose(np.linalg.norm(Z, axis=1), 1, atol=1e-5))
    True
    """

    _not_in_fingerprint = ("device", "n_threads", "verbose", "max_time")

    def __init__(self, method: str = "simclr", *, width: int = 16, projection_dim: int = 64,
                 max_epochs: float = 15, max_time: Optional[float] = None, batch_size: int = 128,
                 learning_rate: float = 5e-3, weight_decay: float = 1e-5, temperature: float = 0.5,
                 crop_scale=(0.6, 1.0), normalize: bool = True, n_threads: Optional[int] = None,
                 device: str = "cpu", random_state=None, verbose: int = 0, preparation=None):
        self.method = method
        self.width = width
        self.projection_dim = projection_dim
        self.max_epochs = max_epochs
        self.max_time = max_time
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.temperature = temperature
        self.crop_scale = crop_scale
        self.normalize = normalize
        self.n_threads = n_threads
        self.device = device
        self.random_state = random_state
        self.verbose = verbose
        self.preparation = preparation

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = self.random_state is None
        return tags

    # ------------------------------------------------------------------------------------------- checks
    def _check_params(self):
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}; got {self.method!r}")
        for name in ("width", "projection_dim"):
            value = getattr(self, name)
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be a positive integer; got {value!r}")
        check_batch_size(self.batch_size)
        if self.batch_size < 2:
            raise ValueError(f"batch_size must be at least 2 (a batch compares its images); got {self.batch_size}")
        for name in ("max_epochs", "learning_rate", "temperature"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not value > 0 \
                    or not np.isfinite(value):
                raise ValueError(f"{name} must be a positive number; got {value!r}")
        if self.max_time is not None and not (isinstance(self.max_time, (int, float, np.number))
                                              and self.max_time > 0):
            raise ValueError(f"max_time must be a positive number of seconds or None; got {self.max_time!r}")
        if not (isinstance(self.weight_decay, (int, float, np.number)) and self.weight_decay >= 0):
            raise ValueError(f"weight_decay must be a non-negative number; got {self.weight_decay!r}")
        scale = tuple(self.crop_scale) if isinstance(self.crop_scale, (tuple, list)) else ()
        if len(scale) != 2 or not 0 < scale[0] <= scale[1] <= 1:
            raise ValueError(f"crop_scale must be (low, high) with 0 < low <= high <= 1; got {self.crop_scale!r}")
        if self.n_threads is not None and (isinstance(self.n_threads, bool)
                                           or not isinstance(self.n_threads, (int, np.integer))
                                           or self.n_threads < 1):
            raise ValueError(f"n_threads must be a positive integer or None; got {self.n_threads!r}")

    def _images(self, batch):
        """A prepared batch as ``(B, C, H, W)``: rows of square grey images are reshaped, other rows are
        one-pixel-high strips."""
        if batch.ndim == 3:
            return batch[:, None]
        if batch.ndim == 2:
            side = int(round(math.sqrt(batch.shape[1])))
            if side * side == batch.shape[1]:
                return batch.reshape(len(batch), 1, side, side)
            return batch.reshape(len(batch), 1, 1, batch.shape[1])
        return batch

    def _check_shape(self, X):
        prepared = self.preparation_(X[:1])
        if prepared.ndim not in (2, 3, 4):
            raise ValueError(f"PoolEncoder takes images (N, H, W) or (N, C, H, W), or rows (N, H * W) of "
                             f"square grey images; got shape {X.shape}")
        return self._images(prepared).shape[1]

    # ----------------------------------------------------------------------------------------- training
    def _setup(self, X):
        import torch

        self._check_params()
        device = _torch_device(self.device)
        in_channels = self._check_shape(X)
        seed = _seed(self.random_state)
        n = len(X)
        bs = min(int(self.batch_size), n)
        if bs < 2:
            raise ValueError(f"PoolEncoder needs at least 2 samples to learn from (it compares the images "
                             f"of a batch); got n_samples = {n}")
        steps_per_epoch = n // bs
        total = max(1, int(math.ceil(float(self.max_epochs) * steps_per_epoch)))
        with _threads(self.n_threads), torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            backbone = _backbone(in_channels, int(self.width))
            d = 4 * int(self.width)
            hidden = 4 * int(self.projection_dim) if self.method == "vicreg" else d
            head = _projector(d, hidden, int(self.projection_dim))
            backbone.to(device).train()
            head.to(device).train()
            params = list(backbone.parameters()) + list(head.parameters())
            optimizer = torch.optim.AdamW(params, lr=float(self.learning_rate), weight_decay=float(self.weight_decay))
            schedule = torch.optim.lr_scheduler.LambdaLR(
                optimizer, lambda step: 0.5 * (1 + math.cos(math.pi * min(step, total) / total)))
            generator = torch.Generator().manual_seed(seed + 1)
            rng = np.random.RandomState(seed + 2)
            losses, epoch_losses, step, start = [], [], 0, time.perf_counter()
            order, position = rng.permutation(n), 0
            while step < total:
                if position + bs > n:
                    losses.append(float(np.mean(epoch_losses)))
                    self._report(len(losses), losses[-1], start)
                    epoch_losses, order, position = [], rng.permutation(n), 0
                rows = np.sort(order[position:position + bs])
                position += bs
                x = torch.from_numpy(self._images(self.preparation_(X[rows]))).to(device)
                v1 = augment_images(x, generator, crop_scale=tuple(self.crop_scale))
                v2 = augment_images(x, generator, crop_scale=tuple(self.crop_scale))
                z1, z2 = head(backbone(v1)), head(backbone(v2))
                if self.method == "simclr":
                    loss = nt_xent_loss(z1, z2, float(self.temperature))
                else:
                    loss = vicreg_loss(z1, z2)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                schedule.step()
                epoch_losses.append(float(loss.detach()))
                step += 1
                if self.max_time is not None and time.perf_counter() - start >= float(self.max_time):
                    break
            if epoch_losses:
                losses.append(float(np.mean(epoch_losses)))
                self._report(len(losses), losses[-1], start)
        backbone.eval()
        for p in backbone.parameters():
            p.requires_grad_(False)
        self.module_ = backbone
        self.projector_ = head.eval()
        self.loss_curve_ = losses
        self.n_steps_ = step
        self.n_epochs_ = step * bs / n
        self.fit_time_ = time.perf_counter() - start

    def _report(self, epoch, loss, start):
        if self.verbose:
            print(f"epoch {epoch}: loss {loss:.4f} ({time.perf_counter() - start:.1f} s)", flush=True)

    # ---------------------------------------------------------------------------------------- embedding
    def _embed(self, batch):
        import torch
        import torch.nn.functional as F

        device = _torch_device(self.device)
        with torch.no_grad(), _threads(self.n_threads):
            x = torch.from_numpy(self._images(batch)).to(device)
            z = self.module_.to(device)(x)     # set_params(device=...) after fit moves the network
            if self.normalize:
                z = F.normalize(z, dim=1)
        return z.float().cpu().numpy()

    def transform(self, X) -> np.ndarray:
        """The CNN's features of ``X`` (L2-normalised when ``normalize``).

        Parameters
        ----------
        X : array-like of shape (n_samples, ...)
            Images in the form given to :meth:`fit`.

        Returns
        -------
        embeddings : ndarray of shape (n_samples, 4 * width), dtype float32
        """
        check_is_fitted(self, "n_features_out_")
        return super().transform(X)

    def _state_sha256(self) -> str:
        return module_sha256(self.module_)

    def __getstate__(self):
        """The trained networks travel on the CPU, so that an encoder trained on a GPU unpickles anywhere
        (it moves back to ``device`` at its next :meth:`transform`)."""
        import copy

        state = self.__dict__.copy()
        for key in ("module_", "projector_"):
            if key in state:
                state[key] = copy.deepcopy(state[key]).cpu()
        return state
