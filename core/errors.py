"""Every typed error Branchwise raises, each with its stable wire ``code``.

The ``code`` is what the CLI, the HTTP API and the UI's reason lookup key on;
``message`` is for people and is never parsed. Each error also knows whether
retrying the same request can change the answer (``definitive``: the fork
journal drops a definitively refused record and keeps an uncertain one) and
the HTTP status ``branchwise serve`` answers it with. There are no separate
lists of codes: ask the error, or :func:`error_class` for a code that came
over the wire.
"""

from __future__ import annotations

import errno
from typing import Any

_BY_CODE: dict[str, type[BranchwiseError]] = {}


class BranchwiseError(Exception):
    """Base of every typed Branchwise error.

    Attributes:
        code: stable machine-readable reason (docs/cli.md, "Errors and exit status").
        definitive: retrying the same request gets the same refusal.
        http_status: the status ``branchwise serve`` answers this refusal with.
        message: human-readable explanation (English; the UI localizes by code).
        details: extra JSON-safe fields (seq, offset, ids) for the error payload.
    """

    code: str = "internal_error"
    definitive: bool = False
    http_status: int = 400

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "code" in cls.__dict__:
            _BY_CODE.setdefault(cls.code, cls)

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def to_json(self) -> dict[str, Any]:
        """The ``{"error": {...}}`` body shared by the CLI and the HTTP API."""
        return {"error": {"code": self.code, "message": self.message, **self.details}}


_BY_CODE[BranchwiseError.code] = BranchwiseError


def error_class(code: str) -> type[BranchwiseError] | None:
    """The error class that owns ``code`` (``None`` for a code this build does not know)."""
    return _BY_CODE.get(code)


# -- The session store and its log -----------------------------------------------------------------


class InvalidSessionId(BranchwiseError):
    """A session id that is not of the strict form, so it could name another path."""

    code = "invalid_session_id"
    definitive = True


class SessionNotFound(BranchwiseError):
    """No session with this id exists under the data root."""

    code = "session_not_found"
    definitive = True
    http_status = 404


class SessionExists(BranchwiseError):
    """A session with this id already exists."""

    code = "session_exists"


class SessionTrashed(BranchwiseError):
    """The session is in the Trash: restore it before using it (or trashing it again)."""

    code = "session_trashed"
    definitive = True
    http_status = 409


class NotTrashed(BranchwiseError):
    """The session is not in the Trash, so it cannot be restored or purged from there."""

    code = "not_trashed"
    definitive = True
    http_status = 409


class LeaseHeld(BranchwiseError):
    """Another writer (this or another process) holds the session's writer lease.

    Not definitive: the other writer finishes and lets go, so the same request
    later succeeds. ``branchwise serve`` answers it 409 (a conflict with the
    session's state, like ``turn_running``), never 400 (a bad request).
    """

    code = "lease_held"
    http_status = 409


class AppAlreadyRunning(BranchwiseError):
    """Another Branchwise app already uses this data root."""

    code = "app_running"


class CorruptLog(BranchwiseError):
    """A bad frame is followed by good ones: corruption, not a torn tail.

    The session stays readable up to ``seq`` / ``offset`` and refuses writers;
    nothing is truncated.
    """

    code = "corrupt_log"
    definitive = True


class UnsupportedFormat(BranchwiseError):
    """A manifest or frame of a newer format than this build understands."""

    code = "unsupported_format"
    definitive = True


class InvalidManifest(BranchwiseError):
    """A manifest that does not parse or lacks required fields."""

    code = "invalid_manifest"
    definitive = True


class InvalidFrame(BranchwiseError):
    """Bytes that are not a well-formed frame (raised by the pure decoder)."""

    code = "invalid_frame"


class InvalidEvent(BranchwiseError):
    """An event missing a required field or of an unknown type."""

    code = "invalid_event"


class DurabilityError(BranchwiseError):
    """``fsync`` failed: the commit is not durable and the writer is closed.

    Retrying fsync is unsafe on Linux (the dirty pages may already be dropped),
    so the writer refuses further appends; reopening recovers from disk.
    """

    code = "not_durable"


class DiskFull(BranchwiseError):
    """A write failed for lack of space (or quota); what it was writing is not kept.

    Whatever was durably saved before stays (earlier commits, the question of
    a turn whose answer could not be saved); ``details`` say what the failed
    operation managed to keep, where that is more than nothing. Not definitive:
    the same request can succeed once space is freed.

    Attributes:
        ERRNOS: the ``OSError`` errnos that mean "no space" (``ENOSPC``, ``EDQUOT``).
    """

    code = "disk_full"
    http_status = 507  # Insufficient Storage (RFC 4918)
    ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


class WriterClosed(BranchwiseError):
    """The writer was closed, or poisoned by an earlier durability failure."""

    code = "writer_closed"


class ReadOnlySession(BranchwiseError):
    """A write was asked of a session opened read-only."""

    code = "read_only"


class InvalidTitle(BranchwiseError):
    """A conversation title that is empty or too long."""

    code = "invalid_title"


class InvalidLabel(BranchwiseError):
    """A branch label a person gave that is empty or too long."""

    code = "invalid_label"


class ReadOnlyDataFolder(BranchwiseError):
    """The data folder (or a session folder in it) cannot be written.

    Reading commands still work; a command that would write refuses before it
    changes anything. Definitive: the same request is refused until someone
    makes the folder writable.
    """

    code = "data_folder_read_only"
    definitive = True
    http_status = 503


class UnsafePath(BranchwiseError):
    """A file or folder in the data root is a symbolic link (or not what it should be).

    Nothing follows a link out of the data root: every read and write of a
    session refuses instead, and nothing outside is touched.
    """

    code = "unsafe_path"
    definitive = True
    http_status = 500


class ManifestMismatch(InvalidManifest):
    """A manifest whose ``sessionId`` is not its folder's name (e.g. a backup copy).

    The folder is reported as damaged; it is never listed, written or forked
    under the id its manifest claims.
    """

    code = "manifest_mismatch"
    definitive = True


class UnreadableManifest(InvalidManifest):
    """A ``manifest.json`` that cannot be read at all (a folder, no permission)."""

    code = "manifest_unreadable"
    definitive = True


class CommitTooLarge(BranchwiseError):
    """A commit whose payload exceeds the one frame size limit (``frames.MAX_PAYLOAD``).

    Refused before anything is written; readers stop before such a frame too
    (one written by an older build is reported as damage, never cut).
    """

    code = "commit_too_large"
    definitive = True
    http_status = 413


# -- Forks: a target's unavailable ``reason`` and the refused fork share one code -----


class SourceNotFound(SessionNotFound):
    """The session to fork (or to list targets of) does not exist."""

    code = "source_not_found"
    definitive = True
    http_status = 404


class StaleSource(BranchwiseError):
    """The request's generation or boundary no longer matches the source's log."""

    code = "stale_source"
    definitive = True
    http_status = 409


class UnknownTurn(BranchwiseError):
    """No turn with this id in the source (never redirected to another turn)."""

    code = "unknown_turn"
    definitive = True
    http_status = 404


class TurnOpen(BranchwiseError):
    """The turn has not ended, so it has no boundary to branch from."""

    code = "turn_open"
    definitive = True
    http_status = 409


class ActiveAuthority(BranchwiseError):
    """The turn's closing commit leaves an interaction or tool call open."""

    code = "active_authority"
    definitive = True
    http_status = 409


class BoundaryNotAtomic(BranchwiseError):
    """The cut would split a commit."""

    code = "boundary_not_atomic"
    definitive = True
    http_status = 409


class Unverifiable(BranchwiseError):
    """Message-only history with no turn records: no boundary can be confirmed."""

    code = "unverifiable"
    definitive = True
    http_status = 422


class DuplicateChild(BranchwiseError):
    """The requested child session id is already taken."""

    code = "duplicate_child"
    definitive = True
    http_status = 409


class OperationConflict(BranchwiseError):
    """The operation id was already used for a different fork request."""

    code = "operation_conflict"
    definitive = True
    http_status = 409


class EmptyPrompt(BranchwiseError):
    """An edited prompt with no text: there is nothing to ask again."""

    code = "empty_prompt"
    definitive = True


class TurnNotFailed(BranchwiseError):
    """Retry names a turn that did not end in error (or the session has no failed turn)."""

    code = "turn_not_failed"
    definitive = True
    http_status = 409


class InvalidForkRequest(BranchwiseError):
    """A fork request with a malformed operation id, boundary or generation."""

    code = "invalid_fork_request"
    definitive = True


# -- Lineage and child sessions --------------------------------------------------------------------


class LineageCycle(BranchwiseError):
    """Damaged manifests whose parent links loop; the walk stops instead of hanging."""

    code = "lineage_cycle"


class InvalidSpawnedFrom(BranchwiseError):
    """``spawnedFrom`` is not ``{turnId?, toolCallId?}`` of strings."""

    code = "invalid_spawned_from"


class WrongParentWriter(BranchwiseError):
    """The writer handed to :func:`create_child` belongs to another session."""

    code = "wrong_parent_writer"


# -- Settings --------------------------------------------------------------------------------------


class InvalidSettings(BranchwiseError):
    """A settings value that cannot be used; ``field`` names it (camelCase, as on disk)."""

    code = "invalid_settings"


class TurnRunning(BranchwiseError):
    """The action needs the conversation between turns; one is running (retry when it ends)."""

    code = "turn_running"
    http_status = 409  # ``branchwise serve``: a turn runs there already


class NotRelated(BranchwiseError):
    """Two conversations compared or merged are in different lineage trees."""

    code = "not_related"
    definitive = True


class NotAncestor(BranchwiseError):
    """A merge names a conversation that the branch does not descend from."""

    code = "not_ancestor"
    definitive = True


class InvalidMerge(BranchwiseError):
    """What to bring back is empty, too large, of an unknown kind, or badly named."""

    code = "invalid_merge"
    definitive = True


class NotOwnTurn(BranchwiseError):
    """A turn a branch inherited from its parent, asked for as one of the branch's own.

    Bringing it back would copy the parent's own answer into the parent.
    """

    code = "not_own_turn"
    definitive = True


class InvalidFanout(BranchwiseError):
    """A fan-out or fuse asked of no branch, or of more than eight, or badly named."""

    code = "invalid_fanout"
    definitive = True


class InvalidConversationSettings(BranchwiseError):
    """A conversation's model, system prompt or temperature that cannot be used."""

    code = "invalid_conversation_settings"
    definitive = True


class SettingsNewerFormat(UnsupportedFormat):
    """Saving would overwrite a ``settings.json`` that a newer Branchwise wrote.

    Refused rather than done: the newer build's settings (and fields this
    build cannot know) would be lost for good, while the person can still
    update Branchwise or remove the file themselves.
    """

    code = "settings_newer_format"
    definitive = True


# -- Model providers: one class per thing a person can act on --------------------------------------


class ProviderError(BranchwiseError):
    """A model call failed; ``code`` says how (subclasses refine it)."""

    code = "provider_error"


class InvalidBaseUrl(ProviderError):
    """A base URL that is not ``http(s)://host[:port][/path]``."""

    code = "provider_invalid_url"


class ProviderUnreachable(ProviderError):
    """No connection: nothing listens there, DNS failed, or connecting timed out."""

    code = "provider_unreachable"


class ProviderTimeout(ProviderError):
    """Connected, but the server went quiet for longer than the read timeout."""

    code = "provider_timeout"


class ProviderHttpError(ProviderError):
    """The server answered with an HTTP error status (``status`` in details)."""

    code = "provider_http_error"


class ProviderAuthError(ProviderHttpError):
    """401/403: the API key is missing, wrong, or not allowed this model."""

    code = "provider_auth"


class ModelNotFound(ProviderHttpError):
    """404 naming the model: the server does not have it (e.g. not pulled yet)."""

    code = "provider_model_not_found"


class EndpointNotFound(ProviderHttpError):
    """404 for the endpoint itself: the base URL is probably wrong (missing ``/v1``)."""

    code = "provider_endpoint_not_found"


class ModelListUnavailable(EndpointNotFound):
    """The server has no model list (``GET /models`` is 404, 405 or 501).

    Some OpenAI-compatible servers chat without listing models: a typed model
    name works, so this is not "no OpenAI API here".
    """

    code = "provider_model_list_unavailable"


class ModelNameRequired(ProviderError):
    """No model is set and the server cannot list one to pick: the user must type a name."""

    code = "provider_model_name_required"
    definitive = True


class ProviderRateLimited(ProviderHttpError):
    """429: too many requests or quota exhausted; ``retryAfter`` when the server says."""

    code = "provider_rate_limited"


class ProviderRemoteError(ProviderError):
    """The server reported an error inside an otherwise successful stream."""

    code = "provider_remote_error"


class ProviderStreamCut(ProviderError):
    """The stream ended before the server said it was finished.

    The text received so far was real but incomplete; the runner keeps it as
    partial output.
    """

    code = "provider_stream_cut"


class ProviderBadStream(ProviderError):
    """The reply is not an OpenAI event stream (bad JSON, wrong shape, HTML page)."""

    code = "provider_bad_stream"


class ProviderEmptyReply(ProviderError):
    """The server finished properly but produced no text at all.

    Raised rather than recording a silent empty answer, which a person cannot
    tell apart from a display bug.
    """

    code = "provider_empty_reply"


class ModelRejectsImages(ProviderHttpError):
    """The server or model refused a request because it holds an image.

    The turn ends in error like any failed call; a retry with a model that
    reads images (or without the image) can succeed, so it is not definitive.
    """

    code = "model_rejects_images"


# -- Attachments (docs/storage.md, "Attachments") --------------------------------------------------


class AttachmentRefused(BranchwiseError):
    """A file that cannot be attached as it is; subclasses say why, ``name`` names the file.

    Refused before anything is stored or committed: the prompt stays as it was.
    """

    code = "attachment_refused"
    definitive = True
    http_status = 422


class AttachmentUnreadable(AttachmentRefused):
    """The file does not exist, is a folder, cannot be read, or is a link to what cannot be."""

    code = "attachment_unreadable"


class AttachmentEmpty(AttachmentRefused):
    """The file holds no bytes."""

    code = "attachment_empty"


class AttachmentTooLarge(AttachmentRefused):
    """One file over the size limit (``limit`` in bytes)."""

    code = "attachment_too_large"
    http_status = 413


class MessageTooLarge(AttachmentRefused):
    """A message's attachments together over the size limit (``limit`` in bytes)."""

    code = "attachments_too_large"
    http_status = 413


class TooManyImages(AttachmentRefused):
    """More images in one message than the limit (``limit``)."""

    code = "too_many_images"


class UnsupportedAttachment(AttachmentRefused):
    """Neither an image, a text file nor a PDF, judged by its bytes."""

    code = "attachment_unsupported"


class DamagedAttachment(AttachmentRefused):
    """An image cut short, or a PDF whose text cannot be read."""

    code = "attachment_damaged"


class EncryptedPdf(AttachmentRefused):
    """A PDF that needs a password: its text cannot be read."""

    code = "attachment_encrypted"


class AttachmentMissing(BranchwiseError):
    """A message refers to attachment bytes that are gone or damaged (``sha256``).

    Reported by ``session verify`` and shown as "attachment missing"; a turn
    that would send it refuses rather than send something else.
    """

    code = "attachment_missing"
    http_status = 404


# -- A remote Branchwise server (``branchwise serve``, docs/cli.md "Serve") ------------------------


class InvalidRequest(BranchwiseError):
    """A request body or header that does not validate."""

    code = "invalid_request"


class Unauthorized(BranchwiseError):
    """Missing or wrong bearer token."""

    code = "unauthorized"
    http_status = 401


class SessionMismatch(BranchwiseError):
    """``X-Expected-Session`` does not name the session in the path."""

    code = "session_mismatch"


class ServerUnsupported(BranchwiseError):
    """The server does not advertise ``session-fork-targets-v1``; there is no fallback.

    Definitive: nothing was sent to fork, and asking again gets the same answer.
    """

    code = "server_unsupported"
    definitive = True


class RemoteUnavailable(BranchwiseError):
    """The server could not be reached, timed out, or sent an undecodable reply.

    The outcome of a request is unknown: a fork may or may not have happened.
    """

    code = "remote_unavailable"


class RouteNotFound(BranchwiseError):
    """No such endpoint on a Branchwise server."""

    code = "not_found"
    http_status = 404


class BodyTooLarge(BranchwiseError):
    """A request body over the server's size limit."""

    code = "body_too_large"
    http_status = 413


class RemoteRefusal(BranchwiseError):
    """A typed refusal from a Branchwise server, carrying the server's own ``code``.

    It is as definitive as the error that code names here: a server refusing a
    fork as ``stale_source`` will refuse it again, while an unknown code leaves
    the outcome open (the journal keeps its record).
    """

    def __init__(self, code: str, message: str, status: int) -> None:
        super().__init__(message, status=status)
        self.code = code
        known = error_class(code)
        self.definitive = known is not None and known.definitive


class PortInUse(BranchwiseError):
    """``branchwise serve`` could not listen: another program already uses the port."""

    code = "port_in_use"
    definitive = True


class UnsafeTokenFile(BranchwiseError):
    """``serve-token`` is not a private file of this user (a link, a folder, mode 0644, not text).

    A token file anyone can read, or a link that points elsewhere, would hand
    the server's key to someone else (or take theirs), so ``serve`` refuses
    to start; the message says how to fix it.
    """

    code = "unsafe_token_file"
    definitive = True


class RequestTooLarge(BranchwiseError):
    """A request line or header over the server's limit (answered 414 or 431).

    aiohttp's parser refuses it before any handler runs; the server answers
    this typed error instead of aiohttp's plain-text 400.
    """

    code = "request_too_large"
    definitive = True
    http_status = 431


# -- The command line ------------------------------------------------------------------------------


class InvalidArgument(BranchwiseError):
    """A command-line argument that cannot be used as given; ``argument`` names it.

    Linux hands a program its arguments as bytes and Python decodes them with
    ``surrogateescape``: a byte that is not UTF-8 becomes a lone surrogate that
    no JSON encoder, log or manifest accepts. Such an argument is refused
    before any command runs, as is a number outside the range the format stores.
    """

    code = "invalid_argument"
    definitive = True


class InvalidServerUrl(InvalidArgument):
    """A ``--server`` (or "Connect to server…") address that is not an http(s) URL."""

    code = "invalid_server_url"
    definitive = True


# -- Search ----------------------------------------------------------------------------------------


class InvalidSearch(BranchwiseError):
    """A search that cannot be run as asked: an empty query, or a limit outside 1…1000."""

    code = "invalid_search"
    definitive = True


class SearchIndexUnavailable(BranchwiseError):
    """The search index (``<root>/search.sqlite3``) cannot be used or rebuilt now.

    Raised only when the index cannot proceed: another process keeps it
    locked past the wait, or the disk refuses it. A corrupt file is moved
    aside and rebuilt instead (the index is a cache of the logs), so a retry
    can help.
    """

    code = "search_index_unavailable"
    http_status = 503


# -- Export ----------------------------------------------------------------------------------------


class OutputExists(BranchwiseError):
    """The export's output file exists; it is replaced only when overwriting is asked for."""

    code = "output_exists"
    definitive = True
    http_status = 409


class ExportNotWritten(BranchwiseError):
    """The export file could not be written (a missing folder, no permission); nothing was left."""

    code = "export_failed"
    definitive = True
    http_status = 500


# -- Import ----------------------------------------------------------------------------------------


class ImportNotFound(BranchwiseError):
    """The file or folder to import does not exist or cannot be read."""

    code = "import_not_found"
    definitive = True
    http_status = 404


class UnknownImportFormat(BranchwiseError):
    """No importer recognises the path, or ``--format`` names none (``formats`` lists them)."""

    code = "unknown_import_format"
    definitive = True


class MalformedImport(BranchwiseError):
    """The export cannot be read as its format: malformed JSON, not UTF-8, absurdly deep, or the
    wrong shape. Raised before anything is imported; later damage is a warning instead, and the
    conversations read before it stay imported whole.
    """

    code = "malformed_import"
    definitive = True


class UnsafeArchive(BranchwiseError):
    """An export archive that is refused unread: a zip bomb (size or ratio over the limit), a
    member path leaving the archive, or no ``conversations.json`` in it.
    """

    code = "unsafe_archive"
    definitive = True


# -- Starting the desktop app ----------------------------------------------------------------------


class QtLibrariesMissing(BranchwiseError):
    """System libraries Qt needs on Linux are missing, so the window cannot open.

    ``libraries`` names the sonames, ``packages`` the Debian/Ubuntu packages,
    and ``apt`` / ``dnf`` the one command that installs them on each family.
    """

    code = "qt_libraries_missing"
    definitive = True
    http_status = 500


class NoDisplay(BranchwiseError):
    """No display to open the window on (no ``DISPLAY`` nor ``WAYLAND_DISPLAY``), found before
    Qt starts: Qt itself would abort naming a library that is not the problem.
    """

    code = "no_display"
    definitive = True
    http_status = 500
