"""First start: offer a model server that answers, else stay on the demo responder.

Probing happens once per data root (``first_run_done`` is saved whether or
not anything answered), never sends an API key, and only *offers* the server
in a notice: the user's click switches the provider, so nothing listening on
a well-known port is trusted silently.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from branchwise.core.providers.detect import candidate_urls, detect_servers, suggest_settings
from branchwise.core.settings import Settings, save_settings
from branchwise.desktop.host.changes import Changes
from branchwise.desktop.host.host import Host
from branchwise.desktop.host.notices import Level, NoticeAction

USE_SERVER = "use_server"


class FirstRun:
    """The first-run offer of a detected server, for one host.

    Args:
        host: the app's host.
        candidates: URLs to probe (default: the configured one, then Ollama,
            LM Studio, llama.cpp and vLLM on 127.0.0.1).
        timeout: seconds per probe.
    """

    def __init__(
        self, host: Host, candidates: Sequence[str] | None = None, timeout: float = 1.0
    ) -> None:
        self.host = host
        self.candidates = candidates
        self.timeout = timeout
        self.suggestion: Settings | None = None

    async def offer(self) -> Settings | None:
        """Probe once; post a ``server_found`` notice offering the first usable server."""
        settings = self.host.settings
        if settings.first_run_done:
            return None
        urls = list(self.candidates) if self.candidates is not None else candidate_urls(settings)
        servers = await detect_servers(urls, timeout=self.timeout)
        done = dataclasses.replace(self.host.settings, first_run_done=True)
        save_settings(self.host.root, done)
        self.host.settings = done
        suggestion = suggest_settings(done, servers)
        if suggestion is None:
            return None
        self.suggestion = suggestion
        self.host.notices.post(
            "server_found",
            Level.INFO,
            action=NoticeAction(USE_SERVER),
            url=suggestion.base_url,
            model=suggestion.model,
        )
        return suggestion

    def accept(self) -> Changes | None:
        """Switch to the offered server (the user clicked "Use it")."""
        if self.suggestion is None:
            return None
        chosen, self.suggestion = self.suggestion, None
        return self.host.update_settings(chosen)
