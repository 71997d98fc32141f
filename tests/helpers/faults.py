"""A full disk, injected: the k-th space-taking system call fails with ``ENOSPC``.

:class:`DiskFullAt` stands in for the kernel running out of space, not for
any of our code. It counts every call that can need room — ``write``,
``fsync``, ``syncfs``, ``open`` with ``O_CREAT``, ``link``, ``mkdir``, ``rename``,
``replace`` — whether it goes through the log writer's ``FileOps`` seam or
straight to :mod:`os` (patched while the block runs), and fails the ``at``-th
one (and, if ``persistent``, every later one: the disk stays full). Calls that
free space (``unlink``, ``rmdir``, ``ftruncate``) always succeed, as on a
real full disk.

Sweep with it: for ``at`` = 1, 2, … run the operation until it no longer
fires; each run hits the fault at the next step of the operation.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from branchwise.core.fs import atomic
from branchwise.core.log.writer import OS_FILE_OPS

PATCHED = ("write", "fsync", "open", "link", "mkdir", "rename", "replace")


class DiskFullAt:
    """Fail the ``at``-th space-taking call with ``ENOSPC`` (also a ``FileOps``).

    Attributes:
        calls: space-taking calls counted so far (while armed).
        fired: the names of the calls that were failed, in order.
    """

    def __init__(self, at: int, *, persistent: bool = False, err: int = errno.ENOSPC) -> None:
        self.at, self.persistent, self.err = at, persistent, err
        self.calls = 0
        self.fired: list[str] = []
        self.armed = False

    def _check(self, name: str) -> None:
        if not self.armed:
            return
        self.calls += 1
        if self.calls == self.at or (self.persistent and self.calls > self.at):
            self.fired.append(name)
            raise OSError(self.err, os.strerror(self.err))

    # -- FileOps (the log writer's seam) -----------------------------------------

    def write(self, fd: int, data: bytes | memoryview) -> int:  # noqa: D102
        self._check("write")
        return OS_FILE_OPS.write(fd, data)

    def fsync(self, fd: int) -> None:  # noqa: D102
        self._check("fsync")
        OS_FILE_OPS.fsync(fd)

    def ftruncate(self, fd: int, length: int) -> None:  # noqa: D102
        OS_FILE_OPS.ftruncate(fd, length)

    # -- the os module ---------------------------------------------------------------

    def _wrap(self, name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        if name == "open":

            def open_(path: Any, flags: int, *args: Any, **kwargs: Any) -> Any:
                if flags & os.O_CREAT:
                    self._check("open")
                return real(path, flags, *args, **kwargs)

            return open_

        def call(*args: Any, **kwargs: Any) -> Any:
            self._check(name)
            return real(*args, **kwargs)

        return call

    @contextmanager
    def armed_in(self, monkeypatch: pytest.MonkeyPatch) -> Iterator[DiskFullAt]:
        """Count (and fail) calls only inside the block; :mod:`os` is restored after it."""
        with monkeypatch.context() as patch:
            for name in PATCHED:
                patch.setattr(os, name, self._wrap(name, getattr(os, name)))
            if atomic._SYNCFS is not None:  # the kernel's syncfs, called through ctypes
                patch.setattr(atomic, "_SYNCFS", self._wrap("syncfs", atomic._SYNCFS))
            self.armed = True
            try:
                yield self
            finally:
                self.armed = False
