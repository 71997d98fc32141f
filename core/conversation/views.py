"""The JSON views of sessions that the CLI prints and ``branchwise serve`` answers.

docs/cli.md promises the command line and the HTTP API the same shapes; a
``branchwise --server URL session show ID`` must print what the local
command prints. Both therefore build their answers here, from the store,
and nowhere else.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from branchwise.core.conversation.names import LabelReader, label_json
from branchwise.core.errors import BranchwiseError
from branchwise.core.fork.targets import TargetsCache, fork_targets
from branchwise.core.ids import validate_session_id
from branchwise.core.lineage import lineage, tree
from branchwise.core.log.segments import disk_usage
from branchwise.core.projection.attachments import AttachmentRef
from branchwise.core.projection.projection import Projection
from branchwise.core.projection.turns import Turn
from branchwise.core.store.manifest import Manifest, load_manifest
from branchwise.core.store.store import SessionStore
from branchwise.core.store.trash import parent_state


def session_list(store: SessionStore) -> dict[str, Any]:
    """Every readable session's manifest, newest first; unusable folders under ``damaged``.

    One bad folder (a damaged, unreadable or copied manifest, a symbolic
    link) never hides the others: it is listed with its typed error instead.
    """
    readable, damaged = [], []
    for item in store.iter_manifests():
        if isinstance(item, BranchwiseError):
            damaged.append(item.to_json()["error"])
        else:
            readable.append(item)
    readable.sort(key=lambda m: (m.created_at, m.session_id), reverse=True)
    labels = LabelReader(store, readable)
    return {"sessions": [{**m.to_json(), **labels.fields(m)} for m in readable], "damaged": damaged}


def session_show(
    store: SessionStore, session_id: str, *, offset: int | None = None, limit: int | None = None
) -> dict[str, Any]:
    """Manifest, turns, messages and usage of a session (read without a lease).

    With ``limit`` the answer is one page of turns, ``offset`` counting from
    the first turn; ``limit`` without ``offset`` is the *last* ``limit``
    turns (the page a transcript shows first). A page carries the messages
    of its turns only (history without turns comes with the first page) and
    a ``page`` field ``{"offset", "limit", "totalTurns"}``, and its messages
    carry their ``turnId``; without ``limit``
    the answer is the whole session, exactly as ``session show`` prints it.
    """
    # Only the projection is shown: a projection snapshot may stand for the history it covers.
    snapshot = store.read(validate_session_id(session_id), every_frame=False)
    manifest, projection = snapshot.manifest, snapshot.projection
    turns = projection.turns
    messages = projection.messages
    page: dict[str, Any] | None = None
    if limit is not None:
        start = max(len(turns) - limit, 0) if offset is None else offset
        chosen = turns[start : start + limit]
        ids = {turn.turn_id for turn in chosen}
        messages = [m for m in messages if m.turn_id in ids or (m.turn_id is None and start == 0)]
        turns = chosen
        page = {"offset": start, "limit": limit, "totalTurns": len(projection.turns)}
    answer = {
        "sessionId": manifest.session_id,
        "title": snapshot.title,
        "kind": manifest.kind,
        "generation": manifest.generation,
        "parent": manifest.parent.to_json() if manifest.parent else None,
        **LabelReader(store).fields(manifest),
        "verifiable": projection.verifiable,
        "config": projection.settings.to_json(),
        "turns": [_turn_json(projection, turn) for turn in turns],
        "messages": [
            {
                "messageId": m.message_id,
                "role": m.role,
                "content": m.content,
                **(
                    {"attachments": [_attachment_json(a) for a in m.attachments]}
                    if m.attachments
                    else {}
                ),
                # A page's messages name their turn, so a client can build its rows from it.
                **({"turnId": m.turn_id} if page is not None else {}),
            }
            for m in messages
        ],
        "usage": {
            "inputTokens": projection.input_tokens,
            "outputTokens": projection.output_tokens,
            "estimated": own_usage_estimated(projection),
        },
        "corruption": snapshot.scan.corruption.to_json()["error"]
        if snapshot.scan.corruption
        else None,
        "disk": disk_usage(store.session_dir(manifest.session_id), manifest),
    }
    if page is not None:
        answer["page"] = page
    return answer


def _attachment_json(ref: AttachmentRef) -> dict[str, Any]:
    """An attachment as ``session show`` lists it: ``{"name", "type", "size", "sha256"}``."""
    return {"name": ref.name, "type": ref.type, "size": ref.size, "sha256": ref.sha256}


def _turn_json(projection: Projection, turn: Turn) -> dict[str, Any]:
    """A turn as ``session show`` prints it, with its answer's figures (``usage``)."""
    figures = projection.answer_figures(turn.turn_id)
    return {**turn.to_json(), "usage": figures.to_json() if figures is not None else None}


def own_usage_estimated(projection: Projection) -> bool:
    """Any of the conversation's own turns (not inherited ones) counted by the estimate."""
    return any(
        figures.estimated and not figures.inherited
        for figures in map(projection.answer_figures, projection.turn_usage)
        if figures is not None
    )


def session_targets(
    store: SessionStore, session_id: str, cache: TargetsCache | None = None
) -> dict[str, Any]:
    """The fork-targets answer for one session."""
    return fork_targets(store, validate_session_id(session_id), cache=cache).to_json()


def session_lineage(store: SessionStore, session_id: str) -> dict[str, Any]:
    """A session's ancestors, nearest first, each with its label."""
    found = lineage(store, validate_session_id(session_id))
    result = found.to_json()
    _add_labels(store, result["lineage"], found.chain)
    return result


def session_tree(store: SessionStore, session_id: str) -> dict[str, Any]:
    """The descendant tree of a session, flat and depth-first.

    The top entry's ``parentState`` says where its parent is: ``present``,
    ``trashed`` or ``missing`` (``null`` for a root), so a branch of a deleted
    conversation shows where its parent was.
    """
    top = tree(store, validate_session_id(session_id))
    result = top.to_json()
    placed = [node.manifest for node, _ in top.walk()]
    _add_labels(store, result["sessions"], placed)
    parent = top.manifest.parent
    result["sessions"][0]["parentState"] = (
        parent_state(store, parent.session_id) if parent else None
    )
    return result


def _add_labels(
    store: SessionStore,
    entries: list[dict[str, Any]],
    manifests: Sequence[Manifest],
    *,
    siblings: Sequence[Manifest] | None = None,
) -> None:
    """Add ``"label"``, ``"labelParts"`` and ``"forkTurnIndex"`` to each entry (same order).

    ``siblings``: manifests that hold every sibling a label may be numbered
    among (a whole tree does); otherwise they are read when one is needed.
    """
    labels = LabelReader(store, siblings)
    for entry, manifest in zip(entries, manifests, strict=True):
        entry.update(labels.fields(manifest))


def label_hits(store: SessionStore, hits: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Search hits with how the conversations they name differ from their parents.

    Each hit gains its conversation's ``"label"``, ``"labelParts"`` and
    ``"forkTurnIndex"`` (all ``None`` for a conversation gone since it was
    indexed), and ``"alsoInBranches"``: ``{"sessionId", "title", "label"}`` of
    each conversation in ``alsoIn``, so "also in 3 branches" can say which.
    """
    labels = LabelReader(store)
    known: dict[str, tuple[str | None, dict[str, Any]]] = {}

    def named(session_id: str) -> tuple[str | None, dict[str, Any]]:
        if session_id not in known:
            try:
                manifest = load_manifest(store.session_dir(validate_session_id(session_id)))
            except BranchwiseError:
                known[session_id] = (None, label_json(None, None))
            else:
                known[session_id] = (manifest.title, labels.fields(manifest))
        return known[session_id]

    for hit in hits:
        hit.update(named(hit["sessionId"])[1])
        others = []
        for other in hit.get("alsoIn", ()):
            title, fields = named(other)
            others.append({"sessionId": other, "title": title, "label": fields["label"]})
        hit["alsoInBranches"] = others
    return hits
