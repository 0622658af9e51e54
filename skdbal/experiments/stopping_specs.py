"""Stopping rules named in a preset: ``stopping=("stabilizing_predictions(window=3)", "label_budget(max_labels=200)")``.

A rule spec is a rule's ``name`` (:mod:`skdbal.stopping`: ``stabilizing_predictions``,
``overall_uncertainty``, ``max_confidence``, ``classification_change``, ``expected_gain``,
``label_budget``, ``cost``), alone or called with keyword parameters whose values are Python literals.
:func:`canonical_rule` spells a spec one way (the parameters that differ from their defaults, sorted), so
that two spellings of one rule give one configuration; :func:`stopping_rule` makes the rule a run's
loop watches (several rules: an :class:`~skdbal.stopping.AnyOf` of them). Nothing here imports torch.
"""
from __future__ import annotations

import ast
import inspect
from typing import Dict, Optional, Sequence, Tuple

__all__ = ["rule_classes", "parse_rule", "canonical_rule", "canonical_rules", "stopping_rule"]


def rule_classes() -> Dict[str, type]:
    """The stopping rules a spec may name, by their ``name``.

    Examples
    --------
    >>> from skdbal.experiments.stopping_specs import rule_classes
    >>> sorted(rule_classes())[:3]
    ['classification_change', 'cost', 'expected_gain']
    """
    from .. import stopping

    classes = (stopping.StabilizingPredictions, stopping.OverallUncertainty, stopping.MaxConfidence,
               stopping.ClassificationChange, stopping.ExpectedGain, stopping.LabelBudget, stopping.CostRule)
    return {cls.name: cls for cls in classes}


def _parts(spec) -> Tuple[str, dict]:
    """A spec's rule name and keyword parameters, or a ValueError saying what is wrong with it."""
    if not isinstance(spec, str):
        raise TypeError(f"a stopping rule is given as text, e.g. 'stabilizing_predictions(window=3)'; got {spec!r}")
    try:
        node = ast.parse(spec.strip(), mode="eval").body
    except SyntaxError:
        raise ValueError(f"cannot read the stopping rule {spec!r}: write name or name(param=value, ...), e.g. "
                         "'label_budget(max_labels=200)'") from None
    if isinstance(node, ast.Name):
        params: dict = {}
        name = node.id
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.args \
            and all(k.arg is not None for k in node.keywords):
        name = node.func.id
        params = {}
        for k in node.keywords:
            try:
                params[k.arg] = ast.literal_eval(k.value)
            except ValueError:
                raise ValueError(f"stopping rule {spec!r}: {k.arg}'s value must be a number, a string, True, "
                                 f"False or None; got {ast.unparse(k.value)}") from None
    else:
        raise ValueError(f"cannot read the stopping rule {spec!r}: write name or name(param=value, ...) with "
                         "keyword parameters, e.g. 'label_budget(max_labels=200)'")
    classes = rule_classes()
    if name not in classes:
        raise ValueError(f"unknown stopping rule {name!r} in {spec!r}; choose from {sorted(classes)}")
    return name, params


def parse_rule(spec: str):
    """The stopping rule that ``spec`` names, its parameters checked.

    Parameters
    ----------
    spec : str
        ``name`` or ``name(param=value, ...)``.

    Returns
    -------
    StoppingRule

    Raises
    ------
    ValueError
        For an unknown rule or parameter, a value that is not a literal, or a value the rule refuses.

    Examples
    --------
    >>> from skdbal.experiments.stopping_specs import parse_rule
    >>> parse_rule("stabilizing_predictions(window=2, kappa=0.95)")
    StabilizingPredictions(kappa=0.95, window=2)
    >>> parse_rule("label_budget(budget=100)")
    Traceback (most recent call last):
        ...
    ValueError: stopping rule 'label_budget(budget=100)': label_budget has no parameter 'budget'; its \
parameters are ['max_labels']
    """
    name, params = _parts(spec)
    cls = rule_classes()[name]
    known = [p for p in inspect.signature(cls).parameters]
    unknown = [k for k in params if k not in known]
    if unknown:
        raise ValueError(f"stopping rule {spec!r}: {name} has no parameter {unknown[0]!r}; its parameters are "
                         f"{known}")
    try:
        rule = cls(**params)
    except TypeError as exc:      # a parameter without a default left out
        raise ValueError(f"stopping rule {spec!r}: {exc}") from None
    try:
        return rule.validate()
    except ValueError as exc:
        raise ValueError(f"stopping rule {spec!r}: {exc}") from None


def canonical_rule(spec: str) -> str:
    """``spec`` spelt one way: the name, and the parameters that differ from their defaults, sorted.

    Examples
    --------
    >>> from skdbal.experiments.stopping_specs import canonical_rule
    >>> canonical_rule(" stabilizing_predictions( kappa = 0.95, window=3 ) ")
    'stabilizing_predictions(kappa=0.95)'
    >>> canonical_rule("label_budget(max_labels=200)"), canonical_rule("classification_change()")
    ('label_budget(max_labels=200)', 'classification_change')
    """
    rule = parse_rule(spec)
    defaults = {k: p.default for k, p in inspect.signature(type(rule).__init__).parameters.items() if k != "self"}
    given = {k: v for k, v in rule.get_params(deep=False).items()
             if defaults.get(k, inspect.Parameter.empty) is inspect.Parameter.empty or v != defaults[k]
             or type(v) is not type(defaults[k])}
    inner = ", ".join(f"{k}={v!r}" for k, v in sorted(given.items()))
    return f"{type(rule).name}({inner})" if inner else type(rule).name


def canonical_rules(specs) -> Tuple[str, ...]:
    """A preset's ``stopping``: one spec or a sequence of them, each :func:`canonical_rule`'s spelling.

    Raises
    ------
    TypeError
        If ``specs`` is neither a string nor a list or tuple of strings.
    ValueError
        For a spec :func:`parse_rule` refuses, or one given twice.

    Examples
    --------
    >>> from skdbal.experiments.stopping_specs import canonical_rules
    >>> canonical_rules("label_budget(max_labels=50)"), canonical_rules([])
    (('label_budget(max_labels=50)',), ())
    """
    if isinstance(specs, str):
        specs = (specs,)
    if not isinstance(specs, (list, tuple)):
        raise TypeError(f"stopping must be a list of stopping rules (text, e.g. ['stabilizing_predictions']); "
                        f"got {specs!r}")
    out = tuple(canonical_rule(s) for s in specs)
    repeated = sorted({s for s in out if out.count(s) > 1})
    if repeated:
        raise ValueError(f"stopping names {repeated[0]!r} twice")
    return out


def stopping_rule(specs: Sequence[str]) -> Optional[object]:
    """The rule a run's loop watches: None for no spec, the rule for one, an AnyOf of them for several.

    Examples
    --------
    >>> from skdbal.experiments.stopping_specs import stopping_rule
    >>> stopping_rule(()) is None, type(stopping_rule(["classification_change"])).__name__
    (True, 'ClassificationChange')
    >>> sorted(stopping_rule(["classification_change", "label_budget(max_labels=40)"]).named_rules())
    ['classification_change', 'label_budget']
    """
    from ..stopping import AnyOf

    rules = [parse_rule(s) for s in specs]
    if not rules:
        return None
    return rules[0] if len(rules) == 1 else AnyOf(rules)
