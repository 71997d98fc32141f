"""The sample conversation the first-start introduction offers (no Qt here).

A newcomer learns what a branch is fastest by seeing one: "Try a sample
conversation" makes a short conversation that already has a branch (with a
question of its own), an edited question and a regenerated answer, so the
lineage tree, the branch switcher and compare have something to show at once.

It is made through the host's real operations, exactly as clicks would make
it (send, branch, edit, regenerate: journalled forks, turns run by the turn
runner), never by writing files, and always answered by the offline demo
responder (:meth:`~branchwise.desktop.host.host.Host.answer_with_demo`), even
when a model server is configured, so it costs nothing and works offline. The
prompts are in the interface language; the demo answers in it too.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from branchwise.core.fork.operations import ForkRequest
from branchwise.core.i18n.language import N_, _
from branchwise.desktop.host.host import Host

SAMPLE_TITLE = N_("Sample: a weekend in Kyoto")
FIRST_PROMPT = N_("I have a free weekend in Kyoto. What should I see?")
SECOND_PROMPT = N_("Make it a plan for two days.")
BRANCH_PROMPT = N_("What if it rains all weekend?")
EDITED_PROMPT = N_("Make it a plan for one day, on a small budget.")


@dataclass(frozen=True, slots=True)
class Sample:
    """The sample family: the conversation and its three branches.

    Attributes:
        root: the sample conversation.
        branch: the branch at its first turn, with a question of its own.
        edited: the branch asking the second question edited.
        regenerated: the branch asking the second question again.
    """

    root: str
    branch: str | None
    edited: str | None
    regenerated: str | None


async def create_sample(host: Host) -> Sample:
    """Make the sample family; each branch opens in its tab as a click's would.

    A branch the fork journal refused or left uncertain is ``None`` (the
    notice channel says why, as for a click).

    Raises:
        BranchwiseError: the conversation could not be created.
    """
    session = host.create_session(_(SAMPLE_TITLE))
    root = session.session_id
    host.answer_with_demo(root)
    first = await host.send(root, _(FIRST_PROMPT))
    second = await host.send(root, _(SECOND_PROMPT))
    manifest = await asyncio.to_thread(host.store.manifest, root)
    request = ForkRequest(root, first.turn_id, first.boundary_sequence, manifest.generation)
    branch = await host.request_branch(request)
    if branch is not None:
        await host.send(branch, _(BRANCH_PROMPT))
    edited = await host.edit(root, second.turn_id, _(EDITED_PROMPT))
    regenerated = await host.regenerate(root, second.turn_id)
    return Sample(root, branch, edited, regenerated)
