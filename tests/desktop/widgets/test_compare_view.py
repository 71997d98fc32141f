"""Compare reads like the transcript: rendered answers, transcript turn numbers, marked words.

Conversations are seeded on disk, the real window compares them through the
host, and the tests read what the user sees: column headers, "Turn N",
rendered text (no ``**`` or pipes), the marked words, "Same answer", and
where each column's rows sit while the one scroll bar moves.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from helpers.forking import fork_at
from helpers.gui import WAIT_MS, App
from helpers.sessions import complete_turn
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from branchwise.core.fork.engine import fork
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.fork.targets import fork_targets
from branchwise.core.i18n.language import set_language
from branchwise.core.projection import events as ev
from branchwise.core.store.manifest import BranchLabel
from branchwise.core.store.store import SessionStore, SessionWriter
from branchwise.desktop.host.conversation import ConversationRef
from branchwise.desktop.widgets.compare_view import CompareView
from branchwise.desktop.widgets.theme import DARK_COLORS, LIGHT_COLORS, theme_for

TABLE = "| Meal | Yen |\n|------|----:|\n| Lunch | 900 |\n"
CODE = '```python\nprint("hello")\n```\n'


def _turn(writer: SessionWriter, turn_id: str, prompt: str, answer: str) -> None:
    writer.commit([ev.turn_start(turn_id), ev.user_message(f"u-{turn_id}", prompt)])
    writer.commit(
        [
            ev.assistant_message(f"a-{turn_id}", answer, "demo"),
            ev.usage(1, 1, "demo"),
            ev.turn_end(turn_id, "completed"),
        ]
    )


def _seed(store: SessionStore, count: int = 2, extra: int = 40) -> tuple[str, list[str]]:
    """A parent of two turns and ``count`` branches taken after its first turn.

    Each branch asks "Which colour?" and answers with a colour in bold, a
    table and code; then ``extra`` more turns, the same in every branch.
    """
    with store.create("Trip plans") as writer:
        complete_turn(writer, "r1", "where to?")
        complete_turn(writer, "r2", "when?")
        root = writer.session_id
    colours = ["red", "blue", "green", "black"][:count]
    branches = []
    for colour in colours:
        answer = fork_targets(store, root)
        target = answer.target("r1")
        assert target is not None and target.boundary_sequence is not None
        request = ForkRequest(root, "r1", target.boundary_sequence, answer.generation)
        label = BranchLabel("fork", text="Which colour?")
        branch = fork(store, request, f"op-{colour}", label=label, fork_turn_index=1)
        branch = branch.child_session_id
        with store.open_writer(branch) as writer:
            writer.set_title(f"Paint {colour}")
            _turn(
                writer,
                f"t-{colour}",
                "Which colour?",
                f"Paint the door **{colour}** today.\n\n{TABLE}\n{CODE}",
            )
            for n in range(extra):
                _turn(writer, f"t-{colour}-{n}", f"more {n}", "line one\n\nline two\n\nline three")
        branches.append(branch)
    return root, branches


def _open(qtbot: QtBot, app: App, ids: list[str], at_turn: int | None = None) -> CompareView:
    app.window.compare([ConversationRef(sid) for sid in ids], at_turn)
    qtbot.waitUntil(lambda: app.window.compare_view is not None, timeout=WAIT_MS)
    view = app.window.compare_view
    assert isinstance(view, CompareView)
    qtbot.waitUntil(view.isVisible, timeout=WAIT_MS)
    return view


def test_answers_render_as_markdown_with_transcript_numbers_and_marked_words(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    _root, (red, blue) = _seed(SessionStore(tmp_path / "root"))
    app = make_app()
    view = _open(qtbot, app, [red, blue])
    assert view.header.text() == "Split after turn 1 of Trip plans"
    assert view.column_titles() == ["Paint red", "Paint blue"]
    assert view.column_labels() == ["From turn 1: Which colour?"] * 2
    assert view.column_headers[0].toolTip().splitlines()[:2] == [
        "Paint red",
        "From turn 1: Which colour?",
    ]
    left, right = view.cells(0)[0], view.cells(1)[0]
    # Numbered as each transcript numbers it: the inherited turn 1 counts.
    assert left.number_label.text() == right.number_label.text() == "Turn 2"
    assert left.note.text() == "Same prompt"
    text = left.answer_text()
    assert "Paint the door red today." in text
    assert "**" not in text and "|" not in text and "```" not in text
    assert "Lunch" in text and "900" in text
    assert left.answer is not None and right.answer is not None
    (code,) = left.answer.code_blocks()
    assert code.language_label.text() == "python"
    assert "<span style" in code.body.text()  # highlighted by the transcript's renderer
    assert left.answer.changed_spans() == ["red"]
    assert right.answer.changed_spans() == ["blue"]
    assert right.answer.accessibleDescription() == "Differs in: blue"
    view.close()


def test_identical_answers_collapse_to_same_answer_and_expand(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    _root, (red, blue) = _seed(SessionStore(tmp_path / "root"), extra=3)
    app = make_app()
    view = _open(qtbot, app, [red, blue])
    qtbot.waitUntil(lambda: len(view.row_views) == 4, timeout=WAIT_MS)
    cell = view.cells(0)[1]
    assert cell.number_label.text() == "Turn 3"
    button = cell.same_answer_button
    assert button is not None and button.text() == "Same answer"
    assert cell.answer_text() == ""
    button.click()
    qtbot.waitUntil(lambda: "line two" in cell.answer_text(), timeout=WAIT_MS)
    assert view.cells(0)[0].same_answer_button is None  # red and blue differ
    view.close()


def test_three_and_four_columns_side_by_side(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    root, branches = _seed(SessionStore(tmp_path / "root"), count=3, extra=1)
    app = make_app()
    view = _open(qtbot, app, branches)
    assert view.column_titles() == [
        "Paint red",
        "Paint blue",
        "Paint green",
    ]
    assert [view.cells(c)[0].answer.changed_spans() for c in range(3)] == [  # type: ignore[union-attr]
        ["red"],
        ["blue"],
        ["green"],
    ]
    view.close()
    app.window.compare_view = None

    # The parent and its three branches at turn 2: the parent's own turn 2 beside them.
    view = _open(qtbot, app, [root, *branches])
    assert view.column_titles() == [
        "Trip plans",
        "Paint red",
        "Paint blue",
        "Paint green",
    ]
    first = [view.cells(c)[0] for c in range(4)]
    assert [cell.number_label.text() for cell in first] == ["Turn 2"] * 4
    assert first[0].prompt is not None and first[0].prompt.text() == "when?"
    assert first[0].note.isHidden()  # the prompts differ
    assert view.cells(0)[1].note.text() == "No turn here."
    view.close()


def test_an_inherited_answer_beside_its_original_is_the_same_answer(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    store = SessionStore(tmp_path / "root")
    root, (red,) = _seed(store, count=1, extra=0)
    later = fork_at(store, root, "r2", op="op-later").child_session_id
    app = make_app()
    view = _open(qtbot, app, [root, red, later])
    parent, edited, inherited = view.row_views[0].cells
    assert [c.number_label.text() for c in (parent, edited, inherited)] == ["Turn 2"] * 3
    assert parent.same_answer_button is None and edited.same_answer_button is None
    button = inherited.same_answer_button
    assert button is not None and button.text() == "Same answer"
    assert button.toolTip() == "The same answer as the first column"
    assert "answer to when?" in parent.answer_text()
    view.close()


def test_the_columns_scroll_together_and_open_at_a_turn(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    _root, (red, blue) = _seed(SessionStore(tmp_path / "root"), extra=80)
    app = make_app()
    view = _open(qtbot, app, [red, blue], at_turn=20)
    bar = view.rows_area.verticalScrollBar()
    target = next(i for i, row in enumerate(view.compared.rows) if row.numbers[0] == 20)
    qtbot.waitUntil(lambda: bar.value() > 0, timeout=WAIT_MS)
    viewport = view.rows_area.viewport()

    def top(cell: object) -> int:
        assert hasattr(cell, "mapTo")
        return cell.mapTo(viewport, cell.rect().topLeft()).y()  # type: ignore[attr-defined]

    left, right = view.cells(0)[target], view.cells(1)[target]
    assert left.number_label.text() == right.number_label.text() == "Turn 20"
    qtbot.waitUntil(lambda: abs(top(left)) <= 2, timeout=WAIT_MS)
    for value in (bar.value() + 120, 10, bar.maximum() // 2):
        bar.setValue(value)
        assert bar.value() == value
        assert top(left) == top(right)  # row N of one column beside row N of the other
    # Rows below are built as the view scrolls towards them, not before.
    assert len(view.row_views) < len(view.compared.rows)
    while len(view.row_views) < len(view.compared.rows):
        built = len(view.row_views)
        bar.setValue(bar.maximum())
        qtbot.waitUntil(lambda: len(view.row_views) > built, timeout=WAIT_MS)  # noqa: B023
    view.close()


def test_marks_follow_the_theme_and_the_language(
    qtbot: QtBot, qapp: QApplication, make_app: Callable[..., App], tmp_path: Path
) -> None:
    _root, (red, blue) = _seed(SessionStore(tmp_path / "root"), extra=1)
    app = make_app()
    view = _open(qtbot, app, [red, blue])
    answer = view.cells(0)[0].answer
    assert answer is not None
    assert LIGHT_COLORS.search_hit in answer.labels()[0].text()
    theme = theme_for(qapp)
    theme.choose("dark")
    try:
        qtbot.waitUntil(
            lambda: DARK_COLORS.search_hit in answer.labels()[0].text(), timeout=WAIT_MS
        )
        assert answer.changed_spans() == ["red"]
    finally:
        theme.choose("light")
    set_language("zh_Hans")
    try:
        assert view.cells(0)[0].number_label.text() != "Turn 2"
        assert "2" in view.cells(0)[0].number_label.text()
        assert view.windowTitle() != "Compare conversations"
        assert view.column_labels()[0] == "从第 1 轮：Which colour?"
    finally:
        set_language("en")
    assert view.cells(0)[0].number_label.text() == "Turn 2"
    view.close()


def test_a_turns_branch_menu_compares_the_conversation_with_a_branch(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    root, (red, _blue) = _seed(SessionStore(tmp_path / "root"))
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
    left, right = view.cells(0)[0], view.cells(1)[0]
    assert left.prompt is not None and left.prompt.text() == "when?"  # the parent's own turn 2
    assert left.number_label.text() == right.number_label.text() == "Turn 2"
    assert "Paint the door red today." in right.answer_text()
    view.close()


def test_a_turns_branch_menu_shows_every_branch_at_the_turn_side_by_side(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    root, _branches = _seed(SessionStore(tmp_path / "root"), extra=1)
    app = make_app()
    app.window.open_tab(root)
    qtbot.waitUntil(lambda: len(app.turns(root)) == 2, timeout=WAIT_MS)
    first = app.turns(root)[0]
    qtbot.waitUntil(first.branches_button.isVisible, timeout=WAIT_MS)
    compare_menu = next(
        a.menu() for a in first.branches_button.menu().actions() if a.text() == "Compare with…"
    )
    next(a for a in compare_menu.actions() if a.text() == "All side by side").trigger()
    transcript = app.tab(root).transcript
    qtbot.waitUntil(lambda: transcript.compare_view is not None, timeout=WAIT_MS)
    view = transcript.compare_view
    assert view is not None
    headers = view.column_titles()
    assert headers[0] == "Trip plans" and sorted(headers[1:]) == ["Paint blue", "Paint red"]
    assert [cell.number_label.text() for cell in view.row_views[0].cells] == ["Turn 2"] * 3
    view.close()


def test_the_sidebar_compares_two_picked_conversations(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    _root, (red, _blue) = _seed(SessionStore(tmp_path / "root"), extra=1)
    app = make_app()
    sidebar = app.window.sidebar
    menu = sidebar.context_menu(red)
    next(a for a in menu.actions() if a.text() == "Compare with…").trigger()
    picker = sidebar.pick_dialog
    assert picker is not None
    qtbot.waitUntil(picker.isVisible, timeout=WAIT_MS)
    titles = [picker.list.item(i).text() for i in range(picker.list.count())]
    picker.list.setCurrentRow(titles.index("Paint blue"))
    picker.accept()
    qtbot.waitUntil(lambda: sidebar.compare_view is not None, timeout=WAIT_MS)
    view = sidebar.compare_view
    assert view is not None
    assert view.column_titles() == ["Paint red", "Paint blue"]
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
