"""The repository explains itself: its docs and comments point inside it.

Someone who clones the project reads its design in ``docs/``; a comment
citing a document that is not in the repository, or a path of the machine
it was written on, leaves them with nothing. So, over every tracked file:

- no document or comment names an absolute path outside the repository
  (a build machine's home, work or temporary folders); code may (a test's
  fixture data, a temporary folder a test makes), so only Markdown files,
  Python comments and docstrings, and ``#`` comments of other text files are
  read for paths;
- nothing cites the design notes that never shipped (their names below);
- ``README.md`` stays a user's guide (at most 320 lines) whose test command is
  the one ``.ci/run`` runs;
- every relative link of ``README.md`` and ``docs/*.md`` names a file that
  exists, and a ``#section`` of a Markdown file names one of its headings.

Each check is also run on planted text, so a check that finds nothing
because it reads nothing fails too.
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README_MAX_LINES = 320

# A path that starts at the file system's root in one of the folders a build
# machine's own files live in. The look-behind keeps relative paths
# ("tests/tmp/x") and URLs ("http://host/tmp/x") out.
OUTSIDE_PATH = re.compile(r"(?<![\w.~/:-])/(?:work|root|tmp|home/[\w.-]+|Users/[\w.-]+)/")
# The design notes that stayed outside the repository, cited by name or by a
# numbered section (a section sign and a number): the docs here are cited by page and heading.
UNSHIPPED_NOTE = re.compile(r"\b(?:DESIGN|ARCHITECTURE|STORAGE|STYLE)\.md\b|§\s?\d")
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")
COMMENTED_SUFFIXES = {".toml", ".cfg", ".spec", ".sh", ".txt", ".yml", ".yaml", ".ini", ""}


def tracked_files() -> list[Path]:
    """Every file git tracks in the repository (the files a clone gets)."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: no list of tracked files")
    return [REPO / name for name in out.decode().split("\0") if name]


def read_text(path: Path) -> str | None:
    """The file's text, or ``None`` for a binary file."""
    data = path.read_bytes()
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def python_prose(source: str) -> list[tuple[int, str]]:
    """The comments and docstrings of a Python source, with their line numbers."""
    found = [
        (token.start[0], token.string)
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    ]
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                found.append((body[0].lineno, body[0].value.value))
    return sorted(found)


def prose_of(path: Path, text: str) -> list[tuple[int, str]]:
    """The parts of a file meant for people to read: docs whole, comments of code."""
    if path.suffix == ".md":
        return list(enumerate(text.splitlines(), start=1))
    if path.suffix == ".py":
        return python_prose(text)
    if path.suffix in COMMENTED_SUFFIXES:
        return [
            (number, line)
            for number, line in enumerate(text.splitlines(), start=1)
            if line.lstrip().startswith("#")
        ]
    return []


def outside_paths(path: Path, text: str) -> list[str]:
    return [
        f"{path.relative_to(REPO)}:{number}: {match.group(0)}"
        for number, prose in prose_of(path, text)
        for match in OUTSIDE_PATH.finditer(prose)
    ]


def unshipped_citations(path: Path, text: str) -> list[str]:
    return [
        f"{path.relative_to(REPO)}:{number}: {match.group(0)}"
        for number, line in enumerate(text.splitlines(), start=1)
        for match in UNSHIPPED_NOTE.finditer(line)
    ]


def heading_anchor(heading: str) -> str:
    """The anchor a Markdown renderer gives a heading (GitHub's rule)."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors_of(markdown: str) -> set[str]:
    anchors, fenced = set(), False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            anchors.add(heading_anchor(line.lstrip("#")))
    return anchors


def broken_links(path: Path, text: str) -> list[str]:
    broken = []
    for number, line in enumerate(text.splitlines(), start=1):
        for target in MARKDOWN_LINK.findall(line):
            if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
                continue
            name, _, anchor = target.partition("#")
            linked = (path.parent / name).resolve() if name else path
            where = f"{path.relative_to(REPO)}:{number}: {target}"
            if not linked.exists():
                broken.append(f"{where} (no such file)")
            elif (
                anchor
                and linked.suffix == ".md"
                and anchor not in anchors_of(linked.read_text(encoding="utf-8"))
            ):
                broken.append(f"{where} (no such section)")
    return broken


def documents() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


# -- the repository ----------------------------------------------------------------


def test_no_document_or_comment_names_a_path_outside_the_repository() -> None:
    found = []
    read = 0
    for path in tracked_files():
        text = read_text(path)
        if text is not None and path.suffix in {".md", ".py"} | COMMENTED_SUFFIXES:
            read += 1
            found += outside_paths(path, text)
    assert read > 100, "the scan read almost nothing"
    assert found == []


def test_nothing_cites_design_notes_that_are_not_in_the_repository() -> None:
    found = []
    for path in tracked_files():
        text = read_text(path)
        if text is not None:
            found += unshipped_citations(path, text)
    assert found == []


def test_the_readme_is_a_users_guide_of_at_most_320_lines() -> None:
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES


def test_the_readme_test_command_is_the_one_ci_runs() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    commands = [
        line.strip()
        for line in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
        if "pytest" in line and not line.lstrip().startswith("#")
    ]
    assert commands, ".ci/run runs no pytest command"
    for command in commands:
        assert f"\n{command}\n" in readme


def test_every_link_of_the_readme_and_docs_exists() -> None:
    assert len(documents()) >= 6  # the README and the five reference pages
    found = []
    for path in documents():
        found += broken_links(path, path.read_text(encoding="utf-8"))
    assert found == []


# -- the checks themselves, on planted text -------------------------------------------


def test_the_checks_find_what_is_planted(tmp_path: Path) -> None:
    root = "/" + "work"
    home = "/" + "home/ana"
    note = "STORAGE" + ".md"
    section = "\u00a7"
    source = (
        f'"""Reads {home}/notes (see {note})."""\n'
        f"import os  # the answer of {section}3.1\n"
        f"# the copy in {root}/shared\n"
        f'PATH = "{root}/data"  # code may name it\n'
    )
    module = REPO / "core" / "planted.py"  # named inside the repository, never written
    assert [hit.split(": ", 1)[1] for hit in outside_paths(module, source)] == [
        f"{home}/",
        f"{root}/",
    ]
    assert len(unshipped_citations(module, source)) == 2
    doc = REPO / "docs" / "planted.md"
    planted = (
        "[there](storage.md#forks) [gone](missing.md) [nowhere](storage.md#no-such-part)\n"
        f"Built in {root}/main. Fetch https://example.org/tmp/x and tests/tmp/y.\n"
    )
    assert [hit.split(": ", 1)[1] for hit in broken_links(doc, planted)] == [
        "missing.md (no such file)",
        "storage.md#no-such-part (no such section)",
    ]
    assert len(outside_paths(doc, planted)) == 1


def test_headings_give_the_anchors_links_use() -> None:
    assert heading_anchor(" Fsyncs of a branch click") == "fsyncs-of-a-branch-click"
    assert heading_anchor(" Format 1 and format 2") == "format-1-and-format-2"
    assert heading_anchor(" `session new [--title TITLE]`") == "session-new---title-title"
