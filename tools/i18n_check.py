"""The catalog parity lint: the template matches the sources, each catalog the template.

``python tools/i18n.py check`` runs :func:`check`; ``tests/test_catalog_parity.py``
imports these functions and runs them against the real catalogs and broken
copies. The catalog layout and gettext keywords are defined here because the
lint must know exactly what ``extract`` would produce; ``i18n.py`` imports them.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from babel.messages.catalog import PYTHON_FORMAT, Catalog, Message
from babel.messages.extract import extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.plurals import get_plural
from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parents[1]
LOCALES = "locales"
MAPPING = f"{LOCALES}/babel.cfg"
TEMPLATE = f"{LOCALES}/messages.pot"
DOMAIN = "messages"
LANGUAGES = ("en", "zh_Hans", "zh_Hant")
SOURCE_DIRS = ("core", "desktop")
# The one definition of our gettext keywords (babel.cfg cannot carry them).
KEYWORDS: Mapping[str, tuple[int, ...] | None] = {"_": None, "N_": None, "ngettext": (1, 2)}
SAME_AS_ENGLISH = "same-as-english"
"""A translator comment that allows a non-English msgstr equal to its msgid."""

_FSTRING_CALL = re.compile(r"(?<![\w])(?:_|N_|ngettext)\(\s*(?:[rRuU]?[fF]|[fF][rR])[\"']")


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
