"""Claude Code sessions read into source trees: one message per message.id, forks, sub-agents."""

from __future__ import annotations

import shutil
from pathlib import Path

from branchwise.core.importing import claude_code
from branchwise.core.importing.source import (
    Progress,
    SourceItem,
    SourceRecord,
    SourceSkip,
    SourceTree,
    SourceWarning,
)

PROJECTS = Path(__file__).parents[2] / "fixtures" / "importing" / "claude_code"
PROJECT = PROJECTS / "-home-ana-shop"
S1 = "5e5510a1-0000-4000-8000-000000000001"
S2 = "5e5510a2-0000-4000-8000-000000000002"
S3 = "5e5510a3-0000-4000-8000-000000000003"


def trees(records: list[SourceRecord]) -> dict[str, SourceTree]:
    return {r.id: r for r in records if isinstance(r, SourceTree)}


def shape(tree: SourceTree) -> list[tuple[str, str | None, str | None, str]]:
    return [(i.id, i.parent, i.kind, i.text) for i in tree.items]


def by_id(tree: SourceTree) -> dict[str, SourceItem]:
    return {i.id: i for i in tree.items}


def test_sniff_knows_a_session_file_a_project_and_the_projects_folder(tmp_path: Path) -> None:
    assert claude_code.sniff(PROJECTS)
    assert claude_code.sniff(PROJECT)
    assert claude_code.sniff(PROJECT / f"{S1}.jsonl")
    other = tmp_path / "conversations.json"
    other.write_text('[{"mapping": {}}]')
    assert not claude_code.sniff(other)
    assert not claude_code.sniff(tmp_path)
    assert not claude_code.sniff(tmp_path / "missing.jsonl")


def test_files_sharing_records_are_one_tree_whose_current_is_the_first_files_newest_leaf() -> None:
    records = list(claude_code.read(PROJECTS))
    found = trees(records)
    assert set(found) == {S1, S3}  # S2 repeats S1's records: a fork of S1, not a tree of its own
    tree = found[S1]
    assert tree.format == "claude-code"
    assert tree.title == "Shop cart work"  # the summary line naming a leaf of this tree
    assert tree.current == "a7"  # the /rewind prompt is newer than the Task branch
    assert tree.created == 1748772000.0
    assert shape(tree) == [
        ("m1", None, None, ""),  # isMeta caveat
        ("c1", "m1", None, ""),  # a slash command record
        ("u1", "c1", "user", "Add a cart to the shop"),
        # msg_01 is three records (thinking, text, tool_use): one message and its call
        ("a1", "u1", "assistant", "I'll read cart.py first."),
        ("a3#toolu_01", "a1", "tool_call", "/home/ana/shop/cart.py"),
        ("r1", "a3#toolu_01", "tool_result", "class Cart: pass"),
        ("a4", "r1", "assistant", "The cart is added."),
        ("sys1", "a4", None, ""),  # system record
        ("u2", "sys1", "user", "Now write tests"),
        ("a5", "u2", None, ""),  # a message with no text, only a Task call
        ("a5#toolu_02", "a5", "tool_call", "Write tests"),
        (
            "r2",
            "a5#toolu_02",
            "tool_result",
            "Tests written in test_cart.py.\nagentId: ab12cd3 (for resuming)",
        ),
        ("a6", "r2", "assistant", "Tests are in."),
        ("i1", "a6", None, ""),  # "[Request interrupted by user]"
        ("u3", "a4", "user", "Now write the docs instead"),  # /rewind: sibling of u2
        ("a7", "u3", "assistant", "Docs are written."),
        # the --fork-session file's own records, after the shared ones it repeats
        ("u4", "a4", "user", "Use Redis for the cart"),
        ("a8", "u4", "assistant", "Switched to Redis."),
    ]
    items = by_id(tree)
    call = items["a3#toolu_01"]
    assert (call.tool_name, call.call_id, call.arguments) == (
        "Read",
        "toolu_01",
        '{"file_path": "/home/ana/shop/cart.py"}',
    )
    assert items["r1"].call_id == "toolu_01"
    assert items["a1"].model == "claude-sonnet-4-5"
    assert items["u1"].time == 1748772010.0


def test_a_sub_agent_file_is_a_child_spawned_by_its_task_call() -> None:
    tree = trees(list(claude_code.read(PROJECT)))[S1]
    child_id = f"{S1}/agent-ab12cd3"
    assert by_id(tree)["a5#toolu_02"].spawns == child_id
    assert [c.id for c in tree.children] == [child_id]  # agent-acompact-* is internal
    child = tree.children[0]
    assert child.title == "Write tests"  # from agent-ab12cd3.meta.json
    assert child.current == "sa4"
    assert shape(child) == [
        ("sa1", None, "user", "Write tests for the cart"),
        ("sa2", "sa1", "assistant", "Writing test_cart.py."),
        ("sa3#toolu_s1", "sa2", "tool_call", "test_cart.py"),
        ("sr1", "sa3#toolu_s1", "tool_result", "File created"),
        ("sa4", "sr1", "assistant", "Tests written in test_cart.py."),
    ]
    assert by_id(child)["sa2"].model == "claude-haiku-4-5"


def test_an_inline_sidechain_is_found_by_its_prompt_and_bad_records_are_left_to_the_planner() -> (
    None
):
    records = list(claude_code.read(PROJECT))
    tree = trees(records)[S3]
    assert tree.current == "b2"
    assert tree.title == ""
    assert shape(tree) == [
        ("v1", None, "user", "Explore the repo"),
        ("b1", "v1", "assistant", "Let me look."),
        ("b1#toolu_31", "b1", "tool_call", "Find entry point"),
        ("q1", "b1#toolu_31", "tool_result", "It is main.py."),
        ("b2", "q1", "assistant", "The entry point is main.py, caf\ufffd."),
        ("d1", "gone-uuid", "user", "A prompt whose parent is gone"),  # dangling: kept
        ("y1", "y2", "user", "Loop one"),  # a cycle: kept
        ("y2", "y1", "assistant", "Loop two"),
    ]
    child_id = f"{S3}/agent-sidechain-x1"
    assert by_id(tree)["b1#toolu_31"].spawns == child_id
    assert [(c.id, shape(c)) for c in tree.children] == [
        (
            child_id,
            [
                ("x1", None, "user", "Find the entry point"),
                ("x2", "x1", "assistant", "It is main.py."),
            ],
        ),
        # no Task call sent this one: kept, unclaimed (the planner puts it at the start)
        (
            f"{S3}/agent-sidechain-z1",
            [("z1", None, "user", "A sub-agent prompt no Task call sent")],
        ),
    ]
    assert not any(i.spawns == f"{S3}/agent-sidechain-z1" for i in tree.items)
    warnings = [r.message for r in records if isinstance(r, SourceWarning)]
    assert warnings == [
        f"{PROJECT / (S1 + '.jsonl')}:19: unparsable line ignored",
        f"{PROJECT / (S3 + '.jsonl')}:6: non-UTF-8 bytes replaced",
    ]


def test_one_fork_file_alone_is_its_own_tree() -> None:
    tree = trees(list(claude_code.read(PROJECT / f"{S2}.jsonl")))[S2]
    assert tree.current == "a8"
    assert tree.children == ()
    assert [i.id for i in tree.items][-2:] == ["u4", "a8"]


def test_the_file_that_wrote_a_record_first_is_the_root_whatever_the_names(
    tmp_path: Path,
) -> None:
    project = tmp_path / "p"
    project.mkdir()
    shutil.copy(PROJECT / f"{S1}.jsonl", project / "zzz-original.jsonl")
    shutil.copy(PROJECT / f"{S2}.jsonl", project / "aaa-fork.jsonl")
    tree = trees(list(claude_code.read(project)))["zzz-original"]
    assert tree.current == "a7"
    assert "a8" in by_id(tree)


def test_progress_reaches_the_total_and_an_empty_session_is_skipped(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    (project / "empty.jsonl").write_text('{"type": "summary", "summary": "x", "leafUuid": "n"}\n')
    records = list(claude_code.read(project))
    assert SourceSkip(source=str(project / "empty.jsonl"), reason="no conversation records") in (
        records
    )
    progress = [r for r in records if isinstance(r, Progress)]
    assert progress[-1].read_bytes == progress[-1].total_bytes > 0
