"""The conversation list: a lineage tree, newest first, running ones marked.

Forks and children are nested under the conversation they came from. The
tree is built from the host's lineage index without recursion (a fork chain
may be thousands deep). After that a change touches only the items it names:
a turn starting or ending, or a rename, re-renders one item, and a new
conversation or branch is inserted under its parent. Only a change that
names nothing, or one the tree cannot place, rebuilds it (keeping which
items were collapsed and which was selected).
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent, QModelIndex, QPersistentModelIndex, QPoint, Qt
from PySide6.QtGui import QFontMetrics, QHelpEvent, QKeyEvent, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QInputDialog,
    QMenu,
    QPushButton,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QToolTip,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from branchwise.core.errors import BranchwiseError
from branchwise.core.i18n.language import _, format_datetime
from branchwise.core.i18n.reasons import fill
from branchwise.core.lineage import TreeNode, creation_order
from branchwise.desktop.host.changes import Changes
from branchwise.desktop.host.conversation import ConversationRef
from branchwise.desktop.host.host import Host
from branchwise.desktop.host.notices import Level
from branchwise.desktop.widgets.compare_view import (
    CompareView,
    PickConversationDialog,
    show_comparison,
)
from branchwise.desktop.widgets.turn_widget import untitled

SESSION_ROLE = Qt.ItemDataRole.UserRole
TITLE_ROLE = Qt.ItemDataRole.UserRole + 1
"""The row's title part, the one part that is elided (in the middle) when the row is narrow."""
TAIL_ROLE = Qt.ItemDataRole.UserRole + 2
"""What follows the title (" · <label>", "↩ merged"): never elided."""
HEAD_ROLE = Qt.ItemDataRole.UserRole + 3
"""What precedes the title (the running mark): never elided."""
RUNNING_MARK = "● "
MERGED_MARK = "↩"
LABEL_SEPARATOR = " · "


MIN_TITLE_CHARS = 8
"""The room a title keeps however long the label beside it (in average characters)."""


def fitted_row_text(
    metrics: QFontMetrics,
    width: int,
    head: str,
    title: str,
    tail: str,
    min_title_chars: int = MIN_TITLE_CHARS,
) -> str:
    """``head + title + tail`` in ``width`` pixels, only the title elided, in its middle.

    A branch's title mostly repeats its parent's ("Explain git branches
    briefly (branch 3)"): its start and its "(branch N)" end tell rows apart,
    and the label and marks after it say what differs, so none of those go.
    The title keeps ``min_title_chars`` whatever the label takes (the row is
    then wider than ``width``).
    """
    room = width - metrics.horizontalAdvance(head) - metrics.horizontalAdvance(tail)
    room = max(room, metrics.averageCharWidth() * min_title_chars)
    shown = metrics.elidedText(title, Qt.TextElideMode.ElideMiddle, room)
    return head + shown + tail


def ask_label(host: Host, ref: ConversationRef, parent: QWidget) -> QInputDialog | None:
    """Ask for a branch's new label in a non-blocking dialog; the host writes what is given.

    ``None`` (and no dialog) for a conversation that is not a branch.
    """
    manifest = host.manifest_at(ref)
    if manifest is None or manifest.parent is None:
        return None
    dialog = QInputDialog(parent)
    dialog.setObjectName("renameLabelDialog")
    dialog.setWindowTitle(_("Rename branch label"))
    dialog.setLabelText(_("Label"))
    dialog.setTextValue(host.label_at(ref) or "")
    dialog.textValueSelected.connect(lambda text: rename_label_in_background(host, ref, text))
    dialog.finished.connect(dialog.deleteLater)
    dialog.open()
    return dialog


def rename_label_in_background(host: Host, ref: ConversationRef, text: str) -> None:
    """Rename a branch's label through the host (which writes off the UI thread).

    A refusal (an empty label, a conversation another process writes) goes
    to the notice area with its reason.
    """

    async def rename() -> None:
        try:
            await host.rename_label(ref, text)
        except BranchwiseError as exc:
            host.notices.post(exc.code, Level.ERROR, **exc.details)

    host.spawn(rename(), "rename label")


class _RowDelegate(QStyledItemDelegate):
    """Paints a row with its title elided in the middle and its label and marks whole."""

    def initStyleOption(  # noqa: N802 - Qt override
        self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex
    ) -> None:
        super().initStyleOption(option, index)
        title = index.data(TITLE_ROLE)
        if not isinstance(title, str):
            return
        head, tail = index.data(HEAD_ROLE) or "", index.data(TAIL_ROLE) or ""
        widget = option.widget
        style = widget.style() if widget is not None else QApplication.style()
        text_rect = style.subElementRect(QStyle.SubElement.SE_ItemViewItemText, option, widget)
        width = text_rect.width() if text_rect.width() > 0 else option.rect.width()
        option.text = fitted_row_text(option.fontMetrics, width - 4, head, title, tail)
        option.textElideMode = Qt.TextElideMode.ElideNone


class _LineageTree(QTreeWidget):
    """A tree whose tooltips are computed on hover (dates are slow to format in bulk)."""

    def __init__(self, sidebar: Sidebar) -> None:
        super().__init__(sidebar)
        self._sidebar = sidebar

    def viewportEvent(self, event: QEvent) -> bool:  # noqa: N802 - Qt override
        """Answer tooltip requests from the item under the pointer."""
        if event.type() == QEvent.Type.ToolTip and isinstance(event, QHelpEvent):
            item = self.itemAt(event.pos())
            if item is not None:
                text = self._sidebar.tooltip_for(item.data(0, SESSION_ROLE))
                QToolTip.showText(event.globalPos(), text, self.viewport())
                return True
        return super().viewportEvent(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 - Qt override
        """The Delete key moves the highlighted conversation to the Trash."""
        if event.matches(QKeySequence.StandardKey.Delete) or event.key() == Qt.Key.Key_Delete:
            self._sidebar.delete_current()
            event.accept()
            return
        super().keyPressEvent(event)


class Sidebar(QWidget):
    """The "New conversation" button and the lineage tree.

    Args:
        host: the host (the tree comes from its manifest index).
        open_session: called with a session id when an item is activated.
        new_session: called when "New conversation" is clicked.
        delete_session: called with a session id for "Delete" (menu or Delete key).
    """

    def __init__(
        self,
        host: Host,
        open_session: Callable[[str], None],
        new_session: Callable[[], None],
        parent: QWidget | None = None,
        delete_session: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("sidebar")
        self.host = host
        self._open_session = open_session
        self._delete_session = delete_session
        self.delete_with_branches: Callable[[str], None] | None = None
        """ "Move to Trash with its branches" (the window sets it); offered when there are some."""
        self.new_button = QPushButton(self)
        self.new_button.setObjectName("newConversationButton")
        self.new_button.clicked.connect(new_session)
        self.tree = _LineageTree(self)
        self.tree.setObjectName("conversationTree")
        self.tree.setHeaderHidden(True)
        self.tree.setColumnCount(1)
        self.tree.setUniformRowHeights(True)
        self.tree.setIndentation(14)
        self.tree.setItemDelegate(_RowDelegate(self.tree))
        self.tree.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.tree.customContextMenuRequested.connect(self._context_menu)
        self.tree.itemActivated.connect(self._activated)
        self.tree.itemClicked.connect(self._activated)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 0, 6)
        layout.addWidget(self.new_button)
        layout.addWidget(self.tree, 1)
        self._items: dict[str, QTreeWidgetItem] = {}
        self.pick_dialog: PickConversationDialog | None = None
        self.compare_view: CompareView | None = None
        self.retranslate_ui()

    # -- what the UI exposes -------------------------------------------------

    def item_for(self, session_id: str) -> QTreeWidgetItem | None:
        """The tree item of a conversation."""
        return self._items.get(session_id)

    def parent_of(self, session_id: str) -> str | None:
        """The session id of the item a conversation is nested under."""
        item = self._items.get(session_id)
        parent = item.parent() if item is not None else None
        return parent.data(0, SESSION_ROLE) if parent is not None else None

    def select(self, session_id: str) -> None:
        """Highlight the current conversation."""
        item = self._items.get(session_id)
        if item is not None:
            self.tree.setCurrentItem(item)

    # -- refreshing ------------------------------------------------------------

    def apply_changes(self, changes: Changes) -> None:
        """Update the items ``changes`` concern; rebuild only on a structural surprise.

        Sessions in ``added`` (and any named session the tree does not show
        yet) are inserted under their parent; the other named sessions are
        re-rendered. A ``sidebar`` change naming no session, a session shown
        under another parent than the index names, or an item count that no
        longer matches the index rebuilds the whole tree.
        """
        named = changes.sessions | changes.added
        if not named:
            if changes.sidebar:
                self.rebuild()
            return
        index = self.host.index
        new = {sid for sid in named if sid not in self._items and sid in index.by_id}
        for sid in sorted(new, key=lambda s: creation_order(index.by_id[s])):  # parents first
            if not self._insert(sid):
                self.rebuild()
                return
        shown = {sid for sid in named - new if sid in self._items}
        if len(self._items) != len(index) or not all(self._placed_as_indexed(s) for s in shown):
            self.rebuild()
            return
        self.refresh_items(shown)

    def rebuild(self) -> None:
        """Rebuild the tree from the lineage index (keeps collapse state and selection)."""
        collapsed = {
            sid for sid, item in self._items.items() if item.childCount() and not item.isExpanded()
        }
        current = self.tree.currentItem()
        current_id = current.data(0, SESSION_ROLE) if current is not None else None
        self.tree.setUpdatesEnabled(False)
        try:
            self.tree.clear()
            self._items = {}
            top: list[QTreeWidgetItem] = []
            # Pre-order, so each item is added after its parent and its earlier siblings.
            stack: list[tuple[TreeNode, QTreeWidgetItem | None]] = [
                (node, None) for node in reversed(self.host.index.forest())
            ]
            while stack:
                node, parent = stack.pop()
                item = self._new_item(node.manifest.session_id)
                if parent is None:
                    top.append(item)
                else:
                    parent.addChild(item)
                stack.extend((child, item) for child in reversed(node.children))
            self.tree.addTopLevelItems(top)
            self.tree.expandAll()
            for sid in collapsed & self._items.keys():
                self._items[sid].setExpanded(False)
            if current_id in self._items:
                self.tree.setCurrentItem(self._items[current_id])
        finally:
            self.tree.setUpdatesEnabled(True)

    def _new_item(self, session_id: str) -> QTreeWidgetItem:
        item = QTreeWidgetItem()
        item.setData(0, SESSION_ROLE, session_id)
        self._items[session_id] = item
        self._render(item)
        return item

    def _insert(self, session_id: str) -> bool:
        """Insert a new session's item among its siblings, newest first.

        Returns ``False`` when the tree cannot place it by itself: its parent
        is indexed but not shown, or it already has branches of its own (they
        are shown elsewhere, at the top level).
        """
        index = self.host.index
        manifest = index.by_id[session_id]
        if index.children(session_id):
            return False
        link = manifest.parent
        parent: QTreeWidgetItem | None = None
        if link is not None and link.session_id in index.by_id:
            parent = self._items.get(link.session_id)
            if parent is None:
                return False
        count = parent.childCount() if parent is not None else self.tree.topLevelItemCount()
        sibling_at = parent.child if parent is not None else self.tree.topLevelItem
        order = creation_order(manifest)
        position = count
        for number in range(count):
            sibling = sibling_at(number)
            other = index.by_id.get(sibling.data(0, SESSION_ROLE)) if sibling else None
            if other is not None and creation_order(other) < order:
                position = number
                break
        item = self._new_item(session_id)
        if parent is None:
            self.tree.insertTopLevelItem(position, item)
        else:
            parent.insertChild(position, item)
            if count == 0:
                parent.setExpanded(True)  # a first branch shows; a parent collapsed stays so
        return True

    def _placed_as_indexed(self, session_id: str) -> bool:
        """Whether a shown session sits where the index puts it.

        Under its parent, or at the top level (roots, sessions whose parent is
        gone, and the first member of a damaged parent loop).
        """
        item = self._items[session_id]
        manifest = self.host.index.by_id.get(session_id)
        if manifest is None:
            return False
        shown = item.parent()
        if shown is None:
            return True
        return manifest.parent is not None and shown.data(0, SESSION_ROLE) == (
            manifest.parent.session_id
        )

    def refresh_items(self, session_ids: set[str] | frozenset[str]) -> None:
        """Re-render a few items (running state, title) without rebuilding."""
        for sid in session_ids:
            item = self._items.get(sid)
            if item is not None:
                self._render(item)

    def _render(self, item: QTreeWidgetItem) -> None:
        sid = item.data(0, SESSION_ROLE)
        title = untitled(self.host.title(sid))
        label = self.host.label_at(ConversationRef(sid))
        running = self.host.is_running(sid)
        merged = self.merged_lines(sid)
        head = RUNNING_MARK if running else ""
        tail = LABEL_SEPARATOR + label if label else ""
        if merged:
            tail += "  " + fill(_("{mark} merged"), {"mark": MERGED_MARK})
        item.setText(0, head + title + tail)
        item.setData(0, HEAD_ROLE, head)
        item.setData(0, TITLE_ROLE, title)
        item.setData(0, TAIL_ROLE, tail)
        lines = [title] + ([label] if label else []) + ([_("Running")] if running else [])
        item.setData(0, Qt.ItemDataRole.AccessibleTextRole, ", ".join(lines + merged))

    def shown_text(self, session_id: str, width: int) -> str:
        """The row's text as painted ``width`` pixels wide (the title elided in its middle)."""
        item = self._items[session_id]
        return fitted_row_text(
            self.tree.fontMetrics(),
            width,
            item.data(0, HEAD_ROLE),
            item.data(0, TITLE_ROLE),
            item.data(0, TAIL_ROLE),
        )

    def merged_lines(self, session_id: str) -> list[str]:
        """One "Brought back into <title> on <date>" per merge of this branch into an ancestor.

        Few branches are merged, so formatting their dates on render costs little.
        """
        return [
            fill(
                _("Brought back into {title} on {when}"),
                {
                    "title": untitled(self.host.title(merge.into_session_id)),
                    "when": format_datetime(merge.at),
                },
            )
            for merge in self.host.merges_of(session_id)
        ]

    def tooltip_for(self, session_id: str) -> str:
        """Title, label, where it branched from and when, running state, merges, creation time.

        Formatted only when asked for (dates are slow to format in bulk).
        """
        manifest = self.host.index.by_id.get(session_id)
        lines = [self.host.branch_tooltip_at(ConversationRef(session_id))]
        if self.host.is_running(session_id):
            lines.append(_("Running"))
        lines.extend(self.merged_lines(session_id))
        if manifest is not None and manifest.created_at and manifest.parent is None:
            lines.append(fill(_("Created {when}"), {"when": format_datetime(manifest.created_at)}))
        return "\n".join(lines)

    def _activated(self, item: QTreeWidgetItem, _column: int = 0) -> None:
        sid = item.data(0, SESSION_ROLE)
        if sid:
            self._open_session(sid)

    def _context_menu(self, pos: QPoint) -> None:
        item = self.tree.itemAt(pos)
        sid = item.data(0, SESSION_ROLE) if item is not None else None
        if not sid:
            return
        self.context_menu(sid).popup(self.tree.viewport().mapToGlobal(pos))

    def context_menu(self, session_id: str) -> QMenu:
        """The menu of one conversation: Rename…, Compare with… (in a tree), Delete, and
        Move to Trash with its branches (when it has some)."""
        menu = QMenu(self)
        menu.setObjectName("conversationMenu")
        menu.addAction(_("Rename…"), lambda: self.ask_rename(session_id))
        manifest = self.host.index.by_id.get(session_id)
        if manifest is not None and manifest.parent is not None:
            menu.addAction(_("Rename label…"), lambda: self.ask_rename_label(session_id))
        if self.tree_mates(session_id):
            menu.addAction(_("Compare with…"), lambda: self.ask_compare(session_id))
        if self._delete_session is not None:
            delete = menu.addAction(_("Delete"), lambda: self.delete(session_id))
            delete.setToolTip(_("Move the conversation to the Trash (it can be restored)"))
        prune = self.delete_with_branches
        if prune is not None and self.host.index.children(session_id):
            whole = menu.addAction(_("Move to Trash with its branches"), lambda: prune(session_id))
            whole.setToolTip(
                _("Move the conversation and every branch below it to the Trash; one Undo")
            )
        return menu

    def tree_mates(self, session_id: str) -> list[tuple[str, str]]:
        """``(id, title)`` of the other conversations of ``session_id``'s tree, oldest first."""
        index = self.host.index
        root = session_id
        seen = {root}
        while True:
            manifest = index.by_id.get(root)
            parent = manifest.parent.session_id if manifest and manifest.parent else None
            if parent is None or parent not in index.by_id or parent in seen:
                break
            seen.add(parent)
            root = parent
        found: list[tuple[str, str]] = []
        pending, visited = [root], {root}
        while pending:  # no recursion: a chain of forks may be thousands deep
            current = pending.pop()
            if current != session_id:
                found.append((current, index.by_id[current].title))
            for child in index.children(current):
                if child.session_id not in visited:
                    visited.add(child.session_id)
                    pending.append(child.session_id)
        return found

    def ask_compare(self, session_id: str) -> None:
        """Pick another conversation of the tree, then show the two side by side."""
        dialog = PickConversationDialog(self.tree_mates(session_id), self)
        dialog.accepted.connect(lambda: self._compare(session_id, dialog.chosen()))
        self.pick_dialog = dialog
        dialog.open()

    def _compare(self, session_id: str, other_id: str | None) -> None:
        if other_id is not None:
            show_comparison(self.host, session_id, other_id, self, self._compared)

    def _compared(self, view: CompareView) -> None:
        self.compare_view = view

    def delete(self, session_id: str) -> None:
        """Move a conversation to the Trash (the window stops and closes it first)."""
        if self._delete_session is not None:
            self._delete_session(session_id)

    def delete_current(self) -> None:
        """The Delete key: delete the highlighted conversation."""
        item = self.tree.currentItem()
        session_id = item.data(0, SESSION_ROLE) if item is not None else None
        if session_id:
            self.delete(session_id)

    def ask_rename(self, session_id: str) -> None:
        """Ask for a new title (non-blocking dialog) and rename the conversation."""
        dialog = QInputDialog(self)
        dialog.setObjectName("renameDialog")
        dialog.setWindowTitle(_("Rename conversation"))
        dialog.setLabelText(_("Title"))
        dialog.setTextValue(untitled(self.host.title(session_id)))
        dialog.textValueSelected.connect(lambda text: self.rename(session_id, text))
        dialog.finished.connect(dialog.deleteLater)
        dialog.open()

    def rename(self, session_id: str, title: str) -> None:
        """Rename through the host; a refusal goes to the notice area with its reason."""
        try:
            self.host.rename(session_id, title)
        except BranchwiseError as exc:
            self.host.notices.post(exc.code, Level.ERROR, **exc.details)

    def ask_rename_label(self, session_id: str) -> QInputDialog | None:
        """Ask for a branch's new label (non-blocking dialog); the host writes it."""
        return ask_label(self.host, ConversationRef(session_id), self)

    def retranslate_ui(self) -> None:
        """Re-render every localized text."""
        self.new_button.setText(_("New conversation"))
        self.tree.setAccessibleName(_("Conversations"))
        for item in self._items.values():
            self._render(item)
