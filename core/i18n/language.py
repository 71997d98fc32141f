"""The active language: gettext lookups and Babel formatting.

Every user-visible string goes through :func:`_` / :func:`ngettext` at the
moment it is shown, so a live language switch only has to call
:func:`set_language` and re-render. Catalogs are the Babel ``.po`` files under
``branchwise.locales``; a compiled ``.mo`` next to a ``.po`` is used when it is
at least as new, otherwise the ``.po`` is compiled in memory, so a fresh
``pip install -e .`` needs no build step.

Pure Python (no Qt): the desktop's ``qt_i18n`` module listens here and
retranslates widgets and Qt's own dialogs. Mapping locale spellings to our
languages lives in :mod:`~branchwise.core.i18n.locales`.
"""

from __future__ import annotations

import gettext
import inspect
import io
import logging
import threading
import weakref
from collections.abc import Callable, Mapping
from datetime import datetime, tzinfo
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path

from babel import Locale, dates, numbers
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

from branchwise.core.i18n.locales import (
    DEFAULT_LANGUAGE,
    resolve_locale,
)

log = logging.getLogger(__name__)

DISPLAY_NAMES: Mapping[str, str] = {"en": "English", "zh_Hans": "简体中文", "zh_Hant": "繁體中文"}
"""Each language named in itself: a language menu must be readable by its speakers."""

BABEL_LOCALES: Mapping[str, str] = {"en": "en", "zh_Hans": "zh_Hans_CN", "zh_Hant": "zh_Hant_TW"}
"""The CLDR locale whose dates and numbers each language uses."""

DOMAIN = "messages"


# --- catalogs ---------------------------------------------------------------


def catalog_root() -> Traversable:
    """The installed ``branchwise.locales`` package (``locales/`` in a checkout)."""
    return resources.files("branchwise.locales")


def compile_po(po_bytes: bytes) -> bytes:
    """Compile ``.po`` text to ``.mo`` bytes in memory (fuzzy entries left out)."""
    catalog = read_po(io.BytesIO(po_bytes), domain=DOMAIN)
    buffer = io.BytesIO()
    write_mo(buffer, catalog, use_fuzzy=False)
    return buffer.getvalue()


def load_translations(code: str, root: Traversable | None = None) -> gettext.GNUTranslations:
    """Read the catalog of ``code`` from ``root`` (default: :func:`catalog_root`).

    Prefers ``messages.mo`` when it exists and is not older than
    ``messages.po`` (a stale ``.mo`` from an earlier compile must not hide a
    newer translation); otherwise compiles the ``.po``.

    Raises:
        FileNotFoundError: neither file exists.
    """
    folder = (root if root is not None else catalog_root()) / code / "LC_MESSAGES"
    mo, po = folder / f"{DOMAIN}.mo", folder / f"{DOMAIN}.po"
    if mo.is_file() and (not po.is_file() or not _older(mo, po)):
        data = mo.read_bytes()
    elif po.is_file():
        data = compile_po(po.read_bytes())
    else:
        raise FileNotFoundError(f"no {DOMAIN}.po or {DOMAIN}.mo for {code!r} in {folder}")
    return gettext.GNUTranslations(io.BytesIO(data))


def _older(a: Traversable, b: Traversable) -> bool:
    if isinstance(a, Path) and isinstance(b, Path):
        return a.stat().st_mtime_ns < b.stat().st_mtime_ns
    return False  # inside an archive: both come from the same build


_cache: dict[str, gettext.NullTranslations] = {}
_lock = threading.Lock()


def _translations_for(code: str) -> gettext.NullTranslations:
    with _lock:
        cached = _cache.get(code)
        if cached is None:
            try:
                cached = load_translations(code)
            except Exception:
                # A broken install must not take the app down: show the source
                # (English) strings and say why in the log.
                log.exception("cannot load the %s catalog; showing English", code)
                cached = gettext.NullTranslations()
            _cache[code] = cached
        return cached


# --- the active language ------------------------------------------------------

_active_code = DEFAULT_LANGUAGE
_active: gettext.NullTranslations | None = None
_listeners: list[Callable[[], Callable[[str], object] | None]] = []


def _translations() -> gettext.NullTranslations:
    global _active
    active = _active
    if active is None:  # first lookup, or after reload_catalogs()
        active = _active = _translations_for(_active_code)
    return active


def _(message: str) -> str:
    """Translate ``message`` into the active language."""
    return _translations().gettext(message)


def ngettext(singular: str, plural: str, n: int) -> str:
    """Translate a message with a count; Chinese has one form, English two."""
    return _translations().ngettext(singular, plural, n)


def N_(message: str) -> str:  # noqa: N802 - the conventional gettext marker name
    """Mark ``message`` for extraction only; translate it later with :func:`_`."""
    return message


def translator(value: str | None = None) -> Callable[[str], str]:
    """``gettext`` of one language (default: the active one), leaving the active one alone.

    For text written in a fixed language while the interface may switch, such
    as an answer the demo responder has started streaming.
    """
    code = _active_code if value is None else resolve_locale(value)[0]
    return _translations_for(code).gettext


def current_language() -> str:
    """The active language code (one of :data:`SUPPORTED`)."""
    return _active_code


def set_language(value: str | None) -> str:
    """Switch the active language and notify listeners if it changed.

    ``value`` may be any locale spelling (``zh-TW``, ``zh_Hant``); unknown
    values give English. Returns the code now active.
    """
    global _active_code, _active
    code, _fallback = resolve_locale(value)
    translations = _translations_for(code)
    changed = code != _active_code
    _active_code, _active = code, translations
    if changed:
        _notify(code)
    return code


def add_language_listener(callback: Callable[[str], object]) -> None:
    """Call ``callback(code)`` after every language change.

    A bound method is held weakly (registering does not keep its object
    alive); a plain function is held strongly until removed.
    """
    ref: Callable[[], Callable[[str], object] | None]
    if inspect.ismethod(callback):
        ref = weakref.WeakMethod(callback)
    else:

        def ref(cb: Callable[[str], object] = callback) -> Callable[[str], object]:
            return cb

    _listeners.append(ref)


def remove_language_listener(callback: Callable[[str], object]) -> None:
    """Stop calling ``callback``; unknown callbacks are ignored."""
    _listeners[:] = [r for r in _listeners if r() not in (None, callback)]


def _notify(code: str) -> None:
    # Every live listener runs even if one fails; the first failure is then
    # raised so it is not swallowed.
    _listeners[:] = [r for r in _listeners if r() is not None]
    first_error: BaseException | None = None
    for ref in list(_listeners):
        callback = ref()
        if callback is None:
            continue
        try:
            callback(code)
        except Exception as exc:  # noqa: BLE001 - re-raised below
            first_error = first_error or exc
    if first_error is not None:
        raise first_error


# --- formatting ---------------------------------------------------------------


def babel_locale(code: str | None = None) -> Locale:
    """The Babel locale for ``code`` (default: the active language)."""
    return Locale.parse(BABEL_LOCALES[code or _active_code])


def _moment(ts: float, tz: tzinfo | None) -> datetime:
    return datetime.fromtimestamp(ts, tz) if tz else datetime.fromtimestamp(ts).astimezone()


def format_number(n: float) -> str:
    """``n`` with the locale's grouping, e.g. token counts (``12,345``)."""
    return numbers.format_decimal(n, locale=babel_locale())


def format_datetime(ts: float, style: str = "short", tz: tzinfo | None = None) -> str:
    """Date and time of the Unix time ``ts`` (local time unless ``tz``)."""
    moment = _moment(ts, tz)
    return dates.format_datetime(moment, style, tzinfo=moment.tzinfo, locale=babel_locale())


def format_date(ts: float, style: str = "medium", tz: tzinfo | None = None) -> str:
    """The date of ``ts``."""
    return dates.format_date(_moment(ts, tz).date(), style, locale=babel_locale())


def format_time(ts: float, style: str = "short", tz: tzinfo | None = None) -> str:
    """The time of day of ``ts``."""
    moment = _moment(ts, tz)
    return dates.format_time(moment, style, tzinfo=moment.tzinfo, locale=babel_locale())
