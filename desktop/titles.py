"""Conversation titles: renaming, and naming a fresh branch apart from its parent."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from branchwise.core.errors import BranchwiseError
from branchwise.core.i18n import _
from branchwise.core.manifest import Manifest
from branchwise.core.reasons import fill

from .changes import Changes

if TYPE_CHECKING:
    from .host import Host

log = logging.getLogger(__name__)

MAX_TITLE = 200


class InvalidTitle(BranchwiseError):
    """A conversation title that is empty or too long."""

    code = "invalid_title"


def rename(host: Host, session_id: str, title: str) -> Changes:
    """Give a conversation a new title (a ``session/title`` commit, then its manifest).

    Uses the open writer when the app has one; otherwise takes the lease just
    for the rename.

    Raises:
        InvalidTitle: an empty or overlong title (nothing is written).
        LeaseHeld: another process is writing the conversation.
    """
    title = " ".join(title.split())
    if not title or len(title) > MAX_TITLE:
        raise InvalidTitle(f"a title must have 1 to {MAX_TITLE} characters", maxLength=MAX_TITLE)
    session = host.session(session_id)
    if session is not None and session.writer is not None:
        session.writer.set_title(title)
        manifest = session.writer.manifest
    else:
        with host.store.open_writer(session_id) as writer:
            writer.set_title(title)
            manifest = writer.manifest
    if session is not None:
        session.manifest = manifest
    host.index.put(manifest)
    return host.emit(Changes(sidebar=True, sessions=frozenset({session_id})))


def name_branch(host: Host, manifest: Manifest) -> Manifest:
    """Give a fresh branch a title of its own, in the user's language.

    A fork inherits its parent's title, so the sidebar and tabs would show two
    identical names; "<title> (branch N)" tells them apart. Only a branch still
    carrying the parent's exact title is renamed, so opening it again (or a
    user's own title) is left alone; if another process writes it already,
    the inherited title simply stays.
    """
    parent = manifest.parent
    if manifest.kind != "fork" or parent is None:
        return manifest
    parent_title = host.title(parent.session_id)
    if not parent_title or manifest.title != parent_title:
        return manifest
    siblings = [
        m
        for m in host.index.children(parent.session_id)
        if m.kind == "fork" and m.session_id != manifest.session_id
    ]
    title = fill(_("{title} (branch {n})"), {"title": parent_title, "n": len(siblings) + 1})
    try:
        with host.store.open_writer(manifest.session_id) as writer:
            writer.set_title(title)
            return writer.manifest
    except BranchwiseError as exc:
        log.info("kept the inherited title of %s: %s", manifest.session_id, exc)
        return manifest
