"""The system libraries Qt needs on Linux, checked before Qt is loaded.

PySide6's wheels bundle Qt but not the system libraries under it: OpenGL,
fontconfig, xkbcommon, D-Bus for Qt's GUI module, and the X11 helper
libraries (``libxcb-cursor0``, ``libxcb-icccm4``, …) for its xcb platform
plugin. Without the first kind, importing PySide6 fails with a traceback;
without the second, Qt aborts the process (exit 134) with a message that
names one library, not always the missing one. Neither tells a person what
to install.

So before the window is opened, :func:`check_display_libraries` asks the
dynamic loader for each library by its soname (``ctypes.CDLL``, which is
``dlopen``) — the libraries Qt is about to load itself, so when they are all
there the check costs next to nothing — and raises
:class:`~branchwise.core.errors.QtLibrariesMissing` naming every missing one
with its Debian/Ubuntu and Fedora package and the one command that installs
them. Qt itself is not loaded here: this module is imported by the Qt-free
console script.

The table is the union of what the installed ``libqxcb.so``, ``libQt6Gui``
and the PySide6 modules need beyond the C and C++ runtimes; a test compares
it with ``ldd`` on the installed plugin, so a PySide6 upgrade that needs a new
library fails a test instead of a user's first start.
"""

from __future__ import annotations

import ctypes
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from branchwise.core.errors import QtLibrariesMissing


@dataclass(frozen=True, slots=True)
class SystemLibrary:
    """A shared library Qt loads from the system, and the packages that install it.

    Attributes:
        soname: the name the dynamic loader looks for (``libxcb-cursor.so.0``).
        debian: the Debian/Ubuntu package (``apt-get install``).
        fedora: the Fedora package (``dnf install``).
        xcb_only: needed by the xcb platform plugin only, not by importing Qt.
    """

    soname: str
    debian: str
    fedora: str
    xcb_only: bool = False


LIBRARIES: tuple[SystemLibrary, ...] = (
    # Importing PySide6's GUI modules (libQt6Gui, libQt6DBus) needs these on any platform.
    SystemLibrary("libGL.so.1", "libgl1", "libglvnd-glx"),
    SystemLibrary("libGLX.so.0", "libglx0", "libglvnd-glx"),
    SystemLibrary("libGLdispatch.so.0", "libglvnd0", "libglvnd"),
    SystemLibrary("libEGL.so.1", "libegl1", "libglvnd-egl"),
    SystemLibrary("libxkbcommon.so.0", "libxkbcommon0", "libxkbcommon"),
    SystemLibrary("libfontconfig.so.1", "libfontconfig1", "fontconfig"),
    SystemLibrary("libfreetype.so.6", "libfreetype6", "freetype"),
    SystemLibrary("libglib-2.0.so.0", "libglib2.0-0", "glib2"),
    SystemLibrary("libgthread-2.0.so.0", "libglib2.0-0", "glib2"),
    SystemLibrary("libdbus-1.so.3", "libdbus-1-3", "dbus-libs"),
    SystemLibrary("libX11.so.6", "libx11-6", "libX11"),
    SystemLibrary("libxcb.so.1", "libxcb1", "libxcb"),
    SystemLibrary("libz.so.1", "zlib1g", "zlib"),
    SystemLibrary("libzstd.so.1", "libzstd1", "libzstd"),
    # The xcb platform plugin (libqxcb.so and libQt6XcbQpa) needs these too.
    SystemLibrary("libX11-xcb.so.1", "libx11-xcb1", "libX11-xcb", xcb_only=True),
    SystemLibrary("libxkbcommon-x11.so.0", "libxkbcommon-x11-0", "libxkbcommon-x11", True),
    SystemLibrary("libxcb-cursor.so.0", "libxcb-cursor0", "xcb-util-cursor", xcb_only=True),
    SystemLibrary("libxcb-icccm.so.4", "libxcb-icccm4", "xcb-util-wm", xcb_only=True),
    SystemLibrary("libxcb-image.so.0", "libxcb-image0", "xcb-util-image", xcb_only=True),
    SystemLibrary("libxcb-keysyms.so.1", "libxcb-keysyms1", "xcb-util-keysyms", xcb_only=True),
    SystemLibrary("libxcb-render-util.so.0", "libxcb-render-util0", "xcb-util-renderutil", True),
    SystemLibrary("libxcb-util.so.1", "libxcb-util1", "xcb-util", xcb_only=True),
    SystemLibrary("libxcb-randr.so.0", "libxcb-randr0", "libxcb", xcb_only=True),
    SystemLibrary("libxcb-render.so.0", "libxcb-render0", "libxcb", xcb_only=True),
    SystemLibrary("libxcb-shape.so.0", "libxcb-shape0", "libxcb", xcb_only=True),
    SystemLibrary("libxcb-shm.so.0", "libxcb-shm0", "libxcb", xcb_only=True),
    SystemLibrary("libxcb-sync.so.1", "libxcb-sync1", "libxcb", xcb_only=True),
    SystemLibrary("libxcb-xfixes.so.0", "libxcb-xfixes0", "libxcb", xcb_only=True),
    SystemLibrary("libxcb-xkb.so.1", "libxcb-xkb1", "libxcb", xcb_only=True),
)
"""Every system library checked, in the order it is reported."""

BY_SONAME: Mapping[str, SystemLibrary] = {library.soname: library for library in LIBRARIES}

#: What ``dlopen`` says when a library (the one asked for, or one it needs) is not found.
_NOT_FOUND = re.compile(r"([^\s:/]+\.so[.\d]*): cannot open shared object file")

Loader = Callable[[str], object]


def dlopen(soname: str) -> object:
    """Load a shared library by soname, as Qt's own loading will (``OSError`` if it cannot)."""
    return ctypes.CDLL(soname)


def uses_xcb(environ: Mapping[str, str], platform: str = sys.platform) -> bool:
    """Whether Qt will load its xcb (X11) platform plugin first.

    ``QT_QPA_PLATFORM`` decides when it is set (its first entry; ``xcb:opts``
    counts). Unset, Qt picks Wayland on a Wayland session and xcb otherwise.
    """
    if not platform.startswith("linux"):
        return False
    chosen = environ.get("QT_QPA_PLATFORM", "").strip()
    if chosen:
        return chosen.split(";", 1)[0].split(":", 1)[0].strip() == "xcb"
    wayland = environ.get("XDG_SESSION_TYPE") == "wayland" and environ.get("WAYLAND_DISPLAY")
    return not wayland


def missing_libraries(
    libraries: Iterable[SystemLibrary], load: Loader | None = None
) -> tuple[SystemLibrary, ...]:
    """The libraries of ``libraries`` the dynamic loader cannot find, in table order.

    Each is loaded by soname. A failure that names another library (one the
    asked library needs) reports that one when the table knows it, else the
    asked one; a library that is found but cannot be loaded counts as
    missing too (reinstalling it is the fix).
    """
    load = load or dlopen
    missing: dict[str, SystemLibrary] = {}
    for library in libraries:
        try:
            load(library.soname)
        except OSError as exc:
            named = _NOT_FOUND.search(str(exc))
            culprit = BY_SONAME.get(named.group(1), library) if named else library
            missing.setdefault(culprit.soname, culprit)
    order = {library.soname: n for n, library in enumerate(LIBRARIES)}
    return tuple(sorted(missing.values(), key=lambda lib: order.get(lib.soname, len(order))))


def needed_libraries(
    environ: Mapping[str, str], platform: str = sys.platform
) -> tuple[SystemLibrary, ...]:
    """The libraries the window needs before Qt starts: none off Linux, xcb's only for xcb."""
    if not platform.startswith("linux"):
        return ()
    xcb = uses_xcb(environ, platform)
    return tuple(library for library in LIBRARIES if xcb or not library.xcb_only)


def install_commands(libraries: Iterable[SystemLibrary]) -> tuple[str, str]:
    """The Debian/Ubuntu and the Fedora command that install ``libraries``' packages."""
    chosen = list(libraries)
    debian = " ".join(dict.fromkeys(library.debian for library in chosen))
    fedora = " ".join(dict.fromkeys(library.fedora for library in chosen))
    return f"sudo apt-get install -y {debian}", f"sudo dnf install -y {fedora}"


def missing_error(libraries: Iterable[SystemLibrary]) -> QtLibrariesMissing:
    """The typed error naming ``libraries``, their packages and the commands that install them."""
    chosen = tuple(libraries)
    apt, dnf = install_commands(chosen)
    names = ", ".join(library.soname for library in chosen)
    packages = ", ".join(dict.fromkeys(library.debian for library in chosen))
    return QtLibrariesMissing(
        f"Qt cannot start: these system libraries are missing: {names}. "
        f"On Debian or Ubuntu: {apt}. On Fedora: {dnf}.",
        libraries=names,
        packages=packages,
        apt=apt,
        dnf=dnf,
    )


def check_display_libraries(
    environ: Mapping[str, str], platform: str = sys.platform, load: Loader | None = None
) -> None:
    """Make sure Qt can start on this machine before it is imported.

    Raises:
        QtLibrariesMissing: a library the window needs is missing.
    """
    missing = missing_libraries(needed_libraries(environ, platform), load)
    if missing:
        raise missing_error(missing)
