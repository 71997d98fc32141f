"""The Qt side follows the core's language: Qt's own strings, QLocale, widgets."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
import shiboken6
from PySide6.QtCore import QCoreApplication, QLocale
from PySide6.QtWidgets import QApplication, QDialogButtonBox, QLabel, QWidget
from pytestqt.qtbot import QtBot

from branchwise.core.i18n import language as i18n
from branchwise.core.i18n.language import _
from branchwise.core.i18n.reasons import BRANCH_ACTION
from branchwise.desktop.widgets.qt_i18n import LanguageBridge, load_qt_translator


class BranchLabel(QLabel):
    """A widget that renders its text from the catalog, like every real one."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.retranslate_ui()

    def retranslate_ui(self) -> None:
        self.calls += 1
        self.setText(_(BRANCH_ACTION))


class Plain:
    """Not a QObject: the bridge takes any object with ``retranslate_ui``."""

    def __init__(self) -> None:
        self.calls = 0

    def retranslate_ui(self) -> None:
        self.calls += 1


@pytest.fixture
def bridge(qapp: QApplication) -> Iterator[LanguageBridge]:
    original = QLocale()
    bridge = LanguageBridge()
    yield bridge
    i18n.set_language("en")
    bridge.close()
    QLocale.setDefault(original)


def test_qt_standard_strings_follow_the_language(bridge: LanguageBridge) -> None:
    def save() -> str:
        return QCoreApplication.translate("QPlatformTheme", "Save")

    assert save() == "Save" and bridge.qt_translator is None
    bridge.set_language("zh_Hans")
    assert save() == "保存"
    assert QLocale().name() == "zh_CN"
    bridge.set_language("zh-TW")
    assert save() == "儲存"
    assert QLocale().name() == "zh_TW"
    bridge.set_language("en")
    assert save() == "Save" and bridge.qt_translator is None


def test_standard_buttons_retranslate_live(bridge: LanguageBridge, qtbot: QtBot) -> None:
    box = QDialogButtonBox(QDialogButtonBox.StandardButton.Apply)
    qtbot.addWidget(box)
    apply = box.button(QDialogButtonBox.StandardButton.Apply)
    assert apply.text() == "Apply"
    i18n.set_language("zh_Hant")  # through the core: the bridge listens
    qtbot.waitUntil(lambda: apply.text() == "套用")
    i18n.set_language("zh_Hans")
    qtbot.waitUntil(lambda: apply.text() == "应用")


def test_registered_widgets_are_retranslated_and_the_signal_follows(
    bridge: LanguageBridge, qtbot: QtBot
) -> None:
    label = BranchLabel()
    qtbot.addWidget(label)
    bridge.register(label)
    bridge.register(label)  # registering twice retranslates once
    with qtbot.waitSignal(bridge.language_changed) as blocker:
        bridge.set_language("zh_Hans")
    assert blocker.args == ["zh_Hans"]
    assert label.text() == "在新对话中分支"
    assert label.calls == 2
    bridge.set_language("zh_Hant")
    assert label.text() == "在新對話中分支" and label.calls == 3


def test_dead_widgets_are_dropped_not_called(bridge: LanguageBridge, qtbot: QtBot) -> None:
    kept, collected, deleted = Plain(), Plain(), BranchLabel()
    for widget in (kept, collected, deleted):
        bridge.register(widget)
    assert len(bridge.registered()) == 3
    del collected
    gc.collect()
    deleted.deleteLater()
    qtbot.waitUntil(lambda: len(bridge.registered()) == 1)
    bridge.set_language("zh_Hans")  # would raise if the deleted label were called
    assert bridge.registered() == [kept]
    assert kept.calls == 1


def test_a_widget_does_not_stay_alive_because_it_is_registered(bridge: LanguageBridge) -> None:
    widget = QWidget()
    widget.retranslate_ui = lambda: None  # type: ignore[attr-defined]
    bridge.register(widget)  # type: ignore[arg-type]
    del widget
    gc.collect()
    assert bridge.registered() == []


def test_close_detaches_from_the_core(qapp: QApplication) -> None:
    bridge = LanguageBridge()
    plain = Plain()
    bridge.register(plain)
    bridge.close()
    try:
        i18n.set_language("zh_Hans")
        assert plain.calls == 0
        assert QCoreApplication.translate("QPlatformTheme", "Save") == "Save"
    finally:
        i18n.set_language("en")


def test_a_bridge_whose_qt_side_is_deleted_stops_listening(qapp: QApplication) -> None:
    parent = QWidget()
    bridge = LanguageBridge(parent)
    plain = Plain()
    bridge.register(plain)
    shiboken6.delete(parent)  # the C++ parent and its child bridge are gone now
    assert not shiboken6.isValid(bridge)
    try:
        i18n.set_language("zh_Hant")  # must not touch the deleted C++ object
        assert plain.calls == 0
    finally:
        i18n.set_language("en")


def test_qt_translators_exist_for_both_chinese_variants() -> None:
    assert load_qt_translator("en") is None
    for code in ("zh_Hans", "zh_Hant"):
        translator = load_qt_translator(code)
        assert translator is not None and not translator.isEmpty()
    assert load_qt_translator("zh_Hans", "/nonexistent") is None
