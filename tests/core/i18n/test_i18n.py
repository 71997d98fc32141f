"""The active language: lookups, live switching, catalog loading, Babel formatting."""

from __future__ import annotations

import gc
import io
import os
import pkgutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from importlib import import_module
from pathlib import Path

import pytest
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from helpers import REPO_ROOT

import branchwise.core
from branchwise.core.errors import BranchwiseError, LeaseHeld
from branchwise.core.i18n import language as i18n
from branchwise.core.i18n import reasons
from branchwise.core.i18n.language import _, ngettext, set_language
from branchwise.core.i18n.locales import SUPPORTED
from branchwise.core.i18n.reasons import BRANCH_ACTION, reason_text

LOCALES = REPO_ROOT / "locales"


def known_codes() -> frozenset[str]:
    """Every code with its own sentence."""
    return frozenset(reasons.REASONS) | frozenset(reasons.PLURAL_REASONS)


@pytest.fixture(autouse=True)
def english_afterwards() -> Iterator[None]:
    """The language is process-wide: leave it as every other test expects it."""
    yield
    set_language("en")


# --- reference strings ----------------------------------------------------------


def test_branch_action_reference_strings() -> None:
    assert _(BRANCH_ACTION) == "Branch into a new conversation"
    set_language("zh_Hans")
    assert _(BRANCH_ACTION) == "在新对话中分支"
    set_language("zh_Hant")
    assert _(BRANCH_ACTION) == "在新對話中分支"


def test_disable_reasons_use_no_storage_words() -> None:
    """Why a turn cannot be branched is said in the user's words, never the record's."""
    assert reason_text("turn_open") == (
        "This turn has not finished yet; it can be branched once it has."
    )
    storage = ("boundary", "seq", "segment", "commit", "边界", "邊界", "会话记录", "對話紀錄")
    for language in ("en", "zh_Hans", "zh_Hant"):
        set_language(language)
        for code in ("turn_open", "unverifiable", "brought_back"):
            text = reason_text(code)
            assert not [word for word in storage if word in text.lower()], (language, text)
    set_language("zh_Hans")
    assert reason_text("turn_open") == "该轮次尚未结束，结束后即可分支。"


def test_every_reason_is_translated_in_both_chinese_variants() -> None:
    english = {code: reason_text(code) for code in known_codes()}
    set_language("zh_Hans")
    simplified = {code: reason_text(code) for code in known_codes()}
    set_language("zh_Hant")
    traditional = {code: reason_text(code) for code in known_codes()}
    for code in known_codes():
        assert english[code] and simplified[code] and traditional[code], code
        assert simplified[code] != english[code] != traditional[code], code
    # Traditional is its own text, not Simplified shown again.
    assert sum(simplified[c] != traditional[c] for c in english) > 0.9 * len(english)


def test_every_error_code_in_core_has_a_reason() -> None:
    for module in pkgutil.walk_packages(branchwise.core.__path__, "branchwise.core."):
        try:
            import_module(module.name)
        except ImportError:  # a module another engineer has not finished; its own tests say so
            continue
    codes: set[str] = set()
    pending = [BranchwiseError]
    while pending:
        cls = pending.pop()
        codes.add(cls.code)
        pending += cls.__subclasses__()
    missing = sorted(codes - known_codes())
    assert missing == [], f"add these codes to core/i18n/reasons.py REASONS: {missing}"


def test_unknown_codes_get_the_generic_reason() -> None:
    assert reason_text("quantum_flux") == "Something went wrong (quantum_flux)."
    set_language("zh_Hans")
    assert reason_text("quantum_flux") == "出现问题（quantum_flux）。"


def test_reason_params_nested_reasons_and_missing_params() -> None:
    assert reason_text("fork_created", title="Plans") == "Branch created: Plans"
    assert reason_text("fork_created") == "Branch created: {title}"  # shown, never raises
    assert reason_text("fork_refused", reason="stale_source") == (
        "Could not branch: The conversation has changed since this turn was shown. "
        "Reload it and try again."
    )
    set_language("zh_Hant")
    assert reason_text("fork_created", title="計畫") == "已建立分支：計畫"
    assert reason_text("fork_refused", reason="unknown_turn") == (
        "無法分支：在此對話中找不到這個輪次。"
    )


def test_fill_survives_malformed_text() -> None:
    assert reasons.fill("{broken", {"broken": 1}) == "{broken"
    assert reasons.fill("{0} and {x.y}", {"x": 1}) == "{0} and {x.y}"
    assert reasons.fill("{n} left", {"n": 3}) == "3 left"


def test_error_text_uses_the_code_not_the_message() -> None:
    error = LeaseHeld("writer.lock is held by pid 4242", pid=4242)
    assert reasons.error_text(error) == "Another window or process is writing to this conversation."
    set_language("zh_Hans")
    assert reasons.error_text(error) == "另一个窗口或进程正在写入此对话。"


# --- plural forms -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("language", "one", "many"),
    [
        ("en", "1 branch", "12,345 branches"),
        ("zh_Hans", "1 个分支", "12,345 个分支"),
        ("zh_Hant", "1 個分支", "12,345 個分支"),
    ],
)
def test_plural_helpers(language: str, one: str, many: str) -> None:
    set_language(language)
    assert reasons.branch_count(1) == one
    assert reasons.branch_count(12345) == many


def test_ngettext_uses_the_catalog_plural_rule() -> None:
    assert ngettext("{n} branch", "{n} branches", 1) == "{n} branch"
    assert ngettext("{n} branch", "{n} branches", 0) == "{n} branches"
    assert reason_text("fork_recovered", count=1) == "Recovered 1 unfinished branch operation."
    assert reason_text("fork_recovered", count=3) == "Recovered 3 unfinished branch operations."
    set_language("zh_Hans")  # nplurals=1: the one form serves every count
    assert ngettext("{n} branch", "{n} branches", 1) == ngettext("{n} branch", "{n} branches", 7)
    assert reason_text("fork_recovered", count=3) == "已恢复 3 个未完成的分支操作。"
    assert reason_text("journal_record_dropped", count=2, reason="child_missing") == (
        "已移除 2 个未完成的分支操作，其对话已不存在。"
    )


# --- switching and listeners ----------------------------------------------------------


def test_set_language_resolves_any_spelling() -> None:
    assert set_language("zh-TW") == "zh_Hant" == i18n.current_language()
    assert set_language("zh_CN.UTF-8") == "zh_Hans" == i18n.current_language()
    assert set_language("klingon") == "en" == i18n.current_language()
    assert _("Send") == "Send"


class _Widget:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def retranslate(self, code: str) -> None:
        self.seen.append(code)


def test_listeners_hear_each_change_once() -> None:
    widget = _Widget()
    heard: list[str] = []
    i18n.add_language_listener(widget.retranslate)
    i18n.add_language_listener(heard.append)
    try:
        set_language("zh_Hans")
        set_language("zh_Hans")  # not a change
        set_language("zh_Hant")
        assert widget.seen == heard == ["zh_Hans", "zh_Hant"]
        i18n.remove_language_listener(heard.append)
        set_language("en")
        assert heard == ["zh_Hans", "zh_Hant"]
        assert widget.seen[-1] == "en"
    finally:
        i18n.remove_language_listener(widget.retranslate)
        i18n.remove_language_listener(heard.append)


def test_bound_method_listeners_are_held_weakly() -> None:
    widget = _Widget()
    i18n.add_language_listener(widget.retranslate)
    del widget
    gc.collect()
    assert set_language("zh_Hans") == "zh_Hans"  # the dead listener is dropped quietly


def test_a_failing_listener_does_not_silence_the_others() -> None:
    heard: list[str] = []

    def broken(code: str) -> None:
        raise RuntimeError(f"cannot retranslate to {code}")

    i18n.add_language_listener(broken)
    i18n.add_language_listener(heard.append)
    try:
        with pytest.raises(RuntimeError, match="zh_Hant"):
            set_language("zh_Hant")
        assert heard == ["zh_Hant"]
        assert i18n.current_language() == "zh_Hant"
    finally:
        i18n.remove_language_listener(broken)
        i18n.remove_language_listener(heard.append)


# --- loading catalogs ----------------------------------------------------------------


def _catalog_copy(root: Path, language: str = "zh_Hans") -> Path:
    folder = root / language / "LC_MESSAGES"
    folder.mkdir(parents=True)
    po = folder / "messages.po"
    po.write_bytes((LOCALES / language / "LC_MESSAGES" / "messages.po").read_bytes())
    return po


def _mo_with(po: Path, msgid: str, text: str) -> bytes:
    catalog = read_po(io.BytesIO(po.read_bytes()))
    catalog[msgid].string = text
    buffer = io.BytesIO()
    write_mo(buffer, catalog)
    return buffer.getvalue()


def test_po_is_compiled_in_memory_when_no_mo_exists(tmp_path: Path) -> None:
    po = _catalog_copy(tmp_path)
    assert not po.with_suffix(".mo").exists()
    translations = i18n.load_translations("zh_Hans", tmp_path)
    assert translations.gettext(BRANCH_ACTION) == "在新对话中分支"
    assert translations.ngettext("{n} branch", "{n} branches", 5) == "{n} 个分支"


def test_a_newer_mo_is_preferred_and_a_stale_one_ignored(tmp_path: Path) -> None:
    po = _catalog_copy(tmp_path)
    mo = po.with_suffix(".mo")
    mo.write_bytes(_mo_with(po, BRANCH_ACTION, "来自 MO"))
    os.utime(po, ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))
    os.utime(mo, ns=(2_000_000_000_000_000_000, 2_000_000_000_000_000_000))
    assert i18n.load_translations("zh_Hans", tmp_path).gettext(BRANCH_ACTION) == "来自 MO"
    # Someone edited the .po after compiling: the .mo is stale and must not win.
    os.utime(po, ns=(3_000_000_000_000_000_000, 3_000_000_000_000_000_000))
    assert i18n.load_translations("zh_Hans", tmp_path).gettext(BRANCH_ACTION) == "在新对话中分支"


def test_an_mo_alone_is_enough(tmp_path: Path) -> None:
    po = _catalog_copy(tmp_path)
    po.with_suffix(".mo").write_bytes(_mo_with(po, BRANCH_ACTION, "只有 MO"))
    po.unlink()
    assert i18n.load_translations("zh_Hans", tmp_path).gettext(BRANCH_ACTION) == "只有 MO"


def test_fuzzy_entries_are_not_used(tmp_path: Path) -> None:
    po = _catalog_copy(tmp_path)
    text = po.read_text(encoding="utf-8")
    marked = text.replace('msgid "Send"', '#, fuzzy\nmsgid "Send"', 1)
    assert marked != text
    po.write_text(marked, encoding="utf-8")
    assert i18n.load_translations("zh_Hans", tmp_path).gettext("Send") == "Send"


def test_missing_catalog_raises_for_the_loader(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        i18n.load_translations("zh_Hant", tmp_path)


def test_catalogs_come_from_the_installed_package() -> None:
    root = i18n.catalog_root()
    for code in SUPPORTED:
        assert (root / code / "LC_MESSAGES" / "messages.po").is_file()


def test_a_fresh_process_starts_in_english_and_switches_without_a_compile_step() -> None:
    script = (
        "from branchwise.core.i18n.language import _, set_language, current_language\n"
        "from branchwise.core.i18n.reasons import BRANCH_ACTION\n"
        "print(current_language(), _(BRANCH_ACTION))\n"
        "set_language('zh_TW'); print(current_language(), _(BRANCH_ACTION))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    ).stdout.splitlines()
    assert out == ["en Branch into a new conversation", "zh_Hant 在新對話中分支"]


# --- Babel formatting -----------------------------------------------------------------

MOMENT = datetime(2025, 1, 2, 15, 4, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("language", "number", "short", "time"),
    [
        # CLDR puts a narrow no-break space before AM/PM and a thin space in zh_Hant.
        ("en", "1,234,567", "1/2/25, 3:04\u202fPM", "3:04\u202fPM"),
        ("zh_Hans", "1,234,567", "2025/1/2 15:04", "15:04"),
        ("zh_Hant", "1,234,567", "2025/1/2\u2009下午3:04", "下午3:04"),
    ],
)
def test_formatting_follows_the_active_locale(
    language: str, number: str, short: str, time: str
) -> None:
    set_language(language)
    assert i18n.format_number(1234567) == number
    assert i18n.format_datetime(MOMENT, tz=UTC) == short
    assert i18n.format_time(MOMENT, tz=UTC) == time


@pytest.mark.parametrize(
    ("language", "other_year"),
    [("en", "Jan 2, 2024"), ("zh_Hans", "2024年1月2日"), ("zh_Hant", "2024年1月2日")],
)
def test_dates_follow_the_active_locale(language: str, other_year: str) -> None:
    set_language(language)
    last_year = datetime(2024, 1, 2, 12, 0, tzinfo=UTC).timestamp()
    assert i18n.format_date(last_year, tz=UTC) == other_year


def test_local_time_is_the_default() -> None:
    local = datetime.fromtimestamp(MOMENT).astimezone()
    assert i18n.format_time(MOMENT) == i18n.format_time(MOMENT, tz=local.tzinfo)


def test_babel_locales() -> None:
    assert str(i18n.babel_locale("en")) == "en"
    assert str(i18n.babel_locale("zh_Hans")) == "zh_Hans_CN"
    assert str(i18n.babel_locale("zh_Hant")) == "zh_Hant_TW"
    assert i18n.DISPLAY_NAMES == {"en": "English", "zh_Hans": "简体中文", "zh_Hant": "繁體中文"}
