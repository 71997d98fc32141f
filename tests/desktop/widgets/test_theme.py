"""Light, dark and "same as the system", as seen: the palette, notices, code, and the setting."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest
from helpers.gui import WAIT_MS, App
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QColor, QGuiApplication, QImage
from PySide6.QtWidgets import QApplication, QLabel
from pytestqt.qtbot import QtBot

from branchwise.core.settings import SETTINGS_FILE, Settings, load_settings, save_settings
from branchwise.desktop.host.notices import Level
from branchwise.desktop.host.rows import Entry
from branchwise.desktop.widgets.markdown_view import CodeBlockView
from branchwise.desktop.widgets.notice_area import NoticeRow
from branchwise.desktop.widgets.settings_dialog import SettingsDialog
from branchwise.desktop.widgets.theme import theme_for
from branchwise.desktop.widgets.turn_widget import MessageLabel


def _window_lightness() -> int:
    return QGuiApplication.palette().window().color().lightness()


@pytest.fixture
def system_scheme(qapp: QApplication) -> Iterator[Callable[[Qt.ColorScheme], None]]:
    """Emit the system's colour-scheme signal as a desktop would; back to "unknown" after."""
    hints = qapp.styleHints()
    yield hints.colorSchemeChanged.emit
    hints.colorSchemeChanged.emit(Qt.ColorScheme.Unknown)
    theme_for(qapp).choose("system")


def _contrast(widget: QLabel, row: NoticeRow) -> int:
    """Largest lightness difference between the row's background and its text's pixels."""
    image: QImage = row.grab().toImage()
    background = QColor(image.pixel(row.width() - 2, row.height() - 2)).lightness()
    top_left = widget.mapTo(row, QPoint(0, 0))
    best = 0
    for x in range(top_left.x(), top_left.x() + min(widget.width(), 200)):
        for y in range(top_left.y(), top_left.y() + widget.height()):
            best = max(best, abs(QColor(image.pixel(x, y)).lightness() - background))
    return best


def test_choosing_dark_in_settings_switches_at_once_and_is_saved(
    qtbot: QtBot, make_app: Callable[..., App], system_scheme: Callable[[Qt.ColorScheme], None]
) -> None:
    app = make_app()
    assert _window_lightness() > 128
    dialog = app.window.show_settings()
    assert isinstance(dialog, SettingsDialog)
    names = [dialog.theme.itemText(i) for i in range(dialog.theme.count())]
    assert names == ["Same as the system", "Light", "Dark"]
    dialog.theme.setCurrentIndex(dialog.theme.findText("Dark"))
    dialog.save()
    qtbot.waitUntil(lambda: _window_lightness() < 128, timeout=WAIT_MS)
    assert load_settings(app.root)[0].theme == "dark"
    assert orjson.loads((app.root / SETTINGS_FILE).read_bytes())["theme"] == "dark"
    # A fixed choice ignores the system's scheme.
    system_scheme(Qt.ColorScheme.Light)
    assert _window_lightness() < 128


def test_the_saved_theme_is_used_at_start(
    tmp_path: Path, make_app: Callable[..., App], system_scheme: Callable[[Qt.ColorScheme], None]
) -> None:
    root = tmp_path / "saved"
    save_settings(root, Settings(theme="dark"))
    make_app(root=root)
    assert _window_lightness() < 128


def test_same_as_the_system_follows_the_system_scheme_live(
    qtbot: QtBot, make_app: Callable[..., App], system_scheme: Callable[[Qt.ColorScheme], None]
) -> None:
    app = make_app()
    assert app.host.settings.theme == "system"
    system_scheme(Qt.ColorScheme.Dark)
    qtbot.waitUntil(lambda: _window_lightness() < 128, timeout=WAIT_MS)
    system_scheme(Qt.ColorScheme.Light)
    qtbot.waitUntil(lambda: _window_lightness() > 128, timeout=WAIT_MS)


@pytest.mark.parametrize("scheme", [Qt.ColorScheme.Light, Qt.ColorScheme.Dark])
def test_notices_are_readable_in_both_themes(
    qtbot: QtBot,
    make_app: Callable[..., App],
    system_scheme: Callable[[Qt.ColorScheme], None],
    scheme: Qt.ColorScheme,
) -> None:
    app = make_app()
    app.window.resize(900, 600)
    app.window.show()
    system_scheme(scheme)
    for level in (Level.SUCCESS, Level.ERROR, Level.WARNING):
        app.host.notices.post("trash_emptied", level)
    area = app.window.notice_area
    qtbot.waitUntil(lambda: len(area.rows()) == 3, timeout=WAIT_MS)
    for row in area.rows():
        assert row.text == "The Trash was emptied."
        assert _contrast(row.message_label, row) > 100, row.notice.level


def test_code_is_coloured_for_the_theme(
    qtbot: QtBot, make_app: Callable[..., App], system_scheme: Callable[[Qt.ColorScheme], None]
) -> None:
    make_app()
    message = MessageLabel(Entry("m", "assistant", "```python\ndef f():\n    pass\n```"))
    qtbot.addWidget(message)
    (block,) = message.findChildren(CodeBlockView)
    light = block.body.text()
    system_scheme(Qt.ColorScheme.Dark)
    qtbot.waitUntil(lambda: message.findChildren(CodeBlockView)[0].body.text() != light)
    (block,) = message.findChildren(CodeBlockView)
    assert "#FF7B72" in block.body.text()  # github-dark's keyword colour
    assert block.language_label.text() == "python"
