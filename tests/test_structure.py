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


def _intra_package_imports(path: Path, module: str, package: str) -> set:
    """The modules of ``package`` that ``module`` (the file ``path``) imports,
    at any level: module level, in functions, in ``if`` blocks."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolved against the module's package
                base = module.rsplit(".", node.level)[0]
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
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
        if name != "skdbal.experiments.__main__":
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
    ``from ..acquisition._names import get_strategy``, ``import skdbal._compat``)."""
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
                    "    import skdbal._compat as c\n    from .report import plot_curves as _plot\n")
    assert _private_imports(path) == [
        "4: from .runner import read_results, _comparable", "5: from .._validation import label_columns",
        "7: from ..acquisition._names import DECORATORS", "8: from . import _hidden", "9: import skdbal._compat as c"]


@pytest.mark.parametrize("name", [p.name for p in sorted((PACKAGE / "experiments").glob("*.py"))])
def test_the_experiments_package_imports_no_private_names(name):
    """The experiments package uses the library as a user would: through public modules and names only."""
    offenders = _private_imports(PACKAGE / "experiments" / name)
    assert not offenders, f"skdbal/experiments/{name} imports private names or modules:\n" + "\n".join(offenders)


def test_no_docstring_cites_a_seed_by_number():
    """Sources are cited by author, title and year, never as the seed files ("seed 004") they came in:
    grep-style over the whole package source, docstrings, comments and messages alike."""
    offenders = [f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
                 for path in sorted(PACKAGE.rglob("*.py"))
                 for number, line in enumerate(path.read_text().splitlines(), 1)
                 if re.search(r"\bseed\s+00\d", line, re.IGNORECASE)]
    assert not offenders, "\n".join(offenders)
