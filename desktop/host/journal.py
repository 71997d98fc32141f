"""``fork-operations.json``: the desktop host's journal of fork operations.

A fork click is a small distributed operation (local store or remote server,
then a tab). The journal makes it survive crashes (docs/architecture.md): a ``pending``
record is durable before anything is written or sent, a ``completed`` one
remembers the child until its tab has opened, and only then is the record
removed. Every change replaces the whole document atomically (removing the
last record removes the file), so a crash leaves the old or the new journal,
never a torn one. Additions are durable before they return; a removal need
not be (:meth:`OperationsJournal.remove`).

The document is versioned. A journal that does not parse, or is of a version
this build does not know, is moved aside (``.bad-<timestamp>``) rather than
guessed at; a record of the wrong shape is dropped and reported, never fatal.
No Qt here: the journal is plain Python so the host runs headless.

A record's request is core's :class:`~branchwise.core.fork.operations.ForkRequest`,
stored in the journal's own shape ``{"sourceSessionId", "generation", "turnId",
"boundarySequence"}`` with a ``requestHash`` of it (:func:`request_to_json`,
:func:`request_hash`): journals written before the one request type still load.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeGuard

import orjson

from branchwise.core.errors import InvalidManifest, InvalidSessionId
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.ids import validate_session_id
from branchwise.core.store.atomic import atomic_write_bytes, fsync_dir
from branchwise.core.store.manifest import BranchOrigin

JOURNAL_NAME = "fork-operations.json"
JOURNAL_VERSION = 1
OPERATION_KIND = "fork"
MAX_ID_LENGTH = 128


class OperationState(StrEnum):
    """Where a journalled operation stands."""

    PENDING = "pending"
    COMPLETED = "completed"


def request_to_json(request: ForkRequest) -> dict[str, Any]:
    """A click's request as the journal stores it (camelCase; a click names no child).

    Raises:
        ValueError: the request names a child (the journal has no field for it).
    """
    if request.child_session_id is not None:
        raise ValueError("the journal keeps requests for a new child only")
    stored: dict[str, Any] = {
        "sourceSessionId": request.source_session_id,
        "generation": request.expected_generation,
        "turnId": request.turn_id,
        "boundarySequence": request.boundary_sequence,
    }
    if request.origin is not None:  # an edit or a regenerate (kept out of plain forks' hash)
        stored["origin"] = request.origin.to_json()
    return stored


def request_hash(request: ForkRequest) -> str:
    """A stable digest of the stored request, kept beside it to detect hand-edited records."""
    canonical = orjson.dumps(request_to_json(request), option=orjson.OPT_SORT_KEYS)
    return "sha256:" + hashlib.sha256(canonical).hexdigest()


def request_from_json(data: object) -> ForkRequest:
    """Validate a stored request (inverse of :func:`request_to_json`).

    Raises:
        InvalidRecord: any field missing or of the wrong shape.
    """
    if not isinstance(data, dict):
        raise InvalidRecord("request is not an object")
    source, turn = data.get("sourceSessionId"), data.get("turnId")
    generation, boundary = data.get("generation"), data.get("boundarySequence")
    try:
        validate_session_id(source)
    except InvalidSessionId as exc:
        raise InvalidRecord("request names a malformed source session") from exc
    at_start = turn is None  # an edit or regenerate of the first turn forks at the start
    if not at_start and (not isinstance(turn, str) or not 0 < len(turn) <= MAX_ID_LENGTH):
        raise InvalidRecord("request turnId is malformed")
    if not _is_int(generation) or generation < 1:
        raise InvalidRecord("request generation is malformed")
    if not _is_int(boundary) or boundary < (0 if at_start else 1) or (at_start and boundary):
        raise InvalidRecord("request boundarySequence is malformed")
    try:
        origin = BranchOrigin.from_json(data.get("origin"))
    except InvalidManifest as exc:
        raise InvalidRecord("request origin is malformed") from exc
    if at_start and origin is None:
        raise InvalidRecord("a request at the start must be an edit or a regenerate")
    return ForkRequest(
        source_session_id=str(source),
        turn_id=turn,
        boundary_sequence=boundary,
        expected_generation=generation,
        origin=origin,
    )


class InvalidRecord(ValueError):
    """A journal record of the wrong shape (dropped and reported, never fatal)."""


@dataclass(frozen=True, slots=True)
class OperationRecord:
    """One journalled fork operation.

    Attributes:
        operation_id: the idempotency key sent with every attempt.
        request: what was asked (a new child: no child id).
        state: ``pending`` until the child's id is known, then ``completed``.
        child_session_id: the child, once known.
        error: the last uncertain failure, for diagnosis (not a refusal).
        created_at: when the click happened (Unix seconds).
        updated_at: when the record last changed.
        kind: always ``fork`` in version 1.
    """

    operation_id: str
    request: ForkRequest
    state: OperationState
    child_session_id: str | None = None
    error: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    kind: str = OPERATION_KIND

    def completed(self, child_session_id: str, now: float) -> OperationRecord:
        """This record once the child exists."""
        return dataclasses.replace(
            self,
            state=OperationState.COMPLETED,
            child_session_id=child_session_id,
            error=None,
            updated_at=now,
        )

    def with_error(self, error: str, now: float) -> OperationRecord:
        """This record noting an uncertain failure (it stays as it was otherwise)."""
        return dataclasses.replace(self, error=error, updated_at=now)

    def to_json(self) -> dict[str, Any]:
        """The stored camelCase form."""
        data: dict[str, Any] = {
            "operationId": self.operation_id,
            "kind": self.kind,
            "request": request_to_json(self.request),
            "requestHash": request_hash(self.request),
            "state": self.state.value,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
        }
        if self.child_session_id is not None:
            data["childSessionId"] = self.child_session_id
        if self.error is not None:
            data["error"] = self.error
        return data

    @classmethod
    def from_json(cls, data: object) -> OperationRecord:
        """Validate one stored record.

        Raises:
            InvalidRecord: wrong shape, unknown kind or state, a hash that
                does not match the request, or a completed record without a
                well-formed child id.
        """
        if not isinstance(data, dict):
            raise InvalidRecord("record is not an object")
        op = data.get("operationId")
        if not isinstance(op, str) or not 0 < len(op) <= MAX_ID_LENGTH:
            raise InvalidRecord("record operationId is malformed")
        if data.get("kind") != OPERATION_KIND:
            raise InvalidRecord(f"record kind {data.get('kind')!r} is unknown")
        request = request_from_json(data.get("request"))
        if data.get("requestHash") != request_hash(request):
            raise InvalidRecord("record requestHash does not match its request")
        try:
            state = OperationState(str(data.get("state")))
        except ValueError as exc:
            raise InvalidRecord(f"record state {data.get('state')!r} is unknown") from exc
        child = data.get("childSessionId")
        if child is not None or state is OperationState.COMPLETED:
            try:
                validate_session_id(child)
            except InvalidSessionId as exc:
                raise InvalidRecord("record childSessionId is malformed") from exc
        error = data.get("error")
        if not (error is None or isinstance(error, str)):
            raise InvalidRecord("record error is malformed")
        created, updated = data.get("createdAt"), data.get("updatedAt")
        if not _is_number(created) or not _is_number(updated):
            raise InvalidRecord("record timestamps are malformed")
        return cls(op, request, state, child, error, float(created), float(updated))


@dataclass(frozen=True, slots=True)
class DroppedRecord:
    """A record the journal could not use.

    Attributes:
        operation_id: its id if it had a readable one.
        reason: why it was dropped (``invalid_record``, ``duplicate_operation``,
            ``source_missing``, ``child_missing``).
        detail: an English explanation for logs and the notice's detail.
    """

    operation_id: str | None
    reason: str
    detail: str


@dataclass(frozen=True, slots=True)
class JournalLoad:
    """What loading the journal found besides its records.

    Attributes:
        moved_aside: where a journal that could not be read was moved, if any.
        reset_reason: ``corrupt``, ``unknown_version`` or ``unreadable``.
        detail: an English explanation of the reset, for the notice's detail.
        dropped: records that were removed for their shape.
    """

    moved_aside: Path | None = None
    reset_reason: str | None = None
    detail: str | None = None
    dropped: tuple[DroppedRecord, ...] = ()

    @property
    def was_reset(self) -> bool:
        """Whether the whole document was set aside and the journal started empty."""
        return self.reset_reason is not None


class OperationsJournal:
    """The journal document of one data root, kept in memory and on disk.

    Every mutation rewrites the whole document with the atomic-replace recipe
    before returning, so a caller that continues after a :meth:`put` knows the
    change is durable (a :meth:`remove` may not be). Methods are thread-safe
    (the coordinator runs them in a worker thread so the UI loop never waits
    on ``fsync``).

    Args:
        root: the data root holding ``fork-operations.json``.
        clock: wall clock for the ``.bad-<timestamp>`` name.
    """

    def __init__(self, root: Path, clock: Callable[[], float] = time.time) -> None:
        self.root = Path(root)
        self.path = self.root / JOURNAL_NAME
        self._clock = clock
        self._lock = threading.Lock()
        self._records: dict[str, OperationRecord] = {}

    # -- reading -----------------------------------------------------------

    def load(self) -> JournalLoad:
        """Read the document, moving aside one that cannot be trusted.

        A missing file is an empty journal. Invalid and duplicate records are
        dropped and the cleaned document is written back, so they are
        reported once, not on every start.
        """
        with self._lock:
            self._records = {}
            try:
                raw = self.path.read_bytes()
            except FileNotFoundError:
                return JournalLoad()
            except OSError as exc:
                return JournalLoad(self._move_aside(), "unreadable", str(exc))
            try:
                document = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                return JournalLoad(self._move_aside(), "corrupt", str(exc))
            version = document.get("version") if isinstance(document, dict) else None
            if not _is_int(version):
                return JournalLoad(self._move_aside(), "corrupt", "no version number")
            if version != JOURNAL_VERSION:
                return JournalLoad(self._move_aside(), "unknown_version", f"version {version}")
            operations = document.get("operations")
            if not isinstance(operations, list):
                return JournalLoad(self._move_aside(), "corrupt", "operations is not a list")
            dropped = self._accept(operations)
            if dropped:
                self._write_locked()
            return JournalLoad(dropped=tuple(dropped))

    def _accept(self, operations: list[object]) -> list[DroppedRecord]:
        dropped = []
        for item in operations:
            op = item.get("operationId") if isinstance(item, dict) else None
            op = op if isinstance(op, str) and len(op) <= MAX_ID_LENGTH else None
            try:
                record = OperationRecord.from_json(item)
            except InvalidRecord as exc:
                dropped.append(DroppedRecord(op, "invalid_record", str(exc)))
                continue
            if record.operation_id in self._records:
                dropped.append(
                    DroppedRecord(op, "duplicate_operation", "operationId appears twice")
                )
                continue
            self._records[record.operation_id] = record
        return dropped

    def _move_aside(self) -> Path | None:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(self._clock()))
        target = self.path.with_name(f"{JOURNAL_NAME}.bad-{stamp}")
        n = 1
        while target.exists():
            n += 1
            target = self.path.with_name(f"{JOURNAL_NAME}.bad-{stamp}-{n}")
        try:
            os.rename(self.path, target)
            fsync_dir(self.root)
        except OSError:
            return None
        return target

    def records(self) -> tuple[OperationRecord, ...]:
        """Every record, oldest click first."""
        with self._lock:
            return tuple(sorted(self._records.values(), key=lambda r: r.created_at))

    def get(self, operation_id: str) -> OperationRecord | None:
        """The record of one operation, if it is journalled."""
        with self._lock:
            return self._records.get(operation_id)

    def find(self, request: ForkRequest) -> OperationRecord | None:
        """The (oldest) record of an operation for exactly this request."""
        with self._lock:
            matches = [r for r in self._records.values() if r.request == request]
        return min(matches, key=lambda r: r.created_at) if matches else None

    # -- writing -----------------------------------------------------------

    def put(self, record: OperationRecord) -> None:
        """Add or replace a record, durably, before returning.

        Raises:
            OSError: the document could not be written; memory is unchanged.
        """
        with self._lock:
            previous = self._records.get(record.operation_id)
            self._records[record.operation_id] = record
            try:
                self._write_locked()
            except BaseException:
                if previous is None:
                    del self._records[record.operation_id]
                else:
                    self._records[record.operation_id] = previous
                raise

    def remove(self, operation_id: str) -> None:
        """Remove a record (acknowledge or refuse) before returning.

        Removing the last record (a click's usual case) unlinks the document
        without an fsync: nothing is ordered after a removal, and a crash that
        undoes it brings the old document back whole, the state a crash just
        before the removal leaves, which recovery already resolves (a
        completed record re-opens its child, whose tab may be open already).
        While other records remain, the document is rewritten durably as
        usual: a rename a crash could leave pointing at unsynced bytes would
        lose them.

        Raises:
            OSError: the document could not be written; memory is unchanged.
        """
        with self._lock:
            previous = self._records.pop(operation_id, None)
            if previous is None:
                return
            try:
                if self._records:
                    self._write_locked()
                else:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(self.path)
            except BaseException:
                self._records[operation_id] = previous
                raise

    def _write_locked(self) -> None:
        ordered = sorted(self._records.values(), key=lambda r: r.created_at)
        document = {"version": JOURNAL_VERSION, "operations": [r.to_json() for r in ordered]}
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        atomic_write_bytes(self.path, orjson.dumps(document, option=orjson.OPT_INDENT_2))


def read_journal_document(root: Path) -> dict[str, Any] | None:
    """The raw journal document under ``root`` (for tests and diagnostics)."""
    with contextlib.suppress(FileNotFoundError):
        document = orjson.loads((Path(root) / JOURNAL_NAME).read_bytes())
        return document if isinstance(document, dict) else None
    return None


def journalled_operation_ids(root: Path) -> frozenset[str] | None:
    """Every operation id the journal under ``root`` names, read straight from disk.

    For pruning the operation index (an unfinished operation keeps its
    reservation), so it is generous: any ``operationId`` string in the list
    counts, valid record or not. ``None`` when the journal exists but cannot
    be read as a document: nothing can be known to be unnamed, so nothing is
    pruned (loading it moves it aside and says so).
    """
    try:
        document = orjson.loads((Path(root) / JOURNAL_NAME).read_bytes())
    except FileNotFoundError:
        return frozenset()
    except (OSError, orjson.JSONDecodeError):
        return None
    operations = document.get("operations") if isinstance(document, dict) else None
    if not isinstance(operations, list):
        return None
    return frozenset(
        item["operationId"]
        for item in operations
        if isinstance(item, dict) and isinstance(item.get("operationId"), str)
    )


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)
