"""Branch map benchmark (offscreen): a big family lays out and paints like a small one.

    python tests/benchmarks/bench_branch_map.py [--branches 1000] [--depth 2000] [--runs 5]

1. The map of a family of ``--branches`` branches (each two turns of its own,
   leaving from the root's 20 turns in turn) vs. a family of 10: layout
   (:func:`lay_out`) plus showing it in the map view and painting the view
   (960x600) once, best of ``--runs``. Target ratio <= 10.
2. The same for a fork chain ``--depth`` deep (each member one turn), vs. a
   chain of 10 (reported; no target).
3. The sidebar's refresh (``Sidebar.rebuild``) with the family of
   ``--branches`` branches vs. 10, best of ``--runs``, to show it stays
   responsive (reported with its milliseconds).

The maps are built by core's :func:`build_map` from manifests and turn
lists made in memory, so what is measured is the view's work, not reading
logs; both sides of each ratio run in this one process, side by side.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import report  # noqa: E402

ROOT_TURNS = 20


def _family(branches: int) -> tuple[list, dict]:
    """Manifests and turn lists of a root with ``branches`` two-turn branches."""
    from branchwise.core.conversation.family_map import MemberTurns
    from branchwise.core.store.manifest import Manifest, ParentLink

    root_turns = tuple((f"r{n}", 2 * n + 1, 2 * n + 2) for n in range(ROOT_TURNS))
    members = [Manifest(session_id="root", title="Root", created_at=1.0)]
    turns = {"root": MemberTurns(root_turns, 0)}
    for i in range(branches):
        at = i % ROOT_TURNS
        sid = f"b{i:05d}"
        members.append(
            Manifest(
                session_id=sid,
                title=f"Branch {i}",
                kind="fork",
                created_at=2.0 + i,
                parent=ParentLink("root", "fork", turn_id=f"r{at}"),
                root_session_id="root",
            )
        )
        own = tuple((f"{sid}-{k}", 1000 + 2 * k, 1001 + 2 * k) for k in range(2))
        turns[sid] = MemberTurns(root_turns[: at + 1] + own, at + 1)
    return members, turns


def _chain(depth: int) -> tuple[list, dict]:
    """Manifests and turn lists of a fork chain ``depth`` deep, one own turn each."""
    from branchwise.core.conversation.family_map import MemberTurns
    from branchwise.core.store.manifest import Manifest, ParentLink

    members, turns = [], {}
    inherited: tuple = ()
    for level in range(depth):
        sid = f"c{level:05d}"
        parent = ParentLink(f"c{level - 1:05d}", "fork", turn_id=f"t{level - 1}") if level else None
        members.append(
            Manifest(
                session_id=sid,
                title=f"Level {level}",
                kind="fork" if level else "root",
                created_at=1.0 + level,
                parent=parent,
                root_session_id="c00000" if level else None,
            )
        )
        own = ((f"t{level}", 2 * level + 1, 2 * level + 2),)
        turns[sid] = MemberTurns(inherited + own, len(inherited))
        inherited = inherited + own
    return members, turns


def _best(runs: int, fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--branches", type=int, default=1000)
    parser.add_argument("--depth", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    import tempfile

    from PySide6.QtWidgets import QApplication

    from branchwise.core.conversation.family_map import build_map
    from branchwise.desktop.host.branch_map import lay_out
    from branchwise.desktop.host.host import Host
    from branchwise.desktop.widgets.branch_map import BranchMapView
    from branchwise.desktop.widgets.sidebar import Sidebar
    from branchwise.desktop.widgets.style import apply_style

    app = QApplication.instance() or QApplication([])
    apply_style(app)
    view = BranchMapView(lambda _sid, _turn: None)
    view.resize(960, 600)
    view.show()
    app.processEvents()

    def map_of(members: list, turns: dict, focus: str) -> Callable[[], object]:
        family = build_map(members, turns)

        def show() -> object:
            view.show_layout(lay_out(family, (focus, None)))
            return view.viewport().grab()  # paints what is in view, now

        return show

    big, small = _family(args.branches), _family(10)
    ours = _best(args.runs, map_of(*big, focus=big[0][-1].session_id))
    floor = _best(args.runs, map_of(*small, focus=small[0][-1].session_id))
    report(f"map: {args.branches} branches vs 10 (layout+paint)", ours, floor, 10)

    deep, shallow = _chain(args.depth), _chain(10)
    ours = _best(args.runs, map_of(*deep, focus=deep[0][-1].session_id))
    floor = _best(args.runs, map_of(*shallow, focus=shallow[0][-1].session_id))
    report(f"map: chain {args.depth} deep vs 10 (layout+paint)", ours, floor, 10)

    def sidebar_of(members: list) -> Callable[[], object]:
        host = Host(Path(tempfile.mkdtemp(prefix="bench-map-")))
        for manifest in members:
            host.index.put(manifest)
        sidebar = Sidebar(host, lambda _sid: None, lambda: None)
        sidebar.resize(280, 600)
        sidebar.show()

        def refresh() -> object:
            sidebar.rebuild()
            return sidebar.grab()

        return refresh

    ours = _best(args.runs, sidebar_of(big[0]))
    floor = _best(args.runs, sidebar_of(small[0]))
    report(f"sidebar refresh: {args.branches} branches vs 10", ours, floor, 100)
    print(f"sidebar refresh with {args.branches} branches: {ours * 1000:.1f} ms")


if __name__ == "__main__":
    main()
