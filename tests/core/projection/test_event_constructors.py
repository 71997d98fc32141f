"""The constructors spell each event as the log has always stored it: fields, values, order.

Event bytes are the log's format (orjson keeps a dict's order), so each
constructor is held to the literal dict its callers used to build by hand,
order included, and to :func:`validate_event`.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from branchwise.core.projection import events as ev

CASES: list[tuple[dict[str, Any], dict[str, Any]]] = [
    (
        ev.session_created("Trip", "fork", {"format": "librechat", "id": "c1"}),
        {
            "type": "session/created",
            "title": "Trip",
            "kind": "fork",
            "source": {"format": "librechat", "id": "c1"},
        },
    ),
    (ev.session_created("Trip"), {"type": "session/created", "title": "Trip", "kind": "root"}),
    (ev.session_title("Kyoto"), {"type": "session/title", "title": "Kyoto"}),
    (
        ev.session_fork(
            parent_session_id="p",
            parent_generation=3,
            turn_id="t2",
            boundary_sequence=9,
            operation_id="op",
            source={"format": "chatgpt", "id": "x"},
            origin={"kind": "edit", "turnId": "t3"},
        ),
        {
            "type": "session/fork",
            "parentSessionId": "p",
            "parentGeneration": 3,
            "turnId": "t2",
            "boundarySequence": 9,
            "seedLength": 9,
            "operationId": "op",
            "source": {"format": "chatgpt", "id": "x"},
            "origin": {"kind": "edit", "turnId": "t3"},
        },
    ),
    (
        ev.session_fork(
            parent_session_id="p",
            parent_generation=1,
            turn_id=None,
            boundary_sequence=0,
            operation_id="op",
        ),
        {
            "type": "session/fork",
            "parentSessionId": "p",
            "parentGeneration": 1,
            "turnId": None,
            "boundarySequence": 0,
            "seedLength": 0,
            "operationId": "op",
        },
    ),
    (
        ev.session_child(
            parent_session_id="p",
            child_session_id="c",
            root_session_id="r",
            spawned_from={"turnId": "t1", "toolCallId": "k"},
        ),
        {
            "type": "session/child",
            "parentSessionId": "p",
            "childSessionId": "c",
            "rootSessionId": "r",
            "spawnedFrom": {"turnId": "t1", "toolCallId": "k"},
        },
    ),
    (
        ev.tool_call("k", "Task", {"prompt": "go"}),
        {"type": "tool/call", "callId": "k", "name": "Task", "args": {"prompt": "go"}},
    ),
    (
        ev.tool_result("k", "done", "Task"),
        {"type": "tool/result", "callId": "k", "output": "done", "name": "Task"},
    ),
    (ev.tool_result("k", ""), {"type": "tool/result", "callId": "k", "output": ""}),
]


@pytest.mark.parametrize(("built", "by_hand"), CASES)
def test_a_constructor_builds_the_stored_bytes(
    built: dict[str, Any], by_hand: dict[str, Any]
) -> None:
    assert orjson.dumps(built) == orjson.dumps(by_hand)
    assert ev.validate_event(built) is built
