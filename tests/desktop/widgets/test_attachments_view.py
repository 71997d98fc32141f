"""Attaching as the user sees it: chips in the composer, thumbnails in the transcript, refusals."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from helpers.attachments import pdf_bytes, png_bytes
from helpers.gui import WAIT_MS, App, seed_session
from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QMimeData, QUrl
from PySide6.QtGui import QColor, QImage
from pytestqt.qtbot import QtBot

from branchwise.core.i18n.language import set_language
from branchwise.core.store.attachments import BlobStore
from branchwise.desktop.widgets.attachment_chips import (
    THUMBNAIL,
    AttachmentChip,
    ChipData,
    thumbnail,
)
from branchwise.desktop.widgets.conversation_tab import ConversationTab


def _tab(qtbot: QtBot, app: App, sid: str) -> ConversationTab:
    app.window.open_tab(sid)
    qtbot.waitUntil(lambda: len(app.turns(sid)) == 1, timeout=WAIT_MS)
    return app.tab(sid)


def _drop(paths: list[Path]) -> QMimeData:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path)) for path in paths])
    return mime


def test_files_dropped_become_chips_then_thumbnails_in_the_sent_prompt(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    app = make_app()
    sid = seed_session(app.host.store, ["hello"])
    tab = _tab(qtbot, app, sid)
    composer = tab.composer
    assert composer.attach_button.isVisible() and composer.attach_button.text() == "Attach…"
    (tmp_path / "cat.png").write_bytes(png_bytes(8, 8))
    (tmp_path / "paper.pdf").write_bytes(pdf_bytes(["one", "two", "three"]))
    composer.editor.insertFromMimeData(_drop([tmp_path / "cat.png", tmp_path / "paper.pdf"]))
    qtbot.waitUntil(lambda: len(composer.attachments.chips) == 2, timeout=WAIT_MS)
    image, pdf = composer.attachments.chips
    assert image.button.accessibleName() == "Attachment cat.png"
    # A thumbnail (decoded in a worker thread), not a name.
    qtbot.waitUntil(lambda: image.has_thumbnail and image.text == "", timeout=WAIT_MS)
    assert pdf.text == "paper.pdf · 3 pages"
    assert composer.editor.toPlainText() == ""  # a dropped file is not text

    pdf.remove_button.click()
    assert [c.data.name for c in composer.attachments.chips] == ["cat.png"]

    composer.editor.setPlainText("What is in this picture?")
    composer.send_button.click()
    qtbot.waitUntil(lambda: len(app.turns(sid)) == 2, timeout=WAIT_MS)
    assert not composer.attachments.isVisible() and composer.pending == []
    sent = app.turns(sid)[1]
    qtbot.waitUntil(
        lambda: [c.data.name for c in sent.attachment_chips] == ["cat.png"], timeout=WAIT_MS
    )
    chip = sent.attachment_chips[0]
    qtbot.waitUntil(lambda: chip.has_thumbnail, timeout=WAIT_MS)
    chip.button.click()
    assert chip.viewer is not None and chip.viewer.isVisible()
    assert chip.viewer.image.pixmap().width() == 8
    chip.viewer.close()

    set_language("zh_Hans")
    assert composer.attach_button.text() == "附加…"
    set_language("en")


def test_a_pasted_image_is_attached(qtbot: QtBot, make_app: Callable[..., App]) -> None:
    app = make_app()
    sid = seed_session(app.host.store, ["hello"])
    composer = _tab(qtbot, app, sid).composer
    picture = QImage(4, 3, QImage.Format.Format_RGB32)
    picture.fill(QColor("red"))
    mime = QMimeData()
    mime.setImageData(picture)
    assert composer.editor.canInsertFromMimeData(mime)
    composer.editor.insertFromMimeData(mime)
    qtbot.waitUntil(lambda: len(composer.pending) == 1, timeout=WAIT_MS)
    assert composer.pending[0].type == "image/png"
    assert composer.attachments.chips[0].button.accessibleName() == "Attachment pasted-image.png"


def test_a_refused_file_is_a_notice_and_the_prompt_stays(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    app = make_app()
    sid = seed_session(app.host.store, ["hello"])
    composer = _tab(qtbot, app, sid).composer
    composer.editor.setPlainText("my long prompt")
    (tmp_path / "tool.bin").write_bytes(b"\x7fELF\x02\x01" + bytes(40))
    composer.editor.insertFromMimeData(_drop([tmp_path / "tool.bin"]))
    expected = "The file tool.bin is not an image (PNG, JPEG, WebP, GIF), a text file or a PDF."
    qtbot.waitUntil(lambda: any(expected in t for t in app.notice_texts()), timeout=WAIT_MS)
    assert composer.editor.toPlainText() == "my long prompt" and composer.pending == []


def test_a_missing_attachment_says_so_in_the_transcript(
    qtbot: QtBot, make_app: Callable[..., App], tmp_path: Path
) -> None:
    app = make_app()
    sid = seed_session(app.host.store, ["hello"])
    tab = _tab(qtbot, app, sid)
    (tmp_path / "cat.png").write_bytes(png_bytes(seed=4))
    tab.composer.editor.insertFromMimeData(_drop([tmp_path / "cat.png"]))
    qtbot.waitUntil(lambda: len(tab.composer.pending) == 1, timeout=WAIT_MS)
    tab.composer.editor.setPlainText("look")
    tab.composer.submit()
    qtbot.waitUntil(lambda: len(app.turns(sid)) == 2, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: app.turns(sid)[1].row.end_reason == "completed", timeout=WAIT_MS)
    sha = app.turns(sid)[1].row.entries[0].attachments[0].sha256
    BlobStore(app.root).path(sha).unlink()
    other = make_app(root=app.root)
    other.window.open_tab(sid)
    qtbot.waitUntil(lambda: len(other.turns(sid)) == 2, timeout=WAIT_MS)
    widget = other.turns(sid)[1]
    qtbot.waitUntil(
        lambda: [c.text for c in widget.attachment_chips] == ["Attachment missing"],
        timeout=WAIT_MS,
    )
    assert widget.attachment_chips[0].button.toolTip() == (
        "cat.png: the saved copy is gone or damaged."
    )


def test_a_big_photo_is_kept_at_thumbnail_size_and_opened_whole(
    qtbot: QtBot, make_app: Callable[..., App]
) -> None:
    photo = QImage(4000, 3000, QImage.Format.Format_RGB32)
    photo.fill(QColor("teal"))
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    assert photo.save(buffer, "JPEG")
    buffer.close()
    jpeg = bytes(data.data())
    small = thumbnail(jpeg, THUMBNAIL)
    assert (small.width(), small.height()) == (64, THUMBNAIL)  # never held at 4000 x 3000
    assert thumbnail(b"not an image", THUMBNAIL).isNull()

    make_app()  # the app's style and language, as the transcript shows chips
    chip = AttachmentChip(ChipData("k", "photo.jpg", "image/jpeg", len(jpeg), data=jpeg))
    qtbot.addWidget(chip)
    assert chip.text == "photo.jpg"  # its name until the thumbnail is decoded, off this thread
    qtbot.waitUntil(lambda: chip.has_thumbnail and chip.text == "", timeout=WAIT_MS)
    chip.button.click()
    assert chip.viewer is not None
    assert chip.viewer.image.pixmap().width() == 4000  # decoded whole only to be seen whole
    chip.viewer.close()
