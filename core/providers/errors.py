"""Typed failures of a model call, one class per thing a person can act on.

The turn runner records ``code`` on the failed turn and the UI localizes by
it, so each code answers a different "what do I do now?": start the server
(``provider_unreachable``), fix the key (``provider_auth``), pull the model
(``provider_model_not_found``), wait (``provider_rate_limited``), retry
(``provider_timeout``, ``provider_stream_cut``). Messages name the server by
host and never contain an API key.
"""

from __future__ import annotations

from .base import ProviderError


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
