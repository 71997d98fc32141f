"""Send to several with files attached in the composer.

A PNG dropped on the composer goes with the question to every branch (stored
once, the same hash in each), and the composer is empty once the branches are
made; in a conversation on a server the file is uploaded there once and every
branch the server makes carries it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

from helpers.attachments import png_bytes
from helpers.gui import WAIT_MS, App, open_served, seed_session
from helpers.serve import serve_process
from PySide6.QtCore import QMimeData, QUrl
from pytestqt.qtbot import QtBot

from branchwise.core.store.attachments import BlobStore
from branchwise.core.store.store import SessionStore
from branchwise.desktop.widgets.composer import Composer


def _drop_png(qtbot: QtBot, composer: Composer, path: Path) -> bytes:
    data = png_bytes(6, 4, seed=7)
    path.write_bytes(data)
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    composer.editor.insertFromMimeData(mime)
    qtbot.waitUntil(lambda: len(composer.attachments.chips) == 1, timeout=WAIT_MS)
    assert composer.attachments.chips[0].button.accessibleName() == f"Attachment {path.name}"
    return data


def test_each_branch_asks_with_the_composers_file_stored_once(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    app = make_app()
    root = seed_session(app.host.store, ["Where to go in Kyoto?"], "Trip")
    app.window.open_tab(root)
    composer = app.tab(root).composer
    data = _drop_png(qtbot, composer, tmp_path / "map.png")
    composer.editor.setPlainText("Which way on this map?")
    composer.several_button.click()
    dialog = app.window.send_several_dialog
    assert dialog is not None and dialog.isVisible()
    dialog.samples.setValue(1)
    dialog.set_checked(["alpha", "beta"])
    dialog.send_button.click()
    grid = app.window.fanout_grid
    assert grid is not None
    qtbot.waitUntil(
        lambda: len(grid.columns) == 2 and all(c.ended for c in grid.columns.values()),
        timeout=WAIT_MS,
    )
    assert composer.editor.toPlainText() == ""
    assert composer.pending == [] and composer.attachments.chips == []
    assert not composer.attachments.isVisible()

    sha = hashlib.sha256(data).hexdigest()
    for branch in grid.columns:
        projection = app.host.store.read(branch).projection
        asked = [m for m in projection.messages if m.role == "user"][-1]
        assert asked.content == "Which way on this map?"
        assert [(a.name, a.sha256, a.size) for a in asked.attachments] == [
            ("map.png", sha, len(data))
        ]
    assert [p.name for p in BlobStore(app.host.store.root).stored()] == [sha]
    parent = app.host.store.read(root).projection
    assert all(not m.attachments for m in parent.messages)


def test_a_servers_conversation_sends_the_composers_file_into_every_branch_there(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    served_root = tmp_path / "served"
    served = SessionStore(served_root)
    sid = seed_session(served, ["Where to go in Kyoto?"], title="Plans")
    app = make_app()
    with serve_process(served_root) as process:
        tab = open_served(qtbot, app, process.url, process.token, sid)
        composer = tab.composer
        data = _drop_png(qtbot, composer, tmp_path / "map.png")
        composer.editor.setPlainText("Which way on this map?")
        composer.several_button.click()
        dialog = app.window.send_several_dialog
        assert dialog is not None and dialog.isVisible()
        dialog.samples.setValue(1)
        dialog.set_checked(["alpha", "beta"])
        dialog.send_button.click()
        grid = app.window.fanout_grid
        assert grid is not None
        qtbot.waitUntil(
            lambda: len(grid.columns) == 2 and all(c.ended for c in grid.columns.values()),
            timeout=WAIT_MS,
        )
        grid.flush()
        assert grid.column_labels() == ["alpha", "beta"]
        assert all(c.state.text() == "Done." for c in grid.columns.values())
        assert composer.editor.toPlainText() == ""
        assert composer.pending == [] and composer.attachments.chips == []

    sha = hashlib.sha256(data).hexdigest()
    assert len(served.list_sessions()) == 3
    for branch in grid.columns:
        projection = served.read(branch).projection
        asked = [m for m in projection.messages if m.role == "user"][-1]
        assert asked.content == "Which way on this map?"
        assert [(a.name, a.sha256, a.size) for a in asked.attachments] == [
            ("map.png", sha, len(data))
        ]
    assert [p.name for p in BlobStore(served_root).stored()] == [sha]
    assert all(not m.attachments for m in served.read(sid).projection.messages)
