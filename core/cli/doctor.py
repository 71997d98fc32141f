"""``branchwise doctor``: check an installation and a data folder, changing nothing.

Each check answers ok or not with one line of detail: the data folder (there,
private, writable), every session verified read-only (no writer is opened, no
torn tail cut, nothing moved aside), the language catalogs, the Qt platform
plugin (loaded in a child process, so a missing system library cannot take
the doctor down), the settings file and the model server it names. The report
is text for people, or ``{"ok", "checks"}`` with ``--json``; the exit status is
0 when every check passed and 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from branchwise.core.cli.display import (
    CJK_FONT_PACKAGES,
    cjk_font_count,
    display_problem,
    needs_cjk_font,
)
from branchwise.core.cli.output import print_json, printable
from branchwise.core.cli.version import branchwise_version
from branchwise.core.errors import BranchwiseError, ModelListUnavailable, ProviderError
from branchwise.core.i18n.language import load_translations
from branchwise.core.i18n.locales import SUPPORTED, choose_language, system_locale
from branchwise.core.providers.openai import OpenAIProvider
from branchwise.core.settings import (
    SETTINGS_FILE,
    Settings,
    resolve_api_key,
    validate_settings,
)
from branchwise.core.store.store import SessionStore, verify_session

QT_TIMEOUT = 60.0
"""Seconds the Qt probe may take (a first start of Qt can be slow on a cold disk)."""

_QT_PROBE = (
    "import sys\n"
    "from PySide6.QtGui import QGuiApplication\n"
    "app = QGuiApplication(sys.argv[:1])\n"
    "print(app.platformName())\n"
)


@dataclass(frozen=True, slots=True)
class Check:
    """The outcome of one check.

    Attributes:
        name: what was checked, e.g. ``data folder``.
        ok: whether it is fine.
        detail: one line saying what was found.
    """

    name: str
    ok: bool
    detail: str

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` shape."""
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


def register_top(sub: argparse._SubParsersAction) -> None:
    """Add the top-level ``doctor`` command."""
    doctor = sub.add_parser(
        "doctor", help="check the installation and the data folder (read-only); exit 0 or 1"
    )
    doctor.add_argument("--json", action="store_true", help='print {"ok", "checks"} instead')
    doctor.add_argument(
        "--timeout", type=float, default=3.0, help="seconds to wait for the model server"
    )
    # The data folder is checked as it is: opening a store would create it and fix its mode.
    doctor.set_defaults(func=cmd_doctor, opens_store=False)


def cmd_doctor(root: Path, args: argparse.Namespace) -> int:
    """Run every check on ``root``, print the report, and return the exit status."""
    checks = run_checks(root, timeout=args.timeout)
    ok = all(check.ok for check in checks)
    if args.json:
        print_json({"ok": ok, "checks": [check.to_json() for check in checks]})
    else:
        print(render_report(root, checks), flush=True)
    return 0 if ok else 1


def run_checks(root: Path, timeout: float = 3.0) -> list[Check]:
    """Every check, in report order; none of them writes anything."""
    settings_check, settings = check_settings(root)
    steps: list[tuple[str, Callable[[], Check]]] = [
        ("data folder", lambda: check_data_folder(root)),
        ("sessions", lambda: check_sessions(root)),
        ("language catalogs", check_catalogs),
        ("Qt platform", check_qt_platform),
        ("display", check_display),
        ("settings", lambda: settings_check),
        ("fonts", lambda: check_fonts(settings)),
        ("model server", lambda: check_model_server(settings, timeout)),
    ]
    checks = []
    for name, step in steps:
        try:
            checks.append(step())
        except Exception as exc:  # a check that breaks is a finding, not a doctor crash
            checks.append(Check(name, False, f"the check itself failed: {exc!r}"))
    return checks


def render_report(root: Path, checks: list[Check]) -> str:
    """The text report: one line per check, then the verdict."""
    width = max(len(check.name) for check in checks)
    lines = [f"Branchwise {branchwise_version()}, data folder {printable(str(root))}"]
    for check in checks:
        mark = "ok  " if check.ok else "FAIL"
        lines.append(f"  {mark}  {check.name.ljust(width)}  {check.detail}")
    problems = sum(not check.ok for check in checks)
    lines.append(
        "Everything looks fine."
        if not problems
        else f"{problems} problem{'s' if problems > 1 else ''} found."
    )
    return "\n".join(lines)


# -- the checks -----------------------------------------------------------------------------------


def check_data_folder(root: Path) -> Check:
    """The data root exists, is a folder only its owner can enter (0700), and is writable."""
    name = "data folder"
    try:
        info = root.lstat()
    except FileNotFoundError:
        return Check(name, False, "does not exist yet (the app or a command creates it)")
    except OSError as exc:
        return Check(name, False, f"cannot be read: {exc.strerror}")
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        return Check(name, False, "is not a folder")
    mode = stat.S_IMODE(info.st_mode)
    problems = []
    if mode & 0o077:
        problems.append(f"mode {mode:04o} lets other users in (chmod 700 fixes it)")
    if not os.access(root, os.W_OK | os.X_OK):
        problems.append("not writable")
    if problems:
        return Check(name, False, "; ".join(problems))
    return Check(name, True, f"mode {mode:04o}, writable")


def check_sessions(root: Path) -> Check:
    """Every session verified as ``session verify`` does, read-only; damaged ones named."""
    name = "sessions"
    folder = root / "sessions"
    if not folder.is_dir():
        return Check(name, True, "no sessions yet")
    store = SessionStore(root, prepare=False)  # verifying must not create or chmod anything
    count, damaged, torn = 0, [], 0
    with os.scandir(folder) as entries:
        names = sorted(e.name for e in entries if not e.name.startswith(".") and e.is_dir())
    for session in names:
        count += 1
        try:
            report = verify_session(store, session)
        except BranchwiseError as exc:
            damaged.append(f"{printable(session)} ({exc.code})")
            continue
        except OSError as exc:
            damaged.append(f"{printable(session)} ({exc.strerror or type(exc).__name__})")
            continue
        if not report["ok"]:
            codes = sorted({finding["code"] for finding in report["findings"]})
            damaged.append(f"{printable(session)} ({', '.join(codes)})")
        elif report["tornTail"]:
            torn += 1
    plural = "" if count == 1 else "s"
    detail = f"{count} session{plural}, {len(damaged)} damaged"
    if damaged:
        detail += ": " + ", ".join(damaged)
    if torn:
        detail += f"; {torn} with a torn last write (cut when next opened)"
    return Check(name, not damaged, detail)


def check_catalogs() -> Check:
    """Every supported language's catalog loads."""
    failed = []
    for code in SUPPORTED:
        try:
            load_translations(code)
        except Exception as exc:  # a broken .mo raises OSError, a broken .po Babel's errors
            failed.append(f"{code} ({exc})")
    if failed:
        return Check("language catalogs", False, "cannot load " + ", ".join(failed))
    return Check("language catalogs", True, ", ".join(SUPPORTED) + " load")


def check_qt_platform() -> Check:
    """Qt's platform plugin loads, tried in a child process with the platform the app would use."""
    name = "Qt platform"
    env = dict(os.environ)
    chosen = env.get("QT_QPA_PLATFORM")
    note = ""
    if (
        not chosen
        and sys.platform.startswith("linux")
        and not (env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"))
    ):
        env["QT_QPA_PLATFORM"] = "offscreen"
        note = " (no display: tried offscreen)"
    try:
        done = subprocess.run(
            [sys.executable, "-c", _QT_PROBE],
            env=env,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=QT_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        return Check(name, False, f"starting Qt took longer than {QT_TIMEOUT:g} s{note}")
    if done.returncode != 0:
        tail = [line.strip() for line in done.stderr.splitlines() if line.strip()][-3:]
        reason = " | ".join(tail) or f"exit status {done.returncode}"
        return Check(name, False, f"does not load{note}: {reason}")
    return Check(name, True, f"{done.stdout.strip() or 'default'} loads{note}")


def check_display(environ: dict[str, str] | None = None) -> Check:
    """A display to open the window on, found as the app looks for it before Qt starts."""
    environ = dict(os.environ) if environ is None else environ
    problem = display_problem(environ)
    if problem is not None:
        return Check("display", False, problem.message)
    chosen = environ.get("QT_QPA_PLATFORM") or ""
    where = environ.get("WAYLAND_DISPLAY") or environ.get("DISPLAY") or ""
    detail = f"{chosen}: no display needed" if chosen and not where else where or "available"
    return Check("display", True, detail)


def check_fonts(settings: Settings | None) -> Check:
    """A Chinese interface has a font with Chinese characters (else text shows as boxes)."""
    name = "fonts"
    saved = settings.language if settings is not None else None
    language = choose_language(None, saved, system_locale())[0]
    if not needs_cjk_font(language):
        return Check(name, True, f"interface language {language}: no Chinese font needed")
    count = cjk_font_count(language)
    if count is None:
        return Check(name, True, f"interface language {language}: fontconfig cannot be asked")
    if count == 0:
        return Check(
            name,
            False,
            f"interface language {language} but no Chinese font is installed, so text shows "
            f"as boxes: install {CJK_FONT_PACKAGES}",
        )
    return Check(name, True, f"interface language {language}: {count} Chinese fonts")


def check_settings(root: Path) -> tuple[Check, Settings | None]:
    """``settings.json`` is absent or usable; read only (a broken one is not moved aside here)."""
    name = "settings"
    path = root / SETTINGS_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return Check(name, True, "no settings file: defaults"), Settings()
    except OSError as exc:
        return Check(name, False, f"{SETTINGS_FILE} cannot be read: {exc.strerror}"), None
    try:
        settings = validate_settings(orjson.loads(raw))
    except orjson.JSONDecodeError:
        return Check(name, False, f"{SETTINGS_FILE} is not JSON"), None
    except BranchwiseError as exc:
        return Check(name, False, f"{SETTINGS_FILE}: {exc.code}: {exc.message}"), None
    return Check(name, True, f"{SETTINGS_FILE} is valid"), settings


def check_model_server(settings: Settings | None, timeout: float) -> Check:
    """The configured OpenAI-compatible server answers its model list within ``timeout``."""
    name = "model server"
    if settings is None:
        return Check(name, False, "not checked: the settings cannot be used")
    if not settings.configured:
        return Check(name, True, "offline demo responder, nothing to check")
    provider = OpenAIProvider(
        settings.base_url,
        settings.model,
        api_key=resolve_api_key(settings),
        connect_timeout=timeout,
        read_timeout=timeout,
    )
    try:
        models = asyncio.run(asyncio.wait_for(provider.list_models(), timeout * 2))
    except ModelListUnavailable:
        if settings.model:
            return Check(
                name, True, f"{settings.base_url} lists no models; using the typed {settings.model}"
            )
        return Check(
            name, False, f"{settings.base_url} lists no models: type a model name in Settings"
        )
    except ProviderError as exc:
        return Check(name, False, f"{settings.base_url}: {exc.code}: {exc.message}")
    except TimeoutError:
        return Check(name, False, f"{settings.base_url}: no answer within {timeout * 2:g} s")
    detail = f"{settings.base_url} answers with {len(models)} model{'s' * (len(models) != 1)}"
    if settings.model and models and settings.model not in models:
        detail += f" (not listing {settings.model})"
    return Check(name, True, detail)
