"""The names Branchwise gives conversations that were not named by the user.

Public API (what other modules call):

* Titles: :func:`title_from_prompt`, :func:`title_from_texts`,
  :func:`branch_title` ("<title> (branch N)"), :func:`new_branch_title`;
  :func:`display_title` a stored title as shown, its "(branch N)" suffix in
  the language shown (a title keeps the suffix it was made with).
* Labels, which say how a branch differs from its parent (stored as a
  :class:`~branchwise.core.store.manifest.BranchLabel`, rendered in the
  language shown at display time, so a language switch re-renders them):

  - :func:`new_branch_label`: the label a branch is published with, from its
    fork request's origin and its parent's other children ("Edited: …",
    "Regenerated 2", "From turn N"); :func:`fork_turn_number` the 1-based
    turn of the parent it leaves at (0: at the start), from the parent's turn ids.
  - :func:`new_branch_name` / :func:`new_branch_name_from_store`: title, label
    and fork turn of a new branch together (what a fork call is given);
    :func:`new_branch_label_from_store` the label and turn alone.
  - :func:`imported_label`, :func:`model_label`, :func:`child_label`,
    :func:`given_branch_label`, :func:`with_first_prompt`: the other origins,
    a name the user typed, and a plain branch's first own prompt.
  - :func:`label_of`: a manifest's label (its stored one, else computed from
    its parent link and siblings: manifests older than labels).
  - :func:`label_in`: a manifest's label among a lineage index's manifests
    (the desktop's sidebar, tabs and menus, local or on a server);
    :func:`branched_from`: "Branched from turn N of <parent> on <date>".
  - :func:`rename`: a conversation's title, label or both as the user gives
    them (``session rename`` and ``serve``'s rename routes).
  - :func:`render_label`: the words, ``language`` given or the active one;
    :func:`label_json`: the ``"label"``, ``"labelParts"`` and ``"forkTurnIndex"``
    fields the CLI and ``serve`` print.
  - :func:`stored_fork_turn_index`: a branch's fork turn, computed from its
    log when its manifest predates it; :class:`LabelReader` both, for views
    that print many manifests (computing what older manifests lack once).

A conversation is titled after its first prompt (an imported one without a
prompt after its first answer, else "Untitled conversation"), and a branch
after the conversation it left ("<title> (branch N)"; a branch of a branch
"<title> (branch N.M)", so suffixes never stack), wherever it is made: a turn in
the app or the CLI, a click on a branch button (local or on a server), or an
import of another app's branches, which would otherwise all carry their
parent's title and read as one name repeated down the sidebar.

:func:`branch_title` is the one rule for a branch's name. Its callers differ
only in where they learn the parent's title and children: the desktop's
lineage index, one pass over the store's manifests
(:func:`new_branch_title`), a server's session list, or the importer's plan.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from branchwise.core.errors import BranchwiseError
from branchwise.core.fork.targets import TargetsCache, fork_targets
from branchwise.core.i18n.language import DISPLAY_NAMES, N_, translator
from branchwise.core.i18n.reasons import fill
from branchwise.core.ids import validate_session_id
from branchwise.core.lineage import LineageIndex
from branchwise.core.store.manifest import (
    BranchLabel,
    BranchOrigin,
    Manifest,
    given_label,
    given_title,
    load_manifest,
)
from branchwise.core.store.store import SessionStore

TITLE_LENGTH = 60
"""The longest title taken from a prompt, in characters (longer ones end in "…")."""

BRANCH_TITLE = N_("{title} (branch {n})")
"""A branch's name; "{title}（分支 {n}）" in Chinese."""

FORK = "fork"
"""The kind of child that counts as a branch (a ``child`` sub-conversation starts empty)."""


UNTITLED = N_("Untitled conversation")
"""The title of a conversation that holds no words to take one from."""


def title_from_prompt(text: str) -> str:
    """A title from a prompt: its words on one line, cut to :data:`TITLE_LENGTH`."""
    line = " ".join(text.split())
    return line if len(line) <= TITLE_LENGTH else line[: TITLE_LENGTH - 1] + "…"


def title_from_texts(texts: Iterable[str], *, language: str | None = None) -> str:
    """The title of a conversation that came untitled: its first words, else "Untitled
    conversation" (localized).

    ``texts`` are its messages in the order they should be tried (the first
    prompt, then the first answer: an imported conversation may open with the
    assistant speaking and hold no prompt at all). A title is never empty, so
    the sidebar never shows a blank row.
    """
    for text in texts:
        title = title_from_prompt(text)
        if title:
            return title
    return translator(language)(UNTITLED)


def branch_title(
    parent_title: str, siblings: Iterable[str] | int, *, language: str | None = None
) -> str | None:
    """ "<title> (branch N)" for a new fork of a parent; ``None`` for an untitled parent.

    A fork would inherit its parent's title, so the sidebar and tabs would
    show two identical names; N counts the parent's forks, this one included,
    so the first branch is "(branch 1)". An untitled parent has no name to
    repeat: the fork keeps what it inherits.

    Args:
        parent_title: the title of the conversation branched from.
        siblings: the kinds of the parent's children so far (only ``fork``
            counts: a ``child`` sub-conversation is not a branch of it), or
            how many forks it has already when the caller counted them.
        language: the language of the suffix (default: the active one).
    """
    if not parent_title:
        return None
    forks = siblings if isinstance(siblings, int) else sum(kind == FORK for kind in siblings)
    title, number = parent_title, str(forks + 1)
    found = _branch_suffix(parent_title)
    if found is not None:  # a branch of a branch: "<title> (branch 1.1)", never two suffixes
        title, number = found[0], f"{found[1]}.{number}"
    return fill(translator(language)(BRANCH_TITLE), {"title": title, "n": number})


def display_title(title: str, *, language: str | None = None) -> str:
    """``title`` as shown in ``language`` (default: the active one).

    A branch's title is stored with the "(branch N)" suffix of the language
    active when it was made; shown as stored, a conversation made before a
    switch to 繁體中文 would read "(branch 3)" beside a newer "（分支 4）". The
    suffix is therefore rendered again here, in every language it may have
    been written in; the rest of the title is the user's and stays as it is.
    """
    found = _branch_suffix(title)
    if found is None:
        return title
    return fill(translator(language)(BRANCH_TITLE), {"title": found[0], "n": found[1]})


def _branch_suffix(title: str) -> tuple[str, str] | None:
    """``(title, N)`` when ``title`` already ends in a branch suffix, in any language."""
    for pattern in _branch_patterns():
        match = pattern.fullmatch(title)
        if match is not None and match["title"]:
            return match["title"], match["n"]
    return None


@functools.cache
def _branch_patterns() -> tuple[re.Pattern[str], ...]:
    """:data:`BRANCH_TITLE` as every language writes it, as patterns (a title made in
    one language is recognised after the user switched to another)."""
    patterns = []
    for language in DISPLAY_NAMES:
        shape = re.escape(translator(language)(BRANCH_TITLE))
        shape = shape.replace(re.escape("{title}"), "(?P<title>.+)", 1)
        shape = shape.replace(re.escape("{n}"), r"(?P<n>\d+(?:\.\d+)*)", 1)
        patterns.append(re.compile(shape, re.DOTALL))
    return tuple(patterns)


def new_branch_title(store: SessionStore, source_id: str) -> str | None:
    """:func:`branch_title` of a new fork of ``source_id``, counted from the store's manifests.

    The desktop counts a source's forks in its lineage index; a CLI fork has
    no index, so this counts them in one pass over every manifest (about
    90 ms for 5,000 sessions), as ``tree`` does. ``None`` for an untitled
    source, and for one that cannot be read: the fork then refuses in its own
    words (``source_not_found``, …), which a name must not pre-empt.
    """
    try:
        title = load_manifest(store.session_dir(validate_session_id(source_id))).title
    except BranchwiseError:
        return None
    return branch_title(
        title,
        (
            manifest.kind
            for manifest in store.iter_manifests()
            if isinstance(manifest, Manifest)
            and manifest.parent is not None
            and manifest.parent.session_id == source_id
        ),
    )


# -- labels ---------------------------------------------------------------------------

LABEL_PROMPT_LENGTH = 32
"""The most characters of a prompt a label shows (its first words, then "…")."""

EDITED = N_("Edited: {prompt}")
REGENERATED = N_("Regenerated {n}")
FROM_TURN = N_("From turn {n}")
FROM_TURN_PROMPT = N_("From turn {n}: {prompt}")
FROM_START = N_("From the start")
FROM_START_PROMPT = N_("From the start: {prompt}")
BRANCH = N_("A branch")
BRANCH_PROMPT = N_("Branch: {prompt}")
CHILD = N_("Sub-conversation")
CHILD_OF_TURN = N_("Sub-conversation of turn {n}")
MODEL_SAMPLE = N_("{model} · sample {n}")
EDITED_IN = N_("Edited in {app}")
REGENERATED_IN = N_("Regenerated in {app}")
BRANCH_IN = N_("Branch in {app}")
CLAUDE_CODE_REWIND = N_("Claude Code /rewind")

IMPORT_APPS: Mapping[str, str] = {
    "chatgpt": "ChatGPT",
    "claude-code": "Claude Code",
    "open-webui": "Open WebUI",
    "librechat": "LibreChat",
}
"""The import formats (``core/importing/``) by the name of the app that wrote them."""


def _label_prompt(text: str) -> str:
    """A prompt's first words on one line, cut to :data:`LABEL_PROMPT_LENGTH`."""
    line = " ".join(text.split())
    if len(line) <= LABEL_PROMPT_LENGTH:
        return line
    cut = line[: LABEL_PROMPT_LENGTH - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space >= LABEL_PROMPT_LENGTH // 2 else cut) + "…"


def fork_turn_number(turn_ids: Sequence[str], turn_id: str | None) -> int | None:
    """The 1-based number of ``turn_id`` among a parent's ``turn_ids`` (0 for ``None``:
    at the start; ``None`` when the parent holds no such turn)."""
    if turn_id is None:
        return 0
    try:
        return turn_ids.index(turn_id) + 1
    except ValueError:
        return None


def _leaves_at(turn_id: str | None, origin: BranchOrigin | None) -> str | None:
    """The parent's turn a branch leaves at: the turn an edit or regenerate asks again,
    else the turn it was branched after."""
    if origin is None or origin.kind == "fanout":  # a fan-out asks a new turn after turn_id
        return turn_id
    return origin.turn_id


def new_branch_label(origin: BranchOrigin | None, siblings: Iterable[Manifest]) -> BranchLabel:
    """The label a new fork is published with.

    An edit is "Edited: <its first words>"; a regenerate "Regenerated N",
    where N counts the answers to that turn of the parent (the original is 1,
    earlier regenerations of the same turn follow), so the first is
    "Regenerated 2"; a plain branch "From turn N" until its first own prompt
    (:func:`with_first_prompt`).

    Args:
        origin: the fork request's origin (``None``: a plain branch).
        siblings: the parent's children so far (their manifests).
    """
    if origin is None or origin.kind == "fanout":  # a fan-out names its branch by model
        return BranchLabel("fork")
    if origin.kind == "edit":
        return BranchLabel("edit", text=_label_prompt(origin.prompt))
    earlier = sum(
        1
        for sibling in siblings
        if sibling.parent is not None
        and sibling.parent.origin is not None
        and sibling.parent.origin.kind == "regenerate"
        and sibling.parent.origin.turn_id == origin.turn_id
    )
    return BranchLabel("regenerate", number=earlier + 2)


def imported_label(source_format: str, origin: str | None) -> BranchLabel:
    """The label of another app's fork: where it came from and how ("Edited in ChatGPT")."""
    return BranchLabel("imported", source=source_format, origin=origin)


def model_label(model: str, sample: int | None = None) -> BranchLabel:
    """The label of a fan-out branch: the model that answers it ("qwen2.5 · sample 2")."""
    return BranchLabel("model", text=model, number=sample)


def child_label() -> BranchLabel:
    """The label of a linked sub-conversation (a tool's or agent's, which starts empty)."""
    return BranchLabel("child")


def given_branch_label(text: str) -> BranchLabel:
    """A label the user typed, kept as its text (one line).

    Raises:
        InvalidLabel: empty, or longer than the manifest allows.
    """
    return BranchLabel("given", text=given_label(text))


def with_first_prompt(label: BranchLabel | None, prompt: str) -> BranchLabel | None:
    """A plain branch's label once it has its first own prompt ("From turn N: <prompt>");
    ``None`` when the label has nothing to gain (any other kind, or already named)."""
    if label is None or label.kind != "fork" or label.text:
        return None
    words = _label_prompt(prompt)
    return BranchLabel("fork", text=words) if words else None


@dataclass(frozen=True, slots=True)
class BranchName:
    """What a new branch is published with: its title, label and fork turn.

    Attributes:
        title: "<parent's title> (branch N)" (``None``: keeps the inherited one).
        label: how it differs (:func:`new_branch_label`).
        fork_turn_index: the parent's turn it leaves at, 1-based (0: at the
            start; ``None``: not known to the caller, computed on read).
    """

    title: str | None
    label: BranchLabel | None
    fork_turn_index: int | None


def new_branch_name(
    parent_title: str,
    siblings: Sequence[Manifest],
    origin: BranchOrigin | None,
    fork_turn_index: int | None,
) -> BranchName:
    """Title, label and fork turn of a new fork of a parent whose children are ``siblings``."""
    return BranchName(
        branch_title(parent_title, (sibling.kind for sibling in siblings)),
        new_branch_label(origin, (s for s in siblings if s.kind == FORK)),
        fork_turn_index,
    )


def new_branch_name_from_store(
    store: SessionStore,
    source_id: str,
    turn_id: str | None,
    origin: BranchOrigin | None = None,
    *,
    cache: TargetsCache | None = None,
) -> BranchName:
    """:func:`new_branch_name` of a new fork of ``source_id``, from the store's manifests.

    The parent's children come from one pass over every manifest (as
    :func:`new_branch_title`), the fork turn from the parent's fork targets
    (its turn index, else a replay; ``cache``: a caller's
    :class:`~branchwise.core.fork.targets.TargetsCache`). A source that cannot
    be read names nothing: the fork then refuses in its own words.
    """
    try:
        title = load_manifest(store.session_dir(validate_session_id(source_id))).title
        turn_ids = [
            target.turn_id for target in fork_targets(store, source_id, cache=cache).targets
        ]
    except BranchwiseError:
        return BranchName(None, None, None)
    siblings = [
        manifest
        for manifest in store.iter_manifests()
        if isinstance(manifest, Manifest)
        and manifest.parent is not None
        and manifest.parent.session_id == source_id
    ]
    turn = fork_turn_number(turn_ids, _leaves_at(turn_id, origin))
    return new_branch_name(title, siblings, origin, turn)


def new_branch_label_from_store(
    store: SessionStore,
    source_id: str,
    turn_id: str | None,
    origin: BranchOrigin | None = None,
    *,
    cache: TargetsCache | None = None,
) -> tuple[BranchLabel | None, int | None]:
    """The label and fork turn of a new fork of ``source_id`` (its title is the caller's).

    For a caller that names the branch itself (the desktop, a server's
    client): the parent's fork targets give the turn, and only a regenerate,
    numbered among its siblings, reads the other manifests. ``(None, None)``
    for a source that cannot be read.
    """
    try:
        turn_ids = [
            target.turn_id for target in fork_targets(store, source_id, cache=cache).targets
        ]
    except BranchwiseError:
        return None, None
    siblings: list[Manifest] = []
    if origin is not None and origin.kind == "regenerate":
        siblings = [
            manifest
            for manifest in store.iter_manifests()
            if isinstance(manifest, Manifest)
            and manifest.parent is not None
            and manifest.parent.session_id == source_id
        ]
    return new_branch_label(origin, siblings), fork_turn_number(
        turn_ids, _leaves_at(turn_id, origin)
    )


def label_of(manifest: Manifest, siblings: Iterable[Manifest] = ()) -> BranchLabel | None:
    """A manifest's label: the stored one, else computed from its parent link.

    ``None`` for a root. A manifest written before labels has none stored:
    an edit or regenerate is known from its origin (a regenerate numbered
    among ``siblings``, its parent's other children, by creation time), a
    child is a sub-conversation, anything else a plain branch.
    """
    if manifest.label is not None:
        return manifest.label
    link = manifest.parent
    if link is None:
        return None
    if link.kind == "child":
        return child_label()
    if link.origin is None:
        return BranchLabel("fork")
    if link.origin.kind == "edit":
        return BranchLabel("edit", text=_label_prompt(link.origin.prompt))
    earlier = [
        sibling
        for sibling in siblings
        if sibling.session_id != manifest.session_id
        and (sibling.created_at, sibling.session_id) < (manifest.created_at, manifest.session_id)
    ]
    return new_branch_label(link.origin, earlier)


def label_in(index: LineageIndex, manifest: Manifest) -> BranchLabel | None:
    """:func:`label_of` ``manifest``, numbered among its siblings in ``index`` if it must be."""
    link = manifest.parent
    if manifest.label is not None or link is None:
        return label_of(manifest)
    return label_of(manifest, index.children(link.session_id))


BRANCHED_FROM = N_("Branched from turn {turn} of {parent} on {date}")
BRANCHED_AT_START = N_("Branched from the start of {parent} on {date}")
STARTED_FROM = N_("Started from turn {turn} of {parent} on {date}")


def branched_from(
    manifest: Manifest, parent_title: str, fork_turn_index: int | None, date: str
) -> str | None:
    """ "Branched from turn N of <parent> on <date>" in the active language (``None``: a root).

    ``date`` is already formatted for the language (Babel, by the caller),
    ``parent_title`` already shown (:func:`display_title`).
    """
    link = manifest.parent
    if link is None:
        return None
    if link.kind == "child" and fork_turn_index:
        shape = STARTED_FROM
    elif not fork_turn_index:
        shape = BRANCHED_AT_START
    else:
        shape = BRANCHED_FROM
    gettext = translator(None)
    return fill(gettext(shape), {"turn": fork_turn_index, "parent": parent_title, "date": date})


def render_label(
    label: BranchLabel | None, fork_turn_index: int | None, *, language: str | None = None
) -> str | None:
    """The words of a label in ``language`` (default: the active one); ``None`` for none.

    Rendered when shown, never stored, so a language switch re-renders it.
    """
    if label is None:
        return None
    gettext = translator(language)
    turn = fork_turn_index
    if label.kind == "given":
        return label.text or ""
    if label.kind == "edit":
        return fill(gettext(EDITED), {"prompt": label.text or ""})
    if label.kind == "regenerate":
        return fill(gettext(REGENERATED), {"n": label.number or 2})
    if label.kind == "imported":
        app = IMPORT_APPS.get(label.source or "", label.source or "")
        if label.source == "claude-code" and label.origin == "edit":
            return gettext(CLAUDE_CODE_REWIND)  # a prompt asked again there is a /rewind
        shape = {"edit": EDITED_IN, "regenerate": REGENERATED_IN}.get(label.origin or "", BRANCH_IN)
        return fill(gettext(shape), {"app": app})
    if label.kind == "model":
        if label.number is None:
            return label.text or ""
        return fill(gettext(MODEL_SAMPLE), {"model": label.text or "", "n": label.number})
    if label.kind == "child":
        if not turn:
            return gettext(CHILD)
        return fill(gettext(CHILD_OF_TURN), {"n": turn})
    prompt = label.text
    if turn is None:  # not known (an older manifest read where no log may be read)
        return fill(gettext(BRANCH_PROMPT), {"prompt": prompt}) if prompt else gettext(BRANCH)
    if turn == 0:
        if not prompt:
            return gettext(FROM_START)
        return fill(gettext(FROM_START_PROMPT), {"prompt": prompt})
    if prompt:
        return fill(gettext(FROM_TURN_PROMPT), {"n": turn, "prompt": prompt})
    return fill(gettext(FROM_TURN), {"n": turn})


def stored_fork_turn_index(store: SessionStore, manifest: Manifest) -> int | None:
    """A branch's fork turn: the stored one, else counted from its own log (older manifests).

    A fork's log holds its parent's turns up to its seed, so the turns closed
    by then are the ones it inherits: a plain branch leaves at the last of
    them, an edit or regenerate at the next. A child leaves at its parent's
    spawning turn. ``None`` for a root, and when the log cannot say.
    """
    if manifest.fork_turn_index is not None or manifest.parent is None:
        return manifest.fork_turn_index
    link = manifest.parent
    try:
        if link.kind == "child":
            targets = fork_targets(store, link.session_id).targets
            return fork_turn_number([t.turn_id for t in targets], link.turn_id)
        targets = fork_targets(store, manifest.session_id).targets
    except BranchwiseError:
        return None
    inherited = sum(
        1
        for target in targets
        if target.boundary_sequence is not None and target.boundary_sequence <= manifest.seed_length
    )
    return inherited + (1 if link.origin is not None else 0)


def label_json(
    label: BranchLabel | None, fork_turn_index: int | None, *, language: str | None = None
) -> dict[str, Any]:
    """``{"label", "labelParts", "forkTurnIndex"}``: the label's words, its structure
    (so a client re-renders it in its own language) and the fork turn; all ``None`` for a root."""
    return {
        "label": render_label(label, fork_turn_index, language=language),
        "labelParts": None if label is None else label.to_json(),
        "forkTurnIndex": fork_turn_index,
    }


class LabelReader:
    """Labels and fork turns of manifests of one store, for the views that print them.

    What a manifest older than labels lacks is computed once per reader: a
    regenerate's number among its siblings (from ``manifests`` when the
    caller has read them all, else from one pass over the store, only if such
    a manifest comes up) and its fork turn (from its log,
    :func:`stored_fork_turn_index`).
    """

    def __init__(self, store: SessionStore, manifests: Iterable[Manifest] | None = None) -> None:
        self._store = store
        self._children: dict[str, list[Manifest]] | None = None
        if manifests is not None:
            self._children = _children_of(manifests)

    def label(self, manifest: Manifest) -> BranchLabel | None:
        """:func:`label_of` ``manifest``, among its siblings when it needs them."""
        link = manifest.parent
        if manifest.label is not None or link is None or link.origin is None:
            return label_of(manifest)
        if link.origin.kind != "regenerate":
            return label_of(manifest)
        if self._children is None:
            self._children = _children_of(
                m for m in self._store.iter_manifests() if isinstance(m, Manifest)
            )
        return label_of(manifest, self._children.get(link.session_id, ()))

    def fields(self, manifest: Manifest, *, language: str | None = None) -> dict[str, Any]:
        """:func:`label_json` of ``manifest``: ``{"label", "labelParts", "forkTurnIndex"}``."""
        turn = stored_fork_turn_index(self._store, manifest)
        return label_json(self.label(manifest), turn, language=language)


def _children_of(manifests: Iterable[Manifest]) -> dict[str, list[Manifest]]:
    children: dict[str, list[Manifest]] = {}
    for manifest in manifests:
        if manifest.parent is not None:
            children.setdefault(manifest.parent.session_id, []).append(manifest)
    return children


def rename(
    store: SessionStore, session_id: str, *, title: str | None = None, label: str | None = None
) -> dict[str, Any]:
    """Give a conversation the title or label (or both) a person typed, under its writer lease.

    Both are checked before anything is written. The title is a
    ``session/title`` commit then the manifest; the label is the manifest's
    alone (:meth:`~branchwise.core.store.store.SessionWriter.set_label`).

    Returns:
        ``{"sessionId", "title", "label", "labelParts", "forkTurnIndex"}`` as stored.

    Raises:
        InvalidTitle, InvalidLabel: an empty or overlong title or label.
        LeaseHeld: another process is writing the conversation.
    """
    new_title = given_title(title) if title is not None else None
    new_label = given_branch_label(label) if label is not None else None
    with store.open_writer(validate_session_id(session_id)) as writer:
        if new_title is not None:
            writer.set_title(new_title)
        if new_label is not None:
            writer.set_label(new_label)
        manifest = writer.manifest
    return {
        "sessionId": manifest.session_id,
        "title": manifest.title,
        **LabelReader(store).fields(manifest),
    }
