"""A fan-out's answers and its fuse, through the real turn runner, store and providers."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from helpers.fake_openai_server import FakeOpenAIServer
from helpers.sessions import complete_turn

from branchwise.core.conversation.ask_again import unasked_turn
from branchwise.core.conversation.fanout import Fanout, FanoutBranch, fan_out, fanout_targets
from branchwise.core.conversation.settings import ConversationSettings
from branchwise.core.fanout_run import (
    BranchSetup,
    FanoutStops,
    answer_fanout,
    fuse_answers,
)
from branchwise.core.providers.base import Provider
from branchwise.core.providers.demo import DemoProvider
from branchwise.core.providers.openai import OpenAIProvider
from branchwise.core.store.store import SessionStore


def _fanned_out(store: SessionStore, models: list[str]) -> tuple[str, Fanout]:
    with store.create("Trip plans") as writer:
        complete_turn(writer, "r1", "where to?")
        root = writer.session_id
    targets = fanout_targets(models, None, "demo")
    return root, fan_out(store, root, "Kyoto or Osaka?", targets, "op-fan")


def _demo(branch: FanoutBranch, _settings: ConversationSettings) -> BranchSetup:
    return BranchSetup(DemoProvider().as_target(branch.target.model), "", "demo")


class _StopWhileTheWriterOpens(ThreadPoolExecutor):
    """A real worker pool that presses Stop as a branch's writer is about to be opened.

    That is after the fan-out checked whether the branch was stopped and
    before its answer starts: the moment a Stop once went unheard.
    """

    def __init__(self, session_id: str, press: Callable[[], None]) -> None:
        super().__init__(max_workers=2)
        self._session_id, self._press = session_id, press
        self.pressed = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        call = fn.args if isinstance(fn, functools.partial) else ()  # asyncio.to_thread's call
        opening = [getattr(part, "__name__", part) for part in call[:2]]
        if opening == ["open_writer", self._session_id]:
            self.pressed += 1
            self._press()
        return super().submit(fn, *args, **kwargs)


def test_a_stop_while_the_branch_is_made_ready_leaves_it_unasked(store: SessionStore) -> None:
    _, fanout = _fanned_out(store, ["alpha", "beta"])
    stopped, going = fanout.branches
    stops = FanoutStops()
    pool = _StopWhileTheWriterOpens(stopped.session_id, lambda: stops.stop(stopped.session_id))

    async def answer() -> list[Any]:
        asyncio.get_running_loop().set_default_executor(pool)
        return await answer_fanout(store, fanout, _demo, stops=stops)

    first = {o.branch.session_id: o for o in asyncio.run(answer())}
    assert pool.pressed == 1
    assert first[going.session_id].end_reason == "completed"
    never = first[stopped.session_id]
    assert never.end_reason is None and never.turn_id is not None
    snapshot = store.read(stopped.session_id)
    assert unasked_turn(snapshot.manifest, snapshot.projection) == never.turn_id  # still waiting
    assert [m.role for m in snapshot.projection.messages][-1] == "user"

    # A retry of the fan-out asks it, as it would any branch left waiting.
    again = asyncio.run(answer_fanout(store, fanout, _demo))
    assert [o.end_reason for o in again] == ["completed", "completed"]
    assert again[0].turn_id == never.turn_id


def test_a_fuse_asks_its_model_once_and_a_retry_returns_the_same_merge(
    store: SessionStore,
) -> None:
    root, fanout = _fanned_out(store, ["alpha", "beta"])
    asyncio.run(answer_fanout(store, fanout, _demo))
    branches = [b.session_id for b in fanout.branches]
    built: list[ConversationSettings] = []

    async def scenario() -> None:
        async with FakeOpenAIServer(chunks=["Kyoto ", "first."]) as server:

            def provider_for(settings: ConversationSettings) -> Provider:
                built.append(settings)
                return OpenAIProvider(server.base_url, settings.model or "")

            async def fuse() -> Any:
                return await fuse_answers(
                    store,
                    root,
                    branches,
                    "op-fuse",
                    instruction="Keep it short.",
                    provider_for=provider_for,
                    model="fuser",
                )

            merged = await fuse()
            assert merged.created
            chats = [r for r in server.requests if r["path"].endswith("/chat/completions")]
            assert len(chats) == 1 and chats[0]["json"]["model"] == "fuser"
            assert chats[0]["json"]["messages"][-1]["content"].endswith("Keep it short.")

            again = await fuse()
            assert (again.merge_sequence, again.created) == (merged.merge_sequence, False)
            assert len([r for r in server.requests if r["path"].endswith("/chat/completions")]) == 1

    asyncio.run(scenario())
    assert [s.model for s in built] == ["fuser"]  # the retry made no provider at all
    projection = store.read(root).projection
    (merge,) = projection.merges
    assert merge["model"] == "fuser" and merge["instruction"] == "Keep it short."
    assert [s["sessionId"] for s in merge["sources"]] == branches
    assert "Kyoto first." in projection.messages[-1].content
