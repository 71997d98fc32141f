"""``branchwise models`` and the provider options other commands share.

``branchwise models`` asks the configured provider (settings in the data
root, overridden by ``--provider/--base-url/--model``) for its model list;
``--detect`` instead probes the usual local servers. ``session say`` reuses
:func:`add_provider_options` and :func:`provider_from_args` so a turn can be
run against a real server from a script. There is deliberately no
``--api-key`` option: command lines are visible to every user of the machine
(``ps``), so keys come from settings or the environment.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence
from typing import Any

from branchwise.core.conversation.attachments import AttachmentLimits
from branchwise.core.conversation.settings import ConversationSettings
from branchwise.core.errors import InvalidSettings
from branchwise.core.providers.base import Provider
from branchwise.core.providers.demo import DemoProvider
from branchwise.core.providers.detect import candidate_urls, choose_provider, detect_servers
from branchwise.core.providers.openai import OpenAIProvider
from branchwise.core.settings import (
    Settings,
    SettingsNotice,
    for_conversation,
    require_settings,
    validate_settings,
)
from branchwise.core.store.store import SessionStore


def register_top(sub: argparse._SubParsersAction) -> None:
    """Add the top-level ``models`` command."""
    models = sub.add_parser(
        "models", help="list the models the configured provider offers (JSON output)"
    )
    add_provider_options(models)
    models.add_argument(
        "--detect",
        action="store_true",
        help="probe the configured and the usual local servers instead (Ollama, LM Studio, "
        "llama.cpp, vLLM)",
    )
    models.add_argument(
        "--timeout", type=float, default=1.0, help="seconds per server when detecting"
    )
    models.add_argument(
        "--all",
        action="store_true",
        help="list embedding models too (left out by default: they cannot chat)",
    )
    models.set_defaults(func=cmd_models)


class _BaseUrlAction(argparse.Action):
    """``--base-url`` alone means an OpenAI-compatible server: no need to also say so."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, values)
        if getattr(namespace, "provider", None) is None:
            namespace.provider = "openai"


def add_provider_options(parser: argparse.ArgumentParser, *, many_models: bool = False) -> None:
    """Add ``--provider``, ``--base-url`` and ``--model``; unset ones follow the settings.

    ``args.provider`` stays ``None`` unless one of them names a provider, so a
    command can tell "use the settings" from an explicit choice.
    ``many_models`` (``session fanout``) makes ``--model`` repeatable, into
    ``args.models``.
    """
    parser.add_argument(
        "--provider", choices=("demo", "openai"), default=None, help="override the settings"
    )
    parser.add_argument(
        "--base-url",
        action=_BaseUrlAction,
        default=None,
        metavar="URL",
        help="OpenAI-compatible server, e.g. http://127.0.0.1:11434/v1 (implies --provider openai)",
    )
    if many_models:
        parser.add_argument(
            "--model",
            dest="models",
            action="append",
            default=[],
            metavar="M",
            help="ask this model (repeat for several)",
        )
    else:
        parser.add_argument("--model", default=None, help="model name to request")


def settings_from_args(
    store: SessionStore,
    args: argparse.Namespace,
    conversation: ConversationSettings | None = None,
) -> Settings:
    """The saved settings, then a conversation's own choices, then the command-line overrides."""
    return _settings_and_notices(store, args, conversation)[0]


def _settings_and_notices(
    store: SessionStore,
    args: argparse.Namespace,
    conversation: ConversationSettings | None = None,
) -> tuple[Settings, list[SettingsNotice]]:
    settings, notices = require_settings(store.root)
    if conversation is not None:
        settings = for_conversation(settings, conversation)
    data = settings.to_json()
    if getattr(args, "provider", None) is not None:
        data["provider"] = args.provider
    if getattr(args, "base_url", None) is not None:
        data["baseUrl"] = args.base_url
    if getattr(args, "model", None) is not None:
        data["model"] = args.model
    merged = validate_settings(data)
    if merged.provider == "openai" and not merged.base_url:
        raise InvalidSettings(
            "--provider openai needs --base-url (or a server URL in the settings)",
            field="baseUrl",
        )
    return merged, notices


def provider_from_args(
    store: SessionStore,
    args: argparse.Namespace,
    conversation: ConversationSettings | None = None,
) -> Provider:
    """The provider for a command: settings, the conversation's, then the provider options.

    Raises :class:`~branchwise.core.errors.InvalidSettings` for a bad override and
    :class:`~branchwise.core.errors.UnsupportedFormat` for settings of a newer format.
    """
    return _provider(settings_from_args(store, args, conversation), args)


def turn_setup(
    store: SessionStore, args: argparse.Namespace, conversation: ConversationSettings
) -> tuple[Provider, str]:
    """The provider and system prompt for a turn of a conversation (settings read once)."""
    settings = settings_from_args(store, args, conversation)
    return _provider(settings, args), settings.system_prompt


def attachment_limits(store: SessionStore, args: argparse.Namespace) -> AttachmentLimits:
    """The attachment limits of the saved settings."""
    return settings_from_args(store, args).attachment_limits


def provider_for(settings: Settings, args: argparse.Namespace) -> Provider:
    """The provider ``settings`` name (the demo responder when no server is configured)."""
    return _provider(settings, args)


def _provider(settings: Settings, args: argparse.Namespace) -> Provider:
    if not settings.configured:
        return DemoProvider(delay=getattr(args, "delay_ms", 0) / 1000)
    return choose_provider(settings)


def cmd_models(store: SessionStore, args: argparse.Namespace) -> dict[str, Any]:
    """``{"provider", "baseUrl", "label", "models"}``, or ``{"servers"}`` with ``--detect``."""
    settings, notices = _settings_and_notices(store, args)
    result: dict[str, Any]
    if args.detect:
        servers = asyncio.run(detect_servers(candidate_urls(settings), timeout=args.timeout))
        result = {"servers": [server.to_json() for server in servers]}
    else:
        provider = provider_from_args(store, args)
        if isinstance(provider, OpenAIProvider):
            models = asyncio.run(provider.list_models(include_embedding=args.all))
        else:
            models = asyncio.run(provider.list_models())
        result = {
            "provider": "openai" if settings.configured else "demo",
            "baseUrl": settings.base_url if settings.configured else None,
            "label": provider.label,
            "models": models,
        }
    if notices:
        result["notices"] = [
            {"code": notice.code, "path": notice.path, "reason": notice.reason}
            for notice in notices
        ]
    return result
