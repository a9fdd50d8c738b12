"""STYLE.md's "public API stated", held across the package: no module of src/fabricase imports another module's
private (`_name`) names. What two modules share is public and listed in the owner's __all__."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).parents[1] / "src" / "fabricase"


def _wrapped_extension(path: Path, name: str) -> bool:
    """`name` is a C extension of the package (`_x.c` beside `path`) and `path` its one wrapper, `x.py`: the C
    module is private to the module that says whether it is in use (fabricase.native for fabricase._native)."""
    return (path.parent / f"{name}.c").exists() and path.name == f"{name[1:]}.py"


def _private_imports(package: Path) -> list[str]:
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fabricase"):
                names = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")
                         and not _wrapped_extension(path, a.name)]
                if names:
                    found.append(f"{path.relative_to(package)}: from {node.module} import {', '.join(names)}")
    return found


def _missing_from_all(package: Path) -> list[str]:
    """Names imported from a fabricase module that it has an __all__ for but that are not in it."""
    alls: dict[str, set[str]] = {}
    for path in sorted(package.rglob("*.py")):
        module = ".".join(("fabricase", *path.relative_to(package).with_suffix("").parts)).removesuffix(".__init__")
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
                alls[module] = {elt.value for elt in getattr(node.value, "elts", ()) if isinstance(elt, ast.Constant)}
    missing = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module in alls:
                folder = package.joinpath(*node.module.split(".")[1:])
                for alias in node.names:
                    submodule = (folder / f"{alias.name}.py").exists() or (folder / alias.name).is_dir()
                    if alias.name not in alls[node.module] and not submodule:
                        missing.append(f"{path.relative_to(package)}: {node.module}.{alias.name}")
    return missing


def test_no_module_imports_another_modules_private_names():
    assert _private_imports(PACKAGE) == []


def test_the_check_finds_a_private_import(tmp_path):
    (tmp_path / "a.py").write_text("from fabricase.b import _hidden, shown\n")
    assert _private_imports(tmp_path) == ["a.py: from fabricase.b import _hidden"]


def test_only_its_wrapper_imports_a_c_extension(tmp_path):
    (tmp_path / "_fast.c").write_text("/* an extension */\n")
    (tmp_path / "fast.py").write_text("from fabricase import _fast\n")
    (tmp_path / "other.py").write_text("from fabricase import _fast\n")
    assert _private_imports(tmp_path) == ["other.py: from fabricase import _fast"]


def test_what_a_module_imports_from_another_is_in_its_all():
    assert _missing_from_all(PACKAGE) == []


def test_the_check_finds_a_name_left_out_of_all(tmp_path):
    (tmp_path / "b.py").write_text('__all__ = ["shown"]\nshown = hidden = 1\n')
    (tmp_path / "a.py").write_text("from fabricase.b import hidden, shown\n")
    assert _missing_from_all(tmp_path) == ["a.py: fabricase.b.hidden"]
