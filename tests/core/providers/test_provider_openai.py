"""The OpenAI-compatible provider against a real streaming server on 127.0.0.1.

Every failure mode is provoked for real (HTTP statuses, a stalled server, a
dropped connection, a garbage line) and must end in the right typed error,
quickly, with a readable message that never contains the API key.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
from helpers.fake_openai_server import FakeOpenAIServer

from branchwise.core.errors import InvalidBaseUrl, ProviderError
from branchwise.core.providers.base import StreamItem, TextChunk, Usage
from branchwise.core.providers.openai import OpenAIProvider

T = TypeVar("T")
KEY = "sk-test-SECRET-0123456789abcdef"
MESSAGES = [{"role": "user", "content": "hi", "messageId": "m1"}]


def run(factory: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(_bounded(factory()))


async def _bounded(awaitable: Awaitable[T]) -> T:
    # A hang is a failure, not a stuck test run.
    return await asyncio.wait_for(awaitable, 10)


async def collect(provider: OpenAIProvider) -> list[StreamItem]:
    return [item async for item in provider.stream(MESSAGES)]


async def collect_until_error(provider: OpenAIProvider) -> tuple[list[str], ProviderError]:
    texts: list[str] = []
    try:
        async for item in provider.stream(MESSAGES):
            if isinstance(item, TextChunk):
                texts.append(item.text)
    except ProviderError as exc:
        return texts, exc
    raise AssertionError(f"no error raised; got {texts!r}")


def fails_with(code: str, **knobs: Any) -> tuple[list[str], ProviderError, FakeOpenAIServer]:
    async def go() -> tuple[list[str], ProviderError, FakeOpenAIServer]:
        async with FakeOpenAIServer(**knobs) as server:
            provider = OpenAIProvider(server.base_url, "fake-model", KEY, read_timeout=0.3)
            texts, error = await collect_until_error(provider)
            return texts, error, server

    texts, error, server = run(go)
    assert error.code == code, error.message
    assert KEY not in error.message and KEY not in str(error.to_json())
    return texts, error, server


def test_streams_chunks_in_order_then_usage() -> None:
    chunks = [f"piece {i} " for i in range(50)]

    async def go() -> tuple[list[StreamItem], FakeOpenAIServer]:
        async with FakeOpenAIServer(chunks=chunks, usage=(12, 50)) as server:
            provider = OpenAIProvider(server.base_url, "fake-model", KEY)
            return await collect(provider), server

    items, server = run(go)
    assert items == [*(TextChunk(c) for c in chunks), Usage(input_tokens=12, output_tokens=50)]
    (request,) = server.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == f"Bearer {KEY}"
    body = request["json"]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["model"] == "fake-model"
    # Only role and content go on the wire; our own ids stay home.
    assert body["messages"] == [{"role": "user", "content": "hi"}]


def test_usage_is_optional() -> None:
    async def go() -> list[StreamItem]:
        async with FakeOpenAIServer(chunks=["a", "b"], usage=None) as server:
            return await collect(OpenAIProvider(server.base_url, "m"))

    assert run(go) == [TextChunk("a"), TextChunk("b")]


def test_finish_without_done_is_a_whole_reply() -> None:
    async def go() -> list[StreamItem]:
        async with FakeOpenAIServer(chunks=["a"], usage=None, done=False) as server:
            return await collect(OpenAIProvider(server.base_url, "m"))

    assert run(go) == [TextChunk("a")]


def test_whole_json_reply_from_a_server_that_ignores_stream() -> None:
    async def go() -> list[StreamItem]:
        async with FakeOpenAIServer(chunks=["all ", "at once"], whole_json=True) as server:
            return await collect(OpenAIProvider(server.base_url, "m"))

    assert run(go) == [TextChunk("all at once"), Usage(5, 6)]


def test_server_rejecting_stream_options_is_asked_again_without() -> None:
    async def go() -> tuple[list[StreamItem], FakeOpenAIServer]:
        async with FakeOpenAIServer(chunks=["ok"], reject_stream_options=True) as server:
            return await collect(OpenAIProvider(server.base_url, "m")), server

    items, server = run(go)
    assert items == [TextChunk("ok"), Usage(5, 6)]
    assert ["stream_options" in r["json"] for r in server.requests] == [True, False]


def test_empty_model_uses_the_servers_first_model() -> None:
    async def go() -> tuple[OpenAIProvider, FakeOpenAIServer]:
        async with FakeOpenAIServer(models=["only-one"]) as server:
            provider = OpenAIProvider(server.base_url, "")
            assert provider.label.startswith("default model @ 127.0.0.1:")
            await collect(provider)
            return provider, server

    provider, server = run(go)
    assert provider.model == "only-one"
    assert provider.label == f"only-one @ 127.0.0.1:{server.port}"
    assert server.requests[-1]["json"]["model"] == "only-one"


def test_server_error_500_carries_the_servers_message() -> None:
    _, error, _ = fails_with("provider_http_error", status=500, error_message="CUDA out of memory")
    assert "500" in error.message and "CUDA out of memory" in error.message
    assert error.details["status"] == 500
    assert error.details["serverMessage"] == "CUDA out of memory"


def test_error_body_that_is_not_json_is_quoted() -> None:
    _, error, _ = fails_with("provider_http_error", status=502, error_body=b"upstream exploded")
    assert "upstream exploded" in error.message and "502" in error.message


def test_401_is_an_auth_error_and_never_echoes_the_key() -> None:
    # The fake server echoes the presented key in its error, like some real servers.
    _, error, server = fails_with("provider_auth", require_key="the-right-key")
    assert "refused" in error.message
    assert server.requests[0]["headers"]["Authorization"] == f"Bearer {KEY}"
    assert "<hidden>" in error.message


def test_401_without_a_key_says_a_key_is_needed() -> None:
    async def go() -> ProviderError:
        async with FakeOpenAIServer(require_key="k") as server:
            return (await collect_until_error(OpenAIProvider(server.base_url, "m")))[1]

    error = run(go)
    assert error.code == "provider_auth" and "needs an API key" in error.message


def test_404_naming_the_model_is_model_not_found() -> None:
    _, error, _ = fails_with(
        "provider_model_not_found", status=404, error_message="model 'fake-model' not found"
    )
    assert "fake-model" in error.message


def test_404_for_the_endpoint_points_at_the_url() -> None:
    async def go() -> ProviderError:
        async with FakeOpenAIServer() as server:
            wrong = server.base_url.replace("/v1", "/api")
            return (await collect_until_error(OpenAIProvider(wrong, "m")))[1]

    error = run(go)
    assert error.code == "provider_endpoint_not_found"
    assert "/v1" in error.message


def test_429_is_rate_limited_with_retry_after() -> None:
    _, error, _ = fails_with("provider_rate_limited", status=429, retry_after=7)
    assert error.details["retryAfter"] == 7


def test_stall_past_the_read_timeout_is_a_timeout() -> None:
    texts, error, _ = fails_with("provider_timeout", stall_after=2, stall=30.0)
    assert texts == ["Hello", " from"]
    assert error.details["receivedChunks"] == 2


def test_connection_cut_mid_stream_is_a_stream_cut() -> None:
    texts, error, _ = fails_with("provider_stream_cut", cut_after=3)
    assert texts == ["Hello", " from", " the"]
    assert "before the reply was finished" in error.message


def test_connection_cut_mid_line_is_a_stream_cut_not_bad_json() -> None:
    texts, _, _ = fails_with("provider_stream_cut", cut_after=1, cut_mid_line=True)
    assert texts == ["Hello"]


def test_clean_close_without_finish_is_a_stream_cut() -> None:
    texts, _, _ = fails_with("provider_stream_cut", finish=False, done=False, usage=None)
    assert texts == ["Hello", " from", " the", " fake", " server", "."]


def test_garbage_data_line_is_a_bad_stream() -> None:
    texts, error, _ = fails_with("provider_bad_stream", garbage_after=2)
    assert texts == ["Hello", " from"]
    assert "not JSON" in error.message and "{this is not json" in error.message


def test_json_of_the_wrong_shape_is_a_bad_stream() -> None:
    fails_with("provider_bad_stream", garbage_after=0, garbage=b'{"choices": 5}')


def test_error_inside_the_stream_is_a_remote_error() -> None:
    garbage = b'{"error": {"message": "model crashed"}}'
    _, error, _ = fails_with("provider_remote_error", garbage_after=1, garbage=garbage)
    assert "model crashed" in error.message


def test_web_page_instead_of_a_stream_is_a_bad_stream() -> None:
    fails_with("provider_bad_stream", content_type="text/html")


def test_finished_reply_without_text_is_an_empty_reply_error() -> None:
    fails_with("provider_empty_reply", chunks=())


def test_closed_port_is_unreachable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    provider = OpenAIProvider(f"http://127.0.0.1:{port}", "m", KEY)

    async def go() -> tuple[ProviderError, ProviderError]:
        streamed = (await collect_until_error(provider))[1]
        try:
            await provider.list_models()
        except ProviderError as listed:
            return streamed, listed
        raise AssertionError("list_models did not fail")

    for error in run(go):
        assert error.code == "provider_unreachable"
        assert f"127.0.0.1:{port}" in error.message
        assert KEY not in error.message


def test_stopping_early_closes_the_stream_promptly() -> None:
    async def go() -> list[str]:
        async with FakeOpenAIServer(stall_after=2, stall=3600.0) as server:
            provider = OpenAIProvider(server.base_url, "m", read_timeout=3600)
            texts: list[str] = []
            stream = provider.stream(MESSAGES)
            async for item in stream:
                assert isinstance(item, TextChunk)
                texts.append(item.text)
                if len(texts) == 2:
                    break
            await stream.aclose()  # type: ignore[attr-defined]
            return texts

    assert run(go) == ["Hello", " from"]  # the server stalls for an hour: closing must not wait


def test_list_models() -> None:
    async def go() -> tuple[list[str], FakeOpenAIServer]:
        async with FakeOpenAIServer(models=["b", "a", "b"], require_key=KEY) as server:
            return await OpenAIProvider(server.base_url, "", KEY).list_models(), server

    models, server = run(go)
    assert models == ["b", "a"]
    assert server.requests[0]["path"] == "/v1/models"


def test_key_never_appears_in_repr_label_or_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)

    async def go() -> OpenAIProvider:
        async with FakeOpenAIServer(require_key=KEY) as server:
            provider = OpenAIProvider(server.base_url, "m", KEY)
            await collect(provider)
            await provider.list_models()
            server.configure(require_key="other")
            await collect_until_error(provider)
            return provider

    provider = run(go)
    assert caplog.records, "debug logging captured nothing; the check would be vacuous"
    assert KEY not in caplog.text
    assert KEY not in repr(provider) and KEY not in provider.label
    assert "api_key=<hidden>" in repr(provider)


@pytest.mark.parametrize(
    "bad", ["", "127.0.0.1:11434", "ftp://h/v1", "http://", "http://h:99999/v1", "file:///x"]
)
def test_bad_base_urls_are_refused(bad: str) -> None:
    with pytest.raises(InvalidBaseUrl) as info:
        OpenAIProvider(bad, "m")
    assert info.value.code == "provider_invalid_url"


def test_crlf_line_endings_and_comments_are_understood() -> None:
    body = (
        b": keep-alive comment\r\n\r\n"
        b'data: {"choices":[{"index":0,"delta":{"content":"one"}}]}\r\n\r\n'
        b"event: message\r\n"
        b'data: {"choices":[{"index":0,"delta":{"content":" two"},"finish_reason":"stop"}]}\r\n'
        b"\r\n"
        b"data: [DONE]"
    )

    async def go() -> list[StreamItem]:
        async with FakeOpenAIServer(raw_body=body) as server:
            return await collect(OpenAIProvider(server.base_url, "m"))

    assert run(go) == [TextChunk("one"), TextChunk(" two")]


def test_text_that_is_not_an_event_stream_is_a_bad_stream() -> None:
    _, error, _ = fails_with(
        "provider_bad_stream",
        raw_body=b"Hello, I am not a model server\n",
        content_type="text/plain",
    )
    assert "/v1" in error.message


def test_an_empty_body_is_a_stream_cut() -> None:
    fails_with("provider_stream_cut", raw_body=b"")


def test_named_error_event_is_a_remote_error() -> None:
    body = b'data: {"choices":[{"delta":{"content":"a"}}]}\n\nevent: error\ndata: "overloaded"\n\n'
    _, error, _ = fails_with("provider_remote_error", raw_body=body)
    assert "overloaded" in error.message


def test_a_server_without_a_model_list_chats_with_a_typed_model() -> None:
    async def go() -> tuple[ProviderError, list[StreamItem]]:
        async with FakeOpenAIServer(list_models=False) as server:
            try:
                await OpenAIProvider(server.base_url, "").list_models()
            except ProviderError as exc:
                refused = exc
            else:
                raise AssertionError("a missing model list must be refused")
            return refused, await collect(OpenAIProvider(server.base_url, "typed-model"))

    refused, items = run(go)
    assert refused.code == "provider_model_list_unavailable"
    assert "type the model name" in refused.message
    assert "no OpenAI API" not in refused.message
    assert "".join(i.text for i in items if isinstance(i, TextChunk))


def test_no_model_and_no_model_list_asks_for_a_model_name() -> None:
    async def go() -> ProviderError:
        async with FakeOpenAIServer(list_models=False) as server:
            return (await collect_until_error(OpenAIProvider(server.base_url, "")))[1]

    error = run(go)
    assert error.code == "provider_model_name_required"
    assert error.definitive
