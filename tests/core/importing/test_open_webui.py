"""Open WebUI exports as source trees: sibling answers, second roots, tool calls, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from branchwise.core.errors import MalformedImport
from branchwise.core.importing import open_webui
from branchwise.core.importing.source import (
    Progress,
    SourceRecord,
    SourceSkip,
    SourceTree,
    SourceWarning,
)

EXPORT = Path(__file__).parents[2] / "fixtures" / "importing" / "open_webui" / "chat-export.json"


def trees(records: list[SourceRecord]) -> dict[str, SourceTree]:
    return {r.id: r for r in records if isinstance(r, SourceTree)}


def shape(tree: SourceTree) -> list[tuple[str, str | None, str | None, str]]:
    return [(i.id, i.parent, i.kind, i.text) for i in tree.items]


def test_sniff_knows_an_export_and_refuses_other_json(tmp_path: Path) -> None:
    assert open_webui.sniff(EXPORT)
    chatgpt = tmp_path / "conversations.json"
    chatgpt.write_text('[{"mapping": {"a": {"children": []}}, "current_node": "a"}]')
    assert not open_webui.sniff(chatgpt)
    assert not open_webui.sniff(tmp_path / "missing.json")


def test_the_tree_keeps_edits_as_roots_models_as_siblings_and_tool_calls_as_items() -> None:
    records = list(open_webui.read(EXPORT))
    trip = trees(records)["c-trip"]
    assert (trip.format, trip.title, trip.current, trip.created) == (
        "open-webui",
        "Trip planning",
        "m5",
        1717000000.0,
    )
    assert shape(trip) == [
        ("m1", None, "user", "Plan a trip to Kyoto"),
        ("m2a", "m1", "assistant", "Day 1: temples."),
        ("m2b", "m1", "assistant", "Day 1: markets."),  # a second model's answer: a sibling
        ("m3", "m2a", "user", "Add a day trip to Nara"),
        ("m4", "m3", "assistant", "Day 2: Nara deer park."),  # reasoning block dropped
        ("m5#0", "m3", "tool_call", "train_times"),
        ("m5#1", "m5#0", "tool_result", "45 min"),
        ("m5", "m5#1", "assistant", "The train to Nara takes 45 minutes."),
        ("e1", None, "user", "Plan a trip to Osaka"),  # the edited first prompt: a second root
        ("e2", "e1", "assistant", "Osaka: street food."),
    ]
    items = {i.id: i for i in trip.items}
    assert [items[k].model for k in ("m1", "m2a", "m2b")] == [None, "Llama 3.1 8B", "qwen2.5:7b"]
    assert (items["m5#0"].call_id, items["m5#0"].tool_name, items["m5#0"].arguments) == (
        "call_9",
        "train_times",
        '{"to":"Nara"}',
    )
    assert items["m5#1"].call_id == "call_9"
    assert items["m2b"].time == 1717000011.0


def test_output_lists_system_prompts_dangling_parents_and_cycles() -> None:
    weather = trees(list(open_webui.read(EXPORT)))["c-weather"]
    assert weather.current is None  # no currentId: the planner picks the latest leaf
    assert shape(weather) == [
        ("s0", None, None, ""),
        ("w1", "s0", "user", "Weather in Paris?"),
        ("w2#0", "w1", "tool_call", "get_weather"),
        ("w2#1", "w2#0", "tool_result", "18C, rain"),
        ("w2", "w2#1", "assistant", "Paris: 18C, rain."),  # from output, reasoning hidden
        ("d1", "no-such-message", "user", "Orphaned prompt"),
        ("y1", "y2", "user", "Loop one"),
        ("y2", "y1", "assistant", "Loop two"),
    ]


def test_a_chat_without_a_tree_is_skipped_and_bad_bytes_warn_for_their_chat() -> None:
    records = list(open_webui.read(EXPORT))
    assert SourceSkip(source=f"{EXPORT}#2", reason=open_webui.NO_TREE) in records
    assert [r for r in records if isinstance(r, SourceWarning)] == [
        SourceWarning(f"{EXPORT}#3: non-UTF-8 bytes replaced")
    ]
    latin = trees(records)["c-latin"]
    assert shape(latin) == [("l1", None, "user", "caf\ufffd au lait")]
    progress = [r for r in records if isinstance(r, Progress)]
    assert progress[-1] == Progress(EXPORT.stat().st_size, EXPORT.stat().st_size)


def test_a_truncated_export_keeps_the_whole_chats_before_the_tear(tmp_path: Path) -> None:
    data = EXPORT.read_bytes()
    torn = tmp_path / "torn.json"
    torn.write_bytes(data[: data.index(b'"c-weather"') + 200])
    records = list(open_webui.read(torn))
    assert list(trees(records)) == ["c-trip"]
    (warning,) = [r.message for r in records if isinstance(r, SourceWarning)]
    assert warning.startswith(f"{torn}: malformed JSON")
    assert warning.endswith("after conversation 1; the rest of the file was not imported")
    torn.write_bytes(data[:200])  # torn inside the first chat: nothing can be imported
    with pytest.raises(MalformedImport, match="cannot be read as an Open WebUI export"):
        list(open_webui.read(torn))


def test_not_json_absurd_nesting_and_a_lone_chat_object(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.json"
    garbage.write_bytes(b"\x00\x01 not json")
    with pytest.raises(MalformedImport, match="not a JSON array or object"):
        list(open_webui.read(garbage))
    for opener in ("[", '[1, {"k": '):  # plain brackets, and levels with values between
        deep = tmp_path / "deep.json"
        depth = 100_000
        closer = "]" if opener == "[" else "}]"
        deep.write_text(
            '[{"id": "d", "chat": {"history": {"currentId": "a", "messages": {"a": {"id": "a",'
            f' "parentId": null, "role": "user", "content": {opener * depth}1{closer * depth}'
            "}}}}}]"
        )
        # built without recursion and in memory linear in depth: read like any other chat
        assert shape(trees(list(open_webui.read(deep)))["d"]) == [("a", None, "user", "")]
    lone = tmp_path / "one-chat.json"
    lone.write_text(json.dumps(json.loads(EXPORT.read_bytes().decode("utf-8", "replace"))[0]))
    assert list(trees(list(open_webui.read(lone)))) == ["c-trip"]


def test_an_early_export_with_only_the_flat_message_list_is_read_by_its_parent_ids(
    tmp_path: Path,
) -> None:
    early = tmp_path / "early.json"
    messages = [
        {"id": "a", "parentId": None, "role": "user", "content": "hi", "timestamp": 1},
        {"id": "b", "parentId": "a", "role": "assistant", "content": "hello", "timestamp": 2},
    ]
    early.write_text(json.dumps([{"id": "old", "title": "Old", "chat": {"messages": messages}}]))
    (tree,) = trees(list(open_webui.read(early))).values()
    assert shape(tree) == [("a", None, "user", "hi"), ("b", "a", "assistant", "hello")]
    assert tree.current is None
