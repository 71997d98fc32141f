"""The Trash view: deleted conversations, with Restore, Delete forever and Empty Trash.

A window-modal dialog listing what :class:`~branchwise.desktop.host.trashing.Trashing`
holds, most recently deleted first. Restoring puts a conversation back into
the sidebar; deleting one for good, or emptying the Trash, asks first (it
cannot be undone). Outcomes and refusals go to the notice area like every
other operation.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from branchwise.core.i18n.language import _, format_datetime
from branchwise.core.i18n.reasons import fill
from branchwise.desktop.host.trashing import Trashing
from branchwise.desktop.widgets.turn_widget import untitled

SESSION_ROLE = Qt.ItemDataRole.UserRole

Spawn = Callable[[Coroutine[Any, Any, Any], str], object]


class TrashDialog(QDialog):
    """The list of trashed conversations and what can be done with them.

    Args:
        trashing: the desktop's Trash operations.
        spawn: runs a coroutine on the app's loop (the host's ``spawn``).
    """

    def __init__(self, trashing: Trashing, spawn: Spawn, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("trashDialog")
        self.trashing = trashing
        self._spawn = spawn
        self.confirmation: QMessageBox | None = None
        self.list = QListWidget(self)
        self.list.setObjectName("trashList")
        self.list.currentItemChanged.connect(lambda *_a: self._render_buttons())
        self.empty_label = QLabel(self)
        self.empty_label.setObjectName("trashEmpty")
        self.restore_button = QPushButton(self)
        self.restore_button.setObjectName("restoreButton")
        self.restore_button.clicked.connect(self.restore_selected)
        self.purge_button = QPushButton(self)
        self.purge_button.setObjectName("purgeButton")
        self.purge_button.clicked.connect(self.purge_selected)
        self.empty_button = QPushButton(self)
        self.empty_button.setObjectName("emptyTrashButton")
        self.empty_button.clicked.connect(self.ask_empty)
        close = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        close.rejected.connect(self.reject)
        buttons = QHBoxLayout()
        buttons.addWidget(self.restore_button)
        buttons.addWidget(self.purge_button)
        buttons.addStretch(1)
        buttons.addWidget(self.empty_button)
        layout = QVBoxLayout(self)
        layout.addWidget(self.list, 1)
        layout.addWidget(self.empty_label)
        layout.addLayout(buttons)
        layout.addWidget(close)
        self.resize(460, 360)
        self.retranslate_ui()
        self.refresh()

    # -- what the UI exposes -------------------------------------------------

    def shown_titles(self) -> list[str]:
        """The titles listed, in order."""
        return [self.list.item(i).text() for i in range(self.list.count())]

    def select(self, session_id: str) -> None:
        """Highlight one trashed conversation."""
        for i in range(self.list.count()):
            item = self.list.item(i)
            if item.data(SESSION_ROLE) == session_id:
                self.list.setCurrentItem(item)

    def refresh(self) -> None:
        """Re-read the Trash."""
        current = self._selected()
        self.list.clear()
        for entry in self.trashing.entries():
            item = QListWidgetItem(untitled(entry.title))
            item.setData(SESSION_ROLE, entry.session_id)
            item.setToolTip(fill(_("Deleted {when}"), {"when": format_datetime(entry.trashed_at)}))
            self.list.addItem(item)
        if current is not None:
            self.select(current)
        if self.list.currentItem() is None and self.list.count():
            self.list.setCurrentRow(0)
        self._render_buttons()

    # -- actions -----------------------------------------------------------------

    def _selected(self) -> str | None:
        item = self.list.currentItem()
        value = item.data(SESSION_ROLE) if item is not None else None
        return value if isinstance(value, str) else None

    def restore_selected(self) -> None:
        """Put the highlighted conversation back into the list."""
        session_id = self._selected()
        if session_id is not None:
            self._run(self.trashing.restore(session_id), "restore conversation")

    def purge_selected(self) -> None:
        """Delete the highlighted conversation for good, after asking."""
        session_id = self._selected()
        if session_id is None:
            return
        title = self.list.currentItem().text()
        self._confirm(
            fill(_("Delete {title} for good? This cannot be undone."), {"title": title}),
            _("Delete forever"),
            lambda: self._run(self.trashing.purge(session_id), "delete conversation for good"),
        )

    def ask_empty(self) -> None:
        """Empty the Trash, after asking."""
        self._confirm(
            _("Delete every conversation in the Trash for good? This cannot be undone."),
            _("Empty Trash"),
            lambda: self._run(self.trashing.empty(), "empty the Trash"),
        )

    def _confirm(self, text: str, verb: str, then: Callable[[], None]) -> None:
        box = QMessageBox(self)
        box.setObjectName("trashConfirmation")
        box.setIcon(QMessageBox.Icon.Warning)
        box.setWindowTitle(_("Trash"))
        box.setText(text)
        yes = box.addButton(verb, QMessageBox.ButtonRole.DestructiveRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        box.buttonClicked.connect(lambda button: then() if button is yes else None)
        box.finished.connect(box.deleteLater)
        self.confirmation = box
        box.open()

    def _run(self, operation: Awaitable[Any], what: str) -> None:
        async def run_then_refresh() -> None:
            await operation
            self.refresh()

        self._spawn(run_then_refresh(), what)

    # -- texts ---------------------------------------------------------------------

    def _render_buttons(self) -> None:
        chosen = self._selected() is not None
        self.restore_button.setEnabled(chosen)
        self.purge_button.setEnabled(chosen)
        self.empty_button.setEnabled(self.list.count() > 0)
        self.empty_label.setVisible(self.list.count() == 0)

    def retranslate_ui(self) -> None:
        """Re-render every localized text."""
        self.setWindowTitle(_("Trash"))
        self.list.setAccessibleName(_("Deleted conversations"))
        self.empty_label.setText(_("The Trash is empty."))
        self.restore_button.setText(_("Restore"))
        self.restore_button.setToolTip(_("Put the conversation back into the list"))
        self.purge_button.setText(_("Delete forever"))
        self.empty_button.setText(_("Empty Trash…"))
