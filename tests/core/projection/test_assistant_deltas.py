"""Partial answers stored as deltas replay to exactly what whole-text partials replayed to.

Every history here is written twice: the old way (each partial commit a whole
``message/assistant`` with ``partial: true``) and the format-2 way (each
partial commit a ``message/delta`` of the new text only); the two
projections must be equal, message for message and turn for turn.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers.sessions import log_file, log_scan
from hypothesis import given, settings
from hypothesis import strategies as st

from branchwise.core.errors import CorruptLog, InvalidEvent
from branchwise.core.log.frames import HEADER, encode_frame
from branchwise.core.projection import events as ev
from branchwise.core.projection.projection import Projection
from branchwise.core.store.store import SessionStore

# Multi-byte text and split points that fall inside what a reader sees as one
# character: CJK, an emoji ZWJ family, a flag, a letter with a combining accent.
PIECES = ["中", "文", "字", "🙂", "👩\u200d👩\u200d👧", "🇨🇳", "e\u0301", "a", " ", "\n", "é"]
texts = st.lists(st.sampled_from(PIECES), max_size=40).map("".join) | st.text(max_size=30)


@dataclass(frozen=True)
class Step:
    """One model call: its whole answer and where the partial commits cut it."""

    text: str
    cuts: tuple[int, ...]  # sorted, repeats allowed: a repeat is an empty chunk
    named: bool  # every delta names its message (else only the opening one)


@st.composite
def steps(draw: st.DrawFn) -> Step:
    text = draw(texts)
    cuts = draw(st.lists(st.integers(0, len(text)), max_size=8))
    return Step(text, tuple(sorted(cuts)), draw(st.booleans()))


@dataclass(frozen=True)
class TurnPlan:
    steps: tuple[Step, ...]
    ending: str  # completed | interrupted | open (only the last turn may stay open)


turn_plans = st.builds(
    TurnPlan,
    st.lists(steps(), min_size=1, max_size=3).map(tuple),
    st.sampled_from(["completed", "interrupted", "cancelled"]),
)


def history(plans: list[TurnPlan], *, deltas: bool, last_open: bool) -> list[list[dict[str, Any]]]:
    """The commits a runner writes for ``plans`` (events without seq and ts)."""
    commits: list[list[dict[str, Any]]] = []
    for t, plan in enumerate(plans):
        turn_id = f"t{t}"
        commits.append([ev.turn_start(turn_id), ev.user_message(f"u{t}", f"question {t}")])
        open_now = last_open and t == len(plans) - 1
        for s, step in enumerate(plan.steps):
            message_id, step_id = f"a{t}-{s}", f"s{t}-{s}"
            commits.append([ev.step_start(step_id)])
            done = 0
            for number, cut in enumerate(step.cuts):
                if deltas:
                    opening = (message_id, "m") if number == 0 or step.named else None
                    commits.append([ev.assistant_delta(step.text[done:cut], opening)])
                else:
                    partial = ev.assistant_message(message_id, step.text[:cut], "m", partial=True)
                    commits.append([partial])
                done = cut
            last_step = s == len(plan.steps) - 1
            if plan.ending == "interrupted" or (open_now and last_step):
                continue  # a crash: only the partial commits are on disk
            closing = [ev.assistant_message(message_id, step.text, "m"), ev.step_end(step_id)]
            if last_step:
                closing += [ev.usage(2, 3, "m"), ev.turn_end(turn_id, plan.ending)]
            commits.append(closing)
        if plan.ending == "interrupted" and not open_now:
            commits.append([ev.turn_end(turn_id, "interrupted")])  # the next writer's close
    return commits


def numbered(commits: list[list[dict[str, Any]]]) -> list[list[dict[str, Any]]]:
    """Give every event the seq and ts the log would."""
    seq = 0
    out = []
    for commit in commits:
        stamped = []
        for event in commit:
            seq += 1
            stamped.append({**event, "seq": seq, "ts": 0.0})
        out.append(stamped)
    return out


def state(projection: Projection) -> tuple[list[tuple[Any, ...]], list[dict[str, Any]]]:
    messages = [
        (m.message_id, m.role, m.content, m.turn_id, m.partial, m.model, m.seq)
        for m in projection.messages
    ]
    turns = [
        {**t.to_json(), "user": t.user_message_id, "spills": t.closing_commit_spills}
        for t in projection.turns
    ]
    return messages, turns


@given(st.lists(turn_plans, min_size=1, max_size=4), st.booleans())
def test_deltas_replay_to_the_whole_text_projection(plans: list[TurnPlan], last_open: bool) -> None:
    whole = Projection.replay(numbered(history(plans, deltas=False, last_open=last_open)))
    delta = Projection.replay(numbered(history(plans, deltas=True, last_open=last_open)))
    assert state(delta) == state(whole)
    assert delta.model_messages() == whole.model_messages()
    assert (delta.input_tokens, delta.output_tokens) == (whole.input_tokens, whole.output_tokens)


@settings(max_examples=25)
@given(st.lists(turn_plans, min_size=1, max_size=3), st.booleans())
def test_deltas_committed_to_disk_read_back_as_the_whole_text_projection(
    plans: list[TurnPlan], last_open: bool
) -> None:
    with tempfile.TemporaryDirectory() as root:
        store = SessionStore(Path(root))
        with store.create("deltas") as writer:
            for commit in history(plans, deltas=True, last_open=last_open):
                writer.commit(commit)
            live = state(writer.projection)
            session_id = writer.session_id
        read = store.read(session_id).projection
    expected = Projection.replay(numbered(history(plans, deltas=False, last_open=last_open)))
    created = 1  # session/created takes seq 1 on disk
    shifted = [(*m[:-1], m[-1] + created) for m in state(expected)[0]]
    assert live == state(read)
    assert state(read)[0] == shifted


def test_a_whole_text_after_deltas_replaces_them_and_deltas_continue_a_whole_text() -> None:
    """A session migrated mid-history holds both shapes; each reads as it always meant."""
    commits = numbered(
        [
            [ev.turn_start("t"), ev.user_message("u", "q")],
            [ev.assistant_message("a", "old whole ", "m", partial=True)],  # format 1's shape
            [ev.assistant_delta("and new", ("a", "m"))],
            [ev.assistant_delta("")],
        ]
    )
    projection = Projection.replay(commits)
    message = projection.message("a")
    assert message is not None and message.content == "old whole and new" and message.partial
    assert projection.turns[0].message_id == "a"
    projection.apply(numbered([*commits, [ev.assistant_message("a", "final", "m")]])[-1])
    assert projection.message("a").content == "final"  # type: ignore[union-attr]


def test_a_delta_that_is_not_text_is_refused_on_commit(store: SessionStore) -> None:
    with store.create("bad") as writer:
        writer.commit([ev.turn_start("t"), ev.user_message("u", "q")])
        bad = {**ev.assistant_delta("x", ("a", "m")), "delta": 5}
        missing = {k: v for k, v in ev.assistant_delta("x", ("a", "m")).items() if k != "delta"}
        half_named = {k: v for k, v in ev.assistant_delta("x", ("a", "m")).items() if k != "model"}
        not_text = ev.assistant_delta("x", ("a", 5))  # type: ignore[arg-type]
        for event in (bad, missing, half_named, not_text):
            with pytest.raises(InvalidEvent):
                writer.commit([event])
        assert [m.role for m in writer.projection.messages] == ["user"]


def test_a_log_holding_a_delta_without_text_is_refused_as_corrupt_not_shown(
    store: SessionStore,
) -> None:
    """A frame whose checksum holds but whose delta makes no sense (a buggy writer)."""
    with store.create("bad") as writer:
        writer.commit([ev.turn_start("t"), ev.user_message("u", "q")])
        session_id = writer.session_id
    directory = store.session_dir(session_id)
    last = log_scan(directory).frames[-1]
    seq = int(last.events[-1]["seq"]) + 1
    event = {"seq": seq, "type": "message/delta", "messageId": "a", "model": "m", "delta": None}
    with open(log_file(directory), "ab") as handle:
        handle.write(encode_frame(last.commit + 1, [event]))
    with pytest.raises(CorruptLog):
        store.read(session_id)


def test_a_delta_that_continues_no_answer_is_refused_as_corrupt(store: SessionStore) -> None:
    """A later delta without an opening one before it in its turn cannot be placed: refused."""
    with store.create("bad") as writer:
        writer.commit([ev.turn_start("t"), ev.user_message("u", "q")])
        session_id = writer.session_id
    directory = store.session_dir(session_id)
    last = log_scan(directory).frames[-1]
    seq = int(last.events[-1]["seq"]) + 1
    with open(log_file(directory), "ab") as handle:
        handle.write(encode_frame(last.commit + 1, [{"seq": seq, **ev.assistant_delta("lost")}]))
    with pytest.raises(CorruptLog):
        store.read(session_id)


def test_only_commits_holding_a_delta_are_framed_as_version_2() -> None:
    """An older build refuses a log with deltas (frame version 2) instead of showing less text."""
    delta = encode_frame(5, [{"seq": 9, **ev.assistant_delta("x")}])
    whole = encode_frame(5, [{**ev.assistant_message("a", "x", "m"), "seq": 9, "ts": 0.0}])
    # Quoted inside a text, the delta's type is escaped and does not count.
    quoting = encode_frame(
        5, [{**ev.user_message("u", '"type":"message/delta"'), "seq": 9, "ts": 0.0}]
    )
    assert HEADER.unpack_from(delta)[1] == 2
    assert HEADER.unpack_from(whole)[1] == 1
    assert HEADER.unpack_from(quoting)[1] == 1
