"""Widgets ask, the host does: export, compare and the model list run as host operations.

The window, sidebar, transcript and settings dialog only show what the
host's operations answer; no widget module reaches for a file, a log or the
network itself, neither by importing what does nor by calling a server's
methods through an object it holds.
"""

from __future__ import annotations

import ast
import inspect
import re
import socket
from collections.abc import Callable
from pathlib import Path

from helpers.gui import WAIT_MS, App, seed_session
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from branchwise.core.providers.detect import choose_provider
from branchwise.core.remote.client import RemoteStore
from branchwise.desktop.host.sources import RemoteConversation, RemoteSource, Servers
from branchwise.desktop.widgets.settings_dialog import SettingsDialog

WIDGETS = Path(__file__).resolve().parents[3] / "desktop" / "widgets"
HOST_WORK = {
    # what reads a log or writes a file
    "compare",
    "export_document",
    "render_markdown",
    "write_export",
    "read_session_log",
    "SessionStore",
    "atomic_write_bytes",
    "save_connection",
    "forget_connection",
    "load_connections",
    "read_token",
    # what calls the network
    "OpenAIProvider",
    "detect_servers",
    "RemoteStore",
    "httpx",
}
"""Names a widget module must not import: the host's operations use them for it."""


def test_no_widget_module_imports_what_reads_logs_writes_files_or_calls_the_network() -> None:
    found = []
    for path in sorted(WIDGETS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                found += [
                    f"{path.name}: {alias.name}" for alias in node.names if alias.name in HOST_WORK
                ]
    assert found == []


def _network_methods() -> set[str]:
    """The public coroutine methods of what talks to a server: each one calls the network."""
    found = set()
    for cls in (RemoteStore, RemoteSource, RemoteConversation, Servers):
        for name, _method in inspect.getmembers(cls, inspect.iscoroutinefunction):
            if not name.startswith("_"):
                found.add(name)
    return found


HELD = re.compile(r"_?(server|source|remote|client|conversation|store)s?", re.IGNORECASE)
"""How a widget names an object it holds that talks to a server (a ``RemoteSource``,
its ``RemoteStore``, a ``RemoteConversation``)."""


def _receiver(node: ast.expr) -> list[str]:
    """The names of ``a.b.c`` (``self.host.servers`` is ``["self", "host", "servers"]``)."""
    names: list[str] = []
    while isinstance(node, ast.Attribute | ast.Call | ast.Subscript):
        if isinstance(node, ast.Attribute):
            names.append(node.attr)
            node = node.value
        else:
            node = node.func if isinstance(node, ast.Call) else node.value
    if isinstance(node, ast.Name):
        names.append(node.id)
    return names[::-1]


def network_calls(source: str) -> list[str]:
    """Calls of a server's network methods on an object the code holds (not asked of the host)."""
    network = _network_methods()
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        names = _receiver(node.func.value)
        if (
            node.func.attr in network
            and names
            and "host" not in names
            and HELD.fullmatch(names[-1])
        ):
            found.append(f"{node.lineno}: {'.'.join(names)}.{node.func.attr}()")
    return found


def test_no_widget_calls_a_server_through_an_object_it_holds() -> None:
    found = [
        f"{path.name}:{call}"
        for path in sorted(WIDGETS.glob("*.py"))
        for call in network_calls(path.read_text(encoding="utf-8"))
    ]
    assert found == []


def test_the_network_call_check_catches_a_held_server() -> None:
    planted = (
        "async def rename(self, server, remote, conversation):\n"
        "    await server.rename('id', 'title')\n"
        "    await self.server.remote.events('id', 0)\n"
        "    await conversation.load_earlier()\n"
        "    await self.host.server_operations.rename(ref, 'title')\n"
        "    self._timer.stop()\n"
    )
    assert network_calls(planted) == [
        "2: server.rename()",
        "3: self.server.remote.events()",
        "4: conversation.load_earlier()",
    ]


def _closed_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/v1"


def test_an_export_the_host_refuses_is_a_notice_and_writes_nothing(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    app = make_app()
    sid = seed_session(app.host.store, ["How do I print?"], title="Printing")
    app.host.start()
    app.window.open_tab(sid)
    before = len(app.notice_texts())
    target = tmp_path / "no such folder" / "out.md"
    app.window.export_to(sid, target)
    qtbot.waitUntil(lambda: len(app.notice_texts()) > before, timeout=WAIT_MS)
    assert not target.exists()
    assert not any(text.startswith("Exported") for text in app.notice_texts())


def test_refreshing_models_from_a_server_that_is_gone_says_so_in_the_dialog(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app(provider_factory=choose_provider)
    dialog = app.window.show_settings()
    assert isinstance(dialog, SettingsDialog)
    dialog.provider.setCurrentIndex(dialog.provider.findData("openai"))
    dialog.base_url.setText(_closed_url())
    qtbot.mouseClick(dialog.refresh_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dialog.error_text("model") != "", timeout=WAIT_MS)
    qtbot.waitUntil(dialog.refresh_button.isEnabled, timeout=WAIT_MS)
    assert dialog.model.count() == 0
    assert dialog.models_status.text() == ""
