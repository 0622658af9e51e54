"""skdbal: scikit-learn-compatible deep Bayesian active learning."""
from . import acquisition, initial, nets, posterior, uncertainty
from .bayesian_linear import BayesianLinearRegression
from .features import NetFeatures
from .learner import ActiveLearner
from .mc_dropout import MCDropoutClassifier

__version__ = "0.1.0"

__all__ = [
    "ActiveLearner",
    "BayesianLinearRegression",
    "NetFeatures",
    "MCDropoutClassifier",
    "acquisition",
    "initial",
    "nets",
    "posterior",
    "uncertainty",
    "__version__",
]
