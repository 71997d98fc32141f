"""Closing a tab or the window while an answer streams asks once, and stops only on "stop"."""

from __future__ import annotations

from collections.abc import Callable

from helpers.gui import WAIT_MS, App, run
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractButton, QMessageBox
from pytestqt.qtbot import QtBot

from branchwise.desktop.widgets.conversation_tab import ConversationTab


def _streaming_tab(qtbot: QtBot, app: App, prompt: str) -> ConversationTab:
    app.window.new_conversation()
    tab = app.window.current_tab()
    assert tab is not None
    tab.composer.editor.setPlainText(prompt)
    qtbot.mouseClick(tab.composer.send_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: app.host.is_running(tab.session_id), timeout=WAIT_MS)
    return tab


def _end_reasons(app: App, session_id: str) -> list[str | None]:
    return [t.end_reason for t in app.host.store.read(session_id).projection.turns]


def _question(app: App) -> QMessageBox:
    box = app.window.confirm_box
    assert box is not None and box.isVisible()
    return box


def _click(qtbot: QtBot, box: QMessageBox, text: str) -> None:
    (button,) = [b for b in box.findChildren(QAbstractButton) if b.text() == text]
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


def test_closing_a_streaming_tab_asks_and_cancel_keeps_it_running(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    # Slow enough that the answer is still streaming after Cancel on a loaded machine.
    app = make_app(delay=0.2)
    tab = _streaming_tab(qtbot, app, "tell me a long story")
    index = app.window.tabs.indexOf(tab)
    app.window.tabs.tabCloseRequested.emit(index)
    qtbot.waitUntil(lambda: app.window.confirm_box is not None, timeout=WAIT_MS)
    box = _question(app)
    assert box.text() == "“tell me a long story” is still answering. Stop the answer and close it?"
    app.window.tabs.tabCloseRequested.emit(index)  # asked once, not twice
    assert app.window.confirm_box is box
    _click(qtbot, box, "Cancel")
    qtbot.waitUntil(lambda: app.window.confirm_box is None, timeout=WAIT_MS)
    assert app.window.tabs.indexOf(tab) >= 0 and app.host.is_running(tab.session_id)
    widget = tab.transcript.turn_widgets()[0]
    length = len(widget.answer_text())
    qtbot.waitUntil(lambda: len(widget.answer_text()) > length, timeout=WAIT_MS)  # still streams

    app.window.tabs.tabCloseRequested.emit(app.window.tabs.indexOf(tab))
    qtbot.waitUntil(lambda: app.window.confirm_box is not None, timeout=WAIT_MS)
    _click(qtbot, _question(app), "Stop and close")
    qtbot.waitUntil(lambda: app.window.tabs.indexOf(tab) < 0, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: not app.host.is_running(tab.session_id), timeout=WAIT_MS)
    qtbot.waitUntil(lambda: _end_reasons(app, tab.session_id) == ["cancelled"], timeout=WAIT_MS)


def test_a_finished_tab_closes_without_a_question(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app()
    app.window.new_conversation()
    tab = app.window.current_tab()
    assert tab is not None
    app.window.tabs.tabCloseRequested.emit(app.window.tabs.indexOf(tab))
    qtbot.waitUntil(lambda: app.window.tabs.indexOf(tab) < 0, timeout=WAIT_MS)
    assert app.window.confirm_box is None


def test_quitting_while_answers_stream_asks_once_then_stops_them(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app(delay=0.05)
    first = _streaming_tab(qtbot, app, "first story")
    second = _streaming_tab(qtbot, app, "second story")
    closed: list[bool] = []
    app.window.closed.connect(lambda: closed.append(True))
    app.window.close()
    qtbot.waitUntil(lambda: app.window.confirm_box is not None, timeout=WAIT_MS)
    box = _question(app)
    assert box.text() == "2 answers are still streaming. Stop them and quit?"
    app.window.close()
    assert app.window.confirm_box is box
    _click(qtbot, box, "Cancel")
    qtbot.waitUntil(lambda: app.window.confirm_box is None, timeout=WAIT_MS)
    assert app.window.isVisible() and not closed
    app.window.close()
    qtbot.waitUntil(lambda: app.window.confirm_box is not None, timeout=WAIT_MS)
    _click(qtbot, _question(app), "Stop and quit")
    qtbot.waitUntil(lambda: bool(closed), timeout=WAIT_MS)
    run(qtbot, app.host.shutdown())  # what the app does once the window closed
    for tab in (first, second):
        (turn,) = app.host.store.read(tab.session_id).projection.turns
        assert turn.end_reason == "cancelled"
