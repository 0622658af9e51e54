"""Second looks: which labels are worth a second label, and which flags a later model withdraws.

A label is judged, when it arrives, by the model of the moment, which has not
seen it: its probability ``p = p̄(y = given | x)``, its guess and the guess's
probability ``c``. Under symmetric noise of rate ``ε`` over ``C`` classes, a
*calibrated* model's label is more likely wrong than right exactly when
``p < τ(ε)`` (:func:`skdbal.noisy_labels.bayes_threshold`): flagging those, and
only those, gives each flag a precision above 1/2. The models of a labelling
session are not calibrated, though: the first ones, on a few dozen labels,
are sure of wrong guesses, and flagged right labels by the handful (8 flags,
all right labels, on the demo). So the rule measures the judging models'
calibration on what they had not seen, prequentially:

- over the last ``TRUST_WINDOW`` judged labels, the share whose label the
  model guessed (its prequential guess accuracy ``g``) against the share
  its probabilities promised (the mean of ``c``); their ratio of
  disagreements is ``κ = max(1, (1 − g)/(1 − mean c))``
  (:func:`skdbal.noisy_labels.calibration_ratio`);
- a model that disagrees ``κ`` times as often as it says understates its
  error ``κ``-fold, so its ``p`` is read as ``κ·p``, and the label is flagged
  when ``flip_posterior(κ·p) > 1/2``, that is when ``p < τ(ε)/κ``;
- ``κ`` is measured as if the annotators never erred (the model gets no
  benefit of the doubt: with noise ``ε`` the labels would agree with
  ``ĝ = (1 − ε)·c + ε·(1 − c)/(C − 1)``); ``ε`` is then estimated by EM
  (:func:`skdbal.noisy_labels.estimate_noise_rate`) on the corrected probabilities
  ``min(κ·p, 1)`` of the same window;
- neither is trusted on fewer than ``MIN_TRUSTED`` judged labels: the
  standard error of a rate near ``ε = 0.1`` measured on ``n`` labels,
  ``sqrt(ε(1 − ε)/n)``, is below ``ε/2`` from ``n = 4(1 − ε)/ε = 36`` on;
- one annotator's labels cannot tell an annotator's slip from the model's
  blind spot (both are a label the model finds unlikely), so EM reads a
  model's blind spots as noise: on clean labels the demo's models gave
  estimates up to 0.18. An estimate above ``MAX_NOISE`` (0.15) is taken for
  blind spots, and nothing is flagged; so are two or more doubted labels of
  one class under one model (:func:`choose_flags`), since symmetric noise
  spreads wrong labels over the classes.

A fixed number given as the rule is taken as the threshold itself, as the
user asked. A pending flag is checked again with each new model, before it
is offered: a model that now guesses the first label with probability at
least ``WITHDRAW_AT`` withdraws it (outcome ``"withdrawn"`` in the store)
rather than spend a label on it. The model of the flag's time had not seen
the label; a later one has, and fits it, right or wrong, so its mere
agreement says little: on the tests' digits, a LogisticRegression trained
on two flagged wrong labels guessed them with 0.74 and 0.77, and flagged
right labels with 0.77 to 0.95; the demo's MC-dropout models, re-judging
flags (145 re-judgements, 3 runs), gave wrong labels at most 0.48, and right
ones up to 0.97 (11 above 0.7). Hence 0.8, above every wrong label seen.
"""
from __future__ import annotations

from collections import Counter
from typing import Dict, List, Optional, Sequence

import numpy as np

from .._validation import read_rows
from ..noisy_labels import calibration_ratio, trust_threshold

#: Labels judged before the ``"dynamic"`` and ``"quantile"`` rules estimate anything.
MIN_JUDGED = 20
#: The last judged labels on which the models' calibration and the noise rate are measured.
TRUST_WINDOW = 50
#: Judged labels (with the guess's probability known) before the adaptive rules flag any.
MIN_TRUSTED = 40
#: An estimated noise rate above this is taken for the model's blind spots, not the annotators' slips.
MAX_NOISE = 0.15
#: A later model that guesses a flagged label with at least this probability withdraws the flag.
WITHDRAW_AT = 0.8


def flag_threshold(p_given: Sequence[float], agree: Sequence[bool], confidence: Sequence[float],
                   n_classes: int, rule="dynamic") -> dict:
    """The threshold below which a label is flagged, from the judged labels of a window.

    Parameters
    ----------
    p_given : sequence of float
        The judging model's probability of each label given.
    agree : sequence of bool
        Whether its guess was the label.
    confidence : sequence of float
        Its probability of its guess (NaN where unknown, e.g. judged before a restart: left out of
        the calibration).
    n_classes : int
    rule : float, "dynamic", "quantile" or callable
        As :func:`skdbal.noisy_labels.trust_threshold`; a number is the threshold itself.

    Returns
    -------
    dict
        ``tau`` (the rule's threshold), ``noise_rate`` (estimated, or None), ``kappa`` (the
        calibration ratio, or None for a fixed rule or too few labels) and ``threshold``, the one
        to flag below: ``tau / kappa`` for the adaptive rules, 0 below ``MIN_TRUSTED`` labels.

    Examples
    --------
    A model as sure of its guesses (0.95) as it was right (0.95 of 40 labels), two labels it found
    very unlikely:

    >>> from skdbal.labelling._second_looks import flag_threshold
    >>> p = [0.95] * 38 + [0.01, 0.001]
    >>> t = flag_threshold(p, [True] * 38 + [False] * 2, [0.95] * 40, 10)
    >>> round(t["noise_rate"], 4), round(t["tau"], 4), t["kappa"], round(t["threshold"], 4)
    (0.0236, 0.0027, 1.0, 0.0027)
    >>> [x < t["threshold"] for x in p[-2:]]
    [False, True]
    """
    p = np.asarray(p_given, dtype=np.float64)
    n_classes = max(int(n_classes), 2)
    if not isinstance(rule, str):
        tau, rate = trust_threshold(p, n_classes, rule)
        return {"tau": tau, "noise_rate": rate, "kappa": None, "threshold": tau}
    c = np.asarray(confidence, dtype=np.float64)
    known = np.isfinite(c)
    if len(p) < MIN_JUDGED or known.sum() < MIN_TRUSTED:
        return {"tau": 0.0, "noise_rate": None, "kappa": None, "threshold": 0.0}
    # every disagreement beyond what its probabilities promised is the model's (noise rate 0): the
    # annotators get the benefit of the doubt, the model none
    kappa = calibration_ratio(np.asarray(agree, dtype=bool)[known], c[known], 0.0, n_classes)
    if not np.isfinite(kappa):
        return {"tau": 0.0, "noise_rate": None, "kappa": kappa, "threshold": 0.0}
    tau, rate = trust_threshold(np.minimum(kappa * p, 1.0), n_classes, rule)   # on the corrected probabilities
    if rate > MAX_NOISE:
        return {"tau": tau, "noise_rate": rate, "kappa": kappa, "threshold": 0.0}
    return {"tau": tau, "noise_rate": rate, "kappa": kappa, "threshold": tau / kappa}


def choose_flags(checks: List[dict], window: List[dict], threshold: float, version: int, current: set,
                 second: set, budget: Optional[float], adaptive: bool = True) -> List[int]:
    """The events to flag now: the labels of ``window`` below ``threshold``, still their items' labels,
    not second looks, the least likely first, within the budget.

    With an adaptive rule, only the labels judged by model ``version`` (the one trusted now), and not
    those of a class of which it doubts two or more: wrong labels spread over the classes (symmetric
    noise: two of one version's labels wrong and of the same class is rare), while a model blind to a
    class doubts several of its labels at once.

    Parameters
    ----------
    checks : list of dict
        Every judged label so far (``event``, ``label``, ``p_given``, ``model_version``, ``flagged``,
        ``withdrawn``).
    window : list of dict
        Those that may be flagged now.
    threshold : float
    version : int
        The judging model's version.
    current : set of int
        The events that are still their items' labels.
    second : set of int
        The events that are second looks.
    budget : float or None
        At most this share of ``checks`` flagged (withdrawn flags cost no label).
    adaptive : bool, default=True
        False for a fixed threshold: every label of ``window`` below it, as the user asked.

    Returns
    -------
    list of int

    Examples
    --------
    >>> from skdbal.labelling._second_looks import choose_flags
    >>> checks = [{"event": e, "label": l, "p_given": p, "model_version": 3, "flagged": False, "withdrawn": False}
    ...           for e, l, p in [(1, "3", 0.001), (2, "3", 0.002), (3, "5", 0.004), (4, "7", 0.5)]]
    >>> choose_flags(checks, checks, 0.01, 3, {1, 2, 3, 4}, set(), None)   # two doubted 3s: blind to 3s
    [3]
    >>> choose_flags(checks, checks, 0.01, 3, {1, 2, 3, 4}, set(), None, adaptive=False)   # a fixed threshold
    [1, 2, 3]
    """
    below = sorted((c for c in window if not c["flagged"] and c["p_given"] < threshold
                    and (c["model_version"] == version or not adaptive) and c["event"] in current
                    and c["event"] not in second), key=lambda c: c["p_given"])
    if adaptive:
        doubted = Counter(c["label"] for c in checks if c["model_version"] == version and c["p_given"] < threshold)
        below = [c for c in below if doubted[c["label"]] < 2]
    if budget is not None:
        spent = sum(c["flagged"] and not c.get("withdrawn") for c in checks)
        below = below[:max(int(np.floor(budget * len(checks))) - spent, 0)]
    return [c["event"] for c in below]


class SecondLooks:
    """The second looks of one session: judging labels as they come, withdrawing stale flags.

    Parameters
    ----------
    store : LabelStore
        Where the judgements and flags are kept.
    X : array-like
        The pool (only the rows judged are read).
    learner : ActiveLearner
        Its current model judges the labels.
    rule : float, "dynamic", "quantile", callable or None
        The session's ``second_looks`` rule (None flags nothing).
    budget : float or None
        The session's ``second_look_budget``.
    """

    def __init__(self, store, X, learner, *, rule, budget: Optional[float]):
        self.store, self.X, self.learner, self.rule, self.budget = store, X, learner, rule, budget
        #: ``{event: p̄(y = guess | x)}`` of the labels judged in this process (not kept in the store;
        #: after a restart the window fills again before the adaptive rules flag).
        self.confidence: Dict[int, float] = {}

    def _predict(self, model, items: List[int]):
        from ..predictive import as_predictive

        predictive = as_predictive(model)
        classes = [str(c) for c in np.asarray(predictive.classes).tolist()]
        X = read_rows(self.X, np.asarray(items, dtype=np.intp))
        return classes, np.asarray(predictive.proba_samples(X), dtype=np.float64).mean(axis=0)

    def judge(self, events: List[dict]) -> None:
        """The current model's judgement of the new labels among ``events`` (it has not seen them):
        its guess, ``p̄(y = given | x)``, and flags where that is below the rule's threshold."""
        store, learner = self.store, self.learner
        model = getattr(learner, "estimator_", None)
        if model is None or getattr(learner, "step_", -1) < 0:
            return
        second = {c["second_event"] for c in store.second_looks()}  # a second look is not judged again
        new = [e for e in events if e["kind"] == "label" and e["event"] not in second]
        if not new:
            return
        classes, P = self._predict(model, [e["item"] for e in new])
        keep = [k for k, e in enumerate(new) if e["label"] in classes]  # a class the model has not met: no judgement
        if not keep:
            return
        new, P = [new[k] for k in keep], P[keep]
        p_given = P[np.arange(len(new)), [classes.index(e["label"]) for e in new]]
        guesses = [classes[j] for j in P.argmax(axis=1)]
        for e, c in zip(new, P.max(axis=1)):
            self.confidence[e["event"]] = float(c)
        rows = [{"event": e["event"], "model_version": learner.step_, "p_given": float(p), "guess": g,
                 "flagged": False} for e, p, g in zip(new, p_given, guesses)]
        checks = store.checks() + [dict(r, label=e["label"], item=e["item"], withdrawn=False)
                                   for r, e in zip(rows, new)]  # every label judged so far, these included
        rule = self.rule
        window = checks[-TRUST_WINDOW:] if isinstance(rule, str) else checks
        threshold = 0.0
        if rule is not None:
            threshold = flag_threshold([c["p_given"] for c in window], [c["guess"] == c["label"] for c in window],
                                       [self.confidence.get(c["event"], np.nan) for c in window],
                                       len(classes), rule)["threshold"]
        store.add_checks([dict(r, threshold=threshold) for r in rows])
        keep = {c["event"] for c in checks[-TRUST_WINDOW:]}           # only the window's are read again
        self.confidence = {e: c for e, c in self.confidence.items() if e in keep}
        if threshold > 0:
            current = {r["event"] for r in store.current_labels().values()}
            store.flag(choose_flags(checks, window, threshold, learner.step_, current, second,
                                    self.budget, adaptive=isinstance(rule, str)), threshold)

    def recheck(self, published: Optional[tuple]) -> List[int]:
        """Withdraw the pending flags that the published model now guesses as labelled, with at least
        ``WITHDRAW_AT``; the events withdrawn. Called in the loop's thread as each model is published,
        so a second look is offered only while the current model still doubts the label."""
        if published is None or self.rule is None:
            return []
        pending = [c for c in self.store.second_looks() if c["outcome"] == "pending"]
        if not pending:
            return []
        classes, P = self._predict(published[1], [c["item"] for c in pending])
        agree = [c["event"] for c, row in zip(pending, P) if c["label"] in classes and
                 classes[int(row.argmax())] == c["label"] and row[classes.index(c["label"])] >= WITHDRAW_AT]
        self.store.withdraw(agree)
        return agree
