"""Attachments in exports (files beside the Markdown, references in JSON) and in search."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import orjson
from helpers.attachments import pdf_bytes, png_bytes
from helpers.cli import run_cli


def _session_with_files(root: Path, tmp_path: Path) -> tuple[str, bytes, bytes]:
    image, pdf = png_bytes(seed=7), pdf_bytes(["zygomorphic orchids", "page two"])
    (tmp_path / "flower.png").write_bytes(image)
    (tmp_path / "botany notes.pdf").write_bytes(pdf)
    _, made = run_cli(root, "session", "new")
    sid = made["sessionId"]
    run_cli(
        root,
        "session",
        "say",
        sid,
        "what is this",
        "--quiet",
        "--attach",
        str(tmp_path / "flower.png"),
        str(tmp_path / "botany notes.pdf"),
    )
    return sid, image, pdf


def test_markdown_writes_the_files_beside_it_and_links_them(tmp_path: Path) -> None:
    root = tmp_path / "root"
    sid, image, pdf = _session_with_files(root, tmp_path)
    out = tmp_path / "out" / "chat.md"
    out.parent.mkdir()
    _, result = run_cli(root, "session", "export", sid, "--out", str(out))
    folder = out.parent / "chat-attachments"
    assert result["attachments"] == str(folder)
    image_name = f"{hashlib.sha256(image).hexdigest()[:12]}-flower.png"
    pdf_name = f"{hashlib.sha256(pdf).hexdigest()[:12]}-botany notes.pdf"
    assert (folder / image_name).read_bytes() == image
    assert (folder / pdf_name).read_bytes() == pdf
    text = out.read_text()
    assert f"![flower.png](chat-attachments/{image_name})" in text
    assert "[botany notes.pdf](chat-attachments/" + pdf_name.replace(" ", "%20") + ")" in text


def test_json_references_them_and_embeds_on_request(tmp_path: Path) -> None:
    root = tmp_path / "root"
    sid, image, _ = _session_with_files(root, tmp_path)
    plain = tmp_path / "plain.json"
    run_cli(root, "session", "export", sid, "--format", "json", "--out", str(plain))
    files = orjson.loads(plain.read_bytes())["messages"][0]["attachments"]
    assert [f["name"] for f in files] == ["flower.png", "botany notes.pdf"]
    assert files[0] == {
        "sha256": hashlib.sha256(image).hexdigest(),
        "size": len(image),
        "type": "image/png",
        "name": "flower.png",
    }
    embedded = tmp_path / "embedded.json"
    run_cli(
        root,
        "session",
        "export",
        sid,
        "--format",
        "json",
        "--embed-attachments",
        "--out",
        str(embedded),
    )
    first = orjson.loads(embedded.read_bytes())["messages"][0]["attachments"][0]
    assert base64.b64decode(first["base64"]) == image


def test_search_finds_attachment_names_and_pdf_text(tmp_path: Path) -> None:
    root = tmp_path / "root"
    sid, _, _ = _session_with_files(root, tmp_path)
    for query in ("flower.png", "zygomorphic", "page two"):
        _, found = run_cli(root, "search", query)
        # (the demo responder's answer quotes the prompt it got, so it may match too)
        assert (sid, "user") in [(h["sessionId"], h["role"]) for h in found["hits"]], query


def test_chatgpt_export_writes_image_references_and_import_names_them(tmp_path: Path) -> None:
    root = tmp_path / "root"
    sid, image, _ = _session_with_files(root, tmp_path)
    out = tmp_path / "conversations.json"
    run_cli(root, "session", "export", sid, "--format", "chatgpt", "--out", str(out))
    (conversation,) = orjson.loads(out.read_bytes())
    prompts = [
        node["message"]
        for node in conversation["mapping"].values()
        if node.get("message") and node["message"]["author"]["role"] == "user"
    ]
    (prompt,) = prompts
    sha = hashlib.sha256(image).hexdigest()
    assert prompt["content"] == {
        "content_type": "multimodal_text",
        "parts": [
            {
                "content_type": "image_asset_pointer",
                "asset_pointer": f"file-service://file-{sha[:24]}",
                "size_bytes": len(image),
                "metadata": {"sha256": sha, "name": "flower.png"},
            },
            "what is this",
        ],
    }
    assert [f["name"] for f in prompt["metadata"]["attachments"]] == [
        "flower.png",
        "botany notes.pdf",
    ]
    other = tmp_path / "other"
    _, imported = run_cli(other, "import", str(out))
    new_id = imported["conversations"][0]["sessionId"]
    _, shown = run_cli(other, "session", "show", new_id)
    assert shown["messages"][0]["content"] == (
        "[image: flower.png]\nwhat is this\n[file: botany notes.pdf]"
    )
