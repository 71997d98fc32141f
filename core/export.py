"""Taking a conversation out: Markdown for people, versioned JSON for programs.

Four shapes, all built from one read of committed frames (no lease, so a
running conversation exports what is committed):

* **Markdown** (:func:`render_markdown`): the title, the lineage line
  ("Branched from <title>, turn N"), then each turn's prompt and answer.
  Message texts are written verbatim, so code blocks survive byte for byte;
  a text that leaves a code fence open is closed after it so the next turn's
  heading is not swallowed. Labels follow the active language.
* **JSON** (:func:`export_document`), schema ``branchwise.export/1``:
  ``{"schema", "exportedAt", "session", "lineage", "turns", "messages",
  "usage"}`` (README: "Export"). Additions keep the version; a change that
  breaks readers bumps it.
* **ChatGPT** (:func:`export_chatgpt`): the lineage tree as a ChatGPT
  ``conversations.json``, which ``branchwise import`` reads back as the same tree.
* **Tree** (:func:`export_tree`), schema ``branchwise.export-tree/1``: the
  whole lineage tree a conversation belongs to, from its furthest reachable
  ancestor down, each session a ``branchwise.export/1`` document without its
  own ``schema`` plus ``depth`` and ``childSessionIds``, depth-first.

:func:`write_export` publishes a file atomically (temporary file in the same
folder, fsync, then ``link`` for a new path or ``rename`` over an old one,
fsync the folder): a crash leaves the old file or the whole new one. An
existing file is refused (``output_exists``) unless ``overwrite`` is asked
for (the desktop's save dialog has already asked the person).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from branchwise.core.errors import (
    BranchwiseError,
    DiskFull,
    ExportNotWritten,
    OutputExists,
)
from branchwise.core.fs.atomic import fsync_dir, write_all
from branchwise.core.i18n.language import _
from branchwise.core.i18n.reasons import fill
from branchwise.core.ids import validate_session_id
from branchwise.core.lineage import TreeNode, lineage, tree
from branchwise.core.projection.events import EventType
from branchwise.core.store.manifest import load_manifest
from branchwise.core.store.store import SessionSnapshot, SessionStore
from branchwise.core.store.trash import Trash, parent_state

SCHEMA = "branchwise.export/1"
TREE_SCHEMA = "branchwise.export-tree/1"
FORMATS = ("markdown", "json")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})", re.MULTILINE)
_USAGE = EventType.USAGE.value
_TURN_START = EventType.TURN_START.value


@dataclass(frozen=True, slots=True)
class ParentInfo:
    """Where a branch came from, as an export shows it.

    Attributes:
        session_id: the parent session.
        title: its title (``""`` when it was purged or is damaged).
        kind: ``fork`` (inherits history) or ``child``.
        turn_id: the parent's turn it was branched at.
        turn_number: that turn's 1-based position, when it is known.
        boundary_sequence: the seq a fork cut at.
        state: ``present``, ``trashed`` or ``missing``.
    """

    session_id: str
    title: str
    kind: str
    turn_id: str | None
    turn_number: int | None
    boundary_sequence: int | None
    state: str

    def to_json(self) -> dict[str, Any]:
        """camelCase form for the export document."""
        return {
            "sessionId": self.session_id,
            "title": self.title,
            "kind": self.kind,
            "turnId": self.turn_id,
            "turnNumber": self.turn_number,
            "boundarySequence": self.boundary_sequence,
            "state": self.state,
        }


def parent_info(store: SessionStore, snapshot: SessionSnapshot) -> ParentInfo | None:
    """The parent of a session, live, trashed or gone; ``None`` for a root.

    A fork inherits its parent's turns with their ids, so the turn number is
    read from the fork itself and survives its parent's deletion.
    """
    link = snapshot.manifest.parent
    if link is None:
        return None
    state = parent_state(store, link.session_id)
    title = ""
    with contextlib.suppress(BranchwiseError):
        if state == "present":
            title = store.manifest(link.session_id).title
        elif state == "trashed":
            title = load_manifest(Trash(store).session_dir(link.session_id)).title
    number = None
    if link.turn_id is not None:
        inherited = snapshot.projection.turn(link.turn_id)
        if inherited is not None:
            number = inherited.index
        elif state == "present":
            with contextlib.suppress(BranchwiseError):
                turn = store.read(link.session_id).projection.turn(link.turn_id)
                number = turn.index if turn is not None else None
    return ParentInfo(
        link.session_id, title, link.kind, link.turn_id, number, link.boundary_sequence, state
    )


def _turn_usage(snapshot: SessionSnapshot) -> dict[str, dict[str, int]]:
    """Tokens per turn, counted like the projection (only after ``seedLength``)."""
    seed = snapshot.manifest.seed_length
    per_turn: dict[str, dict[str, int]] = {}
    current: str | None = None
    for frame in snapshot.scan.frames:
        for event in frame.events:
            kind = event["type"]
            if kind == _TURN_START:
                current = event["turnId"]
            elif kind == _USAGE and current is not None and event["seq"] > seed:
                counts = per_turn.setdefault(current, {"inputTokens": 0, "outputTokens": 0})
                counts["inputTokens"] += int(event.get("inputTokens", 0))
                counts["outputTokens"] += int(event.get("outputTokens", 0))
    return per_turn


def _document(store: SessionStore, snapshot: SessionSnapshot) -> dict[str, Any]:
    """One session's export body (everything but ``schema`` and ``exportedAt``)."""
    manifest, projection = snapshot.manifest, snapshot.projection
    parent = parent_info(store, snapshot)
    chain = lineage(store, manifest.session_id)
    usage = _turn_usage(snapshot)
    seed = manifest.seed_length
    return {
        "session": {
            "sessionId": manifest.session_id,
            "title": snapshot.title,
            "kind": manifest.kind,
            "createdAt": manifest.created_at,
            "generation": manifest.generation,
            "rootSessionId": manifest.root_session_id or manifest.session_id,
            "seedLength": seed,
        },
        "lineage": {
            "parent": parent.to_json() if parent else None,
            "ancestors": [
                {"sessionId": m.session_id, "title": m.title, "kind": m.kind}
                for m in chain.chain[1:]
            ],
            "complete": chain.broken is None,
        },
        "turns": [
            {
                "number": turn.index,
                "turnId": turn.turn_id,
                "userMessageId": turn.user_message_id,
                "messageId": turn.message_id,
                "boundarySequence": turn.boundary_sequence,
                "endReason": turn.end_reason,
                "error": turn.error,
                "inherited": bool(seed) and turn.start_seq <= seed,
                "usage": usage.get(turn.turn_id, {"inputTokens": 0, "outputTokens": 0}),
            }
            for turn in projection.turns
        ],
        "messages": [
            {
                "messageId": m.message_id,
                "role": m.role,
                "turnId": m.turn_id,
                "content": m.content,
                "model": m.model,
                "partial": m.partial,
            }
            for m in projection.messages
        ],
        "usage": {
            "inputTokens": projection.input_tokens,
            "outputTokens": projection.output_tokens,
        },
    }


def export_document(store: SessionStore, session_id: str) -> dict[str, Any]:
    """The ``branchwise.export/1`` JSON document of one session.

    Raises:
        InvalidSessionId, SessionNotFound, InvalidManifest: from the store.
    """
    snapshot = store.read(validate_session_id(session_id))
    return {"schema": SCHEMA, "exportedAt": time.time(), **_document(store, snapshot)}


def export_tree(store: SessionStore, session_id: str) -> dict[str, Any]:
    """The ``branchwise.export-tree/1`` document: the whole tree ``session_id`` belongs to.

    The tree starts at the furthest ancestor still in the session list (a
    trashed or purged ancestor ends the walk up; its branches are still whole).
    """
    chain = lineage(store, validate_session_id(session_id)).chain
    top = tree(store, chain[-1].session_id)
    sessions = []
    for node, depth in top.walk():
        snapshot = store.read(node.manifest.session_id)
        sessions.append(
            {
                **_document(store, snapshot),
                "depth": depth,
                "childSessionIds": [c.manifest.session_id for c in node.children],
            }
        )
    return {
        "schema": TREE_SCHEMA,
        "exportedAt": time.time(),
        "rootSessionId": top.manifest.session_id,
        "sessions": sessions,
    }


# -- Markdown ----------------------------------------------------------------------


def _verbatim(text: str) -> str:
    """``text`` as written, plus a closing fence if it leaves a code fence open."""
    opened: str | None = None
    for match in _FENCE.finditer(text):
        fence = match.group(1)
        if opened is None:
            opened = fence
        elif fence[0] == opened[0] and len(fence) >= len(opened):
            opened = None
    body = text.rstrip("\n")
    return body if opened is None else f"{body}\n{opened}"


def lineage_line(parent: ParentInfo) -> str:
    """ "Branched from <title>, turn N" in the active language (the title may be gone)."""
    title = parent.title or _("a deleted conversation")
    if parent.turn_number is None:
        return fill(_("Branched from {title}"), {"title": title})
    return fill(_("Branched from {title}, turn {n}"), {"title": title, "n": parent.turn_number})


def render_markdown(store: SessionStore, session_id: str) -> str:
    """The session as Markdown: title, lineage line, each turn's prompt and answer.

    Raises:
        InvalidSessionId, SessionNotFound, InvalidManifest: from the store.
    """
    snapshot = store.read(validate_session_id(session_id))
    projection = snapshot.projection
    parts = [f"# {snapshot.title or _('Untitled conversation')}"]
    parent = parent_info(store, snapshot)
    if parent is not None:
        parts.append(f"*{lineage_line(parent)}*")
    by_turn: dict[str | None, list[Any]] = {}
    for message in projection.messages:
        by_turn.setdefault(message.turn_id, []).append(message)
    for message in by_turn.get(None, []):  # imported history without turn records
        parts.append(message_markdown(message.role, message.content))
    for turn in projection.turns:
        parts.append(f"## {fill(_('Turn {n}'), {'n': turn.index})}")
        for message in by_turn.get(turn.turn_id, []):
            parts.append(message_markdown(message.role, message.content))
        if turn.end_reason == "error":
            parts.append(f"*{_('This turn ended with an error.')}*")
        elif turn.end_reason in ("cancelled", "interrupted"):
            parts.append(f"*{_('This answer was stopped before it finished.')}*")
    return "\n\n".join(parts) + "\n"


def message_markdown(role: str, content: str) -> str:
    """One message as Markdown: a bold role label, then its text verbatim.

    Also what "Copy message" puts on the clipboard, so a copied message and
    an exported one read the same.
    """
    labels = {
        "user": _("You"),
        "assistant": _("Assistant"),
        "tool": _("Tool"),
        "merge": _("Brought back from a branch"),
    }
    return f"**{labels.get(role, role)}**\n\n{_verbatim(content)}"


# -- writing a file ------------------------------------------------------------------


def write_export(path: Path, data: bytes, *, overwrite: bool = False) -> None:
    """Publish ``data`` at ``path`` atomically (see the module docstring).

    Raises:
        OutputExists: ``path`` exists and ``overwrite`` is false; nothing written.
        DiskFull: no space; nothing is left behind.
        ExportNotWritten: the folder is missing or cannot be written; nothing left behind.
    """
    path = Path(path)
    if not overwrite and os.path.lexists(path):
        raise OutputExists(f"{path} already exists", path=str(path))
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        if overwrite:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)  # fails if the name appeared meanwhile: never replaces
            os.unlink(tmp)
        fsync_dir(path.parent)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if exc.errno == errno.EEXIST:
            raise OutputExists(f"{path} already exists", path=str(path)) from exc
        if exc.errno in DiskFull.ERRNOS:
            raise DiskFull(f"the disk is full: {path} was not written", path=str(path)) from exc
        raise ExportNotWritten(
            f"{path} could not be written: {exc.strerror or exc}", path=str(path)
        ) from exc


def encode_json(document: dict[str, Any]) -> bytes:
    """The JSON export's bytes: indented, UTF-8, a final newline."""
    return orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n"


def format_for_path(path: Path) -> str:
    """The export format a file name asks for: ``.json`` is JSON, anything else Markdown."""
    return "json" if Path(path).suffix.lower() == ".json" else "markdown"


# -- ChatGPT ------------------------------------------------------------------------


def export_chatgpt(store: SessionStore, session_id: str) -> list[dict[str, Any]]:
    """The whole lineage tree of ``session_id`` as a ChatGPT ``conversations.json`` array.

    The root and every fork below it are ONE conversation: one ``mapping`` in
    which a fork's own messages hang under the last message of the turn it
    forked at (a fork at the start under the hidden root node), and
    ``current_node`` is the root conversation's last message, so importing
    the file gives back the same tree. A regenerate branch's repeated prompt
    is not repeated: its answer hangs under the parent's prompt, as ChatGPT
    keeps a regenerated answer. Tool calls are assistant messages addressed to
    the tool, their results ``tool`` messages. Child conversations (sub-agents)
    have no place in a ChatGPT tree: each becomes a conversation of its own in
    the same array, after the tree it belongs to.

    Raises:
        InvalidSessionId, SessionNotFound, InvalidManifest: from the store.
    """
    chain = lineage(store, validate_session_id(session_id)).chain
    top = tree(store, chain[-1].session_id)
    conversations: list[dict[str, Any]] = []
    pending = [top]
    while pending:
        root = pending.pop(0)
        conversation, children = _chatgpt_conversation(store, root)
        conversations.append(conversation)
        pending.extend(children)
    return conversations


def _chatgpt_conversation(
    store: SessionStore, top: TreeNode
) -> tuple[dict[str, Any], list[TreeNode]]:
    """One ChatGPT conversation from ``top`` and its forks; the child trees left over."""
    root_node = f"{top.manifest.session_id}-root"
    mapping: dict[str, dict[str, Any]] = {
        root_node: {"id": root_node, "message": None, "parent": None, "children": []}
    }
    # per session: seq -> node id of the message it wrote (or inherited), and turn -> prompt node
    nodes_by_session: dict[str, dict[int, str]] = {}
    prompts_by_session: dict[str, dict[str, tuple[str, str]]] = {}
    children: list[TreeNode] = []
    current = root_node
    stack = [top]
    while stack:
        node = stack.pop()
        manifest = node.manifest
        if node is not top and manifest.kind == "child":
            children.append(node)
            continue
        stack.extend(reversed(node.children))
        snapshot = store.read(manifest.session_id)
        events = [e for frame in snapshot.scan.frames for e in frame.events]
        link = manifest.parent if node is not top else None
        seed = manifest.seed_length if link is not None else 0
        nodes: dict[int, str] = {}
        prompts: dict[str, tuple[str, str]] = {}
        above = root_node
        skip_prompt: str | None = None
        if link is not None and link.session_id in nodes_by_session:
            parent_nodes = nodes_by_session[link.session_id]
            parent_prompts = prompts_by_session[link.session_id]
            inherited = [seq for seq in parent_nodes if seq <= seed]
            nodes.update({seq: parent_nodes[seq] for seq in inherited})
            prompts.update(parent_prompts)
            above = parent_nodes[max(inherited)] if inherited else root_node
            origin = link.origin
            if (
                origin is not None
                and origin.kind == "regenerate"
                and origin.turn_id in parent_prompts
            ):
                prompt_node, prompt_text = parent_prompts[origin.turn_id]
                if prompt_text == origin.prompt:
                    skip_prompt = prompt_node
        turn_id = ""
        for event in events:
            seq = event["seq"]
            if seq <= seed:
                continue
            kind = event["type"]
            if kind == _TURN_START:
                turn_id = event["turnId"]
                continue
            message = _chatgpt_message(event)
            if message is None:
                continue
            if skip_prompt is not None and kind == EventType.MESSAGE_USER.value:
                above, skip_prompt = skip_prompt, None  # the regenerated answer hangs under it
                nodes[seq] = above
                continue
            node_id = f"{manifest.session_id}-{seq}"
            message["id"] = node_id
            mapping[node_id] = {"id": node_id, "message": message, "parent": above, "children": []}
            mapping[above]["children"].append(node_id)
            if kind == EventType.MESSAGE_USER.value:
                prompts[turn_id] = (node_id, event.get("content", ""))
            nodes[seq] = node_id
            above = node_id
        nodes_by_session[manifest.session_id] = nodes
        prompts_by_session[manifest.session_id] = prompts
        if node is top:
            current = above
    created = top.manifest.created_at
    conversation = {
        "title": top.manifest.title,
        "create_time": created,
        "update_time": created,
        "mapping": mapping,
        "current_node": current,
        "conversation_id": top.manifest.session_id,
        "id": top.manifest.session_id,
    }
    return conversation, children


def _chatgpt_message(event: dict[str, Any]) -> dict[str, Any] | None:
    """A ChatGPT ``message`` for one event, ``None`` for events ChatGPT does not show."""
    kind = event["type"]
    role, recipient, name = "assistant", "all", None
    metadata: dict[str, Any] = {}
    if kind == EventType.MESSAGE_USER.value:
        role = "user"
        content: dict[str, Any] = {"content_type": "text", "parts": [event.get("content", "")]}
    elif kind == EventType.MESSAGE_ASSISTANT.value:
        if event.get("partial"):
            return None
        content = {"content_type": "text", "parts": [event.get("content", "")]}
        metadata["model_slug"] = event.get("model")
    elif kind == EventType.TOOL_CALL.value:
        args = event.get("args")
        text = args if isinstance(args, str) else orjson.dumps(args).decode()
        content = {"content_type": "code", "language": "unknown", "text": text}
        recipient = str(event.get("name") or "tool")
    elif kind == EventType.TOOL_RESULT.value:
        role, name = "tool", event.get("name")
        output = event.get("output")
        text = output if isinstance(output, str) else orjson.dumps(output).decode()
        content = {"content_type": "execution_output", "text": text}
    else:
        return None
    return {
        "id": None,
        "author": {"role": role, "name": name, "metadata": {}},
        "create_time": event.get("ts"),
        "update_time": None,
        "content": content,
        "status": "finished_successfully",
        "end_turn": True,
        "weight": 1.0,
        "metadata": metadata,
        "recipient": recipient,
    }
