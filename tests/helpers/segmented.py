"""Laying a session's log out as format 2 by hand, to test readers independently of the writer.

:func:`split_log` rewrites a closed format-1 session as own segments cut
before the given commits; :func:`seeded_child` builds a child whose prefix is a
hard link of a parent's segment bounded at a frame end.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from branchwise.core.log.frames import HEADER, encode_frame
from branchwise.core.log.scan import LogScan, scan_bytes
from branchwise.core.log.segments import read_session_log, segment_name
from branchwise.core.log.sidecars import TurnRow, parse_turn_rows, read_turn_file
from branchwise.core.store.manifest import Manifest, ParentLink, Seed, load_manifest, save_manifest
from branchwise.core.store.store import SessionStore


def read_turn_rows(segment: Path) -> list[TurnRow] | None:
    """The verified records of a segment's ``.tix`` (``None``: no usable file)."""
    data = read_turn_file(segment)
    return None if data is None else parse_turn_rows(data)[0]


def scan_log(path: Path) -> LogScan:
    """Read and scan the single log file at ``path`` (a missing file is an empty log)."""
    return scan_bytes(path.read_bytes() if path.exists() else b"")


def split_log(store: SessionStore, session_id: str, before_commits: list[int]) -> list[Path]:
    """Rewrite a closed session as own segments, a new one starting at each listed commit.

    Sidecars are left out (they are caches; readers do without them).
    """
    directory = store.session_dir(session_id)
    manifest = load_manifest(directory)
    data = read_session_log(directory, manifest).data
    frames = scan_bytes(data).frames
    shutil.rmtree(directory / manifest.log_dir, ignore_errors=True)
    (directory / "log").mkdir()
    paths: list[Path] = []
    for frame in frames:
        if not paths or frame.commit in before_commits:
            first_seq = frame.events[0]["seq"] if frame.events else 1
            paths.append(directory / "log" / segment_name(frame.commit, first_seq))
            paths[-1].write_bytes(b"")
        with open(paths[-1], "ab") as handle:
            handle.write(data[frame.offset : frame.end])
    save_manifest(directory, manifest.with_changes(format=2, seed=(), log_dir="log"))
    if (directory / "events.log").exists():
        os.unlink(directory / "events.log")
    return paths


def as_format_1(store: SessionStore, session_id: str) -> Path:
    """Turn a closed session back into format 1 (one ``events.log``), as an older build left it."""
    directory = store.session_dir(session_id)
    manifest = load_manifest(directory)
    data = read_session_log(directory, manifest).data
    (directory / "events.log").write_bytes(data)
    shutil.rmtree(directory / manifest.log_dir, ignore_errors=True)
    save_manifest(directory, manifest.with_changes(format=1, seed=(), log_dir="log"))
    return directory / "events.log"


def frame_crc(data: bytes, offset: int) -> int:
    """The payload checksum the frame header at ``offset`` holds."""
    return int(HEADER.unpack_from(data, offset)[3])


def seeded_child(
    store: SessionStore, parent_id: str, segment: Path, through_commit: int, child_id: str
) -> str:
    """A format-2 child: ``segment`` (a parent's only segment) linked as a seed up to a commit.

    Its own first segment holds one ``session/fork`` commit.
    """
    data = segment.read_bytes()
    frames = [f for f in scan_log(segment).frames if f.commit <= through_commit]
    last = frames[-1]
    boundary = int(last.events[-1]["seq"])
    directory = store.sessions_dir / child_id
    (directory / "log").mkdir(parents=True)
    os.link(segment, directory / "log" / "seed-000.seg")
    own = directory / "log" / segment_name(last.commit + 1, boundary + 1)
    event = {
        "seq": boundary + 1,
        "ts": 0.0,
        "type": "session/fork",
        "parentSessionId": parent_id,
        "parentGeneration": 1,
        "turnId": "t",
        "boundarySequence": boundary,
        "seedLength": boundary,
        "operationId": "op",
    }
    own.write_bytes(encode_frame(last.commit + 1, [event]))
    seed = Seed("seed-000.seg", 1, 1, last.end, last.commit, frame_crc(data, last.offset))
    manifest = Manifest(
        child_id,
        "child",
        kind="fork",
        parent=ParentLink(parent_id, "fork", "t", boundary, 1),
        root_session_id=parent_id,
        seed_length=boundary,
        format=2,
        seed=(seed,),
    )
    save_manifest(directory, manifest)
    return child_id
