"""Export: Markdown a person reads, versioned JSON a program parses, the tree, atomic files."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest
from helpers.forking import fork_at

from branchwise.core.conversation.export.common import format_for_path, write_export
from branchwise.core.conversation.export.json import (
    SCHEMA,
    TREE_SCHEMA,
    encode_json,
    export_document,
    export_tree,
)
from branchwise.core.conversation.export.markdown import message_markdown, render_markdown
from branchwise.core.errors import ExportNotWritten, OutputExists
from branchwise.core.projection import events as ev
from branchwise.core.store.store import SessionStore
from branchwise.core.store.trash import Trash

CODE = "Here:\n\n```python\ndef f(x):\n    return x * 2  # **not bold**\n```\n\nDone."


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return SessionStore(tmp_path / "root")


def _conversation(store: SessionStore, title: str = "Cooking") -> str:
    with store.create(title) as writer:
        for n, (prompt, answer) in enumerate(
            [("How to double?", CODE), ("And an open fence?", "```sh\necho hi")]
        ):
            turn = f"t{n}"
            writer.commit([ev.turn_start(turn), ev.user_message(f"u{n}", prompt)])
            writer.commit(
                [
                    ev.assistant_message(f"a{n}", answer, "demo-model"),
                    ev.usage(10 + n, 20 + n, "demo-model"),
                    ev.turn_end(turn, "completed"),
                ]
            )
        writer.commit([ev.turn_start("t2"), ev.user_message("u2", "fails")])
        writer.commit([ev.turn_end("t2", "error")])
        return writer.session_id


def _sections(markdown: str) -> list[str]:
    return re.split(r"^## ", markdown, flags=re.MULTILINE)


def test_markdown_has_title_turns_prompts_answers_and_code_verbatim(store: SessionStore) -> None:
    session_id = _conversation(store)
    markdown = render_markdown(store, session_id)

    head, *turns = _sections(markdown)
    assert head.startswith("# Cooking\n")
    assert "Branched from" not in head
    assert [t.splitlines()[0] for t in turns] == ["Turn 1", "Turn 2", "Turn 3"]
    assert "**You**\n\nHow to double?" in turns[0]
    assert CODE in turns[0]  # byte for byte, the code block and its markup
    # An answer that leaves its fence open is closed, so the next heading stays a heading.
    assert "```sh\necho hi\n```" in turns[1]
    assert "This turn ended with an error." in turns[2]


def test_markdown_lineage_line_follows_the_parent_into_the_trash_and_out(
    store: SessionStore,
) -> None:
    parent = _conversation(store, "Parent talk")
    child = fork_at(store, parent, "t1").child_session_id
    assert "*Branched from Parent talk, turn 2*" in render_markdown(store, child)
    Trash(store).trash(parent)
    assert "*Branched from Parent talk, turn 2*" in render_markdown(store, child)
    Trash(store).purge(parent)
    assert "*Branched from a deleted conversation, turn 2*" in render_markdown(store, child)


def test_json_document_is_versioned_and_matches_the_conversation(store: SessionStore) -> None:
    parent = _conversation(store)
    child = fork_at(store, parent, "t0").child_session_id
    with store.open_writer(child) as writer:
        writer.commit([ev.turn_start("c0"), ev.user_message("cu", "new here")])
        writer.commit(
            [
                ev.assistant_message("ca", "own answer", "m"),
                ev.usage(7, 9, "m"),
                ev.turn_end("c0", "completed"),
            ]
        )

    document = orjson.loads(encode_json(export_document(store, child)))

    assert document["schema"] == SCHEMA == "branchwise.export/1"
    assert set(document) == {
        "schema",
        "exportedAt",
        "complete",
        "corruption",
        "session",
        "lineage",
        "turns",
        "messages",
        "usage",
    }
    assert document["session"]["sessionId"] == child and document["session"]["kind"] == "fork"
    assert document["lineage"]["parent"] == {
        "sessionId": parent,
        "title": "Cooking",
        "kind": "fork",
        "turnId": "t0",
        "turnNumber": 1,
        "boundarySequence": document["lineage"]["parent"]["boundarySequence"],
        "state": "present",
    }
    assert [a["sessionId"] for a in document["lineage"]["ancestors"]] == [parent]
    assert [(t["number"], t["turnId"], t["inherited"]) for t in document["turns"]] == [
        (1, "t0", True),
        (2, "c0", False),
    ]
    assert [(m["role"], m["content"]) for m in document["messages"]] == [
        ("user", "How to double?"),
        ("assistant", CODE),
        ("user", "new here"),
        ("assistant", "own answer"),
    ]
    # The parent paid for the inherited turn: only the branch's own usage counts.
    assert document["usage"] == {"inputTokens": 7, "outputTokens": 9}
    assert document["turns"][1]["usage"] == {"inputTokens": 7, "outputTokens": 9}
    assert document["turns"][0]["usage"] == {"inputTokens": 0, "outputTokens": 0}


def test_tree_export_holds_the_whole_lineage_tree_from_any_member(store: SessionStore) -> None:
    root = _conversation(store, "Root")
    first = fork_at(store, root, "t0", op="op-a").child_session_id
    grandchild = fork_at(store, first, "t0", op="op-b").child_session_id
    second = fork_at(store, root, "t1", op="op-c").child_session_id

    document = orjson.loads(encode_json(export_tree(store, grandchild)))

    assert document["schema"] == TREE_SCHEMA and document["rootSessionId"] == root
    got = [(s["session"]["sessionId"], s["depth"]) for s in document["sessions"]]
    assert got == [(root, 0), (first, 1), (grandchild, 2), (second, 1)]
    assert document["sessions"][0]["childSessionIds"] == [first, second]
    assert all("schema" not in s for s in document["sessions"])
    assert document["sessions"][2]["lineage"]["parent"]["sessionId"] == first


def test_write_export_is_atomic_refuses_to_overwrite_unless_asked(tmp_path: Path) -> None:
    out = tmp_path / "chat.md"
    write_export(out, b"first")
    with pytest.raises(OutputExists):
        write_export(out, b"second")
    assert out.read_bytes() == b"first"
    write_export(out, b"second", overwrite=True)
    assert out.read_bytes() == b"second"
    with pytest.raises(ExportNotWritten):
        write_export(tmp_path / "no-such-folder" / "x.json", b"{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chat.md"]  # no temporary left


def test_copy_message_markdown_and_format_by_extension() -> None:
    assert message_markdown("assistant", CODE) == f"**Assistant**\n\n{CODE}"
    assert format_for_path(Path("a/b.JSON")) == "json"
    assert format_for_path(Path("a/b.md")) == "markdown"
    assert format_for_path(Path("a/b")) == "markdown"
