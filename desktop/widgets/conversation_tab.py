"""One conversation tab: banner, transcript, find bar and composer, all talking to the host.

The tab never touches a session's files: it asks the host to send, stop and
branch, and refreshes the parts a :class:`Changes` names. The same tab shows
a conversation of this machine or of a ``branchwise serve`` server (its
:class:`ConversationRef` says which); what the server cannot do is shown
disabled with the reason, never dropped silently.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import shiboken6
from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from branchwise.core.conversation.attachments import PreparedAttachment
from branchwise.core.errors import BranchwiseError
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.i18n.language import _
from branchwise.core.i18n.reasons import fill, reason_text
from branchwise.core.store.manifest import ParentLink
from branchwise.desktop.host.changes import Changes
from branchwise.desktop.host.conversation import ConversationRef
from branchwise.desktop.host.host import Host
from branchwise.desktop.host.landing import Landing, TurnTarget
from branchwise.desktop.host.notices import Level
from branchwise.desktop.host.rows import Row
from branchwise.desktop.host.session import SessionMode
from branchwise.desktop.widgets.banner import ForkBanner
from branchwise.desktop.widgets.composer import Composer
from branchwise.desktop.widgets.find_bar import FindBar, Match
from branchwise.desktop.widgets.merge_dialog import BringBackDialog
from branchwise.desktop.widgets.transcript import TranscriptView, refusal_text
from branchwise.desktop.widgets.turn_widget import TurnWidget, untitled

OpenAt = Callable[[ConversationRef, TurnTarget, "ConversationTab | None"], None]
"""Opens a conversation at a turn; with a tab, the conversation replaces that tab's."""


class _TabAttaching:
    """The composer's attachments, read and sent through the host (off the UI thread).

    A refusal is a notice in the refusal's own words; the prompt and the
    files already accepted stay in the composer.
    """

    def __init__(self, tab: ConversationTab) -> None:
        self._tab = tab

    def read(self, paths: list[Path]) -> None:
        tab = self._tab
        tab.host.spawn(self._read(paths), "attach files")

    async def _read(self, paths: list[Path]) -> None:
        tab = self._tab
        try:
            files = await tab.host.attaching.read(paths, tab.composer.pending)
        except BranchwiseError as exc:
            self._refused(exc)
            return
        if shiboken6.isValid(tab):
            tab.composer.add_attachments(files)

    def paste(self, data: bytes) -> None:
        self._tab.host.spawn(self._paste(data), "paste an image")

    async def _paste(self, data: bytes) -> None:
        tab = self._tab
        try:
            prepared = await tab.host.attaching.read_pasted(data, tab.composer.pending)
        except BranchwiseError as exc:
            self._refused(exc)
            return
        if shiboken6.isValid(tab):
            tab.composer.add_attachments([prepared])

    def send(self, text: str, files: tuple[PreparedAttachment, ...]) -> None:
        self._tab.host.spawn(self._send(text, files), "send")

    async def _send(self, text: str, files: tuple[PreparedAttachment, ...]) -> None:
        tab = self._tab
        try:
            await tab.host.send_at(tab.ref, text, files)
        except BranchwiseError as exc:
            if exc.details.get("questionSaved"):
                raise  # the turn started: its row shows what happened
            if shiboken6.isValid(tab):
                tab.composer.restore(text, files)
            self._refused(exc)

    def _refused(self, exc: BranchwiseError) -> None:
        self._tab.host.notices.post(exc.code, Level.ERROR, detail=exc.message, **exc.details)


class ConversationTab(QWidget):
    """The tab of one open conversation.

    Args:
        host: the host.
        ref: the conversation (already opened in the host).
        open_ref: shows another conversation (a branch listed at a turn).
        open_at: shows a conversation at a turn (the parent at the fork turn, a
            brought-back card's branch, another alternative in this same tab).
    """

    def __init__(
        self,
        host: Host,
        ref: ConversationRef,
        open_ref: Callable[[ConversationRef], None],
        parent: QWidget | None = None,
        open_at: OpenAt | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("conversationTab")
        self.host = host
        self.ref = ref
        self.session_id = ref.session_id

        def open_session(session_id: str) -> None:
            open_ref(ref.sibling(session_id))

        def open_at_turn(
            target: ConversationRef, turn: TurnTarget, tab: ConversationTab | None
        ) -> None:
            if open_at is not None:
                open_at(target, turn, tab)
            else:
                open_ref(target)

        self._open_session = open_session
        self._open_at = open_at_turn
        self.banner = ForkBanner(self._open_parent, self, self.bring_back)
        self.bring_back_dialog: BringBackDialog | None = None
        self.state_label = QLabel(self)
        self.state_label.setObjectName("sessionState")
        self.state_label.setWordWrap(True)
        self.state_label.setTextFormat(Qt.TextFormat.PlainText)
        self.state_label.setContentsMargins(12, 4, 12, 4)
        self.transcript = TranscriptView(
            host,
            ref,
            self._branch,
            open_session,
            parent=self,
            on_switch=self._switch,
            on_open_at=lambda sid, turn: open_at_turn(ref.sibling(sid), turn, None),
        )
        self.find_bar = FindBar(self._rows, self._reveal_match, self)
        self.find_bar.closed.connect(self._find_closed)
        self.composer = Composer(self._send, self._stop, self, _TabAttaching(self))
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.banner)
        layout.addWidget(self.state_label)
        layout.addWidget(self.transcript, 1)
        layout.addWidget(self.find_bar)
        layout.addWidget(self.composer)
        self._render_state()
        self._render_banner()

    # -- what the UI exposes -------------------------------------------------

    @property
    def title(self) -> str:
        """The tab's title in the active language."""
        return untitled(self.host.title_at(self.ref))

    @property
    def running(self) -> bool:
        """A turn runs in this conversation."""
        return self.host.running_at(self.ref)

    @property
    def server_name(self) -> str | None:
        """The name of the server that keeps the conversation (``None``: this machine)."""
        if self.ref.server is None:
            return None
        server = self.host.server_of(self.ref)
        return server.name if server is not None else self.ref.server

    def refusal(self, action: str) -> str | None:
        """Why ``action`` (see :meth:`Host.refusal`) cannot be done here, in the user's words."""
        code = self.host.refusal(self.ref, action)
        return refusal_text(self.host, self.ref, code) if code is not None else None

    def turn_widgets(self) -> list[TurnWidget]:
        """The turn widgets built so far, in display order."""
        return self.transcript.turn_widgets()

    # -- landing on a turn -------------------------------------------------------

    def land(self, landing: Landing) -> TurnWidget | None:
        """Scroll to where a jump landed and highlight that turn."""
        if landing.row_id is None:
            return None
        return self.transcript.land(landing.row_id)

    def switch_alternative(self, by: int) -> bool:
        """Alt+Left / Alt+Right: show the previous or next alternative at the turn being read."""
        return self.transcript.switch_alternative(by)

    def _switch(self, session_id: str, after_turn_id: str | None) -> None:
        """An arrow of ``< k/n >``: this tab shows the other alternative, at the same turn."""
        self._open_at(self.ref.sibling(session_id), TurnTarget.following(after_turn_id), self)

    def _open_parent(self, parent_id: str) -> None:
        """The banner's "Open parent conversation": the parent, at the turn branched from."""
        manifest = self.host.lineage_at(self.ref).by_id.get(self.session_id)
        session = self.host.session(self.session_id) if not self.ref.remote else None
        if session is not None:
            manifest = session.manifest
        link = manifest.parent if manifest is not None else None
        if link is None:
            self._open_session(parent_id)
            return
        turn = link.origin.turn_id if link.origin is not None else link.turn_id
        target = TurnTarget.at(turn) if turn is not None else TurnTarget.following(None)
        self._open_at(self.ref.sibling(parent_id), target, None)

    # -- finding ---------------------------------------------------------------

    def open_find(self) -> None:
        """Ctrl+F: the find bar, for text in this conversation."""
        self.find_bar.open_bar()

    def reveal_message(self, message_id: str) -> TurnWidget | None:
        """Bring the turn holding a message into view and flash it (``None``: no such row)."""
        position = self.transcript.position_of_message(message_id)
        if position is None:
            return None
        widget = self.transcript.reveal(position)
        if widget is not None:
            widget.flash()
        return widget

    async def reveal_when_loaded(self, message_id: str) -> None:
        """:meth:`reveal_message` once the whole history is read (a big one loads late)."""
        session = self.host.session(self.session_id) if not self.ref.remote else None
        if session is not None and not session.loaded:
            await session.wait_loaded()
        if shiboken6.isValid(self):
            self.reveal_message(message_id)

    def turn_in_view(self) -> str | None:
        """The turn at the middle of the transcript's view; ``None`` at the bottom (the
        conversation's end is what is being read) or when no turn is shown."""
        bar = self.transcript.verticalScrollBar()
        if bar.value() >= bar.maximum():
            return None
        port = self.transcript.viewport()
        middle = port.height() // 2
        found = None
        for widget in self.turn_widgets():
            if not widget.isVisible() or widget.row.turn_id is None:
                continue
            top = widget.mapTo(port, QPoint(0, 0)).y()
            if top <= middle:
                found = widget.row.turn_id
            if top + widget.height() >= middle:
                return found or widget.row.turn_id
        return found

    def _find_closed(self) -> None:
        self.composer.editor.setFocus()

    def _rows(self) -> list[Row]:
        conversation = self.host.conversation(self.ref)
        return conversation.rows if conversation is not None else []

    def _reveal_match(self, match: Match) -> None:
        widget = self.transcript.reveal(match.position)
        if widget is None:
            return
        widget.flash()
        label = widget.message_label(match.message_id)
        if label is not None:
            label.select_occurrence(self.find_bar.field.text(), match.start)

    # -- actions ---------------------------------------------------------------

    def _send(self, text: str) -> None:
        self.host.spawn(self.host.send_at(self.ref, text), "send")

    def _stop(self) -> None:
        self.host.stop_at(self.ref)

    def bring_back(self) -> None:
        """Open "Bring back to parent…" for this branch (a local one: the button says why not)."""
        if self.host.refusal(self.ref, "bring_back") is not None:
            return
        self.bring_back_dialog = BringBackDialog(self.host, self.session_id, self)
        self.bring_back_dialog.open()

    def _branch(self, request: ForkRequest) -> None:
        self.host.spawn(self.host.branch_at(self.ref, request), "branch")

    # -- refreshing ------------------------------------------------------------

    def apply_changes(self, changes: Changes) -> None:
        """Refresh the parts ``changes`` name."""
        sid = self.session_id
        if sid in changes.transcripts:
            self.transcript.reload()
        elif changes.turns:
            turns = changes.turns_of(sid)
            if turns:
                self.transcript.update_turns(turns)
        if sid in changes.targets or sid in changes.transcripts:
            self.transcript.refresh_branch_states()
        if sid in changes.sessions or sid in changes.transcripts:
            self._render_state()
            self.transcript.refresh_branches()
        if changes.sidebar or sid in changes.transcripts:
            self._render_banner()

    def append_text(self, turn_id: str, message_id: str, chunk: str) -> None:
        """Streamed text for a running turn of this conversation."""
        self.transcript.append_text(turn_id, message_id, chunk)

    def _render_state(self) -> None:
        if self.ref.remote:
            self._render_server_state()
            return
        session = self.host.session(self.session_id)
        text = ""
        blocked: str | None = None
        if session is None:
            blocked = text = _("This conversation is closed.")
        elif session.mode is SessionMode.LOADING:
            text = _("Loading…")
        elif session.mode is SessionMode.READ_ONLY:
            error = session.read_only_error
            reason = reason_text(error.code) if error is not None else reason_text("read_only")
            blocked = text = fill_read_only(reason)
        self.state_label.setText(text)
        self.state_label.setVisible(bool(text))
        self.composer.set_blocked(blocked)
        self.composer.set_running(session is not None and session.running)

    def _render_server_state(self) -> None:
        """A server's conversation: which server, or why nothing can be sent now."""
        names = {"server": self.server_name or ""}
        blocked = self.refusal("send")
        text = blocked or fill(_("On the server {server}"), names)
        self.state_label.setText(text)
        self.state_label.setVisible(True)
        self.composer.set_blocked(blocked)
        self.composer.set_running(self.running)

    def _render_banner(self) -> None:
        session = self.host.session(self.session_id) if not self.ref.remote else None
        lineage = self.host.lineage_at(self.ref)
        manifest = session.manifest if session else lineage.by_id.get(self.session_id)
        link = manifest.parent if manifest is not None else None
        if link is None:
            self.banner.set_origin(None, "", None, True)
            return
        exists = link.session_id in lineage.by_id
        self.banner.set_origin(
            link.session_id,
            self.host.title_at(self.ref.sibling(link.session_id)),
            manifest.fork_turn_index
            if manifest is not None and manifest.fork_turn_index
            else self._fork_turn_number(link),
            exists,
            link.kind,
            self.host.label_at(self.ref),
        )
        self.banner.refuse_bring_back(self.refusal("bring_back"))

    def _fork_turn_number(self, link: ParentLink) -> int | None:
        """The parent's turn the branch leaves from, numbered as the parent numbers it.

        A plain branch shares that turn (the branch's own copy has the same
        number); an edit or a regenerate re-asks the turn after the fork point.
        """
        if link.kind != "fork":
            return None
        if link.turn_id is None:
            return 1 if link.origin is not None else None
        conversation = self.host.conversation(self.ref)
        rows = conversation.rows if conversation is not None else []
        shared = next((row.index for row in rows if row.turn_id == link.turn_id), None)
        if shared is None:
            projection = conversation.projection if conversation is not None else None
            turn = projection.turn(link.turn_id) if projection is not None else None
            shared = turn.index if turn is not None else None
        if shared is None:
            return None
        return shared + 1 if link.origin is not None else shared

    def retranslate_ui(self) -> None:
        """Re-render every localized text of the tab (the banner's label and titles too)."""
        self._render_banner()
        self.transcript.retranslate_ui()
        self.composer.retranslate_ui()
        self.find_bar.retranslate_ui()
        self._render_state()


def fill_read_only(reason: str) -> str:
    """ "Read-only: <reason>"."""
    return fill(_("Read-only: {reason}"), {"reason": reason})
