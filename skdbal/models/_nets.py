"""Plain :mod:`torch.nn` modules for deep Bayesian active learning.

Every network here is split in two parts:

``trunk``
    the deterministic part: every layer before the first dropout;
``head``
    the stochastic part: the first dropout and everything after it. Its
    last module is the output :class:`torch.nn.Linear`, so ``head[:-1]``
    yields the penultimate features.

``forward(x) == head(trunk(x))``. Because the trunk holds no dropout, MC
dropout can run the trunk once per input and resample only the head; that is
exact, not an approximation.

Image networks accept inputs shaped ``(N, C, H, W)``, ``(N, H, W)`` (one
channel) or flat ``(N, C*H*W)``; they are reshaped by the first layer.
"""
from __future__ import annotations

import math
from typing import Sequence, Tuple, Union

import torch
from torch import nn

__all__ = ["BayesianCNN", "KirschCNN", "LeNet5", "MLP", "ToImage", "split_module"]

ShapeLike = Union[int, Sequence[int]]


def _as_chw(input_shape: ShapeLike) -> Tuple[int, int, int]:
    """Normalise ``input_shape`` to ``(channels, height, width)``."""
    if isinstance(input_shape, int):
        shape = (1, input_shape, input_shape)
    else:
        shape = tuple(int(s) for s in input_shape)
        if len(shape) == 2:
            shape = (1,) + shape
    if len(shape) != 3 or min(shape) < 1:
        raise ValueError(
            f"input_shape must be an int, (H, W) or (C, H, W) of positive "
            f"ints; got {input_shape!r}"
        )
    return shape  # type: ignore[return-value]


class ToImage(nn.Module):
    """Reshape ``(N, H, W)``, ``(N, C, H, W)`` or flat ``(N, C*H*W)`` to
    ``(N, C, H, W)``.

    Parameters
    ----------
    shape : tuple of int
        ``(C, H, W)``, the per-sample shape of the output.

    Examples
    --------
    >>> import torch
    >>> from skdbal.models import ToImage
    >>> to_image = ToImage((1, 2, 3))
    >>> to_image(torch.arange(6.0).reshape(1, 6)).tolist()      # flat rows to (N, 1, 2, 3)
    [[[[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]]]
    >>> to_image(torch.zeros(4, 2, 3)).shape
    torch.Size([4, 1, 2, 3])
    >>> to_image(torch.zeros(4, 5))
    Traceback (most recent call last):
        ...
    ValueError: each input must have 6 values to be reshaped to (1, 2, 3); got inputs of shape (5,)
    """

    def __init__(self, shape: Tuple[int, int, int]):
        super().__init__()
        self.shape = tuple(shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_features = math.prod(self.shape)
        if x[0].numel() != n_features:
            raise ValueError(
                f"each input must have {n_features} values to be reshaped to "
                f"{self.shape}; got inputs of shape {tuple(x.shape[1:])}"
            )
        return x.reshape(x.shape[0], *self.shape)

    def extra_repr(self) -> str:
        return f"shape={self.shape}"


class _SizedNet(nn.Module):
    """A net that keeps the sizes it was built with (those that
    :class:`~skdbal.MCDropoutClassifier` infers from data) in its state dict,
    as torch's extra state, so that saved parameters can rebuild it."""

    _sizes: dict = {}

    def get_extra_state(self) -> dict:
        return {"sizes": dict(self._sizes)}

    def set_extra_state(self, state) -> None:
        if not (isinstance(state, dict) and isinstance(state.get("sizes", {}), dict)):
            raise ValueError(f"{type(self).__name__}: extra state must be a dict of sizes; got {state!r}")

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        # states saved before the sizes were recorded (earlier skdbal and results
        # versions 1-2) lack the extra state: they still load, and a size that
        # differs still fails on the tensors' shapes
        n_missing = len(missing_keys)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)
        key = prefix + "_extra_state"
        if key not in state_dict and key in missing_keys[n_missing:]:
            missing_keys.remove(key)


def _flat_size(trunk: nn.Module, shape: Tuple[int, int, int], name: str) -> int:
    with torch.no_grad():
        try:
            out = trunk(torch.zeros(1, *shape))
        except RuntimeError as exc:  # kernel larger than the feature map
            raise ValueError(
                f"{name} cannot process inputs of shape {shape}: {exc}"
            ) from None
    return int(out[0].numel())


class BayesianCNN(_SizedNet):
    """The Bayesian CNN of Gal, Islam & Ghahramani (2017).

    conv(n_filters, k) – ReLU – conv(n_filters, k) – ReLU – maxpool –
    dropout(``dropout_conv``) – dense(n_hidden) – ReLU – dropout(``dropout_fc``)
    – dense(n_classes). Outputs logits.

    Parameters
    ----------
    n_classes : int, default=10
        Number of output classes.
    input_shape : int or tuple of int, default=(1, 28, 28)
        ``H`` (square), ``(H, W)`` or ``(C, H, W)``. :class:`MCDropoutClassifier`
        infers it from the training data when it is not given.
    n_filters : int, default=32
    kernel_size : int, default=4
    pool_size : int, default=2
    n_hidden : int, default=128
        Size of the penultimate (feature) layer.
    dropout_conv : float, default=0.25
    dropout_fc : float, default=0.5

    References
    ----------
    .. [1] Y. Gal, R. Islam and Z. Ghahramani, "Deep Bayesian active learning
       with image data", ICML 2017, arXiv:1703.02910.

    Examples
    --------
    >>> import torch
    >>> from skdbal.models import BayesianCNN
    >>> net = BayesianCNN(n_classes=10, input_shape=(8, 8))
    >>> net(torch.zeros(5, 64)).shape
    torch.Size([5, 10])
    >>> net.head[-1].in_features
    128
    """

    def __init__(
        self,
        n_classes: int = 10,
        input_shape: ShapeLike = (1, 28, 28),
        n_filters: int = 32,
        kernel_size: int = 4,
        pool_size: int = 2,
        n_hidden: int = 128,
        dropout_conv: float = 0.25,
        dropout_fc: float = 0.5,
    ):
        super().__init__()
        shape = _as_chw(input_shape)
        self._sizes = {"n_classes": int(n_classes), "input_shape": shape}
        self.trunk = nn.Sequential(
            ToImage(shape),
            nn.Conv2d(shape[0], n_filters, kernel_size),
            nn.ReLU(),
            nn.Conv2d(n_filters, n_filters, kernel_size),
            nn.ReLU(),
            nn.MaxPool2d(pool_size),
        )
        n_flat = _flat_size(self.trunk, shape, "BayesianCNN")
        self.head = nn.Sequential(
            nn.Dropout(dropout_conv),
            nn.Flatten(),
            nn.Linear(n_flat, n_hidden),
            nn.ReLU(),
            nn.Dropout(dropout_fc),
            nn.Linear(n_hidden, n_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.trunk(x))


class KirschCNN(_SizedNet):
    """The MNIST network of Kirsch, van Amersfoort & Gal (2019), BatchBALD.

    conv 32×5×5 – channel dropout – maxpool 2 – ReLU – conv 64×5×5 – channel
    dropout – maxpool 2 – ReLU – dense ``n_hidden`` – dropout – ReLU – dense
    ``n_classes``. Outputs logits.

    Dropout sits right after the first convolution, so the deterministic
    trunk is that convolution alone, and MC sampling runs the rest of the
    network ``T`` times (about 3.4 of its 3.9 MFLOP per 28×28 image; the
    Gal CNN resamples only 0.5 of its 8.7). The channel dropout is
    :class:`torch.nn.Dropout2d`, whose masks the sampler draws per row like
    element dropout's.

    Parameters
    ----------
    n_classes : int, default=10
        Number of output classes.
    input_shape : int or tuple of int, default=(1, 28, 28)
        ``H`` (square), ``(H, W)`` or ``(C, H, W)``, at least 16×16.
        :class:`MCDropoutClassifier` infers it from the training data when
        it is not given.
    n_hidden : int, default=128
        Size of the penultimate (feature) layer.
    dropout_conv : float, default=0.5
        Channel-dropout probability after each convolution.
    dropout_fc : float, default=0.5
        Dropout probability after the first dense layer.

    References
    ----------
    .. [1] A. Kirsch, J. van Amersfoort and Y. Gal, "BatchBALD: efficient and
       diverse batch acquisition for deep Bayesian active learning",
       NeurIPS 2019, arXiv:1906.08158.

    Examples
    --------
    >>> import torch
    >>> from skdbal.models import KirschCNN
    >>> net = KirschCNN()
    >>> net(torch.zeros(2, 1, 28, 28)).shape
    torch.Size([2, 10])
    >>> net.head[-4].in_features, len(net.trunk)     # 64 channels of 4x4; the trunk is one conv
    (1024, 2)
    """

    def __init__(
        self,
        n_classes: int = 10,
        input_shape: ShapeLike = (1, 28, 28),
        n_hidden: int = 128,
        dropout_conv: float = 0.5,
        dropout_fc: float = 0.5,
    ):
        super().__init__()
        shape = _as_chw(input_shape)
        self._sizes = {"n_classes": int(n_classes), "input_shape": shape}
        self.trunk = nn.Sequential(ToImage(shape), nn.Conv2d(shape[0], 32, 5))
        conv = nn.Sequential(
            self.trunk,
            nn.Dropout2d(dropout_conv),
            nn.MaxPool2d(2),
            nn.ReLU(),
            nn.Conv2d(32, 64, 5),
            nn.Dropout2d(dropout_conv),
            nn.MaxPool2d(2),
            nn.ReLU(),
        )
        n_flat = _flat_size(conv.eval(), shape, "KirschCNN")  # eval: no dropout draws while sizing
        conv.train()
        self.head = nn.Sequential(
            *conv[1:],
            nn.Flatten(),
            nn.Linear(n_flat, n_hidden),
            nn.Dropout(dropout_fc),
            nn.ReLU(),
            nn.Linear(n_hidden, n_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.trunk(x))


class LeNet5(_SizedNet):
    """LeNet-5 (LeCun et al., 1998) with dropout, as in Pilz (2025, Table 1).

    conv 6×5×5 (padding 2) + ReLU – maxpool 2 – conv 16×5×5 + ReLU – maxpool 2
    – dropout(``dropout_conv``) – dense 120 + ReLU – dropout(``dropout_fc``)
    – dense 84 + ReLU – dense ``n_classes``.

    Pilz's table lists a ReLU after the last dense layer as well; we output
    plain logits instead, since a ReLU on logits only clips negative scores to
    0 before the softmax. The padding of 2 gives the table's 400 = 16·5·5
    inputs to the first dense layer on 28×28 MNIST. Inputs smaller than
    12×12 (such as scikit-learn's 8×8 digits) would vanish in the second
    convolution, so it is padded by 2 as well for them: 8×8 digits give
    16·2·2 = 64 dense inputs. Inputs must be at least 4×4.

    Parameters
    ----------
    n_classes : int, default=10
        Number of output classes.
    input_shape : int or tuple of int, default=(1, 28, 28)
        ``H`` (square), ``(H, W)`` or ``(C, H, W)``. :class:`MCDropoutClassifier`
        infers it from the training data when it is not given.
    dropout_conv : float, default=0.5
        Dropout probability after the convolutions (the first layer of the
        stochastic head).
    dropout_fc : float, default=0.25
        Dropout probability after the first dense layer.

    References
    ----------
    .. [1] Y. LeCun, L. Bottou, Y. Bengio and P. Haffner, "Gradient-based
       learning applied to document recognition", Proceedings of the IEEE
       86(11), 1998.
    .. [2] P. Pilz, "Deep active learning for image data", preprint
       (Practical Work in AI, Institute for Machine Learning, Johannes
       Kepler University Linz), 2025.

    Examples
    --------
    >>> import torch
    >>> from skdbal.models import LeNet5
    >>> LeNet5()(torch.zeros(2, 1, 28, 28)).shape
    torch.Size([2, 10])
    >>> LeNet5().head[2].in_features
    400
    >>> LeNet5(input_shape=(8, 8))(torch.zeros(2, 64)).shape
    torch.Size([2, 10])
    """

    def __init__(
        self,
        n_classes: int = 10,
        input_shape: ShapeLike = (1, 28, 28),
        dropout_conv: float = 0.5,
        dropout_fc: float = 0.25,
    ):
        super().__init__()
        shape = _as_chw(input_shape)
        self._sizes = {"n_classes": int(n_classes), "input_shape": shape}
        pad2 = 0 if min(shape[1:]) >= 12 else 2  # keep small images alive
        self.trunk = nn.Sequential(
            ToImage(shape),
            nn.Conv2d(shape[0], 6, 5, padding=2),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5, padding=pad2),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        n_flat = _flat_size(self.trunk, shape, "LeNet5")
        self.head = nn.Sequential(
            nn.Dropout(dropout_conv),
            nn.Flatten(),
            nn.Linear(n_flat, 120),
            nn.ReLU(),
            nn.Dropout(dropout_fc),
            nn.Linear(120, 84),
            nn.ReLU(),
            nn.Linear(84, n_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.trunk(x))


class MLP(_SizedNet):
    """A multilayer perceptron with dropout after every hidden layer.

    dense(h₁) – ReLU – dropout – dense(h₂) – ReLU – dropout – … – dense(n_classes).
    The trunk is the first dense layer and its ReLU.

    Parameters
    ----------
    n_features : int, default=64
        Input dimension (inputs are flattened).
    n_classes : int, default=10
    hidden_layer_sizes : tuple of int, default=(128,)
    dropout : float, default=0.5

    Examples
    --------
    >>> import torch
    >>> from skdbal.models import MLP
    >>> MLP(n_features=4, n_classes=3, hidden_layer_sizes=(16, 8))(torch.zeros(2, 4)).shape
    torch.Size([2, 3])
    """

    def __init__(
        self,
        n_features: int = 64,
        n_classes: int = 10,
        hidden_layer_sizes: Sequence[int] = (128,),
        dropout: float = 0.5,
    ):
        super().__init__()
        sizes = [int(n_features)] + [int(h) for h in hidden_layer_sizes]
        if len(sizes) < 2 or min(sizes) < 1:
            raise ValueError(
                "MLP needs n_features >= 1 and at least one positive hidden "
                f"layer size; got n_features={n_features!r}, "
                f"hidden_layer_sizes={hidden_layer_sizes!r}"
            )
        self._sizes = {"n_classes": int(n_classes), "n_features": sizes[0]}
        self.trunk = nn.Sequential(nn.Flatten(), nn.Linear(sizes[0], sizes[1]), nn.ReLU())
        layers: list = []
        for n_in, n_out in zip(sizes[1:-1], sizes[2:]):
            layers += [nn.Dropout(dropout), nn.Linear(n_in, n_out), nn.ReLU()]
        layers += [nn.Dropout(dropout), nn.Linear(sizes[-1], n_classes)]
        self.head = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.trunk(x))


def split_module(module: nn.Module):
    """Return ``(trunk, head)`` of a split network, or ``None``.

    A module is split when it has ``trunk`` and ``head`` submodules, the head
    is an :class:`torch.nn.Sequential` ending in the output layer, and the
    trunk contains no dropout.

    Examples
    --------
    >>> import torch
    >>> from torch import nn
    >>> from skdbal.models import MLP, split_module
    >>> net = MLP(n_features=4, n_classes=3, hidden_layer_sizes=(8,)).eval()
    >>> trunk, head = split_module(net)
    >>> x = torch.ones(5, 4)
    >>> type(head[0]).__name__, torch.equal(net(x), head(trunk(x)))
    ('Dropout', True)
    >>> split_module(nn.Sequential(nn.Dropout(0.5), nn.Linear(4, 3))) is None   # no trunk and head
    True
    """
    trunk = getattr(module, "trunk", None)
    head = getattr(module, "head", None)
    if not (isinstance(trunk, nn.Module) and isinstance(head, nn.Sequential)):
        return None
    if any(isinstance(m, nn.modules.dropout._DropoutNd) for m in trunk.modules()):
        return None
    return trunk, head
