"""What a model server is sent for attachments, read from a recording server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import pytest
from helpers.attachments import pdf_bytes, png_bytes
from helpers.cli import run_cli
from helpers.fake_openai_server import FakeOpenAIServer

from branchwise.core.conversation.attachments import (
    DEFAULT_LIMITS,
    AttachmentLimits,
    attach_files,
)
from branchwise.core.i18n.reasons import error_text
from branchwise.core.projection.attachments import AttachmentRef
from branchwise.core.providers.openai import OpenAIProvider
from branchwise.core.runtime import TurnResult, TurnRunner
from branchwise.core.store.store import SessionStore

LM_STUDIO_REFUSAL = "Model does not support images. Please use a model that does"


def _files(
    tmp_path: Path, store: SessionStore, *items: tuple[str, bytes]
) -> tuple[AttachmentRef, ...]:
    paths = []
    for name, data in items:
        (tmp_path / name).write_bytes(data)
        paths.append(tmp_path / name)
    return attach_files(store.root, paths)


def _turns(
    store: SessionStore,
    asks: list[tuple[str, tuple[AttachmentRef, ...]]],
    *,
    model: str = "vision-model",
    limits: AttachmentLimits = DEFAULT_LIMITS,
    **knobs: Any,
) -> tuple[list[TurnResult], list[list[dict[str, Any]]]]:
    async def go() -> tuple[list[TurnResult], list[list[dict[str, Any]]]]:
        async with FakeOpenAIServer(chunks=["ok"], **knobs) as server:
            provider = OpenAIProvider(server.base_url, model)
            results = []
            with store.create("c") as writer:
                for text, files in asks:
                    runner = TurnRunner(writer, provider, limits=limits)
                    results.append(await runner.run(text, files))
            chats = [
                r["json"]["messages"]
                for r in server.requests
                if r["path"].endswith("/chat/completions")
            ]
            return results, chats

    return asyncio.run(go())


def _data_url(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode()


def test_the_exact_content_parts_and_their_resending(store: SessionStore, tmp_path: Path) -> None:
    image = png_bytes(seed=3)
    files = _files(
        tmp_path,
        store,
        ("cat.png", image),
        ("notes.md", b"# Notes\nfirst line\n"),
        ("paper.pdf", pdf_bytes(["Page one text", "Page two text"])),
    )
    results, chats = _turns(store, [("What is this?", files), ("And now?", ())])
    assert [r.end_reason for r in results] == ["completed", "completed"]
    first_parts = [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": _data_url(image)}},
        {"type": "text", "text": "Attached file notes.md:\n\n# Notes\nfirst line\n"},
        {
            "type": "text",
            "text": "Attached file paper.pdf (2 pages):\n\nPage one text\n\nPage two text",
        },
    ]
    assert chats[0] == [{"role": "user", "content": first_parts}]
    # The next turn sends the earlier prompt's files again, in the context.
    assert chats[1] == [
        {"role": "user", "content": first_parts},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "And now?"},
    ]


def test_images_of_only_the_last_n_prompts_are_resent(store: SessionStore, tmp_path: Path) -> None:
    first = _files(tmp_path, store, ("one.png", png_bytes(seed=1)))
    second = _files(tmp_path, store, ("two.png", png_bytes(seed=2)))
    _, chats = _turns(
        store,
        [("a", first), ("b", second), ("c", ())],
        limits=AttachmentLimits(image_turns=1),
    )
    last = chats[2]
    assert last[0]["content"] == [{"type": "text", "text": "a"}]  # image one left out
    assert last[2]["content"] == [
        {"type": "text", "text": "b"},
        {"type": "image_url", "image_url": {"url": _data_url(png_bytes(seed=2))}},
    ]


@pytest.mark.parametrize(
    "refusal",
    [
        LM_STUDIO_REFUSAL,
        "Invalid content type. image_url is only supported by certain models.",
        "image input is not supported - hint: you may need to provide the mmproj",
    ],
)
def test_a_model_that_refuses_images_gets_a_typed_error(
    store: SessionStore, tmp_path: Path, refusal: str
) -> None:
    files = _files(tmp_path, store, ("cat.png", png_bytes()))
    results, _ = _turns(
        store,
        [("look", files)],
        model="text-model",
        reject_images=refusal,
        text_only_models=("text-model",),
    )
    error = results[0].error
    assert results[0].end_reason == "error" and error is not None
    assert error.code == "model_rejects_images"
    assert "does not accept images" in error_text(error)


def test_the_refused_turn_is_retried_with_another_model_and_sent_once(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (tmp_path / "cat.png").write_bytes(png_bytes())
    record = tmp_path / "requests.jsonl"

    async def go() -> None:
        async with FakeOpenAIServer(
            chunks=["seen"], reject_images=LM_STUDIO_REFUSAL, text_only_models=("text-model",)
        ) as server:
            server.record_path = record
            url = server.base_url
            _, made = await asyncio.to_thread(run_cli, root, "session", "new")
            sid = made["sessionId"]
            code, said = await asyncio.to_thread(
                run_cli,
                root,
                "session",
                "say",
                sid,
                "look",
                "--attach",
                str(tmp_path / "cat.png"),
                "--base-url",
                url,
                "--model",
                "text-model",
                "--quiet",
                check=False,
            )
            assert code == 1 and said["endReason"] == "error"
            code, retried = await asyncio.to_thread(
                run_cli,
                root,
                "session",
                "retry",
                sid,
                "--base-url",
                url,
                "--model",
                "vision-model",
                "--quiet",
            )
            assert retried["endReason"] == "completed"

    asyncio.run(go())
    import orjson

    chats = [orjson.loads(line)["json"] for line in record.read_bytes().splitlines()]
    chats = [c for c in chats if c is not None]
    sent = chats[-1]["messages"]
    # The failed prompt is not in the context: the retry sends the image exactly once.
    images = [
        part
        for message in sent
        if isinstance(message["content"], list)
        for part in message["content"]
        if part["type"] == "image_url"
    ]
    assert len(images) == 1 and chats[-1]["model"] == "vision-model"
