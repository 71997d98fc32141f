"""``manifest.json``: a session's identity, generation and lineage.

The manifest is small and replaced atomically, so listing sessions and
building the lineage tree never read a log.

Two formats (docs/storage.md, "Format 1 and format 2"): format 1 keeps the log in one
``events.log``; format 2 keeps it as segment files in a log folder, after the
*seeds* the manifest lists (hard links to an ancestor's segments, each read
only up to its ``end``). A session keeps the format its manifest names, so an
unmigrated session never gets a format-2 manifest an older build would refuse.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from branchwise.core.errors import (
    BranchwiseError,
    InvalidEvent,
    InvalidLabel,
    InvalidManifest,
    InvalidSessionId,
    InvalidTitle,
    ManifestMismatch,
    SessionNotFound,
    UnreadableManifest,
    UnsupportedFormat,
)
from branchwise.core.fs.atomic import atomic_write_bytes
from branchwise.core.fs.safe_open import read_no_follow
from branchwise.core.ids import validate_session_id
from branchwise.core.projection.attachments import AttachmentRef, attachments_of

MANIFEST_FORMAT = 2
"""The newest manifest format this build reads and writes (format 1 is still read and kept)."""
SEGMENTED = 2
"""The manifest format of a segmented log (``log/<C>-<S>.seg`` and seeds)."""
KINDS = ("root", "fork", "child")
DEFAULT_LOG_DIR = "log"
_LOG_DIR = re.compile(r"log(-g[0-9]{1,19})?")
_SEED_FILE = re.compile(r"seed-[0-9]{3,6}\.seg")


@dataclass(frozen=True, slots=True)
class Seed:
    """A segment inherited from an ancestor, read only up to a verified frame end.

    Attributes:
        file: its name in the log folder (``seed-NNN.seg``).
        first_commit: the commit number of its first frame.
        first_seq: the seq of its first event.
        end: byte offset just past the last inherited frame.
        end_commit: the commit number of that frame.
        last_crc: that frame's payload CRC32 (a seed must end exactly on it).
    """

    file: str
    first_commit: int
    first_seq: int
    end: int
    end_commit: int
    last_crc: int

    def to_json(self) -> dict[str, Any]:
        """The manifest's camelCase form."""
        return {
            "file": self.file,
            "firstCommit": self.first_commit,
            "firstSeq": self.first_seq,
            "end": self.end,
            "endCommit": self.end_commit,
            "lastCrc": self.last_crc,
        }

    @classmethod
    def from_json(cls, data: object) -> Seed:
        """Validate one seed entry.

        Raises:
            InvalidManifest: a malformed entry, or a file name that is not a seed's.
        """
        if not isinstance(data, dict):
            raise InvalidManifest("manifest seed entry is not an object")
        file = data.get("file")
        numbers = [data.get(k) for k in ("firstCommit", "firstSeq", "end", "endCommit", "lastCrc")]
        if not isinstance(file, str) or not _SEED_FILE.fullmatch(file):
            raise InvalidManifest("manifest seed entry names a bad file")
        values = [n for n in numbers if _is_int(n) and isinstance(n, int) and n >= 0]
        if len(values) != len(numbers) or values[0] < 1 or values[1] < 1:
            raise InvalidManifest("manifest seed entry has malformed numbers")
        first_commit, first_seq, end, end_commit, last_crc = values
        return cls(file, first_commit, first_seq, end, end_commit, last_crc)


ORIGIN_KINDS = ("edit", "regenerate", "fanout")


@dataclass(frozen=True, slots=True)
class BranchOrigin:
    """The turn a branch asks again, and how: an edited prompt or the same one regenerated.

    An edit or a regenerate of turn N branches at the end of turn N-1, so the
    fork point alone would file the branch under turn N-1; the origin says it
    belongs to turn N, and with what prompt, so the parent's "N branches"
    menu lists it there and says what differs without opening the branch.

    A fan-out (:mod:`~branchwise.core.conversation.fanout`) asks a *new*
    question of several models at the conversation's end: its branches carry
    kind ``fanout``, the turn they branch at (``""`` at the start) and that
    question, and are listed under that turn like plain branches.

    Attributes:
        kind: ``edit``, ``regenerate`` or ``fanout``.
        turn_id: the parent's turn N whose question is asked again (a fan-out's:
            the turn it branched at).
        prompt: the question the branch's first own turn asks (the edited text,
            or turn N's own prompt for a regenerate).
        attachments: the files that question carries (references: the bytes are shared).
    """

    kind: str
    turn_id: str
    prompt: str
    attachments: tuple[AttachmentRef, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """``{"kind", "turnId", "prompt"}`` (the manifest's and the reservation's form).

        ``attachments`` is added only when the question carries files, so an
        origin without any reads the same in older builds.
        """
        data: dict[str, Any] = {"kind": self.kind, "turnId": self.turn_id, "prompt": self.prompt}
        if self.attachments:
            data["attachments"] = [ref.to_json() for ref in self.attachments]
        return data

    @classmethod
    def from_json(cls, data: object) -> BranchOrigin | None:
        """The origin in ``data``, ``None`` for none.

        Raises:
            InvalidManifest: a malformed origin.
        """
        if data is None:
            return None
        if not isinstance(data, dict):
            raise InvalidManifest("branch origin is not an object")
        kind, turn, prompt = data.get("kind"), data.get("turnId"), data.get("prompt")
        if kind not in ORIGIN_KINDS or not isinstance(turn, str) or not isinstance(prompt, str):
            raise InvalidManifest("branch origin is malformed")
        try:
            attachments = attachments_of(data)
        except InvalidEvent:
            raise InvalidManifest("branch origin's attachments are malformed") from None
        return cls(kind, turn, prompt, attachments)


LABEL_KINDS = ("edit", "regenerate", "fork", "imported", "child", "model", "given")
"""How a branch came to be, as its label says it (rendered by ``core/conversation/names.py``)."""
MAX_LABEL = 80
"""The most characters a label a person gives may have (after white space is collapsed)."""


@dataclass(frozen=True, slots=True)
class BranchLabel:
    """What a branch's label says, as structure, so it renders in the language shown.

    The words are rendered at display time (``render_label`` in
    ``core/conversation/names.py``): a stored sentence would stay in the
    language it was made in after the user switched. Only a label the user
    typed (``given``) is kept as text.

    Attributes:
        kind: one of :data:`LABEL_KINDS`: ``edit`` (an edited prompt),
            ``regenerate`` (the same prompt asked again), ``fork`` (a plain
            branch), ``imported`` (another app's fork), ``child`` (a linked
            sub-conversation), ``model`` (a fan-out branch's model) or
            ``given`` (typed by the user).
        text: ``edit``: the new prompt; ``fork``: its first own prompt once it
            has one; ``child``: what spawned it; ``model``: the model's name;
            ``given``: the label itself.
        number: ``regenerate``: which answer to the turn it is (the original
            is 1, so the first regeneration is 2); ``model``: the sample number.
        source: ``imported``: the format it came from (``chatgpt``, ``claude-code``…).
        origin: ``imported``: ``edit`` or ``regenerate`` when the source's
            fork asked its parent's turn again, else ``None``.
    """

    kind: str
    text: str | None = None
    number: int | None = None
    source: str | None = None
    origin: str | None = None

    def to_json(self) -> dict[str, Any]:
        """``{"kind", ...}`` with only the fields it has (the manifest's form)."""
        data: dict[str, Any] = {"kind": self.kind}
        for key, value in (
            ("text", self.text),
            ("number", self.number),
            ("source", self.source),
            ("origin", self.origin),
        ):
            if value is not None:
                data[key] = value
        return data

    @classmethod
    def from_json(cls, data: object) -> BranchLabel | None:
        """The label in ``data``; ``None`` for none, and for one this build cannot read.

        An unknown kind (written by a newer build) is not an error: the label
        is then computed from the lineage as for a manifest without one.

        Raises:
            InvalidManifest: a label of a known kind with malformed fields.
        """
        if data is None:
            return None
        if not isinstance(data, dict):
            raise InvalidManifest("branch label is not an object")
        kind = data.get("kind")
        if kind not in LABEL_KINDS:
            return None
        text, number = data.get("text"), data.get("number")
        source, origin = data.get("source"), data.get("origin")
        if not all(v is None or isinstance(v, str) for v in (text, source)):
            raise InvalidManifest("branch label text or source is malformed")
        if not (number is None or (_is_int(number) and number >= 0)):
            raise InvalidManifest("branch label number is malformed")
        if not (origin is None or origin in ORIGIN_KINDS):
            raise InvalidManifest("branch label origin is malformed")
        if kind == "given" and not text:
            raise InvalidManifest("a given branch label has no text")
        return cls(kind, text, number, source, origin)


@dataclass(frozen=True, slots=True)
class ParentLink:
    """Where a fork or child session came from.

    Attributes:
        session_id: the parent session.
        kind: ``fork`` (inherits history) or ``child`` (linked, no history).
        turn_id: the parent's turn forked at (forks) or spawned from (children).
        boundary_sequence: the parent's seq the fork cut at (forks only).
        generation: the parent's generation the fork saw (forks only).
        origin: the parent's turn an edit or regenerate asks again (``None``: a plain branch).
    """

    session_id: str
    kind: str
    turn_id: str | None = None
    boundary_sequence: int | None = None
    generation: int | None = None
    origin: BranchOrigin | None = None

    def to_json(self) -> dict[str, Any]:
        """camelCase form for the manifest and the CLI (``origin`` only when there is one)."""
        data: dict[str, Any] = {
            "sessionId": self.session_id,
            "kind": self.kind,
            "turnId": self.turn_id,
            "boundarySequence": self.boundary_sequence,
            "generation": self.generation,
        }
        if self.origin is not None:
            data["origin"] = self.origin.to_json()
        return data


@dataclass(frozen=True, slots=True)
class Manifest:
    """The identity and lineage of one session.

    Attributes:
        session_id: the session's id (also its folder name).
        title: the display title.
        kind: ``root``, ``fork`` or ``child``.
        created_at: creation time (Unix seconds).
        generation: bumped whenever the session's log is replaced.
        parent: link to the parent, ``None`` for roots.
        root_session_id: the root of this session's lineage.
        seed_length: the boundary seq a fork inherited through (0 otherwise);
            ``usage`` events up to it were paid by the parent and are not counted.
        created_by_operation: the fork operation id that created it.
        format: 1 (``events.log``) or 2 (segmented, see :data:`SEGMENTED`).
        seed: the inherited segments of a format-2 session, in order.
        log_dir: the folder of a format-2 session's own segments (a replace
            writes a new one and points here at it).
        label: what the branch's label says (``None``: none stored; a
            manifest older than labels, whose label is computed on read).
        fork_turn_index: the 1-based number of the parent's turn the branch
            leaves at (``None``: not stored; 0: a fork at the start).
    """

    session_id: str
    title: str
    kind: str = "root"
    created_at: float = 0.0
    generation: int = 1
    parent: ParentLink | None = None
    root_session_id: str | None = None
    seed_length: int = 0
    created_by_operation: str | None = None
    format: int = 1
    seed: tuple[Seed, ...] = ()
    log_dir: str = DEFAULT_LOG_DIR
    label: BranchLabel | None = None
    fork_turn_index: int | None = None

    @property
    def segmented(self) -> bool:
        """Whether the log is segmented (format 2) rather than one ``events.log``."""
        return self.format >= SEGMENTED

    def reread(self, directory: Path) -> Manifest | None:
        """The session's manifest on disk now, ``None`` if it cannot be read.

        The log asks for it (:class:`~branchwise.core.log.segments.LogLayout`)
        when the ``events.log`` this manifest names vanished under a reader:
        a migration replaced it with segments and a newer manifest.
        """
        try:
            return load_manifest(directory)
        except BranchwiseError:
            return None

    def with_changes(self, **changes: Any) -> Manifest:
        """A copy with some fields replaced."""
        return dataclasses.replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        """The on-disk (and CLI) camelCase form."""
        data: dict[str, Any] = {
            "format": self.format,
            "sessionId": self.session_id,
            "title": self.title,
            "kind": self.kind,
            "createdAt": self.created_at,
            "generation": self.generation,
            "parent": self.parent.to_json() if self.parent else None,
            "rootSessionId": self.root_session_id or self.session_id,
            "seedLength": self.seed_length,
            "createdByOperation": self.created_by_operation,
        }
        if self.segmented:
            data["seed"] = [seed.to_json() for seed in self.seed]
            data["log"] = self.log_dir
        if self.label is not None:
            data["labelParts"] = self.label.to_json()
        if self.fork_turn_index is not None:
            data["forkTurnIndex"] = self.fork_turn_index
        return data

    @classmethod
    def from_json(cls, data: object) -> Manifest:
        """Validate and build a manifest from parsed JSON.

        Raises:
            UnsupportedFormat: a newer manifest format.
            InvalidManifest: anything malformed.
        """
        if not isinstance(data, dict):
            raise InvalidManifest("manifest is not a JSON object")
        fmt = data.get("format")
        if not isinstance(fmt, int) or isinstance(fmt, bool):
            raise InvalidManifest("manifest has no format number")
        if fmt > MANIFEST_FORMAT:
            raise UnsupportedFormat(f"manifest format {fmt} is newer than {MANIFEST_FORMAT}")
        if fmt < 1:
            raise InvalidManifest("manifest has no format number")
        try:
            session_id = validate_session_id(data.get("sessionId"))
            root = data.get("rootSessionId")
            root_id = validate_session_id(root) if root is not None else session_id
            parent = _parent_from_json(data.get("parent"))
        except InvalidSessionId as exc:
            raise InvalidManifest(f"manifest names a bad session id: {exc.message}") from exc
        title, kind = data.get("title"), data.get("kind", "root")
        created, generation = data.get("createdAt", 0.0), data.get("generation", 1)
        seed, op = data.get("seedLength", 0), data.get("createdByOperation")
        if not isinstance(title, str) or kind not in KINDS:
            raise InvalidManifest("manifest title or kind is malformed")
        if not _is_number(created) or not _is_int(generation) or generation < 1:
            raise InvalidManifest("manifest createdAt or generation is malformed")
        if not _is_int(seed) or seed < 0 or not (op is None or isinstance(op, str)):
            raise InvalidManifest("manifest seedLength or createdByOperation is malformed")
        label = BranchLabel.from_json(data.get("labelParts"))
        turn_index = data.get("forkTurnIndex")
        if not (turn_index is None or (_is_int(turn_index) and turn_index >= 0)):
            raise InvalidManifest("manifest forkTurnIndex is malformed")
        seeds: tuple[Seed, ...] = ()
        log_dir = DEFAULT_LOG_DIR
        if fmt >= SEGMENTED:
            raw_seeds, log_dir = data.get("seed", []), data.get("log", DEFAULT_LOG_DIR)
            if not isinstance(raw_seeds, list):
                raise InvalidManifest("manifest seed is not a list")
            seeds = tuple(Seed.from_json(item) for item in raw_seeds)
            if not isinstance(log_dir, str) or not _LOG_DIR.fullmatch(log_dir):
                raise InvalidManifest("manifest names a bad log folder")
        return cls(
            session_id=session_id,
            title=title,
            kind=kind,
            created_at=float(created),
            generation=generation,
            parent=parent,
            root_session_id=root_id,
            seed_length=seed,
            created_by_operation=op,
            format=fmt,
            seed=seeds,
            log_dir=log_dir,
            label=label,
            fork_turn_index=turn_index,
        )


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _parent_from_json(data: object) -> ParentLink | None:
    if data is None:
        return None
    if not isinstance(data, dict) or data.get("kind") not in ("fork", "child"):
        raise InvalidManifest("manifest parent link is malformed")
    turn, boundary, gen = data.get("turnId"), data.get("boundarySequence"), data.get("generation")
    if not (turn is None or isinstance(turn, str)):
        raise InvalidManifest("manifest parent turnId is malformed")
    if not (boundary is None or _is_int(boundary)) or not (gen is None or _is_int(gen)):
        raise InvalidManifest("manifest parent boundary or generation is malformed")
    return ParentLink(
        session_id=validate_session_id(data.get("sessionId")),
        kind=data["kind"],
        turn_id=turn,
        boundary_sequence=boundary,
        generation=gen,
        origin=BranchOrigin.from_json(data.get("origin")),
    )


def parse_manifest(raw: bytes) -> Manifest:
    """Parse manifest bytes; only typed errors escape."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidManifest(f"manifest is not valid JSON: {exc}") from exc
    return Manifest.from_json(data)


def load_manifest(session_dir: Path) -> Manifest:
    """Read the manifest in ``session_dir``; its ``sessionId`` must be the folder's name.

    A copy of a session folder (a backup made beside it) carries the
    original's manifest: it is refused as ``ManifestMismatch`` rather than
    being listed, written or forked under the original's id.

    Raises:
        SessionNotFound: no ``manifest.json``.
        UnsafePath: ``manifest.json`` is a symbolic link.
        UnreadableManifest: it cannot be read (a folder, no permission).
        InvalidManifest, UnsupportedFormat: see :meth:`Manifest.from_json`.
        ManifestMismatch: it names another session than its folder.
    """
    name = session_dir.name
    try:
        raw = read_no_follow(session_dir / "manifest.json")
    except FileNotFoundError as exc:
        raise SessionNotFound(f"no session in {name}", sessionId=name) from exc
    except OSError as exc:
        raise UnreadableManifest(
            f"the manifest of {name} cannot be read: {exc.strerror or exc}",
            sessionId=name,
            errno=exc.errno,
        ) from exc
    manifest = parse_manifest(raw)
    if manifest.session_id != name:
        raise ManifestMismatch(
            f"the folder {name} holds the manifest of session {manifest.session_id} "
            "(a copy?); it is not used",
            sessionId=name,
            manifestSessionId=manifest.session_id,
        )
    return manifest


def manifest_bytes(manifest: Manifest) -> bytes:
    """The bytes of ``manifest.json`` for ``manifest`` (as :func:`save_manifest` writes them)."""
    return orjson.dumps(manifest.to_json(), option=orjson.OPT_INDENT_2)


def save_manifest(session_dir: Path, manifest: Manifest) -> None:
    """Atomically replace the manifest in ``session_dir``."""
    atomic_write_bytes(session_dir / "manifest.json", manifest_bytes(manifest))


MAX_TITLE = 200
"""The most characters a title a person gives may have (after white space is collapsed)."""


def given_title(title: str) -> str:
    """A title as a person typed it, made one line (runs of white space become one space).

    The desktop's Rename and ``serve``'s rename route both use it, so a title
    is refused the same way wherever it is given.

    Raises:
        InvalidTitle: empty after that, or over :data:`MAX_TITLE` characters.
    """
    cleaned = " ".join(title.split())
    if not cleaned or len(cleaned) > MAX_TITLE:
        raise InvalidTitle(f"a title must have 1 to {MAX_TITLE} characters", maxLength=MAX_TITLE)
    return cleaned


def given_label(label: str) -> str:
    """A label as a person typed it, made one line (as :func:`given_title` does a title).

    Raises:
        InvalidLabel: empty after that, or over :data:`MAX_LABEL` characters.
    """
    cleaned = " ".join(label.split())
    if not cleaned or len(cleaned) > MAX_LABEL:
        raise InvalidLabel(f"a label must have 1 to {MAX_LABEL} characters", maxLength=MAX_LABEL)
    return cleaned
