"""Saved ``branchwise serve`` connections: the servers the sidebar lists, and their tokens.

"Connect to server…" saves a connection: its name and URL in
``<root>/servers.json`` (atomic replace), its token in
``<root>/server-tokens/<slug>`` with mode 0600 (never in the JSON, never
logged). Each server's fork-operations journal lives under
``<root>/servers/<slug>/`` (:data:`JOURNALS_DIR`).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import orjson

from branchwise.core.errors import InvalidServerUrl
from branchwise.core.fs.atomic import atomic_write_bytes
from branchwise.core.remote.client import server_url

SERVERS_FILE = "servers.json"
TOKENS_DIR = "server-tokens"
JOURNALS_DIR = "servers"

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Connection:
    """A saved server: the name the sidebar shows and where it is.

    Attributes:
        name: the server's name in the sidebar.
        url: its base URL (``http(s)://host:port``).
    """

    name: str
    url: str

    @property
    def slug(self) -> str:
        """The file-name-safe key of this server's token and journal."""
        return hashlib.sha256(self.url.encode()).hexdigest()[:16]


def default_name(url: str) -> str:
    """The name a server gets when none is typed: its ``host:port``."""
    parts = urlsplit(url)
    return parts.netloc or url


def save_connection(root: Path, name: str, url: str, token: str) -> Connection:
    """Remember a server (replacing one of the same URL); the token goes to a 0600 file.

    Raises:
        InvalidServerUrl: ``url`` is not an http(s) URL, or ``token`` is empty.
    """
    url = server_url(url)
    token = token.strip()
    if not token or any(c.isspace() for c in token):
        raise InvalidServerUrl("the server's token is missing or malformed", url=url)
    connection = Connection(name.strip() or default_name(url), url)
    tokens = Path(root) / TOKENS_DIR
    tokens.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(tokens, 0o700)
    atomic_write_bytes(tokens / connection.slug, token.encode() + b"\n", mode=0o600)
    kept = [c for c in load_connections(root) if c.url != url]
    _write_connections(root, [*kept, connection])
    return connection


def forget_connection(root: Path, connection: Connection) -> None:
    """Remove a saved server and its token (its journal stays, so pending forks still resolve)."""
    _write_connections(root, [c for c in load_connections(root) if c.url != connection.url])
    with contextlib.suppress(FileNotFoundError):
        (Path(root) / TOKENS_DIR / connection.slug).unlink()


def load_connections(root: Path) -> list[Connection]:
    """The saved servers, in the order they were added (an unreadable file holds none)."""
    try:
        data = orjson.loads((Path(root) / SERVERS_FILE).read_bytes())
    except FileNotFoundError:
        return []
    except (OSError, orjson.JSONDecodeError):
        log.warning("%s is unreadable; no servers are listed", SERVERS_FILE)
        return []
    found = []
    for item in data.get("servers", []) if isinstance(data, dict) else []:
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            try:
                found.append(Connection(item["name"], server_url(str(item.get("url", "")))))
            except InvalidServerUrl:
                continue
    return found


def read_token(root: Path, connection: Connection) -> str:
    """The saved token of a server ("" when it is gone)."""
    try:
        return (Path(root) / TOKENS_DIR / connection.slug).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return ""


def _write_connections(root: Path, connections: Sequence[Connection]) -> None:
    data = {"format": 1, "servers": [{"name": c.name, "url": c.url} for c in connections]}
    atomic_write_bytes(Path(root) / SERVERS_FILE, orjson.dumps(data, option=orjson.OPT_INDENT_2))
