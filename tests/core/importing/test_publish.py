"""Publishing a plan: children linked in both logs, forks of children, ids stable across runs."""

from __future__ import annotations

from branchwise.core.importing.plan import plan_tree
from branchwise.core.importing.publish import TreePublisher, imported_session_id
from branchwise.core.importing.source import SourceItem, SourceTree
from branchwise.core.lineage import tree
from branchwise.core.store.store import SessionStore, verify_session


def _session_with_agent() -> SourceTree:
    agent = SourceTree(
        "claude-code",
        "agent-1",
        "Agent",
        5.0,
        (
            SourceItem("s1", None, "user", "do the sub-task", 5),
            SourceItem("s2", "s1", "assistant", "done", 6, model="haiku"),
            SourceItem("s2b", "s1", "assistant", "done differently", 7, model="haiku"),
        ),
        current="s2",
    )
    return SourceTree(
        "claude-code",
        "session-1",
        "Session",
        1.0,
        (
            SourceItem("u1", None, "user", "fix the bug", 1),
            SourceItem(
                "c1",
                "u1",
                "tool_call",
                "Task",
                2,
                call_id="k1",
                tool_name="Task",
                arguments='{"prompt": "do the sub-task"}',
                spawns="agent-1",
            ),
            SourceItem("r1", "c1", "tool_result", "agent said done", 8, call_id="k1"),
            SourceItem("a1", "r1", "assistant", "fixed", 9, model="opus"),
        ),
        children=(agent,),
    )


def test_a_sub_agent_is_a_child_linked_in_both_logs_and_its_branches_fork_it(
    store: SessionStore,
) -> None:
    plan = plan_tree(_session_with_agent())
    published = list(TreePublisher(store, plan).publish())
    assert [(p.kind, p.source_id) for p in published] == [
        ("root", "session-1"),
        ("child", "agent-1"),
        ("fork", "agent-1/s2b"),
    ]
    root, child, branch = published
    root_turn = store.read(root.session_id).projection.turns[0].turn_id
    assert (child.parent_session_id, child.fork_turn_id) == (root.session_id, root_turn)
    assert (branch.parent_session_id, branch.fork_turn_id) == (child.session_id, None)

    def links(session_id: str) -> list[dict[str, object]]:
        frames = store.read(session_id).scan.frames
        return [
            {k: v for k, v in e.items() if k not in ("seq", "ts")}
            for f in frames
            for e in f.events
            if e["type"] == "session/child"
        ]

    (link,) = links(root.session_id)
    assert links(child.session_id) == [link]
    assert link["spawnedFrom"] == {"turnId": root_turn, "toolCallId": "k1"}
    manifest = store.manifest(child.session_id)
    assert manifest.kind == "child" and manifest.root_session_id == root.session_id
    assert [n.manifest.session_id for n, _ in tree(store, root.session_id).walk()] == [
        root.session_id,
        child.session_id,
        branch.session_id,
    ]
    for session in published:
        assert verify_session(store, session.session_id)["ok"]


def test_session_ids_depend_on_the_source_identity_only(store: SessionStore) -> None:
    plan = plan_tree(_session_with_agent())
    first = [p.session_id for p in TreePublisher(store, plan).publish()]
    again = [p for p in TreePublisher(store, plan_tree(_session_with_agent())).publish()]
    assert [p.session_id for p in again] == first and not any(p.created for p in again)
    assert first[0] == imported_session_id("claude-code", "session-1", "a1", "session-1")
    other = imported_session_id("claude-code", "session-1", "a1-later", "session-1")
    assert other != first[0]


def test_each_conversation_keeps_its_source_in_its_first_own_event(store: SessionStore) -> None:
    published = list(TreePublisher(store, plan_tree(_session_with_agent())).publish())
    for conversation in published:
        events = [e for f in store.read(conversation.session_id).scan.frames for e in f.events]
        first_own = next(e for e in events if e["type"] in ("session/created", "session/fork"))
        assert first_own["source"] == {"format": "claude-code", "id": conversation.source_id}


def _long(turns: int, size: int) -> SourceTree:
    items = []
    parent = None
    for k in range(turns):
        items.append(SourceItem(f"u{k}", parent, "user", f"question {k} " + "q" * size, 2 * k))
        items.append(SourceItem(f"a{k}", f"u{k}", "assistant", "a" * size, 2 * k + 1, model="m"))
        parent = f"a{k}"
    items.append(SourceItem("a-last-b", f"u{turns - 1}", "assistant", "again", 2 * turns))
    return SourceTree("chatgpt", f"long-{size}", "Long", 0.0, tuple(items), current=parent)


def test_a_big_imported_conversation_has_its_turn_index_and_a_small_one_goes_without(
    store: SessionStore,
) -> None:
    big = list(TreePublisher(store, plan_tree(_long(20, 8000))).publish())
    small = list(TreePublisher(store, plan_tree(_long(3, 10))).publish())
    for published, indexed in ((big, True), (small, False)):
        root, branch = published
        assert (root.kind, branch.kind) == ("root", "fork")
        read = store.read(root.session_id)
        log = store.session_dir(root.session_id) / read.manifest.log_dir
        assert len(list(log.glob("*.seg"))) == 1
        assert bool(list(log.glob("*.idx"))) is indexed
        # the fork's seed is its parent's log bounded at the fork turn, index or not
        fork = store.read(branch.session_id)
        assert verify_session(store, branch.session_id)["ok"]
        assert [m.content for m in fork.projection.messages][-1] == "again"
        assert len(fork.projection.turns) == len(read.projection.turns)
