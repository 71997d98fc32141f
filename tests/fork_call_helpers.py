"""Fork calls the fork tests share: fork at a current target, assert a clean refusal."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from helpers_fork import visible_sessions

from branchwise.core.errors import BranchwiseError
from branchwise.core.fork import ForkResult, fork
from branchwise.core.store import SessionStore
from branchwise.core.targets import fork_targets


def fork_at(store: SessionStore, session_id: str, turn_id: str, op: str = "op-1") -> ForkResult:
    """Fork at a turn with the boundary and generation its current target shows."""
    answer = fork_targets(store, session_id)
    target = answer.target(turn_id)
    assert target is not None and target.boundary_sequence is not None
    return fork(store, session_id, turn_id, target.boundary_sequence, answer.generation, op)


def refused(store: SessionStore, code: str, call: Callable[[], object]) -> BranchwiseError:
    """Assert ``call`` refuses with ``code`` and leaves no trace in the store."""
    index = store.root / "fork-index"

    def reservations() -> set[str]:
        return {p.name for p in index.iterdir()} if index.exists() else set()

    before, reserved = visible_sessions(store), reservations()
    with pytest.raises(BranchwiseError) as caught:
        call()
    assert caught.value.code == code, caught.value.to_json()
    assert visible_sessions(store) == before and reservations() == reserved
    assert not [p for p in store.sessions_dir.iterdir() if p.name.startswith(".")]
    return caught.value
