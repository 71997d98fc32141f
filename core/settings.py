"""User settings: which model to talk to, the UI language, first-run state.

Settings live in ``<root>/settings.json``, written with the atomic-replace
recipe and mode 0600 (the file may hold an API key). Loading never fails the
app: a file that does not parse or validate is moved aside as
``settings.json.bad-<timestamp>`` (kept for the person to inspect, never
silently deleted), defaults are used, and a :class:`SettingsNotice` tells the
caller so the UI can say it in the person's language.

A file of a newer format is not broken, only not understood here: it is left
in place, defaults are used (with first run counted as done, since the file
proves it was), and :func:`save_settings` refuses to overwrite it. Commands
that act on the settings (``say``, ``models``) call :func:`require_settings`
and refuse with ``unsupported_format`` instead of quietly running on defaults.

The API key is best kept in an environment variable (``api_key_env``); a key
typed into the settings dialog is stored in the file. Either way it never
appears in ``repr``, logs or error messages.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import orjson

from branchwise.core.conversation.attachments import DEFAULT_LIMITS, MB, AttachmentLimits
from branchwise.core.conversation.settings import (
    DEMO_SERVER,
    ConversationSettings,
    validate_conversation_settings,
)
from branchwise.core.errors import (
    InvalidBaseUrl,
    InvalidConversationSettings,
    InvalidSettings,
    SettingsNewerFormat,
    UnsupportedFormat,
)
from branchwise.core.fs.atomic import atomic_write_bytes

SETTINGS_FILE = "settings.json"
SETTINGS_FORMAT = 1
PROVIDERS = ("demo", "openai")
#: The app's colours: follow the system's light or dark scheme, or always one of them.
THEMES = ("system", "light", "dark")
ThemeChoice = Literal["system", "light", "dark"]
DEFAULT_KEY_ENVS = ("BRANCHWISE_API_KEY", "OPENAI_API_KEY")
NO_KEY_ENV = "BRANCHWISE_NO_KEY"
"""The key variable of a server that is not the app's (one a conversation names, one found
on this machine): :func:`resolve_api_key` sends no key for it, whatever the environment holds."""
DEFAULT_DEMO_PACE = 40
"""Words per second the demo responder streams at: slow enough to watch an answer
arrive and branch while it does, fast enough not to be a wait."""
MAX_DEMO_PACE = 10_000
DEMO_PACE_ENV = "BRANCHWISE_DEMO_PACE"
"""Overrides the saved pace (words per second; ``0`` = instant), for scripts and test runs."""
ProviderKind = Literal["demo", "openai"]

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_LANGUAGE = re.compile(r"[A-Za-z]{2,3}([_-][A-Za-z0-9]{2,8}){0,3}")
_ENDPOINT_SUFFIXES = ("/chat/completions", "/completions", "/models")


def normalize_base_url(url: str) -> str:
    """A model server's address as it is kept and called (the base URL rule).

    A URL with no path gets ``/v1`` appended, because every supported local
    server serves the OpenAI API there (``http://127.0.0.1:11434`` means
    ``http://127.0.0.1:11434/v1``). A URL with a path is used as given
    (``https://openrouter.ai/api/v1``), after dropping trailing slashes and a
    pasted ``/chat/completions`` or ``/models`` endpoint. The rule lives with
    the settings that keep the address; the provider applies it to what it is
    given.

    Raises:
        InvalidBaseUrl: not an http(s) URL with a host.
    """
    text = url.strip()
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - parsing the port validates it
    except ValueError as exc:
        raise InvalidBaseUrl(f"{_without_userinfo(text)!r} is not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidBaseUrl(
            f"the server URL must look like http://host:port/v1, not {_without_userinfo(text)!r}"
        )
    path = parts.path.rstrip("/")
    for suffix in _ENDPOINT_SUFFIXES:
        if path.endswith(suffix):
            path = path[: -len(suffix)].rstrip("/")
            break
    if not path:
        path = "/v1"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def _without_userinfo(url: str) -> str:
    """Drop ``user:password@`` so a malformed URL can be quoted in a message safely."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    authority, slash, path = rest.partition("/")
    authority = authority.rsplit("@", 1)[-1]
    return f"{scheme}{sep}{authority}{slash}{path}"


@dataclass(frozen=True, slots=True)
class SettingsNotice:
    """Something the person should hear about their settings file.

    Attributes:
        code: ``settings_reset`` (the file was broken, moved aside, defaults used),
            ``settings_unreadable`` (it could not be read; left in place) or
            ``settings_newer_format`` (a newer Branchwise wrote it; left in place,
            defaults used, not overwritten).
        path: where the broken file was moved, or the unreadable or newer file.
        reason: the validation error code and field, or the OS error, for logs.
    """

    code: str
    path: str | None
    reason: str


@dataclass(frozen=True, slots=True)
class Settings:
    """What the person chose.

    Attributes:
        provider: ``demo`` (the offline responder) or ``openai`` (any
            OpenAI-compatible server).
        base_url: the server's API root, normalized (see
            :func:`normalize_base_url`);
            empty means not configured.
        model: the model to request; empty lets a single-model server choose.
        api_key_env: the environment variable holding the API key; empty means
            ``BRANCHWISE_API_KEY``, then ``OPENAI_API_KEY`` (for https OpenAI hosts only).
        api_key: a key typed into the settings dialog (kept out of ``repr``).
        language: a UI locale such as ``zh_Hans``; ``None`` follows the system.
        first_run_done: the first-run setup was completed or dismissed.
        system_prompt: sent before every conversation that sets none of its own.
        temperature: sampling temperature for conversations that set none
            (``None``: the server's default).
        theme: ``system`` (follow the system's colour scheme), ``light`` or ``dark``;
            files written before themes existed read as ``system``.
        attachment_file_mb: the largest attached file, in MiB.
        attachment_message_mb: the largest total of one message's files, in MiB.
        attachment_images: the most images one message may carry.
        attachment_image_turns: send images of only the last this many prompts
            that had some (``None``: all still in the context).
        demo_pace: words per second the demo responder streams (``0``: all at once).
        saved_servers: other model servers this person used (API roots, newest
            first): the app's server before it was changed in Settings. Send to
            several offers their models beside the app's server's.
    """

    provider: ProviderKind = "demo"
    base_url: str = ""
    model: str = ""
    api_key_env: str = ""
    api_key: str = field(default="", repr=False)
    language: str | None = None
    first_run_done: bool = False
    system_prompt: str = ""
    temperature: float | None = None
    theme: ThemeChoice = "system"
    attachment_file_mb: int = DEFAULT_LIMITS.file_bytes // MB
    attachment_message_mb: int = DEFAULT_LIMITS.message_bytes // MB
    attachment_images: int = DEFAULT_LIMITS.images
    attachment_image_turns: int | None = None
    demo_pace: int = DEFAULT_DEMO_PACE
    saved_servers: tuple[str, ...] = ()

    @property
    def attachment_limits(self) -> AttachmentLimits:
        """The limits attaching and sending files keep to."""
        return AttachmentLimits(
            file_bytes=self.attachment_file_mb * MB,
            message_bytes=self.attachment_message_mb * MB,
            images=self.attachment_images,
            image_turns=self.attachment_image_turns,
        )

    def to_json(self) -> dict[str, Any]:
        """The on-disk shape (camelCase, with the format version)."""
        return {
            "format": SETTINGS_FORMAT,
            "provider": self.provider,
            "baseUrl": self.base_url,
            "model": self.model,
            "apiKeyEnv": self.api_key_env,
            "apiKey": self.api_key,
            "language": self.language,
            "firstRunDone": self.first_run_done,
            "systemPrompt": self.system_prompt,
            "temperature": self.temperature,
            "theme": self.theme,
            "attachmentFileMb": self.attachment_file_mb,
            "attachmentMessageMb": self.attachment_message_mb,
            "attachmentImages": self.attachment_images,
            "attachmentImageTurns": self.attachment_image_turns,
            "demoPace": self.demo_pace,
            "savedServers": list(self.saved_servers),
        }

    @property
    def configured(self) -> bool:
        """Whether a real model server is set up (otherwise the demo answers)."""
        return self.provider == "openai" and bool(self.base_url)


_JSON_NAMES = {
    "provider": "provider",
    "baseUrl": "base_url",
    "model": "model",
    "apiKeyEnv": "api_key_env",
    "apiKey": "api_key",
    "language": "language",
    "firstRunDone": "first_run_done",
    "systemPrompt": "system_prompt",
    "temperature": "temperature",
    "theme": "theme",
    "attachmentFileMb": "attachment_file_mb",
    "attachmentMessageMb": "attachment_message_mb",
    "attachmentImages": "attachment_images",
    "attachmentImageTurns": "attachment_image_turns",
    "demoPace": "demo_pace",
    "savedServers": "saved_servers",
}
assert set(_JSON_NAMES.values()) == {f.name for f in fields(Settings)}


def validate_settings(data: Mapping[str, Any]) -> Settings:
    """Build :class:`Settings` from the on-disk / dialog shape, checking every field.

    Missing fields take their defaults and unknown fields are ignored (a
    newer build may add some); a newer ``format`` is refused rather than
    misread.

    Raises:
        InvalidSettings: naming the first bad field.
        UnsupportedFormat: a ``format`` newer than this build's.
    """
    if not isinstance(data, Mapping):
        raise InvalidSettings("settings must be a JSON object", field=None)
    fmt = data.get("format", SETTINGS_FORMAT)
    if type(fmt) is not int or fmt < 1:
        raise InvalidSettings(f"unsupported settings format {fmt!r}", field="format")
    if fmt > SETTINGS_FORMAT:
        raise UnsupportedFormat(
            f"the settings are of format {fmt}, newer than this version reads "
            f"({SETTINGS_FORMAT}); update Branchwise",
            field="format",
            format=fmt,
        )
    values: dict[str, Any] = {}
    for json_name, attr in _JSON_NAMES.items():
        if json_name in data:
            values[attr] = data[json_name]

    provider = values.get("provider", "demo")
    if provider not in PROVIDERS:
        raise InvalidSettings(
            f"provider must be one of {', '.join(PROVIDERS)}, not {provider!r}", field="provider"
        )
    for attr in ("base_url", "model", "api_key_env", "api_key"):
        if not isinstance(values.get(attr, ""), str):
            raise InvalidSettings(f"{_json_name(attr)} must be text", field=_json_name(attr))
    base_url = values.get("base_url", "").strip()
    if base_url:
        try:
            base_url = normalize_base_url(base_url)
        except InvalidBaseUrl as exc:
            raise InvalidSettings(exc.message, field="baseUrl") from None
    api_key_env = values.get("api_key_env", "").strip()
    if api_key_env and not _ENV_NAME.fullmatch(api_key_env):
        raise InvalidSettings(
            "apiKeyEnv must be an environment variable name such as BRANCHWISE_API_KEY",
            field="apiKeyEnv",
        )
    language = values.get("language")
    if language is not None and (
        not isinstance(language, str) or not _LANGUAGE.fullmatch(language)
    ):
        raise InvalidSettings("language must be a locale such as en or zh_Hans", field="language")
    first_run_done = values.get("first_run_done", False)
    if not isinstance(first_run_done, bool):
        raise InvalidSettings("firstRunDone must be true or false", field="firstRunDone")
    theme = values.get("theme", "system")
    if theme not in THEMES:
        raise InvalidSettings(
            f"theme must be one of {', '.join(THEMES)}, not {theme!r}", field="theme"
        )
    limits = {}
    default = Settings()
    for attr in ("attachment_file_mb", "attachment_message_mb", "attachment_images"):
        value = values.get(attr, getattr(default, attr))
        if type(value) is not int or not 1 <= value <= 4096:
            raise InvalidSettings(
                f"{_json_name(attr)} must be a whole number from 1 to 4096", field=_json_name(attr)
            )
        limits[attr] = value
    image_turns = values.get("attachment_image_turns")
    if image_turns is not None and (type(image_turns) is not int or image_turns < 0):
        raise InvalidSettings(
            "attachmentImageTurns must be null or a whole number from 0",
            field="attachmentImageTurns",
        )
    demo_pace = values.get("demo_pace", DEFAULT_DEMO_PACE)
    if type(demo_pace) is not int or not 0 <= demo_pace <= MAX_DEMO_PACE:
        raise InvalidSettings(
            f"demoPace must be a whole number of words per second from 0 to {MAX_DEMO_PACE}",
            field="demoPace",
        )
    saved_servers = _saved_servers(values.get("saved_servers", ()), base_url)
    try:
        defaults = validate_conversation_settings(
            system=values.get("system_prompt"), temperature=values.get("temperature")
        )
    except InvalidConversationSettings as exc:
        field_name = "systemPrompt" if exc.details.get("field") == "system" else "temperature"
        raise InvalidSettings(exc.message, field=field_name) from None
    return Settings(
        provider=provider,
        base_url=base_url,
        model=values.get("model", "").strip(),
        api_key_env=api_key_env,
        api_key=values.get("api_key", "").strip(),
        language=language,
        first_run_done=first_run_done,
        system_prompt=defaults.system or "",
        temperature=defaults.temperature,
        theme=theme,
        attachment_image_turns=image_turns,
        saved_servers=saved_servers,
        **limits,
        demo_pace=demo_pace,
    )


MAX_SAVED_SERVERS = 8


def _saved_servers(value: object, base_url: str) -> tuple[str, ...]:
    """Normalized, without repeats or the app's own server, at most :data:`MAX_SAVED_SERVERS`."""
    if not isinstance(value, list | tuple) or not all(isinstance(url, str) for url in value):
        raise InvalidSettings("savedServers must be a list of addresses", field="savedServers")
    kept: list[str] = []
    for url in value:
        try:
            normalized = normalize_base_url(url)
        except InvalidBaseUrl as exc:
            raise InvalidSettings(exc.message, field="savedServers") from None
        if normalized != base_url and normalized not in kept:
            kept.append(normalized)
    return tuple(kept[:MAX_SAVED_SERVERS])


def remember_server(old: Settings, new: Settings) -> Settings:
    """``new``, with ``old``'s server saved first among the others when ``new`` changed it."""
    if not old.base_url or old.base_url == new.base_url:
        return new
    servers = _saved_servers([old.base_url, *new.saved_servers], new.base_url)
    return dataclasses.replace(new, saved_servers=servers)


def for_conversation(settings: Settings, conversation: ConversationSettings) -> Settings:
    """``settings`` with a conversation's own choices in place of the defaults.

    A conversation's own ``model_server`` replaces the app's: ``demo`` is the demo
    responder; another address is asked with no key at all (:data:`NO_KEY_ENV`):
    neither the one typed for the app's server nor one from the environment, as a
    key kept for one server must not reach another a fan-out happened to ask.
    """
    if conversation.model_server is not None:
        settings = _answered_by(settings, conversation.model_server)
    return dataclasses.replace(
        settings,
        model=settings.model if conversation.model is None else conversation.model,
        system_prompt=(
            settings.system_prompt if conversation.system is None else conversation.system
        ),
        temperature=(
            settings.temperature if conversation.temperature is None else conversation.temperature
        ),
    )


def _answered_by(settings: Settings, server: str) -> Settings:
    if server == DEMO_SERVER:
        return dataclasses.replace(settings, provider="demo")
    url = normalize_base_url(server)
    if settings.configured and url == settings.base_url:
        return settings
    return dataclasses.replace(
        settings, provider="openai", base_url=url, api_key="", api_key_env=NO_KEY_ENV
    )


def load_settings(root: Path) -> tuple[Settings, list[SettingsNotice]]:
    """The settings under ``root``, or defaults, plus what the person should be told."""
    path = Path(root) / SETTINGS_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return Settings(), []
    except OSError as exc:
        return Settings(), [SettingsNotice("settings_unreadable", str(path), exc.strerror or "")]
    try:
        return validate_settings(orjson.loads(raw)), []
    except orjson.JSONDecodeError as exc:
        reason = f"not JSON: {exc}"
    except InvalidSettings as exc:
        reason = f"{exc.code}: {exc.details.get('field')}"
    except UnsupportedFormat as exc:
        # Not broken, only newer: keep it where the newer build will look for it.
        newer = SettingsNotice(SettingsNewerFormat.code, str(path), exc.message)
        return Settings(first_run_done=True), [newer]
    return Settings(), [SettingsNotice("settings_reset", _move_aside(path), reason)]


def require_settings(root: Path) -> tuple[Settings, list[SettingsNotice]]:
    """:func:`load_settings` for a command that must not run on defaults instead of a newer file.

    Raises:
        UnsupportedFormat: ``settings.json`` is of a newer format (left untouched).
    """
    settings, notices = load_settings(root)
    for notice in notices:
        if notice.code == SettingsNewerFormat.code:
            raise UnsupportedFormat(notice.reason, path=notice.path)
    return settings, notices


def save_settings(root: Path, settings: Settings) -> None:
    """Write ``settings`` to ``<root>/settings.json`` atomically, mode 0600.

    Raises:
        SettingsNewerFormat: the file there is of a newer format; it is left as it is.
    """
    root = Path(root)
    fmt = _format_on_disk(root / SETTINGS_FILE)
    if fmt is not None and fmt > SETTINGS_FORMAT:
        raise SettingsNewerFormat(
            f"{root / SETTINGS_FILE} is of format {fmt}, newer than this version writes "
            f"({SETTINGS_FORMAT}); it was left unchanged",
            path=str(root / SETTINGS_FILE),
        )
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    data = orjson.dumps(settings.to_json(), option=orjson.OPT_INDENT_2)
    atomic_write_bytes(root / SETTINGS_FILE, data + b"\n", mode=0o600)


def resolve_api_key(settings: Settings, environ: Mapping[str, str] | None = None) -> str | None:
    """The key to send: the typed one, else the named variable, else the defaults.

    A named variable that is unset means no key (the person chose that
    variable; guessing another one could send the wrong secret). The
    ``OPENAI_API_KEY`` fallback only goes to OpenAI itself over https: a key
    people keep for OpenAI must not reach whatever server is configured.
    """
    if settings.api_key:
        return settings.api_key
    if settings.api_key_env == NO_KEY_ENV:
        return None
    env = os.environ if environ is None else environ
    if settings.api_key_env:
        names: tuple[str, ...] = (settings.api_key_env,)
    elif _is_openai(settings.base_url):
        names = DEFAULT_KEY_ENVS
    else:
        names = DEFAULT_KEY_ENVS[:1]
    for name in names:
        value = env.get(name, "").strip()
        if value:
            return value
    return None


def demo_pace(settings: Settings, environ: Mapping[str, str] | None = None) -> int:
    """Words per second for the demo responder: ``$BRANCHWISE_DEMO_PACE`` if valid, else saved.

    The variable lets a script or a test run ask for instant answers without
    changing the person's settings; a value that is not a pace is ignored.
    """
    env = os.environ if environ is None else environ
    raw = env.get(DEMO_PACE_ENV, "").strip()
    if raw.isdigit() and int(raw) <= MAX_DEMO_PACE:
        return int(raw)
    return settings.demo_pace


def _is_openai(base_url: str) -> bool:
    parts = urlsplit(base_url)
    host = (parts.hostname or "").lower()
    return parts.scheme == "https" and (host == "openai.com" or host.endswith(".openai.com"))


def _json_name(attr: str) -> str:
    return next(json for json, name in _JSON_NAMES.items() if name == attr)


def _format_on_disk(path: Path) -> int | None:
    """The ``format`` of the settings file at ``path``, if it is readable JSON naming one."""
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    fmt = data.get("format") if isinstance(data, dict) else None
    return fmt if type(fmt) is int else None


def _move_aside(path: Path) -> str | None:
    """Rename a broken settings file out of the way; its new path, or None if that failed."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = path.with_name(f"{path.name}.bad-{stamp}")
    counter = 1
    while target.exists():
        counter += 1
        target = path.with_name(f"{path.name}.bad-{stamp}-{counter}")
    with contextlib.suppress(OSError):
        os.replace(path, target)
        return str(target)
    return None
