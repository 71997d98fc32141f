"""What every typed error code says to people.

The wire ``code`` of a :class:`~branchwise.core.errors.BranchwiseError` (and of
a fork target's ``reason``) is the key; the text is English marked with
:func:`N_` for extraction and translated with :func:`_` only when shown, so
it follows a live language switch. Widgets mark their own labels with
:func:`_` where they show them.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Mapping
from typing import Any

from branchwise.core.errors import BranchwiseError
from branchwise.core.i18n.language import N_, _, format_number, ngettext

REASONS: Mapping[str, str] = {
    # Fork targets: why a turn's "Branch into a new conversation" is disabled.
    # In the user's words: where a turn ends in the saved record is not theirs to know.
    "turn_open": N_("This turn has not finished yet; it can be branched once it has."),
    "unverifiable": N_(
        "Branchwise cannot tell where this turn ends in the saved conversation, "
        "so it cannot be branched from here."
    ),
    "brought_back": N_(
        "What a branch brought back is not a turn of its own, so it cannot be branched "
        "by itself: branch at a later turn to keep it, or at an earlier one to leave it out."
    ),
    "active_authority": N_(
        "This turn still has an open approval or tool call, so it cannot be branched yet."
    ),
    "boundary_not_atomic": N_(
        "This turn was saved together with the next one, so it cannot be branched on its own."
    ),
    "nothing_to_branch": N_("No finished turn to branch from in this conversation yet."),
    "no_alternatives": N_("No turn in view has alternatives to switch between."),
    "targets_loading": N_("Still checking which turns can be branched…"),
    "creation_in_flight": N_("A branch is already being created from this turn."),
    "server_unsupported": N_("This server does not support branching conversations."),
    "server_found": N_(
        "A model server answers at {url} (model {model}). Use it instead of the "
        "offline demo responder?"
    ),
    # Fork refusals.
    "source_not_found": N_("The conversation to branch from no longer exists."),
    "stale_source": N_(
        "The conversation has changed since this turn was shown. Reload it and try again."
    ),
    "unknown_turn": N_("This turn could not be found in the conversation."),
    "duplicate_child": N_("A conversation with the new branch's id already exists."),
    "invalid_fork_request": N_("This branch request is not valid."),
    "operation_conflict": N_("This branch operation was already used for a different request."),
    "fork_refused": N_("Could not branch: {reason}"),
    # Edit, regenerate and retry.
    "empty_prompt": N_("Type the prompt to send as a branch."),
    "turn_not_failed": N_("This turn did not fail, so there is nothing to retry."),
    "invalid_conversation_settings": N_(
        "That model, system prompt or temperature cannot be used (temperature is 0 to 2)."
    ),
    "not_ancestor": N_("That conversation is not one this branch was made from."),
    "not_own_turn": N_(
        "That turn came from the conversation this branch was made from; "
        "only the branch's own answers can be brought back."
    ),
    "invalid_merge": N_(
        "There is nothing to bring back, or it is too long (at most 64,000 characters)."
    ),
    "merge_pending": N_(
        "“{title}” is busy in another window or command; what you brought back will be "
        "added as soon as it is free."
    ),
    "merge_written": N_("Brought back into “{title}”."),
    "import_running": N_("An import is already running; wait for it or cancel it."),
    "not_related": N_("These conversations are not branches of one another."),
    "invalid_fanout": N_("Choose 1 to 8 models or samples (or branches to fuse)."),
    "turn_running": N_("Wait for the answer to finish, then try again."),
    "tabs_not_restored": N_(
        "Tabs from last time that could not be reopened: {n} (deleted or in the trash)."
    ),
    "fork_created": N_("Branch created: {title}"),
    # TRANSLATORS: "Open it" ends the sentence and is shown as a link.
    "fork_attach_failed": N_("Could not open the new conversation {title}; it is kept. Open it"),
    "child_missing": N_("The branched conversation no longer exists."),
    "source_missing": N_("The conversation to branch from no longer exists."),
    "fork_uncertain": N_(
        "The branch was not confirmed. Click the same turn again to retry; "
        "it will not create a second branch."
    ),
    # Lineage and child sessions.
    "lineage_cycle": N_(
        "This conversation's branch history loops back on itself; the damaged link was skipped."
    ),
    "invalid_spawned_from": N_("The origin of this sub-conversation is not valid."),
    "wrong_parent_writer": N_("The sub-conversation was started from the wrong conversation."),
    # A remote Branchwise server.
    "invalid_request": N_("The server rejected the request as not valid."),
    "unauthorized": N_("The server did not accept the access token."),
    "session_mismatch": N_(
        "The server answered for a different conversation than the one asked for."
    ),
    "body_too_large": N_("The request was too large for the Branchwise server."),
    "not_found": N_("The Branchwise server has no such address. Check the server URL."),
    "remote_unavailable": N_(
        "Could not reach the Branchwise server, or its reply could not be read."
    ),
    "request_too_large": N_("The request line or a header was too long for the Branchwise server."),
    "port_in_use": N_("Another program already uses this port. Choose another one with --port."),
    "unsafe_token_file": N_(
        "The server's token file must be a regular file of yours that only you can read. "
        "Remove it to have a new token written, or make it private with chmod 600."
    ),
    "invalid_server_url": N_("The server address must be an http:// or https:// URL."),
    "server_disconnected": N_("Lost the connection to {server}. Reconnecting…"),
    "server_reconnected": N_("Connected to {server} again."),
    "server_cannot": N_("A conversation kept on a server cannot do this from here."),
    "server_cannot_ask_again": N_("This server cannot branch an edited or regenerated prompt."),
    "server_busy": N_(
        "Another app is writing to this conversation on {server}. Try again in a moment."
    ),
    # The command line.
    "invalid_argument": N_("A command-line argument is not valid."),
    # Search.
    "invalid_search": N_("Type some text to search for."),
    "search_index_unavailable": N_(
        "Search is not available right now: its index is in use or cannot be written. "
        "Try again in a moment."
    ),
    # The session store.
    "lease_held": N_("Another window or process is writing to this conversation."),
    "invalid_title": N_("A title needs 1 to {maxLength} characters."),
    "invalid_label": N_("A branch label needs 1 to {maxLength} characters."),
    "app_running": N_(
        "Branchwise is already running with this data folder. Switch to that window, "
        "or start with --data-dir to use another folder."
    ),
    "corrupt_log": N_(
        "Part of this conversation's history is damaged. "
        "It opens read-only, up to the damaged part."
    ),
    "unsupported_format": N_(
        "This conversation was saved by a newer version of Branchwise and cannot be opened."
    ),
    "not_durable": N_(
        "Saving to disk failed, so the last change may be lost. Reopen the conversation."
    ),
    "disk_full": N_(
        "The disk is full. The last change could not be saved; what was saved before it is kept. "
        "Free some space and try again."
    ),
    "commit_too_large": N_(
        "This change is too large to save as one entry (the limit is 256 MiB). Nothing of it "
        "was saved."
    ),
    "invalid_session_id": N_("That is not a valid conversation id."),
    "session_not_found": N_("This conversation could not be found."),
    "session_exists": N_("A conversation with this id already exists."),
    "session_trashed": N_("This conversation is in the Trash. Restore it first."),
    "not_trashed": N_("This conversation is not in the Trash."),
    # The Trash and export (desktop notices).
    "conversation_trashed": N_("Moved {title} to the Trash."),
    "conversation_trashed_with_branches": N_("Moved {title} and its branches to the Trash."),
    "remote_conversation_trashed": N_("Moved {title} to the Trash on {server}."),
    "conversation_restored": N_("Restored {title} from the Trash."),
    "conversation_purged": N_("Deleted {title} for good."),
    "trash_emptied": N_("The Trash was emptied."),
    "conversation_exported": N_("Exported {title} to {path}."),
    "output_exists": N_("A file with this name already exists; it was left unchanged."),
    "export_failed": N_("The export could not be written there. Check the folder and try again."),
    "import_not_found": N_("The file or folder to import does not exist or cannot be read."),
    "unknown_import_format": N_(
        "This is not an export Branchwise can import (ChatGPT, Claude Code, Open WebUI, LibreChat)."
    ),
    "malformed_import": N_(
        "The export is damaged or not in the expected format; nothing more was imported from it."
    ),
    "unsafe_archive": N_(
        "The archive was refused unread: it is too large when unpacked, names paths outside "
        "itself, or holds no conversations.json."
    ),
    "invalid_manifest": N_("This conversation's description file is damaged."),
    "manifest_mismatch": N_(
        "A folder holds a copy of another conversation's description file (a backup?). "
        "It is skipped; the original is not affected."
    ),
    "manifest_unreadable": N_(
        "This conversation's description file cannot be read (it is a folder, or access "
        "is denied). The conversation is skipped."
    ),
    "data_folder_read_only": N_(
        "The data folder is read-only, so nothing can be saved. Conversations can still be read."
    ),
    "unsafe_path": N_(
        "A file in the data folder is a symbolic link. Branchwise does not follow it, "
        "so this conversation cannot be used until the link is removed."
    ),
    "log_tail_cut": N_(
        "An unfinished save at the end of this conversation was removed. "
        "The removed bytes were kept in {file}."
    ),
    "writer_closed": N_("This conversation can no longer be saved. Reopen it."),
    "read_only": N_("This conversation is open read-only."),
    "invalid_frame": N_("A saved entry of this conversation is malformed."),
    "invalid_event": N_("A saved event of this conversation is malformed."),
    "internal_error": N_("Something went wrong inside Branchwise."),
    # Model providers.
    "provider_error": N_("The model request failed."),
    "provider_invalid_url": N_("The base URL is not a valid http:// or https:// address."),
    "provider_timeout": N_("The model server did not answer in time."),
    "provider_unreachable": N_(
        "Could not connect to the model server. Check the base URL and that the server is running."
    ),
    "provider_http_error": N_("The model server returned an error."),
    "provider_auth": N_("The model server rejected the API key."),
    "provider_model_not_found": N_("The model server does not have this model."),
    "provider_endpoint_not_found": N_(
        "The model server has no such endpoint. Check the base URL (it often ends in /v1)."
    ),
    "provider_model_list_unavailable": N_(
        "This server does not list its models. Type the model name: chatting works "
        "without the list."
    ),
    "provider_model_name_required": N_(
        "This server does not list its models, so none can be picked for you. Type the "
        "model name in Settings."
    ),
    "provider_rate_limited": N_(
        "The model server is limiting requests. Wait a moment and try again."
    ),
    "provider_remote_error": N_("The model server reported an error while answering."),
    "provider_empty_reply": N_("The model finished without writing anything."),
    "provider_stream_cut": N_(
        "The answer stopped before it was complete. The partial answer is kept."
    ),
    "provider_bad_stream": N_("The model server sent a reply that could not be read."),
    "model_rejects_images": N_(
        "This model does not accept images. Pick a model that reads images, or remove the "
        "image, and try again."
    ),
    # Attachments.
    "attachment_refused": N_("This file cannot be attached."),
    "attachment_unreadable": N_(
        "The file {name} cannot be read (it is missing, a folder, or access is denied)."
    ),
    "attachment_empty": N_("The file {name} is empty."),
    "attachment_too_large": N_("The file {name} is larger than the limit of {megabytes} MB."),
    "attachments_too_large": N_(
        "The attached files together are larger than the limit of {megabytes} MB per message."
    ),
    "too_many_images": N_("A message can carry at most {limit} images."),
    "attachment_unsupported": N_(
        "The file {name} is not an image (PNG, JPEG, WebP, GIF), a text file or a PDF."
    ),
    "attachment_damaged": N_("The file {name} is damaged or cut short."),
    "attachment_encrypted": N_(
        "The PDF {name} is protected by a password, so its text cannot be read."
    ),
    "attachment_missing": N_("Attachment missing: its saved copy is gone or damaged."),
    # Settings, the operations journal, languages.
    "invalid_settings": N_("Some settings are not valid, so they were not saved."),
    "settings_reset": N_(
        "The settings file was damaged and has been moved aside. Default settings are used."
    ),
    "settings_unreadable": N_(
        "The settings file could not be read. It was left in place; default settings are used."
    ),
    "settings_newer_format": N_(
        "The settings file was saved by a newer version of Branchwise. It was left unchanged "
        "and default settings are used; settings cannot be saved over it until Branchwise "
        "is updated."
    ),
    "journal_reset": N_(
        "The list of unfinished branch operations was damaged and has been moved aside."
    ),
    "journal_write_failed": N_("Could not save the list of unfinished branch operations."),
    "unknown_language": N_("Unknown language “{value}”; it was ignored."),
    # Starting the desktop app.
    "qt_libraries_missing": N_(
        "Branchwise cannot open its window: Qt needs system packages that are not "
        "installed: {packages} (missing libraries: {libraries}).\n"
        "On Debian or Ubuntu, install them with:\n"
        "    {apt}\n"
        "On Fedora:\n"
        "    {dnf}"
    ),
    "no_display": N_(
        "Branchwise cannot open its window: no display was found (DISPLAY and "
        "WAYLAND_DISPLAY are not set). Set DISPLAY (for example ssh -X) or use the "
        "command line (branchwise --help); for headless use set QT_QPA_PLATFORM=offscreen."
    ),
}
"""Reason code -> English text (a msgid). Placeholders use ``{name}``."""

GENERIC_REASON = N_("Something went wrong ({code}).")

# The branch action's label: the turn widget's button and the i18n tests look it up.
BRANCH_ACTION = N_("Branch into a new conversation")


def branch_count(n: int) -> str:
    """``"3 branches"``: how many conversations were branched from one."""
    return fill(ngettext("{n} branch", "{n} branches", n), {"n": format_number(n)})


def _recovered(n: int) -> str:
    return ngettext(
        "Recovered {n} unfinished branch operation.",
        "Recovered {n} unfinished branch operations.",
        n,
    )


def _dropped(n: int) -> str:
    return ngettext(
        "Dropped {n} unfinished branch operation whose conversation no longer exists.",
        "Dropped {n} unfinished branch operations whose conversations no longer exist.",
        n,
    )


def _imported(n: int) -> str:
    return ngettext(
        "Imported {n} conversation ({existing} already there, {skipped} skipped).",
        "Imported {n} conversations ({existing} already there, {skipped} skipped).",
        n,
    )


def _imported_with_branches(n: int) -> str:
    return ngettext(
        "Imported {n} conversation with {branches} ({existing} already there, {skipped} skipped).",
        "Imported {n} conversations with {branches} ({existing} already there, {skipped} skipped).",
        n,
    )


def _import_cancelled(n: int) -> str:
    return ngettext(
        "Import cancelled after {n} conversation ({existing} already there, {skipped} skipped).",
        "Import cancelled after {n} conversations ({existing} already there, {skipped} skipped).",
        n,
    )


PLURAL_REASONS: Mapping[str, Callable[[int], str]] = {
    "fork_recovered": _recovered,
    "journal_record_dropped": _dropped,
    "import_finished": _imported,
    # ``count`` is the conversations, ``branches`` their forks and sub-agents (a number).
    "import_finished_with_branches": _imported_with_branches,
    "import_cancelled": _import_cancelled,
}
"""Codes whose sentence depends on a ``count`` param (shown as ``{n}``)."""


# --- lookups ------------------------------------------------------------------


class _KeepMissing(dict[str, Any]):
    """Leaves a placeholder the caller did not supply visible instead of raising."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def fill(text: str, params: Mapping[str, Any]) -> str:
    """``text.format(**params)`` that never raises: a notice must always show.

    Missing params stay as ``{name}``; a malformed translation (caught by the
    catalog parity test, so only in a broken build) is shown unformatted.
    """
    try:
        return string.Formatter().vformat(text, (), _KeepMissing(params))
    except (ValueError, IndexError, AttributeError, KeyError):
        return text


def reason_text(code: str, **params: Any) -> str:
    """The localized sentence for a reason ``code``, in the active language.

    ``params`` fill the sentence's ``{name}`` fields; a ``reason`` param that is
    itself a known code is shown as that code's sentence; plural reasons take
    ``count``. Unknown codes give the generic "Something went wrong ({code})."
    so a new error type is never shown as a blank.
    """
    nested = params.get("reason")
    if isinstance(nested, str) and nested in REASONS:
        # "Could not branch: {reason}" carries a refusal code; show its sentence.
        params = {**params, "reason": reason_text(nested)}
    plural = PLURAL_REASONS.get(code)
    if isinstance(params.get("branches"), int):
        params = {**params, "branches": branch_count(params["branches"])}
    if plural is not None:
        count = _count(params)
        return fill(plural(count), {**params, "n": format_number(count)})
    english = REASONS.get(code)
    if english is None:
        return fill(_(GENERIC_REASON), {"code": code})
    return fill(_(english), params)


def _count(params: Mapping[str, Any]) -> int:
    try:
        return int(params.get("count", params.get("n", 0)))
    except (TypeError, ValueError):
        return 0


def error_text(error: BranchwiseError) -> str:
    """The localized sentence for a typed error, filled from its details."""
    return reason_text(error.code, **error.details)
