"""What a widget asks the host to do that reads logs, writes files or calls the network.

Modelled on Anki's operations (``CollectionOp``/``QueryOp``): a widget asks,
the work runs off the UI thread, and the answer comes back to the widget that
asked. Work that changes what the app shows reports :class:`Changes` carrying
its *initiator* (the widget that asked), broadcast to every view so the others
refresh and the initiator can skip its own refresh. A refusal becomes one
notice in the user's words; the widget only shows the outcome.

Widgets never write a file, read a log or call the network themselves:

- :meth:`Operations.export` renders a conversation and writes the file;
- :meth:`Operations.compare` reads the compared conversations' logs and
  aligns their rows;
- :meth:`Operations.branch_answers` and :meth:`Operations.chosen_answers`
  read a branch for "Bring back to parent…";
- :meth:`Operations.list_models` and :meth:`Operations.detect_servers` ask
  model servers (the settings dialog's "Refresh" and "Detect local servers").
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from branchwise.core.conversation.compare import Comparison, compare_all
from branchwise.core.conversation.export.common import format_for_path, write_export
from branchwise.core.conversation.export.json import encode_json, export_document
from branchwise.core.conversation.export.markdown import render_markdown
from branchwise.core.conversation.merge import answers_of
from branchwise.core.errors import BranchwiseError, ModelListUnavailable, ProviderError
from branchwise.core.projection.projection import Projection
from branchwise.core.providers.detect import DetectedServer, candidate_urls, detect_servers
from branchwise.core.providers.openai import OpenAIProvider
from branchwise.core.settings import Settings, resolve_api_key
from branchwise.core.store.store import SessionStore
from branchwise.desktop.host.changes import Changes
from branchwise.desktop.host.compare_rows import CompareRow, compare_rows, split_turn
from branchwise.desktop.host.conversation import ConversationRef
from branchwise.desktop.host.notices import Level, NoticeCenter


class OperationsOwner(Protocol):
    """What the operations need of the host that owns them (which imports this module)."""

    @property
    def store(self) -> SessionStore:
        """The session store."""
        ...

    @property
    def notices(self) -> NoticeCenter:
        """The notice channel."""
        ...

    def title(self, session_id: str) -> str:
        """A conversation's best known title."""
        ...

    def emit(self, changes: Changes) -> Changes:
        """Broadcast what changed."""
        ...


#: How many conversations one Compare view shows side by side.
MIN_COMPARED, MAX_COMPARED = 2, 4


@dataclass(frozen=True, slots=True)
class Compared:
    """Conversations compared, ready to show.

    Attributes:
        refs: the conversations, one column each, in the order asked.
        comparison: core's comparison (the common point and each side's turns).
        common_title: the title of the conversation all come from ("" if none).
        shared_turns: the number of the last turn all share (0: none).
        rows: the sides' turns aligned by position from the split.
        at_turn: the turn number to show first (``None``: the first row).
    """

    refs: tuple[ConversationRef, ...]
    comparison: Comparison
    common_title: str
    shared_turns: int
    rows: tuple[CompareRow, ...]
    at_turn: int | None = None


@dataclass(frozen=True, slots=True)
class OwnAnswer:
    """A turn a branch asked itself (after its fork point), with its answer."""

    turn_id: str
    prompt: str
    answer: str


def own_answers(projection: Projection) -> list[OwnAnswer]:
    """A branch's own finished answers, oldest first (what can be brought back)."""
    found = []
    for turn in projection.turns:
        if turn.start_seq <= projection.seed_length or not turn.message_id:
            continue
        answer = projection.message(turn.message_id)
        if answer is None or answer.partial or not answer.content.strip():
            continue
        prompt = projection.message(turn.user_message_id) if turn.user_message_id else None
        found.append(OwnAnswer(turn.turn_id, prompt.content if prompt else "", answer.content))
    return found


@dataclass(frozen=True, slots=True)
class ModelList:
    """A model server's answer to "which models do you offer?".

    Attributes:
        models: the model ids, in the server's order (embedding models too).
        embedding: those of ``models`` that only make embeddings (cannot chat).
        unlisted: a reason code when the server does not list models (not a
            failure: such a server chats with a typed model name).
        failure: a reason code when the server could not be asked.
    """

    models: tuple[str, ...] = ()
    embedding: frozenset[str] = frozenset()
    unlisted: str | None = None
    failure: str | None = None


class Operations:
    """The host's operations a widget starts (see the module's docstring).

    Args:
        owner: the host.
    """

    def __init__(self, owner: OperationsOwner) -> None:
        self._owner = owner

    async def export(self, session_id: str, path: Path, *, initiator: object = None) -> Changes:
        """Write a conversation to ``path`` (Markdown, or JSON for ``.json``); replaces the file.

        The save dialog already asked before replacing a file. Success and
        refusal are notices; nothing the app shows changes, so the returned
        changes name only the initiator.
        """
        store = self._owner.store

        def render() -> None:
            if format_for_path(path) == "json":
                data = encode_json(export_document(store, session_id))
            else:
                data = render_markdown(store, session_id).encode()
            write_export(path, data, overwrite=True)

        try:
            await asyncio.to_thread(render)
        except BranchwiseError as exc:
            self._owner.notices.post(exc.code, Level.ERROR, detail=exc.message)
        else:
            self._owner.notices.post(
                "conversation_exported",
                Level.SUCCESS,
                title=self._owner.title(session_id),
                path=str(path),
            )
        return self._owner.emit(Changes(initiator=initiator))

    async def compare(
        self, refs: Sequence[ConversationRef], at_turn: int | None = None
    ) -> Compared | None:
        """Read two to four conversations of one tree and align their rows from the split.

        ``at_turn`` is the turn number (as the transcripts number it) the view
        opens at. ``None``: refused, with a notice (different trees; a
        conversation kept on a server, which has no compare route).

        Raises:
            ValueError: fewer than two or more than four different conversations.
        """
        unique = tuple(dict.fromkeys(refs))
        if not MIN_COMPARED <= len(unique) <= MAX_COMPARED:
            raise ValueError(f"compare takes {MIN_COMPARED} to {MAX_COMPARED} conversations")
        remote = next((ref for ref in unique if ref.remote), None)
        if remote is not None:
            self._owner.notices.post("server_cannot", Level.WARNING, server=str(remote.server))
            return None
        store = self._owner.store

        def read() -> Compared:
            comparison = compare_all(store, [ref.session_id for ref in unique])
            title, turn = split_turn(store, comparison)
            rows = tuple(compare_rows(comparison))
            return Compared(unique, comparison, title, turn, rows, at_turn)

        try:
            return await asyncio.to_thread(read)
        except BranchwiseError as exc:
            self._owner.notices.post(exc.code, Level.ERROR, **exc.details)
            return None

    async def branch_answers(self, child_id: str) -> list[OwnAnswer]:
        """A branch's own answers, read from its committed history.

        Raises:
            BranchwiseError: the branch cannot be read (the dialog says why).
        """
        store = self._owner.store
        return await asyncio.to_thread(lambda: own_answers(store.read(child_id).projection))

    async def chosen_answers(self, child_id: str, turn_ids: Sequence[str]) -> str:
        """The chosen answers of a branch as one text, the way the merge stores them.

        Raises:
            BranchwiseError: the branch or a turn cannot be read (the dialog says why).
        """
        store = self._owner.store
        return await asyncio.to_thread(answers_of, store, child_id, list(turn_ids))

    async def list_models(self, draft: Settings) -> ModelList:
        """The models of the server ``draft`` names (its address and key as typed, unsaved)."""
        try:
            provider = OpenAIProvider(draft.base_url, "", api_key=resolve_api_key(draft))
            entries = await provider.model_entries()
        except ModelListUnavailable as exc:
            return ModelList(unlisted=exc.code)
        except ProviderError as exc:
            return ModelList(failure=exc.code)
        return ModelList(
            models=tuple(entry.id for entry in entries),
            embedding=frozenset(entry.id for entry in entries if entry.embedding),
        )

    async def detect_servers(
        self, draft: Settings, candidates: Sequence[str] | None = None
    ) -> list[DetectedServer]:
        """The model servers on this machine that answer, ``draft``'s own address first."""
        urls = list(candidates) if candidates is not None else candidate_urls(draft)
        return await detect_servers(urls)

    async def other_servers(self, settings: Settings) -> list[DetectedServer]:
        """The model servers besides the app's that answer with chat models: the saved ones,
        then this machine's usual ports (probed without any key: one that wants a key is
        left out, as are embedding models)."""
        own = settings.base_url if settings.configured else None
        urls = [url for url in candidate_urls(settings, settings.saved_servers) if url != own]
        return [server for server in await detect_servers(urls) if server.models]
