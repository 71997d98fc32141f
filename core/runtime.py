"""The turn runner: one conversation turn, committed as it happens.

A turn is written as a few commits (docs/storage.md, "Events")::

    [turn/start, message/user, step/start]          the question is durable
    [message/delta] …                                at most every flush_interval
    [message/assistant, step/end, usage, turn/end]   the closing commit

The ``usage`` event carries the server's token counts, or, when it sent none
(or for the demo responder, which counts words), an estimate marked as such
(:mod:`~branchwise.core.projection.figures`), with the time to the first text
and the generation time measured here from the stream, so every answer's
figures survive a restart.

A partial commit stores only the text received since the previous one (a
``message/delta``: the first names the message, the next ones continue it;
replay concatenates), so a long answer costs about twice its length on disk,
not its length squared; the closing commit holds the whole answer. Only
format-2 logs get deltas: every writer is format 2 (a writer open migrates a
format-1 session first), and the whole-text partial ``message/assistant``
events older logs hold are read as before.

Streamed text reaches listeners live; what was received is committed at least
every ``flush_interval`` seconds, so a crash loses at most about that much of
the answer. Cancelling keeps the partial text (``cancelled``); a provider
failure ends the turn with ``error`` and its text; a crash leaves the turn open
until the next writer closes it as ``interrupted``.

A commit that fails (a full disk: :class:`~branchwise.core.errors.DiskFull`)
after the question was saved ends the turn as ``error`` with that failure,
keeping what was saved; the closing commit drops the answer text it cannot
fit (the last partial answer committed stays) before giving up. If even that
cannot be written, :meth:`TurnRunner.run` raises the failure, and the next
writer to open the session closes the turn as ``interrupted``. Either way the
error's details say what of the turn was kept: ``questionSaved``,
``answerSaved`` (characters of the answer committed) and ``turnClosed``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from branchwise.core.conversation.ask_again import branch_turn
from branchwise.core.conversation.attachments import (
    DEFAULT_LIMITS,
    AttachmentLimits,
    model_context,
)
from branchwise.core.conversation.merge import SUMMARY_REQUEST, demo_summary, own_turns
from branchwise.core.conversation.names import label_of, title_from_prompt, with_first_prompt
from branchwise.core.errors import BranchwiseError, InvalidMerge
from branchwise.core.ids import new_id
from branchwise.core.projection import events as ev
from branchwise.core.projection.attachments import AttachmentRef
from branchwise.core.projection.events import EndReason
from branchwise.core.projection.figures import estimate_prompt_tokens, estimate_tokens
from branchwise.core.projection.projection import Projection
from branchwise.core.providers.base import Provider, TextChunk, Usage
from branchwise.core.providers.demo import DemoProvider
from branchwise.core.store.attachments import BlobStore
from branchwise.core.store.store import SessionWriter

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TurnResult:
    """How a turn ended.

    Attributes:
        session_id: the session.
        turn_id: the turn.
        message_id: the assistant message (``None`` if no text arrived).
        boundary_sequence: last seq of the closing commit.
        end_reason: ``completed``, ``cancelled`` or ``error``.
        error: the typed failure for ``error`` turns.
        text: the final (or partial) answer.
    """

    session_id: str
    turn_id: str
    message_id: str | None
    boundary_sequence: int
    end_reason: str
    error: BranchwiseError | None
    text: str

    def to_json(self) -> dict[str, Any]:
        """The CLI's ``say`` result shape."""
        return {
            "sessionId": self.session_id,
            "turnId": self.turn_id,
            "messageId": self.message_id,
            "boundarySequence": self.boundary_sequence,
            "endReason": self.end_reason,
            **({"error": self.error.to_json()["error"]} if self.error else {}),
        }


class TurnListener:
    """Receives a running turn's progress; override what you need.

    All calls happen on the runner's event loop, in order.
    """

    def turn_started(self, turn_id: str, user_message_id: str, message_id: str) -> None:
        """The question is committed; the answer will have ``message_id``."""

    def text_received(self, turn_id: str, message_id: str, chunk: str) -> None:
        """A chunk of the answer arrived (listeners accumulate if they need it all)."""

    def committed(self, events: list[dict[str, Any]]) -> None:
        """A commit of this turn became durable."""

    def turn_ended(self, result: TurnResult) -> None:
        """The closing commit is durable."""


class TurnRunner:
    """Runs one turn against one provider and commits it to one writer.

    Args:
        writer: the session's writer (the runner never opens one itself).
        provider: the model to ask.
        listener: progress receiver (the UI, the CLI's stdout printer…).
        flush_interval: longest time received text stays uncommitted.
        system: the system prompt sent before the conversation ("" for none).
        clock: monotonic clock (a seam for tests).
        limits: which images of earlier prompts are sent again.
    """

    def __init__(
        self,
        writer: SessionWriter,
        provider: Provider,
        listener: TurnListener | None = None,
        *,
        flush_interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        system: str = "",
        limits: AttachmentLimits = DEFAULT_LIMITS,
    ) -> None:
        self.writer = writer
        self.limits = limits
        self.system = system
        self.provider = provider
        self.listener = listener or TurnListener()
        self.flush_interval = flush_interval
        self.clock = clock
        self.turn_id = new_id("turn")
        self.message_id = new_id("msg")
        self._parts: list[str] = []
        self._committed_len = 0
        self._text_len = 0
        self._last_flush = 0.0
        self._flush_handle: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[Usage | None] | None = None
        self._cancel_requested = False
        self._started = False
        self._failure: BranchwiseError | None = None  # a commit of the turn that failed
        self._context: list[dict[str, Any]] = []
        self._requested_at: float | None = None
        self._first_text_at: float | None = None
        self._last_text_at: float | None = None

    @property
    def running(self) -> bool:
        """The turn has started and not ended."""
        return self._started and self._task is not None and not self._task.done()

    def cancel(self) -> None:
        """Stop the turn; it ends as ``cancelled`` keeping the partial text."""
        self._cancel_requested = True
        if self._task is not None:
            self._task.cancel()

    async def run(self, text: str, attachments: tuple[AttachmentRef, ...] = ()) -> TurnResult:
        """Run the whole turn for the user's ``text`` and return how it ended.

        ``attachments`` are files already stored
        (:func:`~branchwise.core.conversation.attachments.attach_files`): the
        question's commit refers to them only once their bytes are durable.

        Raises:
            BranchwiseError: the question could not be committed (nothing of
                the turn was saved), or a commit failed and the turn could not
                be closed either (see the module docstring).
        """
        if self.writer.projection.open_turn is not None:
            raise BranchwiseError("a turn is already running in this session")
        user_id = new_id("msg")
        step_id = new_id("step")
        question = [ev.turn_start(self.turn_id), ev.user_message(user_id, text, attachments)]
        try:
            self._commit([*question, ev.step_start(step_id)])
        except BranchwiseError as exc:
            raise self._kept(exc, closed=False, question=False) from None
        return await self._answer(step_id, user_id, text)

    async def answer(self) -> TurnResult:
        """Answer the session's open turn, whose question is already committed.

        An edit or a regenerate publishes its branch with the question in it
        (:mod:`~branchwise.core.fork.engine`); the runner opens the model call
        and answers it as :meth:`run` answers its own question.

        Raises:
            BranchwiseError: no open turn with a question, or the model call
                could not be opened (the question stays; the next writer closes
                the turn as ``interrupted``), or as :meth:`run`.
        """
        turn = self.writer.projection.open_turn
        question = self.writer.projection.message(turn.user_message_id or "") if turn else None
        if turn is None or question is None:
            raise BranchwiseError("this session has no open question to answer")
        self.turn_id = turn.turn_id
        step_id = new_id("step")
        try:
            self._commit([ev.step_start(step_id)])
        except BranchwiseError as exc:
            raise self._kept(exc, closed=False) from None
        return await self._answer(step_id, question.message_id, question.content)

    def _name_plain_branch(self, prompt: str) -> None:
        """A plain branch's first own prompt completes its label ("From turn N: <prompt>").

        Best effort: a label that cannot be saved (a full disk) stays "From turn N".
        """
        manifest = self.writer.manifest
        if manifest.kind != "fork":
            return
        first = branch_turn(self.writer.projection, manifest.seed_length)
        label = with_first_prompt(label_of(manifest), prompt)
        if label is None or first is None or first.turn_id != self.turn_id:
            return
        with contextlib.suppress(BranchwiseError):
            self.writer.set_label(label)

    async def _answer(self, step_id: str, user_id: str, text: str) -> TurnResult:
        """Ask the model for the committed question ``text`` and close the turn."""
        self._started = True
        title_failure = None
        if not self.writer.projection.title:
            try:
                self.writer.set_title(title_from_prompt(text))
            except BranchwiseError as exc:  # the question is saved: end the turn as an error
                title_failure = exc
        self._name_plain_branch(text)
        self.listener.turn_started(self.turn_id, user_id, self.message_id)
        if title_failure is not None:
            self._failure = title_failure
            return self._finish(step_id, EndReason.ERROR, title_failure, None)
        self._last_flush = self.clock()
        try:
            context = await self._model_context()
        except BranchwiseError as exc:  # an attachment's bytes are gone: say so, keep the question
            return self._finish(step_id, EndReason.ERROR, exc, None)
        if self._cancel_requested:  # stopped while the files were read
            return self._finish(step_id, EndReason.CANCELLED, None, None)
        if self.system.strip():
            context.insert(0, {"role": "system", "content": self.system})
        self._task = asyncio.ensure_future(self._consume(context))
        reason, error, usage = EndReason.COMPLETED, None, None
        try:
            usage = await self._task
        except asyncio.CancelledError:
            reason = EndReason.CANCELLED
            if self._failure is not None:  # a partial commit failed and stopped the provider
                reason, error = EndReason.ERROR, self._failure
            elif not self._cancel_requested:
                self._finish(step_id, reason, None, None)
                raise
        except BranchwiseError as exc:
            reason, error = EndReason.ERROR, exc
        except Exception as exc:  # a provider bug must still close the turn visibly
            log.exception("provider failed")
            reason, error = EndReason.ERROR, BranchwiseError(f"unexpected failure: {exc!r}")
        return self._finish(step_id, reason, error, usage)

    async def _model_context(self) -> list[dict[str, Any]]:
        """What the model is sent: plain messages, or content parts where files are attached.

        Files are read, checked and encoded in a worker thread (the desktop
        runs turns on its UI loop); nothing commits meanwhile, as this runner
        is the session's only writer and its turn is open.
        """
        projection = self.writer.projection
        if not any(m.attachments for m in projection.messages):
            return list(projection.model_messages())
        blobs = BlobStore(self.writer.store.root)
        return await asyncio.to_thread(model_context, projection, blobs, self.limits)

    async def _consume(self, context: list[dict[str, Any]]) -> Usage | None:
        usage = None
        on_text = self.listener.text_received
        clock = self.clock
        # The demo counts words, not tokens: its figures are the documented estimate.
        counts_tokens = not isinstance(self.provider, DemoProvider)
        self._context = context
        self._requested_at = clock()
        stream = self.provider.stream(context)
        # Once per piece of every answer: the names are looked up once, here.
        keep, turn_id, message_id = self._parts.append, self.turn_id, self.message_id
        try:
            async for item in stream:
                if isinstance(item, TextChunk):
                    text = item.text
                    if not text:
                        continue
                    self._last_text_at = clock()
                    if self._first_text_at is None:
                        self._first_text_at = self._last_text_at
                    keep(text)
                    self._text_len += len(text)
                    on_text(turn_id, message_id, text)
                    if self._flush_handle is None:
                        self._schedule_flush()
                elif isinstance(item, Usage) and counts_tokens:
                    usage = item
        finally:
            # A listener that raised leaves the provider's generator suspended:
            # close it on this task, not in the garbage collector's.
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        return usage

    def _schedule_flush(self) -> None:
        if self._flush_handle is not None or self._failure is not None:
            return
        due = self._last_flush + self.flush_interval - self.clock()
        if due <= 0:
            self._flush_partial()
        else:
            self._flush_handle = asyncio.get_running_loop().call_later(due, self._flush_partial)

    def _flush_partial(self) -> None:
        self._flush_handle = None
        self._last_flush = self.clock()
        if self._text_len == self._committed_len:
            return
        text = self.text
        opening = None if self._committed_len else (self.message_id, self.provider.model)
        try:
            self._commit([ev.assistant_delta(text[self._committed_len :], opening)])
        except BranchwiseError as exc:
            # Stop asking the model: the turn ends as an error keeping what was saved.
            self._failure = exc
            if self._task is not None:
                self._task.cancel()
            return
        self._committed_len = len(text)

    @property
    def text(self) -> str:
        """The answer received so far."""
        if len(self._parts) > 1:
            self._parts[:] = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""

    def _finish(
        self,
        step_id: str,
        reason: EndReason,
        error: BranchwiseError | None,
        usage: Usage | None,
    ) -> TurnResult:
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        text = self.text
        tail: list[dict[str, Any]] = [ev.step_end(step_id)]
        usage_event = self._usage_event(usage, text)
        if usage_event is not None:
            tail.append(usage_event)
        answer = [ev.assistant_message(self.message_id, text, self.provider.model)] if text else []
        try:
            committed = self._commit([*answer, *tail, self._end(reason, error)])
        except BranchwiseError as exc:
            if not answer:
                raise self._kept(self._failure or exc, closed=False) from None
            # The whole answer does not fit (a full disk, or over the commit size limit):
            # end as an error in a short closing commit, the answer as last committed.
            # The first failed commit of the turn is the one to report.
            error = self._failure = self._failure or exc
            reason, text = EndReason.ERROR, text[: self._committed_len]
            try:
                committed = self._commit([*tail, self._end(reason, error)])
            except BranchwiseError:
                raise self._kept(error, closed=False) from None
        else:
            self._committed_len = len(text)
        if error is not None and error is self._failure:
            self._kept(error, closed=True)
        result = TurnResult(
            session_id=self.writer.session_id,
            turn_id=self.turn_id,
            message_id=self.message_id if text else None,
            boundary_sequence=int(committed[-1]["seq"]),
            end_reason=str(reason),
            error=error,
            text=text,
        )
        self.listener.turn_ended(result)
        return result

    def _usage_event(self, usage: Usage | None, text: str) -> dict[str, Any] | None:
        """The call's ``usage``: the server's counts, else an estimate if any text arrived."""
        if usage is None and not text:
            return None
        first, last, asked = self._first_text_at, self._last_text_at, self._requested_at
        timing: dict[str, Any] = {}
        if first is not None and last is not None and asked is not None:
            timing["first_token_ms"] = max(0, round((first - asked) * 1000))
            timing["generation_ms"] = max(0, round((last - first) * 1000))
        if usage is not None:
            return ev.usage(usage.input_tokens, usage.output_tokens, self.provider.model, **timing)
        return ev.usage(
            estimate_prompt_tokens(self._context),
            estimate_tokens(text),
            self.provider.model,
            estimated=True,
            **timing,
        )

    def _end(self, reason: EndReason, error: BranchwiseError | None) -> dict[str, Any]:
        return ev.turn_end(self.turn_id, reason, error.message if error else None)

    def _kept(
        self, error: BranchwiseError, *, closed: bool, question: bool = True
    ) -> BranchwiseError:
        """Record in ``error``'s details what of this turn is saved; return it."""
        error.details.update(
            questionSaved=question,
            answerSaved=self._committed_len if question else 0,
            turnClosed=closed,
        )
        return error

    def _commit(self, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        committed = self.writer.commit(events)
        self.listener.committed(committed)
        return committed


async def write_summary(projection: Projection, provider: Provider) -> str:
    """A summary of the branch since its fork point, written by ``provider``, to merge back.

    Asking a model is the runtime's work, so it sits here rather than with the
    merge (:mod:`~branchwise.core.merge` keeps what to ask and the demo's own
    summary). The demo responder writes a deterministic one from the turns
    themselves, so offline use and tests know what to expect.

    Raises:
        InvalidMerge: the branch has no turns of its own yet.
        ProviderError: the model failed.
    """
    pairs = own_turns(projection)
    if not pairs:
        raise InvalidMerge("the branch has no turns of its own to summarize", field="content")
    if isinstance(provider, DemoProvider):
        return demo_summary(pairs)
    messages: list[dict[str, str]] = []
    for prompt, answer in pairs:
        messages.append({"role": "user", "content": prompt})
        if answer:
            messages.append({"role": "assistant", "content": answer})
    messages.append({"role": "user", "content": SUMMARY_REQUEST})
    parts = [item.text async for item in provider.stream(messages) if isinstance(item, TextChunk)]
    return "".join(parts).strip()
