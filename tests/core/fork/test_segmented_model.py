"""Random interleavings of appends, rolls, forks (of forks), deletions, rewinds and torn tails.

Every session's projection, usage and fork targets must equal a reference model
that knows nothing of segments, seeds or links: a list of turns per session.
Small segments make the writer roll every few turns.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from helpers.forking import fork_at
from helpers.sessions import commits_of, complete_turn, log_file
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from branchwise.core.fork.targets import TargetsCache, fork_targets, targets_from_projection
from branchwise.core.log.frames import encode_frame
from branchwise.core.store.publish import replace_log
from branchwise.core.store.store import SessionStore, verify_session
from branchwise.core.store.trash import Trash


@dataclass
class Model:
    """Per session: its turns in order and the tokens each one counts (0 when inherited)."""

    turns: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    counter: int = 0

    def new_turn(self) -> str:
        self.counter += 1
        return f"turn{self.counter}"


OPS = st.lists(
    st.tuples(
        st.sampled_from(["append", "append", "fork", "fork", "delete", "torn", "rewind"]),
        st.integers(0, 1000),
        st.integers(0, 1000),
    ),
    min_size=3,
    max_size=14,
)


def _apply(store: SessionStore, model: Model, op: str, a: int, b: int) -> None:
    if not model.order:
        return
    session = model.order[a % len(model.order)]
    turns = model.turns[session]
    if op == "append":
        with store.open_writer(session) as writer:
            for _ in range(1 + b % 3):
                turn_id, tokens = model.new_turn(), 1 + b % 7
                complete_turn(writer, turn_id, f"q {turn_id} " * (b % 5), tokens=tokens)
                turns.append((turn_id, tokens))
    elif op == "fork" and turns:
        at = b % len(turns)
        child = fork_at(store, session, turns[at][0], op=f"op-{model.counter}-{a}-{b}")
        model.counter += 1
        model.turns[child.child_session_id] = [(t, 0) for t, _ in turns[: at + 1]]
        model.order.append(child.child_session_id)
    elif op == "delete" and len(model.order) > 1:
        trash = Trash(store)
        trash.trash(session)
        trash.purge(session)
        model.order.remove(session)
        del model.turns[session]
    elif op == "torn":
        # A torn commit comes from a writer, and every writer open first cuts the tail an
        # earlier crash left: two torn commits never lie back to back.
        with store.open_writer(session):
            pass
        with log_file(store.session_dir(session)).open("ab") as handle:
            frame = encode_frame(10**6, [{"seq": 10**6, "type": "turn/start", "turnId": "torn"}])
            handle.write(frame[: 1 + b % (len(frame) - 1)])  # a commit that never finished
    elif op == "rewind" and turns:
        keep = b % (len(turns) + 1)
        commits = commits_of_until_torn(store, session)
        closing = [
            n
            for n, commit in enumerate(commits)
            for e in commit
            if e["type"] == "turn/end" and e["turnId"] in {t for t, _ in turns[:keep]}
        ]
        # Keep everything through the commit closing the last kept turn (or the first
        # commits before any turn: session/created and, for a fork, its own first commit).
        first_turn = next(n for n, c in enumerate(commits) for e in c if e["type"] == "turn/start")
        cut = (max(closing) + 1) if closing else first_turn
        # A fork's own first commit (``session/fork``, which says where its seed ends) stays.
        own = next(
            (n + 1 for n, c in enumerate(commits) for e in c if e["type"] == "session/fork"), 0
        )
        cut = max(cut, own)
        inherited = next((n for n, (_, tokens) in enumerate(turns) if tokens), len(turns))
        if keep < inherited or (keep == 0 and store.manifest(session).seed_length):
            return  # a fork's inherited turns cannot be rewound away (its prefix is a seed)
        replace_log(store, session, commits[:cut])
        del turns[keep:]


def commits_of_until_torn(store: SessionStore, session: str) -> list[list[dict[str, object]]]:
    """Committed commits, tolerating a torn tail (the next writer cuts it)."""
    with store.open_writer(session):
        pass
    return commits_of(store, session)


def _check(store: SessionStore, model: Model) -> None:
    for session in model.order:
        snap = store.read(session)
        expected = model.turns[session]
        assert [t.turn_id for t in snap.projection.turns] == [t for t, _ in expected]
        tokens = sum(n for _, n in expected)
        assert (snap.projection.input_tokens, snap.projection.output_tokens) == (
            tokens,
            2 * tokens,
        )
        assert snap.scan.corruption is None
        report = verify_session(store, session)
        assert report["ok"], report
        full = targets_from_projection(snap.projection, snap.manifest)
        assert fork_targets(store, session) == full  # cold, from the turn index
        assert fork_targets(store, session, cache=TargetsCache()) == full


@settings(max_examples=35, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS, roll_bytes=st.sampled_from([500, 1500, 16 * 1024 * 1024]))
def test_random_histories_match_the_reference_model(
    ops: list[tuple[str, int, int]], roll_bytes: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = SessionStore(Path(tmp), roll_bytes=roll_bytes)
        model = Model()
        with store.create("root") as writer:
            model.order.append(writer.session_id)
            model.turns[writer.session_id] = []
        for op, a, b in ops:
            _apply(store, model, op, a, b)
        _check(store, model)
