"""Bundled data sets of the experiments (no download), below every other module of the package.

The runner's ``"digits"`` dataset and the quickstart both read
:func:`load_digits_images`, so that neither imports the other for it.
"""
from __future__ import annotations

from typing import List

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

__all__ = ["load_digits_images"]


def load_digits_images(test_size: int = 500, random_state: int = 0) -> List[np.ndarray]:
    """Digits as float32 8×8 images in [0, 1], split into pool and test sets.

    Returns
    -------
    X_pool, X_test, y_pool, y_test : ndarray

    Examples
    --------
    >>> from skdbal.experiments.data import load_digits_images
    >>> X_pool, X_test, y_pool, y_test = load_digits_images()
    >>> X_pool.shape, X_test.shape, X_pool.dtype, float(X_pool.max())
    ((1297, 8, 8), (500, 8, 8), dtype('float32'), 1.0)
    """
    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32).reshape(-1, 8, 8)
    return train_test_split(X, y, test_size=test_size, stratify=y, random_state=random_state)
