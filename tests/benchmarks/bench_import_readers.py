"""Reading Open WebUI, LibreChat and Claude Code exports, side by side with bare parsing.

    python tests/benchmarks/bench_import_readers.py [--megabytes 60] [--repeat 3]

Each reader turns a generated export of about ``--megabytes`` into source
trees (nothing is written: the planner and the store are measured with the
ChatGPT import). The floor is the parse alone: ijson's events over the same
JSON file, or ``orjson.loads`` of every line of the same Claude Code files.
Peak RSS is measured in a fresh process per reader, so one reader's garbage
does not count against the next.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ijson  # noqa: E402
import orjson  # noqa: E402
from common import report  # noqa: E402

from branchwise.core.importing import claude_code, librechat, open_webui  # noqa: E402

TEXT = "Lorem ipsum dolor sit amet, [brackets] and {braces} in text. " * 12


def build_open_webui(path: Path, megabytes: int) -> None:
    with path.open("w") as out:
        out.write("[")
        n = 0
        while out.tell() < megabytes * 1_000_000:
            messages, parent = {}, None
            for i in range(20):
                mid = f"c{n}m{i}"
                messages[mid] = {
                    "id": mid,
                    "parentId": parent,
                    "childrenIds": [],
                    "role": "user" if i % 2 == 0 else "assistant",
                    "content": TEXT,
                    "timestamp": 1717000000 + i,
                    "model": "llama3.1:8b",
                }
                parent = mid
            row = {"id": f"c{n}", "title": "t", "chat": {"history": {"messages": messages}}}
            out.write(("," if n else "") + json.dumps(row))
            n += 1
        out.write("]")


def build_librechat(path: Path, megabytes: int) -> None:
    with path.open("w") as out:
        out.write("[")
        n = 0
        while out.tell() < megabytes * 1_000_000:
            messages, parent = [], "00000000-0000-0000-0000-000000000000"
            for i in range(20):
                mid = f"c{n}m{i}"
                messages.append(
                    {
                        "messageId": mid,
                        "parentMessageId": parent,
                        "isCreatedByUser": i % 2 == 0,
                        "text": TEXT,
                        "createdAt": "2024-04-09T14:32:05.230Z",
                    }
                )
                parent = mid
            doc = {"conversationId": f"c{n}", "title": "t", "messages": messages}
            out.write(("," if n else "") + json.dumps(doc))
            n += 1
        out.write("]")


def build_claude_code(folder: Path, megabytes: int) -> None:
    folder.mkdir(parents=True)
    written, s = 0, 0
    while written < megabytes * 1_000_000:
        path = folder / f"session-{s:04d}.jsonl"
        with path.open("w") as out:
            parent = None
            for i in range(300):
                uuid = f"s{s}-{i}"
                if i % 2 == 0:
                    message: dict[str, object] = {"role": "user", "content": TEXT}
                else:
                    message = {
                        "id": f"msg{s}-{i}",
                        "role": "assistant",
                        "model": "claude-sonnet-4-5",
                        "content": [{"type": "text", "text": TEXT}],
                    }
                record = {
                    "parentUuid": parent,
                    "isSidechain": False,
                    "type": message["role"],
                    "message": message,
                    "uuid": uuid,
                    "timestamp": "2025-06-01T10:00:00.000Z",
                }
                out.write(json.dumps(record) + "\n")
                parent = uuid
        written += path.stat().st_size
        s += 1


def floor_json(path: Path) -> int:
    with path.open("rb") as handle:
        return sum(1 for _ in ijson.basic_parse(handle, use_float=True))


def floor_jsonl(folder: Path) -> int:
    count = 0
    for path in sorted(folder.glob("*.jsonl")):
        with path.open("rb") as handle:
            count += sum(1 for line in handle if orjson.loads(line))
    return count


READERS: dict[str, tuple[Callable[[Path], object], Callable[[Path], int], float]] = {
    "open-webui": (open_webui.read, floor_json, 6.0),
    "librechat": (librechat.read, floor_json, 6.0),
    # two passes (uuids first, to join the files a fork repeats) over a floor of one
    "claude-code": (claude_code.read, floor_jsonl, 10.0),
}


def drain(reader: Callable[[Path], object], path: Path) -> None:
    for _record in reader(path):  # type: ignore[attr-defined]
        pass


def best_of(repeat: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def size_of(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.glob("*.jsonl"))
    return path.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--megabytes", type=int, default=60)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--peak", nargs=2, metavar=("FORMAT", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peak:  # the child process: read once, print peak RSS in MB
        drain(READERS[args.peak[0]][0], Path(args.peak[1]))
        print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
        return
    with tempfile.TemporaryDirectory() as scratch:
        inputs = {
            "open-webui": Path(scratch) / "open-webui.json",
            "librechat": Path(scratch) / "librechat.json",
            "claude-code": Path(scratch) / "claude-code",
        }
        build_open_webui(inputs["open-webui"], args.megabytes)
        build_librechat(inputs["librechat"], args.megabytes)
        build_claude_code(inputs["claude-code"], args.megabytes)
        for name, (reader, floor, target) in READERS.items():
            path = inputs[name]
            megabytes = size_of(path) / 1e6
            ours = best_of(args.repeat, lambda r=reader, p=path: drain(r, p))
            bare = best_of(args.repeat, lambda f=floor, p=path: f(p))
            report(f"{name} read ({megabytes:.0f} MB)", ours, bare, target=target)
            peak = subprocess.run(
                [sys.executable, __file__, "--peak", name, str(path)],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            print(f"{name:<48} {megabytes / ours:7.1f} MB/s  peak RSS {peak} MB")


if __name__ == "__main__":
    main()
