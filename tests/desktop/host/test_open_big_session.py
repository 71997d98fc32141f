"""A big conversation's branch buttons and preview work from its projection snapshot, early.

The preview of the last page starts where the snapshot's turns and one ``.idx``
record say; a damaged or foreign index means it hops every frame header instead.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from helpers.sessions import write_big_session

from branchwise.core.fork.targets import fork_targets, tracker_after_snapshot
from branchwise.core.log.segments import SessionLog, read_session_log
from branchwise.core.log.sidecars import RECORD_SIZE
from branchwise.core.projection.pages import last_page_start
from branchwise.core.projection.snapshot_cache import SNAPSHOT_FILE, wait_for_snapshots
from branchwise.core.projection.turns import Turn
from branchwise.core.providers.demo import DemoProvider
from branchwise.core.store.manifest import load_manifest
from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.host import Host
from branchwise.desktop.host.rows import PAGE_SIZE, Row, rows_from_projection
from branchwise.desktop.host.session import PREVIEW_THRESHOLD_BYTES, SessionMode, read_preview


def _big_session(root: Path, answer_words: int = 250) -> str:
    """A session over the preview threshold, opened once so its snapshot is written."""
    store = SessionStore(root, snapshot_bytes=0)
    session_id = write_big_session(store, 400, answer_words)
    with store.open_writer(session_id):
        pass
    wait_for_snapshots()
    directory = store.session_dir(session_id)
    assert sum(p.stat().st_size for p in (directory / "log").glob("*.seg")) > (
        PREVIEW_THRESHOLD_BYTES
    )
    return session_id


def _open(root: Path, session_id: str) -> tuple[bool, bool, bool]:
    """Open as the desktop does: (targets at once, loaded at once, targets equal after loading)."""

    async def scenario() -> tuple[bool, bool, bool]:
        host = Host(root, provider_factory=lambda _settings: DemoProvider(delay=0.0))
        host.start()
        session = host.open_session(session_id)
        early, loaded = session.targets, session.loaded
        await session.wait_loaded()
        assert session.mode is SessionMode.WRITABLE and session.targets is not None
        same = early is not None and early.answer == session.targets.answer
        await host.shutdown()
        return early is not None, loaded, same

    return asyncio.run(scenario())


def test_branch_buttons_work_before_the_full_load_with_a_snapshot(tmp_path: Path) -> None:
    session_id = _big_session(tmp_path)
    early, loaded, same = _open(tmp_path, session_id)
    assert early and not loaded and same
    assert fork_targets(SessionStore(tmp_path), session_id).targets


def test_without_a_usable_snapshot_they_wait_for_the_full_load(tmp_path: Path) -> None:
    session_id = _big_session(tmp_path)
    snapshot = SessionStore(tmp_path).session_dir(session_id) / "log" / SNAPSHOT_FILE
    snapshot.write_bytes(snapshot.read_bytes()[:100])
    early, loaded, _ = _open(tmp_path, session_id)
    assert not early and not loaded
    wait_for_snapshots()  # the writer open rebuilt it
    early, _, same = _open(tmp_path, session_id)
    assert early and same


def _log_and_turns(root: Path, session_id: str) -> tuple[SessionLog, list[Turn]]:
    store = SessionStore(root)
    directory = store.session_dir(session_id)
    log = read_session_log(directory, load_manifest(directory))
    tracker = tracker_after_snapshot(log)
    assert tracker is not None
    return log, tracker.turns


def _last_page(root: Path, session_id: str) -> list[Row]:
    return rows_from_projection(SessionStore(root).read(session_id).projection)[-PAGE_SIZE:]


def test_the_preview_starts_from_the_snapshots_turns_and_one_index_record(tmp_path: Path) -> None:
    session_id = _big_session(tmp_path)
    log, turns = _log_and_turns(tmp_path, session_id)
    start = last_page_start(log, turns, PAGE_SIZE)
    assert start is not None
    offset, earlier = start
    assert earlier == len(turns) - PAGE_SIZE
    assert 0 < offset < len(log.data)
    hopped = read_preview(log.data, PAGE_SIZE)
    started = read_preview(log.data, PAGE_SIZE, start)
    assert hopped is not None and started is not None
    assert started == hopped
    assert started.rows == _last_page(tmp_path, session_id)


def _flip_records(root: Path, session_id: str) -> None:
    """Damage every record of the session's turn index (each fails its own CRC)."""
    directory = SessionStore(root).session_dir(session_id)
    (index,) = (directory / "log").glob("*.idx")
    data = bytearray(index.read_bytes())
    for offset in range(16, len(data), RECORD_SIZE):
        data[offset + 20] ^= 0x40
    index.write_bytes(bytes(data))


def test_a_damaged_index_means_the_preview_hops_every_header_as_before(tmp_path: Path) -> None:
    session_id = _big_session(tmp_path)
    _flip_records(tmp_path, session_id)
    log, turns = _log_and_turns(tmp_path, session_id)
    assert last_page_start(log, turns, PAGE_SIZE) is None
    preview = read_preview(log.data, PAGE_SIZE, None)
    assert preview is not None and preview.rows == _last_page(tmp_path, session_id)


def test_another_sessions_index_is_not_trusted_for_the_preview(tmp_path: Path) -> None:
    """Same record layout and seqs, other frames: the record's frame CRC must match the bytes."""
    one, other = _big_session(tmp_path / "one"), _big_session(tmp_path / "other", 251)
    source = next((SessionStore(tmp_path / "one").session_dir(one) / "log").glob("*.idx"))
    target = next((SessionStore(tmp_path / "other").session_dir(other) / "log").glob("*.idx"))
    target.write_bytes(source.read_bytes())
    log, turns = _log_and_turns(tmp_path / "other", other)
    assert last_page_start(log, turns, PAGE_SIZE) is None


def test_the_opened_tabs_preview_is_the_last_page(tmp_path: Path) -> None:
    session_id = _big_session(tmp_path)

    async def scenario() -> tuple[list[Row], bool]:
        host = Host(tmp_path, provider_factory=lambda _settings: DemoProvider(delay=0.0))
        host.start()
        session = host.open_session(session_id)
        rows, loaded = list(session.rows), session.loaded
        await session.wait_loaded()
        await host.shutdown()
        return rows, loaded

    rows, loaded = asyncio.run(scenario())
    assert not loaded
    assert rows == _last_page(tmp_path, session_id)
