"""File ▸ Import… without a widget: another app's history into this data folder.

Qt-free, so a headless driver and the tests use it as the window does. The
import runs :func:`~branchwise.core.importing.run.import_path` in a worker
thread (a 600 MB export takes a while and must not freeze the window); its
progress reports hop to the loop thread and reach the listeners there.
Cancel asks the engine to stop before its next conversation: each
conversation is published whole, so what is left is whole conversations
only, and re-importing the same file later adds only the missing ones.

The outcome is one notice (``import_finished`` or ``import_cancelled``,
counting imported, already there and skipped conversations); a refusal
(unknown format, unreadable file) is the error's own notice. Imported trees
enter the lineage index and the sidebar rebuilds.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from branchwise.core.errors import BranchwiseError
from branchwise.core.importing.run import ImportProgress, import_path
from branchwise.core.lineage import LineageIndex
from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.changes import Changes
from branchwise.desktop.host.notices import Level, NoticeCenter


class ImportOwner(Protocol):
    """What importing needs of the host (the host itself, in the app)."""

    store: SessionStore
    notices: NoticeCenter

    @property
    def index(self) -> LineageIndex: ...

    def emit(self, changes: Changes) -> Changes: ...

    def index_all_for_search(self) -> None: ...


@dataclass(frozen=True, slots=True)
class ImportSummary:
    """What one import did.

    Attributes:
        imported: conversations created.
        existing: conversations that were already there (an earlier import).
        skipped: source conversations that could not be read as a tree.
        warnings: lines or items ignored with a warning.
        cancelled: the user stopped it (what was done stays, whole).
        session_ids: the sessions created.
        branches: how many of them are forks or sub-agents of another.
    """

    imported: int
    existing: int
    skipped: int
    warnings: int
    cancelled: bool
    session_ids: tuple[str, ...]
    branches: int = 0

    @property
    def code(self) -> str:
        """The outcome's reason code: branches are said apart from the conversations."""
        if self.cancelled:
            return "import_cancelled"
        return "import_finished_with_branches" if self.branches else "import_finished"

    @property
    def params(self) -> dict[str, Any]:
        """The outcome's numbers, as its sentence takes them."""
        numbers = {"existing": self.existing, "skipped": self.skipped}
        if self.code == "import_finished_with_branches":
            return {"count": self.imported - self.branches, "branches": self.branches, **numbers}
        return {"count": self.imported, **numbers}


ProgressListener = Callable[[ImportProgress | None], None]
"""Called on the loop thread with the progress, and ``None`` when the import ends."""


class Importing:
    """The desktop's import operation: one import at a time, cancellable.

    Args:
        owner: the host.

    Attributes:
        progress: the running import's progress; ``None`` when none runs.
    """

    def __init__(self, owner: ImportOwner) -> None:
        self._owner = owner
        self.progress: ImportProgress | None = None
        self._cancel = threading.Event()
        self._listeners: list[ProgressListener] = []

    @property
    def running(self) -> bool:
        """An import is under way."""
        return self.progress is not None

    def subscribe(self, listener: ProgressListener) -> Callable[[], None]:
        """Call ``listener`` on every progress step and at the end; returns an unsubscribe."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def cancel(self) -> None:
        """Stop the running import after the conversation it is writing."""
        if self.running:
            self._cancel.set()

    async def run(
        self, path: Path, format: str | None = None, *, initiator: object = None
    ) -> ImportSummary | None:
        """Import ``path`` (a file or a Claude Code folder); ``None`` when refused.

        Args:
            path: what the user picked.
            format: ``chatgpt``, ``claude-code``, ``open-webui`` or ``librechat``;
                ``None`` detects it.
            initiator: the view that asked (named by the changes the import reports).
        """
        owner = self._owner
        if self.running:
            owner.notices.post("import_running", Level.WARNING)
            return None
        self._cancel.clear()
        loop = asyncio.get_running_loop()

        def progressed(step: ImportProgress) -> None:  # in the worker thread
            # A closed loop (the app quit) raises RuntimeError: nobody is left to show it.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._progressed, step)

        self._set_progress(ImportProgress(read_bytes=0, total_bytes=0, conversations=0))
        try:
            report = await asyncio.to_thread(
                import_path,
                owner.store,
                Path(path),
                format=format,
                on_progress=progressed,
                cancel=self._cancel,
            )
        except BranchwiseError as exc:
            owner.notices.post(exc.code, Level.ERROR, detail=exc.message, **exc.details)
            return None
        finally:
            self._set_progress(None)
        summary = _summary(report.to_json(), cancelled=report.cancelled)
        for session_id in summary.session_ids:
            try:
                owner.index.put(owner.store.manifest(session_id))
            except BranchwiseError:
                continue  # trashed or removed meanwhile: the rebuild below re-reads the list
        owner.emit(Changes(sidebar=True, initiator=initiator))
        if summary.session_ids:
            owner.index_all_for_search()
        level = Level.WARNING if summary.cancelled else Level.SUCCESS
        owner.notices.post(summary.code, level, **summary.params)
        return summary

    def _progressed(self, step: ImportProgress) -> None:
        if self.progress is not None:  # a late report from an import that has ended
            self._set_progress(step)

    def _set_progress(self, progress: ImportProgress | None) -> None:
        self.progress = progress
        for listener in list(self._listeners):
            listener(progress)


def _summary(report: dict[str, Any], *, cancelled: bool) -> ImportSummary:
    conversations = report.get("conversations", [])
    created = tuple(c["sessionId"] for c in conversations if c.get("created"))
    return ImportSummary(
        imported=len(created),
        existing=sum(1 for c in conversations if not c.get("created")),
        skipped=len(report.get("skipped", [])),
        warnings=len(report.get("warnings", [])),
        cancelled=cancelled,
        session_ids=created,
        branches=sum(1 for c in conversations if c.get("created") and c.get("kind") != "root"),
    )
