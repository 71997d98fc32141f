"""Asking a turn's question again: edit and regenerate as a branch, retry in place.

Nothing is overwritten. Editing the prompt of turn N, or regenerating its
answer, is a fork at the end of turn N-1 (at the start for N = 1) whose
request carries a :class:`~branchwise.core.store.manifest.BranchOrigin`: the
fork publishes the branch with the (edited or same) prompt as its first own
turn, already started, and a runner then answers it
(:meth:`~branchwise.core.runtime.TurnRunner.answer`). The parent is never
written. A retry re-asks a failed turn's prompt as a new turn of the same
session; the failed turn stays in the transcript, and once it has no answer
text it is no longer sent to the model
(:meth:`~branchwise.core.projection.projection.Projection.model_messages`).

This module decides *what* is asked again and where; the fork engine, the
store and the runner do the writing.
"""

from __future__ import annotations

from typing import Any

from branchwise.core.errors import (
    EmptyPrompt,
    InvalidForkRequest,
    SessionNotFound,
    SourceNotFound,
    TurnNotFailed,
    TurnRunning,
    UnknownTurn,
)
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.ids import validate_session_id
from branchwise.core.projection.attachments import AttachmentRef
from branchwise.core.projection.events import EndReason
from branchwise.core.projection.projection import Projection
from branchwise.core.projection.turns import Turn
from branchwise.core.store.manifest import BranchOrigin, Manifest
from branchwise.core.store.store import SessionStore

EDIT = "edit"
REGENERATE = "regenerate"


def edit_request(
    store: SessionStore,
    session_id: str,
    turn_id: str,
    prompt: str,
    attachments: tuple[AttachmentRef, ...] = (),
) -> ForkRequest:
    """The fork that asks ``prompt`` instead of turn ``turn_id``'s prompt, as a branch.

    The edited question keeps the files the turn's question carried, and
    ``attachments`` (already stored) are added to them.

    Raises:
        InvalidSessionId: a malformed id.
        SourceNotFound: no such session.
        UnknownTurn: no such turn.
        TurnRunning: the turn is still running.
        EmptyPrompt: ``prompt`` has no text.
    """
    projection, generation, turn = _finished_turn(store, session_id, turn_id)
    if not prompt.strip():
        raise EmptyPrompt("the edited prompt is empty", turnId=turn_id)
    return _branch_request(session_id, generation, projection, turn, EDIT, prompt, attachments)


def regenerate_request(store: SessionStore, session_id: str, turn_id: str) -> ForkRequest:
    """The fork that asks turn ``turn_id``'s own prompt again, as a branch.

    Raises:
        InvalidSessionId, SourceNotFound, UnknownTurn, TurnRunning: as :func:`edit_request`.
    """
    projection, generation, turn = _finished_turn(store, session_id, turn_id)
    prompt = question_of(projection, turn)
    return _branch_request(session_id, generation, projection, turn, REGENERATE, prompt)


def edit_of(
    projection: Projection, generation: int, session_id: str, turn_id: str, prompt: str
) -> ForkRequest:
    """:func:`edit_request` from a projection already read (a server's conversation).

    Raises:
        UnknownTurn, TurnRunning, EmptyPrompt: as :func:`edit_request`.
    """
    turn = _finished(projection, session_id, turn_id)
    if not prompt.strip():
        raise EmptyPrompt("the edited prompt is empty", turnId=turn_id)
    return _branch_request(session_id, generation, projection, turn, EDIT, prompt)


def regenerate_of(
    projection: Projection, generation: int, session_id: str, turn_id: str
) -> ForkRequest:
    """:func:`regenerate_request` from a projection already read (a server's conversation).

    Raises:
        UnknownTurn, TurnRunning: as :func:`regenerate_request`.
    """
    turn = _finished(projection, session_id, turn_id)
    prompt = question_of(projection, turn)
    return _branch_request(session_id, generation, projection, turn, REGENERATE, prompt)


def unasked_turn(manifest: Manifest, projection: Projection) -> str | None:
    """An edit's or regenerate's turn, published with its question and nothing after it.

    That question was never sent (whoever made the branch stopped before
    asking, or is about to ask now), so whoever opens the branch as its
    writer asks it. A turn whose answer had started is not one: its writer
    closes it as ``interrupted`` (Retry asks it again).
    """
    parent = manifest.parent
    if parent is None or parent.origin is None:
        return None
    turn = branch_turn(projection, manifest.seed_length)
    if turn is None or not turn.is_open or projection.open_turn is not turn:
        return None
    question = projection.message(turn.user_message_id or "")
    if question is None or question.seq != projection.last_seq:
        return None
    return turn.turn_id


def question_of(projection: Projection, turn: Turn) -> str:
    """The prompt that opened ``turn``.

    Raises:
        InvalidForkRequest: the turn has no user message (nothing to ask again).
    """
    message = projection.message(turn.user_message_id) if turn.user_message_id else None
    if message is None:
        raise InvalidForkRequest(f"turn {turn.turn_id} has no prompt to ask again")
    return message.content


def failed_turn(projection: Projection, session_id: str, turn_id: str | None = None) -> Turn:
    """The turn a retry asks again: ``turn_id``, or the session's last failed turn.

    Without ``turn_id`` the last turn that ended in error and whose prompt no
    later turn has answered since (a retry that succeeded settles it), so
    retrying again after a success does not ask the same question twice.

    Raises:
        UnknownTurn: ``turn_id`` is not a turn of the session.
        TurnNotFailed: that turn did not end in error, or no turn did.
    """
    if turn_id is None:
        answered: set[str] = set()  # prompts a later turn asked and got a whole answer to
        for turn in reversed(projection.turns):
            prompt = _prompt_or_none(projection, turn)
            if turn.end_reason == EndReason.COMPLETED and prompt is not None:
                answered.add(prompt)
            elif turn.end_reason == EndReason.ERROR and prompt not in answered:
                return turn
        raise TurnNotFailed(f"session {session_id} has no failed turn left to retry")
    found = projection.turn(turn_id)
    if found is None:
        raise UnknownTurn(f"session {session_id} has no turn {turn_id}", turnId=turn_id)
    if found.end_reason != EndReason.ERROR:
        raise TurnNotFailed(
            f"turn {turn_id} ended {found.end_reason or 'not yet'}, not in error",
            turnId=turn_id,
            endReason=found.end_reason,
        )
    return found


def retried_turns(projection: Projection) -> frozenset[str]:
    """The failed turns a later turn answered whole by asking the same prompt (a retry).

    Such a turn has nothing left to retry: the desktop stops offering Retry on
    it and withdraws its failure notice. One pass from the end, as
    :func:`failed_turn` settles them; none at all when no turn failed.
    """
    if not any(turn.end_reason == EndReason.ERROR for turn in projection.turns):
        return frozenset()
    answered: set[str] = set()
    settled: set[str] = set()
    for turn in reversed(projection.turns):
        prompt = _prompt_or_none(projection, turn)
        if turn.end_reason == EndReason.COMPLETED and prompt is not None:
            answered.add(prompt)
        elif turn.end_reason == EndReason.ERROR and prompt is not None and prompt in answered:
            settled.add(turn.turn_id)
    return frozenset(settled)


def _prompt_or_none(projection: Projection, turn: Turn) -> str | None:
    message = projection.message(turn.user_message_id) if turn.user_message_id else None
    return message.content if message is not None else None


def branch_turn(projection: Projection, seed_length: int) -> Turn | None:
    """A branch's first own turn (the one an edit or regenerate asked), if it has one."""
    return next((t for t in projection.turns if t.start_seq > seed_length), None)


def asked_json(
    child_session_id: str | None,
    turn_id: str,
    message_id: str | None,
    boundary_sequence: int | None,
    end_reason: str | None,
) -> dict[str, Any]:
    """The CLI's ``edit``/``regenerate``/``retry`` result.

    ``childSessionId`` is the branch, or ``None`` for a retry, which makes no
    branch (the turn is in the session that was asked).
    """
    return {
        "childSessionId": child_session_id,
        "turnId": turn_id,
        "messageId": message_id,
        "boundarySequence": boundary_sequence,
        "endReason": end_reason,
    }


def _finished_turn(
    store: SessionStore, session_id: str, turn_id: str
) -> tuple[Projection, int, Turn]:
    """The source's projection, generation and finished turn ``turn_id``."""
    validate_session_id(session_id)
    try:
        snapshot = store.read(session_id)
    except SessionNotFound as exc:
        if isinstance(exc, SourceNotFound):
            raise
        raise SourceNotFound(f"session {session_id} does not exist", sessionId=session_id) from None
    projection = snapshot.projection
    return projection, snapshot.manifest.generation, _finished(projection, session_id, turn_id)


def _finished(projection: Projection, session_id: str, turn_id: str) -> Turn:
    turn = projection.turn(turn_id)
    if turn is None:
        raise UnknownTurn(f"session {session_id} has no turn {turn_id}", turnId=turn_id)
    if turn.is_open:
        raise TurnRunning(f"turn {turn_id} is still running", turnId=turn_id)
    return turn


def _branch_request(
    session_id: str,
    generation: int,
    projection: Projection,
    turn: Turn,
    kind: str,
    prompt: str,
    added: tuple[AttachmentRef, ...] = (),
) -> ForkRequest:
    """A fork at the end of the turn before ``turn`` (at the start for the first).

    The branch's question carries the files ``turn``'s question carried (the
    log's references: the bytes are shared), then ``added``.
    """
    question = projection.message(turn.user_message_id) if turn.user_message_id else None
    files = (question.attachments if question is not None else ()) + tuple(added)
    origin = BranchOrigin(kind, turn.turn_id, prompt, files)
    if turn.index == 1:
        return ForkRequest(session_id, None, 0, generation, origin=origin)
    before = projection.turns[turn.index - 2]
    boundary = before.boundary_sequence if before.boundary_sequence is not None else 0
    return ForkRequest(session_id, before.turn_id, boundary, generation, origin=origin)
