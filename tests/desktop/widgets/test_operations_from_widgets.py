"""Widgets ask, the host does: export, compare and the model list run as host operations.

The window, sidebar, transcript and settings dialog only show what the
host's operations answer; no widget module reaches for a file, a log or the
network itself.
"""

from __future__ import annotations

import ast
import socket
from collections.abc import Callable
from pathlib import Path

from helpers.gui import WAIT_MS, App, seed_session
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from branchwise.core.providers.detect import choose_provider
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
