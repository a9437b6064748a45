"""The product's path: ``http`` instances stored with ``host.instances`` (secrets sealed,
operator-only fields), called through ``host.call`` and a user's toolset; the tool contract;
and the command line from ``expediter http import`` to ``expediter call``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import run_one
from expediter_http.tool import HttpTool
from servers import Reply, TestServer

from expediter.core.instances.keys import generate_key
from expediter.errors import ConfigError
from expediter.testing import ToolContract

API_KEY = "stored-KEY-SECRET-1234"
HEADER_SECRET = "stored-HDR-SECRET-5678"
PACK = Path(__file__).resolve().parent.parent
EXPEDITER = Path(sys.executable).with_name("expediter")


@pytest.fixture
def secret_key(monkeypatch: pytest.MonkeyPatch) -> str:
    key = generate_key()
    monkeypatch.setenv("EXPEDITER_SECRET_KEYS", key)
    return key


@pytest.fixture
def host(http_host: Any, secret_key: str) -> Any:
    """A recording host with a master key and no host-wide egress allowance: only an
    instance's own ``allow_networks`` reaches 127.0.0.1."""
    return http_host(allow=None, record_calls=True)


GET_PET = {
    "name": "get_pet",
    "method": "GET",
    "path": "/pets/{petId}",
    "parameters": [
        {"name": "petId", "in": "path", "required": True, "schema": {"type": "integer"}}
    ],
    "security": ["shop_key"],
}


def pets_config(base_url: str, **extra: Any) -> dict[str, Any]:
    return {
        "base_url": base_url,
        "actions": [GET_PET],
        "security": [
            {"name": "shop_key", "type": "api_key", "in": "header", "parameter": "X-API-Key"}
        ],
        "credentials": {"shop_key": API_KEY},
        "secret_headers": {"X-Tenant-Token": HEADER_SECRET},
        **extra,
    }


def assert_no_secret(text: str) -> None:
    assert API_KEY not in text
    assert HEADER_SECRET not in text


# --- stored instances ------------------------------------------------------------------------


def test_a_stored_instance_runs_through_host_call(server, host):
    config = pets_config(server.url + "/api", allow_networks=["127.0.0.0/8"])
    record = host.instances.add("http", name="pets", config=config, operator=True)
    event = host.call(record.id, "get_pet", {"petId": 42})
    assert event.status == "completed", event
    assert event.instance_id == record.id
    (received,) = server.received
    assert received.target == "/api/pets/42"
    assert received.header("X-API-Key") == API_KEY
    assert received.header("X-Tenant-Token") == HEADER_SECRET
    echoed = event.result["body"]["headers"]
    assert echoed["X-API-Key"] == echoed["X-Tenant-Token"] == "***"
    row = host.ledger.get(event.key)
    assert row is not None
    assert row.status == "executed"
    assert row.instance_id == record.id
    assert_no_secret(json.dumps(row.to_dict()))
    assert_no_secret(json.dumps([event.result, event.content]))


def test_a_stored_instance_runs_through_its_owners_toolset(server, host):
    config = pets_config(server.url, allow_networks=["127.0.0.1/32"])
    record = host.instances.add("http", name="pets", config=config, user_id="alice", operator=True)
    event = run_one(host.toolset(user_id="alice"), record.id, "get_pet", {"petId": 7})
    assert event.status == "completed", event
    assert event.owner_id == "alice"
    assert event.result["body"]["path"] == "/pets/7"
    assert server.received[0].header("X-API-Key") == API_KEY
    assert host.toolset(user_id="bob").name_map.name_for(record.id, "get_pet") is None


def test_the_stored_secrets_are_masked_and_sealed(host, expediter_home):
    config = pets_config("https://api.example.com")
    record = host.instances.add("http", name="pets", config=config)
    shown = host.instances.get(record.id).to_dict()
    assert shown["config"]["credentials"] == "***"
    assert shown["config"]["secret_headers"] == "***"
    assert shown["config"]["base_url"] == "https://api.example.com"
    assert_no_secret(json.dumps(shown))
    assert_no_secret(json.dumps([item.to_dict() for item in host.instances.list()]))
    opened = host.instances.get(record.id, decrypt=True)
    assert opened.secrets == {
        "credentials": {"shop_key": API_KEY},
        "secret_headers": {"X-Tenant-Token": HEADER_SECRET},
    }
    host.close()
    for path in expediter_home.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert API_KEY.encode() not in data, path
            assert HEADER_SECRET.encode() not in data, path


def test_allow_networks_needs_the_operator(server, host):
    with pytest.raises(ConfigError, match="allow_networks") as refused:
        host.instances.add(
            "http", name="pets", config=pets_config(server.url, allow_networks=["127.0.0.0/8"])
        )
    assert refused.value.parameter == "allow_networks"
    record = host.instances.add("http", name="pets", config=pets_config(server.url))
    blocked = host.call(record.id, "get_pet", {"petId": 1})
    assert blocked.status == "error"
    assert blocked.error_type == "EgressBlocked"
    assert blocked.error == "blocked by egress policy"
    row = host.ledger.get(blocked.key)
    assert row is not None
    assert "loopback" in (row.error or "")
    with pytest.raises(ConfigError, match="allow_networks"):
        host.instances.update(record.id, config={"allow_networks": ["127.0.0.0/8"]})
    host.instances.update(record.id, config={"timeout": 5})  # other fields: anyone
    assert not server.received
    host.instances.update(record.id, config={"allow_networks": ["127.0.0.0/8"]}, operator=True)
    event = host.call(record.id, "get_pet", {"petId": 1})
    assert event.status == "completed", event
    assert len(server.received) == 1


def test_ca_file_needs_the_operator(host, tmp_path):
    with pytest.raises(ConfigError, match="ca_file"):
        host.instances.add(
            "http",
            name="pets",
            config=pets_config("https://api.example.com", ca_file=str(tmp_path / "ca.pem")),
        )


def test_an_unknown_config_field_is_refused(host):
    with pytest.raises(ConfigError, match="no configuration field 'proxy'"):
        host.instances.add(
            "http", name="pets", config={**pets_config("https://x.example"), "proxy": "x"}
        )


def test_a_malformed_stored_action_is_a_readable_error_event(server, host):
    config = pets_config(server.url, allow_networks=["127.0.0.0/8"])
    config["actions"] = [GET_PET, {**GET_PET, "name": "broken", "method": "GET /x"}]
    record = host.instances.add("http", name="pets", config=config, operator=True)
    event = host.call(record.id, "get_pet", {"petId": 1})
    assert event.status == "error"
    assert "method" in (event.error or "")
    assert not server.received


# --- the tool contract -----------------------------------------------------------------------

CONTRACT_ACTIONS = [
    {
        "name": "list_pets",
        "method": "GET",
        "path": "/pets",
        "description": "List the pets.",
        "parameters": [
            {
                "name": "limit",
                "in": "query",
                "description": "How many pets.",
                "schema": {"type": "integer"},
            }
        ],
        "security": ["shop_key"],
    },
    {
        "name": "create_pet",
        "method": "POST",
        "path": "/pets",
        "body": {
            "content_type": "application/json",
            "schema": {"type": "object", "properties": {"name": {"type": "string"}}},
            "required": True,
            "description": "The new pet.",
        },
        "security": ["shop_key"],
    },
]


class TestHttpContract(ToolContract):
    """The contract on an ``http`` instance configured as an operator stores one: its actions
    and security in ``config``, its credentials in ``secrets`` (sealed, never shown)."""

    tool = HttpTool
    config = {
        "actions": CONTRACT_ACTIONS,
        "security": [
            {"name": "shop_key", "type": "api_key", "in": "header", "parameter": "X-API-Key"}
        ],
        "allow_networks": ["127.0.0.0/8"],
    }
    secrets = {"credentials": {"shop_key": API_KEY}}
    examples = {"list_pets": {"limit": 2}, "create_pet": {"body": {"name": "Rex"}}}
    require_examples = True

    @pytest.fixture
    def contract_config(self, server: TestServer) -> dict[str, Any]:
        server.route("*", "/pets", Reply(status=200, body={"ok": True}))
        return {**self.config, "base_url": server.url}

    def test_the_instance_sends_its_sealed_credentials(
        self, contract_host: Any, contract_target: str, server: TestServer
    ) -> None:
        (stored,) = contract_host.instances.list()
        assert stored.to_dict()["config"]["credentials"] == "***"
        event = contract_host.call(contract_target, "list_pets", {"limit": 1})
        assert event.status == "completed", event
        assert server.received[-1].header("X-API-Key") == API_KEY
        row = contract_host.ledger.get(event.key)
        assert row is not None
        assert_no_secret(json.dumps([event.to_dict(), row.to_dict()]))


# --- the command line ------------------------------------------------------------------------


def cli(env: dict[str, str], *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(EXPEDITER), *arguments],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    """The environment of an ``expediter`` process: its own home and master key, no
    host-wide egress allowance."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("EXPEDITER_")}
    env["EXPEDITER_HOME"] = str(tmp_path / "cli-home")
    env["EXPEDITER_SECRET_KEYS"] = generate_key()
    return env


SPEC = PACK / "tests" / "specs" / "petstore-3.0.yaml"


@pytest.mark.skipif(not EXPEDITER.exists(), reason="no expediter command next to this Python")
def test_import_then_call_from_the_command_line(server, cli_env):
    # The subprocess is outside this test's loopback net: it only ever dials 127.0.0.1.
    imported = cli(
        cli_env,
        "http",
        "import",
        str(SPEC),
        "--name",
        "pets",
        "--base-url",
        server.url + "/v3",
        "--allow-network",
        "127.0.0.0/8",
        "--secret",
        f"shop_key={API_KEY}",
    )
    assert imported.returncode == 0, imported.stderr
    instance_id = imported.stdout.strip()
    assert_no_secret(imported.stdout + imported.stderr)

    called = cli(cli_env, "call", instance_id, "getPetById", "--args", '{"petId": 7}', "--json")
    assert called.returncode == 0, called.stderr
    event = json.loads(called.stdout)
    assert event["status"] == "completed"
    assert event["instance_id"] == instance_id
    assert event["result"]["status_code"] == 200
    (received,) = server.received
    assert received.method == "GET"
    assert received.target == "/v3/pets/7"
    assert received.header("X-API-Key") == API_KEY
    assert_no_secret(called.stdout + called.stderr)

    listed = cli(cli_env, "instances", "ls", "--json")
    assert listed.returncode == 0, listed.stderr
    (shown,) = json.loads(listed.stdout)
    assert shown["id"] == instance_id
    assert shown["name"] == "pets"
    assert shown["tool"] == "http"
    assert shown["config"]["allow_networks"] == ["127.0.0.0/8"]
    assert shown["config"]["credentials"] == "***"
    assert_no_secret(listed.stdout)


@pytest.mark.skipif(not EXPEDITER.exists(), reason="no expediter command next to this Python")
def test_the_guard_blocks_a_command_line_call_to_loopback(server, cli_env):
    imported = cli(cli_env, "http", "import", str(SPEC), "--name", "pets", "--base-url", server.url)
    assert imported.returncode == 0, imported.stderr
    instance_id = imported.stdout.strip()
    # Stored, with a warning that names the range to allow.
    assert "(loopback)" in imported.stderr
    assert "`--allow-network 127.0.0.1/32`" in imported.stderr

    called = cli(cli_env, "call", instance_id, "getPetById", "--args", '{"petId": 7}', "--json")
    assert called.returncode == 1, called.stderr
    event = json.loads(called.stdout)
    assert event["status"] == "error"
    assert event["error_type"] == "EgressBlocked"
    # The model's text says no more than before; the operator's output has the hint.
    assert event["error"] == "blocked by egress policy"
    assert "127.0.0.1 is in 127.0.0.0/8 (loopback)" in called.stderr
    assert "--allow-network 127.0.0.1/32" in called.stderr
    assert "EXPEDITER_EGRESS_ALLOW=127.0.0.1/32" in called.stderr
    assert not server.received

    shown = cli(cli_env, "ledger", "show", event["key"], "--json")
    assert shown.returncode == 0, shown.stderr
    row = json.loads(shown.stdout)
    assert row["status"] == "failed"
    assert row["instance_id"] == instance_id
    assert row["error"].startswith(
        "blocked by egress policy: 127.0.0.1 is in 127.0.0.0/8 (loopback); an operator can "
        "allow it with `--allow-network 127.0.0.1/32`"
    )
