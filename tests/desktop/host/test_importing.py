"""The desktop's import without widgets: progress on the loop, a summary notice, Cancel."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from branchwise.core.importing.run import ImportProgress
from branchwise.core.providers.demo import DemoProvider
from branchwise.desktop.host.changes import Changes
from branchwise.desktop.host.host import Host
from branchwise.desktop.host.importing import Importing

FIXTURES = Path(__file__).parents[2] / "fixtures" / "importing"


def _host(root: Path) -> Host:
    host = Host(root, provider_factory=lambda _settings: DemoProvider())
    host.start()
    return host


def write_open_webui_export(path: Path, chats: int) -> None:
    """``chats`` linear two-turn Open WebUI chats, ids ``chat-0``…"""
    rows = []
    for n in range(chats):
        messages = {}
        parent = None
        for i, role in enumerate(("user", "assistant", "user", "assistant")):
            mid = f"c{n}-m{i}"
            messages[mid] = {
                "id": mid,
                "parentId": parent,
                "childrenIds": [],
                "role": role,
                "content": f"{role} {i} of chat {n}",
                "timestamp": 1717000000 + n * 100 + i,
            }
            parent = mid
        rows.append(
            {
                "id": f"chat-{n}",
                "title": f"Chat {n}",
                "chat": {"history": {"messages": messages, "currentId": parent}},
                "created_at": 1717000000 + n * 100,
            }
        )
    path.write_text(json.dumps(rows))


def test_an_import_reports_progress_then_one_summary_and_indexes_the_new_trees(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        host = _host(tmp_path / "root")
        importing = Importing(host)
        seen: list[ImportProgress | None] = []
        importing.subscribe(seen.append)
        changes: list[Changes] = []
        host.subscribe(changes.append)
        export = FIXTURES / "open_webui" / "chat-export.json"
        dialog = object()

        summary = await importing.run(export, initiator=dialog)

        assert summary is not None and not summary.cancelled
        assert summary.imported == len(summary.session_ids) > 0
        assert (summary.existing, summary.skipped) == (0, 1)  # the chat without a tree
        assert seen[0] == ImportProgress(0, 0, 0) and seen[-1] is None and not importing.running
        assert all(sid in host.index.by_id for sid in summary.session_ids)
        assert [c.initiator for c in changes if c.sidebar] == [dialog]
        notice = host.notices.history[-1]
        # Branches (the export's forks) are counted apart from the conversations.
        assert summary.branches > 0
        assert (notice.code, notice.params) == (
            "import_finished_with_branches",
            {
                "count": summary.imported - summary.branches,
                "branches": summary.branches,
                "existing": 0,
                "skipped": 1,
            },
        )

        again = await importing.run(export)

        assert again is not None
        assert (again.imported, again.existing) == (0, summary.imported)
        await host.shutdown()

    asyncio.run(scenario())


def test_cancel_stops_between_conversations_and_a_second_import_brings_the_rest(
    tmp_path: Path,
) -> None:
    export = tmp_path / "many.json"
    chats = 600  # far more than the loop can let through before it hears "2 done"
    write_open_webui_export(export, chats)

    async def scenario() -> None:
        host = _host(tmp_path / "root")
        importing = Importing(host)

        def stop_after_two(progress: ImportProgress | None) -> None:
            if progress is not None and progress.conversations >= 2:
                importing.cancel()

        unsubscribe = importing.subscribe(stop_after_two)
        summary = await importing.run(export)
        unsubscribe()

        assert summary is not None and summary.cancelled
        assert 2 <= summary.imported < chats
        # only whole conversations: every session in the store is one the import reported
        assert {m.session_id for m in host.store.list_sessions()} == set(summary.session_ids)
        assert host.notices.history[-1].code == "import_cancelled"

        rest = await importing.run(export)

        assert rest is not None and not rest.cancelled
        assert (rest.imported, rest.existing) == (chats - summary.imported, summary.imported)
        await host.shutdown()

    asyncio.run(scenario())


def test_a_second_import_while_one_runs_is_refused_and_a_bad_path_is_a_notice(
    tmp_path: Path,
) -> None:
    export = tmp_path / "many.json"
    write_open_webui_export(export, 30)

    async def scenario() -> None:
        host = _host(tmp_path / "root")
        importing = Importing(host)
        first = asyncio.ensure_future(importing.run(export))
        while not importing.running:
            await asyncio.sleep(0)

        assert await importing.run(export) is None
        assert host.notices.history[-1].code == "import_running"
        assert (await first) is not None

        assert await importing.run(tmp_path / "missing.json") is None
        assert host.notices.history[-1].level == "error"
        await host.shutdown()

    asyncio.run(scenario())
