"""One commit size limit: refused at write time, and every reader agrees with the writer.

256 MiB is too heavy to write in a test; the limit is one module constant
(``frames.MAX_PAYLOAD``), read when called, so the tests lower it.
"""

from __future__ import annotations

import orjson
import pytest
from helpers.forking import fork_at
from helpers.segmented import scan_log
from helpers.sessions import complete_turn, log_file

from branchwise.core.errors import CommitTooLarge, CorruptLog
from branchwise.core.fork.engine import fork
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.fork.targets import TargetsCache, fork_targets
from branchwise.core.log import frames
from branchwise.core.log.frames import HEADER_SIZE, encode_frame, frame_offsets, iter_frames
from branchwise.core.log.scan import scan_bytes
from branchwise.core.projection import events as ev
from branchwise.core.store.store import SessionStore


def _payload_size(commit: int, events: list[dict[str, object]]) -> int:
    return len(orjson.dumps({"commit": commit, "events": events}))


def test_the_limit_is_256_mib() -> None:
    assert frames.MAX_PAYLOAD == 256 * 1024 * 1024


def test_a_commit_over_the_limit_is_refused_before_anything_is_written(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(frames, "MAX_PAYLOAD", 2000)
    with store.create("big") as writer:
        log = log_file(writer.directory)
        size = log.stat().st_size
        with pytest.raises(CommitTooLarge) as refused:
            writer.commit([ev.user_message("m1", "x" * 3000)])
        assert refused.value.code == "commit_too_large" and refused.value.definitive
        assert refused.value.details["limit"] == 2000
        assert log.stat().st_size == size  # not one byte written
        writer.commit([ev.user_message("m2", "small")])  # the writer goes on
    snapshot = store.read(writer.session_id)
    assert [m.message_id for m in snapshot.projection.messages] == ["m2"]


def test_writer_and_readers_draw_the_line_at_the_same_byte(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    events: list[dict[str, object]] = [
        {"seq": 1, "ts": 1.0, "type": "message/user", "messageId": "m", "content": "y" * 500}
    ]
    exact = _payload_size(1, events)
    monkeypatch.setattr(frames, "MAX_PAYLOAD", exact)
    frame = encode_frame(1, events)  # exactly at the limit: written…
    assert len(frame) == HEADER_SIZE + exact
    assert [f.commit for f in iter_frames(frame)] == [1]  # …and read, by every reader
    assert frame_offsets(frame) == [0]
    assert len(scan_bytes(frame).frames) == 1
    monkeypatch.setattr(frames, "MAX_PAYLOAD", exact - 1)
    with pytest.raises(CommitTooLarge):  # one byte over: neither written…
        encode_frame(1, events)
    assert list(iter_frames(frame)) == []  # …nor read, by any reader
    with pytest.raises(CommitTooLarge):
        frame_offsets(frame)
    assert scan_bytes(frame).frames == []


def test_an_oversized_commit_an_older_build_wrote_ends_history_alike_and_is_never_cut(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    with store.create("old build") as writer:
        complete_turn(writer, "t0", "before")
        complete_turn(writer, "t1", "x" * 5000)  # written when the limit allowed it
        complete_turn(writer, "t2", "after")
        session_id = writer.session_id
    log = log_file(store.session_dir(session_id))
    data = log.read_bytes()
    monkeypatch.setattr(frames, "MAX_PAYLOAD", 3000)
    scan = scan_log(log)
    assert scan.torn_tail is None and isinstance(scan.corruption, CorruptLog)
    assert scan.corruption.details["reason"] == "commit_too_large"
    snapshot = store.read(session_id)
    # The replayed targets (a cold answer from the turn index reads only the frames it
    # names, so it does not see damage elsewhere; every read and writer open does).
    targets = fork_targets(store, session_id, cache=TargetsCache())
    # The session, its fork targets and a fork all stop before the same commit (t1's question).
    assert [t.turn_id for t in snapshot.projection.turns] == ["t0"]
    assert [t.turn_id for t in targets.targets] == ["t0"]
    child = store.read(fork_at(store, session_id, "t0").child_session_id)
    assert [t.turn_id for t in child.projection.turns] == ["t0"]
    # t1 is past the commit history ends at: the refusal names that, not an unknown turn.
    with pytest.raises(CorruptLog):
        fork(store, ForkRequest(session_id, "t1", 9, 1), "op-t1")
    with pytest.raises(CorruptLog):
        store.open_writer(session_id)  # read-only, as for damage…
    assert log.read_bytes() == data  # …and nothing is cut
