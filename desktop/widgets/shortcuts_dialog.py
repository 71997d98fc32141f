"""Help ▸ Keyboard shortcuts: every shortcut, read from the actions themselves.

The table is built from the window's ``QAction`` objects at the moment it
opens, so it lists exactly what the keyboard does, in the active language,
and cannot drift from the menus. Keys that belong to one widget rather than
an action (Enter in the composer, Esc in the find bar) are listed by the
caller as extra rows.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from branchwise.core.i18n.language import _


def action_label(action: QAction) -> str:
    """A menu text without its access-key marker ("&File" → "File")."""
    return action.text().replace("&&", "\0").replace("&", "").replace("\0", "&").rstrip("…")


def shortcut_rows(
    actions: Sequence[QAction], extra: Sequence[tuple[str, str]] = ()
) -> list[tuple[str, str]]:
    """``(what it does, keys)`` for every action with a shortcut, then ``extra``."""
    rows = []
    for action in actions:
        keys = [k.toString(QKeySequence.SequenceFormat.NativeText) for k in action.shortcuts()]
        keys = [k for k in keys if k]
        if keys:
            rows.append((action_label(action), ", ".join(keys)))
    return [*rows, *extra]


class ShortcutsDialog(QDialog):
    """A two-column table of shortcuts (non-modal; Esc or Close closes it)."""

    def __init__(self, rows: Sequence[tuple[str, str]], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("shortcutsDialog")
        self.setWindowTitle(_("Keyboard shortcuts"))
        self.table = QTableWidget(len(rows), 2, self)
        self.table.setObjectName("shortcutsTable")
        self.table.setAccessibleName(_("Keyboard shortcuts"))
        self.table.setHorizontalHeaderLabels([_("Action"), _("Shortcut")])
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        for row, (what, keys) in enumerate(rows):
            self.table.setItem(row, 0, QTableWidgetItem(what))
            key_item = QTableWidgetItem(keys)
            key_item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
            self.table.setItem(row, 1, key_item)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.table)
        layout.addWidget(buttons)
        self.resize(460, 420)

    def rows(self) -> list[tuple[str, str]]:
        """What the table shows, top to bottom."""
        found = []
        for row in range(self.table.rowCount()):
            what, keys = self.table.item(row, 0), self.table.item(row, 1)
            found.append((what.text() if what else "", keys.text() if keys else ""))
        return found
