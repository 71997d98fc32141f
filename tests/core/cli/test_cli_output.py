"""Printing JSON never fails on the data it reports (undecodable text, huge numbers)."""

from __future__ import annotations

import io

import orjson

from branchwise.core.cli.output import print_json, printable
from branchwise.core.errors import InvalidSessionId


def test_undecodable_text_and_huge_numbers_are_printed_escaped() -> None:
    out = io.StringIO()
    bad = b"caf\xe9".decode("utf-8", "surrogateescape")
    error = InvalidSessionId(
        "bad", sessionId=bad, boundary=2**80, lone="\ud800", ok=[1, None, True]
    )
    print_json(error.to_json(), out)
    assert orjson.loads(out.getvalue())["error"] == {
        "code": "invalid_session_id",
        "message": "bad",
        "sessionId": "caf\\xe9",
        "boundary": str(2**80),
        "lone": "\\ud800",
        "ok": [1, None, True],
    }


def test_printable_leaves_text_alone() -> None:
    assert printable("naïve 分支") == "naïve 分支"
    out = io.StringIO()
    print_json({"a": [2**64 - 1, -(2**63)]}, out)
    assert out.getvalue() == '{"a":[18446744073709551615,-9223372036854775808]}\n'
