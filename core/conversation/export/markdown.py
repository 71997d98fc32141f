"""A conversation as Markdown, for people: title, lineage line, each turn's prompt and answer.

Message texts are written verbatim, so code blocks survive byte for byte; a
text that leaves a code fence open is closed after it so the next turn's
heading is not swallowed. Labels follow the active language. A ``partial``
export of a damaged log says so right under the title, before any turn.
"""

from __future__ import annotations

import re
from typing import Any

from branchwise.core.conversation.export.common import (
    ParentInfo,
    parent_info,
    readable_snapshot,
)
from branchwise.core.i18n.language import _
from branchwise.core.i18n.reasons import fill
from branchwise.core.ids import validate_session_id
from branchwise.core.store.store import SessionStore

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})", re.MULTILINE)


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


def render_markdown(store: SessionStore, session_id: str, *, partial: bool = False) -> str:
    """The session as Markdown: title, lineage line, each turn's prompt and answer.

    Args:
        partial: export what precedes a damaged log's damage, under a visible note.

    Raises:
        CorruptLog: the log is damaged and ``partial`` is false.
        InvalidSessionId, SessionNotFound, InvalidManifest: from the store.
    """
    snapshot = readable_snapshot(store, validate_session_id(session_id), partial=partial)
    projection = snapshot.projection
    parts = [f"# {snapshot.title or _('Untitled conversation')}"]
    if snapshot.scan.corruption is not None:
        seq = snapshot.scan.corruption.details.get("afterSeq", "?")
        note = _(
            "Incomplete export: this conversation's log is damaged after event {seq}; "
            "everything written after the damage is missing."
        )
        parts.append(f"> **{fill(note, {'seq': seq})}**")
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
