"""Fixtures of the pack's tests. Every test runs inside expediter's loopback-only test net
(``loopback_only``): a connection to anything but loopback, or a real DNS lookup, is refused at
the socket and fails the test, even when the guard under test is wrong."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from expediter_http.tool import HttpTool
from servers import TestServer

import expediter
from expediter.cli import cli
from expediter.core.instances.keys import generate_key
from expediter.core.netguard import Resolver
from expediter.testing.network import StaticLookup


@pytest.fixture(autouse=True)
def _loopback_net(loopback_only: Any) -> Any:
    return loopback_only


@pytest.fixture
def server() -> Iterator[TestServer]:
    """A plain HTTP server on 127.0.0.1."""
    running = TestServer("127.0.0.1")
    yield running
    running.close()


@pytest.fixture(scope="session")
def test_ca() -> Any:
    import trustme

    return trustme.CA()


@pytest.fixture
def ca_file(test_ca: Any, tmp_path: Path) -> Path:
    """The test CA's certificate as a PEM file (the instance's ``ca_file``)."""
    path = tmp_path / "test-ca.pem"
    test_ca.cert_pem.write_to_path(str(path))
    return path


@pytest.fixture
def tls_server(test_ca: Any) -> Iterator[TestServer]:
    """An HTTPS server on 127.0.0.1 whose certificate (from ``test_ca``) names ``api.test``,
    ``localhost`` and 127.0.0.1; it records the SNI each connection asked for."""
    import ssl

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    test_ca.issue_cert("api.test", "localhost", "127.0.0.1").configure_cert(context)
    running = TestServer("127.0.0.1", tls=context)
    yield running
    running.close()


def tool_with(lookup: StaticLookup | dict[str, Any] | None = None, network: Any = None) -> type:
    """An ``http`` tool class whose names resolve only through ``lookup`` (a fresh cache)
    and that dials through ``network`` (None: the real backend)."""
    if isinstance(lookup, dict):
        lookup = StaticLookup(lookup)
    attributes: dict[str, Any] = {"__module__": __name__, "name": "http", "network": network}
    attributes["resolver"] = Resolver(lookup or StaticLookup({}))
    return type("TestHttpTool", (HttpTool,), attributes)


def instance(base_url: str, *actions: dict[str, Any], **config: Any) -> Any:
    """An in-memory ``http`` instance (``ToolInstance``) with these actions (default: one
    ``echo`` action, GET /echo)."""
    listed = list(actions) or [{"name": "echo", "method": "GET", "path": "/echo"}]
    return expediter.ToolInstance(
        tool="http", name="api", config={"base_url": base_url, "actions": listed, **config}
    )


def model_response(name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    """An OpenAI Chat response with one call of function ``name``."""
    function = {"name": name, "arguments": json.dumps(arguments or {})}
    message = {
        "role": "assistant",
        "tool_calls": [{"id": "c1", "type": "function", "function": function}],
    }
    return {"choices": [{"message": message}]}


def run_one(
    toolset: Any, instance_id: str, action: str, arguments: dict[str, Any] | None = None
) -> Any:
    """One model call of ``action`` of ``instance_id`` through the toolset; its final event."""
    name = toolset.name_map.name_for(instance_id, action)
    assert name is not None, f"{action} of {instance_id} not offered: {toolset.name_map.names}"
    (event,) = toolset.run(toolset.parse_calls("openai", model_response(name, arguments)))
    return event


def call(
    host: Any, tool_instance: Any, action: str, arguments: dict[str, Any] | None = None
) -> Any:
    """Run one action of an in-memory instance through the host's one pipeline (a turn with
    one call, as a model would make it); returns the final event."""
    toolset = host.toolset(instances=[tool_instance])
    return run_one(toolset, tool_instance.instance_id or "http", action, arguments)


@pytest.fixture
def http_host(make_host: Callable[..., Any], monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    """``http_host(allow="127.0.0.0/8", lookup=None, network=None, record_calls=False)``: a
    host offering only an ``http`` tool with an injected resolver; ``allow`` is the operator's
    ``EXPEDITER_EGRESS_ALLOW`` (None: nothing but public addresses)."""

    def make(
        allow: str | None = "127.0.0.0/8",
        lookup: StaticLookup | dict[str, Any] | None = None,
        network: Any = None,
        **options: Any,
    ) -> Any:
        if allow is None:
            monkeypatch.delenv("EXPEDITER_EGRESS_ALLOW", raising=False)
        else:
            monkeypatch.setenv("EXPEDITER_EGRESS_ALLOW", allow)
        return make_host(tool_with(lookup, network), **options)

    return make


#: ``run(*args, input=None)``: the result of ``expediter ARGS...``.
Run = Callable[..., Result]


@pytest.fixture
def run(expediter_home: Path, monkeypatch: pytest.MonkeyPatch) -> Run:
    """Run ``expediter ARGS...`` with a fresh home and master key; no traceback allowed."""
    monkeypatch.setenv("EXPEDITER_SECRET_KEYS", generate_key())

    def invoke(*args: str, input: str | None = None) -> Result:
        result = CliRunner().invoke(cli, list(args), input=input)
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            result.exception
        )
        assert "Traceback" not in result.output
        return result

    return invoke
