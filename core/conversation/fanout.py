"""Ask one question of several models (or one model several times), each answer its own branch.

A fan-out makes one branch per *target* (a model, or a sample of one) at
the conversation's current end: the end of its last finished turn. Each
branch is published with the question as its first own turn, already
started (an origin of kind ``fanout``, as an edit's branch carries its
prompt), with the target's model as its own setting and labelled by it
("llama3.2", "qwen2.5 · sample 2"). Whoever answers a branch opens it as
writer and answers that turn (:mod:`~branchwise.core.fanout_run` for the CLI,
``serve``'s fan-out route); a branch nobody answered yet keeps its question
waiting, as an edit's does.

**One journaled operation.** Before anything is built, the fan-out is
written to ``<root>/fanout-index/<sha256 of the operation id>.json``: the
conversation, the turn and boundary it branches at, the question, the
targets and the branch ids it will publish. The branches are then forked
together (:func:`~branchwise.core.fork.engine.fork_together`,
all-or-nothing) under the operation ids ``OP#1`` … ``OP#N``: one
file-system sync makes the record, the fork reservations and every branch
durable before any is renamed into place. So:

- a retry with the same operation id reads the record and returns the same
  branches (``created: false`` for each already published), never new ones;
- the same operation id with another conversation, question or targets is
  ``operation_conflict``;
- a crash at any point leaves either no record (nothing was published: a
  retry starts afresh) or the record, which a retry finishes to exactly the
  asked set, each branch once;
- a refusal of any branch before publishing (a full disk, the conversation
  replaced) refuses the whole fan-out with that error and leaves nothing:
  no branch, no reservation, no record.

Fuse (:func:`fuse_sources`, :func:`fuse_messages`) takes the chosen
branches' answers back to the conversation the fan-out started from as one
merge whose ``sources`` say which branch and which answer each part came
from (:func:`~branchwise.core.conversation.merge.merge_fused`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

from branchwise.core.conversation.names import branch_title, model_label, render_label
from branchwise.core.conversation.settings import (
    DEMO_SERVER,
    ConversationSettings,
    validate_conversation_settings,
)
from branchwise.core.errors import (
    BranchwiseError,
    EmptyPrompt,
    InvalidConversationSettings,
    InvalidFanout,
    NotAncestor,
    NotRelated,
    OperationConflict,
    SessionNotFound,
    TurnOpen,
    TurnRunning,
    UnknownTurn,
)
from branchwise.core.fork.engine import MAX_OPERATION_ID, ForkCall, ForkResult, fork_together
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.fork.targets import TargetsCache, fork_targets
from branchwise.core.fs.atomic import disk_full_as_typed, fsync_dir, refusing_read_only, write_new
from branchwise.core.i18n.language import N_, _, ngettext
from branchwise.core.i18n.reasons import fill
from branchwise.core.ids import new_session_id, validate_session_id
from branchwise.core.lineage import lineage
from branchwise.core.projection.attachments import AttachmentRef
from branchwise.core.store.manifest import BranchLabel, BranchOrigin, Manifest
from branchwise.core.store.store import SessionStore

MAX_TARGETS = 8
"""The most branches one fan-out makes."""

INDEX_DIR = "fanout-index"

DEFAULT_FUSE_INSTRUCTION = N_(
    "Combine the best of these answers into one answer: keep what is correct and useful "
    "in each, resolve where they disagree, and leave out repetition."
)


@dataclass(frozen=True, slots=True)
class FanoutTarget:
    """One branch asked for: a model, which sample of it (0: the model's only one), and where.

    Attributes:
        model: the model name the branch asks.
        sample: 1..N when the model is asked N > 1 times, else 0.
        model_server: who answers the branch when not the conversation's own
            (``demo``, or another OpenAI-compatible server's API root); it
            becomes the branch's own setting, so the branch goes on there.
    """

    model: str
    sample: int = 0
    model_server: str | None = None

    def to_json(self) -> dict[str, Any]:
        """``{"model", "sample"[, "modelServer"]}``."""
        data: dict[str, Any] = {"model": self.model, "sample": self.sample}
        if self.model_server is not None:
            data["modelServer"] = self.model_server
        return data

    @property
    def label(self) -> str:
        """The branch's label in the active language ("qwen2.5 · sample 2")."""
        return render_label(self.label_parts, None) or self.model

    @property
    def label_parts(self) -> BranchLabel:
        """The label the branch is given: its model, and the server when another is asked
        ("llama3.2 · 127.0.0.1:11434"), so the same model on two servers reads apart."""
        text = self.model
        if self.model_server is not None and self.model_server != DEMO_SERVER:
            text = f"{self.model} · {urlsplit(self.model_server).netloc}"
        return model_label(text, self.sample or None)


def fanout_targets(
    models: Sequence[str], samples: int | None, default_model: str
) -> tuple[FanoutTarget, ...]:
    """The targets of ``--model M…`` and ``--samples N``: each model (else the default) N times.

    A model named twice counts as two samples of it. Samples are numbered
    from 1 per model when it is asked more than once.

    Raises:
        InvalidFanout: no target, more than :data:`MAX_TARGETS`, an empty
            model name, or ``samples`` below 1.
    """
    if samples is not None and samples < 1:
        raise InvalidFanout("--samples must be at least 1", field="samples", count=samples)
    names = list(models) or ([default_model] if samples is not None else [])
    return numbered_targets([(name, None) for name in names for _ in range(samples or 1)])


def numbered_targets(asked: Sequence[tuple[str, str | None]]) -> tuple[FanoutTarget, ...]:
    """Targets of ``(model, server)`` pairs, samples numbered per model and server.

    Raises:
        InvalidFanout: no target, more than :data:`MAX_TARGETS`, an empty
            model name or a server that is neither ``demo`` nor an http(s) address.
    """
    if any(not model.strip() for model, _server in asked):
        raise InvalidFanout("a model name is empty: name the model to ask", field="model")
    if not 1 <= len(asked) <= MAX_TARGETS:
        raise InvalidFanout(
            f"a fan-out asks 1 to {MAX_TARGETS} models or samples, not {len(asked)}",
            field="targets",
            count=len(asked),
        )
    pairs = [(model.strip(), _server_of(server)) for model, server in asked]
    counts = Counter(pairs)
    seen: Counter[tuple[str, str | None]] = Counter()
    targets = []
    for pair in pairs:
        seen[pair] += 1
        targets.append(FanoutTarget(pair[0], seen[pair] if counts[pair] > 1 else 0, pair[1]))
    return tuple(targets)


def _server_of(server: object) -> str | None:
    try:
        return validate_conversation_settings(model_server=server).model_server
    except InvalidConversationSettings as exc:
        raise InvalidFanout(exc.message, field="server") from None


def targets_from_json(data: object) -> tuple[FanoutTarget, ...]:
    """Targets from their JSON list (``serve``'s body, the journal record).

    Raises:
        InvalidFanout: not a list of ``{"model", "sample"}`` of 1 to 8 items.
    """
    if not isinstance(data, list) or not 1 <= len(data) <= MAX_TARGETS:
        raise InvalidFanout(f"targets must be a list of 1 to {MAX_TARGETS}", field="targets")
    targets = []
    for item in data:
        model = item.get("model") if isinstance(item, dict) else None
        sample = item.get("sample", 0) if isinstance(item, dict) else None
        if not isinstance(model, str) or not model.strip():
            raise InvalidFanout("each target names a model", field="targets")
        if not isinstance(sample, int) or isinstance(sample, bool) or not 0 <= sample <= 64:
            raise InvalidFanout("a target's sample is a small number", field="targets")
        server = _server_of(item.get("modelServer")) if isinstance(item, dict) else None
        targets.append(FanoutTarget(model, sample, server))
    return tuple(targets)


@dataclass(frozen=True, slots=True)
class FanoutBranch:
    """One branch of a fan-out.

    Attributes:
        session_id: the branch.
        target: the model (and sample) it asks.
        created: false when an earlier attempt of the operation published it.
    """

    session_id: str
    target: FanoutTarget
    created: bool


@dataclass(frozen=True, slots=True)
class Fanout:
    """A fan-out's branches, as its journal record names them.

    Attributes:
        operation_id: the fan-out's idempotency key.
        session_id: the conversation it branched.
        prompt: the question every branch asks.
        branches: one per target, in the order asked.
    """

    operation_id: str
    session_id: str
    prompt: str
    branches: tuple[FanoutBranch, ...]


@dataclass(frozen=True, slots=True)
class _Record:
    """The journal record of a fan-out: what was asked, where, and the branch ids it uses."""

    operation_id: str
    session_id: str
    prompt: str
    targets: tuple[FanoutTarget, ...]
    turn_id: str | None
    boundary_sequence: int
    generation: int
    branch_ids: tuple[str, ...]
    titles: tuple[str | None, ...] = ()
    fork_turn_index: int | None = None
    attachments: tuple[AttachmentRef, ...] = ()

    def to_json(self) -> dict[str, Any]:
        data = {
            "operationId": self.operation_id,
            "sessionId": self.session_id,
            "prompt": self.prompt,
            "targets": [target.to_json() for target in self.targets],
            "turnId": self.turn_id,
            "boundarySequence": self.boundary_sequence,
            "generation": self.generation,
            "branchIds": list(self.branch_ids),
            "titles": list(self.titles),
            "forkTurnIndex": self.fork_turn_index,
        }
        if self.attachments:  # absent without files: a record reads as before
            data["attachments"] = [ref.to_json() for ref in self.attachments]
        return data

    @classmethod
    def from_json(cls, data: Any) -> _Record:
        """Raises ``KeyError``/``TypeError``/``InvalidFanout`` for a malformed record."""
        record = cls(
            operation_id=str(data["operationId"]),
            session_id=validate_session_id(data["sessionId"]),
            prompt=str(data["prompt"]),
            targets=targets_from_json(data["targets"]),
            turn_id=data["turnId"],
            boundary_sequence=int(data["boundarySequence"]),
            generation=int(data["generation"]),
            branch_ids=tuple(validate_session_id(b) for b in data["branchIds"]),
            titles=tuple(t if isinstance(t, str) else None for t in data.get("titles") or ()),
            fork_turn_index=data.get("forkTurnIndex"),
            attachments=tuple(AttachmentRef.from_json(a) for a in data.get("attachments") or ()),
        )
        if len(record.branch_ids) != len(record.targets):
            raise TypeError("one branch id per target")
        return record

    def asks_the_same(
        self,
        session_id: str,
        prompt: str,
        targets: Sequence[FanoutTarget],
        attachments: Sequence[AttachmentRef],
    ) -> bool:
        asked = (session_id, prompt, tuple(targets), tuple(attachments))
        return (self.session_id, self.prompt, self.targets, self.attachments) == asked


class FanoutIndex:
    """The fan-out journal: one record per operation id, created exclusively (``link``)."""

    def __init__(self, root: Path) -> None:
        self.directory = Path(root) / INDEX_DIR

    def _path(self, operation_id: str) -> Path:
        return self.directory / f"{hashlib.sha256(operation_id.encode()).hexdigest()}.json"

    def lookup(self, operation_id: str) -> _Record | None:
        """The record of ``operation_id``; ``None`` for none (or a damaged one: a lost hint)."""
        try:
            record = _Record.from_json(orjson.loads(self._path(operation_id).read_bytes()))
        except FileNotFoundError:
            return None
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, BranchwiseError):
            return None
        return record if record.operation_id == operation_id else None

    def write(self, record: _Record) -> _Record:
        """Write ``record`` unless one exists; the record that stands (the first one's).

        Not fsynced: the group's file-system sync makes it durable before any
        branch is published (:func:`~branchwise.core.fork.engine.fork_together`).
        """
        final = self._path(record.operation_id)
        tmp = self.directory / f".{final.name}.{os.getpid()}-{secrets.token_hex(4)}"
        with disk_full_as_typed(
            "the disk is full: the fan-out could not be started; nothing was saved",
            operationId=record.operation_id,
        ):
            self.directory.mkdir(mode=0o700, exist_ok=True)
            try:
                write_new(tmp, orjson.dumps(record.to_json()))
                try:
                    os.link(tmp, final)
                except FileExistsError:
                    winner = self.lookup(record.operation_id)
                    if winner is not None:
                        return winner
                    os.replace(tmp, final)  # a damaged record names nothing we could finish
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
        return record

    def withdraw(self, record: _Record) -> None:
        """Remove the record of a fan-out that published nothing (best effort)."""
        if self.lookup(record.operation_id) != record:
            return
        with contextlib.suppress(OSError):
            os.unlink(self._path(record.operation_id))
            fsync_dir(self.directory)


def branch_operation(operation_id: str, number: int) -> str:
    """The fork operation id of a fan-out's branch ``number`` (1-based)."""
    return f"{operation_id}#{number}"


def fan_out(
    store: SessionStore,
    session_id: str,
    prompt: str,
    targets: Sequence[FanoutTarget],
    operation_id: str,
    *,
    settings: ConversationSettings | None = None,
    cache: TargetsCache | None = None,
    attachments: Sequence[AttachmentRef] = (),
) -> Fanout:
    """Make one branch per target at the end of ``session_id``, durable together.

    Args:
        store: the data root's sessions.
        session_id: the conversation asked.
        prompt: the question every branch asks.
        targets: the models (and samples) asked, 1 to :data:`MAX_TARGETS`.
        operation_id: the idempotency key (see the module docstring).
        settings: the conversation's own system prompt and temperature, which
            each branch keeps beside its target's model.
        cache: a server's targets cache (``serve``).
        attachments: files the question carries, already stored
            (:func:`~branchwise.core.conversation.attachments.attach_files`);
            every branch's question refers to them, nothing is copied.

    Raises:
        EmptyPrompt, InvalidFanout: nothing to ask, no or too many targets, a bad operation id.
        OperationConflict: the operation id was used for another fan-out.
        TurnOpen: the conversation's last turn is still answering.
        SourceNotFound, StaleSource, DiskFull, …: a branch's refusal (every
            branch is refused with it; nothing of the fan-out is left).
    """
    session_id = validate_session_id(session_id)
    if not isinstance(prompt, str) or not prompt.strip():
        raise EmptyPrompt("the question to send is empty", sessionId=session_id)
    if not isinstance(operation_id, str) or not 0 < len(operation_id) <= MAX_OPERATION_ID - 3:
        raise InvalidFanout(
            f"operation id must be 1-{MAX_OPERATION_ID - 3} characters", field="operationId"
        )
    if not 1 <= len(targets) <= MAX_TARGETS:
        raise InvalidFanout(
            f"a fan-out asks 1 to {MAX_TARGETS} models or samples, not {len(targets)}",
            field="targets",
            count=len(targets),
        )
    index = FanoutIndex(store.root)
    record = index.lookup(operation_id)
    if record is None:
        record = _new_record(
            store, session_id, prompt, tuple(targets), tuple(attachments), operation_id, cache
        )
        store.require_writable()
        with refusing_read_only(store.root):
            record = index.write(record)
    if not record.asks_the_same(session_id, prompt, targets, attachments):
        raise OperationConflict(
            f"operation {operation_id} was used for a different fan-out",
            operationId=operation_id,
        )
    outcomes = fork_together(store, _calls(record, settings), cache=cache, all_or_nothing=True)
    refusal = next((o for o in outcomes if not isinstance(o, ForkResult)), None)
    if refusal is not None:
        if not any(isinstance(o, ForkResult) for o in outcomes):
            index.withdraw(record)
        if isinstance(refusal, BranchwiseError):
            refusal.details.update(operationId=operation_id, refused=len(outcomes))
        raise refusal
    branches = tuple(
        FanoutBranch(result.child_session_id, target, result.created)
        for result, target in zip(outcomes, record.targets, strict=True)
        if isinstance(result, ForkResult)
    )
    return Fanout(operation_id, session_id, prompt, branches)


def _new_record(
    store: SessionStore,
    session_id: str,
    prompt: str,
    targets: tuple[FanoutTarget, ...],
    attachments: tuple[AttachmentRef, ...],
    operation_id: str,
    cache: TargetsCache | None,
) -> _Record:
    """Where the fan-out branches: the end of the conversation's last turn (the start if none)."""
    answer = fork_targets(store, session_id, cache=cache)
    last = answer.targets[-1] if answer.targets else None
    if last is not None and last.boundary_sequence is None:
        raise TurnOpen(
            "the conversation is still answering; send to several when the answer ends",
            sessionId=session_id,
            turnId=last.turn_id,
        )
    return _Record(
        operation_id=operation_id,
        session_id=session_id,
        prompt=prompt,
        targets=targets,
        turn_id=last.turn_id if last else None,
        boundary_sequence=(last.boundary_sequence or 0) if last else 0,
        generation=answer.generation,
        branch_ids=tuple(new_session_id() for _ in targets),
        titles=_titles(store, session_id, len(targets)),
        fork_turn_index=len(answer.targets),
        attachments=attachments,
    )


def _titles(store: SessionStore, session_id: str, count: int) -> tuple[str | None, ...]:
    """ "<title> (branch N)", "(branch N+1)"…: the names the branches are published with."""
    try:
        title = store.manifest(session_id).title
    except BranchwiseError:
        return (None,) * count
    forks = sum(
        1
        for manifest in store.iter_manifests()
        if isinstance(manifest, Manifest)
        and manifest.kind == "fork"
        and manifest.parent is not None
        and manifest.parent.session_id == session_id
    )
    return tuple(branch_title(title, forks + number) for number in range(count))


def _calls(record: _Record, settings: ConversationSettings | None) -> list[ForkCall]:
    origin = BranchOrigin("fanout", record.turn_id or "", record.prompt, record.attachments)
    keep = settings or ConversationSettings()
    calls = []
    for number, (target, branch) in enumerate(
        zip(record.targets, record.branch_ids, strict=True), start=1
    ):
        request = ForkRequest(
            record.session_id,
            record.turn_id,
            record.boundary_sequence,
            record.generation,
            child_session_id=branch,
            origin=origin,
        )
        calls.append(
            ForkCall(
                request,
                branch_operation(record.operation_id, number),
                title=record.titles[number - 1] if len(record.titles) >= number else None,
                label=target.label_parts,
                fork_turn_index=record.fork_turn_index,
                settings=ConversationSettings(
                    target.model,
                    keep.system,
                    keep.temperature,
                    target.model_server or keep.model_server,
                ),
            )
        )
    return calls


# -- fuse ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FuseSource:
    """One branch answer a fuse combines.

    Attributes:
        session_id: the branch.
        turn_id: its turn whose answer is used (its last own answered turn).
        message_id: that answer.
        model: the model that wrote it.
        question: the prompt it answers.
        answer: its text.
    """

    session_id: str
    turn_id: str
    message_id: str
    model: str
    question: str
    answer: str

    def provenance(self) -> dict[str, str]:
        """``{"sessionId", "turnId", "messageId", "model"}``: what the merge records of it."""
        return {
            "sessionId": self.session_id,
            "turnId": self.turn_id,
            "messageId": self.message_id,
            "model": self.model,
        }


def fuse_sources(
    store: SessionStore, parent_id: str, branch_ids: Sequence[str]
) -> list[FuseSource]:
    """The answers of ``branch_ids``, each a branch of ``parent_id`` whose answer has ended.

    A branch still answering is refused (``turn_running``: fuse when it ends)
    rather than waited for: a fuse is a deliberate choice of finished answers,
    and a wait would tie a command or a click to a stream of unknown length.

    Raises:
        InvalidFanout: no branch, more than :data:`MAX_TARGETS`, or one named twice.
        NotRelated: a branch of another conversation tree.
        NotAncestor: a branch in the same tree that did not leave ``parent_id``.
        TurnRunning: a branch is answering now.
        UnknownTurn: a branch has no answer of its own.
        SessionNotFound: a branch or the parent is gone.
    """
    parent_id = validate_session_id(parent_id)
    ids = [validate_session_id(b) for b in branch_ids]
    if not 1 <= len(ids) <= MAX_TARGETS or len(set(ids)) != len(ids):
        raise InvalidFanout(
            f"fuse 1 to {MAX_TARGETS} different branches", field="from", count=len(ids)
        )
    parent_root = _root(store.manifest(parent_id))
    sources = []
    for branch in ids:
        chain = lineage(store, branch).chain
        if parent_id not in [m.session_id for m in chain[1:]]:
            if _root(chain[0]) != parent_root:
                raise NotRelated(
                    f"{branch} is not a branch of {parent_id}'s conversation tree",
                    sessionId=branch,
                    parentSessionId=parent_id,
                )
            raise NotAncestor(
                f"{branch} did not branch from {parent_id}", child=branch, parent=parent_id
            )
        sources.append(_answer_of(store, branch))
    return sources


def _root(manifest: Manifest) -> str:
    return manifest.root_session_id or manifest.session_id


def _answer_of(store: SessionStore, branch: str) -> FuseSource:
    if store.is_being_written(branch):
        raise TurnRunning(f"{branch} is answering; fuse it when its answer ends", sessionId=branch)
    snapshot = store.read(branch, every_frame=False)
    projection = snapshot.projection
    own = [t for t in projection.turns if t.start_seq > projection.seed_length]
    if own and own[-1].is_open:
        raise TurnRunning(f"{branch} is answering; fuse it when its answer ends", sessionId=branch)
    for turn in reversed(own):
        answer = projection.message(turn.message_id) if turn.message_id else None
        question = projection.message(turn.user_message_id) if turn.user_message_id else None
        if answer is not None and answer.content.strip():
            return FuseSource(
                branch,
                turn.turn_id,
                answer.message_id,
                answer.model or "",
                question.content if question else "",
                answer.content,
            )
    raise UnknownTurn(f"{branch} has no answer of its own to fuse", sessionId=branch)


def fuse_messages(sources: Sequence[FuseSource], instruction: str) -> list[dict[str, str]]:
    """What the fusing model is asked: the question, each answer, then the instruction.

    The framing is fixed English (it frames data for a model, as a merge's
    context does); the instruction is the user's, in any language.
    """
    question = sources[0].question if sources else ""
    parts = [f"Question:\n{question}"]
    for number, source in enumerate(sources, start=1):
        parts.append(f"Answer {number} ({source.model or 'unknown model'}):\n{source.answer}")
    parts.append(instruction.strip() or default_fuse_instruction())
    return [{"role": "user", "content": "\n\n".join(parts)}]


def demo_fused(sources: Sequence[FuseSource]) -> str:
    """The demo responder's fused answer: which answers it combined, and each one's gist.

    Deterministic and in the interface language, so fuse can be tried (and
    tested) offline.
    """
    models = ", ".join(dict.fromkeys(source.model or "?" for source in sources))
    lines = [
        fill(
            ngettext(
                "**Fused from {n} answer** ({models}):",
                "**Fused from {n} answers** ({models}):",
                len(sources),
            ),
            {"n": len(sources), "models": models},
        ),
        "",
    ]
    for source in sources:
        gist = next(
            (line.strip("*_ ") for line in source.answer.splitlines() if line.strip("*_ ")), ""
        )
        gist = gist if len(gist) <= 160 else gist[:157] + "..."
        lines.append(f"- **{source.model or '?'}**: {gist}")
    return "\n".join(lines)


def default_fuse_instruction() -> str:
    """The fuse instruction a person starts from, in the active language."""
    return _(DEFAULT_FUSE_INSTRUCTION)


def require_parent(store: SessionStore, parent_id: str) -> None:
    """Refuse a fuse into a conversation that does not exist."""
    if not store.exists(validate_session_id(parent_id)):
        raise SessionNotFound(f"no session {parent_id}", sessionId=parent_id)
