"""Send to several from the window: the choice, the live grid, Stop, Retry, Continue and Fuse.

The real window and host answer with the demo responder (each model name
answers differently); a model that fails is an OpenAI-compatible provider
pointed at a closed port on 127.0.0.1. The tests read what the user sees:
the dialog's summary and Send button, the columns' headers, figures and
states, the tab that opens, and the fused card in the conversation.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from helpers.gui import WAIT_MS, App, open_served, seed_session
from helpers.serve import serve_process
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialogButtonBox
from pytestqt.qtbot import QtBot

from branchwise.core.conversation.fanout import default_fuse_instruction
from branchwise.core.i18n.language import _, set_language
from branchwise.core.i18n.reasons import reason_text
from branchwise.core.providers.base import Provider
from branchwise.core.providers.demo import DemoProvider
from branchwise.core.providers.openai import OpenAIProvider
from branchwise.core.settings import Settings
from branchwise.core.store.store import SessionStore
from branchwise.desktop.widgets.fanout_grid import FanoutGrid, SendToSeveralDialog

FIGURES = re.compile(r"^[\d,]+ tokens · [\d.,]+ tokens/s · first token [\d.,]+ s$")


def _open(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path, **kwargs: object
) -> tuple[App, str]:
    root = seed_session(SessionStore(tmp_path / "root"), ["Where to go in Kyoto?"], "Trip")
    app = make_app(**kwargs)
    app.window.open_tab(root)
    return app, root


def _dialog(
    qtbot: QtBot, app: App, root: str, text: str = "Kyoto or Osaka?"
) -> SendToSeveralDialog:
    tab = app.tab(root)
    tab.composer.editor.setPlainText(text)
    assert tab.composer.several_button.isEnabled()
    assert tab.composer.several_button.text() == "Send to several…"
    tab.composer.several_button.click()
    dialog = app.window.send_several_dialog
    assert dialog is not None and dialog.isVisible()
    return dialog


def _send(qtbot: QtBot, app: App, root: str, models: list[str]) -> FanoutGrid:
    dialog = _dialog(qtbot, app, root)
    dialog.samples.setValue(1)
    dialog.set_checked(models)
    dialog.send_button.click()
    grid = app.window.fanout_grid
    assert grid is not None
    qtbot.waitUntil(lambda: len(grid.columns) == len(models), timeout=WAIT_MS)
    return grid


def _all_ended(grid: FanoutGrid) -> bool:
    return bool(grid.columns) and all(c.ended for c in grid.columns.values())


def test_the_dialog_offers_the_default_model_and_refuses_0_or_9_answers(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    app, root = _open(qtbot, make_app, tmp_path)
    dialog = _dialog(qtbot, app, root)
    assert dialog.checked_models() == ["demo"]
    assert dialog.samples.value() == 2
    assert dialog.summary.text() == "2 answers, each its own branch."
    assert dialog.send_button.isEnabled()
    refused = reason_text("invalid_fanout")
    dialog.set_checked([])
    dialog.samples.setValue(1)
    assert dialog.summary.text() == refused  # zero targets
    assert not dialog.send_button.isEnabled()
    dialog.set_checked(["a", "b", "c"])
    dialog.samples.setValue(3)
    assert dialog.summary.text() == refused  # nine
    assert not dialog.send_button.isEnabled()
    dialog.samples.setValue(2)
    assert dialog.summary.text() == "6 answers, each its own branch."
    dialog.new_model.setText("qwen2.5")
    dialog.add_button.click()
    assert dialog.checked_models() == ["a", "b", "c", "qwen2.5"]
    assert dialog.summary.text() == "8 answers, each its own branch."
    dialog.reject()
    # The composer kept the message: nothing was sent.
    assert app.tab(root).composer.editor.toPlainText() == "Kyoto or Osaka?"


def test_the_shortcut_opens_the_dialog_and_is_listed(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    app, root = _open(qtbot, make_app, tmp_path)
    editor = app.tab(root).composer.editor
    editor.setPlainText("Which?")
    app.window.activateWindow()
    qtbot.waitUntil(app.window.isActiveWindow, timeout=WAIT_MS)
    editor.setFocus()
    qtbot.keyClick(
        editor,
        Qt.Key.Key_Return,
        Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier,
    )
    qtbot.waitUntil(lambda: app.window.send_several_dialog is not None, timeout=WAIT_MS)
    assert editor.toPlainText() == "Which?"
    shortcuts = app.window.show_shortcuts()
    assert ("Send to several", "Ctrl+Shift+Return") in shortcuts.rows()
    shortcuts.close()


def test_the_grid_streams_each_model_in_its_column_with_its_figures(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    app, root = _open(qtbot, make_app, tmp_path, delay=0.001)
    grid = _send(qtbot, app, root, ["alpha", "beta", "gamma"])
    assert app.tab(root).composer.editor.toPlainText() == ""
    qtbot.waitUntil(lambda: _all_ended(grid), timeout=WAIT_MS)
    grid.flush()
    assert grid.column_labels() == ["alpha", "beta", "gamma"]
    assert grid.heading.text() == "Asked: Kyoto or Osaka?"
    for column in grid.columns.values():
        assert FIGURES.match(column.figures.text()), column.figures.text()
        assert column.state.text() == "Done."
        assert column.progress.model in column.answer.text()  # the demo answered as that model
        assert "**" not in column.answer.text()  # rendered, not raw Markdown
        assert column.continue_button.isEnabled()
        assert not column.stop_button.isVisible()
    assert not grid.stop_all_button.isEnabled()
    assert grid.fuse_button.isEnabled()
    # Each answer is a labelled branch under the conversation, in the sidebar.
    for session_id in grid.columns:
        manifest = app.host.index.by_id[session_id]
        assert manifest.parent is not None and manifest.parent.session_id == root
    assert sorted(app.host.label_at(app.tab(root).ref.sibling(s)) or "" for s in grid.columns) == [
        "alpha",
        "beta",
        "gamma",
    ]


def test_stop_one_column_and_the_others_go_on(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    app, root = _open(qtbot, make_app, tmp_path, delay=0.03)
    grid = _send(qtbot, app, root, ["alpha", "beta"])
    first, second = grid.columns.values()
    qtbot.waitUntil(lambda: first.progress.chunks > 0, timeout=WAIT_MS)
    grid.flush()
    assert first.stop_button.isVisible() and first.stop_button.text() == "Stop"
    assert grid.stop_all_button.isEnabled()
    first.stop_button.click()
    qtbot.waitUntil(lambda: _all_ended(grid), timeout=WAIT_MS)
    grid.flush()
    assert first.state.text() == "Stopped."
    assert second.state.text() == "Done."


def test_a_failing_model_ends_its_own_column_with_its_reason_and_retry_answers(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    healed: list[bool] = []

    def provider_for(settings: Settings) -> Provider:
        if settings.model == "broken" and not healed:
            return OpenAIProvider("http://127.0.0.1:9/v1", "broken", connect_timeout=2.0)
        return DemoProvider()

    app, root = _open(qtbot, make_app, tmp_path, provider_factory=provider_for)
    grid = _send(qtbot, app, root, ["alpha", "broken"])
    qtbot.waitUntil(lambda: _all_ended(grid), timeout=WAIT_MS)
    grid.flush()
    good, broken = grid.columns.values()
    assert good.state.text() == "Done."
    assert broken.state.text() == "Failed: " + reason_text("provider_unreachable")
    assert broken.retry_button.isVisible() and not good.retry_button.isVisible()
    assert not broken.chosen.isEnabled()  # a failed answer is not fused
    healed.append(True)
    broken.retry_button.click()
    qtbot.waitUntil(lambda: broken.progress.end_reason == "completed", timeout=WAIT_MS)
    grid.flush()
    assert broken.state.text() == "Done."
    assert "Kyoto or Osaka?" in broken.answer.text()  # answered again, in its column
    assert FIGURES.match(broken.figures.text()), broken.figures.text()


def test_continue_opens_that_branch_in_a_tab(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    app, root = _open(qtbot, make_app, tmp_path)
    grid = _send(qtbot, app, root, ["alpha", "beta", "gamma"])
    qtbot.waitUntil(lambda: _all_ended(grid), timeout=WAIT_MS)
    grid.flush()
    beta = list(grid.columns.values())[1]
    beta.continue_button.click()
    tab = app.window.current_tab()
    assert tab is not None and tab.session_id == beta.session_id
    assert app.host.label_at(tab.ref) == "beta"
    assert tab.turn_widgets()[-1].row.prompt == "Kyoto or Osaka?"


def test_fuse_writes_a_card_into_the_conversation_that_opens_each_source(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    app, root = _open(qtbot, make_app, tmp_path)
    grid = _send(qtbot, app, root, ["alpha", "beta", "gamma"])
    qtbot.waitUntil(lambda: _all_ended(grid), timeout=WAIT_MS)
    grid.flush()
    alpha, beta, gamma = grid.columns.values()
    beta.chosen.setChecked(False)
    dialog = grid.ask_fuse()
    assert dialog is not None
    assert dialog.instruction() == default_fuse_instruction()
    assert dialog.model_name() == "alpha"
    dialog.instruction_edit.setPlainText("Keep it short.")
    dialog.buttons.button(QDialogButtonBox.StandardButton.Ok).click()
    qtbot.waitUntil(lambda: grid.fused is not None, timeout=WAIT_MS)
    assert grid.status.text() == "Fused into the conversation."
    assert not grid.fuse_button.isEnabled()
    tab = app.window.current_tab()
    assert tab is not None and tab.session_id == root
    (merge,) = SessionStore(app.root).read(root).projection.merges
    assert merge["kind"] == "fused" and merge["instruction"] == "Keep it short."
    assert [s["sessionId"] for s in merge["sources"]] == [alpha.session_id, gamma.session_id]

    def card_shown() -> bool:
        return any(w.fused_buttons for w in tab.turn_widgets())

    qtbot.waitUntil(card_shown, timeout=WAIT_MS)
    card = next(w for w in tab.turn_widgets() if w.fused_buttons)
    shown = dict(card.shown_messages())
    assert shown["merge"].startswith("Fused from 2 answers: alpha · gamma")
    assert [b.text() for b in card.fused_buttons] == ["Open alpha", "Open gamma"]
    assert not card.open_source_button.isVisible()
    card.fused_buttons[1].click()
    qtbot.waitUntil(
        lambda: (t := app.window.current_tab()) is not None and t.session_id == gamma.session_id,
        timeout=WAIT_MS,
    )


def test_the_grid_and_the_dialog_speak_simplified_chinese(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    app, root = _open(qtbot, make_app, tmp_path)
    grid = _send(qtbot, app, root, ["alpha", "beta"])
    qtbot.waitUntil(lambda: _all_ended(grid), timeout=WAIT_MS)
    set_language("zh_Hans")
    column = next(iter(grid.columns.values()))
    assert grid.stop_all_button.text() == _("Stop all") != "Stop all"
    assert grid.fuse_button.text() == _("Fuse…") != "Fuse…"
    assert column.continue_button.text() == _("Continue with this one") != "Continue with this one"
    assert column.state.text() == _("Done.") != "Done."
    assert "tokens" not in column.figures.text()
    composer = app.tab(root).composer
    assert composer.several_button.text() == _("Send to several…") != "Send to several…"
    app.tab(root).composer.editor.setPlainText("哪个？")
    composer.several_button.click()
    dialog = app.window.send_several_dialog
    assert dialog is not None
    assert dialog.windowTitle() == _("Send to several") != "Send to several"
    assert "2" in dialog.summary.text() and "answers" not in dialog.summary.text()


def test_a_servers_conversation_fans_out_and_fuses_on_that_server(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    served_root = tmp_path / "served"
    served = SessionStore(served_root)
    sid = seed_session(served, ["Where to go in Kyoto?"], title="Plans")
    app = make_app()
    with serve_process(served_root) as process:
        tab = open_served(qtbot, app, process.url, process.token, sid)
        assert tab.ref.remote
        tab.composer.editor.setPlainText("Kyoto or Osaka?")
        tab.composer.several_button.click()
        dialog = app.window.send_several_dialog
        assert dialog is not None
        dialog.samples.setValue(1)
        dialog.set_checked(["alpha", "beta"])
        dialog.send_button.click()
        grid = app.window.fanout_grid
        assert grid is not None
        qtbot.waitUntil(lambda: len(grid.columns) == 2 and _all_ended(grid), timeout=WAIT_MS)
        grid.flush()
        assert grid.column_labels() == ["alpha", "beta"]
        for column in grid.columns.values():
            assert column.state.text() == "Done."
            assert FIGURES.match(column.figures.text()), column.figures.text()
            branch = served.read(column.session_id).projection
            assert branch.messages[-1].content.startswith(column.text[:20])
        grid.fuse_now(list(grid.columns), "alpha", "Keep it short.")
        qtbot.waitUntil(lambda: grid.fused is not None, timeout=WAIT_MS)
        (merge,) = served.read(sid).projection.merges
        assert merge["kind"] == "fused"
        assert [s["sessionId"] for s in merge["sources"]] == list(grid.columns)


def test_enter_adds_a_typed_model_and_never_stops_the_grid(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    app, root = _open(qtbot, make_app, tmp_path, delay=0.02)
    dialog = _dialog(qtbot, app, root)
    dialog.samples.setValue(1)
    dialog.new_model.setFocus()
    for name in ("llama3.2", "qwen2.5"):
        qtbot.keyClicks(dialog.new_model, name)
        qtbot.keyClick(dialog.new_model, Qt.Key.Key_Return)
    # Enter added each model and kept the dialog open: nothing was sent yet.
    assert dialog.isVisible() and app.window.fanout_grid is None
    assert dialog.checked_models() == ["demo", "llama3.2", "qwen2.5"]
    assert dialog.summary.text() == "3 answers, each its own branch."
    dialog.send_button.click()
    grid = app.window.fanout_grid
    assert grid is not None
    qtbot.waitUntil(lambda: len(grid.columns) == 3, timeout=WAIT_MS)
    qtbot.waitUntil(
        lambda: any(c.progress.state == "streaming" for c in grid.columns.values()),
        timeout=WAIT_MS,
    )
    for widget in (grid, grid.stop_all_button, *(c.stop_button for c in grid.columns.values())):
        qtbot.keyClick(widget, Qt.Key.Key_Return)  # a stray Enter, wherever the focus is
    qtbot.waitUntil(lambda: _all_ended(grid), timeout=WAIT_MS)
    grid.flush()
    assert [c.state.text() for c in grid.columns.values()] == ["Done."] * 3
