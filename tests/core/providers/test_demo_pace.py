"""The demo responder streams at a pace a person can watch (and branch meanwhile).

The pace is a setting (words per second, 0 = instant). The test suite sets
``BRANCHWISE_DEMO_PACE=0`` in its conftest, explicitly, so the demo answers
at once there; these tests pass their own environment.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from branchwise.core.errors import InvalidSettings
from branchwise.core.providers.demo import DemoProvider
from branchwise.core.providers.detect import choose_provider
from branchwise.core.settings import (
    DEFAULT_DEMO_PACE,
    DEMO_PACE_ENV,
    Settings,
    demo_pace,
    load_settings,
    save_settings,
    validate_settings,
)


def test_the_default_pace_is_one_a_person_can_watch() -> None:
    assert 30 <= DEFAULT_DEMO_PACE <= 60
    provider = choose_provider(Settings(), environ={})
    assert isinstance(provider, DemoProvider)
    assert provider.delay == pytest.approx(1 / DEFAULT_DEMO_PACE)


def test_pace_zero_is_instant_and_the_environment_overrides_the_setting() -> None:
    instant = choose_provider(Settings(demo_pace=0), environ={})
    assert isinstance(instant, DemoProvider) and instant.delay == 0
    assert demo_pace(Settings(demo_pace=20), {DEMO_PACE_ENV: "0"}) == 0
    assert demo_pace(Settings(demo_pace=20), {DEMO_PACE_ENV: "100"}) == 100
    # A value that is not a pace is ignored, not fatal.
    assert demo_pace(Settings(demo_pace=20), {DEMO_PACE_ENV: "fast"}) == 20
    assert demo_pace(Settings(demo_pace=20), {DEMO_PACE_ENV: "-3"}) == 20


def test_the_pace_is_saved_and_validated(tmp_path: Path) -> None:
    save_settings(tmp_path, Settings(demo_pace=12))
    assert orjson.loads((tmp_path / "settings.json").read_bytes())["demoPace"] == 12
    assert load_settings(tmp_path)[0].demo_pace == 12
    assert validate_settings({}).demo_pace == DEFAULT_DEMO_PACE
    for bad in (-1, 1.5, "40", True, 10_001):
        with pytest.raises(InvalidSettings) as caught:
            validate_settings({"demoPace": bad})
        assert caught.value.details["field"] == "demoPace"
