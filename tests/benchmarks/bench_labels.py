"""Branch labels in ``session list``: what computing them costs, side by side with the bare list.

    python tests/benchmarks/bench_labels.py [--branches 1000] [--turns 10] [--repeat 5]

Builds a root of ``--turns`` turns and ``--branches`` real forks of it (a
third edits, a third regenerations, a third plain branches, each at a
random turn), published with their labels as the app and the CLI publish
them. Then, in one run, times:

* the list before labels: every manifest read, sorted, printed (what
  ``session list`` did);
* ``session list`` now, labels stored (``label``, ``labelParts``,
  ``forkTurnIndex`` rendered from each manifest);
* ``session list`` of the same branches as a build before labels wrote them
  (no label or fork turn stored: regenerations numbered among their
  siblings, each fork turn counted from the branch's log).

Prints the median of ``--repeat`` runs of each and the ratios to the first.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers.sessions import session_with_turns  # noqa: E402

from branchwise.core.conversation.ask_again import edit_request, regenerate_request  # noqa: E402
from branchwise.core.conversation.names import new_branch_label  # noqa: E402
from branchwise.core.conversation.views import session_list  # noqa: E402
from branchwise.core.errors import BranchwiseError  # noqa: E402
from branchwise.core.fork.engine import fork  # noqa: E402
from branchwise.core.fork.operations import ForkRequest  # noqa: E402
from branchwise.core.fork.targets import fork_targets  # noqa: E402
from branchwise.core.store.manifest import BranchLabel, Manifest  # noqa: E402
from branchwise.core.store.store import SessionStore  # noqa: E402


def build(store: SessionStore, branches: int, turns: int, seed: int) -> str:
    """A root and ``branches`` labelled forks of it; the root's id."""
    rng = random.Random(seed)
    root = session_with_turns(store, turns, title="Explain git branches briefly")
    targets = fork_targets(store, root)
    turn_ids = [t.turn_id for t in targets.targets]
    regenerated: dict[str, int] = {}
    for n in range(branches):
        at = rng.randrange(turns)
        kind = n % 3
        if kind == 0:
            request = edit_request(store, root, turn_ids[at], f"an edited question {n}")
        elif kind == 1:
            request = regenerate_request(store, root, turn_ids[at])
        else:
            target = targets.targets[at]
            request = ForkRequest(
                root, target.turn_id, target.boundary_sequence or 0, targets.generation
            )
        origin = request.origin
        turn = at + 1
        label = new_branch_label(origin, [])
        if origin is not None and origin.kind == "regenerate":  # numbered per turn, as names does
            earlier = regenerated.get(origin.turn_id, 0)
            regenerated[origin.turn_id] = earlier + 1
            label = BranchLabel("regenerate", number=earlier + 2)
        fork(
            store,
            request,
            f"op-{n}",
            title=f"Explain git branches briefly (branch {n + 1})",
            label=label,
            fork_turn_index=turn,
        )
    return root


def before_labels(store: SessionStore) -> bytes:
    """``session list`` as it was before labels."""
    readable, damaged = [], []
    for item in store.iter_manifests():
        if isinstance(item, BranchwiseError):
            damaged.append(item.to_json()["error"])
        else:
            readable.append(item)
    readable.sort(key=lambda m: (m.created_at, m.session_id), reverse=True)
    return orjson.dumps({"sessions": [m.to_json() for m in readable], "damaged": damaged})


def with_labels(store: SessionStore) -> bytes:
    return orjson.dumps(session_list(store))


def strip_labels(store: SessionStore) -> None:
    """Rewrite every manifest as a build before labels wrote it."""
    for item in store.iter_manifests():
        if isinstance(item, Manifest):
            directory = store.session_dir(item.session_id)
            data = orjson.loads((directory / "manifest.json").read_bytes())
            data.pop("labelParts", None)
            data.pop("forkTurnIndex", None)
            (directory / "manifest.json").write_bytes(orjson.dumps(data))


def median_ms(action: object, store: SessionStore, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action(store)  # type: ignore[operator]
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--branches", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = SessionStore(Path(tmp) / "root")
        started = time.perf_counter()
        build(store, args.branches, args.turns, args.seed)
        print(f"built {args.branches} branches in {time.perf_counter() - started:.1f} s")
        before = median_ms(before_labels, store, args.repeat)
        stored = median_ms(with_labels, store, args.repeat)
        strip_labels(store)
        computed = median_ms(with_labels, store, args.repeat)
        print(f"session list before labels:        {before:8.1f} ms  1.00x")
        print(f"session list, labels stored:       {stored:8.1f} ms  {stored / before:.2f}x")
        print(f"session list, labels computed:     {computed:8.1f} ms  {computed / before:.2f}x")


if __name__ == "__main__":
    main()
