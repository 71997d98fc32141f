"""The desktop app's log file: tracebacks go to ``<root>/logs/branchwise.log``, not stderr.

A desktop app has no terminal its user reads; a traceback on stderr is lost
at best and alarming at worst. Every record of the ``logging`` tree, every
exception nothing caught (main thread, other threads, ``__del__``), and what
Qt itself warns about (routed here by :mod:`~branchwise.desktop.app`) are
written to a small rotating file (1 MiB, three old files kept, mode 0600:
it may quote a server's error text). An uncaught exception still leaves one
line on stderr naming the file, so a crash from a terminal is not silent.

Qt-free, so the host tests can install it too.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from logging.handlers import RotatingFileHandler
from pathlib import Path
from types import TracebackType

LOG_FOLDER = "logs"
LOG_FILE = "branchwise.log"
MAX_BYTES = 1 << 20
BACKUPS = 3

log = logging.getLogger("branchwise")


@dataclass(frozen=True, slots=True)
class LogFile:
    """An installed log file.

    Attributes:
        path: where records go.
        uninstall: restores the hooks and handlers that were there before.
    """

    path: Path
    uninstall: Callable[[], None]


def install_log_file(root: Path, *, level: int = logging.INFO) -> LogFile:
    """Send logging records and uncaught exceptions to ``<root>/logs/branchwise.log``."""
    folder = root / LOG_FOLDER
    folder.mkdir(mode=0o700, exist_ok=True)
    path = folder / LOG_FILE
    path.touch(mode=0o600, exist_ok=True)
    os.chmod(path, 0o600)
    handler = RotatingFileHandler(path, maxBytes=MAX_BYTES, backupCount=BACKUPS, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    top = logging.getLogger()
    previous_level = top.level
    top.addHandler(handler)
    top.setLevel(level)
    previous = (sys.excepthook, threading.excepthook, sys.unraisablehook)

    def uncaught(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        if issubclass(kind, KeyboardInterrupt):
            previous[0](kind, value, tb)
            return
        log.critical("uncaught exception", exc_info=(kind, value, tb))
        print(f"Branchwise: internal error ({kind.__name__}); details in {path}", file=sys.stderr)

    def uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is SystemExit:
            return
        name = args.thread.name if args.thread is not None else "?"
        log.error(
            "uncaught exception in thread %s",
            name,
            exc_info=(args.exc_type, args.exc_value or args.exc_type(), args.exc_traceback),
        )

    def unraisable(args: sys.UnraisableHookArgs) -> None:
        value = args.exc_value or args.exc_type()
        log.error(
            "%s: %r",
            args.err_msg or "exception ignored",
            args.object,
            exc_info=(args.exc_type, value, args.exc_traceback),
        )

    sys.excepthook = uncaught
    threading.excepthook = uncaught_in_thread
    sys.unraisablehook = unraisable

    def uninstall() -> None:
        sys.excepthook, threading.excepthook, sys.unraisablehook = previous
        top.removeHandler(handler)
        top.setLevel(previous_level)
        handler.close()

    return LogFile(path, uninstall)
