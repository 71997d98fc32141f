"""One open conversation inside the host, and the preview a big one opens on.

An :class:`OpenSession` is what a tab shows, without being a widget. It holds
the session's :class:`~branchwise.core.store.store.SessionWriter` (or, when another
process holds the lease or the log is damaged, a read-only snapshot that it
re-reads when the file grows), runs turns through
:class:`~branchwise.core.runtime.TurnRunner`, keeps the transcript rows, and
reads fork targets from committed events whenever a turn ends.

Everything it changes is reported to the host as :class:`Changes`; streamed
text goes through a separate, cheaper callback.

A log larger than ``PREVIEW_THRESHOLD_BYTES`` opens on a :class:`Preview`:
core's last-page reader (:mod:`branchwise.core.projection.pages`) replays
only the last page of turns, so the tab shows them at once while the full read runs
off-thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, TypeVar

from branchwise.core.conversation.ask_again import retried_turns, unasked_turn
from branchwise.core.conversation.attachments import (
    PreparedAttachment,
    check_message,
    store_attachments,
)
from branchwise.core.conversation.settings import ConversationSettings
from branchwise.core.errors import (
    BranchwiseError,
    CorruptLog,
    LeaseHeld,
    ReadOnlyDataFolder,
    ReadOnlySession,
    TurnRunning,
)
from branchwise.core.fork.targets import (
    target_set,
    targets_from_projection,
    tracker_after_snapshot,
)
from branchwise.core.log.segments import SessionLog, log_identity, read_session_log
from branchwise.core.projection.attachments import AttachmentRef
from branchwise.core.projection.pages import last_page_start, read_last_page
from branchwise.core.projection.projection import Projection
from branchwise.core.providers.base import Provider
from branchwise.core.runtime import TurnListener, TurnResult, TurnRunner
from branchwise.core.settings import Settings
from branchwise.core.store.attachments import BlobStore
from branchwise.core.store.manifest import Manifest, load_manifest
from branchwise.core.store.store import SessionStore, SessionWriter
from branchwise.desktop.host.changes import Changes
from branchwise.desktop.host.conversation import Conversation
from branchwise.desktop.host.notices import Level, NoticeCenter, NoticeSubject
from branchwise.desktop.host.rows import (
    PAGE_SIZE,
    Row,
    TargetTable,
    row_for_turn,
    rows_from_projection,
)

log = logging.getLogger(__name__)
T = TypeVar("T")


class SessionOwner(Protocol):
    """What an open session needs of the host that owns it (which imports this module)."""

    @property
    def store(self) -> SessionStore:
        """The session store."""
        ...

    @property
    def notices(self) -> NoticeCenter:
        """The notice channel."""
        ...

    @property
    def settings(self) -> Settings:
        """The app's settings (the attachment limits)."""
        ...

    def emit(self, changes: Changes) -> Changes:
        """Broadcast what changed."""
        ...

    def emit_text(self, session_id: str, turn_id: str, message_id: str, chunk: str) -> None:
        """Broadcast one streamed chunk."""
        ...

    def spawn(self, coro: Coroutine[Any, Any, T], what: str) -> asyncio.Task[T]:
        """Run ``coro`` as a task whose failure becomes a notice."""
        ...

    def turn_provider(
        self, conversation: ConversationSettings, session_id: str | None = None
    ) -> tuple[Provider, str]:
        """The provider and system prompt for a turn of ``session_id`` with these settings."""
        ...

    def turn_finished(self, session: OpenSession, result: TurnResult) -> None:
        """A turn's closing commit is durable."""
        ...


#: How often a read-only session checks whether its log grew.
READ_ONLY_POLL_SECONDS = 1.0


class SessionMode(StrEnum):
    """How a session is open."""

    LOADING = "loading"
    WRITABLE = "writable"
    READ_ONLY = "read_only"


@dataclass(frozen=True, slots=True)
class _Loaded:
    manifest: Manifest
    writer: SessionWriter | None
    projection: Projection
    rows: list[Row]
    error: BranchwiseError | None
    log_size: int
    unasked: str | None = None
    """The branch's first turn, published with its question and not answered yet."""


class OpenSession(Conversation, TurnListener):
    """An open conversation.

    Attributes:
        session_id: the session.
        manifest: its manifest (title, lineage).
        mode: loading, writable or read-only.
        read_only_error: why it is read-only (``lease_held``, ``corrupt_log``…).
        rows: the transcript rows (the preview's last page while loading).
        targets: fork targets from committed events; ``None`` until read.
    """

    def __init__(self, host: SessionOwner, manifest: Manifest) -> None:
        super().__init__(manifest.session_id)
        self._host = host
        self.manifest = manifest
        self.mode = SessionMode.LOADING
        self.read_only_error: BranchwiseError | None = None
        self.writer: SessionWriter | None = None
        self._projection: Projection | None = None
        self._live: dict[str, tuple[str, str]] = {}
        self._live_parts: dict[str, list[str]] = {}
        self._runner: TurnRunner | None = None
        self._turn_task: asyncio.Task[TurnResult] | None = None
        self._running_turn: str | None = None
        self._loaded = asyncio.get_event_loop().create_future()
        self._poll_task: asyncio.Task[None] | None = None
        self._log_size = 0
        self._closed = False

    # -- reading -----------------------------------------------------------

    @property
    def store(self) -> SessionStore:
        """The host's store."""
        return self._host.store

    @property
    def projection(self) -> Projection | None:
        """The full projection (``None`` while only the preview is loaded)."""
        if self.writer is not None:
            return self.writer.projection
        return self._projection

    @property
    def title(self) -> str:
        """The title as last committed ("" until the first message names it)."""
        projection = self.projection
        return (projection.title if projection else "") or self.manifest.title

    @property
    def loaded(self) -> bool:
        """The whole history has been read."""
        return self.mode is not SessionMode.LOADING

    @property
    def running(self) -> bool:
        """A turn is running: its question is committed and its closing commit is not."""
        return self._running_turn is not None

    async def wait_loaded(self) -> None:
        """Until the whole history is read (raises what loading raised)."""
        await asyncio.shield(self._loaded)

    # -- loading -----------------------------------------------------------

    def start_loading(self) -> Changes:
        """Read the session: at once if small, else a preview now and the rest off-thread."""
        size = self._current_log_size()
        if size <= PREVIEW_THRESHOLD_BYTES:
            self._install(self._load_blocking())
            return Changes(sessions=frozenset({self.session_id}))
        try:
            directory = self.store.session_dir(self.session_id)
            session_log: SessionLog | None = read_session_log(directory, load_manifest(directory))
        except (OSError, BranchwiseError):
            session_log = None  # the full read below says what is wrong
        # The projection snapshot's turns (plus the frames after it) give the branch
        # buttons before the full load, and tell the preview where the last page starts.
        tracker = tracker_after_snapshot(session_log) if session_log is not None else None
        start = None
        if session_log is not None and tracker is not None:
            start = last_page_start(session_log, tracker.turns, PAGE_SIZE)
        preview = read_preview(
            session_log.data if session_log is not None else b"", PAGE_SIZE, start
        )
        if preview is not None:
            self._set_rows(preview.rows)
        if session_log is not None and tracker is not None:
            manifest = session_log.manifest
            self.targets = TargetTable.of(
                target_set(
                    manifest.session_id, manifest.generation, tracker.turns, tracker.verifiable
                )
            )
        self._host.spawn(self._load_in_background(), f"load {self.session_id}")
        return Changes(sessions=frozenset({self.session_id}))

    async def _load_in_background(self) -> None:
        try:
            loaded = await asyncio.to_thread(self._load_blocking)
        except BaseException as exc:
            if not self._loaded.done():
                self._loaded.set_exception(exc)
                self._loaded.exception()  # retrieved here; awaiting callers still see it
            if isinstance(exc, BranchwiseError):
                # Unreadable after all (e.g. a newer format): say so in the tab, not "Loading…".
                self.mode = SessionMode.READ_ONLY
                self.read_only_error = exc
                self._host.emit(Changes(sessions=frozenset({self.session_id})))
            raise
        if self._closed:
            if loaded.writer is not None:
                loaded.writer.close()
            return
        self._install(loaded)
        self._host.emit(
            Changes(sessions=frozenset({self.session_id}), transcripts=frozenset({self.session_id}))
        )

    def _load_blocking(self) -> _Loaded:
        """Open as writer, else read-only; build rows. Runs on any thread."""
        writer: SessionWriter | None = None
        error: BranchwiseError | None = None
        unasked = self._unasked_turn()
        try:
            writer = self.store.open_writer(self.session_id, continue_turn=unasked)
            manifest, projection = writer.manifest, writer.projection
        except (LeaseHeld, CorruptLog, ReadOnlyDataFolder) as exc:
            error = exc
            snapshot = self.store.read(self.session_id, every_frame=False)
            manifest, projection = snapshot.manifest, snapshot.projection
        size = self._current_log_size()
        rows = rows_from_projection(projection)
        if writer is None or writer.projection.open_turn is None:
            unasked = None  # read-only (another process answers it), or answered since
        return _Loaded(manifest, writer, projection, rows, error, size, unasked)

    def _unasked_turn(self) -> str | None:
        """An edit's or regenerate's turn, published with its question and nothing after it.

        That question was never sent (the process that made the branch stopped
        before asking, or this app opens the branch it just made), so opening
        the branch asks it. A turn whose answer had started is left to the
        writer, which closes it as ``interrupted`` (Retry asks it again).
        """
        parent = self.manifest.parent
        if parent is None or parent.origin is None:
            return None
        try:
            snapshot = self.store.read(self.session_id, every_frame=False)
        except BranchwiseError:
            return None  # opening says what is wrong
        return unasked_turn(snapshot.manifest, snapshot.projection)

    def _install(self, loaded: _Loaded) -> None:
        self.manifest = loaded.manifest
        self.writer = loaded.writer
        self._projection = None if loaded.writer else loaded.projection
        self._log_size = loaded.log_size
        self._set_rows(loaded.rows)
        if loaded.writer is not None:
            self.mode = SessionMode.WRITABLE
            cut, copy = loaded.writer.cut_tail, loaded.writer.cut_copy
            if cut is not None:
                # Crash recovery removed bytes: say so, and where the copy of them is kept.
                log.info("cut a torn tail of %s: %s, kept in %s", self.session_id, cut, copy)
                self._host.notices.post(
                    "log_tail_cut",
                    Level.WARNING,
                    detail=f"{cut.length} bytes at byte {cut.offset}",
                    title=self.title,
                    file=str(copy),
                )
        else:
            self.mode = SessionMode.READ_ONLY
            self.read_only_error = loaded.error
            if loaded.error is not None and not isinstance(loaded.error, LeaseHeld):
                self._host.notices.post(
                    loaded.error.code, Level.WARNING, detail=loaded.error.message, title=self.title
                )
            if self._poll_task is None:
                self._poll_task = self._host.spawn(self._poll_read_only(), "poll read-only")
        if not self._loaded.done():
            self._loaded.set_result(None)
        self.refresh_targets()
        if loaded.writer is not None and loaded.unasked is not None:
            self._host.spawn(self.answer_unasked(), f"answer {self.session_id}")

    def _current_log_size(self) -> int:
        """How many bytes the session's log holds now, over all its files (0 if unreadable).

        Files are only stat'ed, never followed: a symbolic link is refused by the full read.
        """
        try:
            directory = self.store.session_dir(self.session_id)
            return log_identity(directory, load_manifest(directory))[2]
        except (OSError, BranchwiseError):
            return 0

    def rebuild_rows(self) -> None:
        """Re-derive the rows from the writer's projection (after a commit no turn made)."""
        if self.writer is not None:
            self._set_rows(rows_from_projection(self.writer.projection))

    async def _poll_read_only(self) -> None:
        """Re-read a session another process writes, whenever its log grows."""
        while not self._closed and self.mode is SessionMode.READ_ONLY:
            await asyncio.sleep(READ_ONLY_POLL_SECONDS)
            size = self._current_log_size()
            lease_free = isinstance(self.read_only_error, LeaseHeld) and not (
                self.store.is_being_written(self.session_id)
            )
            if size == self._log_size and not lease_free:
                continue
            loaded = await asyncio.to_thread(self._load_blocking)
            if self.is_closed():
                if loaded.writer is not None:
                    loaded.writer.close()
                return
            self._install(loaded)
            self._host.emit(
                Changes(
                    sidebar=loaded.writer is not None,
                    sessions=frozenset({self.session_id}),
                    transcripts=frozenset({self.session_id}),
                )
            )
        self._poll_task = None

    # -- fork targets --------------------------------------------------------

    def refresh_targets(self) -> None:
        """Fork targets of the committed events this session shows.

        The writer's projection changes only after a commit is durable and a
        read-only snapshot holds whole frames only, so this is the answer
        ``fork_targets`` gives from disk, for exactly the rows on screen,
        without reading the log a second time.
        """
        projection = self.projection
        if projection is None:
            return
        self.targets = TargetTable.of(targets_from_projection(projection, self.manifest))
        self._host.emit(Changes(targets=frozenset({self.session_id})))

    # -- turns ---------------------------------------------------------------

    async def send(self, text: str, files: Sequence[PreparedAttachment] = ()) -> TurnResult:
        """Run one turn for ``text``; returns how it ended (failures end it as ``error``).

        ``files`` are stored durably (in a worker thread) before the question
        that refers to them is committed.

        Raises:
            AttachmentRefused, DiskFull, ReadOnlyDataFolder: the files could
                not be stored; nothing of the turn was written.
        """
        refs: tuple[AttachmentRef, ...] = ()
        if files:
            limits = self._host.settings.attachment_limits
            check_message(files, limits)
            blobs = BlobStore(self._host.store.root)
            refs = await asyncio.to_thread(store_attachments, blobs, files)
        return await self._run_turn(lambda runner: runner.run(text, refs))

    async def answer_unasked(self) -> TurnResult:
        """Ask the question an edit or a regenerate published with this branch."""
        return await self._run_turn(lambda runner: runner.answer())

    async def retry(self, turn_id: str | None = None) -> TurnResult:
        """Ask a failed turn's prompt again as a new turn (the failed one stays).

        Raises:
            UnknownTurn, TurnNotFailed: nothing to retry; ReadOnlySession,
            TurnRunning: as :meth:`send`.
        """
        await self.wait_loaded()
        prompt, files = self.retry_prompt(turn_id), self.retry_files(turn_id)
        return await self._run_turn(lambda runner: runner.run(prompt, files))

    async def _run_turn(
        self, start: Callable[[TurnRunner], Coroutine[Any, Any, TurnResult]]
    ) -> TurnResult:
        await self.wait_loaded()
        if self.writer is None:
            raise ReadOnlySession("this conversation is open read-only", sessionId=self.session_id)
        if self._turn_task is not None and not self._turn_task.done():
            raise TurnRunning(
                "a turn is already running in this conversation", sessionId=self.session_id
            )
        provider, system = self._host.turn_provider(
            self.writer.projection.settings, self.session_id
        )
        limits = self._host.settings.attachment_limits
        self._runner = TurnRunner(self.writer, provider, self, system=system, limits=limits)
        self._turn_task = asyncio.ensure_future(start(self._runner))
        try:
            return await asyncio.shield(self._turn_task)
        finally:
            if self._turn_task.done():
                self._runner = None

    @property
    def conversation_settings(self) -> ConversationSettings:
        """The conversation's own model, system prompt and temperature."""
        projection = self.projection
        return projection.settings if projection is not None else ConversationSettings()

    def configure(self, conversation: ConversationSettings) -> None:
        """Commit new conversation settings (between turns only).

        Raises:
            ReadOnlySession: not open for writing.
            BranchwiseError: a turn is running, or the commit failed.
        """
        if self.writer is None:
            raise ReadOnlySession("this conversation is open read-only", sessionId=self.session_id)
        if self.running:
            raise TurnRunning("wait for the answer to finish", sessionId=self.session_id)
        if conversation != self.writer.projection.settings:
            self.writer.set_conversation_settings(
                conversation.model,
                conversation.system,
                conversation.temperature,
                conversation.model_server,
            )

    def stop(self) -> None:
        """Stop the running turn (it ends ``cancelled`` and keeps its partial answer)."""
        if self._runner is not None and self._turn_task is not None and not self._turn_task.done():
            self._runner.cancel()

    def turn_started(self, turn_id: str, user_message_id: str, message_id: str) -> None:
        """TurnListener: the question is committed; show the running row."""
        self._running_turn = turn_id
        self._live[turn_id] = (message_id, "")
        self._live_parts[turn_id] = []
        self._update_row(turn_id)
        self._host.emit(
            Changes(
                sidebar=True,
                sessions=frozenset({self.session_id}),
                turns=frozenset({(self.session_id, turn_id)}),
                targets=frozenset({self.session_id}),
            )
        )

    def text_received(self, turn_id: str, message_id: str, chunk: str) -> None:
        """TurnListener: a chunk streamed in; views append it without a full refresh."""
        parts = self._live_parts.get(turn_id)
        if parts is not None:
            parts.append(chunk)
        self._host.emit_text(self.session_id, turn_id, message_id, chunk)

    def live_text(self, turn_id: str) -> str:
        """Everything streamed so far in a running turn."""
        parts = self._live_parts.get(turn_id)
        if not parts:
            return ""
        if len(parts) > 1:
            parts[:] = ["".join(parts)]
        return parts[0]

    def turn_ended(self, result: TurnResult) -> None:
        """TurnListener: the closing commit is durable; re-read targets, report failures."""
        self._running_turn = None
        self._live.pop(result.turn_id, None)
        self._live_parts.pop(result.turn_id, None)
        if self.writer is not None:
            self.manifest = self.writer.manifest
        self._update_row(result.turn_id)
        if result.error is not None:
            params: dict[str, Any] = {
                k: v
                for k, v in result.error.details.items()
                if isinstance(v, str | int) and k not in ("detail", "action", "level")
            }
            params["title"] = self.title
            self._host.notices.post(
                result.error.code,
                Level.ERROR,
                detail=result.error.message,
                subject=NoticeSubject(self.session_id, result.turn_id),
                **params,
            )
        elif result.end_reason == "completed":
            self._settle_retried()
        self.refresh_targets()
        self._host.turn_finished(self, result)

    def _settle_retried(self) -> None:
        """A retry answered a failed turn: its row stops offering Retry, its notice goes."""
        projection = self.projection
        if projection is None:
            return
        settled = [
            turn_id
            for turn_id in retried_turns(projection)
            if (row := self.row(turn_id)) is not None and not row.retried
        ]
        for turn_id in settled:
            self._update_row(turn_id)
            self._host.notices.withdraw(NoticeSubject(self.session_id, turn_id))
        if settled:
            self._host.emit(
                Changes(turns=frozenset((self.session_id, turn_id) for turn_id in settled))
            )

    def _update_row(self, turn_id: str) -> None:
        projection = self.projection
        if projection is None:
            return
        live = None
        if turn_id in self._live:
            live = {turn_id: (self._live[turn_id][0], self.live_text(turn_id))}
        row = row_for_turn(projection, turn_id, live)
        if row is not None:
            self._put_row(row)

    def is_closed(self) -> bool:
        """The session was closed (its tab is gone; late results are dropped)."""
        return self._closed

    # -- closing ----------------------------------------------------------------

    async def close(self) -> None:
        """Stop a running turn, wait for its closing commit, release the writer."""
        self._closed = True
        if self._turn_task is not None and not self._turn_task.done():
            self.stop()
            with contextlib.suppress(BaseException):
                await self._turn_task
        if self._poll_task is not None and not self._poll_task.done():
            self._poll_task.cancel()
        if self.writer is not None:
            self.writer.close()
            self.writer = None


#: Sessions whose log is smaller than this are read fully at once.
PREVIEW_THRESHOLD_BYTES = 512 * 1024


@dataclass(frozen=True, slots=True)
class Preview:
    """The last rows of a session and how many turns precede them.

    Attributes:
        rows: the last page of rows, turn numbers absolute.
        title: the title as of the last ``session/title`` seen (may be empty).
    """

    rows: list[Row]
    title: str


def read_preview(buf: bytes, turns: int, start: tuple[int, int] | None = None) -> Preview | None:
    """The rows of the last ``turns`` turns of a log's bytes, or ``None`` if the log is unusual.

    ``start``: where those turns' frames start and how many turns precede them
    (:func:`~branchwise.core.projection.pages.last_page_start`). ``None`` just
    means "do the full read first".
    """
    page = read_last_page(buf, turns, start)
    if page is None:
        return None
    rows = [row for row in rows_from_projection(page.projection) if not row.imported]
    return Preview(rows=rows[-turns:], title=page.projection.title)
