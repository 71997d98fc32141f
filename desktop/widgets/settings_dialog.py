"""The settings dialog: which model answers, and in which language the app speaks.

Values are checked with ``core.settings.validate_settings`` (the same rules
as the file on disk) and every problem is shown next to its field, in the
user's language, instead of being saved. The model list comes from the
server itself ("Refresh models"); the API key is masked.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from branchwise.core.conversation.settings import MAX_TEMPERATURE
from branchwise.core.errors import BranchwiseError, InvalidSettings
from branchwise.core.i18n.language import DISPLAY_NAMES, _, ngettext
from branchwise.core.i18n.locales import SUPPORTED
from branchwise.core.i18n.reasons import fill, reason_text
from branchwise.core.settings import MAX_DEMO_PACE, THEMES, Settings, validate_settings
from branchwise.desktop.host.operations import ModelList, Operations

FIELDS = (
    "provider",
    "baseUrl",
    "model",
    "apiKey",
    "systemPrompt",
    "temperature",
    "language",
    "theme",
    "demoPace",
    "savedServers",
)
NO_TEMPERATURE = -0.1
"""The temperature box's lowest value, shown as "Server default" (none is sent)."""


class SettingsDialog(QDialog):
    """Edit and save :class:`Settings`.

    Args:
        settings: the current settings.
        on_save: called with valid new settings when the user saves.
        operations: the host's operations, which ask model servers for the dialog.

    Attributes:
        detect_candidates: where "Detect local servers" looks (``None``: the
            configured URL, then the usual local ports).
    """

    def __init__(
        self,
        settings: Settings,
        on_save: Callable[[Settings], None],
        operations: Operations,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("settingsDialog")
        self._operations = operations
        self.setWindowModality(Qt.WindowModality.WindowModal)
        self._settings = settings
        self._on_save = on_save
        self._models_task: asyncio.Task[None] | None = None
        self._detect_task: asyncio.Task[None] | None = None
        self.detect_candidates: Sequence[str] | None = None

        self.provider = QComboBox(self)
        self.provider.setObjectName("provider")
        self.provider.addItem("", "demo")
        self.provider.addItem("", "openai")
        self.provider.currentIndexChanged.connect(self._render_enabled)
        self.base_url = QLineEdit(self)
        self.base_url.setObjectName("baseUrl")
        self.base_url.setPlaceholderText("http://127.0.0.1:11434/v1")
        self.model = QComboBox(self)
        self.model.setObjectName("model")
        self.model.setEditable(True)
        self.show_all_models = QCheckBox(self)
        self.show_all_models.setObjectName("showAllModels")
        self.show_all_models.toggled.connect(lambda _on: self._render_models())
        self._model_list: ModelList | None = None
        self.refresh_button = QPushButton(self)
        self.refresh_button.setObjectName("refreshModels")
        self.refresh_button.clicked.connect(self.refresh_models)
        self.detect_button = QPushButton(self)
        self.detect_button.setObjectName("detectServers")
        self.detect_button.clicked.connect(self.detect_servers)
        self.api_key = QLineEdit(self)
        self.api_key.setObjectName("apiKey")
        self.api_key.setEchoMode(QLineEdit.EchoMode.Password)
        self.system_prompt = QPlainTextEdit(self)
        self.system_prompt.setObjectName("systemPrompt")
        self.system_prompt.setTabChangesFocus(True)
        self.system_prompt.setFixedHeight(72)
        self.temperature = QDoubleSpinBox(self)
        self.temperature.setObjectName("temperature")
        self.temperature.setRange(NO_TEMPERATURE, MAX_TEMPERATURE)
        self.temperature.setSingleStep(0.1)
        self.temperature.setDecimals(2)
        self.language = QComboBox(self)
        self.language.setObjectName("language")
        self.language.addItem("", None)
        for code in SUPPORTED:
            self.language.addItem(DISPLAY_NAMES[code], code)
        self.theme = QComboBox(self)
        self.theme.setObjectName("theme")
        for choice in THEMES:
            self.theme.addItem("", choice)

        self.demo_pace = QSpinBox(self)
        self.demo_pace.setObjectName("demoPace")
        self.demo_pace.setRange(0, MAX_DEMO_PACE)
        self.demo_pace.setSingleStep(10)
        self.saved_servers = QListWidget(self)
        self.saved_servers.setObjectName("savedServers")
        self.saved_servers.setFixedHeight(72)
        self.saved_servers.itemSelectionChanged.connect(self._render_forget)
        self.forget_button = QPushButton(self)
        self.forget_button.setObjectName("forgetServer")
        self.forget_button.setAutoDefault(False)
        self.forget_button.clicked.connect(self.forget_server)

        self.errors: dict[str, QLabel] = {}
        for name in (*FIELDS, "form"):
            label = QLabel(self)
            label.setObjectName(f"{name}Error")
            label.setWordWrap(True)
            label.setTextFormat(Qt.TextFormat.PlainText)
            label.setProperty("error", True)
            label.hide()
            self.errors[name] = label
        self.models_status = QLabel(self)
        self.models_status.setObjectName("modelsStatus")
        self.models_status.setTextFormat(Qt.TextFormat.PlainText)
        self.models_status.setWordWrap(True)

        model_row = QHBoxLayout()
        model_row.addWidget(self.model, 1)
        model_row.addWidget(self.refresh_button)
        self.form = QFormLayout()
        self._labels = {name: QLabel(self) for name in FIELDS}
        self.form.addRow(self._labels["provider"], self._with_error(self.provider, "provider"))
        url_row = QWidget(self)
        url_layout = QHBoxLayout(url_row)
        url_layout.setContentsMargins(0, 0, 0, 0)
        url_layout.addWidget(self.base_url, 1)
        url_layout.addWidget(self.detect_button)
        self.form.addRow(self._labels["baseUrl"], self._with_error(url_row, "baseUrl"))
        model_box = QWidget(self)
        model_layout = QVBoxLayout(model_box)
        model_layout.setContentsMargins(0, 0, 0, 0)
        model_layout.addLayout(model_row)
        model_layout.addWidget(self.show_all_models)
        model_layout.addWidget(self.models_status)
        model_layout.addWidget(self.errors["model"])
        self.form.addRow(self._labels["model"], model_box)
        self.form.addRow(self._labels["apiKey"], self._with_error(self.api_key, "apiKey"))
        self.form.addRow(
            self._labels["systemPrompt"], self._with_error(self.system_prompt, "systemPrompt")
        )
        self.form.addRow(
            self._labels["temperature"], self._with_error(self.temperature, "temperature")
        )
        self.form.addRow(self._labels["language"], self._with_error(self.language, "language"))
        self.form.addRow(self._labels["theme"], self._with_error(self.theme, "theme"))
        self.form.addRow(self._labels["demoPace"], self._with_error(self.demo_pace, "demoPace"))
        saved_row = QWidget(self)
        saved_layout = QHBoxLayout(saved_row)
        saved_layout.setContentsMargins(0, 0, 0, 0)
        saved_layout.addWidget(self.saved_servers, 1)
        saved_layout.addWidget(self.forget_button, 0, Qt.AlignmentFlag.AlignTop)
        saved_box = self._with_error(saved_row, "savedServers")
        self.form.addRow(self._labels["savedServers"], saved_box)
        self.form.setRowVisible(saved_box, bool(settings.saved_servers))
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel, self
        )
        self.buttons.accepted.connect(self.save)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(self.form)
        layout.addWidget(self.errors["form"])
        layout.addWidget(self.buttons)
        self._load(settings)
        self.retranslate_ui()
        self.resize(520, self.sizeHint().height())

    def _with_error(self, field: QWidget, name: str) -> QWidget:
        box = QWidget(self)
        layout = QVBoxLayout(box)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(field)
        layout.addWidget(self.errors[name])
        return box

    def _load(self, settings: Settings) -> None:
        self.provider.setCurrentIndex(max(0, self.provider.findData(settings.provider)))
        self.base_url.setText(settings.base_url)
        if settings.model:
            self.model.addItem(settings.model)
        self.model.setEditText(settings.model)
        self.api_key.setText(settings.api_key)
        self.language.setCurrentIndex(max(0, self.language.findData(settings.language)))
        self.theme.setCurrentIndex(max(0, self.theme.findData(settings.theme)))
        self.system_prompt.setPlainText(settings.system_prompt)
        temperature = settings.temperature
        self.temperature.setValue(NO_TEMPERATURE if temperature is None else temperature)
        self.demo_pace.setValue(settings.demo_pace)
        self.saved_servers.clear()
        self.saved_servers.addItems(list(settings.saved_servers))
        self._render_forget()
        self._render_enabled()

    # -- what the UI exposes -------------------------------------------------

    def error_text(self, name: str) -> str:
        """The inline error shown for a field ("" when none)."""
        label = self.errors[name]
        return label.text() if not label.isHidden() else ""

    def values(self) -> dict[str, object]:
        """The form as the settings file's shape (unknown-to-the-form fields kept)."""
        data = self._settings.to_json()
        data.update(
            provider=self.provider.currentData(),
            baseUrl=self.base_url.text().strip(),
            model=self.model.currentText().strip(),
            apiKey=self.api_key.text().strip(),
            language=self.language.currentData(),
            theme=self.theme.currentData(),
            systemPrompt=self.system_prompt.toPlainText(),
            demoPace=self.demo_pace.value(),
            savedServers=self.saved_server_urls(),
            temperature=(
                None
                if self.temperature.value() <= NO_TEMPERATURE
                else round(self.temperature.value(), 2)
            ),
        )
        return data

    def saved_server_urls(self) -> list[str]:
        """The saved servers the dialog still lists, in order."""
        return [self.saved_servers.item(row).text() for row in range(self.saved_servers.count())]

    def forget_server(self) -> None:
        """Take the selected saved server off the list (Save keeps the change)."""
        for item in self.saved_servers.selectedItems():
            self.saved_servers.takeItem(self.saved_servers.row(item))
        self._render_forget()

    def _render_forget(self) -> None:
        self.forget_button.setEnabled(bool(self.saved_servers.selectedItems()))

    # -- saving ------------------------------------------------------------------

    def save(self) -> None:
        """Validate; show problems next to their fields, or save and close."""
        self._clear_errors()
        data = self.values()
        if data["provider"] == "openai" and not data["baseUrl"]:
            self._show_error(
                "baseUrl",
                fill(
                    _("Enter the address of the model server, for example {url}."),
                    {"url": "http://127.0.0.1:11434/v1"},
                ),
            )
            return
        try:
            settings = validate_settings(data)
        except InvalidSettings as exc:
            field = exc.details.get("field")
            self._show_error(field if field in self.errors else "form", _field_error(exc))
            return
        try:
            self._on_save(settings)
        except (BranchwiseError, OSError) as exc:
            code = exc.code if isinstance(exc, BranchwiseError) else "settings_unreadable"
            self._show_error("form", reason_text(code))
            return
        self.accept()

    def _clear_errors(self) -> None:
        for label in self.errors.values():
            label.clear()
            label.hide()

    def _show_error(self, name: str, text: str) -> None:
        label = self.errors[name]
        label.setText(text)
        label.show()
        self._fit_height()

    def _fit_height(self) -> None:
        """Grow to show every wrapped line of an error or a status.

        A wrapped label's height depends on its width; nested in the form's rows
        the dialog's minimum size does not follow it, so a two-line error was
        cut in half. Ask the layout for its height at this width instead.
        """
        layout = self.layout()
        if layout is None:
            return
        layout.activate()
        wanted = layout.totalHeightForWidth(self.width()) if layout.hasHeightForWidth() else -1
        wanted = max(wanted, layout.totalSizeHint().height())
        if wanted > self.height():
            self.resize(self.width(), wanted)

    # -- finding a server ------------------------------------------------------------

    def detect_servers(self) -> None:
        """Look for model servers on this machine; the first one found fills the form."""
        if self._detect_task is not None and not self._detect_task.done():
            return
        self._detect_task = asyncio.ensure_future(self._detect())

    async def _detect(self) -> None:
        self.detect_button.setEnabled(False)
        self.models_status.setText(_("Looking for model servers on this computer…"))
        try:
            draft = dataclasses.replace(self._settings, base_url=self.base_url.text().strip())
            servers = await self._operations.detect_servers(draft, self.detect_candidates)
        finally:
            self.detect_button.setEnabled(True)
        usable = [s for s in servers if s.models] or servers
        if not usable:
            self.models_status.setText(
                _(
                    "No model server answered on this computer (Ollama, LM Studio, "
                    "llama.cpp and vLLM on their usual ports)."
                )
            )
            return
        found = usable[0]
        self.provider.setCurrentIndex(self.provider.findData("openai"))
        self.base_url.setText(found.base_url)
        current = self.model.currentText() if self._settings.base_url == found.base_url else ""
        self.model.clear()
        self.model.addItems(list(found.models))
        self.model.setEditText(current or (found.models[0] if found.models else ""))
        self.models_status.setText(
            fill(
                ngettext(
                    "Found {url}, offering {n} model.",
                    "Found {url}, offering {n} models.",
                    len(found.models),
                ),
                {"url": found.base_url, "n": len(found.models)},
            )
        )

    # -- the model list ------------------------------------------------------------

    def refresh_models(self) -> None:
        """Ask the server for its models (the answer fills the model list)."""
        if self._models_task is not None and not self._models_task.done():
            return
        self._models_task = asyncio.ensure_future(self._load_models())

    async def _load_models(self) -> None:
        for name in ("model", "baseUrl"):
            self.errors[name].clear()
            self.errors[name].hide()
        self.models_status.setText(_("Asking the server for its models…"))
        self.refresh_button.setEnabled(False)
        try:
            draft = dataclasses.replace(
                self._settings,
                base_url=self.base_url.text().strip(),
                api_key=self.api_key.text().strip(),
            )
            answer = await self._operations.list_models(draft)
        finally:
            self.refresh_button.setEnabled(True)
        if answer.unlisted is not None:
            # Not a failure: such a server chats with a typed model name.
            self.models_status.setText(reason_text(answer.unlisted))
            self.model.setFocus()
            return
        if answer.failure is not None:
            self.models_status.setText("")
            self._show_error("model", reason_text(answer.failure))
            return
        self._model_list = answer
        self._render_models()

    def _render_models(self) -> None:
        """The listed models for chat; embedding ones only with "Show all models" checked."""
        answer = self._model_list
        if answer is None:
            return
        every = self.show_all_models.isChecked()
        models = [m for m in answer.models if every or m not in answer.embedding]
        current = self.model.currentText()
        self.model.clear()
        self.model.addItems(models)
        chat = [m for m in models if m not in answer.embedding]
        self.model.setEditText(current or (chat[0] if chat else models[0] if models else ""))
        status = fill(
            ngettext("The server offers {n} model.", "The server offers {n} models.", len(models)),
            {"n": len(models)},
        )
        hidden = 0 if every else len(answer.embedding)
        if hidden:
            status += " " + fill(
                ngettext("({n} embedding model hidden.)", "({n} embedding models hidden.)", hidden),
                {"n": hidden},
            )
        self.models_status.setText(status)
        self._fit_height()

    def _render_enabled(self) -> None:
        server = self.provider.currentData() == "openai"
        for widget in (
            self.base_url,
            self.model,
            self.refresh_button,
            self.api_key,
            self.show_all_models,
        ):
            widget.setEnabled(server)
        self.demo_pace.setEnabled(not server)

    def done(self, result: int) -> None:
        """Stop a model-list request still running when the dialog closes."""
        for task in (self._models_task, self._detect_task):
            if task is not None and not task.done():
                task.cancel()
        super().done(result)

    def retranslate_ui(self) -> None:
        """Re-render every localized text."""
        self.setWindowTitle(_("Settings"))
        self.provider.setItemText(0, _("Demo (offline)"))
        self.provider.setItemText(1, _("OpenAI-compatible server"))
        self.language.setItemText(0, _("System default"))
        theme_names = {"system": _("Same as the system"), "light": _("Light"), "dark": _("Dark")}
        for index in range(self.theme.count()):
            self.theme.setItemText(index, theme_names[self.theme.itemData(index)])
        texts = {
            "provider": _("Provider"),
            "baseUrl": _("Base URL"),
            "model": _("Model"),
            "apiKey": _("API key"),
            "systemPrompt": _("System prompt"),
            "temperature": _("Temperature"),
            "language": _("Language"),
            "theme": _("Appearance"),
            "demoPace": _("Demo pace"),
            "savedServers": _("Servers used before"),
        }
        for name, label in self._labels.items():
            label.setText(texts[name])
        self.refresh_button.setText(_("Refresh models"))
        self.show_all_models.setText(_("Show all models"))
        self.show_all_models.setToolTip(
            _("Also list embedding models, which cannot answer in a conversation")
        )
        self._render_models()
        self.temperature.setSpecialValueText(_("Server default"))
        self.demo_pace.setSpecialValueText(_("Instant"))
        self.demo_pace.setSuffix(_(" words per second"))
        self.demo_pace.setToolTip(
            _("How fast the offline demo responder writes its answers; 0 writes them at once")
        )
        self.system_prompt.setPlaceholderText(
            _("Sent before every conversation that has none of its own")
        )
        self.forget_button.setText(_("Forget"))
        self.saved_servers.setToolTip(
            _("Send to several also offers these servers' models. Forget one to stop offering it.")
        )
        self.detect_button.setText(_("Detect local servers"))
        self.detect_button.setToolTip(
            _("Look for Ollama, LM Studio, llama.cpp or vLLM running on this computer")
        )
        self.api_key.setPlaceholderText(
            _("Leave empty to use BRANCHWISE_API_KEY or OPENAI_API_KEY")
        )


def _field_error(exc: InvalidSettings) -> str:
    """A validation failure in the user's language, by the field it names."""
    field = exc.details.get("field")
    if field == "baseUrl":
        return reason_text("provider_invalid_url")
    if field == "language":
        return reason_text("unknown_language", value="")
    if field in ("systemPrompt", "temperature"):
        return reason_text("invalid_conversation_settings")
    return reason_text(exc.code)
