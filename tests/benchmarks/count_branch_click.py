"""Count the durable writes and log reads of ONE branch click through the real ``Host``.

    python tests/benchmarks/count_branch_click.py [--turns 3]

Headless (no Qt): a conversation with ``--turns`` finished turns is opened,
then its first turn is branched with ``Host.request_branch`` and the child's
tab is "opened" by a navigator that records it. Only the click is counted
(what each count means: ``tests/helpers/click_counts.py``). For comparison,
the same counts for one more streamed turn of such a conversation follow.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers.click_counts import count_branch_click, count_streamed_turn, counting  # noqa: E402


def main() -> None:
    """Print the counts of one click, then those of one streamed turn."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=3)
    args = parser.parse_args()
    with counting() as counts, tempfile.TemporaryDirectory() as tmp:
        title, click = asyncio.run(count_branch_click(Path(tmp), args.turns, counts))
    with counting() as counts, tempfile.TemporaryDirectory() as tmp:
        turn = asyncio.run(count_streamed_turn(Path(tmp), args.turns, counts))
    print(f"{'child title':>12}: {title}")
    for name, value in click.items():
        print(f"{name:>12}: {value}")
    print("one streamed turn: " + ", ".join(f"{name} {value}" for name, value in turn.items()))


if __name__ == "__main__":
    main()
