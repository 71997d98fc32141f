"""Edit, regenerate and retry (issue 13 items 2-4) in core: branch points, origins, context."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from helpers.fake_openai_server import FakeOpenAIServer
from helpers.forking import refused
from helpers.sessions import commits_of, complete_turn, session_with_turns

from branchwise.core.conversation.ask_again import (
    branch_turn,
    edit_request,
    failed_turn,
    question_of,
    regenerate_request,
)
from branchwise.core.errors import BranchwiseError
from branchwise.core.fork.engine import fork
from branchwise.core.projection import events as ev
from branchwise.core.providers.demo import DemoProvider
from branchwise.core.providers.openai import OpenAIProvider
from branchwise.core.runtime import TurnResult, TurnRunner
from branchwise.core.store.manifest import BranchOrigin
from branchwise.core.store.store import SessionStore


def _answer(store: SessionStore, child: str, provider: Any = None) -> TurnResult:
    snapshot = store.read(child)
    turn = branch_turn(snapshot.projection, snapshot.manifest.seed_length)
    assert turn is not None and turn.is_open
    with store.open_writer(child, continue_turn=turn.turn_id) as writer:
        return asyncio.run(TurnRunner(writer, provider or DemoProvider()).answer())


def _transcript(store: SessionStore, session_id: str) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in store.read(session_id).projection.messages]


def test_editing_turn_two_branches_at_the_end_of_turn_one_with_the_new_prompt(
    store: SessionStore,
) -> None:
    source = session_with_turns(store, 3)
    before = commits_of(store, source)
    request = edit_request(store, source, "t1", "question 1, but shorter")
    t0 = store.read(source).projection.turn("t0")
    assert t0 is not None
    assert (request.turn_id, request.boundary_sequence) == ("t0", t0.boundary_sequence)
    assert request.origin == BranchOrigin("edit", "t1", "question 1, but shorter")
    child = fork(store, request, "op-edit").child_session_id
    # Published with the question: the branch's own turn is open, the prompt in it.
    snapshot = store.read(child)
    own = branch_turn(snapshot.projection, snapshot.manifest.seed_length)
    assert own is not None and own.is_open
    assert snapshot.projection.fork is not None
    assert snapshot.projection.fork["origin"] == {"kind": "edit", "turnId": "t1"}
    manifest = store.manifest(child)
    assert manifest.parent is not None and manifest.parent.origin == request.origin
    result = _answer(store, child)
    assert result.end_reason == "completed" and result.session_id == child
    assert _transcript(store, child) == [
        ("user", "question 0"),
        ("assistant", "answer to question 0"),
        ("user", "question 1, but shorter"),
        ("assistant", result.text),
    ]
    assert commits_of(store, source) == before  # the parent is untouched


def test_editing_or_regenerating_the_first_turn_branches_at_the_start(
    store: SessionStore,
) -> None:
    source = session_with_turns(store, 2)
    edit = edit_request(store, source, "t0", "a new first question")
    regenerate = regenerate_request(store, source, "t0")
    for request in (edit, regenerate):
        assert (request.turn_id, request.boundary_sequence) == (None, 0)
    assert regenerate.origin == BranchOrigin("regenerate", "t0", "question 0")
    child = fork(store, regenerate, "op-regen").child_session_id
    assert store.manifest(child).seed_length == 0
    _answer(store, child)
    transcript = _transcript(store, child)
    assert transcript[0] == ("user", "question 0") and len(transcript) == 2


def test_the_branch_asks_the_model_the_prefix_and_the_new_prompt_only(
    store: SessionStore,
) -> None:
    source = session_with_turns(store, 3)
    child = fork(store, regenerate_request(store, source, "t1"), "op").child_session_id

    async def go() -> list[Any]:
        async with FakeOpenAIServer(chunks=["Another", " answer"]) as server:
            provider = OpenAIProvider(server.base_url, "fake-model")
            await _answer_coroutine(store, child, provider)
            return [r["json"]["messages"] for r in server.requests if r["json"]]

    (sent,) = asyncio.run(go())
    assert sent == [
        {"role": "user", "content": "question 0"},
        {"role": "assistant", "content": "answer to question 0"},
        {"role": "user", "content": "question 1"},
    ]


def test_a_server_failing_mid_edit_keeps_the_edited_prompt_and_ends_in_error(
    store: SessionStore,
) -> None:
    source = session_with_turns(store, 1)
    child = fork(store, edit_request(store, source, "t0", "edited"), "op").child_session_id

    async def go() -> TurnResult:
        async with FakeOpenAIServer(status=500) as server:
            return await _answer_coroutine(
                store, child, OpenAIProvider(server.base_url, "fake-model")
            )

    result = asyncio.run(go())
    assert result.end_reason == "error" and result.error is not None
    assert _transcript(store, child) == [("user", "edited")]
    projection = store.read(child).projection
    assert projection.turns[-1].end_reason == "error"
    assert failed_turn(projection, child).turn_id == result.turn_id


async def _answer_coroutine(store: SessionStore, child: str, provider: Any) -> TurnResult:
    turn = store.read(child).projection.turns[-1]
    with store.open_writer(child, continue_turn=turn.turn_id) as writer:
        return await TurnRunner(writer, provider).answer()


def test_a_branch_nobody_answers_is_closed_as_interrupted_with_its_prompt(
    store: SessionStore,
) -> None:
    source = session_with_turns(store, 1)
    child = fork(store, edit_request(store, source, "t0", "edited"), "op").child_session_id
    with store.open_writer(child):  # not the answering process: closes the turn
        pass
    projection = store.read(child).projection
    assert projection.turns[-1].end_reason == "interrupted"
    assert _transcript(store, child) == [("user", "edited")]


def test_retrying_a_failed_turn_runs_its_prompt_again_and_the_failure_leaves_the_context(
    store: SessionStore,
) -> None:
    with store.create("retry") as writer:
        complete_turn(writer, "t0", "first")
        writer.commit([ev.turn_start("bad"), ev.user_message("u-bad", "failed question")])
        writer.commit([ev.turn_end("bad", "error", "server down")])
        writer.commit([ev.turn_start("cut"), ev.user_message("u-cut", "cut question")])
        writer.commit(
            [ev.assistant_message("a-cut", "half an", "m"), ev.turn_end("cut", "error", "cut")]
        )
        projection = writer.projection
        assert projection.model_messages() == [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "answer to first"},
            # "failed question" had no answer: left out; the cut one kept its text.
            {"role": "user", "content": "cut question"},
            {"role": "assistant", "content": "half an"},
        ]
        assert failed_turn(projection, writer.session_id).turn_id == "cut"
        bad = failed_turn(projection, writer.session_id, "bad")
        assert question_of(projection, bad) == "failed question"
        result = asyncio.run(TurnRunner(writer, DemoProvider()).run(question_of(projection, bad)))
        assert result.end_reason == "completed" and result.turn_id != "bad"
        texts = [m["content"] for m in writer.projection.model_messages()]
        assert texts.count("failed question") == 1  # the retried turn, not the failed one
        assert [t.turn_id for t in writer.projection.turns][:3] == ["t0", "bad", "cut"]


def test_refusals_are_typed_and_leave_nothing(store: SessionStore) -> None:
    source = session_with_turns(store, 2)
    refused(store, "unknown_turn", lambda: edit_request(store, source, "nope", "x"))
    refused(store, "empty_prompt", lambda: edit_request(store, source, "t1", " \n "))
    refused(
        store,
        "source_not_found",
        lambda: regenerate_request(store, "0000000000-missing", "t0"),
    )
    projection = store.read(source).projection
    refused(store, "turn_not_failed", lambda: failed_turn(projection, source))
    refused(store, "turn_not_failed", lambda: failed_turn(projection, source, "t1"))
    refused(store, "unknown_turn", lambda: failed_turn(projection, source, "nope"))
    with store.open_writer(source) as writer:
        writer.commit([ev.turn_start("running"), ev.user_message("u-r", "still going")])
        refused(store, "turn_running", lambda: edit_request(store, source, "running", "x"))
        refused(store, "turn_running", lambda: regenerate_request(store, source, "running"))
    # An empty prompt is refused by the fork itself too (a request built elsewhere).
    request = edit_request(store, source, "t1", "fine")
    empty = BranchOrigin("edit", "t1", "")
    blank = type(request)(
        request.source_session_id,
        request.turn_id,
        request.boundary_sequence,
        request.expected_generation,
        origin=empty,
    )
    refused(store, "empty_prompt", lambda: fork(store, blank, "op-empty"))


def test_an_edit_is_idempotent_per_operation_and_a_different_prompt_conflicts(
    store: SessionStore,
) -> None:
    source = session_with_turns(store, 2)
    first = fork(store, edit_request(store, source, "t1", "one"), "op")
    again = fork(store, edit_request(store, source, "t1", "one"), "op")
    assert (again.child_session_id, again.created) == (first.child_session_id, False)
    refused(
        store,
        "operation_conflict",
        lambda: fork(store, edit_request(store, source, "t1", "two"), "op"),
    )
    refused(
        store,
        "operation_conflict",
        lambda: fork(store, regenerate_request(store, source, "t1"), "op"),
    )


def test_answer_refuses_a_session_with_no_open_question(store: SessionStore) -> None:
    source = session_with_turns(store, 1)
    with store.open_writer(source) as writer, pytest.raises(BranchwiseError):
        asyncio.run(TurnRunner(writer, DemoProvider()).answer())
