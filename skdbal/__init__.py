"""skdbal: scikit-learn-compatible deep Bayesian active learning."""
from . import acquisition, initial, nets, uncertainty
from .learner import ActiveLearner
from .mc_dropout import MCDropoutClassifier

__version__ = "0.1.0"

__all__ = [
    "ActiveLearner",
    "MCDropoutClassifier",
    "acquisition",
    "initial",
    "nets",
    "uncertainty",
    "__version__",
]
