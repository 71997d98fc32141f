""" "Copy message": a message's own Markdown on the clipboard, from its context menu.

An assistant's answer is shown rendered, so selecting and copying it loses
its Markdown (code fences, emphasis, tables). The context menu of every
message offers "Copy message", which copies the text exactly as it was
written (the Markdown source; a user's prompt as typed), next to the usual
"Copy" of the selection and "Select all".
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QLabel, QMenu

from branchwise.core.i18n.language import _
from branchwise.desktop.widgets.markdown_view import MarkdownView


def copy_message(text: str) -> None:
    """Put a message's Markdown source on the clipboard."""
    QGuiApplication.clipboard().setText(text)


def message_menu(label: QLabel | MarkdownView, source: Callable[[], str]) -> QMenu:
    """The context menu of one message: Copy message, then Copy (selection) and Select all."""
    menu = QMenu(label)
    menu.setObjectName("messageMenu")
    copy = menu.addAction(_("Copy message"), lambda: copy_message(source()))
    copy.setToolTip(_("Copy the whole message as Markdown"))
    menu.addSeparator()
    selected = menu.addAction(_("Copy"), lambda: copy_message(label.selectedText()))
    selected.setEnabled(label.hasSelectedText())
    menu.addAction(_("Select all"), lambda: label.setSelection(0, len(label.text())))
    return menu


def install_copy_message(label: QLabel | MarkdownView, source: Callable[[], str]) -> None:
    """Give ``label`` the message context menu (``source`` gives the Markdown to copy)."""
    label.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)

    def show(pos: QPoint) -> None:
        menu = message_menu(label, source)
        menu.aboutToHide.connect(menu.deleteLater)
        menu.popup(label.mapToGlobal(pos))

    label.customContextMenuRequested.connect(show)
