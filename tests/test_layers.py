"""The import rules (docs/architecture.md, "Layers"), checked on every import statement.

Three rules:

- **The Qt boundary.** ``core/`` and ``desktop/host/`` never reach PySide6,
  qasync, shiboken6 or the widgets (nor ``desktop/app.py``, which is Qt);
  ``desktop/entry.py`` stays Qt-free so headless commands run without a
  display; ``core/`` never reaches ``branchwise.desktop`` at all.
- **Layers inside core run one way** (:data:`CORE_LAYERS`, bottom up): a
  module imports its own layer or lower ones, never a higher one.
- **No import loops** among the modules of ``core/`` and ``desktop/``.

Every import counts: module-level ones, imports inside functions,
``if TYPE_CHECKING:`` blocks, relative imports and
``importlib.import_module("…")`` with a literal name. Each checker is run on
a planted tree too, so a checker that stopped finding anything would fail.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping
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


# -- layers inside core ----------------------------------------------------------------------


@dataclass(frozen=True)
class Layer:
    """One layer of ``core/``: the names (under ``branchwise.core``) that live in it.

    A name is a top-level module or package (``"store"`` covers
    ``core/store/`` and all it holds) or a dotted path to a part of one
    (``"conversation.settings"``), which takes precedence over its package.
    """

    name: str
    members: tuple[str, ...]


CORE_LAYERS: tuple[Layer, ...] = (
    Layer("errors and ids", ("errors", "ids")),
    # i18n imports only errors, and the words it translates are needed from the
    # conversation features up to the CLI, so it sits right above the errors.
    Layer("i18n", ("i18n",)),
    Layer("fs", ("fs",)),
    Layer("log", ("log",)),
    # A conversation's own model, system prompt and temperature are a value the
    # projection builds from ``session/config`` events and a fork writes into
    # the child: it lives with the projection, although its module sits in
    # ``conversation/`` beside the features that show and change it.
    Layer("projection", ("projection", "conversation.settings")),
    Layer("store", ("store",)),
    Layer("fork and lineage", ("fork", "lineage")),
    # What people do with a conversation, over the projection: names and
    # labels, ask again, merge, compare, export; search and importing.
    Layer("conversation features", ("conversation", "search", "importing")),
    # The user's settings file, and the rule for a model server's address:
    # providers and the runtime read them, nothing in settings asks a model.
    Layer("settings", ("settings",)),
    # Everything that asks a model: the providers, the turn runner, a merge's summary,
    # a fan-out's answers and a fuse.
    Layer("runtime and providers", ("runtime", "providers", "fanout_run")),
    # ``branchwise.core`` itself is the public API: it gathers from every layer
    # and nothing in core imports it.
    Layer("entry points", ("remote", "cli", "__init__")),
)
"""The layers of ``core/``, bottom up. A new package of core names its layer here."""

CORE_PACKAGE = "branchwise.core"


def layer_index(layers: Iterable[Layer]) -> dict[str, tuple[int, str]]:
    """Each member name -> (its layer's height, the layer's name)."""
    return {
        member: (height, layer.name)
        for height, layer in enumerate(layers)
        for member in layer.members
    }


def core_member(dotted: str) -> str | None:
    """``"store.store"`` for ``branchwise.core.store.store``, ``"__init__"`` for the package."""
    if dotted == CORE_PACKAGE:
        return "__init__"
    if dotted.startswith(CORE_PACKAGE + "."):
        return dotted[len(CORE_PACKAGE) + 1 :]
    return None


def layer_of(dotted: str, index: Mapping[str, tuple[int, str]]) -> tuple[int, str] | None:
    """The layer of a module under ``branchwise.core``: its longest listed prefix's."""
    member = core_member(dotted)
    if member is None:
        return None
    parts = member.split(".")
    for length in range(len(parts), 0, -1):
        found = index.get(".".join(parts[:length]))
        if found is not None:
            return found
    return None


@dataclass(frozen=True)
class SourceModule:
    """A source file, its dotted name, and whether it is a package."""

    path: Path
    relative: str
    name: str
    is_package: bool


def source_modules(root: Path, folders: Iterable[str]) -> list[SourceModule]:
    found = []
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            name, is_package = module_name(root, path)
            found.append(SourceModule(path, path.relative_to(root).as_posix(), name, is_package))
    return found


def import_targets(
    tree: ast.AST, source: SourceModule, known: Iterable[str] | None = None
) -> Iterator[tuple[int, str, str]]:
    """``(line, module, source text)`` for each module an import statement of ``tree`` loads.

    Unlike :func:`imported_modules`, ``from X import y`` names ``X.y`` only
    when ``y`` is one of the ``known`` modules, and ``X`` otherwise: a name
    taken from a package is the package's.
    """
    modules = set(known or ())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, ast.unparse(node)
        elif isinstance(node, ast.ImportFrom):
            base = (
                resolve_relative(source.name, source.is_package, node.level, node.module)
                if node.level
                else str(node.module)
            )
            text = ast.unparse(node)
            for target in dict.fromkeys(
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                for alias in node.names
            ):
                yield node.lineno, target, text
        elif isinstance(node, ast.Call) and _is_dynamic_import(node.func):
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                yield node.lineno, first.value, ast.unparse(node)


def upward_imports(root: Path, layers: tuple[Layer, ...] = CORE_LAYERS) -> list[str]:
    """Every import in ``root/core`` that reaches a higher layer, and every module with none.

    As ``file:line: import (from layer -> to layer)``.
    """
    index = layer_index(layers)
    modules = source_modules(root, ["core"])
    known = {module.name for module in modules}
    found: list[str] = []
    for module in modules:
        own = layer_of(module.name, index)
        if own is None:
            found.append(f"{module.relative}: in no layer of CORE_LAYERS")
            continue
        tree = ast.parse(module.path.read_text(encoding="utf-8"), str(module.path))
        for line, target, text in import_targets(tree, module, known):
            reached = layer_of(target, index)
            if reached is not None and reached[0] > own[0]:
                found.append(f"{module.relative}:{line}: {text} ({own[1]} -> {reached[1]})")
    return found


def test_core_layers_run_one_way() -> None:
    violations = upward_imports(REPO_ROOT)
    assert not violations, "imports that run up core's layers:\n" + "\n".join(violations)


def test_every_name_has_one_layer() -> None:
    names = [member for layer in CORE_LAYERS for member in layer.members]
    assert len(names) == len(set(names)), names


def test_the_layer_checker_reports_planted_upward_imports(tmp_path: Path) -> None:
    _plant(
        tmp_path,
        {
            "core/__init__.py": "from branchwise.core.store.store import SessionStore\n",
            "core/errors.py": "",
            "core/log/__init__.py": "",
            "core/log/frames.py": "from branchwise.core.errors import CorruptLog\n",
            "core/log/segments.py": (
                "from branchwise.core.log.frames import Frame\n"
                "def load():\n"
                "    from branchwise.core.store.manifest import load_manifest\n"
            ),
            "core/log/writer.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from ..projection.turns import TurnTracker\n"
            ),
            "core/log/sidecars.py": "from branchwise.core import projection\n",
            "core/projection/__init__.py": "",
            "core/projection/turns.py": "import branchwise.core.conversation.settings\n",
            "core/store/__init__.py": "",
            "core/store/store.py": "from branchwise.core.log import segments, writer\n",
            "core/conversation/__init__.py": "",
            "core/conversation/settings.py": "from branchwise.core.errors import BranchwiseError\n",
            "core/conversation/names.py": (
                "import importlib\n"
                "def words():\n"
                "    return importlib.import_module('branchwise.core.cli.main')\n"
            ),
            "core/newcomer.py": "",
        },
    )
    assert upward_imports(tmp_path) == [
        "core/conversation/names.py:3: importlib.import_module('branchwise.core.cli.main')"
        " (conversation features -> entry points)",
        "core/log/segments.py:3: from branchwise.core.store.manifest import load_manifest"
        " (log -> store)",
        "core/log/sidecars.py:1: from branchwise.core import projection (log -> projection)",
        "core/log/writer.py:3: from ..projection.turns import TurnTracker (log -> projection)",
        "core/newcomer.py: in no layer of CORE_LAYERS",
    ]


def test_a_new_package_fits_by_naming_its_layer(tmp_path: Path) -> None:
    """``core/search/`` or ``core/conversation/`` needs one table entry, no other change."""
    _plant(
        tmp_path,
        {
            "core/__init__.py": "",
            "core/store/__init__.py": "",
            "core/runtime.py": "",
            "core/atlas/__init__.py": "",
            "core/atlas/index.py": "from branchwise.core.store import store\n",
            "core/atlas/query.py": "from branchwise.core import runtime\n",
        },
    )
    layers = (*CORE_LAYERS[:-3], Layer("new", ("atlas",)), *CORE_LAYERS[-3:])
    assert upward_imports(tmp_path, layers) == [
        "core/atlas/query.py:1: from branchwise.core import runtime (new -> runtime and providers)"
    ]


# -- import loops ----------------------------------------------------------------------------


def import_graph(root: Path, folders: Iterable[str] = PACKAGE_DIRS) -> dict[str, set[str]]:
    """Module -> the modules under ``folders`` it imports (at any level of the file)."""
    modules = source_modules(root, folders)
    known = {module.name for module in modules}
    graph: dict[str, set[str]] = {}
    for module in modules:
        tree = ast.parse(module.path.read_text(encoding="utf-8"), str(module.path))
        graph[module.name] = {
            target
            for _line, target, _text in import_targets(tree, module, known)
            if target in known and target != module.name
        }
    return graph


def strongly_connected(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other, round and round (Tarjan)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for start in sorted(graph):
        if start in order:
            continue
        work = [(start, iter(sorted(graph[start])))]
        order[start] = low[start] = len(order)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in order:
                    order[child] = low[child] = len(order)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], order[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == order[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return sorted(groups)


def a_loop(graph: Mapping[str, set[str]], group: list[str]) -> list[str]:
    """One way round a group: the shortest path from its first module back to it."""
    members, start = set(group), group[0]
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & members):
                if child == start:
                    return [*paths[node], start]
                if child not in paths:
                    paths[child] = [*paths[node], child]
                    following.append(child)
        frontier = following
    raise AssertionError(f"{group} is not a loop")


def import_loops(root: Path) -> list[str]:
    """Every import loop under ``root``, as ``a -> b -> a``."""
    graph = import_graph(root)
    return [" -> ".join(a_loop(graph, group)) for group in strongly_connected(graph)]


def core_unit(module: str, layers: tuple[Layer, ...] = CORE_LAYERS) -> str:
    """The name that places a module of core in :data:`CORE_LAYERS` (its top-level name if none)."""
    member = str(core_member(module))
    listed = {name for layer in layers for name in layer.members}
    parts = member.split(".")
    for length in range(len(parts), 0, -1):
        if ".".join(parts[:length]) in listed:
            return ".".join(parts[:length])
    return parts[0]


def core_package_graph(root: Path) -> dict[str, set[str]]:
    """Each named part of core (``log``, ``settings``, …) -> the others it imports."""
    graph: dict[str, set[str]] = {}
    for module, targets in import_graph(root, ["core"]).items():
        source = core_unit(module)
        reached = graph.setdefault(source, set())
        for target in targets:
            name = core_unit(target)
            graph.setdefault(name, set())
            if name != source:
                reached.add(name)
    return graph


def package_loops(root: Path) -> list[str]:
    """Loops between core's packages and top-level modules, as ``a -> b -> a``.

    Modules of two packages can import each other without a module loop
    (``providers/detect`` -> ``settings`` -> ``providers/openai``); the two
    packages still cannot be understood, tested or moved one without the other.
    """
    graph = core_package_graph(root)
    return [" -> ".join(a_loop(graph, group)) for group in strongly_connected(graph)]


def test_no_import_loops_in_core_and_desktop() -> None:
    loops = import_loops(REPO_ROOT)
    assert not loops, "import loops:\n" + "\n".join(loops)


def test_no_loops_between_core_packages() -> None:
    loops = package_loops(REPO_ROOT)
    assert not loops, "packages of core that import each other:\n" + "\n".join(loops)


def test_the_loop_checker_reports_planted_loops(tmp_path: Path) -> None:
    _plant(
        tmp_path,
        {
            "core/__init__.py": "",
            "core/i18n/__init__.py": "",
            "core/i18n/language.py": "from branchwise.core.i18n.locales import choose\n",
            "core/i18n/locales.py": (
                "def choose():\n    from branchwise.core.i18n.reasons import reason_text\n"
            ),
            "core/i18n/reasons.py": "from .language import _\n",
            "core/settings.py": "from branchwise.core.providers import detect\n",
            "core/providers/__init__.py": "",
            "core/providers/detect.py": "import branchwise.core.settings\n",
            "core/fine.py": "from branchwise.core import settings\n",
            "desktop/__init__.py": "",
            "desktop/host/__init__.py": "",
            "desktop/host/host.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from branchwise.desktop.host.session import Session\n"
            ),
            "desktop/host/session.py": "from branchwise.desktop.host import host\n",
        },
    )
    assert import_loops(tmp_path) == [
        "branchwise.core.i18n.language -> branchwise.core.i18n.locales"
        " -> branchwise.core.i18n.reasons -> branchwise.core.i18n.language",
        "branchwise.core.providers.detect -> branchwise.core.settings"
        " -> branchwise.core.providers.detect",
        "branchwise.desktop.host.host -> branchwise.desktop.host.session"
        " -> branchwise.desktop.host.host",
    ]


def test_the_package_loop_checker_reports_packages_that_import_each_other(
    tmp_path: Path,
) -> None:
    _plant(
        tmp_path,
        {
            "core/__init__.py": "",
            "core/settings.py": "from branchwise.core.providers.openai import normalize\n",
            "core/providers/__init__.py": "",
            "core/providers/openai.py": "",
            "core/providers/detect.py": "from branchwise.core.settings import Settings\n",
            "core/log/__init__.py": "",
            "core/log/segments.py": "from branchwise.core.errors import CorruptLog\n",
            "core/errors.py": "",
        },
    )
    assert import_loops(tmp_path) == []
    assert package_loops(tmp_path) == ["providers -> settings -> providers"]
