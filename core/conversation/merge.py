"""Bring a branch's conclusion back into its parent: one ``session/merge`` commit.

A side exploration ends in something worth keeping (an answer, several, or a
summary). ``merge_back`` appends it to an ancestor conversation as its own
transcript item, which later turns of that conversation send to the model as
context the user brought back. The branch records nothing and stays
independent; the parent's history is only ever appended to.

Idempotent per operation id, like a fork: the same request again returns the
merge already written (``created: false``); another request under the same id
is ``operation_conflict``. The commit is one frame under the parent's writer
lease, so a crash leaves either no merge or one whole merge, and a retry with
the same operation id never writes a second one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from branchwise.core.errors import (
    InvalidMerge,
    NotAncestor,
    NotOwnTurn,
    OperationConflict,
    SessionNotFound,
    SessionTrashed,
    TurnRunning,
    UnknownTurn,
)
from branchwise.core.fork.engine import MAX_OPERATION_ID
from branchwise.core.i18n.language import ngettext
from branchwise.core.i18n.reasons import fill
from branchwise.core.ids import validate_session_id
from branchwise.core.lineage import lineage
from branchwise.core.projection import events as ev
from branchwise.core.projection.projection import Projection
from branchwise.core.store.manifest import Manifest
from branchwise.core.store.store import SessionStore, SessionWriter
from branchwise.core.store.trash import Trash

MergeKind = Literal["answer", "summary", "note", "fused"]
MERGE_KINDS: tuple[str, ...] = get_args(MergeKind)
MAX_MERGE_CHARS = 64_000


@dataclass(frozen=True, slots=True)
class MergeResult:
    """A merge in the parent's log.

    Attributes:
        parent_session_id: where it was written.
        merge_sequence: the seq of its ``session/merge`` event.
        created: ``False`` when an earlier call with the same operation id wrote it.
    """

    parent_session_id: str
    merge_sequence: int
    created: bool

    def to_json(self) -> dict[str, Any]:
        """``{"parentSessionId", "mergeSequence", "created"}``."""
        return {
            "parentSessionId": self.parent_session_id,
            "mergeSequence": self.merge_sequence,
            "created": self.created,
        }


def merge_back(
    store: SessionStore,
    child_id: str,
    parent_id: str | None,
    content: str,
    kind: str,
    operation_id: str,
    *,
    writer: SessionWriter | None = None,
) -> MergeResult:
    """Append ``content`` from branch ``child_id`` to its ancestor ``parent_id``.

    Args:
        parent_id: an ancestor of the branch; ``None`` is its direct parent.
        writer: the parent's writer when the caller holds it (the desktop);
            otherwise the lease is taken for the one commit.

    Raises:
        InvalidMerge: empty or oversized content, unknown kind, bad operation id.
        SessionNotFound, SessionTrashed: the branch or the parent is gone or trashed.
        NotAncestor: ``parent_id`` is not an ancestor of the branch.
        TurnRunning: the parent is answering in this process (retry when it ends).
        LeaseHeld: another process writes the parent (retry later).
        OperationConflict: the operation id was used for a different merge.
    """
    _validate(content, kind, operation_id)
    child_id = validate_session_id(child_id)
    chain = _live_lineage(store, child_id)
    ancestors = [m.session_id for m in chain[1:]]
    if parent_id is None:
        if not ancestors:
            raise NotAncestor(f"{child_id} has no parent to bring anything back to", child=child_id)
        parent_id = ancestors[0]
    parent_id = validate_session_id(parent_id)
    if parent_id not in ancestors:
        if Trash(store).contains(parent_id):
            raise SessionTrashed(f"{parent_id} is in the Trash", sessionId=parent_id)
        raise NotAncestor(
            f"{parent_id} is not an ancestor of {child_id}", child=child_id, parent=parent_id
        )
    child_boundary = _last_boundary(store.read(child_id).projection)
    request = ev.session_merge(
        child_session_id=child_id,
        child_boundary_sequence=child_boundary,
        operation_id=operation_id,
        content=content,
        kind=kind,
    )
    if writer is not None:
        return _commit(writer, request)
    with store.open_writer(parent_id) as own:
        return _commit(own, request)


def merge_fused(
    store: SessionStore,
    parent_id: str,
    sources: Sequence[Mapping[str, str]],
    content: str,
    operation_id: str,
    *,
    model: str,
    instruction: str,
    writer: SessionWriter | None = None,
) -> MergeResult:
    """Append a fused answer of several branches to ``parent_id``, with its provenance.

    ``writer``: the parent's writer when the caller holds it (the desktop).

    The caller checked that every source is a finished answer of a branch of
    ``parent_id`` (:func:`~branchwise.core.conversation.fanout.fuse_sources`).
    A retry of ``operation_id`` with the same sources returns the merge it
    wrote, whatever text a model would write now (look for it first with
    :func:`fused_already`); other sources are ``operation_conflict``.

    Raises:
        InvalidMerge, TurnRunning, LeaseHeld, OperationConflict: as :func:`merge_back`.
    """
    _validate(content, "fused", operation_id)
    first = sources[0]
    child_boundary = _last_boundary(store.read(first["sessionId"], every_frame=False).projection)
    request = ev.session_merge(
        child_session_id=first["sessionId"],
        child_boundary_sequence=child_boundary,
        operation_id=operation_id,
        content=content,
        kind="fused",
        sources=sources,
        model=model,
        instruction=instruction,
    )
    if writer is not None:
        return _commit(writer, request)
    with store.open_writer(validate_session_id(parent_id)) as own:
        return _commit(own, request)


def fused_already(
    store: SessionStore, parent_id: str, operation_id: str, sources: Sequence[Mapping[str, str]]
) -> MergeResult | None:
    """The fused merge ``operation_id`` already wrote into ``parent_id``, if any.

    Raises:
        OperationConflict: the operation id merged something else.
    """
    projection = store.read(validate_session_id(parent_id), every_frame=False).projection
    for merge in projection.merges:
        if merge["operationId"] != operation_id:
            continue
        if merge.get("kind") != "fused" or merge.get("sources") != [dict(s) for s in sources]:
            raise OperationConflict(
                f"operation {operation_id} already merged something else",
                operationId=operation_id,
            )
        return MergeResult(parent_id, int(merge["seq"]), False)
    return None


def _validate(content: object, kind: object, operation_id: object) -> None:
    if not isinstance(content, str) or not content.strip():
        raise InvalidMerge("there is nothing to bring back", field="content")
    if len(content) > MAX_MERGE_CHARS:
        raise InvalidMerge(
            f"what is brought back is limited to {MAX_MERGE_CHARS} characters", field="content"
        )
    if kind not in MERGE_KINDS:
        raise InvalidMerge(f"kind must be one of {', '.join(MERGE_KINDS)}", field="kind")
    if not isinstance(operation_id, str) or not 0 < len(operation_id) <= MAX_OPERATION_ID:
        raise InvalidMerge(
            f"operation id must be 1-{MAX_OPERATION_ID} characters", field="operationId"
        )


def _live_lineage(store: SessionStore, child_id: str) -> tuple[Manifest, ...]:
    try:
        return lineage(store, child_id).chain
    except SessionNotFound:
        if Trash(store).contains(child_id):
            raise SessionTrashed(f"{child_id} is in the Trash", sessionId=child_id) from None
        raise


def _last_boundary(projection: Projection) -> int:
    """Where the branch stood: the end of its last finished turn (0 before any)."""
    closed = [t.boundary_sequence for t in projection.turns if t.boundary_sequence is not None]
    return max(closed, default=0)


def _commit(writer: SessionWriter, request: dict[str, Any]) -> MergeResult:
    projection = writer.projection
    for merge in projection.merges:
        if merge["operationId"] != request["operationId"]:
            continue
        # A fused answer is the same merge when it fused the same answers (a model
        # asked again would not write the same words).
        keys = ("kind", "sources") if request["kind"] == "fused" else ("content", "kind")
        same = all(merge.get(k) == request.get(k) for k in ("childSessionId", *keys))
        if not same:
            raise OperationConflict(
                f"operation {request['operationId']} already merged something else",
                operationId=request["operationId"],
            )
        return MergeResult(writer.session_id, int(merge["seq"]), False)
    if projection.open_turn is not None:
        raise TurnRunning(
            "the conversation is answering; bring it back when the answer ends",
            sessionId=writer.session_id,
        )
    (event,) = writer.commit([request])
    return MergeResult(writer.session_id, int(event["seq"]), True)


# -- what to bring back ------------------------------------------------------------


def answers_of(store: SessionStore, child_id: str, turn_ids: list[str]) -> str:
    """The answers of the branch's chosen turns, in the order given, as one text.

    Only the branch's own turns (after its fork point) count: an inherited
    turn's answer is already the parent's own.

    Raises:
        UnknownTurn: a turn is not in the branch or has no answer.
        NotOwnTurn: a turn the branch inherited from its parent.
    """
    projection = store.read(validate_session_id(child_id)).projection
    by_id = {t.turn_id: t for t in projection.turns}
    parts = []
    for turn_id in turn_ids:
        turn = by_id.get(turn_id)
        if turn is not None and turn.start_seq <= projection.seed_length:
            raise NotOwnTurn(
                f"turn {turn_id} of {child_id} was inherited from its parent; "
                "only the branch's own turns can be brought back",
                sessionId=child_id,
                turnId=turn_id,
            )
        message = projection.message(turn.message_id) if turn and turn.message_id else None
        if message is None or not message.content.strip():
            raise UnknownTurn(
                f"turn {turn_id} of {child_id} has no answer to bring back",
                sessionId=child_id,
                turnId=turn_id,
            )
        parts.append(message.content)
    return "\n\n---\n\n".join(parts)


def own_turns(projection: Projection) -> list[tuple[str, str]]:
    """``(prompt, answer)`` of the branch's turns since its fork point."""
    pairs = []
    for turn in projection.turns:
        if turn.start_seq <= projection.seed_length:
            continue
        prompt = projection.message(turn.user_message_id) if turn.user_message_id else None
        answer = projection.message(turn.message_id) if turn.message_id else None
        pairs.append((prompt.content if prompt else "", answer.content if answer else ""))
    return pairs


SUMMARY_REQUEST = (
    "Summarize the conversation above for someone who did not read it: what was asked, "
    "what was found or decided, in a few sentences. Write only the summary."
)


def demo_summary(pairs: list[tuple[str, str]]) -> str:
    """The demo responder's summary: each prompt and its answer's first sentence."""
    lines = [
        fill(
            ngettext(
                "Summary of the branch ({n} turn):",
                "Summary of the branch ({n} turns):",
                len(pairs),
            ),
            {"n": len(pairs)},
        )
    ]
    for prompt, answer in pairs:
        first = answer.strip().split("\n", 1)[0]
        first = first if len(first) <= 160 else first[:157] + "..."
        lines.append(f"- {prompt.strip()[:120]} → {first}")
    return "\n".join(lines)
