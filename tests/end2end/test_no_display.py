"""Starting the window where there is no display, and a Chinese interface with no Chinese font.

Real ``branchwise`` processes with a scrubbed environment: no ``DISPLAY``, no
``WAYLAND_DISPLAY``, no offscreen platform. Before the fix Qt aborted the
process (exit 134) with a message about the xcb plugin, and ``doctor`` said
"Everything looks fine". The font check runs fontconfig on a configuration
(``FONTCONFIG_FILE``) whose only font folder is empty, as on a fresh server.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from helpers.cli import cli_command

from branchwise.core.settings import Settings, save_settings

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="X11/Wayland only")

SCRUBBED = ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM", "XDG_SESSION_TYPE")


def _no_display_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
    env.update(extra)
    return env


def _start_window(root: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "branchwise.desktop.entry", "--data-dir", str(root), "--lang", "en"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "BRANCHWISE_EXIT_AFTER_SHOW": "1"},
        check=False,
    )


@pytest.mark.parametrize("platform", ["", "xcb", "wayland"])
def test_no_display_is_said_plainly_and_exits_1(tmp_path: Path, platform: str) -> None:
    root = tmp_path / "data"
    env = _no_display_env(**({"QT_QPA_PLATFORM": platform} if platform else {}))
    done = _start_window(root, env)
    assert done.returncode == 1, (done.returncode, done.stderr)
    assert "no display was found" in done.stderr
    assert "DISPLAY" in done.stderr and "QT_QPA_PLATFORM=offscreen" in done.stderr
    assert "branchwise --help" in done.stderr
    assert "Traceback" not in done.stderr and "qt.qpa" not in done.stderr
    assert not root.exists()  # refused before anything was written


def test_an_offscreen_platform_needs_no_display(tmp_path: Path) -> None:
    done = _start_window(tmp_path / "data", _no_display_env(QT_QPA_PLATFORM="offscreen"))
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout.splitlines()[-1])["shown"] is True


def _doctor(root: Path, env: dict[str, str]) -> dict[str, dict]:
    done = subprocess.run(
        [*cli_command(root), "doctor", "--json", "--timeout", "1"],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    report = orjson.loads(done.stdout)
    assert report["ok"] is (done.returncode == 0)
    return {check["name"]: check for check in report["checks"]}


def test_doctor_reports_no_display(tmp_path: Path) -> None:
    checks = _doctor(tmp_path / "root", _no_display_env())
    assert not checks["display"]["ok"]
    assert "no display was found" in checks["display"]["detail"]
    checks = _doctor(tmp_path / "root", _no_display_env(QT_QPA_PLATFORM="offscreen"))
    assert checks["display"]["ok"], checks["display"]


def _fontconfig_without_fonts(tmp_path: Path) -> dict[str, str]:
    fonts, cache = tmp_path / "fonts", tmp_path / "font-cache"
    fonts.mkdir()
    conf = tmp_path / "fonts.conf"
    conf.write_text(
        f'<?xml version="1.0"?>\n<fontconfig><dir>{fonts}</dir>'
        f"<cachedir>{cache}</cachedir></fontconfig>\n",
        encoding="utf-8",
    )
    return _no_display_env(QT_QPA_PLATFORM="offscreen", FONTCONFIG_FILE=str(conf))


def test_doctor_names_the_font_package_for_a_chinese_interface_without_one(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    save_settings(root, Settings(language="zh_Hans"))
    checks = _doctor(root, _fontconfig_without_fonts(tmp_path))
    assert not checks["fonts"]["ok"]
    assert "fonts-noto-cjk" in checks["fonts"]["detail"]
    assert "fonts-wqy-microhei" in checks["fonts"]["detail"]


def test_doctor_needs_no_chinese_font_for_an_english_interface(tmp_path: Path) -> None:
    root = tmp_path / "root"
    save_settings(root, Settings(language="en"))
    checks = _doctor(root, _fontconfig_without_fonts(tmp_path))
    assert checks["fonts"]["ok"], checks["fonts"]
