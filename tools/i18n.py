#!/usr/bin/env python3
"""Catalog tasks for Branchwise: extract, update, compile, check (sync, todo, translate).

    python tools/i18n.py sync                 # extract + update, after adding/changing strings
    python tools/i18n.py todo > todo.json     # what the Chinese catalogs still need
    python tools/i18n.py translate todo.json  # write the filled-in texts (clears fuzzy)
    python tools/i18n.py check                # the parity lint (also run by the tests)
    python tools/i18n.py compile              # .mo files for packaged builds (gitignored)

``extract`` rewrites ``locales/messages.pot`` only when a message or location
changed (not for a new creation date), so re-running it is free. ``update``
merges the template into every catalog (a changed string keeps its old
translation, marked fuzzy), drops obsolete entries, and keeps the English
catalog equal to the source strings. (No ``--previous``: Babel writes ``#|``
lines but reads them back as plain comments, so they would pile up.)

New or changed entries in the Chinese catalogs are then empty or ``#, fuzzy``.
Translate them in the ``.po`` files (and delete the fuzzy flag), or round-trip
through JSON: ``todo`` prints ``{msgid: {"zh_Hans": "", "zh_Hant": ""}}`` for
every entry that needs work (keys starting with ``_`` are context), and
``translate FILE`` writes the non-empty texts back. Then ``check`` passes.

The check functions live in ``i18n_check.py`` (next to this file), imported
by ``tests/test_catalog_parity.py``.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import sys
import tempfile
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.frontend import CommandLineInterface
from babel.messages.pofile import read_po, write_po
from i18n_check import (
    DOMAIN,
    KEYWORDS,
    LANGUAGES,
    LOCALES,
    MAPPING,
    ROOT,
    SOURCE_DIRS,
    TEMPLATE,
    _forms,
    _key,
    _plural_id,
    check,
)

TASKS = ("extract", "update", "sync", "todo", "translate", "check", "compile")
TRANSLATOR_TAG = "TRANSLATORS:"


# --- running pybabel -------------------------------------------------------------


def _pybabel(*args: str) -> None:
    print("$ pybabel " + " ".join(args), flush=True)
    CommandLineInterface().run(["pybabel", *args])


def _version(root: Path) -> str:
    with (root / "pyproject.toml").open("rb") as f:
        return str(tomllib.load(f)["project"]["version"])


def _keyword_args() -> list[str]:
    args = ["--no-default-keywords"]
    for name, spec in KEYWORDS.items():
        args += ["-k", name if spec is None else f"{name}:{','.join(map(str, spec))}"]
    return args


def _without_creation_date(text: str) -> str:
    return re.sub(r'^"POT-Creation-Date: .*\\n"$', "", text, flags=re.MULTILINE)


def extract(root: Path = ROOT) -> bool:
    """Re-extract the template; returns whether ``messages.pot`` changed."""
    template = root / TEMPLATE
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "messages.pot"
        _pybabel(
            "extract", "-F", MAPPING, *_keyword_args(), f"--add-comments={TRANSLATOR_TAG}",
            "--strip-comment-tags", "--sort-output", "--add-location=file", "--no-wrap",
            "--project=Branchwise", f"--version={_version(root)}",
            "--copyright-holder=Branchwise contributors",
            "-o", str(out), *SOURCE_DIRS,
        )  # fmt: skip
        new = out.read_text(encoding="utf-8")
    old = template.read_text(encoding="utf-8") if template.exists() else ""
    if _without_creation_date(old) == _without_creation_date(new):
        print(f"{TEMPLATE} is up to date")
        return False
    template.write_text(new, encoding="utf-8")
    print(f"wrote {TEMPLATE}")
    return True


def update(root: Path = ROOT) -> None:
    """Merge the template into each catalog; English is reset to the source text."""
    for language in LANGUAGES:
        _pybabel(
            "update", "-i", TEMPLATE, "-d", LOCALES, "-D", DOMAIN, "-l", language,
            "--init-missing", "--ignore-obsolete", "--no-wrap",
            "--ignore-pot-creation-date",
        )  # fmt: skip
    _fill_english(root / LOCALES / "en" / "LC_MESSAGES" / f"{DOMAIN}.po")


def _fill_english(path: Path) -> None:
    # English is the source language: its msgstr is the msgid, never fuzzy, so
    # the parity rules hold for it like for any other catalog.
    catalog = _read(path, "en")
    for message in catalog:
        if not message.id:
            continue
        message.string = message.id if isinstance(message.id, str) else tuple(message.id)
        message.flags.discard("fuzzy")
    buffer = io.BytesIO()
    write_po(buffer, catalog, width=0, ignore_obsolete=True)
    if buffer.getvalue() != path.read_bytes():
        path.write_bytes(buffer.getvalue())


def _po_path(root: Path, language: str) -> Path:
    return root / LOCALES / language / "LC_MESSAGES" / f"{DOMAIN}.po"


def _read(path: Path, language: str) -> Catalog:
    with path.open("rb") as f:
        return read_po(f, locale=language, domain=DOMAIN)


def todo(root: Path = ROOT) -> dict[str, dict[str, str]]:
    """Entries a translator still has to write: empty or fuzzy, per language."""
    work: dict[str, dict[str, str]] = {}
    for language in LANGUAGES[1:]:
        for message in _read(_po_path(root, language), language):
            if not message.id or (all(_forms(message)) and not message.fuzzy):
                continue
            entry = work.setdefault(_key(message)[1], {})
            entry[language] = ""
            if _plural_id(message):
                entry["_plural"] = str(_plural_id(message))
            if message.fuzzy and _forms(message)[0]:
                entry[f"_{language}_guess"] = _forms(message)[0]
            if message.auto_comments:
                entry["_comment"] = " ".join(message.auto_comments)
    return work


def translate(texts: Mapping[str, Mapping[str, str]], root: Path = ROOT) -> list[str]:
    """Write ``{msgid: {language: text}}`` into the catalogs; returns unknown msgids.

    Empty texts and ``_`` keys are skipped; a written entry loses its fuzzy flag.
    """
    unknown: set[str] = set()
    for language in LANGUAGES[1:]:
        path = _po_path(root, language)
        catalog = _read(path, language)
        for msgid, by_language in texts.items():
            text = by_language.get(language)
            if not text:
                continue
            message = catalog.get(msgid)
            if message is None or not message.id:
                unknown.add(msgid)
                continue
            plural = not isinstance(message.id, str)
            message.string = (text,) * catalog.num_plurals if plural else text
            message.flags.discard("fuzzy")
        buffer = io.BytesIO()
        write_po(buffer, catalog, width=0, ignore_obsolete=True)
        if buffer.getvalue() != path.read_bytes():
            path.write_bytes(buffer.getvalue())
    return sorted(unknown)


def compile_catalogs() -> None:
    """Build ``messages.mo`` next to every ``messages.po`` (fuzzy entries left out)."""
    _pybabel("compile", "-d", LOCALES, "-D", DOMAIN, "--statistics")


# --- command line -------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run one task from the repository root; non-zero when ``check`` finds problems."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("task", choices=TASKS)
    parser.add_argument("file", nargs="?", type=Path, help="translate: the filled-in JSON")
    args = parser.parse_args(argv)
    if args.task == "translate" and args.file is None:
        parser.error("translate needs the JSON file written by todo")
    texts = json.loads(args.file.read_text(encoding="utf-8")) if args.file else {}
    os.chdir(ROOT)  # pybabel writes locations relative to the working directory
    if args.task in ("extract", "sync"):
        extract()
    if args.task in ("update", "sync"):
        update()
    if args.task == "compile":
        compile_catalogs()
    if args.task == "todo":
        print(json.dumps(todo(), ensure_ascii=False, indent=2))
    if args.task == "translate":
        for msgid in translate(texts):
            print(f"not in the catalogs (run sync first?): {msgid!r}")
    if args.task == "check":
        problems = check()
        for problem in problems:
            print(problem)
        print(f"{len(problems)} problem(s)" if problems else "catalogs are in parity")
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
