"""The ChatGPT reader: what each content type and role becomes, and bad input."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import orjson
import pytest
from helpers.chatgpt_export import conversation, linear, message, write_export, write_zip

from branchwise.core.errors import ImportNotFound, MalformedImport, UnsafeArchive
from branchwise.core.importing import chatgpt
from branchwise.core.importing.source import (
    Progress,
    SourceRecord,
    SourceSkip,
    SourceTree,
    SourceWarning,
)


def trees(records: list[SourceRecord]) -> list[SourceTree]:
    return [r for r in records if isinstance(r, SourceTree)]


def rich_conversation() -> dict[str, object]:
    return conversation(
        "conv-rich",
        "Rich",
        [
            ("root", None, None),
            ("sys", "root", message("system", "you are", hidden=True)),
            (
                "ctx",
                "sys",
                message(
                    "user", content={"content_type": "user_editable_context", "user_profile": "x"}
                ),
            ),
            (
                "u1",
                "ctx",
                message(
                    "user",
                    content={
                        "content_type": "multimodal_text",
                        "parts": [
                            {
                                "content_type": "image_asset_pointer",
                                "asset_pointer": "file-service://x",
                            },
                            "what is this?",
                        ],
                    },
                    time=10.5,
                ),
            ),
            (
                "think",
                "u1",
                message("assistant", content={"content_type": "thoughts", "thoughts": []}),
            ),
            (
                "recap",
                "think",
                message(
                    "assistant", content={"content_type": "reasoning_recap", "content": "Thought"}
                ),
            ),
            (
                "code",
                "recap",
                message(
                    "assistant",
                    content={"content_type": "code", "language": "python", "text": "print(1)"},
                    recipient="python",
                    time=11.0,
                ),
            ),
            (
                "out",
                "code",
                message(
                    "tool",
                    content={"content_type": "execution_output", "text": "1"},
                    name="python",
                    time=None,
                ),
            ),
            (
                "search",
                "out",
                message(
                    "assistant",
                    content={"content_type": "code", "language": "unknown", "text": "search('x')"},
                    recipient="browser",
                ),
            ),
            (
                "browse",
                "search",
                message(
                    "tool",
                    content={
                        "content_type": "tether_browsing_display",
                        "result": "found it",
                        "summary": None,
                    },
                    name="browser",
                ),
            ),
            ("hiddenmsg", "browse", message("assistant", "secret", hidden=True)),
            ("a1", "hiddenmsg", message("assistant", "It is a cat.", model="gpt-4o", time=12.0)),
            (
                "mem",
                "a1",
                message(
                    "assistant",
                    content={"content_type": "model_editable_context", "model_set_context": ""},
                ),
            ),
        ],
        current="mem",
    )


def test_every_content_type_and_role_becomes_its_kind(tmp_path: Path) -> None:
    records = list(
        chatgpt.read(write_export(tmp_path / "conversations.json", [rich_conversation()]))
    )
    (tree,) = trees(records)
    shown = [(i.id, i.kind, i.text) for i in tree.items if i.kind is not None]
    assert shown == [
        ("u1", "user", "[image]\nwhat is this?"),
        ("code", "tool_call", "print(1)"),
        ("out", "tool_result", "1"),
        ("search", "tool_call", "search('x')"),
        ("browse", "tool_result", "found it"),
        ("a1", "assistant", "It is a cat."),
    ]
    by_id = {i.id: i for i in tree.items}
    assert by_id["code"].tool_name == "python" and by_id["out"].call_id == "code"
    assert by_id["browse"].call_id == "search"
    assert by_id["a1"].model == "gpt-4o" and by_id["a1"].time == 12.0
    assert by_id["out"].time is None
    assert {i.id for i in tree.items if i.kind is None} == {
        "root",
        "sys",
        "ctx",
        "think",
        "recap",
        "hiddenmsg",
        "mem",
    }
    assert tree.id == "conv-rich" and tree.title == "Rich" and tree.current == "mem"
    assert isinstance(records[-1], Progress) and records[-1].read_bytes == records[-1].total_bytes


def test_a_zip_export_is_read_from_its_conversations_member(tmp_path: Path) -> None:
    path = write_zip(tmp_path / "export.zip", [linear("c1", 2), linear("c2", 1)])
    assert chatgpt.sniff(path)
    assert [t.id for t in trees(list(chatgpt.read(path)))] == ["c1", "c2"]


def test_sniff_knows_its_own_files_only(tmp_path: Path) -> None:
    assert chatgpt.sniff(write_export(tmp_path / "c.json", [linear("c1", 1)]))
    other = tmp_path / "other.json"
    other.write_text('[{"chat": {"history": {}}}]')
    assert not chatgpt.sniff(other)
    assert not chatgpt.sniff(tmp_path)


def test_conversations_without_a_tree_are_skipped(tmp_path: Path) -> None:
    path = write_export(tmp_path / "c.json", [{"title": "x", "id": "n"}, 5, linear("ok", 1)])  # type: ignore[list-item]
    records = list(chatgpt.read(path))
    skips = [r for r in records if isinstance(r, SourceSkip)]
    assert [s.source for s in skips] == [f"{path}#1", f"{path}#2"]
    assert [t.id for t in trees(records)] == ["ok"]


@pytest.mark.parametrize(
    "content",
    [b"{not json", b'{"a": 1}', b"\xff\xfe[", b"[" * 5000 + b"]" * 5000, b""],
    ids=["malformed", "object", "not-utf8", "deep", "empty"],
)
def test_damage_before_the_first_conversation_is_a_typed_error(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "conversations.json"
    path.write_bytes(content)
    with pytest.raises(MalformedImport):
        list(chatgpt.read(path))


@pytest.mark.parametrize(
    "tail",
    [
        b', {"mapping": ',
        b', {"title": "\xff"}]',
        b", [" + b'{"a":' * 300 + b"1" + b"}" * 300 + b"]]",
    ],
    ids=["malformed", "not-utf8", "deep"],
)
def test_damage_after_a_conversation_ends_the_stream_with_a_warning(
    tmp_path: Path, tail: bytes
) -> None:
    path = tmp_path / "conversations.json"
    first = orjson.dumps(linear("ok", 1))
    path.write_bytes(b"[" + first + b" " * (2 << 20) + tail)  # past the first read
    records = list(chatgpt.read(path))
    assert [t.id for t in trees(records)] == ["ok"]
    assert any(isinstance(r, SourceWarning) for r in records)


def test_strings_with_brackets_and_escapes_do_not_count_as_nesting(tmp_path: Path) -> None:
    text = '[[[[ "\\" {{{{ ' * 200
    path = write_export(tmp_path / "c.json", [linear("c1", 1, text=text)])
    (tree,) = trees(list(chatgpt.read(path)))
    assert tree.items[2].text.startswith(text)


def test_a_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_bytes(b"\xef\xbb\xbf" + orjson.dumps([linear("c1", 1)]))
    assert [t.id for t in trees(list(chatgpt.read(path)))] == ["c1"]


def test_a_zip_bomb_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "bomb.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("conversations.json", b"[" + b" " * (64 << 20) + b"]")
    with pytest.raises(UnsafeArchive):
        list(chatgpt.read(path))


def test_a_member_path_outside_the_archive_is_refused(tmp_path: Path) -> None:
    path = write_zip(tmp_path / "x.zip", [linear("c1", 1)], member="../conversations.json")
    with pytest.raises(UnsafeArchive):
        list(chatgpt.read(path))


def test_a_zip_without_conversations_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("chat.html", "<html/>")
    with pytest.raises(UnsafeArchive):
        list(chatgpt.read(path))


def test_a_missing_file_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(ImportNotFound):
        list(chatgpt.read(tmp_path / "nope.json"))


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 7, 64])
def test_the_nesting_guard_reads_strings_right_across_any_chunk_boundary(chunk: int) -> None:
    tricky = ['a\\"[[[', "\\\\", '\\\\\\"{{', "]]]}}", "\\u005b", "x\\\\\\\\"]
    document = orjson.dumps([{"k": [tricky, {"deep": [[[tricky]]]}]}] * 3)
    stream = chatgpt._GuardedStream(io.BytesIO(document), chunk=chunk)
    while stream.read(chunk):
        pass
    assert stream._depth == 0 and stream._carry == b""
    deep = b"[" * 300 + b"]" * 300
    with pytest.raises(chatgpt._TooDeep):
        guarded = chatgpt._GuardedStream(io.BytesIO(deep), chunk=chunk)
        while guarded.read(chunk):
            pass
