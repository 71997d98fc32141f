"""A conversation family with every kind of member the branch map draws."""

from __future__ import annotations

from dataclasses import dataclass

from branchwise.core.conversation.ask_again import edit_request, regenerate_request
from branchwise.core.conversation.merge import merge_back
from branchwise.core.fork.engine import fork
from branchwise.core.lineage import create_child
from branchwise.core.store.store import SessionStore
from branchwise.core.store.trash import Trash
from helpers.forking import fork_at
from helpers.sessions import complete_turn, log_file


@dataclass(frozen=True)
class MapFamily:
    """root (r1 r2 r3); plain = fork at r1 + p1 p2, merged back; edit = edit of r2 + e1;
    regen = regenerate of r3 + g1; child = child conversation at r2 + c1; damaged = fork at
    r2 + d1 with a corrupt log; trashed = fork at r3, in the Trash; nested = fork of plain at p1.
    """

    root: str
    plain: str
    edit: str
    regen: str
    child: str
    damaged: str
    trashed: str
    nested: str


def build_map_family(store: SessionStore) -> MapFamily:
    """Write the family (every member closed)."""
    with store.create("Trip") as writer:
        for turn in ("r1", "r2", "r3"):
            complete_turn(writer, turn, f"ask {turn}")
        root = writer.session_id
    plain = fork_at(store, root, "r1", op="op-plain").child_session_id
    with store.open_writer(plain) as writer:
        complete_turn(writer, "p1", "ask p1")
        complete_turn(writer, "p2", "ask p2")
    nested = fork_at(store, plain, "p1", op="op-nested").child_session_id
    edit = fork(store, edit_request(store, root, "r2", "ask r2 otherwise"), "op-edit")
    with store.open_writer(edit.child_session_id) as writer:
        complete_turn(writer, "e1", "ask r2 otherwise")
    regen = fork(store, regenerate_request(store, root, "r3"), "op-regen")
    with store.open_writer(regen.child_session_id) as writer:
        complete_turn(writer, "g1", "ask r3")
    child = create_child(store, root, {"turnId": "r2"}, "Side question").child_session_id
    with store.open_writer(child) as writer:
        complete_turn(writer, "c1", "side")
    damaged = fork_at(store, root, "r2", op="op-damaged").child_session_id
    with store.open_writer(damaged) as writer:
        complete_turn(writer, "d1", "ask d1")
    trashed = fork_at(store, root, "r3", op="op-trashed").child_session_id
    Trash(store).trash(trashed)
    merge_back(store, plain, root, "what p found", "answer", "op-merge")
    log = log_file(store.session_dir(damaged))
    data = bytearray(log.read_bytes())
    data[len(data) // 2] ^= 0xFF
    log.write_bytes(bytes(data))
    return MapFamily(
        root, plain, edit.child_session_id, regen.child_session_id, child, damaged, trashed, nested
    )
