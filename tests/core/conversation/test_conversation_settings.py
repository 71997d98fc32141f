"""Per-conversation model, system prompt and temperature: log events that branches inherit."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.sessions import complete_turn

from branchwise.core.conversation.settings import (
    ConversationSettings,
    from_event,
    validate_conversation_settings,
)
from branchwise.core.errors import InvalidConversationSettings, InvalidSettings
from branchwise.core.fork.engine import fork
from branchwise.core.fork.operations import ForkRequest
from branchwise.core.projection import events as ev
from branchwise.core.settings import Settings, for_conversation, validate_settings
from branchwise.core.store.store import SessionStore, SessionWriter


def test_empty_text_means_not_set_and_numbers_are_checked() -> None:
    assert validate_conversation_settings(" ", "  \n", None) == ConversationSettings()
    assert validate_conversation_settings(" m ", "Be brief.", 1) == ConversationSettings(
        "m", "Be brief.", 1.0
    )
    for bad in (2.5, -0.1, float("nan"), True, "0.3"):
        with pytest.raises(InvalidConversationSettings) as info:
            validate_conversation_settings(temperature=bad)
        assert info.value.details["field"] == "temperature"
    with pytest.raises(InvalidConversationSettings):
        validate_conversation_settings(system="x" * 32_001)
    with pytest.raises(InvalidConversationSettings):
        validate_conversation_settings(model=7)


def test_a_bad_value_in_a_log_reads_as_unset_instead_of_breaking_the_conversation() -> None:
    event = {"model": "m", "system": 5, "temperature": 99}
    assert from_event(event) == ConversationSettings(model="m")


def test_the_conversation_wins_over_settings_and_unset_fields_follow_them() -> None:
    settings = Settings(model="base", system_prompt="Default.", temperature=0.2)
    assert for_conversation(settings, ConversationSettings()) == settings
    mixed = for_conversation(settings, ConversationSettings(model="own", temperature=1.5))
    assert (mixed.model, mixed.system_prompt, mixed.temperature) == ("own", "Default.", 1.5)


def test_settings_keep_a_default_system_prompt_and_temperature() -> None:
    settings = validate_settings({"systemPrompt": "Be kind.", "temperature": 0.5})
    assert (settings.system_prompt, settings.temperature) == ("Be kind.", 0.5)
    assert validate_settings(settings.to_json()) == settings
    with pytest.raises(InvalidSettings) as info:
        validate_settings({"temperature": 3})
    assert info.value.details["field"] == "temperature"


def _configure(
    writer: SessionWriter,
    model: str | None = None,
    system: str | None = None,
    temperature: float | None = None,
) -> None:
    chosen = validate_conversation_settings(model, system, temperature)
    writer.commit([ev.session_config(chosen.model, chosen.system, chosen.temperature)])


def test_a_branch_inherits_the_settings_at_its_fork_point_and_changes_its_own(
    tmp_path: Path,
) -> None:
    store = SessionStore(tmp_path)
    with store.create("parent") as writer:
        _configure(writer, model="m1", system="Be brief.")
        boundary = complete_turn(writer, "t0")
        _configure(writer, model="m2", system="Be brief.", temperature=0.9)
        complete_turn(writer, "t1")
        parent_id = writer.session_id
    manifest = store.read(parent_id).manifest
    request = ForkRequest(parent_id, "t0", boundary, manifest.generation)
    child_id = fork(store, request, "op-1").child_session_id
    child = store.read(child_id).projection.settings
    assert child == ConversationSettings("m1", "Be brief.", None)  # not the later change

    with store.open_writer(child_id) as writer:
        _configure(writer, model="m3")
    assert store.read(child_id).projection.settings == ConversationSettings(model="m3")
    assert store.read(parent_id).projection.settings == ConversationSettings("m2", "Be brief.", 0.9)


def test_a_model_server_is_demo_or_an_http_address_and_reads_leniently_from_a_log() -> None:
    assert validate_conversation_settings(model_server=" demo ").model_server == "demo"
    assert (
        validate_conversation_settings(model_server="http://127.0.0.1:11434/v1/").model_server
        == "http://127.0.0.1:11434/v1"
    )
    assert validate_conversation_settings(model_server="  ") == ConversationSettings()
    for bad in ("ftp://h/v1", "http://u:p@h/v1", "http://[::1", "no address", 7, "h" * 2_001):
        with pytest.raises(InvalidConversationSettings) as info:
            validate_conversation_settings(model_server=bad)
        assert info.value.details["field"] == "modelServer"
    assert from_event({"model": "m", "modelServer": "gopher://x"}) == ConversationSettings("m")
    assert from_event({"modelServer": "demo"}).model_server == "demo"
    # The event and the CLI's config name it only when set: older readers see what they knew.
    assert "modelServer" not in ConversationSettings("m").to_json()
    assert ev.session_config("m", None, None) == {
        "type": "session/config",
        "model": "m",
        "system": None,
        "temperature": None,
    }
    assert ev.session_config("m", None, None, "demo")["modelServer"] == "demo"
