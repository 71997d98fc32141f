"""The desktop's log file: tracebacks land in ``<root>/logs/branchwise.log``, not on stderr."""

from __future__ import annotations

import stat
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import logging, sys, threading
    from pathlib import Path
    from branchwise.desktop.logs import install_log_file

    install_log_file(Path(sys.argv[1]))
    logging.getLogger("branchwise.test").warning("a warning for the file")
    thread = threading.Thread(target=lambda: 1 / 0, name="worker")
    thread.start()
    thread.join()
    raise RuntimeError("boom in the main thread")
    """
)


def test_uncaught_exceptions_go_to_a_private_log_file_with_one_line_on_stderr(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    log_file = tmp_path / "logs" / "branchwise.log"
    assert done.stderr == (f"Branchwise: internal error (RuntimeError); details in {log_file}\n"), (
        done.stderr
    )
    text = log_file.read_text(encoding="utf-8")
    assert "a warning for the file" in text
    assert "uncaught exception in thread worker" in text and "ZeroDivisionError" in text
    assert "Traceback" in text and "RuntimeError: boom in the main thread" in text
    assert stat.S_IMODE(log_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(log_file.parent.stat().st_mode) == 0o700


def test_the_log_file_rotates_instead_of_growing(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import logging, sys
        from pathlib import Path
        from branchwise.desktop import logs
        logs.install_log_file(Path(sys.argv[1]))
        for i in range(12000):
            logging.getLogger("branchwise.test").error("line %d %s", i, "x" * 400)
        """
    )
    subprocess.run([sys.executable, "-c", script, str(tmp_path)], check=True, timeout=60)
    files = sorted(p.name for p in (tmp_path / "logs").iterdir())
    assert files == ["branchwise.log", "branchwise.log.1", "branchwise.log.2", "branchwise.log.3"]
    assert all(p.stat().st_size <= (1 << 20) + 1024 for p in (tmp_path / "logs").iterdir())
