"""Running asyncio on Qt's event loop (qasync), in one place.

The turn runner, fork requests and the UI share one thread and one loop:
``asyncio.Runner(loop_factory=qasync.QEventLoop)`` on Python 3.11 (3.12's
``asyncio.run(..., loop_factory=)`` does the same). The app's async main
waits for ``aboutToQuit``; loop exceptions nobody awaited are logged and,
when a host is given, posted as notices so they are never swallowed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

import qasync
from PySide6.QtCore import QCoreApplication

from .notices import Level, NoticeCenter

log = logging.getLogger(__name__)


def run_on_qt_loop(main: Callable[[], Coroutine[Any, Any, int]]) -> int:
    """Run ``main()`` on a qasync loop over the existing QApplication; return its result."""
    with asyncio.Runner(loop_factory=qasync.QEventLoop) as runner:
        return runner.run(main())


async def until_quit(app: QCoreApplication) -> None:
    """Wait until the application is about to quit (last window closed, Quit)."""
    quitting = asyncio.Event()
    app.aboutToQuit.connect(quitting.set)
    await quitting.wait()


def report_loop_errors(loop: asyncio.AbstractEventLoop, notices: NoticeCenter) -> None:
    """Log unhandled loop exceptions and post each as a notice."""

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        log.error("unhandled in event loop: %s", context.get("message"), exc_info=exc)
        detail = repr(exc) if exc is not None else str(context.get("message"))
        notices.post("internal_error", Level.ERROR, detail=detail)

    loop.set_exception_handler(handler)
