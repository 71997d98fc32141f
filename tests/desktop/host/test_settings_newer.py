"""The desktop host on a ``settings.json`` a newer Branchwise wrote.

It shows a notice, runs on defaults, and never overwrites the file.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from branchwise.core.errors import SettingsNewerFormat
from branchwise.core.i18n.language import set_language
from branchwise.core.i18n.reasons import reason_text
from branchwise.core.providers.demo import DemoProvider
from branchwise.core.settings import SETTINGS_FILE, Settings
from branchwise.desktop.host.first_run import FirstRun
from branchwise.desktop.host.host import Host

NEWER = b'{"format": 3, "provider": "openai", "baseUrl": "http://127.0.0.1:9/v1"}\n'


@pytest.fixture(autouse=True)
def english_afterwards() -> Iterator[None]:
    yield
    set_language("en")


def test_newer_settings_are_reported_used_as_defaults_and_never_overwritten(
    tmp_path: Path,
) -> None:
    path = tmp_path / SETTINGS_FILE
    tmp_path.mkdir(exist_ok=True)
    path.write_bytes(NEWER)
    host = Host(tmp_path)
    (notice,) = host.notices.history
    assert notice.code == "settings_newer_format"
    assert host.settings == Settings(first_run_done=True)
    assert isinstance(host.provider, DemoProvider)
    # First run is not offered again (it would save over the file).
    assert asyncio.run(FirstRun(host, candidates=[]).offer()) is None
    # Saving is refused with its own reason, which reads right in every language.
    with pytest.raises(SettingsNewerFormat) as info:
        host.update_settings(Settings(language="zh_Hans", first_run_done=True))
    assert path.read_bytes() == NEWER
    english = reason_text(info.value.code)
    assert "newer version" in english and "conversation" not in english
    set_language("zh_Hans")
    assert reason_text(notice.code) != english
    set_language("zh_Hant")
    assert reason_text(notice.code) != english
