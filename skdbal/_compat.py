"""Old import paths of modules that moved, kept working with a DeprecationWarning.

``import skdbal.presets`` (and ``from skdbal.report import ...``) load the
module at its new path and register it under the old name too, so code and
pickles written against 0.1 keep working while they are updated.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

#: old module path -> new module path
MOVED = {
    "skdbal.cli": "skdbal.experiments.cli",
    "skdbal.posterior": "skdbal.models.linear_posterior",
    "skdbal.presets": "skdbal.experiments.presets",
    "skdbal.quickstart": "skdbal.experiments.quickstart",
    "skdbal.report": "skdbal.experiments.report",
    # 0.2: the models in skdbal.models, each strategy's kernel beside its class
    **{f"skdbal.{name}": f"skdbal.models._{name}"
       for name in ("nets", "callbacks", "loaders", "mc_dropout", "mc_regression", "ensemble", "laplace", "ddu",
                    "features", "bayesian_linear")},
    "skdbal._row_masks": "skdbal.models._row_masks",
    "skdbal.linear_posterior": "skdbal.models.linear_posterior",
    "skdbal.batchbald": "skdbal.acquisition._batchbald",
    "skdbal.epig": "skdbal.acquisition._epig",
    "skdbal.badge": "skdbal.acquisition._badge",
    "skdbal.egl": "skdbal.acquisition._regression",
    "skdbal.diversity": "skdbal.acquisition._diversity",
    "skdbal.stochastic": "skdbal.acquisition._stochastic",
    "skdbal.acquisition._base": "skdbal.acquisition.base",
    "skdbal.acquisition._names": "skdbal.acquisition._registry",
    "skdbal.interop_skactiveml": "skdbal.interop.skactiveml",
}


class _MovedLoader(importlib.abc.Loader):
    def __init__(self, new: str):
        self.new = new

    def _warn(self, old: str) -> None:
        warnings.warn(f"{old} has moved to {self.new}; the old path will be removed", DeprecationWarning,
                      stacklevel=3)

    def create_module(self, spec):
        self._warn(spec.name)
        module = importlib.import_module(self.new)
        self._spec = module.__spec__  # the import system sets __spec__ to the old name's
        return module

    def exec_module(self, module):
        module.__spec__ = self._spec  # already executed under its new name

    def get_code(self, fullname):
        """``python -m <old path>``: run the moved module as ``__main__``, saying so on stderr (a
        DeprecationWarning raised here would be attributed to runpy, and hidden)."""
        message = f"{fullname} has moved to {self.new}; the old path will be removed"
        return compile(f"import runpy, sys; print({message!r}, file=sys.stderr); "
                       f"runpy.run_module({self.new!r}, run_name='__main__', alter_sys=True)",
                       f"<{fullname} moved to {self.new}>", "exec")

    def is_package(self, fullname):
        return False


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname in MOVED:
            return importlib.util.spec_from_loader(fullname, _MovedLoader(MOVED[fullname]))
        return None


def install() -> None:
    """Put the finder on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedFinder())
