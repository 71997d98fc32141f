"""``window-state.json``: a convenience that never breaks start-up, whatever is in it."""

from __future__ import annotations

import stat
from pathlib import Path

import orjson
import pytest

from branchwise.core.ids import new_session_id
from branchwise.desktop.host.window_state import (
    WINDOW_STATE_FILE,
    RemoteTab,
    WindowState,
    load_window_state,
    save_window_state,
)


def test_a_saved_state_reads_back_whole_and_private(tmp_path: Path) -> None:
    tabs = (new_session_id(), new_session_id())
    state = WindowState(
        tabs=tabs, current=tabs[1], geometry=b"\x01\xd9\xd0\xcb", splitter=(250, 800)
    )
    save_window_state(tmp_path, state)
    assert load_window_state(tmp_path) == state
    assert stat.S_IMODE((tmp_path / WINDOW_STATE_FILE).stat().st_mode) == 0o600


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"not json",
        b"[]",
        b'{"format": 2, "tabs": []}',
        b'{"format": 1, "tabs": "abc"}',
        b'{"format": 1, "tabs": [], "splitter": [-5, 10]}',
        b'{"format": 1, "tabs": [], "splitter": [true, 10]}',
        b'{"format": 1, "tabs": [], "geometry": 7}',
        b"x" * (70 * 1024),
    ],
)
def test_damaged_or_foreign_content_is_ignored(tmp_path: Path, content: bytes) -> None:
    (tmp_path / WINDOW_STATE_FILE).write_bytes(content)
    assert load_window_state(tmp_path) is None
    assert (tmp_path / WINDOW_STATE_FILE).read_bytes() == content  # left as it was


def test_bad_ids_duplicates_and_a_stray_current_are_dropped(tmp_path: Path) -> None:
    good = new_session_id()
    data = {
        "format": 1,
        "tabs": ["../../etc", good, good, "UPPER-CASE-ID"],
        "current": "../../etc",
        "geometry": "!!not base64!!",
        "splitter": [200, 900],
    }
    (tmp_path / WINDOW_STATE_FILE).write_bytes(orjson.dumps(data))
    assert load_window_state(tmp_path) == WindowState(tabs=(good,), splitter=(200, 900))


def test_no_file_is_no_state(tmp_path: Path) -> None:
    assert load_window_state(tmp_path) is None


def test_server_tabs_read_back_and_bad_ones_are_dropped(tmp_path: Path) -> None:
    sid = new_session_id()
    kept = RemoteTab("http://127.0.0.1:8765", sid, "Lab notes")
    state = WindowState(remote_tabs=(kept,), current_remote=kept)
    save_window_state(tmp_path, state)
    assert load_window_state(tmp_path) == state

    data = orjson.loads((tmp_path / WINDOW_STATE_FILE).read_bytes())
    data["remoteTabs"] = [
        {"server": "http://127.0.0.1:8765/", "sessionId": sid, "title": "Lab notes"},
        {"server": "ftp://box", "sessionId": sid},
        {"server": "http://127.0.0.1:8765", "sessionId": "../../etc"},
        {"server": "http://127.0.0.1:8765", "sessionId": sid, "title": 5},
        {"server": "http://127.0.0.1:8765", "sessionId": sid, "title": "Lab notes"},  # twice
        "junk",
    ]
    data["currentRemote"] = {"server": "http://elsewhere:1", "sessionId": sid}
    (tmp_path / WINDOW_STATE_FILE).write_bytes(orjson.dumps(data))
    assert load_window_state(tmp_path) == WindowState(remote_tabs=(kept,))


def test_a_file_from_before_server_tabs_has_none(tmp_path: Path) -> None:
    sid = new_session_id()
    data = {"format": 1, "tabs": [sid], "current": sid, "geometry": "", "splitter": []}
    (tmp_path / WINDOW_STATE_FILE).write_bytes(orjson.dumps(data))
    assert load_window_state(tmp_path) == WindowState(tabs=(sid,), current=sid)
