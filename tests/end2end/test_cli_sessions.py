"""``branchwise session new|list|show|say|verify|migrate`` end to end, as a user scripts them."""

from __future__ import annotations

import os
from pathlib import Path

from helpers.cli import cli_command, run_cli
from helpers.segmented import as_format_1, scan_log
from helpers.sessions import log_file, session_with_turns, tear_log, tree_hashes

from branchwise.core.store.store import SessionStore


def test_new_say_show_list_verify(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _, created = run_cli(root, "session", "new", "--title", "Plans")
    session_id = created["sessionId"]
    assert created == {"sessionId": session_id, "title": "Plans"}
    _, said = run_cli(root, "session", "say", session_id, "What next?")
    assert set(said) == {"sessionId", "turnId", "messageId", "boundarySequence", "endReason"}
    assert said["endReason"] == "completed"
    _, shown = run_cli(root, "session", "show", session_id)
    assert shown["title"] == "Plans" and shown["generation"] == 1 and shown["parent"] is None
    turn_usage = shown["turns"][0].pop("usage")
    assert shown["turns"] == [
        {k: said[k] for k in ("turnId", "messageId", "boundarySequence", "endReason")}
    ]
    # The demo reports no token counts: the turn's figures are estimated, and timed.
    assert turn_usage["estimated"] is True and turn_usage["inherited"] is False
    assert turn_usage["outputTokens"] == shown["usage"]["outputTokens"]
    assert isinstance(turn_usage["firstTokenMs"], int)
    assert [m["role"] for m in shown["messages"]] == ["user", "assistant"]
    assert shown["messages"][1]["messageId"] == said["messageId"]
    assert shown["usage"]["outputTokens"] > 0
    _, listed = run_cli(root, "session", "list")
    assert [s["sessionId"] for s in listed["sessions"]] == [session_id]
    _, verified = run_cli(root, "session", "verify", session_id)
    files = verified.pop("files")
    assert verified == {
        "ok": True,
        "commits": 3,
        "lastSeq": said["boundarySequence"],
        "tornTail": None,
        "corruption": None,
        "findings": [],
    }
    assert [(f["kind"], f["commits"], f["links"]) for f in files] == [("segment", 3, 1)]


def test_say_streams_text_before_the_json_result(tmp_path: Path) -> None:
    import subprocess

    root = tmp_path / "root"
    _, created = run_cli(root, "session", "new")
    out = subprocess.run(
        [
            *cli_command(root),
            "session",
            "say",
            created["sessionId"],
            "stream it",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert "stream it" in out[0] and out[-1].startswith('{"sessionId"')


def test_verify_reports_torn_tail_and_corruption_without_changing_the_file(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _, created = run_cli(root, "session", "new", "--title", "v")
    session_id = created["sessionId"]
    run_cli(root, "session", "say", session_id, "one")
    log = log_file(root / "sessions" / session_id)
    whole = log.read_bytes()
    tear_log(log, whole[:-7])
    code, report = run_cli(root, "session", "verify", session_id, check=False)
    assert code == 0 and report["ok"] and report["tornTail"]["length"] > 0
    assert log.read_bytes() == whole[:-7]
    damaged = bytearray(whole)
    damaged[40] ^= 0xFF
    log.write_bytes(bytes(damaged))
    code, report = run_cli(root, "session", "verify", session_id, check=False)
    assert code == 1 and not report["ok"]
    assert report["corruption"]["code"] == "corrupt_log"
    assert log.read_bytes() == bytes(damaged)
    code, refused = run_cli(root, "session", "say", session_id, "more", check=False)
    assert code == 1 and refused["error"]["code"] == "corrupt_log"


def test_errors_are_typed_json_with_nonzero_exit(tmp_path: Path) -> None:
    root = tmp_path / "root"
    for args, expected in [
        (("session", "show", "../../etc"), "invalid_session_id"),
        (("session", "show", "abcdefgh-missing"), "session_not_found"),
        (("session", "say", "", "hi"), "invalid_session_id"),
        (("session", "verify", "/abs/path"), "invalid_session_id"),
    ]:
        code, body = run_cli(root, *args, check=False)
        assert code == 1, args
        assert body["error"]["code"] == expected
        assert body["error"]["message"]
    assert list((root / "sessions").iterdir()) == []


def test_migrate_upgrades_format_1_sessions_and_show_reports_disk_usage(tmp_path: Path) -> None:
    root = tmp_path / "root"
    ids = []
    for title in ("old", "new"):
        _, created = run_cli(root, "session", "new", "--title", title)
        run_cli(root, "session", "say", created["sessionId"], "hello", "--quiet")
        ids.append(created["sessionId"])
    old, new = ids
    as_format_1(SessionStore(root), old)
    _, before = run_cli(root, "session", "show", old)
    assert before["disk"]["sharedBytes"] == 0 and before["disk"]["ownBytes"] > 0
    _, migrated = run_cli(root, "session", "migrate", "--all")
    assert migrated == {"migrated": [old], "alreadyCurrent": [new], "failed": []}
    _, again = run_cli(root, "session", "migrate", old)
    assert again == {"migrated": [], "alreadyCurrent": [old], "failed": []}
    _, after = run_cli(root, "session", "show", old)
    assert {k: v for k, v in after.items() if k != "disk"} == {
        k: v for k, v in before.items() if k != "disk"
    }
    assert after["disk"]["ownBytes"] > before["disk"]["ownBytes"]  # the sidecars
    code, _ = run_cli(root, "session", "migrate", check=False)
    assert code == 2
    code, error = run_cli(root, "session", "migrate", "nosuchsession", check=False)
    assert code == 1 and error["error"]["code"] == "session_not_found"


def test_verify_names_a_seed_shorter_than_its_entry(tmp_path: Path) -> None:
    root = tmp_path / "root"
    parent = session_with_turns(SessionStore(root), 3)
    _, forked = run_cli(root, "session", "fork", parent, "--turn", "t2")
    child = forked["childSessionId"]
    seed = root / "sessions" / child / "log" / "seed-000.seg"
    os.truncate(seed, 100)
    before = tree_hashes(root / "sessions" / child)
    code, report = run_cli(root, "session", "verify", child, check=False)
    assert code == 1 and report["ok"] is False
    assert report["corruption"]["code"] == "corrupt_log"
    assert report["corruption"]["file"] == "log/seed-000.seg"
    assert [(f["file"], f["kind"], f["bytes"]) for f in report["files"]][0] == (
        "log/seed-000.seg",
        "seed",
        100,
    )
    _, shown = run_cli(root, "session", "show", child)
    assert shown["corruption"]["file"] == "log/seed-000.seg"
    assert tree_hashes(root / "sessions" / child) == before


def _cut_parent(root: Path, turns_kept: int) -> tuple[str, str, Path, list[int]]:
    """A parent of 4 turns and a fork at ``t1``; the parent's segment cut after ``turns_kept``."""
    store = SessionStore(root)
    parent = session_with_turns(store, 4)
    _, forked = run_cli(root, "session", "fork", parent, "--turn", "t1")
    log = log_file(root / "sessions" / parent)
    frames = scan_log(log).frames
    commits = [f.commit for f in frames]
    cut = frames[-1 - 2 * (4 - turns_kept)].end  # a frame end: no torn tail to see
    os.truncate(log, cut)
    return parent, forked["childSessionId"], log, commits


def test_a_parent_segment_cut_on_a_frame_end_is_lost_commits_not_a_shorter_history(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    parent, child, log, commits = _cut_parent(root, 2)
    before = tree_hashes(log.parent)
    code, report = run_cli(root, "session", "verify", parent, check=False)
    assert code == 1 and report["ok"] is False and report["tornTail"] is None
    corruption = report["corruption"]
    assert (
        corruption["code"] == "corrupt_log"
        and corruption["file"] == log.relative_to(root / "sessions" / parent).as_posix()
    )
    assert (corruption["firstMissingCommit"], corruption["lastMissingCommit"]) == (
        commits[-4],
        commits[-1],
    )
    assert f"commits {commits[-4]} to {commits[-1]}" in corruption["message"]
    code, refused = run_cli(root, "session", "say", parent, "more", check=False)
    assert code == 1 and refused["error"]["code"] == "corrupt_log"
    assert tree_hashes(log.parent) == before
    _, shown = run_cli(root, "session", "show", parent)
    assert shown["corruption"]["code"] == "corrupt_log"
    _, fine = run_cli(root, "session", "verify", child)  # its seed ends before the cut
    assert fine["ok"]


def test_a_childs_seed_entry_names_lost_commits_when_the_parents_index_is_gone(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    parent, child, log, commits = _cut_parent(root, 1)  # the fork at t1 vouches for t1
    log.with_suffix(".idx").unlink()  # a cache: no evidence left in the parent itself
    code, report = run_cli(root, "session", "verify", parent, check=False)
    assert code == 1 and report["ok"] is False
    corruption = report["corruption"]
    assert corruption["vouchedBy"] == child
    assert (corruption["firstMissingCommit"], corruption["lastMissingCommit"]) == (
        commits[-6],
        commits[-5],
    )
    code, report = run_cli(root, "session", "verify", child, check=False)
    assert code == 1 and report["corruption"]["file"] == "log/seed-000.seg"


def test_a_migration_killed_after_its_manifest_is_named_by_verify_and_finished_by_migrate(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    session_id = session_with_turns(SessionStore(root), 2)
    directory = root / "sessions" / session_id
    as_format_1(SessionStore(root), session_id)
    run_cli(root, "session", "migrate", session_id)
    segment = directory / "log" / "000000000001-000000000001.seg"
    os.link(segment, directory / "events.log")  # what a kill before the last unlink leaves
    _, report = run_cli(root, "session", "verify", session_id)
    assert report["ok"] and report["files"][0]["links"] == 2
    assert [(f["code"], f["file"]) for f in report["findings"]] == [
        ("migration_unfinished", "events.log")
    ]
    assert "second link of log/000000000001-000000000001.seg" in report["findings"][0]["message"]
    assert (directory / "events.log").exists()  # verify changes nothing
    _, migrated = run_cli(root, "session", "migrate", "--all")
    assert migrated == {"migrated": [session_id], "alreadyCurrent": [], "failed": []}
    assert not (directory / "events.log").exists() and segment.stat().st_nlink == 1
    _, report = run_cli(root, "session", "verify", session_id)
    assert report["findings"] == [] and report["files"][0]["links"] == 1
    _, again = run_cli(root, "session", "migrate", session_id)
    assert again == {"migrated": [], "alreadyCurrent": [session_id], "failed": []}
