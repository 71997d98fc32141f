"""Building sessions for the fork tests, and the worker processes they run.

As a module: small builders that commit real events through a real
``SessionWriter``. As a script (a real second process):

``python sessions.py append ROOT SESSION_ID N``
    opens the writer, prints ``ready``, commits N more turns (two commits
    each), prints ``done`` and exits 0.
``python sessions.py hold ROOT SESSION_ID``
    opens the writer, prints ``ready`` and holds it until stdin closes.
``python sessions.py forker ROOT SESSION_ID TURN BOUNDARY GENERATION``
    forks in a loop with fresh operation ids, printing ``op <id>`` before
    each fork and ``child <id>`` after it, until killed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
from hypothesis import strategies as st

from branchwise.core.ids import new_session_id
from branchwise.core.log.frames import encode_frame
from branchwise.core.log.scan import LogScan, scan_bytes
from branchwise.core.log.segments import log_pieces, scan_session_log, segment_name
from branchwise.core.log.sidecars import (
    INDEX_SUFFIX,
    RECORD_SIZE,
    IndexRecord,
    sidecar_entries,
    write_sidecars,
)
from branchwise.core.projection import events as ev
from branchwise.core.projection.projection import Projection
from branchwise.core.projection.turns import TurnTracker
from branchwise.core.store.manifest import Manifest, ParentLink, load_manifest
from branchwise.core.store.store import SessionStore, SessionWriter

HELPER = Path(__file__)


def complete_turn(writer: SessionWriter, turn_id: str, text: str = "hi", *, tokens: int = 5) -> int:
    """Commit a whole turn the way the runner does; return its boundary sequence."""
    writer.commit([ev.turn_start(turn_id), ev.user_message(f"u-{turn_id}", text)])
    closing = writer.commit(
        [
            ev.assistant_message(f"a-{turn_id}", f"answer to {text}", "demo"),
            ev.usage(tokens, tokens * 2, "demo"),
            ev.turn_end(turn_id, "completed"),
        ]
    )
    return int(closing[-1]["seq"])


def session_with_turns(store: SessionStore, count: int, title: str = "src") -> str:
    """A closed session with ``count`` completed turns ``t0``…"""
    with store.create(title) as writer:
        for n in range(count):
            complete_turn(writer, f"t{n}", f"question {n}")
        return writer.session_id


def legacy_session(store: SessionStore) -> str:
    """A session holding only imported, message-only history."""
    with store.create("imported") as writer:
        writer.commit(
            [
                {
                    "type": "legacy/import",
                    "messages": [
                        {"role": "user", "content": "old question"},
                        {"role": "assistant", "content": "old answer"},
                    ],
                }
            ]
        )
        return writer.session_id


def commits_of(store: SessionStore, session_id: str) -> list[list[dict[str, Any]]]:
    """Every committed commit of a session, as stored."""
    scan = log_scan(store.session_dir(session_id))
    assert scan.corruption is None and scan.torn_tail is None
    return [frame.events for frame in scan.frames]


def prefix_projection(store: SessionStore, session_id: str, boundary: int) -> Projection:
    """The parent's projection as of ``boundary`` (commits ending at or before it)."""
    commits = [c for c in commits_of(store, session_id) if c and c[-1]["seq"] <= boundary]
    return Projection.replay(commits)


def strip(event: dict[str, Any]) -> dict[str, Any]:
    """An event without what a fork may change (``seq``)."""
    return {k: v for k, v in event.items() if k != "seq"}


def tree_hashes(directory: Path) -> dict[str, str]:
    """sha256 of every file below ``directory`` (by relative path)."""
    return {
        str(path.relative_to(directory)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def visible_sessions(store: SessionStore) -> set[str]:
    """Names of published (non-temporary) session folders."""
    return {p.name for p in store.sessions_dir.iterdir() if not p.name.startswith(".")}


@contextmanager
def read_only(directory: Path) -> Iterator[bool]:
    """Make a session folder read-only while the block runs.

    Modes become 0400/0500; as root (who ignores modes) the immutable
    attribute is set too where ``chattr`` allows it, so any write, create or
    hard link really fails. Yields whether that strict form is in force.
    """
    paths = [*sorted(directory.rglob("*")), directory]
    modes = {path: path.stat().st_mode for path in paths}
    for path in paths:
        path.chmod(0o500 if path.is_dir() else 0o400)
    frozen: list[Path] = []
    if os.geteuid() == 0 and shutil.which("chattr"):
        for path in paths:
            done = subprocess.run(["chattr", "+i", str(path)], capture_output=True)
            if done.returncode == 0:
                frozen.append(path)
    try:
        yield os.geteuid() != 0 or len(frozen) == len(paths)
    finally:
        for path in frozen:
            subprocess.run(["chattr", "-i", str(path)], check=True)
        for path, mode in modes.items():
            path.chmod(mode)


def write_big_session(
    store: SessionStore, turns: int, answer_words: int, *, usage: bool = True
) -> str:
    """A long closed session written straight as frames (fast, for benchmarks).

    ``usage=False`` mimics providers that report no token usage."""
    words = ("lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit")
    answer = " ".join(words[n % len(words)] for n in range(answer_words))
    with store.create("big") as writer:
        session_id = writer.session_id
    directory = store.session_dir(session_id)
    chunks: list[bytes] = []
    seq, ts = 0, 1.0e9

    def frame(events: list[dict[str, Any]]) -> bytes:
        nonlocal seq
        stamped = []
        for event in events:
            seq += 1
            stamped.append({"seq": seq, "ts": ts, **event})
        return encode_frame(len(chunks) + 1, stamped)

    chunks.append(frame([ev.session_created("big")]))
    for n in range(turns):
        turn = f"turn_{n:08d}"
        step = f"step_{n:08d}"
        chunks.append(
            frame(
                [
                    ev.turn_start(turn),
                    ev.user_message(f"u_{n}", f"question {n}"),
                    ev.step_start(step),
                ]
            )
        )
        if n % 4 == 0:  # long answers also commit partial text while streaming
            chunks.append(
                frame([ev.assistant_message(f"a_{n}", answer[:200], "demo", partial=True)])
            )
        closing = [ev.assistant_message(f"a_{n}", answer, "demo"), ev.step_end(step)]
        if usage:
            closing.append(ev.usage(100, 200, "demo"))
        chunks.append(frame([*closing, ev.turn_end(turn, "completed")]))
    rewrite_log(directory, b"".join(chunks))
    return session_id


def rewrite_log(directory: Path, data: bytes) -> None:
    """Make ``data`` a closed session's whole log, in its own format, with fresh sidecars."""
    manifest = load_manifest(directory)
    if not manifest.segmented:
        (directory / "events.log").write_bytes(data)
        return
    log_dir = directory / manifest.log_dir
    for old in log_dir.iterdir():
        old.unlink()
    segment = log_dir / segment_name(1, 1)
    segment.write_bytes(data)
    frames = scan_bytes(data).frames
    write_sidecars(segment, list(sidecar_entries(frames, TurnTracker(), data, 0)))


def tear_log(log: Path, data: bytes, durable: int | None = None) -> None:
    """Leave ``data`` as the active log file, as a crash during a write would.

    A crash before a commit's fsync returned leaves no ``.idx`` record of it
    (records are written after the fsync), so the records whose frame ends
    past ``durable`` (default: the end of ``data``) go too. Cutting the file
    alone is not a torn write but lost acknowledged commits, which the index proves.
    """
    log.write_bytes(data)
    index = log.with_suffix(INDEX_SUFFIX)
    if not index.exists():
        return
    records = index.read_bytes()
    keep = 16
    while keep + RECORD_SIZE <= len(records):
        record = IndexRecord.from_bytes(records, keep)
        if record is None or record.end > (len(data) if durable is None else durable):
            break
        keep += RECORD_SIZE
    index.write_bytes(records[:keep])


def log_file(directory: Path) -> Path:
    """The file a session's writer appends to: ``events.log`` (format 1) or its last segment."""
    manifest = load_manifest(directory)
    if not manifest.segmented:
        return directory / "events.log"
    return log_pieces(directory, manifest)[-1].path


def log_scan(directory: Path) -> LogScan:
    """The scan of a session's whole log (every file of it)."""
    return scan_session_log(directory, load_manifest(directory)).scan


def cut_copies(directory: Path) -> list[Path]:
    """Every copy of bytes a repair cut, wherever in the session folder it was kept."""
    return sorted(directory.glob("**/*.cut-*"))


def write_child_chain(store: SessionStore, depth: int, title: str = "level") -> list[str]:
    """``depth`` sessions, each a child of the one before, written straight to disk (fast).

    Every session gets the manifest and the one-frame log ``create_child``
    would give it (``session/created``), without fsyncs; titles are
    ``"<title> <n>"`` and creation times increase down the chain. Returns the
    ids, root first.
    """
    ids = [new_session_id() for _ in range(depth)]
    for number, session_id in enumerate(ids):
        parent = ids[number - 1] if number else None
        manifest = Manifest(
            session_id=session_id,
            title=f"{title} {number}",
            kind="child" if parent else "root",
            created_at=1.0e9 + number,
            parent=ParentLink(parent, "child") if parent else None,
            root_session_id=ids[0] if parent else None,
        )
        directory = store.session_dir(session_id)
        directory.mkdir(parents=True)
        (directory / "manifest.json").write_bytes(orjson.dumps(manifest.to_json()))
        created = ev.session_created(manifest.title, manifest.kind)
        log = encode_frame(1, [{"seq": 1, "ts": manifest.created_at, **created}])
        (directory / "events.log").write_bytes(log)
    return ids


def _append(root: Path, session_id: str, count: int) -> None:
    writer = SessionStore(root).open_writer(session_id)
    print("ready", flush=True)
    start = len(writer.projection.turns)
    for n in range(start, start + count):
        complete_turn(writer, f"w{n}", f"more {n}")
    writer.close()
    print("done", flush=True)


def _hold(root: Path, session_id: str) -> None:
    writer = SessionStore(root).open_writer(session_id)
    print("ready", flush=True)
    sys.stdin.read()
    writer.close()


def _forker(root: Path, session_id: str, turn: str, boundary: int, generation: int) -> None:
    from branchwise.core.fork.engine import fork
    from branchwise.core.fork.operations import ForkRequest

    store = SessionStore(root)
    print("ready", flush=True)
    n = 0
    while True:
        op = f"op-{os.getpid()}-{n}"
        print(f"op {op}", flush=True)
        result = fork(store, ForkRequest(session_id, turn, boundary, generation), op)
        print(f"child {result.child_session_id}", flush=True)
        n += 1


def main(argv: list[str]) -> None:
    command, root, session_id = argv[0], Path(argv[1]), argv[2]
    if command == "append":
        _append(root, session_id, int(argv[3]))
    elif command == "hold":
        _hold(root, session_id)
    elif command == "forker":
        _forker(root, session_id, argv[3], int(argv[4]), int(argv[5]))
    else:
        raise SystemExit(f"unknown command {command}")


if __name__ == "__main__":
    main(sys.argv[1:])


@st.composite
def session_layouts(draw: st.DrawFn, max_turns: int = 6) -> list[list[dict[str, Any]]]:
    """Plausible commit layouts: turns with partials, usage, tools and approvals
    (resolved or left open), cut into commits at random places, the last turn
    perhaps still open."""
    stream: list[dict[str, Any]] = []
    turns = draw(st.integers(0, max_turns))
    for n in range(turns):
        turn = f"t{n}"
        stream += [ev.turn_start(turn), ev.user_message(f"u{n}", f"q{n}")]
        for k in range(draw(st.integers(0, 2))):
            stream.append(ev.assistant_message(f"a{n}", f"part {k}", "demo", partial=True))
        if draw(st.booleans()):
            stream.append({"type": "tool/call", "callId": f"c{n}", "name": "ls", "args": {}})
            if draw(st.integers(0, 3)):
                stream.append({"type": "tool/result", "callId": f"c{n}", "output": "ok"})
        if draw(st.booleans()):
            stream.append(
                {"type": "interaction/request", "interactionId": f"i{n}", "kind": "approval"}
            )
            if draw(st.integers(0, 3)):
                stream.append({"type": "interaction/resolve", "interactionId": f"i{n}"})
        if draw(st.booleans()):
            stream.append({"type": "checkpoint", "checkpointId": f"k{n}", "blobs": []})
        stream.append(ev.assistant_message(f"a{n}", f"answer {n}", "demo"))
        if draw(st.booleans()):
            stream.append(ev.usage(n + 1, n + 2, "demo"))
        if n < turns - 1 or draw(st.integers(0, 3)):
            reason = draw(st.sampled_from(["completed", "cancelled", "error", "interrupted"]))
            stream.append(ev.turn_end(turn, reason))
            if draw(st.integers(0, 2)) == 0:
                stream.append(ev.usage(1, 1, "demo"))  # usage after turn/end, same commit
    commits: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    for event in stream:
        current.append(event)
        if draw(st.integers(0, 2)):  # cut here two times in three
            commits.append(current)
            current = []
    return [*commits, current] if current else commits


def write_layout(store: SessionStore, commits: list[list[dict[str, Any]]]) -> str:
    """A closed session holding exactly ``commits`` after its ``session/created``."""
    writer = store.create("layout")
    for events in commits:
        writer.commit([dict(event) for event in events])
    # Closing the writer directly (not reopening) keeps a trailing turn open on disk.
    writer.close()
    return writer.session_id
