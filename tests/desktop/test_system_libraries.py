"""The system libraries Qt needs: which are checked, how a missing one is named and installed."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO_ROOT

from branchwise.desktop.system_libraries import (
    BY_SONAME,
    LIBRARIES,
    install_commands,
    missing_error,
    missing_libraries,
    needed_libraries,
    uses_xcb,
)

CURSOR = BY_SONAME["libxcb-cursor.so.0"]


def not_found(*sonames: str, because: dict[str, str] | None = None) -> object:
    """A loader that cannot find ``sonames`` (or, per ``because``, a library they need)."""

    def load(soname: str) -> object:
        missing = (because or {}).get(soname, soname if soname in sonames else None)
        if missing is not None:
            raise OSError(f"{missing}: cannot open shared object file: No such file or directory")
        return object()

    return load


@pytest.mark.parametrize(
    ("environ", "platform", "expected"),
    [
        ({"DISPLAY": ":0"}, "linux", True),
        ({}, "linux", True),  # no display: Qt still tries xcb (and says so after this check)
        ({"QT_QPA_PLATFORM": "xcb"}, "linux", True),
        ({"QT_QPA_PLATFORM": "xcb:nomitshm"}, "linux", True),
        ({"QT_QPA_PLATFORM": "offscreen", "DISPLAY": ":0"}, "linux", False),
        ({"QT_QPA_PLATFORM": "wayland;xcb"}, "linux", False),
        ({"XDG_SESSION_TYPE": "wayland", "WAYLAND_DISPLAY": "wayland-0"}, "linux", False),
        ({"XDG_SESSION_TYPE": "wayland", "DISPLAY": ":0"}, "linux", True),  # no compositor
        ({"DISPLAY": ":0"}, "darwin", False),
        ({"DISPLAY": ":0"}, "win32", False),
    ],
)
def test_xcb_is_expected_where_qt_would_load_it(
    environ: dict[str, str], platform: str, expected: bool
) -> None:
    assert uses_xcb(environ, platform) is expected


def test_the_xcb_helpers_are_checked_only_when_xcb_loads() -> None:
    on_x11 = needed_libraries({"DISPLAY": ":0"}, "linux")
    offscreen = needed_libraries({"QT_QPA_PLATFORM": "offscreen"}, "linux")
    assert CURSOR in on_x11 and CURSOR not in offscreen
    assert BY_SONAME["libEGL.so.1"] in offscreen  # importing QtGui needs it anywhere
    assert needed_libraries({"DISPLAY": ":0"}, "darwin") == ()


def test_a_missing_library_is_named_with_its_package_and_install_commands() -> None:
    missing = missing_libraries(LIBRARIES, not_found("libxcb-cursor.so.0"))
    assert missing == (CURSOR,)
    error = missing_error(missing)
    assert error.code == "qt_libraries_missing" and error.definitive
    assert error.details == {
        "libraries": "libxcb-cursor.so.0",
        "packages": "libxcb-cursor0",
        "apt": "sudo apt-get install -y libxcb-cursor0",
        "dnf": "sudo dnf install -y xcb-util-cursor",
    }


def test_a_library_missing_under_another_one_is_named_itself() -> None:
    # libxcb-cursor is there, but the libxcb-image it needs is not: dlopen names the latter.
    load = not_found("libxcb-image.so.0", because={"libxcb-cursor.so.0": "libxcb-image.so.0"})
    assert missing_libraries(LIBRARIES, load) == (BY_SONAME["libxcb-image.so.0"],)


def test_a_library_that_is_found_but_does_not_load_counts_as_missing() -> None:
    def load(soname: str) -> object:
        if soname == "libEGL.so.1":
            raise OSError("libEGL.so.1: wrong ELF class: ELFCLASS32")
        return object()

    assert missing_libraries(LIBRARIES, load) == (BY_SONAME["libEGL.so.1"],)


def test_every_package_is_named_once_in_table_order() -> None:
    sonames = ["libxcb-shape.so.0", "libxcb-icccm.so.4", "libxcb-randr.so.0", "libGL.so.1"]
    missing = missing_libraries(LIBRARIES, not_found(*sonames))
    apt, dnf = install_commands(missing)
    assert apt == "sudo apt-get install -y libgl1 libxcb-icccm4 libxcb-randr0 libxcb-shape0"
    assert dnf == "sudo dnf install -y libglvnd-glx xcb-util-wm libxcb"


def command_words(text: str, tool: str) -> set[str]:
    """The packages of the ``sudo <tool> install -y …`` line in ``text``.

    (This machine may lack more than the libraries a test hides; those are named too.)
    """
    line = next(line for line in text.splitlines() if f"sudo {tool} install -y " in line)
    return set(line.split(f"sudo {tool} install -y ", 1)[1].split())


def _run_entry_with_missing(*sonames: str, lang: str) -> subprocess.CompletedProcess[str]:
    """The real ``branchwise`` entry in a fresh process whose loader cannot find ``sonames``."""
    script = (
        "import sys\n"
        "import branchwise.desktop.system_libraries as libraries\n"
        "real = libraries.dlopen\n"
        f"hidden = {sonames!r}\n"
        "def dlopen(soname):\n"
        "    if soname in hidden:\n"
        "        raise OSError(soname + ': cannot open shared object file: No such file')\n"
        "    return real(soname)\n"
        "libraries.dlopen = dlopen\n"
        "from branchwise.desktop.entry import main\n"
        "code = main(sys.argv[1:])\n"
        "print(sorted(m for m in sys.modules if m.startswith(('PySide6', 'qasync'))))\n"
        "sys.exit(code)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("QT_QPA_PLATFORM", "WAYLAND_DISPLAY")}
    return subprocess.run(
        [sys.executable, "-c", script, "--lang", lang],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "DISPLAY": ":4242", "BRANCHWISE_EXIT_AFTER_SHOW": "1"},
        cwd=REPO_ROOT,
        check=False,
    )


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Qt's system libraries: Linux")
def test_the_app_names_the_missing_packages_and_exits_1_before_loading_qt(
    tmp_path: Path,
) -> None:
    done = _run_entry_with_missing("libxcb-cursor.so.0", "libxcb-icccm.so.4", lang="en")
    assert done.returncode == 1, done.stderr
    assert done.stdout.strip() == "[]"  # Qt never loaded: no ImportError, no abort
    assert {"libxcb-cursor0", "libxcb-icccm4"} <= command_words(done.stderr, "apt-get")
    assert {"xcb-util-cursor", "xcb-util-wm"} <= command_words(done.stderr, "dnf")
    assert "libxcb-cursor.so.0" in done.stderr and "libxcb-icccm.so.4" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Qt's system libraries: Linux")
def test_the_missing_packages_are_named_in_the_chosen_language() -> None:
    done = _run_entry_with_missing("libEGL.so.1", lang="zh_Hant")
    assert done.returncode == 1, done.stderr
    assert "libegl1" in command_words(done.stderr, "apt-get")
    assert "libglvnd-egl" in command_words(done.stderr, "dnf")
    assert "Branchwise" in done.stderr and "Qt" in done.stderr
    assert "cannot open its window" not in done.stderr  # translated, not the English text


def test_the_readme_installs_every_package_the_app_checks() -> None:
    """The Quick start's commands are exactly the ones a missing-library message would print."""
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    words = " ".join(readme.replace("\\\n", " ").split())
    apt, dnf = install_commands(LIBRARIES)
    assert f"{apt} ```" in words, f"README's Quick start should say: {apt}"
    assert f"{dnf}`" in words, f"README's Quick start should say: {dnf}"


# -- the table against the installed Qt ---------------------------------------------------------

C_RUNTIME = ("libc.so", "libm.so", "libdl.so", "libpthread.so", "librt.so", "ld-linux")
CXX_RUNTIME = ("libstdc++.so", "libgcc_s.so")


def elf_needed(path: Path) -> list[str]:
    """The ``DT_NEEDED`` sonames of a 64-bit little-endian ELF file (what ``readelf -d`` lists)."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        pytest.skip(f"{path.name} is not a 64-bit little-endian ELF file")
    phoff = struct.unpack_from("<Q", data, 0x20)[0]
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    loads: list[tuple[int, int, int]] = []
    dynamic: tuple[int, int] | None = None
    for n in range(phnum):
        p_type, _flags, offset, vaddr, _paddr, filesz = struct.unpack_from(
            "<IIQQQQ", data, phoff + n * phentsize
        )
        if p_type == 1:
            loads.append((vaddr, offset, filesz))
        elif p_type == 2:
            dynamic = (offset, filesz)
    assert dynamic is not None, f"{path} has no dynamic section"
    entries = [struct.unpack_from("<qQ", data, dynamic[0] + at) for at in range(0, dynamic[1], 16)]
    strtab = next(value for tag, value in entries if tag == 5)
    base = next(off + strtab - va for va, off, size in loads if va <= strtab < va + size)
    names = []
    for tag, value in entries:
        if tag == 0:
            break
        if tag == 1:
            start = base + value
            names.append(data[start : data.index(b"\0", start)].decode())
    return names


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Qt's system libraries: Linux")
def test_the_table_lists_every_system_library_the_installed_qt_needs() -> None:
    """A PySide6 upgrade that needs a new system library fails here, not on a user's machine."""
    import importlib.util

    spec = importlib.util.find_spec("PySide6")
    assert spec is not None and spec.submodule_search_locations
    pyside = Path(next(iter(spec.submodule_search_locations)))
    bundled = {p.name for p in (pyside / "Qt" / "lib").iterdir()}
    binaries = [
        pyside / "Qt" / "plugins" / "platforms" / "libqxcb.so",
        *(pyside / "Qt" / "lib").glob("libQt6XcbQpa.so.*"),
        *(pyside / "Qt" / "lib").glob("libQt6Gui.so.*"),
        *(pyside / "Qt" / "lib").glob("libQt6Core.so.*"),
        *(pyside / "Qt" / "lib").glob("libQt6DBus.so.*"),
        *(pyside / "Qt" / "lib").glob("libQt6Widgets.so.*"),
        *(pyside / f"{module}.abi3.so" for module in ("QtCore", "QtGui", "QtWidgets")),
    ]
    needed = {
        soname
        for binary in binaries
        if binary.is_file()
        for soname in elf_needed(binary)
        if soname not in bundled
        and not soname.startswith(C_RUNTIME + CXX_RUNTIME)
        and not soname.startswith(("libicu", "libshiboken6", "libpyside6", "libQt6"))
    }
    assert needed, "found no system library at all: the ELF reader is wrong"
    assert sorted(needed - set(BY_SONAME)) == []
