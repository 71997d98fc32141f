"""``export_chatgpt``: a lineage tree out as one ChatGPT mapping, and back in as the same tree."""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path

import orjson
import pytest
from helpers.chatgpt_export import conversation, message, write_export
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from branchwise.core.conversation.export.chatgpt import export_chatgpt
from branchwise.core.fork.engine import fork
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.fork.targets import fork_targets
from branchwise.core.importing.run import ImportReport, import_path
from branchwise.core.lineage import create_child, tree
from branchwise.core.projection.events import (
    Event,
    assistant_message,
    tool_call,
    tool_result,
    turn_end,
    turn_start,
    user_message,
)
from branchwise.core.store.manifest import BranchOrigin
from branchwise.core.store.store import SessionStore


def _branchy() -> dict[str, object]:
    call = {"content_type": "code", "language": "python", "text": "1+1"}
    output = {"content_type": "execution_output", "text": "2"}
    return conversation(
        "c-round",
        "Round trip",
        [
            ("root", None, None),
            ("u1", "root", message("user", "first", time=1)),
            ("a1", "u1", message("assistant", "ans1", time=2, model="gpt-4o")),
            ("u2", "a1", message("user", "second", time=3)),
            ("a2", "u2", message("assistant", "ans2", time=4, model="gpt-4o")),
            ("u3", "a2", message("user", "third", time=5)),
            ("a3", "u3", message("assistant", "ans3", time=6)),
            ("a2b", "u2", message("assistant", "ans2 again", time=7, model="o1")),
            ("u3b", "a2b", message("user", "third after regen", time=8)),
            ("c", "u3b", message("assistant", content=call, recipient="python", time=9)),
            ("o", "c", message("tool", content=output, name="python", time=10)),
            ("a3b", "o", message("assistant", "two", time=11)),
            ("u3c", "a2b", message("user", "third edited", time=12)),
            ("a3c", "u3c", message("assistant", "ans3c", time=13)),
            ("u1e", "root", message("user", "first edited", time=14)),
            ("a1e", "u1e", message("assistant", "other", time=15)),
        ],
        current="a3",
    )


def _shape(store: SessionStore, report: ImportReport) -> list[tuple[object, ...]]:
    """Each conversation: kind, parent's position, fork turn's position, origin, messages."""
    position = {c.session_id: n for n, c in enumerate(report.conversations)}
    rows = []
    for imported in report.conversations:
        snapshot = store.read(imported.session_id)
        parent = snapshot.manifest.parent
        fork_turn = None
        if parent is not None and parent.turn_id is not None:
            turns = [t.turn_id for t in store.read(parent.session_id).projection.turns]
            fork_turn = turns.index(parent.turn_id)
        rows.append(
            (
                imported.kind,
                position.get(imported.parent_session_id or ""),
                fork_turn,
                parent.origin.kind if parent is not None and parent.origin else None,
                [(m.role, m.content) for m in snapshot.projection.messages],
            )
        )
    return rows


def test_an_imported_tree_exports_and_reimports_into_the_same_shape(tmp_path: Path) -> None:
    first = SessionStore(tmp_path / "first")
    report = import_path(first, write_export(tmp_path / "in.json", [_branchy()]))
    assert [c.kind for c in report.conversations] == ["root", "fork", "fork", "fork"]
    fork_id = report.conversations[2].session_id
    exported = export_chatgpt(first, fork_id)  # any session of the tree exports all of it
    assert len(exported) == 1 and len(exported[0]["mapping"]) == 16
    out = tmp_path / "conversations.json"
    out.write_bytes(orjson.dumps(exported))
    second = SessionStore(tmp_path / "second")
    again = import_path(second, out)
    assert _shape(second, again) == _shape(first, report)


def test_native_branches_and_children_export_too(tmp_path: Path, store: SessionStore) -> None:
    report = import_path(store, write_export(tmp_path / "in.json", [_branchy()]))
    root = report.conversations[0].session_id
    target = fork_targets(store, root).targets[0]
    native = fork(store, ForkRequest(root, target.turn_id, target.boundary_sequence, 1), "op-1")
    with store.open_writer(native.child_session_id) as writer:
        writer.commit(
            [
                turn_start("t-native"),
                user_message("m-native", "asked natively"),
                assistant_message("a-native", "answered natively", "demo"),
                turn_end("t-native", "completed"),
            ]
        )
    child = create_child(store, root, {"turnId": target.turn_id}, "Helper").child_session_id
    with store.open_writer(child) as writer:
        writer.commit(
            [
                turn_start("t-child"),
                user_message("m-child", "sub-task"),
                assistant_message("a-child", "sub-answer", "demo"),
                turn_end("t-child", "completed"),
            ]
        )
    exported = export_chatgpt(store, root)
    assert [c["title"] for c in exported] == ["Round trip", "Helper"]
    out = tmp_path / "conversations.json"
    out.write_bytes(orjson.dumps(exported))
    second = SessionStore(tmp_path / "second")
    again = import_path(second, out)
    kinds = [(c.kind, c.source_id.split("/")[0]) for c in again.conversations]
    assert kinds.count(("fork", root)) == 4  # three imported forks and the native one
    assert again.conversations[-1].kind == "root"  # the child, on its own
    assert again.conversations[-1].title == "Helper"
    contents = {
        m.content
        for c in again.conversations
        for m in second.read(c.session_id).projection.messages
    }
    assert {"asked natively", "answered natively", "sub-task", "sub-answer"} <= contents


# A turn: the number of results of each of its calls (all calls are made before any result).
TURN = st.lists(st.integers(min_value=1, max_value=3), max_size=3)
# A branch: (which conversation, which of its turns, plain/edit/regenerate, its own turns).
BRANCH = st.tuples(
    st.integers(0, 20),
    st.integers(0, 20),
    st.sampled_from(["plain", "edit", "regenerate"]),
    st.lists(TURN, min_size=1, max_size=2),
)


def _turn_events(label: str, calls: list[int], *, prompt: bool = True) -> list[Event]:
    """A turn's events (after ``turn/start``): parallel calls, then their results interleaved."""
    events: list[Event] = [user_message(f"u-{label}", f"ask {label}")] if prompt else []
    events += [
        tool_call(f"c-{label}-{n}", f"tool{n}", f"args {label} {n}") for n in range(len(calls))
    ]
    for round_ in range(max(calls, default=0)):
        events += [
            tool_result(f"c-{label}-{n}", f"out {label} {n}.{round_}")
            for n, results in enumerate(calls)
            if round_ < results
        ]
    return [*events, assistant_message(f"a-{label}", f"answer {label}", "demo")]


def _commit_turn(store: SessionStore, session_id: str, label: str, calls: list[int]) -> None:
    with store.open_writer(session_id) as writer:
        writer.commit(
            [
                turn_start(f"t-{label}"),
                *_turn_events(label, calls),
                turn_end(f"t-{label}", "completed"),
            ]
        )


def _transcripts(store: SessionStore, session_ids: list[str]) -> list[list[tuple[str, str]]]:
    return sorted(
        [(m.role, m.content) for m in store.read(session_id).projection.messages]
        for session_id in session_ids
    )


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(root_turns=st.lists(TURN, min_size=1, max_size=3), branches=st.lists(BRANCH, max_size=4))
def test_random_trees_with_parallel_calls_round_trip_message_for_message(
    root_turns: list[list[int]], branches: list[tuple[int, int, str, list[list[int]]]]
) -> None:
    labels = (str(n) for n in itertools.count())
    with tempfile.TemporaryDirectory() as folder:
        first = SessionStore(Path(folder) / "first")
        with first.create("Parallel") as writer:
            root = writer.session_id
        for calls in root_turns:
            _commit_turn(first, root, next(labels), calls)
        sessions = [root]
        for which, at, kind, own in branches:
            source = sessions[which % len(sessions)]
            targets = fork_targets(first, source)
            turns = first.read(source).projection.turns
            asked = turns[at % len(turns)]
            before = [t for t in targets.targets if t.turn_id != asked.turn_id]
            before = before[: [t.turn_id for t in targets.targets].index(asked.turn_id)]
            if kind == "plain":
                if asked.turn_id == turns[-1].turn_id:
                    continue  # a branch that only goes on is the same path in a tree: no branch
                target, origin = targets.target(asked.turn_id), None
            else:
                target = before[-1] if before else None
                prompt = next(
                    m.content
                    for m in first.read(source).projection.messages
                    if m.turn_id == asked.turn_id and m.role == "user"
                )
                text = prompt if kind == "regenerate" else f"edited {next(labels)}"
                origin = BranchOrigin(kind, asked.turn_id, text)
            request = ForkRequest(
                source,
                target.turn_id if target is not None else None,
                target.boundary_sequence if target is not None else 0,
                targets.generation,
                origin=origin,
            )
            child = fork(first, request, f"op-{next(labels)}").child_session_id
            if origin is not None:  # the fork started the turn with its prompt: answer it
                opened = first.read(child).projection.turns[-1].turn_id
                with first.open_writer(child) as writer:
                    label = next(labels)
                    writer.commit(
                        [*_turn_events(label, own[0], prompt=False), turn_end(opened, "completed")]
                    )
                own = own[1:]
            for calls in own:
                _commit_turn(first, child, next(labels), calls)
            sessions.append(child)
        exported = export_chatgpt(first, root)
        out = Path(folder) / "conversations.json"
        out.write_bytes(orjson.dumps(exported))
        second = SessionStore(Path(folder) / "second")
        again = import_path(second, out)
        assert again.warnings == ()
        originals = [n.manifest.session_id for n in _walk(tree(first, root))]
        assert _transcripts(second, [c.session_id for c in again.conversations]) == _transcripts(
            first, originals
        )


def _walk(node: object) -> list[object]:
    found, pending = [], [node]
    while pending:
        current = pending.pop()
        found.append(current)
        pending.extend(current.children)  # type: ignore[attr-defined]
    return found
