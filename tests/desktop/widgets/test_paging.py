"""Long conversations open with one page of turn widgets; scrolling up pages in more."""

from __future__ import annotations

from collections.abc import Callable

from helpers.gui import (
    BRANCH,
    WAIT_MS,
    App,
    seed_long_session,
    user_texts,
)
from helpers.sessions import log_file
from pytestqt.qtbot import QtBot

from branchwise.desktop.host.rows import PAGE_SIZE
from branchwise.desktop.host.session import PREVIEW_THRESHOLD_BYTES

TURNS = 2000


def test_a_long_session_opens_one_page_and_pages_up(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    app = make_app()
    sid = seed_long_session(app.host.store, TURNS)
    log_size = (log_file(app.host.store.session_dir(sid))).stat().st_size
    assert log_size > PREVIEW_THRESHOLD_BYTES  # the preview-then-full-read path
    tab = app.window.open_tab(sid)
    widgets = tab.transcript.turn_widgets()
    assert 0 < len(widgets) <= PAGE_SIZE
    assert user_texts(widgets)[-1] == f"Question number {TURNS}?"
    assert widgets[-1].number_label.text() == "Turn 2,000"
    # The rest of the page is built after the first paint, a few rows at a time.
    qtbot.waitUntil(lambda: len(tab.transcript.turn_widgets()) == PAGE_SIZE, timeout=WAIT_MS)
    qtbot.waitUntil(
        lambda: all(w.branch_button.toolTip() == BRANCH for w in tab.transcript.turn_widgets()),
        timeout=WAIT_MS,
    )
    first_shown = TURNS - PAGE_SIZE + 1
    assert user_texts(tab.transcript.turn_widgets())[0] == f"Question number {first_shown}?"
    assert tab.transcript.earlier_button.isVisible()

    bar = tab.transcript.verticalScrollBar()
    bar.setValue(bar.minimum())
    qtbot.waitUntil(lambda: len(tab.transcript.turn_widgets()) == 2 * PAGE_SIZE, timeout=WAIT_MS)
    earlier = tab.transcript.turn_widgets()
    assert user_texts(earlier)[0] == f"Question number {first_shown - PAGE_SIZE}?"
    # Paged-in history binds its actions by the same messageId mapping.
    assert all(w.branch_button.toolTip() == BRANCH for w in earlier)
    assert all(w.branch_button.isEnabled() for w in earlier)
    # The turn the user was reading stays in view instead of jumping to the top.
    qtbot.waitUntil(lambda: bar.value() > bar.minimum(), timeout=WAIT_MS)
