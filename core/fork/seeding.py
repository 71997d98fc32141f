"""A fork's child built from links: the parent's segments as seeds bounded at the cut.

A fork costs the same at any size (docs/storage.md, "Forks"): it finds the segment
holding the boundary by ``firstSeq``, binary-searches that segment's ``.idx``
for ``lastSeq == boundary``, and reads and verifies that one frame
(:func:`plan_from_index`). Only when the index cannot answer does the caller
replay, and :func:`plan_from_log` turns the replay's boundary frame into the
same plan. The child is then built in a temporary folder
(:func:`publish_seeded_child`): every source segment up to the one holding the
boundary is hard-linked as ``seed-NNN.seg`` (the kernel's link count is the
reference count; no garbage collector), its sidecars beside it, the last one
bounded at the boundary frame's end; where the file system refuses a link
(``EXDEV``, ``EMLINK``, ``EPERM``, ``ENOTSUP``: FAT/exFAT, another device, too
many links) the bytes up to the bound are copied and fsynced instead. The
child's own first segment holds its ``session/fork`` commit; the manifest
lists the seeds; one rename publishes it.
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import os
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from branchwise.core.conversation.settings import ConversationSettings
from branchwise.core.fs.atomic import copy_durably, fsync_dir, write_durably, write_new
from branchwise.core.fs.safe_open import open_no_follow, refuse_link
from branchwise.core.log.frames import Frame, encode_frame, iter_frames
from branchwise.core.log.range_check import check_linked_range
from branchwise.core.log.segments import Piece, SessionLog, log_pieces, read_frame, segment_name
from branchwise.core.log.sidecars import (
    CLOSES_TURN,
    HOLDS_CHECKPOINT,
    SIDECAR_SUFFIXES,
    entries_for,
    find_record,
    frame_crc,
    read_blob_entries,
    read_seal,
    sidecar_bytes,
    write_sidecars,
)
from branchwise.core.projection.events import EventType
from branchwise.core.projection.snapshot_cache import SNAPSHOT_FILE, inheritable_snapshot
from branchwise.core.projection.turns import TurnTracker
from branchwise.core.store.manifest import Manifest, Seed, manifest_bytes, save_manifest
from branchwise.core.store.publish import building_session, link_blobs
from branchwise.core.store.store import SessionStore

LINK_REFUSED = frozenset({errno.EXDEV, errno.EMLINK, errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP})
"""Why a file system may refuse a hard link; the fork then copies the bytes instead."""

_TURN_END = EventType.TURN_END.value
_CHECKPOINT = EventType.CHECKPOINT.value


@dataclass(frozen=True, slots=True)
class SeedSource:
    """One source file the child inherits, up to a verified frame end.

    Attributes:
        path: the source's file (an own segment, a seed, or ``events.log``).
        first_commit: commit of its first frame.
        first_seq: seq of its first event.
        end: byte offset just past the last inherited frame.
        end_commit: that frame's commit.
        last_crc: that frame's payload CRC32.
    """

    path: Path
    first_commit: int
    first_seq: int
    end: int
    end_commit: int
    last_crc: int


@dataclass(frozen=True, slots=True)
class ForkPlan:
    """What a child is built from.

    Attributes:
        seeds: the files to link, in order (empty for a fork at the start).
        boundary: the last inherited seq (the child's ``seedLength``).
        end_commit: the last inherited commit.
        blobs: blob names the inherited checkpoints need (``None``: a
            sidecar could not say, so every blob of the source is linked).
        settings: the conversation settings a fork at the start carries
            (a later fork inherits them with the prefix).
        bound_durable: the bytes up to the last seed's bound are known to be
            durable: fsynced when the plan was made (a plan kept for many
            forks), or vouched for by the ``.idx`` record the plan was read
            from (see :func:`plan_from_index`). No child then fsyncs them again.
    """

    seeds: tuple[SeedSource, ...]
    boundary: int
    end_commit: int
    blobs: tuple[str, ...] | None
    settings: ConversationSettings | None = None
    bound_durable: bool = False


# -- bounds of whole pieces -------------------------------------------------------------


def _bounded_by_seal(piece: Piece) -> SeedSource | None:
    """A sealed own segment's bound from its seal record, checked against the frame."""
    seal = read_seal(piece.path)
    if seal is None:
        return None
    try:
        size = os.lstat(piece.path).st_size
    except OSError:
        return None
    if seal.end != size:
        return None
    found = read_frame(piece.path, seal.offset, seal.end)
    if found is None or found[0].commit != seal.commit or found[1] != seal.frame_crc:
        return None
    return SeedSource(
        piece.path, piece.first_commit, piece.first_seq, seal.end, seal.commit, seal.frame_crc
    )


def _bounded_by_scan(piece: Piece) -> SeedSource | None:
    """A whole segment's bound found by reading it (the seal record is missing or stale)."""
    try:
        fd = open_no_follow(piece.path, os.O_RDONLY)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read()
    finally:
        os.close(fd)
    frames = list(iter_frames(data, first_commit=piece.first_commit, first_seq=piece.first_seq))
    last = frames[-1] if frames else None
    if last is None or last.end != len(data):
        return None
    return SeedSource(
        piece.path,
        piece.first_commit,
        piece.first_seq,
        last.end,
        last.commit,
        frame_crc(data, last.offset),
    )


_FileKey = tuple[str, int, int, int, int]
_sealed: dict[_FileKey, tuple[SeedSource, tuple[str, ...] | None]] = {}
_sealed_lock = threading.Lock()
_SEALED_KEPT = 4096


def _file_key(path: Path) -> _FileKey | None:
    """A file's path, identity, size and mtime: what a sealed segment's facts are kept by."""
    try:
        status = os.lstat(path)
    except OSError:
        return None
    return (str(path), status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)


def _whole_piece(piece: Piece) -> tuple[SeedSource, tuple[str, ...] | None] | None:
    """A piece before the one holding the boundary, inherited whole, and its blob names.

    A seed keeps its bound. A sealed own segment never changes, so what was
    worked out for it (its bound, the blobs its ``.blobs`` lists) is kept for
    the process by path, inode, size and mtime: a fork then costs one
    ``lstat`` per sealed segment it links, not a read of its sidecars.
    """
    if piece.seed is not None:
        seed = piece.seed
        source = SeedSource(
            piece.path, seed.first_commit, seed.first_seq, seed.end, seed.end_commit, seed.last_crc
        )
        return source, _blob_names((source,))
    key = _file_key(piece.path)
    if key is not None:
        with _sealed_lock:
            kept = _sealed.get(key)
        if kept is not None:
            return kept
    found = _bounded_by_seal(piece) or _bounded_by_scan(piece)
    if found is None:
        return None
    facts = found, _blob_names((found,))
    if key is not None and key == _file_key(piece.path):
        with _sealed_lock:
            if len(_sealed) >= _SEALED_KEPT:
                _sealed.clear()
            _sealed[key] = facts
    return facts


# -- plans ---------------------------------------------------------------------------


def _blob_names(seeds: Iterable[SeedSource]) -> tuple[str, ...] | None:
    names: list[str] = []
    for seed in seeds:
        listed = read_blob_entries(seed.path, seed.end_commit)
        if listed is None:
            return None
        names.extend(listed)
    return tuple(dict.fromkeys(names))


def plan_from_index(
    directory: Path, manifest: Manifest, boundary: int, turn_id: str
) -> ForkPlan | None:
    """The plan, from the ``.idx`` of the segment holding the boundary and one frame read.

    The bytes every seed links are checked by checksum
    (:func:`~branchwise.core.log.range_check.check_linked_range`, once per
    file and size in a process).

    ``None`` when the index cannot vouch for an available target at exactly
    this boundary (no index, no record, a flag that makes it unavailable, a
    frame that does not match): the caller then replays, which either finds
    it acceptable after all or explains the refusal precisely.

    Raises:
        CorruptLog: a frame in the bytes a seed would link is damaged.
    """
    pieces = [p for p in log_pieces(directory, manifest) if p.first_seq <= boundary]
    if not pieces:
        return None
    piece = pieces[-1]
    found = find_record(piece.path, boundary)
    if found is None:
        return None
    record, _ = found
    if record.flags & ~HOLDS_CHECKPOINT != CLOSES_TURN:
        return None  # a refusal to explain (spilling commit, open authority) or a seal
    if piece.seed is not None and record.end > piece.seed.end:
        return None
    read = read_frame(piece.path, record.offset, record.end)
    if read is None:
        return None
    frame, crc = read
    if (
        crc != record.frame_crc
        or frame.commit != record.commit
        or not frame.events
        or frame.events[-1].get("seq") != boundary
        or not any(e.get("type") == _TURN_END and e.get("turnId") == turn_id for e in frame.events)
    ):
        return None
    seeds: list[SeedSource] = []
    blobs: list[str] | None = []
    for earlier in pieces[:-1]:
        whole = _whole_piece(earlier)
        if whole is None:
            return None
        seeds.append(whole[0])
        if blobs is not None and whole[1] is not None:
            blobs.extend(whole[1])
        else:
            blobs = None
    last = SeedSource(
        piece.path, piece.first_commit, piece.first_seq, record.end, record.commit, crc
    )
    seeds.append(last)
    listed = _blob_names((last,))
    names = None if blobs is None or listed is None else tuple(dict.fromkeys([*blobs, *listed]))
    for seed in seeds:  # once per file and size: a damaged source makes no child damaged from birth
        check_linked_range(seed.path, seed.end)
    # The record is the proof the bound is durable: a writer appends an index
    # record only after its frame's fsync, and rebuilds one only after an fsync
    # of the segment (SegmentWriter's open), so the child needs no fsync of its own.
    return ForkPlan(tuple(seeds), boundary, record.commit, names, bound_durable=True)


def plan_from_log(log: SessionLog, boundary_frame: Frame, boundary: int) -> ForkPlan:
    """The plan from a replayed log whose ``boundary_frame`` (virtual offsets) ends the cut."""
    frames = log.scan.frames
    seeds: list[SeedSource] = []
    blobs: list[str] = []
    for frame in frames:
        if frame.offset > boundary_frame.offset:
            break
        for event in frame.events:
            if event["type"] == _CHECKPOINT and isinstance(event.get("blobs"), list):
                blobs.extend(str(name) for name in event["blobs"])
    cut = boundary_frame.end
    for index, piece in enumerate(log.pieces):
        start = log.starts[index]
        if start >= cut:
            break
        stop = min(cut, log.starts[index + 1] if index + 1 < len(log.pieces) else len(log.data))
        if stop <= start:
            continue
        last = frames[bisect.bisect_left(frames, stop, key=lambda f: f.end)]
        seeds.append(
            SeedSource(
                piece.path,
                piece.first_commit,
                piece.first_seq,
                stop - start,
                last.commit,
                frame_crc(log.data, last.offset),
            )
        )
    return ForkPlan(tuple(seeds), boundary, boundary_frame.commit, tuple(dict.fromkeys(blobs)))


# -- building the child ------------------------------------------------------------------


def plan_at_boundary(log: SessionLog, boundary: int) -> ForkPlan | None:
    """The plan of a cut after the commit ending at seq ``boundary`` of a scanned log.

    ``None`` when no whole commit ends there (the log was rewritten since the
    caller learned the boundary). For a caller without the log's turn index.
    """
    for frame in log.scan.frames:
        if frame.events and frame.events[-1]["seq"] == boundary:
            return plan_from_log(log, frame, boundary)
    return None


def link_or_copy(src: Path, dst: Path, length: int | None = None) -> bool:
    """Hard-link ``src`` as ``dst``; where links are refused, copy (up to ``length``) and fsync.

    Returns whether it was linked. Neither path follows a symbolic link.

    Raises:
        UnsafePath: ``src`` is a symbolic link.
        OSError: anything but a refused link (``ENOSPC`` included).
    """
    refuse_link(src)
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError as exc:
        if exc.errno not in LINK_REFUSED:
            raise
        copy_durably(src, dst, length)
        return False
    return True


def fsync_bound(path: Path) -> None:
    """Make a seed's bytes durable (never through a symbolic link)."""
    fd = open_no_follow(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def publish_seeded_child(
    store: SessionStore,
    manifest: Manifest,
    plan: ForkPlan,
    own_events: list[dict[str, Any]],
    source_blobs: Path,
    *,
    later_commits: Sequence[list[dict[str, Any]]] = (),
    tracker: TurnTracker | None = None,
) -> Manifest:
    """Build the child in a temporary folder and publish it with one rename.

    ``own_events`` (stamped from ``plan.boundary + 1``) are the child's first
    own commit. Returns the manifest written (with its seed list). See
    :func:`build_seeded_child` for ``later_commits`` and ``tracker``.

    Raises:
        SessionExists: a session with this id was published first.
        DiskFull: no space at any step; nothing is left behind.
    """
    with building_session(store, manifest.session_id) as tmp:
        return build_seeded_child(
            tmp,
            manifest,
            plan,
            own_events,
            source_blobs,
            later_commits=later_commits,
            tracker=tracker,
        )


def build_seeded_child(
    tmp: Path,
    manifest: Manifest,
    plan: ForkPlan,
    own_events: list[dict[str, Any]],
    source_blobs: Path,
    *,
    later_commits: Sequence[list[dict[str, Any]]] = (),
    tracker: TurnTracker | None = None,
    durable: bool = True,
    index_from: int = 0,
) -> Manifest:
    """Fill the unpublished folder ``tmp`` with the child; return the manifest written.

    ``later_commits`` (stamped on from the first own commit) follow it in the
    same own segment: an imported branch is published whole, its turns
    included. ``tracker``, holding the inherited turns, lets the segment's
    turn index list those turns, so the branch's own turns fork by the index
    too; without one (a fork's single own commit, which closes no turn) the
    segment's sidecars hold no record, and are written anyway: they are
    exactly what the child's writer would build on its first open, which
    then rewrites (and fsyncs) nothing. Sidecars are caches and are never
    fsynced here: a crash that loses or truncates them only makes the first
    writer open rebuild them. ``durable=False`` skips every fsync: for a
    batch whose publisher syncs the file system once before its renames
    (:func:`~branchwise.core.store.publish.publish_batch`). ``index_from``:
    an own segment with a ``tracker`` smaller than this many bytes gets no
    sidecars (a cache whose three files cost more to create than a scan of a
    small segment; the first writer open rebuilds them).
    """
    log_dir = tmp / manifest.log_dir
    log_dir.mkdir(mode=0o700)
    seeds = []
    for number, source in enumerate(plan.seeds):
        name = f"seed-{number:03d}"
        link_or_copy(source.path, log_dir / f"{name}.seg", source.end)
        for suffix in SIDECAR_SUFFIXES:  # caches: a missing one only costs speed
            with contextlib.suppress(FileNotFoundError):
                link_or_copy(source.path.with_suffix(suffix), log_dir / f"{name}{suffix}")
        seeds.append(
            Seed(
                f"{name}.seg",
                source.first_commit,
                source.first_seq,
                source.end,
                source.end_commit,
                source.last_crc,
            )
        )
    if seeds:  # a cache: the source's projection snapshot, if it covers only seeds
        snapshot = inheritable_snapshot(
            plan.seeds[0].path.parent, sum(s.end for s in plan.seeds), len(plan.seeds)
        )
        if snapshot is not None:
            with contextlib.suppress(OSError):
                os.link(snapshot, log_dir / SNAPSHOT_FILE, follow_symlinks=False)
    if seeds and durable and not plan.bound_durable:
        fsync_bound(log_dir / seeds[-1].file)  # durable before the manifest names it
    own = log_dir / segment_name(plan.end_commit + 1, plan.boundary + 1)
    data = bytearray()
    entries = []
    for commit, events in enumerate([own_events, *later_commits], start=plan.end_commit + 1):
        offset = len(data)
        data += encode_frame(commit, events)
        if tracker is not None:
            tracker.apply(events)
            found = entries_for(commit, events, offset, len(data), frame_crc(data, offset), tracker)
            if found:
                entries.append((found, commit))
    indexed = tracker is None or len(data) >= index_from
    if durable:
        write_durably(own, data)
        if indexed:
            write_sidecars(own, entries, durable=False)
        fsync_dir(log_dir)
    else:
        write_new(own, data)
        if indexed:
            for suffix, sidecar in sidecar_bytes(entries).items():
                write_new(own.with_suffix(suffix), sidecar)
    if plan.blobs is None:
        names: Iterable[str] = _all_blobs(source_blobs)
    else:
        names = plan.blobs
    names = list(names)
    if names:
        link_blobs(source_blobs, tmp / "blobs", names)
    written = manifest.with_changes(seed=tuple(seeds))
    if durable:
        save_manifest(tmp, written)  # fsyncs tmp
    else:
        write_new(tmp / "manifest.json", manifest_bytes(written))
    return written


def _all_blobs(folder: Path) -> list[str]:
    try:
        return sorted(os.listdir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []
