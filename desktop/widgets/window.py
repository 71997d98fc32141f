"""The main window: search, lineage sidebar, one tab per open conversation, menus, notices.

The window is the host's *navigator*: the host creates a branch, then asks
the window to show it in a new tab. It listens to the host's change flags and
hands each part only what concerns it; streamed text goes straight to the
tab of its conversation.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import shiboken6
from PySide6.QtCore import QByteArray, QDir, QPoint, QStandardPaths, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QActionGroup, QCloseEvent, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QFileDialog,
    QInputDialog,
    QLabel,
    QMainWindow,
    QMenu,
    QMessageBox,
    QSplitter,
    QStackedWidget,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from branchwise.core.conversation.fanout import FanoutTarget
from branchwise.core.conversation.settings import DEMO_SERVER
from branchwise.core.errors import BranchwiseError
from branchwise.core.i18n.language import (
    DISPLAY_NAMES,
    _,
    current_language,
    ngettext,
    set_language,
)
from branchwise.core.i18n.locales import SUPPORTED, system_locale
from branchwise.core.i18n.reasons import fill
from branchwise.core.providers.demo import DEMO_MODEL
from branchwise.core.settings import Settings
from branchwise.desktop.host.changes import Changes
from branchwise.desktop.host.conversation import ConversationRef
from branchwise.desktop.host.first_run import SERVER_FOUND, FirstRun
from branchwise.desktop.host.host import Host
from branchwise.desktop.host.importing import Importing
from branchwise.desktop.host.landing import Landing, TurnTarget, landing_row
from branchwise.desktop.host.merge_journal import JOURNAL_NAME as MERGE_JOURNAL
from branchwise.desktop.host.merging import resume_merges
from branchwise.desktop.host.notices import Level, Notice, NoticeAction
from branchwise.desktop.host.sample import create_sample
from branchwise.desktop.host.trashing import RESTORE_ACTION, Trashing
from branchwise.desktop.host.window_state import WindowState, save_window_state
from branchwise.desktop.widgets.branch_map import BranchMapDialog
from branchwise.desktop.widgets.compare_view import CompareView, show_compare
from branchwise.desktop.widgets.conversation_settings_dialog import ConversationSettingsDialog
from branchwise.desktop.widgets.conversation_tab import ConversationTab
from branchwise.desktop.widgets.fanout_grid import (
    FanoutGrid,
    SendToSeveralDialog,
    demo_heading,
    other_heading,
    own_heading,
)
from branchwise.desktop.widgets.import_dialog import ImportDialog
from branchwise.desktop.widgets.introduction import Introduction
from branchwise.desktop.widgets.notice_area import NoticeArea
from branchwise.desktop.widgets.remote_servers import RemoteServers
from branchwise.desktop.widgets.search import SHORTCUT as SEARCH_SHORTCUT
from branchwise.desktop.widgets.search import SearchPanel
from branchwise.desktop.widgets.settings_dialog import SettingsDialog
from branchwise.desktop.widgets.shortcuts_dialog import ShortcutsDialog, shortcut_rows
from branchwise.desktop.widgets.sidebar import (
    LABEL_SEPARATOR,
    RUNNING_MARK,
    Sidebar,
    ask_label,
    fitted_row_text,
)
from branchwise.desktop.widgets.theme import theme_for
from branchwise.desktop.widgets.trash_dialog import TrashDialog
from branchwise.desktop.widgets.turn_widget import untitled
from branchwise.desktop.widgets.usage_label import UsageLabel

TAB_TITLE_CHARS = 28
MAP_REFRESH_MS = 250
"""A burst of changes to the family (a turn's start and end) redraws the open map once."""
BRANCH_MAP_SHORTCUT = "Ctrl+Shift+M"
"""Conversation ▸ Branch map (free: no other action or widget key uses it)."""
SEND_SEVERAL_SHORTCUT = "Ctrl+Shift+Return"
"""Conversation ▸ Send to several… (free: Enter sends, Shift+Enter is a new line)."""
MERGE_RETRY_MS = 20_000
"""How often merges still pending (their parent held by another process) are retried."""
DISK_REFRESH_MS = 15_000
"""How often the window catches up with what other processes wrote (the CLI, serve)."""
STATE_SAVE_MS = 300
LET_GO_MS = 1000
"""How long a tab that switched conversations keeps the old one's widgets before freeing them."""
"""How soon after a tab change the window state is written."""

log = logging.getLogger(__name__)
SYSTEM_LANGUAGE = ""


class MainWindow(QMainWindow):
    """The app's one window.

    Args:
        host: the host it shows.

    Signals:
        closed: the window was closed (the app shuts the host down and quits).
        language_chosen: the user picked a language code ("" for the system's).
    """

    closed = Signal()
    language_chosen = Signal(str)

    def __init__(
        self, host: Host, parent: QWidget | None = None, first_run: FirstRun | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("mainWindow")
        self.host = host
        self._apply_theme()
        self.first_run = first_run
        #: The folder the last export went to ("": none yet; the documents folder is offered).
        self.export_folder = ""
        self.confirm_box: QMessageBox | None = None
        self._quit_confirmed = False
        self._close_when_idle: set[ConversationRef] = set()
        host.navigator = self._navigate
        self.trashing = Trashing(host)
        self.trash_dialog: TrashDialog | None = None
        self.branch_map: BranchMapDialog | None = None
        self._map_ref = ConversationRef("")
        self._map_turn: str | None = None
        self._map_refresh = QTimer(self)
        self._map_refresh.setSingleShot(True)
        self._map_refresh.setInterval(MAP_REFRESH_MS)
        self._map_refresh.timeout.connect(self._refresh_branch_map)
        self.importing = Importing(host)
        self.import_dialog: ImportDialog | None = None
        self.export_dialog: QFileDialog | None = None
        self.compare_view: CompareView | None = None
        self.send_several_dialog: SendToSeveralDialog | None = None
        self.fanout_grid: FanoutGrid | None = None
        self.sidebar = Sidebar(
            host, self.open_session, self.new_conversation, self, self.delete_conversation
        )
        self.sidebar.delete_with_branches = self.delete_with_branches
        self.search_panel = SearchPanel(host, self.open_hit, self)
        self.left_stack = QStackedWidget(self)
        self.left_stack.addWidget(self.sidebar)
        self.left_stack.addWidget(self.search_panel.results_view)
        self.search_panel.searching_changed.connect(self._searching_changed)
        left = QWidget(self)
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        left_layout.setSpacing(0)
        left_layout.addWidget(self.search_panel)
        left_layout.addWidget(self.left_stack, 1)
        self.tabs = QTabWidget(self)
        self.tabs.setObjectName("conversationTabs")
        self.tabs.setTabsClosable(True)
        self.tabs.setMovable(True)
        self.tabs.setDocumentMode(True)
        # A tab's text is already fitted (its title elided in the middle): the bar cuts nothing,
        # so a label is never lost; many tabs scroll.
        self.tabs.setElideMode(Qt.TextElideMode.ElideNone)
        self.tabs.setUsesScrollButtons(True)
        self.tabs.tabCloseRequested.connect(self._close_tab_at)
        self.tabs.currentChanged.connect(self._current_changed)
        self.empty_label = QLabel(self)
        self.empty_label.setObjectName("emptyState")
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty_label.setWordWrap(True)
        self.notice_area = NoticeArea(
            host.notices, self.named, self._notice_action, self, on_decline=self._notice_declined
        )
        right = QWidget(self)
        right_layout = QVBoxLayout(right)
        right_layout.setContentsMargins(0, 0, 0, 0)
        right_layout.setSpacing(0)
        right_layout.addWidget(self.tabs, 1)
        self.introduction = Introduction(self)
        self.introduction.sample_requested.connect(self.try_sample)
        self.introduction.dismissed.connect(self.dismiss_introduction)
        self.intro_dismissed = False
        self.empty_state = QWidget(self)
        empty_layout = QVBoxLayout(self.empty_state)
        empty_layout.addStretch(1)
        empty_layout.addWidget(self.introduction, 0, Qt.AlignmentFlag.AlignHCenter)
        empty_layout.addWidget(self.empty_label)
        empty_layout.addStretch(1)
        right_layout.addWidget(self.empty_state, 1)
        right_layout.addWidget(self.notice_area)
        self.splitter = splitter = QSplitter(self)
        splitter.setObjectName("mainSplitter")
        splitter.addWidget(left)
        splitter.addWidget(right)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([260, 760])
        self.setCentralWidget(splitter)
        # Tabs opened, closed, moved or brought forward are saved shortly after,
        # so a crash restores what the user last saw.
        self._state_timer = QTimer(self)
        self._state_timer.setSingleShot(True)
        self._state_timer.setInterval(STATE_SAVE_MS)
        self._state_timer.timeout.connect(self.save_state)
        self._restoring = False
        # Merges another process kept us from writing: at start, then now and then.
        self._merge_timer = QTimer(self)
        self._merge_timer.setInterval(MERGE_RETRY_MS)
        self._merge_timer.timeout.connect(self.resume_pending_merges)
        self._merge_timer.start()
        QTimer.singleShot(0, self, self.resume_pending_merges)
        # What other processes wrote (merges into a parent, say) shows within a refresh.
        self.disk_refresh_timer = QTimer(self)
        self.disk_refresh_timer.setInterval(DISK_REFRESH_MS)
        self.disk_refresh_timer.timeout.connect(host.refresh_from_disk)
        self.disk_refresh_timer.start()
        self.tabs.tabBar().tabMoved.connect(self._state_changed)
        self.tabs.tabBar().setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.tabs.tabBar().customContextMenuRequested.connect(self._tab_context_menu)
        splitter.splitterMoved.connect(self._state_changed)
        self.provider_label = QLabel(self)
        self.provider_label.setObjectName("providerLabel")
        self.statusBar().addPermanentWidget(self.provider_label)
        self.usage_label = UsageLabel(host, self)
        self.statusBar().addWidget(self.usage_label)
        self._settings_dialog: SettingsDialog | None = None
        self._build_menus()
        self.remote_servers = RemoteServers(self)
        self.language_chosen.connect(self.choose_language)
        self._unsubscribe = [host.subscribe(self.apply_changes), host.subscribe_text(self._text)]
        self.resize(1100, 720)
        self.retranslate_ui()
        self.sidebar.rebuild()
        self._render_empty_state()

    # -- menus ------------------------------------------------------------------

    def _build_menus(self) -> None:
        self._export_tip = self._settings_tip = ""  # set in the language by retranslate_ui
        bar = self.menuBar()
        self.file_menu = QMenu(self)
        self.new_action = QAction(self)
        self.new_action.setShortcut(QKeySequence.StandardKey.New)
        self.new_action.triggered.connect(self.new_conversation)
        self.import_action = QAction(self)
        self.import_action.setObjectName("importAction")
        self.import_action.triggered.connect(self.show_import)
        self.export_action = QAction(self)
        self.export_action.setObjectName("exportAction")
        self.export_action.triggered.connect(self.ask_export)
        self.trash_action = QAction(self)
        self.trash_action.setObjectName("trashAction")
        self.trash_action.triggered.connect(self.show_trash)
        self.settings_action = QAction(self)
        # Ctrl+, as in most desktop apps (Qt's Preferences key is empty off macOS; Cmd+, there).
        self.settings_action.setShortcut(QKeySequence("Ctrl+,"))
        self.settings_action.setMenuRole(QAction.MenuRole.PreferencesRole)
        self.settings_action.triggered.connect(self.show_settings)
        self.quit_action = QAction(self)
        self.quit_action.setShortcut(QKeySequence.StandardKey.Quit)
        self.quit_action.setMenuRole(QAction.MenuRole.QuitRole)
        self.quit_action.triggered.connect(self.close)
        self.language_menu = QMenu(self)
        self.language_group = QActionGroup(self)
        self.language_group.setExclusive(True)
        self.language_actions: dict[str, QAction] = {}
        for code in (SYSTEM_LANGUAGE, *SUPPORTED):
            action = QAction(self)
            action.setCheckable(True)
            action.setData(code)
            action.triggered.connect(lambda _c=False, code=code: self.language_chosen.emit(code))
            self.language_group.addAction(action)
            self.language_menu.addAction(action)
            self.language_actions[code] = action
        self.file_menu.addAction(self.new_action)
        self.file_menu.addAction(self.import_action)
        self.file_menu.addAction(self.export_action)
        self.file_menu.addAction(self.trash_action)
        self.file_menu.addSeparator()
        self.file_menu.addAction(self.settings_action)
        self.file_menu.addMenu(self.language_menu)
        self.file_menu.addSeparator()
        self.file_menu.addAction(self.quit_action)
        self.help_menu = QMenu(self)
        self.about_action = QAction(self)
        self.about_action.setMenuRole(QAction.MenuRole.AboutRole)
        self.about_action.triggered.connect(self.show_about)
        self.help_menu.addAction(self.about_action)
        self.edit_menu = QMenu(self)
        self.search_action = QAction(self)
        self.search_action.setShortcut(QKeySequence(SEARCH_SHORTCUT))
        self.search_action.triggered.connect(self.search_panel.focus_field)
        self.find_action = QAction(self)
        self.find_action.setShortcut(QKeySequence.StandardKey.Find)
        self.find_action.triggered.connect(self.find_in_conversation)
        self.edit_menu.addAction(self.search_action)
        self.edit_menu.addAction(self.find_action)
        self.conversation_menu = QMenu(self)
        self.close_tab_action = self._action(QKeySequence("Ctrl+W"), self.close_current_tab)
        self.rename_action = self._action(QKeySequence("F2"), self.rename_current)
        self.rename_label_action = QAction(self)
        self.rename_label_action.triggered.connect(
            lambda _checked=False: self.rename_label_current()
        )
        self.stop_action = self._action(QKeySequence("Esc"), self.stop_current)
        self.branch_last_action = self._action(QKeySequence("Ctrl+Shift+B"), self.branch_last)
        self.branch_map_action = self._action(
            QKeySequence(BRANCH_MAP_SHORTCUT), lambda: self.show_branch_map()
        )
        self.branch_map_action.setObjectName("branchMapAction")
        self.send_several_action = self._action(
            QKeySequence(SEND_SEVERAL_SHORTCUT), lambda: self.send_to_several()
        )
        self.send_several_action.setObjectName("sendSeveralAction")
        self.next_tab_action = self._action(QKeySequence("Ctrl+Tab"), lambda: self._step_tab(1))
        self.previous_tab_action = self._action(
            QKeySequence("Ctrl+Shift+Tab"), lambda: self._step_tab(-1)
        )
        self.previous_alternative_action = self._action(
            QKeySequence("Alt+Left"), lambda: self.switch_alternative(-1)
        )
        self.next_alternative_action = self._action(
            QKeySequence("Alt+Right"), lambda: self.switch_alternative(1)
        )
        self.conversation_settings_action = QAction(self)
        self.conversation_settings_action.triggered.connect(
            lambda _checked=False: self.show_conversation_settings()
        )
        for action in (
            self.send_several_action,
            self.branch_last_action,
            self.branch_map_action,
            self.stop_action,
            self.rename_action,
            self.rename_label_action,
            self.conversation_settings_action,
        ):
            self.conversation_menu.addAction(action)
        self.conversation_menu.addSeparator()
        self.conversation_menu.addAction(self.previous_alternative_action)
        self.conversation_menu.addAction(self.next_alternative_action)
        self.conversation_menu.addSeparator()
        for action in (self.next_tab_action, self.previous_tab_action, self.close_tab_action):
            self.conversation_menu.addAction(action)
        self.shortcuts_action = self._action(
            QKeySequence.StandardKey.HelpContents, self.show_shortcuts
        )
        self.help_menu.insertAction(self.about_action, self.shortcuts_action)
        bar.addMenu(self.file_menu)
        bar.addMenu(self.edit_menu)
        bar.addMenu(self.conversation_menu)
        bar.addMenu(self.help_menu)
        self._render_actions()

    def _action(
        self, keys: QKeySequence | QKeySequence.StandardKey, slot: Callable[[], object]
    ) -> QAction:
        action = QAction(self)
        action.setShortcut(keys)
        action.triggered.connect(lambda _checked=False: slot())
        self.addAction(action)  # active even when the menu bar is hidden
        return action

    # -- keyboard actions --------------------------------------------------------

    def close_current_tab(self) -> None:
        """Ctrl+W: close the tab in front (asking first if it is answering)."""
        index = self.tabs.currentIndex()
        if index >= 0:
            self._close_tab_at(index)

    def rename_current(self) -> None:
        """F2: rename the conversation in front (on its server, for a server's)."""
        tab = self.current_tab()
        if tab is None:
            return
        server = self.host.server_of(tab.ref)
        if server is not None:
            if server.can("rename"):
                self.remote_servers.ask_rename(server, tab.session_id)
        elif not tab.ref.remote:
            self.sidebar.ask_rename(tab.session_id)

    def named(self, session_id: str) -> str:
        """How a notice names a conversation of this machine: its title, and its label if a branch.

        ("Branch created: <title> · Regenerated 2"), rendered when the notice is.
        """
        title = untitled(self.host.title_anywhere(session_id))
        label = self.host.label_at(ConversationRef(session_id))
        return title + LABEL_SEPARATOR + label if label else title

    def rename_label_current(self) -> None:
        """Rename the label of the branch in front (on its server, for a server's)."""
        tab = self.current_tab()
        if tab is not None:
            self.ask_rename_label(tab)

    def ask_rename_label(self, tab: ConversationTab) -> QInputDialog | None:
        """Ask for a branch's new label (non-blocking); the host writes it off the UI thread."""
        return ask_label(self.host, tab.ref, self)

    def tab_menu(self, tab: ConversationTab) -> QMenu:
        """A tab's menu: Rename…, and Rename label… for a branch."""
        menu = QMenu(self)
        menu.setObjectName("tabMenu")
        menu.addAction(_("Rename…"), lambda: self._rename_tab(tab))
        manifest = self.host.manifest_at(tab.ref)
        if manifest is not None and manifest.parent is not None:
            menu.addAction(_("Rename label…"), lambda: self.ask_rename_label(tab))
        return menu

    def _rename_tab(self, tab: ConversationTab) -> None:
        self.tabs.setCurrentWidget(tab)
        self.rename_current()

    def _tab_context_menu(self, pos: QPoint) -> None:
        bar = self.tabs.tabBar()
        widget = self.tabs.widget(bar.tabAt(pos))
        if isinstance(widget, ConversationTab):
            self.tab_menu(widget).popup(bar.mapToGlobal(pos))

    def stop_current(self) -> None:
        """Esc: stop the answer streaming in the tab in front."""
        tab = self.current_tab()
        if tab is not None and self.host.running_at(tab.ref):
            self.host.stop_at(tab.ref)

    def branch_last(self) -> None:
        """Ctrl+Shift+B: branch at the last finished turn of the tab in front."""
        tab = self.current_tab()
        if tab is None:
            return
        widgets = [w for w in tab.transcript.turn_widgets() if w.branch_state.enabled]
        if widgets:
            widgets[-1].branch_button.click()
        else:
            self.host.notices.post("nothing_to_branch", Level.INFO)

    def show_conversation_settings(self) -> ConversationSettingsDialog | None:
        """Conversation ▸ Conversation settings… for the tab in front."""
        tab = self.current_tab()
        if tab is None or tab.refusal("configure") is not None:
            return None  # the action is disabled with the reason
        session = self.host.session(tab.session_id)
        if session is None:
            return None
        session_id = tab.session_id
        dialog = ConversationSettingsDialog(
            untitled(tab.title),
            session.conversation_settings,
            self.host.settings,
            lambda chosen: self.host.configure(session_id, chosen),
            self,
        )
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.open()
        return dialog

    def _step_tab(self, step: int) -> None:
        count = self.tabs.count()
        if count > 1:
            self.tabs.setCurrentIndex((self.tabs.currentIndex() + step) % count)

    def show_shortcuts(self) -> ShortcutsDialog:
        """Help ▸ Keyboard shortcuts."""
        actions = [
            self.new_action,
            self.search_action,
            self.find_action,
            self.send_several_action,
            self.branch_last_action,
            self.previous_alternative_action,
            self.next_alternative_action,
            self.branch_map_action,
            self.stop_action,
            self.rename_action,
            self.next_tab_action,
            self.previous_tab_action,
            self.close_tab_action,
            self.settings_action,
            self.shortcuts_action,
            self.quit_action,
        ]
        extra = [
            # Key names stay as printed on the keys, in every language.
            (_("Send the message"), "Enter"),
            (_("New line in the message"), "Shift+Enter"),
            (_("Next or previous match in Find"), "Enter, Shift+Enter"),
        ]
        dialog = ShortcutsDialog(shortcut_rows(actions, extra), self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.open()
        return dialog

    def _render_actions(self) -> None:
        tab = self.current_tab()
        has_tab = tab is not None
        for action in (
            self.close_tab_action,
            self.rename_action,
            self.send_several_action,
            self.branch_last_action,
            self.previous_alternative_action,
            self.next_alternative_action,
            self.branch_map_action,
        ):
            action.setEnabled(has_tab)
        # What a server's conversation cannot do is disabled, and its tooltip says why.
        for action, kind, tip in (
            (self.conversation_settings_action, "configure", self._settings_tip),
            (self.export_action, "export", self._export_tip),
        ):
            refused = tab.refusal(kind) if tab is not None else None
            action.setEnabled(has_tab and refused is None)
            action.setToolTip(refused or tip)
        self.stop_action.setEnabled(tab is not None and self.host.running_at(tab.ref))
        manifest = self.host.manifest_at(tab.ref) if tab is not None else None
        self.rename_label_action.setEnabled(manifest is not None and manifest.parent is not None)
        several = self.tabs.count() > 1
        self.next_tab_action.setEnabled(several)
        self.previous_tab_action.setEnabled(several)

    # -- what the UI exposes -------------------------------------------------

    def conversation_tabs(self) -> list[ConversationTab]:
        """Every open conversation tab, in tab order."""
        return [
            tab
            for i in range(self.tabs.count())
            if isinstance(tab := self.tabs.widget(i), ConversationTab)
        ]

    def tab_for(self, session_id: str) -> ConversationTab | None:
        """The tab of a conversation of this machine, if it is open."""
        return self.tab_for_ref(ConversationRef(session_id))

    def tab_for_ref(self, ref: ConversationRef) -> ConversationTab | None:
        """The tab of a conversation of this machine or of a server, if it is open."""
        return next((t for t in self.conversation_tabs() if t.ref == ref), None)

    def current_tab(self) -> ConversationTab | None:
        """The tab in front."""
        widget = self.tabs.currentWidget()
        return widget if isinstance(widget, ConversationTab) else None

    # -- opening and closing ---------------------------------------------------

    def open_tab(self, session_id: str) -> ConversationTab:
        """Open (or bring forward) the tab of a conversation.

        Raises:
            BranchwiseError: the conversation cannot be opened.
        """
        tab = self.tab_for(session_id)
        if tab is None:
            self.host.open_session(session_id)
            tab = self._add_tab(ConversationRef(session_id))
        self.tabs.setCurrentWidget(tab)
        self._render_empty_state()
        return tab

    async def open_remote(self, ref: ConversationRef, index: int = -1) -> ConversationTab:
        """Open (or bring forward) the tab of a server's conversation, at ``index`` (-1: last).

        Raises:
            RemoteRefusal, RemoteUnavailable: the server could not give it.
        """
        tab = self.tab_for_ref(ref)
        if tab is None:
            await self.host.open(ref)
            tab = self.tab_for_ref(ref)  # opened meanwhile by another click
            if tab is None:
                tab = self._add_tab(ref, index)
        self.tabs.setCurrentWidget(tab)
        self._render_empty_state()
        return tab

    def _add_tab(self, ref: ConversationRef, index: int = -1) -> ConversationTab:
        tab = ConversationTab(self.host, ref, self.open_ref, self, self.open_at)
        tab.banner.map_requested.connect(lambda: self.show_branch_map(tab.ref))
        tab.composer.on_several = lambda _text: self.send_to_several(tab)
        self.tabs.insertTab(index, tab, "")
        self._render_tab_title(tab)
        self._state_changed()
        return tab

    def open_ref(self, ref: ConversationRef) -> None:
        """A click that opens a conversation of either source; a failure becomes a notice."""
        if ref.server is None:
            self.open_session(ref.session_id)
        else:
            self.host.spawn(self._open_remote_or_say(ref), "open a server conversation")

    async def _open_remote_or_say(self, ref: ConversationRef) -> None:
        try:
            await self.open_remote(ref)
        except BranchwiseError as exc:
            self.host.notices.post(exc.code, Level.ERROR, detail=exc.message)

    # -- opening at a turn ---------------------------------------------------------

    def open_at(
        self, ref: ConversationRef, target: TurnTarget, in_place_of: ConversationTab | None = None
    ) -> None:
        """Open a conversation scrolled to a turn, highlighted; a failure becomes a notice.

        The shared jump of "Open parent conversation", brought-back cards, the
        alternatives switcher and the branch map. With ``in_place_of``, that
        tab switches to the conversation (the tab stays where it was; the
        conversation it showed is closed unless a turn still runs there); when
        the conversation already has a tab, that tab comes forward instead, so
        a conversation is never shown in two tabs. docs/architecture.md,
        "Opening a conversation at a turn".
        """
        if ref.server is None:
            # This machine's conversations open at once (a big one on its last page),
            # so the tab is there before the turn is looked for.
            try:
                tab = self._show_in_tab(ref, in_place_of)
            except BranchwiseError as exc:
                self.host.notices.post(exc.code, Level.ERROR, detail=exc.message)
                return
            landed = self._land_now(tab, ref, target)
            if landed:
                return
        self.host.spawn(self.show_turn(ref, target, in_place_of), "open a conversation at a turn")

    def _land_now(self, tab: ConversationTab, ref: ConversationRef, target: TurnTarget) -> bool:
        """Land at once when the open rows hold the turn (no waiting for a full read)."""
        conversation = self.host.conversation(ref)
        if conversation is None:
            return False
        found = landing_row(conversation.rows, conversation.projection, target)
        if found is None:
            return False
        tab.land(Landing(ref, *found))
        return True

    async def show_turn(
        self, ref: ConversationRef, target: TurnTarget, in_place_of: ConversationTab | None = None
    ) -> ConversationTab | None:
        """:meth:`open_at`, awaited: the tab once landed (``None``: a notice said why not)."""
        try:
            if ref.server is not None:
                await self.host.open(ref)
            tab = self._show_in_tab(ref, in_place_of)
            landing = await self.host.open_at_turn(ref, target)
        except BranchwiseError as exc:
            self.host.notices.post(exc.code, Level.ERROR, detail=exc.message)
            return None
        if not shiboken6.isValid(tab) or self.tabs.indexOf(tab) < 0:
            return None  # closed while it was read
        tab.land(landing)
        return tab

    def _show_in_tab(
        self, ref: ConversationRef, in_place_of: ConversationTab | None
    ) -> ConversationTab:
        """Bring forward the conversation's tab, or show it in ``in_place_of``, or a new tab.

        Raises:
            BranchwiseError: a local conversation cannot be opened.
        """
        tab = self.tab_for_ref(ref)
        if tab is None:
            if ref.server is None:
                self.host.open_session(ref.session_id)
            place = self.tabs.indexOf(in_place_of) if in_place_of is not None else -1
            tab = self._add_tab(ref, place)
            self.tabs.setCurrentWidget(tab)
            if place >= 0 and in_place_of is not None:
                self._let_go(in_place_of)
        self.tabs.setCurrentWidget(tab)
        self._render_empty_state()
        return tab

    def _let_go(self, tab: ConversationTab) -> None:
        """A tab switched to another conversation: close the one it showed.

        Freeing a page of rendered turns and closing the conversation take
        longer than building the new one's first rows, so both wait until the
        new conversation has painted. A turn still running there goes on, and
        the conversation is closed when it ends (unless a tab shows it again
        by then).
        """
        self.tabs.removeTab(self.tabs.indexOf(tab))
        self._state_changed()
        tab.hide()

        def free() -> None:
            tab.deleteLater()
            self._close_when_idle.add(tab.ref)
            self._close_idle()

        QTimer.singleShot(LET_GO_MS, tab, free)

    def _close_idle(self) -> None:
        for ref in list(self._close_when_idle):
            if self.tab_for_ref(ref) is not None:
                self._close_when_idle.discard(ref)
            elif ref.remote or not self.host.running_at(ref):  # a server's turn runs on there
                self._close_when_idle.discard(ref)
                self.host.spawn(self.host.close(ref), "close a conversation")

    def switch_alternative(self, by: int) -> None:
        """Alt+Left / Alt+Right: the previous or next alternative at the turn being read."""
        tab = self.current_tab()
        if tab is not None and not tab.switch_alternative(by):
            self.host.notices.post("no_alternatives", Level.INFO)

    def open_session(self, session_id: str) -> None:
        """A click that opens a conversation; a failure becomes a notice."""
        try:
            self.open_tab(session_id)
        except BranchwiseError as exc:
            self.host.notices.post(exc.code, Level.ERROR, detail=exc.message)

    def open_hit(self, session_id: str, message_id: str) -> None:
        """A search hit: open its conversation, then bring its message into view and flash it."""
        try:
            tab = self.open_tab(session_id)
        except BranchwiseError as exc:
            self.host.notices.post(exc.code, Level.ERROR, detail=exc.message)
            return
        session = self.host.session(session_id)
        if session is not None and session.loaded:
            tab.reveal_message(message_id)
        else:
            self.host.spawn(tab.reveal_when_loaded(message_id), "show a search hit")

    def compare(self, refs: Sequence[ConversationRef], at_turn: int | None = None) -> None:
        """Show two to four conversations of one tree side by side (:attr:`compare_view`).

        The branch map, the sibling switcher and the menus call this. ``at_turn``
        is the turn number, as the transcripts number it, to open at (``None``:
        the first turn after the split). A refusal (different trees, a server's
        conversation) is a notice.
        """
        show_compare(self.host, refs, self, self._compared, at_turn)

    def _compared(self, view: CompareView) -> None:
        self.compare_view = view

    # -- send to several ----------------------------------------------------------------

    def send_to_several(self, tab: ConversationTab | None = None) -> SendToSeveralDialog | None:
        """Conversation ▸ Send to several…: choose the models for the composer's message.

        The configured server's models are offered (asked off the UI thread),
        else the demo responder's; sending opens :attr:`fanout_grid`.
        """
        tab = tab or self.current_tab()
        if tab is None:
            return None
        text = tab.composer.editor.toPlainText().strip()
        refused = tab.refusal("send")
        if refused is not None or tab.running or not text:
            return None  # the button is disabled then, and says why
        ref = tab.ref
        conversation = self.host.conversation(ref)
        projection = conversation.projection if conversation is not None else None
        own = projection.settings.model if projection is not None else ""
        settings = self.host.settings
        configured = settings.model if settings.configured else ""
        default_model = own or configured or DEMO_MODEL
        heading = None
        if ref.server is None:
            heading = own_heading(settings.base_url if settings.configured else None)
        dialog = SendToSeveralDialog(
            [default_model], default_model, [default_model], self, heading=heading
        )
        dialog.samples.setValue(2)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.accepted.connect(lambda: self._fan_out(tab, text, dialog.targets()))
        dialog.destroyed.connect(lambda: setattr(self, "send_several_dialog", None))
        dialog.open()
        self.send_several_dialog = dialog
        if ref.server is None:
            if settings.configured:
                dialog.add_server(DEMO_SERVER, demo_heading, [DEMO_MODEL])
            self.host.spawn(self._offer_models(dialog, settings), "list the servers' models")
        else:
            self.host.spawn(self._offer_served_models(dialog, ref), "list the server's models")
        return dialog

    async def _offer_served_models(self, dialog: SendToSeveralDialog, ref: ConversationRef) -> None:
        """Offer the models the conversation's ``branchwise serve`` answers with (its answers
        run there)."""
        models = await self.host.server_operations.models(ref)
        if shiboken6.isValid(dialog):
            for model in models:
                dialog.add_model(model, checked=False)

    async def _offer_models(self, dialog: SendToSeveralDialog, settings: Settings) -> None:
        """Offer the app's server's models, then those of the saved servers and this
        machine's (asked off the UI thread; a closed dialog is left alone)."""
        if settings.configured:
            listed = await self.host.operations.list_models(settings)
            if not shiboken6.isValid(dialog):
                return
            for model in listed.models:
                if model not in listed.embedding:
                    dialog.add_model(model, checked=False)
        for other in await self.host.operations.other_servers(settings):
            if not shiboken6.isValid(dialog):
                return
            dialog.add_server(other.base_url, other_heading(other), other.models)

    def _fan_out(
        self, tab: ConversationTab, text: str, targets: Sequence[FanoutTarget]
    ) -> FanoutGrid:
        alive = shiboken6.isValid(tab)
        cleared = alive and tab.composer.editor.toPlainText().strip() == text
        if cleared:
            tab.composer.editor.clear()
        files = tab.composer.take_attachments() if alive else ()

        def refused(_exc: BranchwiseError) -> None:
            """Nothing was made: the prompt and its files go back to the composer."""
            if not shiboken6.isValid(tab):
                return
            if cleared:
                tab.composer.restore(text, files)
            else:
                tab.composer.add_attachments(files)

        grid = FanoutGrid(
            self.host, tab.ref, text, targets, self.open_ref, self, files=files, on_refused=refused
        )
        grid.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        grid.show()
        grid.start()
        self.fanout_grid = grid
        return grid

    # -- the branch map ---------------------------------------------------------

    def show_branch_map(
        self, ref: ConversationRef | None = None, turn_id: str | None = None
    ) -> None:
        """Conversation ▸ Branch map: the family of ``ref`` (default: the tab in front, its
        turn in view highlighted).

        The host reads and lays it out off the UI thread; the one map window
        then shows it (a refusal is a notice).
        """
        if ref is None:
            tab = self.current_tab()
            if tab is None:
                return
            ref, turn_id = tab.ref, tab.turn_in_view()
        self.host.spawn(self._read_branch_map(ref, turn_id, redraw=False), "show the branch map")

    async def _read_branch_map(
        self, ref: ConversationRef, turn_id: str | None, *, redraw: bool
    ) -> None:
        try:
            layout = await self.host.branch_map(ref, turn_id)
        except BranchwiseError as exc:
            self.host.notices.post(exc.code, Level.ERROR, detail=exc.message)
            return
        if self.branch_map is None:
            self.branch_map = BranchMapDialog(
                lambda sid, turn: self.open_at(self._map_ref.sibling(sid), TurnTarget(turn)), self
            )
            self.branch_map.prune_requested.connect(self.delete_with_branches)
            self.branch_map.language_changed.connect(self._refresh_branch_map)
        elif redraw and not self.branch_map.isVisible():
            return  # closed meanwhile
        self._map_ref, self._map_turn = ref, turn_id
        self.branch_map.show_layout(layout, can_prune=ref.server is None, keep_selection=redraw)
        if not redraw:
            self.branch_map.show()
            self.branch_map.raise_()

    def find_in_conversation(self) -> None:
        """Ctrl+F: the find bar of the conversation in front."""
        tab = self.current_tab()
        if tab is not None:
            tab.open_find()

    def _searching_changed(self, searching: bool) -> None:
        self.left_stack.setCurrentWidget(
            self.search_panel.results_view if searching else self.sidebar
        )

    async def _navigate(self, session_id: str) -> None:  # this machine's branches
        """The host's navigator: show a newly created branch (raises if it cannot)."""
        self.open_tab(session_id)

    def new_conversation(self) -> None:
        """Create a conversation and put the cursor in its composer."""
        try:
            session = self.host.create_session()
        except BranchwiseError as exc:
            self.host.notices.post(exc.code, Level.ERROR, detail=exc.message)
            return
        tab = self.open_tab(session.session_id)
        tab.composer.editor.setFocus()

    def try_sample(self) -> None:
        """The introduction's "Try a sample conversation": made off the UI thread, then shown."""
        self.introduction.set_making(True)

        async def make() -> None:
            try:
                sample = await create_sample(self.host)
            finally:
                self.introduction.set_making(False)
            self.open_tab(sample.root)

        self.host.spawn(make(), "make the sample conversation")

    def dismiss_introduction(self) -> None:
        """Hide the introduction for good (remembered in the window state)."""
        self.intro_dismissed = True
        self._render_empty_state()
        self.save_state()

    def _close_tab_at(self, index: int) -> None:
        tab = self.tabs.widget(index)
        if not isinstance(tab, ConversationTab):
            return
        if tab.ref.remote:  # a server's turn runs on there: nothing to stop here
            self._remove_tab(tab)
            self.host.spawn(self.host.close(tab.ref), "close a server conversation")
            return
        if self.host.is_running(tab.session_id):
            text = fill(
                _("“{title}” is still answering. Stop the answer and close it?"),
                {"title": untitled(self.host.title(tab.session_id))},
            )
            self._confirm_stop(text, _("Stop and close"), lambda: self._close_tab(tab))
            return
        self._close_tab(tab)

    def _close_tab(self, tab: ConversationTab) -> None:
        if self.tabs.indexOf(tab) < 0:
            return
        self._remove_tab(tab)
        self.host.spawn(self.host.close_session(tab.session_id), "close conversation")

    def _remove_tab(self, tab: ConversationTab) -> None:
        self.tabs.removeTab(self.tabs.indexOf(tab))
        self._state_changed()
        tab.deleteLater()
        self._render_empty_state()

    # -- the Trash and export ------------------------------------------------------

    def delete_conversation(self, session_id: str) -> None:
        """Move a conversation to the Trash: its tab closes, a running turn stops first.

        The notice that follows has an Undo button.
        """
        tab = self.tab_for(session_id)
        if tab is not None:
            self._remove_tab(tab)  # the host closes it (turn committed as cancelled)
        self.host.spawn(self._delete_then_refresh(session_id), "delete conversation")

    def delete_with_branches(self, session_id: str) -> None:
        """Move a conversation and every branch below it to the Trash: one notice, one Undo.

        Their tabs close first (a running turn stops); the branch map, if
        open, is drawn again without them.
        """
        for member in self.trashing.subtree(session_id):
            tab = self.tab_for(member)
            if tab is not None:
                self._remove_tab(tab)

        async def prune() -> None:
            if await self.trashing.delete_with_branches(session_id):
                self._refresh_trash_view()
                self._refresh_branch_map()

        self.host.spawn(prune(), "delete a conversation with its branches")

    def _refresh_branch_map(self) -> None:
        """Draw the open map again (closed when its conversation went to the Trash)."""
        dialog = self.branch_map
        if dialog is None or not dialog.isVisible():
            return
        ref = self._map_ref
        if ref.server is None and ref.session_id not in self.host.index.by_id:
            remaining = dialog.view.layout_shown
            alive = [
                p.node.session_id
                for p in (remaining.nodes if remaining is not None else ())
                if p.node.session_id in self.host.index.by_id
            ]
            if not alive:
                dialog.close()
                return
            ref = ref.sibling(alive[0])
        turn = self._map_turn if ref == self._map_ref else None
        self.host.spawn(self._read_branch_map(ref, turn, redraw=True), "redraw the branch map")

    async def _delete_then_refresh(self, session_id: str) -> None:
        await self.trashing.delete(session_id)
        self._refresh_trash_view()

    def _refresh_trash_view(self) -> None:
        if self.trash_dialog is not None and self.trash_dialog.isVisible():
            self.trash_dialog.refresh()

    def show_trash(self) -> TrashDialog:
        """Open the Trash view (one at a time; an open one is brought forward)."""
        dialog = self.trash_dialog
        if dialog is None:
            dialog = TrashDialog(self.trashing, self.host.spawn, self)
            self.trash_dialog = dialog
        dialog.refresh()
        dialog.open()
        dialog.raise_()
        return dialog

    def show_import(self) -> ImportDialog:
        """File ▸ Import…: the import dialog (one at a time; an open one is brought forward)."""
        dialog = self.import_dialog
        if dialog is None:
            dialog = ImportDialog(self.importing, self.host.spawn, self)
            self.import_dialog = dialog
        dialog.open()
        dialog.raise_()
        return dialog

    def ask_export(self) -> QFileDialog | None:
        """File ▸ Export conversation…: a save dialog; the format follows the file type."""
        tab = self.current_tab()
        if tab is None or tab.refusal("export") is not None:
            return None  # the action is disabled with the reason
        session_id = tab.session_id
        dialog = QFileDialog(self, _("Export conversation"))
        dialog.setObjectName("exportDialog")
        dialog.setOption(QFileDialog.Option.DontUseNativeDialog)  # the same on every desktop
        dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
        markdown, json = _("Markdown (*.md)"), _("JSON (*.json)")
        dialog.setNameFilters([markdown, json])
        dialog.setDefaultSuffix("md")
        dialog.filterSelected.connect(
            lambda chosen: dialog.setDefaultSuffix("json" if chosen == json else "md")
        )
        dialog.setDirectory(self._export_folder())
        dialog.selectFile(_file_name(tab.title))
        dialog.fileSelected.connect(lambda path: self.export_to(session_id, Path(path)))
        dialog.finished.connect(dialog.deleteLater)
        self.export_dialog = dialog
        dialog.open()
        return dialog

    def _export_folder(self) -> str:
        """Where the export dialog opens: the last export's folder, else the user's documents.

        Never the working folder the app happened to start in.
        """
        if self.export_folder and QDir(self.export_folder).exists():
            return self.export_folder
        documents = QStandardPaths.writableLocation(
            QStandardPaths.StandardLocation.DocumentsLocation
        )
        return documents if documents and QDir(documents).exists() else QDir.homePath()

    def export_to(self, session_id: str, path: Path) -> None:
        """Write the export (the save dialog already asked before replacing a file)."""
        self.export_folder = str(path.parent)
        self._state_changed()
        self.host.spawn(
            self.host.operations.export(session_id, path, initiator=self), "export conversation"
        )

    def _notice_action(self, action: NoticeAction) -> None:
        if action.kind == "use_server" and self.first_run is not None:
            self.first_run.accept()
        elif action.kind == RESTORE_ACTION and action.server:
            self.remote_servers.restore(action.server, action.session_id)
        elif action.kind == RESTORE_ACTION:
            self.host.spawn(self._restore_then_refresh(action.session_id), "restore conversation")
        elif action.kind == "open_session":
            self.host.spawn(self.host.open_kept_child(action.session_id), "open conversation")

    async def _restore_then_refresh(self, session_id: str) -> None:
        await self.trashing.restore(session_id)
        self._refresh_trash_view()

    def _notice_declined(self, notice: Notice) -> None:
        if notice.code == SERVER_FOUND and self.first_run is not None:
            self.first_run.decline()

    def _confirm_stop(self, text: str, accept_text: str, then: Callable[[], None]) -> None:
        """Ask once whether to stop running answers; ``then`` runs only on "stop".

        Window-modal and asynchronous (``open``, not ``exec``): the answers keep
        streaming while the question is up, and a second request while it is
        shown asks nothing more.
        """
        if self.confirm_box is not None:
            return
        title = _("Answers still streaming")
        box = QMessageBox(QMessageBox.Icon.Question, title, text, parent=self)
        box.setObjectName("confirmStop")
        stop = box.addButton(accept_text, QMessageBox.ButtonRole.AcceptRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(stop)

        def finished(_result: int) -> None:
            self.confirm_box = None
            box.deleteLater()
            if box.clickedButton() is stop:
                then()

        box.finished.connect(finished)
        self.confirm_box = box
        box.open()

    def _running_sessions(self) -> list[str]:
        return [s.session_id for s in self.host.open_sessions if s.running]

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt override
        """Closing the window ends the app (after running turns are committed).

        While answers stream the user is asked first; they are stopped (and
        committed as ``cancelled``) only on "Stop and quit".
        """
        running = self._running_sessions()
        if running and not self._quit_confirmed:
            event.ignore()
            text = fill(
                ngettext(
                    "An answer is still streaming. Stop it and quit?",
                    "{n} answers are still streaming. Stop them and quit?",
                    len(running),
                ),
                {"n": len(running)},
            )
            self._confirm_stop(text, _("Stop and quit"), self._quit_after_confirm)
            return
        self.save_state()
        # A running import stops after the conversation it is writing (each is whole);
        # quitting must not wait for the rest of a 600 MB file.
        self.importing.cancel()
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []
        self.notice_area.close_area()
        event.accept()
        self.closed.emit()

    def _quit_after_confirm(self) -> None:
        self._quit_confirmed = True
        self.close()

    # -- refreshing ------------------------------------------------------------

    def apply_changes(self, changes: Changes) -> None:
        """Hand each part what concerns it."""
        self.sidebar.apply_changes(changes)
        self.search_panel.apply_changes(changes)
        if self._close_when_idle:
            self._close_idle()
        for tab in self.conversation_tabs():
            if changes.sidebar or changes.touches(tab.session_id):
                tab.apply_changes(changes)
                self._render_tab_title(tab)
        current = self.current_tab()
        if changes.settings or (current is not None and changes.touches(current.session_id)):
            self._render_provider()
        self.usage_label.apply_changes(changes)
        dialog = self.branch_map
        if dialog is not None and dialog.isVisible() and self._map_ref.server is None:
            shown = dialog.view.layout_shown
            members = shown.member_ids() if shown is not None else frozenset()
            if changes.sidebar or any(changes.touches(sid) for sid in members):
                self._map_refresh.start()  # a branch made, a turn started or ended: redraw

    def _text(self, session_id: str, turn_id: str, message_id: str, chunk: str) -> None:
        tab = self.tab_for(session_id)
        if tab is not None:
            tab.append_text(turn_id, message_id, chunk)

    def _current_changed(self, _index: int) -> None:
        tab = self.current_tab()
        self.usage_label.show_for(tab.ref if tab is not None else None)
        if tab is not None and not tab.ref.remote:
            self.sidebar.select(tab.session_id)
        focused = QApplication.focusWidget()
        if tab is not None and (focused is None or self.tabs.isAncestorOf(focused)):
            # Qt hands focus to the new page's first focusable widget (a branch's
            # "Open parent conversation" button), where typed text would be lost.
            tab.composer.editor.setFocus()
        self._render_window_title()
        self._render_actions()
        self._render_provider()
        self._state_changed()

    # -- remembering the window --------------------------------------------------

    def resume_pending_merges(self) -> int:
        """Write the merges still pending; how many were written (cheap when there are none)."""
        if not (self.host.root / MERGE_JOURNAL).exists():
            return 0
        return resume_merges(self.host)

    def window_state(self) -> WindowState:
        """Open tabs, the one in front, geometry and pane sizes, as they are now."""
        current = self.current_tab()
        local = [tab for tab in self.conversation_tabs() if not tab.ref.remote]
        return WindowState(
            tabs=tuple(tab.session_id for tab in local),
            current=current.session_id if current is not None and current in local else None,
            geometry=bytes(self.saveGeometry().data()),
            splitter=tuple(self.splitter.sizes()),
            remote_tabs=self.remote_servers.tab_states(),
            current_remote=self.remote_servers.current_state(),
            export_folder=self.export_folder,
            intro_dismissed=self.intro_dismissed,
        )

    def restore_state(self, state: WindowState) -> None:
        """Reopen last time's tabs; a conversation that is gone or trashed is skipped."""
        self._restoring = True
        self.intro_dismissed = state.intro_dismissed
        self._render_empty_state()
        try:
            self.export_folder = state.export_folder or self.export_folder
            if state.geometry:
                self.restoreGeometry(QByteArray(state.geometry))
            if len(state.splitter) == self.splitter.count() and all(state.splitter):
                self.splitter.setSizes(list(state.splitter))
            skipped = []
            for session_id in state.tabs:
                try:
                    self.open_tab(session_id)
                except BranchwiseError:
                    skipped.append(session_id)
            front = self.tab_for(state.current) if state.current else None
            if front is not None:
                self.tabs.setCurrentWidget(front)
            # Server tabs show at once and open when their server answers (servers saved
            # in servers.json are connecting by now: connect_saved runs first).
            lost = self.remote_servers.restore_tabs(state.remote_tabs, state.current_remote)
            skipped.extend(f"{tab.session_id} ({tab.server})" for tab in lost)
        finally:
            self._restoring = False
        if skipped:
            self.host.notices.post(
                "tabs_not_restored", Level.WARNING, detail=", ".join(skipped), n=len(skipped)
            )
            self._state_changed()

    def save_state(self) -> None:
        """Write the window state now (a failure is logged; the window goes on)."""
        self._state_timer.stop()
        try:
            save_window_state(self.host.root, self.window_state())
        except OSError as exc:
            log.warning("could not save the window state: %s", exc)

    def _state_changed(self, *_args: object) -> None:
        if not self._restoring:
            self._state_timer.start()

    def _render_tab_title(self, tab: ConversationTab) -> None:
        index = self.tabs.indexOf(tab)
        if index < 0:
            return
        title = tab.title
        label = self.host.label_at(tab.ref)
        tail = LABEL_SEPARATOR + label if label else ""
        head = RUNNING_MARK if tab.running else ""
        metrics = self.tabs.tabBar().fontMetrics()
        # The title has its room, the label and mark theirs: a tab grows, it never cuts a label.
        width = metrics.averageCharWidth() * TAB_TITLE_CHARS
        width += metrics.horizontalAdvance(head) + metrics.horizontalAdvance(tail)
        shown = fitted_row_text(metrics, width, head, title, tail)
        self.tabs.setTabText(index, shown)
        tip = self.host.branch_tooltip_at(tab.ref)
        if tab.running:
            tip += "\n" + _("Running")
        if tab.server_name is not None:
            tip = fill(_("{title} on {server}"), {"title": tip, "server": tab.server_name})
        self.tabs.setTabToolTip(index, tip)
        if tab is self.current_tab():
            self._render_window_title()
            self._render_actions()

    def _render_window_title(self) -> None:
        tab = self.current_tab()
        self.setWindowTitle(f"{tab.title} — Branchwise" if tab is not None else "Branchwise")

    def _render_empty_state(self) -> None:
        has_tabs = self.tabs.count() > 0
        self.export_action.setEnabled(has_tabs)
        self.tabs.setVisible(has_tabs)
        self.empty_label.setVisible(not has_tabs)
        self.empty_state.setVisible(not has_tabs)
        self.introduction.setVisible(not has_tabs and not self.intro_dismissed)
        self._render_window_title()
        self._render_actions()

    def _render_provider(self) -> None:
        """The model the conversation in front will use (its own, the app's, or its server's)."""
        tab = self.current_tab()
        answers = self.host.answers_from(tab.ref if tab is not None else None)
        if answers.server is not None and answers.label:
            label = fill(
                _("{model} on {server}"), {"model": answers.label, "server": answers.server}
            )
        elif answers.server is not None:
            label = fill(_("The model of {server}"), {"server": answers.server})
        elif answers.demo:
            label = _("Demo responder (offline)")
        else:
            label = answers.label
        self.provider_label.setText(label)
        self.provider_label.setToolTip(
            fill(_("Answers come from: {provider}"), {"provider": label})
        )

    # -- dialogs ---------------------------------------------------------------

    def show_settings(self) -> SettingsDialog:
        """Open the settings dialog (window-modal; saving applies at once).

        One dialog at a time: an open one is brought forward, a closed one is
        replaced by a fresh one showing the current settings.
        """
        old = self._settings_dialog
        if old is not None and old.isVisible():
            old.raise_()
            return old
        if old is not None:
            old.deleteLater()
        dialog = SettingsDialog(self.host.settings, self._save_settings, self.host.operations, self)
        self._settings_dialog = dialog
        dialog.open()
        return dialog

    def _save_settings(self, settings: object) -> None:
        from branchwise.core.settings import Settings

        assert isinstance(settings, Settings)
        language_changed = settings.language != self.host.settings.language
        self.host.update_settings(settings)
        self._apply_theme()
        if language_changed:
            self.language_chosen.emit(settings.language or SYSTEM_LANGUAGE)

    def _apply_theme(self) -> None:
        app = QApplication.instance()
        if isinstance(app, QApplication):
            theme_for(app).choose(self.host.settings.theme)

    def choose_language(self, code: str) -> None:
        """Switch the whole app to ``code`` ("" = the system's) live, and remember it."""
        set_language(code or system_locale())
        language = code or None
        if self.host.settings.language != language:
            try:
                self.host.update_settings(
                    dataclasses.replace(self.host.settings, language=language)
                )
            except BranchwiseError as exc:  # e.g. a newer-format settings.json is not overwritten
                self.host.notices.post(exc.code, Level.WARNING, detail=exc.message)
        self._render_language_menu()

    def show_about(self) -> None:
        """The About box."""
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version("branchwise")
        except PackageNotFoundError:
            number = "?"
        QMessageBox.about(
            self,
            _("About Branchwise"),
            fill(
                _(
                    "Branchwise {version}\n\nAn offline-first chat where any finished turn "
                    "can be branched into a new conversation."
                ),
                {"version": number},
            ),
        )

    # -- languages --------------------------------------------------------------

    def _render_language_menu(self) -> None:
        saved = self.host.settings.language
        for code, action in self.language_actions.items():
            action.setText(DISPLAY_NAMES.get(code) or _("System default"))
            if saved is None:
                action.setChecked(code == SYSTEM_LANGUAGE)
            else:
                action.setChecked(code == current_language() and code != SYSTEM_LANGUAGE)

    def retranslate_ui(self) -> None:
        """Re-render every localized text of the window and its parts."""
        # TRANSLATORS: menu title; "&" marks the access key (Chinese: "文件(&F)").
        self.file_menu.setTitle(_("&File"))
        # TRANSLATORS: menu title; "&" marks the access key (Chinese: "帮助(&H)").
        self.help_menu.setTitle(_("&Help"))
        # TRANSLATORS: menu title; "&" marks the access key (Chinese: "编辑(&E)").
        self.edit_menu.setTitle(_("&Edit"))
        self.search_action.setText(_("Search all conversations"))
        self.find_action.setText(_("Find in conversation"))
        self.new_action.setText(_("New conversation"))
        self.import_action.setText(_("Import…"))
        self.export_action.setText(_("Export conversation…"))
        self._export_tip = _("Save this conversation as Markdown or JSON")
        self.trash_action.setText(_("Trash…"))
        self.settings_action.setText(_("Settings…"))
        self.language_menu.setTitle(_("Language"))
        self.about_action.setText(_("About Branchwise"))
        # TRANSLATORS: menu title; "&" marks the access key (Chinese: "对话(&C)").
        self.conversation_menu.setTitle(_("&Conversation"))
        self.close_tab_action.setText(_("Close tab"))
        self.rename_action.setText(_("Rename conversation…"))
        self.rename_label_action.setText(_("Rename branch label…"))
        self.stop_action.setText(_("Stop the answer"))
        self.branch_last_action.setText(_("Branch at the last finished turn"))
        self.branch_map_action.setText(_("Branch map"))
        self.send_several_action.setText(_("Send to several…"))
        self.branch_map_action.setToolTip(
            _("Every branch of this conversation's family, turn by turn")
        )
        self.next_tab_action.setText(_("Next tab"))
        self.previous_tab_action.setText(_("Previous tab"))
        self.previous_alternative_action.setText(_("Previous alternative at this turn"))
        self.next_alternative_action.setText(_("Next alternative at this turn"))
        self.shortcuts_action.setText(_("Keyboard shortcuts"))
        self.conversation_settings_action.setText(_("Conversation settings…"))
        self._settings_tip = _("This conversation's own model, system prompt and temperature")
        self.quit_action.setText(_("Quit"))
        self.empty_label.setText(
            _("Start a new conversation, or pick one from the list on the left.")
        )
        self._render_language_menu()
        self._render_provider()
        self.usage_label.retranslate_ui()
        self.introduction.retranslate_ui()
        self.sidebar.retranslate_ui()
        self.remote_servers.retranslate_ui()
        self.search_panel.retranslate_ui()
        self.notice_area.retranslate_ui()
        for tab in self.conversation_tabs():
            tab.retranslate_ui()
            self._render_tab_title(tab)
        if self._settings_dialog is not None and self._settings_dialog.isVisible():
            self._settings_dialog.retranslate_ui()
        if self.trash_dialog is not None:
            self.trash_dialog.retranslate_ui()
        if self.import_dialog is not None:
            self.import_dialog.retranslate_ui()
        self._render_window_title()


def _file_name(title: str) -> str:
    """A file name from a conversation's title (no path separators or control characters)."""
    name = re.sub(r'[\x00-\x1f/\\:*?"<>|]+', " ", title).strip(" .")[:80]
    return f"{name or untitled('')}.md"
