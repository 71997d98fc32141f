"""A conversation as another app stored it: a tree of items, before it becomes turns.

Every importer (ChatGPT, Claude Code, Open WebUI, LibreChat) reads its own
format into :class:`SourceTree` values and nothing else; the import planner
turns any such tree into Branchwise conversations (a root, its forks at their
fork points, and children for sub-agents) by one set of rules. So the import rules
(docs/cli.md, "import") — hidden material dropped, the main path, fork points, fork at start —
live in one place, and an importer only answers "what did the source say".

An importer hands over what the source holds, including hidden material
(``kind=None``), dangling parents and cycles: repairing the tree is the
planner's job, so every format gets the same repairs and the same warnings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from branchwise.core.conversation.attachments import PreparedAttachment

ItemKind = Literal["user", "assistant", "tool_call", "tool_result"]
"""What a visible item is; a Branchwise turn starts at every ``user`` item."""

MainRule = Literal["latest_leaf", "newest_sibling"]
"""How to find the main path when the source names no current leaf.

``latest_leaf``: the visible leaf with the latest time (ChatGPT, Open WebUI,
Claude Code). ``newest_sibling``: from the root down, the newest child at
every level (LibreChat).
"""


@dataclass(frozen=True, slots=True)
class SourceItem:
    """One node of the source's tree.

    Attributes:
        id: the source's node id, unique within its :class:`SourceTree`.
        parent: the source's parent id; ``None`` for a root. A parent id that
            names no item makes this item a root (with a warning).
        kind: what the item shows, or ``None`` for hidden material (system
            prompts, thoughts, context records, metadata): dropped, and its
            visible children attach to the nearest visible ancestor.
        text: the visible text (for a tool call, a short description; for a
            tool result, its output).
        time: seconds since the epoch, or ``None`` when the source has none.
        model: the model that wrote an assistant item, when known.
        call_id: pairs a ``tool_result`` with its ``tool_call``.
        tool_name: the tool a ``tool_call`` invokes.
        arguments: a ``tool_call``'s arguments as the source wrote them
            (JSON text where the source has JSON).
        spawns: for a ``tool_call`` that started a sub-agent, the
            :attr:`SourceTree.id` of the child tree it spawned.
        attachments: for a ``user`` item, the files the export itself held
            (read and judged, not stored yet); the publisher stores them
            before the commit that refers to them.
    """

    id: str
    parent: str | None
    kind: ItemKind | None
    text: str = ""
    time: float | None = None
    model: str | None = None
    call_id: str | None = None
    tool_name: str | None = None
    arguments: str | None = None
    spawns: str | None = None
    attachments: tuple[PreparedAttachment, ...] = ()


@dataclass(frozen=True, slots=True)
class SourceTree:
    """One conversation of the source, with every branch it kept.

    Attributes:
        format: ``"chatgpt"``, ``"claude-code"``, ``"open-webui"`` or ``"librechat"``.
        id: the source's conversation id, stable across exports of the same
            history (re-importing the same tree must find it by this id).
        title: the source's title ("" when it has none).
        created: the conversation's creation time, seconds since the epoch.
        items: every node, in any order.
        current: the leaf the user last saw (``current_node``, ``currentId``,
            or an importer's own choice such as Claude Code's latest
            non-sidechain leaf of the file); ``None`` falls back to
            :attr:`main_rule`. A ``current`` that is hidden or missing falls
            back the same way.
        main_rule: how to choose the main path without ``current``.
        children: sub-agent trees (Claude Code sidechains); each is spawned
            by the item of this tree whose ``spawns`` names its id, and
            becomes a child conversation of the turn holding that item.
        location: where the tree came from (file path, or path plus index),
            for warnings and ``skipped`` entries.
    """

    format: str
    id: str
    title: str
    created: float | None
    items: tuple[SourceItem, ...]
    current: str | None = None
    main_rule: MainRule = "latest_leaf"
    children: tuple[SourceTree, ...] = ()
    location: str = ""


@dataclass(frozen=True, slots=True)
class SourceSkip:
    """A conversation the importer could not read as a tree (rule 6: skip, don't crash)."""

    source: str
    reason: str


@dataclass(frozen=True, slots=True)
class SourceWarning:
    """Something the importer ignored and went on from (a torn line, a non-UTF-8 byte run)."""

    message: str


@dataclass(frozen=True, slots=True)
class Progress:
    """How far an importer has read, for a progress bar: bytes of the input read so far."""

    read_bytes: int
    total_bytes: int


SourceRecord = SourceTree | SourceSkip | SourceWarning | Progress
"""What an importer yields, one at a time, so a 600 MB export is never held whole.

Each importer module (``core/importing/<format>.py``) exposes ``FORMAT`` (its
``--format`` name), ``sniff(path) -> bool`` (a cheap look at the first bytes or
the folder layout, for auto-detection) and ``read(path) -> Iterator[SourceRecord]``.
"""
