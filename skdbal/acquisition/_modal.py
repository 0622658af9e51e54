"""modAL's return conventions: a strategy adapted to the installed modAL."""
from __future__ import annotations

from typing import Callable, Optional

from .base import StrategyDecorator

__all__ = ["to_modal"]


def to_modal(strategy: Callable, modal_version: Optional[str] = None) -> Callable:
    """Adapt a strategy to the installed modAL's return convention.

    modAL 0.4.2.x expects ``(indices, scores)``, which our strategies return
    already; modAL ≤ 0.4.1 expects bare indices (it returns a tuple result
    unchanged). This wrapper returns what the installed version expects.

    Parameters
    ----------
    strategy : callable
        A strategy following our protocol.
    modal_version : str, optional
        Defaults to the installed ``modAL-python`` version.

    Returns
    -------
    callable

    Examples
    --------
    >>> from skdbal.acquisition import bald
    >>> from skdbal.acquisition import to_modal
    >>> to_modal(bald, "0.4.2.1") is bald
    True
    """
    if modal_version is None:
        from importlib.metadata import version

        modal_version = version("modAL-python")
    parts = tuple(int(p) for p in modal_version.split(".")[:3] if p.isdigit())
    if parts >= (0, 4, 2):
        return strategy
    return _BareIndices(strategy)


class _BareIndices(StrategyDecorator):
    """modAL <= 0.4.1's convention: calling it returns the indices alone.

    Still a :class:`Strategy` (``acquire`` is the wrapped one's), so our
    learner seeds it as it seeds the strategy it wraps.
    """

    def __call__(self, estimator, X_pool, n_instances: int = 1, **kwargs):
        return self.acquire(estimator, X_pool, n_instances, **kwargs).indices
