"""A message rendered from Markdown: text blocks as rich-text labels, code blocks as widgets.

Each top-level code block is a :class:`CodeBlockView` with its language, the
highlighted code and a real Copy button (accessible name "Copy code") that
puts the code exactly as written on the clipboard. The other blocks are
grouped a few at a time into selectable rich-text labels, so appending to a
streaming answer re-renders one small label, never the whole answer.

Colours come from the widget's palette, so a theme change re-renders the
message in the new colours (see :meth:`MarkdownView.changeEvent`).
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QEvent, Qt, QTimer
from PySide6.QtGui import QGuiApplication, QPalette, QTextDocument
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from branchwise.core.i18n.language import _
from branchwise.desktop.widgets.markdown_blocks import (
    Block,
    CodeBlock,
    IncrementalMarkdown,
    RichColors,
    TextBlock,
)

#: Top-level text blocks per label: bounds what one streamed chunk re-renders.
BLOCKS_PER_LABEL = 12
#: How long the Copy button says "Copied" after a click.
COPIED_MS = 1500
COPY_CODE_BUTTON = "copyCodeButton"
CODE_LANGUAGE = "codeLanguage"


def rich_colors(palette: QPalette) -> RichColors:
    """The colours of rendered Markdown, all from ``palette``."""
    role = QPalette.ColorRole
    return RichColors(
        muted=palette.color(role.PlaceholderText).name(),
        border=palette.color(role.Mid).name(),
        quote_bar=palette.color(role.Mid).name(),
        code_background=palette.color(role.AlternateBase).name(),
        dark=palette.color(role.Window).lightness() < 128,
    )


class RichLabel(QLabel):
    """A word-wrapped label that remembers its height for a width until its text changes.

    A layout asks every child for its height at the current width whenever
    any child changes; QLabel lays its whole text out again to answer, so a
    long answer made of many labels spent most of each streamed repaint
    re-measuring the labels that had not changed.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._heights: dict[int, int] = {}

    def setText(self, text: str) -> None:  # noqa: N802 - Qt's name
        """Show ``text`` (forgets the measured heights)."""
        self._heights.clear()
        super().setText(text)

    def heightForWidth(self, width: int) -> int:  # noqa: N802
        """The label's height at ``width``, measured once per text."""
        height = self._heights.get(width)
        if height is None:
            if len(self._heights) > 8:
                self._heights.clear()
            height = self._heights[width] = super().heightForWidth(width)
        return height

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802
        """A new font or style measures again."""
        if event.type() in (QEvent.Type.FontChange, QEvent.Type.StyleChange):
            self._heights.clear()
        super().changeEvent(event)


def _selectable_label(parent: QWidget) -> QLabel:
    label = RichLabel(parent)
    label.setWordWrap(True)
    label.setTextFormat(Qt.TextFormat.RichText)
    label.setTextInteractionFlags(
        Qt.TextInteractionFlag.TextSelectableByMouse | Qt.TextInteractionFlag.LinksAccessibleByMouse
    )
    label.setOpenExternalLinks(True)
    label.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)
    # The message's own context menu (Copy message…) is the parent's.
    label.setContextMenuPolicy(Qt.ContextMenuPolicy.NoContextMenu)
    return label


def _plain(html: str) -> str:
    document = QTextDocument()
    document.setHtml(html)
    # Qt reads <br> as a Unicode line separator.
    return document.toPlainText().replace("\u2028", "\n")


class CodeBlockView(QFrame):
    """One code block: its language, a Copy button, and the highlighted code."""

    def __init__(self, block: CodeBlock, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("codeBlock")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 4, 8, 8)
        layout.setSpacing(2)
        header = QHBoxLayout()
        self.language_label = QLabel(self)
        self.language_label.setObjectName(CODE_LANGUAGE)
        self.language_label.setTextFormat(Qt.TextFormat.PlainText)
        header.addWidget(self.language_label)
        header.addStretch(1)
        self.copy_button = QToolButton(self)
        self.copy_button.setObjectName(COPY_CODE_BUTTON)
        self.copy_button.setAutoRaise(True)
        self.copy_button.clicked.connect(self.copy)
        header.addWidget(self.copy_button)
        layout.addLayout(header)
        self.body = _selectable_label(self)
        self.body.setObjectName("codeBody")
        layout.addWidget(self.body)
        self._copied = QTimer(self)
        self._copied.setSingleShot(True)
        self._copied.setInterval(COPIED_MS)
        self._copied.timeout.connect(self.retranslate_ui)
        self.block = block
        self.set_block(block)

    def set_block(self, block: CodeBlock) -> None:
        """Show ``block`` (re-highlighted only when it changed)."""
        changed = block.html != self.block.html or not self.body.text()
        self.block = block
        if changed:
            self.body.setText(block.html)
        self.retranslate_ui()

    def copy(self) -> None:
        """Put the code, exactly as written, on the clipboard."""
        QGuiApplication.clipboard().setText(self.block.code)
        self.copy_button.setText(_("Copied"))
        self._copied.start()

    def retranslate_ui(self) -> None:
        """The language label and the Copy button in the current language."""
        self.language_label.setText(self.block.language or _("Code"))
        if not self._copied.isActive():
            self.copy_button.setText(_("Copy"))
        self.copy_button.setToolTip(_("Copy code"))
        self.copy_button.setAccessibleName(_("Copy code"))


@dataclass
class _Part:
    """One widget of the view and the blocks ``[first, last)`` it shows."""

    first: int
    last: int
    widget: QLabel | CodeBlockView


class MarkdownView(QFrame):
    """A message shown as rendered Markdown (or as plain text when ``plain``).

    ``breaks`` keeps line breaks inside paragraphs, as a typed prompt means them.

    It offers the selection calls of a label (``text``, ``selectedText``,
    ``hasSelectedText``, ``setSelection``) so the message context menu works
    on it as on a label.
    """

    def __init__(
        self, parent: QWidget | None = None, plain: bool = False, breaks: bool = False
    ) -> None:
        super().__init__(parent)
        self._plain = plain
        self._markdown = IncrementalMarkdown(rich_colors(self.palette()), breaks)
        self._parts: list[_Part] = []
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(4)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)
        self._plain_label: QLabel | None = None
        if plain:
            self._plain_label = _selectable_label(self)
            self._plain_label.setTextFormat(Qt.TextFormat.PlainText)
            self._layout.addWidget(self._plain_label)

    # -- content ---------------------------------------------------------------

    @property
    def markdown(self) -> str:
        """The text shown (Markdown source)."""
        return self._markdown.source

    def set_markdown(self, text: str) -> None:
        """Show ``text``; appending to the current text re-renders only its end."""
        if self._plain_label is not None:
            self._markdown.source = text
            self._plain_label.setText(text)
            return
        start = self._markdown.update(text)
        self._show_from(start)

    def _blocks(self) -> list[Block]:
        """The blocks to show: the rendered ones (the compare view marks words in them)."""
        return self._markdown.blocks

    def _show_from(self, start: int) -> None:
        blocks = self._blocks()
        # Keep the parts wholly before ``start``; the part holding it is refilled.
        keep = 0
        while keep < len(self._parts) and self._parts[keep].last <= start:
            keep += 1
        reuse = self._parts[keep:]
        del self._parts[keep:]
        first = self._parts[-1].last if self._parts else 0
        while first < len(blocks):
            block = blocks[first]
            if isinstance(block, CodeBlock):
                last = first + 1
            else:
                last = first
                while (
                    last < len(blocks)
                    and isinstance(blocks[last], TextBlock)
                    and last - first < BLOCKS_PER_LABEL
                ):
                    last += 1
            widget = self._widget_for(blocks[first:last], reuse)
            if self._layout.indexOf(widget) != len(self._parts):
                self._layout.insertWidget(len(self._parts), widget)
            self._parts.append(_Part(first, last, widget))
            first = last
        for part in reuse:
            self._layout.removeWidget(part.widget)
            part.widget.deleteLater()

    def _widget_for(self, blocks: list[Block], reuse: list[_Part]) -> QLabel | CodeBlockView:
        head = blocks[0]
        if isinstance(head, CodeBlock):
            if reuse and isinstance(reuse[0].widget, CodeBlockView):
                code_view = reuse.pop(0).widget
                assert isinstance(code_view, CodeBlockView)
                code_view.set_block(head)
                return code_view
            return CodeBlockView(head, self)
        html = "".join(block.html for block in blocks if isinstance(block, TextBlock))
        if reuse and isinstance(reuse[0].widget, QLabel):
            label = reuse.pop(0).widget
            assert isinstance(label, QLabel)
        else:
            label = _selectable_label(self)
            label.setObjectName("markdownText")
        if label.text() != html:
            label.setText(html)
        return label

    def code_blocks(self) -> list[CodeBlockView]:
        """The code blocks, in order."""
        return [part.widget for part in self._parts if isinstance(part.widget, CodeBlockView)]

    def labels(self) -> list[QLabel]:
        """Every selectable label, in order (code bodies included)."""
        if self._plain_label is not None:
            return [self._plain_label]
        return [
            part.widget.body if isinstance(part.widget, CodeBlockView) else part.widget
            for part in self._parts
        ]

    # -- what a label offers ---------------------------------------------------

    def textFormat(self) -> Qt.TextFormat:  # noqa: N802 - the QLabel call it stands in for
        """Plain text for tool calls, rich text otherwise (find selects only in plain text)."""
        return Qt.TextFormat.PlainText if self._plain else Qt.TextFormat.RichText

    def text(self) -> str:  # noqa: N802
        """The text as the user reads it (no markup), blocks separated by newlines."""
        if self._plain_label is not None:
            return self._plain_label.text()
        return "\n".join(
            part.widget.block.code.removesuffix("\n")
            if isinstance(part.widget, CodeBlockView)
            else _plain(part.widget.text()).strip()
            for part in self._parts
        )

    def selectedText(self) -> str:  # noqa: N802
        """What is selected, across labels."""
        return "\n".join(label.selectedText() for label in self.labels() if label.hasSelectedText())

    def hasSelectedText(self) -> bool:  # noqa: N802
        """Something is selected in one of the labels."""
        return any(label.hasSelectedText() for label in self.labels())

    def setSelection(self, start: int, length: int) -> None:  # noqa: N802
        """Select ``length`` characters from ``start`` of :meth:`text` (whole labels beyond one)."""
        if self._plain_label is not None:
            self._plain_label.setSelection(start, length)
            return
        position = 0
        for label in self.labels():
            size = len(_plain(label.text()))
            if start < position + size + 1 and start + length > position:
                begin = max(start - position, 0)
                label.setSelection(begin, min(length, size - begin))
            position += size + 1

    def select_occurrence(self, needle: str, source_start: int) -> bool:
        """Select, case-insensitively, the occurrence of ``needle`` found at ``source_start``.

        Offsets in the Markdown source are not offsets in the rendered text,
        so the match is counted instead: the n-th occurrence in the source is
        selected as the n-th occurrence shown. Returns whether one was selected.
        """
        needle = needle.lower()
        if not needle:
            return False
        if self._plain_label is not None:
            self._plain_label.setSelection(source_start, len(needle))
            return True
        wanted = self.markdown[:source_start].lower().count(needle)
        seen = 0
        for label in self.labels():
            label.setSelection(0, 0)
        for label in self.labels():
            shown = _plain(label.text()).lower()
            at = shown.find(needle)
            while at >= 0:
                if seen == wanted:
                    label.setSelection(at, len(needle))
                    return True
                seen += 1
                at = shown.find(needle, at + len(needle))
        return False

    # -- theme -----------------------------------------------------------------

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802
        """Re-render in the new palette's colours when the theme changes."""
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and not self._plain:
            colors = rich_colors(self.palette())
            if colors != self._markdown.colors:
                self._markdown.set_colors(colors)
                self._show_from(0)

    def retranslate_ui(self) -> None:
        """Code block labels and buttons in the current language."""
        for view in self.code_blocks():
            view.retranslate_ui()
