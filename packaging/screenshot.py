"""Take ``docs/screenshot.png``: the real app, under Xvfb, on a fixture data folder.

    python packaging/screenshot.py [--out docs/screenshot.png] [--lang en] [--theme light]
                                   [--view conversation|intro|compare|map|grid]

Without a ``DISPLAY`` the script re-runs itself under ``xvfb-run`` (install
``xvfb`` and ``fonts-wqy-microhei`` for the Chinese languages). The fixture is
a conversation of three turns, a fork made from its first turn (a turn of
its own with a picture attached, and one answered with a table, a quote and
a code block) and a child conversation spawned from its last turn, built
with the same store, fork and lineage calls the app uses. ``--theme`` is written to the fixture's
settings, as the Settings dialog would. Each answer records token figures
(as a server's usage, timed), so turn footers show them. ``--view intro``
shows the first-start window instead: no conversation yet, the introduction
offering the sample conversation. ``--view compare`` shoots the Compare
view of the fork beside its parent, ``--view map`` adds an edit and a
regeneration of the conversation's later turns and shoots Conversation ▸
Branch map opened on the fork's tab, instead of the main window. ``--view
grid`` sends a question from the parent to three models of the offline demo
responder (Send to several) and shoots the live grid while they stream.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WIDTH, HEIGHT = 1200, 760

TRIP = [
    (
        "Plan a three-day trip to Kyoto in late autumn.",
        "Here is a relaxed plan that follows the autumn colours:\n\n"
        "1. **Day one — Higashiyama.** Kiyomizu-dera early, then the lanes of "
        "Sannenzaka down to Yasaka Shrine and Gion at dusk.\n"
        "2. **Day two — Arashiyama.** The bamboo grove before 8 am, Tenryū-ji's "
        "garden, and a boat on the Ōi river.\n"
        "3. **Day three — the north.** Kurama to Kibune on foot, with lunch "
        "beside the stream.\n\n"
        "Book rooms near *Shijō* so every day starts within twenty minutes.",
    ),
    (
        "Swap day three for something quieter.",
        "Try **Ōhara** instead: Sanzen-in's moss garden and Hōsen-in's framed "
        "maple view are calm even in peak season. Take bus 17 from Kyoto "
        "Station (about an hour) and keep the afternoon for the "
        "*Philosopher's Path* on the way back.",
    ),
    (
        "What should I pack?",
        "Layers matter more than anything:\n\n"
        "- a light down jacket for mornings around 5 °C\n"
        "- shoes you can slip off quickly at temples\n"
        "- an IC card (ICOCA) for buses and trains\n"
        "- a small bag for shoes inside tatami rooms",
    ),
]
FORK_TURN = (
    "Make day two about food instead.",
    "Then spend day two around **Nishiki Market** and Pontochō:\n\n"
    "- breakfast of *yudofu* near Nanzen-ji\n"
    "- a mid-morning walk through Nishiki, tasting as you go\n"
    "- dinner on a *kawadoko* terrace if the weather holds",
)
BUDGET_TURN = (
    "Estimate the food budget for that day.",
    "A rough budget per person:\n\n"
    "| Meal | Where | Yen |\n"
    "|------|-------|----:|\n"
    "| Breakfast | Nanzen-ji yudofu | 3,000 |\n"
    "| Tasting | Nishiki Market | 2,500 |\n"
    "| Dinner | Pontochō terrace | 8,000 |\n\n"
    "> Prices rise on the *kawadoko* terraces in peak season.\n\n"
    "To total your own list:\n\n"
    "```python\n"
    'meals = {"breakfast": 3000, "tasting": 2500, "dinner": 8000}\n'
    'print(f"{sum(meals.values()):,} yen")  # 13,500 yen\n'
    "```",
)


def _photo(path: Path) -> Path:
    """A small picture of autumn leaves (drawn, so the fixture needs no image file)."""
    from PySide6.QtCore import QPointF, Qt
    from PySide6.QtGui import QColor, QImage, QLinearGradient, QPainter

    image = QImage(480, 300, QImage.Format.Format_RGB32)
    painter = QPainter(image)
    sky = QLinearGradient(0, 0, 0, 300)
    sky.setColorAt(0, QColor("#f6d9a8"))
    sky.setColorAt(1, QColor("#c8553d"))
    painter.fillRect(image.rect(), sky)
    painter.setPen(Qt.PenStyle.NoPen)
    for n in range(60):
        x, y = (n * 97) % 480, (n * 53) % 300
        painter.setBrush(QColor(("#b3261e", "#e8871e", "#f2c14e", "#8c1c13")[n % 4]))
        painter.drawEllipse(QPointF(x, y), 14 + n % 9, 9 + n % 7)
    painter.end()
    image.save(str(path), "PNG")
    return path


def build_fixture(root: Path) -> tuple[str, str, str]:
    """Write the fixture sessions; return (parent, fork, child) ids."""
    from branchwise.core.conversation.attachments import attach_files
    from branchwise.core.fork.engine import fork
    from branchwise.core.fork.operations import ForkRequest
    from branchwise.core.ids import new_id
    from branchwise.core.lineage import create_child
    from branchwise.core.projection import events as ev
    from branchwise.core.store.store import SessionStore

    store = SessionStore(root)

    def turn(writer: object, question: str, answer: str, files: tuple[object, ...] = ()) -> str:
        turn_id, step = new_id("turn"), new_id("step")
        asked = ev.user_message(new_id("msg"), question, files)
        writer.commit([ev.turn_start(turn_id), asked, ev.step_start(step)])  # type: ignore[attr-defined]
        writer.commit(  # type: ignore[attr-defined]
            [
                ev.assistant_message(new_id("msg"), answer, "demo"),
                ev.step_end(step),
                ev.usage(40, 120, "demo", first_token_ms=380, generation_ms=2900),
                ev.turn_end(turn_id, "completed"),
            ]
        )
        return turn_id

    with store.create("Kyoto in autumn") as writer:
        turns = [turn(writer, q, a) for q, a in TRIP]
        parent = writer.session_id
        generation = writer.manifest.generation
        first_boundary = writer.projection.turn(turns[0]).boundary_sequence  # type: ignore[union-attr]
    request = ForkRequest(parent, turns[0], first_boundary, generation)
    forked = fork(store, request, new_id("op"), title="Kyoto in autumn — food")
    with store.open_writer(forked.child_session_id) as writer:
        turn(writer, *FORK_TURN, files=attach_files(root, [_photo(root.parent / "nishiki.png")]))
        turn(writer, *BUDGET_TURN)
    child = create_child(store, parent, {"turnId": turns[2]}, "Packing checklist")
    with store.open_writer(child.child_session_id) as writer:
        turn(
            writer,
            "Turn the packing list into a checklist.",
            "- [ ] down jacket\n- [ ] slip-on shoes\n- [ ] ICOCA card\n- [ ] shoe bag",
        )
    return parent, forked.child_session_id, child.child_session_id


def add_alternatives(root: Path, parent: str) -> None:
    """An edit of the second prompt and a regeneration of the third, one turn each (for the map)."""
    from branchwise.core.conversation.ask_again import edit_request, regenerate_request
    from branchwise.core.fork.engine import fork
    from branchwise.core.ids import new_id
    from branchwise.core.projection import events as ev
    from branchwise.core.store.store import SessionStore

    store = SessionStore(root)
    turns = [t.turn_id for t in store.read(parent).projection.turns]
    edited = edit_request(store, parent, turns[1], "What about Nara instead on day two?")
    for request in (edited, regenerate_request(store, parent, turns[2])):
        child = fork(store, request, new_id("op")).child_session_id
        with store.open_writer(child) as writer:
            projection = writer.projection
            open_turn = projection.turns[-1].turn_id
            step = new_id("step")
            writer.commit(
                [
                    ev.step_start(step),
                    ev.assistant_message(new_id("msg"), "Here is another way to see it.", "demo"),
                    ev.step_end(step),
                    ev.turn_end(open_turn, "completed"),
                ]
            )


async def _shoot(
    root: Path, out: Path, ids: tuple[str, str, str], front: str, view: str = "conversation"
) -> int:
    from PySide6.QtWidgets import QApplication, QWidget

    from branchwise.desktop.host.conversation import ConversationRef
    from branchwise.desktop.host.host import Host
    from branchwise.desktop.host.notices import Level
    from branchwise.desktop.widgets.window import MainWindow

    app = QApplication.instance()
    assert app is not None
    parent, forked, _child = ids
    host = Host(root)
    host.start()
    window = MainWindow(host)
    window.resize(WIDTH, HEIGHT)
    window.show()
    if view != "intro":
        window.open_tab(parent)
        window.open_tab(forked)
        if front == "parent":
            window.open_tab(parent)
        host.notices.post("fork_created", Level.SUCCESS, child=forked, created=True)
    for _ in range(40):  # let the tabs load, lay out and paint
        await asyncio.sleep(0.05)
    tab = window.current_tab()
    if tab is not None:
        bar = tab.transcript.verticalScrollBar()
        bar.setValue(bar.maximum())
    await asyncio.sleep(0.2)
    shot: QWidget = window
    if view == "compare":
        window.compare([ConversationRef(parent), ConversationRef(forked)])
        for _ in range(40):  # read off the UI thread, then laid out and painted
            await asyncio.sleep(0.05)
        if window.compare_view is None:
            raise SystemExit("the compare view did not open")
        window.compare_view.resize(WIDTH, HEIGHT)
        await asyncio.sleep(0.3)
        shot = window.compare_view
    if view == "map":
        window.show_branch_map()
        for _ in range(100):
            if window.branch_map is not None and window.branch_map.isVisible():
                break
            await asyncio.sleep(0.05)
        assert window.branch_map is not None
        window.branch_map.resize(WIDTH, HEIGHT * 2 // 3)
        await asyncio.sleep(0.3)
        shot = window.branch_map
    if view == "grid":
        from branchwise.core.conversation.fanout import fanout_targets

        front_tab = window.tab_for(parent)
        assert front_tab is not None
        targets = fanout_targets(["llama3.2", "qwen2.5", "mistral"], None, "demo")
        grid = window._fan_out(front_tab, "Which day of the plan would you cut?", targets)
        grid.resize(WIDTH, HEIGHT)
        for _ in range(30):  # a few seconds of streaming, at the demo's pace
            await asyncio.sleep(0.05)
        grid.flush()
        await asyncio.sleep(0.2)
        shot = grid
    out.parent.mkdir(parents=True, exist_ok=True)
    if not shot.grab().save(str(out), "PNG"):
        raise SystemExit(f"could not write {out}")
    print(out)
    window.close()
    await host.shutdown()
    app.quit()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshot.png")
    parser.add_argument("--lang", default="en")
    parser.add_argument("--front", choices=("fork", "parent"), default="fork", help="tab in front")
    parser.add_argument("--theme", choices=("light", "dark", "system"), default="light")
    parser.add_argument(
        "--view",
        choices=("conversation", "intro", "compare", "map", "grid"),
        default="conversation",
        help="the window, the introduction, compare of the fork and its parent, the map, "
        "or Send to several's grid",
    )
    args = parser.parse_args()
    if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
        if shutil.which("xvfb-run") is None:
            raise SystemExit("no display and no xvfb-run: apt-get install -y xvfb")
        command = ["xvfb-run", "-a", "-s", f"-screen 0 {WIDTH + 80}x{HEIGHT + 80}x24"]
        return subprocess.call([*command, sys.executable, __file__, *sys.argv[1:]])

    os.environ.setdefault("QT_QPA_PLATFORM", "xcb")
    from PySide6.QtWidgets import QApplication

    from branchwise.core.i18n.language import set_language
    from branchwise.core.settings import Settings, save_settings
    from branchwise.desktop.app import run_on_qt_loop
    from branchwise.desktop.widgets.qt_i18n import LanguageBridge
    from branchwise.desktop.widgets.style import apply_style

    set_language(args.lang)
    app = QApplication(sys.argv[:1])
    app.setApplicationName("Branchwise")
    app.setQuitOnLastWindowClosed(False)  # as the app does: quit after the host shut down
    apply_style(app)
    LanguageBridge(app)  # as the app does (a child of app): Qt's own buttons in the language shown
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "data"
        ids = build_fixture(root) if args.view != "intro" else ("", "", "")
        if args.view == "map":
            add_alternatives(root, ids[0])
        save_settings(root, Settings(theme=args.theme, first_run_done=True))
        return run_on_qt_loop(lambda: _shoot(root, args.out.resolve(), ids, args.front, args.view))


if __name__ == "__main__":
    sys.exit(main())
