"""Bring back to parent…: a branch's answer or summary appears in the parent's tab."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from helpers.forking import fork_at
from helpers.gui import WAIT_MS, App
from helpers.sessions import complete_turn
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from branchwise.core.store.store import SessionStore
from branchwise.desktop.widgets.merge_dialog import BringBackDialog


def _seed(store: SessionStore) -> tuple[str, str]:
    with store.create("Trip plans") as writer:
        complete_turn(writer, "r1", "where to?")
        root = writer.session_id
    child = fork_at(store, root, "r1", op="op-side").child_session_id
    with store.open_writer(child) as writer:
        writer.set_title("Side trip")
        complete_turn(writer, "c1", "what about Kyoto?")
        complete_turn(writer, "c2", "and Nara?")
    return root, child


def _open_dialog(qtbot: QtBot, app: App, child: str) -> BringBackDialog:
    app.window.open_tab(child)
    tab = app.tab(child)
    qtbot.waitUntil(lambda: tab.banner.bring_back_button.isVisible(), timeout=WAIT_MS)
    assert tab.banner.bring_back_button.text() == "Bring back to parent…"
    qtbot.mouseClick(tab.banner.bring_back_button, Qt.MouseButton.LeftButton)
    dialog = tab.bring_back_dialog
    assert dialog is not None
    qtbot.waitUntil(dialog.isVisible, timeout=WAIT_MS)
    return dialog


def test_bring_back_an_answer_into_the_open_parent(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    root, child = _seed(SessionStore(tmp_path / "root"))
    app = make_app()
    app.window.open_tab(root)
    qtbot.waitUntil(lambda: len(app.turns(root)) == 1, timeout=WAIT_MS)
    dialog = _open_dialog(qtbot, app, child)
    qtbot.waitUntil(lambda: dialog.answers.count() == 2, timeout=WAIT_MS)
    items = [dialog.answers.item(i) for i in range(dialog.answers.count())]
    assert [i.text() for i in items] == [
        "what about Kyoto? → answer to what about Kyoto?",
        "and Nara? → answer to and Nara?",
    ]
    assert not dialog.confirm_button.isEnabled()

    # The demo writes a deterministic summary; it is editable, and cleared here.
    qtbot.mouseClick(dialog.summary_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(
        lambda: dialog.summary.toPlainText().startswith("Summary of the branch (2 turns):"),
        timeout=WAIT_MS,
    )
    assert "- and Nara? → answer to and Nara?" in dialog.preview.toPlainText()
    dialog.summary.setPlainText("")

    items[1].setCheckState(Qt.CheckState.Checked)
    # The chosen answer is read by the host off the UI thread; Confirm waits for it.
    assert not dialog.confirm_button.isEnabled()
    qtbot.waitUntil(lambda: dialog.preview.toPlainText() == "answer to and Nara?", timeout=WAIT_MS)
    qtbot.waitUntil(dialog.confirm_button.isEnabled, timeout=WAIT_MS)
    qtbot.mouseClick(dialog.confirm_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not dialog.isVisible(), timeout=WAIT_MS)
    assert dialog.result_merge is not None and dialog.result_merge.created

    def merged() -> list[str]:
        return [t for w in app.turns(root) for r, t in w.shown_messages() if r == "merge"]

    qtbot.waitUntil(lambda: len(merged()) == 1, timeout=WAIT_MS)
    assert merged()[0].startswith("From branch Side trip:")
    assert "answer to and Nara?" in merged()[0]
    # The merge opens the branch it came from.
    app.window.tabs.setCurrentWidget(app.tab(root))
    qtbot.waitUntil(lambda: app.tab(root).isVisible(), timeout=WAIT_MS)
    card = next(w for w in app.turns(root) if w.open_source_button.isVisible())
    assert card.open_source_button.text() == "Open branch"
    assert all(not w.open_source_button.isVisible() for w in app.turns(root) if w is not card)
    qtbot.mouseClick(card.open_source_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: app.window.tabs.currentWidget() is app.tab(child), timeout=WAIT_MS)


def test_a_running_parent_refuses_and_nothing_is_written(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    root, child = _seed(SessionStore(tmp_path / "root"))
    app = make_app(delay=0.05)
    app.window.open_tab(root)
    qtbot.waitUntil(lambda: len(app.turns(root)) == 1, timeout=WAIT_MS)
    editor = app.tab(root).composer.editor
    editor.setPlainText("a long question " * 20)
    qtbot.keyClick(editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: app.host.is_running(root), timeout=WAIT_MS)

    dialog = _open_dialog(qtbot, app, child)
    qtbot.waitUntil(lambda: dialog.answers.count() == 2, timeout=WAIT_MS)
    dialog.answers.item(0).setCheckState(Qt.CheckState.Checked)
    qtbot.waitUntil(dialog.confirm_button.isEnabled, timeout=WAIT_MS)
    qtbot.mouseClick(dialog.confirm_button, Qt.MouseButton.LeftButton)
    refusal = "Wait for the answer to finish, then try again."
    qtbot.waitUntil(lambda: dialog.error_label.text() == refusal, timeout=WAIT_MS)
    assert dialog.isVisible() and dialog.result_merge is None
    assert dialog.confirm_button.isEnabled()
    session = app.host.session(root)
    assert session is not None and session.projection is not None
    assert session.projection.merges == []
    app.host.stop(root)
    qtbot.waitUntil(lambda: not app.host.is_running(root), timeout=WAIT_MS)
    dialog.reject()


def test_a_conversation_that_is_not_a_branch_has_no_bring_back(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    root, _child = _seed(SessionStore(tmp_path / "root"))
    app = make_app()
    app.window.open_tab(root)
    qtbot.waitUntil(lambda: len(app.turns(root)) == 1, timeout=WAIT_MS)
    assert not app.tab(root).banner.bring_back_button.isVisible()
