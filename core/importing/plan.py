"""The import planner: one source tree in, the Branchwise conversations it becomes out.

Every format's reader hands over a :class:`~branchwise.core.importing.source.SourceTree`;
this module applies the import rules to it once, for all formats, so the
repairs, the main path and the fork points never differ by format:

1. Hidden items (``kind=None``) are dropped; a visible item's parent becomes
   its nearest visible ancestor. A parent id that names no item makes a root
   (warning); a parent loop is cut at the item where the walk closed it
   (warning). Several roots (an edited first message in Open WebUI) are
   siblings under a virtual root: the main path starts at one of them and the
   others fork at the start.
2. The main path runs from its root to ``current`` (visible), else to the
   leaf :attr:`~branchwise.core.importing.source.SourceTree.main_rule` picks;
   it becomes the **root** conversation.
3. Every other leaf becomes a **fork**: each child that leaves a planned
   path (a *divergent* child) starts one, continuing to the newest leaf below
   it; forks are planned in the order of their divergent child's time
   (a parent always before its forks), and a fork's parent is the
   conversation whose own part it left.
4. Items are grouped into turns: a turn starts at every user item. Assistant
   or tool items before the first user item form a first turn with no prompt
   (the answer of a conversation that opened with the assistant speaking).
   The fork point is the number of whole turns the fork shares with its
   parent (equal item ids): a user-prompt sibling (an edit) forks after the
   answer before it; an answer sibling (a regeneration) forks at the end of
   the previous turn and the fork's first own turn repeats the prompt; with no
   shared turn the fork is **at the start** (nothing inherited). The fork's
   ``origin`` says which of the two it was, for the parent's turn menu.
5. Child trees (sub-agents) are planned the same way and become **child**
   conversations of the conversation that holds, in its own turns, the item
   whose ``spawns`` names them.

The planner is pure: no store, no ids of its own. Times may be ``None``; an
item without a time sorts before every timed sibling, in source order.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from branchwise.core.conversation.names import branch_title, title_from_prompt
from branchwise.core.importing.source import SourceItem, SourceTree

ConversationKind = Literal["root", "fork", "child"]
OriginKind = Literal["edit", "regenerate"]

_VIRTUAL = "\x00virtual-root"
"""The parent of every root, so several roots are siblings like any others."""


@dataclass(frozen=True, slots=True)
class PlannedTurn:
    """One turn: a user item (absent for a first turn without prompt) and what answered it."""

    items: tuple[SourceItem, ...]

    @property
    def ids(self) -> tuple[str, ...]:
        """The source ids of its items, the turn's identity when comparing paths."""
        return tuple(item.id for item in self.items)

    @property
    def prompt(self) -> SourceItem | None:
        """The user item that opened it, if any."""
        first = self.items[0]
        return first if first.kind == "user" else None


@dataclass(frozen=True, slots=True)
class PlannedConversation:
    """One conversation to publish.

    Attributes:
        kind: ``root``, ``fork`` or ``child``.
        source_id: the source's id for it: the tree id for a root or child,
            ``<tree id>/<leaf id>`` for a fork (the report's ``source.id``).
        tree_id: the source tree it comes from.
        title: the source tree's title (its first prompt when it has none);
            for a fork, "<parent's title> (branch N)", as a branch made here.
        created: when it began in the source (the divergent item's time for
            a fork; the tree's creation time otherwise); ``None`` if unknown.
        turns: every turn of its path, inherited ones first.
        parent: index of its parent in :attr:`ImportPlan.conversations`.
        inherited: how many leading turns a fork inherits (0: fork at the start).
        origin: ``edit``/``regenerate`` when the fork asks the parent's turn
            ``inherited + 1`` again, else ``None``.
        spawned_turn: for a child, the index into the parent's :attr:`turns`
            of the turn that spawned it (``None``: no spawning item was found).
        spawned_call: for a child, the spawning tool call's id.
        leaf: the source id of its last item.
    """

    kind: ConversationKind
    source_id: str
    tree_id: str
    title: str
    created: float | None
    turns: tuple[PlannedTurn, ...]
    parent: int | None = None
    inherited: int = 0
    origin: OriginKind | None = None
    spawned_turn: int | None = None
    spawned_call: str | None = None
    leaf: str = ""

    @property
    def own_turns(self) -> tuple[PlannedTurn, ...]:
        """The turns this conversation writes itself (after what it inherits)."""
        return self.turns[self.inherited :]


@dataclass(frozen=True, slots=True)
class ImportPlan:
    """What one source tree becomes: conversations, parents first.

    Attributes:
        format: the source format.
        tree_id: the source tree's id.
        main_leaf: the leaf of the main path: the version of the tree this
            plan was made from (a later export of a continued conversation
            has another one and imports as a new tree).
        conversations: root first; every parent before its forks and children.
        warnings: repairs made (dangling parents, loops, unplaced children).
    """

    format: str
    tree_id: str
    main_leaf: str | None
    conversations: tuple[PlannedConversation, ...]
    warnings: tuple[str, ...] = ()


def group_turns(path: Iterable[SourceItem]) -> tuple[PlannedTurn, ...]:
    """Split a path into turns: a new turn at every user item (see module docstring)."""
    turns: list[PlannedTurn] = []
    current: list[SourceItem] = []
    for item in path:
        if item.kind == "user" and current:
            turns.append(PlannedTurn(tuple(current)))
            current = []
        current.append(item)
    if current:
        turns.append(PlannedTurn(tuple(current)))
    return tuple(turns)


class _Tree:
    """The repaired, visible-only tree of one source tree."""

    def __init__(self, tree: SourceTree, warnings: list[str]) -> None:
        where = tree.location or tree.id
        self.by_id: dict[str, SourceItem] = {}
        self.order: dict[str, int] = {}
        for item in tree.items:
            if item.id in self.by_id:
                warnings.append(f"{where}: item {item.id} appears twice; the first is kept")
                continue
            self.order[item.id] = len(self.order)
            self.by_id[item.id] = item
        parent = self._repaired_parents(where, warnings)
        visible_parent = self._visible_parents(parent)
        self.parent: dict[str, str] = {}
        self.children: dict[str, list[str]] = {_VIRTUAL: []}
        for item_id, item in self.by_id.items():
            if item.kind is None:
                continue
            above = visible_parent[item_id]
            self.parent[item_id] = above
            self.children.setdefault(above, []).append(item_id)
            self.children.setdefault(item_id, [])
        for siblings in self.children.values():
            siblings.sort(key=self.time_key)
        self.newest_leaf = self._newest_leaves()

    def time_key(self, item_id: str) -> tuple[float, int]:
        """Sort key: time (unknown sorts first), then source order."""
        time = self.by_id[item_id].time
        return (float("-inf") if time is None else time, self.order[item_id])

    def _repaired_parents(self, where: str, warnings: list[str]) -> dict[str, str | None]:
        """Parent ids with dangling ones made roots and every loop cut once."""
        parent: dict[str, str | None] = {}
        for item_id, item in self.by_id.items():
            above = item.parent
            if above is not None and above not in self.by_id:
                warnings.append(f"{where}: item {item_id} names a missing parent; it is a root")
                above = None
            parent[item_id] = above
        done: set[str] = set()
        for start in self.by_id:
            path: list[str] = []
            on_path: set[str] = set()
            node: str | None = start
            while node is not None and node not in done:
                if node in on_path:
                    warnings.append(f"{where}: the parents of item {node} loop; the loop is cut")
                    parent[node] = None
                    break
                path.append(node)
                on_path.add(node)
                node = parent[node]
            done.update(path)
        return parent

    def _visible_parents(self, parent: dict[str, str | None]) -> dict[str, str]:
        """Each item's nearest visible proper ancestor (the virtual root if none)."""
        nearest: dict[str, str] = {}  # nearest visible ancestor-or-self, per item

        def resolve(item_id: str | None) -> str:
            chain: list[str] = []
            while item_id is not None and item_id not in nearest:
                if self.by_id[item_id].kind is not None:
                    nearest[item_id] = item_id
                    break
                chain.append(item_id)
                item_id = parent[item_id]
            found = _VIRTUAL if item_id is None else nearest[item_id]
            for hidden in chain:
                nearest[hidden] = found
            return found

        return {item_id: resolve(parent[item_id]) for item_id in self.by_id}

    def _newest_leaves(self) -> dict[str, str]:
        """For every visible item (and the virtual root), the newest leaf below it."""
        newest: dict[str, str] = {}
        order: list[str] = []
        stack = [_VIRTUAL]
        while stack:
            node = stack.pop()
            order.append(node)
            stack.extend(self.children.get(node, ()))
        for node in reversed(order):
            below = self.children.get(node, ())
            if not below:
                newest[node] = node
            else:
                newest[node] = max((newest[c] for c in below), key=self.time_key)
        return newest

    def path_to(self, leaf: str) -> list[SourceItem]:
        """The items from the root down to ``leaf``."""
        path = []
        node = leaf
        while node != _VIRTUAL:
            path.append(self.by_id[node])
            node = self.parent[node]
        path.reverse()
        return path

    def main_leaf(self, tree: SourceTree) -> str | None:
        """Where the main path ends (rule 2)."""
        if not self.children[_VIRTUAL]:
            return None
        current = tree.current
        if current is not None and current in self.parent:
            return current
        if tree.main_rule == "newest_sibling":
            node = _VIRTUAL
            while self.children[node]:
                node = max(self.children[node], key=self.time_key)
            return node
        return self.newest_leaf[_VIRTUAL]


def _first_prompt_title(turns: tuple[PlannedTurn, ...]) -> str:
    """The title an untitled source conversation gets: its first prompt, as a turn titles one."""
    prompt = next((turn.prompt for turn in turns if turn.prompt is not None), None)
    return title_from_prompt(prompt.text) if prompt is not None else ""


def _shared_turns(a: tuple[PlannedTurn, ...], b: tuple[PlannedTurn, ...]) -> int:
    shared = 0
    for left, right in zip(a, b, strict=False):
        if left.ids != right.ids:
            break
        shared += 1
    return shared


def _origin(fork: PlannedConversation, parent: PlannedConversation) -> OriginKind | None:
    at = fork.inherited
    if at >= len(parent.turns):
        return None
    mine, theirs = fork.turns[at].prompt, parent.turns[at].prompt
    if mine is None or theirs is None:
        return None
    return "regenerate" if mine.id == theirs.id else "edit"


def plan_tree(tree: SourceTree) -> ImportPlan:
    """Plan the conversations of one source tree and of its child trees (rules 1–5)."""
    warnings: list[str] = []
    conversations = _plan_one(tree, "root", warnings)
    main_leaf = conversations[0].leaf if conversations else None
    if conversations:
        _place_children(tree, conversations, warnings)
    return ImportPlan(tree.format, tree.id, main_leaf, tuple(conversations), tuple(warnings))


def _plan_one(
    tree: SourceTree, kind: ConversationKind, warnings: list[str]
) -> list[PlannedConversation]:
    """The root (or child) conversation of ``tree`` and all its forks, parents first."""
    shape = _Tree(tree, warnings)
    main_leaf = shape.main_leaf(tree)
    if main_leaf is None:
        return []
    main_path = shape.path_to(main_leaf)
    main_turns = group_turns(main_path)
    conversations = [
        PlannedConversation(
            kind=kind,
            source_id=tree.id,
            tree_id=tree.id,
            title=tree.title or _first_prompt_title(main_turns),
            created=tree.created if tree.created is not None else main_path[0].time,
            turns=main_turns,
            leaf=main_leaf,
        )
    ]
    paths = [main_path]
    # (divergent child's time key, tie-break, owning conversation, divergent child)
    pending: list[tuple[tuple[float, int], int, int, str]] = []
    counter = 0
    forks_of: dict[int, int] = {}  # conversation index -> forks planned off it so far

    def diverging(owner: int, path: list[SourceItem], own_from: int) -> None:
        nonlocal counter
        # Only the main path owns the other roots: a fork of one of them owns its own part.
        nodes = [_VIRTUAL] if owner == 0 else []
        nodes += [item.id for item in path[own_from:]]
        on_path = {item.id for item in path}
        for node in nodes:
            for child in shape.children[node]:
                if child not in on_path:
                    counter += 1
                    heapq.heappush(pending, (shape.time_key(child), counter, owner, child))

    diverging(0, main_path, 0)
    while pending:
        _, _, owner, child = heapq.heappop(pending)
        leaf = shape.newest_leaf[child]
        path = shape.path_to(leaf)
        parent = conversations[owner]
        turns = group_turns(path)
        inherited = min(_shared_turns(turns, parent.turns), len(turns) - 1)
        forks_before = forks_of.get(owner, 0)
        forks_of[owner] = forks_before + 1
        fork = PlannedConversation(
            kind="fork",
            source_id=f"{tree.id}/{leaf}",
            tree_id=tree.id,
            title=branch_title(parent.title, forks_before) or "",
            created=shape.by_id[child].time,
            turns=turns,
            parent=owner,
            inherited=inherited,
            leaf=leaf,
        )
        conversations.append(dataclasses.replace(fork, origin=_origin(fork, parent)))
        paths.append(path)
        own_from = next(i for i, item in enumerate(path) if item.id == child)
        diverging(len(conversations) - 1, path, own_from)
    return conversations


def _place_children(
    tree: SourceTree, conversations: list[PlannedConversation], warnings: list[str]
) -> None:
    """Append the child trees' conversations, each under the turn that spawned it (rule 5)."""
    spawner: dict[str, tuple[int, int | None, str | None]] = {}
    for index, conversation in enumerate(conversations):
        for turn_index, turn in enumerate(conversation.turns):
            if turn_index < conversation.inherited:
                continue
            for item in turn.items:
                if item.spawns is not None and item.spawns not in spawner:
                    spawner[item.spawns] = (index, turn_index, item.call_id or item.id)
    for child_tree in tree.children:
        child = _plan_one(child_tree, "child", warnings)
        if not child:
            warnings.append(f"{child_tree.location or child_tree.id}: sub-agent has no messages")
            continue
        found = spawner.get(child_tree.id)
        if found is None:
            warnings.append(
                f"{child_tree.location or child_tree.id}: no tool call spawned this sub-agent; "
                "it is a child of the conversation's start"
            )
        parent_index, spawned_turn, call = found if found is not None else (0, None, None)
        offset = len(conversations)
        for position, planned in enumerate(child):
            if position == 0:
                placed = dataclasses.replace(
                    planned, parent=parent_index, spawned_turn=spawned_turn, spawned_call=call
                )
            else:
                placed = dataclasses.replace(planned, parent=offset + int(planned.parent or 0))
            conversations.append(placed)
        if child_tree.children:
            _place_children(child_tree, conversations, warnings)
