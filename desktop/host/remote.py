"""Conversations kept on a ``branchwise serve`` server, as the desktop sees them (no Qt).

"Connect to server…" saves a connection: its name and URL in
``<root>/servers.json`` (atomic replace), its token in
``<root>/server-tokens/<slug>`` with mode 0600 (never in the JSON, never
logged). A :class:`RemoteServer` then keeps the server's conversation list
for the sidebar, opens a conversation as a :class:`RemoteTranscript` (the
server's committed commits replayed into the same projection, rows and fork
targets a local conversation has), and branches through its own operations
journal (``<root>/servers/<slug>/fork-operations.json``) and
``POST /fork-session``: a timeout or a dropped connection leaves the pending
record, and the next click or start gets the same child, never two
(docs/architecture.md). A server without ``session-fork-targets-v1`` makes every branch
action "server unsupported", with no fallback.

When the server stops answering, one notice says so and the connection is
retried with growing delays (:data:`BACKOFF`); when it answers again another
notice says so and the list is refreshed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

from branchwise.core.conversation.names import branch_title
from branchwise.core.errors import (
    BranchwiseError,
    InvalidServerUrl,
    RemoteUnavailable,
)
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.fork.targets import ForkTarget, ForkTargetSet
from branchwise.core.fs.atomic import atomic_write_bytes
from branchwise.core.ids import validate_session_id
from branchwise.core.projection.projection import Projection
from branchwise.core.remote.client import RemoteStore, server_url
from branchwise.core.remote.protocol import CAP_FORK_TARGETS, CAP_RENAME, CAP_SEARCH, CAP_TRASH
from branchwise.core.search.query import SearchResult
from branchwise.core.store.manifest import given_title
from branchwise.desktop.host.backends import RemoteForkBackend
from branchwise.desktop.host.branching import BranchOutcome, ForkCoordinator
from branchwise.desktop.host.notices import Level, NoticeCenter
from branchwise.desktop.host.rows import (
    PAGE_SIZE,
    BranchState,
    Entry,
    Row,
    TargetTable,
    branch_state,
    rows_from_projection,
)

SERVERS_FILE = "servers.json"
TOKENS_DIR = "server-tokens"
JOURNALS_DIR = "servers"
BACKOFF = (1.0, 2.0, 4.0, 8.0, 15.0, 30.0)
"""Seconds between reconnection attempts; the last repeats."""
REFRESH_INTERVAL = 10.0
"""Seconds between looks at the server's conversation list while connected."""
IDLE_WAIT = 20
"""Seconds a transcript's long-poll waits for a commit while nothing writes the conversation."""
RUNNING_WAIT = 2
"""... and while something does, so "running" ends soon after a writer lets go without a commit."""

log = logging.getLogger(__name__)
Listener = Callable[[], None]


# -- saved connections --------------------------------------------------------------------------


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


# -- one server ---------------------------------------------------------------------------------


class ConnectionState(StrEnum):
    """Where a server connection is."""

    CONNECTING = "connecting"
    CONNECTED = "connected"
    DISCONNECTED = "disconnected"


@dataclass(frozen=True, slots=True)
class RemoteEntry:
    """One conversation in a server's list, as the sidebar needs it.

    Attributes:
        session_id: its id on the server.
        title: its title.
        parent_id: the conversation it was branched from (on the same server).
        created_at: creation time (Unix seconds), for ordering.
        running: a turn runs in it now.
        kind: ``root``, ``fork`` or ``child`` ("" from a server that does not say).
    """

    session_id: str
    title: str
    parent_id: str | None
    created_at: float
    running: bool
    kind: str = ""


def _entries(answer: dict[str, Any]) -> list[RemoteEntry]:
    found = []
    for item in answer.get("sessions", []):
        if not isinstance(item, dict) or not isinstance(item.get("sessionId"), str):
            continue
        parent = item.get("parent")
        parent_id = parent.get("sessionId") if isinstance(parent, dict) else None
        created = item.get("createdAt")
        found.append(
            RemoteEntry(
                item["sessionId"],
                str(item.get("title") or ""),
                parent_id if isinstance(parent_id, str) else None,
                float(created) if isinstance(created, int | float) else 0.0,
                item.get("running") is True,
                str(item.get("kind") or ""),
            )
        )
    return found


def rows_from_page(page: dict[str, Any]) -> list[Row]:
    """The rows of one transcript page (``GET /sessions/{id}?limit=N``).

    They equal the rows a full replay gives for those turns (the page's
    messages name their turn); history without turns waits for the replay.

    Raises:
        RemoteUnavailable: the page does not have the expected shape.
    """
    try:
        offset = int(page["page"]["offset"])
        by_turn: dict[str, list[Entry]] = {}
        for message in page["messages"]:
            turn_id = message.get("turnId")
            if isinstance(turn_id, str):
                by_turn.setdefault(turn_id, []).append(
                    Entry(str(message["messageId"]), str(message["role"]), str(message["content"]))
                )
        rows = []
        for position, turn in enumerate(page["turns"]):
            turn_id = str(turn["turnId"])
            entries = by_turn.get(turn_id, [])
            end_reason = turn.get("endReason")
            if end_reason is None and entries and entries[-1].role == "assistant":
                last = entries[-1]
                entries[-1] = Entry(last.message_id, last.role, last.content, True)
            rows.append(
                Row(
                    row_id=turn_id,
                    turn_id=turn_id,
                    index=offset + position + 1,
                    answer_id=turn.get("messageId"),
                    entries=tuple(entries),
                    end_reason=end_reason,
                )
            )
        return rows
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise RemoteUnavailable("the server sent a malformed transcript page") from exc


def targets_from_json(answer: dict[str, Any]) -> ForkTargetSet:
    """Core's :class:`ForkTargetSet` from a server's §3.1 answer.

    Raises:
        RemoteUnavailable: the answer does not have the §3.1 shape.
    """
    try:
        source = answer["source"]
        targets = tuple(
            ForkTarget(
                turn_id=str(t["turnId"]),
                message_id=t.get("messageId"),
                boundary_sequence=t.get("boundarySequence"),
                available=bool(t["available"]),
                reason=t.get("reason"),
            )
            for t in answer["targets"]
        )
        return ForkTargetSet(
            validate_session_id(source["sessionId"]),
            int(source["generation"]),
            bool(answer["verifiable"]),
            targets,
        )
    except (KeyError, TypeError, ValueError, AttributeError, BranchwiseError) as exc:
        raise RemoteUnavailable("the server sent malformed fork targets") from exc


class RemoteTranscript:
    """One server conversation: its projection, rows and fork targets, kept up to date.

    The server's commits are replayed into the same :class:`Projection` a
    local conversation has, so rows and branch actions are computed by the
    same functions (:func:`rows_from_projection`, :func:`branch_state`).

    Args:
        server: the server it lives on.
        session_id: the conversation.
    """

    def __init__(self, server: RemoteServer, session_id: str) -> None:
        self.server = server
        self.session_id = validate_session_id(session_id)
        self.projection = Projection.replay([])
        self.last_seq = 0
        self.running = False
        self.table: TargetTable | None = None
        self._complete = False
        self._page_rows: list[Row] = []
        self._page_title = ""
        self._listeners: list[Listener] = []

    @property
    def complete(self) -> bool:
        """The whole history is here (not only the first page)."""
        return self._complete

    @property
    def rows(self) -> list[Row]:
        """The transcript's rows, as a local conversation's (the last page until all arrived)."""
        if not self.complete:
            return list(self._page_rows)
        return rows_from_projection(self.projection)

    @property
    def title(self) -> str:
        """The conversation's title."""
        return self.projection.title or self._page_title or self.server.title(self.session_id)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener()`` after each change; returns an unsubscribe function."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def branch_state(self, row: Row) -> BranchState:
        """The branch action of one row (disabled "server unsupported" on such a server)."""
        return branch_state(
            row,
            self.table,
            in_flight=self.server.in_flight,
            server_supported=self.server.supported,
        )

    async def load(self) -> None:
        """Read the last page of turns and the fork targets: enough to show the tab.

        The whole history (for scrolling back, and to follow new commits)
        arrives with :meth:`follow`; the rows are the same either way.

        Raises:
            RemoteRefusal: the server refused (e.g. the conversation is gone).
            RemoteUnavailable: it could not be asked.
        """
        page = await self.server.remote.show(self.session_id, limit=PAGE_SIZE)
        self._page_rows = rows_from_page(page)
        self._page_title = str(page.get("title") or "")
        self.running = page.get("running") is True
        await self.refresh_targets()

    async def load_all(self) -> None:
        """Read every committed commit (the first step of :meth:`follow`)."""
        await self._pull(wait=0)

    async def refresh_targets(self) -> None:
        """Ask the server for this conversation's fork targets again."""
        if not self.server.supported:
            self._changed()
            return
        answer = await self.server.remote.fork_targets(self.session_id)
        self.table = TargetTable.of(targets_from_json(answer))
        self._changed()

    async def follow(self) -> None:
        """Long-poll the server for new commits until cancelled (a running turn streams in).

        A dropped connection waits for the server to come back (the server's
        reconnection loop) and then goes on from the last seq it had.
        """
        while True:
            try:
                ended = await self._pull(wait=self._next_wait())
                if ended:
                    await self.refresh_targets()
            except RemoteUnavailable:
                await self.server.lost()
                await self.server.wait_connected()

    def _next_wait(self) -> int:
        """How long the next long-poll may wait: none before the history is in; shortly while
        the conversation is being written (its writer may let go without a commit, and the
        server only learns what this client believes from the answer it gave); else long."""
        if not self.complete:
            return 0
        return RUNNING_WAIT if self.running else IDLE_WAIT

    async def _pull(self, wait: int) -> bool:
        """Apply the commits after ``last_seq``; whether one of them ended a turn."""
        answer = await self.server.remote.events(self.session_id, self.last_seq, wait=wait)
        return self.apply_commits(answer["commits"], running=answer.get("running") is True)

    def apply_commits(self, commits: list[list[dict[str, Any]]], *, running: bool = False) -> bool:
        """Apply commits as the events route gives them; whether one of them ended a turn.

        After the first call the transcript is complete: its rows come from
        the replayed history instead of the first page.
        """
        first = not self._complete
        ended = False
        for commit in commits:
            if commit:
                self.projection.apply(commit)
                self.last_seq = int(commit[-1]["seq"])
                ended = ended or any(e.get("type") == "turn/end" for e in commit)
        self._complete = True
        if first or commits or running != self.running:
            self.running = running
            self._changed()
        return ended

    def _changed(self) -> None:
        for listener in list(self._listeners):
            try:
                listener()
            except Exception:  # noqa: BLE001 - one broken view must not stop the others
                log.exception("a remote transcript listener failed")


Navigator = Callable[["RemoteServer", str], Awaitable[None]]


class RemoteServer:
    """A connection to one ``branchwise serve``: its list, its transcripts, its branching.

    Args:
        root: the desktop's data root (the journal lives under it).
        connection: the saved server.
        token: its bearer token.
        notices: the app's notice channel.
        backoff: reconnection delays in seconds (the last repeats).
        refresh_interval: seconds between list refreshes while connected.
        timeout: seconds for each request.

    Attributes:
        state: where the connection is.
        supported: the server advertises ``session-fork-targets-v1``.
        entries: the server's conversations, newest first.
        navigator: opens a remote conversation in a tab (set by the window).
    """

    def __init__(
        self,
        root: Path,
        connection: Connection,
        token: str,
        notices: NoticeCenter,
        *,
        backoff: Sequence[float] = BACKOFF,
        refresh_interval: float = REFRESH_INTERVAL,
        timeout: float = 10.0,
    ) -> None:
        self.connection = connection
        self.notices = notices
        self.remote = RemoteStore(connection.url, token, timeout=timeout)
        self.backend = RemoteForkBackend(self.remote)
        journal = Path(root) / JOURNALS_DIR / connection.slug
        journal.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.coordinator = ForkCoordinator(
            journal, self.backend, notices, self._open_child, namer=self.branch_title
        )
        self.state = ConnectionState.CONNECTING
        self.supported = True
        self.capabilities: frozenset[str] = frozenset()
        self.entries: list[RemoteEntry] = []
        self.navigator: Navigator | None = None
        self.in_flight: set[tuple[str, str]] = set()
        self._backoff = tuple(backoff) or BACKOFF
        self._refresh_interval = refresh_interval
        self._listeners: list[Listener] = []
        self._connected = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._outage_reported = False

    def __repr__(self) -> str:
        return f"RemoteServer({self.connection.url!r})"

    @property
    def name(self) -> str:
        """The server's name in the sidebar."""
        return self.connection.name

    def title(self, session_id: str) -> str:
        """A conversation's title from the list ("" when not listed)."""
        return next((e.title for e in self.entries if e.session_id == session_id), "")

    def report(self, exc: BranchwiseError) -> None:
        """Post a failed request as one notice that names this server.

        ``lease_held`` (409: another app or the server's own CLI writes the
        conversation there) is not a failure of the request: it is
        "server_busy", try again in a moment (nothing was changed there).
        """
        if exc.code == "lease_held":
            self.notices.post("server_busy", Level.WARNING, server=self.name)
            return
        self.notices.post(exc.code, Level.ERROR, detail=f"{self.name}: {exc.message}")

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener()`` after the state or the list changes; returns an unsubscribe."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    # -- the connection ---------------------------------------------------------------------

    def start(self) -> None:
        """Connect in the background, and keep connecting with backoff while it fails."""
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        """Stop the background connection."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def wait_connected(self) -> None:
        """Until the server answers."""
        await self._connected.wait()

    async def connect(self) -> None:
        """Ask the capabilities and the list once; resume journalled forks on success.

        Raises:
            RemoteUnavailable, RemoteRefusal: the server could not be used (e.g. 401).
        """
        capabilities = await self.remote.capabilities()
        self.capabilities = frozenset(capabilities)
        self.supported = CAP_FORK_TARGETS in capabilities
        self.backend = RemoteForkBackend(self.remote)
        self.coordinator.backend = self.backend
        answer = await self.remote.list_sessions()
        self.entries = _entries(answer)
        was_down = self.state == ConnectionState.DISCONNECTED
        self.state = ConnectionState.CONNECTED
        self._connected.set()
        if was_down and self._outage_reported:
            self.notices.post("server_reconnected", Level.INFO, server=self.name)
        self._outage_reported = False
        if not self.supported:
            self.notices.post(
                "server_unsupported", Level.WARNING, detail=f"{self.name}: {self.connection.url}"
            )
        self._changed()
        if self.supported:
            await self.coordinator.recover()

    async def lost(self) -> None:
        """The server stopped answering: say so once, and let the loop reconnect."""
        if self.state == ConnectionState.DISCONNECTED:
            return
        self.state = ConnectionState.DISCONNECTED
        self._connected.clear()
        if not self._outage_reported:
            self._outage_reported = True
            self.notices.post("server_disconnected", Level.WARNING, server=self.name, sticky=False)
        self._changed()

    async def _run(self) -> None:
        attempt = 0
        while True:
            if self.state != ConnectionState.CONNECTED:
                try:
                    await self.connect()
                    attempt = 0
                except RemoteUnavailable:
                    await self.lost()
                    await asyncio.sleep(self._backoff[min(attempt, len(self._backoff) - 1)])
                    attempt += 1
                    continue
                except BranchwiseError as exc:  # a refusal (wrong token): retrying cannot help
                    self.state = ConnectionState.DISCONNECTED
                    self.notices.post(exc.code, Level.ERROR, detail=f"{self.name}: {exc.message}")
                    self._changed()
                    return
            await asyncio.sleep(self._refresh_interval)
            await self.refresh()

    async def refresh(self) -> None:
        """Read the conversation list again (a failure marks the server lost)."""
        try:
            answer = await self.remote.list_sessions()
        except RemoteUnavailable:
            await self.lost()
            return
        entries = _entries(answer)
        if entries != self.entries:
            self.entries = entries
            self._changed()

    # -- conversations ----------------------------------------------------------------------

    async def open_transcript(self, session_id: str) -> RemoteTranscript:
        """A loaded transcript of one of the server's conversations."""
        transcript = RemoteTranscript(self, session_id)
        await transcript.load()
        return transcript

    async def create_session(self, title: str = "") -> str:
        """A new conversation on the server; its id."""
        created = await self.remote.create_session(title)
        await self.refresh()
        return validate_session_id(created["sessionId"])

    async def send(self, session_id: str, text: str) -> dict[str, Any]:
        """Send a prompt; the turn runs on the server. Its ``session say`` result.

        The answer's text reaches open transcripts through their events.
        """
        result: dict[str, Any] = {}
        async for record in self.remote.send_turn(session_id, text):
            if record["type"] == "ended":
                result = dict(record.get("result") or {})
        return result

    async def stop_turn(self, session_id: str) -> bool:
        """Stop the turn the server runs in a conversation."""
        answer = await self.remote.stop(session_id)
        return answer.get("stopped") is True

    @property
    def connected(self) -> bool:
        """The server answers now."""
        return self.state == ConnectionState.CONNECTED

    def can(self, what: str) -> bool:
        """Whether the server is connected and offers ``what`` (``rename``, ``trash``, ``search``).

        An older server lacks the routes: its conversations are read, sent to
        and branched, but not renamed, deleted or searched from here.
        """
        needed = {"rename": CAP_RENAME, "trash": CAP_TRASH, "search": CAP_SEARCH}[what]
        return self.connected and needed in self.capabilities

    async def rename(self, session_id: str, title: str) -> str:
        """Rename a conversation on the server; the title as stored there.

        Raises:
            InvalidTitle: refused before asking (the server's rule, checked here too).
            RemoteRefusal: the server refused (``lease_held``: busy, try again).
            RemoteUnavailable: it could not be asked.
        """
        answer = await self.remote.rename(session_id, given_title(title))
        await self.refresh()
        return str(answer.get("title") or "")

    async def trash(self, session_id: str) -> None:
        """Move a conversation to the server's Trash (the server can restore it).

        Raises:
            RemoteRefusal: refused (``turn_running``, ``lease_held``, ``session_trashed``…).
            RemoteUnavailable: it could not be asked.
        """
        await self.remote.trash(session_id)
        await self.refresh()

    async def restore(self, session_id: str) -> None:
        """Move a conversation back from the server's Trash (a deletion's Undo)."""
        await self.remote.restore(session_id)
        await self.refresh()

    async def search(self, query: str, limit: int) -> SearchResult:
        """The server's hits for ``query`` (its own index, caught up with its logs)."""
        return await self.remote.search(query, limit)

    # -- branching ----------------------------------------------------------------------------

    async def request_branch(self, request: ForkRequest) -> str | None:
        """Branch through this server's journal and ``POST /fork-session`` (docs/architecture.md).

        Returns the child's id when its tab opened; ``None`` when refused or
        uncertain (the journal keeps an uncertain record; a second click
        reuses its operation id). The notice channel says which.
        """
        key = (request.source_session_id, request.turn_id)
        if key in self.in_flight:
            return None
        self.in_flight.add(key)
        self._changed()
        try:
            outcome: BranchOutcome = await self.coordinator.branch(request)
        finally:
            self.in_flight.discard(key)
            self._changed()
        if outcome.reason == "remote_unavailable":
            await self.lost()
        return outcome.child_session_id if outcome.opened else None

    def branch_title(self, request: ForkRequest) -> str | None:
        """ "<title> (branch N)", as a local branch is named (the server writes it, if it can)."""
        source = request.source_session_id
        forks = [e for e in self.entries if e.parent_id == source and e.kind == "fork"]
        return branch_title(self.title(source), len(forks))

    async def _open_child(self, child_id: str) -> None:
        """The coordinator's opener: list the new branch, then open its tab (raises if not)."""
        await self.refresh()
        if self.navigator is not None:
            await self.navigator(self, child_id)

    def _changed(self) -> None:
        for listener in list(self._listeners):
            try:
                listener()
            except Exception:  # noqa: BLE001 - one broken view must not stop the others
                log.exception("a remote server listener failed")
