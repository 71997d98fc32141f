"""What the window looked like when it closed: open tabs, the one in front, size, panes.

Kept in ``<root>/window-state.json`` (atomic replace, mode 0600) and written
whenever a tab opens, closes or comes to the front, so a crash or a SIGKILL
restores what the user last saw, not what they had at the previous clean quit.
It is a convenience, not data: a missing, damaged or foreign file is ignored
(the window opens empty), and a conversation that is gone or in the trash is
skipped with a notice. Tabs of conversations kept on a ``branchwise serve``
are kept apart (``remoteTabs``: the server's URL, the id and the title last
shown), so the window can show each at once and open it when its server
answers; a file without that key (an older version's) has none. ``introDismissed``
remembers that the first-start introduction was dismissed. Qt's
geometry blob is kept as opaque base64 text; this module never interprets
it, so it stays Qt-free.
"""

from __future__ import annotations

import base64
import binascii
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from branchwise.core.errors import InvalidServerUrl, InvalidSessionId
from branchwise.core.fs.atomic import atomic_write_bytes
from branchwise.core.ids import validate_session_id
from branchwise.core.remote.client import server_url

WINDOW_STATE_FILE = "window-state.json"
FORMAT = 1
MAX_TABS = 100
MAX_BYTES = 64 * 1024
MAX_TITLE_CHARS = 200
MAX_PATH_CHARS = 4096


@dataclass(frozen=True, slots=True)
class RemoteTab:
    """A tab of a conversation kept on a server.

    Attributes:
        server: the server's URL (as saved in ``servers.json``).
        session_id: the conversation's id there.
        title: its title when the tab was last shown (shown while the server is away).
    """

    server: str
    session_id: str
    title: str = ""

    def to_json(self) -> dict[str, str]:
        """``{"server", "sessionId", "title"}``."""
        return {"server": self.server, "sessionId": self.session_id, "title": self.title}


log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class WindowState:
    """The window's state at one moment.

    Attributes:
        tabs: the open conversations, left to right.
        current: the conversation in front (one of ``tabs``), if any.
        geometry: Qt's ``saveGeometry()`` bytes (opaque here).
        splitter: the sizes of the sidebar and the conversation pane.
        remote_tabs: the open conversations kept on servers, left to right.
        current_remote: the server conversation in front, if one was.
        export_folder: where the last export was saved ("" before the first).
        intro_dismissed: the first-start introduction was dismissed (it stays hidden).
    """

    tabs: tuple[str, ...] = ()
    current: str | None = None
    geometry: bytes = b""
    splitter: tuple[int, ...] = ()
    remote_tabs: tuple[RemoteTab, ...] = ()
    current_remote: RemoteTab | None = None
    export_folder: str = ""
    intro_dismissed: bool = False

    def to_json(self) -> dict[str, Any]:
        """The file's shape."""
        return {
            "format": FORMAT,
            "tabs": list(self.tabs),
            "current": self.current,
            "geometry": base64.b64encode(self.geometry).decode("ascii"),
            "splitter": list(self.splitter),
            "remoteTabs": [tab.to_json() for tab in self.remote_tabs],
            "currentRemote": self.current_remote.to_json() if self.current_remote else None,
            "exportFolder": self.export_folder,
            "introDismissed": self.intro_dismissed,
        }


def load_window_state(root: Path) -> WindowState | None:
    """The saved state, or ``None`` when there is none usable (never raises for bad content)."""
    path = root / WINDOW_STATE_FILE
    try:
        if path.stat().st_size > MAX_BYTES:
            log.warning("ignoring %s: too large", path)
            return None
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, orjson.JSONDecodeError) as exc:
        log.warning("ignoring %s: %s", path, exc)
        return None
    state = _parse(data)
    if state is None:
        log.warning("ignoring %s: not a window state this version reads", path)
    return state


def _parse(data: object) -> WindowState | None:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return None
    tabs = data.get("tabs")
    current = data.get("current")
    geometry = data.get("geometry", "")
    splitter = data.get("splitter", [])
    if not isinstance(tabs, list) or not all(isinstance(t, str) for t in tabs):
        return None
    if not isinstance(geometry, str) or not isinstance(splitter, list):
        return None
    if not all(type(size) is int and 0 <= size < 1 << 16 for size in splitter):
        return None
    unique = tuple(dict.fromkeys(t for t in tabs if _is_session_id(t)))[:MAX_TABS]
    try:
        blob = base64.b64decode(geometry, validate=True)
    except (binascii.Error, ValueError):
        blob = b""
    remote = data.get("remoteTabs", [])
    remote_tabs = tuple(
        dict.fromkeys(t for t in map(_remote_tab, remote if isinstance(remote, list) else []) if t)
    )[:MAX_TABS]
    current_remote = _remote_tab(data.get("currentRemote"))
    export_folder = data.get("exportFolder", "")
    if not isinstance(export_folder, str) or len(export_folder) > MAX_PATH_CHARS:
        export_folder = ""
    return WindowState(
        tabs=unique,
        current=current if isinstance(current, str) and current in unique else None,
        geometry=blob,
        splitter=tuple(splitter),
        remote_tabs=remote_tabs,
        current_remote=current_remote if current_remote in remote_tabs else None,
        export_folder=export_folder,
        intro_dismissed=data.get("introDismissed") is True,
    )


def _remote_tab(item: object) -> RemoteTab | None:
    """One ``remoteTabs`` entry, or ``None`` when it is not one (it is then left out)."""
    if not isinstance(item, dict):
        return None
    server, session_id, title = item.get("server"), item.get("sessionId"), item.get("title", "")
    if not isinstance(server, str) or not isinstance(session_id, str):
        return None
    if not isinstance(title, str) or not _is_session_id(session_id):
        return None
    try:
        url = server_url(server)
    except InvalidServerUrl:
        return None
    return RemoteTab(url, session_id, title[:MAX_TITLE_CHARS])


def _is_session_id(value: str) -> bool:
    try:
        validate_session_id(value)
    except InvalidSessionId:
        return False
    return True


def save_window_state(root: Path, state: WindowState) -> None:
    """Replace the saved state (raises ``OSError``; callers log it, the UI goes on)."""
    atomic_write_bytes(root / WINDOW_STATE_FILE, orjson.dumps(state.to_json()))
