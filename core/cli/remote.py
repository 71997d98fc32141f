"""``branchwise --server URL session …``: the session commands, run by a ``branchwise serve``.

``session new|list|show|targets|fork|say|lineage|tree|fanout|fuse`` print exactly what
they print locally (the server answers in the same shapes, built by
:mod:`branchwise.core.conversation.views`); the few fields only the server adds
(``running``, ``updatedAt``) are dropped. A turn sent with ``say`` runs on
the server with the server's provider settings, so the provider options are
refused rather than silently ignored. The token comes from ``--token-file``
or ``$BRANCHWISE_TOKEN``, never from the command line (``ps`` shows it to
every user of the machine).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import stat
import sys
from pathlib import Path
from typing import Any

from branchwise.core.cli.output import print_json, printable
from branchwise.core.conversation.attachments import read_files
from branchwise.core.conversation.names import branch_title
from branchwise.core.errors import InvalidArgument, RemoteRefusal
from branchwise.core.fanout_run import PER_SERVER
from branchwise.core.ids import new_id, validate_session_id
from branchwise.core.projection.attachments import AttachmentRef
from branchwise.core.remote.client import RemoteStore, server_url
from branchwise.core.remote.protocol import CAP_FORK_TITLE
from branchwise.core.store.manifest import given_title

TOKEN_ENV = "BRANCHWISE_TOKEN"
REMOTE_COMMANDS = (
    "new",
    "list",
    "show",
    "targets",
    "fork",
    "say",
    "lineage",
    "tree",
    "fanout",
    "fuse",
)
SERVER_ONLY_FIELDS = ("running", "updatedAt")


def add_server_options(parser: argparse.ArgumentParser) -> None:
    """Add the global ``--server`` and ``--token-file``."""
    parser.add_argument(
        "--server",
        metavar="URL",
        help="run session commands on a `branchwise serve` (token from --token-file or "
        f"${TOKEN_ENV})",
    )
    parser.add_argument(
        "--token-file", type=Path, metavar="PATH", help="file holding the server's token"
    )


def server_token(args: argparse.Namespace) -> str:
    """The bearer token: ``--token-file``'s contents, else ``$BRANCHWISE_TOKEN``.

    Raises:
        InvalidArgument: neither gives a token, or the file cannot be read.
    """
    if args.token_file is not None:
        token = _read_token_file(Path(args.token_file))
    else:
        token = os.environ.get(TOKEN_ENV, "").strip()
    if not token:
        raise InvalidArgument(
            f"--server needs a token: --token-file PATH or ${TOKEN_ENV}", argument="--server"
        )
    return token


def _read_token_file(path: Path) -> str:
    """The text of ``--token-file``, which must be a regular file.

    Opened without blocking and checked before it is read: a FIFO, a device
    or a folder would hang the command or read something that is no token.

    Raises:
        InvalidArgument: not a regular file, unreadable, or not UTF-8 text.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise _token_file_refused(path, f"cannot read it: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _token_file_refused(path, "it is not a regular file")
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    except OSError as exc:
        raise _token_file_refused(path, f"cannot read it: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    try:
        return b"".join(chunks).decode("utf-8").strip()
    except UnicodeDecodeError:
        raise _token_file_refused(path, "it is not UTF-8 text") from None


def _token_file_refused(path: Path, problem: str) -> InvalidArgument:
    return InvalidArgument(
        f"argument --token-file: {path}: {problem}",
        argument="--token-file",
        value=printable(str(path)),
    )


def run_remote(args: argparse.Namespace) -> dict[str, Any]:
    """Run the parsed session command on ``args.server``; the JSON the local command prints.

    Raises:
        InvalidArgument: a command or option that has no remote form.
        RemoteRefusal: the server's typed refusal (printed as the server wrote it).
        RemoteUnavailable: the server could not be reached or answered nonsense.
    """
    command = getattr(args, "session_command", None) if args.command == "session" else None
    if command not in REMOTE_COMMANDS:
        shown = f"session {command}" if command else str(args.command)
        raise InvalidArgument(f"{shown} is not available with --server", argument="--server")
    remote = RemoteStore(server_url(args.server), server_token(args))
    try:
        return asyncio.run(_COMMANDS[command](remote, args))
    except RemoteRefusal as exc:
        exc.details.pop("status", None)  # the local command's error has the same fields
        raise


async def _new(remote: RemoteStore, args: argparse.Namespace) -> dict[str, Any]:
    if any(getattr(args, name, None) is not None for name in ("model", "system", "temperature")):
        raise InvalidArgument(
            "session new --model/--system/--temperature are not available with --server",
            argument="--server",
        )
    return await remote.create_session(args.title)


async def _list(remote: RemoteStore, args: argparse.Namespace) -> dict[str, Any]:
    answer = await remote.list_sessions()
    for entry in answer["sessions"]:
        if isinstance(entry, dict):
            for name in SERVER_ONLY_FIELDS:
                entry.pop(name, None)
    return answer


async def _show(remote: RemoteStore, args: argparse.Namespace) -> dict[str, Any]:
    answer = await remote.show(args.session_id)
    for name in SERVER_ONLY_FIELDS:
        answer.pop(name, None)
    return answer


async def _targets(remote: RemoteStore, args: argparse.Namespace) -> dict[str, Any]:
    return await remote.fork_targets(args.session_id)


async def _fork(remote: RemoteStore, args: argparse.Namespace) -> dict[str, Any]:
    """As ``session fork``: a missing boundary or generation comes from the current targets."""
    if getattr(args, "at_start", False):
        raise InvalidArgument(
            "session fork --at-start is not available with --server", argument="--at-start"
        )
    if args.child_id is not None:
        raise InvalidArgument(
            "session fork --child-id is not available with --server", argument="--child-id"
        )
    source_id = validate_session_id(args.session_id)
    title = given_title(args.title) if args.title is not None else None
    boundary, generation = args.boundary, args.generation
    if boundary is None or generation is None:
        current = await remote.fork_targets(source_id)
        target = next(
            (t for t in current["targets"] if isinstance(t, dict) and t.get("turnId") == args.turn),
            None,
        )
        if boundary is None:
            found = target.get("boundarySequence") if target else None
            boundary = found if isinstance(found, int) else 0
        if generation is None:
            source = current.get("source")
            found = source.get("generation") if isinstance(source, dict) else None
            generation = found if isinstance(found, int) else 0
    if title is None:
        title = await _branch_title(remote, source_id)
    operation_id = args.operation_id or new_id("op")
    result = await remote.fork(source_id, args.turn, boundary, generation, operation_id, title)
    return result.to_json()


async def _branch_title(remote: RemoteStore, source_id: str) -> str | None:
    """ "<title> (branch N)" from the server's list, as a local fork is named.

    ``None`` (the branch keeps its source's title) from a server that takes
    no title, which would refuse one, or for a source the list does not hold.
    """
    if CAP_FORK_TITLE not in await remote.capabilities():
        return None
    listed = [s for s in (await remote.list_sessions())["sessions"] if isinstance(s, dict)]
    source = next((s for s in listed if s.get("sessionId") == source_id), None)
    if source is None or not isinstance(source.get("title"), str):
        return None
    return branch_title(
        source["title"],
        (
            str(s.get("kind"))
            for s in listed
            if isinstance(s.get("parent"), dict) and s["parent"].get("sessionId") == source_id
        ),
    )


async def _say(remote: RemoteStore, args: argparse.Namespace) -> dict[str, Any]:
    """As ``session say``: the answer streams to stdout, then the result is the last line."""
    overrides = [
        name for name in ("provider", "base_url", "model") if getattr(args, name, None) is not None
    ]
    if overrides or args.delay_ms:
        raise InvalidArgument(
            "a turn sent with --server runs with the server's provider settings; "
            "--provider/--base-url/--model/--delay-ms are not available",
            argument="--server",
        )
    refs = await _uploaded(remote, args)
    result: dict[str, Any] = {}
    async for record in remote.send_turn(args.session_id, args.text, refs):
        kind = record["type"]
        if kind == "text" and not args.quiet:
            sys.stdout.write(str(record.get("chunk", "")))
            sys.stdout.flush()
        elif kind == "ended":
            if not args.quiet:
                sys.stdout.write("\n")
                sys.stdout.flush()
            result = dict(record.get("result") or {})
        elif kind == "error":
            error = record.get("error") or {}
            refusal = RemoteRefusal(str(error.get("code")), str(error.get("message", "")), 200)
            refusal.details = {k: v for k, v in error.items() if k not in ("code", "message")}
            raise refusal
    if result.get("error") is not None:
        result["_exit"] = 1
    return result


async def _uploaded(remote: RemoteStore, args: argparse.Namespace) -> tuple[AttachmentRef, ...]:
    """The ``--attach`` files, read and judged here, each uploaded to the server
    (``POST /attachments``): the references a turn or a fan-out names. A refused
    file stops the command before anything is uploaded."""
    files = read_files([Path(path) for path in getattr(args, "attach", None) or ()])
    return tuple([await remote.upload_attachment(f.name, f.data) for f in files])


def _refuse_provider_options(args: argparse.Namespace, command: str) -> None:
    if args.provider is not None or args.base_url is not None or args.delay_ms:
        raise InvalidArgument(
            f"session {command} with --server runs with the server's provider settings; "
            "--provider/--base-url/--delay-ms are not available",
            argument="--server",
        )


async def _fanout(remote: RemoteStore, args: argparse.Namespace) -> dict[str, Any]:
    """As ``session fanout``: progress lines to stderr, the result printed.

    ``--attach`` files are read and judged here, then each is uploaded
    (``POST /attachments``) and the fan-out names their references: the same
    files answer the same references, so a retry with the same operation id
    asks the same question.
    """
    _refuse_provider_options(args, "fanout")
    if args.per_server != PER_SERVER:
        raise InvalidArgument(
            "session fanout --per-server is the server's own with --server", argument="--server"
        )
    operation_id = args.operation_id or new_id("op")
    refs = await _uploaded(remote, args)
    result: dict[str, Any] = {}
    stream = remote.fanout(
        args.session_id, args.prompt, args.models, args.samples, operation_id, refs
    )
    async for line in stream:
        if line["event"] == "result":
            result = dict(line.get("result") or {})
        elif not args.quiet:
            print_json(line, sys.stderr)
    branches = result.get("branches")
    if isinstance(branches, list) and any(
        isinstance(b, dict) and b.get("endReason") == "error" for b in branches
    ):
        result["_exit"] = 1
    return result


async def _fuse(remote: RemoteStore, args: argparse.Namespace) -> dict[str, Any]:
    """As ``session fuse``, on the server (``--model`` names one of the server's models)."""
    _refuse_provider_options(args, "fuse")
    operation_id = args.operation_id or new_id("op")
    return await remote.fuse(
        args.session_id, args.branches, operation_id, args.model, args.instruction
    )


async def _lineage(remote: RemoteStore, args: argparse.Namespace) -> dict[str, Any]:
    return await remote.lineage(args.session_id)


async def _tree(remote: RemoteStore, args: argparse.Namespace) -> dict[str, Any]:
    return await remote.tree(args.session_id)


_COMMANDS = {
    "new": _new,
    "list": _list,
    "show": _show,
    "targets": _targets,
    "fork": _fork,
    "say": _say,
    "lineage": _lineage,
    "tree": _tree,
    "fanout": _fanout,
    "fuse": _fuse,
}
