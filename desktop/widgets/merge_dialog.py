"""Bring back to parent…: choose what a branch carries back, preview it, confirm.

The branch's own answers are listed with checkboxes; a summary box can be
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
from branchwise.desktop.host.merging import (
    chosen_answers,
    merge,
    own_answers,
    parent_of,
    summarize,
)
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
        for answer in own_answers(host, child_id):
            first = answer.answer.strip().split("\n", 1)[0][:100]
            item = QListWidgetItem(f"{answer.prompt.strip()[:60]} → {first}", self.answers)
            item.setData(TURN_ROLE, answer.turn_id)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Unchecked)
        self.answers.itemChanged.connect(lambda _item: self._render_preview())
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
        self._render_preview()

    def chosen_turns(self) -> list[str]:
        """The checked answers' turn ids, in the branch's order."""
        items = (self.answers.item(i) for i in range(self.answers.count()))
        return [i.data(TURN_ROLE) for i in items if i.checkState() == Qt.CheckState.Checked]

    def content(self) -> tuple[str, str]:
        """What the parent will receive and its kind (``answer``, ``summary`` or ``note``)."""
        turns = self.chosen_turns()
        answers = chosen_answers(self.host, self.child_id, turns) if turns else ""
        summary = self.summary.toPlainText().strip()
        if answers and summary:
            return answers + SEPARATOR + summary, "note"
        if summary:
            return summary, "summary"
        return answers, "answer"

    def _render_preview(self) -> None:
        try:
            text, _kind = self.content()
        except BranchwiseError as exc:
            self._show_error(exc)
            text = ""
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
        try:
            text, kind = self.content()
        except BranchwiseError as exc:
            self._show_error(exc)
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
