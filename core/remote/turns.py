"""Turns that ``branchwise serve`` runs for its clients, and their recovery after a crash.

A remote desktop sends a prompt; the turn runs here, with the server's own
provider settings, and its answer streams back. The turn keeps running when
the client that started it goes away (another client follows it through the
events route, or stops it).

The server notes every running turn in ``<root>/serve-turns.json`` (atomic
replace) before the question is committed. A server killed mid-turn leaves
the turn open in the log; the next server start opens each noted session as
its writer, which closes the open turn as ``interrupted`` (docs/storage.md, "Events"), so a
client sees the turn end instead of running for ever.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from branchwise.core.conversation.ask_again import unasked_turn
from branchwise.core.conversation.settings import ConversationSettings
from branchwise.core.errors import BranchwiseError, TurnRunning, UnknownTurn
from branchwise.core.fs.atomic import atomic_write_bytes, disk_full_as_typed
from branchwise.core.ids import validate_session_id
from branchwise.core.projection.attachments import AttachmentRef
from branchwise.core.providers.base import Provider
from branchwise.core.providers.demo import DemoProvider
from branchwise.core.runtime import TurnListener, TurnResult, TurnRunner
from branchwise.core.store.store import SessionStore

RUNNING_FILE = "serve-turns.json"

log = logging.getLogger(__name__)


class TurnStream(TurnListener):
    """A running turn's progress as wire records, queued for the client that started it.

    Records: ``{"type": "started", "turnId", "userMessageId", "messageId"}``,
    ``{"type": "text", "chunk"}``, then ``{"type": "ended", "result"}`` (the
    ``session say`` result) or ``{"type": "error", "error"}`` when the turn
    could not even start. ``None`` closes the stream.
    """

    def __init__(self) -> None:
        self.queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()

    def turn_started(self, turn_id: str, user_message_id: str, message_id: str) -> None:
        """The question is committed."""
        self.queue.put_nowait(
            {
                "type": "started",
                "turnId": turn_id,
                "userMessageId": user_message_id,
                "messageId": message_id,
            }
        )

    def text_received(self, turn_id: str, message_id: str, chunk: str) -> None:
        """A chunk of the answer."""
        self.queue.put_nowait({"type": "text", "chunk": chunk})

    def turn_ended(self, result: TurnResult) -> None:
        """The closing commit is durable."""
        self.queue.put_nowait({"type": "ended", "result": result.to_json()})


@dataclass
class _Running:
    runner: TurnRunner
    task: asyncio.Task[None] | None  # None while the turn is being noted down


TurnSetup = Callable[[ConversationSettings], tuple[Provider, str]]
"""The provider and system prompt for a new turn in a conversation with these settings."""


def demo_setup(conversation: ConversationSettings) -> tuple[Provider, str]:
    """The offline demo responder and no system prompt (a server with no settings)."""
    return DemoProvider(), conversation.system or ""


class ServedTurns:
    """The turns this server runs, one at most per session.

    Args:
        store: the served store.
        setup: the provider and system prompt of a new turn, from the
            server's settings and the conversation's own (read when the turn
            starts).
    """

    def __init__(self, store: SessionStore, setup: TurnSetup = demo_setup) -> None:
        self.store = store
        self._setup = setup
        self._running: dict[str, _Running] = {}
        self._noting = threading.Lock()

    def is_running(self, session_id: str) -> bool:
        """Whether this server runs a turn in ``session_id`` now."""
        return session_id in self._running

    def setup(self, conversation: ConversationSettings) -> tuple[Provider, str]:
        """The provider and system prompt a turn in a conversation with these settings gets."""
        return self._setup(conversation)

    async def start(
        self,
        session_id: str,
        text: str | None,
        attachments: tuple[AttachmentRef, ...] = (),
        *,
        demo_as: tuple[str, int] | None = None,
    ) -> TurnStream:
        """Start a turn; its progress arrives on the returned stream.

        ``attachments`` are references to files this server stored (checked
        by the route). ``text`` ``None`` answers the question an edit's or a regenerate's
        branch was published with (:func:`unasked_turn`), as a desktop that
        opens such a branch locally does. ``demo_as`` (a fan-out's model and
        sample) makes the demo responder, when it answers, answer as that
        model and sample.

        Raises:
            TurnRunning: this server already runs a turn there.
            LeaseHeld: another process (a desktop) writes the session.
            SessionNotFound: no such session.
            UnknownTurn: ``text`` is ``None`` and no question waits for its answer.
            DiskFull: no room to note the turn as running (nothing was started).
        """
        session_id = validate_session_id(session_id)
        if session_id in self._running:
            raise TurnRunning(f"a turn is already running in {session_id}", sessionId=session_id)
        unasked = None
        if text is None:
            snapshot = await asyncio.to_thread(self.store.read, session_id, every_frame=False)
            unasked = unasked_turn(snapshot.manifest, snapshot.projection)
            if unasked is None:
                raise UnknownTurn(
                    f"{session_id} has no branch question waiting for its answer",
                    sessionId=session_id,
                )
        writer = await asyncio.to_thread(
            lambda: self.store.open_writer(session_id, continue_turn=unasked)
        )
        try:
            if session_id in self._running:  # another request won the race for the lease
                raise TurnRunning(
                    f"a turn is already running in {session_id}", sessionId=session_id
                )
            provider, system = self._setup(writer.projection.settings)
            if demo_as is not None and isinstance(provider, DemoProvider):
                provider = provider.as_target(*demo_as)
        except BaseException:
            writer.close()
            raise
        stream = TurnStream()
        runner = TurnRunner(writer, provider, stream, system=system)
        try:
            self._running[session_id] = _Running(runner, None)
            await asyncio.to_thread(self._note_running)
        except BaseException:
            self._running.pop(session_id, None)
            writer.close()
            raise

        async def run() -> None:
            try:
                await (runner.run(text, attachments) if text is not None else runner.answer())
            except BranchwiseError as exc:
                stream.queue.put_nowait({"type": "error", "error": exc.to_json()["error"]})
            except Exception as exc:
                log.exception("the turn in %s failed", session_id)
                failure = BranchwiseError(f"the turn failed: {exc!r}")
                stream.queue.put_nowait({"type": "error", "error": failure.to_json()["error"]})
            finally:
                writer.close()
                self._running.pop(session_id, None)
                with contextlib.suppress(OSError, BranchwiseError):
                    await asyncio.to_thread(self._note_running)
                stream.queue.put_nowait(None)

        self._running[session_id].task = asyncio.create_task(run())
        return stream

    def stop(self, session_id: str) -> bool:
        """Stop the turn this server runs in ``session_id``; whether there was one."""
        running = self._running.get(validate_session_id(session_id))
        if running is None:
            return False
        running.runner.cancel()
        return True

    async def shutdown(self) -> None:
        """Stop every running turn (each ends as ``cancelled``) and wait for them."""
        for running in list(self._running.values()):
            running.runner.cancel()
        tasks = [r.task for r in self._running.values() if r.task is not None]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def recover(self) -> list[str]:
        """Close the turns a killed server left open (``interrupted``); the sessions named.

        A session another process writes now, or one gone since, is skipped:
        its writer closes the turn when it next opens it.
        """
        path = self.store.root / RUNNING_FILE
        try:
            noted = orjson.loads(path.read_bytes())
        except FileNotFoundError:
            return []
        except (OSError, orjson.JSONDecodeError):
            log.warning("%s is unreadable; no turns to recover", path)
            noted = []
        recovered = []
        for session_id in noted if isinstance(noted, list) else []:
            try:
                self.store.open_writer(validate_session_id(session_id)).close()
            except BranchwiseError as exc:
                log.info("turn recovery skipped %s: %s", session_id, exc.code)
                continue
            recovered.append(session_id)
        self._note_running()
        return recovered

    def _note_running(self) -> None:
        """Note the running turns for :meth:`recover`.

        Raises:
            DiskFull: no room for the note (the turn is then not started).
        """
        full = f"the disk is full: {RUNNING_FILE} could not be written; the turn was not started"
        # Turns started together (a fan-out's) note themselves from several threads at once.
        with self._noting, disk_full_as_typed(full, path=RUNNING_FILE):
            data = orjson.dumps(sorted(self._running))
            atomic_write_bytes(self.store.root / RUNNING_FILE, data)
