"""Delete with Undo, the Trash view, File ▸ Export conversation…, and Copy message, as seen."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from helpers.gui import WAIT_MS, App, seed_session
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QMenu, QMessageBox, QPushButton
from pytestqt.qtbot import QtBot

from branchwise.core.store.trash import Trash
from branchwise.desktop.host.window_state import load_window_state
from branchwise.desktop.widgets.notice_area import NoticeRow

CODE_ANSWER = "Try this:\n\n```python\nprint('**hi**')\n```\n\n*Done*"


def _shown(app: App, session_id: str) -> bool:
    return app.window.sidebar.item_for(session_id) is not None


def _row(app: App, text: str) -> NoticeRow | None:
    return next((r for r in app.window.notice_area.rows() if r.text == text), None)


def _menu_action(menu: QMenu, text: str) -> None:
    action = next(a for a in menu.actions() if a.text() == text)
    assert action.isEnabled()
    action.trigger()


def test_delete_from_the_menu_closes_the_tab_and_undo_brings_it_back(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app()
    sid = seed_session(app.host.store, ["first question"], title="Holiday plans")
    app.host.start()
    app.window.open_tab(sid)
    qtbot.waitUntil(lambda: _shown(app, sid), timeout=WAIT_MS)

    _menu_action(app.window.sidebar.context_menu(sid), "Delete")

    qtbot.waitUntil(lambda: not _shown(app, sid), timeout=WAIT_MS)
    assert app.window.tab_for(sid) is None
    qtbot.waitUntil(
        lambda: _row(app, "Moved Holiday plans to the Trash.") is not None, timeout=WAIT_MS
    )
    row = _row(app, "Moved Holiday plans to the Trash.")
    assert row is not None and row.action_button.isVisible()
    assert row.action_button.text() == "Undo"

    qtbot.mouseClick(row.action_button, Qt.MouseButton.LeftButton)

    qtbot.waitUntil(lambda: _shown(app, sid), timeout=WAIT_MS)
    qtbot.waitUntil(
        lambda: "Restored Holiday plans from the Trash." in app.notice_texts(), timeout=WAIT_MS
    )
    assert "Moved Holiday plans to the Trash." not in app.notice_texts()
    assert app.host.store.exists(sid)


def test_the_delete_key_trashes_the_highlighted_conversation(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app()
    keep = seed_session(app.host.store, ["keep"], title="Keep")
    gone = seed_session(app.host.store, ["gone"], title="Gone")
    app.host.start()
    qtbot.waitUntil(lambda: _shown(app, gone), timeout=WAIT_MS)
    tree = app.window.sidebar.tree
    tree.setFocus()
    app.window.sidebar.select(gone)

    qtbot.keyClick(tree, Qt.Key.Key_Delete)

    qtbot.waitUntil(lambda: not _shown(app, gone), timeout=WAIT_MS)
    assert _shown(app, keep)
    assert Trash(app.host.store).contains(gone)


def test_the_trash_view_restores_deletes_forever_and_empties_after_asking(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app()
    ids = {t: seed_session(app.host.store, [t], title=t) for t in ("Alpha", "Beta", "Gamma")}
    app.host.start()
    for title in ("Alpha", "Beta", "Gamma"):
        app.window.delete_conversation(ids[title])
        qtbot.waitUntil(lambda t=title: Trash(app.host.store).contains(ids[t]), timeout=WAIT_MS)

    dialog = app.window.show_trash()
    qtbot.waitUntil(dialog.isVisible, timeout=WAIT_MS)
    assert dialog.shown_titles() == ["Gamma", "Beta", "Alpha"]  # most recently deleted first

    dialog.select(ids["Beta"])
    qtbot.mouseClick(dialog.restore_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dialog.shown_titles() == ["Gamma", "Alpha"], timeout=WAIT_MS)
    qtbot.waitUntil(lambda: _shown(app, ids["Beta"]), timeout=WAIT_MS)

    dialog.select(ids["Alpha"])
    qtbot.mouseClick(dialog.purge_button, Qt.MouseButton.LeftButton)
    box = dialog.confirmation
    assert box is not None
    qtbot.waitUntil(box.isVisible, timeout=WAIT_MS)
    assert box.text() == "Delete Alpha for good? This cannot be undone."
    box.button(QMessageBox.StandardButton.Cancel).click()  # asked, and declined
    assert dialog.shown_titles() == ["Gamma", "Alpha"]

    dialog.select(ids["Alpha"])
    qtbot.mouseClick(dialog.purge_button, Qt.MouseButton.LeftButton)
    box = dialog.confirmation
    assert box is not None
    qtbot.waitUntil(box.isVisible, timeout=WAIT_MS)
    _destructive(box).click()
    qtbot.waitUntil(lambda: dialog.shown_titles() == ["Gamma"], timeout=WAIT_MS)
    assert not Trash(app.host.store).contains(ids["Alpha"])

    qtbot.mouseClick(dialog.empty_button, Qt.MouseButton.LeftButton)
    box = dialog.confirmation
    assert box is not None
    qtbot.waitUntil(box.isVisible, timeout=WAIT_MS)
    _destructive(box).click()
    qtbot.waitUntil(lambda: dialog.shown_titles() == [], timeout=WAIT_MS)
    assert dialog.empty_label.isVisible() and dialog.empty_label.text() == "The Trash is empty."
    assert not dialog.empty_button.isEnabled()
    qtbot.waitUntil(lambda: "The Trash was emptied." in app.notice_texts(), timeout=WAIT_MS)


def _destructive(box: QMessageBox) -> QPushButton:
    button = next(
        b for b in box.buttons() if box.buttonRole(b) == QMessageBox.ButtonRole.DestructiveRole
    )
    assert isinstance(button, QPushButton)
    return button


def test_export_from_the_file_menu_writes_the_chosen_format(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    app = make_app()
    sid = seed_session(app.host.store, ["How do I print?"], title="Printing")
    app.host.start()
    app.window.open_tab(sid)

    for name in ("out.md", "out.json"):
        dialog = app.window.ask_export()
        assert dialog is not None
        qtbot.waitUntil(dialog.isVisible, timeout=WAIT_MS)
        target = tmp_path / name
        dialog.selectFile(str(target))
        dialog.accept()
        qtbot.waitUntil(target.exists, timeout=WAIT_MS)
        qtbot.waitUntil(
            lambda t=target: f"Exported Printing to {t}." in app.notice_texts(), timeout=WAIT_MS
        )

    markdown = (tmp_path / "out.md").read_text()
    assert markdown.startswith("# Printing\n") and "How do I print?" in markdown
    document = orjson.loads((tmp_path / "out.json").read_bytes())
    assert document["schema"] == "branchwise.export/1"
    assert document["messages"][0]["content"] == "How do I print?"


def test_copy_message_puts_the_markdown_source_on_the_clipboard(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app()
    store = app.host.store
    from branchwise.core.projection import events as ev

    with store.create("Code") as writer:
        writer.commit([ev.turn_start("t0"), ev.user_message("u0", "show *code*")])
        writer.commit(
            [ev.assistant_message("a0", CODE_ANSWER, "demo"), ev.turn_end("t0", "completed")]
        )
        sid = writer.session_id
    app.host.start()
    app.window.open_tab(sid)
    qtbot.waitUntil(lambda: len(app.turns(sid)) == 1, timeout=WAIT_MS)
    turn = app.turns(sid)[0]

    for message_id, expected in (("a0", CODE_ANSWER), ("u0", "show *code*")):
        label = turn.message_label(message_id)
        assert label is not None
        label.customContextMenuRequested.emit(QPoint(4, 4))
        menu = label.findChild(QMenu, "messageMenu")
        assert menu is not None
        qtbot.waitUntil(menu.isVisible, timeout=WAIT_MS)
        _menu_action(menu, "Copy message")
        menu.close()
        assert QGuiApplication.clipboard().text() == expected


def test_export_opens_in_the_documents_folder_then_where_the_last_export_went(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / "Documents").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DOCUMENTS_DIR", str(home / "Documents"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.chdir(tmp_path)  # the working folder, where the dialog opened before
    app = make_app()
    sid = seed_session(app.host.store, ["How do I print?"], title="Printing")
    app.window.open_tab(sid)
    dialog = app.window.ask_export()
    assert dialog is not None
    qtbot.waitUntil(dialog.isVisible, timeout=WAIT_MS)
    assert Path(dialog.directory().absolutePath()) == home / "Documents"
    chosen = tmp_path / "exports"
    chosen.mkdir()
    dialog.selectFile(str(chosen / "printing.md"))
    dialog.accept()
    qtbot.waitUntil((chosen / "printing.md").exists, timeout=WAIT_MS)
    again = app.window.ask_export()
    assert again is not None
    assert Path(again.directory().absolutePath()) == chosen
    again.reject()
    app.window.save_state()
    # Remembered across a restart, in the window's state.
    later = make_app(root=app.root)
    later.window.restore_state(load_window_state(app.root))  # type: ignore[arg-type]
    later.window.open_tab(sid)
    reopened = later.window.ask_export()
    assert reopened is not None
    assert Path(reopened.directory().absolutePath()) == chosen
    reopened.reject()
