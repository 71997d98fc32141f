"""Attachments as the user sees them: chips with a thumbnail, in the composer and the transcript.

An image shows as a thumbnail; clicking it opens it full size. A text file
or a PDF shows its name (and a PDF its page count). In the composer each
chip has a remove button; in the transcript an attachment whose stored
bytes are gone or damaged says "Attachment missing". The chips never read a
file: the composer has the bytes the host read, the transcript gets them
from the host's previews.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import shiboken6
from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QSize, Qt
from PySide6.QtGui import QImage, QImageReader, QPixmap
from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QStyle,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from branchwise.core.i18n.language import _, format_number, ngettext
from branchwise.core.i18n.reasons import fill

THUMBNAIL = 48
"""Thumbnail height in pixels."""


@dataclass(frozen=True, slots=True)
class ChipData:
    """What one chip shows.

    Attributes:
        key: stable identity (the hash, or the pending file's position).
        name: the file's name.
        type: its media type.
        size: its size in bytes.
        pages: a PDF's page count.
        data: an image's bytes (``None``: not an image, or not loaded yet).
        missing: the stored bytes are gone or damaged.
    """

    key: str
    name: str
    type: str
    size: int
    pages: int | None = None
    data: bytes | None = None
    missing: bool = False

    @property
    def is_image(self) -> bool:
        """Shown as a thumbnail."""
        return self.type.startswith("image/")


def size_text(size: int) -> str:
    """``"12 KB"``, ``"3.4 MB"``: a file's size for people (the unit symbols are the same
    in every language; the number is formatted in the user's)."""
    if size < 1024 * 1024:
        return f"{format_number(max(1, round(size / 1024)))} KB"
    return f"{format_number(round(size / (1024 * 1024), 1))} MB"


def thumbnail(data: bytes, height: float) -> QPixmap:
    """``data`` decoded at ``height`` pixels high; a null pixmap when it is no image."""
    return _pixmap_of(thumbnail_image(data, height), height)


def _pixmap_of(image: QImage, height: float) -> QPixmap:
    """A decoded thumbnail as the window paints it (on the window's thread)."""
    if image.isNull():
        return QPixmap()
    pixmap = QPixmap.fromImage(image)
    pixmap.setDevicePixelRatio(max(1.0, height / THUMBNAIL))
    return pixmap


def thumbnail_image(data: bytes, height: float) -> QImage:
    """``data`` decoded at ``height`` pixels high (a null image when it is no image); safe in
    a worker thread.

    A photo is decoded at the thumbnail's size where its format allows (JPEG
    decodes straight to a fraction of its size), never kept whole: a
    4000×3000 photo held whole is 48 MB per chip, and decoding it whole on
    the window's thread paused a transcript of a few photos for a second.
    """
    source = QByteArray(data)
    buffer = QBuffer(source)
    buffer.open(QIODevice.OpenModeFlag.ReadOnly)
    reader = QImageReader(buffer)
    reader.setAutoTransform(True)
    size = reader.size()
    target = max(1, round(height))
    if size.isValid() and size.height() > target:
        reader.setScaledSize(size.scaled(size.width(), target, Qt.AspectRatioMode.KeepAspectRatio))
    image = reader.read()
    buffer.close()
    if not image.isNull() and image.height() != target:
        # a small picture, or a format that decodes whole only
        image = image.scaledToHeight(target, Qt.TransformationMode.SmoothTransformation)
    return image


class ImageViewer(QDialog):
    """An attached image at full size (scrollable when larger than the screen)."""

    def __init__(self, name: str, pixmap: QPixmap, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("imageViewer")
        self.setWindowTitle(name)
        self.image = QLabel(self)
        self.image.setObjectName("fullImage")
        self.image.setPixmap(pixmap)
        self.image.setAccessibleName(name)
        scroll = QScrollArea(self)
        scroll.setWidget(self.image)
        scroll.setAlignment(Qt.AlignmentFlag.AlignCenter)
        layout = QVBoxLayout(self)
        layout.addWidget(scroll)
        self.resize(min(pixmap.width() + 40, 1200), min(pixmap.height() + 40, 900))


class AttachmentChip(QWidget):
    """One attachment: a thumbnail or its name; a remove button when ``on_remove`` is given."""

    def __init__(
        self,
        data: ChipData,
        parent: QWidget | None = None,
        on_remove: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("attachmentChip")
        self.data = data
        self.viewer: ImageViewer | None = None
        self._pixmap = QPixmap()
        self.button = QToolButton(self)
        self.button.setObjectName("attachmentButton")
        self.button.setAutoRaise(True)
        self.button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.button.setIconSize(QSize(THUMBNAIL, THUMBNAIL))
        self.button.clicked.connect(self.open_full_size)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.button)
        self.remove_button: QToolButton | None = None
        if on_remove is not None:
            self.remove_button = QToolButton(self)
            self.remove_button.setObjectName("removeAttachment")
            self.remove_button.setAutoRaise(True)
            self.remove_button.setText("×")
            self.remove_button.clicked.connect(lambda: on_remove(data.key))
            layout.addWidget(self.remove_button)
        self.set_data(data)

    def set_data(self, data: ChipData) -> None:
        """Show ``data`` (a preview that arrived, or a missing blob)."""
        self.data = data
        self._pixmap = QPixmap()
        if data.is_image and data.data is not None and not data.missing:
            self._decode(data.data)
        self._render_icon()

    def _decode(self, image: bytes) -> None:
        """Decode the thumbnail in a worker thread; the chip shows it when it is ready."""
        height = THUMBNAIL * self.devicePixelRatio()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop runs (a chip made outside the app): decode here
            self._pixmap = _pixmap_of(thumbnail_image(image, height), height)
            return
        decoding = loop.run_in_executor(None, thumbnail_image, image, height)

        def decoded(done: asyncio.Future[QImage]) -> None:
            if not shiboken6.isValid(self) or self.data.data is not image or done.cancelled():
                return  # closed, or showing another file by now
            if done.exception() is None:
                self._pixmap = _pixmap_of(done.result(), height)
                self._render_icon()

        decoding.add_done_callback(decoded)

    def _render_icon(self) -> None:
        data = self.data
        if not self._pixmap.isNull():
            self.button.setIcon(self._pixmap)
            self.button.setIconSize(QSize(THUMBNAIL * 2, THUMBNAIL))
        else:
            kind = (
                QStyle.StandardPixmap.SP_MessageBoxWarning
                if data.missing
                else QStyle.StandardPixmap.SP_FileIcon
            )
            self.button.setIcon(self.style().standardIcon(kind))
            self.button.setIconSize(QSize(16, 16))
        self.retranslate_ui()

    @property
    def has_thumbnail(self) -> bool:
        """An image shown as a thumbnail."""
        return not self._pixmap.isNull()

    @property
    def text(self) -> str:
        """What the chip says."""
        return self.button.text()

    def open_full_size(self) -> None:
        """Show an image at full size (nothing for other files or a missing image)."""
        if self._pixmap.isNull() or self.data.data is None:
            return
        full = QPixmap()
        full.loadFromData(self.data.data)  # decoded whole only when asked to be seen whole
        self.viewer = ImageViewer(self.data.name, full, self.window())
        self.viewer.open()

    def retranslate_ui(self) -> None:
        """Re-render the localized texts."""
        data = self.data
        if data.missing:
            self.button.setText(_("Attachment missing"))
            self.button.setToolTip(
                fill(_("{name}: the saved copy is gone or damaged."), {"name": data.name})
            )
        else:
            label = data.name
            if data.pages is not None:
                pages = ngettext("{n} page", "{n} pages", data.pages)
                label = f"{data.name} · {fill(pages, {'n': format_number(data.pages)})}"
            self.button.setText("" if self.has_thumbnail else label)
            self.button.setToolTip(f"{label}\n{size_text(data.size)}")
        self.button.setAccessibleName(
            fill(_("Attachment {name}"), {"name": data.name})
            if not data.missing
            else fill(_("Attachment missing: {name}"), {"name": data.name})
        )
        if self.remove_button is not None:
            self.remove_button.setToolTip(fill(_("Remove {name}"), {"name": data.name}))
            self.remove_button.setAccessibleName(fill(_("Remove {name}"), {"name": data.name}))


class AttachmentStrip(QWidget):
    """A row of chips (hidden when empty)."""

    def __init__(
        self, parent: QWidget | None = None, on_remove: Callable[[str], None] | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("attachmentStrip")
        self._on_remove = on_remove
        self.chips: list[AttachmentChip] = []
        self._layout = QHBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(6)
        self._layout.addStretch(1)
        self.hide()

    def set_chips(self, items: Sequence[ChipData]) -> None:
        """Show exactly ``items``, in order (chips of the same key are updated in place)."""
        by_key = {chip.data.key: chip for chip in self.chips}
        chips = []
        for item in items:
            chip = by_key.pop(item.key, None)
            if chip is None:
                chip = AttachmentChip(item, self, self._on_remove)
            elif chip.data != item:
                chip.set_data(item)
            chips.append(chip)
        for chip in by_key.values():
            chip.deleteLater()
        for position, chip in enumerate(chips):
            self._layout.insertWidget(position, chip)
        self.chips = chips
        self.setVisible(bool(chips))

    def retranslate_ui(self) -> None:
        """Re-render every chip's texts."""
        for chip in self.chips:
            chip.retranslate_ui()
