"""The one notice channel: errors and outcomes the user must see.

Logic never talks to widgets; it posts a :class:`Notice` here and the notice
area listens. A notice carries a stable ``code`` and its parameters, not
finished text, so it can be re-rendered when the language changes; nothing is
dropped silently and a short history is kept.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Level(StrEnum):
    """How loud a notice is."""

    INFO = "info"
    SUCCESS = "success"
    WARNING = "warning"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class NoticeAction:
    """Something the user can do from a notice, e.g. open a kept child session.

    Attributes:
        kind: what to do (``open_session``, ``use_server``, ``restore_session``).
        session_id: the session it concerns (``open_session``, ``restore_session``).
        server: the URL of the ``branchwise serve`` that keeps the session; ``""``
            for this machine's.
    """

    kind: str
    session_id: str = ""
    server: str = ""


@dataclass(frozen=True, slots=True)
class NoticeSubject:
    """What a notice is about, so it can be withdrawn once it no longer holds.

    Attributes:
        session_id: the conversation.
        turn_id: the turn (a failed one, whose notice a successful retry withdraws).
    """

    session_id: str
    turn_id: str = ""


@dataclass(frozen=True, slots=True)
class Notice:
    """One notice.

    Attributes:
        code: stable reason code (localized through ``core.i18n.reasons`` or the UI).
        level: how loud it is.
        params: values for the message's placeholders (titles, counts…).
        detail: untranslated technical detail (a server's own error text).
        action: an optional follow-up the user can click.
        id: unique, increasing.
        created: when it was posted (Unix seconds).
        sticky: an offer that waits for the user's answer: it never fades.
        subject: what it is about, if it can stop holding (see :meth:`NoticeCenter.withdraw`).
    """

    code: str
    level: Level = Level.INFO
    params: dict[str, Any] = field(default_factory=dict)
    detail: str | None = None
    action: NoticeAction | None = None
    id: int = 0
    created: float = 0.0
    sticky: bool = False
    subject: NoticeSubject | None = None


Listener = Callable[[Notice], None]


class NoticeCenter:
    """Posts notices to listeners and keeps the last ``history_size`` of them.

    Args:
        history_size: how many notices the history keeps.
    """

    def __init__(self, history_size: int = 50) -> None:
        self._history: deque[Notice] = deque(maxlen=history_size)
        self._listeners: list[Listener] = []
        self._withdrawn_listeners: list[Listener] = []
        self._ids = itertools.count(1)

    def post(
        self,
        code: str,
        level: Level = Level.INFO,
        *,
        detail: str | None = None,
        action: NoticeAction | None = None,
        sticky: bool = False,
        subject: NoticeSubject | None = None,
        **params: Any,
    ) -> Notice:
        """Record a notice and tell every listener."""
        notice = Notice(
            code, level, params, detail, action, next(self._ids), time.time(), sticky, subject
        )
        self._history.append(notice)
        for listener in list(self._listeners):
            listener(notice)
        return notice

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` for every new notice; returns an unsubscribe function."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def withdraw(self, subject: NoticeSubject) -> list[Notice]:
        """The notices about ``subject`` no longer hold (a retry succeeded): stop showing them.

        They stay in the history, which is what happened; listeners given to
        :meth:`subscribe_withdrawn` hear of each one.
        """
        gone = [notice for notice in self._history if notice.subject == subject]
        for notice in gone:
            for listener in list(self._withdrawn_listeners):
                listener(notice)
        return gone

    def subscribe_withdrawn(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` for every withdrawn notice; returns an unsubscribe function."""
        self._withdrawn_listeners.append(listener)
        return lambda: (
            self._withdrawn_listeners.remove(listener)
            if listener in self._withdrawn_listeners
            else None
        )

    @property
    def history(self) -> list[Notice]:
        """The kept notices, oldest first."""
        return list(self._history)
