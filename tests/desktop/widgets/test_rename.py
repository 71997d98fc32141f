"""Renaming a conversation from the sidebar: title everywhere, refusals as notices."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

from helpers import HELPERS_DIR
from helpers.gui import WAIT_MS, App, seed_session
from helpers.sessions import log_file
from PySide6.QtWidgets import QInputDialog
from pytestqt.qtbot import QtBot

from branchwise.core.i18n.reasons import reason_text

WORKER = HELPERS_DIR / "workers.py"


def _rename_through_dialog(qtbot: QtBot, app: App, session_id: str, text: str) -> None:
    app.window.sidebar.ask_rename(session_id)
    dialog = app.window.sidebar.findChild(QInputDialog, "renameDialog")
    assert dialog is not None
    qtbot.waitUntil(dialog.isVisible, timeout=WAIT_MS)
    dialog.setTextValue(text)
    dialog.accept()


def _tab_texts(app: App) -> list[str]:
    return [app.window.tabs.tabText(i) for i in range(app.window.tabs.count())]


def test_rename_updates_sidebar_tab_and_disk(qtbot: QtBot, make_app: Callable[..., App]) -> None:
    app = make_app()
    sid = seed_session(app.host.store, ["first question"], title="Old name")
    app.host.start()
    app.window.open_tab(sid)
    qtbot.waitUntil(lambda: "Old name" in _tab_texts(app), timeout=WAIT_MS)
    _rename_through_dialog(qtbot, app, sid, "  Trip   to Porto ")
    qtbot.waitUntil(
        lambda: (
            app.window.sidebar.item_for(sid) is not None
            and app.window.sidebar.item_for(sid).text(0).endswith("Trip to Porto")
        ),  # type: ignore[union-attr]
        timeout=WAIT_MS,
    )
    qtbot.waitUntil(lambda: "Trip to Porto" in _tab_texts(app), timeout=WAIT_MS)
    assert app.host.store.manifest(sid).title == "Trip to Porto"
    assert app.host.store.read(sid).projection.title == "Trip to Porto"


def test_an_empty_title_is_refused_with_its_reason_and_nothing_written(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app()
    sid = seed_session(app.host.store, ["a question"], title="Keep me")
    app.host.start()
    log = log_file(app.host.store.session_dir(sid))
    before = log.read_bytes()
    _rename_through_dialog(qtbot, app, sid, "   ")
    expected = reason_text("invalid_title", maxLength=200)
    qtbot.waitUntil(lambda: expected in app.notice_texts(), timeout=WAIT_MS)
    assert log.read_bytes() == before
    assert app.host.store.manifest(sid).title == "Keep me"


def test_a_conversation_another_process_writes_is_not_renamed(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app()
    sid = seed_session(app.host.store, ["a question"], title="Busy")
    app.host.start()
    holder = subprocess.Popen(
        [sys.executable, str(WORKER), str(app.root), sid, "hold"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        app.window.sidebar.rename(sid, "Mine now")
        expected = reason_text("lease_held")
        qtbot.waitUntil(lambda: expected in app.notice_texts(), timeout=WAIT_MS)
        assert app.host.store.manifest(sid).title == "Busy"
    finally:
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.close()
        holder.wait()
        holder.stdout.close()
