"""``merge-operations.json``: merges the desktop promised but could not write yet.

Bringing a branch's conclusion back writes into the parent's log, which only
one process may write at a time. When another process holds the parent (a
CLI turn, a second app on a copy of the folder), the merge is not refused and
forgotten: a ``pending`` record is made durable *before* any write is tried,
and the app retries it at start and every little while until it is written.
The core merge is idempotent per operation id, so a retry after a crash at
any point (before the commit, after it, before the record was removed) leaves
exactly one ``session/merge`` in the parent.

Every change replaces the whole document atomically (mode 0600); a document
that does not parse, or of another version, is moved aside and the app goes on
with an empty journal. Qt-free.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from branchwise.core.errors import BranchwiseError
from branchwise.core.fs.atomic import atomic_write_bytes
from branchwise.core.ids import validate_session_id

JOURNAL_NAME = "merge-operations.json"
JOURNAL_VERSION = 1


@dataclass(frozen=True, slots=True)
class PendingMerge:
    """A merge to write: what ``merge_back`` needs, under its operation id."""

    operation_id: str
    child_session_id: str
    parent_session_id: str
    content: str
    kind: str
    created: float

    def to_json(self) -> dict[str, Any]:
        """The journal's shape."""
        return {
            "operationId": self.operation_id,
            "childSessionId": self.child_session_id,
            "parentSessionId": self.parent_session_id,
            "content": self.content,
            "kind": self.kind,
            "created": self.created,
        }

    @classmethod
    def from_json(cls, data: object) -> PendingMerge | None:
        """A record, or ``None`` for one of the wrong shape (dropped, never fatal)."""
        if not isinstance(data, dict):
            return None
        try:
            fields = (
                data["operationId"],
                data["childSessionId"],
                data["parentSessionId"],
                data["content"],
                data["kind"],
            )
            created = float(data.get("created", 0.0))
        except (KeyError, TypeError, ValueError):
            return None
        if not all(isinstance(value, str) and value for value in fields):
            return None
        try:
            validate_session_id(fields[1])
            validate_session_id(fields[2])
        except BranchwiseError:
            return None
        return cls(*fields, created)


class MergeJournal:
    """The pending merges of one data root (thread-safe; writes are atomic)."""

    def __init__(self, root: Path) -> None:
        self.path = Path(root) / JOURNAL_NAME
        self._lock = threading.Lock()
        self._records = self._load()

    def _load(self) -> dict[str, PendingMerge]:
        try:
            data = orjson.loads(self.path.read_bytes())
        except FileNotFoundError:
            return {}
        except (OSError, orjson.JSONDecodeError):
            self._move_aside()
            return {}
        if not isinstance(data, dict) or data.get("version") != JOURNAL_VERSION:
            self._move_aside()
            return {}
        records = [PendingMerge.from_json(item) for item in data.get("operations", [])]
        return {r.operation_id: r for r in records if r is not None}

    def _move_aside(self) -> None:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        with contextlib.suppress(OSError):
            os.replace(self.path, self.path.with_name(f"{self.path.name}.bad-{stamp}"))

    def records(self) -> tuple[PendingMerge, ...]:
        """The pending merges, oldest first."""
        with self._lock:
            return tuple(sorted(self._records.values(), key=lambda r: r.created))

    def put(self, record: PendingMerge) -> None:
        """Record a merge as pending, durably (raises ``OSError``/``DiskFull`` if it cannot)."""
        with self._lock:
            records = {**self._records, record.operation_id: record}
            self._write(records)
            self._records = records

    def remove(self, operation_id: str) -> None:
        """Forget a merge that was written (or refused for good)."""
        with self._lock:
            if operation_id not in self._records:
                return
            records = {k: v for k, v in self._records.items() if k != operation_id}
            self._write(records)
            self._records = records

    def _write(self, records: dict[str, PendingMerge]) -> None:
        document = {
            "version": JOURNAL_VERSION,
            "operations": [r.to_json() for r in records.values()],
        }
        atomic_write_bytes(self.path, orjson.dumps(document))
