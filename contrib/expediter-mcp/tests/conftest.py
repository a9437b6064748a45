"""Fixtures of the pack's tests. Every test runs inside expediter's loopback-only test net
(``loopback_only``): a connection to anything but loopback, or a real DNS lookup, is refused at
the socket and fails the test, even when the guard under test is wrong."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from servers import McpServer, build_server

import expediter

TOKENS = {"token-ann": "ann", "token-bob": "bob"}


@pytest.fixture(autouse=True)
def _loopback_net(loopback_only: Any) -> Any:
    return loopback_only


@pytest.fixture(scope="session")
def http_server() -> Iterator[McpServer]:
    """A fastmcp server over streamable HTTP on 127.0.0.1, no auth (shared by the session)."""
    running = McpServer(build_server())
    yield running
    running.close()


@pytest.fixture(scope="session")
def token_server() -> Iterator[McpServer]:
    """A fastmcp server over streamable HTTP that wants a bearer token (``TOKENS``)."""
    running = McpServer(build_server(TOKENS))
    yield running
    running.close()


@pytest.fixture(scope="session")
def sse_server() -> Iterator[McpServer]:
    """A fastmcp server over SSE that wants a bearer token (``TOKENS``)."""
    running = McpServer(build_server(TOKENS), transport="sse")
    yield running
    running.close()


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[expediter.Host]:
    """A host with a SQLite ledger and a key, offering the pack's tools (installed as a
    distribution) and no other pack."""
    from expediter.core.instances.keys import generate_key

    monkeypatch.setenv("EXPEDITER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("EXPEDITER_SECRET_KEYS", generate_key())
    monkeypatch.setenv("EXPEDITER_LOAD_PLUGINS", "mcp")
    made = expediter.Host(database_url=f"sqlite:///{tmp_path / 'ledger.db'}")
    yield made
    made.close()


@pytest.fixture
def add_instance(host: expediter.Host) -> Callable[..., Any]:
    """Store an ``mcp`` instance (as the operator, so ``allow_networks`` may be set)."""

    def add(url: str, name: str = "srv", user_id: str | None = None, **config: Any) -> Any:
        config.setdefault("allow_networks", ["127.0.0.0/8"])
        return host.instances.add(
            "mcp", name=name, config={"url": url, **config}, user_id=user_id, operator=True
        )

    return add
