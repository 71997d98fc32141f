"""Forking a session at a finished turn into an independent child (docs/storage.md, "Forks").

A fork reads the source without any lease and never writes it. The child
inherits the prefix *verbatim* (docs/storage.md, "Seeds"; format 1 renumbered
densely): the source's events through the whole commit that closed the
target turn, with their seqs and commit numbers; ``seedLength`` is the
boundary, and the projection counts ``usage`` only after it, so tokens the
parent paid for are never counted twice. The prefix is not copied: the
source's segments are hard-linked as seeds bounded at the cut
(:mod:`~branchwise.core.fork.seeding`), so a fork costs the same at any size.
It is validated from the turn index and one frame; only when the index
cannot answer is the source replayed, which also gives every refusal its
precise reason. The child's first own commit holds ``session/fork``, then,
when the caller names the child, its ``session/title`` (the manifest carries
the same title), so a branch is published already named.

A fork *at the start* (no turn, boundary 0) inherits nothing: its own commit
opens with its own ``session/created`` (kind ``fork``) and carries the
conversation settings the source's first turn ran with. Editing or
regenerating the first turn branches there.

The child is built in a temporary folder under ``sessions/`` (swept on start
if a crash leaves it) and published with one rename: a crash leaves either no
child or a whole one.

An edit or a regenerate (a request with an ``origin``) publishes the child
with its first own turn already started: ``turn/start`` and the prompt's
``message/user`` are in the same commit as ``session/fork``, so a crash
leaves no branch or a branch with its question, never a branch without it.
Whoever answers it opens the child as writer keeping that turn open
(:meth:`~branchwise.core.store.store.SessionStore.open_writer`); anyone
else closes it as ``interrupted``, as any turn a crash left open.

Idempotency per operation id: see :mod:`~branchwise.core.fork.operations`.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from branchwise.core.conversation.settings import ConversationSettings
from branchwise.core.errors import (
    ActiveAuthority,
    BoundaryNotAtomic,
    BranchwiseError,
    CorruptLog,
    DiskFull,
    DuplicateChild,
    EmptyPrompt,
    InvalidForkRequest,
    InvalidManifest,
    OperationConflict,
    SessionExists,
    SessionNotFound,
    StaleSource,
    TurnOpen,
    UnknownTurn,
    Unverifiable,
)
from branchwise.core.fork.operations import ForkRequest, OperationIndex
from branchwise.core.fork.seeding import (
    ForkPlan,
    build_seeded_child,
    fsync_bound,
    plan_from_index,
    plan_from_log,
    publish_seeded_child,
)
from branchwise.core.fork.targets import (
    LogReplay,
    TargetReason,
    TargetsCache,
    load_source_manifest,
    target_of,
)
from branchwise.core.fs.atomic import refusing_read_only
from branchwise.core.ids import new_id, new_session_id, validate_session_id
from branchwise.core.log.frames import Frame, iter_frames
from branchwise.core.log.scan import gc_paused
from branchwise.core.log.segments import (
    SessionLog,
    read_session_log,
    scan_read_log,
    scan_session_log,
)
from branchwise.core.projection.events import (
    EventType,
    session_config,
    session_created,
    turn_start,
    user_message,
    validate_event,
)
from branchwise.core.projection.projection import Projection
from branchwise.core.projection.turns import TurnTracker
from branchwise.core.store.manifest import (
    ORIGIN_KINDS,
    SEGMENTED,
    BranchLabel,
    BranchOrigin,
    Manifest,
    ParentLink,
    load_manifest,
)
from branchwise.core.store.publish import publish_batch, unpublished_session
from branchwise.core.store.store import SessionStore

_USAGE = EventType.USAGE.value
_CHECKPOINT = EventType.CHECKPOINT.value
_TURN_START = EventType.TURN_START.value
MAX_OPERATION_ID = 200
MAX_SEQUENCE = 2**63 - 1
"""The largest boundary or generation a request may name (the log stores signed 64 bits)."""


@dataclass(frozen=True, slots=True)
class ForkResult:
    """What a fork call returns.

    Attributes:
        child_session_id: the child (new, or the one this operation made before).
        created: false when a retry found the child this operation already made.
        operation_id: the operation the child belongs to.
    """

    child_session_id: str
    created: bool
    operation_id: str

    def to_json(self) -> dict[str, Any]:
        """``{"childSessionId", "created", "operationId"}``."""
        return {
            "childSessionId": self.child_session_id,
            "created": self.created,
            "operationId": self.operation_id,
        }


# -- validating the cut by replay ---------------------------------------------------


@dataclass(slots=True)
class _Replay:
    """The whole source replayed: the turn state and the frame that ends the cut."""

    tracker: TurnTracker
    boundary_frame: Frame | None
    splits_commit: bool


def _replay_to(log: SessionLog, boundary: int) -> _Replay:
    """Replay every committed frame; note the first frame reaching ``boundary``.

    Whether the cut is acceptable is decided from the complete turn state
    (the rest of the log is replayed too), the same state
    :func:`~branchwise.core.fork.targets.fork_targets` answers from.
    """
    tracker = TurnTracker()
    apply = tracker.apply
    found: Frame | None = None
    for frame in log.scan.frames:
        apply(frame.events)
        if found is None and frame.events and tracker.last_seq >= boundary:
            found = frame
    splits = False
    if found is not None:
        first, last = found.events[0]["seq"], found.events[-1]["seq"]
        splits = first <= boundary < last
    return _Replay(tracker, found, splits)


def _start_settings(data: bytes) -> ConversationSettings | None:
    """The settings a fork at the start carries: those the source's first turn ran with.

    Nothing is inherited, but the conversation's own model, system prompt and
    temperature as they stood when its first turn started (``session/config``
    events come before it) go with the child, so asking the first prompt
    again asks the same model the same way.
    """
    before_first_turn = Projection()
    for frame in iter_frames(memoryview(data)):
        if any(event["type"] == _TURN_START for event in frame.events):
            break
        before_first_turn.apply(frame.events)
    settings = before_first_turn.settings
    return None if settings.empty else settings


# The error each reason of an unavailable fork target is refused with.
_REFUSALS: Mapping[TargetReason, type[BranchwiseError]] = {
    TargetReason.TURN_OPEN: TurnOpen,
    TargetReason.ACTIVE_AUTHORITY: ActiveAuthority,
    TargetReason.BOUNDARY_NOT_ATOMIC: BoundaryNotAtomic,
    TargetReason.UNVERIFIABLE: Unverifiable,
}


def _before_damage(cut: _Replay, turn_id: str, boundary: int) -> bool:
    """Whether a cut is judged whole from the frames before damage: its turn closed there
    at exactly ``boundary`` (only the bytes up to it are linked)."""
    turn = cut.tracker.turn(turn_id)
    return turn is not None and not turn.is_open and turn.boundary_sequence == boundary


def _check_cut(cut: _Replay, source_id: str, turn_id: str, boundary: int) -> None:
    """Refuse, with the target's own reason, anything but an available target's boundary."""
    tracker = cut.tracker
    details = {"sessionId": source_id, "turnId": turn_id, "boundarySequence": boundary}
    if not tracker.verifiable:
        raise Unverifiable(
            f"session {source_id} has message-only history with no turn records", **details
        )
    turn = tracker.turn(turn_id)
    if turn is None:
        raise UnknownTurn(f"session {source_id} has no turn {turn_id}", **details)
    target = target_of(turn)
    if turn.is_open:
        raise TurnOpen(
            f"turn {turn_id} has not finished yet, so it has no boundary to branch from",
            **details,
        )
    if boundary != turn.boundary_sequence:
        if cut.splits_commit:
            raise BoundaryNotAtomic(
                f"seq {boundary} is inside a commit; turn {turn_id} ends at "
                f"{turn.boundary_sequence}",
                **details,
            )
        raise StaleSource(
            f"turn {turn_id} ends at seq {turn.boundary_sequence}, not {boundary}",
            currentBoundarySequence=turn.boundary_sequence,
            **details,
        )
    if target.reason is not None:  # an unavailable target always says why
        raise _REFUSALS[TargetReason(target.reason)](
            f"turn {turn_id} cannot be forked: {target.reason}",
            openAuthority=list(turn.open_authority),
            **details,
        )


# -- fork -----------------------------------------------------------------------


def _validate_request(request: ForkRequest, operation_id: object, title: object) -> None:
    validate_session_id(request.source_session_id)
    if request.child_session_id is not None:
        validate_session_id(request.child_session_id)
    if request.turn_id is None:
        if request.boundary_sequence != 0:
            raise InvalidForkRequest(
                "a fork at the start (no turn) has boundarySequence 0", field="boundarySequence"
            )
    elif not isinstance(request.turn_id, str):
        raise InvalidForkRequest("turnId must be a string or null", field="turnId")
    if not isinstance(operation_id, str) or not 0 < len(operation_id) <= MAX_OPERATION_ID:
        raise InvalidForkRequest(f"operation id must be 1-{MAX_OPERATION_ID} characters")
    numbers = (
        ("boundarySequence", request.boundary_sequence),
        ("expectedGeneration", request.expected_generation),
    )
    for name, value in numbers:
        if not isinstance(value, int) or isinstance(value, bool):
            raise InvalidForkRequest(f"{name} must be an integer", field=name)
        if not 0 <= value <= MAX_SEQUENCE:
            raise InvalidForkRequest(f"{name} must be between 0 and {MAX_SEQUENCE}", field=name)
    if title is not None and not isinstance(title, str):
        raise InvalidForkRequest("title must be a string", field="title")
    origin = request.origin
    if origin is not None:
        if origin.kind not in ORIGIN_KINDS or not isinstance(origin.turn_id, str):
            raise InvalidForkRequest("origin must name edit or regenerate and a turn")
        if not isinstance(origin.prompt, str) or not origin.prompt.strip():
            raise EmptyPrompt("the prompt to ask again is empty", turnId=origin.turn_id)


def _origin_event(origin: BranchOrigin) -> dict[str, str]:
    """What ``session/fork`` records of an origin: its kind and turn (the prompt follows it)."""
    return {"kind": origin.kind, "turnId": origin.turn_id}


def _conflict(operation_id: str) -> OperationConflict:
    return OperationConflict(
        f"operation {operation_id} was used for a different fork request",
        operationId=operation_id,
    )


def _existing_child(
    store: SessionStore, child_id: str, request: ForkRequest, operation_id: str
) -> ForkResult | None:
    """The result for a child this operation already published; refuse anyone else's."""
    try:
        manifest = load_manifest(store.session_dir(child_id))
    except SessionNotFound:
        return None
    except InvalidManifest as exc:
        raise DuplicateChild(f"session {child_id} already exists", sessionId=child_id) from exc
    if manifest.created_by_operation != operation_id:
        raise DuplicateChild(f"session {child_id} already exists", sessionId=child_id)
    link = manifest.parent
    made = link and ForkRequest(
        link.session_id,
        link.turn_id,
        link.boundary_sequence or 0,
        link.generation or 0,
        origin=link.origin,
    )
    if not made or not request.same_as(made):
        raise _conflict(operation_id)
    return ForkResult(child_id, False, operation_id)


def _read_and_plan(
    store: SessionStore, request: ForkRequest, cache: TargetsCache | None
) -> tuple[Manifest, ForkPlan]:
    """The source's manifest and the checked plan of the child's seeds.

    The index answers an available target with one frame read; then a
    ``cache`` that has replayed this log answers it (:func:`_plan_from_cache`);
    anything else (no index, no cache, a refusal to explain) replays the
    source's whole log.
    """
    source_id = request.source_session_id
    source_dir = store.session_dir(source_id)
    before = load_source_manifest(source_dir, source_id)
    if before.generation != request.expected_generation:
        raise StaleSource(
            f"session {source_id} is at generation {before.generation}, "
            f"not {request.expected_generation}",
            sessionId=source_id,
            generation=before.generation,
        )
    boundary = request.boundary_sequence
    if request.turn_id is None:  # a fork at the start inherits nothing: no seeds
        settings = _start_settings(read_session_log(source_dir, before).data)
        _fence(source_dir, source_id, before)
        return before, ForkPlan((), 0, 0, (), settings)
    plan = plan_from_index(source_dir, before, boundary, request.turn_id)
    if plan is None and cache is not None:
        plan = _plan_from_cache(cache, source_dir, before, request.turn_id, boundary)
    replay: _Replay | None = None
    log: SessionLog | None = None
    if plan is None:
        with gc_paused():
            log = scan_session_log(source_dir, before)
            replay = _replay_to(log, boundary)
    # Checked again before the cut is judged: a source moved to the Trash while its log
    # was read reads as an empty log, which must refuse as source_not_found, not unknown_turn.
    _fence(source_dir, source_id, before)
    if replay is not None and log is not None:
        damage = log.scan.corruption
        if damage is not None and not _before_damage(replay, request.turn_id, boundary):
            raise damage  # the turn is in, or past, damaged bytes: not unknown_turn or turn_open
        _check_cut(replay, source_id, request.turn_id, boundary)
        assert replay.boundary_frame is not None  # an available target has its closing frame
        plan = plan_from_log(log, replay.boundary_frame, boundary)
    assert plan is not None
    return before, plan


def _plan_from_cache(
    cache: TargetsCache, source_dir: Path, before: Manifest, turn_id: str, boundary: int
) -> ForkPlan | None:
    """The plan of an available target, from the cache's replay of the source's log as it is now.

    Many forks of one source (a server's clients branching the same
    conversation) then validate the cut from the turn state the cache keeps
    current (the same state a full replay gives, see
    :class:`~branchwise.core.fork.targets.TargetsCache`; forks that arrive
    together share one read of the log) and share one plan of the seeds: it
    depends only on the bytes up to the cut, which the replay has
    checksummed, and is reused only while the log's pieces up to the cut are
    the same files at the same offsets. ``None`` for anything but an
    available target at exactly this boundary: the full replay then decides
    and explains the refusal.
    """
    try:
        for with_log in (False, True):
            with cache.replayed(source_dir, before, with_log=with_log) as (state, log):
                if not _available(state.tracker, turn_id, boundary):
                    return None
                kept = state.plans.get((turn_id, boundary))
                if isinstance(kept, tuple):
                    layout, last_seed, plan = kept
                    if (
                        isinstance(plan, ForkPlan)
                        and state.layout[: len(layout)] == layout
                        and _file_identity(plan) == last_seed
                    ):
                        return plan
                if log is not None:
                    return _work_out_plan(state, log, turn_id, boundary)
    except CorruptLog:
        return None  # a missing seed, a source moved away: the full read names it
    return None


def _available(tracker: TurnTracker, turn_id: str, boundary: int) -> bool:
    """Whether ``turn_id`` is an available target ending at exactly ``boundary``."""
    turn = tracker.turn(turn_id)
    return (
        tracker.verifiable
        and turn is not None
        and turn.boundary_sequence == boundary
        and target_of(turn).available
    )


def _work_out_plan(
    state: LogReplay, log: SessionLog, turn_id: str, boundary: int
) -> ForkPlan | None:
    """The plan from ``log`` (the read ``state`` describes, its lock held), kept in ``state``.

    The seeds' bound is made durable here, once: the bytes up to it are the
    same for every fork that reuses the plan, so theirs need no ``fsync``.
    """
    with gc_paused():
        scanned = scan_read_log(log)
    if scanned.scan.corruption is not None:
        return None  # history ends at the damage: the full replay says what is left
    cut = _replay_to(scanned, boundary)
    if cut.boundary_frame is None or cut.splits_commit:
        return None
    plan = plan_from_log(scanned, cut.boundary_frame, boundary)
    last_seed = _file_identity(plan)
    if plan.seeds:
        fsync_bound(plan.seeds[-1].path)
        plan = dataclasses.replace(plan, bound_durable=True)
    state.plans[(turn_id, boundary)] = (state.layout[: len(plan.seeds)], last_seed, plan)
    return plan


def _file_identity(plan: ForkPlan) -> tuple[int, int] | None:
    """Device and inode of the file holding the plan's bound (``None``: no seeds, or gone)."""
    if not plan.seeds:
        return None
    try:
        status = os.lstat(plan.seeds[-1].path)
    except OSError:
        return None
    return status.st_dev, status.st_ino


def _fence(source_dir: Path, source_id: str, before: Manifest) -> None:
    """Refuse if the source was replaced (or removed) since ``before`` was read."""
    if load_source_manifest(source_dir, source_id).generation != before.generation:
        raise StaleSource(
            f"session {source_id} was replaced while it was forked", sessionId=source_id
        )


def _child_manifest(
    source: Manifest,
    request: ForkRequest,
    child_id: str,
    operation_id: str,
    title: str | None,
    label: BranchLabel | None = None,
    fork_turn_index: int | None = None,
) -> Manifest:
    return Manifest(
        session_id=child_id,
        title=source.title if title is None else title,
        kind="fork",
        created_at=time.time(),
        parent=ParentLink(
            source.session_id,
            "fork",
            request.turn_id,
            request.boundary_sequence,
            source.generation,
            request.origin,
        ),
        root_session_id=source.root_session_id or source.session_id,
        seed_length=request.boundary_sequence,
        created_by_operation=operation_id,
        format=SEGMENTED,
        label=label,
        fork_turn_index=fork_turn_index,
    )


@dataclass(frozen=True, slots=True)
class ForkCall:
    """One fork asked of :func:`fork_together`: the arguments :func:`fork` takes.

    ``settings`` (a fan-out's branch: the model it asks) are written into the
    child's first own commit as its ``session/config``, so the branch goes on
    with that model; like the title, they are not part of the request.
    """

    request: ForkRequest
    operation_id: str
    title: str | None = None
    label: BranchLabel | None = None
    fork_turn_index: int | None = None
    settings: ConversationSettings | None = None


@dataclass(frozen=True, slots=True)
class _Reserved:
    """A fork checked and reserved: its child id is fixed, nothing is published yet.

    ``made`` is the reservation this call wrote (``None``: an earlier attempt's).
    """

    call: ForkCall
    source: Manifest
    plan: ForkPlan
    child: str
    made: ForkRequest | None


def fork(
    store: SessionStore,
    request: ForkRequest,
    operation_id: str,
    *,
    title: str | None = None,
    label: BranchLabel | None = None,
    fork_turn_index: int | None = None,
    cache: TargetsCache | None = None,
) -> ForkResult:
    """Fork ``request``'s source at its turn into a new, independent child session.

    Idempotent per ``operation_id``: a retry of the same request returns the
    same child with ``created: false`` (even if the source changed since), and
    leaves it untouched. Every refusal is a typed error and publishes nothing.
    Like :func:`~branchwise.core.fork.targets.fork_targets`, it reads committed
    frames only: a torn tail or damage ends the history it can fork from.

    Args:
        store: the data root's sessions.
        request: the source, turn, boundary and generation the caller saw, and
            the child id it asks for (``None``: a new one).
        operation_id: the idempotency key.
        title: the new child's title, written in the same publish (its manifest,
            and a ``session/title`` event in its first own commit); ``None``
            keeps the source's title. Not part of the request: a retry may
            name the child differently and still gets the child made first.
        label, fork_turn_index: what the child's manifest says of how it
            differs and of the turn it leaves at (``core/conversation/names.py``
            makes them; ``None``: computed when read). Not part of the request either.
        cache: replays kept by a caller that forks (and queries targets) again
            and again (``branchwise serve``): a source without a turn index is
            then replayed once, not once per fork.

    Raises:
        InvalidSessionId, InvalidForkRequest: malformed arguments.
        OperationConflict: ``operation_id`` was used for a different request.
        SourceNotFound, DuplicateChild, StaleSource, Unverifiable, UnknownTurn,
        TurnOpen, BoundaryNotAtomic, ActiveAuthority: see docs/storage.md, "Forks".
        ReadOnlyDataFolder: the data folder cannot be written.
        UnsafePath: a symbolic link where the source's or child's folder or files belong.
        InvalidManifest: the source's manifest is damaged or names another session.
        DiskFull: no space at any step; nothing is left behind (no child, no
            temporary folder, no reservation this call made), the source is
            untouched, and a retry once there is space makes the one child.
    """
    index = OperationIndex(store.root)
    call = ForkCall(request, operation_id, title, label, fork_turn_index)
    begun = _begin(store, index, call, cache, durable=True)
    if isinstance(begun, ForkResult):
        return begun
    try:
        manifest, stamped = _child_contents(begun)
        source_dir = store.session_dir(request.source_session_id)
        try:
            publish_seeded_child(store, manifest, begun.plan, stamped, source_dir / "blobs")
        except SessionExists:
            # Another call of the same operation published first; anyone else's child refuses.
            return _published_first(store, begun)
        except FileNotFoundError:
            # A seed vanished under us: the source was replaced or moved away since it was read.
            _fence(source_dir, request.source_session_id, begun.source)
            raise
        return ForkResult(begun.child, True, operation_id)
    except Exception as exc:
        _withdraw(store, index, begun, exc)
        raise


def fork_together(
    store: SessionStore,
    calls: Sequence[ForkCall],
    *,
    cache: TargetsCache | None = None,
    all_or_nothing: bool = False,
) -> list[ForkResult | Exception]:
    """Fork every call, sharing one durability step: each call's result or refusal, in order.

    What :func:`fork` does for each call, with the same answers, refusals and
    crash guarantees, but the forks' reservations and children are written
    without an fsync each, then one :func:`~branchwise.core.fs.atomic.sync_filesystem`
    makes all of them durable before the children are renamed into place and
    ``sessions/`` is fsynced once (:func:`~branchwise.core.store.publish.publish_batch`):
    seven fsyncs per fork become two per group, so a burst of forks (a
    server's clients branching at once) is bound by its work, not by the
    disk's commits. A crash before the sync leaves no child (at most a
    reservation, which a retry finishes); after it, every reservation is
    durable before its child is published; a call's result is returned only
    once its child is durable. One call is simply :func:`fork`, whose
    per-file fsyncs wait for its own files only.

    A refusal belongs to its call alone; a disk that fills up while the group
    is made durable refuses every call not yet answered with ``DiskFull``,
    leaving nothing of them behind. ``all_or_nothing`` (a fan-out's branches,
    which belong together) makes any call's refusal before publishing refuse
    every call not yet published, each with its own copy of it: nothing of
    the group is left half-made.
    """
    if len(calls) == 1 and not all_or_nothing:
        call = calls[0]
        try:
            return [
                fork(
                    store,
                    call.request,
                    call.operation_id,
                    title=call.title,
                    label=call.label,
                    fork_turn_index=call.fork_turn_index,
                    cache=cache,
                )
            ]
        except Exception as exc:  # noqa: BLE001 - the caller gets each call's own refusal
            return [exc]
    index = OperationIndex(store.root)
    outcomes: list[ForkResult | Exception | None] = [None] * len(calls)
    built: list[tuple[int, _Reserved, Path]] = []
    for number, call in enumerate(calls):
        begun: ForkResult | _Reserved | None = None
        try:
            begun = _begin(store, index, call, cache, durable=False)
            if isinstance(begun, ForkResult):
                outcomes[number] = begun
                continue
            built.append((number, begun, _build_unpublished(store, begun)))
        except Exception as exc:  # noqa: BLE001 - a refusal belongs to its call alone
            if isinstance(begun, _Reserved):
                _withdraw(store, index, begun, exc)
            outcomes[number] = exc
            if all_or_nothing:
                return _refuse_group(store, index, calls, outcomes, built, exc)
    try:
        published = publish_batch(store, [(tmp, begun.child) for _, begun, tmp in built])
    except Exception as exc:  # noqa: BLE001 - nothing of the group was published
        for number, begun, _ in built:
            own = _own_copy(exc)
            _withdraw(store, index, begun, own)
            outcomes[number] = own
    else:
        for (number, begun, _), made in zip(built, published, strict=True):
            try:
                outcomes[number] = (
                    ForkResult(begun.child, True, begun.call.operation_id)
                    if made
                    else _published_first(store, begun)
                )
            except Exception as exc:  # noqa: BLE001 - anyone else's child refuses this call
                outcomes[number] = exc
    return [outcome for outcome in outcomes if outcome is not None]


def _refuse_group(
    store: SessionStore,
    index: OperationIndex,
    calls: Sequence[ForkCall],
    outcomes: list[ForkResult | Exception | None],
    built: list[tuple[int, _Reserved, Path]],
    exc: Exception,
) -> list[ForkResult | Exception]:
    """Refuse every call of an all-or-nothing group not published before: remove what was built."""
    for _, begun, tmp in built:
        shutil.rmtree(tmp, ignore_errors=True)
        _withdraw(store, index, begun, _own_copy(exc))
    answered: list[ForkResult | Exception] = []
    for call, outcome in zip(calls, outcomes, strict=True):
        if isinstance(outcome, ForkResult):  # an earlier attempt published it: it stays
            answered.append(outcome)
            continue
        own = outcome if outcome is exc else _own_copy(exc)
        if isinstance(own, BranchwiseError):
            own.details["operationId"] = call.operation_id
        answered.append(own)
    return answered


def _begin(
    store: SessionStore,
    index: OperationIndex,
    call: ForkCall,
    cache: TargetsCache | None,
    *,
    durable: bool,
) -> ForkResult | _Reserved:
    """Check ``call`` and reserve its child id; or the child an earlier attempt published."""
    request, operation_id = call.request, call.operation_id
    _validate_request(request, operation_id, call.title)
    reserved = index.lookup(operation_id)
    if reserved is not None and not request.same_as(reserved):
        raise _conflict(operation_id)
    named = reserved.child_session_id if reserved else request.child_session_id
    if named is not None:
        earlier = _existing_child(store, named, request, operation_id)
        if earlier is not None:
            return earlier

    source, plan = _read_and_plan(store, request, cache)
    made: ForkRequest | None = None  # the reservation this call wrote, if any
    if reserved is None:  # reserve before publishing: a crash after publish still finds it
        child_id = (
            request.child_session_id if request.child_session_id is not None else new_session_id()
        )
        mine = dataclasses.replace(request, child_session_id=child_id)
        store.require_writable()
        with refusing_read_only(store.root):
            reserved = index.reserve(operation_id, mine, durable=durable)
        if not request.same_as(reserved):
            raise _conflict(operation_id)
        if reserved is mine:
            made = mine
    return _Reserved(call, source, plan, str(reserved.child_session_id), made)


def _withdraw(
    store: SessionStore, index: OperationIndex, begun: _Reserved, exc: BaseException
) -> None:
    """After a failure (not a crash) that published nothing: withdraw what this call reserved.

    So a full disk leaves nothing behind. A crash keeps the reservation, and a
    retry finishes the child.
    """
    operation_id = begun.call.operation_id
    if begun.made is not None and not store.exists(begun.child):
        index.release(operation_id, begun.made)
    if isinstance(exc, DiskFull):
        exc.details.setdefault("operationId", operation_id)


def _own_copy(exc: Exception) -> Exception:
    """A typed refusal each call of a group can carry its own details in (its operation id)."""
    if isinstance(exc, BranchwiseError):
        copy = type(exc)(exc.message, **exc.details)
        copy.__cause__ = exc.__cause__
        return copy
    return exc


def _published_first(store: SessionStore, begun: _Reserved) -> ForkResult:
    """Answer a child id published first: this operation's child, or a refusal."""
    call = begun.call
    earlier = _existing_child(store, begun.child, call.request, call.operation_id)
    if earlier is None:
        raise SessionExists(f"session {begun.child} already exists", sessionId=begun.child)
    return earlier


def _build_unpublished(store: SessionStore, begun: _Reserved) -> Path:
    """Build ``begun``'s child, without an fsync, in a temporary folder left unpublished."""
    manifest, stamped = _child_contents(begun)
    source_dir = store.session_dir(begun.call.request.source_session_id)
    with unpublished_session(store, begun.child) as tmp:
        try:
            build_seeded_child(
                tmp, manifest, begun.plan, stamped, source_dir / "blobs", durable=False
            )
        except FileNotFoundError:
            _fence(source_dir, begun.call.request.source_session_id, begun.source)
            raise
    return tmp


def _child_contents(begun: _Reserved) -> tuple[Manifest, list[dict[str, Any]]]:
    """The child's manifest and its first own commit, stamped after the cut."""
    request, title = begun.call.request, begun.call.title
    source, operation_id = begun.source, begun.call.operation_id
    manifest = _child_manifest(
        source,
        request,
        begun.child,
        operation_id,
        title,
        begun.call.label,
        begun.call.fork_turn_index,
    )
    boundary = request.boundary_sequence
    own: list[dict[str, Any]] = []
    if not boundary:  # at the start: no inherited session/created, so the child has its own
        own.append(session_created(manifest.title, "fork"))
    own.append(
        {
            "type": EventType.SESSION_FORK.value,
            "parentSessionId": request.source_session_id,
            "parentGeneration": source.generation,
            "turnId": request.turn_id,
            "boundarySequence": boundary,
            "seedLength": boundary,
            "operationId": operation_id,
            **({"origin": _origin_event(request.origin)} if request.origin else {}),
        }
    )
    if title is not None and boundary:
        own.append({"type": EventType.SESSION_TITLE.value, "title": title})
    settings = begun.call.settings or begun.plan.settings
    if settings is not None:
        own.append(
            session_config(
                settings.model, settings.system, settings.temperature, settings.model_server
            )
        )
    if request.origin is not None:
        # The question is part of the publish: a branch never exists without its prompt.
        own += [
            turn_start(new_id("turn")),
            user_message(new_id("msg"), request.origin.prompt, request.origin.attachments),
        ]
    stamped = [
        {"seq": boundary + n, "ts": manifest.created_at, **validate_event(event)}
        for n, event in enumerate(own, start=1)
    ]
    return manifest, stamped
