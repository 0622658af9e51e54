"""skorch callbacks used by the experiment presets."""
from __future__ import annotations

from typing import Sequence

from skorch.callbacks import Callback

__all__ = ["ScaledL2"]


class ScaledL2(Callback):
    """L2 weight decay ``c / N`` on chosen parameters, ``N`` the training-set size.

    Gal et al.'s Keras code regularises the 128-unit dense layer with
    ``l2(c / N)``, ``c = 3.5``, which adds ``(c/N)·Σw²`` to the loss. torch's
    ``weight_decay=λ`` adds ``λ·w`` to the gradient, i.e. ``(λ/2)·Σw²``, so this
    callback sets ``weight_decay = 2c/N`` on a dedicated optimizer parameter
    group at the start of every training run.

    Parameters
    ----------
    c : float, default=3.5
    param_names : sequence of str, default=("head.2.weight",)
        Names in ``module_.named_parameters()``; the default is the weight of
        :class:`~skdbal.models.BayesianCNN`'s dense layer.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal import MCDropoutClassifier
    >>> from skdbal.models import ScaledL2
    >>> from skdbal.models import MLP
    >>> X, y = np.random.RandomState(0).rand(20, 4).astype(np.float32), np.arange(20) % 2
    >>> clf = MCDropoutClassifier(MLP, max_epochs=1, random_state=0,
    ...                           callbacks=[ScaledL2(c=3.5, param_names=("head.1.weight",))]).fit(X, y)
    >>> group = clf.optimizer_.param_groups[-1]         # its own group: 2c/N = 7/20
    >>> round(group["weight_decay"], 4), group["params"][0] is clf.module_.head[1].weight
    (0.35, True)
    """

    def __init__(self, c: float = 3.5, param_names: Sequence[str] = ("head.2.weight",)):
        self.c = c
        self.param_names = param_names

    def on_train_begin(self, net, X=None, y=None, **kwargs):
        n = len(X)
        decay = 2.0 * self.c / n
        named = dict(net.module_.named_parameters())
        missing = [p for p in self.param_names if p not in named]
        if missing:
            raise ValueError(f"ScaledL2: no parameters named {missing} in {type(net.module_).__name__}")
        opt = net.optimizer_
        for group in opt.param_groups:
            if group.get("skdbal_scaled_l2"):
                group["weight_decay"] = decay
                return
        targets = [named[p] for p in self.param_names]
        ids = {id(p) for p in targets}
        for group in opt.param_groups:
            group["params"] = [p for p in group["params"] if id(p) not in ids]
        opt.add_param_group({"params": targets, "weight_decay": decay, "skdbal_scaled_l2": True})
