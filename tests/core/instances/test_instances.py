"""Stored tool instances end to end: per-user instances with their own credentials, owner
authority and delegation, default tools, resuming anywhere, and secrets that never leave the
sealed blob. Every test runs on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from expediter.core.host import Host
from expediter.core.instances.defaults import default_instance_id
from expediter.core.instances.keys import EXAMPLE_KEY, Keyring, generate_key
from expediter.core.instances.store import InstanceStore
from expediter.core.ledger.database import Database
from expediter.core.records.calls import ToolCall
from expediter.errors import ConfigError, CredentialError, IdentifierError, InstanceNotFound

SECRET_A = "sk-alice-home-7f3a9c1d2e"
SECRET_B = "sk-alice-work-0b8e4d6a5f"
SECRET_C = "sk-carol-agent-9d2c7e1b3a"


def _openai(calls: list[tuple[str, str, dict[str, Any]]]) -> dict[str, Any]:
    return {
        "choices": [
            {
                "message": {
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": json.dumps(arguments)},
                        }
                        for call_id, name, arguments in calls
                    ]
                }
            }
        ]
    }


def _names(host: Host, user_id: str | None, **options: Any) -> list[str]:
    toolset = host.toolset(user_id=user_id, **options)
    return toolset.name_map.names


def _offered_ids(host: Host, user_id: str | None, **options: Any) -> set[str]:
    return {
        entry.instance_id for entry in host.toolset(user_id=user_id, **options).name_map.entries
    }


def _database_bytes(url: str) -> bytes:
    """Everything the database holds, as bytes: the SQLite files, or a PostgreSQL dump of
    every table's rows as text."""
    database = Database.parse(url)
    if database.dialect == "sqlite":
        found = b""
        for suffix in ("", "-wal", "-shm"):
            path = Path(database.target + suffix)
            if path.exists():
                found += path.read_bytes()
        return found
    connection = database.connect()
    try:
        texts = []
        for table in ("tool_call_attempts", "tool_instances", "instance_settings", "tool_records"):
            rows = connection.execute(f"SELECT * FROM {table}").fetchall()
            texts.append(repr(rows))
        return "\n".join(texts).encode()
    finally:
        connection.close()


def test_two_instances_of_one_tool_are_offered_apart_and_each_uses_its_own_secret(
    make_host: Callable[..., Host], database_url: str
) -> None:
    host = make_host()
    home = host.instances.add("weather", "home", {"api_key": SECRET_A}, user_id="alice")
    work = host.instances.add(
        "weather", "work", {"api_key": SECRET_B, "units": "metric"}, user_id="alice"
    )
    names = _names(host, "alice")
    assert {"home_forecast", "work_forecast"} <= set(names)
    toolset = host.toolset(user_id="alice")
    response = _openai(
        [("c1", "home_forecast", {"city": "Oslo"}), ("c2", "work_forecast", {"city": "Rome"})]
    )
    events = list(toolset.run(toolset.parse_calls("openai", response), message_id="m1"))
    assert [event.status for event in events] == ["completed", "completed"]
    assert [event.result["key_tail"] for event in events] == [SECRET_A[-4:], SECRET_B[-4:]]
    assert all(event.result["same_by_context"] for event in events)
    assert [event.instance_id for event in events] == [home.id, work.id]
    # The tool echoed its key: nobody sees it.
    assert events[0].result["echo"] == "called with ***"
    assert host.call(work.id, "forecast", {"city": "Lima"}).result["key_tail"] == SECRET_B[-4:]
    host.close()
    stored = _database_bytes(database_url)
    for secret in (SECRET_A, SECRET_B):
        assert secret.encode() not in stored


def test_secret_fields_are_sealed_shown_masked_and_kept_when_an_update_leaves_them_out(
    make_host: Callable[..., Host], secret_key: str, database_url: str
) -> None:
    host = make_host()
    added = host.instances.add("weather", "home", {"api_key": SECRET_A}, user_id="alice")
    assert added.to_dict()["config"] == {"api_key": "***"}
    assert added.secrets is None
    assert host.instances.get(added.id, decrypt=True).secrets == {"api_key": SECRET_A}
    changed = host.instances.update(added.id, config={"units": "imperial"}, name="house")
    assert changed.name == "house"
    assert changed.revision == 2
    assert host.instances.get(added.id, decrypt=True).secrets == {"api_key": SECRET_A}
    assert changed.to_dict()["config"] == {"api_key": "***", "units": "imperial"}
    listed = json.dumps([item.to_dict() for item in host.instances.list()])
    assert SECRET_A not in listed
    assert "***" in listed
    # The blob is sealed with the key configured: its id is recorded beside it.
    stored = InstanceStore(Database.parse(database_url)).get(added.id)
    assert stored is not None
    assert stored.key_id == Keyring.parse(secret_key).newest.id
    assert stored.credentials is not None
    assert SECRET_A not in stored.credentials


def test_config_is_checked_against_the_tools_fields_naming_the_field(
    make_host: Callable[..., Host],
) -> None:
    host = make_host()
    with pytest.raises(ConfigError, match="api_key"):
        host.instances.add("weather", "home", {"units": "metric"}, user_id="alice")
    with pytest.raises(ConfigError, match="units"):
        host.instances.add("weather", "home", {"api_key": SECRET_A, "units": "kelvin"})
    with pytest.raises(ConfigError, match="colour"):
        host.instances.add("weather", "home", {"api_key": SECRET_A, "colour": "red"})
    assert host.instances.list() == []


def test_a_user_sees_their_own_and_shared_instances_never_anothers(
    make_host: Callable[..., Host],
) -> None:
    host = make_host()
    mine = host.instances.add("weather", "mine", {"api_key": SECRET_A}, user_id="alice")
    shared = host.instances.add("weather", "office", {"api_key": SECRET_B})
    host.instances.add("weather", "bobs", {"api_key": SECRET_C}, user_id="bob")
    assert {item.id for item in host.instances.list("alice")} == {mine.id, shared.id}
    assert len(host.instances.list()) == 3
    names = _names(host, "alice")
    assert "mine_forecast" in names
    assert "office_forecast" in names
    assert not any(name.startswith("bobs") for name in names)
    with pytest.raises(InstanceNotFound):
        host.instances.get(mine.id, user_id="bob")
    with pytest.raises(InstanceNotFound):
        host.instances.remove(shared.id, user_id="alice")
    # Alice switches the shared one off for herself only.
    host.instances.disable(shared.id, user_id="alice")
    assert shared.id not in _offered_ids(host, "alice")
    assert shared.id in _offered_ids(host, "carol")


def test_a_delegated_call_uses_the_owners_credentials_and_records_the_delegation(
    make_host: Callable[..., Host], caplog: pytest.LogCaptureFixture
) -> None:
    host = make_host(builtins=True)
    agent = host.instances.add("weather", "agent", {"api_key": SECRET_C}, user_id="carol")
    toolset = host.toolset(user_id="dave", instances=[agent.id])
    assert "forecast" in toolset.name_map.names
    with caplog.at_level(logging.INFO, logger="expediter"):
        [event] = toolset.run(
            toolset.parse_calls("openai", _openai([("c1", "forecast", {"city": "Pisa"})])),
            message_id="m-delegated",
        )
    assert event.status == "completed", event.error
    assert event.result["key_tail"] == SECRET_C[-4:]
    assert (event.owner_id, event.user_id) == ("carol", "dave")
    assert (event.result["owner"], event.result["invoker"]) == ("carol", "dave")
    row = host.ledger.get(event.key)
    assert row is not None
    assert (row.delegated_from, row.owner_id, row.user_id) == ("carol", "carol", "dave")
    assert any("of 'carol'" in record.getMessage() for record in caplog.records)
    assert SECRET_C not in caplog.text
    # An ordinary call by the owner is no delegation.
    [own] = host.toolset(user_id="carol").run(
        [
            ToolCall(
                "c2",
                "agent_forecast",
                {"city": "x"},
                instance_id=agent.id,
                tool="weather",
                action="forecast",
            )
        ],
        message_id="m-own",
    )
    own_row = host.ledger.get(own.key)
    assert own_row is not None
    assert own_row.delegated_from is None


def test_notes_are_the_invokers_even_on_an_instance_someone_else_owns(
    make_host: Callable[..., Host],
) -> None:
    host = make_host(builtins=True)
    notes = host.instances.add("notes", "team notes", user_id="carol")
    for user, text in (("carol", "owner's note"), ("dave", "invoker's note")):
        toolset = host.toolset(user_id=user, instances=[notes.id])
        name = toolset.name_map.name_for(notes.id, "add")
        assert name is not None
        [event] = toolset.run(
            toolset.parse_calls("openai", _openai([("c1", name, {"text": text})])),
            message_id=f"m-{user}",
        )
        assert event.status == "completed", event.error
    for user, text in (("carol", "owner's note"), ("dave", "invoker's note")):
        toolset = host.toolset(user_id=user, instances=[notes.id])
        name = toolset.name_map.name_for(notes.id, "list")
        assert name is not None
        [event] = toolset.run(
            toolset.parse_calls("openai", _openai([("c1", name, {})])), message_id=f"l-{user}"
        )
        assert [note["text"] for note in event.result["notes"]] == [text]


def test_default_tools_work_out_of_the_box_under_stable_ids_and_keep_data_per_user(
    make_host: Callable[..., Host],
) -> None:
    host = make_host(builtins=True)
    toolset = host.toolset(user_id="erin")
    entry = toolset.name_map.resolve("notes_add")
    assert entry is not None
    assert entry.instance_id == default_instance_id("notes")
    # The same id in another process.
    code = (
        "from expediter.core.instances.defaults import default_instance_id;"
        "print(default_instance_id('notes'))"
    )
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert other.stdout.strip() == entry.instance_id
    first = host.call("notes", "add", {"text": "erin's"}, user_id="erin")
    assert first.status == "completed", first.error
    assert first.instance_id == default_instance_id("notes")
    assert host.call("notes", "list", {}, user_id="frank").result["notes"] == []
    assert host.call("notes", "list", {}, user_id="erin").result["count"] == 1
    # Tools with a required field are no defaults.
    assert not any(name.startswith("forecast") for name in toolset.name_map.names)


def test_a_user_switches_a_default_off_for_themselves(make_host: Callable[..., Host]) -> None:
    host = make_host(builtins=True)
    assert "now" in _names(host, "gina")
    host.instances.disable("clock", user_id="gina")
    assert "now" not in _names(host, "gina")
    assert "now" in _names(host, "hal")
    host.instances.enable("clock", user_id="gina")
    assert "now" in _names(host, "gina")
    # The operator switches it off for everyone.
    host.instances.disable("clock")
    assert "now" not in _names(host, "hal")


def test_default_tools_come_from_the_environment_and_refuse_tools_needing_config(
    make_host: Callable[..., Host], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EXPEDITER_DEFAULT_TOOLS", "clock, weather")
    host = make_host(builtins=True)
    defaults, problems = host.instances.defaults()
    assert [tool for _, tool in defaults] == ["clock"]
    assert len(problems) == 1
    assert "weather" in problems[0]
    assert "api_key" in problems[0]
    names = _names(host, "ivy")
    assert "now" in names
    assert "think" not in names
    with pytest.raises(ConfigError, match="api_key"):
        host.instances.enable("weather", user_id="ivy")


def test_headless_turns_leave_out_headless_excluded_tools(make_host: Callable[..., Host]) -> None:
    host = make_host()
    assert "schedule" in _names(host, "jo")
    assert "schedule" not in _names(host, "jo", headless=True)


def test_a_stored_instance_takes_a_default_tools_name(make_host: Callable[..., Host]) -> None:
    host = make_host(builtins=True)
    mine = host.instances.add("notes", "notes", user_id="kim")
    toolset = host.toolset(user_id="kim")
    assert default_instance_id("notes") not in _offered_ids(host, "kim")
    entry = toolset.name_map.resolve("notes_add")
    assert entry is not None
    assert entry.instance_id == mine.id


def test_a_paused_call_on_a_stored_instance_is_approved_from_another_host(
    make_host: Callable[..., Host],
) -> None:
    first = make_host()
    instance = first.instances.add("weather", "home", {"api_key": SECRET_A}, user_id="lea")
    toolset = first.toolset(user_id="lea")
    [paused] = toolset.run(
        toolset.parse_calls("openai", _openai([("c1", "alert", {"city": "Nice"})])),
        message_id="m-pause",
    )
    assert paused.status == "awaiting_approval"
    row = first.ledger.get(paused.key)
    assert row is not None
    assert SECRET_A not in json.dumps(row.request)
    second = make_host()
    event = second.resume(paused.key, approved=True, approver="ops")
    assert event.status == "completed", event.error
    assert event.result == f"alerted Nice with {SECRET_A[-4:]}"
    assert event.instance_id == instance.id


@pytest.mark.parametrize("change", ["remove", "disable"])
def test_a_paused_call_whose_instance_went_is_denied_with_that_reason(
    make_host: Callable[..., Host], change: str
) -> None:
    host = make_host()
    instance = host.instances.add("weather", "home", {"api_key": SECRET_A}, user_id="mo")
    toolset = host.toolset(user_id="mo")
    [paused] = toolset.run(
        toolset.parse_calls("openai", _openai([("c1", "alert", {"city": "Bonn"})])),
        message_id="m-gone",
    )
    if change == "remove":
        host.instances.remove(instance.id)
    else:
        host.instances.disable(instance.id)
    event = make_host().resume(paused.key, approved=True, approver="ops")
    assert event.status == "denied"
    assert "unavailable" in (event.error or "")


def test_a_changed_credential_is_never_served_from_a_cache(make_host: Callable[..., Host]) -> None:
    host = make_host()
    instance = host.instances.add("weather", "home", {"api_key": SECRET_A}, user_id="nia")
    assert host.call(instance.id, "forecast", {"city": "a"}).result["key_tail"] == SECRET_A[-4:]
    other = make_host()
    other.instances.update(instance.id, config={"api_key": SECRET_B})
    assert host.call(instance.id, "forecast", {"city": "a"}).result["key_tail"] == SECRET_B[-4:]
    toolset = host.toolset(user_id="nia")
    [event] = toolset.run(
        toolset.parse_calls("openai", _openai([("c1", "forecast", {"city": "b"})])),
        message_id="m-changed",
    )
    assert event.result["key_tail"] == SECRET_B[-4:]


def test_credentials_need_a_key_and_refuse_the_documented_example(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.core.instances.conftest import Weather

    monkeypatch.delenv("EXPEDITER_SECRET_KEYS", raising=False)
    host = Host(database_url=database_url, home=tmp_path, autoload=False, plugins=[Weather])
    try:
        # Listing tools and toolsets without credentials needs no key.
        assert host.catalogue()
        with pytest.raises(CredentialError, match="EXPEDITER_SECRET_KEYS"):
            host.instances.add("weather", "home", {"api_key": SECRET_A}, user_id="o")
    finally:
        host.close()
    monkeypatch.setenv("EXPEDITER_SECRET_KEYS", EXAMPLE_KEY)
    host = Host(database_url=database_url, home=tmp_path, autoload=False, plugins=[Weather])
    try:
        with pytest.raises(CredentialError, match="EXPEDITER_SECRET_KEYS"):
            host.instances.add("weather", "home", {"api_key": SECRET_A}, user_id="o")
    finally:
        host.close()


def test_a_blob_sealed_with_another_key_is_an_error_naming_the_instance_never_an_empty_config(
    make_host: Callable[..., Host], monkeypatch: pytest.MonkeyPatch
) -> None:
    host = make_host()
    instance = host.instances.add("weather", "home", {"api_key": SECRET_A}, user_id="pat")
    monkeypatch.setenv("EXPEDITER_SECRET_KEYS", generate_key())
    stranger = make_host()
    with pytest.raises(CredentialError, match=instance.id) as caught:
        stranger.instances.get(instance.id, decrypt=True)
    assert str(caught.value).startswith(
        f"the credentials of tool instance 'home' ({instance.id}) cannot be read: the credential "
        "blob was encrypted with key "
    )
    with pytest.raises(CredentialError, match="home"):
        stranger.call(instance.id, "forecast", {"city": "x"})
    toolset = stranger.toolset(user_id="pat")
    assert not any(name.endswith("forecast") for name in toolset.name_map.names)
    assert any(instance.id in error for error in toolset.errors)


def test_rotation_reseals_every_blob_with_the_newest_key_and_resumes(
    make_host: Callable[..., Host],
    secret_key: str,
    monkeypatch: pytest.MonkeyPatch,
    database_url: str,
) -> None:
    host = make_host()
    ids = [
        host.instances.add("weather", f"w{n}", {"api_key": f"{SECRET_A}{n}"}, user_id="q").id
        for n in range(3)
    ]
    newer = generate_key()
    monkeypatch.setenv("EXPEDITER_SECRET_KEYS", f"{newer},{secret_key}")
    rotating = make_host()
    # Interrupted after the first blob: the next run finishes the rest, nothing lost.
    store = InstanceStore(Database.parse(database_url))
    sealed = store.sealed()
    keyring = Keyring.parse(f"{newer},{secret_key}")
    first_id, owner, blob, _ = sealed[0]
    values = keyring.unseal(blob, owner_id=owner, context=first_id)
    assert store.reseal(
        first_id, blob, keyring.seal(values, owner_id=owner, context=first_id), keyring.newest.id
    )
    report = rotating.instances.rotate()
    assert (report.resealed, report.current, report.failed) == (2, 1, ())
    assert rotating.instances.rotate().resealed == 0
    monkeypatch.setenv("EXPEDITER_SECRET_KEYS", newer)
    only_new = make_host()
    for n, instance_id in enumerate(ids):
        secrets = only_new.instances.get(instance_id, decrypt=True).secrets
        assert secrets == {"api_key": f"{SECRET_A}{n}"}


def test_a_turn_during_a_database_outage_offers_the_default_tools(tmp_path: Path) -> None:
    host = Host(
        database_url="postgresql://nobody@127.0.0.1:1/x",
        home=tmp_path,
        autoload=False,
        builtins=True,
    )
    try:
        toolset = host.toolset(user_id="rae")
        assert "now" in toolset.name_map.names
        assert any("could not be read" in error for error in toolset.errors)
    finally:
        host.close()


@pytest.mark.parametrize("user", ["a\x00b", "x\ud800y", "u" * 5000])
def test_hostile_user_and_instance_ids_are_refused_never_changed_nor_left_to_the_driver(
    make_host: Callable[..., Host], user: str
) -> None:
    # tests/core/instances/test_exact_identity.py tries every such form on every operation.
    host = make_host(builtins=True)
    with pytest.raises(IdentifierError):
        host.instances.add("weather", "n", {"api_key": SECRET_A}, user_id=user)
    with pytest.raises(IdentifierError):
        host.toolset(user_id=user)
    with pytest.raises(IdentifierError):
        host.call("notes", "add", {"text": "hostile"}, user_id=user)
    with pytest.raises(IdentifierError):
        host.instances.disable("clock", user_id=user)
    with pytest.raises(IdentifierError):
        host.instances.get("\x00\ud800" + "i" * 5000)
    with pytest.raises(IdentifierError):
        host.call("\x00\ud800", "a", {})
    assert host.instances.list() == []
    assert host.ledger.rows(limit=0) == []


def test_listed_default_tools_come_in_catalogue_order_whatever_order_they_are_named_in(
    make_host: Callable[..., Host],
) -> None:
    from expediter.core.instances.defaults import default_tools

    host = make_host(builtins=True)
    found, problems = default_tools(host.catalogue(), ["think", "nope", "clock"], host.tool_info)
    assert [info.name for info in found] == ["clock", "think"]
    assert len(problems) == 1
    assert "nope" in problems[0]
