"""The import planner: rules 1-5 of issue 16, conversation by conversation."""

from __future__ import annotations

from branchwise.core.importing.plan import ImportPlan, PlannedConversation, plan_tree
from branchwise.core.importing.source import ItemKind, SourceItem, SourceTree


def item(
    item_id: str,
    parent: str | None,
    kind: ItemKind | None,
    time: float | None = None,
    **extra: object,
) -> SourceItem:
    return SourceItem(item_id, parent, kind, text=f"text {item_id}", time=time, **extra)  # type: ignore[arg-type]


def tree(*items: SourceItem, current: str | None = None, **extra: object) -> SourceTree:
    return SourceTree("chatgpt", "conv", "Title", 1.0, items, current=current, **extra)  # type: ignore[arg-type]


def turns_of(conversation: PlannedConversation) -> list[list[str]]:
    return [list(turn.ids) for turn in conversation.turns]


def summary(plan: ImportPlan) -> list[tuple[str, int | None, int, str | None, list[list[str]]]]:
    return [(c.kind, c.parent, c.inherited, c.origin, turns_of(c)) for c in plan.conversations]


def test_a_single_path_is_one_root_conversation_with_a_turn_per_prompt() -> None:
    plan = plan_tree(
        tree(
            item("u1", None, "user", 1),
            item("a1", "u1", "assistant", 2),
            item("u2", "a1", "user", 3),
            item("a2", "u2", "assistant", 4),
        )
    )
    assert summary(plan) == [("root", None, 0, None, [["u1", "a1"], ["u2", "a2"]])]
    assert plan.conversations[0].source_id == "conv"
    assert plan.main_leaf == "a2"
    assert plan.warnings == ()


def test_hidden_items_are_dropped_and_their_children_reattached() -> None:
    plan = plan_tree(
        tree(
            item("root", None, None),
            item("sys", "root", None),
            item("u1", "sys", "user", 1),
            item("thought", "u1", None, 2),
            item("a1", "thought", "assistant", 3),
        )
    )
    assert summary(plan) == [("root", None, 0, None, [["u1", "a1"]])]


def test_current_names_the_main_path_and_an_edit_forks_after_the_previous_answer() -> None:
    plan = plan_tree(
        tree(
            item("u1", None, "user", 1),
            item("a1", "u1", "assistant", 2),
            item("u2", "a1", "user", 3),
            item("a2", "u2", "assistant", 4),
            item("u2b", "a1", "user", 5),  # the edited prompt, newer
            item("a2b", "u2b", "assistant", 6),
            current="a2",
        )
    )
    assert summary(plan) == [
        ("root", None, 0, None, [["u1", "a1"], ["u2", "a2"]]),
        ("fork", 0, 1, "edit", [["u1", "a1"], ["u2b", "a2b"]]),
    ]
    assert plan.conversations[1].source_id == "conv/a2b"


def test_without_current_the_latest_leaf_is_the_main_path() -> None:
    plan = plan_tree(
        tree(
            item("u1", None, "user", 1),
            item("a1", "u1", "assistant", 2),
            item("a1b", "u1", "assistant", 9),
        )
    )
    assert [c.leaf for c in plan.conversations] == ["a1b", "a1"]


def test_a_regeneration_forks_at_the_previous_turn_and_repeats_the_prompt() -> None:
    plan = plan_tree(
        tree(
            item("u1", None, "user", 1),
            item("a1", "u1", "assistant", 2),
            item("u2", "a1", "user", 3),
            item("a2", "u2", "assistant", 4),
            item("a2b", "u2", "assistant", 5),
            current="a2",
        )
    )
    assert summary(plan)[1] == ("fork", 0, 1, "regenerate", [["u1", "a1"], ["u2", "a2b"]])
    assert [t.ids for t in plan.conversations[1].own_turns] == [("u2", "a2b")]


def test_a_regenerated_first_answer_forks_at_the_start() -> None:
    plan = plan_tree(
        tree(
            item("u1", None, "user", 1),
            item("a1", "u1", "assistant", 2),
            item("a1b", "u1", "assistant", 3),
            current="a1",
        )
    )
    assert summary(plan)[1] == ("fork", 0, 0, "regenerate", [["u1", "a1b"]])


def test_several_roots_are_siblings_the_others_fork_at_the_start() -> None:
    plan = plan_tree(
        tree(
            item("u1", None, "user", 1),
            item("a1", "u1", "assistant", 2),
            item("u1b", None, "user", 3),  # an edited first message: a second root
            item("a1b", "u1b", "assistant", 4),
            current="a1b",
        )
    )
    assert summary(plan) == [
        ("root", None, 0, None, [["u1b", "a1b"]]),
        ("fork", 0, 0, "edit", [["u1", "a1"]]),
    ]


def test_forks_are_made_in_the_order_of_their_divergent_child_and_continue_to_the_newest_leaf() -> (
    None
):
    plan = plan_tree(
        tree(
            item("u1", None, "user", 1),
            item("a1", "u1", "assistant", 2),
            item("u2", "a1", "user", 3),
            item("a2", "u2", "assistant", 4),
            item("u3", "a2", "user", 5),
            item("a3", "u3", "assistant", 6),
            item("u3b", "a2", "user", 7),  # edit of turn 3, later
            item("a3b", "u3b", "assistant", 8),
            item("u2b", "a1", "user", 7.5),  # edit of turn 2, between: newer than u3b? no
            item("a2b", "u2b", "assistant", 9),
            item("a2c", "u2b", "assistant", 10),  # a regeneration under the edit: newest leaf
            current="a3",
        )
    )
    rows = summary(plan)
    assert rows[0] == ("root", None, 0, None, [["u1", "a1"], ["u2", "a2"], ["u3", "a3"]])
    assert rows[1] == ("fork", 0, 2, "edit", [["u1", "a1"], ["u2", "a2"], ["u3b", "a3b"]])
    # the edit of turn 2 continues to its newest leaf (a2c); the older a2b forks off it
    assert rows[2] == ("fork", 0, 1, "edit", [["u1", "a1"], ["u2b", "a2c"]])
    assert rows[3] == ("fork", 2, 1, "regenerate", [["u1", "a1"], ["u2b", "a2b"]])


def test_an_answer_that_opens_the_conversation_is_a_first_turn_without_prompt() -> None:
    plan = plan_tree(
        tree(
            item("a0", None, "assistant", 1),
            item("u1", "a0", "user", 2),
            item("a1", "u1", "assistant", 3),
        )
    )
    conversation = plan.conversations[0]
    assert turns_of(conversation) == [["a0"], ["u1", "a1"]]
    assert conversation.turns[0].prompt is None


def test_tool_calls_and_results_stay_in_the_turn_of_their_prompt() -> None:
    plan = plan_tree(
        tree(
            item("u1", None, "user", 1),
            item("c1", "u1", "tool_call", 2, call_id="k"),
            item("r1", "c1", "tool_result", 3, call_id="k"),
            item("a1", "r1", "assistant", 4),
        )
    )
    assert turns_of(plan.conversations[0]) == [["u1", "c1", "r1", "a1"]]


def test_dangling_parents_become_roots_with_a_warning() -> None:
    plan = plan_tree(
        tree(
            item("u1", "gone", "user", 1),
            item("a1", "u1", "assistant", 2),
        )
    )
    assert summary(plan) == [("root", None, 0, None, [["u1", "a1"]])]
    assert any("missing parent" in warning for warning in plan.warnings)


def test_a_parent_loop_is_cut_with_a_warning() -> None:
    plan = plan_tree(
        tree(
            item("u1", "a1", "user", 1),
            item("a1", "u1", "assistant", 2),
        )
    )
    assert summary(plan) == [("root", None, 0, None, [["u1", "a1"]])]
    assert any("loop" in warning for warning in plan.warnings)


def test_a_tree_without_visible_items_plans_nothing() -> None:
    plan = plan_tree(tree(item("sys", None, None)))
    assert plan.conversations == ()
    assert plan.main_leaf is None


def test_a_hidden_current_falls_back_to_the_latest_leaf() -> None:
    plan = plan_tree(
        tree(
            item("u1", None, "user", 1),
            item("a1", "u1", "assistant", 2),
            item("a1b", "u1", "assistant", 3),
            item("hidden", "a1", None, 4),
            current="hidden",
        )
    )
    assert plan.main_leaf == "a1b"


def test_newest_sibling_rule_picks_the_newest_child_at_every_level() -> None:
    plan = plan_tree(
        tree(
            item("u1", None, "user", 1),
            item("a1", "u1", "assistant", 5),
            item("a1b", "u1", "assistant", 2),
            item("u2", "a1b", "user", 20),  # the latest leaf is below the older answer
            main_rule="newest_sibling",
        )
    )
    assert plan.main_leaf == "a1"


def test_sub_agents_become_children_of_the_turn_that_spawned_them() -> None:
    agent = SourceTree(
        "claude-code",
        "agent-1",
        "Agent",
        5.0,
        (item("s1", None, "user", 5), item("s2", "s1", "assistant", 6)),
    )
    orphan = SourceTree("claude-code", "agent-2", "", None, (item("o1", None, "user", 9),))
    source = SourceTree(
        "claude-code",
        "session",
        "Session",
        1.0,
        (
            item("u1", None, "user", 1),
            item("a1", "u1", "assistant", 2),
            item("u2", "a1", "user", 3),
            item("c2", "u2", "tool_call", 4, call_id="call-2", spawns="agent-1"),
            item("r2", "c2", "tool_result", 7, call_id="call-2"),
        ),
        children=(agent, orphan),
    )
    plan = plan_tree(source)
    kinds = [(c.kind, c.parent, c.spawned_turn, c.spawned_call) for c in plan.conversations]
    assert kinds == [
        ("root", None, None, None),
        ("child", 0, 1, "call-2"),
        ("child", 0, None, None),
    ]
    assert turns_of(plan.conversations[1]) == [["s1", "s2"]]
    assert any("no tool call spawned" in warning for warning in plan.warnings)


def test_duplicate_item_ids_keep_the_first() -> None:
    plan = plan_tree(
        tree(
            item("u1", None, "user", 1),
            item("u1", None, "assistant", 2),
        )
    )
    assert turns_of(plan.conversations[0]) == [["u1"]]
    assert plan.warnings


def test_untitled_trees_take_their_first_prompt_and_branches_their_parents_title() -> None:
    items = (
        item("sys", None, None),
        SourceItem("u1", "sys", "user", text="  Plan a\n week   in Kyoto  ", time=1),
        item("a1", "u1", "assistant", 2),
        item("u2a", "a1", "user", 3),
        item("u2b", "a1", "user", 4),
        item("u2c", "a1", "user", 5),
    )
    plan = plan_tree(SourceTree("chatgpt", "conv", "", 1.0, items, current="u2a"))
    titles = [(c.kind, c.title) for c in plan.conversations]
    assert titles == [
        ("root", "Plan a week in Kyoto"),
        ("fork", "Plan a week in Kyoto (branch 1)"),
        ("fork", "Plan a week in Kyoto (branch 2)"),
    ]
