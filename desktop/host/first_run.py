"""First start: offer a model server that answers, else stay on the demo responder.

Probing never sends an API key and only *offers* the server in a notice: the
user's click switches the provider, so nothing listening on a well-known port
is trusted silently. The offer waits for an answer: it does not fade, and
``first_run_done`` is saved when the user accepts or declines it (or when
nothing answered), so a user who quits without answering is asked again at the
next start. Settings' "Detect local servers" probes again at any time.
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
SERVER_FOUND = "server_found"


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
        suggestion = suggest_settings(self.host.settings, servers)
        if suggestion is None:
            self._done()
            return None
        self.suggestion = dataclasses.replace(suggestion, first_run_done=True)
        self.host.notices.post(
            SERVER_FOUND,
            Level.INFO,
            action=NoticeAction(USE_SERVER),
            sticky=True,
            url=suggestion.base_url,
            model=suggestion.model,
        )
        return self.suggestion

    def accept(self) -> Changes | None:
        """Switch to the offered server (the user clicked "Use it", maybe from the history)."""
        if self.suggestion is None:
            return None
        chosen, self.suggestion = self.suggestion, None
        return self.host.update_settings(_with_server(self.host.settings, chosen))

    def decline(self) -> None:
        """The user dismissed the offer: do not ask again at the next start.

        The suggestion stays for this run, so the history entry can still take it.
        """
        if not self.host.settings.first_run_done:
            self._done()

    def _done(self) -> None:
        done = dataclasses.replace(self.host.settings, first_run_done=True)
        save_settings(self.host.root, done)
        self.host.settings = done


def _with_server(settings: Settings, offer: Settings) -> Settings:
    """What accepting an offer changes: the server, not the user's other choices."""
    return dataclasses.replace(
        settings,
        provider=offer.provider,
        base_url=offer.base_url,
        model=offer.model,
        first_run_done=True,
    )
