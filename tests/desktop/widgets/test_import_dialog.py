"""File ▸ Import… as the user sees it: pick, watch the count, read the summary, cancel."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

from helpers.gui import WAIT_MS, App
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog
from pytestqt.qtbot import QtBot

from branchwise.core.i18n import language as i18n
from branchwise.desktop.widgets.import_dialog import ImportDialog

FIXTURES = Path(__file__).parents[2] / "fixtures" / "importing"


def _open_dialog(app: App) -> ImportDialog:
    action = app.window.import_action
    assert action.text() == "Import…" and action in app.window.file_menu.actions()
    action.trigger()
    dialog = app.window.import_dialog
    assert dialog is not None and dialog.isVisible()
    return dialog


def _type_path(qtbot: QtBot, dialog: ImportDialog, path: Path) -> None:
    dialog.path_edit.clear()
    qtbot.keyClicks(dialog.path_edit, str(path))


def _sidebar_titles(app: App) -> set[str]:
    return {
        app.window.sidebar.item_for(m.session_id).text(0)  # type: ignore[union-attr]
        for m in app.host.store.list_sessions()
        if app.window.sidebar.item_for(m.session_id) is not None
    }


def test_importing_a_claude_code_folder_shows_the_count_the_summary_and_the_trees(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    app = make_app()
    projects = tmp_path / "projects"
    shutil.copytree(FIXTURES / "claude_code", projects)
    dialog = _open_dialog(app)
    assert not dialog.import_button.isEnabled()  # nothing chosen yet
    assert not dialog.cancel_button.isEnabled()

    _type_path(qtbot, dialog, projects)
    qtbot.mouseClick(dialog.import_button, Qt.MouseButton.LeftButton)

    qtbot.waitUntil(lambda: dialog.result_label.text() != "", timeout=WAIT_MS)
    summary = dialog.summary
    assert summary is not None and summary.imported > 0
    # Two sessions and their forks and sub-agents: the branches are not counted as conversations.
    branches = summary.imported - 2
    assert branches > 1
    expected = f"Imported 2 conversations with {branches} branches (0 already there, 0 skipped)."
    assert dialog.result_label.text() == expected
    assert dialog.count_label.text() == f"{summary.imported} conversations"
    assert dialog.progress_bar.value() == dialog.progress_bar.maximum()
    qtbot.waitUntil(lambda: expected in app.notice_texts(), timeout=WAIT_MS)
    qtbot.waitUntil(
        lambda: all(app.window.sidebar.item_for(s) is not None for s in summary.session_ids),
        timeout=WAIT_MS,
    )
    assert "Shop cart work" in _sidebar_titles(app)
    nested = 0
    for session_id in summary.session_ids:  # forks and sub-agents sit under their parents
        link = app.host.store.manifest(session_id).parent
        if link is not None:
            assert app.window.sidebar.parent_of(session_id) == link.session_id
            nested += 1
    assert nested == summary.imported - 2  # all but the two roots

    qtbot.mouseClick(dialog.import_button, Qt.MouseButton.LeftButton)  # the same folder again

    again = f"Imported 0 conversations ({summary.imported} already there, 0 skipped)."
    qtbot.waitUntil(lambda: dialog.result_label.text() == again, timeout=WAIT_MS)
    assert len(app.host.store.list_sessions()) == summary.imported


def test_the_file_picker_fills_the_path(qtbot: QtBot, make_app: Callable[..., App]) -> None:
    app = make_app()
    dialog = _open_dialog(app)
    export = FIXTURES / "librechat" / "kyoto-tree.json"

    qtbot.mouseClick(dialog.file_button, Qt.MouseButton.LeftButton)

    picker = dialog.file_dialog
    assert picker is not None and picker.isVisible()
    assert picker.fileMode() == QFileDialog.FileMode.ExistingFile
    picker.selectFile(str(export))
    picker.accept()
    qtbot.waitUntil(lambda: dialog.path_edit.text() == str(export), timeout=WAIT_MS)
    assert dialog.import_button.isEnabled()

    qtbot.mouseClick(dialog.folder_button, Qt.MouseButton.LeftButton)
    assert dialog.file_dialog is not None
    assert dialog.file_dialog.fileMode() == QFileDialog.FileMode.Directory
    dialog.file_dialog.reject()


def _write_many_chats(export: Path, chats: int) -> None:
    rows = [
        {
            "id": f"chat-{n}",
            "title": f"Chat {n}",
            "chat": {
                "history": {
                    "currentId": f"c{n}-a",
                    "messages": {
                        f"c{n}-u": {
                            "id": f"c{n}-u",
                            "parentId": None,
                            "role": "user",
                            "content": f"question {n}",
                        },
                        f"c{n}-a": {
                            "id": f"c{n}-a",
                            "parentId": f"c{n}-u",
                            "role": "assistant",
                            "content": f"answer {n}",
                        },
                    },
                }
            },
        }
        for n in range(chats)
    ]
    export.write_text(json.dumps(rows))


def test_cancel_during_a_long_import_leaves_whole_conversations(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    app = make_app()
    export = tmp_path / "many.json"
    chats = 2000  # the click lands long before the last one
    _write_many_chats(export, chats)
    dialog = _open_dialog(app)
    _type_path(qtbot, dialog, export)
    qtbot.mouseClick(dialog.import_button, Qt.MouseButton.LeftButton)

    qtbot.waitUntil(lambda: dialog.cancel_button.isEnabled(), timeout=WAIT_MS)
    qtbot.waitUntil(
        lambda: dialog.count_label.text() not in ("", "0 conversations"), timeout=WAIT_MS
    )
    assert not dialog.import_button.isEnabled() and not dialog.path_edit.isEnabled()
    qtbot.mouseClick(dialog.cancel_button, Qt.MouseButton.LeftButton)

    qtbot.waitUntil(
        lambda: dialog.result_label.text().startswith("Import cancelled"), timeout=WAIT_MS
    )
    summary = dialog.summary
    assert summary is not None and summary.cancelled and 0 < summary.imported < chats
    assert {m.session_id for m in app.host.store.list_sessions()} == set(summary.session_ids)
    for session_id in summary.session_ids:  # each one whole: its one turn finished
        turns = app.host.store.read(session_id).projection.turns
        assert [t.end_reason for t in turns] == ["completed"]
    assert dialog.import_button.isEnabled() and not dialog.cancel_button.isEnabled()


def test_a_file_that_is_no_export_is_a_notice_and_the_dialog_is_ready_again(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    app = make_app()
    notes = tmp_path / "notes.txt"
    notes.write_text("just some notes\n")
    dialog = _open_dialog(app)
    _type_path(qtbot, dialog, notes)
    qtbot.mouseClick(dialog.import_button, Qt.MouseButton.LeftButton)

    refusal = (
        "This is not an export Branchwise can import (ChatGPT, Claude Code, Open WebUI, LibreChat)."
    )
    qtbot.waitUntil(lambda: refusal in app.notice_texts(), timeout=WAIT_MS)
    qtbot.waitUntil(lambda: dialog.import_button.isEnabled(), timeout=WAIT_MS)
    assert dialog.result_label.text() == "" and dialog.summary is None
    assert app.host.store.list_sessions() == []


def test_the_dialog_and_its_summary_follow_a_language_switch(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app()
    dialog = _open_dialog(app)
    _type_path(qtbot, dialog, FIXTURES / "librechat" / "kyoto-tree.json")
    qtbot.mouseClick(dialog.import_button, Qt.MouseButton.LeftButton)
    done = "Imported 1 conversation with 2 branches (0 already there, 0 skipped)."
    qtbot.waitUntil(lambda: dialog.result_label.text() == done, timeout=WAIT_MS)

    i18n.set_language("zh_Hans")

    qtbot.waitUntil(lambda: dialog.import_button.text() == "导入", timeout=WAIT_MS)
    assert dialog.windowTitle() == "导入对话"
    assert dialog.result_label.text() == "已导入 1 个对话及其 2 个分支（0 个已存在，跳过 0 个）。"
    assert app.window.import_action.text() == "导入…"
    i18n.set_language("zh_Hant")
    qtbot.waitUntil(lambda: dialog.folder_button.text() == "選擇資料夾…", timeout=WAIT_MS)
    assert dialog.result_label.text() == "已匯入 1 個對話及其 2 個分支（0 個已存在，略過 0 個）。"


def test_quitting_during_an_import_stops_it_after_a_whole_conversation(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    app = make_app()
    export = tmp_path / "many.json"
    _write_many_chats(export, 2000)
    dialog = _open_dialog(app)
    _type_path(qtbot, dialog, export)
    qtbot.mouseClick(dialog.import_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(
        lambda: dialog.count_label.text() not in ("", "0 conversations"), timeout=WAIT_MS
    )

    app.window.close()

    qtbot.waitUntil(lambda: not app.window.importing.running, timeout=WAIT_MS)
    sessions = app.host.store.list_sessions()
    assert 0 < len(sessions) < 2000
    for manifest in sessions:
        turns = app.host.store.read(manifest.session_id).projection.turns
        assert [t.end_reason for t in turns] == ["completed"]
