"""The three catalogs stay in parity with the template, and the template with the code.

The checks live in ``tools/i18n_check.py`` (``python tools/i18n.py check``);
here they run against the real catalogs, and against broken copies to prove
each rule can fail.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from helpers import REPO_ROOT

ROOT = REPO_ROOT


def _load_tool(name: str, filename: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / filename)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


# i18n.py imports i18n_check by name (run as a script, its folder is on
# sys.path), so the checks are registered under that name first.
lint = _load_tool("i18n_check", "i18n_check.py")
tool = _load_tool("branchwise_i18n_tool", "i18n.py")


def _report(problems: list[object]) -> str:
    return "\n".join(map(str, problems)) + "\nfix: python tools/i18n.py sync, then translate"


def test_catalogs_are_in_parity_with_the_template() -> None:
    problems = lint.check_catalogs(ROOT)
    assert problems == [], _report(problems)


def test_template_is_up_to_date_with_the_sources() -> None:
    problems = lint.check_template(ROOT)
    assert problems == [], _report(problems)


def test_the_check_command_passes() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "i18n.py"), "check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "catalogs are in parity" in result.stdout


# --- the rules can fail ---------------------------------------------------------------


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small repository: the real catalogs and tool, with only the core's
    string modules as sources, re-synced so it starts clean whatever strings
    other modules are adding right now."""
    root = tmp_path_factory.mktemp("repo")
    shutil.copytree(ROOT / "locales", root / "locales", ignore=shutil.ignore_patterns("*.mo"))
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    (root / "core" / "i18n").mkdir(parents=True)
    (root / "desktop").mkdir()
    for name in ("language.py", "reasons.py"):
        shutil.copy(ROOT / "core" / "i18n" / name, root / "core" / "i18n" / name)
    cwd = Path.cwd()
    try:
        os.chdir(root)
        tool.extract(root)
        tool.update(root)
    finally:
        os.chdir(cwd)
    return root


@pytest.fixture
def repo_copy(pristine: Path, tmp_path: Path) -> Path:
    """A fresh copy of the small repository, to break."""
    shutil.copytree(pristine, tmp_path / "repo")
    return tmp_path / "repo"


def _po(root: Path, language: str) -> Path:
    return root / "locales" / language / "LC_MESSAGES" / "messages.po"


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def _kinds(problems: list[object]) -> set[tuple[str, str, str]]:
    return {(p.where, p.kind, p.msgid) for p in problems}  # type: ignore[attr-defined]


def test_copy_starts_clean(repo_copy: Path) -> None:
    assert lint.check_catalogs(repo_copy) == []
    assert lint.check_template(repo_copy) == []


@pytest.mark.parametrize(
    ("language", "old", "new"),
    [
        ("zh_Hans", 'msgstr "已创建分支：{title}"', 'msgstr "已创建分支：{titel}"'),  # renamed
        ("zh_Hant", 'msgstr "已建立分支：{title}"', 'msgstr "已建立分支：{title"'),  # malformed
        ("zh_Hant", 'msgstr "已建立分支：{title}"', 'msgstr "已建立分支"'),  # dropped
        ("en", 'msgstr "Branch created: {title}"', 'msgstr "Branch created: {title} {title!r}"'),
    ],
)
def test_a_broken_placeholder_is_reported(
    repo_copy: Path, language: str, old: str, new: str
) -> None:
    _edit(_po(repo_copy, language), old, new)
    problems = lint.check_catalogs(repo_copy)
    assert _kinds(problems) == {
        (f"{language}/messages.po", "placeholders", "Branch created: {title}")
    }, _report(problems)


def test_a_chinese_plural_form_must_carry_every_placeholder(repo_copy: Path) -> None:
    _edit(_po(repo_copy, "zh_Hans"), 'msgstr[0] "{n} 个分支"', 'msgstr[0] "一个分支"')
    assert _kinds(lint.check_catalogs(repo_copy)) == {
        ("zh_Hans/messages.po", "placeholders", "{n} branch")
    }


def test_percent_placeholders_are_compared_too(repo_copy: Path) -> None:
    for language, text in (
        ("en", "%(count)d left"),
        ("zh_Hans", "剩余 %(count)d"),
        ("zh_Hant", "剩下 %(cnt)d"),
    ):
        with _po(repo_copy, language).open("a", encoding="utf-8") as f:
            f.write(f'\n#, python-format\nmsgid "%(count)d left"\nmsgstr "{text}"\n')
    with (repo_copy / "locales" / "messages.pot").open("a", encoding="utf-8") as f:
        f.write('\n#, python-format\nmsgid "%(count)d left"\nmsgstr ""\n')
    assert _kinds(lint.check_catalogs(repo_copy)) == {
        ("zh_Hant/messages.po", "placeholders", "%(count)d left")
    }


FAILED = "The model request failed."
NOT_FOUND = "This conversation could not be found."
READ_ONLY = "This conversation is open read-only."
INTERNAL = "Something went wrong inside Branchwise."


def test_empty_fuzzy_untranslated_missing_and_extra_entries_are_reported(repo_copy: Path) -> None:
    hans, hant = _po(repo_copy, "zh_Hans"), _po(repo_copy, "zh_Hant")
    _edit(hans, f'msgid "{FAILED}"\nmsgstr "模型请求失败。"', f'msgid "{FAILED}"\nmsgstr ""')
    _edit(hans, f'msgid "{NOT_FOUND}"', f'#, fuzzy\nmsgid "{NOT_FOUND}"')
    _edit(
        hant,
        f'msgid "{READ_ONLY}"\nmsgstr "此對話以唯讀方式開啟。"',
        f'msgid "{READ_ONLY}"\nmsgstr "{READ_ONLY}"',
    )
    _edit(hant, f'msgid "{INTERNAL}"\nmsgstr "Branchwise 內部發生問題。"\n', "")
    _edit(hant, f'msgid "{FAILED}"', 'msgid "The model request falied."')
    assert _kinds(lint.check_catalogs(repo_copy)) == {
        ("zh_Hans/messages.po", "empty", FAILED),
        ("zh_Hans/messages.po", "fuzzy", NOT_FOUND),
        ("zh_Hant/messages.po", "untranslated", READ_ONLY),
        ("zh_Hant/messages.po", "missing", INTERNAL),
        ("zh_Hant/messages.po", "missing", FAILED),
        ("zh_Hant/messages.po", "extra", "The model request falied."),
    }


def test_a_wrong_plural_header_is_reported(repo_copy: Path) -> None:
    _edit(
        _po(repo_copy, "zh_Hant"),
        "nplurals=1; plural=0;",
        "nplurals=2; plural=(n != 1);",
    )
    kinds = {(p.kind, p.msgid) for p in lint.check_catalogs(repo_copy)}
    assert ("plural_forms", "") in kinds
    assert ("empty", "{n} branch") in kinds  # the second form Chinese never had


def test_a_string_added_without_extracting_fails(repo_copy: Path) -> None:
    (repo_copy / "desktop" / "zz_new_widget.py").write_text(
        "from branchwise.core.i18n.language import _, ngettext\n"
        "A = _('A brand new label')\n"
        "B = ngettext('{n} apple', '{n} apples', 2)\n"
        "C = _(f'Hello {A}')\n",
        encoding="utf-8",
    )
    problems = lint.check_template(repo_copy)
    assert {(p.kind, p.msgid) for p in problems} == {
        ("not_extracted", "A brand new label"),
        ("not_extracted", "{n} apple"),
        ("fstring", "_(f'"),
    }, _report(problems)
    assert any(p.where == "desktop/zz_new_widget.py:4" for p in problems)


def test_a_string_removed_from_the_sources_fails(repo_copy: Path) -> None:
    _edit(repo_copy / "core" / "i18n" / "reasons.py", f'N_("{FAILED}")', f'"{FAILED}"')
    assert _kinds(lint.check_template(repo_copy)) == {
        ("locales/messages.pot", "stale_template", FAILED)
    }


def test_sync_then_translate_is_the_whole_workflow(
    repo_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commands the team runs after adding a string, end to end on a copy."""
    (repo_copy / "desktop" / "zz_new_widget.py").write_text(
        "from branchwise.core.i18n.language import _\nA = _('Pin conversation')\n", encoding="utf-8"
    )
    monkeypatch.chdir(repo_copy)
    assert tool.extract(repo_copy) is True
    assert tool.extract(repo_copy) is False  # nothing changed: the template is left alone
    tool.update(repo_copy)
    assert lint.check_template(repo_copy) == []
    # English is the source language, filled in by update; Chinese waits for a
    # translator (empty, or fuzzy when Babel guessed from a similar string).
    problems = lint.check_catalogs(repo_copy)
    assert {(p.where, p.msgid) for p in problems} == {
        ("zh_Hans/messages.po", "Pin conversation"),
        ("zh_Hant/messages.po", "Pin conversation"),
    }, _report(problems)
    assert {p.kind for p in problems} <= {"empty", "fuzzy"}
    work = tool.todo(repo_copy)
    assert set(work) == {"Pin conversation"}
    assert {"zh_Hans": "", "zh_Hant": ""}.items() <= work["Pin conversation"].items()
    work["Pin conversation"].update(zh_Hans="置顶对话", zh_Hant="釘選對話")
    assert tool.translate({**work, "Not a msgid": {"zh_Hans": "无"}}, repo_copy) == ["Not a msgid"]
    assert lint.check(repo_copy) == []
    assert tool.todo(repo_copy) == {}


def test_translate_fills_every_plural_form(repo_copy: Path) -> None:
    _edit(_po(repo_copy, "zh_Hant"), 'msgstr[0] "{n} 個分支"', 'msgstr[0] ""')
    assert tool.todo(repo_copy) == {"{n} branch": {"zh_Hant": "", "_plural": "{n} branches"}}
    tool.translate({"{n} branch": {"zh_Hant": "{n} 個分支"}}, repo_copy)
    assert lint.check_catalogs(repo_copy) == []


def test_an_identical_text_can_be_allowed_explicitly(repo_copy: Path) -> None:
    hant = _po(repo_copy, "zh_Hant")
    _edit(
        hant,
        f'msgid "{READ_ONLY}"\nmsgstr "此對話以唯讀方式開啟。"',
        f'msgid "{READ_ONLY}"\nmsgstr "{READ_ONLY}"',
    )
    assert _kinds(lint.check_catalogs(repo_copy)) == {
        ("zh_Hant/messages.po", "untranslated", READ_ONLY)
    }
    _edit(hant, f'msgid "{READ_ONLY}"', f'# same-as-english\nmsgid "{READ_ONLY}"')
    assert lint.check_catalogs(repo_copy) == []
