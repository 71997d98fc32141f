"""``GET /models`` (``models-v1``): the chat models a server's own provider offers.

A client choosing models for a fan-out of a conversation that lives on this
server asks the models this server's turns are answered by, not its own:
the answers run here, with this server's provider settings.
"""

from __future__ import annotations

from aiohttp import web

from branchwise.core.conversation.settings import ConversationSettings
from branchwise.core.errors import ModelListUnavailable
from branchwise.core.providers.openai import OpenAIProvider
from branchwise.core.remote.server.http_io import json_response, query_params
from branchwise.core.remote.server.state import state_of


async def models_of(request: web.Request) -> web.Response:
    """``{"models": [...], "listed": bool}``: chat models only (embedding models left out);
    ``listed`` is false for a server that chats without listing its models."""
    query_params(request, {})
    provider, _ = state_of(request).served.setup(ConversationSettings())
    if not isinstance(provider, OpenAIProvider):
        return json_response({"models": await provider.list_models(), "listed": True})
    try:
        entries = await provider.model_entries()
    except ModelListUnavailable:
        return json_response({"models": [], "listed": False})
    return json_response({"models": [e.id for e in entries if not e.embedding], "listed": True})
