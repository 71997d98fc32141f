"""The Qt boundary (docs/architecture.md, "Layers"), checked on every import statement.

``core/`` and ``desktop/host/`` never reach PySide6, qasync, shiboken6 or the
widgets (nor ``desktop/app.py``, which is Qt); ``desktop/entry.py`` stays
Qt-free so headless commands run without a display; ``core/`` never reaches
``branchwise.desktop`` at all. Every import counts: module-level ones,
imports inside functions, ``if TYPE_CHECKING:`` blocks, relative imports and
``importlib.import_module("…")`` with a literal name.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from helpers import REPO_ROOT

QT = ("PySide6", "qasync", "shiboken6", "branchwise.desktop.widgets")
PACKAGE_DIRS = {"core": "branchwise.core", "desktop": "branchwise.desktop"}


@dataclass(frozen=True)
class Rule:
    """Files under ``prefix`` (a path relative to the source root) must not reach ``forbidden``."""

    prefix: str
    forbidden: tuple[str, ...]


RULES = (
    Rule("core/", (*QT, "branchwise.desktop")),
    Rule("desktop/host/", (*QT, "branchwise.desktop.app")),
    # The console script opens the window through a function-level import of
    # desktop/app.py: that is its job, so app is allowed here and only there.
    Rule("desktop/entry.py", QT),
    # Checks the system libraries Qt needs before Qt is loaded: it must not load Qt itself.
    Rule("desktop/system_libraries.py", QT),
)


def module_name(root: Path, path: Path) -> tuple[str, bool]:
    """The dotted name of a source file under ``root``, and whether it is a package."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    parts[0] = PACKAGE_DIRS[parts[0]]
    is_package = parts[-1] == "__init__"
    if is_package:
        parts.pop()
    return ".".join(parts), is_package


def resolve_relative(module: str, is_package: bool, level: int, name: str | None) -> str:
    """The absolute module a ``from <dots><name> import …`` in ``module`` names."""
    package = module if is_package else module.rpartition(".")[0]
    base = package.split(".")
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, name] if name else base)


def imported_modules(
    tree: ast.AST, module: str, is_package: bool
) -> Iterator[tuple[int, str, str]]:
    """``(line, target, source text)`` for every module an import in ``tree`` may load.

    ``from X import y`` yields both ``X`` and ``X.y`` (``y`` may be a submodule).
    """
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, ast.unparse(node)
        elif isinstance(node, ast.ImportFrom):
            base = (
                resolve_relative(module, is_package, node.level, node.module)
                if node.level
                else str(node.module)
            )
            text = ast.unparse(node)
            yield node.lineno, base, text
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}", text
        elif isinstance(node, ast.Call) and _is_dynamic_import(node.func):
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                yield node.lineno, first.value, ast.unparse(node)


def _is_dynamic_import(func: ast.expr) -> bool:
    if isinstance(func, ast.Name):
        return func.id in {"__import__", "import_module"}
    return isinstance(func, ast.Attribute) and func.attr == "import_module"


def reaches(target: str, forbidden: str) -> bool:
    return target == forbidden or target.startswith(forbidden + ".")


def layer_violations(root: Path) -> list[str]:
    """Every import under ``root`` that crosses the Qt boundary, as ``file:line: import``."""
    found: list[str] = []
    paths = sorted(p for folder in PACKAGE_DIRS for p in (root / folder).rglob("*.py"))
    for path in paths:
        relative = path.relative_to(root).as_posix()
        rules = [rule for rule in RULES if relative.startswith(rule.prefix)]
        forbidden = [f for rule in rules for f in rule.forbidden]
        if not forbidden:
            continue
        module, is_package = module_name(root, path)
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        reported: set[tuple[int, str]] = set()
        for line, target, text in imported_modules(tree, module, is_package):
            if (line, text) in reported:
                continue
            if any(reaches(target, f) for f in forbidden):
                reported.add((line, text))
                found.append(f"{relative}:{line}: {text}")
    return found


def test_core_and_host_never_reach_qt() -> None:
    violations = layer_violations(REPO_ROOT)
    assert not violations, "imports across the Qt boundary:\n" + "\n".join(violations)


def test_importing_core_host_and_entry_loads_no_qt() -> None:
    """At run time too: importing every Qt-free module loads no Qt binding."""
    modules = ["branchwise.desktop.entry", "branchwise.desktop.system_libraries"]
    for folder in ("core", "desktop/host"):
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            modules.append(module_name(REPO_ROOT, path)[0])
    script = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'PySide6', 'qasync', 'shiboken6'} or m.startswith('branchwise.desktop.widgets')))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]", proc.stdout


def _plant(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_the_checker_reports_planted_bad_imports(tmp_path: Path) -> None:
    _plant(
        tmp_path,
        {
            "core/__init__.py": "",
            "core/clean.py": "import os\nfrom branchwise.core.errors import BranchwiseError\n",
            "core/in_function.py": "def show():\n    from PySide6.QtWidgets import QLabel\n",
            "core/typed.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from branchwise.desktop.host.host import Host\n"
            ),
            "core/sub/__init__.py": "",
            "core/sub/rel.py": "from ... import desktop\n",
            "desktop/__init__.py": "",
            "desktop/entry.py": "import sys\nimport qasync\n",
            "desktop/app.py": "import qasync\nfrom PySide6.QtWidgets import QApplication\n",
            "desktop/host/__init__.py": "",
            "desktop/host/ok.py": "from branchwise.desktop.host import notices\n",
            "desktop/host/relative.py": "from ..widgets import window\n",
            "desktop/host/sneaky.py": (
                "import importlib\ndef load():\n    return importlib.import_module('shiboken6')\n"
            ),
            "desktop/host/starter.py": "def go():\n    from branchwise.desktop import app\n",
            "desktop/widgets/__init__.py": "",
            "desktop/widgets/window.py": "from PySide6.QtWidgets import QMainWindow\n",
        },
    )
    assert layer_violations(tmp_path) == [
        "core/in_function.py:2: from PySide6.QtWidgets import QLabel",
        "core/sub/rel.py:1: from ... import desktop",
        "core/typed.py:3: from branchwise.desktop.host.host import Host",
        "desktop/entry.py:2: import qasync",
        "desktop/host/relative.py:1: from ..widgets import window",
        "desktop/host/sneaky.py:3: importlib.import_module('shiboken6')",
        "desktop/host/starter.py:2: from branchwise.desktop import app",
    ]


def test_relative_imports_resolve_against_the_package() -> None:
    assert resolve_relative("branchwise.desktop.host.rows", False, 2, "widgets") == (
        "branchwise.desktop.widgets"
    )
    assert resolve_relative("branchwise.desktop.host", True, 1, "rows") == (
        "branchwise.desktop.host.rows"
    )
    assert resolve_relative("branchwise.core.sub.rel", False, 3, None) == "branchwise"
