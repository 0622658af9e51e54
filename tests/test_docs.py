"""Every public class and function has a runnable Examples section (the doctests run them)."""
import importlib
import inspect
import pkgutil

import skdbal


def public_objects():
    names = ["skdbal"] + [m.name for m in pkgutil.walk_packages(skdbal.__path__, "skdbal.")
                          if not m.name.split(".")[-1].startswith("_")]
    seen = set()
    for name in names:
        module = importlib.import_module(name)
        for attr in getattr(module, "__all__", []):
            obj = getattr(module, attr)
            if (inspect.isclass(obj) or inspect.isfunction(obj)) and id(obj) not in seen:
                seen.add(id(obj))
                yield f"{name}.{attr}", obj


def test_every_public_object_has_examples():
    def has_examples(doc):
        _, found, section = doc.partition("Examples\n--------\n")
        return bool(found) and ">>> " in section

    missing = [name for name, obj in public_objects() if not has_examples(inspect.getdoc(obj) or "")]
    assert not missing, f"no Examples section with a doctest: {missing}"
    assert len(list(public_objects())) > 100
