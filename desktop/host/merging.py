"""Bring a branch's conclusion back into its parent, from the desktop.

The core writes the ``session/merge`` commit (``core/merge.py``); this module
supplies what the window knows: the branch's own answers to choose from, a
summary written by the host's provider, and the parent's open writer when the
parent is open in this app (its lease is held here, so the merge must go
through it, and not while one of its turns runs).
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import uuid4

from branchwise.core.errors import NotAncestor, TurnRunning
from branchwise.core.merge import MergeResult, answers_of, merge_back, write_summary
from branchwise.core.projection.projection import Projection
from branchwise.desktop.host.changes import Changes
from branchwise.desktop.host.host import Host


@dataclass(frozen=True, slots=True)
class OwnAnswer:
    """A turn the branch asked itself (after its fork point), with its answer."""

    turn_id: str
    prompt: str
    answer: str


def parent_of(host: Host, child_id: str) -> str | None:
    """The conversation a branch came from (``None``: not a branch)."""
    manifest = host.index.by_id.get(child_id)
    return manifest.parent.session_id if manifest and manifest.parent else None


def _projection(host: Host, child_id: str) -> Projection:
    session = host.session(child_id)
    projection = session.projection if session is not None else None
    return projection if projection is not None else host.store.read(child_id).projection


def own_answers(host: Host, child_id: str) -> list[OwnAnswer]:
    """The branch's own finished answers, oldest first (what can be brought back)."""
    projection = _projection(host, child_id)
    found = []
    for turn in projection.turns:
        if turn.start_seq <= projection.seed_length or not turn.message_id:
            continue
        answer = projection.message(turn.message_id)
        if answer is None or answer.partial or not answer.content.strip():
            continue
        prompt = projection.message(turn.user_message_id) if turn.user_message_id else None
        found.append(OwnAnswer(turn.turn_id, prompt.content if prompt else "", answer.content))
    return found


async def summarize(host: Host, child_id: str) -> str:
    """A summary of the branch since its fork point, by the host's provider.

    Raises:
        InvalidMerge: the branch has no turns of its own.
        ProviderError: the model failed.
    """
    return await write_summary(_projection(host, child_id), host.provider)


def chosen_answers(host: Host, child_id: str, turn_ids: list[str]) -> str:
    """The chosen answers as one text, the way the merge stores them."""
    return answers_of(host.store, child_id, turn_ids)


def bring_back(host: Host, child_id: str, content: str, kind: str) -> MergeResult:
    """Append ``content`` to the branch's parent under a fresh operation id.

    Raises:
        TurnRunning: the parent is open here and answering (merge when it ends).
        NotAncestor: the branch has no parent any more.
        BranchwiseError: what ``merge_back`` refuses (empty, too long, trashed, lease held).
    """
    parent_id = parent_of(host, child_id)
    if parent_id is None:
        raise NotAncestor(f"{child_id} has no parent to bring back to", sessionId=child_id)
    session = host.session(parent_id)
    writer = session.writer if session is not None else None
    if session is not None and session.running:
        raise TurnRunning("the parent conversation is answering", sessionId=parent_id)
    result = merge_back(
        host.store, child_id, parent_id, content, kind, f"desktop-{uuid4().hex}", writer=writer
    )
    if session is not None:
        session.rebuild_rows()
    host.index_for_search(parent_id)
    host.emit(Changes(sessions=frozenset({parent_id}), transcripts=frozenset({parent_id})))
    return result
