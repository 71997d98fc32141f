"""A family of alternatives at one turn, written to a real data folder, and what a test reads.

The root "Trip" has three turns; a plain branch taken at turn 1 asked its
own turn 2, and an edit of turn 2 (which forks after turn 1 too) was
answered: turn 2 has three alternatives, the original first.
"""

from __future__ import annotations

from dataclasses import dataclass

from branchwise.core.conversation.ask_again import edit_request
from branchwise.core.conversation.names import new_branch_name_from_store
from branchwise.core.fork.engine import fork
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.fork.targets import fork_targets
from branchwise.core.ids import new_id
from branchwise.core.projection import events as ev
from branchwise.core.providers.demo import DEMO_MODEL
from branchwise.core.store.store import SessionStore
from branchwise.desktop.widgets.conversation_tab import ConversationTab
from branchwise.desktop.widgets.turn_widget import TurnWidget
from helpers.gui import seed_session


@dataclass(frozen=True)
class Family:
    """The root, its turn ids, a plain branch at turn 1 and an edit of turn 2."""

    root: str
    turns: tuple[str, ...]
    plain: str
    edit: str


def add_turn(store: SessionStore, session_id: str, question: str) -> str:
    """Commit one finished turn to a session, as the runner does; its turn id."""
    turn_id, step = new_id("turn"), new_id("step")
    with store.open_writer(session_id) as writer:
        writer.commit(
            [ev.turn_start(turn_id), ev.user_message(new_id("msg"), question), ev.step_start(step)]
        )
        writer.commit(
            [
                ev.assistant_message(new_id("msg"), f"About {question}", DEMO_MODEL),
                ev.step_end(step),
                ev.turn_end(turn_id, "completed"),
            ]
        )
    return turn_id


def finish_asked_turn(store: SessionStore, session_id: str) -> None:
    """Answer the turn an edit published already asked (as its runner would)."""
    snapshot = store.read(session_id)
    open_turn = snapshot.projection.open_turn
    assert open_turn is not None
    with store.open_writer(session_id, continue_turn=open_turn.turn_id) as writer:
        writer.commit(
            [
                ev.assistant_message(new_id("msg"), "A cheap hostel.", DEMO_MODEL),
                ev.turn_end(open_turn.turn_id, "completed"),
            ]
        )


def named_fork(store: SessionStore, request: ForkRequest, operation_id: str) -> str:
    """Fork as the app and the CLI do: titled, labelled, its fork turn stored."""
    name = new_branch_name_from_store(
        store, request.source_session_id, request.turn_id, request.origin
    )
    return fork(
        store,
        request,
        operation_id,
        title=name.title,
        label=name.label,
        fork_turn_index=name.fork_turn_index,
    ).child_session_id


def make_family(store: SessionStore) -> Family:
    root = seed_session(store, ["Plan a trip", "Where to stay?", "What to eat?"], title="Trip")
    answer = fork_targets(store, root)
    turns = tuple(target.turn_id for target in answer.targets)
    first = answer.targets[0]
    assert first.boundary_sequence is not None
    at_first = ForkRequest(root, first.turn_id, first.boundary_sequence, answer.generation)
    plain = named_fork(store, at_first, "op-plain")
    add_turn(store, plain, "Where to camp?")
    edit = named_fork(
        store, edit_request(store, root, turns[1], "Where to stay cheaply?"), "op-edit"
    )
    finish_asked_turn(store, edit)
    return Family(root, turns, plain, edit)


def counter_of(widget: TurnWidget | None) -> str | None:
    if widget is None or widget.alternatives.isHidden():
        return None
    return widget.alternatives.counter.text()


def landed_number(tab: ConversationTab | None) -> int | None:
    landed = tab.transcript.landed if tab is not None else None
    return landed.row.index if landed is not None else None
