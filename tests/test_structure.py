"""The package's house rules: imports point one way, sources are cited by name, checks live in one place."""
import ast
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import skdbal
import skdbal.experiments

PACKAGE = Path(skdbal.__file__).resolve().parent


def _target(node: ast.ImportFrom, module: str, is_package: bool = False) -> str:
    """The module ``from ... import`` names, relative imports resolved against ``module``'s package
    (``module`` itself when it is a package's ``__init__``)."""
    if not node.level:
        return node.module or ""
    base = module if is_package else module.rsplit(".", 1)[0]
    for _ in range(node.level - 1):
        base = base.rsplit(".", 1)[0]
    return f"{base}.{node.module}" if node.module else base


def _intra_package_imports(path: Path, module: str, package: str) -> set:
    """The modules of ``package`` that ``module`` (the file ``path``) imports,
    at any level: module level, in functions, in ``if`` blocks."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            target = _target(node, module)
            names = [target] + [f"{target}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:  # ``from . import runner`` names the module runner, not the package
            if name.startswith(package + ".") and name.count(".") == package.count(".") + 1:
                found.add(name)
    found.discard(module)
    return found


def test_every_experiments_module_imports():
    names = [m.name for m in pkgutil.iter_modules(skdbal.experiments.__path__, "skdbal.experiments.")]
    assert {"skdbal.experiments.runner", "skdbal.experiments.report", "skdbal.experiments.quickstart"} <= set(names)
    for name in names:
        importlib.import_module(name)


def test_the_experiments_package_has_no_import_cycle():
    package = "skdbal.experiments"
    folder = PACKAGE / "experiments"
    graph = {f"{package}.{p.stem}": _intra_package_imports(p, f"{package}.{p.stem}", package)
             for p in folder.glob("*.py") if p.stem != "__init__"}
    graph = {m: {t for t in targets if t in graph} for m, targets in graph.items()}
    assert graph["skdbal.experiments.runner"], "the scan must see the runner's imports"

    def cycle_from(start):
        stack, path = [(start, iter(sorted(graph[start])))], [start]
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                path.pop()
            elif child == start:
                return path + [start]
            elif child not in path:
                stack.append((child, iter(sorted(graph[child]))))
                path.append(child)
        return None

    cycles = [c for c in map(cycle_from, sorted(graph)) if c]
    assert not cycles, "import cycles (function-level imports included): " + "; ".join(
        " -> ".join(m.rsplit(".", 1)[1] for m in c) for c in cycles)


def test_the_cycle_scan_sees_function_level_imports(tmp_path):
    path = tmp_path / "a.py"
    path.write_text("def f():\n    from .b import g\n    from . import c\n    from .. import nets\n")
    assert _intra_package_imports(path, "pkg.sub.a", "pkg.sub") == {"pkg.sub.b", "pkg.sub.c"}


def _is_private(name: str) -> bool:
    """``_name``, but not a dunder such as ``__version__`` or ``__future__``."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_imports(path: Path) -> list:
    """``"line: statement"`` for each import in ``path``, at any level, that
    takes a private name (``from .runner import _comparable``) or goes
    through a private module (``from .._validation import label_columns``,
    ``from ..acquisition._names import get_strategy``, ``import skdbal._made_up``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            modules, names = [node.module or ""], [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            modules, names = [alias.name for alias in node.names], []
        else:
            continue
        if any(_is_private(part) for module in modules for part in module.split(".")) or any(map(_is_private, names)):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_private_import_scan(tmp_path):
    path = tmp_path / "a.py"
    path.write_text("from __future__ import annotations\nimport os\nfrom .. import __version__\n"
                    "from .runner import read_results, _comparable\nfrom .._validation import label_columns\n"
                    "def f():\n    from ..acquisition._names import DECORATORS\n    from . import _hidden\n"
                    "    import skdbal._made_up as c\n    from .report import plot_curves as _plot\n")
    assert _private_imports(path) == [
        "4: from .runner import read_results, _comparable", "5: from .._validation import label_columns",
        "7: from ..acquisition._names import DECORATORS", "8: from . import _hidden", "9: import skdbal._made_up as c"]


#: The commands' argparse types in skdbal._validation: the experiments' command line (its cli module only)
#: shares them with the other commands, so that a flag is refused in the same words everywhere. They parse
#: flags; they are not the library the experiments use.
COMMAND_TYPES = {"whole_number", "positive_number", "number_in", "seconds", "port_number"}


def _command_types_only(offender: str) -> bool:
    statement = offender.split(": ", 1)[1]
    prefix = "from .._validation import "
    return statement.startswith(prefix) and set(statement[len(prefix):].split(", ")) <= COMMAND_TYPES


@pytest.mark.parametrize("name", [p.name for p in sorted((PACKAGE / "experiments").glob("*.py"))])
def test_the_experiments_package_imports_no_private_names(name):
    """The experiments package uses the library as a user would: through public modules and names only
    (its command line parses its flags with the commands' argparse types, :data:`COMMAND_TYPES`)."""
    offenders = _private_imports(PACKAGE / "experiments" / name)
    if name == "cli.py":
        offenders = [o for o in offenders if not _command_types_only(o)]
    assert not offenders, f"skdbal/experiments/{name} imports private names or modules:\n" + "\n".join(offenders)


def test_only_the_commands_argparse_types_are_let_through():
    assert _command_types_only("5: from .._validation import number_in, whole_number")
    assert not _command_types_only("5: from .._validation import whole_number, label_columns")
    assert not _command_types_only("5: from ..models._encoders import whole_number")


def test_no_docstring_cites_a_seed_by_number():
    """Sources are cited by author, title and year, never as the seed files ("seed 004") they came in:
    grep-style over the whole package source, docstrings, comments and messages alike."""
    offenders = [f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
                 for path in sorted(PACKAGE.rglob("*.py"))
                 for number, line in enumerate(path.read_text().splitlines(), 1)
                 if re.search(r"\bseed\s+00\d", line, re.IGNORECASE)]
    assert not offenders, "\n".join(offenders)


# ---------------------------------------------------------------------------------------------------------------
# The whole package: one graph of module imports (function-level ones included), and the rules its arrows follow.

def _module_name(path: Path) -> str:
    parts = ["skdbal", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports_of(module: str, path: Path) -> set:
    """The package's modules that ``module`` imports, at any level and under ``TYPE_CHECKING`` too; ``from pkg
    import mod`` names ``pkg.mod``."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):  # under TYPE_CHECKING too: no circle even there
        if isinstance(node, ast.ImportFrom):
            target = _target(node, module, is_package)
            candidates = [f"{target}.{alias.name}" for alias in node.names]
            found |= {c for c in candidates if c in MODULES}
            if not all(c in MODULES for c in candidates):
                found.add(target)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return {t for t in found if t in MODULES and t != module}


GRAPH = {m: _imports_of(m, p) for m, p in MODULES.items()}


def _package(module: str) -> str:
    """The package a module belongs to: ``skdbal.models._nets`` -> ``skdbal.models``."""
    path = MODULES[module]
    return module if path.name == "__init__.py" else module.rsplit(".", 1)[0]


def _in(module: str, *prefixes: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_the_graph_sees_function_level_and_package_imports():
    assert "skdbal.models._mc_dropout" in GRAPH["skdbal.models._ddu"]        # imported inside a method
    assert "skdbal.acquisition" in GRAPH["skdbal.budget"]                  # a package, inside a method
    assert "skdbal.predictive" in GRAPH["skdbal.acquisition._scoring"]
    assert "skdbal.experiments.specs" in GRAPH["skdbal.experiments.configs"]  # under TYPE_CHECKING alone


def test_no_import_cycle_in_the_package():
    index, low, stack, on_stack, cycles, counter = {}, {}, [], set(), [], [0]

    def visit(v):  # Tarjan's strongly connected components, iteratively deep enough for this graph
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(GRAPH[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    assert not cycles, "import cycles (function-level imports included): " + "; ".join(map(str, cycles))


UPPER = ("skdbal.experiments", "skdbal.labelling", "skdbal.labelstudio", "skdbal.dask", "skdbal.interop", "skdbal.cli")
LEARNER = ("skdbal.learner", "skdbal.loop", "skdbal.budget")


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _in(m, "skdbal.models")))
def test_models_never_import_strategies_the_learner_or_what_sits_above(module):
    bad = {t for t in GRAPH[module] if _in(t, "skdbal.acquisition", *LEARNER, *UPPER)}
    assert not bad, f"{module} imports {sorted(bad)}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _in(m, "skdbal.acquisition")))
def test_strategies_never_import_models_the_learner_or_what_sits_above(module):
    bad = {t for t in GRAPH[module] if _in(t, "skdbal.models", *LEARNER, *UPPER)}
    assert not bad, f"{module} imports {sorted(bad)}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES
                                          if not _in(m, *UPPER) and m not in ("skdbal", "skdbal.__main__")))
def test_servers_and_integrations_sit_above_the_learner(module):
    """Nothing below experiments, labelling, labelstudio, dask and interop imports them."""
    bad = {t for t in GRAPH[module] if _in(t, *UPPER)}
    assert not bad, f"{module} imports {sorted(bad)}"


def test_the_one_late_bound_arrow_up_is_declared_and_points_to_the_top():
    """The bottom layer's one arrow to the top: ``_validation.pool_backend`` imports the driver of a lazy pool
    (``skdbal.dask`` for a dask array) by name, at run time, where no scan of imports sees it. It is declared in
    ``POOL_DRIVERS``; each module named there exists and is in the upper layer, and ``_validation`` names no
    other module of the package in a string, and imports by name in one place."""
    from skdbal._validation import POOL_DRIVERS

    assert POOL_DRIVERS == {"dask.array": "skdbal.dask"}
    for driver in POOL_DRIVERS.values():
        assert _in(driver, *UPPER) and driver in MODULES, driver
    source = MODULES["skdbal._validation"].read_text()
    named = {node.value for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Constant)
             and isinstance(node.value, str) and node.value in MODULES}
    assert named == set(POOL_DRIVERS.values()) and source.count("importlib.import_module(") == 1


#: Private modules of the root package every package may use, as scikit-learn's packages use its private
#: validation helpers: argument checks.
SHARED_PRIVATE = {"skdbal._validation"}


def _cross_package_private_imports(module: str) -> list:
    path = MODULES[module]
    is_package = path.name == "__init__.py"
    here = _package(module)
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.ImportFrom):
            continue
        target = _target(node, module, is_package)
        if not target.startswith("skdbal") or target in SHARED_PRIVATE:
            continue
        owner = _package(target) if target in MODULES else target.rsplit(".", 1)[0]
        if owner == here:
            continue
        private_module = any(_is_private(part) for part in target.split("."))
        private_names = [a.name for a in node.names if _is_private(a.name)
                         and f"{target}.{a.name}" not in SHARED_PRIVATE]
        if private_module or private_names:
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_cross_package_scan():
    assert _cross_package_private_imports("skdbal.acquisition._noise_filter") == []  # .._validation, ._scoring: allowed
    assert _package("skdbal.models._nets") == "skdbal.models" and _package("skdbal.models") == "skdbal.models"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_private_name_crosses_a_package(module):
    offenders = _cross_package_private_imports(module)
    assert not offenders, f"{module} imports private names of another package:\n" + "\n".join(offenders)


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_file_is_over_800_lines(path):
    assert len(path.read_text().splitlines()) <= 800
