"""A damaged source is refused ``corrupt_log`` by the fork and by cold fork targets.

A fork links a source's bytes after reading one frame per segment, and cold
targets come from turn records: both check the frames they stand on by
checksum, so a flipped bit never makes a child damaged from birth, and no
target is listed while ``show`` says ``corrupt_log``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.forking import fork_at, refused
from helpers.sessions import session_with_turns

from branchwise.core.errors import CorruptLog
from branchwise.core.fork.engine import fork
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.fork.targets import fork_targets
from branchwise.core.log.segments import log_pieces
from branchwise.core.log.sidecars import INDEX_SUFFIX
from branchwise.core.store.store import SessionStore, verify_session


def _segments(store: SessionStore, session_id: str) -> list[Path]:
    return [p.path for p in log_pieces(store.session_dir(session_id), store.manifest(session_id))]


def _flip(path: Path, text: bytes) -> None:
    """Flip one bit inside a commit's payload (the one holding ``text``)."""
    data = bytearray(path.read_bytes())
    at = data.index(text)
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


def _requests(store: SessionStore, session_id: str) -> dict[str, ForkRequest]:
    """Every turn's fork request, taken while the source was whole."""
    answer = fork_targets(store, session_id)
    return {
        t.turn_id: ForkRequest(session_id, t.turn_id, t.boundary_sequence or 0, answer.generation)
        for t in answer.targets
    }


@pytest.fixture
def rolled(tmp_path: Path) -> tuple[SessionStore, str]:
    store = SessionStore(tmp_path / "root", roll_bytes=1500)
    source = session_with_turns(store, 20)
    assert len(_segments(store, source)) >= 4
    return store, source


def test_a_bit_flip_in_a_sealed_segment_refuses_fork_and_targets(
    rolled: tuple[SessionStore, str],
) -> None:
    store, source = rolled
    requests = _requests(store, source)
    sealed = _segments(store, source)[0]
    _flip(sealed, b"question 1")
    error = refused(store, "corrupt_log", lambda: fork(store, requests["t19"], "op-late"))
    assert error.details["file"] == sealed.name
    with pytest.raises(CorruptLog):
        fork_targets(store, source)
    assert not verify_session(store, source)["ok"]


def test_a_bit_flip_in_the_active_segment_refuses_forks_that_link_it(
    rolled: tuple[SessionStore, str],
) -> None:
    store, source = rolled
    requests = _requests(store, source)
    active = _segments(store, source)[-1]
    _flip(active, b"question 18")
    refused(store, "corrupt_log", lambda: fork(store, requests["t19"], "op-late"))
    with pytest.raises(CorruptLog):
        fork_targets(store, source)
    # A fork whose bytes end before the damage links nothing damaged: it goes on.
    child = fork(store, requests["t2"], "op-early").child_session_id
    assert verify_session(store, child)["ok"]


def test_a_turn_past_the_damage_is_corrupt_log_not_unknown_turn(
    rolled: tuple[SessionStore, str],
) -> None:
    """Without an index the fork replays; a turn the damage hides is still ``corrupt_log``."""
    store, source = rolled
    requests = _requests(store, source)
    segments = _segments(store, source)
    for segment in segments:
        segment.with_suffix(INDEX_SUFFIX).unlink()
    _flip(segments[1], b"question ")
    refused(store, "corrupt_log", lambda: fork(store, requests["t19"], "op-late"))


def test_a_whole_source_still_forks_and_lists_its_targets(
    rolled: tuple[SessionStore, str],
) -> None:
    store, source = rolled
    assert len(fork_targets(store, source).targets) == 20
    child = fork_at(store, source, "t19").child_session_id
    assert verify_session(store, child)["ok"]
