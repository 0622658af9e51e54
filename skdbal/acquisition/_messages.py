"""Messages the strategies share: a batch filled with ineligible points, a strategy refused on a chunked pool."""
from __future__ import annotations


def warn_fill(who: str, n_eligible: int, n_pool: int, n_filled: int, threshold=None, eligible_word: str = "eligible",
              fill_words: str = "others of highest priority", stacklevel: int = 2) -> None:
    """The warning of a batch filled with ineligible points (:meth:`PoolScores.fill`, and a query on a
    cluster that fills the same way)."""
    import warnings

    at = f" (threshold {threshold:.3g})" if threshold is not None else ""
    warnings.warn(f"{who}: only {n_eligible} of the {n_pool} pool points are {eligible_word}{at}; the batch is "
                  f"filled with the {n_filled} {fill_words}", UserWarning, stacklevel=stacklevel + 1)


def chunk_refusal(strategy, why: str = "") -> str:
    """The message of a strategy refused on a pool read in chunks (a ``TypeError``'s): it names the strategy
    (a plain callable is a ``CallableStrategy``) and says which strategies a chunked pool takes."""
    name = type(strategy).__name__ if hasattr(strategy, "acquire") else "CallableStrategy"
    why = why or f"{name} does not say how its query reduces over a pool read in chunks (plan_chunks)"
    return (f"{why}. A pool read in chunks (skdbal.dask.query_pool) takes pointwise strategies (BALD, max "
            f"entropy, variation ratios, mean std, EPIG, a SamplesStrategy of your own), random sampling and "
            f"BatchBALD, under a noise filter and a diversity penalty, and stochastic batches over a pointwise "
            f"strategy; not {name}")
