"""Bring back to parent…: choose what a branch carries back, preview it, confirm.

The branch's own answers are listed with checkboxes (the host reads them
off the UI thread, as it reads the chosen ones for the preview); a summary box can be
filled by "Write summary" (the host's provider writes it; the demo responder
a deterministic one) and edited. The preview shows exactly what the parent
will receive. Confirm writes one ``session/merge`` into the parent; a refusal
(the parent is answering, the branch was trashed, …) is shown in the dialog
and nothing is written.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from branchwise.core.conversation.merge import MergeResult
from branchwise.core.errors import BranchwiseError
from branchwise.core.i18n.language import _
from branchwise.core.i18n.reasons import fill, reason_text
from branchwise.desktop.host.host import Host
from branchwise.desktop.host.merging import merge, parent_of, summarize
from branchwise.desktop.host.operations import OwnAnswer
from branchwise.desktop.widgets.turn_widget import untitled

TURN_ROLE = Qt.ItemDataRole.UserRole
SEPARATOR = "\n\n---\n\n"


class BringBackDialog(QDialog):
    """Pick answers or a summary of a branch and merge it into the parent.

    Args:
        host: the host (store, provider, open sessions).
        child_id: the branch.
    """

    def __init__(self, host: Host, child_id: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("bringBackDialog")
        self.host = host
        self.child_id = child_id
        self.result_merge: MergeResult | None = None
        parent_title = untitled(host.title(parent_of(host, child_id) or ""))
        self.setWindowTitle(_("Bring back to parent"))
        self.resize(640, 620)
        heading = QLabel(fill(_("Bring back to {title}:"), {"title": parent_title}), self)
        heading.setTextFormat(Qt.TextFormat.PlainText)
        self.answers = QListWidget(self)
        self.answers.setObjectName("branchAnswers")
        self._content: tuple[str, str] = ("", "answer")
        self._asked = 0
        """Preview requests made; an answer to an older one is dropped."""
        self._answered = 0
        self.summary = QPlainTextEdit(self)
        self.summary.setObjectName("mergeSummary")
        self.summary.setPlaceholderText(_("A summary of the branch (optional, editable)"))
        self.summary.textChanged.connect(self._render_preview)
        self.summary_button = QPushButton(_("Write summary"), self)
        self.summary_button.setObjectName("writeSummaryButton")
        self.summary_button.clicked.connect(self.write_summary)
        self.preview = QPlainTextEdit(self)
        self.preview.setObjectName("mergePreview")
        self.preview.setReadOnly(True)
        self.error_label = QLabel(self)
        self.error_label.setObjectName("mergeError")
        self.error_label.setWordWrap(True)
        self.error_label.setTextFormat(Qt.TextFormat.PlainText)
        self.error_label.hide()
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel, self)
        self.confirm_button = buttons.addButton(
            _("Confirm"), QDialogButtonBox.ButtonRole.AcceptRole
        )
        self.confirm_button.setObjectName("confirmMergeButton")
        buttons.accepted.connect(self.confirm)
        buttons.rejected.connect(self.reject)
        summary_row = QHBoxLayout()
        summary_row.addWidget(QLabel(_("Summary"), self), 1)
        summary_row.addWidget(self.summary_button)
        layout = QVBoxLayout(self)
        layout.addWidget(heading)
        layout.addWidget(QLabel(_("Answers of this branch"), self))
        layout.addWidget(self.answers, 2)
        layout.addLayout(summary_row)
        layout.addWidget(self.summary, 1)
        layout.addWidget(QLabel(_("Preview"), self))
        layout.addWidget(self.preview, 2)
        layout.addWidget(self.error_label)
        layout.addWidget(buttons)
        self.confirm_button.setEnabled(False)
        self.host.spawn(self._list_answers(), "list a branch's answers")

    async def _list_answers(self) -> None:
        try:
            answers = await self.host.operations.branch_answers(self.child_id)
        except BranchwiseError as exc:
            self._show_error(exc)
            return
        self._show_answers(answers)
        self.answers.itemChanged.connect(lambda _item: self._render_preview())

    def _show_answers(self, answers: list[OwnAnswer]) -> None:
        for answer in answers:
            first = answer.answer.strip().split("\n", 1)[0][:100]
            item = QListWidgetItem(f"{answer.prompt.strip()[:60]} → {first}", self.answers)
            item.setData(TURN_ROLE, answer.turn_id)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Unchecked)

    def chosen_turns(self) -> list[str]:
        """The checked answers' turn ids, in the branch's order."""
        items = (self.answers.item(i) for i in range(self.answers.count()))
        return [i.data(TURN_ROLE) for i in items if i.checkState() == Qt.CheckState.Checked]

    def content(self) -> tuple[str, str]:
        """What the parent will receive and its kind (``answer``, ``summary`` or ``note``),
        as the preview shows it now."""
        return self._content

    @property
    def preview_current(self) -> bool:
        """The preview shows the answers and summary chosen now (no reading is pending)."""
        return self._answered == self._asked

    def _render_preview(self) -> None:
        """Ask the host for the chosen answers; the preview follows when it has them."""
        self._asked += 1
        self.confirm_button.setEnabled(False)
        self.host.spawn(self._preview(self._asked), "preview a merge")

    async def _preview(self, asked: int) -> None:
        turns = self.chosen_turns()
        summary = self.summary.toPlainText().strip()
        try:
            answers = (
                await self.host.operations.chosen_answers(self.child_id, turns) if turns else ""
            )
        except BranchwiseError as exc:
            if asked == self._asked:
                self._answered = asked
                self._show_error(exc)
                self._content = ("", "answer")
                self.preview.setPlainText("")
            return
        if asked != self._asked:
            return  # the choice changed meanwhile; a newer answer follows
        self._answered = asked
        if answers and summary:
            self._content = (answers + SEPARATOR + summary, "note")
        elif summary:
            self._content = (summary, "summary")
        else:
            self._content = (answers, "answer")
        text = self._content[0]
        self.preview.setPlainText(text)
        self.confirm_button.setEnabled(bool(text.strip()))

    def write_summary(self) -> None:
        """Have the provider write a summary into the box (editable afterwards)."""
        self.summary_button.setEnabled(False)
        self.summary_button.setText(_("Writing…"))
        self.host.spawn(self._write_summary(), "merge summary")

    async def _write_summary(self) -> None:
        try:
            text = await summarize(self.host, self.child_id)
        except BranchwiseError as exc:
            self._show_error(exc)
        else:
            self.summary.setPlainText(text)
        finally:
            self.summary_button.setEnabled(True)
            self.summary_button.setText(_("Write summary"))

    def confirm(self) -> None:
        """Ask the host to write the merge into the parent; stay open and say why if refused."""
        if not self.preview_current:
            return  # Confirm is disabled until the preview shows what will be written
        text, kind = self.content()
        if not text.strip():
            return
        self.confirm_button.setEnabled(False)
        self.host.spawn(self._merge(text, kind), "bring back to the parent")

    async def _merge(self, text: str, kind: str) -> None:
        try:
            self.result_merge = await merge(self.host, self.child_id, text, kind, initiator=self)
        except BranchwiseError as exc:
            self._show_error(exc)
            self.confirm_button.setEnabled(True)
            return
        self.accept()

    def _show_error(self, exc: BranchwiseError) -> None:
        self.error_label.setText(reason_text(exc.code))
        self.error_label.show()
