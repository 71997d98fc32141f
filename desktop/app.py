"""The desktop app: the QApplication, its qasync loop, start-up and shutdown.

Synchronous setup comes first (the application object, style, the data root
and its instance lock), then the async main runs on a qasync loop over the
QApplication (:func:`run_on_qt_loop`, which the screenshot script and the
desktop benchmark use too); :func:`report_loop_errors` turns an exception no
task handled into a notice.

Start-up lists manifests and nothing more (no conversation's log is read
until its tab opens), sweeps half-built session folders, picks the language
(``--lang``, else the saved setting, else the system's), shows the window,
and then resumes fork operations a crash left unfinished.

Tracebacks and Qt's warnings go to ``<root>/logs/branchwise.log``
(:mod:`~branchwise.desktop.logs`), not to stderr.

Closing the window stops running turns (each commits as ``cancelled``) and
releases every writer before the loop ends. ``BRANCHWISE_EXIT_AFTER_SHOW=1``
makes the app print one JSON line once the window is shown and close
itself: the smoke test and the start-up benchmark use it.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import orjson
import qasync
from PySide6.QtCore import QMessageLogContext, QTimer, QtMsgType, qInstallMessageHandler
from PySide6.QtWidgets import QApplication, QMessageBox

from branchwise.core.errors import BranchwiseError
from branchwise.core.fs.locks import InstanceLock
from branchwise.core.i18n.language import set_language
from branchwise.core.i18n.locales import choose_language, system_locale
from branchwise.core.i18n.reasons import error_text
from branchwise.core.store.store import SessionStore, default_data_root
from branchwise.desktop.host.first_run import FirstRun
from branchwise.desktop.host.host import Host
from branchwise.desktop.host.notices import Level, NoticeCenter
from branchwise.desktop.host.window_state import load_window_state
from branchwise.desktop.logs import install_log_file
from branchwise.desktop.widgets.qt_i18n import LanguageBridge
from branchwise.desktop.widgets.style import apply_style
from branchwise.desktop.widgets.window import MainWindow

EXIT_AFTER_SHOW = "BRANCHWISE_EXIT_AFTER_SHOW"


def data_root(args: argparse.Namespace) -> Path:
    """``--data-dir``, else ``$BRANCHWISE_HOME``, else the platform's data folder."""
    value = getattr(args, "data_dir", None)
    return Path(value) if value else default_data_root()


def run_app(args: argparse.Namespace) -> int:
    """Open the main window and run until it closes; returns the exit status."""
    started = time.perf_counter()
    app = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(app, QApplication)
    app.setApplicationName("Branchwise")
    app.setApplicationDisplayName("Branchwise")
    app.setDesktopFileName("branchwise")
    app.setQuitOnLastWindowClosed(False)  # the async main quits after shutting down
    apply_style(app)
    root = data_root(args)
    try:
        SessionStore(root)  # creates the data root (0700) before it is locked
        instance = InstanceLock(root)
    except BranchwiseError as exc:
        sys.stdout.buffer.write(orjson.dumps(exc.to_json()) + b"\n")
        sys.stdout.buffer.flush()
        if not os.environ.get(EXIT_AFTER_SHOW):
            set_language(choose_language(getattr(args, "lang", None), None, system_locale())[0])
            QMessageBox.warning(None, "Branchwise", error_text(exc))
        return 1
    log_file = install_log_file(root)
    previous_qt_handler = qInstallMessageHandler(_qt_message)
    try:
        return run_on_qt_loop(lambda: run_window(app, root, getattr(args, "lang", None), started))
    finally:
        qInstallMessageHandler(previous_qt_handler)
        log_file.uninstall()
        instance.release()


async def run_window(
    app: QApplication, root: Path, lang: str | None, started: float | None = None
) -> int:
    """The async main: build host and window, show it, wait for close, shut down."""
    notices = NoticeCenter()
    report_loop_errors(asyncio.get_running_loop(), notices)
    host = Host(root, notices=notices)
    code, language_notice = choose_language(lang, host.settings.language, system_locale())
    set_language(code)
    if language_notice is not None:
        notices.post(language_notice.code, Level.WARNING, value=language_notice.value)
    bridge = LanguageBridge(app)
    host.start()
    first_run = FirstRun(host)
    window = MainWindow(host, first_run=first_run)
    bridge.register(window)
    window.remote_servers.connect_saved()
    state = load_window_state(root)
    if state is not None:
        window.restore_state(state)
    closed = asyncio.Event()
    window.closed.connect(closed.set)
    app.aboutToQuit.connect(closed.set)
    window.show()
    if os.environ.get(EXIT_AFTER_SHOW):
        QTimer.singleShot(0, window, lambda: _report_shown(window, host, started))
    host.spawn(host.recover(), "resume branch operations")
    if not os.environ.get(EXIT_AFTER_SHOW):
        host.spawn(first_run.offer(), "look for a model server")
    await closed.wait()
    await host.shutdown()
    bridge.close()
    return 0


def _report_shown(window: MainWindow, host: Host, started: float | None) -> None:
    elapsed = time.perf_counter() - started if started is not None else None
    current = window.current_tab()
    line = {
        "shown": window.isVisible(),
        "sessions": len(host.index),
        "seconds": elapsed,
        "tabs": [tab.session_id for tab in window.conversation_tabs()],
        "current": current.session_id if current is not None else None,
        "notices": [notice.code for notice in host.notices.history],
    }
    sys.stdout.buffer.write(orjson.dumps(line) + b"\n")
    sys.stdout.buffer.flush()
    window.close()


log = logging.getLogger(__name__)
qt_log = logging.getLogger("branchwise.qt")

_QT_LEVELS = {
    QtMsgType.QtDebugMsg: logging.DEBUG,
    QtMsgType.QtInfoMsg: logging.INFO,
    QtMsgType.QtWarningMsg: logging.WARNING,
    QtMsgType.QtCriticalMsg: logging.ERROR,
    QtMsgType.QtFatalMsg: logging.CRITICAL,
}


def _qt_message(kind: QtMsgType, context: QMessageLogContext, message: str) -> None:
    """Qt's own warnings go to the log file with everything else, not to stderr."""
    qt_log.log(_QT_LEVELS.get(kind, logging.WARNING), "%s", message)


def run_on_qt_loop(main: Callable[[], Coroutine[Any, Any, int]]) -> int:
    """Run ``main()`` on a qasync loop over the existing QApplication; return its result."""
    with asyncio.Runner(loop_factory=qasync.QEventLoop) as runner:
        return runner.run(main())


def report_loop_errors(loop: asyncio.AbstractEventLoop, notices: NoticeCenter) -> None:
    """Log unhandled loop exceptions and post each as a notice."""

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        log.error("unhandled in event loop: %s", context.get("message"), exc_info=exc)
        detail = repr(exc) if exc is not None else str(context.get("message"))
        notices.post("internal_error", Level.ERROR, detail=detail)

    loop.set_exception_handler(handler)
