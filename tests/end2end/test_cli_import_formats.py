"""``branchwise import`` of Claude Code, Open WebUI and LibreChat exports, in a real process.

Each fixture (tests/fixtures/importing/) is imported through the CLI and the
conversation trees it becomes are checked one by one: kind, parent, fork
point (the parent's turn it forks after, or none: fork at start) and the
messages in order, as ``session show`` prints them. Importing again creates
nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers.cli import run_cli

FIXTURES = Path(__file__).parents[1] / "fixtures" / "importing"
S1 = "5e5510a1-0000-4000-8000-000000000001"
S3 = "5e5510a3-0000-4000-8000-000000000003"
KYOTO = "af1ea676-f525-444f-a9ed-7c8dbf062733"
MENU = "b2c3d4e5-0000-4000-8000-00000000000f"

NO_TREE = (
    'no message tree: expected a chat row {"chat": {"history": {"messages": {…}}}} '
    'or a chat {"history": {"messages": {…}}}'
)
Shape = tuple[str, str, str | None, int | None]
"""(source id, kind, parent's source id, index of the parent's turn it follows or None)."""


def _import(root: Path, path: Path, *args: str) -> dict[str, Any]:
    _, report = run_cli(root, "import", str(path), *args)
    assert isinstance(report, dict)
    return report


def _shapes(root: Path, report: dict[str, Any]) -> list[Shape]:
    source_of = {c["sessionId"]: c["source"]["id"] for c in report["conversations"]}
    shapes = []
    for conversation in report["conversations"]:
        parent = conversation["parentSessionId"]
        turn_index = None
        if conversation["forkTurnId"] is not None:
            _, shown = run_cli(root, "session", "show", parent)
            turn_index = [t["turnId"] for t in shown["turns"]].index(conversation["forkTurnId"])
        shapes.append(
            (
                conversation["source"]["id"],
                conversation["kind"],
                source_of.get(parent) if parent is not None else None,
                turn_index,
            )
        )
    return shapes


def _messages(root: Path, report: dict[str, Any], source_id: str) -> list[tuple[str, str]]:
    """The conversation's messages as (role, text); a tool message as (tool, its tool's name)."""
    session_id = next(
        c["sessionId"] for c in report["conversations"] if c["source"]["id"] == source_id
    )
    _, shown = run_cli(root, "session", "show", session_id)
    return [
        (m["role"], m["content"].split("(", 1)[0] if m["role"] == "tool" else m["content"])
        for m in shown["messages"]
    ]


def _reimport_creates_nothing(root: Path, path: Path, first: dict[str, Any]) -> None:
    again = _import(root, path)
    assert [c["sessionId"] for c in again["conversations"]] == [
        c["sessionId"] for c in first["conversations"]
    ]
    assert not any(c["created"] for c in again["conversations"])
    _, listed = run_cli(root, "session", "list")
    assert len(listed["sessions"]) == len(first["conversations"])


def test_claude_code_projects_folder(tmp_path: Path) -> None:
    root = tmp_path / "root"
    path = FIXTURES / "claude_code"
    report = _import(root, path, "--format", "claude-code")

    assert all(
        c["source"]["format"] == "claude-code" and c["created"] for c in report["conversations"]
    )
    assert _shapes(root, report) == [
        (S1, "root", None, None),
        (f"{S1}/a6", "fork", S1, 0),  # the Task branch: an edit of the second prompt
        (f"{S1}/a8", "fork", S1, 0),  # the --fork-session file's own turn
        (f"{S1}/agent-ab12cd3", "child", f"{S1}/a6", 1),  # spawned by the Task call's turn
        (S3, "root", None, None),
        (f"{S3}/d1", "fork", S3, None),  # a dangling parent: a root, forked at start
        (f"{S3}/y2", "fork", S3, None),  # a broken cycle: a root too
        (f"{S3}/agent-sidechain-x1", "child", S3, 0),  # inline sidechain, found by its prompt
        (f"{S3}/agent-sidechain-z1", "child", S3, None),  # no call claims it: at the start
    ]
    shared = [
        ("user", "Add a cart to the shop"),
        ("assistant", "I'll read cart.py first."),  # thinking dropped, msg_01's text joined
        ("tool", "Read"),
        ("assistant", "The cart is added."),
    ]
    assert _messages(root, report, S1) == [
        *shared,  # the caveat and the /model command record are hidden
        ("user", "Now write the docs instead"),  # the /rewind prompt, newest: the main path
        ("assistant", "Docs are written."),
    ]
    assert _messages(root, report, f"{S1}/a6") == [
        *shared,
        ("user", "Now write tests"),  # after the hidden system record
        ("tool", "Task"),
        ("assistant", "Tests are in."),  # "[Request interrupted by user]" hidden
    ]
    assert _messages(root, report, f"{S1}/a8") == [
        *shared,
        ("user", "Use Redis for the cart"),
        ("assistant", "Switched to Redis."),
    ]
    assert _messages(root, report, f"{S1}/agent-ab12cd3") == [
        ("user", "Write tests for the cart"),
        ("assistant", "Writing test_cart.py."),
        ("tool", "Write"),
        ("assistant", "Tests written in test_cart.py."),
    ]
    assert _messages(root, report, S3) == [
        ("user", "Explore the repo"),
        ("assistant", "Let me look."),
        ("tool", "Task"),
        ("assistant", "The entry point is main.py, caf\ufffd."),
    ]
    titles = {c["source"]["id"]: c["title"] for c in report["conversations"]}
    assert (titles[S1], titles[f"{S1}/agent-ab12cd3"]) == ("Shop cart work", "Write tests")
    assert any(w.endswith(":19: unparsable line ignored") for w in report["warnings"])
    _reimport_creates_nothing(root, path, report)


def test_open_webui_export(tmp_path: Path) -> None:
    root = tmp_path / "root"
    path = FIXTURES / "open_webui" / "chat-export.json"
    report = _import(root, path)  # detected

    assert {c["source"]["format"] for c in report["conversations"]} == {"open-webui"}
    assert _shapes(root, report) == [
        ("c-trip", "root", None, None),
        ("c-trip/m2b", "fork", "c-trip", None),  # a second model's first answer: at start
        ("c-trip/m4", "fork", "c-trip", 0),  # a regenerated answer: after the turn before
        ("c-trip/e2", "fork", "c-trip", None),  # the edited first prompt: a second root
        ("c-weather", "root", None, None),
        ("c-weather/w2", "fork", "c-weather", None),
        ("c-weather/d1", "fork", "c-weather", None),
        ("c-latin", "root", None, None),
    ]
    assert _messages(root, report, "c-trip") == [
        ("user", "Plan a trip to Kyoto"),
        ("assistant", "Day 1: temples."),
        ("user", "Add a day trip to Nara"),
        ("tool", "train_times"),
        ("assistant", "The train to Nara takes 45 minutes."),
    ]
    assert _messages(root, report, "c-trip/m2b") == [
        ("user", "Plan a trip to Kyoto"),  # the regenerated turn repeats its prompt
        ("assistant", "Day 1: markets."),
    ]
    assert _messages(root, report, "c-trip/m4") == [
        ("user", "Plan a trip to Kyoto"),
        ("assistant", "Day 1: temples."),
        ("user", "Add a day trip to Nara"),
        ("assistant", "Day 2: Nara deer park."),  # the reasoning block is not shown
    ]
    assert _messages(root, report, "c-trip/e2") == [
        ("user", "Plan a trip to Osaka"),
        ("assistant", "Osaka: street food."),
    ]
    # no currentId: the newest leaf is the main path (here the repaired loop)
    assert _messages(root, report, "c-weather") == [
        ("user", "Loop one"),
        ("assistant", "Loop two"),
    ]
    assert _messages(root, report, "c-weather/w2") == [
        ("user", "Weather in Paris?"),  # the system prompt is hidden
        ("tool", "get_weather"),
        ("assistant", "Paris: 18C, rain."),
    ]
    assert report["skipped"] == [{"source": f"{path}#2", "reason": NO_TREE}]
    assert f"{path}#3: non-UTF-8 bytes replaced" in report["warnings"]
    _reimport_creates_nothing(root, path, report)


def test_librechat_exports(tmp_path: Path) -> None:
    root = tmp_path / "root"
    tree_path = FIXTURES / "librechat" / "kyoto-tree.json"
    report = _import(root, tree_path, "--format", "librechat")

    assert _shapes(root, report) == [
        (KYOTO, "root", None, None),
        (f"{KYOTO}/m-a2b", "fork", KYOTO, None),  # the first answer regenerated: at start
        (f"{KYOTO}/m-a2", "fork", f"{KYOTO}/m-a2b", 0),  # the older edit of prompt two
    ]
    # LibreChat names no current leaf: the newest sibling at every level is the main path
    assert _messages(root, report, KYOTO) == [
        ("user", "What is there in Kyoto?"),
        ("assistant", "Let me check the map."),
        ("tool", "maps_search"),
        ("assistant", "See Kinkaku-ji and Fushimi Inari."),
    ]
    assert _messages(root, report, f"{KYOTO}/m-a2b") == [
        ("user", "What is there in Kyoto?"),
        ("assistant", "Kyoto has temples."),
        ("user", "How far is Nara?"),
        ("assistant", "Nara is 45 minutes away by train."),
    ]
    assert _messages(root, report, f"{KYOTO}/m-a2") == [
        ("user", "What is there in Kyoto?"),
        ("assistant", "Kyoto has temples."),
        ("user", "How far is Osaka?"),
        ("assistant", "Osaka is 15 minutes away."),
    ]
    _reimport_creates_nothing(root, tree_path, report)

    flat_root = tmp_path / "flat"
    flat_path = FIXTURES / "librechat" / "menu-flat.json"
    flat = _import(flat_root, flat_path)
    assert _shapes(flat_root, flat) == [
        (MENU, "root", None, None),
        (f"{MENU}/f-a1", "fork", MENU, None),
        (f"{MENU}/f-d1", "fork", MENU, None),
    ]
    assert _messages(flat_root, flat, f"{MENU}/f-a1") == [
        ("user", "Summarize this caf\ufffd menu"),
        ("assistant", "Coffee and cake."),
    ]
    _reimport_creates_nothing(flat_root, flat_path, flat)
