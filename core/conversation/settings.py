"""Per-conversation model, system prompt, temperature and server.

They are events in the conversation's own log (``session/config``, each one
the whole set, ``None`` meaning "as in Settings"), so a branch inherits the
values its parent had at the fork point and can change them without touching
the parent, and every process reading the log agrees on them. What is not set
for a conversation follows Settings at the moment a turn starts
(:func:`~branchwise.core.settings.for_conversation`). Pure: the projection
builds these from events.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from branchwise.core.errors import InvalidConversationSettings

DEMO_SERVER = "demo"
"""A conversation's ``server`` when the built-in demo responder answers it whatever Settings say."""
MAX_MODEL_CHARS = 200
MAX_SERVER_CHARS = 2_000
MAX_SYSTEM_CHARS = 32_000
MIN_TEMPERATURE, MAX_TEMPERATURE = 0.0, 2.0


@dataclass(frozen=True, slots=True)
class ConversationSettings:
    """A conversation's own choices; ``None`` follows Settings.

    Attributes:
        model: the model to ask.
        system: the system prompt sent before the conversation.
        temperature: sampling temperature, 0 to 2.
        model_server: who answers: :data:`DEMO_SERVER` (the offline demo responder)
            or an OpenAI-compatible server's API root (``http://127.0.0.1:11434/v1``).
            A fan-out's branch asked of another server than the app's, or of
            the demo beside a server, keeps being answered there.
    """

    model: str | None = None
    system: str | None = None
    temperature: float | None = None
    model_server: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The CLI's shape (``modelServer`` only when set, so the shape reads as before)."""
        data: dict[str, Any] = {
            "model": self.model,
            "system": self.system,
            "temperature": self.temperature,
        }
        if self.model_server is not None:
            data["modelServer"] = self.model_server
        return data

    @property
    def empty(self) -> bool:
        """Nothing is set: the conversation follows Settings entirely."""
        return (
            self.model is None
            and self.system is None
            and self.temperature is None
            and self.model_server is None
        )


def validate_conversation_settings(
    model: object = None,
    system: object = None,
    temperature: object = None,
    model_server: object = None,
) -> ConversationSettings:
    """Check values from a command line, a dialog or a log; empty text means "not set".

    Raises:
        InvalidConversationSettings: naming the bad field.
    """
    if model is not None:
        if not isinstance(model, str) or len(model.strip()) > MAX_MODEL_CHARS:
            raise InvalidConversationSettings(
                f"model must be text of at most {MAX_MODEL_CHARS} characters", field="model"
            )
        model = model.strip() or None
    if system is not None:
        if not isinstance(system, str) or len(system) > MAX_SYSTEM_CHARS:
            raise InvalidConversationSettings(
                f"the system prompt must be text of at most {MAX_SYSTEM_CHARS} characters",
                field="system",
            )
        system = system if system.strip() else None
    if temperature is not None:
        if (
            isinstance(temperature, bool)
            or not isinstance(temperature, int | float)
            or not math.isfinite(temperature)
            or not MIN_TEMPERATURE <= temperature <= MAX_TEMPERATURE
        ):
            raise InvalidConversationSettings(
                f"temperature must be a number from {MIN_TEMPERATURE:g} to {MAX_TEMPERATURE:g}",
                field="temperature",
            )
        temperature = float(temperature)
    if model_server is not None:
        model_server = _valid_server(model_server)
    return ConversationSettings(model, system, temperature, model_server)


def _valid_server(server: object) -> str | None:
    """``demo``, or an http(s) URL without a password or spaces; empty means "not set"."""
    if not isinstance(server, str) or len(server) > MAX_SERVER_CHARS:
        raise InvalidConversationSettings(
            f"modelServer must be text of at most {MAX_SERVER_CHARS} characters",
            field="modelServer",
        )
    server = server.strip().rstrip("/")
    if not server:
        return None
    if server == DEMO_SERVER:
        return server
    try:
        parts = urlsplit(server)
        usable = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:  # an unclosed IPv6 bracket, a bad port
        usable = False
    if not usable or any(c.isspace() for c in server):
        raise InvalidConversationSettings(
            "modelServer must be demo or an http(s) address of an OpenAI-compatible server",
            field="modelServer",
        )
    if parts.username or parts.password:
        raise InvalidConversationSettings(
            "modelServer must not hold a user name or password", field="modelServer"
        )
    return server


def from_event(event: dict[str, Any]) -> ConversationSettings:
    """The settings a ``session/config`` event states (lenient: a bad field reads as unset).

    The log is never rewritten, so a value an older or buggy writer committed
    must not make the conversation unreadable.
    """
    values = {}
    for name, key in (
        ("model", "model"),
        ("system", "system"),
        ("temperature", "temperature"),
        ("model_server", "modelServer"),
    ):
        try:
            values[name] = getattr(validate_conversation_settings(**{name: event.get(key)}), name)
        except InvalidConversationSettings:
            values[name] = None
    return ConversationSettings(**values)
