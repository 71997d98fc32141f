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

The check functions are imported by ``tests/test_catalog_parity.py``.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import string
import sys
import tempfile
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from babel.messages.catalog import PYTHON_FORMAT, Catalog, Message
from babel.messages.extract import extract_from_dir
from babel.messages.frontend import CommandLineInterface, parse_mapping_cfg
from babel.messages.plurals import get_plural
from babel.messages.pofile import read_po, write_po

ROOT = Path(__file__).resolve().parents[1]
LOCALES = "locales"
MAPPING = f"{LOCALES}/babel.cfg"
TEMPLATE = f"{LOCALES}/messages.pot"
DOMAIN = "messages"
LANGUAGES = ("en", "zh_Hans", "zh_Hant")
SOURCE_DIRS = ("core", "desktop")
TASKS = ("extract", "update", "sync", "todo", "translate", "check", "compile")
# The one definition of our gettext keywords (babel.cfg cannot carry them).
KEYWORDS: Mapping[str, tuple[int, ...] | None] = {"_": None, "N_": None, "ngettext": (1, 2)}
TRANSLATOR_TAG = "TRANSLATORS:"
SAME_AS_ENGLISH = "same-as-english"
"""A translator comment that allows a non-English msgstr equal to its msgid."""

_FSTRING_CALL = re.compile(r"(?<![\w])(?:_|N_|ngettext)\(\s*(?:[rRuU]?[fF]|[fF][rR])[\"']")


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


# --- the parity lint ---------------------------------------------------------------


@dataclass(frozen=True, order=True, slots=True)
class Problem:
    """One thing wrong with the catalogs; ``where`` is a catalog or a source file."""

    where: str
    kind: str
    msgid: str
    detail: str = ""

    def __str__(self) -> str:
        detail = f": {self.detail}" if self.detail else ""
        return f"{self.where}: {self.kind}: {self.msgid!r}{detail}"


Key = tuple[str | None, str]


def _key(message: Message) -> Key:
    msgid = message.id if isinstance(message.id, str) else message.id[0]
    return message.context, msgid


def _plural_id(message: Message) -> str | None:
    return None if isinstance(message.id, str) else message.id[1]


def _forms(message: Message) -> list[str]:
    string = message.string
    if string is None or isinstance(string, str):
        return [string or ""]
    return [form or "" for form in string]


def brace_fields(text: str) -> frozenset[str]:
    """The ``{name}`` style fields of ``text`` as written (``{n}``, ``{n:,}``).

    Raises:
        ValueError: unbalanced or otherwise malformed braces.
    """
    fields = set()
    for _literal, name, spec, conversion in string.Formatter().parse(text):
        if name is not None:
            fields.add(
                "{" + name + (f"!{conversion}" if conversion else "")
                + (f":{spec}" if spec else "") + "}"
            )  # fmt: skip
    return frozenset(fields)


def percent_fields(text: str) -> frozenset[str]:
    """The ``%(name)s`` / ``%d`` fields of ``text`` (``%%`` is a literal)."""
    return frozenset(m.group(0) for m in PYTHON_FORMAT.finditer(text) if m.group(0) != "%%")


def _fields(text: str, python_format: bool) -> frozenset[str]:
    return brace_fields(text) | (percent_fields(text) if python_format else frozenset())


def _translation_problems(message: Message, nplurals: int, where: str) -> list[Problem]:
    msgid, plural = _key(message)[1], _plural_id(message)
    strings = _forms(message)
    problems = []
    if message.fuzzy:
        problems.append(Problem(where, "fuzzy", msgid, "review it, then delete the fuzzy flag"))
    if plural is not None and len(strings) != nplurals:
        problems.append(Problem(where, "plural_forms", msgid, f"{len(strings)} != {nplurals}"))
    if not all(strings):
        problems.append(Problem(where, "empty", msgid))
        return problems
    try:
        singular_fields = _fields(msgid, message.python_format)
        plural_fields = _fields(plural, message.python_format) if plural is not None else None
    except ValueError as exc:
        return [*problems, Problem(where, "placeholders", msgid, f"malformed msgid: {exc}")]
    for index, text in enumerate(strings):
        if plural_fields is None or (index == 0 and nplurals > 1):
            expected = singular_fields
        elif nplurals == 1:  # one form serves every count: it needs every field
            expected = singular_fields | plural_fields
        else:
            expected = plural_fields
        try:
            found = _fields(text, message.python_format)
        except ValueError as exc:
            problems.append(Problem(where, "placeholders", msgid, f"malformed: {text!r}: {exc}"))
            continue
        if found != expected:
            detail = f"{text!r} has {sorted(found)}, expected {sorted(expected)}"
            problems.append(Problem(where, "placeholders", msgid, detail))
    return problems


def check_catalog(po_path: Path, template: Catalog, language: str) -> list[Problem]:
    """Everything wrong with one catalog compared with the template."""
    where = f"{language}/{po_path.name}"
    with po_path.open("rb") as f:
        catalog = read_po(f, locale=language, domain=DOMAIN)
    problems: list[Problem] = []
    expected_plurals = get_plural(language).num_plurals
    if catalog.num_plurals != expected_plurals:
        detail = f"header says nplurals={catalog.num_plurals}, {language} has {expected_plurals}"
        problems.append(Problem(where, "plural_forms", "", detail))
    wanted = {_key(m): m for m in template if m.id}
    present = {_key(m): m for m in catalog if m.id}
    for key in wanted.keys() - present.keys():
        problems.append(Problem(where, "missing", key[1], "run: python tools/i18n.py update"))
    for key in present.keys() - wanted.keys():
        problems.append(Problem(where, "extra", key[1], "run: python tools/i18n.py update"))
    for key, message in present.items():
        if key not in wanted:
            continue
        if _plural_id(message) != _plural_id(wanted[key]):
            problems.append(Problem(where, "plural_id", key[1], "run: python tools/i18n.py update"))
            continue
        problems += _translation_problems(message, catalog.num_plurals, where)
        copied = all(form in (key[1], _plural_id(message)) for form in _forms(message))
        if language != "en" and copied and SAME_AS_ENGLISH not in message.user_comments:
            problems.append(Problem(where, "untranslated", key[1], "msgstr is the English text"))
    return problems


def check_catalogs(root: Path = ROOT, languages: Sequence[str] = LANGUAGES) -> list[Problem]:
    """Parity of every catalog with ``messages.pot``."""
    with (root / TEMPLATE).open("rb") as f:
        template = read_po(f, domain=DOMAIN)
    problems: list[Problem] = []
    for language in languages:
        po = root / LOCALES / language / "LC_MESSAGES" / f"{DOMAIN}.po"
        if not po.is_file():
            problems.append(Problem(f"{language}/", "missing_catalog", "", str(po)))
            continue
        problems += check_catalog(po, template, language)
    return sorted(problems)


def extracted_messages(
    root: Path, source_dirs: Iterable[str] = SOURCE_DIRS
) -> dict[Key, str | None]:
    """What ``extract`` would put in the template: key -> plural msgid (or None)."""
    with (root / MAPPING).open(encoding="utf-8") as f:
        method_map, options_map = parse_mapping_cfg(f)
    found: dict[Key, str | None] = {}
    for folder in source_dirs:
        if not (root / folder).is_dir():
            continue
        for _file, _line, message, _comments, context in extract_from_dir(
            root / folder, method_map, options_map, keywords=KEYWORDS
        ):
            if isinstance(message, str):
                found[(context, message)] = None
            else:
                found[(context, message[0])] = message[1]
    return found


def check_template(root: Path = ROOT, source_dirs: Iterable[str] = SOURCE_DIRS) -> list[Problem]:
    """``messages.pot`` holds exactly the messages the sources mark, and no
    source passes an f-string to a gettext function (it can never be translated)."""
    source_dirs = tuple(source_dirs)
    problems: list[Problem] = []
    for folder in source_dirs:
        for path in sorted((root / folder).rglob("*.py")) if (root / folder).is_dir() else ():
            text = path.read_text(encoding="utf-8")
            for match in _FSTRING_CALL.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                where = f"{path.relative_to(root)}:{line}"
                problems.append(
                    Problem(where, "fstring", match.group(0), "use _('{x}').format(x=…)")
                )
    with (root / TEMPLATE).open("rb") as f:
        template = {_key(m): _plural_id(m) for m in read_po(f, domain=DOMAIN) if m.id}
    sources = extracted_messages(root, source_dirs)
    fix = "run: python tools/i18n.py sync"
    for key in sources.keys() - template.keys():
        problems.append(Problem(TEMPLATE, "not_extracted", key[1], fix))
    for key in template.keys() - sources.keys():
        problems.append(Problem(TEMPLATE, "stale_template", key[1], fix))
    for key in sources.keys() & template.keys():
        if sources[key] != template[key]:
            problems.append(Problem(TEMPLATE, "plural_id", key[1], fix))
    return sorted(problems)


def check(root: Path = ROOT) -> list[Problem]:
    """The whole lint: template freshness, then catalog parity."""
    return check_template(root) + check_catalogs(root)


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
