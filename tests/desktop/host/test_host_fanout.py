"""Send to several and fuse through the desktop's host, headless (offline demo responder)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from helpers.serve import serve_process
from helpers.sessions import complete_turn

from branchwise.core.conversation.fanout import fanout_targets
from branchwise.core.providers.demo import DemoProvider
from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.changes import Changes
from branchwise.desktop.host.connections import Connection
from branchwise.desktop.host.fanout import (
    BranchProgress,
    FanoutRun,
    fuse,
    fuse_remote,
    send_to_several,
    send_to_several_remote,
)
from branchwise.desktop.host.host import Host
from branchwise.desktop.host.notices import NoticeCenter
from branchwise.desktop.host.sources import RemoteSource


def test_send_to_several_reports_each_branch_and_fuse_merges_back(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    with store.create("Trip plans") as writer:
        complete_turn(writer, "r1", "where to?")
        root = writer.session_id

    async def scenario() -> None:
        host = Host(tmp_path, provider_factory=lambda _s: DemoProvider(delay=0.001))
        seen: list[Changes] = []
        host.subscribe(seen.append)
        host.start()
        seen_progress: list[BranchProgress] = []
        run = FanoutRun(seen_progress.append)
        targets = fanout_targets(["llama3.2", "qwen2.5"], 3, "demo")  # 6: two queue
        outcomes = await send_to_several(host, root, "Kyoto or Osaka?", targets, run=run)
        branches = [o.branch.session_id for o in outcomes]
        assert [o.end_reason for o in outcomes] == ["completed"] * 6
        # The branches were announced as added under the conversation before they answered.
        added = next(c for c in seen if c.added)
        assert added.added == frozenset(branches)
        for branch in branches:
            manifest = host.index.by_id[branch]
            assert manifest.parent is not None and manifest.parent.session_id == root
        states = {p.state for p in seen_progress}
        assert states >= {"waiting", "queued", "streaming", "ended"}
        for branch in branches:
            final = run.progress[branch]
            assert final.state == "ended" and final.end_reason == "completed"
            assert final.chunks > 0 and final.time_to_first_chunk is not None
            answer = store.read(branch).projection.messages[-1].content
            assert final.characters == len(answer)
        labels = [run.progress[b].label for b in branches]
        assert labels[:2] == ["llama3.2 · sample 1", "llama3.2 · sample 2"]

        merged = await fuse(host, root, branches[:2], instruction="Keep it short.")
        assert merged.created
        (merge,) = store.read(root).projection.merges
        assert merge["kind"] == "fused" and merge["instruction"] == "Keep it short."
        assert [s["sessionId"] for s in merge["sources"]] == branches[:2]
        assert any(root in c.transcripts for c in seen)
        await host.shutdown()

    asyncio.run(scenario())


def test_stop_ends_one_answer_and_the_others_go_on(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    with store.create("Trip plans") as writer:
        complete_turn(writer, "r1", "where to?")
        root = writer.session_id

    async def scenario() -> None:
        host = Host(tmp_path, provider_factory=lambda _s: DemoProvider(delay=0.02))
        host.start()
        stopped: list[str] = []

        def on_progress(progress: BranchProgress) -> None:
            if progress.chunks == 3 and not stopped:
                stopped.append(progress.session_id)
                run.stop(progress.session_id)

        run = FanoutRun(on_progress)
        targets = fanout_targets(["a", "b"], None, "demo")
        outcomes = await send_to_several(host, root, "Which?", targets, run=run)
        reasons = {o.branch.session_id: o.end_reason for o in outcomes}
        assert reasons.pop(stopped[0]) == "cancelled"
        assert set(reasons.values()) == {"completed"}
        await host.shutdown()

    asyncio.run(scenario())


def test_send_to_several_and_fuse_on_a_server(tmp_path: Path) -> None:
    served_root = tmp_path / "served"
    store = SessionStore(served_root)
    with store.create("on the workstation") as writer:
        complete_turn(writer, "r1", "where to?")
        root = writer.session_id
    desktop = tmp_path / "desktop"
    desktop.mkdir()
    notices = NoticeCenter()

    async def scenario(url: str, token: str) -> None:
        server = RemoteSource(
            desktop,
            Connection("workstation", url),
            token,
            notices,
            backoff=(0.05,),
            refresh_interval=0.1,
            timeout=5.0,
        )
        await server.connect()
        run = FanoutRun()
        result = await send_to_several_remote(
            server, root, "Kyoto or Osaka?", ["alpha", "beta"], None, run=run
        )
        branches = [b["sessionId"] for b in result["branches"]]
        assert [b["endReason"] for b in result["branches"]] == ["completed"] * 2
        assert [run.progress[b].label for b in branches] == ["alpha", "beta"]
        for branch in branches:
            final = run.progress[branch]
            assert final.state == "ended" and final.end_reason == "completed"
            answer = store.read(branch).projection.messages[-1].content
            assert final.characters == len(answer)
            assert f"**{final.model}**" in answer  # the demo answered as that model
            assert branch in server.listing.index.by_id  # listed under the conversation
        merged = await fuse_remote(server, root, branches)
        assert merged["created"] is True
        (merge,) = store.read(root).projection.merges
        assert [s["sessionId"] for s in merge["sources"]] == branches
        await server.stop()

    with serve_process(served_root) as served:
        asyncio.run(scenario(served.url, served.token))
