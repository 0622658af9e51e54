"""Choice of the initial labelled set."""
from __future__ import annotations

import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils.validation import column_or_1d

__all__ = ["balanced_random"]


def balanced_random(y, n_per_class: int = 2, random_state=None) -> np.ndarray:
    """Pick ``n_per_class`` random indices of every class in ``y``.

    This is the initial set of Gal et al. (2017): 2 labelled points per class.

    Parameters
    ----------
    y : array-like of shape (N,)
        Labels of the pool (known in simulation).
    n_per_class : int, default=2
        Points drawn from each class (without replacement); an int >= 1.
    random_state : int, RandomState instance or None, default=None
        Seeds the draw (:func:`sklearn.utils.check_random_state`).

    Returns
    -------
    indices : ndarray of shape (n_classes * n_per_class,)
        Sorted positions into ``y``.

    Raises
    ------
    ValueError
        If a class has fewer than ``n_per_class`` members, ``n_per_class``
        is not an int >= 1, or ``y`` is empty.

    References
    ----------
    .. [1] Y. Gal, R. Islam and Z. Ghahramani, "Deep Bayesian active learning
       with image data", ICML 2017, arXiv:1703.02910.

    Examples
    --------
    >>> from skdbal.initial import balanced_random
    >>> idx = balanced_random([0, 0, 1, 1, 1, 2, 2], n_per_class=2, random_state=0)
    >>> len(idx)
    6
    """
    y = column_or_1d(y)
    if isinstance(n_per_class, bool) or not isinstance(n_per_class, (int, np.integer)) or n_per_class < 1:
        raise ValueError(f"n_per_class must be an int >= 1; got {n_per_class!r}")
    if len(y) == 0:
        raise ValueError("y is empty")
    rng = check_random_state(random_state)
    chosen = []
    for c in np.unique(y):
        members = np.flatnonzero(y == c)
        if len(members) < n_per_class:
            raise ValueError(
                f"class {c!r} has {len(members)} member(s), fewer than n_per_class={n_per_class}"
            )
        chosen.append(rng.choice(members, n_per_class, replace=False))
    return np.sort(np.concatenate(chosen))
