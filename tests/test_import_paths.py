"""Every name has one import path (docs/architecture.md, "Layers"), checked statically.

A module *defines* a name when it binds it by ``def``, ``class`` or an
assignment; a name it only got from ``from X import name`` (or ``import X``) is
a *re-export* there. Every ``from M import name`` — and every ``M.name`` read
through a module alias — in ``core/``, ``desktop/``, ``tests/``, ``tools/`` and
``packaging/`` must take the name from the module that defines it (or ``name``
must be a submodule of the package ``M``). The one façade is
``branchwise/core/__init__.py``, for code outside the package: ``core/`` and
``desktop/`` never import through it.
"""

from __future__ import annotations

import ast
import importlib
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from helpers import REPO_ROOT

FACADE = "branchwise.core"
IMPORTERS = ("core", "desktop", "tests", "tools", "packaging")
# Where each source folder's modules are importable from (tests and tools put
# their own folders on sys.path: ``helpers.…``, ``common``, ``i18n_check``).
MODULE_ROOTS = {
    "core": "branchwise.core",
    "desktop": "branchwise.desktop",
    "tests/helpers": "helpers",
    "tests/benchmarks": "",
    "tools": "",
}
INSIDE_THE_PACKAGE = ("core/", "desktop/")


@dataclass
class Module:
    """What one of our modules binds at module level.

    Attributes:
        defined: names bound by ``def``, ``class`` or assignment.
        imported: names bound by an import, with the module each came from.
        exported: the names in its ``__all__``, if it has one.
    """

    path: str
    is_package: bool
    defined: set[str] = field(default_factory=set)
    imported: dict[str, str] = field(default_factory=dict)
    exported: list[str] | None = None


def module_of(root: Path, path: Path) -> tuple[str, bool] | None:
    """The dotted name ``path`` is imported under (``None`` if it is not importable)."""
    relative = path.relative_to(root)
    for folder, prefix in sorted(MODULE_ROOTS.items(), key=lambda item: -len(item[0])):
        if relative.is_relative_to(folder):
            parts = list(relative.relative_to(folder).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            return ".".join(p for p in [prefix, *parts] if p), is_package
    return None


def resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module of a (possibly relative) ``from … import``."""
    if not node.level:
        return str(node.module)
    base = (module if is_package else module.rpartition(".")[0]).split(".")
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def module_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Module-level statements, including those inside ``if``/``try``/``with`` blocks."""
    for node in body:
        yield node
        if isinstance(node, ast.If | ast.For | ast.While | ast.With):
            yield from module_level(node.body)
            yield from module_level(node.orelse if not isinstance(node, ast.With) else [])
        elif isinstance(node, ast.Try):
            yield from module_level(node.body)
            for handler in node.handlers:
                yield from module_level(handler.body)
            yield from module_level(node.orelse)
            yield from module_level(node.finalbody)


def _targets(node: ast.expr) -> Iterator[str]:
    if isinstance(node, ast.Name):
        yield node.id
    elif isinstance(node, ast.Tuple | ast.List):
        for element in node.elts:
            yield from _targets(element)
    elif isinstance(node, ast.Starred):
        yield from _targets(node.value)


def read_module(name: str, is_package: bool, path: str, tree: ast.Module) -> Module:
    """What ``tree`` binds at module level."""
    module = Module(path, is_package)
    for node in module_level(tree.body):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            module.defined.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                module.defined.update(_targets(target))
            names_all = any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
            if names_all and isinstance(node.value, ast.List | ast.Tuple):
                module.exported = [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
        elif isinstance(node, ast.AnnAssign | ast.AugAssign | ast.For):
            module.defined.update(_targets(node.target))
        elif isinstance(node, ast.With):
            for item in node.items:
                if item.optional_vars is not None:
                    module.defined.update(_targets(item.optional_vars))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.partition(".")[0]
                module.imported[bound] = alias.name if alias.asname else bound
        elif isinstance(node, ast.ImportFrom):
            source = resolve(name, is_package, node)
            for alias in node.names:
                module.imported[alias.asname or alias.name] = source
    return module


@dataclass(frozen=True)
class Use:
    """One place that takes ``name`` from ``module``."""

    where: str
    module: str
    name: str


def uses(name: str, is_package: bool, tree: ast.Module, where: str) -> Iterator[Use]:
    """Every ``from M import x`` and every ``alias.x`` read through a module alias."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = resolve(name, is_package, node)
            for alias in node.names:
                yield Use(f"{where}:{node.lineno}", source, alias.name)
                aliases[alias.asname or alias.name] = f"{source}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    root = alias.name.partition(".")[0]
                    aliases[root] = root
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            module = aliases.get(node.value.id)
            if module is not None:
                yield Use(f"{where}:{node.lineno}", module, node.attr)


@dataclass
class Tree:
    """Our modules and every use of a module's name under one source root."""

    modules: dict[str, Module]
    uses: list[Use]


def scan(root: Path) -> Tree:
    """Read every module under ``root`` and every import of ``IMPORTERS``."""
    modules: dict[str, Module] = {}
    all_uses: list[Use] = []
    for folder in IMPORTERS:
        for path in sorted((root / folder).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            tree = ast.parse(path.read_text(encoding="utf-8"), relative)
            named = module_of(root, path)
            name, is_package = named if named is not None else (relative, False)
            if named is not None:
                modules[name] = read_module(name, is_package, relative, tree)
            all_uses.extend(uses(name, is_package, tree, relative))
    return Tree(modules, all_uses)


def defining_module(modules: dict[str, Module], module: str, name: str) -> str | None:
    """Where ``name`` (as bound in ``module``) is defined, following re-exports."""
    seen: set[str] = set()
    while module in modules and module not in seen:
        seen.add(module)
        if name in modules[module].defined or f"{module}.{name}" in modules:
            return module
        source = modules[module].imported.get(name)
        if source is None:
            return None
        module = source
    return module


def problems(tree: Tree) -> tuple[dict[tuple[str, str], list[str]], list[str]]:
    """The names taken through a re-export, and the other broken import paths.

    Returns:
        ``{(re-exporting module, name): [where…]}``, and lines for imports of
        names a module does not bind, star imports, façade imports from inside
        the package and ``__all__`` lists naming other modules' names.
    """
    reexports: dict[tuple[str, str], list[str]] = defaultdict(list)
    other: list[str] = []
    modules = tree.modules
    for use in tree.uses:
        if use.module not in modules:
            continue  # not ours (stdlib, third party) or a submodule read as an attribute
        target = modules[use.module]
        if use.name == "*":
            other.append(f"{use.where}: from {use.module} import * (name each import)")
            continue
        if use.name in target.defined or f"{use.module}.{use.name}" in modules:
            continue
        if use.name.startswith("__") and use.name.endswith("__"):
            continue  # a module's own attribute (__name__, __file__…)
        if use.module == FACADE:
            if use.where.startswith(INSIDE_THE_PACKAGE):
                other.append(
                    f"{use.where}: {use.name} through the façade {FACADE} "
                    f"(inside the package import it from "
                    f"{defining_module(modules, use.module, use.name)})"
                )
            continue
        if use.name in target.imported:
            reexports[(use.module, use.name)].append(use.where)
        else:
            other.append(f"{use.where}: {use.module} has no {use.name}")
    for name, module in modules.items():
        if name == FACADE or module.exported is None:
            continue
        foreign = [n for n in module.exported if n not in module.defined]
        if foreign:
            other.append(f"{module.path}: __all__ names other modules' names {foreign}")
    return {key: sorted(where) for key, where in reexports.items()}, other


def describe(tree: Tree, reexports: dict[tuple[str, str], list[str]]) -> list[str]:
    lines = []
    for (module, name), where in sorted(reexports.items()):
        home = defining_module(tree.modules, module, name)
        lines.append(f"{name}: defined in {home}, re-exported by {module}, imported there at:")
        lines.extend(f"    {w}" for w in sorted(where))
    return lines


def test_every_name_has_one_import_path() -> None:
    tree = scan(REPO_ROOT)
    reexports, other = problems(tree)
    report = describe(tree, reexports) + other
    assert not report, (
        f"{len(reexports)} names with more than one import path, "
        f"{len(other)} other import problems:\n" + "\n".join(report)
    )


PUBLIC_API = {
    "SessionStore": "branchwise.core.store.store",
    "fork": "branchwise.core.fork.engine",
    "fork_targets": "branchwise.core.fork.targets",
    "ForkTarget": "branchwise.core.fork.targets",
    "ForkRequest": "branchwise.core.fork.operations",
    "create_child": "branchwise.core.lineage",
    "lineage": "branchwise.core.lineage",
    "tree": "branchwise.core.lineage",
    **{
        name: "branchwise.core.projection.events"
        for name in (
            "session_created",
            "turn_start",
            "turn_end",
            "user_message",
            "assistant_message",
            "assistant_delta",
            "step_start",
            "step_end",
            "usage",
            "EventType",
            "EndReason",
        )
    },
}


def test_the_facade_states_the_public_api_of_core() -> None:
    import branchwise.core as core
    from branchwise.core import errors

    typed_errors = {
        name: errors.__name__
        for name, value in vars(errors).items()
        if isinstance(value, type)
        and issubclass(value, errors.BranchwiseError)
        and value.__module__ == errors.__name__
    }
    expected = PUBLIC_API | typed_errors
    assert sorted(core.__all__) == sorted(expected)
    facade = scan(REPO_ROOT).modules[FACADE]
    assert sorted(facade.imported) == sorted(expected), "__all__ lists exactly what it imports"
    for name, home in expected.items():
        assert getattr(core, name) is getattr(importlib.import_module(home), name), name


def _plant(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_the_checker_reports_planted_second_paths(tmp_path: Path) -> None:
    _plant(
        tmp_path,
        {
            "core/__init__.py": (
                "from branchwise.core.errors import BranchwiseError\n"
                "__all__ = ['BranchwiseError']\n"
            ),
            "core/errors.py": "class BranchwiseError(Exception):\n    code = 'x'\n",
            "core/store/__init__.py": "",
            "core/store/store.py": (
                "from ..errors import BranchwiseError\n"
                "from branchwise.core import errors\n"
                "class SessionStore: ...\n"
                "__all__ = ['SessionStore', 'BranchwiseError']\n"
            ),
            "desktop/__init__.py": "",
            "desktop/host/__init__.py": "",
            "desktop/host/host.py": (
                "from branchwise.core.store.store import BranchwiseError, SessionStore\n"
                "from branchwise.core.store import store as st\n"
                "from branchwise.core import BranchwiseError as Facade\n"
                "def f():\n"
                "    return st.BranchwiseError, st.SessionStore, st.errors.BranchwiseError\n"
            ),
            "tests/test_x.py": (
                "from branchwise.core import BranchwiseError\n"
                "from branchwise.core.store.store import Missing\n"
                "from branchwise.core.errors import *\n"
                "def g():\n"
                "    from branchwise.core.store.store import BranchwiseError\n"
            ),
            "tools/tool.py": "from branchwise.core import BranchwiseError\n",
        },
    )
    tree = scan(tmp_path)
    reexports, other = problems(tree)
    assert reexports == {
        ("branchwise.core.store.store", "BranchwiseError"): [
            "desktop/host/host.py:1",
            "desktop/host/host.py:5",
            "tests/test_x.py:5",
        ],
        # a module read through another module's alias is a second path too
        ("branchwise.core.store.store", "errors"): ["desktop/host/host.py:5"],
    }
    assert describe(tree, reexports)[0] == (
        "BranchwiseError: defined in branchwise.core.errors, "
        "re-exported by branchwise.core.store.store, imported there at:"
    )
    assert sorted(other) == [
        "core/store/store.py: __all__ names other modules' names ['BranchwiseError']",
        "desktop/host/host.py:3: BranchwiseError through the façade branchwise.core "
        "(inside the package import it from branchwise.core.errors)",
        "tests/test_x.py:2: branchwise.core.store.store has no Missing",
        "tests/test_x.py:3: from branchwise.core.errors import * (name each import)",
    ]
