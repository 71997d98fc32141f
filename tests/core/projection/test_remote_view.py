"""The wire view of a log: deltas go out as whole partial answers, the text a replay shows.

The events route of ``branchwise serve`` sends these commits; the end-to-end
check is ``tests/core/remote/test_remote_deltas.py``. Here: a commit holding
several deltas, a delta whose time is the last one before it, and a log
whose delta continues no answer.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from branchwise.core.errors import CorruptLog
from branchwise.core.log.frames import Frame
from branchwise.core.projection import events as ev
from branchwise.core.projection.projection import Projection
from branchwise.core.projection.remote_view import commits_after
from branchwise.core.store.store import SessionStore


def frames_of(store: SessionStore, session_id: str) -> list[Frame]:
    return store.read(session_id).scan.frames


def test_each_delta_carries_the_answer_so_far_even_two_in_one_commit(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "root")
    with store.create("wire") as writer:
        writer.commit([ev.turn_start("t"), ev.user_message("u", "question")])
        writer.commit([ev.assistant_delta("one ", ("a", "model-1"))])
        writer.commit([ev.assistant_delta("two "), ev.assistant_delta("three")])
        session_id = writer.session_id
    frames = frames_of(store, session_id)
    stamp = frames[1].events[-1]["ts"]  # deltas carry no time: the last one before them

    sent = commits_after(frames, frames[1].events[-1]["seq"])

    partials = [(e["type"], e["content"], e["model"], e["partial"], e["ts"]) for e in sent[-1]]
    assert partials == [
        ("message/assistant", "one two ", "model-1", True, stamp),
        ("message/assistant", "one two three", "model-1", True, stamp),
    ]
    assert [e["seq"] for e in sent[-1]] == [e["seq"] for e in frames[-1].events]
    # From the start, every commit goes whole, and replaying them shows the local text.
    everything = commits_after(frames, 0)
    assert len(everything) == len(frames)
    local = Projection.replay(frame.events for frame in frames).message("a")
    remote = Projection.replay(everything).message("a")
    assert local is not None and remote is not None and remote.content == local.content


def test_nothing_after_the_last_seq(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "root")
    with store.create("wire") as writer:
        writer.commit([ev.turn_start("t"), ev.user_message("u", "question")])
        session_id = writer.session_id
    frames = frames_of(store, session_id)
    assert commits_after(frames, frames[-1].events[-1]["seq"]) == []


def test_a_delta_that_continues_no_answer_is_a_corrupt_log(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "root")
    with store.create("wire") as writer:
        writer.commit([ev.turn_start("t"), ev.user_message("u", "question")])
        session_id = writer.session_id
    frames = frames_of(store, session_id)
    orphan = frames[-1]._replace(events=[{"seq": 99, "type": "message/delta", "delta": "x"}])

    with pytest.raises(CorruptLog):
        commits_after([*frames, orphan], 0)
