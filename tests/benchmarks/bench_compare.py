"""Compare of two 500-turn branches with long answers: first paint, now and before, side by side.

    python tests/benchmarks/bench_compare.py [--runs 3] [--turns 500] [--before 2b9661e]

Two branches taken after a conversation's first turn each answer ``--turns``
prompts with a long Markdown answer (paragraphs with bold words, a list, a
table, a Python code block, a quote; ~1.6 KB), the two answers to each prompt
differing in a few words, as regenerations do. Measured on the UI thread,
from the host's answer in hand to the first screen of the view painted:

- now: ``CompareView`` (rows built a few at a time, answers rendered with
  the transcript's renderer, words diffed on the rendered text);
- before: the view as it was at ``--before`` (every row's word diff and the
  whole HTML of both columns in two ``QTextBrowser``s), loaded from git.

Both run in this one process, alternating, medians of ``--runs`` runs. The
host's read (off the UI thread) is reported too.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import report  # noqa: E402

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtWidgets import QApplication, QWidget  # noqa: E402

from branchwise.core.fork.engine import fork  # noqa: E402
from branchwise.core.fork.operations import ForkRequest  # noqa: E402
from branchwise.core.ids import new_id  # noqa: E402
from branchwise.core.projection import events as ev  # noqa: E402
from branchwise.core.store.store import SessionStore  # noqa: E402
from branchwise.desktop.host.conversation import ConversationRef  # noqa: E402
from branchwise.desktop.host.host import Host  # noqa: E402
from branchwise.desktop.host.operations import Compared  # noqa: E402
from branchwise.desktop.widgets.compare_view import CompareView  # noqa: E402
from branchwise.desktop.widgets.style import apply_style  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
BEFORE = "2b9661e"
TURNS_PER_COMMIT = 25

ANSWER = """Here is step {n}, worked through with a **{word}** approach and some care.

The first paragraph explains why the step matters, long enough to wrap twice in
a narrow column: it names the inputs, the expected output and the one mistake
people usually make when they do this by hand for the first time.

- check the inputs of step {n}
- keep the *{word}* variant only if it is faster
- write down what changed

| Case | Count | Note |
|------|------:|------|
| small | {n} | fine |
| large | 12 | {word} |

```python
def step_{n}(values: list[int]) -> int:
    total = 0
    for value in values:
        total += value * {n}  # {word}
    return total
```

A closing paragraph sums the step up and says what to try next, again long
enough that it wraps in a column of four hundred pixels or so.

## Why it works

Step {n} works because each value is visited once and the running total is
kept in one variable; the *{word}* variant does the same with fewer checks.
If the values arrive from a file, read them line by line rather than all at
once, so the memory used stays flat however long the file grows, and say in
the log how many lines were skipped because they did not parse as numbers.

1. read the values
2. multiply each by {n}
3. add them up and print the total

> Keep the inputs of step {n} beside the result: the next step reads both.

When in doubt, run the step on a small sample first and compare the total
with one worked out by hand; a difference there is cheaper to find than one
in the full run, and it usually points at the one line that is wrong.
"""


def build(root: Path, turns: int) -> tuple[str, str]:
    """A conversation of one turn and two branches after it of ``turns`` turns each."""
    store = SessionStore(root)
    with store.create("Benchmark") as writer:
        turn_id = new_id("turn")
        writer.commit([ev.turn_start(turn_id), ev.user_message(new_id("msg"), "Start")])
        writer.commit(
            [
                ev.assistant_message(new_id("msg"), "Started.", "demo"),
                ev.usage(1, 1, "demo"),
                ev.turn_end(turn_id, "completed"),
            ]
        )
        parent = writer.session_id
        generation = writer.manifest.generation
        boundary = writer.projection.turn(turn_id).boundary_sequence  # type: ignore[union-attr]
    branches = []
    for word in ("careful", "quick"):
        request = ForkRequest(parent, turn_id, boundary, generation)
        branch = fork(store, request, new_id("op"), title=f"Branch {word}").child_session_id
        with store.open_writer(branch) as writer:
            for first in range(0, turns, TURNS_PER_COMMIT):
                events = []
                for n in range(first, min(first + TURNS_PER_COMMIT, turns)):
                    tid = new_id("turn")
                    events += [
                        ev.turn_start(tid),
                        ev.user_message(new_id("msg"), f"How do I do step {n}?"),
                        ev.assistant_message(new_id("msg"), ANSWER.format(n=n, word=word), "demo"),
                        ev.usage(1, 1, "demo"),
                        ev.turn_end(tid, "completed"),
                    ]
                writer.commit(events)
        branches.append(branch)
    return branches[0], branches[1]


def load_before(commit: str) -> type[QWidget]:
    """The ``CompareView`` class as it was at ``commit`` (with its own row builder)."""

    def source(path: str) -> str:
        return subprocess.run(
            ["git", "-C", str(REPO), "show", f"{commit}:{path}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout

    rows = types.ModuleType("before_compare_rows")
    sys.modules["before_compare_rows"] = rows
    code = compile(source("desktop/host/compare_rows.py"), "before_compare_rows", "exec")
    exec(code, rows.__dict__)  # noqa: S102
    view_source = source("desktop/widgets/compare_view.py").replace(
        "from branchwise.desktop.host.compare_rows import", "from before_compare_rows import"
    )
    view = types.ModuleType("before_compare_view")
    sys.modules["before_compare_view"] = view
    exec(compile(view_source, "before_compare_view", "exec"), view.__dict__)  # noqa: S102
    return view.CompareView  # type: ignore[no-any-return]


def first_paint(app: QApplication, make: Callable[[], QWidget]) -> float:
    """Seconds from nothing to the view's first screen painted."""
    start = time.perf_counter()
    view = make()
    view.show()
    app.processEvents()
    view.grab()
    elapsed = time.perf_counter() - start
    view.close()
    view.deleteLater()
    app.processEvents()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--before", default=BEFORE)
    args = parser.parse_args()
    app = QApplication.instance() or QApplication([])
    assert isinstance(app, QApplication)
    apply_style(app)
    before_view = load_before(args.before)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "data"
        left, right = build(root, args.turns)
        host = Host(root)
        reads = []
        compared: Compared | None = None
        for _ in range(args.runs):
            start = time.perf_counter()
            compared = asyncio.run(
                host.operations.compare([ConversationRef(left), ConversationRef(right)])
            )
            reads.append(time.perf_counter() - start)
        assert compared is not None
        print(
            f"{args.turns} turns a side, {len(ANSWER):,}-character answers; "
            f"host read and align (off the UI thread): {statistics.median(reads) * 1000:.0f} ms"
        )
        ours, before = [], []
        for _ in range(args.runs):
            ours.append(first_paint(app, lambda: CompareView(compared, host)))
            before.append(
                first_paint(
                    app,
                    lambda: before_view(
                        compared.comparison, compared.common_title, compared.shared_turns
                    ),
                )
            )
        report(
            f"compare {args.turns}+{args.turns} turns, first paint (now vs before)",
            statistics.median(ours),
            statistics.median(before),
            1,
        )


if __name__ == "__main__":
    main()
