"""What a file is, from its bytes, and every way a file is refused before anything is stored."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.attachments import encrypted_pdf_bytes, pdf_bytes, png_bytes

from branchwise.core.conversation.attachments import (
    AttachmentLimits,
    attach_files,
    judge,
    read_file,
    read_files,
)
from branchwise.core.errors import (
    AttachmentEmpty,
    AttachmentRefused,
    AttachmentTooLarge,
    AttachmentUnreadable,
    DamagedAttachment,
    EncryptedPdf,
    MessageTooLarge,
    TooManyImages,
    UnsupportedAttachment,
)
from branchwise.core.i18n.reasons import error_text

JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"\x00" * 32 + b"\xff\xd9"
GIF = b"GIF89a" + b"\x01\x00\x01\x00\x00\x00\x00" + b",\x00\x00\x00\x00\x01\x00\x01\x00\x00" + b";"
WEBP_BODY = b"WEBPVP8 " + b"\x00" * 20
WEBP = b"RIFF" + len(WEBP_BODY).to_bytes(4, "little") + WEBP_BODY


@pytest.mark.parametrize(
    ("name", "data", "kind"),
    [
        ("photo.png", png_bytes(), "image/png"),
        ("photo.jpg", JPEG, "image/jpeg"),
        ("anim.gif", GIF, "image/gif"),
        ("pic.webp", WEBP, "image/webp"),
        # The name does not decide: a PNG called .txt is an image, a text called .png is text.
        ("misnamed.txt", png_bytes(), "image/png"),
        ("notes.png", b"just words\n", "text/plain"),
        ("README.md", b"# Title\n", "text/markdown"),
        ("table.csv", b"a,b\n1,2\n", "text/csv"),
        ("data.json", b'{"a": 1}', "application/json"),
        ("main.py", "print('héllo')\n".encode(), "text/plain"),
    ],
)
def test_the_type_comes_from_the_bytes(name: str, data: bytes, kind: str) -> None:
    assert judge(name, data).type == kind


def test_a_pdf_gives_its_text_and_page_count() -> None:
    prepared = judge("paper.pdf", pdf_bytes(["First page words", "Second page words"]))
    assert (prepared.type, prepared.pages) == ("application/pdf", 2)
    assert "First page words" in prepared.text and "Second page words" in prepared.text


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"", AttachmentEmpty),
        (png_bytes()[:-12], DamagedAttachment),  # cut before its IEND chunk
        (JPEG[:-2], DamagedAttachment),
        (WEBP[:-4], DamagedAttachment),
        (b"%PDF-1.4\nnot really a pdf", DamagedAttachment),
        (encrypted_pdf_bytes(), EncryptedPdf),
        (b"\x7fELF\x02\x01\x01" + b"\x00" * 40, UnsupportedAttachment),
        (b"text with a \x00 NUL", UnsupportedAttachment),
        (b"\xff\xfe not utf-8 \xc3", UnsupportedAttachment),
    ],
)
def test_refusals_are_typed_and_say_so_in_every_language(
    data: bytes, error: type[AttachmentRefused]
) -> None:
    with pytest.raises(error) as caught:
        judge("file.bin", data)
    assert caught.value.definitive and caught.value.details["name"] == "file.bin"
    assert "file.bin" in error_text(caught.value)


def test_unreadable_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(AttachmentUnreadable):
        read_file(tmp_path / "missing.txt")
    with pytest.raises(AttachmentUnreadable):
        read_file(tmp_path)  # a folder
    dangling = tmp_path / "link.png"
    dangling.symlink_to(tmp_path / "gone.png")
    with pytest.raises(AttachmentUnreadable):
        read_file(dangling)
    locked = tmp_path / "locked.txt"
    locked.write_text("secret")
    locked.chmod(0)
    try:
        if os.access(locked, os.R_OK):
            pytest.skip("running as root: permissions do not stop reads")
        with pytest.raises(AttachmentUnreadable):
            read_file(locked)
    finally:
        locked.chmod(0o600)


def test_a_link_to_a_readable_file_is_followed(tmp_path: Path) -> None:
    (tmp_path / "real.md").write_text("# real\n")
    (tmp_path / "alias.md").symlink_to(tmp_path / "real.md")
    assert read_file(tmp_path / "alias.md").text == "# real\n"


def test_limits_per_file_per_message_and_images(tmp_path: Path) -> None:
    limits = AttachmentLimits(file_bytes=100, message_bytes=150, images=2)
    (tmp_path / "big.txt").write_bytes(b"a" * 101)
    with pytest.raises(AttachmentTooLarge) as caught:
        read_file(tmp_path / "big.txt", limits)
    assert caught.value.details["limit"] == 100
    for n in range(2):
        (tmp_path / f"part{n}.txt").write_bytes(b"b" * 80)
    with pytest.raises(MessageTooLarge):
        read_files([tmp_path / "part0.txt", tmp_path / "part1.txt"], limits)
    images = []
    for n in range(3):
        (tmp_path / f"img{n}.png").write_bytes(png_bytes(seed=n))
        images.append(tmp_path / f"img{n}.png")
    with pytest.raises(TooManyImages):
        read_files(images, AttachmentLimits(images=2))
    assert len(read_files(images[:2], AttachmentLimits(images=2))) == 2


def test_a_refused_file_stores_nothing(tmp_path: Path) -> None:
    root = tmp_path / "root"
    good = tmp_path / "good.png"
    good.write_bytes(png_bytes())
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"\x00\x01\x02")
    with pytest.raises(UnsupportedAttachment):
        attach_files(root, [good, bad])
    assert not (root / "attachments").exists()
