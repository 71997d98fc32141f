"""Shared test setup: offscreen Qt, fresh data roots, helper processes."""

from __future__ import annotations

import os
import sys
from pathlib import Path

# Tests never need a display; this must happen before anything imports Qt.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("BRANCHWISE_HOME", "/nonexistent-branchwise-home-set-by-tests")
# The demo responder streams at a pace a person can watch; the suite asks for instant answers
# (a test that wants the pace passes its own environment or a delay).
os.environ.setdefault("BRANCHWISE_DEMO_PACE", "0")

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

from branchwise.core.store.store import SessionStore

# CI machines are shared and noisy: judge properties, not generation speed.
settings.register_profile(
    "branchwise",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)
settings.load_profile("branchwise")


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    """A session store on a fresh data root."""
    return SessionStore(tmp_path / "root")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses a QApplication as ``gui``."""
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if "qtbot" in fixtures or "qapp" in fixtures:
            item.add_marker(pytest.mark.gui)


PYTHON = sys.executable
