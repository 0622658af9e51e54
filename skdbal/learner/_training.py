"""How a learner trains its model: the template each retrain clones, a fresh (optionally step-seeded)
clone, or the current model trained further (``retrain="warm"``). Functions of :mod:`skdbal.learner`."""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np
from sklearn.base import clone, is_regressor

from ..loop import step_seed


def make_template(estimator, random_state, y_all=None):
    """``estimator`` (or the default), with ``classes`` from ``y_all`` if unset."""
    if estimator is None:
        from ..models import MCDropoutClassifier

        # seeded by the learner's int seed, so that ActiveLearner(random_state=0) repeats its runs
        seed = random_state if isinstance(random_state, (int, np.integer)) else None
        template = MCDropoutClassifier(random_state=seed)
    else:
        template = estimator
    if y_all is not None and not is_regressor(template) and hasattr(template, "get_params"):
        # a net that infers its classes from the labels seen so far would change its
        # output size as classes appear, which a warm retrain cannot follow
        params = template.get_params(deep=False)
        if "classes" in params and params["classes"] is None:
            template = clone(template).set_params(classes=np.unique(y_all))
    return template


def continues_training(model) -> bool:
    """Whether refitting ``model`` continues its training: it has ``partial_fit``, or a
    ``warm_start`` parameter set to True (its own, or a pipeline step's)."""
    if hasattr(model, "partial_fit"):
        return True
    params = model.get_params(deep=True) if hasattr(model, "get_params") else {}
    return any(v is True for k, v in params.items() if k == "warm_start" or k.endswith("__warm_start"))


def check_warm(model) -> None:
    """Refuse ``retrain="warm"`` for a ``model`` whose refit would start again from scratch."""
    if not continues_training(model):
        raise ValueError(
            f"retrain='warm' continues training the current model, but {type(model).__name__} has no "
            "partial_fit and no warm_start=True, so its fit would start again from scratch; set warm_start "
            "(in a pipeline, on its network: net__warm_start=True) or use retrain='scratch'")


def train_further(model, X, y, fit_params: dict):
    """``model`` trained further on ``(X, y)``: ``partial_fit`` when it has one, else ``fit``
    (which ``warm_start=True`` somewhere makes continue; see :func:`check_warm`)."""
    if hasattr(model, "partial_fit"):
        return model.partial_fit(X, y, **fit_params)
    return model.fit(X, y, **fit_params)


def train_fresh(template, X, y, fit_params: dict, step_seeds: Optional[Tuple[int, int]] = None):
    """A clone of ``template`` fitted on ``(X, y)``. With ``step_seeds = (random_state, step)``
    (``seeding="step"``) the clone is seeded by :func:`skdbal.loop.step_seed` of them alone."""
    model = clone(template)
    if step_seeds is not None:
        if "random_state" not in (model.get_params(deep=False) if hasattr(model, "get_params") else {}):
            raise ValueError(f"seeding='step' gives the model of each step the seed step_seed(random_state, "
                             f"step), but {type(model).__name__} has no random_state parameter")
        model.set_params(random_state=step_seed(*step_seeds))
    return model.fit(X, y, **fit_params)
