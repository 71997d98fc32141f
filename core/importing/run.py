"""Importing a file or folder: read, plan and publish, one source tree at a time.

:func:`import_path` is the one entry point (the CLI's ``import`` command and
the desktop's File ▸ Import… both call it). It streams the importer's
records, so memory holds one source tree at a time; plans each tree
(:mod:`~branchwise.core.importing.plan`); and publishes its conversations
whole (:mod:`~branchwise.core.importing.publish`). Progress is reported
after every tree and every conversation; a cancel is honoured between
conversations, so a cancelled import leaves whole conversations only, and a
later import of the same file finishes the rest (creating nothing twice).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from branchwise.core.errors import StaleSource
from branchwise.core.importing.formats import importer_for
from branchwise.core.importing.plan import plan_tree
from branchwise.core.importing.publish import ImportedConversation, TreePublisher
from branchwise.core.importing.source import Progress, SourceSkip, SourceTree, SourceWarning
from branchwise.core.store.store import SessionStore


@dataclass(frozen=True, slots=True)
class ImportProgress:
    """How far an import is: bytes of the input read and conversations published so far."""

    read_bytes: int
    total_bytes: int
    conversations: int


@dataclass(frozen=True, slots=True)
class ImportReport:
    """What an import did.

    Attributes:
        format: the format read.
        conversations: every conversation of the imported trees, new or found
            from an earlier import (``created``), in publishing order.
        skipped: source conversations that could not be imported, and why.
        warnings: what was repaired or ignored on the way.
        cancelled: the import stopped at a cancel (between conversations).
    """

    format: str
    conversations: tuple[ImportedConversation, ...]
    skipped: tuple[SourceSkip, ...]
    warnings: tuple[str, ...]
    cancelled: bool = False

    @property
    def created(self) -> int:
        """How many conversations this import published."""
        return sum(1 for c in self.conversations if c.created)

    def to_json(self) -> dict[str, Any]:
        """The CLI's last line: ``{"conversations", "skipped", "warnings"}``."""
        return {
            "conversations": [c.to_json() for c in self.conversations],
            "skipped": [{"source": s.source, "reason": s.reason} for s in self.skipped],
            "warnings": list(self.warnings),
        }


def import_path(
    store: SessionStore,
    path: Path | str,
    *,
    format: str | None = None,
    on_progress: Callable[[ImportProgress], None] | None = None,
    cancel: threading.Event | None = None,
) -> ImportReport:
    """Import every conversation of the export at ``path`` into ``store``.

    Args:
        store: where the conversations go.
        path: a file, an export ``.zip`` or a folder (as the format reads).
        format: the ``--format`` name; ``None`` detects it.
        on_progress: called after each source tree and each published conversation.
        cancel: checked between conversations; once set, the import stops and
            the report says ``cancelled`` (and a warning says so).

    Raises:
        ImportNotFound, UnknownImportFormat, MalformedImport, UnsafeArchive:
            the export cannot be read at all (nothing was imported).
        DiskFull, ReadOnlyDataFolder: the store refuses; conversations already
            published stay, each whole.
    """
    source = Path(path)
    importer = importer_for(source, format)
    conversations: list[ImportedConversation] = []
    skipped: list[SourceSkip] = []
    warnings: list[str] = []
    read_bytes = total_bytes = 0
    cancelled = False

    def report_progress() -> None:
        if on_progress is not None:
            on_progress(ImportProgress(read_bytes, total_bytes, len(conversations)))

    records = importer.read(source)
    try:
        for record in records:
            if isinstance(record, Progress):
                read_bytes, total_bytes = record.read_bytes, record.total_bytes
                report_progress()
            elif isinstance(record, SourceWarning):
                warnings.append(record.message)
            elif isinstance(record, SourceSkip):
                skipped.append(record)
            elif isinstance(record, SourceTree):
                cancelled = _import_tree(
                    store, record, conversations, skipped, warnings, cancel, report_progress
                )
                if cancelled:
                    break
    finally:
        close = getattr(records, "close", None)
        if close is not None:
            close()
    if cancelled:
        warnings.append(
            f"the import was cancelled after {len(conversations)} conversations; "
            "importing the same file again adds the rest"
        )
    return ImportReport(
        importer.FORMAT, tuple(conversations), tuple(skipped), tuple(warnings), cancelled
    )


def _import_tree(
    store: SessionStore,
    tree: SourceTree,
    conversations: list[ImportedConversation],
    skipped: list[SourceSkip],
    warnings: list[str],
    cancel: threading.Event | None,
    report_progress: Callable[[], None],
) -> bool:
    """Plan and publish one tree; whether a cancel stopped it."""
    if cancel is not None and cancel.is_set():
        return True
    plan = plan_tree(tree)
    warnings.extend(plan.warnings)
    where = tree.location or tree.id
    if not plan.conversations:
        skipped.append(SourceSkip(where, "the conversation has no visible messages"))
        return False
    try:
        for published in TreePublisher(store, plan).publish():
            conversations.append(published)
            report_progress()
            if cancel is not None and cancel.is_set():
                return True
    except StaleSource as exc:  # an earlier import's session was rewritten since
        skipped.append(SourceSkip(where, exc.message))
    return False
