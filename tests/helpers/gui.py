"""Shared pieces of the desktop GUI tests: the qasync loop, the app, seeded sessions.

The loop fixture runs asyncio on Qt's loop for the test (``already_running``:
pytest-qt's ``waitUntil`` spins Qt, and with it every asyncio callback),
collects exceptions nobody awaited with ``set_exception_handler``, and
re-raises the first at teardown so a failing task fails its test.

Sessions are seeded by committing the same commits the turn runner writes
(question commit, then one closing commit), before the app opens them, so the
tests exercise the cold-restore path; turns run live through the UI use the
demo responder with a per-chunk delay to stay running long enough to watch.

Test modules import the fixtures by their function names (``make_app_fixture``,
``qloop_fixture``) and request them as ``make_app`` / ``qloop``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
import qasync
import shiboken6
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from branchwise.core.i18n.language import set_language
from branchwise.core.ids import new_id
from branchwise.core.projection import events as ev
from branchwise.core.providers.base import Provider
from branchwise.core.providers.demo import DEMO_MODEL, DemoProvider, demo_answer
from branchwise.core.settings import Settings
from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.connections import Connection
from branchwise.desktop.host.host import Host
from branchwise.desktop.widgets.conversation_tab import ConversationTab
from branchwise.desktop.widgets.qt_i18n import LanguageBridge
from branchwise.desktop.widgets.turn_widget import TurnWidget
from branchwise.desktop.widgets.window import MainWindow

T = TypeVar("T")

BRANCH = "Branch into a new conversation"
TURN_OPEN = "This turn has not finished yet; it can be branched once it has."
WAIT_MS = 10_000


@pytest.fixture(name="qloop")
def qloop_fixture(qapp: QApplication) -> Iterator[asyncio.AbstractEventLoop]:
    """An asyncio loop on Qt's loop for one test; unhandled loop errors fail the test."""
    loop = qasync.QEventLoop(qapp, already_running=True)
    asyncio.set_event_loop(loop)
    errors: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    try:
        yield loop
    finally:
        pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
        for task in pending:
            task.cancel()
        for _ in range(200):
            if all(task.done() for task in pending):
                break
            qapp.processEvents()
        # qasync's stop() would call QApplication.exit(), which breaks later pytest-qt waits;
        # the loop never ran run_forever, so marking it stopped is all that is needed.
        loop._QEventLoop__is_running = False  # type: ignore[attr-defined]
        asyncio.events._set_running_loop(None)
        loop.close()
        asyncio.set_event_loop(None)
        # The closed loop's Qt helpers (its timer object, its call-soon signaller) would
        # otherwise be freed whenever Python's GC next runs — possibly in a worker
        # thread of a later test, where deleting a QObject corrupts Qt's timer list.
        # Delete them here, on the GUI thread.
        for helper in (loop._timer, loop._QEventLoop__call_soon_signaller):  # type: ignore[attr-defined]
            if shiboken6.isValid(helper):
                shiboken6.delete(helper)
    if errors:
        context = errors[0]
        exc = context.get("exception")
        if exc is not None:
            raise exc
        raise AssertionError(context.get("message"))


def run(qtbot: QtBot, coro: Coroutine[Any, Any, T], timeout: int = WAIT_MS) -> T:
    """Run a coroutine on the test's loop and return its result."""
    task = asyncio.ensure_future(coro)
    qtbot.waitUntil(task.done, timeout=timeout)
    return task.result()


@dataclass
class App:
    """A host and its main window on a data root."""

    host: Host
    window: MainWindow
    root: Path

    def tab(self, session_id: str) -> ConversationTab:
        """The open tab of a conversation (fails if it is not open)."""
        tab = self.window.tab_for(session_id)
        assert tab is not None, f"no tab for {session_id}"
        return tab

    def turns(self, session_id: str) -> list[TurnWidget]:
        """The turn widgets of a conversation's tab."""
        return self.tab(session_id).transcript.turn_widgets()

    def notice_texts(self) -> list[str]:
        """What the notice area shows now."""
        return self.window.notice_area.visible_texts()


def open_served(qtbot: QtBot, app: App, url: str, token: str, session_id: str) -> ConversationTab:
    """Connect ``app``'s window to a running ``branchwise serve`` (quick retries) and open one
    of its conversations in a tab."""
    server = app.window.remote_servers.add(
        Connection("workstation", url),
        token,
        backoff=(0.05, 0.1, 0.2),
        refresh_interval=0.1,
        timeout=5.0,
    )
    qtbot.waitUntil(lambda: server.connected, timeout=WAIT_MS)
    tab = run(qtbot, app.window.remote_servers.open_remote(server, session_id))
    assert isinstance(tab, ConversationTab) and tab.ref.remote
    return tab


@pytest.fixture(name="make_app")
def make_app_fixture(
    qtbot: QtBot, qloop: asyncio.AbstractEventLoop, tmp_path: Path
) -> Iterator[Callable[..., App]]:
    """Build the app on a data root: ``make_app(delay=0.0, provider=None, root=None, …)``.

    By default the demo responder answers (with ``delay`` seconds per chunk);
    ``provider_factory=choose_provider`` makes the settings decide, as in the app.

    At teardown the host shuts down (running turns commit as cancelled,
    writers are released) and no "internal_error" notice may have appeared.
    """
    made: list[App] = []

    def factory(
        delay: float = 0.0,
        provider: Provider | None = None,
        root: Path | None = None,
        provider_factory: Callable[[Settings], Provider] | None = None,
    ) -> App:
        data = root or tmp_path / "root"

        def provider_for(_settings: Settings) -> Provider:
            return provider if provider is not None else DemoProvider(delay=delay)

        host = Host(data, provider_factory=provider_factory or provider_for)
        host.start()
        window = MainWindow(host)
        bridge.register(window)
        qtbot.addWidget(window)
        window.show()
        app = App(host, window, data)
        made.append(app)
        return app

    set_language("en")
    bridge = LanguageBridge()
    try:
        yield factory
        for app in made:
            run(qtbot, app.host.shutdown())
            internal = [n for n in app.host.notices.history if n.code == "internal_error"]
            assert not internal, internal
    finally:
        set_language("en")
        bridge.close()
        bridge.deleteLater()


def seed_session(
    store: SessionStore, questions: list[str], title: str = "", *, close_last: bool = True
) -> str:
    """A session with one finished turn per question, committed as the runner does."""
    with store.create(title) as writer:
        context: list[dict[str, str]] = []
        for number, question in enumerate(questions):
            turn_id = new_id("turn")
            step = new_id("step")
            writer.commit(
                [
                    ev.turn_start(turn_id),
                    ev.user_message(new_id("msg"), question),
                    ev.step_start(step),
                ]
            )
            if not title and number == 0:
                writer.set_title(question[:60])
            context.append({"role": "user", "content": question})
            answer = demo_answer(context)
            context.append({"role": "assistant", "content": answer})
            if close_last or number < len(questions) - 1:
                writer.commit(
                    [
                        ev.assistant_message(new_id("msg"), answer, DEMO_MODEL),
                        ev.step_end(step),
                        ev.usage(1, 1, DEMO_MODEL),
                        ev.turn_end(turn_id, "completed"),
                    ]
                )
        return writer.session_id


def seed_legacy_session(store: SessionStore, title: str = "Imported chat") -> str:
    """A session whose history is message-only (``legacy/import``), with no turn records."""
    with store.create(title) as writer:
        writer.commit(
            [
                {
                    "type": "legacy/import",
                    "messages": [
                        {"role": "user", "content": "What is a fork?"},
                        {"role": "assistant", "content": "A copy that *diverges*."},
                        {"role": "user", "content": "And a branch?"},
                        {"role": "assistant", "content": "Much the same."},
                    ],
                }
            ]
        )
        return writer.session_id


def user_texts(widgets: list[TurnWidget]) -> list[str]:
    """The user messages shown, in order."""
    return [text for w in widgets for role, text in w.shown_messages() if role == "user"]


def seed_long_session(
    store: SessionStore,
    turns: int,
    title: str = "A long conversation",
    questions: dict[int, str] | None = None,
) -> str:
    """A session of ``turns`` finished turns, one commit each (fast to write, same boundaries).

    ``questions`` replaces the question of some turns (by 1-based number).
    """
    with store.create(title) as writer:
        for number in range(1, turns + 1):
            turn_id = new_id("turn")
            step = new_id("step")
            writer.commit(
                [
                    ev.turn_start(turn_id),
                    ev.user_message(
                        new_id("msg"), (questions or {}).get(number, f"Question number {number}?")
                    ),
                    ev.step_start(step),
                    ev.assistant_message(
                        new_id("msg"),
                        f"Answer **{number}**: a short paragraph that stands in for a "
                        "real reply, long enough to wrap once or twice in the window.",
                        DEMO_MODEL,
                    ),
                    ev.step_end(step),
                    ev.turn_end(turn_id, "completed"),
                ]
            )
        return writer.session_id
