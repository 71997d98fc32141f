"""Shared pieces for the fork operations tests: sessions, tabs, remote doubles.

The backends here stand in for a *remote* store (a server that stalls, or
whose reply is lost or garbled); they wrap the real local backend, so the
fork itself is always the real one. Nothing of the coordinator is faked.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field

from branchwise.core import events as ev
from branchwise.core.manifest import Manifest
from branchwise.core.store import SessionStore
from branchwise.desktop.fork_backend import ForkResult, LocalForkBackend
from branchwise.desktop.journal import ForkRequest


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
        snapshot.manifest.generation,
        target.turn_id,
        target.boundary_sequence,
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

    async def fork(self, request: ForkRequest, operation_id: str) -> ForkResult:
        """Forward a fork, misbehaving as scripted."""
        self.calls.append(operation_id)
        step = self.script.pop(0) if self.script else "ok"
        if step == "stall":
            await asyncio.Event().wait()
        if step == "gate":
            await self.release.wait()
        if step == "refuse_reset":
            raise ConnectionRefusedError("connection refused")
        result = await self.inner.fork(request, operation_id)
        if step == "lost_reply":
            raise ConnectionResetError("connection reset by peer")
        if step == "garbled":
            raise ValueError("reply is not valid JSON")
        return result

    async def session_exists(self, session_id: str) -> bool:
        """Forwarded unchanged."""
        return await self.inner.session_exists(session_id)
