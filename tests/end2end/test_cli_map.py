"""``branchwise session map`` end to end, in real processes."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from helpers.cli import cli_command, run_cli
from helpers.family import build_map_family

from branchwise.core.store.store import SessionStore


def test_map_prints_the_family_as_json_and_as_graphviz(tmp_path: Path) -> None:
    root = tmp_path / "root"
    f = build_map_family(SessionStore(root))
    code, answer = run_cli(root, "session", "map", f.nested)
    assert code == 0 and answer["rootSessionId"] == f.root
    kinds = {e["kind"] for e in answer["edges"]}
    assert kinds == {"fork", "edit", "regenerate", "child", "merge"}
    assert {n["kind"] for n in answer["nodes"]} == {"turn", "empty", "damaged"}
    dot = subprocess.run(
        [*cli_command(root), "session", "map", f.root, "--format", "dot"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert dot.startswith("digraph family {") and dot.rstrip().endswith("}")
    assert len(re.findall(r"\[label=\"merge\"", dot)) == 1
    assert dot.count("[label=") == len(answer["nodes"]) + len(answer["edges"])


def test_map_of_an_unknown_id_is_a_typed_error(tmp_path: Path) -> None:
    root = tmp_path / "root"
    f = build_map_family(SessionStore(root))
    code, refused = run_cli(root, "session", "map", f.trashed, check=False)
    assert code == 1 and refused["error"]["code"] == "session_not_found"
    code, refused = run_cli(root, "session", "map", "nope", check=False)
    assert code != 0 and refused["error"]["code"] == "invalid_session_id"
