"""Conversation ▸ Conversation settings…: this conversation's model, system prompt, temperature.

Empty fields follow Settings (each field's placeholder says what that is), so
a conversation only records what the user changed for it. Saving commits one
``session/config`` event; a branch made later inherits the values, and a
branch made earlier keeps its own.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

from branchwise.core.conversation.settings import (
    DEMO_SERVER,
    MAX_TEMPERATURE,
    MIN_TEMPERATURE,
    ConversationSettings,
    validate_conversation_settings,
)
from branchwise.core.errors import BranchwiseError
from branchwise.core.i18n.language import _
from branchwise.core.i18n.reasons import error_text, fill
from branchwise.core.settings import Settings


class ConversationSettingsDialog(QDialog):
    """Edit one conversation's own settings.

    Args:
        title: the conversation's title (shown in the window title).
        current: what the conversation sets now.
        defaults: the app's Settings, shown as what empty fields follow.
        on_save: commits the new values; raises a ``BranchwiseError`` to refuse.
    """

    def __init__(
        self,
        title: str,
        current: ConversationSettings,
        defaults: Settings,
        on_save: Callable[[ConversationSettings], object],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("conversationSettingsDialog")
        self._on_save = on_save
        self.setWindowTitle(fill(_("Settings for “{title}”"), {"title": title}))
        self.model = QLineEdit(self)
        self.model.setObjectName("conversationModel")
        self.model.setText(current.model or "")
        self.model.setPlaceholderText(
            fill(_("As in Settings ({model})"), {"model": defaults.model or _("server's choice")})
        )
        self.system = QPlainTextEdit(self)
        self.system.setObjectName("conversationSystem")
        self.system.setPlainText(current.system or "")
        self.system.setPlaceholderText(
            defaults.system_prompt or _("No system prompt (as in Settings)")
        )
        self.own_temperature = QCheckBox(_("Own temperature"), self)
        self.own_temperature.setObjectName("ownTemperature")
        self.temperature = QDoubleSpinBox(self)
        self.temperature.setObjectName("conversationTemperature")
        self.temperature.setRange(MIN_TEMPERATURE, MAX_TEMPERATURE)
        self.temperature.setSingleStep(0.1)
        self.temperature.setDecimals(2)
        self.own_temperature.toggled.connect(self.temperature.setEnabled)
        self.own_temperature.setChecked(current.temperature is not None)
        self.temperature.setEnabled(current.temperature is not None)
        start = current.temperature if current.temperature is not None else defaults.temperature
        self.temperature.setValue(start if start is not None else 0.7)
        self.server = QCheckBox(server_choice(current.model_server), self)
        self.server.setObjectName("conversationServer")
        self.server.setChecked(current.model_server is not None)
        self.server.setVisible(current.model_server is not None)
        self._server = current.model_server
        self.error = QLabel(self)
        self.error.setObjectName("conversationSettingsError")
        self.error.setWordWrap(True)
        self.error.setTextFormat(Qt.TextFormat.PlainText)
        self.error.setProperty("error", True)
        self.error.hide()
        temperature_row = QHBoxLayout()
        temperature_row.addWidget(self.own_temperature)
        temperature_row.addWidget(self.temperature, 1)
        form = QFormLayout()
        form.addRow(_("Model"), self.model)
        form.addRow(_("System prompt"), self.system)
        form.addRow(_("Temperature"), temperature_row)
        if current.model_server is not None:
            form.addRow(_("Answered by"), self.server)
        note = QLabel(
            _("Empty fields follow Settings. Branches made from now on inherit these values."), self
        )
        note.setWordWrap(True)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel, self
        )
        buttons.accepted.connect(self.save)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(note)
        layout.addWidget(self.error)
        layout.addWidget(buttons)
        self.resize(520, 360)

    def values(self) -> ConversationSettings:
        """The form as settings (validated)."""
        return validate_conversation_settings(
            self.model.text(),
            self.system.toPlainText(),
            self.temperature.value() if self.own_temperature.isChecked() else None,
            self._server if self.server.isChecked() else None,
        )

    def save(self) -> None:
        """Commit the values, or show why they were refused."""
        try:
            self._on_save(self.values())
        except BranchwiseError as exc:
            self.error.setText(error_text(exc))
            self.error.show()
            return
        self.accept()


def server_choice(server: str | None) -> str:
    """The choice to keep a conversation's own server ("Keep asking 127.0.0.1:11434")."""
    if server is None:
        return ""
    if server == DEMO_SERVER:
        return _("Keep asking the offline demo responder")
    return fill(_("Keep asking {address}"), {"address": urlsplit(server).netloc or server})
