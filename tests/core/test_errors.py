"""The typed-error vocabulary: one class per code, each knowing whether a retry can help."""

from __future__ import annotations

import pytest

from branchwise.core import errors
from branchwise.core.errors import (
    BranchwiseError,
    RemoteRefusal,
    SessionNotFound,
    SourceNotFound,
    StaleSource,
    error_class,
)


def _all_error_classes() -> list[type[BranchwiseError]]:
    found = []
    for value in vars(errors).values():
        if isinstance(value, type) and issubclass(value, BranchwiseError):
            found.append(value)
    return found


def test_every_code_names_exactly_one_class() -> None:
    owners: dict[str, type[BranchwiseError]] = {}
    for cls in _all_error_classes():
        if "code" not in cls.__dict__:
            continue  # RemoteRefusal carries the server's code
        assert cls.code not in owners, (cls, owners.get(cls.code))
        owners[cls.code] = cls
        assert error_class(cls.code) is cls
    assert error_class("no_such_code") is None


def test_refusals_that_a_retry_cannot_change_are_definitive() -> None:
    assert StaleSource("x").definitive and SourceNotFound("x").definitive
    assert not BranchwiseError("x").definitive
    assert not errors.LeaseHeld("x").definitive and not errors.DiskFull("x").definitive
    assert not errors.RemoteUnavailable("x").definitive
    assert issubclass(SourceNotFound, SessionNotFound)


@pytest.mark.parametrize(
    ("code", "definitive"),
    [("stale_source", True), ("unknown_turn", True), ("disk_full", False), ("made_up", False)],
)
def test_a_server_refusal_is_as_definitive_as_its_code(code: str, definitive: bool) -> None:
    refusal = RemoteRefusal(code, "from the server", 409)
    assert refusal.code == code and refusal.definitive is definitive
    assert refusal.to_json()["error"]["status"] == 409


def test_wire_statuses_come_from_the_errors() -> None:
    assert StaleSource("x").http_status == 409
    assert errors.Unauthorized("x").http_status == 401
    assert errors.Unverifiable("x").http_status == 422
    assert errors.InvalidRequest("x").http_status == 400
