"""Servers in the window: "Connect to server…", the sidebar's server section, and the
tabs from last time that wait for their server.

The window owns one :class:`RemoteServers`; it adds the File menu action, puts
the server section under the local conversation tree and reconnects the saved
servers at start. A server's conversation opens in the window's own
:class:`~branchwise.desktop.widgets.conversation_tab.ConversationTab`, through
the host (:meth:`~branchwise.desktop.host.host.Host.open`); this module only
shows what is about servers: their connection state, their conversation
lists, and what can be done to a conversation there (new, rename, delete),
which the host's :class:`~branchwise.desktop.host.server_operations.ServerOperations`
carry out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol

import shiboken6
from PySide6.QtCore import QObject, QPoint, Qt, SignalInstance
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QInputDialog,
    QLabel,
    QLineEdit,
    QMenu,
    QTabWidget,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from branchwise.core.errors import BranchwiseError, RemoteRefusal, RemoteUnavailable
from branchwise.core.i18n.language import _
from branchwise.core.i18n.reasons import fill, reason_text
from branchwise.desktop.host.connections import Connection
from branchwise.desktop.host.conversation import ConversationRef
from branchwise.desktop.host.host import Host
from branchwise.desktop.host.notices import Level
from branchwise.desktop.host.sources import ConnectionState, RemoteSource
from branchwise.desktop.host.window_state import RemoteTab
from branchwise.desktop.widgets.conversation_tab import ConversationTab
from branchwise.desktop.widgets.search import RemoteResults, SearchPanel
from branchwise.desktop.widgets.sidebar import ask_label
from branchwise.desktop.widgets.turn_widget import untitled


class ServerWindow(Protocol):
    """What the server section needs of the main window (which owns it, so is not imported)."""

    host: Host
    tabs: QTabWidget
    file_menu: QMenu
    settings_action: QAction
    search_panel: SearchPanel

    @property
    def sidebar(self) -> QWidget:
        """The conversation list, under which the server section goes."""
        ...

    @property
    def closed(self) -> SignalInstance:
        """Emitted once the window has closed."""
        ...

    def _render_empty_state(self) -> None: ...

    def _state_changed(self, *_args: object) -> None: ...

    def conversation_tabs(self) -> list[ConversationTab]: ...

    def tab_for_ref(self, ref: ConversationRef) -> ConversationTab | None: ...

    async def open_remote(self, ref: ConversationRef, index: int = -1) -> ConversationTab: ...

    def open_ref(self, ref: ConversationRef) -> None: ...


SERVER_ROLE = Qt.ItemDataRole.UserRole
SESSION_ROLE = Qt.ItemDataRole.UserRole + 1


class ConnectDialog(QDialog):
    """ "Connect to server…": a name, the server's address and its token (masked).

    Args:
        parent: the window.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("connectDialog")
        self.name_edit = QLineEdit(self)
        self.name_edit.setObjectName("serverName")
        self.url_edit = QLineEdit(self)
        self.url_edit.setObjectName("serverUrl")
        self.url_edit.setPlaceholderText("http://127.0.0.1:8765")
        self.token_edit = QLineEdit(self)
        self.token_edit.setObjectName("serverToken")
        self.token_edit.setEchoMode(QLineEdit.EchoMode.Password)  # never shown on screen
        self.error_label = QLabel(self)
        self.error_label.setObjectName("connectError")
        self.error_label.setWordWrap(True)
        self.error_label.hide()
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel, self
        )
        self.submit: Callable[[ConnectDialog], Awaitable[bool]] | None = None
        self._pending: asyncio.Task[None] | None = None
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        self.form = QFormLayout()
        self.form.addRow("", self.name_edit)
        self.form.addRow("", self.url_edit)
        self.form.addRow("", self.token_edit)
        layout = QVBoxLayout(self)
        layout.addLayout(self.form)
        layout.addWidget(self.error_label)
        layout.addWidget(self.buttons)
        self.retranslate_ui()

    def show_error(self, code: str, server_said: str = "") -> None:
        """Say why the input cannot be used (the dialog stays open).

        ``server_said`` is the server's refusal in its own words, shown beneath.
        """
        text = reason_text(code)
        if server_said:
            text += "\n" + fill(_("The server said: {message}"), {"message": server_said})
        self.error_label.setText(text)
        self.error_label.show()

    def fill_saved(self, connection: Connection, token: str) -> None:
        """Show a saved server's fields (only into a dialog nobody has typed in yet)."""
        edits = (self.name_edit, self.url_edit, self.token_edit)
        if any(edit.text() for edit in edits):
            return
        self.name_edit.setText(connection.name)
        self.url_edit.setText(connection.url)
        self.token_edit.setText(token)

    def accept(self) -> None:
        """Connect: the dialog closes only once the server has taken the token."""
        if self.submit is None:
            super().accept()
            return
        if self._pending is not None and not self._pending.done():
            return
        self._pending = asyncio.ensure_future(self._connect(self.submit))

    async def _connect(self, submit: Callable[[ConnectDialog], Awaitable[bool]]) -> None:
        ok_button = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        ok_button.setEnabled(False)
        self.error_label.hide()
        try:
            done = await submit(self)
        finally:
            if shiboken6.isValid(ok_button):
                ok_button.setEnabled(True)
        if done and shiboken6.isValid(self):
            super().accept()

    def retranslate_ui(self) -> None:
        """Render the dialog's texts in the current language."""
        self.setWindowTitle(_("Connect to server"))
        labels = (_("Name"), _("Server address"), _("Token"))
        for row, text in enumerate(labels):
            label = self.form.itemAt(row, QFormLayout.ItemRole.LabelRole)
            if label is not None and isinstance(label.widget(), QLabel):
                label.widget().setText(text)  # type: ignore[union-attr]
        self.name_edit.setPlaceholderText(_("Shown in the sidebar (optional)"))
        self.token_edit.setPlaceholderText(_("The contents of serve-token on the server"))
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setText(_("Connect"))
        self.buttons.button(QDialogButtonBox.StandardButton.Cancel).setText(_("Cancel"))


class WaitingRemoteTab(QWidget):
    """A server conversation's tab from last time, shown until its server answers.

    It says why the conversation is not here yet (connecting, the server does
    not answer, or the server refused it); the window replaces it with the
    conversation's tab as soon as that opens.

    Args:
        server: the server that keeps the conversation.
        saved: what the window remembered of the tab.
    """

    def __init__(
        self, server: RemoteSource, saved: RemoteTab, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("waitingRemoteTab")
        self.server = server
        self.saved = saved
        self.problem: str | None = None
        self.message_label = QLabel(self)
        self.message_label.setObjectName("remoteWaitingLabel")
        self.message_label.setWordWrap(True)
        self.message_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        layout = QVBoxLayout(self)
        layout.addWidget(self.message_label, 1)
        unsubscribe = server.subscribe(self.retranslate_ui)
        self.destroyed.connect(lambda *_args: unsubscribe())
        self.retranslate_ui()

    @property
    def session_id(self) -> str:
        """The conversation's id on its server."""
        return self.saved.session_id

    @property
    def title(self) -> str:
        """The title the tab had last time."""
        return untitled(self.saved.title)

    def show_problem(self, code: str) -> None:
        """The server answered but cannot give this conversation (e.g. it is gone)."""
        self.problem = code
        self.retranslate_ui()

    def retranslate_ui(self) -> None:
        """Say, in the current language, why the conversation is not shown yet."""
        names = {"server": self.server.name}
        if self.problem is not None:
            text = fill(
                _("{server} could not open this conversation: {reason}"),
                {**names, "reason": reason_text(self.problem)},
            )
        elif self.server.state == ConnectionState.CONNECTED:
            text = fill(_("Opening this conversation from {server}…"), names)
        elif self.server.state == ConnectionState.CONNECTING:
            text = fill(
                _("Connecting to {server}… This conversation opens when it answers."), names
            )
        else:
            text = fill(_("{server} does not answer. This conversation opens when it does."), names)
        self.message_label.setText(text)
        self.setAccessibleName(text)


class RemoteServers(QObject):
    """The window's servers: the menu action, the sidebar section and the remote tabs.

    Args:
        window: the main window (its host, notices, tabs and sidebar are used).
    """

    def __init__(self, window: ServerWindow) -> None:
        super().__init__(window.tabs)
        self.window = window
        self.host = window.host
        self.dialog: ConnectDialog | None = None
        self._waiting: dict[WaitingRemoteTab, asyncio.Task[None]] = {}
        self.connect_action = QAction(window.file_menu)
        self.connect_action.setObjectName("connectServerAction")
        self.connect_action.triggered.connect(lambda _checked=False: self.show_connect())
        window.file_menu.insertAction(window.settings_action, self.connect_action)
        self.tree = QTreeWidget(window.sidebar)
        self.tree.setObjectName("serverTree")
        self.tree.setHeaderHidden(True)
        self.tree.itemActivated.connect(self._activated)
        self.tree.itemClicked.connect(self._activated)
        self.tree.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.tree.customContextMenuRequested.connect(self._context_menu)
        self.rename_dialog: QInputDialog | None = None
        self.tree.hide()
        sidebar_layout = window.sidebar.layout()
        if sidebar_layout is not None:
            sidebar_layout.addWidget(self.tree)
        window.tabs.tabCloseRequested.connect(self._close_tab_at)
        window.closed.connect(self._stop_all)
        window.search_panel.remote_search = self.search
        self.retranslate_ui()

    # -- servers ------------------------------------------------------------------------------

    @property
    def servers(self) -> list[RemoteSource]:
        """The host's servers, in the order they were added."""
        return self.host.servers.sources

    def connect_saved(self) -> None:
        """Show every saved server, connecting in the background (at start)."""
        for server in self.host.servers.connect_saved():
            self._show(server)

    def add(self, connection: Connection, token: str, **options: object) -> RemoteSource:
        """Show a server in the sidebar and connect to it in the background."""
        return self._show(self.host.servers.add(connection, token, **options))

    def _show(self, server: RemoteSource) -> RemoteSource:
        server.navigator = self._navigate
        server.subscribe(self.render_tree)
        self.render_tree()
        return server

    def show_connect(self) -> ConnectDialog:
        """Open "Connect to server…"; a valid entry is saved and connected."""
        dialog = ConnectDialog(self.window.tabs.window())
        self.dialog = dialog

        async def submit(entered: ConnectDialog) -> bool:
            try:
                server = await self.host.servers.try_connect(
                    entered.name_edit.text(), entered.url_edit.text(), entered.token_edit.text()
                )
            except RemoteRefusal as exc:
                entered.show_error(exc.code, exc.message)  # keep what was typed
                return False
            except RemoteUnavailable as exc:
                entered.show_error(exc.code, exc.message)
                return False
            except BranchwiseError as exc:
                entered.show_error(exc.code)
                return False
            self._show(server)
            return True

        async def fill_saved() -> None:
            saved = await self.host.servers.last_saved()
            if saved is not None and shiboken6.isValid(dialog):
                dialog.fill_saved(*saved)

        dialog.submit = submit
        self.host.spawn(fill_saved(), "show the saved server")
        dialog.open()
        return dialog

    def _stop_all(self) -> None:
        self.host.spawn(self.host.servers.stop_all(), "disconnect from the servers")

    # -- the sidebar section ------------------------------------------------------------------

    def server_item(self, server: RemoteSource) -> QTreeWidgetItem | None:
        """The top-level item of a server."""
        for index in range(self.tree.topLevelItemCount()):
            item = self.tree.topLevelItem(index)
            if item is not None and item.data(0, SERVER_ROLE) == server.connection.url:
                return item
        return None

    def render_tree(self) -> None:
        """Show each server under its name, its conversations nested by lineage."""
        if not shiboken6.isValid(self.tree):
            return  # a server's last word after the window went away
        self.tree.clear()
        for server in self.servers:
            top = QTreeWidgetItem([self._server_text(server)])
            top.setData(0, SERVER_ROLE, server.connection.url)
            top.setToolTip(0, server.connection.url)
            items: dict[str, QTreeWidgetItem] = {}
            listing = server.listing
            conversations = listing.newest_first()
            for manifest in conversations:
                mark = "● " if manifest.session_id in listing.running else ""
                label = self.host.label_at(server.ref(manifest.session_id))
                text = mark + untitled(manifest.title) + (f" · {label}" if label else "")
                item = QTreeWidgetItem([text])
                item.setToolTip(0, self.host.branch_tooltip_at(server.ref(manifest.session_id)))
                item.setData(0, SERVER_ROLE, server.connection.url)
                item.setData(0, SESSION_ROLE, manifest.session_id)
                items[manifest.session_id] = item
            for manifest in conversations:
                parent = items.get(manifest.parent.session_id if manifest.parent else "")
                (parent or top).addChild(items[manifest.session_id])
            self.tree.addTopLevelItem(top)
        self.tree.expandAll()
        self.tree.setVisible(bool(self.servers))

    def _server_text(self, server: RemoteSource) -> str:
        if server.state == ConnectionState.CONNECTED:
            return server.name
        if server.state == ConnectionState.CONNECTING:
            return fill(_("{server} (connecting…)"), {"server": server.name})
        return fill(_("{server} (disconnected)"), {"server": server.name})

    def _activated(self, item: QTreeWidgetItem, _column: int = 0) -> None:
        session_id = item.data(0, SESSION_ROLE)
        server = self._server_of(item.data(0, SERVER_ROLE))
        if session_id and server is not None:
            self.window.open_ref(server.ref(session_id))

    def _server_of(self, url: str | None) -> RemoteSource | None:
        return self.host.servers.of(url)

    async def search(self, query: str, limit: int) -> list[RemoteResults]:
        """Every connected server's hits that can search, in sidebar order (the host asks)."""
        answers = await self.host.server_operations.search(query, limit)
        return [
            RemoteResults(
                hits.server.name,
                hits.result,
                hits.server.title,
                self._opener(hits.server),
                self._labeller(hits.server),
            )
            for hits in answers
        ]

    def _labeller(self, server: RemoteSource) -> Callable[[str], str | None]:
        return lambda session_id: self.host.label_at(server.ref(session_id))

    def _opener(self, server: RemoteSource) -> Callable[[str, str], None]:
        return lambda session_id, _message_id: self._open_hit(server, session_id)

    def _open_hit(self, server: RemoteSource, session_id: str) -> None:
        self.window.open_ref(server.ref(session_id))

    # -- managing a server's conversations ----------------------------------------------------

    def _context_menu(self, pos: QPoint) -> None:
        item = self.tree.itemAt(pos)
        server = self._server_of(item.data(0, SERVER_ROLE)) if item is not None else None
        if item is None or server is None:
            return
        menu = self.context_menu(server, item.data(0, SESSION_ROLE))
        menu.popup(self.tree.viewport().mapToGlobal(pos))

    def context_menu(self, server: RemoteSource, session_id: str | None) -> QMenu:
        """The menu of a server (New conversation) or of one of its conversations (+ Rename…,
        Delete); what the server cannot do now (disconnected, an older server) is disabled."""
        menu = QMenu(self.tree)
        menu.setObjectName("serverConversationMenu")
        new = menu.addAction(_("New conversation"), lambda: self.new_remote(server))
        new.setEnabled(server.connected)
        if session_id:
            rename = menu.addAction(_("Rename…"), lambda: self.ask_rename(server, session_id))
            rename.setEnabled(server.can("rename"))
            manifest = server.listing.index.by_id.get(session_id)
            if manifest is not None and manifest.parent is not None:
                label = menu.addAction(
                    _("Rename label…"),
                    lambda: ask_label(self.host, server.ref(session_id), self.tree),
                )
                label.setEnabled(server.can("label"))
            delete = menu.addAction(_("Delete"), lambda: self.delete_remote(server, session_id))
            delete.setEnabled(server.can("trash"))
            delete.setToolTip(_("Move the conversation to the server's Trash (it can be restored)"))
        return menu

    def new_remote(self, server: RemoteSource) -> None:
        """Start a conversation on the server and open its tab."""
        self.host.spawn(self._create(server), "start a server conversation")

    async def _create(self, server: RemoteSource) -> None:
        ref = await self.host.server_operations.create(server.connection.url, initiator=self)
        if ref is not None:
            self.window.open_ref(ref)

    def ask_rename(self, server: RemoteSource, session_id: str) -> QInputDialog:
        """Ask for a new title (non-blocking) and rename the conversation on its server."""
        dialog = QInputDialog(self.window.tabs.window())
        dialog.setObjectName("renameDialog")
        dialog.setWindowTitle(_("Rename conversation"))
        dialog.setLabelText(_("Title"))
        dialog.setTextValue(untitled(server.title(session_id)))
        dialog.textValueSelected.connect(lambda text: self.rename_remote(server, session_id, text))
        dialog.finished.connect(dialog.deleteLater)
        self.rename_dialog = dialog
        dialog.open()
        return dialog

    def rename_remote(self, server: RemoteSource, session_id: str, title: str) -> None:
        """Rename on the server; a refusal (busy, a bad title) is a notice."""
        self.host.spawn(
            self.host.server_operations.rename(server.ref(session_id), title, initiator=self),
            "rename a server conversation",
        )

    def delete_remote(self, server: RemoteSource, session_id: str) -> None:
        """Move a server conversation to the server's Trash; its tab closes; Undo restores it."""
        self.host.spawn(self._delete(server, session_id), "delete a server conversation")

    async def _delete(self, server: RemoteSource, session_id: str) -> None:
        ref = server.ref(session_id)
        changes = await self.host.server_operations.trash(ref, initiator=self)
        tab = self.window.tab_for_ref(ref)
        if changes.touches(session_id) and tab is not None:
            self.window.tabs.tabCloseRequested.emit(self.window.tabs.indexOf(tab))

    def restore(self, url: str, session_id: str) -> None:
        """A deletion's Undo: move the conversation back from its server's Trash."""
        self.host.spawn(
            self.host.server_operations.restore(ConversationRef(session_id, url), initiator=self),
            "restore a server conversation",
        )

    # -- tabs ---------------------------------------------------------------------------------

    def remote_tabs(self) -> list[ConversationTab]:
        """Every open tab of a server's conversation, in tab order."""
        return [tab for tab in self.window.conversation_tabs() if tab.ref.remote]

    def waiting_tabs(self) -> list[WaitingRemoteTab]:
        """The tabs from last time still waiting for their server, in tab order."""
        tabs = self.window.tabs
        return [
            tab for i in range(tabs.count()) if isinstance(tab := tabs.widget(i), WaitingRemoteTab)
        ]

    def tab_states(self) -> tuple[RemoteTab, ...]:
        """What the window remembers of the server tabs (open and waiting), left to right."""
        tabs = self.window.tabs
        found: list[RemoteTab] = []
        for i in range(tabs.count()):
            tab = tabs.widget(i)
            if isinstance(tab, ConversationTab) and tab.ref.server is not None:
                found.append(RemoteTab(tab.ref.server, tab.session_id, tab.title))
            elif isinstance(tab, WaitingRemoteTab):
                found.append(tab.saved)
        return tuple(found)

    def current_state(self) -> RemoteTab | None:
        """The server tab in front, if the tab in front is one."""
        current = self.window.tabs.currentWidget()
        if isinstance(current, ConversationTab) and current.ref.server is not None:
            return RemoteTab(current.ref.server, current.session_id, current.title)
        if isinstance(current, WaitingRemoteTab):
            return current.saved
        return None

    def restore_tabs(
        self, saved: tuple[RemoteTab, ...], current: RemoteTab | None
    ) -> list[RemoteTab]:
        """Show last time's server tabs at once; each opens when its server answers.

        Returns those that could not be shown (their server is no longer saved).
        """
        skipped: list[RemoteTab] = []
        for entry in saved:
            server = self._server_of(entry.server)
            if server is None:
                skipped.append(entry)
                continue
            waiting = WaitingRemoteTab(server, entry, self.window.tabs)
            self.window.tabs.addTab(waiting, waiting.title)
            self.window.tabs.setTabToolTip(
                self.window.tabs.indexOf(waiting),
                fill(_("{title} on {server}"), {"title": waiting.title, "server": server.name}),
            )
            if entry == current:
                self.window.tabs.setCurrentWidget(waiting)
            self._follow_waiting(waiting)
        return skipped

    def _follow_waiting(self, waiting: WaitingRemoteTab) -> None:
        task = self.host.spawn(self._open_when_answering(waiting), "reopen a server tab")
        self._waiting[waiting] = task

    async def _open_when_answering(self, waiting: WaitingRemoteTab) -> None:
        """Have the host open the conversation when its server answers, and put its tab
        where the waiting one is."""
        ref = waiting.server.ref(waiting.session_id)
        tabs = self.window.tabs
        try:
            await self.host.server_operations.open_when_answering(ref)
        except BranchwiseError as exc:
            waiting.show_problem(exc.code)
            return
        index = tabs.indexOf(waiting)
        if index < 0:
            return  # closed meanwhile
        front = tabs.currentWidget() is waiting
        tab = await self.window.open_remote(ref, index)
        self._waiting.pop(waiting, None)
        tabs.removeTab(tabs.indexOf(waiting))
        waiting.deleteLater()
        if front:
            tabs.setCurrentWidget(tab)
        self.window._state_changed()

    def tab_for(self, server: RemoteSource, session_id: str) -> ConversationTab | None:
        """The open tab of a server's conversation."""
        return self.window.tab_for_ref(server.ref(session_id))

    async def open_remote(self, server: RemoteSource, session_id: str) -> ConversationTab:
        """Open (or bring forward) a server conversation's tab; a failure is a notice."""
        try:
            return await self.window.open_remote(server.ref(session_id))
        except BranchwiseError as exc:
            self.host.notices.post(exc.code, Level.ERROR, detail=exc.message)
            raise

    async def _navigate(self, server: RemoteSource, session_id: str) -> None:
        """The server's navigator: a new branch opens in a tab (raises if it cannot)."""
        await self.window.open_remote(server.ref(session_id))

    def _close_tab_at(self, index: int) -> None:
        tab = self.window.tabs.widget(index)
        if isinstance(tab, WaitingRemoteTab):
            waiting = self._waiting.pop(tab, None)
            if waiting is not None:
                waiting.cancel()
            self.window.tabs.removeTab(index)
            tab.deleteLater()
            self.window._render_empty_state()
            self.window._state_changed()

    def retranslate_ui(self) -> None:
        """Render every text in the current language."""
        self.connect_action.setText(_("Connect to server…"))
        self.render_tree()
        for waiting in self.waiting_tabs():
            waiting.retranslate_ui()
        if self.dialog is not None:
            self.dialog.retranslate_ui()
