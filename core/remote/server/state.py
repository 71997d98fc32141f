"""What every route of one ``branchwise serve`` application shares, for its lifetime."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from branchwise.core.errors import BranchwiseError
from branchwise.core.fork.engine import ForkResult
from branchwise.core.fork.targets import TargetsCache
from branchwise.core.projection.remote_view import WireLogs
from branchwise.core.remote.fork_groups import ForkGroups
from branchwise.core.remote.turns import ServedTurns
from branchwise.core.search.index import SearchIndex
from branchwise.core.store.store import SessionStore


@dataclass(frozen=True)
class ServerState:
    """The served store and what the routes keep between requests.

    Attributes:
        store: the served store.
        token: the bearer token every request must carry, as bytes.
        served: the turns this server runs for its clients.
        targets_cache: one cache for the server's lifetime: a client asks for
            a session's targets after every turn, and each answer then
            replays only the frames committed since the last one.
        search: the search index, caught up before each query.
        fork_groups: forks asked at once, made durable together (their
            sources' replays and seed plans shared in ``targets_cache``).
        forks_in_flight: operation id -> the request's body and its fork
            waiting or running in ``fork_groups``, so a retry waits for it.
        wire_logs: the events route's replays, kept so a poll reads only what is new.
    """

    store: SessionStore
    token: bytes
    served: ServedTurns
    targets_cache: TargetsCache
    search: SearchIndex
    fork_groups: ForkGroups
    forks_in_flight: dict[str, tuple[bytes, asyncio.Future[ForkResult]]] = field(
        default_factory=dict
    )
    wire_logs: WireLogs = field(default_factory=WireLogs)

    def is_running(self, session_id: str) -> bool:
        """Whether a turn is running in ``session_id``: here, or in another process's writer."""
        return self.served.is_running(session_id) or being_written(self.store, session_id)

    async def close(self) -> None:
        """Stop running turns, close the index; forks already running finish, none start."""
        await self.served.shutdown()
        await asyncio.to_thread(self.search.close)
        # Each running fork publishes whole or not at all.
        await self.fork_groups.close()


SERVER_STATE = web.AppKey("server_state", ServerState)


def state_of(request: web.Request) -> ServerState:
    """The state of the application that received ``request``."""
    return request.app[SERVER_STATE]


def being_written(store: SessionStore, session_id: str) -> bool:
    """Whether another writer (a desktop, a turn here) holds the session's lease now."""
    try:
        return store.is_being_written(session_id)
    except (OSError, BranchwiseError):
        return False


def updated_at(store: SessionStore, session_id: str) -> float | None:
    """When the session last changed (a commit, a title), Unix seconds."""
    stamps = [mtime for _name, _size, mtime in _file_stats(store, session_id)]
    return max(stamps) / 1e9 if stamps else None


def fingerprint(store: SessionStore, session_id: str) -> tuple[tuple[str, int, int], ...]:
    """Size and change time of each file of a session: a commit changes one of them."""
    return tuple(sorted(_file_stats(store, session_id)))


def _file_stats(store: SessionStore, session_id: str) -> list[tuple[str, int, int]]:
    """``(path, size, mtime_ns)`` of each file of a session, one folder level deep.

    A format-2 session appends to segments in a subfolder, whose change does
    not touch the session folder's own entries.
    """
    try:
        top = store.session_dir(session_id)
    except BranchwiseError:
        return []
    stats: list[tuple[str, int, int]] = []
    folders, depth = [top], 0
    while folders and depth < 2:
        deeper: list[Path] = []
        for folder in folders:
            try:
                with os.scandir(folder) as entries:
                    for entry in entries:
                        if entry.is_dir(follow_symlinks=False):
                            deeper.append(Path(entry.path))
                            continue
                        info = entry.stat(follow_symlinks=False)
                        stats.append((entry.path, info.st_size, info.st_mtime_ns))
            except OSError:
                continue
        folders, depth = deeper, depth + 1
    return stats
