"""Answering a fan-out's branches at once, and fusing their answers, through the real turn runner.

Each branch's question (published with it, :mod:`~branchwise.core.conversation.fanout`)
is answered by a :class:`~branchwise.core.runtime.TurnRunner` on that
branch's own writer, all on one event loop. At most ``per_server``
(default :data:`PER_SERVER`) answers stream from one model server at once;
the others wait their turn, and the listener hears that they are queued.
A model that fails ends its own branch's turn with its typed reason
(``error``); the others go on. A process killed while they stream leaves
each running turn open with every committed piece of its answer; the next
writer of the branch closes it as ``interrupted`` (a retry of the same
fan-out does, and reports it so).

A fuse (:func:`fuse_answers`) is the one sequence ``session fuse``, serve's
fuse route and the desktop share: check the chosen answers, return the merge
an earlier attempt of the same operation wrote (asking no model again), else
have the chosen model write the fused answer and merge it into the
conversation the fan-out left. Each caller says only how a provider is made
from a conversation's settings, and hands over the parent's writer when it
holds its lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from branchwise.core.conversation.ask_again import branch_turn, unasked_turn
from branchwise.core.conversation.fanout import (
    Fanout,
    FanoutBranch,
    FuseSource,
    default_fuse_instruction,
    demo_fused,
    fuse_messages,
    fuse_sources,
    require_parent,
)
from branchwise.core.conversation.merge import MergeResult, fused_already, merge_fused
from branchwise.core.conversation.settings import ConversationSettings
from branchwise.core.errors import BranchwiseError, ModelListUnavailable, ModelNotFound
from branchwise.core.providers.base import Provider, TextChunk
from branchwise.core.providers.demo import DemoProvider
from branchwise.core.runtime import TurnListener, TurnResult, TurnRunner
from branchwise.core.store.store import SessionSnapshot, SessionStore, SessionWriter

PER_SERVER = 4
"""Answers streamed from one model server at once, by default."""


@dataclass(frozen=True, slots=True)
class BranchSetup:
    """How one branch is answered.

    Attributes:
        provider: the model to ask.
        system: the system prompt.
        server: the server it streams from (the concurrency limit is per server).
    """

    provider: Provider
    system: str
    server: str


BranchSetupFor = Callable[[FanoutBranch, ConversationSettings], BranchSetup]
"""The setup of a branch, from the branch and its conversation settings (its model)."""


@dataclass(frozen=True, slots=True)
class BranchOutcome:
    """How a branch's answer ended.

    Attributes:
        branch: the branch.
        turn_id: its question's turn.
        end_reason: ``completed``, ``cancelled``, ``error`` or ``interrupted``.
        error: the typed failure of an ``error`` turn (``None`` if unknown: a turn
            a retry found ended).
    """

    branch: FanoutBranch
    turn_id: str | None
    end_reason: str | None
    error: BranchwiseError | None = None


class FanoutListener:
    """Hears a fan-out's progress, branch by branch; override what you need.

    All calls happen on the event loop, each branch's in order.
    """

    def queued(self, branch: FanoutBranch) -> None:
        """The branch waits for its server (the concurrency limit)."""

    def started(self, branch: FanoutBranch, turn_id: str) -> None:
        """The branch's model was asked."""

    def text(self, branch: FanoutBranch, chunk: str) -> None:
        """A piece of the branch's answer arrived."""

    def ended(self, outcome: BranchOutcome) -> None:
        """The branch's turn ended (or was found ended)."""


class FanoutStops:
    """Stop a fan-out's answers one by one or all at once (the window's Stop per column).

    A stopped answer ends ``cancelled``, keeping its text; a branch stopped
    before its model is asked (while it waits for its server, or while its
    writer opens) is not asked at all (its question stays waiting, as a retry
    of the fan-out would find it). Stopping is safe from any thread: the
    desktop streams a fan-out on its own event loop in a worker thread, and a
    running answer is cancelled on the loop it runs on.
    """

    def __init__(self) -> None:
        self._running: dict[str, tuple[TurnRunner, asyncio.AbstractEventLoop]] = {}
        self._stopped: set[str] = set()
        self._lock = threading.Lock()

    def stop(self, session_id: str) -> None:
        """Stop the answer of branch ``session_id`` (now, or before it starts)."""
        with self._lock:
            self._stopped.add(session_id)
            running = self._running.get(session_id)
        if running is not None:
            _call_on(running[1], running[0].cancel)

    def stop_all(self) -> None:
        """Stop every answer of the fan-out."""
        with self._lock:
            self._stopped.add("*")
            running = list(self._running)
        for session_id in running:
            self.stop(session_id)

    def stopped(self, session_id: str) -> bool:
        """Whether ``session_id`` was stopped before its answer started."""
        with self._lock:
            return self._stopped_now(session_id)

    def _began(self, session_id: str, runner: TurnRunner) -> bool:
        """Follow ``runner`` unless its branch was stopped meanwhile; whether to ask it.

        Checked and registered under one lock: a Stop lands either before
        this (the branch is not asked) or after it (it cancels ``runner``).
        """
        with self._lock:
            if self._stopped_now(session_id):
                return False
            self._running[session_id] = (runner, asyncio.get_running_loop())
            return True

    def _ended(self, session_id: str) -> None:
        with self._lock:
            self._running.pop(session_id, None)

    def _stopped_now(self, session_id: str) -> bool:  # under the lock
        return session_id in self._stopped or "*" in self._stopped


def _call_on(loop: asyncio.AbstractEventLoop, call: Callable[[], None]) -> None:
    """``call()`` now if ``loop`` runs this thread, else on ``loop``'s own thread."""
    try:
        here = asyncio.get_running_loop()
    except RuntimeError:
        here = None
    if here is loop:
        call()
    else:
        with contextlib.suppress(RuntimeError):  # that loop has ended: nothing runs to stop
            loop.call_soon_threadsafe(call)


class _Relay(TurnListener):
    """One branch's turn progress, told to the fan-out's listener."""

    def __init__(self, listener: FanoutListener, branch: FanoutBranch) -> None:
        self._listener, self._branch = listener, branch

    def turn_started(self, turn_id: str, user_message_id: str, message_id: str) -> None:
        self._listener.started(self._branch, turn_id)

    def text_received(self, turn_id: str, message_id: str, chunk: str) -> None:
        self._listener.text(self._branch, chunk)


async def answer_fanout(
    store: SessionStore,
    fanout: Fanout,
    setup_for: BranchSetupFor,
    listener: FanoutListener | None = None,
    *,
    per_server: int = PER_SERVER,
    stops: FanoutStops | None = None,
) -> list[BranchOutcome]:
    """Answer every branch of ``fanout`` that waits for its answer; how each ended, in order.

    A branch an earlier attempt answered is reported as it ended; one whose
    answer had started when its process died is closed ``interrupted`` by
    opening it as writer, and reported so. ``stops`` lets the caller stop answers.
    """
    told = listener or FanoutListener()
    limits: dict[str, asyncio.Semaphore] = {}
    control = stops or FanoutStops()

    async def answer(branch: FanoutBranch) -> BranchOutcome:
        outcome = await _answer_branch(store, branch, setup_for, told, limits, per_server, control)
        told.ended(outcome)
        return outcome

    return list(await asyncio.gather(*(answer(branch) for branch in fanout.branches)))


async def _answer_branch(
    store: SessionStore,
    branch: FanoutBranch,
    setup_for: BranchSetupFor,
    listener: FanoutListener,
    limits: dict[str, asyncio.Semaphore],
    per_server: int,
    stops: FanoutStops,
) -> BranchOutcome:
    session_id = branch.session_id
    try:
        snapshot = await asyncio.to_thread(store.read, session_id, every_frame=False)
        projection, manifest = snapshot.projection, snapshot.manifest
        turn = branch_turn(projection, manifest.seed_length)
        if turn is None or not turn.is_open:
            return BranchOutcome(branch, turn.turn_id if turn else None, _ended(turn))
        setup = setup_for(branch, projection.settings)
        limit = limits.setdefault(setup.server, asyncio.Semaphore(max(1, per_server)))
        waits = limit.locked()
        if waits:
            listener.queued(branch)
        async with limit:
            if stops.stopped(session_id):
                return BranchOutcome(branch, turn.turn_id, None)  # never asked: still waiting
            # After a wait another process may have answered it: read it again then.
            return await _run(store, branch, setup, listener, stops, None if waits else snapshot)
    except BranchwiseError as exc:
        return BranchOutcome(branch, None, "error", exc)


async def _run(
    store: SessionStore,
    branch: FanoutBranch,
    setup: BranchSetup,
    listener: FanoutListener,
    stops: FanoutStops,
    snapshot: SessionSnapshot | None,
) -> BranchOutcome:
    session_id = branch.session_id
    if snapshot is None:
        snapshot = await asyncio.to_thread(store.read, session_id, every_frame=False)
    unasked = unasked_turn(snapshot.manifest, snapshot.projection)
    writer = await asyncio.to_thread(store.open_writer, session_id, continue_turn=unasked)
    try:
        if unasked is None:  # its answer had started before a crash: now closed as interrupted
            turn = branch_turn(writer.projection, writer.projection.seed_length)
            return BranchOutcome(branch, turn.turn_id if turn else None, _ended(turn))
        runner = TurnRunner(writer, setup.provider, _Relay(listener, branch), system=setup.system)
        if not stops._began(session_id, runner):  # stopped while its writer was opened
            return BranchOutcome(branch, unasked, None)  # never asked: still waiting
        try:
            result: TurnResult = await runner.answer()
        except BranchwiseError as exc:
            return BranchOutcome(branch, runner.turn_id, "error", exc)
        finally:
            stops._ended(session_id)
        return BranchOutcome(branch, result.turn_id, result.end_reason, result.error)
    finally:
        writer.close()


def _ended(turn: Any) -> str | None:
    return None if turn is None else turn.end_reason


def ended_line(outcome: BranchOutcome) -> dict[str, Any]:
    """``{"event": "ended", "sessionId", "turnId", "endReason"[, "error"]}``."""
    line: dict[str, Any] = {
        "event": "ended",
        "sessionId": outcome.branch.session_id,
        "turnId": outcome.turn_id,
        "endReason": outcome.end_reason,
    }
    if outcome.error is not None:
        line["error"] = outcome.error.to_json()["error"]
    return line


def branches_line(fanout: Fanout) -> dict[str, Any]:
    """The first progress line: ``{"event": "branches", "operationId", "branches"}``."""
    return {
        "event": "branches",
        "operationId": fanout.operation_id,
        "branches": [
            {
                "sessionId": b.session_id,
                "label": b.target.label,
                "model": b.target.model,
                "created": b.created,
            }
            for b in fanout.branches
        ],
    }


def fanout_json(fanout: Fanout, outcomes: list[BranchOutcome]) -> dict[str, Any]:
    """``{"operationId", "branches": [{"sessionId", "label", "model", "turnId", "endReason"}]}``."""
    return {
        "operationId": fanout.operation_id,
        "branches": [
            {
                "sessionId": o.branch.session_id,
                "label": o.branch.target.label,
                "model": o.branch.target.model,
                "turnId": o.turn_id,
                "endReason": o.end_reason,
            }
            for o in outcomes
        ],
    }


async def require_models(provider: Provider, models: Sequence[str]) -> None:
    """Refuse a model the server does not offer, before anything is made.

    A server that lists no models (some chat without a ``/models`` route)
    cannot be asked: each branch then learns from its own answer.

    Raises:
        ModelNotFound: a model the server's list lacks.
        ProviderError: the server could not be asked for its list.
    """
    try:
        offered = set(await provider.list_models())
    except ModelListUnavailable:
        return
    for model in dict.fromkeys(models):
        if offered and model not in offered:
            raise ModelNotFound(
                f"the server does not offer the model {model}",
                model=model,
                offered=sorted(offered)[:50],
            )


async def write_fused(sources: Sequence[FuseSource], instruction: str, provider: Provider) -> str:
    """The fused answer ``provider`` writes from ``sources`` and the user's ``instruction``.

    Raises:
        ProviderError: the model failed (nothing is merged).
    """
    if isinstance(provider, DemoProvider):
        return demo_fused(sources)
    messages = fuse_messages(sources, instruction)
    parts = [item.text async for item in provider.stream(messages) if isinstance(item, TextChunk)]
    return "".join(parts).strip()


async def fuse_answers(
    store: SessionStore,
    parent_id: str,
    branch_ids: Sequence[str],
    operation_id: str,
    *,
    instruction: str | None,
    provider_for: Callable[[ConversationSettings], Provider],
    model: str | None = None,
    model_server: str | None = None,
    parent_settings: ConversationSettings | None = None,
    held_writer: Callable[[], SessionWriter | None] | None = None,
) -> MergeResult:
    """Write one answer from the answers of ``branch_ids`` and merge it into ``parent_id``.

    A retry of ``operation_id`` with the same branches returns the merge it
    wrote without asking a model again (a fused answer is a model's text:
    asking again would write another one).

    Args:
        instruction: what the fusing model is asked (``None``: the default
            instruction, in the active language).
        provider_for: the model to ask, from the parent's settings with
            ``model`` and ``model_server`` (those given) in place of its own.
        parent_settings: the parent's settings when the caller has them (an
            open conversation); read from the store otherwise.
        held_writer: the parent's writer, when the caller holds its lease
            (``None`` if it does not now). It is asked for once the model has
            answered, and the merge commits through it on this thread: a
            writer serves the thread its turns commit on. Without one the
            merge opens the parent's writer in a worker thread.

    Raises:
        SessionNotFound: the parent is gone.
        InvalidFanout, NotRelated, NotAncestor, TurnRunning, UnknownTurn: as
            :func:`~branchwise.core.conversation.fanout.fuse_sources`.
        OperationConflict: ``operation_id`` merged something else.
        ProviderError: the model failed (nothing is merged).
        InvalidMerge, LeaseHeld: as :func:`~branchwise.core.conversation.merge.merge_fused`.
    """
    await asyncio.to_thread(require_parent, store, parent_id)
    sources = await asyncio.to_thread(fuse_sources, store, parent_id, branch_ids)
    provenance = [source.provenance() for source in sources]
    earlier = await asyncio.to_thread(fused_already, store, parent_id, operation_id, provenance)
    if earlier is not None:
        return earlier
    settings = parent_settings
    if settings is None:
        snapshot = await asyncio.to_thread(store.read, parent_id, every_frame=False)
        settings = snapshot.projection.settings
    if model:
        settings = replace(settings, model=model)
    if model_server:
        settings = replace(settings, model_server=model_server)
    provider = provider_for(settings)
    asked = default_fuse_instruction() if instruction is None else instruction
    content = await write_fused(sources, asked, provider)
    writer = held_writer() if held_writer is not None else None

    def merge() -> MergeResult:
        return merge_fused(
            store,
            parent_id,
            provenance,
            content,
            operation_id,
            model=provider.model,
            instruction=asked,
            writer=writer,
        )

    return merge() if writer is not None else await asyncio.to_thread(merge)
