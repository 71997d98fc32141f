"""Branch labels: how a branch differs, stored as structure, rendered in the language shown."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest
from helpers.chatgpt_export import conversation, message, write_export
from helpers.cli import run_cli
from helpers.sessions import session_with_turns

from branchwise.core.conversation.ask_again import edit_request, regenerate_request
from branchwise.core.conversation.names import (
    LabelReader,
    branch_title,
    display_title,
    given_branch_label,
    label_of,
    model_label,
    new_branch_name_from_store,
    render_label,
)
from branchwise.core.conversation.views import session_lineage, session_list, session_tree
from branchwise.core.errors import InvalidLabel
from branchwise.core.fork.engine import fork
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.fork.targets import fork_targets
from branchwise.core.importing.run import import_path
from branchwise.core.lineage import create_child
from branchwise.core.providers.demo import DemoProvider
from branchwise.core.runtime import TurnRunner
from branchwise.core.store.manifest import BranchLabel, Manifest, load_manifest
from branchwise.core.store.store import SessionStore


def _turns(store: SessionStore, session_id: str) -> list[str]:
    return [t.turn_id for t in store.read(session_id).projection.turns]


def _branch(store: SessionStore, request: ForkRequest, op: str) -> str:
    """Fork as the CLI does: named by ``names`` first."""
    name = new_branch_name_from_store(
        store, request.source_session_id, request.turn_id, request.origin
    )
    return fork(
        store,
        request,
        op,
        title=name.title,
        label=name.label,
        fork_turn_index=name.fork_turn_index,
    ).child_session_id


def _plain(store: SessionStore, source: str, turn: int, op: str) -> str:
    targets = fork_targets(store, source)
    target = targets.targets[turn - 1]
    request = ForkRequest(source, target.turn_id, target.boundary_sequence or 0, targets.generation)
    return _branch(store, request, op)


def _say(store: SessionStore, session_id: str, text: str) -> None:
    with store.open_writer(session_id) as writer:
        asyncio.run(TurnRunner(writer, DemoProvider()).run(text))


def _listed(store: SessionStore) -> dict[str, dict[str, object]]:
    return {s["sessionId"]: s for s in session_list(store)["sessions"]}


def test_edit_regenerate_and_plain_branches_are_labelled_by_their_origin(
    store: SessionStore,
) -> None:
    root = session_with_turns(store, 3, title="Explain git branches briefly")
    second = _turns(store, root)[1]
    edited = _branch(
        store, edit_request(store, root, second, "What about rebasing instead, in detail?"), "e"
    )
    regen = [_branch(store, regenerate_request(store, root, second), f"r{n}") for n in range(2)]
    other_turn = _branch(store, regenerate_request(store, root, _turns(store, root)[2]), "r-3")
    plain = _plain(store, root, 2, "p")
    listed = _listed(store)
    assert listed[root]["label"] is None and listed[root]["forkTurnIndex"] is None
    assert (listed[edited]["label"], listed[edited]["forkTurnIndex"]) == (
        "Edited: What about rebasing instead,…",
        2,
    )
    # numbered per turn: the original answer is 1
    assert [listed[r]["label"] for r in regen] == ["Regenerated 2", "Regenerated 3"]
    assert (listed[other_turn]["label"], listed[other_turn]["forkTurnIndex"]) == (
        "Regenerated 2",
        3,
    )
    assert (listed[plain]["label"], listed[plain]["forkTurnIndex"]) == ("From turn 2", 2)
    assert listed[plain]["labelParts"] == {"kind": "fork"}
    # its first own prompt completes a plain branch's label; later prompts do not change it
    _say(store, plain, "Now tell me about tags")
    _say(store, plain, "And about stashes")
    assert _listed(store)[plain]["label"] == "From turn 2: Now tell me about tags"
    # an edit's own later turns leave its label alone
    assert store.manifest(edited).label == BranchLabel("edit", text="What about rebasing instead,…")


def test_labels_render_in_the_language_asked_for_at_display_time(store: SessionStore) -> None:
    root = session_with_turns(store, 2)
    regen = _branch(store, regenerate_request(store, root, _turns(store, root)[1]), "r")
    plain = _plain(store, root, 1, "p")
    stored = store.manifest(regen)
    assert stored.label == BranchLabel("regenerate", number=2)  # structure, not words
    turn = stored.fork_turn_index
    assert render_label(stored.label, turn, language="en") == "Regenerated 2"
    assert render_label(stored.label, turn, language="zh_Hans") == "重新生成 2"
    assert render_label(stored.label, turn, language="zh_Hant") == "重新產生 2"
    label = label_of(store.manifest(plain))
    assert render_label(label, 1, language="zh_Hant") == "從第 1 輪"
    named = BranchLabel("fork", text="標籤")
    assert render_label(named, 1, language="zh_Hans") == "从第 1 轮：標籤"
    assert render_label(BranchLabel("fork"), 0, language="en") == "From the start"
    # a turn not known yet (an older manifest the desktop has not read the log of)
    assert render_label(BranchLabel("fork"), None, language="en") == "A branch"
    assert render_label(BranchLabel("fork"), None, language="zh_Hant") == "分支"
    assert render_label(model_label("qwen2.5", 2), 1, language="en") == "qwen2.5 · sample 2"
    assert render_label(model_label("qwen2.5"), 1, language="zh_Hans") == "qwen2.5"


def test_a_label_the_user_gives_is_kept_as_typed_in_every_language(store: SessionStore) -> None:
    root = session_with_turns(store, 1)
    plain = _plain(store, root, 1, "p")
    with store.open_writer(plain) as writer:
        writer.set_label(given_branch_label("  shorter   answer "))
    manifest = store.manifest(plain)
    assert manifest.label == BranchLabel("given", text="shorter answer")
    for language in ("en", "zh_Hans", "zh_Hant"):
        assert render_label(manifest.label, 1, language=language) == "shorter answer"
    assert _listed(store)[plain]["label"] == "shorter answer"
    assert _listed(store)[plain]["forkTurnIndex"] == 1  # the turn stays its own field
    with pytest.raises(InvalidLabel):
        given_branch_label("   ")
    with pytest.raises(InvalidLabel):
        given_branch_label("x" * 81)


def _as_before_labels(store: SessionStore, session_id: str) -> None:
    """Rewrite a manifest as a build before labels wrote it (no label, no fork turn)."""
    directory = store.session_dir(session_id)
    data = orjson.loads((directory / "manifest.json").read_bytes())
    data.pop("labelParts", None)
    data.pop("forkTurnIndex", None)
    (directory / "manifest.json").write_bytes(orjson.dumps(data))
    assert load_manifest(directory).label is None


def test_manifests_older_than_labels_get_them_computed_on_read(store: SessionStore) -> None:
    root = session_with_turns(store, 3)
    turns = _turns(store, root)
    edited = fork(store, edit_request(store, root, turns[2], "other words"), "e").child_session_id
    first = fork(store, regenerate_request(store, root, turns[1]), "r1").child_session_id
    second = fork(store, regenerate_request(store, root, turns[1]), "r2").child_session_id
    plain = _plain(store, root, 1, "p")
    child = create_child(store, root, {"turnId": turns[1]}, "helper").child_session_id
    for session_id in (edited, first, second, plain, child):
        _as_before_labels(store, session_id)
    listed = _listed(store)
    got = {s: (listed[s]["label"], listed[s]["forkTurnIndex"]) for s in listed}
    assert got[edited] == ("Edited: other words", 3)
    assert got[first] == ("Regenerated 2", 2)  # numbered by creation among its siblings
    assert got[second] == ("Regenerated 3", 2)
    assert got[plain] == ("From turn 1", 1)
    assert got[child] == ("Sub-conversation of turn 2", 2)
    # one conversation read alone finds its siblings itself
    lineage = session_lineage(store, second)["lineage"]
    assert [(e["label"], e["forkTurnIndex"]) for e in lineage] == [
        ("Regenerated 3", 2),
        (None, None),
    ]
    tree = {e["sessionId"]: e["label"] for e in session_tree(store, root)["sessions"]}
    assert tree[second] == "Regenerated 3" and tree[root] is None
    # reading computes, never writes: the manifest stays as the older build left it
    assert store.manifest(second).label is None


def test_a_manifest_with_a_label_an_older_build_reads_and_keeps(store: SessionStore) -> None:
    """The fields are optional: a manifest without them is valid, one with them round-trips."""
    manifest = Manifest(
        "dddddddd-b",
        "t",
        "root",
        root_session_id="dddddddd-b",
        label=BranchLabel("model", "qwen2.5", 2),
        fork_turn_index=4,
    )
    data = manifest.to_json()
    assert data["labelParts"] == {"kind": "model", "text": "qwen2.5", "number": 2}
    assert data["forkTurnIndex"] == 4
    assert Manifest.from_json(data) == manifest
    # a label kind from a newer build is not an error: it is computed as for none
    data["labelParts"] = {"kind": "from-the-future"}
    assert Manifest.from_json(data).label is None


def test_imported_forks_say_which_app_made_them(tmp_path: Path, store: SessionStore) -> None:
    branchy = conversation(
        "c-branchy",
        "Branchy",
        [
            ("root", None, None),
            ("u1", "root", message("user", "first", time=1)),
            ("a1", "u1", message("assistant", "ans1", time=2)),
            ("u2", "a1", message("user", "second", time=3)),
            ("a2", "u2", message("assistant", "ans2", time=4)),
            ("a2b", "u2", message("assistant", "ans2 again", time=5)),
            ("u2e", "a1", message("user", "second edited", time=6)),
            ("a2e", "u2e", message("assistant", "two", time=7)),
        ],
        current="a2",
    )
    report = import_path(store, write_export(tmp_path / "conversations.json", [branchy]))
    by_source = {c.source_id: c.session_id for c in report.conversations}
    listed = _listed(store)
    assert listed[by_source["c-branchy"]]["label"] is None
    assert listed[by_source["c-branchy/a2b"]]["label"] == "Regenerated in ChatGPT"
    assert listed[by_source["c-branchy/a2e"]]["label"] == "Edited in ChatGPT"
    assert listed[by_source["c-branchy/a2b"]]["forkTurnIndex"] == 2
    # Claude Code asks a prompt again with /rewind; its /branch copies are plain branches
    rewind = BranchLabel("imported", source="claude-code", origin="edit")
    assert render_label(rewind, 3, language="en") == "Claude Code /rewind"
    copy = BranchLabel("imported", source="claude-code")
    assert render_label(copy, 3, language="en") == "Branch in Claude Code"
    assert render_label(copy, 3, language="zh_Hans") == "在 Claude Code 中的分支"
    reader = LabelReader(store)
    edit = store.manifest(by_source["c-branchy/a2e"])
    assert reader.fields(edit, language="zh_Hant")["label"] == "在 ChatGPT 中編輯"


def test_the_cli_prints_label_and_fork_turn_everywhere_a_branch_is_listed(
    tmp_path: Path,
) -> None:
    root_dir = tmp_path / "data"
    _, made = run_cli(root_dir, "session", "new")
    root = made["sessionId"]
    run_cli(root_dir, "session", "say", root, "Explain git branches", "--quiet")
    run_cli(root_dir, "session", "say", root, "And merging?", "--quiet")
    _, shown = run_cli(root_dir, "session", "show", root)
    second = shown["turns"][1]["turnId"]
    assert (shown["label"], shown["labelParts"], shown["forkTurnIndex"]) == (None, None, None)
    _, asked = run_cli(root_dir, "session", "regenerate", root, "--turn", second, "--quiet")
    branch = asked["childSessionId"]
    _, listed = run_cli(root_dir, "session", "list")
    entry = next(s for s in listed["sessions"] if s["sessionId"] == branch)
    assert (entry["label"], entry["labelParts"], entry["forkTurnIndex"]) == (
        "Regenerated 2",
        {"kind": "regenerate", "number": 2},
        2,
    )
    _, shown = run_cli(root_dir, "session", "show", branch)
    assert (shown["label"], shown["forkTurnIndex"]) == ("Regenerated 2", 2)
    _, tree = run_cli(root_dir, "session", "tree", root)
    assert [(s["label"], s["forkTurnIndex"]) for s in tree["sessions"]] == [
        (None, None),
        ("Regenerated 2", 2),
    ]
    _, lineage = run_cli(root_dir, "--lang", "zh_Hans", "session", "lineage", branch)
    assert lineage["lineage"][0]["label"] == "重新生成 2"
    _, found = run_cli(root_dir, "search", "Explain git")
    asked = next(h for h in found["hits"] if h["role"] == "user")
    # the first prompt both hold is credited to the root that wrote it, the branch listed
    assert (asked["sessionId"], asked["writtenIn"], asked["label"]) == (root, root, None)
    assert asked["alsoIn"] == [branch]
    assert asked["alsoInBranches"] == [
        {"sessionId": branch, "title": "Explain git branches (branch 1)", "label": "Regenerated 2"}
    ]
    titled = next(h for h in found["hits"] if h["role"] == "title" and h["sessionId"] == branch)
    assert (titled["label"], titled["forkTurnIndex"]) == ("Regenerated 2", 2)


def test_a_child_conversation_is_labelled_with_the_turn_that_spawned_it(
    store: SessionStore,
) -> None:
    root = session_with_turns(store, 2)
    child = create_child(store, root, {"turnId": _turns(store, root)[1]}, "helper")
    manifest = store.manifest(child.child_session_id)
    assert (manifest.label, manifest.fork_turn_index) == (BranchLabel("child"), 2)
    assert render_label(manifest.label, 2, language="en") == "Sub-conversation of turn 2"
    loose = create_child(store, root, {"turnId": None}, "loose")
    assert _listed(store)[loose.child_session_id]["label"] == "Sub-conversation"


def test_session_rename_gives_a_title_or_a_label(tmp_path: Path) -> None:
    root_dir = tmp_path / "data"
    _, made = run_cli(root_dir, "session", "new", "--title", "plans")
    root = made["sessionId"]
    run_cli(root_dir, "session", "say", root, "first", "--quiet")
    turn = run_cli(root_dir, "session", "show", root)[1]["turns"][0]["turnId"]
    branch = run_cli(root_dir, "session", "fork", root, "--turn", turn)[1]["childSessionId"]
    _, renamed = run_cli(root_dir, "session", "rename", branch, "--label", "the  cheap route")
    assert renamed == {
        "sessionId": branch,
        "title": "plans (branch 1)",
        "label": "the cheap route",
        "labelParts": {"kind": "given", "text": "the cheap route"},
        "forkTurnIndex": 1,
    }
    _, both = run_cli(
        root_dir,
        "--lang",
        "zh_Hans",
        "session",
        "rename",
        branch,
        "--title",
        "Cheap",
        "--label",
        "b",
    )
    assert (both["title"], both["label"]) == ("Cheap", "b")
    code, refused = run_cli(root_dir, "session", "rename", branch, "--label", " ", check=False)
    assert code == 1 and refused["error"]["code"] == "invalid_label"
    code, refused = run_cli(root_dir, "session", "rename", branch, check=False)
    assert code != 0 and refused["error"]["code"] == "invalid_argument"
    assert SessionStore(root_dir).manifest(branch).label == BranchLabel("given", text="b")


def test_a_title_shows_its_branch_suffix_in_the_language_shown() -> None:
    """Why a branch read "(branch 3)" beside "（分支 4）": each title kept the suffix of the
    language shown when it was made. Shown titles render the suffix again."""
    made_in_english = branch_title("Explain git", 2, language="en")
    made_in_chinese = branch_title("Explain git", 3, language="zh_Hant")
    assert (made_in_english, made_in_chinese) == ("Explain git (branch 3)", "Explain git（分支 4）")
    assert display_title(made_in_english, language="zh_Hant") == "Explain git（分支 3）"
    assert display_title(made_in_chinese, language="en") == "Explain git (branch 4)"
    assert display_title("Explain git（分支 1.2）", language="zh_Hans") == "Explain git（分支 1.2）"
    assert display_title("a (branch) of trees", language="zh_Hant") == "a (branch) of trees"
    assert display_title("Plain title", language="zh_Hant") == "Plain title"
