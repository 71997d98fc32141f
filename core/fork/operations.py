"""Fork operations: what an operation id stands for, kept durably per data root.

A fork is idempotent per operation id. Before a fork publishes anything it
*reserves* the id in ``<root>/fork-index/``: the request and the child id it
will use. Publishing is the fork's last step, so after a crash a retry finds
either the published child or just the reservation, and finishes that same
child; it never makes a second one.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from branchwise.core.store.atomic import fsync_dir

INDEX_DIR = "fork-index"


@dataclass(frozen=True, slots=True)
class ForkRequest:
    """What an operation id stands for; a retry must ask for the same thing.

    Attributes:
        source_session_id: the session forked.
        turn_id: the turn forked at.
        boundary_sequence: the boundary the caller saw.
        expected_generation: the source generation the caller saw.
        child_session_id: the child id asked for (``None``: any).
    """

    source_session_id: str
    turn_id: str
    boundary_sequence: int
    expected_generation: int
    child_session_id: str | None = None

    def same_as(self, other: ForkRequest) -> bool:
        """Whether two requests ask for the same fork (an unnamed child matches any)."""
        children = (self.child_session_id, other.child_session_id)
        return (
            self.source_session_id == other.source_session_id
            and self.turn_id == other.turn_id
            and self.boundary_sequence == other.boundary_sequence
            and self.expected_generation == other.expected_generation
            and (None in children or children[0] == children[1])
        )

    def to_json(self) -> dict[str, Any]:
        """camelCase form kept in the operation index."""
        return {
            "sourceSessionId": self.source_session_id,
            "turnId": self.turn_id,
            "boundarySequence": self.boundary_sequence,
            "expectedGeneration": self.expected_generation,
            "childSessionId": self.child_session_id,
        }

    @classmethod
    def from_json(cls, data: Any) -> ForkRequest:
        """Inverse of :meth:`to_json` (raises ``KeyError``/``TypeError`` if malformed)."""
        return cls(
            source_session_id=data["sourceSessionId"],
            turn_id=data["turnId"],
            boundary_sequence=data["boundarySequence"],
            expected_generation=data["expectedGeneration"],
            child_session_id=data["childSessionId"],
        )


# -- the operation index --------------------------------------------------------


class OperationIndex:
    """Durable ``operation id -> (request, child id)`` reservations of one data root.

    One small file per operation (named by a hash of the id, so any id is a
    safe name), created exclusively with ``link``: two processes racing the
    same operation agree on one child id without a lock.
    """

    def __init__(self, root: Path) -> None:
        self.directory = Path(root) / INDEX_DIR

    def _path(self, operation_id: str) -> Path:
        digest = hashlib.sha256(operation_id.encode()).hexdigest()
        return self.directory / f"{digest}.json"

    def lookup(self, operation_id: str) -> ForkRequest | None:
        """The reservation of this operation (its request names the child), if any."""
        try:
            data = orjson.loads(self._path(operation_id).read_bytes())
            if data["operationId"] != operation_id:
                return None
            return ForkRequest.from_json(data["request"])
        except FileNotFoundError:
            return None
        except (orjson.JSONDecodeError, KeyError, TypeError):
            # A damaged reservation is only a lost hint: the child (if any) is still whole.
            return None

    def reserve(self, operation_id: str, request: ForkRequest) -> ForkRequest:
        """Durably reserve ``request`` (with its child id); return the winning reservation."""
        self.directory.mkdir(mode=0o700, exist_ok=True)
        final = self._path(operation_id)
        tmp = self.directory / f".{final.name}.{os.getpid()}-{secrets.token_hex(4)}"
        body = orjson.dumps({"operationId": operation_id, "request": request.to_json()})
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, body)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, final)
        except FileExistsError:
            winner = self.lookup(operation_id)
            if winner is not None:
                os.unlink(tmp)
                return winner
            # A damaged reservation names no child we could find; ours replaces it.
            os.replace(tmp, final)
        else:
            os.unlink(tmp)
        fsync_dir(self.directory)
        return request
