""" "Connect to server…" with a wrong token, reopening it, and a server branch's notice.

A real ``branchwise serve`` subprocess on 127.0.0.1 and the real window,
offscreen; the tests read the dialog's texts and the notices the user sees.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from helpers.gui import WAIT_MS, App, seed_session
from helpers.serve import serve_process
from pytestqt.qtbot import QtBot

from branchwise.core.i18n.reasons import reason_text
from branchwise.core.store.store import SessionStore
from branchwise.desktop.widgets.conversation_tab import ConversationTab


def test_a_wrong_token_keeps_the_dialog_open_and_saves_nothing(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    served_root = tmp_path / "served"
    seed_session(SessionStore(served_root), ["what is a fork?"], title="Lab notes")
    app = make_app()
    with serve_process(served_root) as served:
        servers = app.window.remote_servers
        servers.connect_action.trigger()
        dialog = servers.dialog
        assert dialog is not None and dialog.isVisible()
        dialog.name_edit.setText("workstation")
        dialog.url_edit.setText(served.url)
        dialog.token_edit.setText("not-the-token")
        dialog.accept()
        qtbot.waitUntil(lambda: dialog.error_label.isVisible(), timeout=WAIT_MS)
        assert dialog.isVisible()
        # The refusal in the app's words and, beneath, in the server's own.
        assert reason_text("unauthorized") in dialog.error_label.text()
        assert "a valid bearer token is required" in dialog.error_label.text()
        assert not (app.root / "servers.json").exists()
        assert servers.servers == []
        assert (dialog.name_edit.text(), dialog.url_edit.text()) == ("workstation", served.url)

        dialog.token_edit.setText(served.token)
        dialog.accept()
        qtbot.waitUntil(lambda: not dialog.isVisible(), timeout=WAIT_MS)
        assert (app.root / "servers.json").exists()
        qtbot.waitUntil(lambda: len(servers.servers) == 1, timeout=WAIT_MS)

        # Reopened, it shows what was saved.
        servers.connect_action.trigger()
        again = servers.dialog
        assert again is not None and again is not dialog and again.isVisible()
        qtbot.waitUntil(lambda: again.url_edit.text() == served.url, timeout=WAIT_MS)
        assert again.name_edit.text() == "workstation"
        assert again.token_edit.text() == served.token
        again.reject()


def test_a_branch_on_a_server_is_announced_by_its_title(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    served_root = tmp_path / "served"
    seed_session(SessionStore(served_root), ["what is a fork?"], title="Lab notes")
    app = make_app()
    with serve_process(served_root) as served:
        servers = app.window.remote_servers
        servers.connect_action.trigger()
        dialog = servers.dialog
        assert dialog is not None
        dialog.url_edit.setText(served.url)
        dialog.token_edit.setText(served.token)
        dialog.accept()
        qtbot.waitUntil(lambda: len(servers.servers) == 1, timeout=WAIT_MS)
        source = servers.servers[0]
        qtbot.waitUntil(lambda: bool(source.listing.newest_first()), timeout=WAIT_MS)
        (manifest,) = source.listing.newest_first()
        app.host.spawn(app.window.open_remote(source.ref(manifest.session_id)), "open")

        def remote_tab() -> ConversationTab | None:
            widget = app.window.tabs.currentWidget()
            return widget if isinstance(widget, ConversationTab) and widget.ref.remote else None

        qtbot.waitUntil(lambda: remote_tab() is not None, timeout=WAIT_MS)
        tab = remote_tab()
        assert tab is not None
        qtbot.waitUntil(
            lambda: bool(tab.turn_widgets()) and tab.turn_widgets()[0].branch_button.isEnabled(),
            timeout=WAIT_MS,
        )
        tab.turn_widgets()[0].branch_button.click()
        qtbot.waitUntil(
            lambda: "Branch created: Lab notes (branch 1)" in app.notice_texts(), timeout=WAIT_MS
        )
