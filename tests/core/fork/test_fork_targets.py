"""Fork targets: one answer from committed frames, whoever holds the writer."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from helpers.sessions import (
    HELPER,
    commits_of,
    complete_turn,
    legacy_session,
    log_file,
    read_only,
    session_layouts,
    session_with_turns,
    write_layout,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from branchwise.core.errors import CorruptLog, InvalidSessionId, SourceNotFound
from branchwise.core.fork.targets import TargetsCache, fork_targets, targets_from_projection
from branchwise.core.projection import events as ev
from branchwise.core.store.publish import replace_log
from branchwise.core.store.store import SessionStore


def test_answer_has_exactly_the_documented_shape(store: SessionStore) -> None:
    session_id = session_with_turns(store, 1)
    answer = fork_targets(store, session_id).to_json()
    assert answer == {
        "source": {"sessionId": session_id, "generation": 1},
        "verifiable": True,
        "targets": [
            {
                "turnId": "t0",
                "messageId": "a-t0",
                "boundarySequence": 6,  # created=1; start,user=2,3; answer,usage,end=4,5,6
                "available": True,
                "reason": None,
            }
        ],
    }


def test_completed_turn_is_listed_after_the_writer_is_gone_and_reopened_read_only(
    store: SessionStore,
) -> None:
    with store.create("s") as writer:
        complete_turn(writer, "t0")
        complete_turn(writer, "t1")
        live = fork_targets(store, writer.session_id)
        assert live == targets_from_projection(writer.projection, writer.manifest)
    with read_only(store.session_dir(writer.session_id)):
        cold = fork_targets(store, writer.session_id)
        snapshot = store.read(writer.session_id)
    assert cold == live
    assert [t.turn_id for t in cold.targets if t.available] == ["t0", "t1"]
    assert targets_from_projection(snapshot.projection, snapshot.manifest) == cold


def test_live_other_process_and_cold_sessions_give_the_same_answer(
    store: SessionStore,
) -> None:
    writer = store.create("s")
    complete_turn(writer, "t0")
    complete_turn(writer, "t1")
    writer.commit([ev.turn_start("t2"), ev.user_message("u2", "still running")])
    live = fork_targets(store, writer.session_id)
    writer.close()  # the trailing turn stays open on disk
    cold = fork_targets(store, writer.session_id)
    holder = subprocess.Popen(
        [sys.executable, str(HELPER), "hold", str(store.root), writer.session_id],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "ready\n"
        assert store.is_being_written(writer.session_id)
        elsewhere = fork_targets(store, writer.session_id)
    finally:
        holder.communicate("")
    # The holder reopened the session, which closes the crashed turn as interrupted.
    after = fork_targets(store, writer.session_id)
    assert live == cold
    assert [t.reason for t in live.targets] == [None, None, "turn_open"]
    assert elsewhere.targets[:2] == live.targets[:2]
    assert after.targets[:2] == live.targets[:2]
    assert after.targets[2].available and after.targets[2].turn_id == "t2"


def test_open_trailing_turn_disables_only_itself(store: SessionStore) -> None:
    with store.create("s") as writer:
        complete_turn(writer, "t0")
        complete_turn(writer, "t1")
        writer.commit([ev.turn_start("t2"), ev.user_message("u2", "hi")])
        writer.commit([ev.assistant_message("a2", "partial", "demo", partial=True)])
        answer = fork_targets(store, writer.session_id)
    by_turn = {t.turn_id: t for t in answer.targets}
    assert by_turn["t0"].available and by_turn["t1"].available
    assert not by_turn["t2"].available and by_turn["t2"].reason == "turn_open"
    assert by_turn["t2"].boundary_sequence is None and by_turn["t2"].message_id == "a2"


@pytest.mark.parametrize(
    ("closing", "reason"),
    [
        (
            [{"type": "interaction/request", "interactionId": "i1", "kind": "approval"}],
            "active_authority",
        ),
        ([{"type": "tool/call", "callId": "c1", "name": "ls", "args": {}}], "active_authority"),
        (
            [
                {"type": "interaction/request", "interactionId": "i1", "kind": "approval"},
                {"type": "interaction/resolve", "interactionId": "i1"},
            ],
            None,
        ),
        ([ev.turn_start("t1")], "boundary_not_atomic"),
    ],
    ids=["open-approval", "open-tool-call", "resolved-in-same-commit", "spills-into-next-turn"],
)
def test_closing_commit_decides_availability(
    store: SessionStore, closing: list[dict[str, object]], reason: str | None
) -> None:
    with store.create("s") as writer:
        writer.commit([ev.turn_start("t0"), ev.user_message("u0", "hi")])
        writer.commit(
            [ev.assistant_message("a0", "done", "demo"), ev.turn_end("t0", "completed"), *closing]
        )
        session_id = writer.session_id
    target = fork_targets(store, session_id).targets[0]
    assert (target.available, target.reason) == (reason is None, reason)


def test_authority_opened_by_an_earlier_commit_and_resolved_before_the_end_is_fine(
    store: SessionStore,
) -> None:
    with store.create("s") as writer:
        writer.commit([ev.turn_start("t0"), ev.user_message("u0", "hi")])
        writer.commit([{"type": "tool/call", "callId": "c1", "name": "ls", "args": {"p": "/"}}])
        writer.commit([{"type": "tool/result", "callId": "c1", "output": "a b"}])
        writer.commit([ev.assistant_message("a0", "done", "demo"), ev.turn_end("t0", "error")])
        session_id = writer.session_id
    assert fork_targets(store, session_id).targets[0].available


def test_message_only_history_is_unverifiable_with_no_targets(store: SessionStore) -> None:
    answer = fork_targets(store, legacy_session(store))
    assert answer.verifiable is False and answer.targets == ()
    assert answer.to_json()["targets"] == []


def test_a_new_session_has_no_targets_but_is_verifiable(store: SessionStore) -> None:
    with store.create("empty") as writer:
        answer = fork_targets(store, writer.session_id)
    assert answer.verifiable and answer.targets == ()


def test_torn_tail_and_damage_are_not_committed_history(store: SessionStore) -> None:
    session_id = session_with_turns(store, 2)
    log = log_file(store.session_dir(session_id))
    intact = fork_targets(store, session_id)
    with log.open("ab") as out:
        out.write(b"\xffBW\x01\x10\x00")  # a commit that never finished
    assert fork_targets(store, session_id) == intact
    data = bytearray(log.read_bytes())
    data[-40] ^= 0xFF  # damage inside the last whole commit (turn t1's closing)
    log.write_bytes(bytes(data))
    # A commit written in full and damaged is corruption for the scan (``show``), so the
    # targets refuse it too rather than list its turn as open.
    with pytest.raises(CorruptLog) as damaged:
        fork_targets(store, session_id)
    assert damaged.value.code == "corrupt_log"
    assert store.read(session_id).scan.corruption is not None


def test_unknown_and_malformed_sessions_are_typed_errors(store: SessionStore) -> None:
    with pytest.raises(SourceNotFound) as missing:
        fork_targets(store, "0000000000-missing")
    assert missing.value.code == "source_not_found"
    with pytest.raises(InvalidSessionId):
        fork_targets(store, "../escape")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout=session_layouts(), roll_bytes=st.sampled_from([250, 700, 16 * 1024 * 1024]))
def test_targets_from_the_log_equal_those_of_a_full_read(
    layout: list[list[dict[str, object]]], roll_bytes: int
) -> None:
    # Cold queries answer from the turn index of every segment (small roll sizes make many).
    with tempfile.TemporaryDirectory() as tmp:
        store = SessionStore(Path(tmp), roll_bytes=roll_bytes)
        session_id = write_layout(store, layout)  # type: ignore[arg-type]
        snapshot = store.read(session_id)
        expected = targets_from_projection(snapshot.projection, snapshot.manifest)
        assert fork_targets(store, session_id) == expected


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout=session_layouts())
def test_repeated_queries_on_a_growing_log_equal_full_replays(
    layout: list[list[dict[str, object]]],
) -> None:
    cache = TargetsCache()
    with tempfile.TemporaryDirectory() as tmp:
        store = SessionStore(Path(tmp))
        writer = store.create("growing")
        try:
            for events in layout:
                writer.commit([dict(e) for e in events])
                live = targets_from_projection(writer.projection, writer.manifest)
                assert fork_targets(store, writer.session_id, cache=cache) == live
        finally:
            writer.close()


def test_cached_answers_follow_replacement_truncation_and_torn_tails(store: SessionStore) -> None:
    cache = TargetsCache()
    source = session_with_turns(store, 3)
    assert len(fork_targets(store, source, cache=cache).targets) == 3
    replace_log(store, source, commits_of(store, source)[:3])  # a rewind: one turn left
    log = log_file(store.session_dir(source))
    rewound = fork_targets(store, source, cache=cache)
    assert (rewound.generation, [t.turn_id for t in rewound.targets]) == (2, ["t0"])
    with store.open_writer(source) as writer:
        complete_turn(writer, "t9")
    assert [t.turn_id for t in fork_targets(store, source, cache=cache).targets] == ["t0", "t9"]
    whole = log.read_bytes()
    log.write_bytes(whole[:-10])  # the last commit torn (same file, shorter)
    assert [t.reason for t in fork_targets(store, source, cache=cache).targets] == [
        None,
        "turn_open",
    ]
    log.write_bytes(whole)
    assert [t.reason for t in fork_targets(store, source, cache=cache).targets] == [None, None]
    assert [t.reason for t in fork_targets(store, source).targets] == [None, None]  # uncached


def test_concurrent_queries_while_another_process_appends(store: SessionStore) -> None:
    source = session_with_turns(store, 1)
    answers: list[tuple[int, list[str | None]]] = []
    stop = threading.Event()

    cache = TargetsCache()

    def ask() -> None:
        while not stop.is_set():
            answer = fork_targets(store, source, cache=cache)
            answers.append((len(answer.targets), [t.reason for t in answer.targets]))

    with subprocess.Popen(
        [sys.executable, str(HELPER), "append", str(store.root), source, "60"],
        stdout=subprocess.PIPE,
        text=True,
    ) as appender:
        assert appender.stdout is not None and appender.stdout.readline() == "ready\n"
        askers = [threading.Thread(target=ask) for _ in range(3)]
        for thread in askers:
            thread.start()
        assert appender.wait(timeout=60) == 0
        stop.set()
        for thread in askers:
            thread.join()
    for count, reasons in answers:  # every answer is some whole prefix of the log
        assert count == len(reasons) and all(r is None for r in reasons[:-1])
        assert reasons[-1] in (None, "turn_open")
    assert len({count for count, _ in answers}) > 1
    final = fork_targets(store, source, cache=cache)
    assert fork_targets(store, source) == final and len(final.targets) == 61  # uncached
