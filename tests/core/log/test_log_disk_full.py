"""An fsync that fails for lack of space: the commit is taken back, the writer goes on."""

from __future__ import annotations

import os

import pytest
from helpers.faults import DiskFullAt
from helpers.sessions import log_file, log_scan

from branchwise.core.errors import DiskFull, WriterClosed
from branchwise.core.projection import events as ev
from branchwise.core.store.store import SessionStore, SessionWriter


def _writer_with_faults(store: SessionStore, faults: DiskFullAt) -> SessionWriter:
    with store.create("s") as writer:
        session_id = writer.session_id
        writer.commit([ev.user_message("m1", "kept")])
    return SessionStore(store.root, file_ops=faults).open_writer(session_id)


def test_an_fsync_without_space_takes_the_commit_back_and_the_writer_goes_on(
    store: SessionStore,
) -> None:
    faults = DiskFullAt(2)  # the commit's write fits, its fsync does not
    writer = _writer_with_faults(store, faults)
    log = log_file(writer.directory)
    size = os.path.getsize(log)
    faults.armed = True
    with pytest.raises(DiskFull) as failed:
        writer.commit([ev.user_message("m2", "lost")])
    assert faults.fired == ["fsync"] and "writerClosed" not in failed.value.details
    assert "what was saved before it is kept" in failed.value.message
    assert os.path.getsize(log) == size  # no trace of the failed commit
    writer.commit([ev.user_message("m3", "after")])
    writer.close()
    snapshot = store.read(writer.session_id)
    assert [m.message_id for m in snapshot.projection.messages] == ["m1", "m3"]
    assert snapshot.scan.torn_tail is None


def test_when_the_take_back_cannot_be_made_durable_the_writer_closes(
    store: SessionStore,
) -> None:
    faults = DiskFullAt(2, persistent=True)
    writer = _writer_with_faults(store, faults)
    faults.armed = True
    with pytest.raises(DiskFull) as failed:
        writer.commit([ev.user_message("m2", "lost")])
    assert failed.value.details["writerClosed"] is True
    with pytest.raises(WriterClosed):
        writer.commit([ev.user_message("m3", "refused")])
    writer.close()
    scan = log_scan(writer.directory)
    assert scan.torn_tail is None and scan.corruption is None
    messages = store.read(writer.session_id).projection.messages
    assert [m.message_id for m in messages] == ["m1"]
