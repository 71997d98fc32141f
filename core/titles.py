"""The titles Branchwise gives conversations that were not named by the user.

A conversation is titled after its first prompt, and a branch after the
conversation it left ("<title> (branch N)"), wherever it is made: a turn in
the app or the CLI, a click on a branch button (local or on a server), or an
import of another app's branches, which would otherwise all carry their
parent's title and read as one name repeated down the sidebar.
"""

from __future__ import annotations

from branchwise.core.i18n.language import _
from branchwise.core.i18n.reasons import fill

TITLE_LENGTH = 60
"""The longest title taken from a prompt, in characters (longer ones end in "…")."""


def title_from_prompt(text: str) -> str:
    """A title from a prompt: its words on one line, cut to :data:`TITLE_LENGTH`."""
    line = " ".join(text.split())
    return line if len(line) <= TITLE_LENGTH else line[: TITLE_LENGTH - 1] + "…"


def branch_name(parent_title: str, forks_before: int) -> str | None:
    """ "<title> (branch N)" in the user's language, N counting this branch; ``None`` untitled.

    A fork would inherit its parent's title, so the sidebar and tabs would
    show two identical names.
    """
    if not parent_title:
        return None
    return fill(_("{title} (branch {n})"), {"title": parent_title, "n": forks_before + 1})
