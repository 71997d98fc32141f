"""Locale mapping: any locale spelling, the OS's locale, and the start-up choice.

Every place a language can come from (``--lang``, the saved setting, the
system) is mapped here to one of our catalogs, so the rules for ``zh_TW`` vs
``zh_CN`` vs ``fr_FR`` live in one module. Pure Python (no Qt, no catalogs):
:mod:`branchwise.core.i18n` re-exports these names for its callers.
"""

from __future__ import annotations

import locale
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from babel import Locale, UnknownLocaleError

SUPPORTED: tuple[str, ...] = ("en", "zh_Hans", "zh_Hant")
"""Our language codes, also the catalog folder names under ``locales/``."""

DEFAULT_LANGUAGE = "en"

UNKNOWN_LANGUAGE = "unknown_language"

# Chinese regions whose script is certain, kept explicit so the mapping does
# not depend on the CLDR data of whichever Babel is installed.
_HANS_TERRITORIES = frozenset({"CN", "SG"})
_HANT_TERRITORIES = frozenset({"TW", "HK", "MO"})
# Tags in a locale chain that name one of our languages.
_CHAIN_TO_CODE: Mapping[str, str] = {
    "en": "en",
    "zh_Hans": "zh_Hans",
    "zh_Hant": "zh_Hant",
    "zh": "zh_Hans",
}
# POSIX "no locale configured": English without complaint.
_NO_PREFERENCE = frozenset({"c", "posix"})
_LANGUAGE_SUBTAG = re.compile(r"[a-z]{2,3}")


def locale_chain(value: str) -> tuple[str, ...]:
    """Candidate tags for ``value``, most specific first, e.g. ``zh_TW`` ->
    ``('zh_Hant_TW', 'zh_Hant', 'zh_TW', 'zh')``.

    Accepts ``-`` or ``_`` separators, any case, and POSIX suffixes
    (``zh_TW.UTF-8``, ``sr_RS@latin``). A missing script is filled in from the
    territory (explicit table, then CLDR likely subtags via
    ``babel.Locale.parse``), because Babel itself never falls back from
    ``zh_Hant_TW`` to ``zh_Hant``. Returns ``()`` for a value that is not a
    locale tag at all.
    """
    tag = value.strip().split(".", 1)[0].split("@", 1)[0].replace("-", "_")
    language, *rest = tag.split("_")
    language = language.lower()
    if not _LANGUAGE_SUBTAG.fullmatch(language):
        return ()
    script: str | None = None
    territory: str | None = None
    for part in rest:
        if len(part) == 4 and part.isalpha():
            script = part.title()
        elif (len(part) == 2 and part.isalpha()) or (len(part) == 3 and part.isdigit()):
            territory = part.upper()
    if script is None:
        script = _likely_script(language, territory)
    chain = [
        "_".join(p for p in (language, script, territory) if p),
        "_".join(p for p in (language, script) if p),
        "_".join(p for p in (language, territory) if p),
        language,
    ]
    return tuple(dict.fromkeys(chain))


def _likely_script(language: str, territory: str | None) -> str | None:
    if language == "zh" and territory in _HANS_TERRITORIES:
        return "Hans"
    if language == "zh" and territory in _HANT_TERRITORIES:
        return "Hant"
    if territory is None:
        return None
    try:
        return Locale.parse(f"{language}_{territory}").script
    except (UnknownLocaleError, ValueError):
        return None


def resolve_locale(value: str | None) -> tuple[str, bool]:
    """Map any locale spelling to one of :data:`SUPPORTED`.

    Returns ``(code, fallback)``: ``fallback`` is true when ``value`` named
    something we do not support (``fr_FR``, ``klingon``) and English was used
    instead. ``None``, ``""``, ``C`` and ``POSIX`` mean "no preference": English,
    not a fallback.
    """
    if value is None or not value.strip():
        return DEFAULT_LANGUAGE, False
    if value.strip().split(".", 1)[0].lower() in _NO_PREFERENCE:
        return DEFAULT_LANGUAGE, False
    for tag in locale_chain(value):
        code = _CHAIN_TO_CODE.get(tag)
        if code is not None:
            return code, False
    return DEFAULT_LANGUAGE, True


def system_locale(environ: Mapping[str, str] | None = None) -> str | None:
    """The user's interface locale as the OS spells it, or ``None``.

    Follows POSIX precedence (``LC_ALL``, ``LC_MESSAGES``, ``LANG``), but lets
    GNU ``LANGUAGE`` (a ``:`` list such as ``zh_TW:zh``) pick first when it names
    a language we have, as gettext does. Then Windows' UI language, then the
    ``locale`` module.
    """
    env = os.environ if environ is None else environ
    posix = next((env[k] for k in ("LC_ALL", "LC_MESSAGES", "LANG") if env.get(k)), None)
    if posix and posix.split(".", 1)[0].lower() not in _NO_PREFERENCE:
        # gettext ignores LANGUAGE under the C locale; so do we.
        for entry in env.get("LANGUAGE", "").split(":"):
            if entry and not resolve_locale(entry)[1]:
                return entry
    if posix:
        return posix
    if environ is not None:
        return None  # an explicit environment is the whole truth (tests, subprocesses)
    return _platform_locale()


def _platform_locale() -> str | None:
    if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
        import ctypes

        lcid = ctypes.windll.kernel32.GetUserDefaultUILanguage()  # type: ignore[attr-defined]
        name = locale.windows_locale.get(lcid)
        if name:
            return name
    try:
        return locale.getlocale(locale.LC_MESSAGES)[0] or locale.getlocale()[0]
    except (AttributeError, ValueError):  # pragma: no cover - no LC_MESSAGES on Windows
        return locale.getlocale()[0]


@dataclass(frozen=True, slots=True)
class LanguageNotice:
    """A language setting we could not honour; shown once, never fatal.

    Attributes:
        value: the setting as given (the reason text's ``value`` placeholder).
        source: where it came from, ``"cli"`` (``--lang``) or ``"saved"``.
        code: the reason code for :func:`branchwise.core.i18n.reasons.reason_text`.
    """

    value: str
    source: str
    code: str = UNKNOWN_LANGUAGE


def choose_language(
    cli_value: str | None, saved_value: str | None, system_value: str | None
) -> tuple[str, LanguageNotice | None]:
    """Pick the start-up language: ``--lang``, else the saved setting, else the system.

    An unknown ``--lang`` or saved value is skipped with a notice (the first one
    met), so a bad setting never hides a good system locale. A system locale we
    do not translate (``fr_FR``) means English without a notice: the user did
    not ask for it here.
    """
    notice: LanguageNotice | None = None
    for source, value in (("cli", cli_value), ("saved", saved_value)):
        if value is None or not value.strip():
            continue
        code, fallback = resolve_locale(value)
        if not fallback:
            return code, notice
        notice = notice or LanguageNotice(value=value, source=source)
    return resolve_locale(system_value)[0], notice
