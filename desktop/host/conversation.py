"""What a tab shows of one open conversation, wherever it lives.

A conversation open in this app holds its transcript rows, its fork targets
and the projection they come from. Where the commits come from differs (this
machine's writer or snapshot, or the commits a ``branchwise serve`` sends),
so :class:`~branchwise.desktop.host.session.OpenSession` and
:class:`~branchwise.desktop.host.sources.RemoteConversation` extend this one
type; how rows are found, how a row's branch action is decided and which
prompt Retry asks again are written here once, for both.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass, replace

from branchwise.core.conversation.ask_again import failed_turn, question_of
from branchwise.core.errors import ReadOnlySession
from branchwise.core.projection.attachments import AttachmentRef
from branchwise.core.projection.projection import Projection
from branchwise.desktop.host.rows import BranchState, Row, TargetTable, branch_state


@dataclass(frozen=True, slots=True)
class ConversationRef:
    """Which conversation, and where it lives: this machine's store or a saved server.

    The window's tabs, and everything a tab asks the host, name a
    conversation this way, so one tab serves both sources.

    Attributes:
        session_id: the conversation's id (unique within its source).
        server: the saved server's address; ``None`` for this machine's store.
    """

    session_id: str
    server: str | None = None

    @property
    def remote(self) -> bool:
        """The conversation lives on a ``branchwise serve`` server."""
        return self.server is not None

    def sibling(self, session_id: str) -> ConversationRef:
        """Another conversation of the same source (a parent, a branch)."""
        return replace(self, session_id=session_id)


class Conversation:
    """One open conversation's rows, fork targets and projection.

    Args:
        session_id: the conversation.

    Attributes:
        session_id: the conversation.
        rows: the transcript rows, in order.
        targets: fork targets of the committed events shown; ``None`` until known.
    """

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.rows: list[Row] = []
        self.targets: TargetTable | None = None
        self._row_pos: dict[str, int] = {}

    @property
    def projection(self) -> Projection | None:
        """The whole history replayed (``None`` while it is not read yet)."""
        raise NotImplementedError

    @property
    def title(self) -> str:
        """The title as last committed ("" until the first message names it)."""
        raise NotImplementedError

    @property
    def earlier_turns(self) -> int:
        """How many turns precede :attr:`rows` and are not read yet (a server's big
        conversation opens on its last page); 0 when every turn has its row."""
        return 0

    @property
    def running(self) -> bool:
        """A turn runs in this conversation."""
        raise NotImplementedError

    def row(self, row_id: str) -> Row | None:
        """The row with this id."""
        position = self._row_pos.get(row_id)
        return self.rows[position] if position is not None else None

    def _set_rows(self, rows: list[Row]) -> None:
        self.rows = rows
        self._row_pos = {row.row_id: position for position, row in enumerate(rows)}

    def _put_row(self, row: Row) -> None:
        """Replace a row, or append it when it is new (a turn that just started)."""
        position = self._row_pos.get(row.row_id)
        if position is None:
            self._row_pos[row.row_id] = len(self.rows)
            self.rows.append(row)
        else:
            self.rows[position] = row

    def branch_state(
        self, row: Row, *, in_flight: Set[tuple[str, str]], server_supported: bool
    ) -> BranchState:
        """The branch action of one of this conversation's rows."""
        return branch_state(
            row, self.targets, in_flight=in_flight, server_supported=server_supported
        )

    def retry_prompt(self, turn_id: str | None = None) -> str:
        """The prompt of a failed turn, to ask again as a new turn (the failed one stays).

        Raises:
            UnknownTurn, TurnNotFailed: nothing to retry.
            ReadOnlySession: the history is not read yet.
        """
        projection = self.projection
        if projection is None:
            raise ReadOnlySession("this conversation is not loaded", sessionId=self.session_id)
        return question_of(projection, failed_turn(projection, self.session_id, turn_id))

    def retry_files(self, turn_id: str | None = None) -> tuple[AttachmentRef, ...]:
        """The files the failed turn's question carried (asked again with it, never copied)."""
        projection = self.projection
        if projection is None:
            return ()
        turn = failed_turn(projection, self.session_id, turn_id)
        question = projection.message(turn.user_message_id) if turn.user_message_id else None
        return question.attachments if question is not None else ()
