"""File ▸ Import…: pick another app's export, watch it come in, cancel if need be.

A file (ChatGPT ``.zip`` or ``conversations.json``, Open WebUI or LibreChat
``.json``, a Claude Code ``.jsonl``) or a folder (a Claude Code project or the
whole ``~/.claude/projects``) is imported by
:class:`~branchwise.desktop.host.importing.Importing`, off the window's
thread. The dialog shows a progress bar, how many conversations are in so
far, and Cancel; the outcome is shown here and as a notice, and the imported
trees appear in the sidebar.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from branchwise.core.i18n.language import _, format_number, ngettext
from branchwise.core.i18n.reasons import fill, reason_text
from branchwise.core.importing.run import ImportProgress
from branchwise.desktop.host.importing import Importing, ImportSummary

Spawn = Callable[[Coroutine[Any, Any, Any], str], object]

FORMATS: tuple[tuple[str | None, str], ...] = (
    (None, ""),  # detect: its label is translated in retranslate_ui
    ("chatgpt", "ChatGPT"),
    ("claude-code", "Claude Code"),
    ("open-webui", "Open WebUI"),
    ("librechat", "LibreChat"),
)
"""The format choices: ``None`` detects it from the file; app names are not translated."""

PROGRESS_STEPS = 1000


class ImportDialog(QDialog):
    """Where an import is chosen, followed and cancelled.

    Args:
        importing: the desktop's import operation.
        spawn: runs a coroutine on the app's loop (the host's ``spawn``).

    Attributes:
        file_dialog: the open file or folder picker, if any (tests answer it).
        summary: the last finished import's outcome.
    """

    def __init__(self, importing: Importing, spawn: Spawn, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("importDialog")
        self.importing = importing
        self._spawn = spawn
        self.file_dialog: QFileDialog | None = None
        self.summary: ImportSummary | None = None
        self.path_edit = QLineEdit(self)
        self.path_edit.setObjectName("importPath")
        self.path_edit.textChanged.connect(lambda _t: self._render_buttons())
        self.file_button = QPushButton(self)
        self.file_button.setObjectName("importChooseFile")
        self.file_button.clicked.connect(lambda: self.choose(folder=False))
        self.folder_button = QPushButton(self)
        self.folder_button.setObjectName("importChooseFolder")
        self.folder_button.clicked.connect(lambda: self.choose(folder=True))
        self.format_combo = QComboBox(self)
        self.format_combo.setObjectName("importFormat")
        for code, label in FORMATS:
            self.format_combo.addItem(label, code)
        self.progress_bar = QProgressBar(self)
        self.progress_bar.setObjectName("importProgress")
        self.progress_bar.setRange(0, PROGRESS_STEPS)
        self.progress_bar.setValue(0)
        self.count_label = QLabel(self)
        self.count_label.setObjectName("importCount")
        self.result_label = QLabel(self)
        self.result_label.setObjectName("importResult")
        self.result_label.setWordWrap(True)
        self.import_button = QPushButton(self)
        self.import_button.setObjectName("importStart")
        self.import_button.setDefault(True)
        self.import_button.clicked.connect(self.start)
        self.cancel_button = QPushButton(self)
        self.cancel_button.setObjectName("importCancel")
        self.cancel_button.clicked.connect(self.importing.cancel)
        self.close_box = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        self.close_box.rejected.connect(self.reject)
        self.path_label = QLabel(self)
        self.format_label = QLabel(self)
        pickers = QHBoxLayout()
        pickers.addWidget(self.path_edit, 1)
        pickers.addWidget(self.file_button)
        pickers.addWidget(self.folder_button)
        form = QFormLayout()
        form.addRow(self.path_label, pickers)
        form.addRow(self.format_label, self.format_combo)
        running = QHBoxLayout()
        running.addWidget(self.progress_bar, 1)
        running.addWidget(self.count_label)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.import_button)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addLayout(running)
        layout.addWidget(self.result_label)
        layout.addLayout(buttons)
        layout.addWidget(self.close_box)
        self.resize(560, 220)
        self._unsubscribe = importing.subscribe(self._progressed)
        self.destroyed.connect(lambda *_a, off=self._unsubscribe: off())
        self.retranslate_ui()
        self._progressed(importing.progress)

    # -- choosing -------------------------------------------------------------------

    def choose(self, *, folder: bool) -> QFileDialog:
        """Open the picker (a file, or a folder for Claude Code); its choice fills the path."""
        dialog = QFileDialog(self, _("Import conversations"))
        dialog.setObjectName("importPicker")
        dialog.setOption(QFileDialog.Option.DontUseNativeDialog)  # the same on every desktop
        dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptOpen)
        if folder:
            dialog.setFileMode(QFileDialog.FileMode.Directory)
            dialog.setOption(QFileDialog.Option.ShowDirsOnly)
        else:
            dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
            dialog.setNameFilters([_("Exports (*.json *.jsonl *.zip)"), _("All files (*)")])
        dialog.fileSelected.connect(self.path_edit.setText)
        self.file_dialog = dialog
        dialog.open()
        return dialog

    # -- running --------------------------------------------------------------------

    def start(self) -> None:
        """Import the chosen path (the import runs on the loop; this returns at once)."""
        text = self.path_edit.text().strip()
        if not text or self.importing.running:
            return
        self.summary = None
        self.result_label.clear()
        self.progress_bar.setRange(0, PROGRESS_STEPS)
        self.progress_bar.setValue(0)
        self._spawn(self._run(Path(text), self.format_combo.currentData()), "import")

    async def _run(self, path: Path, format: str | None) -> None:
        summary = await self.importing.run(path, format, initiator=self)
        self.summary = summary
        if summary is not None:
            if not summary.cancelled:
                self.progress_bar.setValue(PROGRESS_STEPS)
            self.result_label.setText(summary_text(summary))
        self._render_buttons()

    def _progressed(self, progress: ImportProgress | None) -> None:
        if progress is not None:
            if progress.total_bytes > 0:
                done = min(progress.read_bytes, progress.total_bytes)
                self.progress_bar.setRange(0, PROGRESS_STEPS)
                self.progress_bar.setValue(done * PROGRESS_STEPS // progress.total_bytes)
            else:
                self.progress_bar.setRange(0, 0)  # busy: the size is not known yet
            self.count_label.setText(conversations_text(progress.conversations))
        elif self.progress_bar.maximum() == 0:
            self.progress_bar.setRange(0, PROGRESS_STEPS)  # leave the busy state
        self._render_buttons()

    def _render_buttons(self) -> None:
        running = self.importing.running
        self.import_button.setEnabled(not running and bool(self.path_edit.text().strip()))
        self.cancel_button.setEnabled(running)
        for widget in (self.path_edit, self.file_button, self.folder_button, self.format_combo):
            widget.setEnabled(not running)

    def retranslate_ui(self) -> None:
        """Re-render every localized text of the dialog."""
        self.setWindowTitle(_("Import conversations"))
        self.path_label.setText(_("From:"))
        self.format_label.setText(_("Format:"))
        self.path_edit.setPlaceholderText(
            _("A .json, .jsonl or .zip export, or a Claude Code projects folder")
        )
        self.file_button.setText(_("Choose file…"))
        self.folder_button.setText(_("Choose folder…"))
        self.format_combo.setItemText(0, _("Detect automatically"))
        self.import_button.setText(_("Import"))
        self.cancel_button.setText(_("Cancel"))
        progress = self.importing.progress
        if progress is not None:
            self.count_label.setText(conversations_text(progress.conversations))
        if self.summary is not None:
            self.result_label.setText(summary_text(self.summary))


def conversations_text(count: int) -> str:
    """``"12 conversations"``: how many are in so far."""
    return fill(
        ngettext("{n} conversation", "{n} conversations", count), {"n": format_number(count)}
    )


def summary_text(summary: ImportSummary) -> str:
    """The outcome, in the words of its notice."""
    params: dict[str, object] = dict(summary.params)
    params.update(existing=format_number(summary.existing), skipped=format_number(summary.skipped))
    return reason_text(summary.code, **params)
