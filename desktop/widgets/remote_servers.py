"""Conversations on ``branchwise serve`` servers: "Connect to server…", the sidebar's
server section, and a tab for a remote conversation.

The window owns one :class:`RemoteServers`; it adds the File menu action, puts
the server section under the local conversation tree, reconnects the saved
servers at start, and opens remote conversations in tabs of their own. What
happens is decided by :mod:`branchwise.desktop.host.sources` (no Qt); this
module only shows it: a remote conversation uses the same turn widgets, branch
action, Retry and composer a local one does, and a branch click goes through
the server's operations journal.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
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
    QPushButton,
    QScrollArea,
    QTabWidget,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from branchwise.core.errors import BranchwiseError, RemoteUnavailable
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.i18n.language import _, format_number
from branchwise.core.i18n.reasons import fill, reason_text
from branchwise.desktop.host.connections import Connection
from branchwise.desktop.host.host import Host
from branchwise.desktop.host.notices import Level, NoticeAction
from branchwise.desktop.host.rows import PAGE_SIZE
from branchwise.desktop.host.sources import ConnectionState, RemoteConversation, RemoteSource
from branchwise.desktop.host.trashing import RESTORE_ACTION
from branchwise.desktop.host.window_state import RemoteTab
from branchwise.desktop.widgets.composer import Composer
from branchwise.desktop.widgets.search import RemoteResults, SearchPanel
from branchwise.desktop.widgets.turn_widget import AskAgain, TurnWidget, untitled


class ServerWindow(Protocol):
    """What the server section needs of the main window (which owns it, so is not imported)."""

    host: Host
    tabs: QTabWidget
    sidebar: QWidget
    file_menu: QMenu
    settings_action: QAction
    search_panel: SearchPanel

    @property
    def closed(self) -> SignalInstance:
        """Emitted once the window has closed."""
        ...

    def _render_empty_state(self) -> None: ...

    def _state_changed(self, *_args: object) -> None: ...


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

    def show_error(self, code: str) -> None:
        """Say why the input cannot be used (the dialog stays open)."""
        self.error_label.setText(reason_text(code))
        self.error_label.show()

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


class RemoteConversationTab(QWidget):
    """A conversation kept on a server: the local tab's turn widgets, branch action and composer.

    Args:
        conversation: the loaded server conversation.
        on_branch: called with the fork request of a clicked branch action.
        on_send: called with the text of a prompt to send.
        on_stop: called when "Stop" is clicked while a turn runs there.
        ask_again: the turns' Edit, Regenerate and Retry actions.
        on_open: opens another conversation of the same server (a turn's branch menu).
    """

    def __init__(
        self,
        conversation: RemoteConversation,
        on_branch: Callable[[ForkRequest], object],
        on_send: Callable[[str], object],
        parent: QWidget | None = None,
        on_stop: Callable[[], object] = lambda: None,
        ask_again: AskAgain | None = None,
        on_open: Callable[[str], object] = lambda _session_id: None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("remoteConversationTab")
        self.conversation = conversation
        self._on_branch = on_branch
        self._on_open = on_open
        self._ask_again = ask_again
        self.server_label = QLabel(self)
        self.server_label.setObjectName("remoteServerLabel")
        self.scroll_area = QScrollArea(self)
        self.scroll_area.setWidgetResizable(True)
        self._body = QWidget(self.scroll_area)
        self._rows = QVBoxLayout(self._body)
        self.earlier_button = QPushButton(self._body)
        self.earlier_button.setObjectName("earlierTurnsButton")
        self.earlier_button.clicked.connect(self._show_earlier)
        self.earlier_button.hide()
        self._rows.addWidget(self.earlier_button)
        self._rows.addStretch(1)
        self.scroll_area.setWidget(self._body)
        self.composer = Composer(lambda text: on_send(text), lambda: on_stop(), self)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.server_label)
        layout.addWidget(self.scroll_area, 1)
        layout.addWidget(self.composer)
        self._widgets: list[TurnWidget] = []
        self.shown = PAGE_SIZE
        self._seen: int | None = None
        self._unsubscribe = [
            conversation.subscribe(self.refresh),
            conversation.server.subscribe(self.refresh),
        ]
        # A tab deleted with its window (not closed first) must stop listening too.
        subscriptions = self._unsubscribe
        self.destroyed.connect(lambda *_args: [stop() for stop in list(subscriptions)])
        self.retranslate_ui()
        self.refresh()

    @property
    def session_id(self) -> str:
        """The conversation's id on its server."""
        return self.conversation.session_id

    @property
    def title(self) -> str:
        """The conversation's title for the tab."""
        return untitled(self.conversation.title)

    def turn_widgets(self) -> list[TurnWidget]:
        """The turn widgets, in order."""
        return list(self._widgets)

    def refresh(self) -> None:
        """Show the conversation's rows and each row's branch action as they are now."""
        every = self.conversation.rows
        # Like a local transcript: widgets for the last pages only (a server's
        # conversation may hold 10,000 turns); new turns extend the window.
        if self._seen is not None and len(every) > self._seen:
            self.shown += len(every) - self._seen
        self._seen = len(every)
        hidden = max(0, len(every) - self.shown)
        rows = every[hidden:]
        self.earlier_button.setVisible(hidden > 0)
        self.earlier_button.setText(
            fill(_("Show earlier turns ({n} more)"), {"n": format_number(hidden)})
        )
        while len(self._widgets) > len(rows):
            self._widgets.pop().deleteLater()
        for position, row in enumerate(rows):
            if position < len(self._widgets):
                widget = self._widgets[position]
                if widget.row != row:
                    widget.set_row(row)
            else:
                widget = TurnWidget(row, self._branch, self._on_open, self._body, self._ask_again)
                self._rows.insertWidget(self._rows.count() - 1, widget)
                self._widgets.append(widget)
            widget.set_branch_state(self.conversation.server_branch_state(row))
            widget.set_branches(self.conversation.branches_at(row))
        server = self.conversation.server
        self.composer.set_blocked(
            None
            if server.state == ConnectionState.CONNECTED
            else fill(reason_text("server_disconnected"), {"server": server.name})
        )
        self.composer.set_running(self.conversation.running)

    def _show_earlier(self) -> None:
        self.shown += PAGE_SIZE
        for widget in self._widgets:  # rebuilt in order, the earlier page first
            widget.deleteLater()
        self._widgets = []
        self.refresh()

    def close_tab(self) -> None:
        """Stop listening (the tab is going away)."""
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe.clear()

    def _branch(self, request: ForkRequest) -> None:
        self._on_branch(request)

    def retranslate_ui(self) -> None:
        """Render the tab's texts in the current language."""
        server = self.conversation.server
        self.server_label.setText(fill(_("On the server {server}"), {"server": server.name}))
        self.composer.retranslate_ui()
        self.refresh()


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
        self._follow: dict[RemoteConversationTab, asyncio.Task[None]] = {}
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

        def accepted() -> None:
            try:
                server = self.host.servers.connect(
                    dialog.name_edit.text(), dialog.url_edit.text(), dialog.token_edit.text()
                )
            except BranchwiseError as exc:
                dialog.show_error(exc.code)
                dialog.open()  # keep what was typed; say what is wrong
                return
            self._show(server)

        dialog.accepted.connect(accepted)
        dialog.open()
        return dialog

    def _stop_all(self) -> None:
        for server in self.servers:
            self.host.spawn(server.stop(), "disconnect from a server")

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
                item = QTreeWidgetItem([mark + untitled(manifest.title)])
                item.setData(0, SERVER_ROLE, server.connection.url)
                item.setData(0, SESSION_ROLE, manifest.session_id)
                items[manifest.session_id] = item
            for manifest in conversations:
                parent = items.get(manifest.parent.session_id if manifest.parent else "")
                (parent or top).addChild(items[manifest.session_id])
            self.tree.addTopLevelItem(top)
        self.tree.expandAll()
        self.tree.setVisible(bool(self.servers))
        for tab in self.remote_tabs():  # a title changed on the server (here or elsewhere)
            self._render_tab_title(tab)

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
            self.host.spawn(self.open_remote(server, session_id), "open a server conversation")

    def _server_of(self, url: str | None) -> RemoteSource | None:
        return self.host.servers.of(url)

    async def search(self, query: str, limit: int) -> list[RemoteResults]:
        """Every connected server's hits that can search (asked at once), in sidebar order.

        A server that stops answering is marked lost (one notice; it reconnects);
        a refusal is a notice. Neither hides the other servers' hits.
        """
        servers = [server for server in self.servers if server.can("search")]

        async def ask(server: RemoteSource) -> RemoteResults | None:
            try:
                result = await server.search(query, limit)
            except RemoteUnavailable:
                await server.lost()
                return None
            except BranchwiseError as exc:
                server.report(exc)
                return None
            return RemoteResults(
                server.name,
                result,
                server.title,
                lambda session_id, _message_id: self._open_hit(server, session_id),
            )

        answers = await asyncio.gather(*(ask(server) for server in servers))
        return [answer for answer in answers if answer is not None]

    def _open_hit(self, server: RemoteSource, session_id: str) -> None:
        self.host.spawn(self.open_remote(server, session_id), "open a server conversation")

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
            delete = menu.addAction(_("Delete"), lambda: self.delete_remote(server, session_id))
            delete.setEnabled(server.can("trash"))
            delete.setToolTip(_("Move the conversation to the server's Trash (it can be restored)"))
        return menu

    def new_remote(self, server: RemoteSource) -> None:
        """Start a conversation on the server and open its tab."""
        self.host.spawn(self._create(server), "start a server conversation")

    async def _create(self, server: RemoteSource) -> None:
        try:
            session_id = await server.create_session()
        except BranchwiseError as exc:
            server.report(exc)
            return
        await self.open_remote(server, session_id)

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
        self.host.spawn(self._rename(server, session_id, title), "rename a server conversation")

    async def _rename(self, server: RemoteSource, session_id: str, title: str) -> None:
        try:
            await server.rename(session_id, title)
        except BranchwiseError as exc:
            server.report(exc)
            return
        tab = self.tab_for(server, session_id)
        if tab is not None:
            self._render_tab_title(tab)

    def delete_remote(self, server: RemoteSource, session_id: str) -> None:
        """Move a server conversation to the server's Trash; its tab closes; Undo restores it."""
        self.host.spawn(self._delete(server, session_id), "delete a server conversation")

    async def _delete(self, server: RemoteSource, session_id: str) -> None:
        title = untitled(server.title(session_id))
        try:
            await server.trash(session_id)
        except BranchwiseError as exc:
            server.report(exc)
            return
        tab = self.tab_for(server, session_id)
        if tab is not None:
            self._close_tab_at(self.window.tabs.indexOf(tab))
        self.host.notices.post(
            "remote_conversation_trashed",
            Level.SUCCESS,
            title=title,
            server=server.name,
            action=NoticeAction(RESTORE_ACTION, session_id, server.connection.url),
        )

    def restore(self, url: str, session_id: str) -> None:
        """A deletion's Undo: move the conversation back from its server's Trash."""
        server = self._server_of(url)
        if server is not None:
            self.host.spawn(self._restore(server, session_id), "restore a server conversation")

    async def _restore(self, server: RemoteSource, session_id: str) -> None:
        try:
            await server.restore(session_id)
        except BranchwiseError as exc:
            server.report(exc)

    # -- tabs ---------------------------------------------------------------------------------

    def remote_tabs(self) -> list[RemoteConversationTab]:
        """Every open remote conversation tab, in tab order."""
        tabs = self.window.tabs
        return [
            tab
            for i in range(tabs.count())
            if isinstance(tab := tabs.widget(i), RemoteConversationTab)
        ]

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
            if isinstance(tab, RemoteConversationTab):
                server = tab.conversation.server
                found.append(RemoteTab(server.connection.url, tab.session_id, tab.title))
            elif isinstance(tab, WaitingRemoteTab):
                found.append(tab.saved)
        return tuple(found)

    def current_state(self) -> RemoteTab | None:
        """The server tab in front, if the tab in front is one."""
        current = self.window.tabs.currentWidget()
        if isinstance(current, RemoteConversationTab):
            server = current.conversation.server
            return RemoteTab(server.connection.url, current.session_id, current.title)
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
        """Wait for the server, open the conversation, and put its tab where the waiting one is."""
        server = waiting.server
        while True:
            await server.wait_connected()
            waiting.retranslate_ui()
            try:
                conversation = await server.open_conversation(waiting.session_id)
            except RemoteUnavailable:
                await server.lost()
                continue
            except BranchwiseError as exc:
                waiting.show_problem(exc.code)
                return
            break
        tabs = self.window.tabs
        index = tabs.indexOf(waiting)
        if index < 0:
            return  # closed meanwhile
        front = tabs.currentWidget() is waiting
        tab = self._make_tab(server, conversation, index)
        self._waiting.pop(waiting, None)
        tabs.removeTab(tabs.indexOf(waiting))
        waiting.deleteLater()
        if front:
            tabs.setCurrentWidget(tab)

    def tab_for(self, server: RemoteSource, session_id: str) -> RemoteConversationTab | None:
        """The open tab of a server's conversation."""
        return next(
            (
                t
                for t in self.remote_tabs()
                if t.session_id == session_id and t.conversation.server is server
            ),
            None,
        )

    async def open_remote(self, server: RemoteSource, session_id: str) -> RemoteConversationTab:
        """Open (or bring forward) a server conversation's tab; a failure is a notice."""
        try:
            return await self._open_tab(server, session_id)
        except BranchwiseError as exc:
            self.host.notices.post(exc.code, Level.ERROR, detail=exc.message)
            raise

    async def _navigate(self, server: RemoteSource, session_id: str) -> None:
        """The server's navigator: a new branch opens in a tab (raises if it cannot)."""
        await self._open_tab(server, session_id)

    async def _open_tab(self, server: RemoteSource, session_id: str) -> RemoteConversationTab:
        tab = self.tab_for(server, session_id)
        if tab is None:
            conversation = await server.open_conversation(session_id)
            tab = self._make_tab(server, conversation)
        self.window.tabs.setCurrentWidget(tab)
        self.window._render_empty_state()
        return tab

    def _make_tab(
        self, server: RemoteSource, conversation: RemoteConversation, index: int = -1
    ) -> RemoteConversationTab:
        """A loaded conversation's tab, following its commits, at ``index`` (-1: last)."""
        session_id = conversation.session_id
        tab = RemoteConversationTab(
            conversation,
            lambda request: self.host.spawn(
                server.request_branch(request), "branch a server conversation"
            ),
            lambda text: self.host.spawn(self._send(server, session_id, text), "send to a server"),
            self.window.tabs,
            lambda: self.host.spawn(server.stop_turn(session_id), "stop a server turn"),
            AskAgain(
                edit=lambda _turn, _text: self._cannot_ask_again(server),
                regenerate=lambda _turn: self._cannot_ask_again(server),
                retry=lambda turn: self.host.spawn(
                    self._retry(server, conversation, turn), "retry on a server"
                ),
            ),
            lambda other: self.host.spawn(
                self.open_remote(server, other), "open a server conversation"
            ),
        )
        self._follow[tab] = self.host.spawn(conversation.follow(), "follow a conversation")
        self.window.tabs.insertTab(index, tab, tab.title)
        self._render_tab_title(tab)
        conversation.subscribe(lambda: self._render_tab_title(tab))
        self.window._state_changed()
        return tab

    def _render_tab_title(self, tab: RemoteConversationTab) -> None:
        """The tab's text and tooltip: the conversation's title (a rename shows at once)."""
        if not shiboken6.isValid(tab) or (index := self.window.tabs.indexOf(tab)) < 0:
            return
        server = tab.conversation.server
        title = untitled(server.title(tab.session_id) or tab.conversation.title)
        self.window.tabs.setTabText(index, title)
        self.window.tabs.setTabToolTip(
            index, fill(_("{title} on {server}"), {"title": title, "server": server.name})
        )

    async def _send(self, server: RemoteSource, session_id: str, text: str) -> None:
        try:
            await server.send(session_id, text)
        except BranchwiseError as exc:
            server.report(exc)

    async def _retry(
        self, server: RemoteSource, conversation: RemoteConversation, turn_id: str
    ) -> None:
        """Retry: the failed turn's prompt, read from the same projection, sent again."""
        try:
            prompt = conversation.retry_prompt(turn_id)
        except BranchwiseError as exc:
            self.host.notices.post(exc.code, Level.ERROR, detail=exc.message)
            return
        await self._send(server, conversation.session_id, prompt)

    def _cannot_ask_again(self, server: RemoteSource) -> None:
        """Edit and Regenerate branch with a new prompt, which ``session-fork-v1`` cannot carry."""
        self.host.notices.post(
            "server_unsupported", Level.WARNING, detail=f"{server.name}: {server.connection.url}"
        )

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
            return
        if not isinstance(tab, RemoteConversationTab):
            return
        tab.close_tab()
        follow = self._follow.pop(tab, None)
        if follow is not None:
            follow.cancel()
        self.window.tabs.removeTab(index)
        tab.deleteLater()
        self.window._render_empty_state()
        self.window._state_changed()

    def retranslate_ui(self) -> None:
        """Render every text in the current language."""
        self.connect_action.setText(_("Connect to server…"))
        self.render_tree()
        for tab in self.remote_tabs():
            tab.retranslate_ui()
        for waiting in self.waiting_tabs():
            waiting.retranslate_ui()
        if self.dialog is not None:
            self.dialog.retranslate_ui()
