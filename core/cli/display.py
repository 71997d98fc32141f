"""Whether the desktop window can be shown here: a display, and a font for the language.

Both are checked without Qt, so the console script can refuse before Qt starts
and ``doctor`` can report them on a headless machine. With no display Qt
aborts the process (exit 134) naming a library that is not the problem; a
Chinese interface with no CJK font shows boxes. The display is read from the
environment the way Qt picks its platform plugin; the fonts are asked of
fontconfig itself (the library Qt's font database uses on Linux), which needs
no display.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Mapping

from branchwise.core.errors import NoDisplay

HEADLESS_PLATFORMS = frozenset(
    {"offscreen", "minimal", "minimalegl", "linuxfb", "eglfs", "vnc", "vkkhrdisplay"}
)
"""Qt platform plugins that draw without a display server."""

CJK_FONT_PACKAGES = "fonts-noto-cjk or fonts-wqy-microhei (Fedora: google-noto-sans-cjk-fonts)"
"""What to install for Chinese text, named by ``doctor`` and the README."""

_FONTCONFIG_LANGUAGE = {"zh_Hans": "zh-cn", "zh_Hant": "zh-tw"}
"""The interface languages that need a CJK font, as fontconfig spells them."""


def display_problem(environ: Mapping[str, str], platform: str = sys.platform) -> NoDisplay | None:
    """Why Qt would find no display to open a window on, or ``None`` when it can.

    Only Linux has the question: macOS and Windows always have a screen. A
    headless platform plugin (``QT_QPA_PLATFORM=offscreen``…) needs none;
    otherwise X11 needs ``DISPLAY`` and Wayland ``WAYLAND_DISPLAY``.
    """
    if not platform.startswith("linux"):
        return None
    chosen = environ.get("QT_QPA_PLATFORM", "").strip()
    plugin = chosen.split(";", 1)[0].split(":", 1)[0].strip()
    if plugin in HEADLESS_PLATFORMS:
        return None
    x11, wayland = bool(environ.get("DISPLAY")), bool(environ.get("WAYLAND_DISPLAY"))
    if plugin == "xcb" and x11 or plugin.startswith("wayland") and wayland:
        return None
    if not plugin and (x11 or wayland):
        return None
    return NoDisplay(
        "Branchwise cannot open its window: no display was found (DISPLAY and "
        "WAYLAND_DISPLAY are not set). Set DISPLAY (for example ssh -X) or use the "
        "command line (branchwise --help); for headless use set QT_QPA_PLATFORM=offscreen.",
        platform=plugin or "default",
    )


def needs_cjk_font(language: str) -> bool:
    """Whether the interface language ``language`` is written in Chinese characters."""
    return language in _FONTCONFIG_LANGUAGE


def cjk_font_count(language: str) -> int | None:
    """How many installed fonts fontconfig says cover ``language``; ``None`` if it cannot say.

    Uses ``libfontconfig`` through ``ctypes`` (``FcFontList`` with ``:lang=…``,
    what ``fc-list :lang=zh-cn`` does), so no display and no ``fc-list``
    command are needed; it honours ``FONTCONFIG_FILE`` like Qt does.
    """
    lang = _FONTCONFIG_LANGUAGE.get(language, language)
    try:
        fc = ctypes.CDLL("libfontconfig.so.1")
    except OSError:
        return None
    fc.FcInitLoadConfigAndFonts.restype = ctypes.c_void_p
    fc.FcNameParse.restype = ctypes.c_void_p
    fc.FcNameParse.argtypes = [ctypes.c_char_p]
    fc.FcObjectSetBuild.restype = ctypes.c_void_p
    fc.FcFontList.restype = ctypes.POINTER(ctypes.c_int)  # FcFontSet starts with int nfont
    fc.FcFontList.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    for name in ("FcFontSetDestroy", "FcObjectSetDestroy", "FcPatternDestroy", "FcConfigDestroy"):
        getattr(fc, name).argtypes = [ctypes.c_void_p]
    config = fc.FcInitLoadConfigAndFonts()
    if not config:
        return None
    pattern = fc.FcNameParse(f":lang={lang}".encode())
    objects = fc.FcObjectSetBuild(b"family", None)
    try:
        fonts = fc.FcFontList(config, pattern, objects)
        if not fonts:
            return None
        count = int(fonts[0])
        fc.FcFontSetDestroy(ctypes.cast(fonts, ctypes.c_void_p))
        return count
    finally:
        fc.FcObjectSetDestroy(objects)
        fc.FcPatternDestroy(pattern)
        fc.FcConfigDestroy(config)
