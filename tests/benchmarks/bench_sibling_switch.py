"""Switching alternatives at a turn vs. opening the same conversation from the sidebar.

    python tests/benchmarks/bench_sibling_switch.py [--turns 200] [--branches 1000] [--runs 5]

A realistic family (offscreen, one process, the real window over a real data
folder): a root conversation of ``--turns`` turns whose answers are long
Markdown (headings, a list, a table, a code block; about 3 KB each), and
``--branches`` branches taken at its turn ``turns - 20``, so its next turn has
``branches + 1`` alternatives. One of them, the target, asked its own turn.

Side by side, alternating, best of ``--runs`` each:

- **sidebar**: ``MainWindow.open_session`` (what a sidebar click calls) on
  the target, until its transcript first paints;
- **switch**: a click on the root's ``>`` arrow at that turn (the root's tab
  switches in place to the target), until the target's transcript paints
  with the turn landed on and highlighted.

Target: switch / sidebar <= 1.5.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import report  # noqa: E402

MARKDOWN = """## Option {n}

Branching lets you explore **another direction** without losing this one. Each
branch is a real conversation: it keeps the turns it was made from, and what
you ask next goes only there.

- keep the original answer where it was
- compare both side by side, word by word
- bring the better conclusion back into the parent

| Step | What happens | Cost |
| --- | --- | --- |
| Fork | the log's segments are shared | about 2 ms |
| Ask | only the branch is written | one commit |
| Merge | one record in the parent | one commit |

```python
def branch(conversation, turn):
    return conversation.fork(at=turn)  # nothing is copied
```

{filler}
"""
FILLER = "A longer paragraph follows, to make the answer as long as a real one. " * 14


def build_family(root: Path, turns: int, branches: int) -> tuple[str, str, str]:
    """``(root, target, fork turn id)``: the family, written through core's own writer and forks."""
    from branchwise.core.fork.engine import ForkCall, fork_together
    from branchwise.core.fork.operations import ForkRequest
    from branchwise.core.fork.targets import fork_targets
    from branchwise.core.ids import new_id
    from branchwise.core.projection import events as ev
    from branchwise.core.store.store import SessionStore

    store = SessionStore(root)

    def ask(writer: object, number: int, question: str) -> None:
        turn, step = new_id("turn"), new_id("step")
        writer.commit(  # type: ignore[attr-defined]
            [ev.turn_start(turn), ev.user_message(new_id("msg"), question), ev.step_start(step)]
        )
        writer.commit(  # type: ignore[attr-defined]
            [
                ev.assistant_message(
                    new_id("msg"), MARKDOWN.format(n=number, filler=FILLER), "demo"
                ),
                ev.step_end(step),
                ev.turn_end(turn, "completed"),
            ]
        )

    with store.create("Planning a long trip") as writer:
        for number in range(1, turns + 1):
            ask(writer, number, f"Question {number}: what next?")
        session_id = writer.session_id
    answer = fork_targets(store, session_id)
    at = answer.targets[turns - 21]  # turn turns-20: the alternatives are at the next turn
    assert at.boundary_sequence is not None
    request = ForkRequest(session_id, at.turn_id, at.boundary_sequence, answer.generation)
    children: list[str] = []
    for start in range(0, branches, 100):
        calls = [
            ForkCall(request, f"op-{n}", title=f"Branch {n}")
            for n in range(start, min(branches, start + 100))
        ]
        for result in fork_together(store, calls):
            assert not isinstance(result, Exception), result
            children.append(result.child_session_id)
    target = children[0]  # the first branch: the root's ">" goes to it
    with store.open_writer(target) as writer:
        ask(writer, turns - 19, "A different question at the same turn?")
    return session_id, target, at.turn_id


def measure(root: Path, session_id: str, target: str, runs: int) -> tuple[float, float, int]:
    """Best sidebar open and best switch (seconds), and the alternatives shown at the turn."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QEvent, QObject
    from PySide6.QtWidgets import QApplication

    from branchwise.desktop.app import run_on_qt_loop
    from branchwise.desktop.host.conversation import ConversationRef
    from branchwise.desktop.host.host import Host
    from branchwise.desktop.widgets.style import apply_style
    from branchwise.desktop.widgets.window import MainWindow

    app = QApplication.instance() or QApplication([])
    apply_style(app)
    found: dict[str, float] = {}

    class Painted(QObject):
        """Notes when the target's transcript paints (with the turn landed, if asked)."""

        def __init__(self, window: MainWindow, landed: bool) -> None:
            super().__init__()
            self.window, self.landed, self.at = window, landed, None

        def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802
            if self.at is None and event.type() == QEvent.Type.Paint:
                tab = self.window.tab_for(target)
                ours = tab is not None and watched is tab.transcript.widget()
                if ours and (not self.landed or tab.transcript.landed is not None):
                    self.at = time.perf_counter()
            return False

    async def until_painted(window: MainWindow, landed: bool, act: object) -> float:
        spy = Painted(window, landed)
        app.installEventFilter(spy)
        start = time.perf_counter()
        act()  # type: ignore[operator]
        deadline = start + 60
        while spy.at is None:
            if time.perf_counter() > deadline:
                raise SystemExit("the target never painted")
            await asyncio.sleep(0)
        app.removeEventFilter(spy)
        return spy.at - start

    async def settle(host: Host) -> None:
        await asyncio.sleep(0.3)
        for session in host.open_sessions:
            await session.wait_loaded()

    async def main() -> int:
        host = Host(root)
        host.start()
        window = MainWindow(host)
        window.resize(1100, 720)
        window.show()
        await asyncio.sleep(0.3)
        sidebar: list[float] = []
        switch: list[float] = []
        shown = 0
        for _ in range(runs):
            sidebar.append(await until_painted(window, False, lambda: window.open_session(target)))
            await settle(host)
            tab = window.tab_for(target)
            assert tab is not None
            window._close_tab(tab)
            await settle(host)

            window.open_session(session_id)
            await settle(host)
            root_tab = window.tab_for(session_id)
            assert root_tab is not None
            placed = host.alternatives_at(ConversationRef(session_id))
            (turn_id,) = placed
            shown = len(placed[turn_id].members)
            position = root_tab.transcript.position_of_row(turn_id)
            assert position is not None
            row = root_tab.transcript.reveal(position)
            assert row is not None and row.alternatives.next_button.isEnabled()
            await asyncio.sleep(0.3)
            switch.append(await until_painted(window, True, row.alternatives.next_button.click))
            await settle(host)
            tab = window.tab_for(target)
            assert tab is not None and window.tab_for(session_id) is None
            window._close_tab(tab)
            await settle(host)
        await host.shutdown()
        window.close()
        found["sidebar"], found["switch"], found["shown"] = min(sidebar), min(switch), shown
        return 0

    run_on_qt_loop(main)
    return found["sidebar"], found["switch"], int(found["shown"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--branches", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        started = time.perf_counter()
        session_id, target, _turn = build_family(root, args.turns, args.branches)
        print(
            f"# family: {args.turns} turns, {args.branches} branches "
            f"(built in {time.perf_counter() - started:.1f} s)"
        )
        sidebar, switch, shown = measure(root, session_id, target, args.runs)
        print(f"# the switched turn shows {shown} alternatives")
        report(
            f"switch alternatives vs sidebar open (best of {args.runs})",
            switch,
            sidebar,
            1.5,
        )


if __name__ == "__main__":
    main()
