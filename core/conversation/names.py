"""The names Branchwise gives conversations that were not named by the user.

A conversation is titled after its first prompt (an imported one without a
prompt after its first answer, else "Untitled conversation"), and a branch
after the conversation it left ("<title> (branch N)"; a branch of a branch
"<title> (branch N.M)", so suffixes never stack), wherever it is made: a turn in
the app or the CLI, a click on a branch button (local or on a server), or an
import of another app's branches, which would otherwise all carry their
parent's title and read as one name repeated down the sidebar.

:func:`branch_title` is the one rule for a branch's name. Its callers differ
only in where they learn the parent's title and children: the desktop's
lineage index, one pass over the store's manifests
(:func:`new_branch_title`), a server's session list, or the importer's plan.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from branchwise.core.errors import BranchwiseError
from branchwise.core.i18n.language import DISPLAY_NAMES, N_, translator
from branchwise.core.i18n.reasons import fill
from branchwise.core.ids import validate_session_id
from branchwise.core.store.manifest import Manifest, load_manifest
from branchwise.core.store.store import SessionStore

TITLE_LENGTH = 60
"""The longest title taken from a prompt, in characters (longer ones end in "…")."""

BRANCH_TITLE = N_("{title} (branch {n})")
"""A branch's name; "{title}（分支 {n}）" in Chinese."""

FORK = "fork"
"""The kind of child that counts as a branch (a ``child`` sub-conversation starts empty)."""


UNTITLED = N_("Untitled conversation")
"""The title of a conversation that holds no words to take one from."""


def title_from_prompt(text: str) -> str:
    """A title from a prompt: its words on one line, cut to :data:`TITLE_LENGTH`."""
    line = " ".join(text.split())
    return line if len(line) <= TITLE_LENGTH else line[: TITLE_LENGTH - 1] + "…"


def title_from_texts(texts: Iterable[str], *, language: str | None = None) -> str:
    """The title of a conversation that came untitled: its first words, else "Untitled
    conversation" (localized).

    ``texts`` are its messages in the order they should be tried (the first
    prompt, then the first answer: an imported conversation may open with the
    assistant speaking and hold no prompt at all). A title is never empty, so
    the sidebar never shows a blank row.
    """
    for text in texts:
        title = title_from_prompt(text)
        if title:
            return title
    return translator(language)(UNTITLED)


def branch_title(
    parent_title: str, siblings: Iterable[str] | int, *, language: str | None = None
) -> str | None:
    """ "<title> (branch N)" for a new fork of a parent; ``None`` for an untitled parent.

    A fork would inherit its parent's title, so the sidebar and tabs would
    show two identical names; N counts the parent's forks, this one included,
    so the first branch is "(branch 1)". An untitled parent has no name to
    repeat: the fork keeps what it inherits.

    Args:
        parent_title: the title of the conversation branched from.
        siblings: the kinds of the parent's children so far (only ``fork``
            counts: a ``child`` sub-conversation is not a branch of it), or
            how many forks it has already when the caller counted them.
        language: the language of the suffix (default: the active one).
    """
    if not parent_title:
        return None
    forks = siblings if isinstance(siblings, int) else sum(kind == FORK for kind in siblings)
    title, number = parent_title, str(forks + 1)
    found = _branch_suffix(parent_title)
    if found is not None:  # a branch of a branch: "<title> (branch 1.1)", never two suffixes
        title, number = found[0], f"{found[1]}.{number}"
    return fill(translator(language)(BRANCH_TITLE), {"title": title, "n": number})


def _branch_suffix(title: str) -> tuple[str, str] | None:
    """``(title, N)`` when ``title`` already ends in a branch suffix, in any language."""
    for pattern in _branch_patterns():
        match = pattern.fullmatch(title)
        if match is not None and match["title"]:
            return match["title"], match["n"]
    return None


@functools.cache
def _branch_patterns() -> tuple[re.Pattern[str], ...]:
    """:data:`BRANCH_TITLE` as every language writes it, as patterns (a title made in
    one language is recognised after the user switched to another)."""
    patterns = []
    for language in DISPLAY_NAMES:
        shape = re.escape(translator(language)(BRANCH_TITLE))
        shape = shape.replace(re.escape("{title}"), "(?P<title>.+)", 1)
        shape = shape.replace(re.escape("{n}"), r"(?P<n>\d+(?:\.\d+)*)", 1)
        patterns.append(re.compile(shape, re.DOTALL))
    return tuple(patterns)


def new_branch_title(store: SessionStore, source_id: str) -> str | None:
    """:func:`branch_title` of a new fork of ``source_id``, counted from the store's manifests.

    The desktop counts a source's forks in its lineage index; a CLI fork has
    no index, so this counts them in one pass over every manifest (about
    90 ms for 5,000 sessions), as ``tree`` does. ``None`` for an untitled
    source, and for one that cannot be read: the fork then refuses in its own
    words (``source_not_found``, …), which a name must not pre-empt.
    """
    try:
        title = load_manifest(store.session_dir(validate_session_id(source_id))).title
    except BranchwiseError:
        return None
    return branch_title(
        title,
        (
            manifest.kind
            for manifest in store.iter_manifests()
            if isinstance(manifest, Manifest)
            and manifest.parent is not None
            and manifest.parent.session_id == source_id
        ),
    )
