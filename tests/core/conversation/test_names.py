"""The one rule that names a branch, fed by the store, a count or a listing's kinds."""

from __future__ import annotations

import pytest

from branchwise.core.conversation.names import branch_title, new_branch_title, title_from_texts
from branchwise.core.i18n.language import current_language, set_language
from branchwise.core.store.manifest import Manifest, ParentLink, save_manifest
from branchwise.core.store.store import SessionStore


def _manifest_only(store: SessionStore, session_id: str, parent: str | None) -> None:
    """A bare session folder with just a manifest (naming never reads logs)."""
    directory = store.session_dir(session_id)
    directory.mkdir(exist_ok=True)
    link = ParentLink(parent, "fork", "t0", 3, 1) if parent else None
    save_manifest(
        directory,
        Manifest(session_id, session_id, "fork" if parent else "root", created_at=1.0, parent=link),
    )


def test_a_new_branch_is_named_after_its_source_counting_its_own_forks_only(
    store: SessionStore,
) -> None:
    _manifest_only(store, "dddddddd-root", None)  # titled with its id
    for session_id, parent in [
        ("dddddddd-f1", "dddddddd-root"),
        ("dddddddd-f2", "dddddddd-root"),
        ("dddddddd-f1a", "dddddddd-f1"),  # a fork of a fork
    ]:
        _manifest_only(store, session_id, parent)
    child = Manifest(
        "dddddddd-kid", "kid", "child", created_at=1.0, parent=ParentLink("dddddddd-root", "child")
    )
    store.session_dir(child.session_id).mkdir()
    save_manifest(store.session_dir(child.session_id), child)  # a child is not a branch
    (store.sessions_dir / "dddddddd-broken").mkdir()  # skipped, as by ``tree``
    (store.sessions_dir / "dddddddd-broken" / "manifest.json").write_text("{not json")
    assert new_branch_title(store, "dddddddd-root") == "dddddddd-root (branch 3)"
    assert new_branch_title(store, "dddddddd-f1") == "dddddddd-f1 (branch 2)"
    untitled = Manifest("dddddddd-blank", "", "root", created_at=1.0)
    store.session_dir(untitled.session_id).mkdir()
    save_manifest(store.session_dir(untitled.session_id), untitled)
    assert new_branch_title(store, "dddddddd-blank") is None  # no name to repeat
    assert new_branch_title(store, "dddddddd-gone") is None  # the fork says why it refuses


def test_a_count_and_the_children_s_kinds_name_a_branch_alike() -> None:
    assert branch_title("Trip", 0) == "Trip (branch 1)"
    assert branch_title("Trip", ["fork", "child", "fork"]) == "Trip (branch 3)"
    assert branch_title("Trip", []) == branch_title("Trip", 0)
    assert branch_title("", 4) is None


@pytest.mark.parametrize(
    ("language", "expected"),
    [("en", "旅行 (branch 2)"), ("zh_Hans", "旅行（分支 2）"), ("zh_Hant", "旅行（分支 2）")],
)
def test_the_suffix_is_in_the_language_asked_for_or_the_active_one(
    language: str, expected: str
) -> None:
    assert branch_title("旅行", 1, language=language) == expected
    previous = current_language()
    set_language(language)
    try:
        assert branch_title("旅行", ["fork"]) == expected
    finally:
        set_language(previous)


@pytest.mark.parametrize(
    ("parent", "language", "expected"),
    [
        ("Trip (branch 1)", "en", "Trip (branch 1.2)"),
        ("Trip (branch 1.2)", "en", "Trip (branch 1.2.2)"),
        ("旅行（分支 3）", "en", "旅行 (branch 3.2)"),  # made in Chinese, named in English
        ("Trip (branch 1)", "zh_Hans", "Trip（分支 1.2）"),
        ("(branch 1)", "en", "(branch 1) (branch 2)"),  # a title that is only a suffix is a title
        ("Trip (branch one)", "en", "Trip (branch one) (branch 2)"),
    ],
)
def test_a_branch_of_a_branch_never_stacks_suffixes(
    parent: str, language: str, expected: str
) -> None:
    assert branch_title(parent, 1, language=language) == expected


def test_an_untitled_conversation_takes_its_first_words_or_a_localized_name() -> None:
    assert title_from_texts(["  ", "Bonjour,\n  je suis là"]) == "Bonjour, je suis là"
    assert title_from_texts(["word " * 30]).endswith("…")
    assert title_from_texts([]) == "Untitled conversation"
    assert title_from_texts(["", " \n"], language="zh_Hans") == "未命名对话"
    assert title_from_texts([], language="zh_Hant") == "未命名對話"
