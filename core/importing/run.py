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
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from branchwise.core.errors import StaleSource
from branchwise.core.importing.formats import importer_for
from branchwise.core.importing.plan import ImportPlan, plan_tree
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

    Trees are read and planned here, one at a time, and published by a few
    worker threads (:data:`PUBLISHERS`), one tree each, so the fsyncs of one
    conversation overlap the reading and planning of the next (an import is
    bound by fsync latency, which releases the GIL). At most
    :data:`IN_FLIGHT` trees are held at once, so memory stays bounded; the
    report keeps the source's order.

    Args:
        store: where the conversations go.
        path: a file, an export ``.zip`` or a folder (as the format reads).
        format: the ``--format`` name; ``None`` detects it.
        on_progress: called (on the calling thread) after each source tree is
            read and after each tree's conversations are published.
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
    stop = cancel if cancel is not None else threading.Event()
    state = _State()

    def report_progress() -> None:
        if on_progress is not None:
            on_progress(
                ImportProgress(state.read_bytes, state.total_bytes, len(state.conversations))
            )

    records = importer.read(source)
    pending: deque[Future[_TreeResult]] = deque()
    with ThreadPoolExecutor(PUBLISHERS, thread_name_prefix="import") as pool:
        try:
            for record in records:
                if isinstance(record, Progress):
                    state.read_bytes, state.total_bytes = record.read_bytes, record.total_bytes
                    report_progress()
                elif isinstance(record, SourceWarning):
                    state.warnings.append(record.message)
                elif isinstance(record, SourceSkip):
                    state.skipped.append(record)
                elif isinstance(record, SourceTree):
                    if stop.is_set():
                        break
                    plan = plan_tree(record)
                    pending.append(pool.submit(_publish_tree, store, plan, record, stop))
                    while len(pending) >= IN_FLIGHT or (pending and pending[0].done()):
                        state.take(pending.popleft().result())
                        report_progress()
            while pending:
                state.take(pending.popleft().result())
                report_progress()
        except BaseException:
            stop.set()  # the workers finish the conversation in hand and stop
            raise
        finally:
            close = getattr(records, "close", None)
            if close is not None:
                close()
    cancelled = cancel is not None and cancel.is_set()
    if cancelled:
        state.warnings.append(
            f"the import was cancelled after {len(state.conversations)} conversations; "
            "importing the same file again adds the rest"
        )
    return ImportReport(
        importer.FORMAT,
        tuple(state.conversations),
        tuple(state.skipped),
        tuple(state.warnings),
        cancelled,
    )


PUBLISHERS = 4
"""Worker threads publishing trees (each conversation is still published whole, by one)."""
IN_FLIGHT = 8
"""Most trees read and planned but not yet collected: bounds the memory an import holds."""


@dataclass(slots=True)
class _TreeResult:
    conversations: list[ImportedConversation] = field(default_factory=list)
    skipped: list[SourceSkip] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _State:
    conversations: list[ImportedConversation] = field(default_factory=list)
    skipped: list[SourceSkip] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    read_bytes: int = 0
    total_bytes: int = 0

    def take(self, result: _TreeResult) -> None:
        self.conversations += result.conversations
        self.skipped += result.skipped
        self.warnings += result.warnings


def _publish_tree(
    store: SessionStore, plan: ImportPlan, tree: SourceTree, stop: threading.Event
) -> _TreeResult:
    """Publish one planned tree (on a worker thread), stopping between conversations."""
    result = _TreeResult(warnings=list(plan.warnings))
    where = tree.location or tree.id
    if not plan.conversations:
        result.skipped.append(SourceSkip(where, "the conversation has no visible messages"))
        return result
    try:
        for published in TreePublisher(store, plan).publish():
            if isinstance(published, SourceSkip):
                result.skipped.append(published)
            else:
                result.conversations.append(published)
            if stop.is_set():
                break
    except StaleSource as exc:  # an earlier import's session was rewritten since
        result.skipped.append(SourceSkip(where, exc.message))
    return result
