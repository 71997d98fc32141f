"""What a host operation changed, so each view refreshes only that.

Modelled on Anki's ``OpChanges``: every mutating host call reports a few
flags and the ids they concern, and views that do not care skip the work. A
sidebar does not rebuild because a chunk of text streamed in, and a
transcript does not repaint because another conversation was renamed. The
sidebar updates only the items a change names (``sessions`` re-renders them,
``added`` inserts them under their parent); a ``sidebar`` change naming no
session at all is the one that makes it rebuild.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Changes:
    """A set of change flags; combine with ``|``.

    Attributes:
        sidebar: the conversation list or its lineage changed (created, renamed,
            forked, running state); with no session named, the whole list must be
            re-read.
        sessions: sessions whose state changed (title, running, read-only,
            loading finished, children).
        added: sessions that are new to the conversation list (created or
            forked), already in the host's lineage index.
        transcripts: sessions whose whole transcript must be re-read (opened,
            loaded, re-read from disk).
        turns: ``(session_id, turn_id)`` rows that changed (a turn started,
            committed or ended).
        targets: sessions whose fork targets or branch-action states changed.
        settings: the settings (and so the provider) changed.
        search: the search index changed (it caught up, or its progress moved).
        initiator: the view that asked for the operation, so it can skip the
            refresh it already did (``None``: the host itself or a running turn).
            Not part of what changed: changes compare equal without it.
    """

    sidebar: bool = False
    sessions: frozenset[str] = frozenset()
    added: frozenset[str] = frozenset()
    transcripts: frozenset[str] = frozenset()
    turns: frozenset[tuple[str, str]] = frozenset()
    targets: frozenset[str] = frozenset()
    settings: bool = False
    search: bool = False
    initiator: object = field(default=None, compare=False)

    def __or__(self, other: Changes) -> Changes:
        return Changes(
            sidebar=self.sidebar or other.sidebar,
            sessions=self.sessions | other.sessions,
            added=self.added | other.added,
            transcripts=self.transcripts | other.transcripts,
            turns=self.turns | other.turns,
            targets=self.targets | other.targets,
            settings=self.settings or other.settings,
            search=self.search or other.search,
            initiator=self.initiator if self.initiator is not None else other.initiator,
        )

    @property
    def empty(self) -> bool:
        """Nothing changed."""
        return not (
            self.sidebar
            or self.sessions
            or self.added
            or self.transcripts
            or self.turns
            or self.targets
            or self.settings
            or self.search
        )

    def touches(self, session_id: str) -> bool:
        """Whether anything about ``session_id`` changed."""
        return (
            session_id in self.sessions
            or session_id in self.added
            or session_id in self.transcripts
            or session_id in self.targets
            or any(sid == session_id for sid, _ in self.turns)
        )

    def turns_of(self, session_id: str) -> list[str]:
        """The changed turn ids of one session."""
        return [turn for sid, turn in self.turns if sid == session_id]
