"""What the tests share: seeded sessions, fork calls, GUI fixtures, real worker processes."""

from pathlib import Path

HELPERS_DIR = Path(__file__).resolve().parent
REPO_ROOT = HELPERS_DIR.parents[1]
