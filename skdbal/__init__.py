"""skdbal: scikit-learn-compatible deep Bayesian active learning.

Names are imported on first use (PEP 562), so ``import skdbal`` and the
``skdbal`` command start without loading torch.
"""
import importlib

__version__ = "0.1.0"

#: Public classes, by the module that defines them.
_CLASSES = {
    "ActiveLearner": "learner",
    "ActiveLearningLoop": "loop",
    "ActiveLearningBudget": "budget",
    "KnownLabels": "oracles",
    "NoisyAnnotator": "oracles",
    **dict.fromkeys(("BayesianLinearRegression", "DDUClassifier", "DeepEnsembleClassifier", "LaplaceClassifier",
                     "NetFeatures", "MCDropoutClassifier", "MCDropoutRegressor"), "models"),
}
#: Subpackages and modules, imported on first use.
_SUBMODULES = ("acquisition", "models", "uncertainty", "predictive", "noisy_labels", "metrics", "estimates",
               "accuracy_monitor", "stopping",
               "datasets", "initial", "loop", "oracles", "budget", "learner")

__all__ = list(_CLASSES) + list(_SUBMODULES) + ["__version__"]


def __getattr__(name):
    if name in _CLASSES:
        value = getattr(importlib.import_module(f".{_CLASSES[name]}", __name__), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module 'skdbal' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
