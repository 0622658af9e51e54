"""Messages the strategies share: a batch filled with ineligible points."""
from __future__ import annotations


def warn_fill(who: str, n_eligible: int, n_pool: int, n_filled: int, threshold=None, eligible_word: str = "eligible",
              fill_words: str = "others of highest priority", stacklevel: int = 2) -> None:
    """The warning of a batch filled with ineligible points (:meth:`PoolScores.fill`, and a query on a
    cluster that fills the same way)."""
    import warnings

    at = f" (threshold {threshold:.3g})" if threshold is not None else ""
    warnings.warn(f"{who}: only {n_eligible} of the {n_pool} pool points are {eligible_word}{at}; the batch is "
                  f"filled with the {n_filled} {fill_words}", UserWarning, stacklevel=stacklevel + 1)
