"""``expediter http import`` and ``expediter http actions`` through the real command line (the
pack installed, its commands found as any pack's are), each test in its own EXPEDITER_HOME."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

import expediter

SPECS = Path(__file__).parent / "specs"
PETSTORE = str(SPECS / "petstore-3.0.yaml")

Run = Callable[..., Result]


def listed(run: Run) -> list[dict[str, Any]]:
    result = run("instances", "ls", "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def stored_secrets(instance_id: str) -> dict[str, Any]:
    with expediter.Host() as host:
        record = host.instances.get(instance_id, decrypt=True)
    return dict(record.secrets or {})


def test_import_stores_an_http_instance_and_prints_its_id(run: Run) -> None:
    result = run("http", "import", PETSTORE, "--name", "shop")
    assert result.exit_code == 0, result.output
    instance_id = result.stdout.strip()
    assert result.stderr == ""  # the pet shop imports without a problem
    (record,) = listed(run)
    assert (record["id"], record["name"], record["tool"]) == (instance_id, "shop", "http")
    assert record["owner_id"] is None
    config = record["config"]
    assert config["base_url"] == "https://eu.pets.example.com/v3"
    assert [action["name"] for action in config["actions"]] == [
        "listPets",
        "createPet",
        "getPetById",
        "deletePet",
        "updatePetWithForm",
        "uploadImage",
        "replacePetXml",
    ]
    assert config["security"][0] == {
        "name": "shop_key",
        "type": "api_key",
        "in": "header",
        "parameter": "X-API-Key",
    }
    assert "credentials" not in config
    assert "allow_networks" not in config


def test_secrets_are_sealed_and_listed_as_stars(run: Run, tmp_path: Path) -> None:
    token = tmp_path / "token.txt"
    token.write_text("bearer-secret-2\n")
    result = run(
        "http",
        "import",
        PETSTORE,
        "--name",
        "shop",
        "--secret",
        "shop_key=key-secret-1",
        "--secret",
        f"bearer_token=@{token}",
    )
    assert result.exit_code == 0, result.output
    assert "secret-" not in result.output
    (record,) = listed(run)
    assert record["config"]["credentials"] == "***"
    assert record["secret_fields"] == ["credentials"]
    assert "secret-" not in json.dumps(record)
    assert stored_secrets(record["id"]) == {
        "credentials": {"shop_key": "key-secret-1", "bearer_token": "bearer-secret-2"}
    }


def test_a_secret_may_come_from_standard_input(run: Run) -> None:
    result = run(
        "http",
        "import",
        str(SPECS / "petstore-2.0.yaml"),
        "--name",
        "swagger",
        "--secret",
        "basicAuth=-",
        input="user:pass word\n",
    )
    assert result.exit_code == 0, result.output
    instance_id = result.stdout.strip()
    assert stored_secrets(instance_id) == {"credentials": {"basicAuth": "user:pass word"}}


def test_a_secret_for_an_undeclared_scheme_exits_2_naming_the_known_ones(run: Run) -> None:
    result = run("http", "import", PETSTORE, "--name", "shop", "--secret", "oauth=sk-hidden")
    assert result.exit_code == 2
    assert "no security scheme 'oauth'" in result.stderr
    assert "shop_key, bearer_token" in result.stderr
    assert "sk-hidden" not in result.output
    assert listed(run) == []


@pytest.mark.parametrize("option", ["shop_key", "=value", "shop_key=@/nonexistent/file"])
def test_a_malformed_secret_exits_2(run: Run, option: str) -> None:
    result = run("http", "import", PETSTORE, "--name", "shop", "--secret", option)
    assert result.exit_code == 2
    assert "--secret" in result.stderr


def test_allowed_networks_are_stored_normalized(run: Run) -> None:
    result = run(
        "http",
        "import",
        PETSTORE,
        "--name",
        "shop",
        "--allow-network",
        "10.1.2.3/8",
        "--allow-network",
        "fd00::1",
    )
    assert result.exit_code == 0, result.output
    (record,) = listed(run)
    assert record["config"]["allow_networks"] == ["10.0.0.0/8", "fd00::1/128"]


def test_an_invalid_network_exits_2(run: Run) -> None:
    result = run("http", "import", PETSTORE, "--name", "shop", "--allow-network", "10.0.0.0/33")
    assert result.exit_code == 2
    assert "--allow-network" in result.stderr
    assert "10.0.0.0/33 is not a network" in result.stderr


def test_problems_are_warnings_and_json_shows_the_instance(run: Run) -> None:
    result = run(
        "http",
        "import",
        str(SPECS / "weird.yaml"),
        "--name",
        "weird",
        "--base-url",
        "https://weird.test/api",
        "--json",
    )
    assert result.exit_code == 0, result.output
    warnings = result.stderr.splitlines()
    assert warnings
    assert all(line.startswith("warning: ") for line in warnings)
    assert any("callbacks are ignored" in line for line in warnings)
    data = json.loads(result.stdout)
    assert data["tool"] == "http"
    assert data["config"]["base_url"] == "https://weird.test/api"
    assert data["action_names"][:2] == ["sameName", "sameName_2"]
    assert data["problems"] == [line.removeprefix("warning: ") for line in warnings]
    (record,) = listed(run)
    assert {key: data[key] for key in record} == record  # the `instances ls` shape, plus more


def test_a_relative_server_needs_a_base_url(run: Run) -> None:
    result = run("http", "import", str(SPECS / "weird.yaml"), "--name", "weird")
    assert result.exit_code == 2
    assert "--base-url" in result.stderr.splitlines()[-1]
    assert listed(run) == []


@pytest.mark.parametrize("url", ["ftp://host/x", "api.example.com", "https://"])
def test_a_bad_base_url_exits_2(run: Run, url: str) -> None:
    result = run("http", "import", PETSTORE, "--name", "shop", "--base-url", url)
    assert result.exit_code == 2
    assert "--base-url" in result.stderr


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "cannot read"),
        ("openapi: [3.0\n  bad: {\n", "not valid JSON or YAML"),
        ("swagger: '1.2'\npaths: {}\n", "Swagger version '1.2' is not supported"),
        ("openapi: 3.0.0\npaths: {}\n", "no operation to import"),
    ],
    ids=["missing", "invalid", "version", "empty"],
)
def test_an_unusable_spec_exits_2(run: Run, tmp_path: Path, text: str | None, message: str) -> None:
    path = tmp_path / "spec.yaml"
    if text is not None:
        path.write_text(text)
    result = run("http", "import", str(path), "--name", "bad")
    assert result.exit_code == 2
    assert message in result.stderr


def test_the_spec_may_come_from_standard_input(run: Run) -> None:
    text = (SPECS / "petstore-3.1.json").read_text()
    result = run("http", "import", "-", "--name", "piped", input=text)
    assert result.exit_code == 0, result.output
    (record,) = listed(run)
    assert record["config"]["base_url"] == "https://api.pets.example.net"


def test_spec_and_secret_cannot_both_read_standard_input(run: Run) -> None:
    result = run("http", "import", "-", "--name", "x", "--secret", "a=-", input="{}")
    assert result.exit_code == 2
    assert "standard input" in result.stderr


def test_a_name_taken_exits_2(run: Run) -> None:
    assert run("http", "import", PETSTORE, "--name", "shop").exit_code == 0
    result = run("http", "import", PETSTORE, "--name", "shop")
    assert result.exit_code == 2
    assert "--name" in result.stderr
    assert "choose another name" in result.stderr


def test_user_instances_belong_to_the_user(run: Run) -> None:
    result = run("http", "import", PETSTORE, "--name", "mine", "--user", "alice")
    assert result.exit_code == 0, result.output
    (record,) = listed(run)
    assert record["owner_id"] is not None
    assert [
        r["id"] for r in json.loads(run("instances", "ls", "--user", "bob", "--json").stdout)
    ] == []


def test_http_actions_lists_name_method_and_path(run: Run) -> None:
    instance_id = run("http", "import", PETSTORE, "--name", "shop").stdout.strip()
    table = run("http", "actions", instance_id)
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["NAME", "METHOD", "PATH"]
    assert lines[3].split() == ["getPetById", "GET", "/pets/{petId}"]
    data = json.loads(run("http", "actions", instance_id, "--json").stdout)
    assert data[1] == {"name": "createPet", "method": "POST", "path": "/pets"}


def test_http_actions_of_an_unknown_instance_exits_1(run: Run) -> None:
    result = run("http", "actions", "no-such-id")
    assert result.exit_code == 1
    assert "no tool instance" in result.stderr


# -- a base URL the egress guard refuses: a warning at import, the instance stored ------------


@pytest.mark.parametrize(
    ("base_url", "kind", "option"),
    [
        ("http://127.0.0.1:8080/v3", "(loopback)", "--allow-network 127.0.0.1/32"),
        ("http://10.1.2.3/v3", "(private network)", "--allow-network 10.1.2.3/32"),
        ("http://169.254.169.254/latest", "(link-local", "--allow-network 169.254.169.254/32"),
        ("http://[::1]:8080/v3", "(loopback)", "--allow-network ::1/128"),
        ("http://[::ffff:127.0.0.1]/v3", "127.0.0.0/8", "--allow-network 127.0.0.1/32"),
    ],
    ids=["loopback", "private", "link-local", "ipv6-loopback", "ipv4-mapped"],
)
def test_a_refused_base_url_warns_with_the_range_to_allow(
    run: Run, base_url: str, kind: str, option: str
) -> None:
    result = run("http", "import", PETSTORE, "--name", "shop", "--base-url", base_url)
    assert result.exit_code == 0, result.output
    (warning,) = result.stderr.splitlines()
    assert warning.startswith("warning: the base URL names ")
    assert kind in warning
    assert f"`{option}`" in warning
    assert "EXPEDITER_EGRESS_ALLOW=" in warning
    (record,) = listed(run)  # stored all the same
    assert record["id"] == result.stdout.strip()
    assert record["config"]["base_url"] == base_url.rstrip("/")


def test_localhost_warns_for_both_loopback_addresses(run: Run) -> None:
    result = run("http", "import", PETSTORE, "--name", "shop", "--base-url", "http://localhost:8")
    assert result.exit_code == 0, result.output
    assert "`--allow-network 127.0.0.1/32 --allow-network ::1/128`" in result.stderr
    # One of the two allowed: the other is still named.
    allowed = run(
        "http",
        "import",
        PETSTORE,
        "--name",
        "shop2",
        "--base-url",
        "http://localhost:8",
        "--allow-network",
        "127.0.0.0/8",
    )
    assert allowed.exit_code == 0, allowed.output
    assert "`--allow-network ::1/128`" in allowed.stderr
    assert "127.0.0.1/32" not in allowed.stderr


@pytest.mark.parametrize(
    "allowing",
    [
        ["--allow-network", "127.0.0.0/8"],
        ["--allow-network", "127.0.0.1"],
        ["--allow-network", "10.0.0.0/8", "--allow-network", "127.0.0.1/32"],
    ],
)
def test_an_allowed_base_url_imports_without_a_warning(run: Run, allowing: list[str]) -> None:
    result = run(
        "http", "import", PETSTORE, "--name", "shop", "--base-url", "http://127.0.0.1:8", *allowing
    )
    assert result.exit_code == 0, result.output
    assert result.stderr == ""


def test_the_hosts_egress_allowance_counts_too(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXPEDITER_EGRESS_ALLOW", "127.0.0.0/8")
    result = run("http", "import", PETSTORE, "--name", "shop", "--base-url", "http://127.0.0.1:8")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""


@pytest.mark.parametrize(
    "base_url", ["http://api.internal.test/v1", "http://printer.lan:631", "https://93.184.215.14"]
)
def test_a_public_address_or_a_name_is_not_judged_at_import(run: Run, base_url: str) -> None:
    # A name is never resolved here (the test net refuses a real lookup).
    result = run("http", "import", PETSTORE, "--name", "shop", "--base-url", base_url)
    assert result.exit_code == 0, result.output
    assert result.stderr == ""


def test_the_documents_own_loopback_server_warns(run: Run, tmp_path: Path) -> None:
    spec = tmp_path / "local.json"
    document = json.loads((SPECS / "petstore-3.1.json").read_text())
    document["servers"] = [{"url": "http://127.0.0.2:9000/api"}]
    spec.write_text(json.dumps(document))
    result = run("http", "import", str(spec), "--name", "local")
    assert result.exit_code == 0, result.output
    assert "'127.0.0.2' (127.0.0.2 is in 127.0.0.0/8 (loopback))" in result.stderr
    assert "`--allow-network 127.0.0.2/32`" in result.stderr
