"""``branchwise serve`` refusing in typed JSON what aiohttp's parser and the OS refuse first.

A real server process on 127.0.0.1: a second one on the same port, and
requests whose request line or header is over the limit, sent over a raw
socket (no client library would send them).
"""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import orjson
from helpers.cli import cli_command
from helpers.serve import serve_process
from helpers.sessions import session_with_turns

from branchwise.core.store.store import SessionStore


def _raw_request(url: str, data: bytes) -> tuple[int, dict]:
    """Send ``data`` as is; the status and the JSON body of the answer."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
        sock.sendall(data)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    assert b"application/json" in head.lower(), head
    return status, orjson.loads(body)


def test_oversized_request_line_and_header_get_typed_json_and_no_traceback(
    tmp_path: Path,
) -> None:
    log = tmp_path / "serve.log"
    with serve_process(tmp_path / "root", log=log) as served:
        line = b"GET /" + b"a" * 9 * 1024 + b" HTTP/1.1\r\nHost: x\r\n\r\n"
        header = b"GET /capabilities HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 9 * 1024 + b"\r\n\r\n"
        garbage = b"\x16\x03\x01 not http at all\r\n\r\n"
        answers = [_raw_request(served.url, data) for data in (line, header, line, garbage)]
    assert [status for status, _ in answers] == [414, 431, 414, 400]
    codes = [body["error"]["code"] for _, body in answers]
    assert codes == ["request_too_large"] * 3 + ["invalid_request"]
    assert all(body["error"]["message"] for _, body in answers)
    quiet = log.read_text(errors="replace")
    assert "Traceback" not in quiet
    assert len(quiet.splitlines()) <= len(answers)  # a line per refusal at most


def test_a_second_serve_on_a_busy_port_is_a_typed_refusal(tmp_path: Path) -> None:
    with serve_process(tmp_path / "first") as served:
        port = str(urlsplit(served.url).port)
        second = subprocess.run(
            [*cli_command(tmp_path / "second"), "serve", "--port", port],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert second.returncode == 1, second.stderr
    assert orjson.loads(second.stdout) == {
        "error": {
            "code": "port_in_use",
            "message": f"127.0.0.1:{port} is already in use by another program",
            "host": "127.0.0.1",
            "port": int(port),
        }
    }
    assert "Traceback" not in second.stderr


def test_serve_and_the_cli_refuse_the_same_boundaries(tmp_path: Path) -> None:
    root = tmp_path / "root"
    sid = session_with_turns(SessionStore(root), 1)
    with serve_process(root) as served:
        answers = []
        for boundary in (2**63, 2**64 - 1, -1):
            reply = httpx.post(
                f"{served.url}/fork-session",
                headers={"Authorization": f"Bearer {served.token}"},
                content=orjson.dumps(
                    {
                        "sourceSessionId": sid,
                        "turnId": "t0",
                        "boundarySequence": boundary,
                        "expectedGeneration": 1,
                        "operationId": f"op-{boundary}",
                    }
                ),
                timeout=30,
            )
            answers.append((reply.status_code, reply.json()["error"]["code"]))
    assert answers == [(400, "invalid_fork_request")] * 3
    assert not (root / "fork-index").exists()


def _serve_refused(root: Path) -> dict:
    """Start ``serve`` on ``root``; it must refuse at once in typed JSON, without a traceback."""
    done = subprocess.run(
        [*cli_command(root), "serve", "--port", "0"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    return orjson.loads(done.stdout.splitlines()[-1])["error"]


def test_serve_refuses_a_token_file_that_is_not_a_private_regular_file(tmp_path: Path) -> None:
    root = tmp_path / "root"
    SessionStore(root)
    token = root / "serve-token"
    outside = tmp_path / "outside"
    outside.write_text("someone else's text\n")
    outside.chmod(0o600)
    planted = {
        "a folder": lambda: token.mkdir(),
        "bytes that are not UTF-8": lambda: (
            token.write_bytes(b"\xff\xfe tok"),
            token.chmod(0o600),
        ),
        "a link to a file outside": lambda: token.symlink_to(outside),
        "a link to nowhere": lambda: token.symlink_to(tmp_path / "nowhere"),
        "a token of mode 0644": lambda: (token.write_text("readable\n"), token.chmod(0o644)),
    }
    for what, plant in planted.items():
        plant()
        error = _serve_refused(root)
        assert error["code"] == "unsafe_token_file", what
        assert "chmod 600" in error["message"] and error["path"] == str(token), what
        if token.is_dir() and not token.is_symlink():
            token.rmdir()
        else:
            token.unlink()
    assert outside.read_text() == "someone else's text\n"
    assert not (tmp_path / "nowhere").exists()
    token.write_text("mine\n")
    token.chmod(0o600)
    with serve_process(root) as server:
        assert server.token == "mine"
        with httpx.Client(base_url=server.url, timeout=30) as client:
            answer = client.get("/sessions", headers={"Authorization": "Bearer mine"})
            assert answer.status_code == 200
