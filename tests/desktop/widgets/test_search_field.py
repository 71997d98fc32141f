"""Search across conversations (the field above the sidebar) and find in one (Ctrl+F)."""

from __future__ import annotations

from collections.abc import Callable

from helpers.forking import named_fork_at
from helpers.gui import WAIT_MS, App, seed_long_session, seed_session
from PySide6.QtCore import QPoint, Qt
from pytestqt.qtbot import QtBot

from branchwise.core.i18n.language import set_language
from branchwise.core.search.index import INDEX_NAME
from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.changes import Changes
from branchwise.desktop.widgets.search import ResultRow
from branchwise.desktop.widgets.turn_widget import TurnWidget

SEARCH = "Search all conversations"


def _type(qtbot: QtBot, app: App, text: str) -> None:
    field = app.window.search_panel.field
    field.clear()
    if text.isascii():
        qtbot.keyClicks(field, text)
    else:
        field.insert(text)  # as an input method commits it (QTest types ASCII only)


def _rows(app: App) -> list[ResultRow]:
    return app.window.search_panel.result_rows()


def _wait_for(qtbot: QtBot, app: App, found: Callable[[list[ResultRow]], bool]) -> list[ResultRow]:
    qtbot.waitUntil(lambda: found(_rows(app)), timeout=WAIT_MS)
    return _rows(app)


def _snippets(rows: list[ResultRow]) -> list[str]:
    return [row.snippet_label.text() for row in rows]


def _in_view(widget: TurnWidget) -> bool:
    transcript = widget.parentWidget().parentWidget().parentWidget()  # body, viewport, area
    viewport = transcript.viewport()  # type: ignore[union-attr]
    top = widget.mapTo(viewport, QPoint(0, 0)).y()
    return widget.isVisible() and top < viewport.height() and top + widget.height() > 0


def test_typing_shows_the_matching_conversation(
    qtbot: QtBot, make_app: Callable[..., App], store: SessionStore
) -> None:
    seed_session(store, ["How do tides work?"], title="Oceans")
    seed_session(store, ["Recipe for a lemon tart"], title="Baking")
    app = make_app()
    panel = app.window.search_panel
    assert panel.field.placeholderText() == SEARCH
    assert panel.field.accessibleName() == SEARCH
    assert "Ctrl+K" in panel.field.toolTip()
    _type(qtbot, app, "lemon")
    rows = _wait_for(qtbot, app, lambda rows: any(r.role_label.text() == "You" for r in rows))
    user = next(r for r in rows if r.role_label.text() == "You")
    assert user.title_label.text() == "Baking"
    assert "Recipe for a " in user.snippet_label.text()
    assert ">lemon</span> tart" in user.snippet_label.text()  # the match is highlighted
    assert not user.also_button.isVisible()
    assert user.accessibleName() == "Baking, You: Recipe for a lemon tart"
    assert all("tides" not in text for text in _snippets(rows))
    # The results replace the conversation tree while the field holds text.
    assert app.window.left_stack.currentWidget() is panel.results_view
    assert not app.window.sidebar.tree.isVisible()


def test_snippets_are_escaped(
    qtbot: QtBot, make_app: Callable[..., App], store: SessionStore
) -> None:
    seed_session(store, ["is <b>bold</b> & safe?"], title="Markup")
    app = make_app()
    _type(qtbot, app, "bold")
    rows = _wait_for(qtbot, app, lambda rows: any(r.role_label.text() == "You" for r in rows))
    text = next(r for r in rows if r.role_label.text() == "You").snippet_label.text()
    assert "&lt;b&gt;" in text and "&amp; safe" in text


def test_a_two_character_chinese_query_finds_a_chinese_message(
    qtbot: QtBot, make_app: Callable[..., App], store: SessionStore
) -> None:
    seed_session(store, ["今天天气怎么样？"], title="天气")
    seed_session(store, ["讲一个故事"], title="故事")
    app = make_app()
    _type(qtbot, app, "天气")
    rows = _wait_for(qtbot, app, lambda rows: any(r.role_label.text() == "You" for r in rows))
    assert {r.title_label.text() for r in rows} == {"天气"}
    user = next(r for r in rows if r.role_label.text() == "You")
    assert ">天气</span>怎么样" in user.snippet_label.text()


def test_an_inherited_message_is_shown_once_also_in_its_branch(
    qtbot: QtBot, make_app: Callable[..., App], store: SessionStore
) -> None:
    source = seed_session(store, ["What do capybaras eat?", "And where do they live?"])
    turn = store.read(source).projection.turns[0].turn_id
    child = named_fork_at(store, source, turn).child_session_id
    app = make_app()
    _type(qtbot, app, "capybaras")
    # Results refresh as the index catches up conversation by conversation: wait for
    # the one that has read both (under load the first refresh may know only one).
    rows = _wait_for(
        qtbot, app, lambda rows: any(r.role_label.text() == "You" and r.hit.also_in for r in rows)
    )
    users = [r for r in rows if r.role_label.text() == "You"]
    assert len(users) == 1
    also = users[0].also_button
    assert also.isVisibleTo(app.window) and also.text() == "also in 1 branch"
    assert also.accessibleName() == "also in 1 branch"
    assert also.toolTip() == "Other conversations that contain this message"
    # credited to the conversation that wrote it; the branch that inherited it is listed
    assert users[0].hit.session_id == source
    assert users[0].title_label.text() == "What do capybaras eat?"
    actions = also.menu().actions()
    assert [a.text() for a in actions] == ["What do capybaras eat? (branch 1) · From turn 1"]
    actions[0].trigger()
    assert app.window.current_tab() is app.window.tab_for(child)
    # the branch's label is rendered in the language shown
    set_language("zh_Hant")
    users[0].retranslate_ui()
    assert [a.text() for a in also.menu().actions()] == [
        "What do capybaras eat?（分支 1） · 從第 1 輪"
    ]
    set_language("en")


def test_opening_a_hit_scrolls_to_its_turn_and_flashes_it(
    qtbot: QtBot, make_app: Callable[..., App], store: SessionStore
) -> None:
    sid = seed_long_session(store, 120, questions={3: "Where do narwhals swim?"})
    app = make_app()
    _type(qtbot, app, "narwhals")
    rows = _wait_for(qtbot, app, lambda rows: any(r.role_label.text() == "You" for r in rows))
    row = next(r for r in rows if r.role_label.text() == "You")
    assert row.toolTip() == "Open this conversation at the message"
    qtbot.mouseClick(row, Qt.MouseButton.LeftButton)
    tab = app.tab(sid)
    assert app.window.current_tab() is tab
    # Turn 3 is far above the last page: it is built, scrolled into view and flashed.
    widget = next(w for w in tab.transcript.turn_widgets() if w.row.index == 3)
    assert widget.flashed
    qtbot.waitUntil(lambda: _in_view(widget), timeout=WAIT_MS)
    assert ("user", "Where do narwhals swim?") in widget.shown_messages()
    qtbot.waitUntil(lambda: not widget.flashed, timeout=WAIT_MS)  # the flash is brief


def test_escape_clears_the_search_and_the_tree_is_back(
    qtbot: QtBot, make_app: Callable[..., App], store: SessionStore
) -> None:
    seed_session(store, ["Name a prime number"], title="Primes")
    app = make_app()
    _type(qtbot, app, "prime")
    _wait_for(qtbot, app, bool)
    assert not app.window.sidebar.tree.isVisible()
    qtbot.keyClick(app.window.search_panel.field, Qt.Key.Key_Escape)
    assert app.window.search_panel.field.text() == ""
    assert app.window.sidebar.tree.isVisible()
    assert app.window.sidebar.tree.topLevelItemCount() == 1
    assert _rows(app) == []


def test_ctrl_k_focuses_the_search_field(qtbot: QtBot, make_app: Callable[..., App]) -> None:
    app = make_app()
    app.window.activateWindow()
    qtbot.waitUntil(app.window.isActiveWindow, timeout=WAIT_MS)
    qtbot.keyClick(app.window, Qt.Key.Key_K, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(app.window.search_panel.field.hasFocus, timeout=WAIT_MS)


def test_ctrl_f_finds_in_the_open_conversation(
    qtbot: QtBot, make_app: Callable[..., App], store: SessionStore
) -> None:
    sid = seed_session(store, ["A walrus question", "Walrus tusks?", "Something else"])
    other = seed_session(store, ["walrus elsewhere"])
    app = make_app()
    app.window.open_tab(other)
    tab = app.window.open_tab(sid)
    app.window.activateWindow()
    qtbot.waitUntil(app.window.isActiveWindow, timeout=WAIT_MS)
    assert not tab.find_bar.isVisible()
    qtbot.keyClick(app.window, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(tab.find_bar.isVisible, timeout=WAIT_MS)
    bar = tab.find_bar
    assert bar.field.hasFocus()
    assert bar.field.accessibleName() == "Find in this conversation"
    assert bar.next_button.toolTip() == "Next match"
    qtbot.keyClicks(bar.field, "walrus")
    # Two questions (and the demo answers that quote them); never the other conversation.
    count = len(bar.matches)
    assert count >= 2
    assert bar.count_label.text() == f"{count} of {count}"
    assert bar.next_button.isEnabled()
    qtbot.keyClick(bar.field, Qt.Key.Key_Return)
    assert bar.count_label.text() == f"1 of {count}"
    assert app.turns(sid)[0].flashed  # the first match's turn
    qtbot.keyClick(bar.field, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    assert bar.count_label.text() == f"{count} of {count}"
    qtbot.keyClicks(bar.field, "zzz")
    assert bar.count_label.text() == "No matches"
    assert not bar.next_button.isEnabled()
    qtbot.keyClick(bar.field, Qt.Key.Key_Escape)
    assert not bar.isVisible()


def test_a_garbage_index_at_start_is_rebuilt(
    qtbot: QtBot, make_app: Callable[..., App], store: SessionStore
) -> None:
    seed_session(store, ["Tell me about axolotls"], title="Amphibians")
    (store.root / INDEX_NAME).write_bytes(b"this is not an SQLite database" * 100)
    app = make_app()
    _type(qtbot, app, "axolotls")
    rows = _wait_for(qtbot, app, lambda rows: any(r.role_label.text() == "You" for r in rows))
    assert any(">axolotls</span>" in snippet for snippet in _snippets(rows))
    assert [n.code for n in app.host.notices.history] == []  # a cache rebuilt, nothing to say


def test_indexing_progress_is_shown_under_the_field(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app()
    panel = app.window.search_panel
    app.host.search_progress = (120, 500)
    app.host.emit(Changes(search=True))
    assert panel.status_label.isVisible()
    assert panel.status_label.text() == "Indexing 120 of 500…"
    assert panel.field.accessibleDescription() == "Indexing 120 of 500…"
    app.host.search_progress = None
    app.host.emit(Changes(search=True))
    assert not panel.status_label.isVisible()


def test_a_live_language_switch_retranslates_search_and_find(
    qtbot: QtBot, make_app: Callable[..., App], store: SessionStore
) -> None:
    sid = seed_session(store, ["One walrus"], title="Walruses")
    app = make_app()
    tab = app.window.open_tab(sid)
    _type(qtbot, app, "walrus")
    rows = _wait_for(qtbot, app, lambda rows: any(r.role_label.text() == "You" for r in rows))
    tab.open_find()
    qtbot.keyClicks(tab.find_bar.field, "walrus")
    set_language("zh_Hant")
    panel = app.window.search_panel
    assert panel.field.placeholderText() == "搜尋所有對話"
    assert panel.field.accessibleName() == "搜尋所有對話"
    assert next(r for r in rows if r.hit.role == "user").role_label.text() == "你"
    assert tab.find_bar.field.placeholderText() == "在此對話中尋找"
    assert tab.find_bar.next_button.toolTip() == "下一個相符項目"
    assert tab.find_bar.count_label.text().startswith("第 ")
    assert app.window.find_action.text() == "在對話中尋找"
