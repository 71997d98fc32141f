"""What a widget asks the host to do to a server's conversations: create, rename, delete,
restore, search, and open one once its server answers.

The same pattern as :mod:`~branchwise.desktop.host.operations`: a widget asks,
the request goes to the ``branchwise serve`` server off the UI thread, a
refusal becomes one notice naming the server, and what changed is broadcast
as :class:`Changes` carrying the widget that asked (its *initiator*). The
server section only shows servers, their lists and their connection state.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Protocol

from branchwise.core.errors import BranchwiseError, RemoteUnavailable
from branchwise.core.search.query import SearchResult
from branchwise.desktop.host.changes import Changes
from branchwise.desktop.host.conversation import Conversation, ConversationRef
from branchwise.desktop.host.notices import Level, NoticeAction, NoticeCenter
from branchwise.desktop.host.sources import RemoteSource, Servers
from branchwise.desktop.host.trashing import RESTORE_ACTION


class ServerOperationsOwner(Protocol):
    """What the server operations need of the host that owns them (which imports this module)."""

    @property
    def notices(self) -> NoticeCenter:
        """The notice channel."""
        ...

    @property
    def servers(self) -> Servers:
        """The servers this app connects to."""
        ...

    def emit(self, changes: Changes) -> Changes:
        """Broadcast what changed."""
        ...

    async def open(self, ref: ConversationRef) -> Conversation:
        """Open a conversation of either source."""
        ...


@dataclass(frozen=True, slots=True)
class ServerHits:
    """One server's answer to a search.

    Attributes:
        server: the server that answered (its name and titles label the hits).
        result: its hits.
    """

    server: RemoteSource
    result: SearchResult


class ServerOperations:
    """The host's operations on servers' conversations (see the module's docstring).

    Args:
        owner: the host.
    """

    def __init__(self, owner: ServerOperationsOwner) -> None:
        self._owner = owner

    def _server(self, url: str | None) -> RemoteSource | None:
        """The saved server at ``url``; ``None`` (and a notice) when it is no longer saved."""
        server = self._owner.servers.of(url)
        if server is None:
            self._owner.notices.post("server_disconnected", Level.WARNING, server=str(url))
        return server

    async def create(self, url: str, *, initiator: object = None) -> ConversationRef | None:
        """Start a conversation on the server at ``url``; how to open it (``None``: refused)."""
        server = self._server(url)
        if server is None:
            return None
        try:
            session_id = await server.create_session()
        except BranchwiseError as exc:
            server.report(exc)
            return None
        self._owner.emit(Changes(sessions=frozenset({session_id}), initiator=initiator))
        return server.ref(session_id)

    async def rename(
        self, ref: ConversationRef, title: str, *, initiator: object = None
    ) -> Changes:
        """Rename a conversation on its server (a refusal, busy or a bad title, is a notice)."""
        server = self._server(ref.server)
        if server is None:
            return Changes(initiator=initiator)
        try:
            await server.rename(ref.session_id, title)
        except BranchwiseError as exc:
            server.report(exc)
            return Changes(initiator=initiator)
        return self._owner.emit(Changes(sessions=frozenset({ref.session_id}), initiator=initiator))

    async def trash(self, ref: ConversationRef, *, initiator: object = None) -> Changes:
        """Move a conversation to its server's Trash; the notice's Undo restores it.

        The returned changes name the conversation when it went (its tab
        closes); nothing when the server refused (a notice says why).
        """
        server = self._server(ref.server)
        if server is None:
            return Changes(initiator=initiator)
        title = server.title(ref.session_id)
        try:
            await server.trash(ref.session_id)
        except BranchwiseError as exc:
            server.report(exc)
            return Changes(initiator=initiator)
        self._owner.notices.post(
            "remote_conversation_trashed",
            Level.SUCCESS,
            title=title,
            server=server.name,
            action=NoticeAction(RESTORE_ACTION, ref.session_id, server.connection.url),
        )
        return self._owner.emit(Changes(sessions=frozenset({ref.session_id}), initiator=initiator))

    async def restore(self, ref: ConversationRef, *, initiator: object = None) -> Changes:
        """A deletion's Undo: move the conversation back from its server's Trash."""
        server = self._server(ref.server)
        if server is None:
            return Changes(initiator=initiator)
        try:
            await server.restore(ref.session_id)
        except BranchwiseError as exc:
            server.report(exc)
            return Changes(initiator=initiator)
        return self._owner.emit(Changes(sessions=frozenset({ref.session_id}), initiator=initiator))

    async def models(self, ref: ConversationRef) -> list[str]:
        """The chat models the server of ``ref`` answers with (``models-v1``), for Send to
        several. A server that does not list them, or cannot be asked now, offers none
        (not a failure: a model's name can still be typed), so nothing is posted."""
        server = self._server(ref.server)
        if server is None:
            return []
        try:
            return await server.remote.models()
        except BranchwiseError:
            return []

    async def search(self, query: str, limit: int) -> list[ServerHits]:
        """Every connected server's hits that can search (asked at once), in the order added.

        A server that stops answering is marked lost (one notice; it
        reconnects); a refusal is a notice. Neither hides the other servers' hits.
        """
        servers = [server for server in self._owner.servers.sources if server.can("search")]

        async def ask(server: RemoteSource) -> ServerHits | None:
            try:
                return ServerHits(server, await server.search(query, limit))
            except RemoteUnavailable:
                await server.lost()
            except BranchwiseError as exc:
                server.report(exc)
            return None

        answers = await asyncio.gather(*(ask(server) for server in servers))
        return [answer for answer in answers if answer is not None]

    async def open_when_answering(self, ref: ConversationRef) -> Conversation:
        """Open a server's conversation once its server answers, however long that takes.

        A server that stops answering meanwhile is waited for again.

        Raises:
            RemoteRefusal: the server answered but cannot give it (e.g. it is gone).
            RemoteUnavailable: the server is no longer saved.
        """
        server = self._owner.servers.of(ref.server)
        if server is None:
            raise RemoteUnavailable(f"{ref.server} is not a saved server", server=ref.server)
        while True:
            await server.wait_connected()
            try:
                return await self._owner.open(ref)
            except RemoteUnavailable:
                await server.lost()
