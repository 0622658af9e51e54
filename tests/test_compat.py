"""Modules that moved still import from their old paths, with a DeprecationWarning naming the new one."""
import importlib
import sys
import warnings

import pytest

import skdbal
from skdbal._compat import MOVED


@pytest.mark.parametrize("old, new", sorted(MOVED.items()))
def test_old_path_imports_the_moved_module(old, new):
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} has moved to {new}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert module.__spec__.name == new  # the moved module keeps its own identity
    sys.modules.pop(old, None)


def test_every_old_top_level_module_of_0_1_is_covered():
    """Each module that stood at the top of the package in 0.1 and moved is in MOVED (none was lost)."""
    old_top = {"nets", "callbacks", "loaders", "mc_dropout", "mc_regression", "ensemble", "laplace", "ddu",
               "features", "bayesian_linear", "linear_posterior", "batchbald", "epig", "badge", "egl", "diversity",
               "stochastic", "interop_skactiveml", "_row_masks"}
    assert {f"skdbal.{m}" for m in old_top} <= set(MOVED)


def test_from_import_of_an_old_path():
    sys.modules.pop("skdbal.presets", None)
    with pytest.warns(DeprecationWarning):
        from skdbal.presets import get_preset
    from skdbal.experiments import get_preset as new
    assert get_preset is new
    sys.modules.pop("skdbal.presets", None)


@pytest.mark.parametrize("old, name", [("skdbal.mc_dropout", "MCDropoutClassifier"), ("skdbal.nets", "BayesianCNN"),
                                       ("skdbal.batchbald", "batch_bald_select"), ("skdbal.epig", "epig_from_probs"),
                                       ("skdbal.egl", "expected_gradient_length"),
                                       ("skdbal.diversity", "candidate_bound"), ("skdbal.stochastic", "sample_batch"),
                                       ("skdbal.badge", "gradient_embedding"), ("skdbal.ddu", "DDUClassifier"),
                                       ("skdbal.interop_skactiveml", "SkactivemlStrategy")])
def test_names_at_old_paths(old, name):
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning):
        module = importlib.import_module(old)
    assert callable(getattr(module, name))
    sys.modules.pop(old, None)


def test_an_old_module_as_an_attribute_of_the_package():
    sys.modules.pop("skdbal.nets", None)
    skdbal.__dict__.pop("nets", None)
    with pytest.warns(DeprecationWarning, match="skdbal.nets has moved to skdbal.models._nets"):
        nets = skdbal.nets
    assert nets.BayesianCNN is importlib.import_module("skdbal.models").BayesianCNN
    sys.modules.pop("skdbal.nets", None)
    skdbal.__dict__.pop("nets", None)


@pytest.mark.parametrize("old, new_module, new", [
    ("random_sampling", "skdbal.acquisition", "random"), ("expected_gradient_length", "skdbal.acquisition", "egl"),
    ("Strategy", "skdbal.acquisition.base", "Strategy"), ("select_top", "skdbal.acquisition.base", "select_top"),
    ("SamplesStrategy", "skdbal.acquisition.base", "SamplesStrategy")])
def test_names_that_left_the_acquisition_namespace(old, new_module, new):
    import skdbal.acquisition as acquisition
    with pytest.warns(DeprecationWarning, match=f"skdbal.acquisition.{old} has moved to {new_module}.{new}"):
        value = getattr(acquisition, old)
    assert value is getattr(importlib.import_module(new_module), new)


def test_the_registry_names_are_the_instances_names():
    import skdbal.acquisition as acquisition
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name, strategy in acquisition.STRATEGIES.items():
            assert getattr(acquisition, name) is strategy
            assert name in acquisition.__all__
