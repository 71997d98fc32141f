"""Settings on real files: round trip, 0600, broken files moved aside, typed validation."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import orjson
import pytest

from branchwise.core.conversation.settings import ConversationSettings
from branchwise.core.errors import (
    InvalidBaseUrl,
    InvalidSettings,
    SettingsNewerFormat,
    UnsupportedFormat,
)
from branchwise.core.settings import (
    SETTINGS_FILE,
    Settings,
    for_conversation,
    load_settings,
    normalize_base_url,
    require_settings,
    resolve_api_key,
    save_settings,
    validate_settings,
)

KEY = "sk-typed-SECRET-42"


def test_no_file_means_defaults_and_no_notice(tmp_path: Path) -> None:
    settings, notices = load_settings(tmp_path / "missing-root")
    assert settings == Settings()
    assert settings.provider == "demo" and not settings.configured
    assert notices == []


def test_round_trip_with_every_field(tmp_path: Path) -> None:
    settings = Settings(
        provider="openai",
        base_url="http://127.0.0.1:11434/v1",
        model="llama3.2",
        api_key_env="MY_KEY",
        api_key=KEY,
        language="zh_Hant",
        first_run_done=True,
        theme="dark",
    )
    root = tmp_path / "root"
    save_settings(root, settings)
    loaded, notices = load_settings(root)
    assert loaded == settings and notices == []
    assert loaded.configured
    path = root / SETTINGS_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert sorted(p.name for p in root.iterdir()) == [SETTINGS_FILE]  # no temp files left
    on_disk = orjson.loads(path.read_bytes())
    assert on_disk["format"] == 1 and on_disk["baseUrl"] == "http://127.0.0.1:11434/v1"


def test_saving_again_replaces_and_keeps_0600(tmp_path: Path) -> None:
    save_settings(tmp_path, Settings(language="en"))
    (tmp_path / SETTINGS_FILE).chmod(0o644)
    save_settings(tmp_path, Settings(language="zh_Hans"))
    assert stat.S_IMODE((tmp_path / SETTINGS_FILE).stat().st_mode) == 0o600
    assert load_settings(tmp_path)[0].language == "zh_Hans"


def test_key_is_not_in_repr(tmp_path: Path) -> None:
    settings = Settings(api_key=KEY)
    assert KEY not in repr(settings) and KEY not in str(settings)


def _broken(tmp_path: Path, content: bytes) -> tuple[Settings, Any, Path]:
    path = tmp_path / SETTINGS_FILE
    path.write_bytes(content)
    settings, notices = load_settings(tmp_path)
    (notice,) = notices
    return settings, notice, path


def test_unparseable_file_is_moved_aside_with_a_notice(tmp_path: Path) -> None:
    content = b'{"provider": "openai", "baseUrl": '
    settings, notice, path = _broken(tmp_path, content)
    assert settings == Settings()
    assert notice.code == "settings_reset"
    assert notice.path is not None
    moved = Path(notice.path)
    assert moved.parent == tmp_path and moved.name.startswith("settings.json.bad-")
    assert moved.read_bytes() == content  # kept for the person, byte for byte
    assert not path.exists()
    # The next start is quiet: the broken file is out of the way.
    assert load_settings(tmp_path) == (Settings(), [])


def test_invalid_values_are_moved_aside_naming_the_field(tmp_path: Path) -> None:
    _, notice, _ = _broken(tmp_path, b'{"provider": "gpt-9", "model": "x"}')
    assert notice.code == "settings_reset" and "provider" in notice.reason


def test_two_broken_files_in_one_second_do_not_collide(tmp_path: Path) -> None:
    first = _broken(tmp_path, b"[1")[1].path
    second = _broken(tmp_path, b"[2")[1].path
    assert first != second
    assert Path(first).read_bytes() == b"[1" and Path(second).read_bytes() == b"[2"


def test_unreadable_file_is_left_in_place(tmp_path: Path) -> None:
    (tmp_path / SETTINGS_FILE).mkdir()  # reading a folder fails for every user, root too
    settings, notices = load_settings(tmp_path)
    assert settings == Settings()
    assert [n.code for n in notices] == ["settings_unreadable"]
    assert (tmp_path / SETTINGS_FILE).is_dir()


NEWER = b'{"format": 2, "provider": "openai", "baseUrl": "http://127.0.0.1:9/v1", "newField": 1}'


def test_a_newer_format_is_unsupported_not_invalid() -> None:
    with pytest.raises(UnsupportedFormat) as info:
        validate_settings(orjson.loads(NEWER))
    assert info.value.code == "unsupported_format" and info.value.details["format"] == 2


def test_a_newer_file_is_left_in_place_and_reported(tmp_path: Path) -> None:
    path = tmp_path / SETTINGS_FILE
    path.write_bytes(NEWER)
    settings, notices = load_settings(tmp_path)
    # Defaults, but first run counts as done: the file proves there was one.
    assert settings == Settings(first_run_done=True)
    assert [(n.code, n.path) for n in notices] == [("settings_newer_format", str(path))]
    assert "format 2" in notices[0].reason
    assert path.read_bytes() == NEWER
    assert sorted(p.name for p in tmp_path.iterdir()) == [SETTINGS_FILE]  # nothing moved aside
    with pytest.raises(UnsupportedFormat) as info:
        require_settings(tmp_path)
    assert info.value.code == "unsupported_format" and info.value.details["path"] == str(path)


def test_saving_over_a_newer_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / SETTINGS_FILE
    path.write_bytes(NEWER)
    with pytest.raises(SettingsNewerFormat) as info:
        save_settings(tmp_path, Settings(first_run_done=True))
    assert info.value.code == "settings_newer_format"
    assert path.read_bytes() == NEWER
    path.write_bytes(b'{"format": 1, "provider": "demo"}')  # the same or an older one is replaced
    save_settings(tmp_path, Settings(language="zh_Hans"))
    assert load_settings(tmp_path) == (Settings(language="zh_Hans"), [])
    assert require_settings(tmp_path) == (Settings(language="zh_Hans"), [])


def test_unknown_fields_are_ignored_and_urls_normalized() -> None:
    settings = validate_settings(
        {"provider": "openai", "baseUrl": " http://localhost:8080/ ", "someday": 1}
    )
    assert settings.base_url == "http://localhost:8080/v1"


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"provider": "gpt"}, "provider"),
        ({"provider": None}, "provider"),
        ({"baseUrl": "ftp://host/v1"}, "baseUrl"),
        ({"baseUrl": "localhost:11434"}, "baseUrl"),
        ({"baseUrl": 11434}, "baseUrl"),
        ({"model": ["a"]}, "model"),
        ({"apiKey": 5}, "apiKey"),
        ({"apiKeyEnv": "NOT A NAME"}, "apiKeyEnv"),
        ({"language": "../../etc"}, "language"),
        ({"language": 7}, "language"),
        ({"firstRunDone": "yes"}, "firstRunDone"),
        ({"firstRunDone": 1}, "firstRunDone"),
        ({"theme": "blue"}, "theme"),
        ({"theme": ["dark"]}, "theme"),
        ({"format": 0}, "format"),
        ({"format": "1"}, "format"),
    ],
)
def test_validation_errors_are_typed(data: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidSettings) as info:
        validate_settings(data)
    assert info.value.code == "invalid_settings"
    assert info.value.details["field"] == field
    assert info.value.to_json()["error"]["field"] == field


def test_a_file_from_before_themes_follows_the_system(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / SETTINGS_FILE).write_bytes(orjson.dumps({"format": 1, "language": "en"}))
    loaded, notices = load_settings(root)
    assert loaded.theme == "system" and loaded.language == "en" and notices == []


def test_settings_must_be_an_object() -> None:
    with pytest.raises(InvalidSettings):
        validate_settings([])  # type: ignore[arg-type]


def test_openai_without_url_is_valid_but_not_configured() -> None:
    settings = validate_settings({"provider": "openai"})
    assert settings.provider == "openai" and not settings.configured


def test_api_key_resolution_order() -> None:
    env = {"BRANCHWISE_API_KEY": "bw", "OPENAI_API_KEY": "oa", "MINE": "mine"}
    assert resolve_api_key(Settings(api_key=KEY), env) == KEY
    assert resolve_api_key(Settings(api_key_env="MINE"), env) == "mine"
    assert resolve_api_key(Settings(), env) == "bw"
    # OPENAI_API_KEY goes to OpenAI over https only, never to another configured server.
    openai = Settings(provider="openai", base_url="https://api.openai.com/v1")
    assert resolve_api_key(openai, {"OPENAI_API_KEY": "oa"}) == "oa"
    for elsewhere in (
        "http://127.0.0.1:11434/v1",
        "https://example.com/v1",
        "http://api.openai.com/v1",
        "https://openai.com.evil.example/v1",
    ):
        local = Settings(provider="openai", base_url=elsewhere)
        assert resolve_api_key(local, {"OPENAI_API_KEY": "oa"}) is None, elsewhere
    assert resolve_api_key(Settings(), {"BRANCHWISE_API_KEY": "  "}) is None
    # A named variable that is unset means no key, not some other variable's key.
    assert resolve_api_key(Settings(api_key_env="UNSET"), env) is None


def test_a_conversations_own_server_gets_no_key_kept_for_another() -> None:
    app = Settings(provider="openai", base_url="http://127.0.0.1:1234/v1", api_key=KEY, model="m")
    env = {"BRANCHWISE_API_KEY": "bw", "BRANCHWISE_NO_KEY": "set anyway"}
    other = for_conversation(app, ConversationSettings(model_server="http://127.0.0.1:11434"))
    assert (other.base_url, other.configured) == ("http://127.0.0.1:11434/v1", True)
    assert resolve_api_key(other, env) is None  # neither the typed key nor any variable
    same = for_conversation(app, ConversationSettings(model_server="http://127.0.0.1:1234/v1/"))
    assert resolve_api_key(same, env) == KEY  # the app's own server keeps its key
    demo = for_conversation(app, ConversationSettings(model="demo", model_server="demo"))
    assert demo.provider == "demo" and not demo.configured and demo.model == "demo"


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("http://127.0.0.1:11434", "http://127.0.0.1:11434/v1"),
        ("http://127.0.0.1:11434/", "http://127.0.0.1:11434/v1"),
        ("http://127.0.0.1:11434/v1/", "http://127.0.0.1:11434/v1"),
        ("  http://localhost:8080/v1  ", "http://localhost:8080/v1"),
        ("https://openrouter.ai/api/v1", "https://openrouter.ai/api/v1"),
        ("https://example.com/openai", "https://example.com/openai"),
        ("http://h:1234/v1/chat/completions", "http://h:1234/v1"),
        ("http://h:1234/v1/models/", "http://h:1234/v1"),
    ],
)
def test_base_url_rule(given: str, expected: str) -> None:
    assert normalize_base_url(given) == expected
    assert normalize_base_url(expected) == expected


def test_bad_url_message_hides_user_info() -> None:
    with pytest.raises(InvalidBaseUrl) as info:
        normalize_base_url("ftp://user:hunter2@h/v1")
    assert "hunter2" not in info.value.message
