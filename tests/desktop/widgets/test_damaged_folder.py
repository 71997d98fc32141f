"""The window on a damaged data folder (issue 12, items 9 and 14).

One session whose ``manifest.json`` is a folder does not stop the app: the
window opens, lists the others and says what is wrong. A torn write the app
cuts when it opens a conversation is reported with the file its bytes are
kept in.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from helpers.gui import WAIT_MS, App, seed_session
from helpers.segmented import scan_log
from helpers.sessions import cut_copies, log_file, tear_log
from pytestqt.qtbot import QtBot

from branchwise.core.i18n.reasons import reason_text
from branchwise.core.store.store import SessionStore


def test_the_window_opens_beside_a_manifest_that_is_a_folder(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    root = tmp_path / "data"
    store = SessionStore(root)
    good = seed_session(store, ["still here?"], title="good")
    bad = seed_session(store, ["lost?"], title="bad")
    manifest = store.session_dir(bad) / "manifest.json"
    manifest.unlink()
    manifest.mkdir()

    app = make_app(root=root)
    assert app.window.isVisible()
    assert app.window.sidebar.item_for(good) is not None
    assert app.window.sidebar.item_for(bad) is None
    expected = reason_text("manifest_unreadable")
    qtbot.waitUntil(lambda: expected in app.notice_texts(), timeout=WAIT_MS)
    app.window.open_session(good)
    qtbot.waitUntil(lambda: len(app.turns(good)) == 1, timeout=WAIT_MS)


def test_opening_a_conversation_with_a_torn_write_says_where_the_cut_bytes_are(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    root = tmp_path / "data"
    store = SessionStore(root)
    session_id = seed_session(store, ["one", "two"], title="torn")
    log = log_file(store.session_dir(session_id))
    whole = log.read_bytes()
    last = scan_log(log).frames[-1]
    tear_log(log, whole[:-20])

    app = make_app(root=root)
    app.window.open_session(session_id)
    (copy,) = cut_copies(store.session_dir(session_id))
    assert copy.read_bytes() == whole[last.offset : -20]
    expected = reason_text("log_tail_cut", file=str(copy))
    qtbot.waitUntil(lambda: expected in app.notice_texts(), timeout=WAIT_MS)
