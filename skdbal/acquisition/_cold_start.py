"""The hand-off from a cold-start strategy to a model-based one: a strategy decorator.

``cold_start(bald)`` picks with TypiClust while the labels are too few for the model to be trusted, and with
BALD from then on; the rule that says when is a parameter (:data:`RULES`). Every query decides afresh, from
what it is given (the learner's labelled rows, the model), so the decorator keeps no state between queries.
"""
from __future__ import annotations

from typing import Callable, Union

import numpy as np

from ..predictive import as_predictive
from ._registry import display_name, get_strategy, register
from ._scoring import DEFAULT_CHUNK_SIZE, map_chunks
from ._selection import _PROTOCOL_KEYWORDS
from ._typiclust import labelled_rows_of
from .base import Acquisition, Strategy, StrategyDecorator, as_strategy

__all__ = ["ColdStart", "cold_start", "RULES"]

#: The rules a name may give, and what ``at`` means for each: the strategy hands off when the measure reaches ``at``.
RULES = {
    "labels": "labelled rows",
    "per_class": "labelled rows per class of the model",
    "seen": "labels of the rarest class of the model",
    "confidence": "mean top-class probability over the pool",
}


class _TopProbability:
    """``X_chunk -> max_c p̄(c | x)``, the mean prediction's top class probability: picklable."""

    def __init__(self, predictive):
        self.predictive = predictive

    def __call__(self, X_chunk):
        return np.asarray(self.predictive.proba_samples(X_chunk), dtype=np.float64).mean(axis=0).max(axis=1)


def _labels_of(estimator, y_labelled=None):
    """The labelled rows' labels: ``y_labelled`` when given, else the learner's ``y_training_`` (a modAL
    learner's ``y_training``), else None."""
    if y_labelled is not None:
        return np.asarray(y_labelled)
    for name in ("y_training_", "y_training"):
        y = getattr(estimator, name, None)
        if y is not None:
            return np.asarray(y)
    return None


def _classes_of(estimator):
    """The model's classes (a learner's or a pipeline's, which say their model's), or None; read as an
    attribute, so that a query reads the model through the predictive interface once, on the side that picks."""
    classes = getattr(estimator, "classes_", None)
    if classes is None:
        classes = getattr(getattr(estimator, "estimator_", None), "classes_", None)
    return None if classes is None else np.asarray(classes)


def _only_options(strategy, kwargs) -> dict:
    """The keywords ``strategy`` takes: the protocol's, pool-aligned ones and its own options."""
    options = strategy.call_options()
    if options is None:
        return dict(kwargs)
    return {k: v for k, v in kwargs.items() if k in options or k in _PROTOCOL_KEYWORDS or k.endswith("_pool")}


class ColdStart(StrategyDecorator):
    """Pick with a cold-start strategy until a rule says the model is warm, then with the wrapped strategy.

    Uncertainty read from a model trained on a handful of labels is unreliable, and typical or covering
    points of an embedding (TypiClust, ProbCover) make better first labels (Hacohen et al. 2022: the
    "low budget" regime); past it, the model-based strategy (BALD, BatchBALD, EPIG) does better. This
    decorator is that hand-off: each query asks ``rule`` whether the model is warm, and the batch is the
    cold strategy's while it is not and the wrapped strategy's from then on, unchanged (the same picks and
    scores as a call of that strategy alone on the same model and pool).

    The labelled rows are those of the learner the strategy is called with
    (:class:`~skdbal.ActiveLearner`'s ``X_training_`` and ``y_training_``, a modAL learner's) or the
    ``X_labelled`` and ``y_labelled`` keywords of a call; a bare model has none, and so is cold (until a
    ``confidence`` rule, which reads the model, says otherwise). With no labelled row the query is always
    cold, and the model is not read.

    Parameters
    ----------
    strategy : Strategy or callable
        The warm strategy, used once the rule says so.
    cold : str or Strategy, default="typiclust"
        The cold-start strategy: a registered name (``"typiclust"``, ``"probcover"``, ``"random"``) or a
        strategy.
    rule : {"per_class", "labels", "seen", "confidence"} or callable, default="per_class"
        When to hand off: once the measure reaches ``at``.

        - ``"per_class"``: labelled rows per class, ``n_labelled / n_classes`` (the model's classes). The
          budget criterion of Hacohen et al.: the low budget is counted in labels per class.
        - ``"labels"``: labelled rows, a fixed count.
        - ``"seen"``: labels of the rarest class; 0 while a class of the model has no label, so that
          ``at=1`` hands off once every class is seen.
        - ``"confidence"``: the model's mean top-class probability over the pool, ``mean_x max_c p̄(c|x)``
          (a model-based rule: it reads the model's predictive samples of the pool, a pass of its own).
        - A callable ``rule(estimator, X_pool, y_labelled) -> float``: a measure of your own, compared with
          ``at`` (``y_labelled`` is None where the labels are not known).
    at : float, default=10
        The measure's value at which the strategy hands off (warm when ``measure >= at``). The default,
        ten labels a class, was chosen by measurement (``benchmarks/bench_representation.py``, MNIST and
        Fashion-MNIST, a pool encoder's embeddings, spreading and last-layer heads, 3 seeds, up to 300
        labels): a hand-off at four labels a class fell behind TypiClust alone on Fashion-MNIST; one at
        ten kept up with it on both under the spreading head, and under the last-layer head was ahead
        on MNIST and behind on Fashion-MNIST by the end.
    chunk_size : int, default=2048
        Pool rows read at a time by the ``confidence`` rule.

    Notes
    -----
    ``info`` of each query records which side picked: ``info["side"]`` is ``"cold"`` or ``"warm"``,
    ``info["picked_by"]`` that strategy's name as people read it, ``info["handoff_measure"]`` the rule's
    measure at this query and ``info["handoff_at"]`` the value it is compared with (with the picking
    strategy's own ``info``). A learner keeps them in its history, so a report can show the switch.

    The rule is decided at each query, from that query's labels and model: the count rules only grow with
    the labels, so they switch once; the ``confidence`` rule may go back to cold if a retrain loses
    confidence. The decorator does not reduce over a pool read in chunks (``skdbal.dask.query_pool``): its
    cold side needs the whole embedding; call the warm strategy itself there.

    Which rule and which ``at`` suit a data set is an open question: the count rules are cheap and
    predictable, ``"seen"`` waits for a rare class, and ``"confidence"`` follows the model but its scale
    depends on the model's calibration (a head that is never confident never hands off).

    References
    ----------
    .. [1] G. Hacohen, A. Dekel and D. Weinshall, "Active learning on a budget: opposite strategies suit
       high and low budgets", ICML 2022, arXiv:2202.02794.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from skdbal.acquisition import BALD, ColdStart, typiclust
    >>> rng = np.random.RandomState(0)
    >>> X = np.concatenate([rng.normal(0, 1, (40, 2)), rng.normal(6, 1, (40, 2))])
    >>> y = np.repeat([0, 1], 40)
    >>> clf = LogisticRegression().fit(X[[0, 40]], y[[0, 40]])
    >>> handoff = ColdStart(BALD(), cold="typiclust", rule="per_class", at=2)
    >>> acq = handoff.acquire(clf, X, 2, random_state=0, X_labelled=X[[0, 40]], y_labelled=y[[0, 40]])
    >>> acq.info["side"], acq.info["picked_by"], acq.info["handoff_measure"]     # 2 labels, 2 classes: 1 each
    ('cold', 'TypiClust', 1.0)
    >>> same = typiclust.acquire(clf, X, 2, random_state=0, X_labelled=X[[0, 40]])
    >>> acq.indices.tolist() == same.indices.tolist()
    True
    >>> labelled = [0, 1, 40, 41]
    >>> acq = handoff.acquire(clf, X, 2, random_state=0, X_labelled=X[labelled], y_labelled=y[labelled])
    >>> acq.info["side"], acq.info["picked_by"]                                      # 2 each: BALD's turn
    ('warm', 'BALD')
    """

    name = "cold_start"
    display_name = "cold start"
    name_params = ("cold", "rule", "at")  # cold_start(bald,typiclust,per_class,2)

    def __init__(self, strategy, cold: Union[str, Strategy] = "typiclust", rule: Union[str, Callable] = "per_class",
                 at: float = 10, *, chunk_size: int = DEFAULT_CHUNK_SIZE):
        super().__init__(strategy)
        self.cold = cold
        self.rule = rule
        self.at = at
        self.chunk_size = chunk_size

    # never on a pool read in chunks (refused, naming this class): the cold side needs the whole embedding
    plan_chunks = Strategy.plan_chunks

    def check_params(self) -> None:
        """Refuse an unknown rule or cold strategy, or an ``at`` that is not a finite number."""
        from .._validation import check_positive_int

        if not callable(self.rule) and self.rule not in RULES:
            raise ValueError(f"rule must be one of {sorted(RULES)} or a callable; got {self.rule!r}")
        at = self.at
        if isinstance(at, bool) or not isinstance(at, (int, float, np.integer, np.floating)) or not np.isfinite(at):
            raise ValueError(f"at must be a finite number (the rule's measure at which to hand off); got {at!r}")
        self.cold_strategy()
        check_positive_int(self.chunk_size, "chunk_size")

    def cold_strategy(self) -> Strategy:
        """The cold-start strategy: ``cold`` itself, or the registered strategy it names."""
        if isinstance(self.cold, str):
            return get_strategy(self.cold)  # an unknown name is a ValueError listing the known ones
        if not callable(self.cold):
            raise ValueError(f"cold must be a strategy or a registered name; got {self.cold!r}")
        return as_strategy(self.cold)

    def call_options(self):
        """The options of either side and this decorator's own (None if either side's are unknown)."""
        warm = super().call_options()
        cold = self.cold_strategy().call_options()
        if warm is None or cold is None:
            return None
        return frozenset(warm | cold | {"X_labelled", "y_labelled"})

    def measure(self, estimator, X_pool, *, X_labelled=None, y_labelled=None) -> float:
        """The rule's measure for this query (the strategy is warm when it is at least ``at``).

        Parameters
        ----------
        estimator : estimator
            The model or learner the query is given.
        X_pool : array-like of shape (N, ...)
            The (checked) pool.
        X_labelled, y_labelled : array-like, optional
            The labelled rows and their labels, instead of the learner's.

        Returns
        -------
        float
            0 with no labelled row, whatever the rule.
        """
        return self._measure(estimator, X_pool, X_labelled, y_labelled)[1]

    def _measure(self, estimator, X_pool, X_labelled, y_labelled):
        """``(n_labelled, measure)``."""
        self.check_params()
        rows = labelled_rows_of(estimator, X_labelled)
        y = _labels_of(estimator, y_labelled)
        n_labelled = len(rows) if rows is not None else (len(y) if y is not None else 0)
        if n_labelled == 0:
            return 0, 0.0
        if callable(self.rule):
            return n_labelled, float(self.rule(estimator, X_pool, y))
        if self.rule == "labels":
            return n_labelled, float(n_labelled)
        if self.rule == "confidence":
            top = map_chunks(_TopProbability(as_predictive(estimator)), X_pool, chunk_size=int(self.chunk_size))
            return n_labelled, float(np.mean(top))
        classes = _classes_of(estimator)
        if classes is None:
            raise ValueError(f"rule={self.rule!r} counts labels per class of the model, and "
                             f"{type(estimator).__name__} has no classes_; use rule='labels'")
        if self.rule == "per_class":
            return n_labelled, n_labelled / len(classes)
        if y is None:   # "seen"
            raise ValueError("rule='seen' needs the labelled rows' labels: call it through a learner or give "
                             "y_labelled")
        return n_labelled, float(min(np.sum(y == c) for c in classes))

    def acquire_checked(self, estimator, X_pool, n_instances: int, *, X_labelled=None, y_labelled=None,
                        **kwargs) -> Acquisition:
        """The cold strategy's batch while the rule's measure is below ``at``, the wrapped strategy's after
        (on checked input); ``info`` says which (see Notes)."""
        n_labelled, value = self._measure(estimator, X_pool, X_labelled, y_labelled)
        warm = n_labelled > 0 and value >= self.at     # no label: cold, whatever ``at``
        if warm:
            side = as_strategy(self.strategy)
            acq = side.acquire_checked(estimator, X_pool, n_instances, **_only_options(side, kwargs))
        else:
            side = self.cold_strategy()
            options = _only_options(side, dict(kwargs, X_labelled=X_labelled))
            if X_labelled is None:
                options.pop("X_labelled", None)
            acq = side.acquire_checked(estimator, X_pool, n_instances, **options)
        info = {**acq.info, "side": "warm" if warm else "cold", "picked_by": display_name(side),
                "handoff_measure": value, "handoff_at": self.at}
        return Acquisition(acq.indices, acq.scores, info)


register(ColdStart)


def cold_start(strategy, cold: Union[str, Strategy] = "typiclust", rule: Union[str, Callable] = "per_class",
               at: float = 10, *, chunk_size: int = DEFAULT_CHUNK_SIZE) -> ColdStart:
    """Hand off from ``cold`` to ``strategy`` once ``rule``'s measure reaches ``at``.

    See :class:`ColdStart` for the parameters.

    Returns
    -------
    ColdStart

    Examples
    --------
    >>> from skdbal.acquisition import batch_bald, cold_start, get_strategy
    >>> cold_start(batch_bald, "probcover", "seen", 1)
    ColdStart(at=1, cold='probcover', rule='seen', strategy=BatchBALD())
    >>> get_strategy("cold_start(epig,typiclust,labels,30)")
    ColdStart(at=30, rule='labels', strategy=EPIG())
    """
    return ColdStart(strategy, cold, rule, at, chunk_size=chunk_size)
