"""Token and speed figures as the user reads them: each turn's footer and the status bar."""

from __future__ import annotations

from collections.abc import Callable

from helpers.fake_openai_server import FakeOpenAIServer
from helpers.gui import WAIT_MS, App, run
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from branchwise.core.i18n.language import set_language
from branchwise.core.providers.openai import OpenAIProvider
from branchwise.desktop.widgets.conversation_tab import ConversationTab
from branchwise.desktop.widgets.turn_widget import TurnWidget


def _say(qtbot: QtBot, tab: ConversationTab, text: str) -> TurnWidget:
    before = len(tab.transcript.turn_widgets())
    tab.composer.editor.setPlainText(text)
    qtbot.mouseClick(tab.composer.send_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(tab.transcript.turn_widgets()) == before + 1, timeout=WAIT_MS)
    widget = tab.transcript.turn_widgets()[-1]
    qtbot.waitUntil(lambda: widget.figures_label.isVisible(), timeout=WAIT_MS)
    return widget


def test_the_footer_and_status_bar_show_the_servers_figures(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    server = run(
        qtbot,
        FakeOpenAIServer(usage=(12, 345), kind="llamacpp", context_length=8192).start(),
    )
    try:
        app = make_app(provider=OpenAIProvider(server.base_url, "fake-model"))
        app.window.new_conversation()
        tab = app.window.current_tab()
        assert tab is not None
        widget = _say(qtbot, tab, "how fast?")
        footer = widget.figures_label.text()
        assert footer.startswith("Prompt 12 · answer 345 tokens")
        assert footer.endswith(" s to first token")
        assert widget.figures_label.toolTip() == "Token counts as the server reported them."
        label = app.window.usage_label
        # 357 of 8,192 tokens: the server states the context length at /props.
        qtbot.waitUntil(
            lambda: label.text() == "This conversation: 357 tokens · Context: 4% of 8,192",
            timeout=WAIT_MS,
        )
        assert label.isVisible()
        set_language("zh_Hans")
        assert label.text() == "本对话：357 个 token · 上下文：8,192 的 4%"
        assert widget.figures_label.text().startswith("提示 12 · 回答 345 个 token")
    finally:
        run(qtbot, server.stop())


def test_the_demos_figures_are_marked_estimated(qtbot: QtBot, make_app: Callable[..., App]) -> None:
    app = make_app()
    app.window.new_conversation()
    tab = app.window.current_tab()
    assert tab is not None
    widget = _say(qtbot, tab, "hello")
    figures = widget.row.figures
    assert figures is not None and figures.estimated
    assert widget.figures_label.text().startswith(
        f"Prompt ≈{figures.input_tokens} · answer ≈{figures.output_tokens:,} tokens"
    )
    assert "estimated" in widget.figures_label.toolTip()
    total = figures.input_tokens + figures.output_tokens
    # The demo states no context length: the total alone.
    assert app.window.usage_label.text() == f"This conversation: ≈{total:,} tokens"


def test_a_branch_counts_only_its_own_turns(qtbot: QtBot, make_app: Callable[..., App]) -> None:
    app = make_app()
    app.window.new_conversation()
    tab = app.window.current_tab()
    assert tab is not None
    first = _say(qtbot, tab, "first question")
    assert first.row.figures is not None
    parent_total = app.window.usage_label.text()
    qtbot.waitUntil(lambda: first.branch_button.isEnabled(), timeout=WAIT_MS)
    qtbot.mouseClick(first.branch_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: app.window.tabs.count() == 2, timeout=WAIT_MS)
    branch = app.window.current_tab()
    assert branch is not None and branch is not tab
    qtbot.waitUntil(lambda: bool(branch.transcript.turn_widgets()), timeout=WAIT_MS)
    inherited = branch.transcript.turn_widgets()[0]
    # The inherited answer shows its figures, and says they count in the parent.
    assert inherited.figures_label.text() == first.figures_label.text()
    assert "inherited" in inherited.figures_label.toolTip()
    qtbot.waitUntil(
        lambda: app.window.usage_label.text() == "This conversation: 0 tokens", timeout=WAIT_MS
    )
    own = _say(qtbot, branch, "a question of its own")
    assert own.row.figures is not None
    own_total = own.row.figures.input_tokens + own.row.figures.output_tokens
    qtbot.waitUntil(
        lambda: app.window.usage_label.text() == f"This conversation: ≈{own_total:,} tokens",
        timeout=WAIT_MS,
    )
    app.window.tabs.setCurrentWidget(tab)
    assert app.window.usage_label.text() == parent_total
