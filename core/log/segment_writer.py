"""Appending to a segmented log (format 2): the active segment, rolls, sidecars, break-off.

Only the last own segment grows (invariant 1); the writer starts a new one
when the active segment reaches :data:`~branchwise.core.log.segments.ROLL_BYTES`
or its link count reaches :data:`~branchwise.core.log.segments.ROLL_LINKS`
(forks link it, and NTFS allows 1,023 links). Each commit is one write and
one fsync, as in format 1 (:class:`~branchwise.core.log.writer.LogWriter`);
the sidecar records follow it with plain writes, fsynced at roll and close.

Opening never truncates shared bytes (invariant 2): a torn tail of an active
segment that a fork links (``st_nlink > 1``) is *broken off*: the good bytes
are copied to a temporary file, fsynced, renamed over the own name, and the
folder fsynced, so the children keep the old inode untouched. A torn tail of
an unshared segment is cut in place, after a copy of the cut bytes is saved,
as in format 1.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from branchwise.core.fs.atomic import copy_durably, fsync_dir
from branchwise.core.fs.safe_open import open_no_follow
from branchwise.core.log.scan import LogScan, TornTail
from branchwise.core.log.segments import ROLL_BYTES, ROLL_LINKS, SessionLog, segment_name
from branchwise.core.log.sidecars import (
    SEALS_SEGMENT,
    CommitEntries,
    IndexRecord,
    SidecarWriter,
    TurnRules,
    entries_for,
    frame_crc,
    write_sidecars,
)
from branchwise.core.log.writer import OS_FILE_OPS, FileOps, LogWriter, save_cut_bytes


class SegmentWriter:
    """The appender of a segmented log. Only the holder of the writer lease makes one.

    Args:
        log_dir: the session's own log folder.
        session_log: a fresh scan of the session's log (corruption refused).
        active_entries: the sidecar entries of the active segment's frames,
            computed by the caller's replay; its sidecars are rewritten when
            they do not say exactly this.
        ops: the system calls appends use (tests inject failures).
        roll_bytes: the size at which a new segment is started.
        sidecar_base: the active segment's sidecar bytes for the frames before
            ``active_entries`` (when a projection snapshot stood for them).
        untimed: the event types stamped without ``ts`` (the projection's
            :data:`~branchwise.core.projection.events.UNTIMED_EVENTS`).

    Attributes:
        cut_tail: the torn tail cut (or broken off) on open, if any.
        cut_copy: the file holding exactly the bytes that were cut.
        broke_off: whether the torn tail was in a shared segment, which was copied.

    Raises:
        CorruptLog: the scan found corruption.
    """

    def __init__(
        self,
        log_dir: Path,
        session_log: SessionLog,
        active_entries: list[tuple[CommitEntries, int]],
        ops: FileOps = OS_FILE_OPS,
        *,
        roll_bytes: int = ROLL_BYTES,
        sidecar_base: Mapping[str, bytes] | None = None,
        untimed: frozenset[str],
    ) -> None:
        scan = session_log.scan
        if scan.corruption is not None:
            raise scan.corruption
        self._dir = log_dir
        self._ops = ops
        self._untimed = untimed
        self._roll_bytes = roll_bytes
        self.cut_tail: TornTail | None = None
        self.cut_copy: Path | None = None
        self.broke_off = False
        last = (scan.last_commit, scan.last_seq)
        active = session_log.active
        if active is None:
            path = self._new_segment(*last)
            self._log = LogWriter(path, LogScan(), ops, untimed=untimed, after=last)
            active_entries = []
        else:
            path = active.path
            base = session_log.active_start
            local = LogScan(end=max(0, scan.end - base))
            if scan.torn_tail is not None:
                torn = scan.torn_tail
                local.torn_tail = TornTail(torn.offset - base, torn.length)
                if os.lstat(path).st_nlink > 1:
                    self._break_off(path, local.end)
                    self.cut_tail, local.torn_tail = local.torn_tail, None
                    self.broke_off = True
            self._log = LogWriter(path, local, ops, untimed=untimed, after=last)
            if self._log.cut_tail is not None:
                self.cut_tail, self.cut_copy = self._log.cut_tail, self._log.cut_copy
        self._path = path
        # The active segment's last frame (what a roll seals it at), if it holds one.
        self._last: tuple[int, int, int, int, int] | None = None
        if (
            active is not None
            and scan.frames
            and scan.frames[-1].offset >= session_log.active_start
        ):
            last_frame = scan.frames[-1]
            base = session_log.active_start
            crc = frame_crc(session_log.data, last_frame.offset)
            self._last = (
                last_frame.offset - base,
                last_frame.end - base,
                crc,
                last_frame.commit,
                scan.last_seq,
            )
        elif (
            active is not None
            and not scan.frames
            and scan.resumed is not None
            and scan.resumed.frame_offset >= session_log.active_start
        ):
            # Resumed after a projection snapshot that ends inside the active segment.
            resumed, base = scan.resumed, session_log.active_start
            self._last = (
                resumed.frame_offset - base,
                resumed.end - base,
                resumed.frame_crc,
                resumed.commit,
                resumed.seq,
            )
        _refresh_sidecars(path, active_entries, sidecar_base if active is not None else None)
        self._sidecars = SidecarWriter(path)

    def _break_off(self, path: Path, good: int) -> None:
        """Give the own name a private copy of the good bytes; children keep the old inode."""
        fd = open_no_follow(path, os.O_RDONLY)
        try:
            self.cut_copy = save_cut_bytes(path, fd, good)
        finally:
            os.close(fd)
        tmp = path.with_name(f".{path.name}.break-{os.getpid()}")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        copy_durably(path, tmp, good)
        os.replace(tmp, path)
        fsync_dir(path.parent)

    def _new_segment(self, last_commit: int, last_seq: int) -> Path:
        """Create the empty segment that follows commit ``last_commit``, its name durable."""
        path = self._dir / segment_name(last_commit + 1, last_seq + 1)
        fd = open_no_follow(path, os.O_WRONLY | os.O_CREAT, 0o600)
        os.close(fd)
        fsync_dir(self._dir)
        return path

    def moved_to(self, log_dir: Path) -> None:
        """The log folder was renamed (a new session published): later rolls go there."""
        self._dir = log_dir
        self._path = log_dir / self._path.name
        self._sidecars.segment = self._path

    @property
    def last_commit(self) -> int:
        """Number of the last durable commit."""
        return self._log.last_commit

    def append(self, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Commit ``events`` durably (one write, one fsync), rolling first when due.

        Raises what :meth:`LogWriter.append` raises.
        """
        if self._log.size and self._roll_due():
            self.roll()
        return self._log.append(events)

    def _roll_due(self) -> bool:
        if self._log.size >= self._roll_bytes:
            return True
        try:
            return os.fstat(self._log.fileno()).st_nlink >= ROLL_LINKS
        except OSError:
            return False

    def roll(self) -> None:
        """Seal the active segment (its sidecars fsynced) and start a new, empty one."""
        if self._last is not None:
            offset, end, crc, commit, last_seq = self._last
            self._sidecars.seal(IndexRecord(last_seq, commit, offset, end, crc, SEALS_SEGMENT))
        self._sidecars.sync()
        self._sidecars.close()
        last = (self._log.last_commit, self._log.last_seq)
        path = self._new_segment(*last)
        old = self._log
        self._log = LogWriter(path, LogScan(), self._ops, untimed=self._untimed, after=last)
        old.close()
        self._path = path
        self._sidecars = SidecarWriter(path)
        self._last = None

    def note_commit(self, committed: list[dict[str, Any]], tracker: TurnRules) -> None:
        """Append the sidecar records of the commit just made (``tracker`` has applied it)."""
        frame = self._log.last_frame
        if frame is None:
            return
        offset, end, crc = frame
        commit = self._log.last_commit
        self._last = (offset, end, crc, commit, self._log.last_seq)
        if not self._sidecars.broken:  # a writer that gave up its caches builds no entries
            self._sidecars.add(entries_for(commit, committed, offset, end, crc, tracker), commit)

    def close(self) -> None:
        """Fsync the sidecars and close everything (idempotent)."""
        self._sidecars.sync()
        self._sidecars.close()
        self._log.close()


def _refresh_sidecars(
    segment: Path, entries: list[tuple[CommitEntries, int]], base: Mapping[str, bytes] | None
) -> None:
    """Rewrite a segment's sidecars unless they already say exactly ``entries`` (best effort).

    A rewrite fsyncs the segment first: ``entries`` come from a scan, which
    also sees frames a crashed writer wrote but never synced.
    """
    with contextlib.suppress(OSError):
        write_sidecars(segment, entries, only_changed=True, base=base, sync_segment=True)
