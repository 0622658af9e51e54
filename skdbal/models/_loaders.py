"""Training-data loaders for small labelled sets.

With 20 labels and batches of 64, an epoch is a single gradient step, so
"epochs" stop meaning an amount of training. Kirsch et al. (2019) therefore
train on epochs of a fixed number of draws (5,056 in their original code,
4096 × 6 = 24,576 in their later example, which the ``kirsch2019`` preset
follows: see docs/decisions.md) whatever the labelled set's size;
:class:`FixedLengthLoader` does that as a drop-in ``iterator_train`` for
skorch nets.
"""
from __future__ import annotations

from typing import Iterator, Optional

import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from .._validation import check_positive_int

__all__ = ["FixedLengthLoader", "FixedLengthSampler"]


class FixedLengthSampler(Sampler):
    """Indices of a fixed-length epoch over ``n`` items.

    When ``n >= n_samples``, one ordinary epoch: a random permutation of all
    ``n`` indices (no item is ever left out). Otherwise ``n_samples`` indices
    in random order in which every item appears ``n_samples // n`` or
    ``n_samples // n + 1`` times: a random permutation of ``range(n_samples)``
    taken modulo ``n``, mapped through a random permutation of the items, so
    that which items get the extra draw is random too (not always the first
    ones, which in an active-learning run are the initial labels).

    Parameters
    ----------
    n : int
        Number of items (the dataset's length).
    n_samples : int
        Draws per epoch.
    generator : torch.Generator, optional
        Source of randomness; torch's global generator by default, so a net
        seeded by ``random_state`` draws the same epochs.

    Examples
    --------
    >>> import torch
    >>> from skdbal.models import FixedLengthSampler
    >>> idx = list(FixedLengthSampler(3, 8, generator=torch.Generator().manual_seed(0)))
    >>> len(idx), sorted(idx.count(i) for i in range(3))    # 8 draws of 3 items: 2, 3, 3 times
    (8, [2, 3, 3])
    >>> sorted(FixedLengthSampler(5, 2))                    # more items than draws: a full epoch
    [0, 1, 2, 3, 4]
    """

    def __init__(self, n: int, n_samples: int, generator: Optional[torch.Generator] = None):
        self.n = check_positive_int(n, "n (the number of items)")
        self.n_samples = check_positive_int(n_samples, "n_samples (draws per epoch)")
        self.generator = generator

    def __len__(self) -> int:
        return max(self.n, self.n_samples)

    def __iter__(self) -> Iterator[int]:
        items = torch.randperm(self.n, generator=self.generator)
        if self.n >= self.n_samples:
            return iter(items.tolist())
        return iter(items[torch.randperm(self.n_samples, generator=self.generator) % self.n].tolist())


class FixedLengthLoader(DataLoader):
    """A :class:`~torch.utils.data.DataLoader` whose epochs draw ``n_samples`` items.

    Pass the class as a skorch net's ``iterator_train`` and ``n_samples``
    as ``iterator_train__n_samples``. skorch's ``shuffle`` is accepted and
    ignored: the epochs are always drawn in random order
    (:class:`FixedLengthSampler`).

    Parameters
    ----------
    dataset : torch.utils.data.Dataset
        The training data, as skorch passes it.
    n_samples : int
        Draws per epoch; an epoch is ``ceil(max(len(dataset), n_samples) / batch_size)``
        gradient steps.
    batch_size : int, default=1
    shuffle : bool, optional
        Ignored (skorch passes it).
    **kwargs :
        Other :class:`~torch.utils.data.DataLoader` arguments
        (``num_workers``, ``collate_fn``...); not ``sampler``. A
        ``generator`` also draws the epochs.

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal import MCDropoutClassifier
    >>> from skdbal.models import FixedLengthLoader
    >>> from skdbal.models import MLP
    >>> X = np.random.RandomState(0).rand(20, 4).astype(np.float32); y = np.arange(20) % 2
    >>> net = MCDropoutClassifier(MLP, batch_size=64, max_epochs=2, random_state=0,
    ...                           iterator_train=FixedLengthLoader, iterator_train__n_samples=640).fit(X, y)
    >>> len(net.get_iterator(net.get_dataset(X, y), training=True))     # 640 draws of 20 items
    10
    """

    def __init__(self, dataset: Dataset, n_samples: int, batch_size: int = 1, shuffle: Optional[bool] = None,
                 **kwargs):
        if "sampler" in kwargs or "batch_sampler" in kwargs:
            raise TypeError("FixedLengthLoader draws its own sampler; do not pass sampler or batch_sampler")
        sampler = FixedLengthSampler(len(dataset), n_samples, generator=kwargs.get("generator"))
        super().__init__(dataset, batch_size=batch_size, sampler=sampler, **kwargs)
