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

import dataclasses
import shutil
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
from branchwise.core.importing.publish import (
    BuiltConversation,
    ImportedConversation,
    TreePublisher,
)
from branchwise.core.importing.source import Progress, SourceSkip, SourceTree, SourceWarning
from branchwise.core.store.publish import publish_batch
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

    Trees are read and planned here, one at a time, and built by a few
    worker threads (:data:`PUBLISHERS`), one tree each, in unpublished
    folders with no fsync, so file creation overlaps the reading and planning
    of the next tree. Every :data:`BATCH` conversations, the built ones are
    published together (:func:`~branchwise.core.store.publish.publish_batch`):
    one file-system sync, the renames, one fsync of the sessions folder, so
    an import pays a few syncs a second instead of five fsyncs per
    conversation; a conversation is reported only once it is durable. At
    most :data:`IN_FLIGHT` trees are held at once, so memory stays bounded;
    the report keeps the source's order.

    Args:
        store: where the conversations go.
        path: a file, an export ``.zip`` or a folder (as the format reads).
        format: the ``--format`` name; ``None`` detects it.
        on_progress: called (on the calling thread) after each source tree is
            read and after each batch of conversations is published.
        cancel: checked between conversations; once set, the import stops
            (publishing what is built, each whole) and the report says
            ``cancelled`` (and a warning says so).

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
    batch: list[_TreeResult] = []  # built, not yet published

    def take(result: _TreeResult) -> None:
        batch.append(result)
        if sum(len(r.built) for r in batch) >= BATCH:
            publish()

    def publish() -> None:
        built = [(b, b.folder) for r in batch for b in r.built if b.folder is not None]
        outcome = publish_batch(store, [(folder, b.conversation.session_id) for b, folder in built])
        lost = {id(b) for (b, _), published in zip(built, outcome, strict=True) if not published}
        for result in batch:
            state.take(result, lost)
        batch.clear()
        report_progress()

    try:
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
                        pending.append(pool.submit(_build_tree, store, plan, record, stop))
                        while len(pending) >= IN_FLIGHT or (pending and pending[0].done()):
                            take(pending.popleft().result())
                while pending:
                    take(pending.popleft().result())
                publish()
            except BaseException:
                stop.set()  # the workers finish the conversation in hand and stop
                raise
            finally:
                close = getattr(records, "close", None)
                if close is not None:
                    close()
    except BaseException:
        # nothing of an unpublished batch is left behind (the pool has finished by now)
        leftovers = list(batch)
        leftovers += [f.result() for f in pending if not f.cancelled() and f.exception() is None]
        for result in leftovers:
            result.discard()
        raise
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
"""Worker threads building trees (each conversation is still built whole, by one)."""
BATCH = 256
"""Conversations built before they are published together with one file-system sync.

Big enough that the sync (one journal commit) costs little per conversation,
small enough that progress and a cancel come about once a second.
"""
IN_FLIGHT = 8
"""Most trees read and planned but not yet collected: bounds the memory an import holds."""


@dataclass(slots=True)
class _TreeResult:
    built: list[BuiltConversation] = field(default_factory=list)
    skipped: list[SourceSkip] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def discard(self) -> None:
        """Remove the unpublished folders (an import that failed publishes none of them)."""
        for built in self.built:
            if built.folder is not None:
                shutil.rmtree(built.folder, ignore_errors=True)


@dataclass(slots=True)
class _State:
    conversations: list[ImportedConversation] = field(default_factory=list)
    skipped: list[SourceSkip] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    read_bytes: int = 0
    total_bytes: int = 0

    def take(self, result: _TreeResult, lost: set[int]) -> None:
        """Take a published tree; ``lost``: ids of its builds another import published first."""
        for built in result.built:
            conversation = built.conversation
            if id(built) in lost:
                conversation = dataclasses.replace(conversation, created=False)
            self.conversations.append(conversation)
        self.skipped += result.skipped
        self.warnings += result.warnings


def _build_tree(
    store: SessionStore, plan: ImportPlan, tree: SourceTree, stop: threading.Event
) -> _TreeResult:
    """Build one planned tree's conversations (on a worker thread), stopping between them."""
    result = _TreeResult(warnings=list(plan.warnings))
    where = tree.location or tree.id
    if not plan.conversations:
        result.skipped.append(SourceSkip(where, "the conversation has no visible messages"))
        return result
    try:
        for built in TreePublisher(store, plan).build():
            if isinstance(built, SourceSkip):
                result.skipped.append(built)
            else:
                result.built.append(built)
            if stop.is_set():
                break
    except StaleSource as exc:  # an earlier import's session was rewritten since
        result.skipped.append(SourceSkip(where, exc.message))
    except BaseException:
        result.discard()
        raise
    return result
