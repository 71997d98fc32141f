"""Compare with…: pick a conversation of the tree, see both side by side from the split."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from helpers.forking import fork_at
from helpers.gui import WAIT_MS, App
from helpers.sessions import complete_turn
from PySide6.QtGui import QTextDocument
from pytestqt.qtbot import QtBot

from branchwise.core.projection import events as ev
from branchwise.core.store.store import SessionStore, SessionWriter
from branchwise.desktop.widgets.compare_view import HIGHLIGHT, CompareView


def _turn(writer: SessionWriter, turn_id: str, prompt: str, answer: str) -> None:
    writer.commit([ev.turn_start(turn_id), ev.user_message(f"u-{turn_id}", prompt)])
    writer.commit(
        [
            ev.assistant_message(f"a-{turn_id}", answer, "demo"),
            ev.usage(1, 1, "demo"),
            ev.turn_end(turn_id, "completed"),
        ]
    )


def _highlighted(document: QTextDocument) -> list[str]:
    """The text pieces shown on the highlight colour."""
    found = []
    block = document.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fragment = it.fragment()
            if fragment.charFormat().background().color().name() == HIGHLIGHT:
                found.append(fragment.text())
            it += 1
        block = block.next()
    return found


def _seed(store: SessionStore) -> tuple[str, str, str]:
    with store.create("Trip plans") as writer:
        complete_turn(writer, "r1", "where to?")
        complete_turn(writer, "r2", "when?")
        root = writer.session_id
    left = fork_at(store, root, "r1", op="op-left").child_session_id
    right = fork_at(store, root, "r1", op="op-right").child_session_id
    for session_id, colour, turn in ((left, "red", "t-left"), (right, "blue", "t-right")):
        with store.open_writer(session_id) as writer:
            writer.set_title(f"Paint {colour}")
            _turn(writer, turn, "Which colour?", f"Paint the door {colour} today.")
        for _ in range(40):  # long enough to scroll
            with store.open_writer(session_id) as writer:
                _turn(writer, f"{turn}-{_}", f"more {_}", "line\n" * 3)
    return root, left, right


def test_compare_two_regenerated_branches_side_by_side(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    root, left, right = _seed(SessionStore(tmp_path / "root"))
    app = make_app()
    sidebar = app.window.sidebar
    menu = sidebar.context_menu(left)
    action = next(a for a in menu.actions() if a.text() == "Compare with…")
    action.trigger()
    picker = sidebar.pick_dialog
    assert picker is not None
    qtbot.waitUntil(picker.isVisible, timeout=WAIT_MS)
    titles = [picker.list.item(i).text() for i in range(picker.list.count())]
    assert sorted(titles) == ["Paint blue", "Trip plans"]
    picker.list.setCurrentRow(titles.index("Paint blue"))
    picker.accept()

    qtbot.waitUntil(lambda: sidebar.compare_view is not None, timeout=WAIT_MS)
    view = sidebar.compare_view
    assert isinstance(view, CompareView)
    qtbot.waitUntil(view.isVisible, timeout=WAIT_MS)
    assert view.header.text() == "Split after turn 1 of Trip plans"
    left_text, right_text = view.left.toPlainText(), view.right.toPlainText()
    assert "Same prompt" in left_text and "Which colour?" in left_text
    assert "Paint the door red today." in left_text
    assert "Paint the door blue today." in right_text
    assert _highlighted(view.left.document()) == ["red"]
    assert _highlighted(view.right.document()) == ["blue"]

    # The columns scroll together.
    left_bar, right_bar = view.left.verticalScrollBar(), view.right.verticalScrollBar()
    qtbot.waitUntil(lambda: left_bar.maximum() > 50, timeout=WAIT_MS)
    left_bar.setValue(50)
    assert right_bar.value() == 50
    right_bar.setValue(10)
    assert left_bar.value() == 10
    view.close()


def test_a_conversation_alone_in_its_tree_offers_no_compare(
    make_app: Callable[..., App], tmp_path: Path
) -> None:
    store = SessionStore(tmp_path / "root")
    with store.create("Alone") as writer:
        complete_turn(writer, "r1", "hello")
        alone = writer.session_id
    app = make_app()
    texts = [a.text() for a in app.window.sidebar.context_menu(alone).actions()]
    assert "Compare with…" not in texts


def test_a_turns_branch_menu_compares_the_conversation_with_a_branch(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    root, left, _right = _seed(SessionStore(tmp_path / "root"))
    app = make_app()
    app.window.open_tab(root)
    qtbot.waitUntil(lambda: len(app.turns(root)) == 2, timeout=WAIT_MS)
    first = app.turns(root)[0]
    qtbot.waitUntil(first.branches_button.isVisible, timeout=WAIT_MS)
    compare_menu = next(
        a.menu() for a in first.branches_button.menu().actions() if a.text() == "Compare with…"
    )
    action = next(a for a in compare_menu.actions() if "Paint red" in a.text())
    action.trigger()
    transcript = app.tab(root).transcript
    qtbot.waitUntil(lambda: transcript.compare_view is not None, timeout=WAIT_MS)
    view = transcript.compare_view
    assert view is not None
    qtbot.waitUntil(view.isVisible, timeout=WAIT_MS)
    assert view.header.text() == "Split after turn 1 of Trip plans"
    assert "when?" in view.left.toPlainText()  # the parent's own turn after the split
    assert "Paint the door red today." in view.right.toPlainText()
    view.close()
