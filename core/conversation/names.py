"""The names Branchwise gives conversations that were not named by the user.

A conversation is titled after its first prompt, and a branch after the
conversation it left ("<title> (branch N)"), wherever it is made: a turn in
the app or the CLI, a click on a branch button (local or on a server), or an
import of another app's branches, which would otherwise all carry their
parent's title and read as one name repeated down the sidebar.

:func:`branch_title` is the one rule for a branch's name. Its callers differ
only in where they learn the parent's title and children: the desktop's
lineage index, one pass over the store's manifests
(:func:`new_branch_title`), a server's session list, or the importer's plan.
"""

from __future__ import annotations

from collections.abc import Iterable

from branchwise.core.errors import BranchwiseError
from branchwise.core.i18n.language import N_, translator
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


def title_from_prompt(text: str) -> str:
    """A title from a prompt: its words on one line, cut to :data:`TITLE_LENGTH`."""
    line = " ".join(text.split())
    return line if len(line) <= TITLE_LENGTH else line[: TITLE_LENGTH - 1] + "…"


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
    return fill(translator(language)(BRANCH_TITLE), {"title": parent_title, "n": forks + 1})


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
