"""Session-id validation at every entry point, the data root, and manifests."""

from __future__ import annotations

import contextlib
import stat
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from branchwise.core.errors import (
    BranchwiseError,
    InvalidManifest,
    InvalidSessionId,
    SessionNotFound,
    UnsupportedFormat,
)
from branchwise.core.ids import new_session_id, validate_session_id
from branchwise.core.store.manifest import (
    Manifest,
    ParentLink,
    Seed,
    load_manifest,
    parse_manifest,
    save_manifest,
)
from branchwise.core.store.store import SessionStore

BAD_IDS = [
    "../x",
    "/etc/passwd",
    "",
    "a" * 65,
    "short",
    "UPPERCASE-ID",
    "abc/defgh",
    "..",
    ".hidden-id",
    "-leading-dash",
    "nul\x00byte-id",
    "space in id",
    "ünïcode-id",
]


@pytest.mark.parametrize("bad", BAD_IDS)
def test_bad_ids_are_refused_everywhere(store: SessionStore, bad: str) -> None:
    for entry in (store.session_dir, store.read, store.open_writer, store.manifest):
        with pytest.raises(InvalidSessionId) as refused:
            entry(bad)
        assert refused.value.code == "invalid_session_id"
    with pytest.raises(InvalidSessionId):
        store.create("x", session_id=bad)
    assert list(store.sessions_dir.iterdir()) == []


def test_generated_ids_are_valid_and_sort_by_time() -> None:
    ids = [new_session_id() for _ in range(5000)]
    for value in ids:
        assert validate_session_id(value) == value
    assert ids == sorted(ids) and len(set(ids)) == len(ids)


def test_non_string_ids_are_refused() -> None:
    for bad in (None, 12345678, b"abcdefgh"):
        with pytest.raises(InvalidSessionId):
            validate_session_id(bad)


def test_data_root_is_private(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "new" / "root")
    assert stat.S_IMODE(store.root.stat().st_mode) == 0o700


def test_unknown_session_is_typed(store: SessionStore) -> None:
    with pytest.raises(SessionNotFound):
        store.read("0000000000-missing")


def test_manifest_round_trip_and_atomic_replace(tmp_path: Path) -> None:
    manifest = Manifest(
        session_id="child-0001",
        title="t",
        kind="fork",
        created_at=1.5,
        generation=3,
        parent=ParentLink("parent-001", "fork", "turn_x", 12, 2),
        root_session_id="parent-001",
        seed_length=12,
        created_by_operation="op_1",
    )
    folder = tmp_path / "child-0001"  # a manifest is loaded from the folder named by its id
    folder.mkdir()
    save_manifest(folder, manifest)
    assert load_manifest(folder) == manifest
    assert [p.name for p in folder.iterdir()] == ["manifest.json"]  # no temp left


def test_newer_manifest_format_is_unsupported() -> None:
    with pytest.raises(UnsupportedFormat):
        parse_manifest(orjson.dumps({"format": 3, "sessionId": "abcdefgh", "title": ""}))


def test_format_2_manifest_keeps_its_seeds_and_log_folder() -> None:
    seed = Seed("seed-000.seg", 1, 1, 4096, 12, 0xDEADBEEF)
    manifest = Manifest(
        "abcdefgh", "t", root_session_id="abcdefgh", format=2, seed=(seed,), log_dir="log-g2"
    )
    data = manifest.to_json()
    assert data["format"] == 2 and data["log"] == "log-g2"
    assert data["seed"] == [
        {
            "file": "seed-000.seg",
            "firstCommit": 1,
            "firstSeq": 1,
            "end": 4096,
            "endCommit": 12,
            "lastCrc": 0xDEADBEEF,
        }
    ]
    assert parse_manifest(orjson.dumps(data)) == manifest
    assert "seed" not in Manifest("abcdefgh", "t").to_json()  # format 1 stays format 1


@pytest.mark.parametrize(
    "change",
    [
        {"seed": {}},
        {
            "seed": [
                {
                    "file": "../x.seg",
                    "firstCommit": 1,
                    "firstSeq": 1,
                    "end": 0,
                    "endCommit": 1,
                    "lastCrc": 0,
                }
            ]
        },
        {
            "seed": [
                {
                    "file": "seed-000.seg",
                    "firstCommit": 0,
                    "firstSeq": 1,
                    "end": 0,
                    "endCommit": 1,
                    "lastCrc": 0,
                }
            ]
        },
        {"log": "../elsewhere"},
    ],
)
def test_malformed_format_2_fields_are_invalid(change: dict[str, object]) -> None:
    data = {"format": 2, "sessionId": "abcdefgh", "title": "", **change}
    with pytest.raises(InvalidManifest):
        parse_manifest(orjson.dumps(data))


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"[]",
        b"{",
        b'{"format": 1}',
        b'{"format": true}',
        b'{"format":1,"sessionId":"../etc/x","title":""}',
        b'{"format":1,"sessionId":"abcdefgh","title":3}',
        b'{"format":1,"sessionId":"abcdefgh","title":"","generation":0}',
        b'{"format":1,"sessionId":"abcdefgh","title":"","parent":{"kind":"fork","sessionId":"/x"}}',
    ],
)
def test_malformed_manifests_are_typed(raw: bytes) -> None:
    with pytest.raises(InvalidManifest):
        parse_manifest(raw)


@given(st.binary(max_size=200))
def test_random_manifest_bytes_give_only_typed_errors(raw: bytes) -> None:
    with contextlib.suppress(BranchwiseError):
        parse_manifest(raw)


@given(
    st.dictionaries(
        st.sampled_from(
            [
                "format",
                "sessionId",
                "title",
                "kind",
                "generation",
                "parent",
                "rootSessionId",
                "seedLength",
                "createdAt",
            ]
        ),
        st.one_of(
            st.none(),
            st.integers(),
            st.text(max_size=70),
            st.booleans(),
            st.floats(allow_nan=False),
            st.dictionaries(st.text(max_size=5), st.integers()),
        ),
    )
)
def test_random_manifest_json_gives_only_typed_errors(data: dict) -> None:
    with contextlib.suppress(BranchwiseError):
        Manifest.from_json(data)


def test_broken_manifest_does_not_hide_other_sessions(store: SessionStore) -> None:
    good = store.create("good")
    good.close()
    bad_dir = store.sessions_dir / "broken-session-1"
    bad_dir.mkdir()
    (bad_dir / "manifest.json").write_bytes(b"{nope")
    items = list(store.iter_manifests())
    assert [m.title for m in items if isinstance(m, Manifest)] == ["good"]
    errors = [e for e in items if isinstance(e, BranchwiseError)]
    assert errors[0].details["sessionId"] == "broken-session-1"
    assert [m.session_id for m in store.list_sessions()] == [good.session_id]


def test_sweep_spares_folders_a_live_process_is_building(store: SessionStore) -> None:
    import subprocess
    import sys

    live = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    try:
        building = store.sessions_dir / f".tmp-{live.pid}-abcdefgh-1234"
        crashed = store.sessions_dir / f".tmp-{dead.stdout.strip()}-abcdefgh-5678"
        unnamed = store.sessions_dir / ".tmp-garbage"
        for folder in (building, crashed, unnamed):
            folder.mkdir()
        swept = store.sweep_temporary()
        assert sorted(swept) == sorted([crashed.name, unnamed.name])
        assert building.is_dir()
    finally:
        assert live.stdin is not None
        live.stdin.close()
        live.wait()
