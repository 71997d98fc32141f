"""A conversation as Markdown, for people: title, lineage line, each turn's prompt and answer.

A prompt's files follow it as links into a folder beside the document
(images inline). Message texts are written verbatim, so code blocks survive byte for byte; a
text that leaves a code fence open is closed after it so the next turn's
heading is not swallowed. Labels follow the active language. A ``partial``
export of a damaged log says so right under the title, before any turn.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

from branchwise.core.conversation.export.common import (
    ParentInfo,
    parent_info,
    readable_snapshot,
    write_export,
)
from branchwise.core.errors import AttachmentMissing
from branchwise.core.i18n.language import _
from branchwise.core.i18n.reasons import fill
from branchwise.core.ids import validate_session_id
from branchwise.core.projection.attachments import AttachmentRef
from branchwise.core.store.attachments import BlobStore
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


def attachment_file_name(ref: AttachmentRef) -> str:
    """The name an exported attachment is written under: hash prefix, then its own name.

    The prefix keeps two files of the same name apart; the name is reduced
    to one path component, so an export never writes outside its folder.
    """
    name = re.sub(r"[^\w.\- ]", "_", ref.name.replace("/", "_").replace("\\", "_")).strip(". ")
    return f"{ref.sha256[:12]}-{name or 'file'}"


def attachment_links(refs: tuple[AttachmentRef, ...], folder: str) -> str:
    """A prompt's files as Markdown: images inline, other files as links, in ``folder``."""
    lines = []
    for ref in refs:
        target = f"{folder}/{quote(attachment_file_name(ref))}"
        label = ref.name.replace("]", "\\]")
        lines.append(f"![{label}]({target})" if ref.is_image else f"[{label}]({target})")
    return "\n\n".join(lines)


def write_attachment_files(store: SessionStore, session_id: str, folder: Path) -> list[str]:
    """Write every file the session's prompts carry into ``folder`` (created); their names.

    Each is written atomically under :func:`attachment_file_name`; one whose
    stored bytes are gone or damaged is left out (its link then leads
    nowhere, as the transcript says "attachment missing").

    Raises:
        DiskFull, ExportNotWritten: the folder cannot be written.
    """
    refs = store.read(validate_session_id(session_id), every_frame=False).projection
    unique = {ref.sha256: ref for ref in refs.attachment_refs()}
    if not unique:
        return []
    blobs = BlobStore(store.root)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for ref in unique.values():
        try:
            data = blobs.read(ref.sha256)
        except AttachmentMissing:
            continue
        name = attachment_file_name(ref)
        write_export(folder / name, data, overwrite=True)
        written.append(name)
    return written


def render_markdown(
    store: SessionStore,
    session_id: str,
    *,
    partial: bool = False,
    attachments_folder: str = "attachments",
) -> str:
    """The session as Markdown: title, lineage line, each turn's prompt and answer.

    Args:
        partial: export what precedes a damaged log's damage, under a visible note.
        attachments_folder: where the links to a prompt's files point, relative
            to the document (:func:`write_attachment_files` writes them there).

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
            if message.attachments:
                parts.append(attachment_links(message.attachments, attachments_folder))
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
