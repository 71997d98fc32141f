"""The fork operations journal: its document, validation and damage handling."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from branchwise.core.fork.operations import ForkRequest
from branchwise.desktop.host.journal import (
    JOURNAL_NAME,
    InvalidRecord,
    OperationRecord,
    OperationsJournal,
    OperationState,
    read_journal_document,
    request_from_json,
    request_hash,
    request_to_json,
)

SOURCE = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
CHILD = "0190a1b2-c3d4-7e5f-8a9b-ffffffffffff"
REQUEST = ForkRequest(SOURCE, "turn_1", 12, 1)


def pending(op: str = "op_1", request: ForkRequest = REQUEST, at: float = 1.0) -> OperationRecord:
    return OperationRecord(op, request, OperationState.PENDING, created_at=at, updated_at=at)


def reload(root: Path) -> tuple[OperationRecord, ...]:
    journal = OperationsJournal(root)
    journal.load()
    return journal.records()


def write_doc(root: Path, document: object) -> None:
    (root / JOURNAL_NAME).write_bytes(orjson.dumps(document))


def test_missing_journal_is_empty(tmp_path: Path) -> None:
    journal = OperationsJournal(tmp_path)
    loaded = journal.load()
    assert not loaded.was_reset and loaded.dropped == ()
    assert journal.records() == ()
    assert not journal.path.exists()


def test_document_shape_and_round_trip(tmp_path: Path) -> None:
    journal = OperationsJournal(tmp_path)
    journal.put(pending())
    journal.put(pending().completed(CHILD, 2.0))
    document = read_journal_document(tmp_path)
    assert document is not None
    assert document["version"] == 1
    [record] = document["operations"]
    assert record == {
        "operationId": "op_1",
        "kind": "fork",
        "request": {
            "sourceSessionId": SOURCE,
            "generation": 1,
            "turnId": "turn_1",
            "boundarySequence": 12,
        },
        "requestHash": request_hash(REQUEST),
        "state": "completed",
        "childSessionId": CHILD,
        "createdAt": 1.0,
        "updatedAt": 2.0,
    }
    assert stat.S_IMODE(os.stat(journal.path).st_mode) == 0o600
    again = OperationsJournal(tmp_path)
    again.load()
    assert again.records() == journal.records()
    assert again.find(REQUEST) == pending().completed(CHILD, 2.0)


def test_remove_is_durable_and_leaves_no_temp(tmp_path: Path) -> None:
    journal = OperationsJournal(tmp_path)
    journal.put(pending("op_1"))
    journal.put(pending("op_2", ForkRequest(SOURCE, "turn_2", 20, 1), at=2.0))
    journal.remove("op_1")
    journal.remove("op_missing")
    document = read_journal_document(tmp_path)
    assert document is not None
    assert [r["operationId"] for r in document["operations"]] == ["op_2"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [JOURNAL_NAME]


def test_removing_the_last_record_unlinks_the_document_without_an_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing is ordered after a removal; a crash that undoes it leaves the record to recover."""
    journal = OperationsJournal(tmp_path)
    journal.put(pending("op_1"))
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    journal.remove("op_1")
    assert synced == []
    assert list(tmp_path.iterdir()) == [] and read_journal_document(tmp_path) is None
    assert reload(tmp_path) == ()
    journal.remove("op_1")  # idempotent
    journal.put(pending("op_2"))  # the next addition is durable again, folder included
    assert len(synced) == 2 and [r.operation_id for r in reload(tmp_path)] == ["op_2"]


def test_find_matches_the_whole_request(tmp_path: Path) -> None:
    journal = OperationsJournal(tmp_path)
    journal.put(pending())
    assert journal.find(REQUEST) is not None
    assert journal.find(ForkRequest(SOURCE, "turn_1", 12, 2)) is None
    assert journal.find(ForkRequest(SOURCE, "turn_1", 13, 1)) is None


def test_failed_write_leaves_memory_and_disk_unchanged(tmp_path: Path) -> None:
    journal = OperationsJournal(tmp_path)
    journal.put(pending("op_1"))
    other = pending("op_3", ForkRequest(SOURCE, "turn_3", 30, 1), at=3.0)
    journal.put(other)  # so removing op_1 rewrites the document
    before = journal.path.read_bytes()
    # A directory where the temp file must go makes the write fail, even for root.
    blocker = tmp_path / f".{JOURNAL_NAME}.tmp-{os.getpid()}"
    blocker.mkdir()
    with pytest.raises(OSError):
        journal.put(pending("op_2", ForkRequest(SOURCE, "turn_2", 20, 1)))
    with pytest.raises(OSError):
        journal.put(pending("op_1").completed(CHILD, 2.0))
    with pytest.raises(OSError):
        journal.remove("op_1")
    blocker.rmdir()
    assert journal.records() == (pending("op_1"), other)
    assert journal.path.read_bytes() == before


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"{not json", "corrupt"),
        (b"", "corrupt"),
        (b"[]", "corrupt"),
        (b'{"operations": []}', "corrupt"),
        (b'{"version": true, "operations": []}', "corrupt"),
        (b'{"version": 1, "operations": {}}', "corrupt"),
        (b'{"version": 2, "operations": []}', "unknown_version"),
        (b'{"version": 0, "operations": []}', "unknown_version"),
    ],
)
def test_untrusted_document_is_moved_aside(tmp_path: Path, content: bytes, reason: str) -> None:
    (tmp_path / JOURNAL_NAME).write_bytes(content)
    journal = OperationsJournal(tmp_path, clock=lambda: 1_700_000_000.0)
    loaded = journal.load()
    assert loaded.reset_reason == reason
    assert loaded.moved_aside == tmp_path / f"{JOURNAL_NAME}.bad-20231114T221320Z"
    assert loaded.moved_aside.read_bytes() == content
    assert not journal.path.exists()
    assert journal.records() == ()
    journal.put(pending())  # the journal works normally afterwards
    assert len(reload(tmp_path)) == 1


def test_moving_aside_never_overwrites_an_earlier_bad_file(tmp_path: Path) -> None:
    clock = lambda: 1_700_000_000.0  # noqa: E731
    for content in (b"first", b"second"):
        (tmp_path / JOURNAL_NAME).write_bytes(content)
        OperationsJournal(tmp_path, clock).load()
    kept = sorted(p.read_bytes() for p in tmp_path.glob(f"{JOURNAL_NAME}.bad-*"))
    assert kept == [b"first", b"second"]


def valid_record_json(op: str = "op_1") -> dict[str, object]:
    return pending(op).to_json()


BROKEN_RECORDS = [
    "not a record",
    {},
    {**valid_record_json(), "operationId": ""},
    {**valid_record_json(), "operationId": "x" * 200},
    {**valid_record_json(), "kind": "merge"},
    {**valid_record_json(), "state": "half-done"},
    {**valid_record_json(), "state": "completed"},  # completed without a child
    {**valid_record_json(), "childSessionId": "../../etc"},
    {**valid_record_json(), "requestHash": "sha256:0"},
    {**valid_record_json(), "request": {**request_to_json(REQUEST), "sourceSessionId": "../x"}},
    {**valid_record_json(), "request": {**request_to_json(REQUEST), "generation": 0}},
    {**valid_record_json(), "request": {**request_to_json(REQUEST), "boundarySequence": True}},
    {**valid_record_json(), "request": {**request_to_json(REQUEST), "turnId": 7}},
    {**valid_record_json(), "createdAt": "yesterday"},
    {**valid_record_json(), "error": 3},
]


@pytest.mark.parametrize("broken", BROKEN_RECORDS)
def test_invalid_records_are_dropped_and_the_rest_kept(tmp_path: Path, broken: object) -> None:
    write_doc(tmp_path, {"version": 1, "operations": [broken, valid_record_json("op_2")]})
    journal = OperationsJournal(tmp_path)
    loaded = journal.load()
    assert not loaded.was_reset
    assert [d.reason for d in loaded.dropped] == ["invalid_record"]
    assert [r.operation_id for r in journal.records()] == ["op_2"]
    # The cleaned document was written back, so the drop is reported once.
    assert OperationsJournal(tmp_path).load().dropped == ()


def test_duplicate_operation_ids_keep_the_first(tmp_path: Path) -> None:
    second = {**valid_record_json(), "error": "the second copy"}
    write_doc(tmp_path, {"version": 1, "operations": [valid_record_json(), second]})
    journal = OperationsJournal(tmp_path)
    assert [d.reason for d in journal.load().dropped] == ["duplicate_operation"]
    [record] = journal.records()
    assert record.error is None


def test_concurrent_puts_from_threads_all_land(tmp_path: Path) -> None:
    journal = OperationsJournal(tmp_path)
    requests = [ForkRequest(SOURCE, f"turn_{i}", i + 1, 1) for i in range(16)]
    threads = [
        threading.Thread(target=journal.put, args=(pending(f"op_{i}", r, at=float(i)),))
        for i, r in enumerate(requests)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(reload(tmp_path)) == 16


def test_request_from_json_rejects_non_objects() -> None:
    with pytest.raises(InvalidRecord):
        request_from_json([SOURCE, 1, "turn_1", 12])


def test_the_stored_request_and_its_hash_are_those_of_earlier_builds() -> None:
    # Journals written before core's ForkRequest was the one request type must
    # still load: same fields, same hash (pinned from the earlier build).
    stored = {
        "sourceSessionId": SOURCE,
        "generation": 1,
        "turnId": "turn_1",
        "boundarySequence": 12,
    }
    assert request_to_json(REQUEST) == stored
    assert list(request_to_json(REQUEST)) == list(stored)
    assert request_from_json(stored) == REQUEST
    assert request_hash(REQUEST) == (
        "sha256:6e3447325acb6b4059540bfa9ac0829db05399fc3459e6034f1274ec17db41df"
    )
    with pytest.raises(ValueError, match="new child only"):
        request_to_json(ForkRequest(SOURCE, "turn_1", 12, 1, CHILD))


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
record_like = st.fixed_dictionaries(
    {},
    optional={
        "operationId": st.text(max_size=4) | st.just("op_1"),
        "kind": st.sampled_from(["fork", "merge"]) | json_values,
        "request": st.just(request_to_json(REQUEST)) | json_values,
        "requestHash": st.just(request_hash(REQUEST)) | json_values,
        "state": st.sampled_from(["pending", "completed"]) | json_values,
        "childSessionId": st.just(CHILD) | json_values,
        "createdAt": st.floats(allow_nan=False) | json_values,
        "updatedAt": st.floats(allow_nan=False) | json_values,
    },
)


@settings(max_examples=150, deadline=None)
@given(st.lists(record_like | json_values, max_size=4))
def test_any_operations_list_loads_without_raising(operations: list[object]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_doc(root, {"version": 1, "operations": operations})
        journal = OperationsJournal(root)
        loaded = journal.load()
        assert len(journal.records()) + len(loaded.dropped) == len(operations)
        for record in journal.records():
            assert OperationRecord.from_json(record.to_json()) == record
