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


def strategy_names(which) -> str:
    """The display names of the registered strategies whose class ``which`` accepts, joined for a sentence
    ("BALD, max entropy and EPIG"): refusals list what the registry holds, never a list of their own."""
    from ._registry import STRATEGIES, display_name

    names = [display_name(s) for s in STRATEGIES.values() if which(type(s))]
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else "".join(names)


def _reduces_over_chunks(cls) -> bool:
    """Whether a strategy class says how its query reduces over chunks: its ``plan_chunks`` is not the default,
    the one its base-most class defines (``Strategy.plan_chunks``, which refuses). Compared by identity, the
    default found on the class's own bases, since the bases import this module."""
    default = [k.__dict__["plan_chunks"] for k in cls.__mro__ if "plan_chunks" in k.__dict__][-1]
    return cls.plan_chunks is not default


def chunk_refusal(strategy, why: str = "") -> str:
    """The message of a strategy refused on a pool read in chunks (a ``TypeError``'s): it names the strategy
    (a plain callable is a ``CallableStrategy``) and says which strategies a chunked pool takes (those of the
    registry whose class says how its query reduces over chunks, ``plan_chunks``)."""
    from ._registry import DECORATORS

    name = type(strategy).__name__ if hasattr(strategy, "acquire") else "CallableStrategy"
    why = why or f"{name} does not say how its query reduces over a pool read in chunks (plan_chunks)"
    takes = strategy_names(_reduces_over_chunks)
    decorators = ", ".join(f"{word}(...)" for word, (cls, _) in DECORATORS.items()
                           if _reduces_over_chunks(cls))
    return (f"{why}. A pool read in chunks (skdbal.dask.query_pool) takes {takes} or a SamplesStrategy of your "
            f"own, alone or under {decorators}; not {name}")
