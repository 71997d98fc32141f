"""Which importer reads which export: the registry and auto-detection.

:data:`IMPORTERS` maps each ``--format`` name to its importer module (each
exposes ``FORMAT``, ``sniff(path)`` and ``read(path)``, see
:mod:`~branchwise.core.importing.source`). Detection asks each importer's
cheap ``sniff`` in registry order and takes the first that says yes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Protocol, cast

from branchwise.core.errors import ImportNotFound, UnknownImportFormat
from branchwise.core.importing import chatgpt, claude_code, librechat, open_webui
from branchwise.core.importing.source import SourceRecord


class Importer(Protocol):
    """What every importer module offers."""

    FORMAT: str

    def sniff(self, path: Path) -> bool:
        """A cheap look: does ``path`` hold this format?"""

    def read(self, path: Path) -> Iterator[SourceRecord]:
        """Stream the source's trees (and skips, warnings, progress)."""


IMPORTERS: dict[str, ModuleType] = {
    chatgpt.FORMAT: chatgpt,
    claude_code.FORMAT: claude_code,
    open_webui.FORMAT: open_webui,
    librechat.FORMAT: librechat,
}


def importer_for(path: Path, format: str | None = None) -> Importer:
    """The importer for ``path``: the one ``format`` names, else :func:`detect`'s.

    Raises:
        ImportNotFound: ``path`` does not exist.
        UnknownImportFormat: ``format`` names no importer, or none recognises ``path``.
    """
    if not path.exists():
        raise ImportNotFound(f"{path} does not exist", path=str(path))
    names = sorted(IMPORTERS)
    if format is not None:
        module = IMPORTERS.get(format)
        if module is None:
            raise UnknownImportFormat(f"no importer for {format!r}", formats=names)
        return cast(Importer, module)
    return detect(path)


def detect(path: Path) -> Importer:
    """The first importer whose ``sniff`` recognises ``path``.

    Raises:
        UnknownImportFormat: none does.
    """
    for module in IMPORTERS.values():
        if module.sniff(path):
            return cast(Importer, module)
    raise UnknownImportFormat(
        f"{path} is not an export of a known format", formats=sorted(IMPORTERS)
    )
