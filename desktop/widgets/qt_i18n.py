"""The Qt side of the language layer: Qt's own strings and live retranslation.

:mod:`branchwise.core.i18n` owns the active language; this module follows it.
On every change the :class:`LanguageBridge` reinstalls Qt's ``qtbase``
translator (so standard buttons and dialogs speak the same language as ours),
sets the default ``QLocale``, calls ``retranslate_ui()`` on every registered
widget that is still alive, and emits ``language_changed``.

Widgets are held weakly: registering never keeps a closed tab alive, and a
widget whose C++ side is already deleted is dropped, not called.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Protocol

import shiboken6
from PySide6.QtCore import QCoreApplication, QLibraryInfo, QLocale, QObject, QTranslator, Signal

from branchwise.core.i18n import language as i18n
from branchwise.core.i18n.locales import DEFAULT_LANGUAGE

QT_LOCALE_NAMES: Mapping[str, str] = {"en": "en_US", "zh_Hans": "zh_CN", "zh_Hant": "zh_TW"}
"""The Qt locale (and ``qtbase_<name>.qm`` suffix) of each of our languages."""


class Retranslatable(Protocol):
    """A widget that re-reads every visible string from :func:`branchwise.core.i18n.language._`."""

    def retranslate_ui(self) -> None:
        """Set every text, tooltip and accessible name again."""
        ...


def qt_translations_dir() -> str:
    """Where this Qt build keeps its ``.qm`` files (PySide6's ``Qt/translations``)."""
    return QLibraryInfo.path(QLibraryInfo.LibraryPath.TranslationsPath)


def load_qt_translator(code: str, directory: str | None = None) -> QTranslator | None:
    """Qt's ``qtbase`` translator for ``code``, or ``None``.

    ``None`` for English (Qt's own source language) and when the ``.qm`` file
    is missing (a trimmed bundle): Qt then shows English, which beats failing.
    """
    if code == DEFAULT_LANGUAGE:
        return None
    translator = QTranslator()
    locale = QLocale(QT_LOCALE_NAMES[code])
    if not translator.load(locale, "qtbase", "_", directory or qt_translations_dir()):
        return None
    return translator


def _alive(widget: object) -> bool:
    if widget is None:
        return False
    return not isinstance(widget, QObject) or shiboken6.isValid(widget)


class LanguageBridge(QObject):
    """Carries language changes from the core to Qt.

    Create one after the ``QApplication`` and keep it for the app's life; it
    applies the current language at once. Switch with :meth:`set_language` (or
    :func:`branchwise.core.i18n.language.set_language` anywhere: the bridge listens).

    Signals:
        language_changed(str): the new language code, after Qt's translator
            was swapped and every registered widget was retranslated.
    """

    language_changed = Signal(str)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._widgets: list[weakref.ref[Retranslatable]] = []
        self._translator: QTranslator | None = None
        i18n.add_language_listener(self._on_language_changed)
        self._apply_qt(i18n.current_language())

    @property
    def language(self) -> str:
        """The active language code."""
        return i18n.current_language()

    @property
    def qt_translator(self) -> QTranslator | None:
        """Qt's installed ``qtbase`` translator (``None`` in English)."""
        return self._translator

    def set_language(self, value: str | None) -> str:
        """Switch the whole app; returns the resolved code (see :func:`i18n.set_language`)."""
        return i18n.set_language(value)

    def register(self, widget: Retranslatable) -> None:
        """Call ``widget.retranslate_ui()`` on every language change while it lives."""
        if not any(ref() is widget for ref in self._widgets):
            self._widgets.append(weakref.ref(widget))

    def registered(self) -> list[Retranslatable]:
        """The registered widgets still alive (dead ones are forgotten here too)."""
        self._widgets = [ref for ref in self._widgets if _alive(ref())]
        return [w for w in (ref() for ref in self._widgets) if w is not None]

    def close(self) -> None:
        """Stop following the core and remove Qt's translator."""
        i18n.remove_language_listener(self._on_language_changed)
        self._remove_translator()
        self._widgets.clear()

    def _remove_translator(self) -> None:
        app = QCoreApplication.instance()
        if self._translator is not None and app is not None:
            app.removeTranslator(self._translator)
        self._translator = None

    def _apply_qt(self, code: str) -> None:
        self._remove_translator()
        translator = load_qt_translator(code)
        app = QCoreApplication.instance()
        if translator is not None and app is not None:
            app.installTranslator(translator)  # Qt sends LanguageChange to every widget
            self._translator = translator
        QLocale.setDefault(QLocale(QT_LOCALE_NAMES[code]))

    def _on_language_changed(self, code: str) -> None:
        if not shiboken6.isValid(self):  # the C++ bridge is gone; forget it
            i18n.remove_language_listener(self._on_language_changed)
            return
        self._apply_qt(code)
        for widget in self.registered():
            widget.retranslate_ui()
        self.language_changed.emit(code)
