"""LibreChat exports read into source trees: recursive and flat, content parts, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from branchwise.core.errors import MalformedImport
from branchwise.core.importing import librechat
from branchwise.core.importing.source import (
    Progress,
    SourceRecord,
    SourceSkip,
    SourceTree,
    SourceWarning,
)

FIXTURES = Path(__file__).parents[2] / "fixtures" / "importing" / "librechat"
TREE = FIXTURES / "kyoto-tree.json"
FLAT = FIXTURES / "menu-flat.json"


def trees(records: list[SourceRecord]) -> list[SourceTree]:
    return [r for r in records if isinstance(r, SourceTree)]


def shape(tree: SourceTree) -> list[tuple[str, str | None, str | None, str]]:
    return [(i.id, i.parent, i.kind, i.text) for i in tree.items]


def test_sniff_knows_both_export_shapes_and_refuses_others(tmp_path: Path) -> None:
    assert librechat.sniff(TREE)
    assert librechat.sniff(FLAT)
    owui = tmp_path / "owui.json"
    owui.write_text('[{"id": "c", "chat": {"history": {"messages": {}, "currentId": null}}}]')
    assert not librechat.sniff(owui)
    assert not librechat.sniff(tmp_path)


def test_a_recursive_export_keeps_edits_and_regenerations_with_the_newest_sibling_rule() -> None:
    records = list(librechat.read(TREE))
    (tree,) = trees(records)
    assert (tree.format, tree.id, tree.title, tree.current, tree.main_rule) == (
        "librechat",
        "af1ea676-f525-444f-a9ed-7c8dbf062733",
        "Kyoto trip",
        None,
        "newest_sibling",
    )
    assert tree.created == 1712673000.0
    assert shape(tree) == [
        ("m-u1", None, "user", "What is there in Kyoto?"),  # the all-zero parent: a root
        ("m-a1", "m-u1", "assistant", "Kyoto has temples."),
        ("m-u2", "m-a1", "user", "How far is Osaka?"),
        ("m-a2", "m-u2", "assistant", "Osaka is 15 minutes away."),
        ("m-u2b", "m-a1", "user", "How far is Nara?"),  # an edit: a sibling prompt
        ("m-a2b", "m-u2b", "assistant", "Nara is 45 minutes away by train."),
        # a regeneration with content parts: think hidden, the tool call and its output
        ("m-a1r#0", "m-u1", "assistant", "Let me check the map."),
        ("m-a1r#1", "m-a1r#0", "tool_call", "maps_search"),
        ("m-a1r#2", "m-a1r#1", "tool_result", "Kinkaku-ji, Fushimi Inari"),
        ("m-a1r", "m-a1r#2", "assistant", "See Kinkaku-ji and Fushimi Inari."),
    ]
    items = {i.id: i for i in tree.items}
    assert (items["m-a1"].model, items["m-a1r"].model, items["m-u1"].model) == (
        "gpt-4o",
        "gpt-4o-mini",
        None,
    )
    call = items["m-a1r#1"]
    assert (call.call_id, call.tool_name, call.arguments) == (
        "call_7",
        "maps_search",
        '{"q":"Kyoto sights"}',
    )
    assert items["m-a1r#2"].call_id == "call_7"
    assert items["m-a1r"].time == 1712673090.0


def test_a_flat_export_keeps_dangling_parents_and_cycles_and_warns_about_bad_bytes() -> None:
    records = list(librechat.read(FLAT))
    (tree,) = trees(records)
    assert shape(tree) == [
        ("f-u1", None, "user", "Summarize this caf\ufffd menu"),
        ("f-a1", "f-u1", "assistant", "Coffee and cake."),
        ("f-d1", "f-missing", "user", "Lost prompt"),
        ("f-y1", "f-y2", "user", "Loop one"),
        ("f-y2", "f-y1", "assistant", "Loop two"),
    ]
    assert tree.items[1].model == "Agent Smith"  # no model: the sender names the agent
    assert [r for r in records if isinstance(r, SourceWarning)] == [
        SourceWarning(f"{FLAT}#0: non-UTF-8 bytes replaced")
    ]
    assert records[-1] == Progress(FLAT.stat().st_size, FLAT.stat().st_size)


def test_an_array_of_conversations_a_conversation_without_messages_and_a_deep_chain(
    tmp_path: Path,
) -> None:
    both = tmp_path / "both.json"
    tree = json.loads(TREE.read_text())
    # a recursive chain of 3000 messages nests 6000 levels deep (written by hand: json.dumps
    # itself would recurse too deep)
    opened = "".join(
        f'{{"messageId": "d{n}", "isCreatedByUser": {str(n % 2 == 0).lower()}, "text": "{n}",'
        ' "children": ['
        for n in range(3000)
    )
    chain = '{"conversationId": "deep", "recursive": true, "messagesTree": [' + opened
    chain += "]}" * 3000 + "]}"
    empty = {"conversationId": "empty", "messages": []}
    both.write_text(f"[{json.dumps(tree)}, {json.dumps(empty)}, {chain}]")
    records = list(librechat.read(both))
    assert [t.id for t in trees(records)] == [tree["conversationId"], "deep"]
    assert SourceSkip(source=f"{both}#1", reason="no messages") in records
    long = trees(records)[1]
    assert len(long.items) == 3000
    assert (long.items[-1].id, long.items[-1].parent, long.items[-1].kind) == (
        "d2999",
        "d2998",
        "assistant",
    )


def test_damage_before_the_first_conversation_is_a_typed_error_and_after_it_a_warning(
    tmp_path: Path,
) -> None:
    data = TREE.read_bytes()
    torn = tmp_path / "torn.json"
    torn.write_bytes(data[: len(data) // 2])
    with pytest.raises(MalformedImport, match="cannot be read as a LibreChat export"):
        list(librechat.read(torn))
    both = tmp_path / "both.json"
    both.write_bytes(b"[" + data + b", " + data[: len(data) // 2])
    records = list(librechat.read(both))
    assert len(trees(records)) == 1
    (warning,) = [r.message for r in records if isinstance(r, SourceWarning)]
    assert warning.endswith("after conversation 1; the rest of the file was not imported")
