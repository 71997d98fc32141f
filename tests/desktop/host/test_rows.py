"""The desktop's pure parts: rows, the messageId binding, branch states, paging, lineage."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.gui import seed_legacy_session, seed_long_session, seed_session
from helpers.sessions import log_file

from branchwise.core.errors import InvalidManifest
from branchwise.core.fork.targets import TargetReason, fork_targets
from branchwise.core.lineage import LineageIndex
from branchwise.core.projection import events as ev
from branchwise.core.projection.projection import Projection
from branchwise.core.store.manifest import Manifest, ParentLink
from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.changes import Changes
from branchwise.desktop.host.rows import (
    DesktopReason,
    TargetTable,
    Window,
    branch_state,
    row_for_turn,
    rows_from_projection,
    target_key,
)
from branchwise.desktop.host.session import read_preview


def _events(*commits: list[dict[str, Any]]) -> Projection:
    seq = 0
    stamped = []
    for commit in commits:
        out = []
        for event in commit:
            seq += 1
            out.append({"seq": seq, "ts": 0.0, **event})
        stamped.append(out)
    return Projection.replay(stamped)


def _turn(turn: str, question: str, answer: str | None, reason: str | None = "completed") -> list:
    commit = [ev.turn_start(turn), ev.user_message(f"u-{turn}", question)]
    if answer is not None:
        commit.append(ev.assistant_message(f"a-{turn}", answer, "demo"))
    if reason is not None:
        commit.append(ev.turn_end(turn, reason, "boom" if reason == "error" else None))
    return commit


def _table(projection: Projection) -> TargetTable:
    from branchwise.core.fork.targets import target_set

    return TargetTable.of(target_set("s1", 1, projection.turns, projection.verifiable))


def test_rows_bind_by_answer_id_else_turn_id() -> None:
    projection = _events(_turn("t1", "q1", "a1"), _turn("t2", "q2", None, "error"))
    rows = rows_from_projection(projection)
    assert [r.key for r in rows] == ["a-t1", "turn:t2"]
    assert [r.index for r in rows] == [1, 2]
    assert rows[1].error == "boom" and rows[1].end_reason == "error"
    table = _table(projection)
    assert all(branch_state(r, table).enabled for r in rows)
    assert branch_state(rows[0], table).target.boundary_sequence == 4  # type: ignore[union-attr]


def test_live_text_fills_the_running_row() -> None:
    projection = _events(_turn("t1", "q1", "a1"), _turn("t2", "q2", None, None))
    row = row_for_turn(projection, "t2", {"t2": ("a-live", "partial te")})
    assert row is not None and row.running
    assert row.key == "a-live"
    assert [(e.role, e.content) for e in row.entries] == [
        ("user", "q2"),
        ("assistant", "partial te"),
    ]
    assert branch_state(row, _table(projection)).reason == TargetReason.TURN_OPEN


def test_branch_state_reasons() -> None:
    projection = _events(
        _turn("t1", "q1", "a1"),
        [ev.turn_start("t2"), ev.user_message("u2", "q2")],
        [
            {"type": "tool/call", "callId": "c1", "name": "ls", "args": {}},
            ev.assistant_message("a2", "running ls", "demo"),
            ev.turn_end("t2", "completed"),
        ],
    )
    rows = rows_from_projection(projection)
    table = _table(projection)
    by_key = {r.key: r for r in rows}
    assert branch_state(by_key["a2"], table).reason == TargetReason.ACTIVE_AUTHORITY
    assert branch_state(rows[0], None).reason == DesktopReason.TARGETS_LOADING
    assert (
        branch_state(rows[0], table, in_flight={("s1", "t1")}).reason
        == DesktopReason.CREATION_IN_FLIGHT
    )
    assert (
        branch_state(rows[0], table, server_supported=False).reason
        == DesktopReason.SERVER_UNSUPPORTED
    )
    assert any(e.role == "tool" for e in by_key["a2"].entries)


def test_targets_older_than_the_row_count_as_loading() -> None:
    running = _events(_turn("t1", "q1", None, None))
    stale = _table(running)
    finished = _events(_turn("t1", "q1", "a1"))
    row = rows_from_projection(finished)[0]
    assert branch_state(row, stale).reason == DesktopReason.TARGETS_LOADING
    assert branch_state(row, _table(finished)).enabled


def test_imported_history_is_unverifiable(store: SessionStore) -> None:
    sid = seed_legacy_session(store)
    rows = rows_from_projection(store.read(sid).projection)
    table = TargetTable.of(fork_targets(store, sid))
    assert [r.imported for r in rows] == [True, True]
    assert {branch_state(r, table).reason for r in rows} == {TargetReason.UNVERIFIABLE}


def test_cold_rows_bind_to_fork_targets_of_the_same_log(store: SessionStore) -> None:
    sid = seed_session(store, ["a", "b", "c"])
    rows = rows_from_projection(store.read(sid).projection)
    table = TargetTable.of(fork_targets(store, sid))
    states = [branch_state(r, table) for r in rows]
    assert all(s.enabled for s in states)
    assert [s.target.turn_id for s in states] == [r.turn_id for r in rows]  # type: ignore[union-attr]
    assert target_key(None, "x") == "turn:x"


def test_preview_matches_the_full_read_for_the_last_page(store: SessionStore) -> None:
    sid = seed_long_session(store, 120)
    preview = read_preview((log_file(store.session_dir(sid))).read_bytes(), 50)
    assert preview is not None
    full = rows_from_projection(store.read(sid).projection)
    assert preview.rows == full[-50:]


def test_preview_gives_up_on_a_damaged_header(store: SessionStore) -> None:
    sid = seed_long_session(store, 5)
    log = log_file(store.session_dir(sid))
    log.write_bytes(b"garbage" + log.read_bytes())
    assert read_preview(log.read_bytes(), 50) is None


def test_window_pages_upwards() -> None:
    window = Window.tail(120, 50)
    assert (window.start, window.end, window.size) == (70, 120, 50)
    assert window.earlier(50) == Window(20, 120)
    assert window.earlier(50).earlier(50) == Window(0, 120)
    assert Window.tail(10, 50) == Window(0, 10)


def _manifest(
    sid: str, created: float, parent: str | None = None, turn: str | None = None
) -> Manifest:
    link = ParentLink(parent, "fork", turn_id=turn) if parent else None
    return Manifest(session_id=sid, title=sid, created_at=created, parent=link)


def test_lineage_forest_nests_newest_first_and_survives_cycles() -> None:
    index = LineageIndex.build(
        [
            _manifest("root-aaaa", 1),
            _manifest("fork-bbbb", 2, "root-aaaa", "t1"),
            _manifest("fork-cccc", 3, "root-aaaa", "t1"),
            _manifest("fork-dddd", 4, "fork-bbbb", "t9"),
            _manifest("loop-eeee", 5, "loop-ffff"),
            _manifest("loop-ffff", 6, "loop-eeee"),
            _manifest("orph-gggg", 7, "gone-hhhh"),
            InvalidManifest("bad", sessionId="bad-iiii"),
        ]
    )
    forest = index.forest()
    top = [n.manifest.session_id for n in forest]
    # Roots newest first, then whatever only a parent cycle reaches.
    assert top == ["orph-gggg", "root-aaaa", "loop-ffff"]
    assert [c.manifest.session_id for c in forest[2].children] == ["loop-eeee"]
    root = forest[1]
    assert [c.manifest.session_id for c in root.children] == ["fork-cccc", "fork-bbbb"]
    assert [c.manifest.session_id for c in root.children[1].children] == ["fork-dddd"]
    seen = set()
    stack = list(forest)
    while stack:
        node = stack.pop()
        seen.add(node.manifest.session_id)
        stack.extend(node.children)
    assert seen == set(index.by_id)
    assert [m.session_id for m in index.branches_at("root-aaaa", "t1")] == [
        "fork-cccc",
        "fork-bbbb",
    ]
    assert index.turns_with_branches("root-aaaa") == {"t1"}
    assert len(index.damaged) == 1
    index.put(_manifest("fork-bbbb", 2, "root-aaaa", "t2"))
    assert index.turns_with_branches("root-aaaa") == {"t1", "t2"}
    assert [m.session_id for m in index.branches_at("root-aaaa", "t1")] == ["fork-cccc"]


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (Changes(sidebar=True), Changes(targets=frozenset({"x"}))),
        (Changes(turns=frozenset({("x", "t")})), Changes(settings=True)),
    ],
)
def test_changes_combine_and_name_sessions(a: Changes, b: Changes) -> None:
    both = a | b
    assert not both.empty and Changes().empty
    assert both.touches("x")
    assert not Changes(sidebar=True).touches("x")
    assert Changes(turns=frozenset({("x", "t"), ("y", "u")})).turns_of("x") == ["t"]
