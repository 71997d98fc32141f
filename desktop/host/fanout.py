"""Send to several, and fuse, from the desktop: Qt-free host operations the window calls.

:func:`send_to_several` makes a fan-out's branches off the UI thread
(:func:`~branchwise.core.conversation.fanout.fan_out`), puts them in the
host's lineage index and reports them as added (they appear under the
conversation in the sidebar), then answers them all at once
(:func:`~branchwise.core.fanout_run.answer_fanout`, on its own event loop in a
worker thread, so the streams never hold up the window) with the host's
provider for each branch's model (the demo responder answering as each
model and sample when no server is configured). Each branch's progress
reaches ``on_progress`` as a :class:`BranchProgress`: queued, streaming
(characters and chunks so far, time to first chunk) or ended with its
reason, so a grid can show a column per branch; :class:`FanoutRun` stops
one answer or all.

:func:`fuse` writes the chosen branches' answers as one with the model the
user picked and their instruction, and merges it into the conversation the
fan-out started from (:func:`~branchwise.core.fanout_run.fuse_answers`, as
``session fuse`` and serve do), through its writer when it is open here; then
the open conversation shows the fused card and the search index has it.

The branches are answered by their own writers: a branch is not open in a
tab while its answer streams (opening it then is refused as ``lease_held``);
the window shows the streaming answers from the progress reported here.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from branchwise.core.conversation.attachments import (
    PreparedAttachment,
    check_message,
    store_attachments,
)
from branchwise.core.conversation.fanout import (
    Fanout,
    FanoutBranch,
    FanoutTarget,
    default_fuse_instruction,
    fan_out,
)
from branchwise.core.conversation.merge import MergeResult
from branchwise.core.conversation.settings import DEMO_SERVER, ConversationSettings
from branchwise.core.errors import TurnRunning
from branchwise.core.fanout_run import (
    BranchOutcome,
    BranchSetup,
    FanoutListener,
    FanoutStops,
    answer_fanout,
    fuse_answers,
)
from branchwise.core.ids import new_id
from branchwise.core.projection.attachments import AttachmentRef
from branchwise.core.providers.demo import DemoProvider
from branchwise.core.store.attachments import BlobStore
from branchwise.core.store.store import SessionStore, SessionWriter
from branchwise.desktop.host.changes import Changes
from branchwise.desktop.host.host import Host
from branchwise.desktop.host.sources import RemoteSource


@dataclass(frozen=True, slots=True)
class BranchProgress:
    """Where one branch of a fan-out stands (what its column shows).

    Attributes:
        session_id: the branch.
        label: its label ("qwen2.5 · sample 2").
        model: the model asked.
        state: ``waiting`` (made, not asked yet), ``queued`` (its server is busy
            with others), ``streaming`` or ``ended``.
        chunks: pieces of answer received so far (about the tokens).
        characters: characters received so far.
        started_at: when the model was asked (``time.monotonic``), or ``None``.
        first_chunk_at: when its first piece arrived, or ``None``.
        turn_id: the branch's question's turn, once known.
        end_reason: how it ended (``None`` until then).
        error_code: the typed reason of an ``error`` end.
    """

    session_id: str
    label: str
    model: str
    state: str = "waiting"
    chunks: int = 0
    characters: int = 0
    started_at: float | None = None
    first_chunk_at: float | None = None
    turn_id: str | None = None
    end_reason: str | None = None
    error_code: str | None = None

    @property
    def time_to_first_chunk(self) -> float | None:
        """Seconds from asking to the first piece of answer."""
        if self.started_at is None or self.first_chunk_at is None:
            return None
        return self.first_chunk_at - self.started_at

    def chunks_per_second(self, now: float) -> float | None:
        """Pieces per second since the first one arrived."""
        if self.first_chunk_at is None or now <= self.first_chunk_at:
            return None
        return self.chunks / (now - self.first_chunk_at)


ProgressListener = Callable[[BranchProgress], None]


class FanoutRun(FanoutListener):
    """One fan-out the window follows: each branch's progress, and Stop per branch or all."""

    def __init__(self, on_progress: ProgressListener | None = None) -> None:
        self.progress: dict[str, BranchProgress] = {}
        self.stops = FanoutStops()
        self._on_progress = on_progress

    def stop(self, session_id: str) -> None:
        """Stop one branch's answer (it ends ``cancelled``, keeping its text)."""
        self.stops.stop(session_id)

    def stop_all(self) -> None:
        """Stop every answer."""
        self.stops.stop_all()

    def begin(self, fanout: Fanout) -> None:
        """The branches are made: one ``waiting`` entry each."""
        for branch in fanout.branches:
            self._set(BranchProgress(branch.session_id, branch.target.label, branch.target.model))

    def heard(self, line: dict[str, Any]) -> None:
        """One progress line of a server's fan-out (``session fanout``'s stderr lines)."""
        event, session_id = line.get("event"), line.get("sessionId")
        if event == "branches":
            for branch in line.get("branches") or []:
                self._set(
                    BranchProgress(branch["sessionId"], str(branch["label"]), str(branch["model"]))
                )
        elif session_id not in self.progress:
            return
        elif event == "queued":
            self._update(session_id, state="queued")
        elif event == "started":
            self._update(
                session_id, state="streaming", turn_id=line["turnId"], started_at=time.monotonic()
            )
        elif event == "text":
            now = self.progress[session_id]
            chunk = str(line.get("chunk", ""))
            self._set(
                replace(
                    now,
                    chunks=now.chunks + 1,
                    characters=now.characters + len(chunk),
                    first_chunk_at=now.first_chunk_at or time.monotonic(),
                )
            )
        elif event == "ended":
            error = line.get("error")
            self._update(
                session_id,
                state="ended",
                turn_id=line.get("turnId"),
                end_reason=line.get("endReason"),
                error_code=error.get("code") if isinstance(error, dict) else None,
            )

    def queued(self, branch: FanoutBranch) -> None:
        """The branch waits for its server."""
        self._update(branch.session_id, state="queued")

    def started(self, branch: FanoutBranch, turn_id: str) -> None:
        """The model was asked."""
        self._update(
            branch.session_id, state="streaming", turn_id=turn_id, started_at=time.monotonic()
        )

    def text(self, branch: FanoutBranch, chunk: str) -> None:
        """A piece of the answer arrived."""
        self.pieces(branch, [chunk])

    def pieces(self, branch: FanoutBranch, chunks: Sequence[str]) -> None:
        """Pieces of the answer arrived since the last report (one progress report for all)."""
        now = self.progress[branch.session_id]
        self._set(
            replace(
                now,
                chunks=now.chunks + len(chunks),
                characters=now.characters + sum(len(chunk) for chunk in chunks),
                first_chunk_at=now.first_chunk_at or time.monotonic(),
            )
        )

    def ended(self, outcome: BranchOutcome) -> None:
        """The answer ended (or was found ended)."""
        self._update(
            outcome.branch.session_id,
            state="ended",
            turn_id=outcome.turn_id,
            end_reason=outcome.end_reason,
            error_code=outcome.error.code if outcome.error is not None else None,
        )

    def _update(self, session_id: str, **fields: object) -> None:
        self._set(replace(self.progress[session_id], **fields))  # type: ignore[arg-type]

    def _set(self, progress: BranchProgress) -> None:
        self.progress[progress.session_id] = progress
        if self._on_progress is not None:
            self._on_progress(progress)


BATCH_SECONDS = 0.02
"""How long a fan-out's progress gathers on its worker thread before the UI loop hears it."""


class _Batched(FanoutListener):
    """A fan-out's progress heard on its worker thread, told to ``follow`` on the UI loop.

    Calls keep their order; they reach the UI loop at most every
    :data:`BATCH_SECONDS`, a batch's pieces of one branch as one
    :meth:`FanoutRun.pieces` call, so the window pays per batch, not per chunk.
    """

    def __init__(self, follow: FanoutRun, loop: asyncio.AbstractEventLoop) -> None:
        self._follow, self._loop = follow, loop
        self._lock = threading.Lock()
        self._pending: list[tuple[str, Any, Any]] = []

    def queued(self, branch: FanoutBranch) -> None:
        self._post("queued", branch, None)

    def started(self, branch: FanoutBranch, turn_id: str) -> None:
        self._post("started", branch, turn_id)

    def text(self, branch: FanoutBranch, chunk: str) -> None:
        self._post("text", branch, chunk)

    def ended(self, outcome: BranchOutcome) -> None:
        self._post("ended", outcome, None)

    def _post(self, kind: str, subject: Any, detail: Any) -> None:
        with self._lock:
            first = not self._pending
            self._pending.append((kind, subject, detail))
        if first:
            with contextlib.suppress(RuntimeError):  # the window's loop has ended: nobody listens
                self._loop.call_soon_threadsafe(self._loop.call_later, BATCH_SECONDS, self.deliver)

    def deliver(self) -> None:
        """Tell ``follow`` everything heard so far, in order (on the UI loop)."""
        with self._lock:
            calls, self._pending = self._pending, []
        pieces: dict[str, tuple[FanoutBranch, list[str]]] = {}
        for kind, subject, detail in calls:
            if kind == "text":
                pieces.setdefault(subject.session_id, (subject, []))[1].append(detail)
                continue
            self._tell_pieces(pieces)  # what a branch received comes before its next step
            if kind == "queued":
                self._follow.queued(subject)
            elif kind == "started":
                self._follow.started(subject, detail)
            else:
                self._follow.ended(subject)
        self._tell_pieces(pieces)

    def _tell_pieces(self, pieces: dict[str, tuple[FanoutBranch, list[str]]]) -> None:
        for branch, chunks in pieces.values():
            self._follow.pieces(branch, chunks)
        pieces.clear()


async def _answer_off_loop(
    store: SessionStore,
    fanout: Fanout,
    setup_for: Callable[[FanoutBranch, ConversationSettings], BranchSetup],
    follow: FanoutRun,
) -> list[BranchOutcome]:
    """:func:`answer_fanout` on its own event loop in a worker thread.

    The answers' HTTP streams, parsing and partial commits would otherwise
    share the window's event loop with every paint: with 4 answers streaming
    the window lagged 2-3 times as much as with one (docs/performance.md).
    Each branch's writer is opened, committed to and closed on that thread, so
    the commit order (and what a kill -9 keeps) is the turn runner's, as in the
    CLI. If the caller is cancelled (the window closes), every answer is
    stopped and waited for, so each ends ``cancelled`` with its text.
    """
    batched = _Batched(follow, asyncio.get_running_loop())

    def answer_all() -> list[BranchOutcome]:
        return asyncio.run(answer_fanout(store, fanout, setup_for, batched, stops=follow.stops))

    work = asyncio.ensure_future(asyncio.to_thread(answer_all))
    try:
        outcomes = await asyncio.shield(work)
    except asyncio.CancelledError:
        follow.stops.stop_all()
        with contextlib.suppress(Exception):
            await work
        raise
    batched.deliver()
    return outcomes


async def send_to_several(
    host: Host,
    session_id: str,
    prompt: str,
    targets: Sequence[FanoutTarget],
    *,
    files: Sequence[PreparedAttachment] = (),
    run: FanoutRun | None = None,
    operation_id: str | None = None,
    initiator: object = None,
) -> list[BranchOutcome]:
    """Make one branch per target at the end of ``session_id`` and answer them all at once.

    ``files`` (the composer's, read by :attr:`Host.attaching`) are stored once,
    in a worker thread, before the branches are made; every branch's question
    refers to the same blobs.

    Raises (before any branch is made):
        TurnRunning: the conversation is answering here.
        AttachmentRefused, DiskFull, ReadOnlyDataFolder: the files could not be stored.
        EmptyPrompt, InvalidFanout, OperationConflict, TurnOpen, DiskFull, …:
            as :func:`~branchwise.core.conversation.fanout.fan_out`.
    """
    if host.is_running(session_id):
        raise TurnRunning("the conversation is answering; send when it ends", sessionId=session_id)
    follow = run or FanoutRun()
    store = host.store
    conversation = (await asyncio.to_thread(store.read, session_id, every_frame=False)).projection
    refs: tuple[AttachmentRef, ...] = ()
    if files:
        check_message(files, host.settings.attachment_limits)
        refs = await asyncio.to_thread(store_attachments, BlobStore(store.root), files)
    operation = operation_id or new_id("op")
    fanout = await asyncio.to_thread(
        fan_out,
        store,
        session_id,
        prompt,
        targets,
        operation,
        attachments=refs,
        settings=conversation.settings,
    )
    made = frozenset(branch.session_id for branch in fanout.branches)
    for branch in fanout.branches:
        host.index.put(await asyncio.to_thread(store.manifest, branch.session_id))
    follow.begin(fanout)
    host.emit(
        Changes(sidebar=True, added=made, sessions=frozenset({session_id}), initiator=initiator)
    )
    app_server = host.settings.base_url if host.settings.configured else DEMO_SERVER

    def setup_for(branch: FanoutBranch, settings: ConversationSettings) -> BranchSetup:
        provider, system = host.turn_provider(settings)
        if isinstance(provider, DemoProvider):
            provider = provider.as_target(branch.target.model, branch.target.sample)
        return BranchSetup(provider, system, settings.model_server or app_server)

    outcomes = await _answer_off_loop(store, fanout, setup_for, follow)
    for branch in fanout.branches:
        host.index.put(await asyncio.to_thread(store.manifest, branch.session_id))
    host.emit(Changes(sidebar=True, sessions=made, transcripts=made, initiator=initiator))
    return outcomes


async def fuse(
    host: Host,
    parent_id: str,
    branch_ids: Sequence[str],
    *,
    model: str | None = None,
    model_server: str | None = None,
    instruction: str | None = None,
    operation_id: str | None = None,
    initiator: object = None,
) -> MergeResult:
    """Write one answer from the branches' answers and merge it into ``parent_id``.

    ``model`` (and ``model_server``, the server that offers it when not the
    conversation's own) is asked instead of the conversation's own model.

    Raises:
        TurnRunning: a branch is still answering, or the parent is answering here.
        NotRelated, NotAncestor, UnknownTurn, InvalidFanout: as
            :func:`~branchwise.core.conversation.fanout.fuse_sources`.
        ProviderError: the model failed (nothing is merged).
    """
    if host.is_running(parent_id):
        raise TurnRunning("the conversation is answering; fuse when it ends", sessionId=parent_id)
    opened = host.session(parent_id)
    shown = opened.projection if opened is not None else None

    def held_writer() -> SessionWriter | None:  # its lease is held here while it is open here
        parent = host.session(parent_id)
        return parent.writer if parent is not None else None

    merged = await fuse_answers(
        host.store,
        parent_id,
        branch_ids,
        operation_id or new_id("op"),
        instruction=instruction,
        provider_for=lambda settings: host.turn_provider(settings, parent_id)[0],
        model=model,
        model_server=model_server,
        parent_settings=shown.settings if shown is not None else None,
        held_writer=held_writer,
    )
    parent = host.session(parent_id)
    if parent is not None:
        parent.rebuild_rows()  # the open conversation shows the fused card
    host.index_for_search(parent_id)
    host.emit(
        Changes(
            sessions=frozenset({parent_id}),
            transcripts=frozenset({parent_id}),
            initiator=initiator,
        )
    )
    return merged


async def send_to_several_remote(
    server: RemoteSource,
    session_id: str,
    prompt: str,
    models: list[str],
    samples: int | None,
    *,
    files: Sequence[PreparedAttachment] = (),
    run: FanoutRun | None = None,
    operation_id: str | None = None,
) -> dict[str, Any]:
    """:func:`send_to_several` for a conversation on a ``branchwise serve``: the same operation
    there (``session-fanout-v1``), its progress into ``run``; the ``session fanout`` result.

    The answers run as the server's turns, with its provider settings: a
    client that goes away leaves them running, and Stop is the server's stop
    route for each branch. The server's list is refreshed so the branches
    appear under the conversation.

    ``files`` (the composer's) are uploaded first, each once, and every
    branch's question carries them; the same files give the same references,
    so a retry with the same ``operation_id`` asks the same question.

    Raises:
        AttachmentRefused: the server takes no files (nothing is sent).
        ServerUnsupported: the server has no fan-out (or none that takes files).
        RemoteRefusal: the server's typed refusal (a refused file, or any
            refusal before a branch is made).
        RemoteUnavailable: the server went away (a retry with the same
            ``operation_id`` finishes the same branches).
    """
    refs = await server.upload(files)  # a refused file raises: nothing was made
    follow = run or FanoutRun()
    operation = operation_id or new_id("op")
    result: dict[str, Any] = {}
    lines = server.remote.fanout(session_id, prompt, models, samples, operation, refs)
    async for line in lines:
        if line.get("event") == "result":
            result = dict(line.get("result") or {})
        else:
            follow.heard(line)
            if line.get("event") == "branches":
                await server.refresh()
    await server.refresh()
    return result


async def fuse_remote(
    server: RemoteSource,
    parent_id: str,
    branch_ids: list[str],
    *,
    model: str | None = None,
    instruction: str | None = None,
    operation_id: str | None = None,
) -> dict[str, Any]:
    """:func:`fuse` on a ``branchwise serve``: the merge, as ``session fuse`` prints it."""
    operation = operation_id or new_id("op")
    asked = default_fuse_instruction() if instruction is None else instruction
    return await server.remote.fuse(parent_id, branch_ids, operation, model, asked)
