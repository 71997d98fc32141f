"""The first-start introduction: what a branch is, and a sample conversation in one click.

An empty window said only "Start a new conversation…", which tells a newcomer
nothing about what makes Branchwise different. The introduction says what a
branch is in two sentences and offers "Try a sample conversation", which the
window carries out with the host's real operations
(:func:`~branchwise.desktop.host.sample.create_sample`). It shows in the
empty window until dismissed; the window remembers the dismissal in its
saved state, so it never comes back after a restart.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from branchwise.core.i18n.language import _

WIDTH = 560
MIN_WIDTH = 240
MARGIN = 24


class Introduction(QFrame):
    """The introduction panel; the window decides when it shows.

    Signals:
        sample_requested: "Try a sample conversation" was clicked.
        dismissed: "Dismiss" was clicked.
    """

    sample_requested = Signal()
    dismissed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("introduction")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setMaximumWidth(WIDTH)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(MARGIN, 20, MARGIN, 20)
        layout.setSpacing(10)
        self.title_label = QLabel(self)
        self.title_label.setObjectName("introductionTitle")
        font = self.title_label.font()
        font.setPointSizeF(font.pointSizeF() * 1.3)
        font.setBold(True)
        self.title_label.setFont(font)
        self.body_label = QLabel(self)
        self.body_label.setObjectName("introductionText")
        self.body_label.setWordWrap(True)
        self.body_label.setTextFormat(Qt.TextFormat.PlainText)
        self.sample_button = QPushButton(self)
        self.sample_button.setObjectName("sampleButton")
        self.sample_button.setDefault(True)
        self.sample_button.clicked.connect(self.sample_requested)
        self.dismiss_button = QPushButton(self)
        self.dismiss_button.setObjectName("dismissIntroduction")
        self.dismiss_button.setFlat(True)
        self.dismiss_button.clicked.connect(self.dismissed)
        buttons = QHBoxLayout()
        buttons.addWidget(self.sample_button)
        buttons.addStretch(1)
        buttons.addWidget(self.dismiss_button)
        layout.addWidget(self.title_label)
        layout.addWidget(self.body_label)
        layout.addLayout(buttons)
        self._making = False
        self.retranslate_ui()

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        """As wide as :data:`WIDTH` where there is room (a narrow pane gets less)."""
        return QSize(WIDTH, super().sizeHint().height())

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        """Narrow enough that it never widens the conversation pane (the text wraps)."""
        return QSize(MIN_WIDTH, super().minimumSizeHint().height())

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt's name
        """Keep the wrapped text whole at the new width."""
        super().resizeEvent(event)
        self._fit_text()

    def _fit_text(self) -> None:
        # A wrapped label placed by alignment gets its size hint, not its height
        # for this width: ask for the height the text needs at the panel's width.
        width = max(self.width(), MIN_WIDTH) if self.isVisible() else WIDTH
        self.body_label.setMinimumHeight(self.body_label.heightForWidth(width - 2 * MARGIN))

    def set_making(self, making: bool) -> None:
        """The sample is being made: the button says so and cannot be clicked twice."""
        self._making = making
        self.sample_button.setEnabled(not making)
        self.retranslate_ui()

    def retranslate_ui(self) -> None:
        """Set every text in the current language."""
        self.title_label.setText(_("Conversations that branch"))
        self.body_label.setText(
            _(
                "A branch is a new conversation that starts from any answer of another one: "
                "it keeps everything up to that answer and goes on by itself. Try another "
                "question, edit a prompt or ask for a new answer, and the first conversation "
                "stays as it was. The list on the left shows where each branch came from."
            )
        )
        self._fit_text()
        self.sample_button.setText(
            _("Making the sample…") if self._making else _("Try a sample conversation")
        )
        self.sample_button.setToolTip(
            _(
                "The offline demo responder answers a short conversation with a branch, "
                "an edited question and a regenerated answer"
            )
        )
        self.dismiss_button.setText(_("Dismiss"))
        self.dismiss_button.setToolTip(_("Hide this introduction for good"))
