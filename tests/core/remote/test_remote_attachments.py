"""Uploading files to ``branchwise serve`` and sending a turn that carries them."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers.attachments import png_bytes
from helpers.cli import run_cli
from helpers.serve import serve_process

from branchwise.core.errors import RemoteRefusal
from branchwise.core.projection.attachments import AttachmentRef
from branchwise.core.remote.client import RemoteStore
from branchwise.core.store.attachments import BlobStore
from branchwise.core.store.store import SessionStore


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, str, str, str]]:
    root = tmp_path / "root"
    _, created = run_cli(root, "session", "new", "--title", "remote")
    with serve_process(root) as server:
        yield root, server.url, server.token, created["sessionId"]


def test_an_uploaded_image_is_stored_once_and_sent_with_the_turn(
    served: tuple[Path, str, str, str],
) -> None:
    root, url, token, session_id = served
    remote = RemoteStore(url, token)
    image = png_bytes(seed=11)

    async def go() -> tuple[AttachmentRef, AttachmentRef, list[dict], bytes]:  # type: ignore[type-arg]
        first = await remote.upload_attachment("cat.png", image)
        again = await remote.upload_attachment("cat.png", image)
        records = [r async for r in remote.send_turn(session_id, "look", (first,))]
        return first, again, records, await remote.attachment(first.sha256)

    first, again, records, fetched = asyncio.run(go())
    assert (
        first
        == again
        == AttachmentRef(hashlib.sha256(image).hexdigest(), len(image), "image/png", "cat.png")
    )
    assert records[-1]["type"] == "ended"
    assert fetched == image
    question = SessionStore(root).read(session_id).projection.messages[0]
    assert question.attachments == (first,)
    assert sum(1 for _ in BlobStore(root).stored()) == 1


def test_uploads_are_authenticated_judged_and_size_limited(
    served: tuple[Path, str, str, str],
) -> None:
    root, url, token, session_id = served
    remote = RemoteStore(url, token)
    no_token = httpx.post(f"{url}/attachments?name=a.png", content=png_bytes())
    assert no_token.status_code == 401

    async def refusal(name: str, data: bytes) -> RemoteRefusal:
        with pytest.raises(RemoteRefusal) as caught:
            await remote.upload_attachment(name, data)
        return caught.value

    too_big = asyncio.run(refusal("big.txt", b"a" * (20 * 1024 * 1024 + 1)))
    assert (too_big.code, too_big.details["status"]) == ("attachment_too_large", 413)
    assert asyncio.run(refusal("tool.bin", b"\x7fELF" + bytes(40))).code == (
        "attachment_unsupported"
    )
    # A turn naming a file the server does not hold is refused before anything is written.
    ghost = AttachmentRef("0" * 64, 3, "text/plain", "ghost.txt")

    async def send() -> None:
        async for _ in remote.send_turn(session_id, "look", (ghost,)):
            pass

    with pytest.raises(RemoteRefusal) as caught:
        asyncio.run(send())
    assert caught.value.code == "attachment_missing"
    assert SessionStore(root).read(session_id).projection.turns == []
    assert not list(BlobStore(root).stored())
