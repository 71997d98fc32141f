"""Fork calls the fork tests share: fork at a current target, assert a clean refusal."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from branchwise.core.conversation.names import new_branch_name_from_store
from branchwise.core.errors import BranchwiseError
from branchwise.core.fork.engine import ForkResult, fork
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.fork.targets import fork_targets
from branchwise.core.projection import events as ev
from branchwise.core.store.manifest import Manifest
from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.backends import LocalForkBackend
from branchwise.desktop.host.branching import ForkCoordinator
from branchwise.desktop.host.journal import read_journal_document
from branchwise.desktop.host.notices import NoticeCenter
from helpers.sessions import complete_turn, visible_sessions


def fork_at(store: SessionStore, session_id: str, turn_id: str, op: str = "op-1") -> ForkResult:
    """Fork at a turn with the boundary and generation its current target shows."""
    answer = fork_targets(store, session_id)
    target = answer.target(turn_id)
    assert target is not None and target.boundary_sequence is not None
    request = ForkRequest(session_id, turn_id, target.boundary_sequence, answer.generation)
    return fork(store, request, op)


def named_fork_at(
    store: SessionStore, session_id: str, turn_id: str, op: str = "op-1"
) -> ForkResult:
    """:func:`fork_at` as the app and the CLI fork: titled, labelled and its fork turn counted."""
    answer = fork_targets(store, session_id)
    target = answer.target(turn_id)
    assert target is not None and target.boundary_sequence is not None
    request = ForkRequest(session_id, turn_id, target.boundary_sequence, answer.generation)
    name = new_branch_name_from_store(store, session_id, turn_id)
    return fork(
        store,
        request,
        op,
        title=name.title,
        label=name.label,
        fork_turn_index=name.fork_turn_index,
    )


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


@dataclass(frozen=True)
class Source:
    """A root session with finished turns to branch from."""

    session_id: str
    turn_ids: tuple[str, ...]


def make_source(store: SessionStore, turns: int = 2, title: str = "source") -> Source:
    """A session with ``turns`` completed turns, written directly as commits."""
    turn_ids = []
    with store.create(title) as writer:
        for i in range(turns):
            turn_id, step_id = f"turn_{i}", f"step_{i}"
            writer.commit(
                [
                    ev.turn_start(turn_id),
                    ev.user_message(f"msg_u{i}", f"question {i}"),
                    ev.step_start(step_id),
                ]
            )
            writer.commit(
                [
                    ev.assistant_message(f"msg_a{i}", f"answer {i}", "demo"),
                    ev.step_end(step_id),
                    ev.usage(3, 5, "demo"),
                    ev.turn_end(turn_id, ev.EndReason.COMPLETED),
                ]
            )
            turn_ids.append(turn_id)
        return Source(writer.session_id, tuple(turn_ids))


def request_for(store: SessionStore, source: Source, turn: int = 0) -> ForkRequest:
    """The click on a turn, as the transcript carries it."""
    snapshot = store.read(source.session_id)
    target = snapshot.projection.turn(source.turn_ids[turn])
    assert target is not None and target.boundary_sequence is not None
    return ForkRequest(
        source.session_id,
        target.turn_id,
        target.boundary_sequence,
        snapshot.manifest.generation,
    )


def fork_children(store: SessionStore, source_id: str | None = None) -> list[Manifest]:
    """Every fork child in the store (of ``source_id`` if given), from one manifest scan."""
    return [
        m
        for m in store.iter_manifests()
        if isinstance(m, Manifest)
        and m.parent is not None
        and m.parent.kind == "fork"
        and (source_id is None or m.parent.session_id == source_id)
    ]


def children_per_operation(store: SessionStore) -> Counter[str | None]:
    """How many fork children each operation id created."""
    return Counter(m.created_by_operation for m in fork_children(store))


@dataclass
class Tabs:
    """The opener: records opened sessions; can be told to fail."""

    opened: list[str] = field(default_factory=list)
    failures_left: int = 0
    store: SessionStore | None = None

    async def open(self, session_id: str) -> None:
        """Open a tab for ``session_id`` (reads its manifest, as a real tab would)."""
        if self.store is not None:
            self.store.manifest(session_id)
        if self.failures_left > 0:
            self.failures_left -= 1
            raise RuntimeError(f"the tab for {session_id} could not be created")
        self.opened.append(session_id)


class RemoteDouble:
    """A remote store in front of the real local backend, with scripted trouble.

    Args:
        inner: the real backend that does the forks.
        script: per call, what goes wrong: ``ok``, ``stall`` (never answers),
            ``gate`` (waits for ``release``), ``lost_reply`` (forks, then the
            connection drops), ``garbled`` (an undecodable reply after the
            fork), ``refuse_reset`` (connection refused before sending).
    """

    def __init__(self, inner: LocalForkBackend, script: list[str] | None = None) -> None:
        self.inner = inner
        self.script = list(script or [])
        self.calls: list[str] = []
        self.release = asyncio.Event()

    async def fork(
        self, request: ForkRequest, operation_id: str, *, title: str | None = None
    ) -> ForkResult:
        """Forward a fork, misbehaving as scripted."""
        self.calls.append(operation_id)
        step = self.script.pop(0) if self.script else "ok"
        if step == "stall":
            await asyncio.Event().wait()
        if step == "gate":
            await self.release.wait()
        if step == "refuse_reset":
            raise ConnectionRefusedError("connection refused")
        result = await self.inner.fork(request, operation_id, title=title)
        if step == "lost_reply":
            raise ConnectionResetError("connection reset by peer")
        if step == "garbled":
            raise ValueError("reply is not valid JSON")
        return result

    async def session_exists(self, session_id: str) -> bool:
        """Forwarded unchanged."""
        return await self.inner.session_exists(session_id)


T = TypeVar("T")


def run(coro: Awaitable[T]) -> T:
    return asyncio.run(coro)  # type: ignore[arg-type]


class CoordinatorHarness:
    """A fork coordinator wired like the app's over one data root, its tabs and notices kept."""

    def __init__(
        self,
        store: SessionStore,
        backend: Any = None,
        tabs: Tabs | None = None,
        **options: Any,
    ) -> None:
        self.store = store
        self.local = LocalForkBackend(store)
        self.backend = backend if backend is not None else self.local
        self.tabs = tabs or Tabs(store=store)
        self.notices = NoticeCenter()
        self.coordinator = ForkCoordinator(
            store.root, self.backend, self.notices, self.tabs.open, **options
        )

    def codes(self) -> list[str]:
        return [n.code for n in self.notices.history]

    def journal(self) -> list[dict[str, Any]]:
        document = read_journal_document(self.store.root)
        return [] if document is None else list(document["operations"])


def branch_with_own_turn(root: Path) -> tuple[str, str]:
    """``(parent, branch)``: "Trip plans" with turn r1, and a branch at r1 that asked c1 itself."""
    store = SessionStore(root)
    with store.create("Trip plans") as writer:
        complete_turn(writer, "r1", "where to?")
        parent = writer.session_id
    child = fork_at(store, parent, "r1", op="op-side").child_session_id
    with store.open_writer(child) as writer:
        complete_turn(writer, "c1", "what about Kyoto?")
    return parent, child
