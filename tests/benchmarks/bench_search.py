"""Search benchmarks: query latency, index size, build time, per-turn indexing cost.

    python tests/benchmarks/bench_search.py [--conversations 5000] [--messages 1000000]
        [--branched 0.2] [--queries 200] [--turns 200] [--seed 1]

Builds a data root of ``--conversations`` sessions holding ``--messages``
messages in all (mixed English and Chinese, code-like fragments included),
``--branched`` of them forks that inherit a prefix of their parent with the
same message ids, plus one message inherited by 10 branches. Logs are
written directly as frames (``encode_frame``), as ``common.py`` does.

Reports: the time to build the index from scratch (``catch_up_all``); index
size against log size; search p50/p99 over ``--queries`` mixed queries
(English words, prefixes, two words, one and two Han characters, longer
Chinese phrases; target p99 <= 100 ms); the cost of catching the index up
after each committed turn against that turn's commit time (target <= 5 %);
and the hits for the message inherited by 10 branches (1 hit, alsoIn 10).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from branchwise.core import SessionStore
from branchwise.core.ids import new_session_id
from branchwise.core.log.frames import encode_frame
from branchwise.core.projection import events as ev
from branchwise.core.search.index import INDEX_NAME, SearchIndex
from branchwise.core.store.manifest import Manifest, ParentLink

ENGLISH = (  # noqa: SIM905 (a word list reads better as one string)
    "branch conversation model answer question travel python function return value "
    "market garden river mountain station ticket window coffee morning evening "
    "history science engine compiler database index search result memory network "
    "weather summer winter holiday museum library kitchen recipe flavour journey "
    "contract invoice budget forecast report meeting project deadline feature release"
).split()
HAN = (
    "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说"
    "产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点"
    "从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原"
    "北京臺灣台湾東东學习習書书車车門门馬马風风雲云語语"
).replace(" ", "")
HOT_WORD = "zyzzyvaquokka"


def english(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(ENGLISH) for _ in range(words)).capitalize() + "."


def chinese(rng: random.Random, chars: int) -> str:
    return "".join(rng.choice(HAN) for _ in range(chars)) + "。"


def text(rng: random.Random) -> str:
    pick = rng.random()
    if pick < 0.45:
        return english(rng, rng.randint(6, 18))
    if pick < 0.8:
        return chinese(rng, rng.randint(8, 40))
    if pick < 0.9:
        return f"def {rng.choice(ENGLISH)}_{rng.choice(ENGLISH)}(x): return x  # {english(rng, 4)}"
    return english(rng, 5) + " " + chinese(rng, 10)


class Builder:
    """Writes sessions straight to disk as frames (no per-commit fsync)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "sessions").mkdir(parents=True, mode=0o700)
        self.log_bytes = 0
        self.messages = 0
        self.clock = time.time()

    def write(
        self,
        title: str,
        turns: list[tuple[str, str, str, str, str]],  # turn id, user id, user, answer id, answer
        parent: tuple[str, str, str] | None = None,  # parent id, turn id, root id
    ) -> str:
        session_id = new_session_id()
        directory = self.root / "sessions" / session_id
        directory.mkdir(mode=0o700)
        self.clock += 0.001
        manifest = Manifest(
            session_id=session_id,
            title=title,
            created_at=self.clock,
            kind="root" if parent is None else "fork",
            parent=None if parent is None else ParentLink(parent[0], "fork", parent[1], 1, 1),
            root_session_id=None if parent is None else parent[2],
        )
        # The manifest's own bytes, without the fsync of save_manifest: this is a fixture.
        (directory / "manifest.json").write_bytes(orjson.dumps(manifest.to_json()))
        seq = commit = 0
        chunks: list[bytes] = []

        def frame(events: list[dict[str, Any]]) -> None:
            nonlocal seq, commit
            commit += 1
            stamped = []
            for event in events:
                seq += 1
                stamped.append({"seq": seq, "ts": 1.0, **event})
            chunks.append(encode_frame(commit, stamped))

        frame([ev.session_created(title, "root" if parent is None else "fork")])
        for turn_id, user_id, user, answer_id, answer in turns:
            frame([ev.turn_start(turn_id), ev.user_message(user_id, user)])
            frame(
                [
                    ev.assistant_message(answer_id, answer, "demo"),
                    ev.turn_end(turn_id, "completed"),
                ]
            )
            self.messages += 2
        data = b"".join(chunks)
        (directory / "events.log").write_bytes(data)
        self.log_bytes += len(data)
        return session_id


def build_root(
    root: Path, conversations: int, messages: int, branched: float, seed: int
) -> Builder:
    rng = random.Random(seed)
    builder = Builder(root)
    turns_each = max(1, messages // conversations // 2)
    made: list[tuple[str, list[tuple[str, str, str, str, str]]]] = []
    counter = 0
    for _ in range(conversations):
        own = []
        for _ in range(turns_each):
            counter += 1
            own.append(
                (f"turn_{counter}", f"msg_u{counter}", text(rng), f"msg_a{counter}", text(rng))
            )
        if made and rng.random() < branched:
            parent_id, parent_turns = rng.choice(made)
            cut = rng.randint(1, len(parent_turns))
            turns = parent_turns[:cut] + own[: max(0, turns_each - cut)]
            session_id = builder.write(
                f"{english(rng, 2)} (branch)", turns, (parent_id, turns[0][0], parent_id)
            )
        else:
            turns = own
            session_id = builder.write(english(rng, 3), turns)
            made.append((session_id, turns))
    hot = [("turn_hot", "msg_hot", f"the {HOT_WORD} question", "msg_hot_a", "an answer")]
    hot_id = builder.write("hot", hot)
    for _ in range(10):
        builder.write("hot (branch)", hot, (hot_id, "turn_hot", hot_id))
    return builder


def queries(count: int, seed: int) -> list[str]:
    rng = random.Random(seed + 1)
    kinds = [
        lambda: rng.choice(ENGLISH),
        lambda: rng.choice(ENGLISH)[:4],
        lambda: f"{rng.choice(ENGLISH)} {rng.choice(ENGLISH)}",
        lambda: rng.choice(HAN),
        lambda: rng.choice(HAN) + rng.choice(HAN),
        lambda: "".join(rng.choice(HAN) for _ in range(3)),
        lambda: rng.choice(["北京", "臺", "台湾", "學習"]),
        lambda: rng.choice(ENGLISH).upper(),
    ]
    return [kinds[n % len(kinds)]() for n in range(count)]


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=5000)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--branched", type=float, default=0.2)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--turns", type=int, default=200, help="turns for the per-turn cost")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--data",
        type=Path,
        help="keep the generated data root here and reuse it on the next run (same sizes)",
    )
    parser.add_argument(
        "--keep-index", action="store_true", help="with --data: search the index already built"
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        root = args.data if args.data is not None else Path(tmp) / "root"
        run(root, args)


def generated(root: Path, args: argparse.Namespace) -> tuple[int, int]:
    """``(messages, log bytes)`` of the data root, generated unless an earlier run left it."""
    marker = root / "bench-data.json"
    wanted = [args.conversations, args.messages, args.branched, args.seed]
    if marker.is_file():
        kept = json.loads(marker.read_text())
        if kept["sizes"] == wanted:
            print(f"data: reused {root}")
            return kept["messages"], kept["logBytes"]
    if root.exists():
        shutil.rmtree(root)
    start = time.perf_counter()
    builder = build_root(root, args.conversations, args.messages, args.branched, args.seed)
    print(f"data: written in {time.perf_counter() - start:.1f} s")
    marker.write_text(
        json.dumps({"sizes": wanted, "messages": builder.messages, "logBytes": builder.log_bytes})
    )
    return builder.messages, builder.log_bytes


def run(root: Path, args: argparse.Namespace) -> None:
    """Every measurement on one data root."""
    messages, log_bytes = generated(root, args)
    print(
        f"data: {args.conversations + 11} conversations, {messages:,} messages "
        f"({args.branched:.0%} branched), logs {log_bytes / 1e6:.1f} MB"
    )
    store = SessionStore(root)
    if not (args.keep_index and (root / INDEX_NAME).exists()):
        for path in root.iterdir():
            if path.name.startswith(INDEX_NAME):
                path.unlink()
        index = SearchIndex(root)
        start = time.perf_counter()
        tenths: set[int] = set()

        def progress(done: int, total: int) -> None:
            """What the app's progress indicator shows, every tenth of the way."""
            tenth = done * 10 // total
            if tenth not in tenths:
                tenths.add(tenth)
                elapsed = time.perf_counter() - start
                print(f"  building: {done}/{total} conversations, {elapsed:.0f} s")

        index.catch_up_all(store, progress)
        build = time.perf_counter() - start
        index.close()
        print(f"build from scratch (catch_up_all): {build:.1f} s")
    size = sum(os.path.getsize(p) for p in root.iterdir() if p.name.startswith(INDEX_NAME))
    print(
        f"index size: {size / 1e6:.1f} MB = {size / log_bytes:.2f} x the logs "
        f"({log_bytes / 1e6:.1f} MB)"
    )

    index = SearchIndex(root)
    start = time.perf_counter()
    index.catch_up_all(store)
    print(f"catch_up_all when current: {(time.perf_counter() - start) * 1000:.0f} ms")

    measure_searches(index, queries(args.queries, args.seed))
    ids = sorted(m.session_id for m in store.iter_manifests() if isinstance(m, Manifest))
    one = ids[len(ids) // 2]
    wall = []
    for query in queries(40, args.seed + 3):
        start = time.perf_counter()
        index.search(query, session_id=one)
        wall.append(time.perf_counter() - start)
    print(
        f"search in one conversation (--session), {len(wall)} queries: "
        f"p50 {percentile(wall, 0.5) * 1000:.1f} ms  p99 {percentile(wall, 0.99) * 1000:.1f} ms"
    )

    hot = index.search(HOT_WORD)
    print(
        f"message inherited by 10 branches: {len(hot.hits)} hit, total {hot.total}, "
        f"alsoIn {len(hot.hits[0].also_in) if hot.hits else 0}"
    )

    per_turn_cost(store, index, args)
    index.close()


def measure_searches(index: SearchIndex, asked: list[str]) -> None:
    """p50/p99 of wall-clock time, and of the searching thread's CPU time, over ``asked``.

    The CPU time leaves out waiting for a core on a machine shared with other
    work (the load average is printed alongside); the target is on wall time.
    """
    wall: list[float] = []
    cpu: list[float] = []
    by_kind: dict[str, list[float]] = {}
    load = os.getloadavg()[0]
    for query in asked:
        start, start_cpu = time.perf_counter(), time.thread_time()
        index.search(query)
        elapsed, elapsed_cpu = time.perf_counter() - start, time.thread_time() - start_cpu
        wall.append(elapsed)
        cpu.append(elapsed_cpu)
        words = query.split()
        kind = (
            "short (<3 chars)"
            if all(len(word) < 3 for word in words)
            else f"trigram, {len(words)} term{'s' if len(words) > 1 else ''}"
        )
        by_kind.setdefault(kind, []).append(elapsed)
    p99 = percentile(wall, 0.99)
    print(
        f"search over {len(wall)} queries: p50 {percentile(wall, 0.5) * 1000:.1f} ms  "
        f"p99 {p99 * 1000:.1f} ms  max {max(wall) * 1000:.1f} ms  "
        f"(target p99 <= 100 ms)  {'ok' if p99 <= 0.1 else 'OVER TARGET'}"
    )
    print(
        f"  CPU time of the searching thread: p50 {percentile(cpu, 0.5) * 1000:.1f} ms  "
        f"p99 {percentile(cpu, 0.99) * 1000:.1f} ms  (load average {load:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after, {os.cpu_count()} cores)"
    )
    for kind, values in sorted(by_kind.items()):
        print(
            f"  {kind:<17} n={len(values):3d}  p50 {percentile(values, 0.5) * 1000:.1f} ms  "
            f"p99 {percentile(values, 0.99) * 1000:.1f} ms"
        )


def commit_turns(writer: Any, rng: random.Random, numbers: range) -> float:
    """Commit one whole turn per number, as ``session say`` does (two commits); seconds taken."""
    start = time.perf_counter()
    for n in numbers:
        writer.commit([ev.turn_start(f"t{n}"), ev.user_message(f"u{n}", text(rng))])
        writer.commit(
            [ev.assistant_message(f"a{n}", text(rng), "demo"), ev.turn_end(f"t{n}", "completed")]
        )
    return time.perf_counter() - start


def per_turn_cost(store: SessionStore, index: SearchIndex, args: argparse.Namespace) -> None:
    """Indexing work per committed turn against the turn's commit time, on the full index.

    Writing commands do not index (their commit path pays nothing); the work
    is done by the next search's catch-up, or by the app's background worker
    after each turn. Both are measured; the session is removed afterwards so
    the data root can be reused.
    """
    rng = random.Random(args.seed + 2)
    turns = args.turns
    with store.create("per-turn cost") as writer:
        session_id = writer.session_id
        index.catch_up(store, session_id)
        # Deferred: turns committed by `say`, caught up by the next `search`.
        commit = commit_turns(writer, rng, range(turns))
        start = time.perf_counter()
        index.catch_up(store, session_id)
        deferred = time.perf_counter() - start
        # Caught up after every turn (the app's background worker, off the turn's path).
        commit_times, index_times = [], []
        for n in range(turns, 2 * turns):
            commit_times.append(commit_turns(writer, rng, range(n, n + 1)))
            start = time.perf_counter()
            index.catch_up(store, session_id)
            index_times.append(time.perf_counter() - start)
    index.forget(session_id)
    shutil.rmtree(store.session_dir(session_id))
    print("per committed turn: the commit path (`session say`) does no index work")
    ratio = deferred / commit
    print(
        f"  caught up by the next search, {turns} turns at once: commit "
        f"{commit / turns * 1000:.3f} ms, index {deferred / turns * 1000:.3f} ms = {ratio:.1%} "
        f"(target <= 5 %)  {'ok' if ratio <= 0.05 else 'OVER TARGET'}"
    )
    commit_ms = statistics.median(commit_times) * 1000
    index_ms = statistics.median(index_times) * 1000
    print(
        f"  caught up after each turn (the app's background worker): commit {commit_ms:.3f} ms, "
        f"index {index_ms:.3f} ms = {index_ms / commit_ms:.1%}"
    )


if __name__ == "__main__":
    main()
