"""Routes that take a client's files and give them back (``attachments-v1``).

``POST /attachments?name=NAME`` takes one file's bytes as the body. They are
read as they arrive and refused past the per-file limit without reading
further (``attachment_too_large``, 413), judged from their bytes as a local
attachment is, stored once in this server's data root, and answered with the
reference a turn body names (``{"sha256", "size", "type", "name"}``, and
``pages`` for a PDF). ``GET /attachments/{sha256}`` answers the bytes of a
stored file. Both sit behind the bearer token like every route.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from branchwise.core.conversation.attachments import DEFAULT_LIMITS, judge, store_attachments
from branchwise.core.errors import AttachmentMissing, AttachmentTooLarge, InvalidRequest
from branchwise.core.projection.attachments import AttachmentRef, is_sha256
from branchwise.core.remote.server.http_io import json_response
from branchwise.core.remote.server.state import state_of
from branchwise.core.store.attachments import BlobStore

MAX_NAME = 255
CHUNK = 1 << 16


async def upload(request: web.Request) -> web.Response:
    """``POST /attachments?name=NAME``: store one file; its reference."""
    names = request.query.getall("name", [])
    if set(request.query) - {"name"} or len(names) != 1:
        raise InvalidRequest("give the file's name, once, as ?name=", field="name")
    name = names[0].replace("/", "_").replace("\\", "_").strip()
    if not name or len(name) > MAX_NAME:
        raise InvalidRequest(f"name must be 1 to {MAX_NAME} characters", field="name")
    limit = DEFAULT_LIMITS.file_bytes
    too_large = AttachmentTooLarge(
        f"{name} is larger than {limit} bytes", name=name, limit=limit, megabytes=limit >> 20
    )
    if request.content_length is not None and request.content_length > limit:
        raise too_large
    chunks: list[bytes] = []
    received = 0
    while chunk := await request.content.read(CHUNK):
        received += len(chunk)
        if received > limit:
            raise too_large
        chunks.append(chunk)
    data = b"".join(chunks)
    store = state_of(request).store

    def work() -> AttachmentRef:
        return store_attachments(BlobStore(store.root), [judge(name, data)])[0]

    ref = await asyncio.to_thread(work)
    return json_response(ref.to_json())


async def download(request: web.Request) -> web.Response:
    """``GET /attachments/{sha256}``: a stored file's bytes (checked against the hash)."""
    sha = request.match_info["sha256"]
    if not is_sha256(sha):
        raise InvalidRequest("not an attachment hash", field="sha256")
    store = state_of(request).store
    data = await asyncio.to_thread(BlobStore(store.root).read, sha)
    return web.Response(body=data, content_type="application/octet-stream")


async def check_stored(request: web.Request, refs: tuple[AttachmentRef, ...]) -> None:
    """Refuse a turn or a fan-out naming a file this server does not hold (whole).

    Raises:
        AttachmentMissing: a reference without its bytes here.
    """
    if not refs:
        return
    blobs = BlobStore(state_of(request).store.root)
    for ref in refs:
        if await asyncio.to_thread(blobs.check, ref) is not None:
            raise AttachmentMissing(
                f"this server holds no attachment {ref.sha256}; upload it first",
                sha256=ref.sha256,
                name=ref.name,
            )
