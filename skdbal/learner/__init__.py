"""The :class:`ActiveLearner`: query, label, retrain, evaluate; and its pool, :class:`LabelledPool`.

The class (in ``_active_learner``) is read as one: its parameters, training, pool, labels and
queries are its own methods, and two public mixins, :class:`PredictiveMixin` and
:class:`SimulationMixin` (as scikit-learn's are public), defined in modules that never import it,
add the rest; each declares what it needs of the class it is mixed into. No module of this
package imports the learner back.

- ``_labelled_pool``: :class:`LabelledPool`, the learner's own pool (``pool_``): its rows, which
  are labelled, where their labels sit in the training set, and the log of every label;
- ``_delegation``: ``PredictiveMixin``, predictions and predictive samples of the fitted model;
- ``_simulation``: ``SimulationMixin``, ``simulate``, the loop run against known labels;
- ``_training``: the template each retrain clones, and training fresh or warm;
- ``_inputs``: the inputs and labels it is given, checked;
- ``_query``: a query's seeded draws around its strategy.
"""
from ._active_learner import ActiveLearner
from ._delegation import PredictiveMixin
from ._labelled_pool import LabelledPool
from ._simulation import SimulationMixin

__all__ = ["ActiveLearner", "LabelledPool", "PredictiveMixin", "SimulationMixin"]
