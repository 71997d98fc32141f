"""A big conversation's branch buttons work from its projection snapshot, before the full load."""

from __future__ import annotations

import asyncio
from pathlib import Path

from helpers.sessions import write_big_session

from branchwise.core.fork.targets import fork_targets
from branchwise.core.log.snapshots import SNAPSHOT_FILE, wait_for_snapshots
from branchwise.core.providers.demo import DemoProvider
from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.host import Host
from branchwise.desktop.host.session import PREVIEW_THRESHOLD_BYTES, SessionMode


def _big_session(root: Path) -> str:
    """A session over the preview threshold, opened once so its snapshot is written."""
    store = SessionStore(root, snapshot_bytes=0)
    session_id = write_big_session(store, 400, 250)
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
