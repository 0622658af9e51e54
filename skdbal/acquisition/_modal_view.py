"""A learner seen under modAL's attribute names, for modAL's own strategies."""
from __future__ import annotations

__all__ = ["_ModalView"]


class _ModalView:
    """A learner under modAL's attribute names, for modAL's strategies.

    ``X_training`` and ``y_training`` read the learner's growing labelled set
    (``X_training_``, ``y_training_``) and ``estimator`` its fitted model
    (``estimator_``) when it has them, so a strategy never sees the stale
    initial set; ``on_transformed`` is False unless the learner says
    otherwise. Every other attribute is the learner's own.
    """

    _ALIASES = {"X_training": "X_training_", "y_training": "y_training_", "estimator": "estimator_"}

    def __init__(self, learner):
        object.__setattr__(self, "_learner", learner)

    def __getattr__(self, name):
        learner = object.__getattribute__(self, "_learner")
        alias = self._ALIASES.get(name)
        if alias is not None and hasattr(learner, alias):
            return getattr(learner, alias)
        if name == "on_transformed":
            return getattr(learner, "on_transformed", False)
        return getattr(learner, name)

    def __setattr__(self, name, value):
        raise AttributeError(f"a strategy may not set {name!r} on the learner")
