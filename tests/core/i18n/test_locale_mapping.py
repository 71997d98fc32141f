"""System and user locale spellings map to en / zh_Hans / zh_Hant, never crash."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from branchwise.core.i18n import language as i18n
from branchwise.core.i18n.locales import (
    SUPPORTED,
    LanguageNotice,
    choose_language,
    locale_chain,
    resolve_locale,
    system_locale,
)
from branchwise.core.i18n.reasons import reason_text

SIMPLIFIED = [
    "zh_CN", "zh_SG", "zh_Hans", "zh_Hans_CN", "zh_Hans_SG", "zh-Hans", "zh-CN", "zh-cn",
    "zh_CN.UTF-8", "zh_CN.GB2312", "zh_SG.GBK", "zh", "ZH", "zh_MY", "zh_US",
]  # fmt: skip
TRADITIONAL = [
    "zh_TW", "zh_HK", "zh_MO", "zh_Hant", "zh_Hant_TW", "zh_Hant_HK", "zh_Hant_MO",
    "zh-TW", "zh-tw", "ZH-hk", "zh-Hant-HK", "zh-Hant", "zh_TW.UTF-8", "zh_HK.Big5-HKSCS",
    "zh_Hant_CN",  # an explicit script wins over the territory
]  # fmt: skip
ENGLISH = ["en", "en_US", "en_GB.UTF-8", "en-AU", "en_US.UTF-8@euro", "EN"]
NO_PREFERENCE = [None, "", "   ", "C", "POSIX", "C.UTF-8"]
UNKNOWN = ["fr_FR", "de", "ja_JP.UTF-8", "xx", "klingon", "123", "-", "_", "zh!TW", ".UTF-8"]


@pytest.mark.parametrize("value", SIMPLIFIED)
def test_simplified_chinese_locales(value: str) -> None:
    assert resolve_locale(value) == ("zh_Hans", False)


@pytest.mark.parametrize("value", TRADITIONAL)
def test_traditional_chinese_locales(value: str) -> None:
    assert resolve_locale(value) == ("zh_Hant", False)


@pytest.mark.parametrize("value", ENGLISH)
def test_english_locales(value: str) -> None:
    assert resolve_locale(value) == ("en", False)


@pytest.mark.parametrize("value", NO_PREFERENCE)
def test_no_preference_is_english_without_fallback(value: str | None) -> None:
    assert resolve_locale(value) == ("en", False)


@pytest.mark.parametrize("value", UNKNOWN)
def test_unknown_values_fall_back_to_english(value: str) -> None:
    assert resolve_locale(value) == ("en", True)


def test_chain_is_built_explicitly_from_region_to_script() -> None:
    # Babel would not go from zh_Hant_TW to zh_Hant by itself.
    assert locale_chain("zh_TW") == ("zh_Hant_TW", "zh_Hant", "zh_TW", "zh")
    assert locale_chain("zh-Hant-HK") == ("zh_Hant_HK", "zh_Hant", "zh_HK", "zh")
    assert locale_chain("zh_SG.UTF-8") == ("zh_Hans_SG", "zh_Hans", "zh_SG", "zh")
    assert locale_chain("en_GB") == ("en_GB", "en")
    assert locale_chain("klingon") == ()


@given(st.text(max_size=40))
def test_any_text_resolves_to_a_supported_language(value: str) -> None:
    code, fallback = resolve_locale(value)
    assert code in SUPPORTED
    assert isinstance(fallback, bool)
    assert choose_language(value, value, value)[0] in SUPPORTED


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"LC_ALL": "zh_TW.UTF-8", "LC_MESSAGES": "en_US", "LANG": "zh_CN"}, "zh_TW.UTF-8"),
        ({"LC_MESSAGES": "zh_CN.UTF-8", "LANG": "en_US.UTF-8"}, "zh_CN.UTF-8"),
        ({"LANG": "zh_HK.UTF-8"}, "zh_HK.UTF-8"),
        ({"LC_ALL": "", "LANG": "en_GB.UTF-8"}, "en_GB.UTF-8"),
        # GNU LANGUAGE picks the first language we have, as gettext would...
        ({"LANG": "fr_FR.UTF-8", "LANGUAGE": "fr:zh_TW:en"}, "zh_TW"),
        ({"LANG": "zh_CN.UTF-8", "LANGUAGE": "en_US:zh_CN"}, "en_US"),
        # ...falls back to the POSIX variables when it names none...
        ({"LANG": "zh_CN.UTF-8", "LANGUAGE": "fr:de"}, "zh_CN.UTF-8"),
        # ...and is ignored under the C locale, like gettext does.
        ({"LANG": "C", "LANGUAGE": "zh_TW"}, "C"),
        ({"LANGUAGE": "zh_TW"}, None),
        ({}, None),
    ],
)
def test_system_locale_follows_posix_precedence(
    environ: dict[str, str], expected: str | None
) -> None:
    assert system_locale(environ) == expected


def test_system_locale_of_this_process_is_usable() -> None:
    value = system_locale()
    assert value is None or isinstance(value, str)
    assert resolve_locale(value)[0] in SUPPORTED


def test_cli_beats_saved_beats_system() -> None:
    assert choose_language("zh-TW", "zh_Hans", "en_US") == ("zh_Hant", None)
    assert choose_language(None, "zh_Hans", "zh_TW") == ("zh_Hans", None)
    assert choose_language("", "  ", "zh_HK.UTF-8") == ("zh_Hant", None)
    assert choose_language(None, None, "zh_SG") == ("zh_Hans", None)
    assert choose_language(None, None, None) == ("en", None)


def test_unknown_cli_value_is_reported_and_skipped() -> None:
    code, notice = choose_language("klingon", "zh_Hant", "zh_CN")
    assert code == "zh_Hant"
    assert notice == LanguageNotice(value="klingon", source="cli")
    assert notice.code == "unknown_language"


def test_unknown_saved_value_is_reported_and_the_system_decides() -> None:
    code, notice = choose_language(None, "xx_YY", "zh_TW.UTF-8")
    assert code == "zh_Hant"
    assert notice is not None and (notice.source, notice.value) == ("saved", "xx_YY")


def test_every_value_unknown_falls_back_to_english_with_the_first_notice() -> None:
    code, notice = choose_language("fr", "de", "ja_JP")
    assert code == "en"
    assert notice is not None and (notice.source, notice.value) == ("cli", "fr")


def test_an_unsupported_system_locale_gives_english_silently() -> None:
    assert choose_language(None, None, "fr_FR.UTF-8") == ("en", None)
    assert choose_language(None, None, "garbage!") == ("en", None)


def test_notice_text_is_localized() -> None:
    notice = LanguageNotice(value="klingon", source="cli")

    def text() -> str:
        return reason_text(notice.code, value=notice.value)

    try:
        assert text() == "Unknown language “klingon”; it was ignored."
        i18n.set_language("zh_Hans")
        assert text() == "未知语言“klingon”，已忽略。"
        i18n.set_language("zh_Hant")
        assert text() == "未知的語言「klingon」，已忽略。"
    finally:
        i18n.set_language("en")
