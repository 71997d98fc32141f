"""Fork operations: the one fork request, and what an operation id stands for.

:class:`ForkRequest` is the one value a fork travels as: a click on a
transcript row carries it (:mod:`~branchwise.desktop.host.rows`), the desktop
journal stores it (:mod:`~branchwise.desktop.host.journal`, in its own JSON
shape), and :func:`~branchwise.core.fork.engine.fork` takes it.

A fork is idempotent per operation id. Before a fork publishes anything it
*reserves* the id in ``<root>/fork-index/``: the request and the child id it
will use. Publishing is the fork's last step, so after a crash a retry finds
either the published child or just the reservation, and finishes that same
child; it never makes a second one. A fork that fails without publishing (a
full disk) withdraws the reservation it made, so it leaves nothing behind.
Each file keeps its own JSON shape, written by the module that owns the file:
the reservation's is here.

Reservations are kept for :data:`RESERVATION_HORIZON` (30 days), then
:meth:`OperationIndex.prune` removes them at the desktop's start, unless the
desktop journal still names their operation (an unfinished branch click keeps
its reservation however old). An operation id is therefore an idempotency key
for 30 days: a retry after that with no child id of its own, whether the
first attempt published its child or crashed before publishing, is a new
operation and makes a new child. A request that names its child id stays
idempotent for good, since the child's manifest records its operation. Pruning
removes each file with one ``unlink`` (a crash leaves whole reservations),
never touches a file younger than the horizon (another process may be
reserving right now), and fsyncs the folder once.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import stat
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from branchwise.core.errors import InvalidManifest
from branchwise.core.fs.atomic import disk_full_as_typed, fsync_dir, write_durably, write_new
from branchwise.core.store.manifest import BranchOrigin

INDEX_DIR = "fork-index"

RESERVATION_HORIZON = 30 * 24 * 3600.0
"""Seconds a reservation is kept before :meth:`OperationIndex.prune` may remove it."""

_RESERVATION = re.compile(r"[0-9a-f]{64}\.json")
_TEMPORARY = re.compile(r"\.[0-9a-f]{64}\.json\.\d+-[0-9a-f]{8}")


@dataclass(frozen=True, slots=True)
class ForkRequest:
    """A fork asked for: the turn of a source session to branch from, as the caller saw it.

    A retry of an operation must ask for the same thing (:meth:`same_as`). A
    click on the same fork target is the same request, so the desktop reuses
    the journalled operation for it.

    Attributes:
        source_session_id: the session forked.
        turn_id: the turn forked at; ``None`` forks at the start (nothing inherited, as
            editing or regenerating the first turn needs).
        boundary_sequence: the boundary the caller saw (last seq of the turn's closing
            commit; 0 at the start).
        expected_generation: the source generation the caller saw.
        child_session_id: the child id asked for (``None``: any).
        origin: for an edit or a regenerate, the turn asked again and its prompt; the
            child is published with that prompt as its first own turn, already started.
    """

    source_session_id: str
    turn_id: str | None
    boundary_sequence: int
    expected_generation: int
    child_session_id: str | None = None
    origin: BranchOrigin | None = None

    def same_as(self, other: ForkRequest) -> bool:
        """Whether two requests ask for the same fork (an unnamed child matches any)."""
        children = (self.child_session_id, other.child_session_id)
        return (
            self.source_session_id == other.source_session_id
            and self.turn_id == other.turn_id
            and self.boundary_sequence == other.boundary_sequence
            and self.expected_generation == other.expected_generation
            and (None in children or children[0] == children[1])
            and self.origin == other.origin
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
            return _request_from_json(data["request"])
        except FileNotFoundError:
            return None
        except (orjson.JSONDecodeError, KeyError, TypeError):
            # A damaged reservation is only a lost hint: the child (if any) is still whole.
            return None

    def reserve(
        self, operation_id: str, request: ForkRequest, *, durable: bool = True
    ) -> ForkRequest:
        """Durably reserve ``request`` (with its child id); return the winning reservation.

        The winner is ``request`` itself (the same object) when this call made
        the reservation. ``durable=False`` skips both fsyncs: for forks built
        together (:func:`~branchwise.core.fork.engine.fork_together`), whose
        one file-system sync makes their reservations durable before any child
        is published.

        Raises:
            DiskFull: no space at any step; neither a reservation nor a
                temporary file is left behind.
        """
        final = self._path(operation_id)
        tmp = self.directory / f".{final.name}.{os.getpid()}-{secrets.token_hex(4)}"
        body = orjson.dumps({"operationId": operation_id, "request": _request_json(request)})
        linked = False
        with disk_full_as_typed(
            "the disk is full: the branch could not be started; nothing was saved",
            operationId=operation_id,
        ):
            self.directory.mkdir(mode=0o700, exist_ok=True)
            try:
                if durable:
                    write_durably(tmp, body)
                else:
                    write_new(tmp, body)
                try:
                    os.link(tmp, final)
                except FileExistsError:
                    winner = self.lookup(operation_id)
                    if winner is not None:
                        return winner
                    # A damaged reservation names no child we could find; ours replaces it.
                    os.replace(tmp, final)
                linked = True
                if durable:
                    fsync_dir(self.directory)
            except BaseException:
                if linked:  # ours, but not durably: no fork may go on from it
                    with contextlib.suppress(OSError):
                        os.unlink(final)
                raise
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
        return request

    def prune(
        self,
        now: float,
        horizon: float = RESERVATION_HORIZON,
        keep: Collection[str] = frozenset(),
    ) -> tuple[PrunedReservation, ...]:
        """Remove reservations (and dead temporary files) older than ``horizon`` seconds.

        One ``scandir`` and one ``lstat`` per file; only a file old enough to
        go is read. A file is judged by its modification time (a reservation
        is written once), is re-checked right before its ``unlink`` so one a
        concurrent :meth:`reserve` just replaced stays, and goes with one
        ``unlink``: a crash at any point leaves only whole reservations.
        Files that are not the index's own, and symlinks, are left alone.

        Args:
            now: the current wall-clock time (Unix seconds).
            horizon: how old a file must be to go.
            keep: operation ids whose reservations stay however old (the
                desktop journal's unfinished operations).

        Returns:
            What was removed, in directory order.

        Raises:
            OSError: the folder could not be read or a file not removed
                (what was removed until then is durable).
        """
        kept = {self._path(operation_id).name for operation_id in keep}
        removed: list[PrunedReservation] = []
        try:
            entries = os.scandir(self.directory)
        except FileNotFoundError:
            return ()
        try:
            with entries:
                for entry in entries:
                    name = entry.name
                    temporary = _TEMPORARY.fullmatch(name) is not None
                    if name in kept or not (temporary or _RESERVATION.fullmatch(name)):
                        continue
                    pruned = self._prune_one(entry, now - horizon, temporary)
                    if pruned is not None:
                        removed.append(pruned)
        finally:
            if removed:
                fsync_dir(self.directory)
        return tuple(removed)

    def _prune_one(
        self, entry: os.DirEntry[str], cutoff: float, temporary: bool
    ) -> PrunedReservation | None:
        try:
            seen = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            return None
        if not stat.S_ISREG(seen.st_mode) or seen.st_mtime > cutoff:
            return None
        pruned = PrunedReservation(entry.name, temporary, None, None)
        if not temporary:
            pruned = _describe(entry.name, Path(entry.path))
        try:
            now_there = os.lstat(entry.path)
            if (now_there.st_ino, now_there.st_mtime_ns) != (seen.st_ino, seen.st_mtime_ns):
                return None  # replaced since it was judged: a fresh reservation
            os.unlink(entry.path)
        except FileNotFoundError:
            return None  # another process pruned it
        return pruned

    def release(self, operation_id: str, request: ForkRequest) -> None:
        """Withdraw the reservation of ``request`` after its fork failed without publishing.

        Only a reservation that still names ``request`` is removed. Best effort:
        a reservation that stays (or comes back after a crash) only makes a
        retry finish the same child.
        """
        if self.lookup(operation_id) != request:
            return
        with contextlib.suppress(OSError):
            os.unlink(self._path(operation_id))
            fsync_dir(self.directory)


@dataclass(frozen=True, slots=True)
class PrunedReservation:
    """A file :meth:`OperationIndex.prune` removed from ``fork-index/``.

    Attributes:
        name: its file name.
        temporary: a reservation's temporary file, left by a process that died writing it.
        operation_id: the operation it reserved (``None``: temporary or damaged).
        child_session_id: the child it named (``None``: temporary or damaged).
    """

    name: str
    temporary: bool
    operation_id: str | None
    child_session_id: str | None


def _describe(name: str, path: Path) -> PrunedReservation:
    """What a reservation file says, for the report (a damaged one says nothing)."""
    try:
        data = orjson.loads(path.read_bytes())
        operation_id = data["operationId"]
        child = _request_from_json(data["request"]).child_session_id
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError):
        return PrunedReservation(name, False, None, None)
    if not isinstance(operation_id, str):
        return PrunedReservation(name, False, None, None)
    return PrunedReservation(name, False, operation_id, child if isinstance(child, str) else None)


def _request_json(request: ForkRequest) -> dict[str, Any]:
    """The request as a reservation stores it (camelCase, the child id included)."""
    origin = {"origin": request.origin.to_json()} if request.origin is not None else {}
    return {
        **origin,
        "sourceSessionId": request.source_session_id,
        "turnId": request.turn_id,
        "boundarySequence": request.boundary_sequence,
        "expectedGeneration": request.expected_generation,
        "childSessionId": request.child_session_id,
    }


def _request_from_json(data: Any) -> ForkRequest:
    """Inverse of :func:`_request_json` (raises ``KeyError``/``TypeError`` if malformed)."""
    return ForkRequest(
        source_session_id=data["sourceSessionId"],
        turn_id=data["turnId"],
        boundary_sequence=data["boundarySequence"],
        expected_generation=data["expectedGeneration"],
        child_session_id=data["childSessionId"],
        origin=_origin_from_json(data.get("origin")),
    )


def _origin_from_json(data: Any) -> BranchOrigin | None:
    try:
        return BranchOrigin.from_json(data)
    except InvalidManifest as exc:
        raise TypeError(exc.message) from None
