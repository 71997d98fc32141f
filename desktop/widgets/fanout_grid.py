"""Send to several: choose the models, watch the answers stream side by side, then decide.

:class:`SendToSeveralDialog` picks the targets (models from the configured
server's list or typed, each asked one or more times, 2 to 8 answers in
all) and refuses other counts with the engine's own reason.
:class:`FanoutGrid` is the live side by side: one column per branch, as the
compare view lays them out and rendered with the transcript's Markdown
view, each headed by its label with the host's progress figures (tokens so
far, tokens per second, time to first token), a Stop per column and Stop
all. A failing model ends its own column with its reason and a Retry; the
others go on. Once answers end, "Continue with this one" opens that branch
in a tab and "Fuse…" (:class:`FuseDialog`) writes one answer from the chosen
columns into the conversation the fan-out started from.

The work itself is the host's (:mod:`~branchwise.desktop.host.fanout`): the
grid only follows the :class:`BranchProgress` reports and the text pieces,
repainting at most every ``STREAM_REPAINT_MS`` so eight streams do not hold
up the window.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

import shiboken6
from PySide6.QtCore import QEvent, Qt, QTimer
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from branchwise.core.conversation.attachments import PreparedAttachment
from branchwise.core.conversation.fanout import (
    MAX_TARGETS,
    FanoutBranch,
    FanoutTarget,
    default_fuse_instruction,
    numbered_targets,
)
from branchwise.core.errors import BranchwiseError, InvalidFanout
from branchwise.core.i18n.language import (
    _,
    add_language_listener,
    format_number,
    ngettext,
    remove_language_listener,
)
from branchwise.core.i18n.reasons import fill, reason_text
from branchwise.core.providers.detect import DetectedServer
from branchwise.desktop.host.conversation import ConversationRef
from branchwise.desktop.host.fanout import (
    BranchProgress,
    FanoutRun,
    fuse,
    fuse_remote,
    send_to_several,
    send_to_several_remote,
)
from branchwise.desktop.host.host import Host
from branchwise.desktop.host.notices import Level
from branchwise.desktop.widgets.markdown_view import MarkdownView
from branchwise.desktop.widgets.turn_widget import STREAM_REPAINT_MS, STREAM_REPAINT_SLOWDOWN

MIN_TARGETS = 2
"""Fewer answers than this is not a comparison: the composer's Send asks one."""
MODEL_ROLE = Qt.ItemDataRole.UserRole
SERVER_ROLE = Qt.ItemDataRole.UserRole + 1
COLUMNS_PER_ROUND = 2
"""Columns whose new text is rendered per repaint interval when more are behind: four
streaming answers each move on five times a second instead of twenty, and the window
paints about as often as for one or two."""
RENDER_SPACING_MS = 40
"""The longest wait for the grid's repaint before the next column's new text is rendered
anyway (normally the next one is rendered as soon as the last one is painted)."""
COLUMN_MIN_WIDTH = 320
"""A column's narrowest (its answer stays readable); more columns than fit scroll sideways."""


SERVER_KINDS = {
    "ollama": "Ollama",
    "lmstudio": "LM Studio",
    "llama.cpp": "llama.cpp",
    "vllm": "vLLM",
}
"""The names of the servers :func:`~branchwise.core.providers.detect.detect_servers` recognises."""


def own_heading(url: str | None) -> Callable[[], str]:
    """The heading of the conversation's own server's models (``None``: the demo answers)."""
    if url is None:
        return demo_heading
    address = urlsplit(url).netloc or url
    return lambda: fill(_("Models on {address}"), {"address": address})


def demo_heading() -> str:
    """The heading of the demo responder's model."""
    return _("Demo responder (offline)")


def other_heading(server: DetectedServer) -> Callable[[], str]:
    """The heading of a saved or found server's models ("Models on 127.0.0.1:11434 · Ollama")."""
    address = urlsplit(server.base_url).netloc or server.base_url

    def text() -> str:
        kind = SERVER_KINDS.get(server.kind) or _("OpenAI-compatible server")
        return fill(_("Models on {address} · {kind}"), {"address": address, "kind": kind})

    return text


class SendToSeveralDialog(QDialog):
    """Which models to ask, where, and how many times each (2 to 8 answers in all).

    The list holds a group per server: the conversation's own (models with
    no server of their own: the app's server or, without one, the demo
    responder), then others the window finds (:meth:`add_server`: saved
    servers and this machine's, the demo beside a server), each under a
    heading. A model typed in is asked of the conversation's own server.

    Args:
        models: the models offered (checked ones are asked).
        default_model: the model asked when none is checked but samples are.
        checked: the models checked at first.
        heading: the own group's heading, in the current language (``None``: none).
    """

    def __init__(
        self,
        models: Sequence[str],
        default_model: str,
        checked: Sequence[str] = (),
        parent: QWidget | None = None,
        heading: Callable[[], str] | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("sendToSeveralDialog")
        self.default_model = default_model
        self._headings: list[tuple[QListWidgetItem, Callable[[], str]]] = []
        self.intro = QLabel(self)
        self.intro.setWordWrap(True)
        self.models = QListWidget(self)
        self.models.setObjectName("fanoutModels")
        if heading is not None:
            self._add_heading(None, heading)
        for model in models:
            self.add_model(model, model in checked)
        self.new_model = QLineEdit(self)
        self.new_model.setObjectName("fanoutNewModel")
        self.new_model.returnPressed.connect(self._add_typed)
        self.add_button = QPushButton(self)
        self.add_button.setAutoDefault(False)
        self.add_button.setObjectName("fanoutAddModel")
        self.add_button.clicked.connect(self._add_typed)
        adding = QHBoxLayout()
        adding.addWidget(self.new_model, 1)
        adding.addWidget(self.add_button)
        self.samples_label = QLabel(self)
        self.samples = QSpinBox(self)
        self.samples.setObjectName("fanoutSamples")
        self.samples.setRange(1, MAX_TARGETS)
        self.samples_label.setBuddy(self.samples)
        samples_row = QHBoxLayout()
        samples_row.addWidget(self.samples_label)
        samples_row.addWidget(self.samples)
        samples_row.addStretch(1)
        self.summary = QLabel(self)
        self.summary.setObjectName("fanoutSummary")
        self.summary.setWordWrap(True)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel, self
        )
        self.send_button = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.intro)
        layout.addWidget(self.models, 1)
        layout.addLayout(adding)
        layout.addLayout(samples_row)
        layout.addWidget(self.summary)
        layout.addWidget(self.buttons)
        self.models.itemChanged.connect(lambda _item: self._render())
        self.samples.valueChanged.connect(lambda _n: self._render())
        self.resize(420, 420)
        self.retranslate_ui()
        add_language_listener(self._language_changed)
        self.destroyed.connect(lambda: remove_language_listener(self._language_changed))

    def add_model(self, model: str, checked: bool = True, server: str | None = None) -> None:
        """Offer ``model`` of ``server`` (checked), unless it is offered already."""
        model = model.strip()
        if not model:
            return
        for row in range(self.models.count()):
            item = self.models.item(row)
            if item.data(MODEL_ROLE) == model and item.data(SERVER_ROLE) == server:
                item.setCheckState(Qt.CheckState.Checked if checked else item.checkState())
                return
        item = QListWidgetItem(model)
        item.setData(MODEL_ROLE, model)
        item.setData(SERVER_ROLE, server)
        item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
        item.setCheckState(Qt.CheckState.Checked if checked else Qt.CheckState.Unchecked)
        self.models.insertItem(self._group_end(server), item)

    def add_server(self, server: str, heading: Callable[[], str], models: Sequence[str]) -> None:
        """Offer ``models`` of another ``server`` (unchecked) under ``heading``."""
        if not models or self._group_end(server, default=-1) >= 0:
            return
        self._add_heading(server, heading)
        for model in models:
            self.add_model(model, checked=False, server=server)

    def _add_heading(self, server: str | None, heading: Callable[[], str]) -> None:
        item = QListWidgetItem(heading())
        item.setData(SERVER_ROLE, server)
        item.setFlags(Qt.ItemFlag.ItemIsEnabled)
        font = item.font()
        font.setBold(True)
        item.setFont(font)
        self.models.insertItem(self._group_end(server), item)
        self._headings.append((item, heading))

    def _group_end(self, server: str | None, default: int | None = None) -> int:
        """The row after ``server``'s group (its rows are kept together), else ``default``
        (``None``: the end of the list; the own group, with no server, comes first)."""
        last = None
        for row in range(self.models.count()):
            if self.models.item(row).data(SERVER_ROLE) == server:
                last = row
        if last is not None:
            return last + 1
        if default is not None:
            return default
        return 0 if server is None and not self._headings else self.models.count()

    def headings(self) -> list[str]:
        """The groups' headings, top to bottom."""
        return [
            self.models.item(row).text()
            for row in range(self.models.count())
            if self.models.item(row).data(MODEL_ROLE) is None
        ]

    def _add_typed(self) -> None:
        self.add_model(self.new_model.text())
        self.new_model.clear()
        self._render()

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 - Qt override
        """Enter in the model's name adds that model; it does not send."""
        typing = self.focusWidget() is self.new_model
        if typing and event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            event.accept()  # the field's returnPressed has added it
            return
        super().keyPressEvent(event)

    def set_checked(self, models: Sequence[str], server: str | None = None) -> None:
        """Check exactly ``models`` of ``server`` (offering those not offered yet)."""
        for model in models:
            self.add_model(model, server=server)
        for row in range(self.models.count()):
            item = self.models.item(row)
            if item.data(MODEL_ROLE) is None:
                continue
            wanted = item.data(MODEL_ROLE) in models and item.data(SERVER_ROLE) == server
            item.setCheckState(Qt.CheckState.Checked if wanted else Qt.CheckState.Unchecked)
        self._render()

    def check(self, model: str, server: str | None) -> None:
        """Check one more model (of ``server``)."""
        self.add_model(model, checked=True, server=server)
        self._render()

    def checked_targets(self) -> list[tuple[str, str | None]]:
        """The ``(model, server)`` pairs checked, in the list's order."""
        return [
            (item.data(MODEL_ROLE), item.data(SERVER_ROLE))
            for item in (self.models.item(row) for row in range(self.models.count()))
            if item.data(MODEL_ROLE) is not None and item.checkState() == Qt.CheckState.Checked
        ]

    def checked_models(self) -> list[str]:
        """The models checked, in the list's order."""
        return [model for model, _server in self.checked_targets()]

    def samples_asked(self) -> int | None:
        """How many times each model is asked (``None``: once)."""
        return self.samples.value() if self.samples.value() > 1 else None

    def targets(self) -> tuple[FanoutTarget, ...]:
        """What will be asked.

        Raises:
            InvalidFanout: fewer than 2 or more than 8 answers, as the engine says it.
        """
        asked = self.checked_targets()
        if not asked and self.samples_asked() is not None:
            asked = [(self.default_model, None)]
        targets = numbered_targets([pair for pair in asked for _ in range(self.samples.value())])
        if len(targets) < MIN_TARGETS:
            raise InvalidFanout(
                "choose at least two models or samples", field="targets", count=len(targets)
            )
        return targets

    def refusal(self) -> str | None:
        """Why these choices cannot be sent, in the user's words (``None``: they can)."""
        try:
            self.targets()
        except BranchwiseError as exc:
            return reason_text(exc.code)
        return None

    def _render(self) -> None:
        refused = self.refusal()
        self.send_button.setEnabled(refused is None)
        if refused is not None:
            self.summary.setText(refused)
            return
        count = len(self.targets())
        self.summary.setText(
            fill(
                ngettext(
                    "{n} answer, each its own branch.", "{n} answers, each its own branch.", count
                ),
                {"n": format_number(count)},
            )
        )

    def accept(self) -> None:
        """Close only when the choices can be sent."""
        if self.refusal() is None:
            super().accept()

    def _language_changed(self, _code: str) -> None:
        if not shiboken6.isValid(self):
            remove_language_listener(self._language_changed)
            return
        self.retranslate_ui()

    def retranslate_ui(self) -> None:
        """Every text in the current language."""
        self.setWindowTitle(_("Send to several"))
        self.intro.setText(
            _(
                "Ask the same message of several models, or of one model several times. "
                "Each answer becomes its own branch."
            )
        )
        self.models.setAccessibleName(_("Models to ask"))
        self.new_model.setPlaceholderText(_("Another model's name"))
        self.add_button.setText(_("Add"))
        self.samples_label.setText(_("Answers per model:"))
        self.send_button.setText(_("Send"))
        for item, heading in self._headings:
            item.setText(heading())
        self._render()


class FanoutColumn(QFrame):
    """One branch's answer as it streams: header, figures, the answer and its buttons."""

    def __init__(self, grid: FanoutGrid, progress: BranchProgress, parent: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName("fanoutColumn")
        self.grid = grid
        self._progress = progress
        self.ended_at: float | None = None
        self.text = ""
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        self.setMinimumWidth(COLUMN_MIN_WIDTH)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.title = QLabel(self)
        self.title.setObjectName("fanoutColumnLabel")
        self.title.setTextFormat(Qt.TextFormat.PlainText)
        self.title.setStyleSheet("font-weight: bold")
        self.figures = QLabel(self)
        self.figures.setObjectName("fanoutFigures")
        self.figures.setTextFormat(Qt.TextFormat.PlainText)
        # Figures change many times a second: their width must never move the columns (a
        # width change relays out and repaints every column's answer in one pass).
        self.figures.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self.state = QLabel(self)
        self.state.setObjectName("fanoutState")
        self.state.setTextFormat(Qt.TextFormat.PlainText)
        self.state.setWordWrap(True)
        self.answer = MarkdownView(self)
        self.answer.setObjectName("fanoutAnswer")
        scroll = QScrollArea(self)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        holder = QWidget(scroll)
        holder_layout = QVBoxLayout(holder)
        holder_layout.setContentsMargins(0, 0, 0, 0)
        holder_layout.addWidget(self.answer)
        holder_layout.addStretch(1)
        scroll.setWidget(holder)
        self.answer_area = scroll
        self.stop_button = QPushButton(self)
        self.stop_button.setObjectName("fanoutStop")
        self.stop_button.clicked.connect(lambda: grid.stop(self.session_id))
        self.retry_button = QPushButton(self)
        self.retry_button.setObjectName("fanoutRetry")
        self.retry_button.clicked.connect(lambda: grid.retry(self.session_id))
        self.continue_button = QPushButton(self)
        self.continue_button.setObjectName("fanoutContinue")
        self.continue_button.clicked.connect(lambda: grid.continue_with(self.session_id))
        self.chosen = QCheckBox(self)
        self.chosen.setObjectName("fanoutChosen")
        self.chosen.setChecked(True)
        self.chosen.toggled.connect(lambda _on: grid.render_actions())
        buttons = QHBoxLayout()
        buttons.addWidget(self.chosen)
        buttons.addStretch(1)
        for button in (self.stop_button, self.retry_button, self.continue_button):
            button.setAutoDefault(False)  # Enter in the grid must not stop or open anything
            buttons.addWidget(button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 6, 8, 6)
        layout.addWidget(self.title)
        layout.addWidget(self.figures)
        layout.addWidget(self.state)
        layout.addWidget(scroll, 1)
        layout.addLayout(buttons)

    @property
    def progress(self) -> BranchProgress:
        """The latest report of this column's branch."""
        return self._progress

    @progress.setter
    def progress(self, progress: BranchProgress) -> None:
        # Speed is measured up to the end, not up to when it is looked at.
        if progress.state == "ended" and self._progress.state != "ended":
            self.ended_at = time.monotonic()
        elif progress.state != "ended":
            self.ended_at = None
        self._progress = progress

    @property
    def session_id(self) -> str:
        """The branch this column shows."""
        return self.progress.session_id

    @property
    def ended(self) -> bool:
        """Its answer ended (whatever the reason)."""
        return self.progress.state == "ended"

    @property
    def answered(self) -> bool:
        """Its answer ended with text that can be fused or continued from."""
        return self.ended and self.progress.end_reason != "error"

    def show_text(self) -> None:
        """Render the text received so far (following its end while it streams)."""
        if self.answer.markdown != self.text:
            bar = self.answer_area.verticalScrollBar()
            at_end = bar.value() >= bar.maximum() - 4
            self.answer.set_markdown(self.text)
            if at_end and not self.ended:
                QTimer.singleShot(0, self._follow_end)

    def _follow_end(self) -> None:
        if shiboken6.isValid(self):
            bar = self.answer_area.verticalScrollBar()
            bar.setValue(bar.maximum())

    def figures_text(self, now: float) -> str:
        """How fast it answers: "120 tokens · 35.2 tokens/s · first token 0.4 s"."""
        progress = self.progress
        parts = [
            fill(
                ngettext("{n} token", "{n} tokens", progress.chunks),
                {"n": format_number(progress.chunks)},
            )
        ]
        rate = progress.chunks_per_second(self.ended_at or now)
        if rate is not None:
            parts.append(fill(_("{rate} tokens/s"), {"rate": format_number(round(rate, 1))}))
        first = progress.time_to_first_chunk
        if first is not None:
            parts.append(
                fill(_("first token {seconds} s"), {"seconds": format_number(round(first, 2))})
            )
        return " · ".join(parts)

    def state_text(self) -> str:
        """Where the answer stands, in words ("" while it streams)."""
        progress = self.progress
        if progress.state == "waiting":
            return _("Waiting to be asked…")
        if progress.state == "queued":
            return _("Queued: this server is answering the others first.")
        if progress.state == "streaming":
            return "" if progress.chunks else _("Asked; waiting for the first token…")
        if progress.end_reason == "error":
            reason = reason_text(progress.error_code) if progress.error_code else _("It failed.")
            return fill(_("Failed: {reason}"), {"reason": reason})
        if progress.end_reason == "cancelled":
            return _("Stopped.")
        if progress.end_reason == "interrupted":
            return _("Interrupted.")
        return _("Done.")

    def refresh(self, now: float) -> None:
        """Header, figures, state and buttons from the latest progress."""
        progress = self.progress
        self.title.setText(progress.label)
        self.title.setToolTip(progress.model)
        self.setAccessibleName(progress.label)
        self.figures.setText(self.figures_text(now))
        state = self.state_text()
        self.state.setText(state)
        self.state.setVisible(bool(state))
        running = progress.state in ("waiting", "queued", "streaming")
        self.stop_button.setVisible(running)
        self.stop_button.setEnabled(running)
        failed = self.ended and progress.end_reason == "error"
        self.retry_button.setVisible(failed and self.grid.can_retry)
        self.continue_button.setEnabled(self.ended)
        self.chosen.setEnabled(self.answered)

    def retranslate_ui(self) -> None:
        """Button texts in the current language."""
        self.stop_button.setText(_("Stop"))
        self.retry_button.setText(_("Retry"))
        self.continue_button.setText(_("Continue with this one"))
        self.continue_button.setToolTip(_("Open this branch in a tab"))
        self.chosen.setText(_("Fuse"))
        self.chosen.setToolTip(_("Include this answer when fusing"))
        self.answer.retranslate_ui()


class GridRun(FanoutRun):
    """A :class:`FanoutRun` that also keeps each branch's text for its column."""

    def __init__(
        self, on_progress: Callable[[BranchProgress], None], on_text: Callable[[str, str], None]
    ) -> None:
        super().__init__(on_progress)
        self._on_text = on_text

    def pieces(self, branch: FanoutBranch, chunks: Sequence[str]) -> None:
        """Pieces of a branch's answer: counted, and kept for its column."""
        super().pieces(branch, chunks)
        self._on_text(branch.session_id, "".join(chunks))

    def heard(self, line: dict[str, Any]) -> None:
        """A server's progress line; its text pieces are kept for their column."""
        super().heard(line)
        session_id = line.get("sessionId")
        if line.get("event") == "text" and session_id in self.progress:
            self._on_text(str(session_id), str(line.get("chunk", "")))


class FanoutGrid(QDialog):
    """The answers of one fan-out side by side, live, and what to do with them.

    Args:
        host: the host that runs the fan-out.
        ref: the conversation the fan-out starts from (of this machine or a server).
        prompt: the message every branch asks.
        targets: the models (and samples) asked.
        open_branch: opens a branch in a tab (Continue, and the fused merge's parent).
        files: the composer's attachments, which every branch's question carries.
        on_refused: told of a refusal that came before any branch was made (the
            composer takes its prompt and files back).
    """

    def __init__(
        self,
        host: Host,
        ref: ConversationRef,
        prompt: str,
        targets: Sequence[FanoutTarget],
        open_branch: Callable[[ConversationRef], None],
        parent: QWidget | None = None,
        files: Sequence[PreparedAttachment] = (),
        on_refused: Callable[[BranchwiseError], None] | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("fanoutGrid")
        self.host = host
        self.ref = ref
        self.prompt = prompt
        self.targets = tuple(targets)
        self.files = tuple(files)
        self._on_refused = on_refused
        self._open_branch = open_branch
        self.run = GridRun(self._progressed, self._heard_text)
        self.columns: dict[str, FanoutColumn] = {}
        self.finished_sending = False
        self.fused: dict[str, Any] | None = None
        self.fuse_dialog: FuseDialog | None = None
        self._unsubscribe_text: Callable[[], None] | None = None
        self._retrying: set[str] = set()
        self.heading = QLabel(self)
        self.heading.setObjectName("fanoutHeading")
        self.heading.setTextFormat(Qt.TextFormat.PlainText)
        self.heading.setWordWrap(True)
        self.status = QLabel(self)
        self.status.setObjectName("fanoutStatus")
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        self.status.setWordWrap(True)
        # Columns keep a readable width; more than fit scroll sideways.
        self.columns_area = QScrollArea(self)
        self.columns_area.setObjectName("fanoutColumns")
        self.columns_area.setWidgetResizable(True)
        self.columns_area.setFrameShape(QFrame.Shape.NoFrame)
        self.columns_area.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        body = QWidget(self.columns_area)
        self._columns_layout = QHBoxLayout(body)
        self._columns_layout.setContentsMargins(0, 0, 0, 0)
        self._columns_layout.setSpacing(6)
        self.columns_area.setWidget(body)
        self.columns_area.horizontalScrollBar().valueChanged.connect(lambda _v: self._tick())
        self.stop_all_button = QPushButton(self)
        self.stop_all_button.setObjectName("fanoutStopAll")
        self.stop_all_button.clicked.connect(self.stop_all)
        self.fuse_button = QPushButton(self)
        self.fuse_button.setObjectName("fanoutFuse")
        self.fuse_button.clicked.connect(lambda: self.ask_fuse())
        self.close_button = QPushButton(self)
        self.close_button.clicked.connect(self.close)
        actions = QHBoxLayout()
        actions.addWidget(self.status, 1)
        for button in (self.stop_all_button, self.fuse_button, self.close_button):
            button.setAutoDefault(False)  # Enter in the grid must not stop all answers
            actions.addWidget(button)
        layout = QVBoxLayout(self)
        layout.addWidget(self.heading)
        layout.addWidget(self.columns_area, 1)
        layout.addLayout(actions)
        self._repaint = QTimer(self)
        self._repaint.setSingleShot(True)
        self._repaint.setInterval(STREAM_REPAINT_MS)
        self._repaint.timeout.connect(self._tick)
        self._render_timer = QTimer(self)
        self._render_timer.setSingleShot(True)
        self._render_timer.setInterval(RENDER_SPACING_MS)
        self._render_timer.timeout.connect(self._render_next)
        self._stale: list[FanoutColumn] = []
        self._round_ms = 0.0
        self._texts: dict[str, list[str]] = {}
        self.resize(min(1600, (COLUMN_MIN_WIDTH + 20) * len(self.targets) + 80), 640)
        self.retranslate_ui()
        add_language_listener(self._language_changed)

    # -- what the window asks ---------------------------------------------------------

    @property
    def can_retry(self) -> bool:
        """A failed answer can be asked again here (the branches are this machine's)."""
        return self.ref.server is None

    def start(self) -> None:
        """Make the branches and stream the answers (off the UI thread, through the host)."""
        self.host.spawn(self._send(), "send to several")

    async def _send(self) -> None:
        try:
            if self.ref.server is None:
                await send_to_several(
                    self.host,
                    self.ref.session_id,
                    self.prompt,
                    self.targets,
                    files=self.files,
                    run=self.run,
                    initiator=self,
                )
            else:
                server = self.host.server_of(self.ref)
                if server is None:
                    self.host.notices.post(
                        "server_disconnected", Level.WARNING, server=str(self.ref.server)
                    )
                    return
                models = [t.model for t in self.targets]
                await send_to_several_remote(
                    server,
                    self.ref.session_id,
                    self.prompt,
                    models,
                    None,
                    files=self.files,
                    run=self.run,
                )
        except BranchwiseError as exc:
            self.host.notices.post(exc.code, Level.ERROR, detail=exc.message, **exc.details)
            if not self.run.progress and self._on_refused is not None:
                self._on_refused(exc)
            if shiboken6.isValid(self):
                self.status.setText(reason_text(exc.code))
        finally:
            if shiboken6.isValid(self):
                self.finished_sending = True
                self.flush()

    def stop(self, session_id: str) -> None:
        """Stop one column's answer (it keeps its text)."""
        if session_id in self._retrying:
            self.host.stop(session_id)
        elif self.ref.server is not None:
            self.host.stop_at(self.ref.sibling(session_id))
        else:
            self.run.stop(session_id)

    def stop_all(self) -> None:
        """Stop every answer still running."""
        for column in self.columns.values():
            if not column.ended:
                self.stop(column.session_id)

    def retry(self, session_id: str) -> None:
        """Ask a failed column's question again in its branch (the others are not touched)."""
        column = self.columns.get(session_id)
        if column is None or not column.ended or self.ref.server is not None:
            return
        if self._unsubscribe_text is None:
            self._unsubscribe_text = self.host.subscribe_text(self._retry_text)
        self._retrying.add(session_id)
        column.text = ""
        column.progress = BranchProgress(
            session_id,
            column.progress.label,
            column.progress.model,
            state="streaming",
            started_at=time.monotonic(),
        )
        self._schedule()

        async def again() -> None:
            try:
                result = await self.host.retry(session_id, column.progress.turn_id)
                ended = {
                    "state": "ended",
                    "turn_id": result.turn_id,
                    "end_reason": result.end_reason,
                    "error_code": result.error.code if result.error is not None else None,
                }
            except BranchwiseError as exc:
                self.host.notices.post(exc.code, Level.ERROR, detail=exc.message)
                ended = {"state": "ended", "end_reason": "error", "error_code": exc.code}
            finally:
                self._retrying.discard(session_id)
            if shiboken6.isValid(column):
                column.progress = _replaced(column.progress, ended)
                self._schedule()

        self.host.spawn(again(), "retry a fanned-out answer")

    def _retry_text(self, session_id: str, _turn: str, _message: str, chunk: str) -> None:
        column = self.columns.get(session_id)
        if session_id not in self._retrying or column is None:
            return
        now = column.progress
        column.progress = _replaced(
            now,
            {
                "chunks": now.chunks + 1,
                "characters": now.characters + len(chunk),
                "first_chunk_at": now.first_chunk_at or time.monotonic(),
            },
        )
        self._heard_text(session_id, chunk)

    def continue_with(self, session_id: str) -> None:
        """Open that branch in a tab (the others stay, labelled, in the sidebar and on the map)."""
        self._open_branch(self.ref.sibling(session_id))

    def chosen(self) -> list[str]:
        """The answered columns ticked for fusing, left to right."""
        return [c.session_id for c in self.columns.values() if c.answered and c.chosen.isChecked()]

    def ask_fuse(self) -> FuseDialog | None:
        """Ask for the model and instruction, then fuse the ticked answers."""
        chosen = self.chosen()
        if len(chosen) < MIN_TARGETS:
            return None
        models = list(dict.fromkeys(t.model for t in self.targets))
        dialog = FuseDialog(models, self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.accepted.connect(
            lambda: self.fuse_now(chosen, dialog.model_name(), dialog.instruction())
        )
        dialog.open()
        self.fuse_dialog = dialog
        return dialog

    def _server_of(self, model: str) -> str | None:
        """The server a fused answer's model is asked of: the one that answered it here."""
        return next((t.model_server for t in self.targets if t.model == model), None)

    def fuse_now(self, branch_ids: Sequence[str], model: str, instruction: str) -> None:
        """Fuse ``branch_ids`` with ``model`` and ``instruction`` into the conversation."""
        self.status.setText(_("Fusing…"))
        self.fuse_button.setEnabled(False)

        async def run() -> None:
            try:
                if self.ref.server is None:
                    merged = await fuse(
                        self.host,
                        self.ref.session_id,
                        branch_ids,
                        model=model or None,
                        model_server=self._server_of(model),
                        instruction=instruction,
                        initiator=self,
                    )
                    result: dict[str, Any] = {
                        "parentSessionId": merged.parent_session_id,
                        "created": merged.created,
                    }
                else:
                    server = self.host.server_of(self.ref)
                    if server is None:
                        return
                    result = await fuse_remote(
                        server,
                        self.ref.session_id,
                        list(branch_ids),
                        model=model or None,
                        instruction=instruction,
                    )
            except BranchwiseError as exc:
                self.host.notices.post(exc.code, Level.ERROR, detail=exc.message)
                if shiboken6.isValid(self):
                    self.status.setText(reason_text(exc.code))
                    self.render_actions()
                return
            if not shiboken6.isValid(self):
                return
            self.fused = result
            self.status.setText(_("Fused into the conversation."))
            self.render_actions()
            self._open_branch(self.ref)

        self.host.spawn(run(), "fuse answers")

    # -- following the answers ------------------------------------------------------

    def _progressed(self, progress: BranchProgress) -> None:
        if not shiboken6.isValid(self):
            return
        column = self.columns.get(progress.session_id)
        if column is None:
            column = FanoutColumn(self, progress, self)
            column.retranslate_ui()
            self.columns[progress.session_id] = column
            self._columns_layout.addWidget(column, 1)
        column.progress = progress
        self._schedule()

    def _heard_text(self, session_id: str, chunk: str) -> None:
        self._texts.setdefault(session_id, []).append(chunk)
        self._schedule()

    def _schedule(self) -> None:
        if shiboken6.isValid(self) and not self._repaint.isActive():
            self._repaint.start()

    def flush(self) -> None:
        """Show everything that arrived, at once (after the fan-out, and for readers)."""
        if not shiboken6.isValid(self):
            return
        self._take_text()
        while self._stale:
            self._stale.pop(0).show_text()
        now = time.monotonic()
        for column in self.columns.values():
            column.refresh(now)
        self.render_actions()

    def _take_text(self) -> None:
        pending, self._texts = self._texts, {}
        for session_id, parts in pending.items():
            column = self.columns.get(session_id)
            if column is not None:
                column.text += "".join(parts)
                if column not in self._stale:
                    self._stale.append(column)

    def _tick(self) -> None:
        """The repaint timer: figures now, each column's new text on its own loop turn.

        Rendering the columns one per turn keeps any one pause of the window
        to one column's Markdown, however many stream. The next round waits
        in proportion to what the last one took (rendering and painting), and
        the window renders about as many columns a second however many
        stream (:data:`COLUMNS_PER_ROUND` per :data:`STREAM_REPAINT_MS`), so
        eight answers keep it as free as one does.
        """
        if not shiboken6.isValid(self):
            return
        self._take_text()
        now = time.monotonic()
        for column in self.columns.values():
            column.refresh(now)
        self.render_actions()
        behind = len(self._stale)
        self._repaint.setInterval(
            max(
                STREAM_REPAINT_MS,
                int(self._round_ms * STREAM_REPAINT_SLOWDOWN),
                STREAM_REPAINT_MS * behind // COLUMNS_PER_ROUND,
            )
        )
        self._round_ms = 0.0
        if self._stale and not self._render_timer.isActive():
            self._render_timer.start(0)
        if any(c.progress.state == "streaming" for c in self.columns.values()):
            self._repaint.start()  # the figures move on even between pieces

    def _render_next(self) -> None:
        """Render the next column in view whose text is behind (those scrolled away wait)."""
        if not shiboken6.isValid(self):
            return
        shown = next((c for c in self._stale if not c.visibleRegion().isEmpty()), None)
        if shown is None:
            return
        self._stale.remove(shown)
        started = time.perf_counter()
        shown.show_text()
        self._round_ms += (time.perf_counter() - started) * 1000
        if self._stale:
            self._render_timer.start(RENDER_SPACING_MS)  # sooner when the grid is painted

    def render_actions(self) -> None:
        """Stop all and Fuse… enabled as the columns stand."""
        running = any(not c.ended for c in self.columns.values())
        self.stop_all_button.setEnabled(running)
        enough = len(self.chosen()) >= MIN_TARGETS
        self.fuse_button.setEnabled(enough and not running and self.fused is None)
        if not enough:
            self.fuse_button.setToolTip(_("Tick two or more finished answers to fuse them"))
        else:
            self.fuse_button.setToolTip(_("Write one answer from the ticked ones"))

    def column_labels(self) -> list[str]:
        """Each column's header, left to right."""
        return [c.title.text() for c in self.columns.values()]

    # -- language and closing -----------------------------------------------------------

    def _language_changed(self, _code: str) -> None:
        if not shiboken6.isValid(self):
            remove_language_listener(self._language_changed)
            return
        self.retranslate_ui()

    def retranslate_ui(self) -> None:
        """Every text in the current language."""
        self.setWindowTitle(_("Send to several"))
        self.heading.setText(fill(_("Asked: {prompt}"), {"prompt": self.prompt}))
        self.stop_all_button.setText(_("Stop all"))
        self.fuse_button.setText(_("Fuse…"))
        self.close_button.setText(_("Close"))
        for column in self.columns.values():
            column.retranslate_ui()
        self.flush()

    def event(self, event: QEvent) -> bool:
        """After each repaint of the grid, render the next column whose text is behind.

        Qt gathers a window's repaints for a few milliseconds and paints them
        in one pass: columns rendered one per loop turn were still painted
        together, so with four answers streaming one pass painted four answers
        and the window paused four times as long as with one. Rendering the
        next column only once the last one is painted keeps each pass to one.
        """
        if event.type() != QEvent.Type.UpdateRequest:
            return super().event(event)
        started = time.perf_counter()
        handled = super().event(event)
        self._round_ms += (time.perf_counter() - started) * 1000
        if self._stale:
            self._render_timer.start(0)
        return handled

    def closeEvent(self, event: Any) -> None:  # noqa: N802 - Qt override
        """Closing the grid leaves the answers running (they are branches)."""
        self._release()
        super().closeEvent(event)

    def _release(self) -> None:
        remove_language_listener(self._language_changed)
        if self._unsubscribe_text is not None:
            self._unsubscribe_text()
            self._unsubscribe_text = None


class FuseDialog(QDialog):
    """Which model writes the fused answer, and what it is told (editable)."""

    def __init__(self, models: Sequence[str], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("fuseDialog")
        self.model_label = QLabel(self)
        self.model = QComboBox(self)
        self.model.setObjectName("fuseModel")
        self.model.setEditable(True)
        self.model.addItems(list(models))
        self.model_label.setBuddy(self.model)
        self.instruction_label = QLabel(self)
        self.instruction_edit = QPlainTextEdit(self)
        self.instruction_edit.setObjectName("fuseInstruction")
        self.instruction_edit.setPlainText(default_fuse_instruction())
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel, self
        )
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.model_label)
        layout.addWidget(self.model)
        layout.addWidget(self.instruction_label)
        layout.addWidget(self.instruction_edit, 1)
        layout.addWidget(self.buttons)
        self.setWindowTitle(_("Fuse answers"))
        self.model_label.setText(_("Model that writes the fused answer:"))
        self.instruction_label.setText(_("Instruction:"))
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setText(_("Fuse"))
        self.resize(460, 300)

    def model_name(self) -> str:
        """The model chosen or typed."""
        return self.model.currentText().strip()

    def instruction(self) -> str:
        """The instruction as edited."""
        return self.instruction_edit.toPlainText().strip() or default_fuse_instruction()


def _replaced(progress: BranchProgress, fields: dict[str, Any]) -> BranchProgress:
    return replace(progress, **fields)
