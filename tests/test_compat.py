"""Modules that moved still import from their old paths, with a FutureWarning."""
import importlib
import sys

import pytest

from skdbal._compat import MOVED


@pytest.mark.parametrize("old, new", sorted(MOVED.items()))
def test_old_path_imports_the_moved_module(old, new):
    sys.modules.pop(old, None)
    with pytest.warns(FutureWarning, match=f"{old} has moved to {new}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert module.__spec__.name == new  # the moved module keeps its own identity
    sys.modules.pop(old, None)


def test_from_import_of_an_old_path():
    sys.modules.pop("skdbal.presets", None)
    with pytest.warns(FutureWarning):
        from skdbal.presets import get_preset
    from skdbal.experiments import get_preset as new
    assert get_preset is new
    sys.modules.pop("skdbal.presets", None)
