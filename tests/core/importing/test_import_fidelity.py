"""What real exports hold and a reader once lost: every result of a call, a result
without its call, a stray byte, a conversation without a current message.

Each shape here is one the products write (ChatGPT's browsing tool answers one
call with a ``tether_browsing_display`` and a chain of ``tether_quote``
messages); each is imported into a real store and read back as the transcript.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers.chatgpt_export import conversation, linear, message, write_export

from branchwise.core.importing import chatgpt
from branchwise.core.importing.run import import_path
from branchwise.core.importing.source import SourceTree, SourceWarning
from branchwise.core.store.store import SessionStore


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return SessionStore(tmp_path / "data")


def transcript(store: SessionStore, session_id: str) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in store.read(session_id).projection.messages]


def tool(name: str, content_type: str, text: str, time: float) -> dict[str, Any]:
    return message(
        "tool", content={"content_type": content_type, "text": text}, name=name, time=time
    )


def browsing() -> dict[str, Any]:
    """A browsing call answered by a display and two quotes, each under the one before."""
    call = {"content_type": "code", "language": "unknown", "text": "search('kyoto')"}
    return conversation(
        "c-web",
        "Web",
        [
            ("root", None, None),
            ("u1", "root", message("user", "find it", time=1)),
            ("call", "u1", message("assistant", content=call, recipient="browser", time=2)),
            ("r1", "call", tool("browser", "tether_browsing_display", "results", 3)),
            ("r2", "r1", tool("browser", "tether_quote", "quote one", 4)),
            ("r3", "r2", tool("browser", "tether_quote", "quote two", 5)),
            ("a1", "r3", message("assistant", "found", time=6)),
        ],
    )


def test_every_result_of_a_call_is_kept_in_order(tmp_path: Path, store: SessionStore) -> None:
    report = import_path(store, write_export(tmp_path / "c.json", [browsing()]))
    (root,) = report.conversations
    assert transcript(store, root.session_id) == [
        ("user", "find it"),
        ("tool", "browser(search('kyoto')) → results → quote one → quote two"),
        ("assistant", "found"),
    ]


def test_a_result_whose_call_is_missing_is_kept_on_an_empty_call(
    tmp_path: Path, store: SessionStore
) -> None:
    lost = conversation(
        "c-lost",
        "Lost",
        [
            ("u1", None, message("user", "run it", time=1)),
            ("out", "gone", tool("python", "execution_output", "42", 2)),
            ("a1", "out", message("assistant", "it printed 42", time=3)),
        ],
        current="a1",
    )
    report = import_path(store, write_export(tmp_path / "c.json", [lost]))
    messages = [transcript(store, c.session_id) for c in report.conversations]
    assert [("tool", "python() → 42"), ("assistant", "it printed 42")] in messages
    assert any("out names a missing parent" in w for w in report.warnings)


def test_one_invalid_byte_costs_one_character_not_the_rest_of_the_file(tmp_path: Path) -> None:
    conversations = [linear(f"c{n}", 1, text=f"text {n}") for n in range(4)]
    document = orjson.dumps(conversations).replace(b"text 1", b"text \xff1", 1)
    path = tmp_path / "conversations.json"
    path.write_bytes(document)
    records = list(chatgpt.read(path))
    found = [r for r in records if isinstance(r, SourceTree)]
    assert [t.id for t in found] == ["c0", "c1", "c2", "c3"]
    assert found[1].items[2].text == "text \ufffd1 0"
    warnings = [r.message for r in records if isinstance(r, SourceWarning)]
    assert warnings == [f"{path}#2: non-UTF-8 bytes replaced"]


def test_a_conversation_without_a_current_node_is_read_with_a_warning(tmp_path: Path) -> None:
    named, unnamed = linear("c-named", 1), linear("c-unnamed", 1)
    unnamed["current_node"] = None
    path = write_export(tmp_path / "c.json", [named, unnamed])
    records = list(chatgpt.read(path))
    assert [t.id for t in records if isinstance(t, SourceTree)] == ["c-named", "c-unnamed"]
    (warning,) = [r.message for r in records if isinstance(r, SourceWarning)]
    assert warning.startswith(f"{path}#2: the conversation names no current message")


def test_titles_of_untitled_conversations_and_of_branches_of_branches(
    tmp_path: Path, store: SessionStore
) -> None:
    no_prompt = conversation(
        "c-greeting",
        "",
        [("a0", None, message("assistant", "  Hello!\n  How can I help?", time=1))],
    )
    nothing = conversation("c-empty", "", [("t", None, tool("python", "execution_output", "", 1))])
    nested = conversation(
        "c-nested",
        "Trip",
        [
            ("u1", None, message("user", "plan", time=1)),
            ("a1", "u1", message("assistant", "a plan", time=2)),
            ("u1e", None, message("user", "plan again", time=3)),
            ("a1e", "u1e", message("assistant", "another plan", time=4)),
            ("a1f", "u1e", message("assistant", "a third plan", time=5)),
        ],
        current="a1",
    )
    path = write_export(tmp_path / "c.json", [no_prompt, nothing, nested])
    report = import_path(store, path)
    titles = [store.manifest(c.session_id).title for c in report.conversations]
    assert titles == [
        "Hello! How can I help?",
        "Untitled conversation",
        "Trip",
        "Trip (branch 1)",
        "Trip (branch 1.1)",
    ]


def _open_webui_chat() -> dict[str, Any]:
    """One chat object as Open WebUI keeps it (its row's ``chat``), with an edited prompt."""
    messages = {
        "m1": {"id": "m1", "parentId": None, "childrenIds": ["m2"], "role": "user"},
        "m2": {"id": "m2", "parentId": "m1", "childrenIds": [], "role": "assistant"},
        "m1e": {"id": "m1e", "parentId": None, "childrenIds": [], "role": "user"},
    }
    for key, text, time in [("m1", "hi", 1), ("m2", "hello", 2), ("m1e", "hi again", 3)]:
        messages[key].update({"content": text, "timestamp": 1_719_000_000 + time})
    messages["m2"]["model"] = "llama3.1:8b"
    return {
        "id": "c-bare",
        "title": "Bare",
        "models": ["llama3.1:8b"],
        "history": {"messages": messages, "currentId": "m2"},
        "messages": [messages["m1"], messages["m2"]],
        "timestamp": 1_719_000_000_000,
    }


@pytest.mark.parametrize("wrapped", [False, True], ids=["alone", "in-an-array"])
def test_a_bare_open_webui_chat_object_is_imported(
    tmp_path: Path, store: SessionStore, wrapped: bool
) -> None:
    chat = _open_webui_chat()
    path = tmp_path / "chat.json"
    path.write_bytes(orjson.dumps([chat] if wrapped else chat))
    report = import_path(store, path)
    assert report.format == "open-webui" and report.skipped == ()
    assert [(c.kind, c.source_id, c.title) for c in report.conversations] == [
        ("root", "c-bare", "Bare"),
        ("fork", "c-bare/m1e", "Bare (branch 1)"),
    ]
    assert transcript(store, report.conversations[0].session_id) == [
        ("user", "hi"),
        ("assistant", "hello"),
    ]


def test_an_open_webui_object_without_a_tree_says_what_was_expected(
    tmp_path: Path, store: SessionStore
) -> None:
    path = tmp_path / "chat.json"
    path.write_bytes(orjson.dumps([{"id": "c-x", "title": "X", "chat": {"title": "X"}}]))
    report = import_path(store, path, format="open-webui")
    (skip,) = report.skipped
    assert skip.reason == (
        'no message tree: expected a chat row {"chat": {"history": {"messages": {…}}}} '
        'or a chat {"history": {"messages": {…}}}'
    )
    assert not store.sessions_dir.exists() or not any(store.sessions_dir.iterdir())


def _librechat_message(
    message_id: str, parent: str, text: str, *, user: bool, at: str | None
) -> dict[str, Any]:
    """One message of a flat LibreChat export; ``at`` None: written without createdAt/updatedAt."""
    message: dict[str, Any] = {
        "messageId": message_id,
        "conversationId": "c-lc",
        "parentMessageId": parent,
        "isCreatedByUser": user,
        "sender": "User" if user else "GPT-4o",
        "model": None if user else "gpt-4o",
        "text": text,
        "error": False,
        "unfinished": False,
    }
    if at is not None:
        message.update({"createdAt": at, "updatedAt": at})
    return message


def test_a_librechat_fork_without_times_takes_the_nearest_earlier_known_time(
    tmp_path: Path, store: SessionStore
) -> None:
    root = "00000000-0000-0000-0000-000000000000"
    export = {
        "conversationId": "c-lc",
        "title": "Times",
        "endpoint": "openAI",
        "recursive": False,
        "options": {"model": "gpt-4o"},
        "messages": [
            _librechat_message("u1", root, "first", user=True, at="2024-04-09T14:40:00.000Z"),
            _librechat_message("a1", "u1", "one", user=False, at="2024-04-09T14:40:05.000Z"),
            _librechat_message("u2", "a1", "second", user=True, at="2024-04-09T14:41:00.000Z"),
            _librechat_message("a2", "u2", "two", user=False, at="2024-04-09T14:41:05.000Z"),
            _librechat_message("u2e", "a1", "second, edited", user=True, at=None),
            _librechat_message("a2e", "u2e", "two, again", user=False, at=None),
        ],
    }
    path = tmp_path / "librechat.json"
    path.write_bytes(orjson.dumps(export))
    report = import_path(store, path)
    fork = next(c for c in report.conversations if c.kind == "fork")
    assert transcript(store, fork.session_id)[-2:] == [
        ("user", "second, edited"),
        ("assistant", "two, again"),
    ]
    answered = 1712673605.0  # 14:40:05, the answer it branched after
    assert store.manifest(fork.session_id).created_at == answered
    events = [e for frame in store.read(fork.session_id).scan.frames for e in frame.events]
    assert {e["ts"] for e in events} == {1712673600.0, answered}  # nothing at the import's time


SESSION = "5e5510b1-0000-4000-8000-000000000001"


def _claude_line(uuid: str, parent: str | None, kind: str, content: Any, **extra: Any) -> bytes:
    """One Claude Code 2.0.x record (the fields the real files carry around the message).

    Its time is 10:00 plus as many seconds as its uuid has characters, so longer
    uuids are later records.
    """
    message: dict[str, Any] = {"role": kind, "content": content}
    if kind == "assistant":
        message.update({"id": f"msg_{uuid}", "type": "message", "model": "claude-sonnet-4-5"})
    record = {
        "parentUuid": parent,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/home/ana/shop",
        "sessionId": SESSION,
        "version": "2.0.61",
        "gitBranch": "main",
        "type": kind,
        "message": message,
        "uuid": uuid,
        "timestamp": f"2025-06-01T10:00:{len(uuid):02d}.000Z",
        **extra,
    }
    return orjson.dumps(record) + b"\n"


def test_flat_sub_agent_files_become_children_of_the_session_that_spawned_them(
    tmp_path: Path, store: SessionStore
) -> None:
    project = tmp_path / "projects" / "-home-ana-shop"
    project.mkdir(parents=True)
    task = {"description": "Write tests", "prompt": "Write tests for the cart"}
    (project / f"{SESSION}.jsonl").write_bytes(
        _claude_line("u1", None, "user", "Add tests")
        + _claude_line(
            "a1",
            "u1",
            "assistant",
            [{"type": "tool_use", "id": "toolu_T", "name": "Task", "input": task}],
        )
        + _claude_line(
            "r1",
            "a1",
            "user",
            [{"tool_use_id": "toolu_T", "type": "tool_result", "content": "Done."}],
            agentId="f1a2b3c",  # 2.0.x: the result record names its agent at its top level
        )
        + _claude_line("a2", "r1", "assistant", [{"type": "text", "text": "Tests added."}])
        # a sidechain holding only a tool result whose call is elsewhere
        + _claude_line(
            "o1",
            "gone",
            "user",
            [{"tool_use_id": "toolu_X", "type": "tool_result", "content": "stray"}],
            isSidechain=True,
            agentId="e0e0e0e",
        )
    )
    agent = {"isSidechain": True, "agentId": "f1a2b3c"}
    (project / "agent-f1a2b3c.jsonl").write_bytes(
        _claude_line("s1", None, "user", "Write tests for the cart", **agent)
        + _claude_line(
            "s2", "s1", "assistant", [{"type": "text", "text": "Wrote test_cart.py"}], **agent
        )
    )
    report = import_path(store, tmp_path / "projects")
    assert report.skipped == ()
    shapes = [(c.kind, c.source_id) for c in report.conversations]
    assert shapes == [("root", SESSION), ("child", f"{SESSION}/agent-f1a2b3c")]
    root, child = report.conversations
    assert child.parent_session_id == root.session_id
    spawned = store.manifest(child.session_id).parent
    root_turns = [t.turn_id for t in store.read(root.session_id).projection.turns]
    assert spawned is not None and spawned.turn_id == root_turns[0]
    assert transcript(store, child.session_id) == [
        ("user", "Write tests for the cart"),
        ("assistant", "Wrote test_cart.py"),
    ]
    assert any("e0e0e0e: a sub-agent without messages" in w for w in report.warnings)


ORIGINAL = "5e5510c1-0000-4000-8000-000000000001"
COPY = "0e5510c2-0000-4000-8000-000000000002"  # sorts before the original by name


def _shared(session_id: str, **extra: Any) -> bytes:
    """The first turn, as the original wrote it and a copy repeats it (same uuids, same times)."""
    return _claude_line("u1", None, "user", "Add a cart", sessionId=session_id, **extra) + (
        _claude_line(
            "a1",
            "u1",
            "assistant",
            [{"type": "text", "text": "Cart added."}],
            sessionId=session_id,
            **extra,
        )
    )


def test_a_headless_fork_session_copy_is_the_fork_and_the_original_the_root(
    tmp_path: Path, store: SessionStore
) -> None:
    project = tmp_path / "-home-ana-shop"
    project.mkdir()
    (project / f"{ORIGINAL}.jsonl").write_bytes(
        _shared(ORIGINAL)
        + _claude_line("u2", "a1", "user", "Now a checkout", sessionId=ORIGINAL)
        + _claude_line("a2", "u2", "assistant", [{"type": "text", "text": "Checkout."}])
    )
    mode = orjson.dumps({"type": "mode", "mode": "normal", "sessionId": COPY}) + b"\n"
    (project / f"{COPY}.jsonl").write_bytes(
        mode
        + _shared(COPY)
        + _claude_line("u2222", "a1", "user", "Now a wishlist", sessionId=COPY)
        + _claude_line("a2222", "u2222", "assistant", [{"type": "text", "text": "Wishlist."}])
    )
    report = import_path(store, project)
    assert [(c.kind, c.source_id) for c in report.conversations] == [
        ("root", ORIGINAL),
        ("fork", f"{ORIGINAL}/a2222"),
    ]
    root, fork = report.conversations
    assert transcript(store, root.session_id)[-1] == ("assistant", "Checkout.")
    assert transcript(store, fork.session_id)[-1] == ("assistant", "Wishlist.")


def test_a_branch_file_s_custom_title_stays_with_the_branch(
    tmp_path: Path, store: SessionStore
) -> None:
    project = tmp_path / "-home-ana-shop"
    project.mkdir()
    (project / f"{ORIGINAL}.jsonl").write_bytes(_shared(ORIGINAL))
    marked = {"forkedFrom": {"sessionId": ORIGINAL, "messageUuid": "a1"}}
    title = {"type": "custom-title", "customTitle": "Add a cart (Branch)", "sessionId": COPY}
    (project / f"{COPY}.jsonl").write_bytes(
        _shared(COPY, **marked)
        + _claude_line("u2222", "a1", "user", "Now a wishlist", sessionId=COPY)
        + _claude_line("a2222", "u2222", "assistant", [{"type": "text", "text": "Wishlist."}])
        + orjson.dumps(title)
        + b"\n"
    )
    report = import_path(store, project)
    assert [(c.kind, c.source_id, c.title) for c in report.conversations] == [
        ("root", ORIGINAL, "Add a cart"),
        ("fork", f"{ORIGINAL}/a2222", "Add a cart (branch 1)"),
    ]
