"""The first-start introduction: its text, the one-click sample family, and dismissal."""

from __future__ import annotations

from collections.abc import Callable

from helpers.gui import WAIT_MS, App, run
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from branchwise.core.i18n.language import set_language
from branchwise.core.store.manifest import Manifest
from branchwise.desktop.host.window_state import load_window_state


def _manifests(app: App) -> list[Manifest]:
    return [m for m in app.host.store.iter_manifests() if isinstance(m, Manifest)]


def _sample_done(app: App) -> bool:
    """Four conversations, each open in the app with every turn answered."""
    manifests = _manifests(app)
    if len(manifests) != 4 or not app.window.introduction.sample_button.isEnabled():
        return False
    for manifest in manifests:
        session = app.host.session(manifest.session_id)
        projection = session.projection if session is not None else None
        if projection is None or not projection.turns:
            return False
        if any(turn.end_reason != "completed" for turn in projection.turns):
            return False
    return True


def test_the_empty_window_introduces_branches(qtbot: QtBot, make_app: Callable[..., App]) -> None:
    app = make_app()
    intro = app.window.introduction
    assert intro.isVisible()
    assert intro.title_label.text() == "Conversations that branch"
    assert intro.body_label.text().startswith(
        "A branch is a new conversation that starts from any answer of another one"
    )
    assert intro.sample_button.text() == "Try a sample conversation"
    assert intro.sample_button.isEnabled()
    assert intro.dismiss_button.text() == "Dismiss"
    set_language("zh_Hans")
    assert intro.title_label.text() == "会分支的对话"
    assert intro.sample_button.text() == "试试示例对话"
    assert intro.body_label.text().startswith("分支是从另一段对话的任意一个回答开始的新对话")


def test_one_click_makes_a_sample_with_a_branch_an_edit_and_a_regeneration(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app()
    qtbot.mouseClick(app.window.introduction.sample_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: _sample_done(app), timeout=WAIT_MS * 2)
    manifests = _manifests(app)
    roots = [m for m in manifests if m.parent is None]
    assert len(roots) == 1
    root = roots[0]
    assert root.title == "Sample: a weekend in Kyoto"
    children = [m for m in manifests if m.parent is not None]
    assert all(m.parent is not None and m.parent.session_id == root.session_id for m in children)
    origins = sorted(
        m.parent.origin.kind if m.parent is not None and m.parent.origin else "branch"
        for m in children
    )
    assert origins == ["branch", "edit", "regenerate"]
    # Every turn was answered, and the sample is in front, with its branches in tabs.
    for manifest in manifests:
        projection = app.host.store.read(manifest.session_id).projection
        assert projection.turns and all(t.end_reason == "completed" for t in projection.turns)
    qtbot.waitUntil(lambda: app.window.tabs.count() == 4, timeout=WAIT_MS)
    front = app.window.current_tab()
    assert front is not None and front.session_id == root.session_id
    assert not app.window.introduction.isVisible()


def test_the_sample_follows_the_interface_language(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app()
    set_language("zh_Hans")
    qtbot.mouseClick(app.window.introduction.sample_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: _sample_done(app), timeout=WAIT_MS * 2)
    root = next(m for m in _manifests(app) if m.parent is None)
    assert root.title == "示例：京都的周末"
    projection = app.host.store.read(root.session_id).projection
    prompts = [m.content for m in projection.messages if m.role == "user"]
    assert prompts == ["我在京都有一个空闲的周末，该去看些什么？", "把它排成两天的行程。"]


def test_dismissing_is_remembered_after_a_restart(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    first = make_app()
    assert first.window.introduction.isVisible()
    qtbot.mouseClick(first.window.introduction.dismiss_button, Qt.MouseButton.LeftButton)
    assert not first.window.introduction.isVisible()
    assert first.window.empty_label.isVisible()
    run(qtbot, first.host.shutdown())
    first.window.close()
    state = load_window_state(first.root)
    assert state is not None and state.intro_dismissed
    again = make_app(root=first.root)
    again.window.restore_state(state)
    assert not again.window.introduction.isVisible()
    assert again.window.empty_label.isVisible()
