"""The :class:`ActiveLearner`: query, label, retrain, evaluate.

The class (in ``_active_learner``) is the estimator's surface: its parameters, its training and its queries. Each of its
other jobs has a module of its own, whose functions the class body binds as methods or calls:

- ``_pool`` and ``_pool_labels``: the learner's own pool, the bookkeeping of
  its labelled rows (``LabelledPool``) and ``set_pool``, ``label``, ``unlabel``;
- ``_training``: the template each retrain clones, and training fresh or warm;
- ``_inputs``: the inputs and labels it is given, checked;
- ``_query``: a query's seeded draws;
- ``_delegation``: predictions and predictive samples, delegated to the fitted model;
- ``_simulation``: ``simulate``, the loop run against known labels.
"""
from ._active_learner import ActiveLearner

__all__ = ["ActiveLearner"]
