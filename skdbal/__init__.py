"""skdbal: scikit-learn-compatible deep Bayesian active learning."""
from . import _compat, acquisition, initial, linear_posterior, loop, nets, predictive, uncertainty
from .bayesian_linear import BayesianLinearRegression
from .features import NetFeatures
from .learner import ActiveLearner
from .mc_dropout import MCDropoutClassifier

_compat.install()  # old paths of moved modules (skdbal.presets, ...) keep importing

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
    "linear_posterior",
    "predictive",
    "uncertainty",
    "__version__",
]
