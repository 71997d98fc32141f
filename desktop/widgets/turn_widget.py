"""One turn of a transcript: question, answer, how it ended, and its branch action.

Each turn carries a real "Branch into a new conversation" button whose
tooltip and accessible name say so when it can be clicked, and whose tooltip
and accessible description give the localized reason when it cannot. A turn
that already has branches shows a small "N branches" button listing them,
and a turn that has alternatives (edits, regenerations and branches that
differ at it) shows ``< k/n >`` (:class:`AlternativesSwitcher`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from PySide6.QtCore import QPointF, QSize, Qt, QTimer
from PySide6.QtGui import QColor, QIcon, QPainter, QPainterPath, QPalette, QPen, QPixmap
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QMenu,
    QPlainTextEdit,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from branchwise.core.conversation.alternatives import Alternatives
from branchwise.core.conversation.names import display_title, label_of, render_label
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.i18n.language import _, format_number, ngettext
from branchwise.core.i18n.reasons import BRANCH_ACTION, branch_count, fill, reason_text
from branchwise.core.projection.attachments import AttachmentRef
from branchwise.core.store.manifest import Manifest
from branchwise.desktop.host.attaching import Preview
from branchwise.desktop.host.landing import TurnTarget
from branchwise.desktop.host.rows import BranchState, DesktopReason, Entry, FusedSource, Row
from branchwise.desktop.widgets.attachment_chips import AttachmentChip, AttachmentStrip, ChipData
from branchwise.desktop.widgets.markdown_view import MarkdownView
from branchwise.desktop.widgets.message_copy import install_copy_message
from branchwise.desktop.widgets.style import set_style_property
from branchwise.desktop.widgets.usage_label import figures_text, figures_tooltip

STREAM_REPAINT_MS = 50
#: A repaint that took t ms waits at least this many times t before the next one,
#: so a long answer being rendered never takes more than about a third of the CPU.
STREAM_REPAINT_SLOWDOWN = 2
#: How long a turn stays highlighted after a search hit or find match brought it into view.
FLASH_MS = 1200
#: Branches shown beside the conversation by "All side by side" (four columns at most).
COMPARED_BRANCHES = 3
BRANCH_BUTTON = "branchButton"
BRANCHES_BUTTON = "branchesButton"
EDIT_BUTTON = "editButton"
REGENERATE_BUTTON = "regenerateButton"
RETRY_BUTTON = "retryButton"
EDIT_BOX = "editBox"
SEND_AS_BRANCH_BUTTON = "sendAsBranchButton"
EDIT_CANCEL_BUTTON = "editCancelButton"
ALTERNATIVES = "alternatives"
PREVIOUS_ALTERNATIVE = "previousAlternative"
NEXT_ALTERNATIVE = "nextAlternative"
ALTERNATIVES_COUNTER = "alternativesCounter"
#: How many alternatives the counter's tooltip lists by name (the rest are counted).
LISTED_ALTERNATIVES = 12


@dataclass(frozen=True, slots=True)
class AskAgain:
    """What a turn's Edit, Regenerate and Retry actions call, with the turn's id.

    Attributes:
        edit: send an edited prompt of the turn as a branch.
        regenerate: ask the turn's prompt again in a branch.
        retry: ask a failed turn's prompt again in the same conversation.
        refusal: why an action (``edit``, ``regenerate`` or ``retry``) cannot be
            done now, in the user's words (``None``: it can); such an action
            is shown disabled with that reason as its tooltip.
    """

    edit: Callable[[str, str], object]
    regenerate: Callable[[str], object]
    retry: Callable[[str], object]
    refusal: Callable[[str], str | None] = lambda _action: None


def branch_label(manifest: Manifest, siblings: Sequence[Manifest] = ()) -> str:
    """How the branch menu lists a branch: its label, then its title ("Regenerated 2 · <title>").

    ``siblings``: the other branches listed with it (a regenerate is numbered among them).
    """
    label = render_label(label_of(manifest, siblings), manifest.fork_turn_index)
    title = untitled(manifest.title)
    return f"{label} · {title}" if label else title


def untitled(title: str) -> str:
    """A conversation's title for display ("Untitled conversation" when empty)."""
    return display_title(title) if title else _("Untitled conversation")


def branch_icon(color: QColor, size: int = 16) -> QIcon:
    """A small fork glyph drawn in ``color`` (no icon theme needed)."""
    pixmap = QPixmap(size * 2, size * 2)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    pen = QPen(color, 3.0)
    pen.setCapStyle(Qt.PenCapStyle.RoundCap)
    painter.setPen(pen)
    s = size * 2
    path = QPainterPath(QPointF(s * 0.3, s * 0.85))
    path.lineTo(QPointF(s * 0.3, s * 0.15))
    path.moveTo(QPointF(s * 0.3, s * 0.6))
    path.cubicTo(
        QPointF(s * 0.3, s * 0.4), QPointF(s * 0.72, s * 0.45), QPointF(s * 0.72, s * 0.15)
    )
    painter.drawPath(path)
    painter.setBrush(color)
    for x, y in ((0.3, 0.85), (0.3, 0.15), (0.72, 0.15)):
        painter.drawEllipse(QPointF(s * x, s * y), s * 0.08, s * 0.08)
    painter.end()
    return QIcon(pixmap)


class MessageLabel(MarkdownView):
    """One message: user and assistant text rendered as Markdown, tool calls as plain text."""

    def __init__(
        self,
        entry: Entry,
        parent: QWidget | None = None,
        title_of: Callable[[str], str] | None = None,
        name_of: Callable[[FusedSource], str] | None = None,
    ) -> None:
        super().__init__(parent, plain=entry.role == "tool", breaks=entry.role == "user")
        self.role = entry.role
        self.message_id = entry.message_id
        self.source_id = entry.source_id
        self.fused_from = entry.fused_from
        self._title_of = title_of
        self._name_of = name_of or (lambda source: source.model)
        self.content = ""
        self.setObjectName(f"{entry.role}Message")
        self.set_content(entry.content)
        install_copy_message(self, lambda: self.content)

    def set_content(self, text: str) -> None:
        """Show ``text`` (tool calls get a localized prefix)."""
        self.content = text
        if self.role == "tool":
            self.set_markdown(fill(_("Tool call: {call}"), {"call": text}))
        elif self.role == "merge" and self.fused_from:
            names = " · ".join(self._name_of(source) for source in self.fused_from)
            heading = fill(
                # TRANSLATORS: heads a fused answer; {names} lists the answers' branch labels.
                ngettext(
                    "Fused from {n} answer: {names}",
                    "Fused from {n} answers: {names}",
                    len(self.fused_from),
                ),
                {"n": format_number(len(self.fused_from)), "names": names},
            )
            self.set_markdown(f"**{_escape_markdown(heading)}**\n\n{text}")
        elif self.role == "merge":
            title = self._title_of(self.source_id) if self._title_of and self.source_id else ""
            # TRANSLATORS: heads what a branch brought back; {title} is the branch's title.
            heading = fill(_("From branch {title}:"), {"title": untitled(title)})
            self.set_markdown(f"**{_escape_markdown(heading)}**\n\n{text}")
        else:
            self.set_markdown(text)

    def retranslate_ui(self) -> None:
        """Re-render the localized prefix of tool calls and the code blocks' labels."""
        super().retranslate_ui()
        if self.role in ("tool", "merge"):
            self.set_content(self.content)


PreviewLoader = Callable[[tuple[AttachmentRef, ...], Callable[[Mapping[str, Preview]], None]], None]
"""Asks the host for attachments' previews; calls back with them by hash."""


def _chip(ref: AttachmentRef, data: bytes | None = None, missing: bool = False) -> ChipData:
    return ChipData(ref.sha256, ref.name, ref.type, ref.size, ref.pages, data, missing)


def _escape_markdown(text: str) -> str:
    """A title shown as text inside Markdown (its punctuation is not markup)."""
    return "".join("\\" + c if c in "\\`*_{}[]()<>#+-.!|~" else c for c in text)


Switch = Callable[[str, str | None], None]
"""Show alternative ``session_id`` at the turn after ``after_turn_id`` (in the same tab)."""


class AlternativesSwitcher(QWidget):
    """``< k/n >``: the alternatives at one turn, and arrows that switch between them.

    The conversation shown is alternative k of the set (the original is 1,
    the others follow in creation order); the arrows show k-1 and k+1 in
    the same tab. Each tooltip names the alternative by its label.

    Args:
        on_switch: called with the alternative to show and the turn its
            members share last (the switch lands on the turn after it).
        label_of: how a member is named (its label).
    """

    def __init__(
        self,
        on_switch: Switch,
        label_of: Callable[[Manifest], str],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName(ALTERNATIVES)
        self._on_switch = on_switch
        self._label_of = label_of
        self._set: Alternatives | None = None
        self._session_id = ""
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        self.previous_button = QToolButton(self)
        self.previous_button.setObjectName(PREVIOUS_ALTERNATIVE)
        self.previous_button.setAutoRaise(True)
        self.previous_button.setText("<")
        self.previous_button.clicked.connect(lambda: self.step(-1))
        self.counter = QLabel(self)
        self.counter.setObjectName(ALTERNATIVES_COUNTER)
        self.counter.setTextFormat(Qt.TextFormat.PlainText)
        self.next_button = QToolButton(self)
        self.next_button.setObjectName(NEXT_ALTERNATIVE)
        self.next_button.setAutoRaise(True)
        self.next_button.setText(">")
        self.next_button.clicked.connect(lambda: self.step(1))
        layout.addWidget(self.previous_button)
        layout.addWidget(self.counter)
        layout.addWidget(self.next_button)
        self.hide()

    @property
    def alternatives(self) -> Alternatives | None:
        """The set shown (``None``: this turn has no alternatives)."""
        return self._set

    def set_alternatives(self, found: Alternatives | None, session_id: str) -> None:
        """Show ``found`` as seen from ``session_id`` (hidden when ``None`` or not a member)."""
        if found is not None and found.position(session_id) is None:
            found = None
        self._set, self._session_id = found, session_id
        self.retranslate_ui()

    def step(self, by: int) -> bool:
        """Switch to the alternative ``by`` places away; whether there was one."""
        found = self._set
        target = found.step(self._session_id, by) if found is not None else None
        if found is None or target is None:
            return False
        self._on_switch(target.session_id, found.after_turn_id)
        return True

    def retranslate_ui(self) -> None:
        """Re-render the counter and the tooltips (after a change or a language switch)."""
        found = self._set
        place = found.position(self._session_id) if found is not None else None
        if found is None or place is None:
            self.hide()
            return
        total = len(found.members)
        # Digits and a slash, as every chat app writes it, in every language.
        self.counter.setText(f"{format_number(place + 1)}/{format_number(total)}")
        listed = [
            fill(
                _("{k}. {label}"),
                {"k": format_number(number + 1), "label": self._label_of(manifest)},
            )
            for number, manifest in enumerate(found.members[:LISTED_ALTERNATIVES])
        ]
        if total > LISTED_ALTERNATIVES:
            listed.append(
                fill(_("and {n} more"), {"n": format_number(total - LISTED_ALTERNATIVES)})
            )
        heading = fill(
            # TRANSLATORS: {k} is this conversation's place among the {n} alternatives.
            _("Alternative {k} of {n} at this turn"),
            {"k": format_number(place + 1), "n": format_number(total)},
        )
        self.counter.setToolTip("\n".join([heading, *listed]))
        self.counter.setAccessibleName(heading)
        self.setAccessibleName(heading)
        for button, by, tip_text, edge in (
            (
                self.previous_button,
                -1,
                _("Previous alternative: {label}"),
                _("This is the first alternative"),
            ),
            (
                self.next_button,
                1,
                _("Next alternative: {label}"),
                _("This is the last alternative"),
            ),
        ):
            target = found.step(self._session_id, by)
            button.setEnabled(target is not None)
            tip = fill(tip_text, {"label": self._label_of(target)}) if target is not None else edge
            button.setToolTip(tip)
            button.setAccessibleName(tip)
        self.show()


class TurnWidget(QFrame):
    """One row of the transcript.

    Args:
        row: the turn to show.
        on_branch: called with the fork request the action carries when it is clicked.
        on_open: called with a session id to open a listed branch.
        ask_again: the Edit, Regenerate and Retry actions (``None``: not offered).
        on_compare: shows this conversation beside listed branches (one, or up to
            three at once: "All side by side").
        compare_refusal: why comparing is not offered here (shown disabled with it).
        on_switch: shows another alternative at this turn in the same tab.
        on_open_at: opens a conversation at a turn (a brought-back card's branch).
        label_of: how an alternative is named in the switcher's tooltips.
    """

    def __init__(
        self,
        row: Row,
        on_branch: Callable[[ForkRequest], None],
        on_open: Callable[[str], object],
        parent: QWidget | None = None,
        ask_again: AskAgain | None = None,
        title_of: Callable[[str], str] | None = None,
        on_compare: Callable[[Sequence[str]], None] | None = None,
        compare_refusal: str | None = None,
        on_switch: Switch | None = None,
        on_open_at: Callable[[str, TurnTarget], object] | None = None,
        label_of: Callable[[Manifest], str] | None = None,
        name_of: Callable[[FusedSource], str] | None = None,
        previews: PreviewLoader | None = None,
    ) -> None:
        super().__init__(parent)
        self._previews = previews
        self._attachments: AttachmentStrip | None = None
        self._shown_refs: tuple[AttachmentRef, ...] = ()
        self._name_of = name_of
        self._ask_again = ask_again
        self._on_open_at = on_open_at
        self._title_of = title_of
        self._on_compare = on_compare
        self._compare_refusal = compare_refusal
        self.setObjectName("turn")
        self.setFrameShape(QFrame.Shape.NoFrame)
        self._on_branch = on_branch
        self._on_open = on_open
        self._state = BranchState(None, None)
        self._branches: list[Manifest] = []
        self._labels: dict[str, MessageLabel] = {}
        self._pending_text: dict[str, list[str]] = {}
        self._repaint = QTimer(self)
        self._repaint.setSingleShot(True)
        self._repaint.setInterval(STREAM_REPAINT_MS)
        self._repaint.timeout.connect(self._flush_text)
        self._unflash = QTimer(self)
        self._unflash.setSingleShot(True)
        self._unflash.setInterval(FLASH_MS)
        self._unflash.timeout.connect(lambda: self._set_flash(False))
        self.setProperty("flash", False)
        self.setProperty("landed", False)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 8, 12, 4)
        layout.setSpacing(6)
        self._messages = QVBoxLayout()
        self._messages.setSpacing(6)
        layout.addLayout(self._messages)
        self.status_label = QLabel(self)
        self.status_label.setObjectName("turnStatus")
        self.status_label.setWordWrap(True)
        self.status_label.setTextFormat(Qt.TextFormat.PlainText)
        self.status_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.status_label)
        self._build_edit_box(layout)

        footer = QHBoxLayout()
        footer.setSpacing(6)
        self.number_label = QLabel(self)
        self.number_label.setObjectName("turnNumber")
        footer.addWidget(self.number_label)
        self.alternatives = AlternativesSwitcher(
            on_switch or (lambda _sid, _after: None),
            label_of or (lambda manifest: untitled(manifest.title)),
            self,
        )
        footer.addWidget(self.alternatives)
        self.figures_label = QLabel(self)
        self.figures_label.setObjectName("turnFigures")
        self.figures_label.setTextFormat(Qt.TextFormat.PlainText)
        footer.addWidget(self.figures_label)
        footer.addStretch(1)
        self.edit_button = self._action_button(EDIT_BUTTON, self._open_editor)
        self.regenerate_button = self._action_button(REGENERATE_BUTTON, self._regenerate)
        self.retry_button = self._action_button(RETRY_BUTTON, self._retry)
        for button in (self.edit_button, self.regenerate_button, self.retry_button):
            footer.addWidget(button)
        self.branches_button = QToolButton(self)
        self.branches_button.setObjectName(BRANCHES_BUTTON)
        self.branches_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.branches_button.setAutoRaise(True)
        self.branches_button.setMenu(QMenu(self.branches_button))
        self.branches_button.hide()
        footer.addWidget(self.branches_button)
        self.branch_button = QToolButton(self)
        self.branch_button.setObjectName(BRANCH_BUTTON)
        self.branch_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.branch_button.setAutoRaise(True)
        self.branch_button.setIconSize(QSize(16, 16))
        self.branch_button.setIcon(branch_icon(self.palette().color(QPalette.ColorRole.Link)))
        self.branch_button.clicked.connect(self._clicked)
        footer.addWidget(self.branch_button)
        # A merge brought back from a branch opens that branch.
        self.open_source_button = self._action_button("openSourceButton", self._open_source)
        footer.addWidget(self.open_source_button)
        # A fused answer opens each answer it was written from.
        self.fused_buttons: list[QToolButton] = []
        self._footer = footer
        layout.addLayout(footer)

        self.row = row
        self.set_row(row)

    # -- edit, regenerate, retry -------------------------------------------------

    def _action_button(self, name: str, slot: Callable[[], None]) -> QToolButton:
        button = QToolButton(self)
        button.setObjectName(name)
        button.setAutoRaise(True)
        button.clicked.connect(slot)
        button.hide()
        return button

    def _build_edit_box(self, layout: QVBoxLayout) -> None:
        """The in-place editor of the turn's prompt (hidden until Edit is clicked)."""
        self.edit_box = QFrame(self)
        self.edit_box.setObjectName(EDIT_BOX)
        box = QVBoxLayout(self.edit_box)
        box.setContentsMargins(0, 0, 0, 0)
        self.edit_text = QPlainTextEdit(self.edit_box)
        self.edit_text.setObjectName("editText")
        self.edit_text.textChanged.connect(self._render_edit_box)
        box.addWidget(self.edit_text)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        self.edit_cancel_button = QPushButton(self.edit_box)
        self.edit_cancel_button.setObjectName(EDIT_CANCEL_BUTTON)
        self.edit_cancel_button.clicked.connect(self.close_editor)
        buttons.addWidget(self.edit_cancel_button)
        self.send_as_branch_button = QPushButton(self.edit_box)
        self.send_as_branch_button.setObjectName(SEND_AS_BRANCH_BUTTON)
        self.send_as_branch_button.setDefault(True)
        self.send_as_branch_button.clicked.connect(self._send_as_branch)
        buttons.addWidget(self.send_as_branch_button)
        box.addLayout(buttons)
        self.edit_box.hide()
        layout.addWidget(self.edit_box)

    @property
    def editing(self) -> bool:
        """The prompt's editor is open."""
        return not self.edit_box.isHidden()

    def _open_editor(self) -> None:
        self.edit_text.setPlainText(self.row.prompt)
        self.edit_box.show()
        self.edit_text.setFocus()
        self._render_ask_again()

    def close_editor(self) -> None:
        """Close the editor; the conversation is left as it was."""
        self.edit_box.hide()
        self._render_ask_again()

    def _send_as_branch(self) -> None:
        text = self.edit_text.toPlainText()
        turn_id = self.row.turn_id
        if self._ask_again is None or turn_id is None or not text.strip():
            return
        self.close_editor()
        self._ask_again.edit(turn_id, text)

    def _regenerate(self) -> None:
        if self._ask_again is not None and self.row.turn_id is not None:
            self._ask_again.regenerate(self.row.turn_id)

    def _retry(self) -> None:
        if self._ask_again is not None and self.row.turn_id is not None:
            self._ask_again.retry(self.row.turn_id)

    def _render_edit_box(self) -> None:
        self.send_as_branch_button.setEnabled(bool(self.edit_text.toPlainText().strip()))

    def _render_ask_again(self) -> None:
        """Which of Edit, Regenerate and Retry this turn offers, and their texts."""
        row = self.row
        finished = self._ask_again is not None and row.turn_id is not None and not row.running
        self.edit_button.setVisible(finished and bool(row.prompt) and not self.editing)
        self.regenerate_button.setVisible(finished and bool(row.prompt) and bool(row.answer))
        self.retry_button.setVisible(finished and row.failed and not row.retried)
        texts = (
            ("edit", self.edit_button, _("Edit"), _("Edit this prompt and send it as a branch")),
            (
                "regenerate",
                self.regenerate_button,
                _("Regenerate"),
                _("Ask this prompt again in a new branch"),
            ),
            ("retry", self.retry_button, _("Retry"), _("Send this prompt again")),
        )
        for action, button, text, tip in texts:
            refused = self._ask_again.refusal(action) if self._ask_again is not None else None
            button.setText(text)
            button.setEnabled(refused is None)
            button.setToolTip(refused or tip)
            button.setAccessibleName(tip)
            button.setAccessibleDescription(refused or "")
        self.open_source_button.setText(_("Open branch"))
        self._render_fused_buttons()
        self.send_as_branch_button.setText(_("Send as a branch"))
        self.edit_cancel_button.setText(_("Cancel"))
        self.edit_text.setAccessibleName(_("Edited prompt"))
        self._render_edit_box()

    # -- content -------------------------------------------------------------

    def set_row(self, row: Row) -> None:
        """Show ``row`` (reusing message labels by message id)."""
        self.row = row
        self._flush_text()
        keep = {entry.message_id for entry in row.entries}
        for message_id in [m for m in self._labels if m not in keep]:
            self._labels.pop(message_id).deleteLater()
        for position, entry in enumerate(row.entries):
            label = self._labels.get(entry.message_id)
            if label is None:
                label = MessageLabel(entry, self, self._title_of, self._name_of)
                self._labels[entry.message_id] = label
                # The prompt's attachments sit right after it (layout position 1).
                shift = 1 if self._attachments is not None and position > 0 else 0
                self._messages.insertWidget(position + shift, label)
            elif label.content != entry.content:
                label.set_content(entry.content)
        self._show_attachments(row)
        self._render_status()
        self._render_ask_again()
        fused = self._fused_from()
        self.open_source_button.setVisible(self._source_id() is not None and not fused)
        if len(self.fused_buttons) != len(fused):
            for button in self.fused_buttons:
                button.deleteLater()
            self.fused_buttons = []
            for source in fused:
                button = self._action_button("openFusedSource", self._opener(source))
                button.show()
                self._footer.insertWidget(self._footer.indexOf(self.open_source_button), button)
                self.fused_buttons.append(button)
        self._render_fused_buttons()

    def _fused_from(self) -> tuple[FusedSource, ...]:
        return next((e.fused_from for e in self.row.entries if e.fused_from), ())

    def _opener(self, source: FusedSource) -> Callable[[], None]:
        return lambda: self._open_fused(source)

    def _open_fused(self, source: FusedSource) -> None:
        """Open one answer a fused card was written from, at its turn."""
        if self._on_open_at is not None and source.turn_id is not None:
            self._on_open_at(source.session_id, TurnTarget.at(source.turn_id))
        else:
            self._on_open(source.session_id)

    def _render_fused_buttons(self) -> None:
        for button, source in zip(self.fused_buttons, self._fused_from(), strict=False):
            name = self._name_of(source) if self._name_of is not None else source.model
            button.setText(fill(_("Open {name}"), {"name": name}))
            button.setToolTip(_("Open the branch this answer came from"))

    def _show_attachments(self, row: Row) -> None:
        """The prompt's files as chips under it; the host loads the images' previews."""
        refs = next((e.attachments for e in row.entries if e.role == "user"), ())
        if refs == self._shown_refs:
            return
        self._shown_refs = refs
        if self._attachments is None:
            self._attachments = AttachmentStrip(self)
            self._messages.insertWidget(1 if self._messages.count() else 0, self._attachments)
        self._attachments.set_chips([_chip(ref) for ref in refs])
        if refs and self._previews is not None:
            self._previews(refs, self._previews_arrived)

    def _previews_arrived(self, previews: Mapping[str, Preview]) -> None:
        if self._attachments is None:
            return
        chips = []
        for ref in self._shown_refs:
            preview = previews.get(ref.sha256)
            if preview is None:
                chips.append(_chip(ref))
            else:
                chips.append(_chip(ref, preview.data, preview.missing))
        self._attachments.set_chips(chips)

    @property
    def attachment_chips(self) -> list[AttachmentChip]:
        """The prompt's attachments as shown."""
        return list(self._attachments.chips) if self._attachments is not None else []

    def _source_id(self) -> str | None:
        """The branch a merge in this row came from."""
        return next((e.source_id for e in self.row.entries if e.role == "merge"), None)

    def _open_source(self) -> None:
        """Open the branch at the turn it was brought back from (its last one then)."""
        source = self._source_id()
        if source is None:
            return
        sequence = next((e.source_sequence for e in self.row.entries if e.role == "merge"), None)
        if self._on_open_at is not None and sequence is not None:
            self._on_open_at(source, TurnTarget.through(sequence))
        else:
            self._on_open(source)

    def append_text(self, message_id: str, chunk: str) -> None:
        """Append streamed text to the running answer (repainted at most every 50 ms, less
        often while rendering takes long)."""
        self._pending_text.setdefault(message_id, []).append(chunk)
        if not self._repaint.isActive():
            self._repaint.start()

    def _flush_text(self) -> None:
        pending, self._pending_text = self._pending_text, {}
        started = time.perf_counter()
        for message_id, parts in pending.items():
            label = self._labels.get(message_id)
            if label is None:
                label = MessageLabel(Entry(message_id, "assistant", ""), self)
                self._labels[message_id] = label
                self._messages.addWidget(label)
            label.set_content(label.content + "".join(parts))
        if pending:
            spent_ms = (time.perf_counter() - started) * 1000
            self._repaint.setInterval(
                max(STREAM_REPAINT_MS, int(spent_ms * STREAM_REPAINT_SLOWDOWN))
            )

    def shown_messages(self) -> list[tuple[str, str]]:
        """``(role, text)`` of every message label, in display order, as displayed."""
        self._flush_text()
        shown = []
        for position in range(self._messages.count()):
            item = self._messages.itemAt(position)
            label = item.widget() if item is not None else None
            if isinstance(label, MessageLabel):
                shown.append((label.role, label.text()))
        return shown

    def answer_text(self) -> str:
        """The answer as currently shown (streamed text included)."""
        self._flush_text()
        return "\n\n".join(
            label.content for label in self._labels.values() if label.role == "assistant"
        )

    def _render_status(self) -> None:
        row = self.row
        text = ""
        if row.running:
            text = _("Answering…")
        elif row.end_reason == "error":
            text = fill(
                _("This turn ended with an error: {error}"),
                {"error": row.error or _("unknown error")},
            )
        elif row.end_reason == "cancelled":
            text = _("Stopped before the answer was complete.")
        elif row.end_reason == "interrupted":
            text = _("This turn was interrupted.")
        self.status_label.setText(text)
        self.status_label.setVisible(bool(text))
        set_style_property(self.status_label, "error", row.end_reason == "error")
        if row.index is not None:
            self.number_label.setText(fill(_("Turn {n}"), {"n": format_number(row.index)}))
        elif self.row.brought_back:
            self.number_label.setText(_("Brought back from a branch"))
        else:
            self.number_label.setText(_("Imported history"))
        figures = None if row.running else row.figures
        self.figures_label.setVisible(figures is not None)
        self.figures_label.setText(figures_text(figures) if figures is not None else "")
        self.figures_label.setToolTip(figures_tooltip(figures) if figures is not None else "")

    def message_label(self, message_id: str) -> MessageLabel | None:
        """The label showing one message of this turn."""
        self._flush_text()
        return self._labels.get(message_id)

    @property
    def flashed(self) -> bool:
        """The turn is highlighted right now (it was just brought into view)."""
        return bool(self.property("flash"))

    def flash(self) -> None:
        """Highlight the turn briefly, so the eye finds it after a jump."""
        self._set_flash(True)
        self._unflash.start()

    def _set_flash(self, on: bool) -> None:
        self.setProperty("flash", on)
        self._repolish()

    def _repolish(self) -> None:
        style = self.style()
        style.unpolish(self)
        style.polish(self)
        self.update()

    @property
    def landed(self) -> bool:
        """The turn is highlighted as where a jump landed (until the user scrolls away)."""
        return bool(self.property("landed"))

    def set_landed(self, on: bool) -> None:
        """Highlight the turn a jump landed on (open parent, a sibling, a brought-back card).

        The highlight stays until the reader scrolls, so it is not missed
        while the conversation is still being laid out; its accessible
        description says it too.
        """
        if on == self.landed:
            return
        self.setProperty("landed", on)
        self._render_landed()
        self._repolish()

    def _render_landed(self) -> None:
        self.setAccessibleDescription(_("You arrived at this turn") if self.landed else "")

    # -- alternatives ------------------------------------------------------------

    def set_alternatives(self, found: Alternatives | None, session_id: str) -> None:
        """Show ``< k/n >`` for the alternatives at this turn (``None``: it has none)."""
        self.alternatives.set_alternatives(found, session_id)

    # -- branch action ---------------------------------------------------------

    def set_branch_state(self, state: BranchState) -> None:
        """Enable the branch action with its target, or disable it with a reason.

        Edit, Regenerate and Retry are re-rendered too: what makes a branch
        possible (a connected server, say) decides whether they can be asked.
        """
        self._render_ask_again()
        self._state = state
        self._render_branch_action()

    @property
    def branch_state(self) -> BranchState:
        """The action's current state."""
        return self._state

    def _render_branch_action(self) -> None:
        button = self.branch_button
        name = _(BRANCH_ACTION)
        button.setText(_("Branch"))
        button.setAccessibleName(name)
        button.setEnabled(self._state.enabled)
        if self._state.enabled:
            button.setToolTip(name)
            button.setAccessibleDescription("")
        else:
            reason = reason_text(self._state.reason or DesktopReason.TARGETS_LOADING)
            button.setToolTip(reason)
            button.setAccessibleDescription(reason)

    def _clicked(self) -> None:
        target = self._state.target
        if target is not None:
            self._on_branch(target)

    def set_branches(self, branches: Sequence[Manifest]) -> None:
        """List the conversations branched from this turn (hidden when none)."""
        self._branches = list(branches)
        self._render_branches()

    def _render_branches(self) -> None:
        button = self.branches_button
        menu = button.menu()
        menu.clear()
        if not self._branches:
            button.hide()
            return
        button.setText(branch_count(len(self._branches)))
        tip = _("Conversations branched from this turn")
        button.setToolTip(tip)
        button.setAccessibleName(button.text())
        button.setAccessibleDescription(tip)
        for manifest in self._branches:
            action = menu.addAction(branch_label(manifest, self._branches))
            action.triggered.connect(
                lambda _checked=False, sid=manifest.session_id: self._on_open(sid)
            )
        if self._on_compare is None and self._compare_refusal is not None:
            refused = menu.addAction(_("Compare with…"))
            refused.setEnabled(False)
            refused.setToolTip(self._compare_refusal)
            menu.setToolTipsVisible(True)
        if self._on_compare is not None:
            compare_menu = menu.addMenu(_("Compare with…"))
            for manifest in self._branches:
                action = compare_menu.addAction(branch_label(manifest, self._branches))
                action.triggered.connect(
                    lambda _checked=False, sid=manifest.session_id: self._compare([sid])
                )
            if len(self._branches) > 1:
                compare_menu.addSeparator()
                every = compare_menu.addAction(_("All side by side"))
                every.setObjectName("compareAllAction")
                shown = [m.session_id for m in self._branches[:COMPARED_BRANCHES]]
                every.triggered.connect(lambda _checked=False: self._compare(shown))
        button.show()

    def _compare(self, session_ids: Sequence[str]) -> None:
        if self._on_compare is not None:
            self._on_compare(session_ids)

    def retranslate_ui(self) -> None:
        """Re-render every localized text of this turn."""
        for label in self._labels.values():
            label.retranslate_ui()
        if self._attachments is not None:
            self._attachments.retranslate_ui()
        self._render_status()
        self._render_ask_again()
        self._render_branch_action()
        self._render_branches()
        self.alternatives.retranslate_ui()
        self._render_landed()
