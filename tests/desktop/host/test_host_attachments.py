"""Attachments through the desktop host: read off the UI thread, stored, sent, retried."""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from pathlib import Path
from typing import Any

import pytest
from helpers.attachments import png_bytes
from helpers.fake_openai_server import FakeOpenAIServer
from helpers.faults import DiskFullAt
from helpers.gui import seed_session
from helpers.serve import serve_process

from branchwise.core.errors import DiskFull, UnsupportedAttachment
from branchwise.core.providers.openai import OpenAIProvider
from branchwise.core.store.attachments import BlobStore
from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.attaching import remote_previews
from branchwise.desktop.host.connections import Connection
from branchwise.desktop.host.host import Host
from branchwise.desktop.host.notices import NoticeCenter
from branchwise.desktop.host.sources import RemoteSource
from branchwise.desktop.host.trashing import Trashing

REFUSAL = "Model does not support images. Please use a model that does"


def _image_parts(body: dict[str, Any]) -> int:
    return sum(
        1
        for message in body["messages"]
        if isinstance(message["content"], list)
        for part in message["content"]
        if part["type"] == "image_url"
    )


def test_a_refused_image_is_retried_with_another_model_and_sent_once(tmp_path: Path) -> None:
    (tmp_path / "cat.png").write_bytes(png_bytes())

    async def scenario() -> None:
        async with FakeOpenAIServer(
            chunks=["a cat"], reject_images=REFUSAL, text_only_models=("text-model",)
        ) as server:
            chosen = {"model": "text-model"}
            host = Host(
                tmp_path / "root",
                provider_factory=lambda _s: OpenAIProvider(server.base_url, chosen["model"]),
            )
            host.start()
            try:
                sid = seed_session(host.store, ["hello"])
                files = await host.attaching.read([tmp_path / "cat.png"])
                assert [f.type for f in files] == ["image/png"]
                failed = await host.send(sid, "what is this?", files)
                assert failed.error is not None and failed.error.code == "model_rejects_images"
                chosen["model"] = "vision-model"
                host.provider = OpenAIProvider(server.base_url, "vision-model")
                retried = await host.retry(sid)
                assert retried.end_reason == "completed", retried.error
                chat = [r for r in server.requests if r["path"].endswith("/chat/completions")]
                assert chat[-1]["json"]["model"] == "vision-model"
                assert _image_parts(chat[-1]["json"]) == 1
                assert sum(1 for _ in BlobStore(host.root).stored()) == 1
            finally:
                await host.shutdown()

    asyncio.run(scenario())


def test_refusals_write_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tool.bin").write_bytes(b"\x7fELF" + bytes(60))
    (tmp_path / "cat.png").write_bytes(png_bytes())

    async def scenario() -> None:
        host = Host(tmp_path / "root")
        host.start()
        try:
            sid = seed_session(host.store, ["hello"])
            with pytest.raises(UnsupportedAttachment):
                await host.attaching.read([tmp_path / "tool.bin"])
            files = await host.attaching.read([tmp_path / "cat.png"])
            await host.open_session(sid).wait_loaded()
            faults = DiskFullAt(1, persistent=True)
            with faults.armed_in(monkeypatch), pytest.raises(DiskFull):
                await host.send(sid, "look", files)
            session = host.session(sid)
            assert session is not None and session.projection is not None
            assert len(session.projection.turns) == 1  # no turn of the refused prompt
            assert not list(BlobStore(host.root).stored())
        finally:
            await host.shutdown()

    asyncio.run(scenario())


def test_a_servers_conversation_takes_and_shows_attachments(tmp_path: Path) -> None:
    served_root = tmp_path / "served"
    with SessionStore(served_root).create("remote") as writer:
        session_id = writer.session_id
    desktop = tmp_path / "desktop"
    desktop.mkdir()
    (tmp_path / "cat.png").write_bytes(png_bytes(seed=12))

    async def scenario(url: str, token: str) -> None:
        notices = NoticeCenter()
        server = RemoteSource(desktop, Connection("workstation", url), token, notices, timeout=5.0)
        await server.connect()
        host = Host(desktop)
        files = await host.attaching.read([tmp_path / "cat.png"])
        refs = await server.upload(files)
        result = await server.send(session_id, "what is it?", refs)
        assert result["endReason"] == "completed"
        conversation = await server.open_conversation(session_id)
        shown = conversation.rows[0].entries[0].attachments
        assert [ref.name for ref in shown] == ["cat.png"]
        previews = await remote_previews(server.remote, shown)
        assert previews[shown[0].sha256].data == png_bytes(seed=12)
        BlobStore(served_root).path(shown[0].sha256).unlink()
        previews = await remote_previews(server.remote, shown)
        assert previews[shown[0].sha256].missing

    with serve_process(served_root) as served:
        asyncio.run(scenario(served.url, served.token))


def test_deleting_for_good_frees_attachments_nothing_else_refers_to(tmp_path: Path) -> None:
    (tmp_path / "shared.png").write_bytes(png_bytes(seed=21))
    (tmp_path / "own.png").write_bytes(png_bytes(seed=22))

    async def scenario() -> None:
        host = Host(tmp_path / "root")
        host.start()
        trashing = Trashing(host)
        try:
            kept = seed_session(host.store, ["hello"])
            doomed = seed_session(host.store, ["bye"])
            shared = await host.attaching.read([tmp_path / "shared.png"])
            own = await host.attaching.read([tmp_path / "own.png"])
            await host.send(kept, "look", shared)
            await host.send(doomed, "look", [*shared, *own])
            assert sum(1 for _ in BlobStore(host.root).stored()) == 2
            assert await trashing.delete(doomed)
            assert sum(1 for _ in BlobStore(host.root).stored()) == 2  # the Trash refers to them
            # Only blobs older than the grace period go: age the unshared one.
            old = time.time() - 2 * 3600
            for path in BlobStore(host.root).stored():
                os.utime(path, (old, old))
            assert await trashing.purge(doomed)
            left = [p.name for p in BlobStore(host.root).stored()]
            assert left == [hashlib.sha256(shared[0].data).hexdigest()]
        finally:
            await host.shutdown()

    asyncio.run(scenario())
