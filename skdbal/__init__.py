"""skdbal: scikit-learn-compatible deep Bayesian active learning."""
from . import acquisition, initial, loop, nets, posterior, predictive, uncertainty
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
    "loop",
    "nets",
    "posterior",
    "predictive",
    "uncertainty",
    "__version__",
]
