"""The host shows an answer another process is streaming as deltas: whole, in the preview and live.

A session whose writer is elsewhere opens read-only and follows its log; its
rows must show the concatenated text of the deltas committed so far, and a big
session's first page (read from the last frames only) must show the same.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from helpers.sessions import complete_turn

from branchwise.core.log.segments import read_session_log
from branchwise.core.projection import events as ev
from branchwise.core.providers.demo import DemoProvider
from branchwise.core.store.manifest import load_manifest
from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.host import Host
from branchwise.desktop.host.rows import PAGE_SIZE
from branchwise.desktop.host.session import SessionMode, read_preview


def test_a_read_only_tab_follows_an_answer_streamed_as_deltas(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    writer = store.create("elsewhere")
    session_id = writer.session_id
    writer.commit([ev.turn_start("t"), ev.user_message("u", "question")])
    writer.commit([ev.assistant_delta("流式", ("a", "m"))])
    writer.commit([ev.assistant_delta("的回答 🙂")])

    async def scenario() -> None:
        host = Host(tmp_path, provider_factory=lambda _settings: DemoProvider())
        host.start()
        session = host.open_session(session_id)
        await session.wait_loaded()
        assert session.mode is SessionMode.READ_ONLY  # the writer above holds the lease
        row = session.row("t")
        assert row is not None and row.answer == "流式的回答 🙂" and row.running
        writer.commit([ev.assistant_delta(" and more")])
        for _ in range(200):  # the tab polls the log about every second
            row = session.row("t")
            if row is not None and row.answer.endswith("more"):
                break
            await asyncio.sleep(0.05)
        assert row is not None and row.answer == "流式的回答 🙂 and more"
        await host.shutdown()

    try:
        asyncio.run(scenario())
    finally:
        writer.close()


def test_the_preview_of_a_big_session_shows_the_streaming_answer_whole(
    store: SessionStore,
) -> None:
    with store.create("big") as writer:
        for n in range(PAGE_SIZE + 5):
            complete_turn(writer, f"t{n}", f"question {n} " + "x" * 200)
        writer.commit([ev.turn_start("open"), ev.user_message("u-open", "last")])
        writer.commit([ev.assistant_delta("Half ", ("a-open", "m"))])
        writer.commit([ev.assistant_delta("an answer")])
        full = writer.projection.message("a-open")
        session_id = writer.session_id
    directory = store.session_dir(session_id)
    data = read_session_log(directory, load_manifest(directory)).data
    preview = read_preview(data, PAGE_SIZE)
    assert preview is not None and full is not None
    assert preview.rows[-1].answer == full.content == "Half an answer"
