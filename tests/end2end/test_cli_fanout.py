"""``session fanout`` and ``session fuse`` in real processes, against a real OpenAI-compatible
server on 127.0.0.1 that answers each model differently, and through ``branchwise serve``."""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from helpers import HELPERS_DIR
from helpers.attachments import png_bytes
from helpers.cli import cli_command, run_cli
from helpers.serve import serve_process

from branchwise.core.errors import RemoteRefusal
from branchwise.core.projection.attachments import AttachmentRef
from branchwise.core.remote.client import RemoteStore
from branchwise.core.store.attachments import BlobStore
from branchwise.core.store.manifest import load_manifest
from branchwise.core.store.store import SessionStore

FAKE_SERVER = HELPERS_DIR / "fake_openai_server.py"
BRANCH_KEYS = {"sessionId", "label", "model", "turnId", "endReason"}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """A fake server offering three models, answering each with ``[model]`` first;
    ``broken`` loses its connection after two chunks."""
    with subprocess.Popen(
        [sys.executable, str(FAKE_SERVER), "--port", "0", "--per-model", "--delay", "0.001"]
        + ["--models", "llama3.2,qwen2.5,broken", "--cut-models", "broken"],
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        try:
            yield proc.stdout.readline().strip()
        finally:
            proc.terminate()


def _run(root: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, Any, list[Any]]:
    """Exit status, the printed JSON, and the stderr progress lines."""
    proc = subprocess.run(
        [*cli_command(root), *args], capture_output=True, text=True, timeout=120, env=env
    )
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    progress = [orjson.loads(line) for line in proc.stderr.splitlines() if line.startswith("{")]
    return proc.returncode, orjson.loads(lines[-1]), progress


def _sessions(root: Path) -> set[str]:
    return {p.name for p in (root / "sessions").iterdir() if not p.name.startswith(".")}


def _conversation(root: Path) -> str:
    _, created = run_cli(root, "session", "new", "--title", "Trip")
    session = created["sessionId"]
    run_cli(root, "session", "say", session, "Where should we go?", "--quiet")
    return session


def test_fanout_streams_every_model_into_its_own_labelled_branch(
    tmp_path: Path, server: str
) -> None:
    root = tmp_path / "root"
    source = _conversation(root)
    before = _sessions(root)
    asked = ("--base-url", server, "--model", "llama3.2", "--model", "qwen2.5", "--model", "broken")
    code, printed, progress = _run(
        root, "session", "fanout", source, "Plan a day", *asked, "--operation-id", "op-1"
    )

    # The broken model ends its own branch with its typed reason; the others answer in full.
    assert code == 1
    assert set(printed) == {"operationId", "branches"}
    assert printed["operationId"] == "op-1"
    branches = printed["branches"]
    assert [set(b) for b in branches] == [BRANCH_KEYS] * 3
    assert [(b["model"], b["label"]) for b in branches] == [
        ("llama3.2", "llama3.2"),
        ("qwen2.5", "qwen2.5"),
        ("broken", "broken"),
    ]
    assert [b["endReason"] for b in branches] == ["completed", "completed", "error"]
    assert _sessions(root) - before == {b["sessionId"] for b in branches}
    ended = {line["sessionId"]: line for line in progress if line["event"] == "ended"}
    assert ended[branches[2]["sessionId"]]["error"]["code"] == "provider_stream_cut"
    assert {line["event"] for line in progress} >= {"branches", "started", "text", "ended"}

    store = SessionStore(root)
    parent_turns = store.read(source).projection.turns
    for branch in branches:
        snapshot = store.read(branch["sessionId"])
        projection = snapshot.projection
        assert snapshot.manifest.parent is not None
        assert snapshot.manifest.parent.session_id == source
        assert snapshot.manifest.parent.turn_id == parent_turns[-1].turn_id
        assert projection.settings.model == branch["model"]
        own = projection.turns[-1]
        assert own.turn_id == branch["turnId"]
        assert projection.message(own.user_message_id).content == "Plan a day"
        answer = projection.message(own.message_id).content
        assert answer.startswith(f"[{branch['model']}]")
        if branch["model"] != "broken":
            assert answer == f"[{branch['model']}]Hello from the fake server."
        else:  # what arrived before the cut is kept
            assert answer == "[broken]Hello"
    # The conversation asked is untouched.
    assert store.read(source).projection.turns == parent_turns

    # A retry of the operation returns the same branches and makes none.
    code, again, _ = _run(
        root, "session", "fanout", source, "Plan a day", *asked, "--operation-id", "op-1"
    )
    assert again == printed and code == 1
    assert _sessions(root) - before == {b["sessionId"] for b in branches}

    # The same operation id asking something else is refused, nothing written.
    code, refused, _ = _run(
        root, "session", "fanout", source, "Plan a week", *asked, "--operation-id", "op-1"
    )
    assert code == 1 and refused["error"]["code"] == "operation_conflict"
    code, refused, _ = _run(
        root, "session", "fanout", source, "Plan a day", "--base-url", server,
        "--model", "llama3.2", "--operation-id", "op-1",
    )  # fmt: skip
    assert code == 1 and refused["error"]["code"] == "operation_conflict"
    assert _sessions(root) - before == {b["sessionId"] for b in branches}


def test_fanout_refuses_bad_targets_before_anything_is_written(tmp_path: Path, server: str) -> None:
    root = tmp_path / "root"
    source = _conversation(root)
    before = _sessions(root)
    nine = [arg for n in range(9) for arg in ("--model", f"m{n}")]
    for args, code_name in (
        ((), "invalid_fanout"),  # no model and no samples: zero targets
        (tuple(nine), "invalid_fanout"),
        (("--model", "a", "--model", "b", "--samples", "5"), "invalid_fanout"),  # 10
        (("--samples", "0"), "invalid_fanout"),
        (("--model", "no-such-model", "--base-url", server), "provider_model_not_found"),
    ):
        code, refused, _ = _run(root, "session", "fanout", source, "Hi", *args)
        assert code == 1, args
        assert refused["error"]["code"] == code_name, (args, refused)
    code, refused, _ = _run(root, "session", "fanout", source, "  ", "--samples", "2")
    assert refused["error"]["code"] == "empty_prompt"
    assert _sessions(root) == before
    assert not (root / "fanout-index").exists() or not os.listdir(root / "fanout-index")


def test_fuse_merges_back_with_provenance(tmp_path: Path) -> None:
    root = tmp_path / "root"
    source = _conversation(root)
    _, printed, _ = _run(
        root, "session", "fanout", source, "Plan a day", "--samples", "3", "--quiet"
    )
    branches = [b["sessionId"] for b in printed["branches"]]
    assert [b["label"] for b in printed["branches"]] == [f"demo · sample {n}" for n in (1, 2, 3)]
    store = SessionStore(root)
    answers = [store.read(b).projection.messages[-1].content for b in branches]
    assert len(set(answers)) == 3  # each sample answers differently

    froms = ("--from", branches[0], "--from", branches[2])
    code, merged, _ = _run(root, "session", "fuse", source, *froms, "--operation-id", "fuse-1")
    assert code == 0, merged
    assert set(merged) == {"parentSessionId", "mergeSequence", "created"}
    assert merged["parentSessionId"] == source and merged["created"] is True
    projection = store.read(source).projection
    (merge,) = projection.merges
    assert merge["seq"] == merged["mergeSequence"]
    assert merge["kind"] == "fused"
    assert merge["model"] == "demo"
    assert merge["instruction"].startswith("Combine the best of these answers")
    expected = []
    for branch in (branches[0], branches[2]):
        turn = store.read(branch).projection.turns[-1]
        expected.append(
            {
                "sessionId": branch,
                "turnId": turn.turn_id,
                "messageId": turn.message_id,
                "model": "demo",
            }
        )
    assert merge["sources"] == expected
    assert projection.messages[-1].role == "merge"
    assert "Fused from 2 answers" in projection.messages[-1].content

    # Retried: the same merge, no second one, no model asked again.
    code, again, _ = _run(root, "session", "fuse", source, *froms, "--operation-id", "fuse-1")
    assert again == {**merged, "created": False}
    assert len(store.read(source).projection.merges) == 1
    # The same id for other branches is a conflict.
    code, refused, _ = _run(
        root, "session", "fuse", source, "--from", branches[1], "--operation-id", "fuse-1"
    )
    assert refused["error"]["code"] == "operation_conflict"

    # A branch of another conversation: not_related.
    other = _conversation(root)
    _, foreign, _ = _run(root, "session", "fanout", other, "Elsewhere", "--samples", "2")
    code, refused, _ = _run(
        root, "session", "fuse", source, "--from", foreign["branches"][0]["sessionId"]
    )
    assert code == 1 and refused["error"]["code"] == "not_related"

    # A branch that is answering (its writer holds it) is refused plainly.
    with store.open_writer(branches[1]):
        code, refused, _ = _run(root, "session", "fuse", source, "--from", branches[1])
    assert code == 1 and refused["error"]["code"] == "turn_running"
    assert len(store.read(source).projection.merges) == 1


def test_fanout_and_fuse_through_a_server(tmp_path: Path) -> None:
    root = tmp_path / "root"
    source = _conversation(root)
    with serve_process(root) as served:
        env = {**os.environ, "BRANCHWISE_TOKEN": served.token}
        remote = ("--server", served.url)
        code, printed, progress = _run(
            root, *remote, "session", "fanout", source, "Plan a day",
            "--model", "alpha", "--model", "beta", "--samples", "2", "--operation-id", "op-r",
            env=env,
        )  # fmt: skip
        assert code == 0, printed
        assert set(printed) == {"operationId", "branches"}
        assert [set(b) for b in printed["branches"]] == [BRANCH_KEYS] * 4
        assert [b["label"] for b in printed["branches"]] == [
            "alpha · sample 1",
            "alpha · sample 2",
            "beta · sample 1",
            "beta · sample 2",
        ]
        assert {b["endReason"] for b in printed["branches"]} == {"completed"}
        assert sum(line["event"] == "ended" for line in progress) == 4
        assert any(line["event"] == "text" for line in progress)
        code, again, _ = _run(
            root, *remote, "session", "fanout", source, "Plan a day",
            "--model", "alpha", "--model", "beta", "--samples", "2", "--operation-id", "op-r",
            env=env,
        )  # fmt: skip
        assert again == printed
        code, refused, _ = _run(root, *remote, "session", "fanout", source, "Plan a day", env=env)
        assert code == 1 and refused["error"]["code"] == "invalid_fanout"
        froms = [arg for b in printed["branches"][:2] for arg in ("--from", b["sessionId"])]
        code, merged, _ = _run(
            root, *remote, "session", "fuse", source, *froms, "--operation-id", "f", env=env
        )
        assert code == 0 and set(merged) == {"parentSessionId", "mergeSequence", "created"}
    store = SessionStore(root)
    answers = {
        store.read(b["sessionId"]).projection.messages[-1].content for b in printed["branches"]
    }
    assert len(answers) == 4
    (merge,) = store.read(source).projection.merges
    assert [s["sessionId"] for s in merge["sources"]] == [
        b["sessionId"] for b in printed["branches"][:2]
    ]
    assert load_manifest(store.session_dir(printed["branches"][0]["sessionId"])).label is not None


def test_fanout_through_a_server_carries_attached_files_into_every_branch(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    source = _conversation(root)
    image = png_bytes(5, 3, seed=42)
    (tmp_path / "a.png").write_bytes(image)
    sha = hashlib.sha256(image).hexdigest()
    before = _sessions(root)
    with serve_process(root) as served:
        env = {**os.environ, "BRANCHWISE_TOKEN": served.token}
        remote = ("--server", served.url)
        asked = (
            "session", "fanout", source, "What is on this picture?", "--attach",
            str(tmp_path / "a.png"), "--model", "a", "--model", "b", "--operation-id", "op-f",
        )  # fmt: skip
        code, printed, progress = _run(root, *remote, *asked, env=env)
        assert code == 0, printed
        assert set(printed) == {"operationId", "branches"}
        assert [b["label"] for b in printed["branches"]] == ["a", "b"]
        assert {b["endReason"] for b in printed["branches"]} == {"completed"}
        assert sum(line["event"] == "ended" for line in progress) == 2
        shown = []
        for branch in printed["branches"]:
            code, show, _ = _run(root, *remote, "session", "show", branch["sessionId"], env=env)
            assert code == 0, show
            shown.append([m for m in show["messages"] if m["role"] == "user"][-1])
        # A retry with the same operation id and the same file makes nothing new.
        code, again, _ = _run(root, *remote, *asked, env=env)
        assert code == 0 and again == printed
    assert [(m["content"], m["attachments"]) for m in shown] == [
        ("What is on this picture?", [
            {"name": "a.png", "type": "image/png", "size": len(image), "sha256": sha}
        ])
    ] * 2  # fmt: skip
    assert _sessions(root) - before == {b["sessionId"] for b in printed["branches"]}
    assert [p.name for p in BlobStore(root).stored()] == [sha]
    store = SessionStore(root)
    assert all(not m.attachments for m in store.read(source).projection.messages)


def test_a_servers_fanout_refuses_files_it_does_not_hold_and_makes_nothing(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    source = _conversation(root)
    before = _sessions(root)
    image = png_bytes(2, 2, seed=9)
    with serve_process(root) as served:
        remote = RemoteStore(served.url, served.token)
        ghost = AttachmentRef("0" * 64, 3, "text/plain", "ghost.txt")

        async def fanout(op: str, *refs: AttachmentRef) -> list[dict[str, Any]]:
            return [
                line async for line in remote.fanout(source, "Look", ["a", "b"], None, op, refs)
            ]

        with pytest.raises(RemoteRefusal) as missing:
            asyncio.run(fanout("op-m", ghost))
        assert (missing.value.code, missing.value.details["status"]) == (
            "attachment_missing",
            404,
        )
        malformed = httpx.post(
            f"{served.url}/sessions/{source}/fanout",
            headers={"Authorization": f"Bearer {served.token}"},
            json={"prompt": "Look", "models": ["a"], "operationId": "op-x",
                  "attachments": [{"sha256": "not a hash"}]},
        )  # fmt: skip
        assert malformed.status_code == 400
        assert malformed.json()["error"]["code"] == "invalid_request"
        assert _sessions(root) == before
        # Nothing of either was journaled: the same ids then make their branches as asked.
        ref = asyncio.run(remote.upload_attachment("b.png", image))
        made = asyncio.run(fanout("op-m", ref))[-1]["result"]
        assert len(made["branches"]) == 2
        # The same id with other files is another question.
        with pytest.raises(RemoteRefusal) as other:
            asyncio.run(fanout("op-m"))
        assert other.value.code == "operation_conflict"
    assert len(_sessions(root) - before) == 2


def test_say_through_a_server_carries_its_attached_file(tmp_path: Path) -> None:
    """``session say --server … --attach`` uploads the file and the question names it
    (it was silently dropped before: the answer came, the file did not)."""
    root = tmp_path / "root"
    source = _conversation(root)
    text = b"Kyoto: temples. Osaka: food.\n"
    (tmp_path / "notes.txt").write_bytes(text)
    with serve_process(root) as served:
        env = {**os.environ, "BRANCHWISE_TOKEN": served.token}
        remote = ("--server", served.url)
        code, said, _ = _run(
            root, *remote, "session", "say", source, "Which one?", "--attach",
            str(tmp_path / "notes.txt"), "--quiet", env=env,
        )  # fmt: skip
        assert code == 0, said
        # A file the command refuses stops it before anything is sent.
        (tmp_path / "empty.png").write_bytes(b"\x89PNG\r\n")
        code, refused, _ = _run(
            root, *remote, "session", "say", source, "And this?", "--attach",
            str(tmp_path / "empty.png"), "--quiet", env=env,
        )  # fmt: skip
        assert code == 1 and refused["error"]["code"].startswith("attachment_"), refused
    messages = SessionStore(root).read(source).projection.messages
    asked = [m for m in messages if m.role == "user"]
    assert asked[-1].content == "Which one?"
    assert [(a.name, a.size, a.sha256) for a in asked[-1].attachments] == [
        ("notes.txt", len(text), hashlib.sha256(text).hexdigest())
    ]
