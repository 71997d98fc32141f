"""The transcript as rows of turns, and each turn's branch action (no Qt here).

A *row* is one turn as the user sees it: the question, the answer(s), tool
calls and how it ended. Every row is bound to its fork target by one key —
the answer's ``messageId``, or ``turn:<turnId>`` for a turn that produced no
answer — and that same key is used for a live turn finishing, for history
paged in later and for a session restored cold from disk (docs/architecture.md, "A branch click").

Whether a row's "Branch into a new conversation" action is enabled is a pure
function of the row, the session's fork targets and what the host is doing
(:func:`branch_state`), so it is tested without widgets. The targets are
core's own :class:`~branchwise.core.fork.targets.ForkTarget` values, indexed by
binding key (:class:`TargetTable`); an enabled action carries core's
:class:`~branchwise.core.fork.operations.ForkRequest`, which the host journals
and forks as it is.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from branchwise.core.conversation.ask_again import retried_turns
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.fork.targets import ForkTarget, ForkTargetSet, TargetReason
from branchwise.core.projection.attachments import AttachmentRef
from branchwise.core.projection.figures import AnswerFigures
from branchwise.core.projection.projection import Message, Projection

#: Turns shown per page; scrolling up loads the previous page.
PAGE_SIZE = 50


class DesktopReason(StrEnum):
    """The desktop's own reasons a branch action is disabled.

    The others are a fork target's :class:`~branchwise.core.fork.targets.TargetReason`.
    """

    TARGETS_LOADING = "targets_loading"
    CREATION_IN_FLIGHT = "creation_in_flight"
    SERVER_UNSUPPORTED = "server_unsupported"
    BROUGHT_BACK = "brought_back"


def target_key(message_id: str | None, turn_id: str | None) -> str:
    """The key a row and its fork target share: the answer's id, else the turn's."""
    if message_id:
        return message_id
    return f"turn:{turn_id}"


@dataclass(frozen=True, slots=True)
class FusedSource:
    """One answer a fused merge was written from (its card opens it).

    Attributes:
        session_id: the branch.
        turn_id: the turn whose answer it was.
        model: the model that answered it.
    """

    session_id: str
    turn_id: str | None
    model: str


@dataclass(frozen=True, slots=True)
class Entry:
    """One message inside a row.

    Attributes:
        message_id: the message's stable id.
        role: ``user``, ``assistant``, ``tool`` or ``merge`` (brought back from a branch).
        content: its text (Markdown for assistant answers).
        partial: the text is still streaming or was cut short.
        source_id: for a ``merge``, the branch it was brought back from.
        source_sequence: for a ``merge``, how far that branch's log went when it
            was brought back (its last turn then is the one brought back).
        fused_from: for a ``fused`` merge, every answer it was written from.
        attachments: the files a prompt carries.
    """

    message_id: str
    role: str
    content: str
    partial: bool = False
    source_id: str | None = None
    source_sequence: int | None = None
    fused_from: tuple[FusedSource, ...] = ()
    attachments: tuple[AttachmentRef, ...] = ()


@dataclass(frozen=True, slots=True)
class Row:
    """One turn of the transcript (or one exchange of imported history).

    Attributes:
        row_id: stable identity of the row's widget (the turn id; the first
            message id for imported history, which has no turns).
        turn_id: the turn, ``None`` for imported history.
        index: 1-based turn number, ``None`` for imported history.
        answer_id: the answer's message id, if any text arrived.
        entries: the messages, in order.
        end_reason: how the turn ended; ``None`` while it runs.
        error: the failure text of a turn that ended in error.
        retried: a failed turn whose prompt a later turn answered (nothing to retry).
        figures: the answer's token and speed figures, once its ``usage`` is committed.
    """

    row_id: str
    turn_id: str | None
    index: int | None
    answer_id: str | None
    entries: tuple[Entry, ...]
    end_reason: str | None
    error: str | None = None
    retried: bool = False
    figures: AnswerFigures | None = None

    @property
    def key(self) -> str:
        """The fork-target binding key."""
        return target_key(self.answer_id, self.turn_id or self.row_id)

    @property
    def running(self) -> bool:
        """The turn has not ended."""
        return self.turn_id is not None and self.end_reason is None

    @property
    def prompt(self) -> str:
        """The user's question that opened the turn ("" if it has none)."""
        return next((e.content for e in self.entries if e.role == "user"), "")

    @property
    def answer(self) -> str:
        """The answer's text so far ("" while nothing arrived)."""
        return "".join(e.content for e in self.entries if e.role == "assistant")

    @property
    def failed(self) -> bool:
        """The turn ended in error with no answer text: the one Retry asks again."""
        return self.end_reason == "error" and not self.answer

    @property
    def brought_back(self) -> bool:
        """What a branch brought back (a merge), which is no turn of its own."""
        return self.turn_id is None and any(e.role == "merge" for e in self.entries)

    @property
    def imported(self) -> bool:
        """History imported without turn records (never branchable)."""
        return self.turn_id is None


def _entry(
    message: Message,
    sources: Mapping[str, tuple[str, int | None]] | None = None,
    fused: Mapping[str, tuple[FusedSource, ...]] | None = None,
) -> Entry:
    source, sequence = sources.get(message.message_id, (None, None)) if sources else (None, None)
    return Entry(
        message.message_id,
        message.role,
        message.content,
        message.partial,
        source,
        sequence,
        fused.get(message.message_id, ()) if fused else (),
        message.attachments,
    )


def _fused_sources(projection: Projection) -> dict[str, tuple[FusedSource, ...]]:
    """Merge message id -> the answers a ``fused`` merge was written from."""
    fused: dict[str, tuple[FusedSource, ...]] = {}
    for merge in projection.merges:
        if "seq" not in merge or merge.get("kind") != "fused":
            continue
        fused[f"merge-{merge['seq']}"] = tuple(
            FusedSource(
                str(source.get("sessionId", "")),
                source.get("turnId") if isinstance(source.get("turnId"), str) else None,
                str(source.get("model", "")),
            )
            for source in merge.get("sources") or ()
            if isinstance(source, dict)
        )
    return fused


def _merge_sources(projection: Projection) -> dict[str, tuple[str, int | None]]:
    """Merge message id -> the branch it came from and how far that branch went then
    (the projection names merges by seq)."""
    sources: dict[str, tuple[str, int | None]] = {}
    for merge in projection.merges:
        if "seq" not in merge:
            continue
        sequence = merge.get("childBoundarySequence")
        sources[f"merge-{merge['seq']}"] = (
            str(merge.get("childSessionId", "")),
            sequence if isinstance(sequence, int) and not isinstance(sequence, bool) else None,
        )
    return sources


def rows_from_projection(
    projection: Projection, live: Mapping[str, tuple[str, str]] | None = None
) -> list[Row]:
    """Every row of a session, in transcript order (one pass over the messages).

    Args:
        projection: the session's projection.
        live: running turn id -> (answer message id, text streamed so far), for
            text not committed yet.
    """
    grouped: dict[str, list[Message]] = {}
    order: list[str] = []
    imported: list[list[Message]] = []
    for message in projection.messages:
        if message.turn_id is None:
            if message.role in ("user", "merge") or not imported:
                imported.append([])
                order.append(f"\0{len(imported) - 1}")
            imported[-1].append(message)
            continue
        bucket = grouped.get(message.turn_id)
        if bucket is None:
            grouped[message.turn_id] = bucket = []
            order.append(message.turn_id)
        bucket.append(message)
    turn_positions = {turn.turn_id: turn for turn in projection.turns}
    retried = retried_turns(projection)
    sources = _merge_sources(projection)
    fused = _fused_sources(projection)
    rows: list[Row] = []
    for name in order:
        if name.startswith("\0"):
            messages = imported[int(name[1:])]
            answer = next((m for m in reversed(messages) if m.role == "assistant"), None)
            rows.append(
                Row(
                    row_id=messages[0].message_id,
                    turn_id=None,
                    index=None,
                    answer_id=answer.message_id if answer else None,
                    entries=tuple(_entry(m, sources, fused) for m in messages),
                    end_reason="completed",
                )
            )
        else:
            turn = turn_positions[name]
            rows.append(_turn_row(projection, turn, grouped[name], live, turn.turn_id in retried))
    for turn in projection.turns:
        if turn.turn_id not in grouped:  # a turn with no message at all (damaged history)
            rows.append(_turn_row(projection, turn, [], live, turn.turn_id in retried))
    return rows


def row_for_turn(
    projection: Projection, turn_id: str, live: Mapping[str, tuple[str, str]] | None = None
) -> Row | None:
    """One turn's row, scanning messages from the end (changes happen at the tail)."""
    turn = projection.turn(turn_id)
    if turn is None:
        return None
    messages: list[Message] = []
    seen_turn = False
    for message in reversed(projection.messages):
        if message.turn_id == turn_id:
            messages.append(message)
            seen_turn = True
        elif seen_turn:
            break
    messages.reverse()
    retried = turn.end_reason == "error" and turn_id in retried_turns(projection)
    return _turn_row(projection, turn, messages, live, retried)


def _turn_row(
    projection: Projection,
    turn: Any,
    messages: list[Message],
    live: Mapping[str, tuple[str, str]] | None,
    retried: bool = False,
) -> Row:
    entries = [_entry(m) for m in messages]
    answer_id = turn.message_id
    streaming = live.get(turn.turn_id) if live else None
    if streaming is not None and turn.is_open:
        live_id, text = streaming
        answer_id = live_id
        for position, entry in enumerate(entries):
            if entry.message_id == live_id:
                entries[position] = Entry(live_id, "assistant", text, True)
                break
        else:
            entries.append(Entry(live_id, "assistant", text, True))
    return Row(
        row_id=turn.turn_id,
        turn_id=turn.turn_id,
        index=turn.index,
        answer_id=answer_id,
        entries=tuple(entries),
        end_reason=turn.end_reason,
        error=turn.error,
        retried=retried,
        figures=projection.answer_figures(turn.turn_id),
    )


@dataclass(frozen=True, slots=True)
class TargetTable:
    """A session's fork targets (core's answer) indexed by binding key.

    Attributes:
        answer: the targets as :func:`~branchwise.core.fork.targets.fork_targets`
            (or a writer's live projection) gave them.
        by_key: binding key -> target: the answer's ``messageId``, and
            ``turn:<turnId>`` for every turn.
    """

    answer: ForkTargetSet
    by_key: Mapping[str, ForkTarget]

    @classmethod
    def of(cls, answer: ForkTargetSet) -> TargetTable:
        """Index ``answer``'s targets by the key their rows carry."""
        by_key: dict[str, ForkTarget] = {}
        for target in answer.targets:
            by_key[target_key(target.message_id, target.turn_id)] = target
            by_key.setdefault(target_key(None, target.turn_id), target)
        return cls(answer, by_key)


@dataclass(frozen=True, slots=True)
class BranchState:
    """A row's branch action: enabled with the fork it asks for, or disabled with a reason code.

    Attributes:
        target: what a click asks for (docs/architecture.md); ``None`` when disabled.
        reason: a :class:`~branchwise.core.fork.targets.TargetReason` or a
            :class:`DesktopReason` when disabled.
    """

    target: ForkRequest | None
    reason: str | None

    @property
    def enabled(self) -> bool:
        """The action can be clicked."""
        return self.target is not None


def branch_state(
    row: Row,
    table: TargetTable | None,
    *,
    in_flight: Collection[tuple[str, str]] = (),
    server_supported: bool = True,
) -> BranchState:
    """Decide a row's branch action from committed fork targets and host state."""
    if row.running:
        return BranchState(None, TargetReason.TURN_OPEN)
    if not server_supported:
        return BranchState(None, DesktopReason.SERVER_UNSUPPORTED)
    if table is None:
        return BranchState(None, DesktopReason.TARGETS_LOADING)
    answer = table.answer
    if row.brought_back:
        return BranchState(None, DesktopReason.BROUGHT_BACK)
    if not answer.verifiable or row.imported:
        return BranchState(None, TargetReason.UNVERIFIABLE)
    target = table.by_key.get(row.key)
    if target is None or target.turn_id != row.turn_id or target.reason == TargetReason.TURN_OPEN:
        # Targets are read after the turn ends: until then the table is older than the row.
        return BranchState(None, DesktopReason.TARGETS_LOADING)
    if (answer.session_id, target.turn_id) in in_flight:
        return BranchState(None, DesktopReason.CREATION_IN_FLIGHT)
    if not target.available or target.boundary_sequence is None:
        return BranchState(None, target.reason or TargetReason.BOUNDARY_NOT_ATOMIC)
    return BranchState(
        ForkRequest(
            source_session_id=answer.session_id,
            turn_id=target.turn_id,
            boundary_sequence=target.boundary_sequence,
            expected_generation=answer.generation,
        ),
        None,
    )


@dataclass(frozen=True, slots=True)
class Window:
    """The slice ``rows[start:end]`` that has widgets."""

    start: int
    end: int

    @classmethod
    def tail(cls, count: int, page: int = PAGE_SIZE) -> Window:
        """The last page of ``count`` rows."""
        return cls(max(0, count - page), count)

    def earlier(self, page: int = PAGE_SIZE) -> Window:
        """This window extended by one page upwards."""
        return Window(max(0, self.start - page), self.end)

    @property
    def size(self) -> int:
        """How many rows it holds."""
        return self.end - self.start
