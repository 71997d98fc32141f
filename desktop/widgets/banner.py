"""The banner of a branched conversation: where it came from, and a way back.

"Branched from turn N of <title> · <label>" with an "Open parent
conversation" button (which opens the parent at that turn), "Branch map"
(the window connects :attr:`ForkBanner.map_requested`) and, on a branch,
"Bring back to parent…".
Hidden for conversations that were not branched from another.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QWidget

from branchwise.core.i18n.language import _, format_number
from branchwise.core.i18n.reasons import fill
from branchwise.desktop.widgets.turn_widget import untitled


class ForkBanner(QFrame):
    """Says where a branch came from and opens its parent.

    Args:
        on_open_parent: called with the parent's session id.
    """

    map_requested = Signal()
    """"Branch map" was clicked."""

    def __init__(
        self,
        on_open_parent: Callable[[str], None],
        parent: QWidget | None = None,
        on_bring_back: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("forkBanner")
        self._on_open_parent = on_open_parent
        self._parent_id: str | None = None
        self._parent_title = ""
        self._turn: int | None = None
        self._parent_exists = True
        self._kind = "fork"
        self._branch_label: str | None = None
        self.label = QLabel(self)
        self.label.setObjectName("forkBannerText")
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.open_button = QPushButton(self)
        self.open_button.setObjectName("openParentButton")
        self.open_button.clicked.connect(self._open)
        self.bring_back_button = QPushButton(self)
        self.bring_back_button.setObjectName("bringBackButton")
        if on_bring_back is not None:
            self.bring_back_button.clicked.connect(on_bring_back)
        self.map_button = QPushButton(self)
        self.map_button.setObjectName("branchMapButton")
        self.map_button.clicked.connect(self.map_requested)
        self._can_bring_back = on_bring_back is not None
        self._bring_back_refusal: str | None = None
        layout = QHBoxLayout(self)
        layout.setContentsMargins(12, 6, 12, 6)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.bring_back_button)
        layout.addWidget(self.map_button)
        layout.addWidget(self.open_button)
        self.hide()

    def set_origin(
        self,
        parent_id: str | None,
        parent_title: str,
        turn: int | None,
        parent_exists: bool,
        kind: str = "fork",
        label: str | None = None,
    ) -> None:
        """Show the parent (``None`` hides the banner); ``kind`` is ``fork`` or ``child``.

        ``label``: how this branch differs, already in the language shown.
        """
        self._kind = kind
        self._branch_label = label
        self._parent_id = parent_id
        self._parent_title = parent_title
        self._turn = turn
        self._parent_exists = parent_exists
        self.retranslate_ui()
        # A branch brings its conclusion back; a child (sub-agent) conversation does not.
        self.bring_back_button.setVisible(self._can_bring_back and kind == "fork" and parent_exists)
        self.setVisible(parent_id is not None)

    def refuse_bring_back(self, reason: str | None) -> None:
        """Disable "Bring back to parent…" with why, in the user's words (``None``: enable)."""
        self._bring_back_refusal = reason
        self.retranslate_ui()

    def _open(self) -> None:
        if self._parent_id is not None:
            self._on_open_parent(self._parent_id)

    def retranslate_ui(self) -> None:
        """Re-render every localized text."""
        title = untitled(self._parent_title)
        if self._kind == "child":
            # A child conversation starts empty: it came from the parent, it is no copy of it.
            text = fill(_("Started from {title}"), {"title": title})
        elif self._turn is not None:
            text = fill(
                # TRANSLATORS: {title} is the parent conversation's title, {turn} a turn number.
                _("Branched from turn {turn} of {title}"),
                {"title": title, "turn": format_number(self._turn)},
            )
        else:
            text = fill(_("Branched from {title}"), {"title": title})
        if not self._parent_exists:
            text = _("Branched from a conversation that no longer exists.")
        if self._branch_label and self._kind != "child":  # a child's says "Started from"
            text += " · " + self._branch_label
        self.label.setText(text)
        self.open_button.setText(_("Open parent conversation"))
        self.map_button.setText(_("Branch map"))
        self.map_button.setToolTip(_("Every branch of this conversation's family, turn by turn"))
        self.open_button.setEnabled(self._parent_exists)
        self.bring_back_button.setText(_("Bring back to parent…"))
        self.bring_back_button.setEnabled(self._bring_back_refusal is None)
        self.bring_back_button.setToolTip(
            self._bring_back_refusal
            or _("Carry answers or a summary of this branch into the conversation it came from")
        )
