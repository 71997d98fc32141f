"""Random histories: the projection through the snapshot always equals a full replay.

Appends (writer opens that resume after a snapshot and write the next one),
rolls (small segments), forks at random turns (of forks), torn tails, and
snapshots deleted or damaged between steps. After every step, every session
read through its snapshot, and every writer's live projection, equal a
replay of the whole log; and the sessions' turns follow the same reference
model as ``tests/core/fork/test_segmented_model.py`` (a list of turns each).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from helpers.forking import fork_at
from helpers.sessions import complete_turn, log_file
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from branchwise.core.projection.snapshot_cache import SNAPSHOT_FILE, wait_for_snapshots
from branchwise.core.store.store import SessionStore, verify_session


@dataclass
class Model:
    """Per session: its turn ids in order."""

    turns: dict[str, list[str]] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    counter: int = 0


OPS = st.lists(
    st.tuples(
        st.sampled_from(["append", "append", "append", "fork", "torn", "spoil", "drop"]),
        st.integers(0, 1000),
        st.integers(0, 1000),
    ),
    min_size=3,
    max_size=12,
)


def _apply(store: SessionStore, model: Model, op: str, a: int, b: int) -> None:
    session = model.order[a % len(model.order)]
    turns = model.turns[session]
    snapshot = store.session_dir(session) / store.manifest(session).log_dir / SNAPSHOT_FILE
    if op == "append":
        with store.open_writer(session) as writer:
            assert writer.projection == store.read(session).projection
            for _ in range(1 + b % 4):
                model.counter += 1
                turn = f"turn{model.counter}"
                complete_turn(writer, turn, "words " * (b % 30), tokens=1 + b % 5)
                turns.append(turn)
        wait_for_snapshots()
    elif op == "fork" and turns:
        at = b % len(turns)
        child = fork_at(store, session, turns[at], op=f"op-{model.counter}-{a}-{b}")
        model.counter += 1
        model.turns[child.child_session_id] = turns[: at + 1]
        model.order.append(child.child_session_id)
    elif op == "torn":
        with log_file(store.session_dir(session)).open("ab") as handle:
            handle.write(b"\xffBW\x01\x05\x00\x00\x00")  # a header that never finished
    elif op == "spoil" and snapshot.is_file():
        data = bytearray(snapshot.read_bytes())
        data[b % len(data)] ^= 1 << (a % 8)
        snapshot.write_bytes(bytes(data))
    elif op == "drop":
        snapshot.unlink(missing_ok=True)


def _check(store: SessionStore, model: Model) -> None:
    for session in model.order:
        quick = store.read(session, every_frame=False)
        full = store.read(session)
        assert quick.projection == full.projection
        assert quick.scan.corruption is None and full.scan.corruption is None
        assert [t.turn_id for t in full.projection.turns] == model.turns[session]
        report = verify_session(store, session)
        assert report["ok"], report
        assert {f["code"] for f in report["findings"]} <= {
            "torn_tail",
            "log_tail_cut",
            "snapshot_unused",
        }


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS, roll_bytes=st.sampled_from([400, 1500, 16 * 1024 * 1024]))
def test_projection_via_snapshot_equals_full_replay(
    ops: list[tuple[str, int, int]], roll_bytes: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = SessionStore(Path(tmp), roll_bytes=roll_bytes, snapshot_bytes=0)
        model = Model()
        with store.create("root") as writer:
            model.order.append(writer.session_id)
            model.turns[writer.session_id] = []
        for op, a, b in ops:
            _apply(store, model, op, a, b)
            _check(store, model)
