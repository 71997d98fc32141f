"""The desktop host, everything the window does without a single widget, and branch titles.

The host owns the session store, the open conversations (each an
:class:`~branchwise.desktop.host.session.OpenSession` with its writer and
turn runner), the notice channel, the settings and provider, and fork
requests. Widgets only call the host and listen to it; the host never
imports Qt, so the fork-operations journal and crash tests drive it headless.

Every mutating call reports what changed as :class:`Changes` — returned to
the caller and broadcast to listeners — so views refresh only what changed.
The host also keeps the search index (:mod:`branchwise.core.search.index`) current:
every conversation is caught up in the background after start, and one
conversation after each finished turn, rename, new conversation and branch.
The index is a cache, so its failure is one notice, never a failed turn.

Creating a branch is separate from opening its tab: the host creates the
child, already titled "<title> (branch N)" by the fork itself, then asks its
*navigator* (the window) to show it.

A conversation kept on a ``branchwise serve`` server is opened the same way
(:meth:`Host.open` with a :class:`ConversationRef` naming the server), and
the calls a tab makes (``*_at``) take such a ref: sending, stopping,
branching, Edit, Regenerate and Retry go to the conversation's own source,
and what changes is broadcast as the same :class:`Changes`. What a server
cannot do is said by :meth:`Host.refusal` as a reason code, so the tab
disables the action with the reason instead of doing nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from branchwise.core.conversation.alternatives import (
    Alternatives,
    alternatives_by_turn,
    alternatives_of,
)
from branchwise.core.conversation.ask_again import edit_request, regenerate_request
from branchwise.core.conversation.attachments import PreparedAttachment
from branchwise.core.conversation.names import (
    branched_from,
    display_title,
    given_branch_label,
    label_in,
    render_label,
    stored_fork_turn_index,
)
from branchwise.core.conversation.settings import ConversationSettings
from branchwise.core.errors import (
    BranchwiseError,
    RemoteUnavailable,
    ServerUnsupported,
)
from branchwise.core.fork.operations import ForkRequest, OperationIndex, PrunedReservation
from branchwise.core.i18n.language import _, format_date
from branchwise.core.lineage import LineageIndex, creation_order
from branchwise.core.projection.attachments import AttachmentRef
from branchwise.core.providers.base import Provider
from branchwise.core.providers.demo import DemoProvider
from branchwise.core.runtime import TurnResult
from branchwise.core.search.index import MergedBranch, SearchIndex
from branchwise.core.search.query import SearchResult
from branchwise.core.settings import (
    Settings,
    for_conversation,
    load_settings,
    remember_server,
    save_settings,
)
from branchwise.core.store.manifest import Manifest, given_title
from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.attaching import Attaching, Preview, remote_previews
from branchwise.desktop.host.branch_map import MapLayout, laid_out, local_map
from branchwise.desktop.host.branching import BranchClicks
from branchwise.desktop.host.changes import Changes
from branchwise.desktop.host.conversation import Conversation, ConversationRef
from branchwise.desktop.host.journal import journalled_operation_ids
from branchwise.desktop.host.landing import Landing, TurnTarget, landing_row, nearest_row
from branchwise.desktop.host.notices import Level, NoticeCenter
from branchwise.desktop.host.operations import Operations
from branchwise.desktop.host.rows import BranchState, Row, branch_state
from branchwise.desktop.host.server_operations import ServerOperations
from branchwise.desktop.host.session import OpenSession
from branchwise.desktop.host.sources import (
    LocalSource,
    RemoteConversation,
    RemoteSource,
    Servers,
    branch_title,
)
from branchwise.desktop.host.usage import ContextWindows, ConversationUsage, conversation_usage

if TYPE_CHECKING:
    from branchwise.desktop.host.backends import Checkpoint, ForkBackend
    from branchwise.desktop.host.branching import ForkCoordinator

log = logging.getLogger(__name__)

T = TypeVar("T")
ChangeListener = Callable[[Changes], None]
TextListener = Callable[[str, str, str, str], None]
Navigator = Callable[[str], Awaitable[None]]
ProviderFactory = Callable[[Settings], Provider]


def _default_provider(settings: Settings) -> Provider:
    from branchwise.core.providers.detect import choose_provider

    return choose_provider(settings)


class Host:
    """The app's state and operations, for the window or a headless driver.

    Args:
        root: the data root.
        notices: the notice channel (a new one if not given).
        provider_factory: builds the provider from settings (tests pass a slow
            demo responder here).
        settings: start with these instead of reading ``settings.json``.
        fork_backend: where forks happen (default: this machine's store; a
            ``RemoteForkBackend`` forks on a ``branchwise serve`` server).
        checkpoint: crash-injection hook the coordinator and the default local
            backend call at each ``CrashPoint`` (crash tests kill the process there).

    Attributes:
        server_supported: the fork server can branch (see :meth:`check_server`).
        search_progress: ``(done, total)`` conversations while the search index
            catches up with all of them; ``None`` otherwise.
    """

    def __init__(
        self,
        root: Path,
        *,
        notices: NoticeCenter | None = None,
        provider_factory: ProviderFactory = _default_provider,
        settings: Settings | None = None,
        fork_backend: ForkBackend | None = None,
        checkpoint: Checkpoint | None = None,
    ) -> None:
        self.root = Path(root)
        self.store = SessionStore(self.root)
        self.notices = notices or NoticeCenter()
        self._provider_factory = provider_factory
        if settings is None:
            settings, problems = load_settings(self.root)
            for problem in problems:
                self.notices.post(problem.code, Level.WARNING, detail=problem.reason)
        self.settings = settings
        self.provider: Provider = provider_factory(settings)
        self.navigator: Navigator | None = None
        self.server_supported = True
        self._index: LineageIndex | None = None
        self._fork_turns: dict[str, int] = {}  # counted for manifests older than labels
        self._open: dict[str, OpenSession] = {}
        self._listeners: list[ChangeListener] = []
        self._text_listeners: list[TextListener] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._fork_backend = fork_backend
        self._checkpoint = checkpoint
        self._coordinator: ForkCoordinator | None = None
        self._pruning: threading.Thread | None = None
        self.search_progress: tuple[int, int] | None = None
        self._search_index: SearchIndex | None = None
        self._search_opening = asyncio.Lock()
        self._search_all = False
        self._search_pending: set[str] = set()
        self._search_worker: asyncio.Task[None] | None = None
        self._search_closing = False
        self._search_failing = False
        self._search_rescan = False
        self._search_rescanned = float("-inf")
        self.search_rescan_interval = 10.0
        """Seconds between two quiet catch-ups with what other processes wrote."""
        self._merged: dict[str, tuple[MergedBranch, ...]] = {}
        self.source = LocalSource(lambda: self.index, self.title)
        """This machine's store, as the shared paths (branch naming) ask it."""
        self.operations = Operations(self)
        """Export, compare and the model servers' questions, off the UI thread."""
        self.attaching = Attaching(self)
        """Reading attached files and the transcript's previews, off the UI thread."""
        self.branches = BranchClicks(
            lambda: self.fork_coordinator,
            lambda sid: self.emit(Changes(targets=frozenset({sid}))),
        )
        """Branch clicks, and the ones being carried out."""
        self.servers = Servers(self.root, self.notices, self.spawn)
        """The ``branchwise serve`` servers this app connects to."""
        self.server_operations = ServerOperations(self)
        """Create, rename, delete, restore and search servers' conversations, off the UI thread."""
        self._remote: dict[ConversationRef, RemoteConversation] = {}
        self.context_windows = ContextWindows(self.spawn, self.emit)
        """The context length each model's server states (the status bar's fill)."""
        self._demo_families: set[str] = set()
        self._following: dict[ConversationRef, asyncio.Task[None]] = {}
        self._heard_servers: set[int] = set()

    # -- start and stop ------------------------------------------------------

    def start(self) -> Changes:
        """Sweep half-built sessions and list manifests (no log is read).

        Old fork reservations are pruned in a worker thread meanwhile
        (:meth:`prune_operations`); :meth:`shutdown` waits for it.
        """
        if self._pruning is None:
            self._pruning = threading.Thread(
                target=self._prune_quietly, name="prune fork-index", daemon=True
            )
            self._pruning.start()
        swept = self.store.sweep_temporary()
        if swept:
            log.info("swept %d temporary session folders", len(swept))
        self._index = LineageIndex.build(self.store.iter_manifests())
        for error in self._index.damaged:
            self.notices.post(error.code, Level.WARNING, detail=error.message)
        self.index_all_for_search()
        self._find_fork_turns()
        return self.emit(Changes(sidebar=True))

    def _find_fork_turns(self) -> None:
        """Count the fork turn of each branch whose manifest is older than labels, in the
        background (one log read each); without a running event loop nothing is scheduled.

        Until then such a branch's label reads "A branch"; the counts are kept
        in memory only (a manifest is its writer's to rewrite), for
        :meth:`manifest_at`. One ``Changes(sidebar=True)`` re-renders the names.
        """
        index = self.index
        older = [m for m in index.by_id.values() if m.parent and m.fork_turn_index is None]
        if not older:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return

        async def find() -> None:
            found = await asyncio.to_thread(
                lambda: [(m.session_id, stored_fork_turn_index(self.store, m)) for m in older]
            )
            counted = {session_id: turn for session_id, turn in found if turn is not None}
            if counted:
                self._fork_turns.update(counted)
                self.emit(Changes(sidebar=True))

        self.spawn(find(), "count fork turns")

    def prune_operations(self, now: float | None = None) -> tuple[PrunedReservation, ...]:
        """Remove fork reservations past the horizon that no journalled operation names.

        A journal that cannot be read names nothing for certain, so then
        nothing is pruned (its load moves it aside; the next start prunes).

        Raises:
            OSError: ``fork-index/`` could not be read or a file not removed.
        """
        keep = journalled_operation_ids(self.root)
        if keep is None:
            log.warning("fork journal unreadable: fork-index/ not pruned this time")
            return ()
        pruned = OperationIndex(self.root).prune(time.time() if now is None else now, keep=keep)
        if pruned:
            log.info("pruned %d fork reservations past the horizon", len(pruned))
        return pruned

    def _prune_quietly(self) -> None:
        try:
            self.prune_operations()
        except Exception:  # noqa: BLE001 - housekeeping: logged, never fatal
            log.exception("could not prune fork-index/")

    async def recover(self) -> None:
        """Check the fork server, then resume fork operations a crash left behind.

        With a server that cannot branch the records stay as they are: there
        is nothing to resume them against (docs/architecture.md, "A branch click").
        """
        if await self.check_server():
            await self.fork_coordinator.recover()

    async def check_server(self) -> bool:
        """Whether the fork backend can branch; a remote server is asked (docs/cli.md, "Serve").

        A server without ``session-fork-targets-v1`` sets ``server_supported``
        to ``False``: every branch action shows the "server unsupported"
        reason, a notice says so once, and there is no fallback. The local
        store always can.

        Raises:
            RemoteUnavailable: the server could not be asked (nothing changes).
        """
        from branchwise.desktop.host.backends import RemoteForkBackend

        backend = self.fork_coordinator.backend
        if not isinstance(backend, RemoteForkBackend):
            return True
        try:
            await backend.check_support()
        except ServerUnsupported as exc:
            if self.server_supported:
                self.server_supported = False
                self.notices.post(exc.code, Level.WARNING, detail=exc.message)
                self.emit(Changes(targets=frozenset(self._open)))
            return False
        if not self.server_supported:
            self.server_supported = True
            self.emit(Changes(targets=frozenset(self._open)))
        return True

    async def shutdown(self) -> None:
        """Stop running turns (they commit as ``cancelled``) and release every writer.

        The search index stops at the next conversation and is closed.
        """
        for session in list(self._open.values()):
            await session.close()
        self._open.clear()
        for ref in list(self._remote):
            await self.close(ref)
        await self.servers.stop_all()
        await self._close_search()
        for task in list(self._tasks):
            task.cancel()
        if self._pruning is not None:
            await asyncio.to_thread(self._pruning.join)

    # -- listening ------------------------------------------------------------

    def subscribe(self, listener: ChangeListener) -> Callable[[], None]:
        """Call ``listener(changes)`` after every change; returns an unsubscribe function."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def subscribe_text(self, listener: TextListener) -> Callable[[], None]:
        """Call ``listener(session_id, turn_id, message_id, chunk)`` for streamed text."""
        self._text_listeners.append(listener)
        return lambda: (
            self._text_listeners.remove(listener) if listener in self._text_listeners else None
        )

    def emit(self, changes: Changes) -> Changes:
        """Broadcast ``changes`` and return them.

        Every listener runs even if one fails. A failing view must not break
        what called ``emit`` — often a turn runner between two commits — so
        its error is logged and posted as an ``internal_error`` notice instead
        of being raised into the caller.
        """
        if changes.empty:
            return changes
        for listener in list(self._listeners):
            try:
                listener(changes)
            except Exception as exc:  # noqa: BLE001 - reported, never swallowed
                self._listener_failed("a view refreshing after a change", exc)
        return changes

    def emit_text(self, session_id: str, turn_id: str, message_id: str, chunk: str) -> None:
        """Broadcast one streamed chunk (failures are reported like :meth:`emit`'s)."""
        for listener in list(self._text_listeners):
            try:
                listener(session_id, turn_id, message_id, chunk)
            except Exception as exc:  # noqa: BLE001 - reported, never swallowed
                self._listener_failed("a view showing streamed text", exc)

    def _listener_failed(self, what: str, exc: Exception) -> None:
        log.error("%s failed", what, exc_info=exc)
        self.notices.post("internal_error", Level.ERROR, detail=f"{what}: {exc!r}")

    def spawn(self, coro: Coroutine[Any, Any, T], what: str) -> asyncio.Task[T]:
        """Run ``coro`` as a task whose failure becomes a notice instead of vanishing."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(lambda t: self._task_done(t, what))
        return task

    def _task_done(self, task: asyncio.Task[Any], what: str) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is None:
            return
        if isinstance(exc, BranchwiseError):
            self.notices.post(exc.code, Level.ERROR, detail=exc.message)
        else:
            log.error("%s failed", what, exc_info=exc)
            self.notices.post("internal_error", Level.ERROR, detail=f"{what}: {exc!r}")

    # -- conversations --------------------------------------------------------

    @property
    def index(self) -> LineageIndex:
        """Manifests by id and parent (built by :meth:`start`)."""
        if self._index is None:
            self._index = LineageIndex.build(self.store.iter_manifests())
        return self._index

    def session(self, session_id: str) -> OpenSession | None:
        """The open session with this id, if it is open."""
        return self._open.get(session_id)

    @property
    def open_sessions(self) -> list[OpenSession]:
        """Every open session."""
        return list(self._open.values())

    def is_running(self, session_id: str) -> bool:
        """A turn runs in this session (in this app)."""
        session = self._open.get(session_id)
        return session is not None and session.running

    def title(self, session_id: str) -> str:
        """The best known title ("" if the conversation has none yet)."""
        session = self._open.get(session_id)
        if session is not None:
            return session.title
        manifest = self.index.by_id.get(session_id)
        return manifest.title if manifest else ""

    def create_session(self, title: str = "") -> OpenSession:
        """Create a new root conversation and open it (the caller shows its tab)."""
        writer = self.store.create(title)
        writer.close()
        self.index.put(self.store.manifest(writer.session_id))
        session = self.open_session(writer.session_id)
        self.emit(Changes(sidebar=True, added=frozenset({session.session_id})))
        self.index_for_search(session.session_id)
        return session

    def rename(self, session_id: str, title: str) -> Changes:
        """Give a conversation a new title (a ``session/title`` commit, then its manifest).

        Uses the open writer when the app has one; otherwise takes the lease just
        for the rename.

        Raises:
            InvalidTitle: an empty or overlong title (nothing is written).
            LeaseHeld: another process is writing the conversation.
        """
        title = given_title(title)
        session = self.session(session_id)
        if session is not None and session.writer is not None:
            session.writer.set_title(title)
            manifest = session.writer.manifest
        else:
            with self.store.open_writer(session_id) as writer:
                writer.set_title(title)
                manifest = writer.manifest
        if session is not None:
            session.manifest = manifest
        self.index.put(manifest)
        self.index_for_search(session_id)
        return self.emit(Changes(sidebar=True, sessions=frozenset({session_id})))

    def open_session(self, session_id: str) -> OpenSession:
        """Open a conversation (idempotent). Big ones load their history in the background.

        Raises:
            SessionNotFound, InvalidManifest, UnsupportedFormat: it cannot be opened.
        """
        session = self._open.get(session_id)
        if session is not None:
            return session
        manifest = self.store.manifest(session_id)
        session = OpenSession(self, manifest)
        self._open[session_id] = session
        try:
            changes = session.start_loading()
        except BaseException:
            self._open.pop(session_id, None)
            raise
        self.emit(changes | Changes(transcripts=frozenset({session_id})))
        return session

    async def close_session(self, session_id: str) -> Changes:
        """Close a conversation: a running turn is stopped and committed first."""
        session = self._open.pop(session_id, None)
        if session is None:
            return Changes()
        await session.close()
        return self.emit(Changes(sidebar=True, sessions=frozenset({session_id})))

    async def send(
        self, session_id: str, text: str, files: Sequence[PreparedAttachment] = ()
    ) -> TurnResult:
        """Run one turn in an open conversation; a failed turn ends as ``error``.

        ``files`` (read by :attr:`attaching`) are stored before the question
        is committed; a refusal to store them raises, and nothing is written.
        """
        session = self._open.get(session_id)
        if session is None:
            session = self.open_session(session_id)
        return await session.send(text, files)

    async def retry(self, session_id: str, turn_id: str | None = None) -> TurnResult:
        """Ask a failed turn's prompt again as a new turn of the same conversation."""
        session = self._open.get(session_id)
        if session is None:
            session = self.open_session(session_id)
        return await session.retry(turn_id)

    def stop(self, session_id: str) -> None:
        """Stop the running turn of a conversation, if any."""
        session = self._open.get(session_id)
        if session is not None:
            session.stop()

    def turn_finished(self, session: OpenSession, result: TurnResult) -> None:
        """Called by an open session when its turn's closing commit is durable."""
        if session.writer is not None:
            self.index.put(session.writer.manifest)
        self.emit(
            Changes(
                sidebar=True,
                sessions=frozenset({session.session_id}),
                turns=frozenset({(session.session_id, result.turn_id)}),
            )
        )
        self.index_for_search(session.session_id)

    # -- branching ------------------------------------------------------------

    def branch_state(self, session_id: str, row: Row) -> BranchState:
        """The branch action of one row of an open conversation."""
        session = self._open.get(session_id)
        if session is None:
            return branch_state(row, None, server_supported=self.server_supported)
        return session.branch_state(
            row, in_flight=self.branches.in_flight, server_supported=self.server_supported
        )

    async def request_branch(self, request: ForkRequest) -> str | None:
        """Create a new conversation from a finished turn and open it in a new tab.

        The one place a branch click lands, with the request its row's action
        carries. Returns the child's id, or ``None`` when it was refused or is
        uncertain (the notice channel says which).
        """
        outcome = await self.branches.request(request)
        return outcome.child_session_id if outcome is not None and outcome.opened else None

    async def edit(self, session_id: str, turn_id: str, prompt: str) -> str | None:
        """Send an edited prompt of a turn as a branch, opened in a new tab where it runs.

        The branch is made through the operations journal like a branch click
        (one click, at most one child, never lost) and is published with the
        edited prompt; opening it asks that prompt. Returns the branch, or
        ``None`` when it was refused (a notice says why) or is uncertain.
        """
        return await self._ask_again(lambda: edit_request(self.store, session_id, turn_id, prompt))

    async def regenerate(self, session_id: str, turn_id: str) -> str | None:
        """Ask a turn's prompt again in a branch at the turn before it (see :meth:`edit`)."""
        return await self._ask_again(lambda: regenerate_request(self.store, session_id, turn_id))

    async def _ask_again(self, make: Callable[[], ForkRequest]) -> str | None:
        try:
            request = await asyncio.to_thread(make)
        except BranchwiseError as exc:
            self.notices.post(exc.code, Level.ERROR, detail=exc.message)
            return None
        return await self.request_branch(request)

    async def open_child(self, child_id: str) -> None:
        """The coordinator's opener: index a new branch, open it, ask the window for a tab.

        The branch is published already titled, so this only reads its
        manifest and opens it once. Raises whatever opening raises, so the
        operations journal keeps the record and its notice offers to open the
        kept child again.
        """
        manifest = self.store.manifest(child_id)
        self.index.put(manifest)
        self.emit(
            Changes(
                sidebar=True,
                sessions=frozenset(self._parents_of(manifest)),
                added=frozenset({child_id}),
            )
        )
        self.index_for_search(child_id)
        self.open_session(child_id)
        if self.navigator is not None:
            await self.navigator(child_id)

    async def open_kept_child(self, child_id: str) -> bool:
        """A notice's "Open it": open a child that was kept when its tab failed."""
        return bool(await self.fork_coordinator.open_kept_child(child_id))

    def _parents_of(self, manifest: Any) -> set[str]:
        return {manifest.parent.session_id} if manifest.parent is not None else set()

    @property
    def fork_coordinator(self) -> ForkCoordinator:
        """The journal that carries out every branch click (docs/architecture.md)."""
        if self._coordinator is None:
            from branchwise.desktop.host.backends import LocalForkBackend, no_checkpoint
            from branchwise.desktop.host.branching import ForkCoordinator

            checkpoint = self._checkpoint or no_checkpoint
            backend = self._fork_backend or LocalForkBackend(self.store, checkpoint=checkpoint)
            self._coordinator = ForkCoordinator(
                self.root,
                backend,
                self.notices,
                self.open_child,
                checkpoint=checkpoint,
                namer=lambda request: branch_title(self.source, request),
            )
        return self._coordinator

    # -- a conversation from either source -------------------------------------

    def server_of(self, ref: ConversationRef) -> RemoteSource | None:
        """The saved server a ref names (``None``: local, or a server no longer saved)."""
        return self.servers.of(ref.server) if ref.server is not None else None

    def conversation(self, ref: ConversationRef) -> Conversation | None:
        """The open conversation a ref names."""
        if ref.server is None:
            return self._open.get(ref.session_id)
        return self._remote.get(ref)

    def usage_at(self, ref: ConversationRef) -> ConversationUsage | None:
        """The token total and context fill of an open conversation (``None``: not loaded).

        The context length is known only for a conversation of this machine
        whose model's server states it; the first call asks that server.
        """
        conversation = self.conversation(ref)
        projection = conversation.projection if conversation is not None else None
        if projection is None:
            return None
        length = None
        if ref.server is None:
            provider = self.turn_provider(projection.settings, ref.session_id)[0]
            length = self.context_windows.known(provider)
        return conversation_usage(projection, length)

    async def open(self, ref: ConversationRef) -> Conversation:
        """Open a conversation of this machine or of a server (idempotent).

        A server's conversation is read (a big one's last page only, when the
        server can send it: :meth:`load_earlier` reads the rest), then followed
        (a turn that runs there streams in); a branch published with an edit's
        or a regenerate's question is asked at once, as a local one is.

        Raises:
            SessionNotFound, InvalidManifest, UnsupportedFormat: a local one cannot be opened.
            RemoteRefusal: the server refused (e.g. the conversation is gone).
            RemoteUnavailable: the server is not saved, or could not be asked.
        """
        if ref.server is None:
            return self.open_session(ref.session_id)
        found = self._remote.get(ref)
        if found is not None:
            return found
        server = self.server_of(ref)
        if server is None:
            raise RemoteUnavailable(f"{ref.server} is not a saved server", server=ref.server)
        conversation = await server.open_conversation(ref.session_id)
        found = self._remote.get(ref)
        if found is not None:  # opened meanwhile by another click
            return found
        self._remote[ref] = conversation
        conversation.subscribe(self._broadcast)
        self._hear(server)
        self._following[ref] = self.spawn(conversation.follow(), "follow a server conversation")
        sid = ref.session_id
        self.emit(Changes(sessions=frozenset({sid}), transcripts=frozenset({sid})))
        if conversation.unasked is not None and server.connected:
            self.spawn(self._answer(server, sid), "answer a branch on a server")
        return conversation

    async def load_earlier(self, ref: ConversationRef, *, initiator: object = None) -> Changes:
        """Read the turns a conversation opened without (its tab scrolled up to them).

        Only a server's big conversation opens on its last page; a local one
        has nothing to read here. A failure is a notice; what changed reaches
        every view (with ``initiator``) when the turns are there.
        """
        conversation = self._remote.get(ref)
        if conversation is None or not conversation.earlier_turns:
            return Changes(initiator=initiator)
        try:
            await conversation.load_earlier()
        except BranchwiseError as exc:
            conversation.server.report(exc)
            return Changes(initiator=initiator)
        sid = ref.session_id
        return Changes(transcripts=frozenset({sid}), initiator=initiator)

    def _broadcast(self, changes: Changes) -> None:
        self.emit(changes)

    def _hear(self, server: RemoteSource) -> None:
        """Broadcast a server's state and list changes to its open conversations' views."""
        if id(server) in self._heard_servers:
            return
        self._heard_servers.add(id(server))

        def changed() -> None:
            sids = frozenset(r.session_id for r in self._remote if self.server_of(r) is server)
            if sids:
                self.emit(Changes(sessions=sids, targets=sids))

        server.subscribe(changed)

    async def _answer(self, server: RemoteSource, session_id: str) -> None:
        try:
            await server.answer(session_id)
        except BranchwiseError as exc:
            server.report(exc)

    async def close(self, ref: ConversationRef) -> Changes:
        """Close a conversation; a server's turn runs on there (others may follow it)."""
        if ref.server is None:
            return await self.close_session(ref.session_id)
        self._remote.pop(ref, None)
        follow = self._following.pop(ref, None)
        if follow is not None:
            follow.cancel()
        return self.emit(Changes(sessions=frozenset({ref.session_id})))

    def lineage_at(self, ref: ConversationRef) -> LineageIndex:
        """The conversations of the ref's source, by id and lineage."""
        server = self.server_of(ref)
        return server.listing.index if server is not None else self.index

    def alternatives_at(self, ref: ConversationRef) -> dict[str, Alternatives]:
        """The sibling sets of an open conversation, by the turn of its rows they sit on.

        From the lineage index of the ref's source (this machine's, or the
        server's list) and the rows already held: no log is read, so a
        transcript asks each time it lists branches, with 1,000 branches in
        the family too (docs/architecture.md, "Alternatives at a turn").
        """
        sets = alternatives_of(self.lineage_at(ref), ref.session_id)
        if not sets:
            return {}
        conversation = self.conversation(ref)
        rows = conversation.rows if conversation is not None else []
        return alternatives_by_turn(sets, ((row.turn_id, row.index) for row in rows))

    async def open_at_turn(self, ref: ConversationRef, target: TurnTarget) -> Landing:
        """Open a conversation of either source and find the row ``target`` names.

        A big local conversation opens on its last page and a server's may
        too: when the turn is not among the rows yet, this waits for the
        whole history (local) or reads earlier pages (server) until it is, or
        until there is nothing more to read; then it lands on the nearest row
        (``exact`` false). The window scrolls there (docs/architecture.md,
        "Opening a conversation at a turn").

        Raises:
            SessionNotFound, InvalidManifest, UnsupportedFormat, RemoteRefusal,
            RemoteUnavailable: as :meth:`open`.
        """
        conversation = await self.open(ref)
        waited = False
        while True:
            found = landing_row(conversation.rows, conversation.projection, target)
            if found is not None:
                return Landing(ref, *found)
            if isinstance(conversation, OpenSession) and not conversation.loaded and not waited:
                waited = True
                with contextlib.suppress(BranchwiseError):  # the tab says why it is read-only
                    await conversation.wait_loaded()
                continue
            if conversation.earlier_turns and (await self.load_earlier(ref)).transcripts:
                continue
            return Landing(ref, nearest_row(conversation.rows, target), False)

    def title_at(self, ref: ConversationRef) -> str:
        """The best known title of a conversation of either source."""
        if ref.server is None:
            return self.title(ref.session_id)
        conversation = self._remote.get(ref)
        if conversation is not None:
            return conversation.title
        server = self.server_of(ref)
        return server.title(ref.session_id) if server is not None else ""

    def manifest_at(self, ref: ConversationRef) -> Manifest | None:
        """The best known manifest of a conversation of either source (an open one's is newest)."""
        manifest = self.lineage_at(ref).by_id.get(ref.session_id)
        if ref.server is not None:
            return manifest
        session = self._open.get(ref.session_id)
        if session is not None:  # its writer's is newer still (a first prompt's label)
            manifest = session.writer.manifest if session.writer is not None else session.manifest
        counted = self._fork_turns.get(ref.session_id)
        if manifest is not None and manifest.fork_turn_index is None and counted is not None:
            manifest = manifest.with_changes(fork_turn_index=counted)  # older than labels
        return manifest

    def label_at(self, ref: ConversationRef) -> str | None:
        """How a branch differs from its parent, in the active language (``None``: a root).

        Rendered on each call from the manifest's structure, so a language
        switch re-renders it; the same rule for a server's conversations,
        whose listing carries the structure.
        """
        manifest = self.manifest_at(ref)
        if manifest is None:
            return None
        label = label_in(self.lineage_at(ref), manifest)
        return render_label(label, manifest.fork_turn_index)

    def branch_tooltip_at(self, ref: ConversationRef) -> str:
        """Title, label and "Branched from turn N of <parent> on <date>", one a line."""
        lines = [display_title(self.title_at(ref)) or _("Untitled conversation")]
        manifest = self.manifest_at(ref)
        label = self.label_at(ref)
        if label:
            lines.append(label)
        if manifest is not None and manifest.parent is not None:
            parent = display_title(self.title_at(ref.sibling(manifest.parent.session_id)))
            when = format_date(manifest.created_at) if manifest.created_at else ""
            origin = branched_from(
                manifest, parent or _("Untitled conversation"), manifest.fork_turn_index, when
            )
            if origin:
                lines.append(origin)
        return "\n".join(lines)

    async def rename_label(self, ref: ConversationRef, text: str) -> Changes:
        """Give a branch a label of the user's words, written off the UI thread.

        Uses the open writer when the app has one; otherwise takes the lease
        just for the write. While the branch runs a turn, the write is made
        on the event loop's thread, between the turn's own manifest writes. A
        conversation on a server is renamed there.

        Raises:
            InvalidLabel: an empty or overlong label (nothing is written).
            LeaseHeld: another process is writing the conversation.
            ServerUnsupported: the server cannot rename labels.
        """
        label = given_branch_label(text)
        if ref.server is not None:
            server = self.server_of(ref)
            if server is None:
                raise RemoteUnavailable(f"no connection to {ref.server}", server=ref.server)
            await server.rename_label(ref.session_id, label.text or "")
            return self.emit(Changes(sidebar=True, sessions=frozenset({ref.session_id})))
        session_id = ref.session_id
        session = self.session(session_id)
        writer = session.writer if session is not None else None

        def write() -> Manifest:
            if writer is not None:
                writer.set_label(label)
                return writer.manifest
            with self.store.open_writer(session_id) as own:
                own.set_label(label)
                return own.manifest

        if session is not None and session.running:
            # Its turn rewrites the manifest too (a first prompt's title and label), on this
            # thread: one small atomic write here rather than two writers racing.
            manifest = write()
        else:
            manifest = await asyncio.to_thread(write)
        if session is not None:
            session.manifest = manifest
        self.index.put(manifest)
        return self.emit(Changes(sidebar=True, sessions=frozenset({session_id})))

    def title_anywhere(self, session_id: str) -> str:
        """The best known title of a conversation named by id only (as a notice names it).

        This machine's first, then a server's: ids are random, so one found on a
        server is that conversation (a branch made there is announced by its title).
        """
        title = self.title(session_id)
        if title or session_id in self.index.by_id:
            return title
        for ref, conversation in self._remote.items():
            if ref.session_id == session_id:
                return conversation.title
        for server in self.servers.sources:
            title = server.title(session_id)
            if title:
                return title
        return ""

    def running_at(self, ref: ConversationRef) -> bool:
        """A turn runs in the conversation (here, or on its server)."""
        conversation = self.conversation(ref)
        return conversation is not None and conversation.running

    async def branch_map(self, ref: ConversationRef, turn_id: str | None = None) -> MapLayout:
        """The branch map of the ref's family, laid out, ``turn_id`` (if given) highlighted.

        Read and laid out off the UI thread (only the family's manifests are
        taken from the index here); a server's comes from its map route.

        Raises:
            SessionNotFound: the conversation is gone or in the Trash.
            ServerUnsupported, RemoteRefusal, RemoteUnavailable: a server's could not be had.
        """
        server = self.server_of(ref)
        if server is not None:
            family = await server.family_map(ref.session_id)
        else:
            running = [s.session_id for s in self._open.values() if s.running]
            family = await local_map(self.store, self.index, ref.session_id, running)
        return await laid_out(family, (ref.session_id, turn_id))

    def refusal(self, ref: ConversationRef, action: str) -> str | None:
        """Why ``action`` cannot be done in this conversation now, as a reason code.

        ``action`` is ``send``, ``edit`` (Edit and Regenerate), ``retry``,
        ``bring_back``, ``export``, ``compare`` or ``configure``. ``None``: it
        can. A local conversation can do each (its own state says otherwise,
        e.g. read-only); a server's needs the server connected, Edit and
        Regenerate a server that takes a branch's prompt, and the rest have no
        route on a server.
        """
        server = self.server_of(ref)
        if ref.server is None:
            return None
        if server is None or not server.connected:
            return "server_disconnected"
        if action in ("send", "retry"):
            return None
        if action == "edit":
            return None if server.asks_again else "server_cannot_ask_again"
        return "server_cannot"

    async def send_at(
        self, ref: ConversationRef, text: str, files: Sequence[PreparedAttachment] = ()
    ) -> None:
        """Send a prompt in a conversation of either source (a refusal is a notice).

        Raises:
            BranchwiseError: ``files`` could not be stored here or uploaded to the
                server (nothing was sent: the composer keeps the prompt).
        """
        server = self.server_of(ref)
        if ref.server is None:
            await self.send(ref.session_id, text, files)
            return
        if server is None:
            self.notices.post("server_disconnected", Level.WARNING, server=str(ref.server))
            return
        refs = await server.upload(files)  # a refused file raises: nothing was sent
        try:
            await server.send(ref.session_id, text, refs)
        except BranchwiseError as exc:
            server.report(exc)

    async def previews_at(
        self, ref: ConversationRef, refs: Sequence[AttachmentRef]
    ) -> dict[str, Preview]:
        """Attachments' previews in a conversation of either source (read off the UI thread)."""
        if ref.server is None:
            return await self.attaching.previews(refs)
        server = self.server_of(ref)
        if server is None:
            return {r.sha256: Preview(r, None, False) for r in refs}
        return await remote_previews(server.remote, refs)

    def stop_at(self, ref: ConversationRef) -> None:
        """Stop the running turn of a conversation of either source."""
        server = self.server_of(ref)
        if ref.server is None:
            self.stop(ref.session_id)
        elif server is not None:
            self.spawn(server.stop_turn(ref.session_id), "stop a server turn")

    async def retry_at(self, ref: ConversationRef, turn_id: str | None = None) -> None:
        """Ask a failed turn's prompt again, in the same conversation (either source)."""
        if ref.server is None:
            await self.retry(ref.session_id, turn_id)
            return
        conversation = self._remote.get(ref)
        if conversation is None:
            return
        try:
            prompt = conversation.retry_prompt(turn_id)
        except BranchwiseError as exc:
            self.notices.post(exc.code, Level.ERROR, detail=exc.message)
            return
        await self.send_at(ref, prompt)

    async def edit_at(self, ref: ConversationRef, turn_id: str, prompt: str) -> str | None:
        """:meth:`edit` in a conversation of either source; the branch's id, or ``None``."""
        if ref.server is None:
            return await self.edit(ref.session_id, turn_id, prompt)
        return await self._ask_again_at(ref, turn_id, prompt)

    async def regenerate_at(self, ref: ConversationRef, turn_id: str) -> str | None:
        """:meth:`regenerate` in a conversation of either source."""
        if ref.server is None:
            return await self.regenerate(ref.session_id, turn_id)
        return await self._ask_again_at(ref, turn_id, None)

    async def _ask_again_at(
        self, ref: ConversationRef, turn_id: str, prompt: str | None
    ) -> str | None:
        """An edit or a regenerate on a server: the same journalled branch click as a
        local one, through the server's journal; the branch's tab then asks the server
        to answer its question."""
        conversation = self._remote.get(ref)
        if conversation is None:
            return None
        try:
            request = conversation.ask_again_request(turn_id, prompt)
        except BranchwiseError as exc:
            self.notices.post(exc.code, Level.ERROR, detail=exc.message)
            return None
        return await conversation.server.request_branch(request)

    async def branch_at(self, ref: ConversationRef, request: ForkRequest) -> str | None:
        """A branch click in a conversation of either source (see :meth:`request_branch`)."""
        server = self.server_of(ref)
        if ref.server is None:
            return await self.request_branch(request)
        if server is None:
            return None
        return await server.request_branch(request)

    def branch_state_at(self, ref: ConversationRef, row: Row) -> BranchState:
        """The branch action of one row of a conversation of either source."""
        if ref.server is None:
            return self.branch_state(ref.session_id, row)
        conversation = self._remote.get(ref)
        if conversation is None:
            return branch_state(row, None, server_supported=False)
        return conversation.server_branch_state(row)

    # -- search -----------------------------------------------------------------

    async def search(self, query: str, limit: int = 50) -> SearchResult:
        """The messages and titles of every conversation that contain ``query``.

        Runs off the calling thread. An index that cannot be used answers
        with no hits (and one ``search_index_unavailable`` notice).

        Other processes (``branchwise session say``, ``serve``) write without
        indexing, so a search also starts, at most every
        :attr:`search_rescan_interval` seconds, a quiet catch-up with every
        conversation in the background; what it finds refreshes the results
        (``Changes(search=True)``). This search answers at once.
        """
        now = time.monotonic()
        if now - self._search_rescanned >= self.search_rescan_interval:
            self._search_rescanned = now
            self._search_rescan = True
            self._kick_search()
        result = await self._use_search_index(lambda index: index.search(query, limit=limit))
        return result if result is not None else SearchResult((), 0)

    def refresh_from_disk(self) -> None:
        """Catch up, in the background, with what other processes wrote (the window's timer).

        One quiet catch-up of the search index with every conversation: cheap
        when nothing changed (a manifest read and an ``fstat`` per session).
        Merges it finds re-render the branches they mark.
        """
        self._search_rescanned = time.monotonic()
        self._search_rescan = True
        self._kick_search()

    async def _rediscover_sessions(self) -> None:
        """Bring the conversation list in step with conversations other processes changed.

        The CLI, ``serve`` or another window create, fork, import, rename and
        trash conversations without telling this process; one manifest scan
        (in a worker thread, as cheap as the search catch-up's) finds them.
        New ones are inserted under their parents, renamed ones re-rendered,
        and ones gone from the store dropped from the list unless open here.
        """
        try:
            found = await asyncio.to_thread(lambda: list(self.store.iter_manifests()))
        except OSError as exc:
            log.warning("rescanning the conversations failed: %r", exc)
            return
        known = self.index.by_id
        fresh = {item.session_id: item for item in found if isinstance(item, Manifest)}
        added = frozenset(sid for sid in fresh if sid not in known)
        changed = frozenset(
            sid for sid, manifest in fresh.items() if sid in known and known[sid] != manifest
        )
        damaged = {
            error.details.get("sessionId") for error in found if not isinstance(error, Manifest)
        }
        gone = frozenset(
            sid
            for sid in known
            if sid not in fresh and sid not in self._open and sid not in damaged
        )
        if not (added or changed or gone):
            return
        for manifest in sorted((fresh[sid] for sid in added | changed), key=creation_order):
            self.index.put(manifest)
        for sid in gone:
            self.index.remove(sid)
        self.emit(Changes(sidebar=bool(gone), sessions=changed, added=added))

    def merges_of(self, session_id: str) -> tuple[MergedBranch, ...]:
        """Where a branch was brought back: merges into one of its ancestors, oldest first.

        The search index's catch-up reads every ``session/merge`` (the only
        record of a merge is in the log it was written to). A merge a fork
        inherited from an ancestor names the fork, which is not an ancestor of
        the branch: it is left out here, as is one into a conversation no
        longer known.
        """
        found = self._merged.get(session_id)
        if not found:
            return ()
        ancestors: set[str] = set()
        by_id = self.index.by_id
        current = by_id.get(session_id)
        while current is not None and current.parent is not None:
            parent_id = current.parent.session_id
            if parent_id in ancestors or parent_id == session_id:
                break  # a damaged parent loop
            ancestors.add(parent_id)
            current = by_id.get(parent_id)
        return tuple(merge for merge in found if merge.into_session_id in ancestors)

    async def _reload_merges(self) -> None:
        """Re-read the merges the index knows; re-render the branches whose marks changed."""
        records = await self._use_search_index(lambda index: index.merges())
        if records is None:
            return
        grouped: dict[str, list[MergedBranch]] = {}
        for record in records:
            grouped.setdefault(record.child_session_id, []).append(record)
        merged = {child: tuple(found) for child, found in grouped.items()}
        changed = {
            child
            for child in merged.keys() | self._merged.keys()
            if merged.get(child) != self._merged.get(child)
        }
        self._merged = merged
        if changed:
            self.emit(Changes(sessions=frozenset(changed)))

    def index_all_for_search(self) -> None:
        """Catch the search index up with every conversation, in the background.

        ``search_progress`` counts the conversations meanwhile; each step
        emits ``Changes(search=True)``. Without a running event loop (a
        synchronous caller) nothing is scheduled.
        """
        self._search_all = True
        self._search_pending.clear()
        self._kick_search()

    def index_for_search(self, session_id: str) -> None:
        """Catch the search index up with one conversation, in the background."""
        self._search_pending.add(session_id)
        self._kick_search()

    async def search_idle(self) -> None:
        """Until the search index has caught up with everything asked of it so far."""
        while self._search_worker is not None:
            await asyncio.shield(self._search_worker)

    def _kick_search(self) -> None:
        if self._search_worker is not None or self._search_closing:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        self._search_worker = asyncio.ensure_future(self._run_search_worker())

    async def _run_search_worker(self) -> None:
        """Drain the catch-up requests one at a time (the index is one SQLite file)."""
        try:
            while not self._search_closing:
                if self._search_all:
                    self._search_all = False
                    self._search_rescan = False  # the same catch-up, with progress
                    self._search_pending.clear()
                    await self._catch_up_all()
                    await self._reload_merges()  # what earlier runs indexed, too
                elif self._search_pending:
                    session_id = self._search_pending.pop()

                    def catch_up(index: SearchIndex, sid: str = session_id) -> int:
                        return index.catch_up(self.store, sid)

                    count = await self._use_search_index(catch_up)
                    if count:
                        self.emit(Changes(search=True))
                        await self._reload_merges()
                elif self._search_rescan:
                    self._search_rescan = False
                    await self._rediscover_sessions()
                    found = await self._use_search_index(
                        lambda index: index.catch_up_all(self.store)
                    )
                    if found:
                        self.emit(Changes(search=True))
                        await self._reload_merges()
                else:
                    break
        finally:
            self._search_worker = None

    async def _catch_up_all(self) -> None:
        loop = asyncio.get_running_loop()

        def progress(done: int, total: int) -> None:  # in the worker thread
            if self._search_closing:
                raise _SearchStopped
            loop.call_soon_threadsafe(self._search_progressed, done, total)

        self.search_progress = (0, 0)
        self.emit(Changes(search=True))
        try:
            await self._use_search_index(lambda index: index.catch_up_all(self.store, progress))
        finally:
            self.search_progress = None
            self.emit(Changes(search=True))

    def _search_progressed(self, done: int, total: int) -> None:
        if self.search_progress is None or self._search_closing:
            return  # a late report from a catch-up that has ended
        self.search_progress = (done, total)
        self.emit(Changes(search=True))

    async def _use_search_index(self, work: Callable[[SearchIndex], T]) -> T | None:
        """Run ``work`` on the index in a worker thread; a failure becomes one notice."""
        try:
            async with self._search_opening:
                if self._search_index is None:
                    if self._search_closing:
                        return None
                    self._search_index = await asyncio.to_thread(SearchIndex, self.root)
                index = self._search_index
            result = await asyncio.to_thread(work, index)
        except _SearchStopped:
            return None
        except Exception as exc:  # noqa: BLE001 - a cache: reported once, never fatal
            self._search_failed(exc)
            return None
        self._search_failing = False
        return result

    def _search_failed(self, exc: Exception) -> None:
        log.warning("search index unavailable", exc_info=exc)
        if self._search_failing:
            return
        self._search_failing = True
        code = exc.code if isinstance(exc, BranchwiseError) else "search_index_unavailable"
        detail = exc.message if isinstance(exc, BranchwiseError) else repr(exc)
        self.notices.post(code, Level.WARNING, detail=detail)

    async def _close_search(self) -> None:
        self._search_closing = True
        self._search_pending.clear()
        worker = self._search_worker
        if worker is not None:
            await asyncio.wait([worker])
        async with self._search_opening:
            index, self._search_index = self._search_index, None
        if index is not None:
            await asyncio.to_thread(index.close)

    # -- settings ---------------------------------------------------------------

    def turn_provider(
        self, conversation: ConversationSettings, session_id: str | None = None
    ) -> tuple[Provider, str]:
        """The provider and system prompt for a turn of a conversation with these settings.

        A conversation that sets nothing of its own shares the app's provider;
        one of a family :meth:`answer_with_demo` named is answered by the demo.
        """
        if session_id is not None and self._demo_families:
            manifest = self.index.by_id.get(session_id)
            root = manifest.root_session_id if manifest is not None else None
            if (root or session_id) in self._demo_families:
                return DemoProvider(), ""
        if conversation.empty:
            return self.provider, self.settings.system_prompt
        effective = for_conversation(self.settings, conversation)
        return self._provider_factory(effective), effective.system_prompt

    def answers_from(self, ref: ConversationRef | None) -> AnswersFrom:
        """Who answers ``ref``'s next turn: its own model, the app's, or its server's.

        No conversation (or one not open) means the app's provider.
        """
        conversation = self.conversation(ref) if ref is not None else None
        projection = conversation.projection if conversation is not None else None
        own = projection.settings if projection is not None else ConversationSettings()
        if ref is not None and ref.server is not None:
            source = self.server_of(ref)
            return AnswersFrom(own.model or "", server=source.name if source else ref.server)
        provider = self.turn_provider(own, ref.session_id if ref is not None else None)[0]
        return AnswersFrom(provider.label, demo=isinstance(provider, DemoProvider))

    def answer_with_demo(self, root_session_id: str) -> None:
        """Have the demo responder answer this conversation and its branches while the app runs.

        The sample conversation (:mod:`~branchwise.desktop.host.sample`) is
        made offline whatever model Settings name.
        """
        self._demo_families.add(root_session_id)

    def configure(self, session_id: str, conversation: ConversationSettings) -> Changes:
        """Give a conversation its own model, system prompt and temperature.

        Raises:
            ReadOnlySession: it is not open for writing here.
            BranchwiseError: a turn is running (it applies to whole turns), or the commit failed.
        """
        session = self.open_session(session_id)
        session.configure(conversation)
        return self.emit(Changes(sessions=frozenset({session_id})))

    def update_settings(self, settings: Settings) -> Changes:
        """Save new settings and switch provider; the language is the window's business.

        A server replaced by another is kept among the saved servers, so Send
        to several can still offer its models.
        """
        settings = remember_server(self.settings, settings)
        save_settings(self.root, settings)
        self.settings = settings
        self.provider = self._provider_factory(settings)
        return self.emit(Changes(settings=True))


@dataclass(frozen=True, slots=True)
class AnswersFrom:
    """Who answers the next turn of a conversation, for the status bar.

    Attributes:
        label: the provider's label (``llama3.2 @ 127.0.0.1:11434``); for a
            server's conversation, the conversation's own model or ``""`` when
            the server's default model answers.
        demo: the offline demo responder answers.
        server: the ``branchwise serve`` server's name whose model answers, if any.
    """

    label: str
    demo: bool = False
    server: str | None = None


class _SearchStopped(Exception):
    """Raised in the catch-up thread to stop it at the next conversation (shutting down)."""
