"""Where the desktop's conversations come from: this machine's store, or a ``branchwise serve``.

The host's shared paths (branch naming, rows, branch actions, the fork
journal) ask a :class:`ConversationSource` only the few things that differ
between the two: a conversation's title and how many forks its parent has.
:class:`LocalSource` answers from the host's lineage index;
:class:`RemoteSource` from a server's conversation list, which it keeps
current while connected and reconnects with growing delays (:data:`BACKOFF`)
when the server stops answering (one notice each way).

A server's conversation opens as a :class:`RemoteConversation`: the commits
the server sends are replayed into the same :class:`Projection` a local
conversation has, so its rows, fork targets and branch actions come from the
same functions (:func:`rows_from_projection`, :func:`branch_state`). A server
with ``session-events-last-turns-v1`` sends a big conversation's last page
first (``events?lastTurns=PAGE_SIZE``), as the local preview reads it from the
end of the log; the earlier history is asked for when the user scrolls up to
it (:meth:`RemoteConversation.load_earlier`). Branching
goes through the server's own operations journal
(``<root>/servers/<slug>/fork-operations.json``) and ``POST /fork-session``: a
timeout or a dropped connection leaves the pending record, and the next click
or start gets the same child, never two. A server without
``session-fork-targets-v1`` makes every branch action "server unsupported",
with no fallback.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from branchwise.core.conversation.ask_again import edit_of, regenerate_of, unasked_turn
from branchwise.core.conversation.attachments import PreparedAttachment
from branchwise.core.conversation.family_map import FamilyMap
from branchwise.core.conversation.names import branch_title as name_branch
from branchwise.core.errors import (
    AttachmentRefused,
    BranchwiseError,
    ReadOnlySession,
    RemoteRefusal,
    RemoteUnavailable,
    ServerUnsupported,
)
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.fork.targets import ForkTarget, ForkTargetSet
from branchwise.core.ids import validate_session_id
from branchwise.core.lineage import LineageIndex, creation_order
from branchwise.core.projection.attachments import AttachmentRef
from branchwise.core.projection.projection import Projection
from branchwise.core.remote.client import RemoteStore, server_url
from branchwise.core.remote.protocol import (
    CAP_ATTACHMENTS,
    CAP_EVENTS_LAST_TURNS,
    CAP_FORK_ORIGIN,
    CAP_FORK_TARGETS,
    CAP_LABEL,
    CAP_MAP,
    CAP_RENAME,
    CAP_SEARCH,
    CAP_TRASH,
)
from branchwise.core.search.query import SearchResult
from branchwise.core.store.manifest import Manifest, given_label, given_title
from branchwise.desktop.host.backends import RemoteForkBackend
from branchwise.desktop.host.branching import BranchClicks, ForkCoordinator
from branchwise.desktop.host.changes import Changes
from branchwise.desktop.host.connections import (
    JOURNALS_DIR,
    Connection,
    load_connections,
    read_token,
    save_connection,
)
from branchwise.desktop.host.conversation import Conversation, ConversationRef
from branchwise.desktop.host.notices import Level, NoticeCenter
from branchwise.desktop.host.rows import (
    PAGE_SIZE,
    BranchState,
    Row,
    TargetTable,
    rows_from_projection,
)

BACKOFF = (1.0, 2.0, 4.0, 8.0, 15.0, 30.0)
"""Seconds between reconnection attempts; the last repeats."""
REFRESH_INTERVAL = 10.0
"""Seconds between looks at the server's conversation list while connected."""
IDLE_WAIT = 20
"""Seconds a conversation's long-poll waits for a commit while nothing writes it."""
RUNNING_WAIT = 2
"""... and while something does, so "running" ends soon after a writer lets go without a commit."""

log = logging.getLogger(__name__)
Listener = Callable[[], None]
ChangeListener = Callable[[Changes], None]


class ConversationSource(Protocol):
    """What the shared host paths need to know of where conversations live."""

    def title(self, session_id: str) -> str:
        """A conversation's best known title ("" when it has none yet)."""
        ...

    def fork_count(self, session_id: str) -> int:
        """How many forks of this conversation the source knows of."""
        ...


def branch_title(source: ConversationSource, request: ForkRequest) -> str | None:
    """The title a new branch of ``request``'s source gets: "<title> (branch N)".

    The one place the desktop names a branch, for local and server
    conversations alike. N counts the parent's forks the source knows of,
    this one included. The fork writes it into the child as it publishes it
    (a server that cannot take a title keeps the inherited one); ``None`` (a
    parent with no title yet) keeps the inherited one.
    """
    parent = request.source_session_id
    return name_branch(source.title(parent), source.fork_count(parent))


def forks_of(index: LineageIndex, session_id: str) -> int:
    """How many forks of a conversation a lineage index holds (children are not forks)."""
    return sum(1 for manifest in index.children(session_id) if manifest.kind == "fork")


class LocalSource:
    """This machine's store, as the host's lineage index and open conversations know it.

    Args:
        index: the host's lineage index (built lazily, so asked each time).
        title: the host's best known title (an open conversation's is newer
            than its manifest's).
    """

    def __init__(self, index: Callable[[], LineageIndex], title: Callable[[str], str]) -> None:
        self._index = index
        self._title = title

    def title(self, session_id: str) -> str:
        """The title an open conversation or its manifest has."""
        return self._title(session_id)

    def fork_count(self, session_id: str) -> int:
        """The conversation's forks in the lineage index."""
        return forks_of(self._index(), session_id)


class ConnectionState(StrEnum):
    """Where a server connection is."""

    CONNECTING = "connecting"
    CONNECTED = "connected"
    DISCONNECTED = "disconnected"


@dataclass(frozen=True, slots=True)
class Listing:
    """A server's conversation list, as the local one is kept.

    Attributes:
        index: the conversations' manifests (the server lists them as they are
            stored), by id and lineage, as this machine's are.
        running: the conversations a turn runs in now.
    """

    index: LineageIndex
    running: frozenset[str] = frozenset()

    @classmethod
    def of(cls, answer: dict[str, Any]) -> Listing:
        """The listing of a ``GET /sessions`` answer (an unusable entry is left out)."""
        items = [item for item in answer.get("sessions", []) if isinstance(item, dict)]
        manifests = []
        for item in items:
            try:
                manifests.append(Manifest.from_json(item))
            except BranchwiseError:
                log.warning("a server listed a conversation this app cannot read")
        running = frozenset(
            item["sessionId"]
            for item in items
            if item.get("running") is True and isinstance(item.get("sessionId"), str)
        )
        return cls(LineageIndex.build(manifests), running)

    def newest_first(self) -> list[Manifest]:
        """The conversations, newest first (as the server lists them)."""
        return sorted(self.index.by_id.values(), key=creation_order, reverse=True)

    def same_as(self, other: Listing) -> bool:
        """Whether nothing the sidebar shows differs."""
        return self.index.by_id == other.index.by_id and self.running == other.running


def targets_from_json(answer: dict[str, Any]) -> ForkTargetSet:
    """Core's :class:`ForkTargetSet` from a server's ``GET /sessions/{id}/fork-targets`` answer.

    Raises:
        RemoteUnavailable: the answer does not have that shape.
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


Commit = list[dict[str, Any]]


class RemoteConversation(Conversation):
    """One server conversation: its projection, rows and fork targets, kept up to date.

    The server's commits are replayed into the same :class:`Projection` a
    local conversation has, so rows, branch actions and Retry's prompt are
    computed by the same functions as a local conversation's. What changed is
    told to listeners as the host's :class:`Changes`, so a tab refreshes a
    server conversation as it refreshes a local one.

    A big conversation on a server with ``session-events-last-turns-v1``
    opens on its last page only: the projection then holds the page's commits
    (and those followed since), which is all a shown turn's branch action,
    edit, regenerate and retry need; :attr:`earlier_turns` says how many turns
    precede it, and :meth:`load_earlier` reads them when the user scrolls up.

    Args:
        server: the server it lives on.
        session_id: the conversation.

    Attributes:
        last_seq: the seq of the last commit applied (the next poll asks after it).
        commits_fetched: how many commits the server sent this conversation (a
            count the tests and benchmarks read).
    """

    def __init__(self, server: RemoteSource, session_id: str) -> None:
        super().__init__(validate_session_id(session_id))
        self.server = server
        self._projection = Projection.replay([])
        self.last_seq = 0
        self.commits_fetched = 0
        self._running = False
        self._listeners: list[ChangeListener] = []
        self._earlier_turns = 0
        self._page_after = 0
        self._kept: list[Commit] = []
        self._earlier: asyncio.Task[None] | None = None

    @property
    def projection(self) -> Projection:
        """The server's commits replayed (only the last page's while :attr:`earlier_turns`)."""
        return self._projection

    @property
    def earlier_turns(self) -> int:
        """How many turns precede the rows, not read yet (0: the whole history is here)."""
        return self._earlier_turns

    @property
    def title(self) -> str:
        """The conversation's title."""
        return self.projection.title or self.server.title(self.session_id)

    @property
    def running(self) -> bool:
        """A turn runs there (this app's or another client's), as the events route says."""
        return self._running

    @property
    def manifest(self) -> Manifest | None:
        """The conversation's manifest as the server lists it (``None``: not listed yet)."""
        return self.server.listing.index.by_id.get(self.session_id)

    @property
    def unasked(self) -> str | None:
        """The turn an edit or a regenerate published and nobody asked yet (see core).

        That turn is the last one, so the last page answers it as the whole would.
        """
        manifest = self.manifest
        return unasked_turn(manifest, self.projection) if manifest is not None else None

    def subscribe(self, listener: ChangeListener) -> Callable[[], None]:
        """Call ``listener(changes)`` after each change; returns an unsubscribe function."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def server_branch_state(self, row: Row) -> BranchState:
        """The branch action of one row (disabled "server unsupported" on such a server)."""
        return self.branch_state(
            row, in_flight=self.server.branches.in_flight, server_supported=self.server.supported
        )

    def ask_again_request(self, turn_id: str, prompt: str | None) -> ForkRequest:
        """The fork an Edit (``prompt``) or a Regenerate (``None``) of a turn asks the server for.

        Raises:
            UnknownTurn, TurnRunning, EmptyPrompt: as for a local conversation.
            ReadOnlySession: the fork targets (and so the generation) are not read yet.
        """
        if self.targets is None:
            raise ReadOnlySession("this conversation is not loaded", sessionId=self.session_id)
        generation = self.targets.answer.generation
        if prompt is None:
            return regenerate_of(self.projection, generation, self.session_id, turn_id)
        return edit_of(self.projection, generation, self.session_id, turn_id, prompt)

    async def load(self) -> None:
        """Read enough to show the tab: the last page (or every commit) and the fork targets.

        A server without ``session-events-last-turns-v1`` sends every commit.

        Raises:
            RemoteRefusal: the server refused (e.g. the conversation is gone).
            RemoteUnavailable: it could not be asked.
        """
        if CAP_EVENTS_LAST_TURNS not in self.server.capabilities:
            await self._pull(wait=0)
            await self.refresh_targets()
            return
        page, _ = await asyncio.gather(
            self.server.remote.last_turns_events(self.session_id, PAGE_SIZE),
            self.refresh_targets(),
        )
        commits: list[Commit] = page["commits"]
        after = int(page["after"])
        earlier = self._turns_before(Projection.replay(commits)) if after else 0
        if after and not earlier:
            # The targets cannot number the page's turns, or only turnless history
            # (imported messages) precedes them: read every commit, as without the page.
            await self._pull(wait=0)
            return
        self.commits_fetched += len(commits)
        if earlier:
            self._earlier_turns, self._page_after = earlier, after
            self._kept = list(commits)
        self.apply_commits(commits, running=page.get("running") is True, fetched=False)

    def _turns_before(self, page: Projection) -> int | None:
        """How many turns precede the page's first, from the fork targets (one per turn)."""
        if self.targets is None or not page.turns:
            return None
        first = page.turns[0].turn_id
        turns = [target.turn_id for target in self.targets.answer.targets]
        return turns.index(first) if first in turns else None

    async def load_earlier(self) -> None:
        """Read the turns before the last page (the user scrolled up to them); once.

        Raises:
            RemoteRefusal, RemoteUnavailable: as :meth:`load`.
        """
        if not self._earlier_turns:
            return
        task = self._earlier
        if task is None or (task.done() and (task.cancelled() or task.exception() is not None)):
            task = self._earlier = asyncio.ensure_future(self._read_earlier())
        await asyncio.shield(task)

    async def _read_earlier(self) -> None:
        answer = await self.server.remote.events(self.session_id, 0, wait=0)
        before = [c for c in answer["commits"] if int(c[-1]["seq"]) <= self._page_after]
        self.commits_fetched += len(answer["commits"])
        # The page and what was followed since are kept: the history is those after these.
        self._projection = Projection.replay([*before, *self._kept])
        self._earlier_turns, self._kept = 0, []
        self._set_rows(rows_from_projection(self.projection))
        self._changed(Changes(sessions=frozenset({self.session_id})) | self._whole())

    def _whole(self) -> Changes:
        return Changes(transcripts=frozenset({self.session_id}))

    async def refresh_targets(self) -> None:
        """Ask the server for this conversation's fork targets again."""
        if self.server.supported:
            answer = await self.server.remote.fork_targets(self.session_id)
            self.targets = TargetTable.of(targets_from_json(answer))
        self._changed(Changes(targets=frozenset({self.session_id})))

    async def follow(self) -> None:
        """Long-poll the server for new commits until cancelled (a running turn streams in).

        A dropped connection waits for the server to come back (the server's
        reconnection loop) and then goes on from the last seq it had.
        """
        while True:
            try:
                ended = await self._pull(wait=RUNNING_WAIT if self.running else IDLE_WAIT)
                if ended:
                    await self.refresh_targets()
            except RemoteUnavailable:
                await self.server.lost()
                await self.server.wait_connected()

    async def _pull(self, wait: int) -> bool:
        """Apply the commits after ``last_seq``; whether one of them ended a turn."""
        answer = await self.server.remote.events(self.session_id, self.last_seq, wait=wait)
        return self.apply_commits(answer["commits"], running=answer.get("running") is True)

    def apply_commits(
        self, commits: list[Commit], *, running: bool = False, fetched: bool = True
    ) -> bool:
        """Apply commits as the events route gives them; whether one of them ended a turn.

        Listeners hear the rows that changed (``turns``), or the whole
        transcript when more than one row is new (a first read, a catch-up).
        """
        ended_before = _ended_turns(self.projection)
        if fetched:
            self.commits_fetched += len(commits)
        for commit in commits:
            self._projection.apply(commit)
            self.last_seq = int(commit[-1]["seq"])
        if self._earlier_turns:
            self._kept.extend(commits)
        sid = self.session_id
        changes = Changes()
        if commits:
            before = {row.row_id: row for row in self.rows}
            self._set_rows(self._shown_rows())
            new = [row for row in self.rows if row.row_id not in before]
            if len(new) > 1 or len(before) + len(new) != len(self.rows):
                changes = self._whole()
            else:
                changed = frozenset((sid, r.row_id) for r in self.rows if before.get(r.row_id) != r)
                changes = Changes(turns=changed)
        if commits or running != self._running:
            self._running = running
            self._changed(changes | Changes(sessions=frozenset({sid})))
        return _ended_turns(self.projection) > ended_before

    def _shown_rows(self) -> list[Row]:
        """The projection's rows, numbered as turns of the whole conversation."""
        rows = rows_from_projection(self.projection)
        if not self._earlier_turns:
            return rows
        shift = self._earlier_turns
        return [replace(r, index=r.index + shift) if r.index is not None else r for r in rows]

    def _changed(self, changes: Changes) -> None:
        for listener in list(self._listeners):
            try:
                listener(changes)
            except Exception:  # noqa: BLE001 - one broken view must not stop the others
                log.exception("a remote conversation listener failed")


def _ended_turns(projection: Projection) -> int:
    return sum(1 for turn in projection.turns if not turn.is_open)


Navigator = Callable[["RemoteSource", str], Awaitable[None]]


class RemoteSource:
    """A connection to one ``branchwise serve``: its list, its conversations, its branching.

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
        listing: the server's conversations and their lineage.
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
            journal,
            self.backend,
            notices,
            self._open_child,
            namer=lambda request: branch_title(self, request),
        )
        self.state = ConnectionState.CONNECTING
        self.supported = True
        self.capabilities: frozenset[str] = frozenset()
        self.listing = Listing(LineageIndex())
        self.navigator: Navigator | None = None
        self.branches = BranchClicks(lambda: self.coordinator, lambda _sid: self._changed())
        self._backoff = tuple(backoff) or BACKOFF
        self._refresh_interval = refresh_interval
        self._listeners: list[Listener] = []
        self._connected = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._outage_reported = False

    def __repr__(self) -> str:
        return f"RemoteSource({self.connection.url!r})"

    @property
    def name(self) -> str:
        """The server's name in the sidebar."""
        return self.connection.name

    def ref(self, session_id: str) -> ConversationRef:
        """How the host and the window name one of this server's conversations."""
        return ConversationRef(session_id, self.connection.url)

    def title(self, session_id: str) -> str:
        """A conversation's title from the list ("" when not listed)."""
        manifest = self.listing.index.by_id.get(session_id)
        return manifest.title if manifest is not None else ""

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
        self.listing = Listing.of(answer)
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
        listing = Listing.of(answer)
        if not listing.same_as(self.listing):
            self.listing = listing
            self._changed()

    # -- conversations ----------------------------------------------------------------------

    async def open_conversation(self, session_id: str) -> RemoteConversation:
        """A loaded conversation of this server."""
        conversation = RemoteConversation(self, session_id)
        await conversation.load()
        return conversation

    async def create_session(self, title: str = "") -> str:
        """A new conversation on the server; its id."""
        created = await self.remote.create_session(title)
        await self.refresh()
        return validate_session_id(created["sessionId"])

    async def upload(self, files: Sequence[PreparedAttachment]) -> tuple[AttachmentRef, ...]:
        """Store ``files`` on the server (each once); the references a turn names.

        Raises:
            AttachmentRefused: the server does not take attachments.
            RemoteRefusal, RemoteUnavailable: a file was refused, or the server is gone.
        """
        if not files:
            return ()
        if CAP_ATTACHMENTS not in self.capabilities:
            raise AttachmentRefused(
                "this server does not take attachments", server=self.connection.url
            )
        return tuple([await self.remote.upload_attachment(f.name, f.data) for f in files])

    async def send(
        self, session_id: str, text: str, refs: tuple[AttachmentRef, ...] = ()
    ) -> dict[str, Any]:
        """Send a prompt (with files :meth:`upload` stored); the turn runs on the server.

        Its ``session say`` result; the answer's text reaches open
        conversations through their events.
        """
        result: dict[str, Any] = {}
        async for record in self.remote.send_turn(session_id, text, refs):
            if record["type"] == "ended":
                result = dict(record.get("result") or {})
        return result

    async def answer(self, session_id: str) -> None:
        """Have the server answer the question an edit's or a regenerate's branch was
        published with (its answer reaches open conversations through their events).

        Another client asking it first (``turn_running``, ``lease_held``) is not a failure.
        """
        try:
            async for _record in self.remote.send_turn(session_id, None):
                pass
        except RemoteRefusal as exc:
            if exc.code not in ("turn_running", "lease_held"):
                raise

    @property
    def asks_again(self) -> bool:
        """The server is connected and can branch an edited or regenerated prompt."""
        return self.connected and self.supported and CAP_FORK_ORIGIN in self.capabilities

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
        needed = {
            "rename": CAP_RENAME,
            "label": CAP_LABEL,
            "trash": CAP_TRASH,
            "search": CAP_SEARCH,
        }[what]
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

    async def rename_label(self, session_id: str, label: str) -> None:
        """Give a branch on the server a label of the user's words.

        Raises:
            InvalidLabel: refused before asking (the server's rule, checked here too).
            ServerUnsupported: the server cannot rename labels (an older one).
            RemoteRefusal: the server refused (``lease_held``: busy, try again).
            RemoteUnavailable: it could not be asked.
        """
        if not self.can("label"):
            raise ServerUnsupported(f"{self.name} cannot rename branch labels", server=self.name)
        await self.remote.rename_label(session_id, given_label(label))
        await self.refresh()

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

    async def family_map(self, session_id: str) -> FamilyMap:
        """The branch map of a conversation's family, as the server draws it (``session-map-v1``).

        Raises:
            ServerUnsupported: an older server without the route.
            RemoteRefusal, RemoteUnavailable: refused, or it could not be asked.
        """
        if CAP_MAP not in self.capabilities:
            raise ServerUnsupported(f"{self.name} does not offer the branch map")
        answer = await self.remote.family_map(session_id)
        try:
            return FamilyMap.from_json(answer)
        except (KeyError, TypeError, ValueError) as exc:
            raise RemoteUnavailable(f"{self.name} sent a malformed branch map") from exc

    async def search(self, query: str, limit: int) -> SearchResult:
        """The server's hits for ``query`` (its own index, caught up with its logs)."""
        return await self.remote.search(query, limit)

    # -- branching ----------------------------------------------------------------------------

    async def request_branch(self, request: ForkRequest) -> str | None:
        """Branch through this server's journal and ``POST /fork-session``.

        Returns the child's id when its tab opened; ``None`` when refused or
        uncertain (the journal keeps an uncertain record; a second click
        reuses its operation id). The notice channel says which.
        """
        outcome = await self.branches.request(request)
        if outcome is None:
            return None
        if outcome.reason == "remote_unavailable":
            await self.lost()
        return outcome.child_session_id if outcome.opened else None

    def fork_count(self, session_id: str) -> int:
        """The conversation's forks in the server's list."""
        return forks_of(self.listing.index, session_id)

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


Spawn = Callable[[Coroutine[Any, Any, Any], str], object]


class Servers:
    """The ``branchwise serve`` servers this app connects to; the host owns them.

    Saving a connection writes its files (:mod:`~branchwise.desktop.host.connections`);
    connecting starts its :class:`RemoteSource` in the background. Views
    listen to each source for its state and list.

    Args:
        root: the desktop's data root.
        notices: the app's notice channel.
        spawn: runs a coroutine as a task whose failure becomes a notice.
    """

    def __init__(self, root: Path, notices: NoticeCenter, spawn: Spawn) -> None:
        self.root = Path(root)
        self.notices = notices
        self._spawn = spawn
        self.sources: list[RemoteSource] = []

    def of(self, url: str | None) -> RemoteSource | None:
        """The connected server with this URL."""
        return next((s for s in self.sources if s.connection.url == url), None)

    def connect_saved(self, **options: Any) -> list[RemoteSource]:
        """Connect to every saved server (at start)."""
        return [
            self.add(connection, read_token(self.root, connection), **options)
            for connection in load_connections(self.root)
        ]

    async def try_connect(self, name: str, url: str, token: str, **options: Any) -> RemoteSource:
        """Ask the server first; only a server that takes the token is saved and connected.

        A wrong token used to be saved anyway, the refusal coming later as a
        notice: now nothing is written until the server has answered.

        Raises:
            InvalidServerUrl: as :meth:`connect`.
            RemoteRefusal: the server refused (``unauthorized``: a wrong token).
            RemoteUnavailable: nothing answered there.
        """
        checked = server_url(url)
        probe = RemoteStore(checked, token.strip(), timeout=float(options.get("timeout", 10.0)))
        if token.strip() and not any(c.isspace() for c in token.strip()):
            await probe.list_sessions()  # needs the token, as every route does
        return self.connect(name, checked, token, **options)

    async def last_saved(self) -> tuple[Connection, str] | None:
        """The server saved last and its token, to show when "Connect to server…" reopens."""

        def read() -> tuple[Connection, str] | None:
            saved = load_connections(self.root)
            return (saved[-1], read_token(self.root, saved[-1])) if saved else None

        return await asyncio.to_thread(read)

    def connect(self, name: str, url: str, token: str, **options: Any) -> RemoteSource:
        """Save a new server (its token in a private file) and connect to it.

        Raises:
            InvalidServerUrl: ``url`` is not an http(s) URL, or ``token`` is empty.
        """
        connection = save_connection(self.root, name, url, token)
        return self.add(connection, token.strip(), **options)

    def add(self, connection: Connection, token: str, **options: Any) -> RemoteSource:
        """Connect to a server in the background (one with the same URL is replaced)."""
        for old in [s for s in self.sources if s.connection.url == connection.url]:
            self.sources.remove(old)
            self._spawn(old.stop(), "disconnect from a server")
        source = RemoteSource(self.root, connection, token, self.notices, **options)
        self.sources.append(source)
        source.start()
        return source

    async def stop_all(self) -> None:
        """Stop every connection (the app is closing)."""
        for source in self.sources:
            await source.stop()
