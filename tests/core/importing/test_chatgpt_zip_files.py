"""A ChatGPT export ``.zip`` that holds the user's uploaded images: imported as attachments."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import orjson
from helpers.attachments import png_bytes
from helpers.chatgpt_export import conversation, message
from helpers.cli import run_cli

PHOTO = png_bytes(2, 2, seed=1)
DIAGRAM = png_bytes(3, 1, seed=2)


def image_part(pointer: str, data: bytes, width: int, height: int) -> dict[str, Any]:
    """An ``image_asset_pointer`` part as the export writes it."""
    return {
        "content_type": "image_asset_pointer",
        "asset_pointer": pointer,
        "size_bytes": len(data),
        "width": width,
        "height": height,
        "fovea": None,
        "metadata": {"dalle": None, "gizmo": None, "sanitized": True},
    }


def upload(
    text: str, pointer: str, file_id: str, name: str, data: bytes, time: float
) -> dict[str, Any]:
    """A user message with one uploaded image, listed in ``metadata.attachments``."""
    body = message(
        "user",
        time=time,
        content={
            "content_type": "multimodal_text",
            "parts": [image_part(pointer, data, 2, 2), *([text] if text else [])],
        },
    )
    body["metadata"]["attachments"] = [
        {"id": file_id, "name": name, "size": len(data), "mime_type": "image/png"}
    ]
    return body


def export_zip(path: Path) -> Path:
    """One conversation: two uploads the zip holds, one it lacks, one it holds cut short."""
    chat = conversation(
        "c-images",
        "Images",
        [
            ("root", None, None),
            ("sys", "root", message("system", "", hidden=True)),
            (
                "u1",
                "sys",
                upload(
                    "What is this?",
                    "file-service://file-AbC123xyz",
                    "file-AbC123xyz",
                    "photo.png",
                    PHOTO,
                    1,
                ),
            ),
            ("a1", "u1", message("assistant", "A photo.", time=2, model="gpt-4o")),
            (
                "u2",
                "a1",
                upload(
                    "",
                    "sediment://file_00000000aa11bb22",
                    "file_00000000aa11bb22",
                    "diagram.png",
                    DIAGRAM,
                    3,
                ),
            ),
            ("a2", "u2", message("assistant", "A diagram.", time=4, model="gpt-4o")),
            (
                "u3",
                "a2",
                upload(
                    "And this?",
                    "file-service://file-Missing9",
                    "file-Missing9",
                    "lost.png",
                    PHOTO,
                    5,
                ),
            ),
            ("a3", "u3", message("assistant", "I see nothing.", time=6, model="gpt-4o")),
            (
                "u4",
                "a3",
                upload(
                    "Last one",
                    "file-service://file-Broken7",
                    "file-Broken7",
                    "broken.png",
                    PHOTO,
                    7,
                ),
            ),
            ("a4", "u4", message("assistant", "Broken.", time=8, model="gpt-4o")),
        ],
    )
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("conversations.json", orjson.dumps([chat]))
        archive.writestr("chat.html", "<html></html>")
        archive.writestr("file-AbC123xyz-photo.png", PHOTO)
        archive.writestr(
            "user-k3Jx/file_00000000aa11bb22-4b1f6a2e-9c0d-4e7f-8a55-0d6b7c1e2f3a.png", DIAGRAM
        )
        archive.writestr("file-Broken7-broken.png", PHOTO[:-12])  # cut before its IEND
    return path


def blob_files(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "attachments" / "sha256").rglob("*") if p.is_file())


def test_uploaded_images_in_the_zip_become_attachments_once(tmp_path: Path) -> None:
    path = export_zip(tmp_path / "export.zip")
    root = tmp_path / "data"

    _, report = run_cli(root, "import", str(path))
    assert [c["created"] for c in report["conversations"]] == [True]
    warnings = report["warnings"]
    assert len(warnings) == 2
    assert "1 attached file not in the archive; kept as placeholders" in warnings[0]
    assert "broken.png" in warnings[1] and "cut short" in warnings[1]

    _, shown = run_cli(root, "session", "show", report["conversations"][0]["sessionId"])
    prompts = [m for m in shown["messages"] if m["role"] == "user"]
    assert [m["content"] for m in prompts] == [
        "What is this?",
        "",
        "[image: lost.png]\nAnd this?",
        "[image: broken.png]\nLast one",
    ]
    attached = [
        [(a["name"], a["type"], a["size"]) for a in m.get("attachments", [])] for m in prompts
    ]
    assert attached == [
        [("photo.png", "image/png", len(PHOTO))],
        [("diagram.png", "image/png", len(DIAGRAM))],
        [],
        [],
    ]
    hashes = sorted(a["sha256"] for m in prompts for a in m.get("attachments", []))
    assert blob_files(root) == hashes

    _, again = run_cli(root, "import", str(path))
    assert [c["created"] for c in again["conversations"]] == [False]
    assert blob_files(root) == hashes

    # the same conversations.json outside its zip: placeholders only, nothing stored
    with zipfile.ZipFile(path) as archive:
        (tmp_path / "conversations.json").write_bytes(archive.read("conversations.json"))
    plain = tmp_path / "plain"
    _, report = run_cli(plain, "import", str(tmp_path / "conversations.json"))
    assert report["warnings"] == []
    _, shown = run_cli(plain, "session", "show", report["conversations"][0]["sessionId"])
    prompts = [m for m in shown["messages"] if m["role"] == "user"]
    assert prompts[0]["content"] == "[image: photo.png]\nWhat is this?"
    assert not any(m.get("attachments") for m in prompts)
    assert not (plain / "attachments" / "sha256").exists() or blob_files(plain) == []
