"""SIGKILL while an attachment is stored and while its prompt is sent: never a reference
without its bytes, and asking again sends the file once.

Half the kills land at moments drawn across storing an 8 MiB image (read,
hash, write, fsync, rename, folder fsync), half across the whole timed turn
(storing, committing the question that refers to it, streaming the answer
from a model server on 127.0.0.1). After each: every blob any message refers to
is there with its hash; then the prompt is asked again, uninterrupted, and
the request the server records carries the image exactly once (twice only
when the killed turn had already been answered, so its prompt is rightly in
the context).
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import orjson
import pytest
from helpers import HELPERS_DIR
from helpers.kills import kill_moments, start_forked, time_forked

from branchwise.core.conversation.attachments import attach_files
from branchwise.core.providers.openai import OpenAIProvider
from branchwise.core.runtime import TurnRunner
from branchwise.core.store.attachments import BlobStore
from branchwise.core.store.blob_collection import collect_blobs
from branchwise.core.store.store import SessionStore, verify_session

KILLS = 24
FAKE_SERVER = HELPERS_DIR / "fake_openai_server.py"


def _big_png(size: int) -> bytes:
    """A PNG-framed image of about ``size`` bytes (its pixel data is not inflated here)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + data))
        return struct.pack(">I", len(data)) + kind + data + crc

    header = struct.pack(">IIBBBBB", 1024, 1024, 8, 2, 0, 0, 0)
    body = random.Random(5).randbytes(size)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", body) + chunk(b"IEND", b"")
    )


def _ask(root: Path, session_id: str, image: Path, base_url: str) -> None:
    """Store the image and run the turn, as ``session say --attach`` does."""
    store = SessionStore(root)
    refs = attach_files(root, [image])
    with store.open_writer(session_id) as writer:
        runner = TurnRunner(writer, OpenAIProvider(base_url, "vision-model"))
        asyncio.run(runner.run("what is in this picture?", refs))


def _images_sent(record: Path) -> int:
    last = orjson.loads(record.read_bytes().splitlines()[-1])["json"]
    return sum(
        1
        for message in last["messages"]
        if isinstance(message["content"], list)
        for part in message["content"]
        if part["type"] == "image_url"
    )


@pytest.mark.slow
def test_kills_while_storing_and_sending_leave_no_reference_without_bytes(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    store = SessionStore(root)
    image = tmp_path / "photo.png"
    image.write_bytes(_big_png(8 * 1024 * 1024))
    record = tmp_path / "requests.jsonl"
    with subprocess.Popen(
        [
            sys.executable,
            str(FAKE_SERVER),
            "--port",
            "0",
            "--chunks",
            "20",
            "--delay",
            "0.01",
            "--record",
            str(record),
        ],
        stdout=subprocess.PIPE,
        text=True,
    ) as server:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        try:
            sessions = []
            for _ in range(2):
                with store.create("timed") as writer:
                    sessions.append(writer.session_id)
            took = time_forked([lambda s=s: _ask(root, s, image, base_url) for s in sessions])
            for path in BlobStore(root).stored():
                path.unlink()
            storing = time_forked([lambda: attach_files(root, [image])] * 2)
            for path in BlobStore(root).stored():
                path.unlink()  # every kill starts with the image not stored yet
            rng = random.Random(30)
            outcomes = {"question lost": 0, "interrupted": 0, "answered": 0}
            # Half the kills land while the image is stored, half across the whole turn.
            moments = kill_moments(rng, storing, KILLS // 2) + kill_moments(rng, took, KILLS // 2)
            for wait in moments:
                with store.create("killed") as writer:
                    session_id = writer.session_id
                child = start_forked(lambda sid=session_id: _ask(root, sid, image, base_url))
                time.sleep(wait)
                child.kill()
                # No message refers to bytes that are not there, whole.
                projection = store.read(session_id).projection
                for ref in projection.attachment_refs():
                    assert BlobStore(root).check(ref) is None, (wait, ref)
                # A blob under its hash is whole; a cut write is only a temporary file.
                for path in BlobStore(root).stored():
                    if path.parent.name != "incoming":
                        assert hashlib.sha256(path.read_bytes()).hexdigest() == path.name
                report = verify_session(store, session_id)
                assert not [f for f in report["findings"] if f["code"] == "attachment_missing"]
                turns = projection.turns
                answered = bool(turns) and turns[-1].message_id is not None
                outcomes[
                    "answered" if answered else "interrupted" if turns else "question lost"
                ] += 1
                # Ask again: the file is sent once (twice only beside its answered first ask).
                _ask(root, session_id, image, base_url)
                after = store.read(session_id).projection
                assert after.turns[-1].end_reason == "completed", after.turns[-1].error
                assert _images_sent(record) == (2 if answered else 1), (wait, outcomes)
                # Stored once, whatever was cut; what a kill left unreferenced is collectable.
                collect_blobs(store, grace=0)
                assert sum(1 for _ in BlobStore(root).stored()) == 1
                for path in BlobStore(root).stored():
                    path.unlink()
        finally:
            server.terminate()
    # The sweep hit each phase: before the question, during the answer, after it.
    assert all(count > 0 for count in outcomes.values()), outcomes
