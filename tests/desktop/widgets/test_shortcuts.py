"""Keyboard: every everyday action has a key, and Help lists them all as the user sees them."""

from __future__ import annotations

from collections.abc import Callable

from helpers.gui import WAIT_MS, App, seed_session
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QInputDialog
from pytestqt.qtbot import QtBot


def _active(qtbot: QtBot, app: App) -> None:
    app.window.activateWindow()
    qtbot.waitUntil(app.window.isActiveWindow, timeout=WAIT_MS)


def test_help_lists_every_shortcut_in_the_active_language(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app()
    texts = [a.text() for a in app.window.help_menu.actions()]
    assert "Keyboard shortcuts" in texts
    dialog = app.window.show_shortcuts()
    rows = dict(dialog.rows())
    assert dialog.windowTitle() == "Keyboard shortcuts"
    assert rows["New conversation"] == "Ctrl+N"
    assert rows["Search all conversations"] == "Ctrl+K"
    assert rows["Find in conversation"] == "Ctrl+F"
    assert rows["Branch at the last finished turn"] == "Ctrl+Shift+B"
    assert rows["Stop the answer"] == "Esc"
    assert rows["Rename conversation"] == "F2"
    assert rows["Next tab"] == "Ctrl+Tab"
    assert rows["Previous tab"] == "Ctrl+Shift+Tab"
    assert rows["Close tab"] == "Ctrl+W"
    assert rows["Previous alternative at this turn"] == "Alt+Left"
    assert rows["Next alternative at this turn"] == "Alt+Right"
    assert rows["Send the message"] == "Enter"
    dialog.close()
    app.window.language_actions["zh_Hans"].trigger()
    rows = dict(app.window.show_shortcuts().rows())
    assert rows["关闭标签页"] == "Ctrl+W"
    assert rows["从最后一个已完成的轮次分支"] == "Ctrl+Shift+B"
    assert rows["此轮次的下一个版本"].startswith("Alt+")  # Qt names the arrow key in Chinese
    app.window.language_actions["en"].trigger()


def test_tab_keys_step_through_and_close_tabs(qtbot: QtBot, make_app: Callable[..., App]) -> None:
    app = make_app()
    ids = [seed_session(app.host.store, [f"q{i}"], f"Chat {i}") for i in range(3)]
    for session_id in ids:
        app.window.open_session(session_id)
    _active(qtbot, app)
    assert app.window.current_tab().title == "Chat 2"
    qtbot.keyClick(app.window, Qt.Key.Key_Tab, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: app.window.current_tab().title == "Chat 0", timeout=WAIT_MS)
    qtbot.keyClick(
        app.window,
        Qt.Key.Key_Backtab,
        Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier,
    )
    qtbot.waitUntil(lambda: app.window.current_tab().title == "Chat 2", timeout=WAIT_MS)
    qtbot.keyClick(app.window, Qt.Key.Key_W, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(
        lambda: [t.title for t in app.window.conversation_tabs()] == ["Chat 0", "Chat 1"],
        timeout=WAIT_MS,
    )
    qtbot.keyClick(app.window, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: len(app.window.conversation_tabs()) == 3, timeout=WAIT_MS)


def test_f2_renames_the_conversation_in_front(qtbot: QtBot, make_app: Callable[..., App]) -> None:
    app = make_app()
    session_id = seed_session(app.host.store, ["q"], "Old name")
    app.window.open_session(session_id)
    _active(qtbot, app)
    qtbot.keyClick(app.window, Qt.Key.Key_F2)
    qtbot.waitUntil(lambda: app.window.findChild(QInputDialog, "renameDialog") is not None)
    dialog = app.window.findChild(QInputDialog, "renameDialog")
    assert dialog.textValue() == "Old name"
    dialog.setTextValue("New name")
    dialog.accept()
    qtbot.waitUntil(lambda: app.window.current_tab().title == "New name", timeout=WAIT_MS)


def test_esc_stops_the_answer_and_ctrl_shift_b_branches_the_last_turn(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app(delay=0.05)
    app.window.new_conversation()
    tab = app.window.current_tab()
    assert tab is not None
    _active(qtbot, app)
    qtbot.keyClick(
        app.window,
        Qt.Key.Key_B,
        Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier,
    )
    qtbot.waitUntil(
        lambda: "No finished turn to branch from in this conversation yet." in app.notice_texts(),
        timeout=WAIT_MS,
    )
    tab.composer.editor.setPlainText("tell me a long story")
    qtbot.keyClick(tab.composer.editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: app.host.is_running(tab.session_id), timeout=WAIT_MS)
    assert app.window.stop_action.isEnabled()
    qtbot.keyClick(tab.composer.editor, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: not app.host.is_running(tab.session_id), timeout=WAIT_MS)
    widget = tab.transcript.turn_widgets()[0]
    assert widget.status_label.text() == "Stopped before the answer was complete."
    qtbot.waitUntil(lambda: widget.branch_button.isEnabled(), timeout=WAIT_MS)
    qtbot.keyClick(
        app.window,
        Qt.Key.Key_B,
        Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier,
    )
    qtbot.waitUntil(lambda: len(app.window.conversation_tabs()) == 2, timeout=WAIT_MS)
    assert app.window.current_tab().title.endswith("(branch 1)")


def test_esc_in_the_find_bar_closes_it_and_leaves_the_answer_running(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app(delay=0.05)
    app.window.new_conversation()
    tab = app.window.current_tab()
    assert tab is not None
    _active(qtbot, app)
    tab.composer.editor.setPlainText("another long story")
    qtbot.keyClick(tab.composer.editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: app.host.is_running(tab.session_id), timeout=WAIT_MS)
    qtbot.keyClick(app.window, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: tab.find_bar.isVisible(), timeout=WAIT_MS)
    qtbot.keyClick(tab.find_bar.field, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: not tab.find_bar.isVisible(), timeout=WAIT_MS)
    assert app.host.is_running(tab.session_id)
    app.host.stop(tab.session_id)
    qtbot.waitUntil(lambda: not app.host.is_running(tab.session_id), timeout=WAIT_MS)
