"""Writing a planned import as real sessions, each published whole, exactly once.

Every planned conversation becomes a session of real turns (``turn/start``,
``message/user``, ``tool/call``/``tool/result``, ``message/assistant`` with its
model, ``turn/end completed``), one commit per turn, so every imported turn
can be branched again. Timestamps come from the source (an item without a
time takes the one before it); titles are kept.

Each conversation is published like a fork, with one rename, so a crash or a
cancel leaves whole conversations only. An import makes thousands of small
sessions, so the durability is batched: conversations are *built* in their
unpublished folders without an fsync (:meth:`TreePublisher.build`), and
:func:`~branchwise.core.store.publish.publish_batch` makes a whole batch
durable with one file-system sync before renaming each folder into place:

* a root or child is built in a temporary folder as one segment with its
  turn index (so its turns fork by the index, as a live session's do);
* a fork is a real fork (:func:`~branchwise.core.fork.seeding.build_seeded_child`):
  the parent's segments (published, or still in the batch's folder) are
  linked as seeds bounded at the fork turn, then ``session/fork`` (with the
  edit/regenerate origin) and the fork's own turns follow in its own
  segment; a fork at the start inherits nothing; the batch renames the
  parent's folder before the fork's;
* a child carries the same ``session/child`` link event as its parent's
  spawning turn (the parent holds it in that turn's commit).

The source's identity (``{"format", "id"}``) is kept in the conversation's
first own event (``session/created``, or ``session/fork`` for a fork).
Re-importing creates nothing new, cheaply: a conversation's session id, and
the turn and message ids inside it, are derived from its source identity
(format, conversation id, the main leaf that fixes the tree's version, the
branch's own leaf), so "already imported" is one ``exists`` check and needs no
index to keep or rebuild, and a re-import after a crash finishes exactly the
conversations that were not published. A later export of a conversation that
went on has another main leaf and imports as a new tree.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from branchwise.core.conversation.attachments import store_attachments
from branchwise.core.conversation.names import child_label, imported_label
from branchwise.core.errors import StaleSource
from branchwise.core.fork.seeding import (
    ForkPlan,
    build_seeded_child,
    plan_at_boundary,
    plan_from_index,
)
from branchwise.core.fs.atomic import write_new
from branchwise.core.importing.plan import ImportPlan, PlannedConversation, PlannedTurn
from branchwise.core.importing.source import SourceSkip
from branchwise.core.log.frames import encode_frame
from branchwise.core.log.segments import scan_session_log, segment_name
from branchwise.core.log.sidecars import entries_for, frame_crc, sidecar_bytes
from branchwise.core.projection.events import (
    EndReason,
    assistant_message,
    session_child,
    session_created,
    session_fork,
    session_title,
    tool_call,
    tool_result,
    turn_end,
    turn_start,
    user_message,
    validate_event,
)
from branchwise.core.projection.turns import TurnTracker
from branchwise.core.store.attachments import BlobStore
from branchwise.core.store.manifest import (
    SEGMENTED,
    BranchOrigin,
    Manifest,
    ParentLink,
    load_manifest,
    manifest_bytes,
)
from branchwise.core.store.publish import publish_batch, unpublished_session
from branchwise.core.store.store import SessionStore
from branchwise.core.store.trash import Trash

Event = dict[str, Any]
UNKNOWN_MODEL = "unknown"
"""The ``model`` of an imported answer whose source does not name one."""
TURN_INDEX_FROM = 256 * 1024
"""An imported segment of at least this many bytes gets its turn index (its sidecars).

A smaller one goes without: creating three more files costs an import more
than a fork's scan of a small segment does (and the first writer open
rebuilds them); a big conversation forks by the index, as a live one does.
"""


@dataclass(frozen=True, slots=True)
class ImportedConversation:
    """One conversation of the report: the session it is and where it came from.

    Attributes:
        session_id: the Branchwise session.
        title: its title.
        kind: ``root``, ``fork`` or ``child``.
        parent_session_id: the fork's or child's parent, ``None`` for a root.
        fork_turn_id: the parent's turn a fork starts after (or a child was
            spawned from); ``None`` for a root and a fork at the start.
        source_format: the source's format.
        source_id: the source's id of this conversation (see
            :attr:`~branchwise.core.importing.plan.PlannedConversation.source_id`).
        created: false when an earlier import had already published it.
    """

    session_id: str
    title: str
    kind: str
    parent_session_id: str | None
    fork_turn_id: str | None
    source_format: str
    source_id: str
    created: bool

    def to_json(self) -> dict[str, Any]:
        """The CLI's shape of one imported conversation."""
        return {
            "sessionId": self.session_id,
            "title": self.title,
            "kind": self.kind,
            "parentSessionId": self.parent_session_id,
            "forkTurnId": self.fork_turn_id,
            "source": {"format": self.source_format, "id": self.source_id},
            "created": self.created,
        }


@dataclass(frozen=True, slots=True)
class BuiltConversation:
    """A conversation of a tree, built but not yet published.

    Attributes:
        conversation: its report entry (``created`` says it was built; the
            batch's rename decides whether it is published).
        folder: its unpublished folder; ``None`` when an earlier import had
            already published it (or the person deleted it since).
    """

    conversation: ImportedConversation
    folder: Path | None


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


def imported_session_id(format: str, tree_id: str, main_leaf: str, source_id: str) -> str:
    """The session id of one imported conversation (UUID-shaped, derived, never random)."""
    d = _digest("branchwise-import", format, tree_id, main_leaf, source_id)
    return f"{d[:8]}-{d[8:12]}-{d[12:16]}-{d[16:20]}-{d[20:32]}"


@dataclass(slots=True)
class _Written:
    """A conversation's log as written (or as an earlier import wrote it): its commits and turns."""

    session_id: str
    root_session_id: str
    commits: list[list[Event]]
    turn_ids: list[str] = field(default_factory=list)
    boundaries: list[int] = field(default_factory=list)
    fork_event: Event | None = None  # a fork's own session/fork, as stamped (in ``commits``)


class _Stamper:
    """Numbers events densely and gives each a timestamp (source time, else the one before)."""

    def __init__(self, first_seq: int, ts: float) -> None:
        self.seq = first_seq
        self.ts = ts

    def stamp(self, event: Event, when: float | None = None) -> Event:
        if when is not None:
            self.ts = when
        stamped = {"seq": self.seq, "ts": self.ts, **validate_event(event)}
        self.seq += 1
        return stamped


def _turn_id(session_id: str, turn: PlannedTurn) -> str:
    return f"turn_{_digest(session_id, 'turn', turn.items[0].id)[:32]}"


def _turn_commit(
    turn: PlannedTurn,
    turn_id: str,
    session_id: str,
    stamper: _Stamper,
    links: list[Event],
    blobs: BlobStore,
) -> list[Event]:
    """One turn as one commit: start, messages and tools in order, links, end (completed).

    A prompt's files are stored in ``blobs`` here, before the commit that
    refers to them is written (a blob already stored, from an earlier import
    of the same export, is kept, never copied).
    """
    first = turn.items[0]
    events = [stamper.stamp(turn_start(turn_id), first.time)]
    open_calls: dict[str, str] = {}
    called: set[str] = set()
    for item in turn.items:
        message_id = f"msg_{_digest(session_id, 'msg', item.id)[:32]}"
        if item.kind == "user":
            event = user_message(message_id, item.text, store_attachments(blobs, item.attachments))
        elif item.kind == "assistant":
            event = assistant_message(message_id, item.text, item.model or UNKNOWN_MODEL)
        elif item.kind == "tool_call":
            call_id = item.call_id or item.id
            open_calls[call_id] = item.tool_name or "tool"
            called.add(call_id)
            args = item.arguments if item.arguments is not None else item.text
            event = tool_call(call_id, item.tool_name or "tool", args)
        else:
            call_id = item.call_id or item.id
            if call_id not in called:  # the export lost its call: keep the result on an empty one
                called.add(call_id)
                call = tool_call(call_id, item.tool_name or "tool", "")
                events.append(stamper.stamp(call, item.time))
            open_calls.pop(call_id, None)
            event = tool_result(call_id, item.text, item.tool_name or None)
        events.append(stamper.stamp(event, item.time))
    for call_id in open_calls:  # the export kept no result: close it so the turn can branch
        events.append(stamper.stamp(tool_result(call_id, "")))
    events += [stamper.stamp(dict(link)) for link in links]
    events.append(stamper.stamp(turn_end(turn_id, EndReason.COMPLETED)))
    return events


def _link_event(parent: _Written, child_id: str, turn_id: str | None, call: str | None) -> Event:
    spawned: dict[str, Any] = {"turnId": turn_id}
    if call is not None:
        spawned["toolCallId"] = call
    return session_child(
        parent_session_id=parent.session_id,
        child_session_id=child_id,
        root_session_id=parent.root_session_id,
        spawned_from=spawned,
    )


class TreePublisher:
    """Publishes the conversations of one :class:`ImportPlan`, in plan order (parents first)."""

    def __init__(self, store: SessionStore, plan: ImportPlan) -> None:
        self._store = store
        self._plan = plan
        main_leaf = plan.main_leaf or ""
        self._ids = [
            imported_session_id(plan.format, plan.tree_id, main_leaf, c.source_id)
            for c in plan.conversations
        ]
        self._written: list[_Written] = []
        # the unpublished folder and manifest of each session this tree built
        self._folders: dict[str, tuple[Path, Manifest]] = {}
        self._trash = Trash(store)
        self._blobs = BlobStore(store.root)
        # (parent index, parent turn index) -> the link events of children spawned there
        self._links: dict[tuple[int, int], list[tuple[int, str | None]]] = {}
        for index, conversation in enumerate(plan.conversations):
            if conversation.kind == "child" and conversation.spawned_turn is not None:
                key = (int(conversation.parent or 0), conversation.spawned_turn)
                self._links.setdefault(key, []).append((index, conversation.spawned_call))

    def publish(self) -> Iterator[ImportedConversation | SourceSkip]:
        """Build the whole tree and publish it as one batch; yield each conversation.

        An import batches several trees
        (:func:`~branchwise.core.importing.run.import_path`); this publishes
        one tree on its own.
        """
        built = list(self.build())
        folders = [b for b in built if isinstance(b, BuiltConversation) and b.folder is not None]
        outcome = publish_batch(
            self._store, [(b.folder, b.conversation.session_id) for b in folders if b.folder]
        )
        lost = {id(b) for b, published in zip(folders, outcome, strict=True) if not published}
        for item in built:
            if isinstance(item, SourceSkip):
                yield item
            elif id(item) in lost:
                yield dataclasses.replace(item.conversation, created=False)
            else:
                yield item.conversation

    def build(self) -> Iterator[BuiltConversation | SourceSkip]:
        """Build each conversation not yet in the store in its unpublished folder; yield each.

        Nothing is fsynced: the folders are published by
        :func:`~branchwise.core.store.publish.publish_batch`, in this order
        (parents first). A conversation found in the store, or in the Trash
        (the person deleted it), is not built again (``created: false``). A
        fork whose parent is neither built nor in the store (in the Trash, or
        skipped itself) cannot be seeded and is skipped, with its own forks.
        If the caller stops early or a build fails, the folders already
        yielded are the caller's to remove.
        """
        for index, conversation in enumerate(self._plan.conversations):
            yield self._build_one(index, conversation)

    # -- one conversation ----------------------------------------------------------

    def _parent(self, session_id: str) -> tuple[Path, Manifest]:
        """Where a parent's files are and its manifest: its unpublished folder, else the store's."""
        if session_id in self._folders:
            return self._folders[session_id]
        directory = self._store.session_dir(session_id)
        return directory, load_manifest(directory)

    def _build_one(
        self, index: int, conversation: PlannedConversation
    ) -> BuiltConversation | SourceSkip:
        session_id = self._ids[index]
        parent = None if conversation.parent is None else self._written[conversation.parent]
        created_at = conversation.created if conversation.created is not None else time.time()
        if conversation.kind == "fork":
            assert parent is not None
            written, fork_turn = self._fork_log(index, conversation, parent, created_at)
        else:
            written, fork_turn = self._fresh_log(index, conversation, parent, created_at)
        self._written.append(written)
        folder = None
        # one deleted by the person after an earlier import is not brought back
        live = self._store.exists(session_id) or self._trash.contains(session_id)
        seedless = (
            parent is not None
            and parent.session_id not in self._folders
            and not self._store.exists(parent.session_id)
        )
        if not live and conversation.kind == "fork" and seedless:
            where = f"{self._plan.format}:{conversation.source_id}"
            return SourceSkip(where, "the conversation it branches from is in the Trash")
        if not live:
            folder, manifest = self._build(conversation, written, parent, fork_turn, created_at)
            self._folders[session_id] = (folder, manifest)
        imported = ImportedConversation(
            session_id=session_id,
            title=conversation.title,
            kind=conversation.kind,
            parent_session_id=None if parent is None else parent.session_id,
            fork_turn_id=fork_turn,
            source_format=self._plan.format,
            source_id=conversation.source_id,
            created=folder is not None,
        )
        return BuiltConversation(imported, folder)

    def _turns(
        self,
        index: int,
        written: _Written,
        turns: tuple[PlannedTurn, ...],
        first_turn: int,
        stamper: _Stamper,
    ) -> None:
        for offset, turn in enumerate(turns):
            turn_id = _turn_id(written.session_id, turn)
            links = [
                _link_event(written, self._ids[child], turn_id, call)
                for child, call in self._links.get((index, first_turn + offset), ())
            ]
            events = _turn_commit(turn, turn_id, written.session_id, stamper, links, self._blobs)
            written.commits.append(events)
            written.turn_ids.append(turn_id)
            written.boundaries.append(events[-1]["seq"])

    def _fresh_log(
        self,
        index: int,
        conversation: PlannedConversation,
        parent: _Written | None,
        created_at: float,
    ) -> tuple[_Written, str | None]:
        """A root's or child's whole log: created, (the child link), then every turn."""
        session_id = self._ids[index]
        stamper = _Stamper(1, created_at)
        created = session_created(conversation.title, conversation.kind, self._source(conversation))
        commits = [[stamper.stamp(created)]]
        spawn_turn: str | None = None
        if parent is None:
            written = _Written(session_id, session_id, commits)
        else:
            written = _Written(session_id, parent.root_session_id, commits)
            if conversation.spawned_turn is not None:
                spawn_turn = parent.turn_ids[conversation.spawned_turn]
            link = _link_event(parent, session_id, spawn_turn, conversation.spawned_call)
            commits.append([stamper.stamp(link)])
        self._turns(index, written, conversation.turns, 0, stamper)
        return written, spawn_turn

    def _fork_log(
        self,
        index: int,
        conversation: PlannedConversation,
        parent: _Written,
        created_at: float,
    ) -> tuple[_Written, str | None]:
        """A fork's log: the parent's commits through the fork turn, ``session/fork``, own turns."""
        session_id = self._ids[index]
        at = conversation.inherited
        boundary = parent.boundaries[at - 1] if at else 0
        fork_turn = parent.turn_ids[at - 1] if at else None
        inherited = [c for c in parent.commits if c[-1]["seq"] <= boundary] if at else []
        stamper = _Stamper(boundary + 1, created_at)
        own: list[Event] = []
        source = self._source(conversation)
        if not at:
            own.append(stamper.stamp(session_created(conversation.title, "fork", source)))
        origin = self._origin(conversation, parent)
        fork_event = stamper.stamp(
            session_fork(
                parent_session_id=parent.session_id,
                parent_generation=1,  # the parent's real one is set when the fork is built
                turn_id=fork_turn,
                boundary_sequence=boundary,
                operation_id=_operation_id(session_id),
                source=source,
                origin=None if origin is None else {"kind": origin.kind, "turnId": origin.turn_id},
            )
        )
        own.append(fork_event)
        if at:
            own.append(stamper.stamp(session_title(conversation.title)))
        written = _Written(
            session_id,
            parent.root_session_id,
            [*inherited, own],
            list(parent.turn_ids[:at]),
            list(parent.boundaries[:at]),
            fork_event,
        )
        self._turns(index, written, conversation.own_turns, at, stamper)
        return written, fork_turn

    def _source(self, conversation: PlannedConversation) -> dict[str, str]:
        """Where the conversation came from, kept in its first own event."""
        return {"format": self._plan.format, "id": conversation.source_id}

    def _origin(self, conversation: PlannedConversation, parent: _Written) -> BranchOrigin | None:
        at = conversation.inherited
        if conversation.origin is None or at >= len(parent.turn_ids):
            return None
        prompt = conversation.turns[at].prompt
        return BranchOrigin(conversation.origin, parent.turn_ids[at], prompt.text if prompt else "")

    # -- writing -------------------------------------------------------------------------

    def _build(
        self,
        conversation: PlannedConversation,
        written: _Written,
        parent: _Written | None,
        fork_turn: str | None,
        created_at: float,
    ) -> tuple[Path, Manifest]:
        """Build one conversation in a new unpublished folder; return it and the manifest."""
        session_id = written.session_id
        if conversation.kind != "fork":
            link = None
            if parent is not None:
                link = ParentLink(parent.session_id, "child", turn_id=fork_turn)
            manifest = Manifest(
                session_id=session_id,
                title=conversation.title,
                kind=conversation.kind,
                created_at=created_at,
                parent=link,
                root_session_id=written.root_session_id,
                format=SEGMENTED,
                label=None if parent is None else child_label(),
                fork_turn_index=None if parent is None else _spawn_turn_number(conversation),
            )
            with unpublished_session(self._store, session_id) as tmp:
                _build_whole(tmp, manifest, written.commits)
            return tmp, manifest
        assert parent is not None
        at = conversation.inherited
        boundary = written.boundaries[at - 1] if at else 0
        parent_dir, parent_manifest = self._parent(parent.session_id)
        plan = _seed_plan(parent_dir, parent_manifest, boundary, fork_turn)
        origin = self._origin(conversation, parent)
        manifest = Manifest(
            session_id=session_id,
            title=conversation.title,
            kind="fork",
            created_at=created_at,
            parent=ParentLink(
                parent.session_id, "fork", fork_turn, boundary, parent_manifest.generation, origin
            ),
            root_session_id=written.root_session_id,
            seed_length=boundary,
            created_by_operation=_operation_id(session_id),
            format=SEGMENTED,
            label=imported_label(self._plan.format, conversation.origin),
            fork_turn_index=at + (1 if origin is not None else 0),
        )
        own_start = sum(1 for c in written.commits if c[-1]["seq"] <= boundary) if at else 0
        own = written.commits[own_start:]
        if written.fork_event is not None:
            written.fork_event["parentGeneration"] = parent_manifest.generation
        tracker = TurnTracker()
        for commit in written.commits[:own_start]:
            tracker.apply(commit)
        with unpublished_session(self._store, session_id) as tmp:
            manifest = build_seeded_child(
                tmp,
                manifest,
                plan,
                own[0],
                parent_dir / "blobs",
                later_commits=own[1:],
                tracker=tracker,
                durable=False,
                index_from=TURN_INDEX_FROM,
            )
        return tmp, manifest


def _spawn_turn_number(conversation: PlannedConversation) -> int:
    """The 1-based number of the parent's turn that spawned a child (0: none was found)."""
    return 0 if conversation.spawned_turn is None else conversation.spawned_turn + 1


def _operation_id(session_id: str) -> str:
    return f"import-{session_id}"


def _seed_plan(parent_dir: Path, parent: Manifest, boundary: int, turn_id: str | None) -> ForkPlan:
    """The fork's seeds: from the parent's turn index, else from one scan of its log."""
    if turn_id is None:
        return ForkPlan((), 0, 0, ())
    plan = plan_from_index(parent_dir, parent, boundary, turn_id)
    if plan is not None:
        return plan
    plan = plan_at_boundary(scan_session_log(parent_dir, parent), boundary)
    if plan is not None:
        return plan
    raise StaleSource(  # the parent was rewritten since it was imported
        f"session {parent.session_id} no longer ends turn {turn_id} at seq {boundary}",
        sessionId=parent.session_id,
        turnId=turn_id,
    )


def _build_whole(tmp: Path, manifest: Manifest, commits: list[list[Event]]) -> None:
    """A root's or child's unpublished folder: one segment, its turn index if big, the manifest.

    Written without an fsync (the batch's one sync makes them durable) and
    straight under their names (nobody can see the folder before its rename).
    """
    data = bytearray()
    frames = []
    for number, events in enumerate(commits, start=1):
        offset = len(data)
        data += encode_frame(number, events)
        frames.append((number, events, offset, len(data)))
    entries = []
    if len(data) >= TURN_INDEX_FROM:
        tracker = TurnTracker()
        for number, events, offset, end in frames:
            tracker.apply(events)
            found = entries_for(number, events, offset, end, frame_crc(data, offset), tracker)
            if found:
                entries.append((found, number))
    log_dir = tmp / manifest.log_dir
    log_dir.mkdir(mode=0o700)
    segment = log_dir / segment_name(1, 1)
    write_new(segment, data)
    if entries:
        for suffix, sidecar in sidecar_bytes(entries).items():
            write_new(segment.with_suffix(suffix), sidecar)
    write_new(tmp / "manifest.json", manifest_bytes(manifest))
