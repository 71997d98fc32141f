"""A fork coordinator wired like the app, for the fork click protocol tests."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

from fork_ops_helpers import Tabs

from branchwise.core.store import SessionStore
from branchwise.desktop.fork_backend import LocalForkBackend
from branchwise.desktop.fork_ops import ForkCoordinator
from branchwise.desktop.journal import read_journal_document
from branchwise.desktop.notices import NoticeCenter

T = TypeVar("T")


def run(coro: Awaitable[T]) -> T:
    return asyncio.run(coro)  # type: ignore[arg-type]


class Host:
    """A coordinator wired like the app, over one data root."""

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
