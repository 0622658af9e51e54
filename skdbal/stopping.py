"""Stopping rules: when to stop buying labels.

Each rule is a scikit-learn estimator (``get_params``, ``clone`` and :class:`~sklearn.model_selection.GridSearchCV`
work on it; ``__init__`` only stores its parameters) that watches the run one step at a time. After every fit the
caller builds a :class:`StepView` of what the step gives (the step, the labelled count, the model's class
probabilities on a fixed *stop set* of unlabelled pool rows, optionally its predictive samples there, the batch just
bought, optionally the expected gain of the next batch) and hands it to each rule's :meth:`~StoppingRule.update`,
which returns a :class:`Verdict`: whether to stop, the quantity the rule watches and one plain sentence saying why.
:meth:`~StoppingRule.reset` forgets what a rule has seen; all it remembers is in attributes ending in ``_``.

The rules, with their sources' defaults:

- :class:`StabilizingPredictions`: Cohen's κ between consecutive models' predictions on the stop set, mean over
  a window of 3 steps ≥ 0.99 (Bloodgood & Vijay-Shanker 2009 [1]_, as small-text's ``KappaAverage``);
- :class:`OverallUncertainty`: the mean normalised entropy on the stop set < 0.05 (Zhu et al. 2008 [2]_);
- :class:`MaxConfidence`: the most uncertain row of the batch just bought < 0.001 (Zhu et al. 2008);
- :class:`ClassificationChange`: no prediction on the stop set changed (Zhu et al. 2008);
- :class:`ExpectedGain`: the next batch's expected accuracy gain under the model's own posterior
  (:func:`expected_accuracy_gain`, EPIG's [4]_ joint with ``max`` for ``log``) < 0.002 for 2 steps;
- :class:`CostRule`: the next batch's labels cost more than the errors they are expected to save (the cost
  model of Pullar-Strecker et al. 2023 [3]_);
- :class:`LabelBudget`: a number of labels; :class:`AnyOf`: any of several rules.

References
----------
.. [1] M. Bloodgood and K. Vijay-Shanker, "A method for stopping active learning based on stabilizing predictions
   and the need for user-adjustable stopping", CoNLL 2009.
.. [2] J. Zhu, H. Wang and E. Hovy, "Multi-criteria-based strategy to stop active learning for data annotation",
   COLING 2008.
.. [3] Z. Pullar-Strecker, K. Dost, E. Frank and J. Wicker, "Hitting the target: stopping active learning at the
   cost-based optimum", Machine Learning, 2023.
.. [4] F. Bickford Smith, A. Kirsch, S. Farquhar, Y. Gal, A. Foster and T. Rainforth, "Prediction-oriented
   Bayesian active learning", AISTATS 2023.

Examples
--------
>>> from skdbal.stopping import ClassificationChange
>>> rule = ClassificationChange()
>>> rule.update({"step": 0, "n_labels": 20, "stop_proba": [[0.9, 0.1], [0.3, 0.7]]}).stop
False
>>> rule.update({"step": 1, "n_labels": 30, "stop_proba": [[0.8, 0.2], [0.4, 0.6]]}).reason
'no prediction on the stop set changed since the last step (share changed 0 ≤ 0)'
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from numbers import Real
from typing import ClassVar, Dict, FrozenSet, List, Optional, Sequence

import numpy as np
from sklearn.base import BaseEstimator

from ._stopping_kernels import (
    _check_choice,
    _check_number,
    _count,
    _fmt,
    _next_batch_gain,
    _probabilities,
    _uncertainty,
    cohens_kappa,
    expected_accuracy_gain,
)
from ._validation import check_positive_int
from .uncertainty import check_samples

__all__ = ["Verdict", "StepView", "StoppingRule", "StabilizingPredictions", "OverallUncertainty", "MaxConfidence",
           "ClassificationChange", "ExpectedGain", "LabelBudget", "CostRule", "AnyOf", "cohens_kappa",
           "expected_accuracy_gain"]


# ---------------------------------------------------------------- verdicts and views
@dataclass(frozen=True)
class Verdict:
    """What a rule says after a step.

    Parameters
    ----------
    stop : bool
        Whether to stop now.
    value : float
        The quantity the rule watches (a mean κ, an uncertainty, an expected gain, a label count); NaN while it has
        none yet.
    reason : str
        One plain sentence for a person, saying what was measured against what.

    Examples
    --------
    >>> from skdbal.stopping import Verdict
    >>> v = Verdict(stop=True, value=120.0, reason="120 labels reached the budget of 100")
    >>> v.stop, v.value
    (True, 120.0)
    """

    stop: bool
    value: float
    reason: str


@dataclass(frozen=True, eq=False)
class StepView:
    """What one step of an active learning run shows the stopping rules.

    Built by the caller once per step, after the step's fit, and shared by every rule; a plain dict with these keys
    is accepted wherever a view is. Each rule reads only the fields it needs and says which one it misses.

    Parameters
    ----------
    step : int
        The step number, 0 for the fit on the initial set.
    n_labels : int
        Labels the model of this step was trained on (all labels paid for).
    stop_proba : array-like of shape (n_stop, n_classes), optional
        The model's class probabilities (the mean over its samples) on the stop set: fixed unlabelled pool rows, the
        same at every step, whose labels are never read. Taken as ``stop_samples.mean(0)`` when only the samples are
        given.
    stop_samples : array-like of shape (T, n_stop, n_classes), optional
        The model's predictive samples on the stop set (for :class:`ExpectedGain` and :class:`CostRule`).
    batch_proba : array-like of shape (k, n_classes), optional
        The class probabilities on this step's picks from the model that chose them (the previous step's); ``None``
        at step 0.
    batch_scores : array-like of shape (k,), optional
        The acquisition scores of this step's picks.
    batch_size : int, default=1
        Labels the next step buys (the loop's ``n_instances``).
    expected_gain : float, optional
        The next batch's expected accuracy gain, when the caller computes it (on the pool); otherwise the rules
        compute it from ``stop_samples``.
    n_unlabelled : int, optional
        Pool rows still unlabelled (:class:`CostRule`'s default count of predictions to come).

    Attributes
    ----------
    stop_pred : ndarray of shape (n_stop,) or None
        The predicted class (column) of each stop-set row.

    Examples
    --------
    >>> from skdbal.stopping import StepView
    >>> view = StepView(step=1, n_labels=30, stop_samples=[[[1.0, 0.0], [0.0, 1.0]], [[0.5, 0.5], [0.5, 0.5]]])
    >>> view.stop_proba.tolist(), view.stop_pred.tolist()
    ([[0.75, 0.25], [0.25, 0.75]], [0, 1])
    """

    step: int
    n_labels: int
    stop_proba: Optional[np.ndarray] = None
    stop_samples: Optional[np.ndarray] = None
    batch_proba: Optional[np.ndarray] = None
    batch_scores: Optional[np.ndarray] = None
    batch_size: int = 1
    expected_gain: Optional[float] = None
    n_unlabelled: Optional[int] = None
    stop_pred: Optional[np.ndarray] = field(init=False, default=None)

    def __post_init__(self):
        put = lambda name, value: object.__setattr__(self, name, value)  # the dataclass is frozen
        put("step", _count(self.step, "step", low=0))
        put("n_labels", _count(self.n_labels, "n_labels", low=0))
        put("batch_size", _count(self.batch_size, "batch_size", low=1))
        put("n_unlabelled", _count(self.n_unlabelled, "n_unlabelled", low=0, allow_none=True))
        samples = None if self.stop_samples is None else check_samples(self.stop_samples, name="stop_samples")
        proba = _probabilities(self.stop_proba, "stop_proba")
        if samples is not None:
            if proba is None:
                proba = samples.mean(axis=0)
            elif proba.shape != samples.shape[1:]:
                raise ValueError(f"stop_proba {proba.shape} and stop_samples {samples.shape} must cover the same "
                                 "rows and classes")
        put("stop_samples", samples)
        put("stop_proba", proba)
        put("stop_pred", None if proba is None else proba.argmax(axis=1))
        put("batch_proba", _probabilities(self.batch_proba, "batch_proba"))
        if self.batch_scores is not None:
            scores = np.asarray(self.batch_scores, dtype=np.float64).reshape(-1)
            if not np.isfinite(scores).all():
                raise ValueError("batch_scores contains NaN or infinity")
            put("batch_scores", scores)
        if self.expected_gain is not None:
            if isinstance(self.expected_gain, bool) or not isinstance(self.expected_gain, Real) \
                    or not np.isfinite(self.expected_gain):
                raise ValueError(f"expected_gain must be None or a finite number; got {self.expected_gain!r}")
            put("expected_gain", float(self.expected_gain))

    @classmethod
    def coerce(cls, view) -> "StepView":
        """``view`` as a :class:`StepView` (a view, or a dict of its fields)."""
        if isinstance(view, cls):
            return view
        if isinstance(view, Mapping):
            names = {f.name for f in fields(cls) if f.init}
            unknown = sorted(set(view) - names)
            if unknown:
                raise ValueError(f"unknown view keys {unknown}; a view has {sorted(names)}")
            return cls(**view)
        raise TypeError(f"a view must be a StepView or a dict of its fields; got {type(view).__name__}")

    def need(self, name: str, rule: str):
        """The field ``name``, or a ValueError saying that ``rule`` needs it."""
        value = getattr(self, name)
        if value is None:
            raise ValueError(f"{rule} needs the view's {name}; the step gave none")
        return value


# ---------------------------------------------------------------- the protocol
class StoppingRule(BaseEstimator):
    """Base class of the stopping rules: ``validate``, ``reset``, ``update(view) -> Verdict``.

    A subclass stores its parameters in ``__init__``, checks them in :meth:`_check_params` (called by
    :meth:`validate`, and by :meth:`update` before anything else), and implements :meth:`_update`, keeping what it
    remembers between steps in attributes ending in ``_`` (which :meth:`reset` deletes and
    :func:`~sklearn.base.clone` does not copy). Its class attribute ``name`` names its journal columns.

    Examples
    --------
    A rule that stops once the model predicts one class everywhere on the stop set:

    >>> import numpy as np
    >>> from skdbal.stopping import StoppingRule, Verdict
    >>> class OneClass(StoppingRule):
    ...     name = "one_class"
    ...     def _update(self, view):
    ...         n = len(np.unique(view.need("stop_pred", "OneClass")))
    ...         return Verdict(n == 1, float(n), f"the model predicts {n} classes on the stop set")
    >>> OneClass().update({"step": 0, "n_labels": 5, "stop_proba": [[0.6, 0.4], [0.9, 0.1]]})
    Verdict(stop=True, value=1.0, reason='the model predicts 1 classes on the stop set')
    """

    #: Stem of the rule's journal columns (``stop_<name>``, ``stop_<name>_value``).
    name: ClassVar[str] = "rule"
    #: The view fields the rule reads (see :meth:`needs`).
    reads: ClassVar[FrozenSet[str]] = frozenset()

    def needs(self) -> FrozenSet[str]:
        """The :class:`StepView` fields the rule reads, so that the caller computes only those.

        ``"stop_samples"`` may be replaced by the caller's own ``"expected_gain"``.
        """
        return self.reads

    def _check_params(self) -> None:
        """Raise a ValueError naming the first bad parameter."""

    def validate(self) -> "StoppingRule":
        """Check the parameters (a ValueError names the first bad one); return self."""
        self._check_params()
        return self

    def reset(self) -> None:
        """Forget every step seen (delete the attributes ending in ``_``)."""
        for key in [k for k in vars(self) if k.endswith("_") and not k.startswith("_")]:
            delattr(self, key)

    def update(self, view) -> Verdict:
        """Watch one more step (a :class:`StepView` or a dict of its fields) and return the :class:`Verdict`.

        The parameters are checked first; a view the rule cannot read raises a ValueError and leaves the rule as it
        was.
        """
        self.validate()
        view = StepView.coerce(view)
        saved = self._state()
        try:
            return self._update(view)
        except Exception:  # a bad view changes nothing: the rule forgets the half-made update
            self._set_state(saved)
            raise

    def _state(self):
        return {k: v for k, v in vars(self).items() if k.endswith("_") and not k.startswith("_")}

    def _set_state(self, state) -> None:
        StoppingRule.reset(self)
        self.__dict__.update(state)

    def _update(self, view: StepView) -> Verdict:
        raise NotImplementedError


class StabilizingPredictions(StoppingRule):
    """Stop once the model's predictions on the stop set have stopped changing (κ over a window).

    After every step, Cohen's κ (:func:`cohens_kappa`) between this model's predictions on the stop set and the
    previous model's; stop when the mean of the last ``window`` κ's is ≥ ``kappa`` (Bloodgood & Vijay-Shanker 2009;
    small-text's ``KappaAverage``). The first step has no κ, so the earliest stop is at step ``window``. With
    ``pairs="all"`` the mean is over every pair among the last ``window`` models instead (Pullar-Strecker et al.'s
    variant), and the earliest stop is at step ``window − 1``. The predictions must be deterministic for a given
    model (the same model twice gives κ = 1): an MC-dropout model's mean over masks seeded by row, or its eval pass.

    Parameters
    ----------
    window : int, default=3
    kappa : float, default=0.99
        In [−1, 1].
    pairs : {"consecutive", "all"}, default="consecutive"

    Attributes
    ----------
    kappas_ : list of float
        The κ's in the window (``"consecutive"``).
    history_ : list of ndarray
        The predictions kept: the last one (``"consecutive"``) or the last ``window`` (``"all"``).

    Examples
    --------
    >>> from skdbal.stopping import StabilizingPredictions
    >>> sure = {"stop_proba": [[0.9, 0.1], [0.2, 0.8]]}
    >>> rule = StabilizingPredictions(window=2, kappa=0.99)
    >>> [rule.update({"step": s, "n_labels": 10 * s, **sure}).stop for s in range(3)]
    [False, False, True]
    >>> rule.update({"step": 3, "n_labels": 30, **sure}).reason
    "the model's predictions on the stop set have stopped changing (mean κ 1.000 over the last 2 steps ≥ 0.99)"
    """

    name = "stabilizing_predictions"
    reads = frozenset({"stop_proba"})

    def __init__(self, window: int = 3, kappa: float = 0.99, pairs: str = "consecutive"):
        self.window = window
        self.kappa = kappa
        self.pairs = pairs

    def _check_params(self) -> None:
        check_positive_int(self.window, "window")
        _check_number(self.kappa, "kappa", low=-1.0, high=1.0)
        _check_choice(self.pairs, "pairs", ("consecutive", "all"))
        if self.pairs == "all" and self.window < 2:
            raise ValueError(f"window must be >= 2 with pairs='all' (a pair needs two models); got {self.window}")

    def _update(self, view: StepView) -> Verdict:
        pred = view.need("stop_pred", type(self).__name__)
        history: List[np.ndarray] = list(getattr(self, "history_", []))
        if history and len(history[-1]) != len(pred):
            raise ValueError(f"the stop set changed size: {len(history[-1])} rows before, {len(pred)} now; "
                             "a stop set must be fixed for the whole run")
        kappas = list(getattr(self, "kappas_", []))
        if self.pairs == "consecutive":
            if history:
                kappas = (kappas + [cohens_kappa(history[-1], pred)])[-self.window:]
            history = [pred]
            window_kappas = kappas
        else:
            history = (history + [pred])[-self.window:]
            window_kappas = [cohens_kappa(history[i], history[j])
                             for i in range(len(history)) for j in range(i + 1, len(history))]
        self.history_, self.kappas_ = history, kappas
        full = len(window_kappas) == (self.window if self.pairs == "consecutive" else
                                      self.window * (self.window - 1) // 2)
        if not window_kappas:
            return Verdict(False, float("nan"), "too early to tell whether the model's predictions have settled "
                                                "(no earlier model to compare with)")
        mean = float(np.mean(window_kappas))
        over = f"over the last {self.window} steps" if self.pairs == "consecutive" else \
            f"over all pairs of the last {self.window} models"
        if not full:
            done = len(window_kappas) if self.pairs == "consecutive" else len(history)
            return Verdict(False, mean, f"too early to tell whether the model's predictions have settled "
                                        f"(mean κ {mean:.3f}, {done} of the {self.window} "
                                        f"{'comparisons' if self.pairs == 'consecutive' else 'models'} needed)")
        if mean >= self.kappa:
            return Verdict(True, mean, f"the model's predictions on the stop set have stopped changing "
                                       f"(mean κ {mean:.3f} {over} ≥ {self.kappa:g})")
        return Verdict(False, mean, f"the model's predictions on the stop set are still changing "
                                    f"(mean κ {mean:.3f} {over} < {self.kappa:g})")


class ClassificationChange(StoppingRule):
    """Stop once (almost) no prediction on the stop set changes from one step to the next.

    Zhu, Wang & Hovy (2008), as small-text: stop when the share of stop-set rows whose predicted class changed since
    the previous step is ≤ ``threshold``; 0 means none changed. The first step never stops.

    Parameters
    ----------
    threshold : float, default=0.0
        In [0, 1].

    Attributes
    ----------
    previous_ : ndarray
        The previous step's predictions.

    Examples
    --------
    >>> from skdbal.stopping import ClassificationChange
    >>> rule = ClassificationChange(threshold=0.5)
    >>> _ = rule.update({"step": 0, "n_labels": 10, "stop_proba": [[0.9, 0.1], [0.2, 0.8]]})
    >>> verdict = rule.update({"step": 1, "n_labels": 20, "stop_proba": [[0.4, 0.6], [0.2, 0.8]]})
    >>> verdict.stop, verdict.value
    (True, 0.5)
    >>> print(verdict.reason)
    few predictions on the stop set changed since the last step (share changed 0.5 ≤ 0.5)
    """

    name = "classification_change"
    reads = frozenset({"stop_proba"})

    def __init__(self, threshold: float = 0.0):
        self.threshold = threshold

    def _check_params(self) -> None:
        _check_number(self.threshold, "threshold", low=0.0, high=1.0)

    def _update(self, view: StepView) -> Verdict:
        pred = view.need("stop_pred", type(self).__name__)
        previous = getattr(self, "previous_", None)
        if previous is not None and len(previous) != len(pred):
            raise ValueError(f"the stop set changed size: {len(previous)} rows before, {len(pred)} now; "
                             "a stop set must be fixed for the whole run")
        self.previous_ = pred
        if previous is None:
            return Verdict(False, float("nan"), "too early to tell: no earlier model to compare the predictions with")
        share = float(np.mean(previous != pred))
        what = f"(share changed {_fmt(share)} {'≤' if share <= self.threshold else '>'} {self.threshold:g})"
        if share <= self.threshold:
            lead = "no prediction" if share == 0 else "few predictions"
            return Verdict(True, share, f"{lead} on the stop set changed since the last step {what}")
        return Verdict(False, share, f"the model's predictions on the stop set still change {what}")


class OverallUncertainty(StoppingRule):
    """Stop once the model is, on average, sure of its predictions on the stop set.

    Zhu, Wang & Hovy (2008), as small-text: the mean over the stop set of the entropy of the class probabilities
    divided by ``log C`` (in [0, 1]), or with ``measure="least_confidence"`` of ``1 − max_c p_c`` (Pullar-Strecker
    et al.'s form, with ``threshold=0.01``); stop when it is < ``threshold``.

    Parameters
    ----------
    threshold : float, default=0.05
    measure : {"entropy", "least_confidence"}, default="entropy"

    Examples
    --------
    >>> from skdbal.stopping import OverallUncertainty
    >>> rule = OverallUncertainty(threshold=0.05)
    >>> round(rule.update({"step": 0, "n_labels": 10, "stop_proba": [[0.99, 0.01]]}).value, 6)
    0.080793
    >>> rule.update({"step": 1, "n_labels": 20, "stop_proba": [[0.999, 0.001]]}).stop
    True
    """

    name = "overall_uncertainty"
    reads = frozenset({"stop_proba"})

    def __init__(self, threshold: float = 0.05, measure: str = "entropy"):
        self.threshold = threshold
        self.measure = measure

    def _check_params(self) -> None:
        _check_number(self.threshold, "threshold", low=0.0)
        _check_choice(self.measure, "measure", ("entropy", "least_confidence"))

    def _update(self, view: StepView) -> Verdict:
        proba = view.need("stop_proba", type(self).__name__)
        value = float(np.mean(_uncertainty(proba, self.measure)))
        what = "normalised entropy" if self.measure == "entropy" else "uncertainty (1 − top probability)"
        if value < self.threshold:
            return Verdict(True, value, f"the model is sure of its predictions on the stop set "
                                        f"(mean {what} {_fmt(value)} < {self.threshold:g})")
        return Verdict(False, value, f"the model is still unsure of its predictions on the stop set "
                                     f"(mean {what} {_fmt(value)} ≥ {self.threshold:g})")


class MaxConfidence(StoppingRule):
    """Stop once even the most uncertain row of the batch just bought was nearly certain.

    Zhu, Wang & Hovy (2008): stop when every selected example's uncertainty is below ``threshold``, that is when the
    batch's largest uncertainty is. The uncertainty is read from the probabilities that the choosing model gave the
    picks (``batch_proba``): the entropy divided by ``log C``, or ``1 − max_c p_c``
    (``measure="least_confidence"``); with ``measure="score"`` it is the strategy's own acquisition scores
    (``batch_scores``), on whatever scale the strategy uses. Step 0 has no batch and never stops.

    Parameters
    ----------
    threshold : float, default=0.001
    measure : {"entropy", "least_confidence", "score"}, default="entropy"

    Examples
    --------
    >>> from skdbal.stopping import MaxConfidence
    >>> rule = MaxConfidence(threshold=0.1, measure="least_confidence")
    >>> verdict = rule.update({"step": 1, "n_labels": 12, "batch_proba": [[0.95, 0.05], [0.25, 0.75]]})
    >>> verdict.stop, verdict.value
    (False, 0.25)
    >>> print(verdict.reason)
    the batch just bought still held an uncertain row (largest uncertainty (1 − top probability) 0.25 ≥ 0.1)
    """

    name = "max_confidence"

    def needs(self) -> FrozenSet[str]:
        return frozenset({"batch_scores" if self.measure == "score" else "batch_proba"})

    def __init__(self, threshold: float = 0.001, measure: str = "entropy"):
        self.threshold = threshold
        self.measure = measure

    def _check_params(self) -> None:
        _check_choice(self.measure, "measure", ("entropy", "least_confidence", "score"))
        _check_number(self.threshold, "threshold", low=-np.inf if self.measure == "score" else 0.0)

    def _update(self, view: StepView) -> Verdict:
        if self.measure == "score":
            values, what = view.batch_scores, "acquisition score"
        else:
            values = view.batch_proba
            what = "normalised entropy" if self.measure == "entropy" else "uncertainty (1 − top probability)"
            values = None if values is None else _uncertainty(values, self.measure)
        if values is None and view.step > 0:
            view.need("batch_scores" if self.measure == "score" else "batch_proba", type(self).__name__)
        if values is None or not len(values):
            return Verdict(False, float("nan"), "no batch was bought at this step")
        value = float(np.max(values))
        if value < self.threshold:
            return Verdict(True, value, f"the model was nearly certain even of the most uncertain row of the batch "
                                        f"just bought (largest {what} {_fmt(value)} < {self.threshold:g})")
        return Verdict(False, value, f"the batch just bought still held an uncertain row "
                                     f"(largest {what} {_fmt(value)} ≥ {self.threshold:g})")


class ExpectedGain(StoppingRule):
    """Stop once the next batch is expected to raise the accuracy by less than ``min_gain``.

    The gain is the view's ``expected_gain`` when the caller gives one; otherwise the sum of the ``batch_size``
    largest expected accuracy gains (:func:`expected_accuracy_gain`) of the first ``n_candidates`` stop-set rows,
    against the first ``n_targets`` stop-set rows as targets (the stop set is a random draw of the pool, so its
    first rows are one too). It is the model's self-assessment under its own posterior and, summed over a batch,
    ignores the redundancy between picks, so it overestimates; stop when it is < ``min_gain`` for ``patience`` steps
    in a row.

    Parameters
    ----------
    min_gain : float, default=0.002
        In accuracy units (0.002 is 0.2 points).
    patience : int, default=2
    n_candidates : int, default=500
    n_targets : int, default=100

    Attributes
    ----------
    n_below_ : int
        Steps in a row whose gain was below ``min_gain``.

    Examples
    --------
    >>> from skdbal.stopping import ExpectedGain
    >>> rule = ExpectedGain(min_gain=0.01, patience=2)
    >>> [rule.update({"step": s, "n_labels": 10 * s, "expected_gain": g}).stop
    ...  for s, g in enumerate([0.05, 0.004, 0.003])]
    [False, False, True]
    """

    name = "expected_gain"
    reads = frozenset({"stop_samples"})

    def __init__(self, min_gain: float = 0.002, patience: int = 2, n_candidates: int = 500, n_targets: int = 100):
        self.min_gain = min_gain
        self.patience = patience
        self.n_candidates = n_candidates
        self.n_targets = n_targets

    def _check_params(self) -> None:
        _check_number(self.min_gain, "min_gain", low=0.0)
        check_positive_int(self.patience, "patience")
        check_positive_int(self.n_candidates, "n_candidates")
        check_positive_int(self.n_targets, "n_targets")

    def _update(self, view: StepView) -> Verdict:
        gain = _next_batch_gain(view, type(self).__name__, self.n_candidates, self.n_targets)
        below = gain < self.min_gain
        self.n_below_ = getattr(self, "n_below_", 0) + 1 if below else 0
        batch = f"the next batch of {view.batch_size} label{'s' if view.batch_size != 1 else ''}"
        if not below:
            return Verdict(False, gain, f"{batch} is expected to raise the accuracy by {_fmt(gain)} "
                                        f"(≥ {self.min_gain:g})")
        if self.n_below_ >= self.patience:
            return Verdict(True, gain, f"{batch} is expected to raise the accuracy by only {_fmt(gain)} "
                                       f"(< {self.min_gain:g} for {self.n_below_} steps in a row)")
        return Verdict(False, gain, f"{batch} is expected to raise the accuracy by only {_fmt(gain)} "
                                    f"(< {self.min_gain:g} for {self.n_below_} of the {self.patience} steps needed)")


class LabelBudget(StoppingRule):
    """Stop once ``max_labels`` labels are bought.

    Parameters
    ----------
    max_labels : int

    Examples
    --------
    >>> from skdbal.stopping import LabelBudget
    >>> rule = LabelBudget(max_labels=100)
    >>> rule.update({"step": 7, "n_labels": 90}).reason
    '90 labels bought, 10 left in the budget of 100'
    >>> rule.update({"step": 8, "n_labels": 100}).stop
    True
    """

    name = "label_budget"

    def __init__(self, max_labels: int):
        self.max_labels = max_labels

    def _check_params(self) -> None:
        check_positive_int(self.max_labels, "max_labels")

    def _update(self, view: StepView) -> Verdict:
        n = view.n_labels
        if n >= self.max_labels:
            return Verdict(True, float(n), f"{n} labels bought: the budget of {self.max_labels} is spent")
        return Verdict(False, float(n), f"{n} labels bought, {self.max_labels - n} left in the budget of "
                                        f"{self.max_labels}")


class CostRule(StoppingRule):
    """Stop once the next batch's labels would cost more than the errors they are expected to save.

    Pullar-Strecker et al.'s cost of a run, ``(1 − accuracy) · n_predictions · error_cost + n_labels · label_cost``,
    falls with one more batch of ``k`` labels only while ``gain · n_predictions · error_cost ≥ k · label_cost``,
    where ``gain`` is the batch's expected accuracy gain (as :class:`ExpectedGain` reads it). The rule stops when it
    is below; its value is the batch's expected net saving, ``gain · n_predictions · error_cost − k · label_cost``.

    Parameters
    ----------
    label_cost : float, default=1.0
        The cost of one label.
    error_cost : float, default=1.0
        The cost of one wrong prediction, in the same unit.
    n_predictions : int, optional
        Predictions the model will make once labelling stops; by default the pool rows still unlabelled (the view's
        ``n_unlabelled``).
    n_candidates, n_targets : int, default=500, 100
        As in :class:`ExpectedGain`.

    Examples
    --------
    >>> from skdbal.stopping import CostRule
    >>> rule = CostRule(label_cost=1.0, error_cost=1.0, n_predictions=10_000)
    >>> view = {"step": 5, "n_labels": 60, "batch_size": 10, "expected_gain": 0.0008}
    >>> verdict = rule.update(view)
    >>> verdict.stop, round(verdict.value, 6)                # saves 0.0008 * 10000 * 1 = 8 < 10 labels * 1
    (True, -2.0)
    >>> print(verdict.reason)
    the next 10 labels would cost 10 but save only 8 in errors (gain 0.0008 × 10000 predictions × 1 per error)
    """

    name = "cost"

    def needs(self) -> FrozenSet[str]:
        return frozenset({"stop_samples"} | ({"n_unlabelled"} if self.n_predictions is None else set()))

    def __init__(self, label_cost: float = 1.0, error_cost: float = 1.0, n_predictions: Optional[int] = None,
                 n_candidates: int = 500, n_targets: int = 100):
        self.label_cost = label_cost
        self.error_cost = error_cost
        self.n_predictions = n_predictions
        self.n_candidates = n_candidates
        self.n_targets = n_targets

    def _check_params(self) -> None:
        _check_number(self.label_cost, "label_cost", low=0.0, low_open=True)
        _check_number(self.error_cost, "error_cost", low=0.0, low_open=True)
        check_positive_int(self.n_predictions, "n_predictions", allow_none=True)
        check_positive_int(self.n_candidates, "n_candidates")
        check_positive_int(self.n_targets, "n_targets")

    def _update(self, view: StepView) -> Verdict:
        n = self.n_predictions if self.n_predictions is not None else view.n_unlabelled
        if n is None:
            raise ValueError("CostRule needs n_predictions, or the view's n_unlabelled; got neither")
        gain = _next_batch_gain(view, type(self).__name__, self.n_candidates, self.n_targets)
        saving = gain * n * self.error_cost
        cost = view.batch_size * self.label_cost
        value = saving - cost
        why = f"(gain {_fmt(gain)} × {n} predictions × {self.error_cost:g} per error)"
        labels = f"the next {view.batch_size} label{'s' if view.batch_size != 1 else ''}"
        if saving < cost:
            return Verdict(True, value, f"{labels} would cost {_fmt(cost)} but save only {_fmt(saving)} in errors "
                                        f"{why}")
        return Verdict(False, value, f"{labels} would cost {_fmt(cost)} and are expected to save "
                                     f"{_fmt(saving)} in errors {why}")


class AnyOf(StoppingRule):
    """Stop as soon as any of several rules says so.

    Every rule is updated at every step (so each keeps its window); the verdict's value is the number of rules that
    say stop, its reason theirs (or, when none does, each rule's own). The rules are named by their ``name`` (a
    second rule of one kind gets ``_2``, and so on), and their parameters are reachable as ``<name>__<parameter>``,
    so that :class:`~sklearn.model_selection.GridSearchCV` can tune them.

    Parameters
    ----------
    rules : list of StoppingRule

    Attributes
    ----------
    verdicts_ : dict of str to Verdict
        Each rule's verdict at the last step, by name.

    Examples
    --------
    >>> from skdbal.stopping import AnyOf, LabelBudget, OverallUncertainty
    >>> rule = AnyOf([OverallUncertainty(), LabelBudget(max_labels=50)])
    >>> rule.set_params(label_budget__max_labels=30).get_params()["label_budget__max_labels"]
    30
    >>> verdict = rule.update({"step": 2, "n_labels": 30, "stop_proba": [[0.5, 0.5]]})
    >>> verdict.stop, verdict.value, verdict.reason
    (True, 1.0, '30 labels bought: the budget of 30 is spent')
    >>> sorted(rule.verdicts_)
    ['label_budget', 'overall_uncertainty']
    """

    name = "any_of"

    def needs(self) -> FrozenSet[str]:
        return frozenset().union(*(rule.needs() for rule in self.rules))

    def __init__(self, rules: Sequence[StoppingRule]):
        self.rules = rules

    def _check_params(self) -> None:
        if not isinstance(self.rules, (list, tuple)) or not self.rules:
            raise ValueError(f"rules must be a non-empty list of stopping rules; got {self.rules!r}")
        bad = [r for r in self.rules if not isinstance(r, StoppingRule)]
        if bad:
            raise ValueError(f"rules must hold stopping rules only; got {bad[0]!r}")
        for rule in self.rules:
            rule.validate()

    def named_rules(self) -> Dict[str, StoppingRule]:
        """The rules by name, in order (a second rule of one kind is ``<name>_2``)."""
        named: Dict[str, StoppingRule] = {}
        for rule in self.rules:
            base = getattr(rule, "name", type(rule).__name__.lower())
            key, i = base, 1
            while key in named:
                i += 1
                key = f"{base}_{i}"
            named[key] = rule
        return named

    def get_params(self, deep: bool = True) -> dict:
        params = super().get_params(deep=False)
        if deep and isinstance(self.rules, (list, tuple)):
            for key, rule in self.named_rules().items():
                params[key] = rule
                if hasattr(rule, "get_params"):
                    params.update({f"{key}__{k}": v for k, v in rule.get_params(deep=True).items()})
        return params

    def set_params(self, **params) -> "AnyOf":
        if "rules" in params:
            super().set_params(rules=params.pop("rules"))
        named = self.named_rules() if isinstance(self.rules, (list, tuple)) else {}
        nested: Dict[str, dict] = {}
        for key, value in params.items():
            head, _, sub = key.partition("__")
            if head not in named or not sub:
                raise ValueError(f"invalid parameter {key!r} for AnyOf; valid are 'rules' and "
                                 f"'<rule>__<parameter>' with <rule> in {sorted(named)}")
            nested.setdefault(head, {})[sub] = value
        for head, sub_params in nested.items():
            named[head].set_params(**sub_params)
        return self

    def reset(self) -> None:
        super().reset()
        if isinstance(self.rules, (list, tuple)):
            for rule in self.rules:
                rule.reset()

    def _state(self):
        return super()._state(), [rule._state() for rule in self.rules]

    def _set_state(self, state) -> None:
        own, inner = state
        super()._set_state(own)
        for rule, saved in zip(self.rules, inner):
            rule._set_state(saved)

    def _update(self, view: StepView) -> Verdict:
        verdicts = {key: rule.update(view) for key, rule in self.named_rules().items()}
        self.verdicts_ = verdicts
        stopping = [v.reason for v in verdicts.values() if v.stop]
        reason = "; ".join(stopping or [v.reason for v in verdicts.values()])
        return Verdict(bool(stopping), float(len(stopping)), reason)
