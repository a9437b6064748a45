"""What the configuration may put in a request's headers. A credential never sits in the plain
``headers`` field (stored, listed and echoed in clear): it is refused there, naming the secret
field ``secret_headers``. A header the request frames or routes itself (``Host``,
``Transfer-Encoding``, ``Cookie`` ...) is refused in ``headers``, in ``secret_headers`` and as an
API key scheme's header, as it is as a header parameter: when the instance is stored; when an
instance stored before these rules (or never stored) is loaded, which is then not offered and
sends nothing; and by ``expediter http import``. Each time against a real server on 127.0.0.1
that records what it receives."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from conftest import Run, instance
from expediter_http import request
from servers import TestServer

from expediter.core.instances.keys import generate_key
from expediter.errors import ConfigError

SECRET = "plain-SECRET-7777"
ECHO = {"name": "echo", "method": "GET", "path": "/echo"}
#: Header names that carry a credential (``is_secret_name`` says so).
CREDENTIAL_HEADERS = ["Authorization", "X-Api-Key", "X-Auth-Token", "Api-Key", "X-Session-Token"]
#: Headers a request frames or routes itself, as the issue found them sent.
FRAMING = [
    "Host",
    "Transfer-Encoding",
    "Connection",
    "Cookie",
    "Expect",
    "Upgrade",
    "Content-Length",
    "Keep-Alive",
    "TE",
    "Trailer",
    "Proxy-Connection",
    "Proxy-Authorization",
]


@pytest.fixture
def host(http_host: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A recording host with a master key that may reach 127.0.0.1."""
    monkeypatch.setenv("EXPEDITER_SECRET_KEYS", generate_key())
    return http_host(record_calls=True)


def stored_config(server: TestServer, **extra: Any) -> dict[str, Any]:
    return {"base_url": server.url, "actions": [ECHO], **extra}


def assert_hidden(*texts: Any) -> None:
    for text in texts:
        shown = text if isinstance(text, str) else json.dumps(text, default=str)
        assert SECRET not in shown


def assert_refused_call(host: Any, event: Any, server: TestServer, *names: str) -> None:
    """The call is an error naming the header(s), its event and ledger row show no secret,
    and nothing reached the server."""
    assert event.status == "error", event
    for name in names:
        assert name in (event.error or ""), event.error
    assert not server.received, server.received
    row = host.ledger.get(event.key)
    assert row is not None
    assert_hidden(event.result, event.content, event.error, row.to_dict())


def assert_not_offered(host: Any, tool_instance: Any, server: TestServer, *names: str) -> None:
    """The instance is not offered to the model: the toolset's error names the header(s)
    without its value, and nothing reached the server."""
    toolset = host.toolset(instances=[tool_instance])
    assert toolset.name_map.name_for("http", "echo") is None
    (error,) = toolset.errors
    for name in names:
        assert name in error, error
    assert_hidden(error, toolset.schemas("openai"))
    assert not server.received, server.received


# --- credentials in the plain headers --------------------------------------------------------


@pytest.mark.parametrize("name", CREDENTIAL_HEADERS)
def test_a_credential_header_in_plain_headers_is_refused_when_stored(server, host, name):
    config = stored_config(server, headers={name: SECRET, "X-Client": "tests"})
    with pytest.raises(ConfigError) as refused:
        host.instances.add("http", name="api", config=config)
    message = str(refused.value)
    assert repr(name) in message
    assert "'secret_headers'" in message
    assert SECRET not in message
    assert host.instances.list() == []


def test_a_credential_header_cannot_be_added_by_an_update(server, host):
    record = host.instances.add("http", name="api", config=stored_config(server))
    with pytest.raises(ConfigError, match="'secret_headers'"):
        host.instances.update(record.id, config={"headers": {"Authorization": SECRET}})
    assert "headers" not in host.instances.get(record.id).config


def test_the_same_header_as_a_secret_header_is_sealed_and_sent(server, host):
    config = stored_config(server, secret_headers={"Authorization": SECRET})
    record = host.instances.add("http", name="api", config=config)
    assert record.config.get("secret_headers") is None
    assert record.secret_fields == ("secret_headers",)
    event = host.call(record.id, "echo", {})
    assert event.status == "completed", event
    (received,) = server.received
    assert received.header("Authorization") == SECRET
    assert_hidden(event.result, event.content, host.ledger.get(event.key).to_dict())


@pytest.mark.parametrize("name", ["Authorization", "X-Api-Key"])
def test_an_instance_given_a_plain_credential_header_is_not_offered(server, host, name):
    """An instance an application builds itself (no store on the way) takes the same rule
    when it is loaded: the echo server would otherwise hand the credential to the model."""
    tool_instance = instance(server.url, headers={name: SECRET})
    assert_not_offered(host, tool_instance, server, name, "secret_headers")


def test_instances_add_refuses_a_plain_credential_header_and_ls_never_shows_it(
    run: Run, server: TestServer
) -> None:
    config = json.dumps(stored_config(server, headers={"Authorization": f"Bearer {SECRET}"}))
    added = run("instances", "add", "http", "--name", "api", "--config", config)
    assert added.exit_code == 1, added.output  # as any configuration the tool refuses
    assert "'Authorization'" in added.stderr
    assert "'secret_headers'" in added.stderr
    assert SECRET not in added.output
    listed = run("instances", "ls", "--json")
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.stdout) == []
    # Where the message points, the credential is sealed and listed as stars.
    config = json.dumps(stored_config(server, secret_headers={"Authorization": f"Bearer {SECRET}"}))
    added = run("instances", "add", "http", "--name", "api", "--config", config)
    assert added.exit_code == 0, added.output
    listed = run("instances", "ls", "--json")
    (record,) = json.loads(listed.stdout)
    assert record["config"]["secret_headers"] == "***"
    assert SECRET not in listed.stdout


# --- headers the request frames or routes itself ---------------------------------------------


def test_the_refused_header_names_are_the_header_parameters_ones() -> None:
    """One list: the header parameters' refusal is the configuration's."""
    assert {name.lower() for name in FRAMING} == set(request.FORBIDDEN_HEADERS)


@pytest.mark.parametrize("field", ["headers", "secret_headers"])
@pytest.mark.parametrize("name", FRAMING)
def test_a_framing_header_is_refused_when_stored(server, host, field, name):
    config = stored_config(server, **{field: {name: "evil.example"}})
    with pytest.raises(ConfigError) as refused:
        host.instances.add("http", name="api", config=config)
    assert repr(name) in str(refused.value)
    assert "evil.example" not in str(refused.value)
    assert host.instances.list() == []


@pytest.mark.parametrize("field", ["headers", "secret_headers"])
@pytest.mark.parametrize("name", ["Host", "transfer-encoding", "Connection", "Expect", "Upgrade"])
def test_a_framing_header_given_to_an_instance_is_never_sent(server, host, field, name):
    values = {"host": "internal.example", "transfer-encoding": "chunked", "expect": "100-continue"}
    headers = {name: values.get(name.lower(), "close" if name == "Connection" else "h2c")}
    assert_not_offered(host, instance(server.url, **{field: headers}), server, name)


@pytest.mark.parametrize("name", ["Host", "Cookie", "Transfer-Encoding", "Proxy-Authorization"])
def test_an_api_key_scheme_may_not_name_a_framing_header(server, host, name):
    security = [{"name": "key", "type": "api_key", "in": "header", "parameter": name}]
    tool_instance = instance(server.url, security=security, credentials={"key": "evil.example"})
    assert_not_offered(host, tool_instance, server, name, "security scheme 'key'")


def test_a_cookie_header_is_refused_pointing_at_a_cookie_scheme(server, host):
    """Cookie is both a credential and a header the request folds itself (cookie parameters
    and cookie API keys join one ``Cookie``): it is refused in every header field, and the
    message says how to send one."""
    config = stored_config(server, secret_headers={"Cookie": f"sid={SECRET}"})
    with pytest.raises(ConfigError) as refused:
        host.instances.add("http", name="api", config=config)
    assert "'Cookie'" in str(refused.value)
    tool_instance = instance(server.url, secret_headers={"Cookie": f"sid={SECRET}"})
    assert_not_offered(host, tool_instance, server, "Cookie", '"in": "cookie"')


LEGACY = [
    ({"headers": {"X-Api-Key": SECRET}}, ["X-Api-Key", "secret_headers"]),
    ({"headers": {"Host": "internal.example"}}, ["Host"]),
    (
        {
            "security": [{"name": "k", "type": "api_key", "in": "header", "parameter": "Host"}],
            "credentials": {"k": SECRET},
        },
        ["Host", "security scheme 'k'"],
    ),
]


@pytest.mark.parametrize(("legacy", "names"), LEGACY, ids=["credential", "host", "scheme"])
def test_an_instance_stored_before_the_rules_is_refused_when_called(server, host, legacy, names):
    """A row written before these checks existed (its configuration edited in the database
    here) is refused when it is called: the error names the header, the event and the ledger
    show no credential, nothing is sent, and the user's toolset does not offer it."""
    secret = {key: value for key, value in legacy.items() if key == "credentials"}
    record = host.instances.add("http", name="api", config=stored_config(server, **secret))
    plain = {key: value for key, value in legacy.items() if key not in secret}
    url = host.config.database_url or f"sqlite:///{host.config.home / 'expediter.db'}"
    with sqlite3.connect(Path(url.removeprefix("sqlite:///"))) as connection:
        connection.execute(
            "UPDATE tool_instances SET config = ?, revision = revision + 1 WHERE id = ?",
            (json.dumps(stored_config(server, **plain)), record.id),
        )
    event = host.call(record.id, "echo", {})
    assert_refused_call(host, event, server, *names)
    toolset = host.toolset()
    assert toolset.name_map.name_for(record.id, "echo") is None
    assert any(names[0] in error for error in toolset.errors), toolset.errors
    assert_hidden(toolset.errors)
    assert not server.received


# --- expediter http import -------------------------------------------------------------------

HOSTILE = {
    "openapi": "3.0.3",
    "info": {"title": "Hostile", "version": "1"},
    "servers": [{"url": "https://api.example.com"}],
    "components": {
        "securitySchemes": {
            "host_key": {"type": "apiKey", "in": "header", "name": "Host"},
            "cookie_key": {"type": "apiKey", "in": "header", "name": "Cookie"},
            "chunked": {"type": "apiKey", "in": "header", "name": "Transfer-Encoding"},
            "good_key": {"type": "apiKey", "in": "header", "name": "X-Api-Key"},
        }
    },
    "security": [{"host_key": []}, {"cookie_key": []}, {"chunked": []}, {"good_key": []}],
    "paths": {
        "/things": {
            "get": {
                "operationId": "listThings",
                "parameters": [
                    {"name": "Connection", "in": "header", "schema": {"type": "string"}},
                    {"name": "Upgrade", "in": "header", "schema": {"type": "string"}},
                    {"name": "X-Trace", "in": "header", "schema": {"type": "string"}},
                ],
                "responses": {"200": {"description": "ok"}},
            }
        }
    },
}


def test_http_import_warns_about_and_leaves_out_framing_headers(run: Run, tmp_path: Path) -> None:
    spec = tmp_path / "hostile.json"
    spec.write_text(json.dumps(HOSTILE))
    result = run("http", "import", str(spec), "--name", "hostile", "--json")
    assert result.exit_code == 0, result.output
    warnings = result.stderr
    for name in ("Host", "Cookie", "Transfer-Encoding", "Connection", "Upgrade"):
        assert f"'{name}'" in warnings, warnings
    assert warnings.count("warning: ") >= 5
    config = json.loads(run("instances", "ls", "--json").stdout)[0]["config"]
    assert config["security"] == [
        {"name": "good_key", "type": "api_key", "in": "header", "parameter": "X-Api-Key"}
    ]
    (action,) = config["actions"]
    assert [parameter["name"] for parameter in action["parameters"]] == ["X-Trace"]
    assert action["security"] == ["good_key"]


def test_http_import_refuses_a_secret_for_a_refused_scheme(run: Run, tmp_path: Path) -> None:
    spec = tmp_path / "hostile.json"
    spec.write_text(json.dumps(HOSTILE))
    result = run("http", "import", str(spec), "--name", "hostile", "--secret", f"host_key={SECRET}")
    assert result.exit_code == 2, result.output
    assert "no security scheme 'host_key'" in result.stderr
    assert SECRET not in result.output
    assert json.loads(run("instances", "ls", "--json").stdout) == []
