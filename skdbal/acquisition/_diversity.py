"""The cosine diversity penalty: a strategy decorator."""
from __future__ import annotations

from typing import Callable, Optional, Union

import numpy as np

from .. import diversity
from .._validation import check_n_instances, check_pool, check_positive_int, take_rows
from ..predictive import as_predictive
from ._base import Acquisition, StrategyDecorator, as_strategy, pool_scores_of

__all__ = ["DiversityPenalty", "diversity_penalty"]

_FEATURES = ("input", "embedding")


def model_with(estimator, method: str):
    """``(predictive, model)``: the predictive view of ``estimator`` and the model behind it that has
    ``method`` (a learner's fitted ``estimator_`` when the learner itself has none); ``model`` lacks
    ``method`` if neither has it, for the caller to say why it needs it."""
    predictive = as_predictive(estimator)
    model = predictive.model
    if not hasattr(model, method) and hasattr(getattr(model, "estimator_", None), method):
        model = model.estimator_  # a learner: its fitted model
    return predictive, model


def _embedding(estimator, X) -> np.ndarray:
    """The model's own features of ``X``: its ``transform`` (a network's
    penultimate layer), after a pipeline's earlier steps."""
    predictive, model = model_with(estimator, "transform")
    if not hasattr(model, "transform"):
        raise TypeError(f"features='embedding' needs a model with transform (the network's features); "
                        f"{type(model).__name__} has none: use features='input' or a callable")
    return np.asarray(model.transform(predictive._prepare(X)))


class DiversityPenalty(StrategyDecorator):
    """Build the batch greedily, penalising similarity to the points already picked.

    The first pick is the wrapped strategy's best point; each next pick
    maximises its normalised score minus ``weight`` times its largest cosine
    similarity to the points picked so far in this batch (Anonymous, n.d.,
    §5.2). Scores are normalised to [0, 1] by the range over the pool's
    eligible points (:func:`skdbal.diversity.normalize_scores`), so
    ``weight`` means the same for every strategy: 0.1 trades a tenth of the
    pool's score range for a cosine of 1.

    For a strategy with pool scores (:meth:`Strategy.pool_scores`: our
    pointwise strategies, and the noise filter wrapping one) the pool is
    scored once and every point is a candidate, less those that provably
    cannot enter the batch (:func:`skdbal.diversity.candidate_bound`): the
    result is the exact greedy batch. A filter inside keeps its untrusted
    points out (its rejects are the untrusted points ranked above the
    batch's lowest-ranked pick). For any other strategy (a modAL function)
    the candidates are its top ``n_candidates``, ranked by its scores (or by
    rank when it returns none).

    Parameters
    ----------
    strategy : Strategy or callable
        The strategy whose scores are penalised.
    weight : float, default=0.1
        ``w``. 0 is the wrapped strategy's top-k; negative values favour
        points similar to those picked (uniform batches).
    features : "input", "embedding" or callable, default="input"
        The space of the cosine: the flattened inputs (as the seed), the
        model's ``transform`` (a network's penultimate features), or
        ``features(X) -> (n, d)``. Only the candidates are transformed.
    n_candidates : int, optional
        Keep only the wrapped strategy's best ``n_candidates`` points (at
        least ``n_instances``): bounds the work on a large pool. None: the
        exact candidate set for a strategy with pool scores, and
        ``max(10 · n_instances, 100)`` for one without.

    Notes
    -----
    The batch is chosen from the wrapped strategy's *scores* (and its
    ranking, for the candidates): a ``select`` of its own, such as a
    stochastic sampler, does not choose the batch here, since the greedy
    penalised selection replaces it.

    The cost beyond scoring is ``n_instances · K · d`` for ``K`` candidates
    of ``d`` features. For BALD on a 2,000-point MNIST pool at ``w = 0.1`` it
    is a few milliseconds, next to seconds of scoring (see
    docs/performance.md).

    References
    ----------
    .. [1] Anonymous (candidate number 1091797), "Uncertainty in deep
       learning", anonymised report, undated (§5.2, §6.3, Fig 7).

    Examples
    --------
    >>> import numpy as np
    >>> from skdbal.acquisition import diversity_penalty, max_entropy
    >>> class Fixed:                                   # entropies 0.69, 0.69, 0.33
    ...     def predict_proba(self, X):
    ...         return np.array([[0.5, 0.5], [0.5, 0.5], [0.9, 0.1]])
    >>> X = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])    # points 0 and 1 are copies
    >>> max_entropy(Fixed(), X, 2)[0].tolist()
    [0, 1]
    >>> # normalised scores 1, 1, 0; the copy is worth 1 - w·cos = 1 - w, point 2 is worth 0
    >>> diversity_penalty(max_entropy, weight=0.5)(Fixed(), X, 2)[0].tolist()
    [0, 1]
    >>> diversity_penalty(max_entropy, weight=1.5)(Fixed(), X, 2)[0].tolist()
    [0, 2]
    """

    def __init__(self, strategy, weight: float = 0.1, *, features: Union[str, Callable] = "input",
                 n_candidates: Optional[int] = None):
        super().__init__(strategy)
        self.weight = weight
        self.features = features
        self.n_candidates = n_candidates

    def _check_params(self):
        w = self.weight
        if isinstance(w, bool) or not isinstance(w, (int, float, np.integer, np.floating)) or not np.isfinite(w):
            raise ValueError(f"weight must be a finite float; got {w!r}")
        if not callable(self.features) and self.features not in _FEATURES:
            raise ValueError(f"features must be 'input', 'embedding' or a callable; got {self.features!r}")
        if self.n_candidates is not None:
            check_positive_int(self.n_candidates, "n_candidates")

    def _features_of(self, estimator, X) -> np.ndarray:
        if callable(self.features):
            F = np.asarray(self.features(X))
        elif self.features == "embedding":
            F = _embedding(estimator, X)
        else:
            F = np.asarray(X)
        F = F.reshape(len(F), -1)
        if len(F) != len(X):
            raise ValueError(f"the features have {len(F)} rows for {len(X)} candidates")
        if not np.issubdtype(F.dtype, np.number):
            raise TypeError(f"the features must be numeric; got dtype {F.dtype}")
        return F

    def acquire(self, estimator, X_pool, n_instances: int = 1, **kwargs) -> Acquisition:
        self._check_params()
        X_pool = check_pool(X_pool)
        n_instances = check_n_instances(n_instances, len(X_pool))
        base = as_strategy(self.strategy)
        ps = pool_scores_of(base, estimator, X_pool, n_instances, **kwargs)
        if ps is None:
            return self._among_top(base, estimator, X_pool, n_instances, kwargs)
        ranked = ps.order if ps.eligible is None else ps.order[ps.eligible[ps.order]]  # eligible, best first
        info = {}
        if len(ranked) < n_instances:  # nothing to choose: all of them, then the fill
            picks = ranked
        else:
            s = diversity.normalize_scores(ps.scores[ranked])  # in ranking order
            keep = s >= diversity.candidate_bound(s, n_instances, self.weight)
            if self.n_candidates is not None:
                keep &= np.arange(len(ranked)) < max(int(self.n_candidates), n_instances)
            cand = ranked[keep]
            F = self._features_of(estimator, take_rows(X_pool, cand))
            pos, _ = diversity.greedy_cosine_batch(s[keep], F, n_instances, self.weight)
            picks = cand[pos]
            info["n_candidates"] = int(len(cand))
        return ps.acquisition(picks, n_instances, type(self).__name__, info=info)

    def _among_top(self, base, estimator, X_pool, n_instances, kwargs) -> Acquisition:
        k = self.n_candidates if self.n_candidates is not None else max(10 * n_instances, 100)
        k = min(max(int(k), n_instances), len(X_pool))
        acq = base.acquire(estimator, X_pool, k, **kwargs)
        cand = np.asarray(acq.indices, dtype=np.intp)
        if acq.scores is not None:
            s = diversity.normalize_scores(acq.scores)
        else:  # bare indices, best first: by rank
            s = np.linspace(1.0, 0.0, len(cand)) if len(cand) > 1 else np.ones(len(cand))
        F = self._features_of(estimator, take_rows(X_pool, cand))
        pos, _ = diversity.greedy_cosine_batch(s, F, n_instances, self.weight)
        info = {**acq.info, "n_candidates": int(len(cand))}
        return Acquisition(cand[pos], None if acq.scores is None else np.asarray(acq.scores)[pos], info)


def diversity_penalty(strategy, weight: float = 0.1, *, features: Union[str, Callable] = "input",
                      n_candidates: Optional[int] = None) -> DiversityPenalty:
    """Decorate ``strategy`` with the cosine diversity penalty.

    See :class:`DiversityPenalty` for the parameters.

    Parameters
    ----------
    strategy : Strategy or callable
    weight : float, default=0.1
    features : "input", "embedding" or callable, default="input"
    n_candidates : int, optional

    Returns
    -------
    DiversityPenalty

    Examples
    --------
    >>> from skdbal.acquisition import bald, diversity_penalty, noise_filter
    >>> diversity_penalty(noise_filter(bald, "dynamic"), 0.1)
    DiversityPenalty(strategy=NoiseFilter(strategy=BALD(), threshold='dynamic'))
    """
    return DiversityPenalty(strategy, weight, features=features, n_candidates=n_candidates)
