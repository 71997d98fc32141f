"""The first ``say`` of an untitled session on a full disk.

Every space-taking call of the turn (the question's commit, the title's
commit and manifest, each partial answer, the closing commit) is failed in
turn, once and for good. Each time the turn ends cleanly: closed as ``error``
with ``disk_full`` when the closing commit fits, else ``run`` raises
``DiskFull`` and the next writer closes the turn as ``interrupted``. The log
and the manifest never disagree on the title for a reader, and the error says
what of the turn was kept.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence

import pytest
from helpers.faults import DiskFullAt

from branchwise.core.errors import BranchwiseError, DiskFull
from branchwise.core.providers.base import StreamItem, TextChunk, Usage
from branchwise.core.runtime import TurnResult, TurnRunner
from branchwise.core.store.store import SessionStore

QUESTION = "Hello disk"
CHUNKS = ["Once ", "upon ", "a ", "time ", "there ", "was ", "space."]
MAX_STEPS = 60


class ChunkProvider:
    """Streams ``CHUNKS``, yielding to the loop (or sleeping) between them."""

    model = "fake"
    label = "fake"

    def __init__(self, pause: float = 0.0) -> None:
        self.pause = pause

    async def stream(self, messages: Sequence[Mapping[str, str]]) -> AsyncIterator[StreamItem]:
        for chunk in CHUNKS:
            await asyncio.sleep(self.pause)
            yield TextChunk(chunk)
        yield Usage(3, len(CHUNKS))

    async def list_models(self) -> list[str]:
        return [self.model]


def _say(store: SessionStore, session_id: str, faults: DiskFullAt, pause: float) -> object:
    """Run one turn with the faults armed; the result or the error it raised."""
    flush = 0.0 if pause == 0 else pause / 5
    writer = SessionStore(store.root, file_ops=faults).open_writer(session_id)
    try:
        runner = TurnRunner(writer, ChunkProvider(pause), flush_interval=flush)
        try:
            with faults.armed_in(pytest.MonkeyPatch()):
                return asyncio.run(runner.run(QUESTION))
        except BranchwiseError as exc:
            return exc
    finally:
        writer.close()


@pytest.mark.parametrize("persistent", [False, True], ids=["once", "disk-stays-full"])
@pytest.mark.parametrize("pause", [0.0, 0.01], ids=["inline-flush", "timer-flush"])
def test_the_first_say_on_a_full_disk_ends_cleanly_and_keeps_log_and_manifest_agreeing(
    store: SessionStore, persistent: bool, pause: float
) -> None:
    outcomes: set[str] = set()
    for at in range(1, MAX_STEPS):
        with store.create("") as writer:
            session_id = writer.session_id
        faults = DiskFullAt(at, persistent=persistent)
        outcome = _say(store, session_id, faults, pause)
        if not faults.fired:
            assert isinstance(outcome, TurnResult) and outcome.end_reason == "completed"
            break
        if isinstance(outcome, TurnResult) and outcome.end_reason == "completed":
            # Only a sidecar write failed (a cache, written after the commit's fsync): the
            # commits were durable, the writer dropped the cache and went on.
            assert store.read(session_id).projection.turns[-1].end_reason == "completed"
            outcomes.add("cache write failed, turn completed")
            continue
        # A clean end: a result closed as error, or a typed DiskFull; never anything else.
        if isinstance(outcome, TurnResult):
            assert outcome.end_reason == "error", (at, faults.fired)
            assert outcome.error is not None and outcome.error.code == "disk_full"
            error = outcome.error
            assert error.details["turnClosed"] is True and error.details["questionSaved"]
            outcomes.add("closed as error")
        else:
            assert isinstance(outcome, DiskFull), (at, faults.fired, outcome)
            error = outcome
            assert error.details["turnClosed"] is False
            kept = "question kept" if error.details["questionSaved"] else "nothing kept"
            outcomes.add(f"raised, {kept}")
        snapshot = store.read(session_id)
        assert snapshot.scan.torn_tail is None and snapshot.scan.corruption is None
        projection = snapshot.projection
        # What the error says was kept is what the log holds.
        questions = [m for m in projection.messages if m.role == "user"]
        answers = [m for m in projection.messages if m.role == "assistant"]
        assert bool(questions) == error.details["questionSaved"], (at, faults.fired)
        assert error.details["answerSaved"] == (len(answers[0].content) if answers else 0)
        # The title: the manifest never runs ahead of the log; readers see the log's.
        log_title, manifest_title = projection.title, snapshot.manifest.title
        assert log_title in ("", QUESTION) and manifest_title in ("", QUESTION)
        assert manifest_title == log_title or (manifest_title == "" and log_title == QUESTION)
        assert snapshot.title == log_title
        # Space comes back: the next writer closes an open turn and catches the manifest up.
        with store.open_writer(session_id) as writer:
            assert writer.projection.open_turn is None
            assert writer.manifest.title == log_title
            turns = writer.projection.turns
            assert len(turns) == (1 if error.details["questionSaved"] else 0)
            if turns:
                assert turns[0].end_reason in ("error", "interrupted")
            again = asyncio.run(TurnRunner(writer, ChunkProvider()).run("once more"))
            assert again.end_reason == "completed"
        assert store.manifest(session_id).title == store.read(session_id).title != ""
    else:
        raise AssertionError("the turn never ran out of steps to fail")
    assert at > 8  # question, title commit, title manifest (4), partials, closing…
    # Once: the closing commit fits after the failure. Stays full: it never does, so the
    # next writer closes the turn as interrupted.
    expected = {"closed as error", "raised, nothing kept", "cache write failed, turn completed"}
    if persistent:
        expected = {
            "raised, question kept",
            "raised, nothing kept",
            "cache write failed, turn completed",  # the last sidecar write after the last commit
        }
    assert outcomes == expected
