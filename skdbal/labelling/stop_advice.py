"""What the stopping rules say, as the labelling page shows it: advice, never a stop.

A labelling session runs stopping rules (:mod:`skdbal.stopping`) after each model version, on a fixed
stop set of unlabelled items drawn once (:class:`skdbal.loop.ActiveLearningLoop`'s), and keeps each rule's
verdict in the store with the version. The person labelling decides: the page only says what each rule
says, in plain words (:func:`verdict_words`).

The default (:func:`session_stopping`): :class:`~skdbal.stopping.StabilizingPredictions` (the model's
guesses on the stop set agree, Cohen's κ ≥ 0.99 on average over the last 3 versions) and
:class:`~skdbal.stopping.OverallUncertainty` (its mean normalised entropy there < 0.05), and
:class:`~skdbal.stopping.LabelBudget` when a budget is given.
"""
from __future__ import annotations

from typing import List, Mapping, Optional, Sequence

from ..stopping import AnyOf, LabelBudget, OverallUncertainty, StabilizingPredictions, StoppingRule

__all__ = ["DEFAULT", "session_stopping", "verdict_words", "verdict_line", "advice_words"]

#: The ``stopping`` argument that asks for the default rules.
DEFAULT = "default"


def session_stopping(stopping=DEFAULT, label_budget: Optional[int] = None) -> Optional[AnyOf]:
    """The rules a session runs, as one :class:`~skdbal.stopping.AnyOf` (so that each rule's verdict is
    kept), or None for none.

    Parameters
    ----------
    stopping : StoppingRule, AnyOf, "default" or None, default="default"
        ``"default"``: :class:`~skdbal.stopping.StabilizingPredictions` and
        :class:`~skdbal.stopping.OverallUncertainty` with their defaults. A rule is wrapped in an ``AnyOf``.
    label_budget : int, optional
        Adds :class:`~skdbal.stopping.LabelBudget` of this many labels.

    Returns
    -------
    AnyOf or None

    Raises
    ------
    TypeError
        For anything but a rule, ``"default"`` or None.
    ValueError
        For a bad budget, or a rule's bad parameter.

    Examples
    --------
    >>> from skdbal.labelling.stop_advice import session_stopping
    >>> sorted(session_stopping().named_rules())
    ['overall_uncertainty', 'stabilizing_predictions']
    >>> sorted(session_stopping(label_budget=200).named_rules())
    ['label_budget', 'overall_uncertainty', 'stabilizing_predictions']
    >>> session_stopping(None) is None
    True
    """
    if isinstance(stopping, str) and stopping == DEFAULT:
        rules: List[StoppingRule] = [StabilizingPredictions(), OverallUncertainty()]
    elif stopping is None:
        rules = []
    elif isinstance(stopping, AnyOf):
        rules = list(stopping.rules)
    elif isinstance(stopping, StoppingRule):
        rules = [stopping]
    else:
        raise TypeError(f"stopping must be a stopping rule (skdbal.stopping), an AnyOf of several, 'default' or "
                        f"None; got {stopping!r}")
    if label_budget is not None:
        rules.append(LabelBudget(max_labels=label_budget))
    if not rules:
        return None
    return AnyOf(rules).validate()


def _rows(verdict: Mapping, noun: str) -> str:
    n = verdict.get("stop_set_size")
    return f"{n:,} unlabelled {noun}" if n else f"the unlabelled {noun} it watches"


def verdict_words(verdict: Mapping, noun: str = "items") -> str:
    """One rule's verdict in plain words (the store's record of it:
    :func:`skdbal.labelling._oracle.rule_verdicts`).

    Parameters
    ----------
    verdict : dict
        ``kind`` (the rule's class), ``params``, ``stop``, ``value``, ``reason``, ``stop_set_size``.
    noun : str, default="items"

    Returns
    -------
    str

    Examples
    --------
    >>> from skdbal.labelling.stop_advice import verdict_words
    >>> print(verdict_words({"kind": "StabilizingPredictions", "params": {"window": 3, "kappa": 0.99},
    ...                      "stop": True, "value": 0.9951, "reason": "", "stop_set_size": 2000}, "images"))
    The model has stopped changing: its guesses on 2,000 unlabelled images agreed κ = 0.995 on average over \
the last 3 versions (it asks for 0.99).
    >>> print(verdict_words({"kind": "LabelBudget", "params": {"max_labels": 200}, "stop": False, "value": 150,
    ...                      "reason": ""}))
    150 of the budget's 200 labels given: 50 left.
    """
    kind, p, stop, value = verdict.get("kind"), verdict.get("params", {}), bool(verdict["stop"]), verdict.get("value")
    reason = str(verdict.get("reason", ""))
    rows = _rows(verdict, noun)
    if kind == "StabilizingPredictions" and p.get("pairs", "consecutive") == "consecutive":
        if value is None or reason.startswith("too early"):
            return (f"Too early to tell whether the model has stopped changing: it compares its guesses on {rows} "
                    f"over {p.get('window', 3)} versions.")
        agreed = (f"its guesses on {rows} agreed κ = {value:.3f} on average over the last {p.get('window', 3)} "
                  f"versions")
        if stop:
            return f"The model has stopped changing: {agreed} (it asks for {p.get('kappa', 0.99):g})."
        return f"The model is still changing: {agreed} (it waits for {p.get('kappa', 0.99):g})."
    if kind == "OverallUncertainty" and value is not None:
        what = "normalised entropy" if p.get("measure", "entropy") == "entropy" else "uncertainty"
        if stop:
            return (f"The model is sure of its guesses: their mean {what} on {rows} is {value:.3f}, under "
                    f"{p.get('threshold', 0.05):g}.")
        return (f"The model is still unsure of its guesses: their mean {what} on {rows} is {value:.3f} (it waits "
                f"for under {p.get('threshold', 0.05):g}).")
    if kind == "ClassificationChange" and value is not None:
        changed = f"{100 * value:.1f}% of them on {rows} changed at the last version"
        if stop:
            return f"The model's guesses have settled: {changed}."
        return f"The model's guesses still change: {changed}."
    if kind == "LabelBudget" and value is not None:
        n, budget = int(value), int(p.get("max_labels", 0))
        if stop:
            return f"The label budget is spent: {n} labels given, the budget was {budget}."
        return f"{n} of the budget's {budget} labels given: {budget - n} left."
    words = reason.replace("the stop set", rows).replace("steps", "versions").replace("step", "version")
    return words[:1].upper() + words[1:] + ("" if words.endswith(".") else ".")


def verdict_line(verdict: Mapping, noun: str = "items") -> str:
    """One rule's verdict as the page lists it: "Could stop: " or "Keep going: ", then its words
    (:func:`verdict_words`), their first word lower-cased after the colon.

    Examples
    --------
    >>> from skdbal.labelling.stop_advice import verdict_line
    >>> print(verdict_line({"kind": "StabilizingPredictions", "params": {"window": 3, "kappa": 0.99},
    ...                     "stop": False, "value": 0.75, "reason": "", "stop_set_size": 4}, "images"))
    Keep going: the model is still changing: its guesses on 4 unlabelled images agreed κ = 0.750 on average \
over the last 3 versions (it waits for 0.99).
    >>> print(verdict_line({"kind": "LabelBudget", "params": {"max_labels": 200}, "stop": True, "value": 200,
    ...                     "reason": ""}))
    Could stop: the label budget is spent: 200 labels given, the budget was 200.
    """
    words = verdict_words(verdict, noun)
    if len(words) > 1 and words[0].isupper() and words[1].islower():   # "The" -> "the"; "ECE", "150" stay
        words = words[0].lower() + words[1:]
    return ("Could stop: " if verdict["stop"] else "Keep going: ") + words


def advice_words(verdicts: Sequence[Mapping], rules: bool = True) -> str:
    """The rules' verdicts in one line: how many say you could stop (advice: labelling goes on).

    Examples
    --------
    >>> from skdbal.labelling.stop_advice import advice_words
    >>> advice_words([{"stop": True}, {"stop": False}])
    '1 of 2 stopping rules says you could stop now; labelling goes on until you stop.'
    >>> advice_words([{"stop": False}, {"stop": False}])
    'No stopping rule says stop yet.'
    >>> advice_words([])
    'No stopping rule has spoken yet: they speak once a model is trained.'
    >>> advice_words([], rules=False)                   # the session was given stopping=None
    'No stopping rule is set.'
    """
    if not rules:
        return "No stopping rule is set."
    if not verdicts:
        return "No stopping rule has spoken yet: they speak once a model is trained."
    k = sum(bool(v["stop"]) for v in verdicts)
    if not k:
        return "No stopping rule says stop yet."
    n = len(verdicts)
    return (f"{k} of {n} stopping rule{'s' if n > 1 else ''} say{'s' if k == 1 else ''} you could stop now; "
            "labelling goes on until you stop.")
